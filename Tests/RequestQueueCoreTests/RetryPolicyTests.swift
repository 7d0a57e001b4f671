import Testing
import RequestQueueCore

private func policy(enabled: Bool = true, delay: Double = 5, outcomes: Set<Outcome>? = nil,
                    maxAttempts: Int = 0) -> RetryPolicy {
    var p = RetryPolicy()
    p.enabled = enabled
    p.delay = delay
    if let outcomes { p.outcomes = outcomes }
    p.maxAttempts = maxAttempts
    return p
}

@Suite struct RetryPolicyTests {
    @Test func outcomeValuesMatchTheCHeader() {
        // rq_outcome in include/requestqueue.h; these values are never renumbered.
        let expected: [(Outcome, Int32)] = [
            (.ok, 0), (.cancelled, 1), (.httpStatus, 2), (.timeout, 3), (.cannotResolveHost, 4),
            (.cannotConnect, 5), (.connectionLost, 6), (.tls, 7), (.tooManyRedirects, 8),
            (.badResponse, 9), (.badRedirect, 10), (.transport, 11), (.responseTooLarge, 12), (.fileError, 13),
        ]
        #expect(Outcome.allCases.count == expected.count)
        for (outcome, value) in expected {
            #expect(outcome.rawValue == value)
            #expect(Outcome(rawValue: value) == outcome)
        }
        #expect(Outcome(rawValue: Int32(expected.count)) == nil)
        #expect(Outcome(rawValue: -1) == nil)
    }

    @Test func defaults() {
        let p = RetryPolicy()
        #expect(p.enabled == false)
        #expect(p.delay == 5)
        #expect(p.maxAttempts == 0)
        #expect(p.outcomes == RetryPolicy.defaultOutcomes)
        #expect(RetryPolicy.defaultOutcomes == [.timeout, .cannotResolveHost, .cannotConnect, .connectionLost])
        #expect(p == RetryPolicy())
    }

    @Test func disabledNeverRetries() {
        let p = policy(enabled: false)
        for outcome in Outcome.allCases {
            for attempt in [1, 2, 100] {
                #expect(p.delayAfter(attempt: attempt, outcome: outcome) == nil)
                #expect(AttemptDecision.decide(outcome: outcome, status: 0, hasAuthHandler: false, retry: p,
                                               attempt: attempt) == .complete)
            }
        }
        // Disabled even with every outcome in the set.
        let all = policy(enabled: false, outcomes: Set(Outcome.allCases))
        #expect(all.delayAfter(attempt: 1, outcome: .timeout) == nil)
    }

    @Test func enabledRetriesExactlyTheDefaultOutcomesWithoutLimit() {
        let p = policy()
        let retried = Set(Outcome.allCases.filter { p.delayAfter(attempt: 1, outcome: $0) != nil })
        #expect(retried == [.timeout, .cannotResolveHost, .cannotConnect, .connectionLost])
        // maxAttempts 0: unlimited, as in the original RequestQueue.
        for attempt in [1, 2, 10, 1_000_000] {
            #expect(p.delayAfter(attempt: attempt, outcome: .connectionLost) == 5)
            #expect(AttemptDecision.decide(outcome: .timeout, status: 0, hasAuthHandler: false, retry: p,
                                           attempt: attempt) == .retry(after: 5))
        }
    }

    @Test(arguments: [400, 401, 403, 404, 429, 500, 502, 503, 504])
    func httpStatusIsNeverRetriedByDefault(status: Int) {
        let p = policy()
        #expect(p.delayAfter(attempt: 1, outcome: .httpStatus) == nil)
        #expect(AttemptDecision.decide(outcome: .httpStatus, status: status, hasAuthHandler: false, retry: p,
                                       attempt: 1) == .complete)
    }

    @Test func okAndCancelledCompleteUnderTheDefaultPolicy() {
        let p = policy()
        #expect(AttemptDecision.decide(outcome: .ok, status: 200, hasAuthHandler: true, retry: p, attempt: 1) == .complete)
        #expect(AttemptDecision.decide(outcome: .cancelled, status: 0, hasAuthHandler: true, retry: p, attempt: 1) == .complete)
    }

    @Test func maxAttemptsCountsTheFirstAttempt() {
        let three = policy(maxAttempts: 3)
        #expect(three.delayAfter(attempt: 1, outcome: .timeout) == 5)
        #expect(three.delayAfter(attempt: 2, outcome: .timeout) == 5)
        #expect(three.delayAfter(attempt: 3, outcome: .timeout) == nil)
        #expect(three.delayAfter(attempt: 4, outcome: .timeout) == nil)
        #expect(AttemptDecision.decide(outcome: .cannotConnect, status: 0, hasAuthHandler: false, retry: three,
                                       attempt: 2) == .retry(after: 5))
        #expect(AttemptDecision.decide(outcome: .cannotConnect, status: 0, hasAuthHandler: false, retry: three,
                                       attempt: 3) == .complete)
        // One attempt in all: never retried.
        let one = policy(maxAttempts: 1)
        #expect(one.delayAfter(attempt: 1, outcome: .timeout) == nil)
        let two = policy(maxAttempts: 2)
        #expect(two.delayAfter(attempt: 1, outcome: .timeout) == 5)
        #expect(two.delayAfter(attempt: 2, outcome: .timeout) == nil)
        // The limit does not make other outcomes retryable.
        #expect(three.delayAfter(attempt: 1, outcome: .tls) == nil)
    }

    @Test func customOutcomeSets() {
        let tlsOnly = policy(outcomes: [.tls])
        #expect(tlsOnly.delayAfter(attempt: 1, outcome: .tls) == 5)
        #expect(tlsOnly.delayAfter(attempt: 1, outcome: .timeout) == nil)
        let retried = Set(Outcome.allCases.filter { tlsOnly.delayAfter(attempt: 1, outcome: $0) != nil })
        #expect(retried == [.tls])

        let none = policy(outcomes: [])
        #expect(Outcome.allCases.allSatisfy { none.delayAfter(attempt: 1, outcome: $0) == nil })

        let several = policy(outcomes: [.badResponse, .transport, .tooManyRedirects])
        let retriedSeveral = Set(Outcome.allCases.filter { several.delayAfter(attempt: 1, outcome: $0) != nil })
        #expect(retriedSeveral == [.badResponse, .transport, .tooManyRedirects])
        #expect(several != RetryPolicy())
    }

    @Test func delayIsPassedThrough() {
        for delay in [0, 0.001, 0.25, 5, 1_000_000] as [Double] {
            let p = policy(delay: delay)
            #expect(p.delayAfter(attempt: 1, outcome: .timeout) == delay)
            #expect(AttemptDecision.decide(outcome: .connectionLost, status: 0, hasAuthHandler: false, retry: p,
                                           attempt: 1) == .retry(after: delay))
        }
    }

    // MARK: Authentication challenges

    @Test func unauthorizedWithAHandlerIsAChallengeWhateverTheRetryPolicy() {
        let policies = [
            RetryPolicy(), policy(), policy(maxAttempts: 1), policy(outcomes: [.httpStatus]),
            policy(outcomes: [.httpStatus], maxAttempts: 1),
        ]
        for p in policies {
            for attempt in [1, 2, 50] {
                #expect(AttemptDecision.decide(outcome: .httpStatus, status: 401, hasAuthHandler: true, retry: p,
                                               attempt: attempt) == .challenge)
            }
        }
    }

    @Test func unauthorizedWithoutAHandlerCompletes() {
        for p in [RetryPolicy(), policy(), policy(outcomes: Set(Outcome.allCases).subtracting([.httpStatus]))] {
            #expect(AttemptDecision.decide(outcome: .httpStatus, status: 401, hasAuthHandler: false, retry: p,
                                           attempt: 1) == .complete)
        }
    }

    @Test func onlyA401HTTPStatusIsAChallenge() {
        let p = RetryPolicy()
        for status in [400, 403, 407, 500] {
            #expect(AttemptDecision.decide(outcome: .httpStatus, status: status, hasAuthHandler: true, retry: p,
                                           attempt: 1) == .complete)
        }
        // A status of 401 with another outcome (e.g. the connection broke while reading the 401
        // body) follows the retry policy, not the handler.
        #expect(AttemptDecision.decide(outcome: .connectionLost, status: 401, hasAuthHandler: true, retry: p,
                                       attempt: 1) == .complete)
        #expect(AttemptDecision.decide(outcome: .connectionLost, status: 401, hasAuthHandler: true, retry: policy(),
                                       attempt: 1) == .retry(after: 5))
        #expect(AttemptDecision.decide(outcome: .ok, status: 401, hasAuthHandler: true, retry: p,
                                       attempt: 1) == .complete)
    }

    /// What the core does when the caller puts `.httpStatus` into the retry set. The C API lets a
    /// caller do so (`rq_request_set_retry_outcomes` refuses only OK and CANCELLED), while the
    /// header's `rq_request_set_retry` says "HTTP statuses are never retried": see the report.
    @Test func httpStatusInACustomSetIsRetried() {
        let p = policy(delay: 2, outcomes: [.httpStatus])
        #expect(AttemptDecision.decide(outcome: .httpStatus, status: 503, hasAuthHandler: false, retry: p,
                                       attempt: 1) == .retry(after: 2))
        #expect(AttemptDecision.decide(outcome: .httpStatus, status: 401, hasAuthHandler: false, retry: p,
                                       attempt: 1) == .retry(after: 2))
        // The handler still wins for 401.
        #expect(AttemptDecision.decide(outcome: .httpStatus, status: 401, hasAuthHandler: true, retry: p,
                                       attempt: 1) == .challenge)
    }
}
