import CRequestQueueAPI
import Foundation
import Glibc
@testable import RequestQueue
import Testing

/// Responses delivered by the delivery thread or `rq_queue_dispatch` are released on the engine
/// thread, which made them (`Engine.releaseHere`): the ones a callback retained stay the caller's,
/// and none is kept once the queue is freed.
@Suite struct ResponseReleaseTests {
    let fixture = Fixture.shared

    /// What the completions saw: a weak reference to every response, and the responses retained.
    final class Seen: @unchecked Sendable {
        struct Weak { weak var response: Response? }
        let lock = NSLock()
        var all: [Weak] = []
        var retained: [Handle] = []
        var completions: Int { lock.lock(); defer { lock.unlock() }; return all.count }
    }

    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func deliveredResponsesAreReleasedAndRetainedOnesKept(delivery: rq_delivery) throws {
        let n = 48
        let q = try makeQueue(delivery, max: 4)
        let seen = Seen()
        for index in 0..<n {
            var r: OpaquePointer?
            try #require(rq_request_new(fixture.url("/bytes?n=100&id=release-\(index)"), &r) == RQ_OK)
            #expect(rq_request_set_completion(r, { context, _, pointer in
                let seen = Unmanaged<Seen>.fromOpaque(context!).takeUnretainedValue()
                seen.lock.lock()
                seen.all.append(Seen.Weak(response: RequestQueue.response(pointer)))
                // Every third one kept past its callback, its queue and the engine's turns.
                if seen.all.count % 3 == 0 { seen.retained.append(Handle(rq_response_retain(pointer))) }
                seen.lock.unlock()
            }, Unmanaged.passUnretained(seen).toOpaque(), nil) == RQ_OK)
            #expect(addAndRelease(q, r) == RQ_OK)
        }
        if delivery == RQ_DELIVERY_DISPATCH {
            var fd: Int32 = -1
            try #require(rq_queue_get_fd(q, &fd) == RQ_OK)
            let deadline = Date().addingTimeInterval(60)  // watchdog only
            while seen.completions < n, Date() < deadline {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&p, 1, 1000) == 1 { _ = rq_queue_dispatch(q, 0, nil) }
            }
        }
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        #expect(rq_queue_free(q) == RQ_OK)
        seen.lock.lock()
        defer { seen.lock.unlock() }
        try #require(seen.all.count == n && seen.retained.count == n / 3)
        let kept = Set(seen.retained.compactMap { $0.pointer.flatMap { RequestQueue.response($0) }.map(ObjectIdentifier.init) })
        let alive = seen.all.compactMap(\.response).map(ObjectIdentifier.init)
        // Alive once the queue is freed: the retained ones, and no other.
        #expect(Set(alive).subtracting(kept).count == 0)
        #expect(kept.count == n / 3 && kept.isSubset(of: Set(alive)))
        for handle in seen.retained {
            var size = 0
            let body = rq_response_body(handle.pointer, &size)
            #expect(rq_response_status(handle.pointer) == 200 && body != nil && size == 100)
            rq_response_release(handle.pointer)
        }
        #expect(seen.all.allSatisfy { $0.response == nil })
    }
}
