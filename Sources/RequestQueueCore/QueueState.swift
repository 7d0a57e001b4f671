/// What `Queue.duplicates` does with a request equal to one already in the queue.
public enum Duplicates: Sendable {
    /// The new request replaces the earlier ones: they complete as cancelled.
    case cancelEarlier
    case allow
    /// The new request shares the transfer of the earlier one (GET, HEAD, OPTIONS without a
    /// streamed body) and gets the same response.
    case coalesce
}

/// Queue-level counters (`rq_queue_stats`).
public struct QueueStats: Equatable, Sendable {
    public var added: UInt64 = 0
    public var started: UInt64 = 0
    public var retried: UInt64 = 0
    public var succeeded: UInt64 = 0
    public var failed: UInt64 = 0
    public var cancelled: UInt64 = 0
    public var coalesced: UInt64 = 0
    public var bytesDown: UInt64 = 0
    public var bytesUp: UInt64 = 0

    public init() {}
}

/// What the engine saw of an ended attempt, for the decision that follows (and the counters).
public struct AttemptReport: Sendable {
    public var outcome: Outcome
    public var status: Int
    /// Seconds from a 429/503's Retry-After, when it had a valid one.
    public var retryAfter: Double?
    /// Whether the response carries a head held back until the decision was made (the engine holds
    /// back the head of a response that may be challenged); it goes out with a retry or completion.
    public var hasDeferredHead: Bool
    public var downloaded: Int64
    public var uploaded: Int64

    public init(outcome: Outcome, status: Int = 0, retryAfter: Double? = nil, hasDeferredHead: Bool = false,
                downloaded: Int64 = 0, uploaded: Int64 = 0) {
        self.outcome = outcome
        self.status = status
        self.retryAfter = retryAfter
        self.hasDeferredHead = hasDeferredHead
        self.downloaded = downloaded
        self.uploaded = uploaded
    }
}

/// A request's settings that the decisions read (frozen once it is added).
public struct RequestTraits {
    public var method: String
    public var priority: Int
    public var retry: RetryPolicy
    public var hasAuthHandler: Bool
    public var wantsHead: Bool
    /// Its body goes to a callback or a file: it neither shares nor lends its transfer.
    public var streamsBody: Bool

    public init(method: String = "GET", priority: Int = 0, retry: RetryPolicy = RetryPolicy(),
                hasAuthHandler: Bool = false, wantsHead: Bool = false, streamsBody: Bool = false) {
        self.method = method
        self.priority = priority
        self.retry = retry
        self.hasAuthHandler = hasAuthHandler
        self.wantsHead = wantsHead
        self.streamsBody = streamsBody
    }
}

/// The answer to an authentication challenge.
public enum ChallengeAnswer: Sendable {
    /// Try again with credentials (a new attempt of the same number).
    case credential
    /// Complete with the challenged response (`report`).
    case continueWithout(AttemptReport)
    case cancel
}

/// The lifecycle of a queue's requests without I/O: which wait, which run, which wait for a retry
/// or an authentication answer, which share another's transfer (coalescing), the counters, and
/// whether the queue is closed. Every mutation returns the `QueueActions` its owner must carry out;
/// the owner (the runtime's Queue, under its lock) holds the requests themselves.
///
/// Requests are identified by small integer ids (slot numbers, as in `Scheduler`); `Ref` is what
/// the owner wants back in actions (the runtime's request object), `Key` the duplicate-equality key.
///
/// A request's phases: waiting -> running -> (retry wait -> running | auth wait -> running)* ->
/// completed (gone from the state). Each attempt has a generation: a report about another
/// generation than the current one is ignored, so a late report of a cancelled or superseded
/// attempt changes nothing. A coalesced request (a follower) has no phase of its own: it follows
/// its leader's and completes with it. A leader cancelled while it has followers is detached: its
/// completion is delivered, its transfer goes on for them, and it leaves when they have.
/// Not thread-safe: the owner serializes access.
public struct QueueState<Key: Hashable, Ref> {
    public enum Phase: Equatable, Sendable {
        case waiting
        case running
        case retryWait
        case authWait
    }

    struct Record {
        let ref: Ref
        let traits: RequestTraits
        var phase = Phase.waiting
        var generation: UInt64 = 0
        var attempts = 0
        /// A follower: the leader whose transfer it shares.
        var leader: UInt64?
        var followers: [UInt64] = []
        var detached = false
        var hasCredentials = false
        var rejectedCredentials = 0
    }

    /// Everything but the scheduler (so that the scheduler's start callback can change it).
    struct Book {
        var records = SlotMap<Record>()
        var stats = QueueStats()
        var followerCount = 0
        var detachedCount = 0
    }

    public private(set) var scheduler = Scheduler<Key>()
    var book = Book()
    public private(set) var duplicates = Duplicates.cancelEarlier
    /// Set by `close`: no request is accepted any more.
    public private(set) var isClosed = false
    /// The rate-limit wake-up already asked for.
    private var scheduledWake: Double?
    /// Whether the scheduler has the origins of the requests (it needs them only while a per-host
    /// limit is on; they cost a string per request).
    private var originsAssigned = false

    public init() {}

    public var stats: QueueStats { book.stats }

    /// Requests in the queue, each coalesced one counted, each detached leader not.
    public var count: Int { scheduler.count - book.detachedCount + book.followerCount }

    /// Requests in the scheduler (detached leaders included): the queue is idle at 0.
    public var scheduledCount: Int { scheduler.count }

    public func phase(of id: UInt64) -> Phase? {
        guard let record = book.records[id] else { return nil }
        if let leader = record.leader { return book.records[leader]?.phase }
        return record.phase
    }

    public func isDetached(_ id: UInt64) -> Bool { book.records[id]?.detached == true }

    /// Whether `generation` is the running attempt of the request (reports of it count).
    public func isCurrent(_ id: UInt64, generation: UInt64) -> Bool {
        guard let record = book.records[id] else { return false }
        return record.leader == nil && record.phase == .running && record.generation == generation
    }

    /// Whether the request has a transfer in the engine, or a retry or answer pending.
    public func isStarted(_ id: UInt64) -> Bool {
        guard let record = book.records[id], record.leader == nil else { return false }
        return record.phase != .waiting
    }

    /// Whether the request awaits the answer to the challenge of `generation`.
    public func awaitsAnswer(_ id: UInt64, generation: UInt64) -> Bool {
        guard let record = book.records[id] else { return false }
        return record.leader == nil && record.phase == .authWait && record.generation == generation
    }

    /// Calls `body` with the requests that get the events of the running attempt `generation` of
    /// `id` (progress, a head, ...): the request itself unless it is detached, and those sharing its
    /// transfer; `wantsHead` keeps those with a head callback only. Returns false, calling nothing,
    /// when the attempt is not current.
    @discardableResult
    public func forEachRecipient(of id: UInt64, generation: UInt64, wantsHead: Bool = false, _ body: (Ref) -> Void) -> Bool {
        guard isCurrent(id, generation: generation), let record = book.records[id] else { return false }
        recipients(of: record, wantsHead: wantsHead, body)
        return true
    }

    private func recipients(of record: Record, wantsHead: Bool, _ body: (Ref) -> Void) {
        if !record.detached, !wantsHead || record.traits.wantsHead { body(record.ref) }
        for follower in record.followers {
            if let f = book.records[follower], !wantsHead || f.traits.wantsHead { body(f.ref) }
        }
    }

    /// Whether any recipient of the attempt's events has a head callback.
    public func wantsHead(_ id: UInt64, generation: UInt64) -> Bool {
        var wanted = false
        forEachRecipient(of: id, generation: generation, wantsHead: true) { _ in wanted = true }
        return wanted
    }

    /// The requests sharing the transfer of `id`, in the order they joined.
    public func forEachFollower(of id: UInt64, _ body: (Ref) -> Void) {
        guard let record = book.records[id] else { return }
        for follower in record.followers {
            if let f = book.records[follower] { body(f.ref) }
        }
    }

    /// Running requests in start order, then waiting ones in start order; each coalesced request
    /// right after the one whose transfer it shares; detached leaders left out.
    public func snapshot() -> [Ref] {
        let (running, waiting) = scheduler.snapshot()
        var list: [Ref] = []
        list.reserveCapacity(count)
        for id in running + waiting {
            guard let record = book.records[id] else { continue }
            if !record.detached { list.append(record.ref) }
            forEachFollower(of: id) { list.append($0) }
        }
        return list
    }

    // MARK: Settings

    public mutating func setMaxConcurrent(_ value: Int, now: Double) -> QueueActions<Ref> {
        scheduler.maxConcurrent = value
        return startStartable(now: now)
    }

    public mutating func setOrder(_ order: QueueOrder) { scheduler.order = order }

    public mutating func setDuplicates(_ mode: Duplicates) {
        duplicates = mode
        scheduler.cancelsEarlierDuplicates = mode == .cancelEarlier
    }

    public mutating func setMaxPerHost(_ value: Int, now: Double, origin: (Ref) -> String) -> QueueActions<Ref> {
        scheduler.maxPerHost = value
        assignOrigins(origin)
        return startStartable(now: now)
    }

    public mutating func setRateLimit(_ value: RateLimit?, now: Double, origin: (Ref) -> String) -> QueueActions<Ref> {
        scheduler.rateLimit = value
        assignOrigins(origin)
        return startStartable(now: now)
    }

    /// Requests queued before a per-host limit was on get their origins when one is turned on.
    private mutating func assignOrigins(_ origin: (Ref) -> String) {
        if scheduler.usesOrigins, !originsAssigned {
            let records = book.records
            scheduler.assignOrigins { id in records[id].map { origin($0.ref) } ?? "" }
        }
        originsAssigned = scheduler.usesOrigins
    }

    public mutating func suspend() { scheduler.suspend() }

    public mutating func resume(now: Double) -> QueueActions<Ref> {
        scheduler.resume()
        return startStartable(now: now)
    }

    /// Changes a request's priority (a coalesced request's counts for nothing: it has no place of
    /// its own). False when the request is not in the queue.
    public mutating func setPriority(_ id: UInt64, _ priority: Int, now: Double) -> QueueActions<Ref> {
        if let record = book.records[id], record.leader == nil { scheduler.setPriority(id, priority) }
        return startStartable(now: now)
    }

    /// Closes the queue (no request is accepted any more); false when it was closed already.
    public mutating func close() -> Bool {
        guard !isClosed else { return false }
        isClosed = true
        return true
    }

    // MARK: Adding and cancelling

    /// Adds a request (the owner has checked that the queue is open and the request new).
    /// `key` is asked for only when duplicates matter, `origin` only while origins do.
    public mutating func add(_ id: UInt64, _ ref: Ref, traits: RequestTraits, now: Double,
                             key: () -> Key, origin: () -> String) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        book.stats.added += 1
        let key = duplicates == .allow ? nil : key()
        if duplicates == .coalesce, let key, !traits.streamsBody, HTTPMethods.coalescable.contains(traits.method),
           let leaderID = scheduler.ids(withKey: key).first, var leader = book.records[leaderID],
           !leader.traits.streamsBody, !traits.wantsHead || scheduler.placement(of: leaderID) != .running {
            // Share the transfer of an equal request already waiting or running.
            book.records[id] = Record(ref: ref, traits: traits, leader: leaderID)
            leader.followers.append(id)
            book.records[leaderID] = leader
            book.followerCount += 1
            book.stats.coalesced += 1
            return actions
        }
        // The scheduler removes the requests this one replaces: those that ran are stopped here.
        var replacedRunning: [UInt64] = []
        let replaced = scheduler.add(id, key: key, origin: scheduler.usesOrigins ? origin() : "",
                                     priority: traits.priority) { old, placement in
            if placement == .running { replacedRunning.append(old) }
        } ?? []
        book.records[id] = Record(ref: ref, traits: traits)
        for old in replaced {
            if replacedRunning.contains(old), let earlier = book.records[old] { actions.append(.abort(earlier.ref)) }
            complete(old, .cancelled(.duplicate), stopTransfer: false, into: &actions)
        }
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return actions
    }

    /// Cancels one request, then starts what can start. Nil when it is not in the queue (or is a
    /// detached leader, whose completion was delivered).
    public mutating func cancel(_ id: UInt64, reason: CancelReason = .caller, now: Double) -> QueueActions<Ref>? {
        var actions = QueueActions<Ref>()
        guard cancel(id, reason: reason, into: &actions) else { return nil }
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return actions
    }

    /// Cancels these requests (those not in the queue are skipped), then starts what can start;
    /// returns how many completions that produced.
    public mutating func cancel(_ ids: [UInt64], reason: CancelReason = .caller, now: Double) -> (count: Int, actions: QueueActions<Ref>) {
        var actions = QueueActions<Ref>()
        var count = 0
        for id in ids where cancel(id, reason: reason, into: &actions) { count += 1 }
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return (count, actions)
    }

    /// Cancels every request; returns how many completions that produced.
    public mutating func cancelAll(reason: CancelReason = .caller) -> (count: Int, actions: QueueActions<Ref>) {
        var actions = QueueActions<Ref>()
        var count = 0
        let (running, waiting) = scheduler.snapshot()
        for id in running + waiting {
            guard let record = book.records[id] else { continue }
            count += (record.detached ? 0 : 1) + record.followers.count
            complete(id, .cancelled(reason), stopTransfer: true, into: &actions)
        }
        return (count, actions)
    }

    /// A coalesced request leaves its leader, whose transfer stops when nobody waits for it any
    /// more; a leader with followers delivers its own cancellation and goes on for them.
    private mutating func cancel(_ id: UInt64, reason: CancelReason, into actions: inout QueueActions<Ref>) -> Bool {
        guard var record = book.records[id] else { return false }
        if let leaderID = record.leader {
            book.records[id] = nil
            book.followerCount -= 1
            book.tally(.cancelled, downloaded: 0, uploaded: 0)
            actions.append(.complete(record.ref, .cancelled(reason), attempts: record.attempts, sharing: false))
            if var leader = book.records[leaderID] {
                leader.followers.removeAll { $0 == id }
                book.records[leaderID] = leader
                if leader.detached, leader.followers.isEmpty {
                    complete(leaderID, .cancelled(reason), stopTransfer: true, into: &actions)
                }
            }
            return true
        }
        guard !record.detached, scheduler.placement(of: id) != nil else { return false }
        if !record.followers.isEmpty {
            record.detached = true
            book.records[id] = record
            book.detachedCount += 1
            book.stats.cancelled += 1
            actions.append(.detach(record.ref, .cancelled(reason), attempts: record.attempts))
            return true
        }
        complete(id, .cancelled(reason), stopTransfer: true, into: &actions)
        return true
    }

    // MARK: The engine's reports

    /// An attempt ended: complete the request, retry it (the engine arms the timer), or ask its
    /// authentication handler. Nothing when `generation` is not the running attempt.
    /// `random` in [0, 1) draws the retry's jitter.
    public mutating func attemptEnded(_ id: UInt64, generation: UInt64, _ report: AttemptReport,
                                      random: Double, now: Double) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard isCurrent(id, generation: generation), var record = book.records[id] else { return actions }
        let traits = record.traits
        let decision = AttemptDecision.decide(outcome: report.outcome, status: report.status,
                                              hasAuthHandler: traits.hasAuthHandler && !record.detached,
                                              retry: traits.retry, attempt: record.attempts, method: traits.method,
                                              retryAfter: report.retryAfter, random: random)
        switch decision {
        case .challenge:
            if record.hasCredentials { record.rejectedCredentials += 1 }
            record.phase = .authWait
            book.records[id] = record
            actions.append(.challenge(record.ref, generation: generation, failures: record.rejectedCredentials))
        case .retry(let delay):
            if report.hasDeferredHead { heads(of: record, into: &actions) }
            // The attempt is counted when it starts (`retryDue`): a request cancelled during the
            // delay reports the attempts made.
            record.generation &+= 1
            record.phase = .retryWait
            book.records[id] = record
            book.stats.retried += 1
            actions.append(.retry(record.ref, generation: record.generation, after: delay))
        case .complete:
            if report.hasDeferredHead { heads(of: record, into: &actions) }
            complete(id, .reported, report, stopTransfer: false, into: &actions)
            Self.startStartable(&scheduler, &book, &actions, now: now)
            wakeForRateLimit(now: now, into: &actions)
        }
        return actions
    }

    /// A transfer could not even be set up: the request completes with the reported failure.
    public mutating func failedToStart(_ id: UInt64, generation: UInt64, _ report: AttemptReport, now: Double) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard isCurrent(id, generation: generation) else { return actions }
        complete(id, .reported, report, stopTransfer: false, into: &actions)
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return actions
    }

    /// The retry timer of `generation` fired: the next attempt starts (and counts), unless the
    /// request no longer waits for it.
    public mutating func retryDue(_ id: UInt64, generation: UInt64) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard var record = book.records[id], record.leader == nil, record.phase == .retryWait,
              record.generation == generation else { return actions }
        record.attempts += 1
        record.phase = .running
        book.records[id] = record
        actions.append(.start(record.ref, generation: generation, attempt: record.attempts))
        return actions
    }

    /// The rate limit's wake-up: starts what can start now.
    public mutating func startDue(now: Double) -> QueueActions<Ref> {
        scheduledWake = nil
        return startStartable(now: now)
    }

    /// The authentication handler answered the challenge of `generation`. Nil when the request no
    /// longer awaits that answer.
    public mutating func answer(_ id: UInt64, generation: UInt64, _ answer: ChallengeAnswer, now: Double) -> QueueActions<Ref>? {
        guard awaitsAnswer(id, generation: generation), var record = book.records[id] else { return nil }
        var actions = QueueActions<Ref>()
        switch answer {
        case .credential:
            record.hasCredentials = true
            record.generation &+= 1
            record.phase = .running
            book.records[id] = record
            actions.append(.start(record.ref, generation: record.generation, attempt: record.attempts))
            return actions
        case .continueWithout(let report):
            if report.hasDeferredHead { heads(of: record, into: &actions) }
            complete(id, .reported, report, stopTransfer: false, into: &actions)
        case .cancel:
            complete(id, .cancelled(.authHandler), stopTransfer: false, into: &actions)
        }
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return actions
    }

    // MARK: Internals

    private mutating func startStartable(now: Double) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        Self.startStartable(&scheduler, &book, &actions, now: now)
        wakeForRateLimit(now: now, into: &actions)
        return actions
    }

    private static func startStartable(_ scheduler: inout Scheduler<Key>, _ book: inout Book,
                                       _ actions: inout QueueActions<Ref>, now: Double) {
        scheduler.takeStartable(now: now) { id in
            guard var record = book.records[id] else { return }
            record.phase = .running
            record.generation &+= 1
            record.attempts = 1
            book.records[id] = record
            book.stats.started += 1
            actions.append(.start(record.ref, generation: record.generation, attempt: 1))
        }
    }

    /// Requests held back by the rate limit: have the engine come back when a token is there.
    private mutating func wakeForRateLimit(now: Double, into actions: inout QueueActions<Ref>) {
        if scheduler.rateLimit != nil, let next = scheduler.nextStartTime(now: now), next != scheduledWake {
            scheduledWake = next
            actions.append(.wake(at: next))
        }
    }

    /// The deferred head of the reported response goes to the request (unless detached) and to
    /// those sharing its transfer, those with a head callback.
    private func heads(of record: Record, into actions: inout QueueActions<Ref>) {
        recipients(of: record, wantsHead: true) { actions.append(.head($0)) }
    }

    /// The one completion of a request and of those sharing its transfer.
    private mutating func complete(_ id: UInt64, _ ending: Ending, _ report: AttemptReport? = nil,
                                   stopTransfer: Bool, into actions: inout QueueActions<Ref>) {
        guard let record = book.records.removeValue(forKey: id) else { return }
        let placement = scheduler.remove(id)
        // Only a started request has a transfer or a retry timer in the engine.
        if stopTransfer, placement == .running { actions.append(.abort(record.ref)) }
        let (outcome, down, up) = report.map { ($0.outcome, $0.downloaded, $0.uploaded) } ?? (.cancelled, 0, 0)
        if record.detached {
            book.detachedCount -= 1
            actions.append(.release(record.ref, ending, attempts: record.attempts))
        } else {
            book.tally(outcome, downloaded: down, uploaded: up)
            actions.append(.complete(record.ref, ending, attempts: record.attempts, sharing: false))
        }
        for followerID in record.followers {
            guard let follower = book.records.removeValue(forKey: followerID) else { continue }
            book.followerCount -= 1
            book.tally(outcome, downloaded: down, uploaded: up)
            actions.append(.complete(follower.ref, ending, attempts: record.attempts, sharing: true))
        }
    }
}

extension QueueState.Book {
    mutating func tally(_ outcome: Outcome, downloaded: Int64, uploaded: Int64) {
        switch outcome {
        case .ok: stats.succeeded += 1
        case .cancelled: stats.cancelled += 1
        default: stats.failed += 1
        }
        stats.bytesDown &+= UInt64(max(0, downloaded))
        stats.bytesUp &+= UInt64(max(0, uploaded))
    }
}
