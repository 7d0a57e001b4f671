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
}

/// When and after how long a failed attempt is tried again.
public struct RetryPolicy: Equatable, Sendable {
    /// The seed's `autoRetryErrorCodes`: failures of a poor or missing connection.
    public static let defaultOutcomes: Set<Outcome> = [.timeout, .cannotResolveHost, .cannotConnect, .connectionLost]

    public var enabled = false
    /// Delay before the next attempt, in seconds (the seed's `autoRetryDelay`, default 5 s).
    public var delay: Double = 5
    public var outcomes: Set<Outcome> = RetryPolicy.defaultOutcomes
    /// Maximum number of attempts, the first included; 0 means unlimited (as in the seed).
    public var maxAttempts: Int = 0

    public init() {}

    /// The delay before the next attempt after attempt number `attempt` (1-based) ended with
    /// `outcome`, or nil when the request completes with that outcome.
    public func delayAfter(attempt: Int, outcome: Outcome) -> Double? {
        guard enabled, outcomes.contains(outcome) else { return nil }
        if maxAttempts > 0, attempt >= maxAttempts { return nil }
        return delay
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
    public static func decide(outcome: Outcome, status: Int, hasAuthHandler: Bool, retry: RetryPolicy,
                              attempt: Int) -> AttemptDecision {
        if outcome == .httpStatus, status == 401, hasAuthHandler { return .challenge }
        if let delay = retry.delayAfter(attempt: attempt, outcome: outcome) { return .retry(after: delay) }
        return .complete
    }
}
