import CRequestQueueAPI
import Foundation
import Glibc
import RequestQueue
import Testing

/// RQ_DELIVERY_INLINE: callbacks on the queue's engine thread ("rq-engine"), inside its loop.
@Suite struct InlineTests {
    let fixture = Fixture.shared

    /// The name of the calling thread (the library names its engine threads "rq-engine" and its
    /// delivery threads "rq-delivery").
    static func threadName() -> String {
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return name.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static var me: UInt { UInt(bitPattern: Int(pthread_self())) }

    @Test func callbacksRunOnTheEngineThreadOfTheirQueue() throws {
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 4)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let names = Locked<Set<String>>([])
        rec.onCompletion = { _, _ in names.mutate { $0.insert(InlineTests.threadName()) } }
        for i in 0..<12 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=100&id=\(i)"), tag: "\(i)", progress: true)) }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completions.count == 12)
        #expect(names.value == ["rq-engine"])
        #expect(Set(rec.completions.map(\.thread)).count == 1)
        #expect(rec.completions.allSatisfy { $0.thread != Self.me })
        #expect(!rec.progress.isEmpty)
        // No descriptor, nothing to dispatch.
        var fd: Int32 = 0
        #expect(rq_queue_get_fd(q, &fd) == RQ_ERR_WRONG_DELIVERY)
        #expect(String(cString: rq_last_error_message()).contains("RQ_DELIVERY_INLINE"))
        #expect(rq_queue_dispatch(q, 0, nil) == RQ_ERR_WRONG_DELIVERY)
    }

    /// The shape of libcurl's own examples: each completion adds the next request, at
    /// max_concurrent 1. Every request completes once, in order, on the one engine thread.
    @Test func aRefillChainCompletesInOrder() throws {
        let g = uniqueGroup()
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let n = 40
        let queue = Handle(q)
        let url = fixture.url("/bytes?n=10&group=\(g)")
        rec.onCompletion = { c, _ in
            guard let i = Int(c.tag), i + 1 < n else { return }
            // Nothing but this callback can add: a failed add would leave the chain short.
            if let next = try? rec.request(url + "&id=\(i + 1)", tag: "\(i + 1)") {
                #expect(addAndRelease(queue.pointer, next) == RQ_OK)
            }
        }
        _ = addAndRelease(q, try rec.request(url + "&id=0", tag: "0"))
        #expect(rec.waitForCompletions(n, timeout: 30))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        let done = rec.completions
        #expect(done.map(\.tag) == (0..<n).map(String.init))
        #expect(done.allSatisfy { $0.outcome == RQ_OUTCOME_OK && $0.status == 200 })
        #expect(Set(done.map(\.thread)).count == 1)
        #expect(done.allSatisfy { $0.thread != Self.me })
        #expect(rec.finalizedTags == (0..<n).map(String.init))
        #expect(fixture.log(group: g).entries.map(\.id) == (0..<n).map { String($0) })
    }

    /// Calls that would wait for the engine from its own thread are refused; calls on another
    /// queue are not.
    @Test func callsThatWouldWaitForTheEngineAreRefusedInsideItsCallbacks() throws {
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let other = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(other) }
        let otherRec = Recorder()
        _ = addAndRelease(other, try otherRec.request(fixture.url("/bytes?n=5&id=other"), tag: "other"))
        let queue = Handle(q), otherQueue = Handle(other)
        let results = Locked<[String: rq_result]>([:])
        let rec = Recorder()
        rec.onCompletion = { _, _ in
            var fd: Int32 = 0
            let found: [String: rq_result] = [
                "free": rq_queue_free(queue.pointer),
                "wait_idle": rq_queue_wait_idle(queue.pointer, 0),
                "dispatch": rq_queue_dispatch(queue.pointer, 0, nil),
                "get_fd": rq_queue_get_fd(queue.pointer, &fd),
                // Another queue's engine goes on by itself: waiting for it works.
                "other_wait_idle": rq_queue_wait_idle(otherQueue.pointer, 20),
                "set_max": rq_queue_set_max_concurrent(queue.pointer, 3),
                "suspend": rq_queue_suspend(queue.pointer),
                "resume": rq_queue_resume(queue.pointer),
            ]
            results.mutate { $0 = found }
        }
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=5&id=self"), tag: "self"))
        #expect(rec.waitForCompletions(1))
        let found = results.value
        #expect(found["free"] == RQ_ERR_WOULD_DEADLOCK)
        #expect(found["wait_idle"] == RQ_ERR_WOULD_DEADLOCK)
        #expect(found["dispatch"] == RQ_ERR_WRONG_DELIVERY)
        #expect(found["get_fd"] == RQ_ERR_WRONG_DELIVERY)
        #expect(found["other_wait_idle"] == RQ_OK)
        #expect(otherRec.completions.count == 1)
        #expect(found["set_max"] == RQ_OK && found["suspend"] == RQ_OK && found["resume"] == RQ_OK)
        var max = 0
        #expect(rq_queue_get_max_concurrent(q, &max) == RQ_OK && max == 3)
    }

    /// A completion produced by another thread (a cancel of a waiting request) reaches the engine,
    /// which otherwise waits on its running transfer (or, with nothing running, for an hour).
    @Test func aCancelFromAnotherThreadIsDelivered() throws {
        let g = uniqueGroup()
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/hold?key=\(g)&n=2&group=\(g)&id=held"), tag: "held"))
        let waiting = try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=waiting"), tag: "waiting")
        #expect(rq_add(q, waiting) == RQ_OK)
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_cancel(waiting) == RQ_OK)
        #expect(rec.waitForCompletions(1))
        #expect(rec.completions.map(\.tag) == ["waiting"])
        #expect(rec.completion("waiting")?.outcome == RQ_OUTCOME_CANCELLED)
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("held")?.outcome == RQ_OUTCOME_OK)
        rq_request_free(waiting)

        // An idle, suspended queue: nothing runs, the engine sleeps.
        #expect(rq_queue_suspend(q) == RQ_OK)
        let parked = try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=parked"), tag: "parked")
        #expect(rq_add(q, parked) == RQ_OK)
        #expect(rq_cancel(parked) == RQ_OK)
        #expect(rec.waitForCompletions(3))
        #expect(rec.completion("parked")?.outcome == RQ_OUTCOME_CANCELLED)
        rq_request_free(parked)
    }

    /// rq_queue_free from another thread, with requests running and waiting: each gets exactly
    /// one completion, on the engine thread, before the free returns; none after.
    @Test func freeFromAnotherThreadCompletesEveryRequestOnce() throws {
        let g = uniqueGroup()
        var q: OpaquePointer?
        #expect(rq_queue_new(RQ_DELIVERY_INLINE, &q) == RQ_OK)
        #expect(rq_queue_set_max_concurrent(q, 2) == RQ_OK)
        let rec = Recorder()
        let names = Locked<Set<String>>([])
        rec.onCompletion = { _, _ in names.mutate { $0.insert(InlineTests.threadName()) } }
        for i in 0..<6 {
            _ = addAndRelease(q, try rec.request(fixture.url("/hold?key=\(g)&n=2&group=\(g)&id=\(i)"), tag: "\(i)", progress: true))
        }
        fixture.waitForLog(group: g) { $0.entries.count == 2 }
        #expect(rq_queue_free(q) == RQ_OK)
        let atReturn = rec.completions
        #expect(atReturn.count == 6)
        #expect(Set(atReturn.map(\.tag)) == Set((0..<6).map(String.init)))
        #expect(atReturn.allSatisfy { $0.outcome == RQ_OUTCOME_CANCELLED && $0.message == "the queue was freed" })
        #expect(rec.finalizedTags.count == 6)
        #expect(names.value == ["rq-engine"])
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rec.completions.count == 6)
        #expect(rq_queue_free(q) == RQ_ERR_INVALID_HANDLE)
    }

    /// wait_idle from another thread returns once every callback ran.
    @Test func waitIdleFromAnotherThreadSeesEveryCallback() throws {
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 3)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for i in 0..<9 { _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.01&id=\(i)"), tag: "\(i)")) }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completions.count == 9)
        #expect(rec.finalizedTags.count == 9)
        #expect(count(q) == 0)
    }

    @Test func modesBeyondInlineAreRefused() {
        var q: OpaquePointer?
        #expect(rq_queue_new(rq_delivery(rawValue: 3), &q) == RQ_ERR_INVALID_ARGUMENT)
        #expect(q == nil)
        #expect(String(cString: rq_last_error_message()).hasPrefix("rq_queue_new"))
    }
}
