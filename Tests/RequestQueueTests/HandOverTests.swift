import CRequestQueueAPI
import Foundation
import Glibc
@testable import RequestQueue
import Testing

/// The responses the delivering thread hands back to the engine thread once their callbacks ran
/// (SpentResponses, Queue+Delivery.swift): each is freed, by the engine or, when the engine is
/// idle, by the deliverer at once; none stays behind while the queue is idle; a response the
/// caller retained stays valid until it is released.
@Suite struct HandOverTests {
    let fixture = Fixture.shared

    private static func response() -> Response {
        Response(outcome: .ok, status: 200, url: "http://127.0.0.1/", message: "", attempts: 1)
    }

    @Test func handedBackResponsesWaitForTheEngineUnlessItIsIdle() {
        let spent = SpentResponses()
        weak var first: Response?
        weak var second: Response?
        do {
            let one = Self.response(), two = Self.response()
            first = one
            second = two
            spent.add(one)
            spent.add(two)
        }
        spent.handBack { false }
        #expect(first != nil && second != nil, "freed before the engine took them")
        spent.free()
        #expect(first == nil && second == nil, "the engine's free left them")

        weak var third: Response?
        do {
            let three = Self.response()
            third = three
            spent.add(three)
        }
        spent.handBack { true }
        #expect(third == nil, "an idle engine's deliverer kept them")
    }

    /// A response with a body of 64 KiB or more is not handed back: the deliverer releases it
    /// right after its callback, while the engine is busy (here with a transfer that waits 5 s).
    /// Dispatch mode: the deliverer is this thread, so "right after" is when dispatch returns.
    @Test func aLargeBodysResponseIsReleasedByItsDeliverer() throws {
        let seen = Seen()
        let q = try makeQueue(RQ_DELIVERY_DISPATCH, max: 4)
        // The queue's free delivers what is left (the small body, the slow request's cancellation)
        // to callbacks given `seen`: it lives until then.
        defer { withExtendedLifetime(seen) { _ = rq_queue_free(q) } }
        let context = Unmanaged.passUnretained(seen).toOpaque()
        var slow: OpaquePointer?
        try #require(rq_request_new(fixture.url("/delay?s=5"), &slow) == RQ_OK)
        #expect(addAndRelease(q, slow) == RQ_OK)
        for size in [100_000, 100] {
            var r: OpaquePointer?
            try #require(rq_request_new(fixture.url("/bytes?n=\(size)"), &r) == RQ_OK)
            #expect(rq_request_set_completion(r, onSeenKeepingNone, context, nil) == RQ_OK)
            #expect(addAndRelease(q, r) == RQ_OK)
        }
        var fd: Int32 = -1
        #expect(rq_queue_get_fd(q, &fd) == RQ_OK)
        let deadline = Date().addingTimeInterval(30)
        var large: Weak?
        while large == nil, Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 50)
            _ = rq_queue_dispatch(q, 0, nil)
            large = seen.lock.withLock { seen.responses.first { $0.large } }
        }
        try #require(large != nil)
        #expect(large?.response == nil, "the large body's response was kept after its callback")
    }

    /// What the completion callbacks saw: a weak reference to each response, and the responses
    /// retained (every fourth).
    final class Seen: @unchecked Sendable {
        let lock = NSLock()
        var responses: [Weak] = []
        var retained: [OpaquePointer] = []
        var live: Int { lock.lock(); defer { lock.unlock() }; return responses.count { $0.response != nil } }
        var count: Int { lock.lock(); defer { lock.unlock() }; return responses.count }
    }

    struct Weak {
        weak var response: Response?
        var large = false
    }

    @Test(arguments: [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH])
    func noResponseOutlivesItsCallbackOnceTheQueueIsIdle(delivery: rq_delivery) throws {
        let total = 96, size = 3000
        let seen = Seen()
        let q = try makeQueue(delivery, max: 8)
        var freed = false
        defer { withExtendedLifetime(seen) { if !freed { _ = rq_queue_free(q) } } }
        let context = Unmanaged.passUnretained(seen).toOpaque()
        for index in 0..<total {
            var r: OpaquePointer?
            try #require(rq_request_new(fixture.url("/bytes?n=\(size)&id=\(index)"), &r) == RQ_OK)
            #expect(rq_request_set_completion(r, onSeen, context, nil) == RQ_OK)
            #expect(addAndRelease(q, r) == RQ_OK)
        }
        // Watchdogs: a hang is a failure, not a wait without end.
        let deadline = Date().addingTimeInterval(60)
        while seen.count < total, Date() < deadline {
            awaitCallbacks(q, delivery)
        }
        try #require(seen.count == total)
        let retained = seen.lock.withLock { seen.retained }
        // The engine goes idle once the last transfer ended, and frees what was handed back then;
        // a deliverer that finds it idle frees at once. Either way, none but the retained stays.
        while seen.live > retained.count, Date() < deadline { usleep(1000) }
        #expect(seen.live == retained.count, "responses kept after their callbacks, the queue idle")
        // The retained ones are the caller's: readable after the queue's free too.
        #expect(rq_queue_free(q) == RQ_OK)
        freed = true
        for pointer in retained {
            var length = 0
            let body = rq_response_body(pointer, &length)
            #expect(length == size)
            #expect(body.map { Array(UnsafeBufferPointer(start: $0, count: min(length, 36))) } == FixturePattern.unit)
            rq_response_release(pointer)
        }
        // The last callback's response may still be on its way back (the test saw the callback
        // before its deliverer handed the batch back): it goes once the engine frees or finds it.
        while seen.live > 0, Date() < deadline { usleep(1000) }
        #expect(seen.live == 0)
    }
}

private let onSeen: rq_completion_fn = { context, _, pointer in
    guard let context, let made = response(pointer) else { return }
    let seen = Unmanaged<HandOverTests.Seen>.fromOpaque(context).takeUnretainedValue()
    seen.lock.withLock {
        seen.responses.append(HandOverTests.Weak(response: made))
        if seen.responses.count % 4 == 0, let kept = rq_response_retain(pointer) { seen.retained.append(kept) }
    }
}

/// Records each response weakly, with whether its body is 64 KiB or more; retains none.
private let onSeenKeepingNone: rq_completion_fn = { context, _, pointer in
    guard let context, let made = response(pointer) else { return }
    let seen = Unmanaged<HandOverTests.Seen>.fromOpaque(context).takeUnretainedValue()
    seen.lock.withLock { seen.responses.append(HandOverTests.Weak(response: made, large: made.bodyCount >= 65_536)) }
}
