import CRequestQueueAPI
import Foundation
import RequestQueue
import Synchronization
import Testing

/// Ordering, limits, suspension, duplicates and cancellation, observed by the server and in callbacks.
@Suite struct QueueTests {
    let fixture = Fixture.shared

    @Test func fifoWithOneSlotRunsInAddOrder() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        #expect(rq_queue_suspend(q) == RQ_OK)
        for i in 0..<6 {
            #expect(addAndRelease(q, try rec.request(fixture.url("/delay?s=0.02&group=\(g)&id=\(i)"), tag: "\(i)")) == RQ_OK)
        }
        #expect(rq_queue_resume(q) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        let log = fixture.log(group: g)
        #expect(log.entries.map(\.id) == ["0", "1", "2", "3", "4", "5"])
        #expect(rec.completions.map(\.tag) == ["0", "1", "2", "3", "4", "5"])
        #expect(log.peaks[g] == 1)
    }

    @Test func lifoWithOneSlotRunsNewestFirstWithoutPreempting() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        // The first request takes the only slot at once; LIFO never preempts it.
        #expect(addAndRelease(q, try rec.request(fixture.url("/delay?s=0.2&group=\(g)&id=0"), tag: "0")) == RQ_OK)
        #expect(rq_queue_set_order(q, RQ_ORDER_LIFO) == RQ_OK)
        var order = RQ_ORDER_FIFO
        #expect(rq_queue_get_order(q, &order) == RQ_OK && order == RQ_ORDER_LIFO)
        for i in 1...4 {
            #expect(addAndRelease(q, try rec.request(fixture.url("/delay?s=0.01&group=\(g)&id=\(i)"), tag: "\(i)")) == RQ_OK)
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["0", "4", "3", "2", "1"])
        #expect(rec.completions.map(\.tag) == ["0", "4", "3", "2", "1"])
    }

    @Test func orderChangeAffectsOnlyLaterAdds() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        for i in 0..<2 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=f\(i)"), tag: "f\(i)")) }
        _ = rq_queue_set_order(q, RQ_ORDER_LIFO)
        for i in 0..<2 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=l\(i)"), tag: "l\(i)")) }
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["l1", "l0", "f0", "f1"])
    }

    @Test(arguments: [1, 3, 5])
    func serverNeverSeesMoreThanTheLimit(limit: Int) throws {
        let g = uniqueGroup() + "-\(limit)"
        let q = try makeQueue(max: limit)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for i in 0..<(limit * 3 + 1) {
            _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.15&group=\(g)&id=\(i)"), tag: "\(i)"))
        }
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let log = fixture.log(group: g)
        #expect(log.entries.count == limit * 3 + 1)
        #expect(log.peaks[g] == limit)
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK })
    }

    @Test func zeroMeansUnlimited() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for i in 0..<24 { _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.6&group=\(g)&id=\(i)"), tag: "\(i)")) }
        #expect(count(q) == 24)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(fixture.log(group: g).peaks[g] == 24)
    }

    @Test func defaultsAreTwoFifoCancelEarlierNotSuspended() throws {
        var q: OpaquePointer?
        try #require(rq_queue_new(RQ_DELIVERY_THREADED, &q) == RQ_OK)
        defer { _ = rq_queue_free(q) }
        var max = 0, order = RQ_ORDER_LIFO, duplicates = RQ_DUPLICATES_ALLOW
        var suspended: Int32 = 1
        #expect(rq_queue_get_max_concurrent(q, &max) == RQ_OK && max == 2)
        #expect(rq_queue_get_order(q, &order) == RQ_OK && order == RQ_ORDER_FIFO)
        #expect(rq_queue_get_duplicates(q, &duplicates) == RQ_OK && duplicates == RQ_DUPLICATES_CANCEL_EARLIER)
        #expect(rq_queue_is_suspended(q, &suspended) == RQ_OK && suspended == 0)
    }

    @Test func suspendHoldsEverythingAndResumeStartsAtOnce() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        #expect(rq_queue_suspend(q) == RQ_OK)
        var suspended: Int32 = 0
        #expect(rq_queue_is_suspended(q, &suspended) == RQ_OK && suspended == 1)
        for i in 0..<3 { _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.3&group=\(g)&id=\(i)"), tag: "\(i)")) }
        // Nothing may start while suspended: the queue is not idle and the server sees nothing.
        #expect(rq_queue_wait_idle(q, 0.4) == RQ_ERR_TIMED_OUT)
        #expect(fixture.log(group: g).entries.isEmpty)
        #expect(count(q) == 3)
        #expect(rq_queue_resume(q) == RQ_OK)
        let log = fixture.waitForLog(group: g) { $0.entries.count == 3 }
        // All three started before the first one ended (they ran together at once).
        let firstEnd = log.entries.compactMap(\.end).min() ?? .infinity
        #expect(log.entries.allSatisfy { $0.start < firstEnd })
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(log.peaks[g] == 3 || fixture.log(group: g).peaks[g] == 3)
    }

    @Test func suspendDoesNotStopRunningRequests() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        // "run" is held by the server until the queue is suspended.
        _ = addAndRelease(q, try rec.request(fixture.url("/hold?key=\(g)&n=2&group=\(g)&id=run"), tag: "run"))
        _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.01&group=\(g)&id=wait"), tag: "wait"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_queue_suspend(q) == RQ_OK)
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("run")?.outcome == RQ_OUTCOME_OK)
        #expect(count(q) == 1)
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["run", "wait"])
    }

    @Test func raisingTheLimitStartsWaitingRequestsAtOnce() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for i in 0..<4 { _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=1.0&group=\(g)&id=\(i)"), tag: "\(i)")) }
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_queue_set_max_concurrent(q, 4) == RQ_OK)
        let log = fixture.waitForLog(group: g) { $0.entries.count == 4 }
        // The three waiting ones started while the first was still running, without any add or
        // completion to trigger them.
        #expect(log.entries.count == 4)
        #expect(rec.completions.isEmpty)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).peaks[g] == 4)
    }

    @Test func loweringTheLimitNeverInterruptsRunningRequests() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 3)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        // The first three are held by the server until the limit is lowered: the last two can
        // start only under the new limit, whatever the machine's timing.
        for i in 0..<5 {
            let path = i < 3 ? "/hold?key=\(g)&n=2&group=\(g)&id=\(i)" : "/delay?s=0.1&group=\(g)&id=\(i)"
            _ = addAndRelease(q, try rec.request(fixture.url(path), tag: "\(i)"))
        }
        fixture.waitForLog(group: g) { $0.entries.count == 3 }
        #expect(rq_queue_set_max_concurrent(q, 1) == RQ_OK)
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK })
        let log = fixture.log(group: g)
        // The last two ran one at a time after the first three.
        let last = log.entries.filter { $0.id == "3" || $0.id == "4" }
        #expect(last.count == 2)
        if last.count == 2, let end = last[0].end { #expect(last[1].start >= end) }
    }

    @Test func countAndSnapshotAreConsistent() throws {
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        var handles: [OpaquePointer?] = []
        for i in 0..<5 {
            let r = try rec.request(fixture.url("/delay?s=0.5&id=\(i)"), tag: "\(i)")
            #expect(rq_add(q, r) == RQ_OK)
            handles.append(r)
        }
        var list: UnsafeMutablePointer<OpaquePointer?>?
        var n = 0
        #expect(rq_queue_snapshot(q, &list, &n) == RQ_OK)
        #expect(n == 5)
        let snapshot = (0..<n).map { list![$0] }
        rq_snapshot_free(list)
        #expect(snapshot == handles)
        var states: [rq_request_state] = []
        for r in handles {
            var s = RQ_STATE_NEW
            #expect(rq_request_get_state(r, &s) == RQ_OK)
            states.append(s)
        }
        #expect(states == [RQ_STATE_RUNNING, RQ_STATE_RUNNING, RQ_STATE_WAITING, RQ_STATE_WAITING, RQ_STATE_WAITING])
        #expect(count(q) == 5)
        #expect(rq_queue_cancel_all(q) == RQ_OK)
        #expect(count(q) == 0)
        #expect(rq_queue_snapshot(q, &list, &n) == RQ_OK)
        #expect(n == 0)
        rq_snapshot_free(list)
        #expect(rec.waitForCompletions(5))
        for r in handles {
            var s = RQ_STATE_NEW
            #expect(rq_request_get_state(r, &s) == RQ_OK && s == RQ_STATE_COMPLETED)
            #expect(rq_request_free(r) == RQ_OK)
        }
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_CANCELLED })
    }

    @Test func completionRunsAfterTheRequestLeftTheQueue() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let counts = Locked<[Int]>([])
        rec.onCompletion = { _, _ in counts.mutate { $0.append(count(q)) } }
        _ = rq_queue_suspend(q)
        for i in 0..<3 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=10&id=\(i)"), tag: "\(i)")) }
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        // Inside each completion the request is no longer counted (and the next one already runs);
        // a later request may even have finished before an earlier callback ran.
        let seen = counts.value
        #expect(seen.count == 3)
        for (i, n) in seen.enumerated() { #expect(n <= 2 - i) }
        #expect(seen.last == 0)
    }

    @Test func duplicateCancelsTheEarlierEqualRequest() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        // A running one and a waiting one, both equal to the request added last.
        let url = fixture.url("/delay?s=0.5&group=\(g)&id=dup")
        _ = addAndRelease(q, try rec.request(url, tag: "running"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        // Suspended, so that the slot the cancelled request frees stays free while we look.
        _ = rq_queue_suspend(q)
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=other"), tag: "other"))
        _ = addAndRelease(q, try rec.request(url, tag: "waiting") { r in _ = rq_request_set_timeout(r, 30) })
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("running")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(count(q) == 2)
        _ = addAndRelease(q, try rec.request(url, tag: "last"))
        #expect(count(q) == 2)
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("waiting")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rec.completion("last")?.outcome == RQ_OUTCOME_OK)
        #expect(rec.completion("other")?.outcome == RQ_OUTCOME_OK)
        #expect(rec.completions.count == 4)
    }

    @Test func largeBodiesAreEqualOnlyWhenEveryByteIs() throws {
        // Bodies are hashed by their length and ends; equality still compares every byte, the
        // copied and the borrowed alike.
        let a = [UInt8](repeating: 7, count: 100_000)
        var b = a
        b[50_000] = 8
        // The borrowed copy of `a` outlives the queue (freed after it, defers run in reverse).
        let lent = UnsafeMutableRawBufferPointer.allocate(byteCount: a.count, alignment: 1)
        defer { lent.deallocate() }
        a.withUnsafeBytes { lent.copyMemory(from: $0) }
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_suspend(q)
        let rec = Recorder()
        func post(_ tag: String, _ set: @escaping (OpaquePointer?) -> rq_result) throws {
            _ = addAndRelease(q, try rec.request(fixture.url("/echo"), tag: tag) { r in
                _ = rq_request_set_method(r, "POST")
                #expect(set(r) == RQ_OK)
            })
        }
        try post("a") { r in a.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) } }
        try post("b") { r in b.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) } }
        #expect(count(q) == 2)
        #expect(rec.completions.isEmpty)
        try post("a lent") { r in rq_request_set_body_borrowed(r, lent.baseAddress, lent.count) }
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("a")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(count(q) == 2)
        #expect(rq_queue_cancel_all(q) == RQ_OK)
        #expect(rec.waitForCompletions(3))
        #expect(rec.completion("b")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rec.completion("a lent")?.outcome == RQ_OUTCOME_CANCELLED)
    }

    @Test func aRunningRequestReplacedByADuplicateStopsItsTransfer() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let url = fixture.url("/hold?key=\(g)&n=10&group=\(g)")
        _ = addAndRelease(q, try rec.request(url, tag: "first"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        _ = addAndRelease(q, try rec.request(url, tag: "second"))
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("first")?.outcome == RQ_OUTCOME_CANCELLED)
        // The server, still holding the first response, sees its client go.
        #expect(fixture.waitForLog(group: g) { $0.entries.first?.clientGone == true }.entries.first?.clientGone == true)
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("second")?.outcome == RQ_OUTCOME_OK)
        #expect(rec.completions.count == 2)
    }

    @Test func equalityIsMethodURLHeadersAndBody() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        let url = fixture.url("/echo")
        func add(_ tag: String, method: String = "POST", header: String? = nil, body: String = "x") throws {
            _ = addAndRelease(q, try rec.request(url, tag: tag) { r in
                _ = rq_request_set_method(r, method)
                if let header { _ = rq_request_set_header(r, "X-Test", header) }
                _ = rq_request_set_body(r, body, body.utf8.count)
            })
        }
        try add("base")
        try add("other-body", body: "y")
        try add("other-method", method: "PUT")
        try add("other-header", header: "1")
        #expect(count(q) == 4)
        #expect(rec.completions.isEmpty)
        try add("same-as-other-header", header: "1")
        #expect(rec.waitForCompletions(1))
        #expect(rec.completions.map(\.tag) == ["other-header"])
        #expect(rec.completions.first?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(count(q) == 4)
        _ = rq_queue_cancel_all(q)
    }

    @Test func allowModeSendsEveryEqualRequest() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW) == RQ_OK)
        let rec = Recorder()
        for i in 0..<3 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=5&group=\(g)"), tag: "\(i)")) }
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(fixture.log(group: g).entries.count == 3)
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK })
    }

    @Test func addingTheSameRequestTwiceIsAnErrorAndChangesNothing() throws {
        let q = try makeQueue(max: 1)
        let other = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q); _ = rq_queue_free(other) }
        _ = rq_queue_suspend(q)
        let rec = Recorder()
        let r = try rec.request(fixture.url("/bytes?n=1"), tag: "once")
        #expect(rq_add(q, r) == RQ_OK)
        #expect(rq_add(q, r) == RQ_ERR_ALREADY_ADDED)
        #expect(rq_add(other, r) == RQ_ERR_ALREADY_ADDED)
        #expect(rq_request_start(r) == RQ_ERR_ALREADY_ADDED)
        #expect(rq_request_set_timeout(r, 1) == RQ_ERR_REQUEST_FROZEN)
        #expect(count(q) == 1 && count(other) == 0)
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.count == 1)
        #expect(rq_add(q, r) == RQ_ERR_ALREADY_ADDED)
        #expect(rq_request_free(r) == RQ_OK)
    }

    @Test func cancellingAWaitingRequestRemovesItAndTheQueueGoesOn() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let first = try rec.request(fixture.url("/delay?s=0.2&group=\(g)&id=first"), tag: "first")
        let victim = try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=victim"), tag: "victim")
        let last = try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=last"), tag: "last")
        for r in [first, victim, last] { #expect(rq_add(q, r) == RQ_OK) }
        #expect(rq_cancel(victim) == RQ_OK)
        #expect(count(q) == 2)
        #expect(rq_cancel(victim) == RQ_ERR_NOT_ACTIVE)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.map(\.tag) == ["victim", "first", "last"])
        #expect(rec.completion("victim")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rec.completion("victim")?.attempts == 0)
        #expect(fixture.log(group: g).entries.map(\.id) == ["first", "last"])
        for r in [first, victim, last] { #expect(rq_request_free(r) == RQ_OK) }
    }

    /// A cancel looks for its request first in the queue of the last cancel, by the id its handle
    /// gives, checking the handle under that queue's lock (`Queue.cancel(handle:)`): a request of
    /// another queue is cancelled in its own, and a stale handle whose slot a request of that
    /// queue now has cancels nothing.
    @Test func aCancelFindsItsRequestInItsOwnQueueAndAStaleHandleCancelsNothing() throws {
        let first = try makeQueue(RQ_DELIVERY_DISPATCH), second = try makeQueue(RQ_DELIVERY_DISPATCH)
        defer { for q in [first, second] { _ = rq_queue_free(q) } }
        for q in [first, second] {
            #expect(rq_queue_suspend(q) == RQ_OK)
            #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW) == RQ_OK)
        }
        let rec = Recorder()
        let url = fixture.url("/bytes?n=1")  // never sent: the queues stay suspended
        let a = try rec.request(url, tag: "a"), b = try rec.request(url, tag: "b"), c = try rec.request(url, tag: "c")
        var made: [OpaquePointer?] = [b, c]
        defer { for r in made { _ = rq_request_free(r) } }
        #expect(rq_add(first, a) == RQ_OK)
        for r in [b, c] { #expect(rq_add(second, r) == RQ_OK) }
        #expect(rq_cancel(a) == RQ_OK)  // in the first queue, where the next cancel looks first
        #expect(rq_cancel(b) == RQ_OK)  // found in its own queue, which the next one looks in
        #expect(count(first) == 0 && count(second) == 1)
        #expect(rq_cancel(b) == RQ_ERR_NOT_ACTIVE)
        // Once a's completion ran and its handle is freed, its slot (the handle's bits from 34 on,
        // the request's id in a queue) goes to a request made later.
        _ = rq_queue_dispatch(first, 0, nil)
        #expect(rec.completion("a")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rq_request_free(a) == RQ_OK)
        var reused: OpaquePointer?
        for i in 0..<10_000 where reused == nil {
            let r = try rec.request(url, tag: "new \(i)")
            made.append(r)
            if UInt(bitPattern: r) >> 34 == UInt(bitPattern: a) >> 34 { reused = r }
        }
        try #require(reused != nil)
        #expect(rq_add(second, reused) == RQ_OK)
        #expect(rq_cancel(a) == RQ_ERR_INVALID_HANDLE)
        #expect(count(second) == 2)
        #expect(rq_cancel(reused) == RQ_OK)
        #expect(count(second) == 1)
        _ = rq_queue_dispatch(second, 0, nil)
        #expect(rec.completions.map(\.tag) == ["a", "b", "new \(made.count - 3)"])
    }

    /// A cancelled request's response reads the request's URL when asked (it keeps no copy of its
    /// own): retained past the frees of the request and of its queue, it still says everything.
    @Test func aCancelledResponseRetainedPastItsRequestAndQueueStillHasTheURL() throws {
        let kept = Locked(Handle(nil))
        let q = try makeQueue()
        #expect(rq_queue_suspend(q) == RQ_OK)
        let url = fixture.url("/bytes?n=1&id=cancelled-and-kept")
        var r: OpaquePointer?
        try #require(rq_request_new(url, &r) == RQ_OK)
        #expect(rq_request_set_completion(r, { context, _, response in
            let kept = Unmanaged<Locked<Handle>>.fromOpaque(context!).takeUnretainedValue()
            kept.mutate { $0 = Handle(rq_response_retain(response)) }
        }, Unmanaged.passRetained(kept).toOpaque(), { context in Unmanaged<Locked<Handle>>.fromOpaque(context!).release() }) == RQ_OK)
        #expect(rq_add(q, r) == RQ_OK)
        #expect(rq_cancel(r) == RQ_OK)
        #expect(rq_request_free(r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rq_queue_free(q) == RQ_OK)
        let response = try #require(kept.value.pointer)
        #expect(rq_response_outcome(response) == RQ_OUTCOME_CANCELLED)
        #expect(String(cString: rq_response_url(response)) == url)
        #expect(String(cString: rq_response_error_message(response)) == "the request was cancelled")
        #expect(rq_response_attempts(response) == 0 && rq_response_status(response) == 0)
        var size = 1
        #expect(rq_response_body(response, &size) != nil && size == 0)
        #expect(rq_response_header_count(response) == 0)
        rq_response_release(response)
    }

    /// Coalesced requests cancelled together (the queue freed while they wait) each get their own
    /// cancellation, made when delivered: outcome, message, URL and attempts, and a request with
    /// no completion callback among them still completes (its context is freed).
    @Test func coalescedRequestsCancelledByTheQueueFreeEachGetTheirCancellation() throws {
        let q = try makeQueue()
        #expect(rq_queue_suspend(q) == RQ_OK)
        #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE) == RQ_OK)
        let rec = Recorder()
        let url = fixture.url("/bytes?n=1&id=coalesced-freed")
        for tag in ["first", "second", "third"] {
            #expect(addAndRelease(q, try rec.request(url, tag: tag)) == RQ_OK)
        }
        var silent: OpaquePointer?
        try #require(rq_request_new(url, &silent) == RQ_OK)
        let freed = Locked(false)
        #expect(rq_request_set_completion(silent, nil, Unmanaged.passRetained(freed).toOpaque(), { context in
            let freed = Unmanaged<Locked<Bool>>.fromOpaque(context!).takeRetainedValue()
            freed.mutate { $0 = true }
        }) == RQ_OK)
        #expect(addAndRelease(q, silent) == RQ_OK)
        #expect(rq_queue_free(q) == RQ_OK)
        #expect(rec.completions.map(\.tag) == ["first", "second", "third"])
        for completion in rec.completions {
            #expect(completion.outcome == RQ_OUTCOME_CANCELLED)
            #expect(completion.message == "the queue was freed")
            #expect(completion.url == url)
            #expect(completion.attempts == 0 && completion.status == 0)
        }
        #expect(freed.value)
    }

    @Test func cancellingARunningRequestStopsTheTransfer() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.request(fixture.url("/stall?s=20&group=\(g)&id=slow"), tag: "slow")
        _ = rq_add(q, r)
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=3&group=\(g)&id=next"), tag: "next"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_cancel(r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.map(\.tag) == ["slow", "next"])
        #expect(rec.completion("slow")?.outcome == RQ_OUTCOME_CANCELLED)
        // The server saw the stalled connection go away.
        let log = fixture.waitForLog(group: g) { $0.entries.allSatisfy { $0.end != nil } }
        #expect(log.entries.allSatisfy { $0.end != nil })
        _ = rq_request_free(r)
    }

    @Test func cancelAllCompletesEveryRequestAsCancelled() throws {
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let g = uniqueGroup()
        for i in 0..<10 { _ = addAndRelease(q, try rec.request(fixture.url("/stall?s=20&group=\(g)&id=\(i)"), tag: "\(i)")) }
        fixture.waitForLog(group: g) { $0.entries.count == 2 }
        #expect(rq_queue_cancel_all(q) == RQ_OK)
        #expect(count(q) == 0)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.count == 10)
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_CANCELLED })
        #expect(Set(rec.finalizedTags).count == 10)
        // The two running transfers were stopped: the server saw their connections go.
        let log = fixture.waitForLog(group: g) { $0.entries.allSatisfy { $0.end != nil } }
        #expect(log.entries.count == 2 && log.entries.allSatisfy { $0.end != nil })
        // The queue stays usable.
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=2"), tag: "after"))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("after")?.outcome == RQ_OUTCOME_OK)
    }

    @Test func queueTimeDoesNotCountTowardTheTimeout() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=1.0"), tag: "blocker"))
        _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.05"), tag: "patient") { r in _ = rq_request_set_timeout(r, 0.6) })
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("patient")?.outcome == RQ_OUTCOME_OK)
    }

    @Test func defaultQueueIsSharedAndCannotBeFreed() throws {
        let q = rq_queue_default()
        #expect(q != nil)
        #expect(rq_queue_default() == q)
        #expect(rq_queue_free(q) == RQ_ERR_INVALID_STATE)
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=7"), tag: "d"))
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("d")?.body.count == 7)
    }

    @Test func standaloneRequestRunsWithoutAQueue() throws {
        let rec = Recorder()
        let r = try rec.request(fixture.url("/bytes?n=9"), tag: "solo")
        #expect(rq_request_start(r) == RQ_OK)
        #expect(rq_request_start(r) == RQ_ERR_ALREADY_ADDED)
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("solo")?.body.count == 9)
        #expect(rq_request_free(r) == RQ_OK)
    }

    @Test func standaloneRequestCanBeCancelled() throws {
        let rec = Recorder()
        let r = try rec.request(fixture.url("/stall?s=10"), tag: "solo")
        #expect(rq_request_start(r) == RQ_OK)
        #expect(rq_cancel(r) == RQ_OK)
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("solo")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rq_request_free(r) == RQ_OK)
    }
}

/// A value behind a lock, for tests that collect from callbacks. @unchecked: `stored` is only
/// touched under `lock` (NSLock, which ThreadSanitizer sees; Synchronization's Mutex it does not).
final class Locked<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T { lock.lock(); defer { lock.unlock() }; return stored }
    func mutate(_ body: (inout T) -> Void) { lock.lock(); body(&stored); lock.unlock() }
}

/// A library handle carried across threads as its address: the header allows calls on a handle
/// from any thread, and an address, unlike a C pointer, is Sendable.
struct Handle: Sendable, Equatable {
    private let address: UInt
    init(_ pointer: OpaquePointer?) { address = UInt(bitPattern: pointer) }
    var pointer: OpaquePointer? { OpaquePointer(bitPattern: address) }
}
