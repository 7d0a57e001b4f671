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
    /// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", years 1 to 9999) compared with `now`
    /// (seconds since 1970). Nil when the value is neither, or `now` is not finite. The server
    /// sends this value: nothing in it can overflow.
    public static func retryAfterSeconds(_ value: String, now: Double) -> Double? {
        guard now.isFinite else { return nil }
        let trimmed = value.trimmingSpaces
        if let seconds = decimal(Substring(trimmed), digits: 1...9) { return Double(seconds) }
        guard let date = httpDate(trimmed) else { return nil }
        return max(0, date - now)
    }

    /// A number of `digits` decimal digits and nothing else (no sign), or nil.
    private static func decimal(_ text: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    /// Parses an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") to seconds since 1970. Each field
    /// is range-checked before any arithmetic: the result is within years 1 to 9999.
    static func httpDate(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = decimal(parts[1], digits: 1...2),
              let year = decimal(parts[3], digits: 4...4), (1...9999).contains(year) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let time = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard time.count == 3, let h = decimal(time[0], digits: 2...2), let m = decimal(time[1], digits: 2...2),
              let sec = decimal(time[2], digits: 2...2),
              (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(sec) else { return nil }
        // Days from civil (Howard Hinnant's algorithm); with the ranges above no step overflows.
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return Double(days * 86400 + h * 3600 + m * 60 + sec)
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
