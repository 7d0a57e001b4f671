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

    /// A callback of a dispatch-mode queue, dispatched from an inline queue's callback, runs on
    /// that queue's engine thread: freeing or waiting for the inline queue from there is refused.
    @Test func theEngineThreadCannotWaitForItselfThroughAnotherQueue() throws {
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let dq = try makeQueue(RQ_DELIVERY_DISPATCH, max: 2)
        defer { _ = rq_queue_free(dq) }
        let inner = Recorder()
        let queue = Handle(q), dispatchQueue = Handle(dq)
        let results = Locked<[rq_result]>([])
        inner.onCompletion = { _, _ in
            let found = [rq_queue_free(queue.pointer), rq_queue_wait_idle(queue.pointer, 0)]
            results.mutate { $0 = found }
        }
        _ = addAndRelease(dq, try inner.request(fixture.url("/bytes?n=3&id=inner"), tag: "inner"))
        let outer = Recorder()
        outer.onCompletion = { _, _ in
            // Runs the dispatch queue's callbacks here, on the inline queue's engine thread.
            _ = rq_queue_wait_idle(dispatchQueue.pointer, 20)
        }
        _ = addAndRelease(q, try outer.request(fixture.url("/bytes?n=3&id=outer"), tag: "outer"))
        #expect(outer.waitForCompletions(1, timeout: 30))
        #expect(inner.completions.count == 1)
        #expect(results.value == [RQ_ERR_WOULD_DEADLOCK, RQ_ERR_WOULD_DEADLOCK])
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
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

    // MARK: Streamed bodies

    func streamInline(_ path: String, head: Bool = false, progress: Bool = false,
                      configure: (OpaquePointer?) -> Void = { _ in }) throws -> (Completion, StreamLog.Stream) {
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.streamingRequest(fixture.url(path), tag: "r", progress: progress, head: head, configure: configure)
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        return (try #require(rec.completion("r")), rec.streams.stream("r"))
    }

    /// The pieces are the exact body, on the engine thread, the head first, all before the
    /// completion; an output file of the same URL on an inline queue holds the same bytes.
    @Test func aStreamedBodyIsTheExactBodyHeadFirst() throws {
        let n = 3_000_017
        let (c, s) = try streamInline("/bytes?n=\(n)", head: true, progress: true)
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200 && c.body.isEmpty)
        #expect(s.bytes == FixturePattern.bytes(0, n))
        #expect(s.starts == 1 && s.contiguous && s.matchesPattern)
        #expect(s.sequence == ["head 200", "chunk", "done"])
        #expect(s.metrics?.bytes_down == UInt64(n))
        #expect(s.threads.count == 1 && !s.threads.contains(Self.me))

        let (chunked, cs) = try streamInline("/bytes?n=\(n)&chunked=1&chunk=10000", head: true)
        #expect(chunked.outcome == RQ_OUTCOME_OK && cs.bytes == FixturePattern.bytes(0, n))
        #expect(cs.sequence == ["head 200", "chunk", "done"])

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rq-inline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("out.bin")
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.request(fixture.url("/bytes?n=\(n)"), tag: "file") { r in
            #expect(rq_request_set_output_file(r, file.path, 0) == RQ_OK)
        }
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(rec.completion("file")?.outcome == RQ_OUTCOME_OK)
        #expect((try? Data(contentsOf: file)).map { Array($0) } == s.bytes)
    }

    /// The callback gets libcurl's own receive buffer: every piece of a 4 MiB body lies in one
    /// region of at most 256 KiB (libcurl's buffer for a streamed body, CURLOPT_BUFFERSIZE, which
    /// each read fills from its start), where copies into the library's chunks (threaded and
    /// dispatch modes: 256 KiB each, at least two in use at once) are spread over several.
    @Test func piecesAreLibcurlsBufferNotACopy() throws {
        let n = 4 << 20
        let (c, _) = try streamInline("/bytes?n=\(n)&id=span") { r in
            #expect(rq_request_set_body_callback(r, recordSpan) == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK)
        let span = spans.value
        #expect(span.bytes == n)
        #expect(span.calls > 1)
        #expect(span.high - span.low <= 256 << 10)
    }

    /// A non-zero return cancels: no piece after it, the completion says cancelled.
    @Test func aNonZeroReturnCancelsTheRequest() throws {
        let n = 8 << 20
        let rec = Recorder()
        rec.streams.onChunk = { _, stream in stream.calls == 2 ? 1 : 0 }
        rec.streams.keepBytes = false
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let r = try rec.streamingRequest(fixture.url("/bytes?n=\(n)"), tag: "r")
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let c = try #require(rec.completion("r"))
        let s = rec.streams.stream("r")
        #expect(c.outcome == RQ_OUTCOME_CANCELLED)
        #expect(s.calls == 2 && s.callsAtCompletion == 2)
        #expect(s.count < UInt64(n))
        #expect(rec.completions.count == 1)
    }

    /// A head callback that cancels: no piece is delivered.
    @Test func aCancelFromTheHeadCallbackStopsThePieces() throws {
        let rec = Recorder()
        let q = try makeQueue(RQ_DELIVERY_INLINE, max: 2)
        defer { _ = rq_queue_free(q) }
        let r = try rec.streamingRequest(fixture.url("/bytes?n=1000000"), tag: "r", head: true)
        let request = Handle(r)
        rec.streams.onHead = { _, _, _ in _ = rq_cancel(request.pointer) }
        #expect(rq_add(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let s = rec.streams.stream("r")
        #expect(rec.completion("r")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(s.sequence == ["head 200", "done"])
        #expect(s.calls == 0)
        rq_request_free(r)
    }
}

private struct Span: Sendable {
    var low = UInt.max, high: UInt = 0, bytes = 0, calls = 0
}

private let spans = Locked(Span())

private let recordSpan: rq_data_fn = { _, _, data, size, offset in
    guard let data, FixturePattern.matches(UnsafeBufferPointer(start: data, count: size), at: offset) else { return 1 }
    let start = UInt(bitPattern: data)
    spans.mutate {
        $0.low = min($0.low, start)
        $0.high = max($0.high, start + UInt(size))
        $0.bytes += size
        $0.calls += 1
    }
    return 0
}
