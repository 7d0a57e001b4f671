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

/// What `QueueState.add` reads of a request's settings (frozen once it is added).
public struct RequestTraits {
    public var method: String
    public var priority: Int
    public var hasAuthHandler: Bool
    public var wantsHead: Bool
    /// Its body goes to a callback or a file: it neither shares nor lends its transfer.
    public var streamsBody: Bool

    public init(method: String = "GET", priority: Int = 0, hasAuthHandler: Bool = false, wantsHead: Bool = false,
                streamsBody: Bool = false) {
        self.method = method
        self.priority = priority
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
/// attempt changes nothing. An id is a slot that a later request reuses: the new request's
/// generations go on from the last one of the slot's previous request (`retiredGenerations`), so
/// that a late report of a request that is gone never matches the attempt of the one in its slot.
/// A coalesced request (a follower) has no phase of its own: it follows
/// its leader's and completes with it. A leader cancelled while it has followers is detached: its
/// completion is delivered, its transfer goes on for them, and it leaves when they have.
///
/// A class, so that the owner's queries never copy it. Not thread-safe: the owner serializes access.
public final class QueueState<Key: Hashable, Ref> {
    public enum Phase: Equatable, Sendable {
        case waiting
        case running
        case retryWait
        case authWait
    }

    /// A request's state; plain values, so that updating one costs no reference counting (its
    /// `Ref` is kept beside it, not in it: a record holding the generic `Ref` was copied through
    /// value witnesses, about 1k instructions more per request on the engine thread). 31 bytes
    /// (56 before), 40 with its ref: with a million waiting requests each cancel reads one entry
    /// that is in no cache, and a smaller one straddles fewer cache lines.
    struct Record {
        var generation: UInt64 = 0
        var attempts = 0
        /// Saturates (at 2^31 - 1 rejected credentials).
        var rejectedCredentials: Int32 = 0
        /// A follower: the leader whose transfer it shares (`leader`); `UInt32.max` for none.
        /// Ids in the records are slot numbers, at most `SlotMap.maxID` (it stores no other).
        private var leaderSlot = UInt32.max
        var phase = Phase.waiting
        /// It has a head callback.
        let wantsHead: Bool
        let hasAuthHandler: Bool
        /// It does not stream its body: others may share its transfer.
        let canLead: Bool
        var detached = false
        var hasCredentials = false
        /// False only in `Records`' placeholders (ids no request has).
        fileprivate var present = true

        init(_ traits: RequestTraits, leader: UInt64? = nil) {
            wantsHead = traits.wantsHead
            hasAuthHandler = traits.hasAuthHandler
            canLead = !traits.streamsBody
            if let leader { leaderSlot = UInt32(truncatingIfNeeded: leader) }
        }

        var leader: UInt64? { leaderSlot == .max ? nil : UInt64(leaderSlot) }
    }

    /// Every request in the queue, by id: its record and, beside it, what the owner wants back in
    /// its actions (`Ref`). One array, so that a request's record and ref share a cache line:
    /// with a million waiting requests, two maps were two cache misses per cancel or report
    /// (bench/README.md, "The queue at scale").
    private struct Records {
        /// The ref first (at offset 0), then the record.
        private struct Entry {
            var ref: Ref?
            var record: Record
        }
        /// Indexed by id, as `SlotMap`'s slots; ids no request has hold a placeholder (nil ref,
        /// record not `present`). Each field is read and written alone, through a pointer of its own
        /// type: an entry copied as a whole (which the compiler made of reading both fields) went
        /// through the generic entry's value witnesses, about 170 instructions more per cancel.
        private var entries: [Entry] = []

        /// Where the record lies in an entry: after the ref, at the record's alignment.
        @inline(__always)
        private static var recordOffset: Int {
            let align = MemoryLayout<Record>.alignment
            return (MemoryLayout<Ref?>.size + align - 1) / align * align
        }

        /// Whether `recordOffset` is where the compiler put the record (for the tests).
        static var layoutAgrees: Bool { MemoryLayout<Entry>.offset(of: \Entry.record) == recordOffset }

        @inline(__always)
        private func read<R>(_ id: UInt64, _ body: (UnsafeRawPointer) -> R?) -> R? {
            guard id < UInt64(entries.count) else { return nil }
            return entries.withUnsafeBufferPointer { entries in
                entries.baseAddress.flatMap { body(UnsafeRawPointer($0 + Int(id))) }
            }
        }

        @inline(__always)
        private mutating func write<R>(_ id: UInt64, _ body: (UnsafeMutableRawPointer) -> R?) -> R? {
            guard id < UInt64(entries.count) else { return nil }
            return entries.withUnsafeMutableBufferPointer { entries in
                entries.baseAddress.flatMap { body(UnsafeMutableRawPointer($0 + Int(id))) }
            }
        }

        @inline(__always)
        private static func record(_ entry: UnsafeRawPointer) -> UnsafePointer<Record> {
            (entry + recordOffset).assumingMemoryBound(to: Record.self)
        }

        @inline(__always)
        private static func record(_ entry: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Record> {
            (entry + recordOffset).assumingMemoryBound(to: Record.self)
        }

        @inline(__always)
        private static func ref(_ entry: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Ref?> {
            entry.assumingMemoryBound(to: Ref?.self)
        }

        /// The record of `id`; setting nil removes the request (its ref too), setting a record
        /// changes that of a request present (`insert` adds one).
        subscript(id: UInt64) -> Record? {
            @inline(__always) get {
                read(id) { entry in
                    let record = Records.record(entry).pointee
                    return record.present ? record : nil
                }
            }
            @inline(__always) set {
                write(id) { entry -> Void? in
                    let record = Records.record(entry)
                    guard record.pointee.present else { return nil }
                    if let newValue {
                        record.pointee = newValue
                    } else {
                        record.pointee.present = false
                        Records.ref(entry).pointee = nil
                    }
                    return ()
                }
            }
        }

        @inline(__always)
        func ref(_ id: UInt64) -> Ref? { read(id) { $0.assumingMemoryBound(to: Ref?.self).pointee } }

        /// Where the entry of id 0 lies (0 when there is none), and the size and stride of an entry.
        var baseAddress: UInt {
            // (An empty array's base is the shared empty storage's.)
            entries.isEmpty ? 0 : entries.withUnsafeBufferPointer { entries in entries.baseAddress.map { UInt(bitPattern: $0) } ?? 0 }
        }
        static var entrySize: UInt { UInt(MemoryLayout<Entry>.size) }
        static var entryStride: UInt { UInt(MemoryLayout<Entry>.stride) }

        /// Adds a request (an id past `SlotMap.maxID` is not a slot number: never stored).
        @inline(__always)
        mutating func insert(_ id: UInt64, _ record: Record, _ ref: Ref) {
            guard id <= SlotMap<Record>.maxID else { return }
            // One placeholder at a time, as in `SlotMap`: ids grow by one.
            while entries.count <= Int(id) {
                var placeholder = Record(RequestTraits())
                placeholder.present = false
                entries.append(Entry(ref: nil, record: placeholder))
            }
            write(id) { entry -> Void? in
                Records.record(entry).pointee = record
                Records.ref(entry).pointee = ref
                return ()
            }
        }

        /// Removes the request; returns its record and ref, or nil if it was not there.
        @inline(__always)
        mutating func remove(_ id: UInt64) -> (record: Record, ref: Ref)? {
            write(id) { entry in
                let record = Records.record(entry)
                guard record.pointee.present, let ref = Records.ref(entry).pointee.take() else { return nil }
                record.pointee.present = false
                return (record.pointee, ref)
            }
        }

        /// Changes the record of `id` in place; nil (calling nothing) when it is not there.
        @inline(__always)
        mutating func modify<R>(_ id: UInt64, _ body: (inout Record) -> R) -> R? {
            write(id) { entry in
                let record = Records.record(entry)
                return record.pointee.present ? body(&record.pointee) : nil
            }
        }
    }

    public private(set) var scheduler = Scheduler<Key>()
    private var records = Records()
    /// Whether the records' entries are laid out as `Records` reads them (for the tests).
    static var recordsLayoutAgrees: Bool { Records.layoutAgrees }
    /// By slot: the last generation of the request that last had the slot (0 for a follower,
    /// which never has an attempt of its own).
    private var retiredGenerations: [UInt64] = []
    /// The followers of each leader that has some, in the order they joined.
    private var followers = SlotMap<[UInt64]>()
    public private(set) var stats = QueueStats()
    private var followerCount = 0
    private var detachedCount = 0
    public private(set) var duplicates = Duplicates.cancelEarlier
    /// Set by `close`: no request is accepted any more.
    public private(set) var isClosed = false
    /// The rate-limit wake-up already asked for.
    private var scheduledWake: Double?
    /// Whether the scheduler has the origins of the requests (it needs them only while a per-host
    /// limit is on; they cost a string per request).
    private var originsAssigned = false

    /// The time in seconds (monotonic), read only when a request may start under a rate limit,
    /// whose tokens depend on it (`startStartable`): no other path reads the clock.
    private let clock: () -> Double

    public init(clock: @escaping () -> Double) { self.clock = clock }

    /// Requests in the queue, each coalesced one counted, each detached leader not.
    public var count: Int { scheduler.count - detachedCount + followerCount }

    /// Requests in the scheduler (detached leaders included): the queue is idle at 0.
    public var scheduledCount: Int { scheduler.count }

    /// Requests in the scheduler that have not started.
    public var waitingCount: Int { scheduler.waitingCount }

    public func phase(of id: UInt64) -> Phase? {
        guard let record = records[id] else { return nil }
        if let leader = record.leader { return records[leader]?.phase }
        return record.phase
    }

    public func isDetached(_ id: UInt64) -> Bool { records[id]?.detached == true }

    /// What the owner gave for `id` when it was added; nil when `id` is not in the queue.
    public func ref(_ id: UInt64) -> Ref? { records.ref(id) }

    /// Where the memory that a cancel of a request reads first lies: the records (each with its
    /// ref) and the scheduler's entries, as the addresses of id 0's (0 when there is none), for
    /// `addresses(of:in:)`. Plain numbers, never read through; they change when the records or the
    /// entries grow.
    public struct Layout: Equatable, Sendable {
        public var records: UInt
        public var entries: UInt

        public init(records: UInt, entries: UInt) {
            self.records = records
            self.entries = entries
        }
    }

    public var layout: Layout {
        Layout(records: records.baseAddress, entries: scheduler.entryAddress(of: 0).map { UInt(bitPattern: $0) } ?? 0)
    }

    /// Calls `touch` with an address in each cache line that a cancel of `id` reads first, as
    /// `layout` placed them: its record with its ref (one line or two) and its scheduler entry, so
    /// that the owner can start loading them all at once with a prefetch, even before it takes its
    /// lock (from a `layout` it kept: a stale one only makes useless hints). With a million waiting
    /// requests none of them is in a cache, and a cancel found them one after the other, each load
    /// waiting for the last (bench/README.md, "The queue at scale: prefetching"). Addresses only:
    /// nothing is read, and they may point anywhere (a prefetch never faults).
    public static func addresses(of id: UInt64, in layout: Layout, _ touch: (UInt) -> Void) {
        let index = UInt(truncatingIfNeeded: id)
        if layout.records != 0 {
            let record = layout.records &+ index &* Records.entryStride
            touch(record)
            touch(record &+ (Records.entrySize &- 1))
        }
        if layout.entries != 0 { touch(layout.entries &+ index &* Scheduler<Key>.entryStride) }
    }

    /// Whether `generation` is the running attempt of the request (reports of it count).
    public func isCurrent(_ id: UInt64, generation: UInt64) -> Bool {
        guard let record = records[id] else { return false }
        return record.leader == nil && record.phase == .running && record.generation == generation
    }

    /// Whether the request has a transfer in the engine, or a retry or answer pending.
    public func isStarted(_ id: UInt64) -> Bool {
        guard let record = records[id], record.leader == nil else { return false }
        return record.phase != .waiting
    }

    /// Whether the request awaits the answer to the challenge of `generation`.
    public func awaitsAnswer(_ id: UInt64, generation: UInt64) -> Bool {
        guard let record = records[id] else { return false }
        return record.leader == nil && record.phase == .authWait && record.generation == generation
    }

    /// Calls `body` with the requests that get the events of the running attempt `generation` of
    /// `id` (progress, a head, ...): the request itself unless it is detached, and those sharing its
    /// transfer; `wantsHead` keeps those with a head callback only. Returns false, calling nothing,
    /// when the attempt is not current.
    @discardableResult
    public func forEachRecipient(of id: UInt64, generation: UInt64, wantsHead: Bool = false, _ body: (Ref) -> Void) -> Bool {
        guard let record = records[id], record.leader == nil, record.phase == .running,
              record.generation == generation else { return false }
        recipients(id, record, wantsHead: wantsHead, body)
        return true
    }

    /// Whether a request that gets the events of the attempt of `id` that starts now has a head
    /// callback. (None with one joins a running transfer later: `add` does not let it.)
    public func headWanted(_ id: UInt64) -> Bool {
        guard let record = records[id] else { return false }
        if !record.detached, record.wantsHead { return true }
        guard let list = followers[id] else { return false }
        return list.contains { records[$0]?.wantsHead == true }
    }

    private func recipients(_ id: UInt64, _ record: Record, wantsHead: Bool, _ body: (Ref) -> Void) {
        if !record.detached, !wantsHead || record.wantsHead, let ref = records.ref(id) { body(ref) }
        guard let list = followers[id] else { return }
        for follower in list {
            if let f = records[follower], !wantsHead || f.wantsHead, let ref = records.ref(follower) { body(ref) }
        }
    }

    /// A `head` action for each request that gets the head of the running attempt of `id`. (Apart,
    /// so that the mutations pass their actions along instead of capturing them in a closure, which
    /// made returning them a copy.)
    private func appendHeads(_ id: UInt64, _ record: Record, into actions: inout QueueActions<Ref>) {
        recipients(id, record, wantsHead: true) { actions.append(.head($0)) }
    }

    /// The requests sharing the transfer of `id`, in the order they joined.
    public func forEachFollower(of id: UInt64, _ body: (Ref) -> Void) {
        guard let list = followers[id] else { return }
        for follower in list {
            if let ref = records.ref(follower) { body(ref) }
        }
    }

    /// Running requests in start order, then waiting ones in start order; each coalesced request
    /// right after the one whose transfer it shares; detached leaders left out.
    public func snapshot() -> [Ref] {
        let (running, waiting) = scheduler.snapshot()
        var list: [Ref] = []
        list.reserveCapacity(count)
        for id in running + waiting {
            guard let record = records[id], let ref = records.ref(id) else { continue }
            if !record.detached { list.append(ref) }
            forEachFollower(of: id) { list.append($0) }
        }
        return list
    }

    // MARK: Settings

    public func setMaxConcurrent(_ value: Int) -> QueueActions<Ref> {
        scheduler.maxConcurrent = value
        return startStartable()
    }

    public func setOrder(_ order: QueueOrder) { scheduler.order = order }

    public func setDuplicates(_ mode: Duplicates) {
        duplicates = mode
        scheduler.cancelsEarlierDuplicates = mode == .cancelEarlier
    }

    public func setMaxPerHost(_ value: Int, origin: (Ref) -> String) -> QueueActions<Ref> {
        scheduler.maxPerHost = value
        assignOrigins(origin)
        return startStartable()
    }

    public func setRateLimit(_ value: RateLimit?, origin: (Ref) -> String) -> QueueActions<Ref> {
        scheduler.rateLimit = value
        assignOrigins(origin)
        return startStartable()
    }

    /// Requests queued before a per-host limit was on get their origins when one is turned on.
    private func assignOrigins(_ origin: (Ref) -> String) {
        if scheduler.usesOrigins, !originsAssigned {
            let records = records
            scheduler.assignOrigins { id in records.ref(id).map(origin) ?? "" }
        }
        originsAssigned = scheduler.usesOrigins
    }

    public func suspend() { scheduler.suspend() }

    public func resume() -> QueueActions<Ref> {
        scheduler.resume()
        return startStartable()
    }

    /// Changes a request's priority (a coalesced request's counts for nothing: it has no place of
    /// its own), then starts what can start.
    public func setPriority(_ id: UInt64, _ priority: Int) -> QueueActions<Ref> {
        if let record = records[id], record.leader == nil { scheduler.setPriority(id, priority) }
        return startStartable()
    }

    /// Closes the queue (no request is accepted any more); false when it was closed already.
    public func close() -> Bool {
        guard !isClosed else { return false }
        isClosed = true
        return true
    }

    // MARK: Adding and cancelling

    /// Adds a request (the owner has checked that the queue is open and the request new).
    /// `key` is asked for only when duplicates matter, `origin` only while origins do.
    public func add(_ id: UInt64, _ ref: Ref, traits: RequestTraits, key: () -> Key,
                    origin: () -> String) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        stats.added += 1
        let key = duplicates == .allow ? nil : key()
        if duplicates == .coalesce, let key, !traits.streamsBody, HTTPMethods.coalescable.contains(traits.method),
           let leaderID = scheduler.ids(withKey: key).first, let leader = records[leaderID], leader.canLead,
           !traits.wantsHead || scheduler.placement(of: leaderID) != .running {
            // Share the transfer of an equal request already waiting or running.
            records.insert(id, Record(traits, leader: leaderID), ref)
            var list = followers.removeValue(forKey: leaderID) ?? []
            list.append(id)
            followers[leaderID] = list
            followerCount += 1
            stats.coalesced += 1
            return actions
        }
        // The scheduler removes the requests this one replaces: those that ran are stopped here.
        var replacedRunning: [UInt64] = []
        let replaced = scheduler.add(id, key: key, origin: scheduler.usesOrigins ? origin() : "",
                                     priority: traits.priority) { old, placement in
            if placement == .running { replacedRunning.append(old) }
        } ?? []
        var record = Record(traits)
        if let slot = Int(exactly: id), slot < retiredGenerations.count { record.generation = retiredGenerations[slot] }
        records.insert(id, record, ref)
        for old in replaced {
            if replacedRunning.contains(old), let earlier = records.ref(old) { actions.append(.abort(earlier)) }
            complete(old, .cancelled(.duplicate), stopTransfer: false, into: &actions)
        }
        startStartable(into: &actions)
        return actions
    }

    /// Cancels one request, then starts what can start. Nil when it is not in the queue (or is a
    /// detached leader, whose completion was delivered).
    public func cancel(_ id: UInt64, reason: CancelReason = .caller) -> QueueActions<Ref>? {
        var actions = QueueActions<Ref>()
        guard cancel(id, reason: reason, into: &actions) else { return nil }
        startStartable(into: &actions)
        return actions
    }

    /// Cancels these requests (those not in the queue are skipped), then starts what can start;
    /// returns how many completions that produced.
    public func cancel(_ ids: [UInt64], reason: CancelReason = .caller) -> (count: Int, actions: QueueActions<Ref>) {
        var actions = QueueActions<Ref>()
        var count = 0
        for id in ids where cancel(id, reason: reason, into: &actions) { count += 1 }
        startStartable(into: &actions)
        return (count, actions)
    }

    /// Cancels every request; returns how many completions that produced.
    public func cancelAll(reason: CancelReason = .caller) -> (count: Int, actions: QueueActions<Ref>) {
        var actions = QueueActions<Ref>()
        var count = 0
        let (running, waiting) = scheduler.snapshot()
        for id in running + waiting {
            guard let record = records[id] else { continue }
            count += (record.detached ? 0 : 1) + (followers[id]?.count ?? 0)
            complete(id, .cancelled(reason), stopTransfer: true, into: &actions)
        }
        return (count, actions)
    }

    /// A coalesced request leaves its leader, whose transfer stops when nobody waits for it any
    /// more; a leader with followers delivers its own cancellation and goes on for them.
    private func cancel(_ id: UInt64, reason: CancelReason, into actions: inout QueueActions<Ref>) -> Bool {
        // The ref is taken only where it is used: `complete` moves it out of the records, and a
        // copy of it here was a retain of a request in no cache, waited for by every cancel of a
        // million waiting requests (bench/README.md, "Cancel without the request's reference count").
        guard var record = records[id] else { return false }
        if let leaderID = record.leader {
            guard let ref = records.remove(id)?.ref else { return false }
            followerCount -= 1
            tally(.cancelled, downloaded: 0, uploaded: 0)
            actions.append(.complete(ref, .cancelled(reason), attempts: record.attempts, sharing: false))
            var list = followers.removeValue(forKey: leaderID) ?? []
            list.removeAll { $0 == id }
            if !list.isEmpty {
                followers[leaderID] = list
            } else if records[leaderID]?.detached == true {
                complete(leaderID, .cancelled(reason), stopTransfer: true, into: &actions)
            }
            return true
        }
        guard !record.detached, scheduler.placement(of: id) != nil else { return false }
        if followers[id] != nil, let ref = records.ref(id) {
            record.detached = true
            records[id] = record
            detachedCount += 1
            stats.cancelled += 1
            actions.append(.detach(ref, .cancelled(reason), attempts: record.attempts))
            return true
        }
        complete(id, .cancelled(reason), stopTransfer: true, into: &actions)
        return true
    }

    // MARK: The engine's reports

    /// Credentials a server may reject for one request: its authentication handler is asked with
    /// `failures` 0 to 9, and the tenth rejected credential completes the request with its 401.
    public static var rejectedCredentialsLimit: Int { 10 }

    /// An attempt ended: complete the request, retry it under `retry` (the engine arms the timer),
    /// or ask its authentication handler. Nothing when `generation` is not the running attempt.
    /// `random` in [0, 1) draws the retry's jitter; `retry` nil: the request is not retried.
    public func attemptEnded(_ id: UInt64, generation: UInt64, _ report: AttemptReport, retry: RetryPolicy?,
                             method: String, random: Double) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard var record = records[id], record.leader == nil, record.phase == .running,
              record.generation == generation, let ref = records.ref(id) else { return actions }
        let decision = AttemptDecision.decide(outcome: report.outcome, status: report.status,
                                              hasAuthHandler: record.hasAuthHandler && !record.detached,
                                              retry: retry, attempt: record.attempts, method: method,
                                              retryAfter: report.retryAfter, random: random)
        switch decision {
        case .challenge where record.hasCredentials && Int(record.rejectedCredentials) + 1 >= Self.rejectedCredentialsLimit:
            // The server rejected every credential: the 401 is the response (each answer is a new
            // exchange at once, so a handler that always answers would never end).
            if report.hasDeferredHead { appendHeads(id, record, into: &actions) }
            complete(id, .reported, report, stopTransfer: false, into: &actions)
            startStartable(into: &actions)
        case .challenge:
            if record.hasCredentials { record.rejectedCredentials += 1 }
            record.phase = .authWait
            records[id] = record
            actions.append(.challenge(ref, generation: generation, failures: Int(record.rejectedCredentials)))
        case .retry(let delay):
            if report.hasDeferredHead { appendHeads(id, record, into: &actions) }
            // The attempt is counted when it starts (`retryDue`): a request cancelled during the
            // delay reports the attempts made.
            record.generation &+= 1
            record.phase = .retryWait
            records[id] = record
            stats.retried += 1
            actions.append(.retry(ref, generation: record.generation, after: delay))
        case .complete:
            if report.hasDeferredHead { appendHeads(id, record, into: &actions) }
            complete(id, .reported, report, stopTransfer: false, into: &actions)
            startStartable(into: &actions)
        }
        return actions
    }

    /// A transfer could not even be set up: the request completes with the reported failure.
    public func failedToStart(_ id: UInt64, generation: UInt64, _ report: AttemptReport) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard isCurrent(id, generation: generation) else { return actions }
        complete(id, .reported, report, stopTransfer: false, into: &actions)
        startStartable(into: &actions)
        return actions
    }

    /// The retry timer of `generation` fired: the next attempt starts (and counts), unless the
    /// request no longer waits for it.
    public func retryDue(_ id: UInt64, generation: UInt64) -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        guard var record = records[id], record.leader == nil, record.phase == .retryWait,
              record.generation == generation, let ref = records.ref(id) else { return actions }
        record.attempts += 1
        record.phase = .running
        records[id] = record
        actions.append(.start(ref, generation: generation, attempt: record.attempts))
        return actions
    }

    /// The rate limit's wake-up: starts what can start now.
    public func startDue() -> QueueActions<Ref> {
        scheduledWake = nil
        return startStartable()
    }

    /// The authentication handler answered the challenge of `generation`. Nil when the request no
    /// longer awaits that answer.
    public func answer(_ id: UInt64, generation: UInt64, _ answer: ChallengeAnswer) -> QueueActions<Ref>? {
        guard awaitsAnswer(id, generation: generation), var record = records[id], let ref = records.ref(id) else { return nil }
        var actions = QueueActions<Ref>()
        switch answer {
        case .credential:
            record.hasCredentials = true
            record.generation &+= 1
            record.phase = .running
            records[id] = record
            actions.append(.start(ref, generation: record.generation, attempt: record.attempts))
            return actions
        case .continueWithout(let report):
            if report.hasDeferredHead { appendHeads(id, record, into: &actions) }
            complete(id, .reported, report, stopTransfer: false, into: &actions)
        case .cancel:
            complete(id, .cancelled(.authHandler), stopTransfer: false, into: &actions)
        }
        startStartable(into: &actions)
        return actions
    }

    // MARK: Internals

    /// Keeps the last generation of a request that leaves its slot (see the type's comment).
    private func retire(_ id: UInt64, generation: UInt64) {
        guard generation > 0, let slot = Int(exactly: id) else { return }
        // One 0 at a time, as in `SlotMap`: slots grow by one, and appending a `repeatElement`
        // sequence cost several hundred instructions for that one element.
        while retiredGenerations.count <= slot { retiredGenerations.append(0) }
        retiredGenerations[slot] = generation
    }

    private func startStartable() -> QueueActions<Ref> {
        var actions = QueueActions<Ref>()
        startStartable(into: &actions)
        return actions
    }

    /// Starts what the scheduler lets start; asks for a wake-up when the rate limit holds back one.
    private func startStartable(into actions: inout QueueActions<Ref>) {
        let now = scheduler.rateLimit == nil ? 0 : clock()
        scheduler.takeStartable(now: now) { id in
            // The record changes in place (no copy out and back).
            guard let ref = records.ref(id), let generation = records.modify(id, { record -> UInt64 in
                record.phase = .running
                record.generation &+= 1
                record.attempts = 1
                return record.generation
            }) else { return }
            stats.started += 1
            actions.append(.start(ref, generation: generation, attempt: 1))
        }
        if scheduler.rateLimit != nil, let next = scheduler.nextStartTime(now: now), next != scheduledWake {
            scheduledWake = next
            actions.append(.wake(at: next))
        }
    }

    private func tally(_ outcome: Outcome, downloaded: Int64, uploaded: Int64) {
        switch outcome {
        case .ok: stats.succeeded += 1
        case .cancelled: stats.cancelled += 1
        default: stats.failed += 1
        }
        stats.bytesDown &+= UInt64(max(0, downloaded))
        stats.bytesUp &+= UInt64(max(0, uploaded))
    }

    /// The one completion of a request and of those sharing its transfer.
    private func complete(_ id: UInt64, _ ending: Ending, _ report: AttemptReport? = nil,
                          stopTransfer: Bool, into actions: inout QueueActions<Ref>) {
        // The ref moves from the records into the action (`consume`): copied, it was retained and
        // released once more per completion, the first of which waited for the request's line.
        guard case let (record, ref)? = records.remove(id) else { return }
        retire(id, generation: record.generation)
        let placement = scheduler.remove(id)
        // Only a started request has a transfer or a retry timer in the engine.
        if stopTransfer, placement == .running { actions.append(.abort(ref)) }
        let outcome = report?.outcome ?? .cancelled
        let down = report?.downloaded ?? 0, up = report?.uploaded ?? 0
        if record.detached {
            detachedCount -= 1
            actions.append(.release(consume ref, ending, attempts: record.attempts))
        } else {
            tally(outcome, downloaded: down, uploaded: up)
            actions.append(.complete(consume ref, ending, attempts: record.attempts, sharing: false))
        }
        guard let list = followers.removeValue(forKey: id) else { return }
        for followerID in list {
            guard let follower = records.remove(followerID)?.ref else { continue }
            followerCount -= 1
            tally(outcome, downloaded: down, uploaded: up)
            actions.append(.complete(follower, ending, attempts: record.attempts, sharing: true))
        }
    }
}
