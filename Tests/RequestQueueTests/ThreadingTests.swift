import CRequestQueueAPI
import Foundation
import Glibc
import RequestQueue
import Testing

/// Delivery modes, calls from inside callbacks, racing threads and freeing a busy queue.
@Suite struct ThreadingTests {
    let fixture = Fixture.shared

    static func readable(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    @Test func threadedCallbacksRunOneAtATimeOffTheCallingThread() throws {
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let inside = Locked(0)
        let maxInside = Locked(0)
        rec.onCompletion = { _, _ in
            inside.mutate { $0 += 1 }
            maxInside.mutate { $0 = max($0, inside.value) }
            Thread.sleep(forTimeInterval: 0.005)
            inside.mutate { $0 -= 1 }
        }
        for i in 0..<30 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=10&id=\(i)"), tag: "\(i)")) }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completions.count == 30)
        #expect(maxInside.value == 1)
        let me = UInt(bitPattern: Int(pthread_self()))
        #expect(rec.completions.allSatisfy { $0.thread != me })
        var fd: Int32 = 0
        #expect(rq_queue_get_fd(q, &fd) == RQ_ERR_WRONG_DELIVERY)
        #expect(rq_queue_dispatch(q, 0, nil) == RQ_ERR_WRONG_DELIVERY)
    }

    @Test func dispatchModeRunsCallbacksOnTheCallingThreadWhenAsked() throws {
        let q = try makeQueue(RQ_DELIVERY_DISPATCH, max: 4)
        defer { _ = rq_queue_free(q) }
        var fd: Int32 = -1
        #expect(rq_queue_get_fd(q, &fd) == RQ_OK && fd >= 0)
        #expect(!Self.readable(fd))
        let rec = Recorder()
        for i in 0..<8 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=100&id=\(i)"), tag: "\(i)", progress: true)) }
        var ran = 0
        let me = UInt(bitPattern: Int(pthread_self()))
        let deadline = Date().addingTimeInterval(10)
        while rec.completions.count < 8, Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 1000) == 1 {
                var n = 0
                #expect(rq_queue_dispatch(q, 0, &n) == RQ_OK)
                #expect(n > 0)
                ran += n
                // Everything pending was run: the descriptor is no longer readable.
                #expect(!Self.readable(fd) || rec.completions.count < 8)
            }
        }
        #expect(rec.completions.count == 8)
        #expect(rec.completions.allSatisfy { $0.thread == me })
        #expect(ran >= 8)
        var n = 0
        #expect(rq_queue_dispatch(q, 0, &n) == RQ_OK && n == 0)
        #expect(!Self.readable(fd))
    }

    @Test func nothingIsDeliveredUntilDispatched() throws {
        let q = try makeQueue(RQ_DELIVERY_DISPATCH)
        defer { _ = rq_queue_free(q) }
        var fd: Int32 = -1
        _ = rq_queue_get_fd(q, &fd)
        let rec = Recorder()
        for i in 0..<3 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&id=\(i)"), tag: "\(i)")) }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 5000) == 1)
        // The request is done, the descriptor says so, but no callback ran on its own.
        let deadline = Date().addingTimeInterval(5)
        while count(q) > 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(count(q) == 0)
        #expect(rec.completions.isEmpty)
        var n = 0
        #expect(rq_queue_dispatch(q, 1, &n) == RQ_OK && n == 1)
        #expect(rec.completions.count == 1)
        #expect(Self.readable(fd))
        #expect(rq_queue_dispatch(q, 0, &n) == RQ_OK && n == 2)
        #expect(!Self.readable(fd))
        #expect(rec.completions.map(\.tag).sorted() == ["0", "1", "2"])
    }

    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func callbacksMayCallTheAPI(delivery: rq_delivery) throws {
        let g = uniqueGroup() + "-\(delivery.rawValue)"
        let q = try makeQueue(delivery, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let results = Locked<[String: rq_result]>([:])
        let fixture = self.fixture
        rec.onCompletion = { c, request in
            guard c.tag == "first" else { return }
            var r: OpaquePointer?
            _ = rq_request_new(fixture.url("/bytes?n=2&group=\(g)&id=followup"), &r)
            var s = RQ_STATE_NEW
            let state = rq_request_get_state(request, &s)
            let added = rq_add(q, rec.attach(r, tag: "followup"))
            _ = rq_request_free(r)
            results.mutate {
                $0["state"] = state == RQ_OK && s == RQ_STATE_COMPLETED ? RQ_OK : RQ_ERR_INVALID_STATE
                $0["add"] = added
                $0["suspend"] = rq_queue_suspend(q)
                $0["resume"] = rq_queue_resume(q)
                $0["limit"] = rq_queue_set_max_concurrent(q, 3)
                $0["free"] = rq_queue_free(q)
                $0["wait"] = rq_queue_wait_idle(q, 1)
                $0["dispatch"] = rq_queue_dispatch(q, 0, nil)
            }
        }
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=first"), tag: "first"))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        let r = results.value
        #expect(r["state"] == RQ_OK)
        #expect(r["add"] == RQ_OK)
        #expect(r["suspend"] == RQ_OK && r["resume"] == RQ_OK && r["limit"] == RQ_OK)
        #expect(r["free"] == RQ_ERR_WOULD_DEADLOCK)
        #expect(r["wait"] == RQ_ERR_WOULD_DEADLOCK)
        #expect(r["dispatch"] == (delivery == RQ_DELIVERY_DISPATCH ? RQ_ERR_WOULD_DEADLOCK : RQ_ERR_WRONG_DELIVERY))
        #expect(rec.completion("followup")?.outcome == RQ_OUTCOME_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["first", "followup"])
        var max = 0
        _ = rq_queue_get_max_concurrent(q, &max)
        #expect(max == 3)
    }

    @Test func everyAcceptedRequestCompletesExactlyOnceUnderRacingCancels() throws {
        let q = try makeQueue(max: 6)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let total = 400
        var handles: [OpaquePointer?] = []
        for i in 0..<total {
            let path = i % 3 == 0 ? "/delay?s=0.01&id=\(i)" : "/bytes?n=\(i)&id=\(i)"
            let r = try rec.request(fixture.url(path), tag: "\(i)")
            handles.append(r)
        }
        let okCancels = Locked(0)
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        let shared = handles.map(Handle.init)
        let queue = Handle(q)
        for t in 0..<4 {
            DispatchQueue.global().async(group: group) {
                start.wait()
                var rng = SystemRandomNumberGenerator()
                for _ in 0..<300 {
                    let r = shared[Int.random(in: 0..<total, using: &rng)].pointer
                    if rq_cancel(r) == RQ_OK { okCancels.mutate { $0 += 1 } }
                    if t == 0, Int.random(in: 0..<50, using: &rng) == 0 { _ = rq_queue_set_max_concurrent(queue.pointer, Int.random(in: 1...8, using: &rng)) }
                }
            }
        }
        for _ in 0..<4 { start.signal() }
        for r in handles { #expect(rq_add(q, r) == RQ_OK) }
        group.wait()
        _ = rq_queue_set_max_concurrent(q, 8)
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        let completions = rec.completions
        #expect(completions.count == total)
        #expect(Set(completions.map(\.tag)).count == total)
        #expect(completions.filter { $0.outcome == RQ_OUTCOME_CANCELLED }.count == okCancels.value)
        #expect(completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK || $0.outcome == RQ_OUTCOME_CANCELLED })
        #expect(Set(rec.finalizedTags).count == total && rec.finalizedTags.count == total)
        for r in handles { #expect(rq_request_free(r) == RQ_OK) }
    }

    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func freeWithRequestsInFlightDeliversEverythingBeforeReturning(delivery: rq_delivery) throws {
        var q: OpaquePointer?
        try #require(rq_queue_new(delivery, &q) == RQ_OK)
        _ = rq_queue_set_max_concurrent(q, 3)
        let rec = Recorder()
        var handles: [OpaquePointer?] = []
        for i in 0..<10 {
            let r = try rec.request(fixture.url("/delay?s=5&id=\(i)"), tag: "\(i)", progress: true)
            _ = rq_add(q, r)
            handles.append(r)
        }
        Thread.sleep(forTimeInterval: 0.2)
        let me = UInt(bitPattern: Int(pthread_self()))
        #expect(rq_queue_free(q) == RQ_OK)
        let atReturn = rec.completions
        #expect(atReturn.count == 10)
        #expect(atReturn.allSatisfy { $0.outcome == RQ_OUTCOME_CANCELLED && $0.message == "the queue was freed" })
        #expect(rec.finalizedTags.count == 10)
        if delivery == RQ_DELIVERY_DISPATCH { #expect(atReturn.allSatisfy { $0.thread == me }) }
        // No callback after it returned.
        let progressAtReturn = rec.progress.count
        Thread.sleep(forTimeInterval: 0.3)
        #expect(rec.completions.count == 10 && rec.progress.count == progressAtReturn)
        // The freed queue and its requests' handles are detected, not dereferenced.
        #expect(rq_queue_free(q) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_queue_count(q, nil) == RQ_ERR_INVALID_HANDLE)
        for r in handles {
            #expect(rq_cancel(r) == RQ_ERR_NOT_ACTIVE)
            #expect(rq_request_free(r) == RQ_OK)
            #expect(rq_request_free(r) == RQ_ERR_INVALID_HANDLE)
        }
    }

    @Test func waitIdleTimesOutWhileBusy() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=1"), tag: "slow"))
        #expect(rq_queue_wait_idle(q, 0.1) == RQ_ERR_TIMED_OUT)
        #expect(rq_queue_wait_idle(q, -1) == RQ_OK)
        #expect(rec.completions.count == 1)
    }
}

