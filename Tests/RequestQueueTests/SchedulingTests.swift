import CRequestQueueAPI
import Foundation
import RequestQueue
import Testing

/// Beyond the seed: per-host limits, priorities, tags, coalescing, retry policies, rate limits
/// and counters, observed from the server's log and the callbacks.
@Suite struct SchedulingTests {
    let fixture = Fixture.shared

    /// The fixture under another host name: a different origin for the library.
    func otherHost(_ path: String) -> String { "http://localhost:\(fixture.port)\(path)" }

    @Test func perHostLimitHoldsEachOriginToItsShare() throws {
        let a = uniqueGroup() + "-a", b = uniqueGroup() + "-b"
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_max_per_host(q, 2) == RQ_OK)
        var n = 0
        #expect(rq_queue_get_max_per_host(q, &n) == RQ_OK && n == 2)
        let rec = Recorder()
        for i in 0..<6 {
            _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.3&group=\(a)&id=\(i)"), tag: "a\(i)"))
            _ = addAndRelease(q, try rec.request(otherHost("/delay?s=0.3&group=\(b)&id=\(i)"), tag: "b\(i)"))
        }
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let logA = fixture.log(group: a), logB = fixture.log(group: b)
        #expect(logA.entries.count == 6 && logB.entries.count == 6)
        #expect(logA.peaks[a] == 2)
        #expect(logB.peaks[b] == 2)
        // The two hosts ran side by side: B's first request started before A's first ended.
        if let firstEndA = logA.entries.compactMap(\.end).min(), let firstStartB = logB.entries.map(\.start).min() {
            #expect(firstStartB < firstEndA)
        }
    }

    @Test func aPerHostLimitSetLaterAppliesToRequestsAlreadyWaiting() throws {
        let a = uniqueGroup() + "-a", b = uniqueGroup() + "-b"
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        for i in 0..<3 {
            _ = addAndRelease(q, try rec.request(fixture.url("/delay?s=0.2&group=\(a)&id=\(i)"), tag: "a\(i)"))
            _ = addAndRelease(q, try rec.request(otherHost("/delay?s=0.2&group=\(b)&id=\(i)"), tag: "b\(i)"))
        }
        #expect(rq_queue_set_max_per_host(q, 1) == RQ_OK)
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(fixture.log(group: a).peaks[a] == 1)
        #expect(fixture.log(group: b).peaks[b] == 1)
        #expect(rec.completions.count == 6 && rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_OK })
    }

    @Test func higherPrioritiesStartFirstAndPrioritiesCanChange() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        var handles: [String: OpaquePointer?] = [:]
        for (name, priority) in [("low1", RQ_PRIORITY_LOW), ("normal", RQ_PRIORITY_NORMAL), ("low2", RQ_PRIORITY_LOW),
                                 ("high", RQ_PRIORITY_HIGH), ("veryLow", RQ_PRIORITY_VERY_LOW), ("low3", RQ_PRIORITY_LOW)] {
            let r = try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=\(name)"), tag: name) { r in
                #expect(rq_request_set_priority(r, priority) == RQ_OK)
            }
            #expect(rq_add(q, r) == RQ_OK)
            handles[name] = r
        }
        // low3 moves up while waiting.
        #expect(rq_request_set_priority(handles["low3"]!, RQ_PRIORITY_VERY_HIGH) == RQ_OK)
        var p = RQ_PRIORITY_NORMAL
        #expect(rq_request_get_priority(handles["low3"]!, &p) == RQ_OK && p == RQ_PRIORITY_VERY_HIGH)
        #expect(rq_request_set_priority(handles["low1"]!, rq_priority(rawValue: 3)) == RQ_ERR_INVALID_ARGUMENT)
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["low3", "high", "normal", "low1", "low2", "veryLow"])
        #expect(rq_request_set_priority(handles["high"]!, RQ_PRIORITY_LOW) == RQ_ERR_NOT_ACTIVE)
        for r in handles.values { _ = rq_request_free(r) }
    }

    @Test func lifoAppliesWithinAPriority() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_set_order(q, RQ_ORDER_LIFO)
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        for (name, priority) in [("h1", RQ_PRIORITY_HIGH), ("n1", RQ_PRIORITY_NORMAL), ("h2", RQ_PRIORITY_HIGH), ("n2", RQ_PRIORITY_NORMAL)] {
            _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=\(name)"), tag: name) { r in
                _ = rq_request_set_priority(r, priority)
            })
        }
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).entries.map(\.id) == ["h2", "h1", "n2", "n1"])
    }

    @Test func tagsCountListAndCancel() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = rq_queue_suspend(q)
        var ys: [OpaquePointer?] = []
        for i in 0..<5 {
            let r = try rec.request(fixture.url("/bytes?n=1&id=\(i)"), tag: "\(i)") { r in
                #expect(rq_request_set_tag(r, i < 3 ? "x" : "y") == RQ_OK)
            }
            _ = rq_add(q, r)
            if i >= 3 { ys.append(r) } else { _ = rq_request_free(r) }
        }
        var n = 0
        #expect(rq_queue_count_tag(q, "x", &n) == RQ_OK && n == 3)
        #expect(rq_queue_count_tag(q, "none", &n) == RQ_OK && n == 0)
        var list: UnsafeMutablePointer<OpaquePointer?>?
        #expect(rq_queue_snapshot_tag(q, "y", &list, &n) == RQ_OK && n == 2)
        #expect((0..<n).map { list![$0] } == ys)
        rq_snapshot_free(list)
        var cancelled = 0
        #expect(rq_queue_cancel_tag(q, "x", &cancelled) == RQ_OK && cancelled == 3)
        #expect(count(q) == 2)
        #expect(rec.waitForCompletions(3))
        #expect(Set(rec.completions.map(\.tag)) == ["0", "1", "2"])
        #expect(rec.completions.allSatisfy { $0.outcome == RQ_OUTCOME_CANCELLED })
        _ = rq_queue_resume(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.filter { $0.outcome == RQ_OUTCOME_OK }.count == 2)
        for r in ys { _ = rq_request_free(r) }
    }

    @Test func coalescedRequestsShareOneTransferAndItsResult() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE) == RQ_OK)
        let rec = Recorder()
        let url = fixture.url("/delay?s=0.3&group=\(g)&id=shared")
        for i in 0..<3 { _ = addAndRelease(q, try rec.request(url, tag: "\(i)")) }
        #expect(count(q) == 3)
        // POST is never coalesced.
        for i in 0..<2 {
            _ = addAndRelease(q, try rec.request(fixture.url("/echo?group=\(g)&id=post"), tag: "post\(i)") { r in
                _ = rq_request_set_method(r, "POST")
            })
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        let log = fixture.log(group: g)
        #expect(log.entries.filter { $0.id == "shared" }.count == 1)
        #expect(log.entries.filter { $0.id == "post" }.count == 2)
        let shared = rec.completions.filter { ["0", "1", "2"].contains($0.tag) }
        #expect(shared.count == 3)
        #expect(shared.allSatisfy { $0.outcome == RQ_OUTCOME_OK && String(decoding: $0.body, as: UTF8.self) == "ok" })
        var stats = rq_queue_stats()
        stats.size = MemoryLayout<rq_queue_stats>.size
        #expect(rq_queue_get_stats(q, &stats) == RQ_OK)
        #expect(stats.coalesced == 2 && stats.added == 5 && stats.started == 3 && stats.succeeded == 5)
    }

    @Test func aCoalescedTransferStopsOnlyWhenEveryWaiterCancelled() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE)
        let rec = Recorder()
        let url = fixture.url("/delay?s=0.5&group=\(g)&id=shared")
        let first = try rec.request(url, tag: "first")
        let second = try rec.request(url, tag: "second")
        _ = rq_add(q, first)
        _ = rq_add(q, second)
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_cancel(first) == RQ_OK)
        #expect(rq_cancel(first) == RQ_ERR_NOT_ACTIVE)
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("first")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(count(q) == 1)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("second")?.outcome == RQ_OUTCOME_OK)
        #expect(fixture.log(group: g).entries.count == 1)
        for r in [first, second] { _ = rq_request_free(r) }

        // Both cancel: the transfer stops (the server sees the connection go).
        let h = uniqueGroup()
        let stall = fixture.url("/stall?s=20&group=\(h)&id=stall")
        let a = try rec.request(stall, tag: "a"), b = try rec.request(stall, tag: "b")
        _ = rq_add(q, a)
        _ = rq_add(q, b)
        fixture.waitForLog(group: h) { $0.entries.count == 1 }
        #expect(rq_cancel(b) == RQ_OK)
        #expect(rq_cancel(a) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("a")?.outcome == RQ_OUTCOME_CANCELLED && rec.completion("b")?.outcome == RQ_OUTCOME_CANCELLED)
        let log = fixture.waitForLog(group: h) { $0.entries.first?.end != nil }
        #expect(log.entries.first?.end != nil)
        for r in [a, b] { _ = rq_request_free(r) }
    }

    /// A cancelled leader whose transfer goes on for its follower keeps its place (its id) in the
    /// queue even once its caller freed it: requests made right after take other ids.
    @Test func aFreedDetachedLeaderKeepsItsPlaceUntilItsTransferEnds() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE)
        let rec = Recorder()
        let url = fixture.url("/delay?s=0.5&group=\(g)&id=shared")
        let leader = try rec.request(url, tag: "leader")
        _ = rq_add(q, leader)
        _ = addAndRelease(q, try rec.request(url, tag: "follower"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        #expect(rq_cancel(leader) == RQ_OK)
        #expect(rec.waitForCompletions(1))
        _ = rq_request_free(leader)
        for i in 0..<8 {
            _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=\(i + 1)&group=\(g)&id=new\(i)"), tag: "new\(i)"))
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completion("leader")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rec.completion("follower")?.outcome == RQ_OUTCOME_OK)
        for i in 0..<8 {
            let c = rec.completions.filter { $0.tag == "new\(i)" }
            #expect(c.count == 1 && c.first?.outcome == RQ_OUTCOME_OK && c.first?.body.count == i + 1, "new\(i)")
        }
        #expect(count(q) == 0)
    }

    // MARK: Retry policy

    func run(_ url: String, configure: (OpaquePointer?) -> Void) throws -> Completion {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(url, tag: "r", configure: configure))
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        return try #require(rec.completion("r"))
    }

    @Test func exponentialBackoffAsTheServerSawIt() throws {
        let g = uniqueGroup()
        let c = try run(fixture.url("/flaky?key=\(g)&fail=3&mode=truncated&group=\(g)")) { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.15)
            #expect(rq_request_set_retry_backoff(r, 2, 0, 0) == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.attempts == 4)
        let starts = fixture.log(group: g).entries.map(\.start)
        let gaps = zip(starts, starts.dropFirst()).map { $1 - $0 }
        #expect(gaps.count == 3)
        // 0.15, 0.3, 0.6 s: each at least its delay, and growing.
        for (gap, expected) in zip(gaps, [0.15, 0.3, 0.6]) { #expect(gap >= expected * 0.9) }
        if gaps.count == 3 { #expect(gaps[2] > gaps[0] * 2) }
    }

    @Test func backoffIsCappedAndJitterOnlyShortens() throws {
        let g = uniqueGroup()
        let c = try run(fixture.url("/flaky?key=\(g)&fail=3&mode=truncated&group=\(g)")) { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.2)
            _ = rq_request_set_retry_backoff(r, 10, 0.25, 0.5)
            #expect(rq_request_set_retry_backoff(r, 0.5, 0, 0) == RQ_ERR_INVALID_ARGUMENT)
            #expect(rq_request_set_retry_backoff(r, 2, 0, 1.5) == RQ_ERR_INVALID_ARGUMENT)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.attempts == 4)
        let starts = fixture.log(group: g).entries.map(\.start)
        let gaps = zip(starts, starts.dropFirst()).map { $1 - $0 }
        // Capped at 0.25 s, at least half of it with jitter 0.5 (and the cap, not 2 s or 20 s).
        #expect(gaps.allSatisfy { $0 >= 0.1 && $0 < 1.5 })
    }

    @Test func retryAfterIsHonouredForChosenStatuses() throws {
        let g = uniqueGroup()
        let c = try run(fixture.url("/flaky?key=\(g)&fail=1&mode=status&code=503&retry_after=1&group=\(g)")) { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            var statuses: [Int32] = [503]
            #expect(rq_request_set_retry_statuses(r, &statuses, 1) == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.attempts == 2)
        let starts = fixture.log(group: g).entries.map(\.start)
        #expect(starts.count == 2)
        if starts.count == 2 { #expect(starts[1] - starts[0] >= 0.9) }
        // A status that is not listed is not retried.
        let h = uniqueGroup()
        let other = try run(fixture.url("/flaky?key=\(h)&fail=1&mode=status&code=502&group=\(h)")) { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            var statuses: [Int32] = [503, 429]
            _ = rq_request_set_retry_statuses(r, &statuses, 2)
        }
        #expect(other.outcome == RQ_OUTCOME_HTTP_STATUS && other.status == 502 && other.attempts == 1)
        var r: OpaquePointer?
        _ = rq_request_new(fixture.url("/"), &r)
        var bad: [Int32] = [200]
        #expect(rq_request_set_retry_statuses(r, &bad, 1) == RQ_ERR_INVALID_ARGUMENT)
        _ = rq_request_free(r)
    }

    @Test func retryAfterBeyondTheCapEndsTheRetries() throws {
        let g = uniqueGroup()
        let c = try run(fixture.url("/flaky?key=\(g)&fail=1&mode=status&code=429&retry_after=120&group=\(g)")) { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            _ = rq_request_set_retry_backoff(r, 1, 5, 0)
            var statuses: [Int32] = [429]
            _ = rq_request_set_retry_statuses(r, &statuses, 1)
        }
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS && c.status == 429 && c.attempts == 1)
    }

    /// Issue 13: a Retry-After date the server makes absurd traps no arithmetic (it ended the
    /// process with SIGILL), with retry off and on; with retry on it is ignored like any unusable
    /// value, so the retry delay applies.
    @Test func absurdRetryAfterDatesAreIgnored() throws {
        for value in ["Sun,%2006%20Nov%20100000000000000%2008:49:37%20GMT", "Sun,%2006%20Nov%20-9223372036854775808%2008:49:37%20GMT"] {
            let off = try run(fixture.url("/status/503?retry_after=\(value)")) { _ in }
            #expect(off.outcome == RQ_OUTCOME_HTTP_STATUS && off.status == 503 && off.attempts == 1)
            let on = try run(fixture.url("/status/429?retry_after=\(value)")) { r in
                _ = rq_request_set_retry(r, 1)
                _ = rq_request_set_retry_delay(r, 0.01)
                _ = rq_request_set_max_attempts(r, 2)
                var statuses: [Int32] = [429]
                _ = rq_request_set_retry_statuses(r, &statuses, 1)
            }
            #expect(on.outcome == RQ_OUTCOME_HTTP_STATUS && on.status == 429 && on.attempts == 2)
        }
    }

    @Test func nonIdempotentMethodsAreNotRetriedUnlessAllowed() throws {
        let g = uniqueGroup()
        let post = try run(fixture.url("/flaky?key=\(g)&fail=1&mode=truncated&group=\(g)")) { r in
            _ = rq_request_set_method(r, "POST")
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        }
        #expect(post.outcome == RQ_OUTCOME_CONNECTION_LOST && post.attempts == 1)
        let h = uniqueGroup()
        let allowed = try run(fixture.url("/flaky?key=\(h)&fail=1&mode=truncated&group=\(h)")) { r in
            _ = rq_request_set_method(r, "POST")
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            _ = rq_request_set_retry_non_idempotent(r, 1)
        }
        #expect(allowed.outcome == RQ_OUTCOME_OK && allowed.attempts == 2)
        let put = try run(fixture.url("/flaky?key=\(h)-put&fail=1&mode=truncated")) { r in
            _ = rq_request_set_method(r, "PUT")
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        }
        #expect(put.outcome == RQ_OUTCOME_OK && put.attempts == 2)
    }

    // MARK: Rate limit

    @Test func rateLimitSpacesStartsAsTheServerSawThem() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        // 2 starts per 0.5 s: a burst of 2, then one every 0.25 s.
        #expect(rq_queue_set_rate_limit(q, 2, 0.5, 0) == RQ_OK)
        #expect(rq_queue_set_rate_limit(q, 2, 0, 0) == RQ_ERR_INVALID_ARGUMENT)
        let rec = Recorder()
        let added = monotonicSeconds()
        for i in 0..<8 { _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(g)&id=\(i)"), tag: "\(i)")) }
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let starts = fixture.log(group: g).entries.map(\.start).sorted()
        #expect(starts.count == 8)
        // From before the adds, on the server's clock: the server may log the first start late (a
        // busy machine), never a later one early.
        for (k, start) in starts.enumerated() where k >= 2 {
            #expect(start - added >= Double(k - 1) * 0.25, "start \(k)")
        }
    }

    @Test func perHostRateLimitLeavesOtherHostsAlone() throws {
        let a = uniqueGroup() + "-a", b = uniqueGroup() + "-b"
        let q = try makeQueue(max: 0)
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_rate_limit(q, 1, 0.4, 1) == RQ_OK)
        let rec = Recorder()
        let added = monotonicSeconds()
        for i in 0..<3 {
            _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1&group=\(a)&id=\(i)"), tag: "a\(i)"))
            _ = addAndRelease(q, try rec.request(otherHost("/bytes?n=1&group=\(b)&id=\(i)"), tag: "b\(i)"))
        }
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let startsA = fixture.log(group: a).entries.map(\.start).sorted()
        let startsB = fixture.log(group: b).entries.map(\.start).sorted()
        #expect(startsA.count == 3 && startsB.count == 3)
        // One start per 0.4 s on each host, as the server saw them, from before the adds (see
        // rateLimitSpacesStartsAsTheServerSawThem).
        for starts in [startsA, startsB] where starts.count == 3 {
            #expect(starts[1] - added >= 0.4 && starts[2] - added >= 0.8)
        }
        // Each host's first request went at once, side by side (one limit for both hosts would
        // have put 0.4 s between them).
        if let a0 = startsA.first, let b0 = startsB.first { #expect(abs(a0 - b0) < 0.3) }
    }

    @Test func statsCountWhatHappened() throws {
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=100"), tag: "ok"))
        _ = addAndRelease(q, try rec.request(fixture.url("/status/500"), tag: "fail"))
        let g = uniqueGroup()
        _ = addAndRelease(q, try rec.request(fixture.url("/flaky?key=\(g)&fail=1&mode=truncated"), tag: "retry") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        })
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        _ = rq_queue_suspend(q)
        _ = addAndRelease(q, try rec.request(fixture.url("/bytes?n=1"), tag: "cancel"))
        _ = rq_queue_cancel_all(q)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        var stats = rq_queue_stats()
        stats.size = MemoryLayout<rq_queue_stats>.size
        #expect(rq_queue_get_stats(q, &stats) == RQ_OK)
        #expect(stats.added == 4 && stats.started == 3 && stats.retried == 1)
        #expect(stats.succeeded == 2 && stats.failed == 1 && stats.cancelled == 1)
        #expect(stats.bytes_down >= 100 + 16)
        var small = rq_queue_stats()
        small.size = 4
        #expect(rq_queue_get_stats(q, &small) == RQ_ERR_INVALID_ARGUMENT)
    }
}

