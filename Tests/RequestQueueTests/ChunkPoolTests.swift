import CRequestQueueAPI
import Foundation
import Glibc
@testable import RequestQueue
import Synchronization
import Testing

/// The queue's pool of chunk buffers for streamed bodies (`ChunkPool`, Streaming.swift): buffers
/// go from one piece and one body to the next, never to two pieces at once, within the flow
/// control's bound, and are freed once no transfer of the queue has streamed for a while. Memory
/// is read from the pool's own counts (`ChunkPool.counts`), not from timings.
@Suite struct ChunkPoolTests {
    let fixture = Fixture.shared

    func pool(_ q: OpaquePointer?) throws -> ChunkPool {
        try #require(HandleTable.shared.lookup(q, kind: .queue, as: Queue.self)).engine.chunkPool
    }

    /// Most full-size chunks one streamed attempt holds at once: up to the pause threshold, and
    /// the one a piece that straddles two chunks takes beyond it.
    static let perAttempt = StreamFlow.highWater / StreamChunk.capacity + 1

    /// Runs the events of a dispatch-mode queue until `done`, one event per readable descriptor
    /// and `pause` microseconds after each (a host that dispatches slowly).
    func dispatch(_ q: OpaquePointer?, pause: UInt32 = 0, until done: () -> Bool) throws {
        var fd: Int32 = -1
        try #require(rq_queue_get_fd(q, &fd) == RQ_OK)
        let deadline = Date().addingTimeInterval(120)  // watchdog only
        while !done(), Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 1000) == 1 {
                _ = rq_queue_dispatch(q, 1, nil)
                if pause > 0 { usleep(pause) }
            }
        }
    }

    /// Four bodies streamed at once, each a different stretch of the fixture's pattern (a range
    /// starting at a different phase), through a consumer slow enough that transfers pause and
    /// buffers go round the pool many times: each body arrives whole and only its own bytes.
    /// (A buffer handed to a second transfer while its pieces wait for delivery would put one
    /// body's bytes into another's.)
    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func concurrentStreamsNeverMixTheirPieces(delivery: rq_delivery) throws {
        let n = 3_000_000
        let starts = [1, 2, 3, 5]
        let q = try makeQueue(delivery, max: starts.count)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.streams.onChunk = { _, _ in
            usleep(200)
            return 0
        }
        for start in starts {
            _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(n)&ranges=1"), tag: "s\(start)") { r in
                _ = rq_request_set_header(r, "Range", "bytes=\(start)-")
            })
        }
        if delivery == RQ_DELIVERY_DISPATCH {
            try dispatch(q) { rec.completions.count == starts.count }
        }
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        var pieces = 0
        for start in starts {
            let s = rec.streams.stream("s\(start)")
            #expect(rec.completion("s\(start)")?.outcome == RQ_OUTCOME_OK)
            #expect(s.starts == 1 && s.contiguous)
            #expect(s.bytes.count == n - start)
            #expect(s.bytes == FixturePattern.bytes(start, n - start), "the body of the range from byte \(start) differs")
            pieces += s.calls
        }
        let counts = try pool(q).counts
        // The buffers went round: fewer were made than pieces were delivered, and no more than
        // the transfers could hold at once (and a few made again after a trim).
        let made = counts.total.load(ordering: .relaxed)
        #expect(made <= starts.count * ChunkPoolTests.perAttempt + starts.count)
        #expect(pieces > made, "\(pieces) pieces, \(made) chunks made")
    }

    /// A host that dispatches slowly: three 16 MiB bodies at once never hold more buffers than
    /// the flow control lets each transfer fill before it pauses, and once the queue is idle every
    /// buffer is freed.
    @Test func aSlowHostHoldsAtMostTheFlowBudgetPerTransferThenNothing() throws {
        let n = 16 << 20
        let q = try makeQueue(RQ_DELIVERY_DISPATCH, max: 3)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.streams.keepBytes = false
        for tag in ["a", "b", "c"] {
            _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(n)&id=\(tag)"), tag: tag))
        }
        try dispatch(q, pause: 500) { rec.completions.count == 3 }
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        for tag in ["a", "b", "c"] {
            let s = rec.streams.stream(tag)
            #expect(rec.completion(tag)?.outcome == RQ_OUTCOME_OK)
            #expect(s.count == UInt64(n) && s.contiguous && s.matchesPattern)
        }
        let counts = try pool(q).counts
        let peak = counts.peak.load(ordering: .relaxed)
        #expect(peak <= 3 * ChunkPoolTests.perAttempt, "\(peak) chunks of \(StreamChunk.capacity) bytes at once")
        #expect(released(counts), "\(counts.live.load(ordering: .relaxed)) chunks still held")
    }

    /// Bodies streamed one after the other on a queue reuse its buffers: the pool makes the
    /// buffers of one transfer, not a set per body, and frees them when the last body is done.
    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func bodiesOneAfterTheOtherReuseTheQueuesBuffers(delivery: rq_delivery) throws {
        let bodies = 8, n = 2 << 20
        let q = try makeQueue(delivery, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.streams.keepBytes = false
        for i in 0..<bodies {
            _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(n)&id=\(i)"), tag: "b\(i)"))
        }
        if delivery == RQ_DELIVERY_DISPATCH {
            try dispatch(q) { rec.completions.count == bodies }
        }
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        for i in 0..<bodies {
            let s = rec.streams.stream("b\(i)")
            #expect(rec.completion("b\(i)")?.outcome == RQ_OUTCOME_OK, "\(rec.completion("b\(i)")?.message ?? "no completion")")
            #expect(s.count == UInt64(n) && s.contiguous && s.matchesPattern)
        }
        let counts = try pool(q).counts
        let made = counts.total.load(ordering: .relaxed)
        // A set of buffers per body would make at least one per body (a 2 MiB body fills eight).
        // The next body starts while the last pieces of the one before may still wait for
        // delivery: up to the buffers of two streams exist then.
        #expect(made <= 2 * ChunkPool.perStream, "\(made) chunks made for \(bodies) bodies")
        #expect(released(counts), "\(counts.live.load(ordering: .relaxed)) chunks still held")
    }

    /// A body that arrives a little at a time is delivered in pieces of one buffer, one after the
    /// other in memory, each copied once: not each copied again into a buffer of its own size
    /// (which was done so that flow control would not count a mostly empty 256 KiB buffer per
    /// piece; a buffer now counts once, however many pieces are posted out of it).
    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func aBodyArrivingInSmallPiecesIsDeliveredFromOneBuffer(delivery: rq_delivery) throws {
        let pieces = 24, size = 2048
        let q = try makeQueue(delivery, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/trickle?where=body&every=0.02&n=\(pieces)&size=\(size)"), tag: "t"))
        if delivery == RQ_DELIVERY_DISPATCH {
            try dispatch(q) { rec.completions.count == 1 }
        }
        #expect(rec.waitForCompletions(1, timeout: 60))
        #expect(rec.completion("t")?.outcome == RQ_OUTCOME_OK)
        let s = rec.streams.stream("t")
        #expect(s.count == UInt64(pieces * size) && s.contiguous && s.matchesPattern)
        #expect(s.calls > 1, "the body came in \(s.calls) piece(s)")
        #expect(s.buffers == 1, "\(s.calls) pieces in \(s.buffers) buffers")
    }

    /// Whether the pool's buffers are all freed within the watchdog's time: they are once no
    /// transfer of the queue has streamed for `ChunkPool.idleRelease` seconds.
    func released(_ counts: ChunkCounts) -> Bool {
        let deadline = Date().addingTimeInterval(ChunkPool.idleRelease + 30)  // watchdog only
        while counts.live.load(ordering: .relaxed) > 0, Date() < deadline { usleep(10_000) }
        return counts.live.load(ordering: .relaxed) == 0
    }

    /// A client that adds each body's request from the completion of the one before (the queue
    /// has nothing scheduled between two bodies) still reuses the queue's buffers: they are kept
    /// while the queue is idle, and freed once no body has streamed for a while. (Freed at the
    /// end of each body, the next body's fresh buffers cost it a page fault per 4 KiB: about 200
    /// per 10 MiB body, bench/README.md.)
    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func bodiesAddedFromTheCompletionReuseTheQueuesBuffers(delivery: rq_delivery) throws {
        let bodies = 8, n = 2 << 20
        let q = try makeQueue(delivery, max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.streams.keepBytes = false
        let urls = (0..<bodies).map { fixture.url("/bytes?n=\(n)&id=\($0)") }
        let next = Atomic<Int>(1)
        nonisolated(unsafe) let queue = q
        rec.onCompletion = { _, _ in
            let i = next.add(1, ordering: .relaxed).oldValue
            guard i < bodies, let r = try? rec.streamingRequest(urls[i], tag: "b\(i)") else { return }
            #expect(addAndRelease(queue, r) == RQ_OK)
        }
        #expect(addAndRelease(q, try rec.streamingRequest(urls[0], tag: "b0")) == RQ_OK)
        if delivery == RQ_DELIVERY_DISPATCH {
            try dispatch(q) { rec.completions.count == bodies }
        }
        #expect(rec.waitForCompletions(bodies, timeout: 60))
        for i in 0..<bodies {
            let s = rec.streams.stream("b\(i)")
            #expect(rec.completion("b\(i)")?.outcome == RQ_OUTCOME_OK, "\(rec.completion("b\(i)")?.message ?? "no completion")")
            #expect(s.count == UInt64(n) && s.contiguous && s.matchesPattern)
        }
        let counts = try pool(q).counts
        let made = counts.total.load(ordering: .relaxed)
        #expect(made <= ChunkPool.perStream, "\(made) chunks made for \(bodies) bodies")
        #expect(released(counts), "\(counts.live.load(ordering: .relaxed)) chunks still held")
    }
}
