import RequestQueueCore
import Testing

/// Priorities, per-host limits and rate limits of the scheduler, and the richer retry policy.
@Suite struct SchedulerLimitsTests {
    typealias S = Scheduler<Int>

    @Test func priorityLevelsStartHighestFirstAndPrioritiesMove() {
        var s = S()
        s.maxConcurrent = 1
        s.suspend()
        _ = s.add(1, key: nil, priority: -1)
        _ = s.add(2, key: nil, priority: 0)
        _ = s.add(3, key: nil, priority: 2)
        _ = s.add(4, key: nil, priority: 0)
        _ = s.add(5, key: nil, priority: 9)   // clamped to 2
        #expect(s.priority(of: 5) == 2)
        let moved = s.setPriority(1, 1)
        let absent = s.setPriority(99, 1)
        #expect(moved && !absent)
        #expect(s.snapshot().waiting == [3, 5, 1, 2, 4])
        s.resume()
        var order: [UInt64] = []
        while let id = s.takeStartable().first {
            order.append(id)
            s.remove(id)
        }
        #expect(order == [3, 5, 1, 2, 4])
    }

    @Test func perHostLimitSkipsBusyOriginsWithoutLosingTheirPlace() {
        var s = S()
        s.maxConcurrent = 0
        s.maxPerHost = 1
        _ = s.add(1, key: nil, origin: "a")
        _ = s.add(2, key: nil, origin: "a")
        _ = s.add(3, key: nil, origin: "b")
        _ = s.add(4, key: nil, origin: "a")
        var started = s.takeStartable()
        #expect(started == [1, 3])
        #expect(s.runningCount(origin: "a") == 1)
        s.remove(3)
        started = s.takeStartable()
        #expect(started == [])
        s.remove(1)
        started = s.takeStartable()
        #expect(started == [2])
        s.remove(2)
        started = s.takeStartable()
        #expect(started == [4])
        #expect(s.waitingCount == 0)
    }

    @Test func rateLimitReleasesStartsAsTokensRefill() {
        var s = S()
        s.maxConcurrent = 0
        s.rateLimit = RateLimit(starts: 2, interval: 1, perHost: false)
        for id in 1...5 { _ = s.add(UInt64(id), key: nil) }
        var started = s.takeStartable(now: 100)
        #expect(started == [1, 2])
        started = s.takeStartable(now: 100.2)
        #expect(started == [])
        let next = s.nextStartTime(now: 100.2)
        #expect(next != nil && abs((next ?? 0) - 100.5) < 1e-9)
        started = s.takeStartable(now: 100.5)
        #expect(started == [3])
        started = s.takeStartable(now: 101.5)
        #expect(started == [4, 5])
        let none = s.nextStartTime(now: 101.5)
        #expect(none == nil)
    }

    @Test func perHostRateLimitKeepsBucketsApart() {
        var s = S()
        s.maxConcurrent = 0
        s.rateLimit = RateLimit(starts: 1, interval: 1, perHost: true)
        _ = s.add(1, key: nil, origin: "a")
        _ = s.add(2, key: nil, origin: "a")
        _ = s.add(3, key: nil, origin: "b")
        var started = s.takeStartable(now: 0)
        #expect(started == [1, 3])
        started = s.takeStartable(now: 0.5)
        #expect(started == [])
        started = s.takeStartable(now: 1.0)
        #expect(started == [2])
    }

    @Test func tokenBucketRefillsContinuouslyUpToItsCapacity() {
        var bucket = TokenBucket(capacity: 4, interval: 2, now: 0)
        var taken = 0
        for _ in 0..<5 where bucket.take(now: 0) { taken += 1 }
        #expect(taken == 4)
        let next = bucket.nextToken(now: 0)
        #expect(next == 0.5)
        let refilled = bucket.take(now: 0.5)
        #expect(refilled)
        let later = bucket.nextToken(now: 100)
        #expect(later == 100)
        #expect(bucket.tokens == 4)
    }

    @Test func exponentialBackoffWithCapAndJitter() {
        var p = RetryPolicy()
        p.enabled = true
        p.delay = 1
        p.multiplier = 2
        #expect(p.delayAfter(attempt: 1, outcome: .timeout) == 1)
        #expect(p.delayAfter(attempt: 2, outcome: .timeout) == 2)
        #expect(p.delayAfter(attempt: 4, outcome: .timeout) == 8)
        p.maxDelay = 5
        #expect(p.delayAfter(attempt: 4, outcome: .timeout) == 5)
        p.jitter = 0.5
        #expect(p.delayAfter(attempt: 4, outcome: .timeout, random: 0) == 5)
        #expect(p.delayAfter(attempt: 4, outcome: .timeout, random: 0.5) == 3.75)
        #expect(p.delayAfter(attempt: 4, outcome: .timeout, random: 0.999)! > 2.5)
        #expect(p.delayAfter(attempt: 1000, outcome: .timeout, random: 0) == 5)
    }

    @Test func statusesRetryAfterAndIdempotency() {
        var p = RetryPolicy()
        p.enabled = true
        p.delay = 0.1
        p.statuses = [503, 429]
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus, status: 503) == 0.1)
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus, status: 500) == nil)
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus, status: 503, retryAfter: 3) == 3)
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus, status: 429, retryAfter: 0) == 0.1)
        p.maxDelay = 2
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus, status: 503, retryAfter: 3) == nil)
        #expect(p.delayAfter(attempt: 1, outcome: .timeout, method: "POST") == nil)
        #expect(p.delayAfter(attempt: 1, outcome: .timeout, method: "PATCH") == nil)
        #expect(p.delayAfter(attempt: 1, outcome: .timeout, method: "DELETE") == 0.1)
        p.retriesNonIdempotent = true
        #expect(p.delayAfter(attempt: 1, outcome: .timeout, method: "POST") == 0.1)
    }

    @Test func retryAfterValues() {
        #expect(RetryPolicy.retryAfterSeconds("120", now: 0) == 120)
        #expect(RetryPolicy.retryAfterSeconds(" 7 ", now: 0) == 7)
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT.
        #expect(RetryPolicy.retryAfterSeconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784111777 - 30) == 30)
        #expect(RetryPolicy.retryAfterSeconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784111777 + 30) == 0)
        #expect(RetryPolicy.retryAfterSeconds("Thu, 01 Jan 1970 00:00:00 GMT", now: -5) == 5)
        #expect(RetryPolicy.retryAfterSeconds("Sat, 29 Feb 2020 12:00:00 GMT", now: 1582977600 - 1) == 1)
        for bad in ["", "soon", "-5", "1.5", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "99999999999"] {
            #expect(RetryPolicy.retryAfterSeconds(bad, now: 0) == nil, "\(bad)")
        }
    }

    /// RFC 9110 5.6.7: a recipient MUST accept the two obsolete HTTP-date formats too, and read
    /// rfc850-date's two-digit year as at most 50 years ahead.
    @Test func retryAfterObsoleteDateFormats() {
        #expect(RetryPolicy.retryAfterSeconds("Sunday, 06-Nov-94 08:49:37 GMT", now: 784111777 - 30) == 30)
        #expect(RetryPolicy.retryAfterSeconds("Sun Nov  6 08:49:37 1994", now: 784111777 - 30) == 30)
        #expect(RetryPolicy.retryAfterSeconds("Sun Nov 16 08:49:37 1994", now: 784111777 - 30) == 864030)  // ten days later
        // 1767225600 is Thu, 01 Jan 2026 00:00:00 GMT: "30" is 2030, "94" 1994 (2094 is more
        // than 50 years ahead), "76" 2076 (50 years ahead).
        let newYear2026 = 1767225600.0
        #expect(RetryPolicy.retryAfterSeconds("Tuesday, 01-Jan-30 00:00:00 GMT", now: newYear2026) == 1893456000 - newYear2026)
        #expect(RetryPolicy.retryAfterSeconds("Sunday, 06-Nov-94 08:49:37 GMT", now: newYear2026) == 0)
        #expect(RetryPolicy.retryAfterSeconds("Wednesday, 01-Jan-76 00:00:00 GMT", now: newYear2026) == 3345062400 - newYear2026)
        for bad in ["Sunday, 06-Nov-1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 UTC", "Sunday 06-Nov-94 08:49:37 GMT",
                    "Sunday, 6-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-94", "Sun Nov  6 08:49:37 94", "Sun Nov 6 08:49:37",
                    "Sun Nov  6 08:49:37 1994 GMT", "Sun Foo  6 08:49:37 1994", "Sun Nov 32 08:49:37 1994",
                    "Sun Nov 123 08:49:37 1994", "Sun Nov  6 8:49:37 1994", "Sun Nov  6 08:49:37 99999"] {
            #expect(RetryPolicy.retryAfterSeconds(bad, now: newYear2026) == nil, "\(bad)")
        }
    }
}
