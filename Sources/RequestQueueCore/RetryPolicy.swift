/// The outcome of one request, with the values of the C API's `rq_outcome` (never renumbered).
public enum Outcome: Int32, Sendable, CaseIterable {
    case ok = 0
    case cancelled = 1
    case httpStatus = 2
    case timeout = 3
    case cannotResolveHost = 4
    case cannotConnect = 5
    case connectionLost = 6
    case tls = 7
    case tooManyRedirects = 8
    case badResponse = 9
    case badRedirect = 10
    case transport = 11
    case responseTooLarge = 12
    case fileError = 13
}

/// When and after how long a failed attempt is tried again.
public struct RetryPolicy: Equatable, Sendable {
    /// The seed's `autoRetryErrorCodes`: failures of a poor or missing connection.
    public static let defaultOutcomes: Set<Outcome> = [.timeout, .cannotResolveHost, .cannotConnect, .connectionLost]

    public var enabled = false
    /// Delay before the second attempt, in seconds (the seed's `autoRetryDelay`, default 5 s).
    public var delay: Double = 5
    /// Each further delay is the previous one times this (1 = fixed delay).
    public var multiplier: Double = 1
    /// Upper bound of a delay, Retry-After included; 0 = none. A Retry-After above it ends the
    /// retries instead of being shortened.
    public var maxDelay: Double = 0
    /// Fraction of each delay drawn at random and taken off (0 = none, 1 = "full jitter").
    public var jitter: Double = 0
    public var outcomes: Set<Outcome> = RetryPolicy.defaultOutcomes
    /// HTTP statuses retried (besides all of them when `outcomes` has `.httpStatus`).
    public var statuses: Set<Int> = []
    /// Maximum number of attempts, the first included; 0 means unlimited (as in the seed).
    public var maxAttempts: Int = 0
    /// Whether a non-idempotent method (POST, PATCH, ...) may be retried.
    public var retriesNonIdempotent = false

    public init() {}

    /// The delay before the next attempt after attempt number `attempt` (1-based) ended with
    /// `outcome` and `status`, or nil when the request completes. `retryAfter` is the server's
    /// Retry-After in seconds (used for 429 and 503), `random` a number in [0, 1) for the jitter.
    public func delayAfter(attempt: Int, outcome: Outcome, status: Int = 0, method: String = "GET",
                           retryAfter: Double? = nil, random: Double = 0) -> Double? {
        guard enabled else { return nil }
        let retryable = outcomes.contains(outcome) || (outcome == .httpStatus && statuses.contains(status))
        guard retryable else { return nil }
        if !retriesNonIdempotent, !HTTPMethods.idempotent.contains(method) { return nil }
        if maxAttempts > 0, attempt >= maxAttempts { return nil }
        var next = delay
        if multiplier != 1 {
            next = delay * pow(multiplier, Double(max(0, attempt - 1)))
        }
        if maxDelay > 0 { next = min(next, maxDelay) }
        next *= 1 - jitter * min(max(random, 0), 1)
        if outcome == .httpStatus, status == 429 || status == 503, let retryAfter {
            if maxDelay > 0, retryAfter > maxDelay { return nil }
            next = max(next, retryAfter)
        }
        return next
    }

    private func pow(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        var i = 0.0
        while i < exponent, result < 1e12 {
            result *= base
            i += 1
        }
        return result
    }

    /// Seconds to wait from a Retry-After value: a number of seconds (at most 9 digits), or an
    /// HTTP-date in any of its three formats (RFC 9110 5.6.7: an IMF-fixdate "Sun, 06 Nov 1994
    /// 08:49:37 GMT", years 1 to 9999, and the obsolete "Sunday, 06-Nov-94 08:49:37 GMT" and
    /// "Sun Nov  6 08:49:37 1994") compared with `now` (seconds since 1970). Nil when the value is
    /// none of these, or `now` is not finite. The server sends this value: nothing in it can
    /// overflow.
    public static func retryAfterSeconds(_ value: String, now: Double) -> Double? {
        guard now.isFinite else { return nil }
        let trimmed = value.trimmingSpaces
        if let seconds = decimal(Substring(trimmed), digits: 1...9) { return Double(seconds) }
        guard let date = httpDate(trimmed, now: now) else { return nil }
        return max(0, date - now)
    }

    /// A number of `digits` decimal digits and nothing else (no sign), or nil.
    private static func decimal(_ text: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    /// Parses an HTTP-date to seconds since 1970: an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37
    /// GMT"), an rfc850-date ("Sunday, 06-Nov-94 08:49:37 GMT", whose two-digit year is the one
    /// at most 50 years after the year of `now`, as RFC 9110 5.6.7 says) or an asctime-date ("Sun
    /// Nov  6 08:49:37 1994"). The weekday is not checked. Each field is range-checked before any
    /// arithmetic: the result is within years 1 to 9999.
    static func httpDate(_ text: String, now: Double) -> Double? {
        let parts = text.split(separator: " ")
        let day: Int?, month: Substring, year: Int?, time: Substring
        if parts.count == 6, parts[5] == "GMT" {
            (day, month, year, time) = (decimal(parts[1], digits: 1...2), parts[2], decimal(parts[3], digits: 4...4), parts[4])
        } else if parts.count == 4, parts[3] == "GMT", parts[0].last == "," {
            let date = parts[1].split(separator: "-", omittingEmptySubsequences: false)
            guard date.count == 3, let yy = decimal(date[2], digits: 2...2), now.magnitude < 1e15 else { return nil }
            let thisYear = civilYear(days: Int((now / 86400).rounded(.down)))
            var full = thisYear - thisYear % 100 + yy
            if full > thisYear + 50 { full -= 100 }
            (day, month, year, time) = (decimal(date[0], digits: 2...2), date[1], full, parts[2])
        } else if parts.count == 5 {
            (day, month, year, time) = (decimal(parts[2], digits: 1...2), parts[1], decimal(parts[4], digits: 4...4), parts[3])
        } else {
            return nil
        }
        guard let day, let year, (1...9999).contains(year) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(month)) else { return nil }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, let h = decimal(clock[0], digits: 2...2), let m = decimal(clock[1], digits: 2...2),
              let sec = decimal(clock[2], digits: 2...2),
              (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(sec) else { return nil }
        // Days from civil (Howard Hinnant's algorithm); with the ranges above no step overflows.
        let month1 = monthIndex + 1
        let y = month1 <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month1 + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return Double(days * 86400 + h * 3600 + m * 60 + sec)
    }

    /// The year of a day counted from 1970-01-01 (civil from days, Howard Hinnant's algorithm;
    /// `days` within about 1e10, so no step overflows).
    private static func civilYear(days: Int) -> Int {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        return yoe + era * 400 + (mp >= 10 ? 1 : 0)
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// What happens after one attempt of a request ends.
public enum AttemptDecision: Equatable, Sendable {
    /// The request completes with this attempt's outcome.
    case complete
    /// The server asks for credentials and the request has a handler: ask it.
    case challenge
    /// Start another attempt after this many seconds.
    case retry(after: Double)

    /// Decides after attempt number `attempt` (1-based) ended with `outcome` and HTTP `status`.
    /// `retry` nil: no retry (as a disabled policy, without copying one).
    public static func decide(outcome: Outcome, status: Int, hasAuthHandler: Bool, retry: RetryPolicy?,
                              attempt: Int, method: String = "GET", retryAfter: Double? = nil,
                              random: Double = 0) -> AttemptDecision {
        if outcome == .httpStatus, status == 401, hasAuthHandler { return .challenge }
        if let delay = retry?.delayAfter(attempt: attempt, outcome: outcome, status: status, method: method,
                                         retryAfter: retryAfter, random: random) {
            return .retry(after: delay)
        }
        return .complete
    }
}
