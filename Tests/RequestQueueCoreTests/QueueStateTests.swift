import Testing
@testable import RequestQueueCore

/// Requests are their own ids here (`Ref` = the id); keys are strings.
private typealias State = QueueState<String, UInt64>
private typealias Action = QueueAction<UInt64>

/// The time a state reads (`QueueState(clock:)`), set by a test; counts its reads.
private final class TestClock {
    var now = 0.0
    private(set) var reads = 0

    func read() -> Double {
        reads += 1
        return now
    }
}

private func state(max: Int = 2, duplicates: Duplicates = .cancelEarlier, clock: TestClock = TestClock()) -> State {
    let s = State(clock: clock.read)
    _ = s.setMaxConcurrent(max)
    s.setDuplicates(duplicates)
    return s
}

private func retrying(maxAttempts: Int = 3, delay: Double = 2) -> RetryPolicy {
    var p = RetryPolicy()
    p.enabled = true
    p.delay = delay
    p.maxAttempts = maxAttempts
    return p
}

private let ok = AttemptReport(outcome: .ok, status: 200, downloaded: 10, uploaded: 3)
private let timedOut = AttemptReport(outcome: .timeout)
private let unauthorized = AttemptReport(outcome: .httpStatus, status: 401)

extension QueueState where Key == String, Ref == UInt64 {
    /// Adds `id` (its own key unless given one); returns the actions.
    func add(_ id: UInt64, key: String? = nil, traits: RequestTraits = RequestTraits()) -> [QueueAction<UInt64>] {
        Array(add(id, id, traits: traits, key: { key ?? "key-\(id)" }, origin: { "http://h\(id % 2)" }))
    }

    /// Attempt `generation` of `id` ended with `report`; a GET, retried under `retry`.
    func ended(_ id: UInt64, _ generation: UInt64, _ report: AttemptReport,
               retry: RetryPolicy = RetryPolicy()) -> [QueueAction<UInt64>] {
        Array(attemptEnded(id, generation: generation, report, retry: retry, method: "GET", random: 0))
    }

    func cancelled(_ id: UInt64, reason: CancelReason = .caller) -> [QueueAction<UInt64>]? {
        cancel(id, reason: reason).map { Array($0) }
    }
}

private func start(_ id: UInt64, _ generation: UInt64 = 1, attempt: Int = 1) -> Action {
    .start(id, generation: generation, attempt: attempt)
}

private func done(_ id: UInt64, _ ending: Ending = .reported, attempts: Int = 1, sharing: Bool = false) -> Action {
    .complete(id, ending, attempts: attempts, sharing: sharing)
}

@Suite struct QueueStateTests {
    // MARK: Order and limits

    @Test func startsInOrderWithinTheLimitAndTheNextWhenOneCompletes() {
        let s = state(max: 2)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [start(2)])
        #expect(s.add(3) == [])
        #expect(s.phase(of: 3) == .waiting)
        #expect(s.ended(2, 1, ok) == [done(2), start(3)])
        #expect(s.ended(1, 1, ok) == [done(1)])
        #expect(s.ended(3, 1, ok) == [done(3)])
        #expect(s.count == 0)
        #expect(s.stats.added == 3)
        #expect(s.stats.started == 3)
        #expect(s.stats.succeeded == 3)
        #expect(s.stats.bytesDown == 30)
        #expect(s.stats.bytesUp == 9)
    }

    @Test func settingsThatMakeRoomStartWaitingRequests() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.add(3) == [])
        #expect(Array(s.setMaxConcurrent(3)) == [start(2), start(3)])
        s.suspend()
        #expect(s.add(4) == [])
        #expect(s.ended(1, 1, ok) == [done(1)])
        #expect(Array(s.resume()) == [start(4)])
    }

    @Test func priorityOrdersWaitingRequests() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.add(3, traits: RequestTraits(priority: 2)) == [])
        #expect(Array(s.setPriority(2, 2)) == [])
        #expect(s.snapshot() == [1, 3, 2])
        #expect(s.ended(1, 1, ok) == [done(1), start(3)])
    }

    @Test func theRateLimitAsksForAWakeUpOnceAndStartsWhenItComes() {
        let clock = TestClock()
        let s = state(max: 0, clock: clock)
        #expect(Array(s.setRateLimit(RateLimit(starts: 1, interval: 10, perHost: false), origin: { _ in "" })) == [])
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [.wake(at: 10)])
        #expect(s.add(3) == [])  // the same wake-up serves it
        clock.now = 5
        #expect(Array(s.startDue()) == [.wake(at: 10)])
        clock.now = 10
        #expect(Array(s.startDue()) == [start(2), .wake(at: 20)])
    }

    /// Only a rate limit's tokens depend on the time: without one, nothing reads the clock.
    @Test func theClockIsReadOnlyUnderARateLimit() {
        let clock = TestClock()
        let s = state(max: 1, clock: clock)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.add(3) == [])
        #expect(s.cancelled(3) == [done(3, .cancelled(.caller), attempts: 0)])
        #expect(s.ended(1, 1, ok) == [done(1), start(2)])
        s.suspend()
        #expect(s.add(4) == [])
        #expect(Array(s.resume()) == [])
        #expect(clock.reads == 0)
        #expect(Array(s.setRateLimit(RateLimit(starts: 5, interval: 10, perHost: false), origin: { _ in "" })) == [])
        #expect(s.ended(2, 1, ok) == [done(2), start(4)])
        #expect(clock.reads > 0)
    }

    // MARK: Attempts

    @Test func aRetriedAttemptWaitsForItsTimerAndCountsWhenItStarts() {
        let s = state()
        let policy = retrying(delay: 2)
        #expect(s.add(1) == [start(1)])
        #expect(s.ended(1, 1, timedOut, retry: policy) == [.retry(1, generation: 2, after: 2)])
        #expect(s.phase(of: 1) == .retryWait)
        #expect(s.stats.retried == 1)
        // Reports of the ended attempt, and an early start of the next, count for nothing.
        #expect(s.ended(1, 1, ok, retry: policy) == [])
        #expect(!s.isCurrent(1, generation: 1))
        #expect(!s.isCurrent(1, generation: 2))
        #expect(Array(s.retryDue(1, generation: 1)) == [])
        #expect(Array(s.retryDue(1, generation: 2)) == [start(1, 2, attempt: 2)])
        #expect(Array(s.retryDue(1, generation: 2)) == [])
        #expect(s.isCurrent(1, generation: 2))
        #expect(s.ended(1, 2, timedOut, retry: policy) == [.retry(1, generation: 3, after: 2)])
        #expect(Array(s.retryDue(1, generation: 3)) == [start(1, 3, attempt: 3)])
        // The third attempt is the last.
        #expect(s.ended(1, 3, timedOut, retry: policy) == [done(1, attempts: 3)])
        #expect(s.stats.failed == 1)
        #expect(s.stats.started == 1)
    }

    @Test func aFailedStartCompletesWithTheReportAndStartsTheNext() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(Array(s.failedToStart(1, generation: 7, timedOut)) == [])
        #expect(Array(s.failedToStart(1, generation: 1, AttemptReport(outcome: .transport))) == [done(1), start(2)])
        #expect(s.stats.failed == 1)
    }

    @Test func aChallengeWaitsForTheAnswerAndCountsRejectedCredentials() {
        let s = state()
        #expect(s.add(1, traits: RequestTraits(hasAuthHandler: true)) == [start(1)])
        #expect(s.ended(1, 1, unauthorized) == [.challenge(1, generation: 1, failures: 0)])
        #expect(s.phase(of: 1) == .authWait)
        #expect(s.awaitsAnswer(1, generation: 1))
        #expect(s.answer(1, generation: 0, .credential) == nil)
        #expect(s.answer(1, generation: 1, .credential).map { Array($0) } == [start(1, 2, attempt: 1)])
        // Answered once: a second answer to the same challenge is refused.
        #expect(s.answer(1, generation: 1, .cancel) == nil)
        #expect(s.ended(1, 2, unauthorized) == [.challenge(1, generation: 2, failures: 1)])
        #expect(s.answer(1, generation: 2, .continueWithout(unauthorized)).map { Array($0) } == [done(1)])
        #expect(s.stats.failed == 1)
    }

    /// A server that rejects every credential: each answer is a new exchange at once, so a handler
    /// that always answers would send requests forever (thousands a second). The tenth rejected
    /// credential completes the request with its 401, as without a handler.
    @Test func rejectedCredentialsHaveABudget() {
        let s = state()
        #expect(s.add(1, traits: RequestTraits(hasAuthHandler: true)) == [start(1)])
        #expect(s.ended(1, 1, unauthorized) == [.challenge(1, generation: 1, failures: 0)])
        for failures in 1..<QueueState<String, UInt64>.rejectedCredentialsLimit {
            let generation = UInt64(failures)
            #expect(s.answer(1, generation: generation, .credential).map { Array($0) }
                    == [start(1, generation + 1, attempt: 1)])
            #expect(s.ended(1, generation + 1, unauthorized) == [.challenge(1, generation: generation + 1, failures: failures)])
        }
        let last = UInt64(QueueState<String, UInt64>.rejectedCredentialsLimit)
        #expect(s.answer(1, generation: last, .credential).map { Array($0) } == [start(1, last + 1, attempt: 1)])
        #expect(s.ended(1, last + 1, unauthorized) == [done(1)])
        #expect(s.stats.failed == 1)
    }

    @Test func withoutAHandlerA401Completes() {
        let s = state()
        #expect(s.add(1) == [start(1)])
        #expect(s.ended(1, 1, unauthorized) == [done(1)])
    }

    @Test func theAuthHandlersCancelEndsTheRequestAndStartsTheNext() {
        let s = state(max: 1)
        #expect(s.add(1, traits: RequestTraits(hasAuthHandler: true)) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.ended(1, 1, unauthorized) == [.challenge(1, generation: 1, failures: 0)])
        #expect(s.answer(1, generation: 1, .cancel).map { Array($0) } == [done(1, .cancelled(.authHandler)), start(2)])
    }

    @Test func deferredHeadsGoToThoseWithAHeadCallbackOnRetryAndCompletion() {
        let s = state()
        var report = timedOut
        report.hasDeferredHead = true
        #expect(s.add(1, traits: RequestTraits(wantsHead: true)) == [start(1)])
        #expect(s.add(2) == [start(2)])
        #expect(s.ended(1, 1, report, retry: retrying()) == [.head(1), .retry(1, generation: 2, after: 2)])
        report.outcome = .ok
        #expect(s.ended(2, 1, report) == [done(2)])
    }

    // MARK: Cancelling in every state

    @Test func cancellingAWaitingRequestNeedsNoAbort() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.cancelled(2) == [done(2, .cancelled(.caller), attempts: 0)])
        #expect(s.cancelled(2) == nil)
        #expect(s.stats.cancelled == 1)
    }

    @Test func cancellingARunningRequestAbortsItAndStartsTheNext() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.cancelled(1) == [.abort(1), done(1, .cancelled(.caller)), start(2)])
        // The cancelled attempt's late report changes nothing: one completion.
        #expect(s.ended(1, 1, ok) == [])
        #expect(s.stats.succeeded == 0)
        #expect(s.stats.cancelled == 1)
    }

    @Test func aLateReportOfAGoneRequestDoesNotCountForTheNextRequestInItsSlot() {
        // Ids are slots: the runtime gives a freed request's id to the next one. The attempts of
        // the new request go on from the generation the old one reached, so the old request's
        // late report (its abort not yet seen by the engine) matches nothing.
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.cancelled(1) == [.abort(1), done(1, .cancelled(.caller))])
        #expect(s.add(1) == [start(1, 2)])
        #expect(s.ended(1, 1, timedOut) == [])
        #expect(s.phase(of: 1) == .running)
        // The same after a completion, and after a retried attempt raised the generation.
        #expect(s.ended(1, 2, timedOut, retry: retrying()) == [.retry(1, generation: 3, after: 2)])
        #expect(Array(s.retryDue(1, generation: 3)) == [start(1, 3, attempt: 2)])
        #expect(s.ended(1, 3, ok) == [done(1, attempts: 2)])
        #expect(s.add(1) == [start(1, 4)])
        #expect(s.ended(1, 3, ok) == [])
        #expect(s.ended(1, 2, ok) == [])
        #expect(s.ended(1, 4, ok) == [done(1)])
        #expect(s.stats.succeeded == 2)
    }

    @Test func cancellingDuringTheRetryDelayStopsTheTimerAndReportsTheAttemptsMade() {
        let s = state()
        #expect(s.add(1) == [start(1)])
        #expect(s.ended(1, 1, timedOut, retry: retrying()) == [.retry(1, generation: 2, after: 2)])
        #expect(s.cancelled(1) == [.abort(1), done(1, .cancelled(.caller), attempts: 1)])
        #expect(Array(s.retryDue(1, generation: 2)) == [])
    }

    @Test func cancellingDuringAChallengeVoidsTheAnswer() {
        let s = state()
        #expect(s.add(1, traits: RequestTraits(hasAuthHandler: true)) == [start(1)])
        #expect(s.ended(1, 1, unauthorized) == [.challenge(1, generation: 1, failures: 0)])
        #expect(s.cancelled(1) == [.abort(1), done(1, .cancelled(.caller))])
        #expect(s.answer(1, generation: 1, .credential) == nil)
    }

    @Test func cancellingAnUnknownOrCompletedRequestIsRefused() {
        let s = state()
        #expect(s.cancelled(9) == nil)
        #expect(s.add(1) == [start(1)])
        #expect(s.ended(1, 1, ok) == [done(1)])
        #expect(s.cancelled(1) == nil)
    }

    @Test func cancellingByIdsCountsOnlyThoseInTheQueue() {
        let s = state(max: 1)
        #expect(s.add(1) == [start(1)])
        #expect(s.add(2) == [])
        #expect(s.add(3) == [])
        let (count, actions) = s.cancel([1, 3, 8])
        #expect(count == 2)
        #expect(Array(actions) == [.abort(1), done(1, .cancelled(.caller)), done(3, .cancelled(.caller), attempts: 0), start(2)])
    }

    // MARK: Duplicates

    @Test func aLaterDuplicateCancelsTheEarlierOne() {
        let s = state(max: 1)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "b") == [])
        #expect(s.add(3, key: "a") == [.abort(1), done(1, .cancelled(.duplicate)), start(2)])
        #expect(s.snapshot() == [2, 3])
    }

    @Test func allowedDuplicatesRunSideBySideWithoutKeys() {
        let s = state(duplicates: .allow)
        var asked = 0
        #expect(Array(s.add(1, 1, traits: RequestTraits(), key: { asked += 1; return "a" }, origin: { "" })) == [start(1)])
        #expect(Array(s.add(2, 2, traits: RequestTraits(), key: { asked += 1; return "a" }, origin: { "" })) == [start(2)])
        #expect(asked == 0)
    }

    // MARK: Coalescing

    @Test func followersCompleteWithTheirLeaderSharingItsResponse() {
        let s = state(duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.add(3, key: "a") == [])
        #expect(s.phase(of: 2) == .running)
        #expect(s.count == 3)
        #expect(s.scheduledCount == 1)
        #expect(s.stats.coalesced == 2)
        #expect(s.snapshot() == [1, 2, 3])
        #expect(s.ended(1, 1, ok) == [done(1), done(2, sharing: true), done(3, sharing: true)])
        #expect(s.stats.succeeded == 3)
        #expect(s.count == 0)
    }

    @Test func followersOfARetriedLeaderWaitWithIt() {
        let s = state(duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.ended(1, 1, timedOut, retry: retrying()) == [.retry(1, generation: 2, after: 2)])
        #expect(s.phase(of: 2) == .retryWait)
        #expect(Array(s.retryDue(1, generation: 2)) == [start(1, 2, attempt: 2)])
        #expect(s.ended(1, 2, ok) == [done(1, attempts: 2), done(2, attempts: 2, sharing: true)])
    }

    @Test func onlyRequestsThatCanShareCoalesce() {
        let s = state(max: 4, duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        // Not GET/HEAD/OPTIONS, a streamed body, a head callback on a running leader: a transfer of
        // their own (and, as duplicates, they replace nothing).
        #expect(s.add(2, key: "a", traits: RequestTraits(method: "POST")) == [start(2)])
        #expect(s.add(3, key: "a", traits: RequestTraits(streamsBody: true)) == [start(3)])
        #expect(s.add(4, key: "a", traits: RequestTraits(wantsHead: true)) == [start(4)])
        #expect(s.stats.coalesced == 0)
        // A streaming leader lends its transfer to nobody.
        #expect(s.add(5, key: "b", traits: RequestTraits(streamsBody: true)) == [])
        #expect(s.add(6, key: "b") == [])
        #expect(s.add(7, key: "b", traits: RequestTraits(wantsHead: true)) == [])
        #expect(s.snapshot() == [1, 2, 3, 4, 5, 6, 7])
        #expect(s.stats.coalesced == 0)
        // A head callback may join a leader that has not started.
        #expect(s.add(8, key: "c") == [])
        #expect(s.add(9, key: "c", traits: RequestTraits(wantsHead: true)) == [])
        #expect(s.stats.coalesced == 1)
    }

    @Test func aCancelledLeaderIsDetachedAndItsTransferGoesOnForItsFollowers() {
        let s = state(duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.cancelled(1) == [.detach(1, .cancelled(.caller), attempts: 1)])
        #expect(s.isDetached(1))
        #expect(s.count == 1)
        #expect(s.scheduledCount == 1)
        #expect(s.snapshot() == [2])
        #expect(s.cancelled(1) == nil)
        // The transfer's events go to the follower only.
        var recipients: [UInt64] = []
        #expect(s.forEachRecipient(of: 1, generation: 1) { recipients.append($0) })
        #expect(recipients == [2])
        #expect(s.ended(1, 1, ok) == [.release(1, .reported, attempts: 1), done(2, sharing: true)])
        #expect(s.stats.cancelled == 1)
        #expect(s.stats.succeeded == 1)
        #expect(s.count == 0)
        #expect(s.scheduledCount == 0)
    }

    @Test func aDetachedLeaderDoesNotAskItsAuthHandler() {
        let s = state(duplicates: .coalesce)
        #expect(s.add(1, key: "a", traits: RequestTraits(hasAuthHandler: true)) == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.cancelled(1) == [.detach(1, .cancelled(.caller), attempts: 1)])
        #expect(s.ended(1, 1, unauthorized) == [.release(1, .reported, attempts: 1), done(2, sharing: true)])
    }

    @Test func aCancelledFollowerLeavesAndTheLastOneStopsADetachedLeader() {
        let s = state(max: 1, duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.add(3, key: "a") == [])
        #expect(s.add(4, key: "z") == [])
        #expect(s.cancelled(2) == [done(2, .cancelled(.caller), attempts: 0)])
        #expect(s.snapshot() == [1, 3, 4])
        #expect(s.cancelled(1) == [.detach(1, .cancelled(.caller), attempts: 1)])
        #expect(s.cancelled(3) == [done(3, .cancelled(.caller), attempts: 0), .abort(1),
                                   .release(1, .cancelled(.caller), attempts: 1), start(4)])
        #expect(s.count == 1)
        #expect(s.stats.cancelled == 3)
    }

    @Test func aNewDuplicateJoinsADetachedLeader() {
        let s = state(duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "a") == [])
        #expect(s.cancelled(1) == [.detach(1, .cancelled(.caller), attempts: 1)])
        #expect(s.add(3, key: "a") == [])
        #expect(s.ended(1, 1, ok) == [.release(1, .reported, attempts: 1), done(2, sharing: true), done(3, sharing: true)])
    }

    @Test func headsOfACoalescedAttemptGoToThoseThatWantThem() {
        // 9 takes the one place: 1 waits, and those with a head callback may join it.
        let s2 = state(max: 1, duplicates: .coalesce)
        #expect(s2.add(9) == [start(9)])
        #expect(s2.add(1, key: "a", traits: RequestTraits(wantsHead: true)) == [])
        #expect(s2.add(2, key: "a") == [])
        #expect(s2.add(3, key: "a", traits: RequestTraits(wantsHead: true)) == [])
        #expect(s2.ended(9, 1, ok) == [done(9), start(1)])
        var wanting: [UInt64] = []
        #expect(s2.forEachRecipient(of: 1, generation: 1, wantsHead: true) { wanting.append($0) })
        #expect(wanting == [1, 3])
        #expect(!s2.forEachRecipient(of: 1, generation: 2) { _ in })
        var report = ok
        report.hasDeferredHead = true
        #expect(s2.ended(1, 1, report) == [.head(1), .head(3), done(1), done(2, sharing: true), done(3, sharing: true)])
    }

    @Test func theHeadIsWantedWhenTheStartingRequestOrOneSharingItsTransferHasAHeadCallback() {
        let s = state(max: 1, duplicates: .coalesce)
        #expect(s.add(9) == [start(9)])
        #expect(!s.headWanted(9))
        #expect(s.add(1, key: "a") == [])
        #expect(s.add(2, key: "a", traits: RequestTraits(wantsHead: true)) == [])
        #expect(s.ended(9, 1, ok) == [done(9), start(1)])
        // 1 has no head callback; 2, which shares its transfer, has one.
        #expect(s.headWanted(1))
        _ = s.cancelled(2)
        #expect(!s.headWanted(1))
        // A leader with one, detached by its cancel: only those still sharing its transfer count.
        let s2 = state(max: 1, duplicates: .coalesce)
        #expect(s2.add(1, key: "a", traits: RequestTraits(wantsHead: true)) == [start(1)])
        #expect(s2.headWanted(1))
        #expect(s2.add(2, key: "a") == [])
        #expect(s2.cancelled(1) == [.detach(1, .cancelled(.caller), attempts: 1)])
        #expect(!s2.headWanted(1))
        #expect(!s2.headWanted(5))
    }

    // MARK: Closing

    @Test func closingCancelsRequestsInEveryStateOnce() {
        let s = state(max: 3, duplicates: .coalesce)
        #expect(s.add(1, key: "a") == [start(1)])
        #expect(s.add(2, key: "b", traits: RequestTraits(hasAuthHandler: true)) == [start(2)])
        #expect(s.add(3, key: "c") == [start(3)])
        #expect(s.add(4, key: "c") == [])        // follower of 3
        #expect(s.add(5, key: "d") == [])        // waiting
        #expect(s.add(6, key: "e") == [])        // waiting, with a follower
        #expect(s.add(7, key: "e") == [])
        #expect(s.ended(1, 1, timedOut, retry: retrying()) == [.retry(1, generation: 2, after: 2)])
        #expect(s.ended(2, 1, unauthorized) == [.challenge(2, generation: 1, failures: 0)])
        #expect(s.cancelled(3) == [.detach(3, .cancelled(.caller), attempts: 1)])
        let first = s.close(), second = s.close()
        #expect(first)
        #expect(!second)
        #expect(s.isClosed)
        let (count, actions) = s.cancelAll(reason: .queueFreed)
        // Every request not completed yet (the detached leader was), once.
        #expect(count == 6)
        let freed = Ending.cancelled(.queueFreed)
        #expect(Array(actions) == [
            .abort(1), done(1, freed),
            .abort(2), done(2, freed),
            .abort(3), .release(3, freed, attempts: 1), done(4, freed, attempts: 1, sharing: true),
            done(5, freed, attempts: 0),
            done(6, freed, attempts: 0), done(7, freed, attempts: 0, sharing: true),
        ])
        #expect(s.count == 0)
        #expect(s.scheduledCount == 0)
        #expect(Array(s.retryDue(1, generation: 2)) == [])
        #expect(s.answer(2, generation: 1, .credential) == nil)
        #expect(s.stats.cancelled == 7)
        #expect(s.stats.added == 7)
    }
}

@Suite struct QueueActionsTests {
    @Test func keepsOrderPastTheInlineActions() {
        var actions = QueueActions<UInt64>()
        #expect(actions.isEmpty)
        for id in UInt64(1)...6 { actions.append(.abort(id)) }
        #expect(actions.count == 6)
        #expect(Array(actions) == (UInt64(1)...6).map { .abort($0) })
        var seen: [QueueAction<UInt64>] = []
        actions.forEach { seen.append($0) }
        #expect(seen == (UInt64(1)...6).map { .abort($0) })
        var few = QueueActions<UInt64>()
        few.append(.wake(at: 1))
        few.append(.head(2))
        #expect(Array(few) == [.wake(at: 1), .head(2)])
    }
}

/// The records keep each request's record and ref side by side in one array, read field by field
/// through pointers at the offsets the compiler gave them (QueueState.Records).
@Suite struct QueueStateRecordsTests {
    private final class Object {}

    @Test func theRecordLiesWhereTheRecordsReadItForEveryKindOfRef() {
        #expect(QueueState<String, UInt64>.recordsLayoutAgrees)
        #expect(QueueState<String, UInt8>.recordsLayoutAgrees)
        #expect(QueueState<String, String>.recordsLayoutAgrees)
        #expect(QueueState<String, Object>.recordsLayoutAgrees)
        #expect(QueueState<String, (UInt8, UInt64, String)>.recordsLayoutAgrees)
    }

    @Test func recordsAndRefsOfSparseReusedIdsStayApart() {
        let s = QueueState<String, String>(clock: { 0 })
        _ = s.setMaxConcurrent(1)
        s.setDuplicates(.allow)
        for id: UInt64 in [5, 0, 9] { _ = s.add(id, "r\(id)", traits: RequestTraits(), key: { "" }, origin: { "" }) }
        #expect(s.ref(5) == "r5" && s.ref(0) == "r0" && s.ref(9) == "r9")
        #expect(s.ref(1) == nil && s.ref(8) == nil && s.ref(10) == nil && s.ref(UInt64.max) == nil)
        #expect(s.phase(of: 5) == .running && s.phase(of: 0) == .waiting && s.phase(of: 1) == nil)
        #expect(s.cancel(0) != nil)
        #expect(s.ref(0) == nil && s.phase(of: 0) == nil && s.cancel(0) == nil)
        _ = s.add(0, "again", traits: RequestTraits(), key: { "" }, origin: { "" })
        #expect(s.ref(0) == "again" && s.phase(of: 0) == .waiting && s.count == 3)
    }

    /// The addresses a cancel prefetches (`layout`, `addresses(of:in:)`) are those of the request's
    /// entry, where its ref lies, and of its scheduler entry; none before anything was added.
    @Test func thePrefetchedAddressesAreThoseOfTheRequestsRecordAndEntry() {
        let s = QueueState<String, String>(clock: { 0 })
        s.suspend()
        s.setDuplicates(.allow)
        var touched: [UInt] = []
        QueueState<String, String>.addresses(of: 3, in: s.layout) { touched.append($0) }
        #expect(touched.isEmpty)
        for id: UInt64 in 0..<40 { _ = s.add(id, "r\(id)", traits: RequestTraits(), key: { "" }, origin: { "" }) }
        let layout = s.layout
        var previousLast: UInt = 0
        for id: UInt64 in 0..<40 {
            touched = []
            QueueState<String, String>.addresses(of: id, in: layout) { touched.append($0) }
            #expect(touched.count == 3)
            guard touched.count == 3, let record = UnsafeRawPointer(bitPattern: touched[0]) else { continue }
            #expect(record.load(as: String?.self) == "r\(id)")
            // The entry's last byte: after its first, before the next entry's first.
            #expect(touched[1] > touched[0] && (id == 0 || touched[0] > previousLast))
            previousLast = touched[1]
            #expect(touched[2] == s.scheduler.entryAddress(of: id).map { UInt(bitPattern: $0) })
        }
    }
}
