import CRequestQueueAPI
import Foundation
import Glibc
import Synchronization
@testable import RequestQueue
import Testing

/// The spin before a blocking wait (SpinningWait, Engine.waitForWork): a post is never lost,
/// whenever it lands: before the spin, during it, just as it gives up, or once the waiter blocks.
@Suite struct WakeupTests {
    let fixture = Fixture.shared

    /// Busy-waits `microseconds` (a sleep would give the other thread the processor).
    static func busyWait(_ microseconds: Int) {
        let until = Clock.now() + Double(microseconds) / 1e6
        while Clock.now() < until {}
    }

    /// Delays around a spin bound of 20 us: before it, at it, after it, and long enough for the
    /// waiter to stop spinning for a while (the skips after misses).
    static let delays = [0, 3, 10, 17, 19, 20, 21, 23, 30, 60, 0, 200, 18, 22, 0, 1000]

    @Test func aSpinningWaiterTakesEveryPostWhenItComes() throws {
        let rounds = 3000
        let work = Wakeup()
        let taken = Atomic<Int>(0), lost = Atomic<Int>(0)
        let waiter = Thread {
            var spin = SpinningWait(seconds: 20e-6)
            for round in 0..<rounds {
                // A post lost by the spin would leave this wait to its limit. Most rounds spin
                // every time (the spin itself); the others as the engine does (skips after misses).
                let spun = round % 4 == 3 ? spin.spin(work) : work.spin(seconds: 20e-6)
                if !spun, !work.wait(milliseconds: 2_000) { lost.add(1, ordering: .relaxed) }
                taken.add(1, ordering: .releasing)
            }
        }
        waiter.start()
        for round in 0..<rounds {
            // The waiter took the last post and spins again within a microsecond or so: the delay
            // puts this post at a known distance from the start of its spin.
            let until = Date().addingTimeInterval(30)
            while taken.load(ordering: .acquiring) < round, Date() < until {}
            Self.busyWait(Self.delays[round % Self.delays.count])
            work.post()
        }
        let until = Date().addingTimeInterval(30)
        while taken.load(ordering: .acquiring) < rounds, Date() < until {}
        #expect(lost.load(ordering: .relaxed) == 0)
        #expect(taken.load(ordering: .relaxed) == rounds)
        // Each post was taken once: none is left over for a later wait.
        #expect(!work.spin(seconds: 0))
    }

    /// Refill chains at K = 1: each engine goes idle after every completion and spins for the add
    /// its callback makes, after a delay around the engine's spin bound (50 us). An add that
    /// landed as a spin gave up and was not seen would leave its chain waiting forever.
    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func refillChainsAtK1CompleteWhateverTheCallbacksDelay(delivery: rq_delivery) throws {
        let perChain = 150
        let q = try makeQueue(delivery, max: 1)
        defer { _ = rq_queue_free(q) }
        let group = uniqueGroup() + "-\(delivery.rawValue)"
        let rec = Recorder()
        let added = Locked(1)
        let delays = [0, 5, 20, 40, 48, 50, 52, 60, 100, 0, 250, 49, 51, 0, 1000]
        let fixture = self.fixture
        rec.onCompletion = { _, _ in
            var next = 0
            added.mutate { count in
                guard count < perChain else { return }
                count += 1
                next = count
            }
            guard next > 0 else { return }
            Self.busyWait(delays[next % delays.count])
            var r: OpaquePointer?
            _ = rq_request_new(fixture.url("/bytes?n=4&group=\(group)&id=\(next)"), &r)
            _ = addAndRelease(q, rec.attach(r, tag: "\(next)"))
        }
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=4&group=\(group)&id=1"), tag: "1"))
        let deadline = Date().addingTimeInterval(60)
        while rec.completions.count < perChain, Date() < deadline {
            awaitCallbacks(q, delivery)
        }
        #expect(rec.completions.count == perChain)
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK })
        #expect(fixture.log(group: group).entries.count == perChain)
    }
}
