/// Order in which waiting requests of one priority start.
public enum QueueOrder: Sendable {
    /// A new request waits behind every waiting request of its priority.
    case fifo
    /// A new request goes ahead of every waiting request of its priority (never ahead of running ones).
    case lifo
}

/// Where a request stands in a scheduler.
public enum Placement: Equatable, Sendable {
    case waiting
    case running
}

/// At most `starts` request starts per `interval` seconds: a token bucket holding up to `starts`
/// tokens, refilled continuously. Per queue, or per origin when `perHost`.
public struct RateLimit: Equatable, Sendable {
    public var starts: Int
    public var interval: Double
    public var perHost: Bool

    public init(starts: Int, interval: Double, perHost: Bool) {
        self.starts = starts
        self.interval = interval
        self.perHost = perHost
    }
}

/// A token bucket: `capacity` tokens, refilled at `capacity / interval` per second.
public struct TokenBucket: Sendable {
    public let capacity: Double
    public let interval: Double
    public private(set) var tokens: Double
    private var updated: Double

    public init(capacity: Int, interval: Double, now: Double) {
        self.capacity = Double(capacity)
        self.interval = interval
        tokens = Double(capacity)
        updated = now
    }

    private mutating func refill(_ now: Double) {
        if now > updated {
            tokens = min(capacity, tokens + (now - updated) * capacity / interval)
            updated = now
        }
    }

    /// Takes a token if one is there.
    public mutating func take(now: Double) -> Bool {
        refill(now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// When the next token will be there (now when one is).
    public mutating func nextToken(now: Double) -> Double {
        refill(now)
        return tokens >= 1 ? now : now + (1 - tokens) * interval / capacity
    }
}

/// The queue's decisions, without I/O: which requests wait, which run, which start next (by
/// priority, then FIFO or LIFO, within the global and per-host limits and the rate limit), and
/// which earlier duplicates a new request replaces. Requests are identified by integer ids, unique
/// among those present and small (slot numbers: the scheduler indexes arrays with them);
/// `Key` is the duplicate-equality key of a request, `origin` the scheme://host:port it goes to.
///
/// Every mutation returns what the caller must act on (ids to start, ids cancelled as duplicates);
/// the caller owns the requests themselves. Not thread-safe: the owner serializes access.
public struct Scheduler<Key: Hashable> {
    /// The priority levels, lowest first; higher levels start first. The header's rq_priority
    /// (RQ_PRIORITY_VERY_LOW ... RQ_PRIORITY_VERY_HIGH) is the reference; HeaderAgreementTests
    /// checks that this range is the same.
    public static var priorities: ClosedRange<Int> { -2...2 }

    /// Maximum number of running requests; 0 means unlimited.
    public var maxConcurrent: Int = 2
    /// Maximum number of running requests per origin; 0 means unlimited.
    public var maxPerHost: Int = 0 {
        didSet { countOriginsIfTurnedOn(wasOn: oldValue > 0 || rateLimit?.perHost == true) }
    }
    public var order: QueueOrder = .fifo
    /// When true, adding a request removes every earlier request with an equal key.
    public var cancelsEarlierDuplicates = true
    public private(set) var isSuspended = false
    /// Limits how often requests start; nil for no limit. Setting it refills every bucket.
    public var rateLimit: RateLimit? {
        didSet {
            buckets = [:]
            countOriginsIfTurnedOn(wasOn: maxPerHost > 0 || oldValue?.perHost == true)
        }
    }

    /// A request's one entry (10 bytes; 16 in the map): whether it runs, and its stamp. One map
    /// for waiting and running requests, so that a cancel or a tombstone check reads one place
    /// (with a million waiting requests, every separate map is one more cache and TLB miss).
    private struct Entry {
        /// While waiting: the ticket of its place in its level; while running: the sequence number
        /// of its start (the start order).
        var stamp: UInt64
        /// Its level, in `Scheduler.priorities`.
        var priority: Int8
        var isRunning = false
    }

    /// Waiting ids in start order per priority level (index 0 is the lowest), each with the ticket
    /// of its insertion. Removed ids stay behind as tombstones (skipped, then compacted), so that
    /// removing a waiting request costs O(1); the ticket tells a tombstone from a later insertion.
    private var levels = [RingDeque<(id: UInt64, ticket: UInt64)>](repeating: RingDeque(), count: 5)
    /// Every request, waiting or running: one map, so that starting a request does not move its
    /// entry from one map to another.
    private var entries = SlotMap<Entry>()
    /// The running requests among `entries`.
    private var running = 0
    /// The duplicate keys and the origins of the requests that have one (a plain `Entry` costs
    /// little to store and to remove; most requests have neither).
    private var keys = SlotMap<Key>()
    private var origins = SlotMap<String>()
    private var nextTicket: UInt64 = 0
    private var startSequence: UInt64 = 0
    /// Running requests per origin, counted only while origins matter (`usesOrigins`).
    private var runningPerOrigin: [String: Int] = [:]
    /// Live (waiting or running) ids per duplicate key, oldest first.
    private var idsByKey: [Key: [UInt64]] = [:]
    /// Rate-limit buckets: "" for the queue, or one per origin.
    private var buckets: [String: TokenBucket] = [:]

    public init() {}

    /// Number of requests in the queue: running plus waiting.
    public var count: Int { entries.count }
    public var runningCount: Int { running }
    public var waitingCount: Int { entries.count - running }

    public func placement(of id: UInt64) -> Placement? {
        guard let entry = entries[id] else { return nil }
        return entry.isRunning ? .running : .waiting
    }

    public func priority(of id: UInt64) -> Int? { entries[id].map { Int($0.priority) } }

    /// Where the entry of `id` lies in memory, for a prefetch hint only (see `SlotMap.address`),
    /// and the distance between two ids' entries.
    public func entryAddress(of id: UInt64) -> UnsafeRawPointer? { entries.address(of: id) }
    public static var entryStride: UInt { SlotMap<Entry>.stride }

    /// The live (waiting or running) ids with an equal key, oldest first.
    public func ids(withKey key: Key) -> [UInt64] { idsByKey[key] ?? [] }

    /// Running requests to `origin`, while origins matter (`usesOrigins`).
    public func runningCount(origin: String) -> Int { runningPerOrigin[origin] ?? 0 }

    /// Whether origins matter: a per-host limit or a per-host rate limit is on.
    public var usesOrigins: Bool { maxPerHost > 0 || rateLimit?.perHost == true }

    /// Sets the origin of every waiting and running request (for requests added while origins did
    /// not matter).
    public mutating func assignOrigins(_ originOf: (UInt64) -> String) {
        runningPerOrigin = [:]
        for (id, entry) in entries {
            let origin = originOf(id)
            origins[id] = origin.isEmpty ? nil : origin
            if entry.isRunning {
                runningPerOrigin[origin, default: 0] += 1
            }
        }
    }

    /// Adds a waiting request. Returns the ids of earlier equal requests that it replaces (they are
    /// removed; the caller completes them as cancelled). Adding an id already present changes
    /// nothing and returns nil. `priority` is clamped to `Scheduler.priorities`.
    /// `removed` is called with each replaced id and where it was.
    public mutating func add(_ id: UInt64, key: Key?, origin: String = "", priority: Int = 0,
                             removed: (UInt64, Placement) -> Void = { _, _ in }) -> [UInt64]? {
        guard placement(of: id) == nil else { return nil }
        var replaced: [UInt64] = []
        if let key {
            if cancelsEarlierDuplicates, let earlier = idsByKey[key] {
                for old in earlier {
                    if let placement = remove(old) { removed(old, placement) }
                }
                replaced = earlier
            }
            idsByKey[key, default: []].append(id)
        }
        let level = min(max(priority, Self.priorities.lowerBound), Self.priorities.upperBound)
        // `remove` leaves no key or origin behind: an id without them needs no write.
        if let key { keys[id] = key }
        if !origin.isEmpty { origins[id] = origin }
        insertWaiting(id, level: level)
        return replaced
    }

    /// Changes a request's priority. A waiting request moves to the new level (behind its waiting
    /// requests in FIFO order, ahead of them in LIFO order); a running one only records it.
    /// Returns false when the id is absent.
    @discardableResult
    public mutating func setPriority(_ id: UInt64, _ priority: Int) -> Bool {
        let level = min(max(priority, Self.priorities.lowerBound), Self.priorities.upperBound)
        nextTicket += 1
        let ticket = nextTicket
        guard let waits = entries.modify(id, { (entry: inout Entry) -> Bool in
            entry.priority = Int8(truncatingIfNeeded: level)
            if entry.isRunning { return false }
            entry.stamp = ticket
            return true
        }) else { return false }
        if waits {
            // Its old place in its level became a tombstone (the ticket changed).
            enqueue(id, ticket: ticket, level: level)
            compactIfSparse(level)
        }
        return true
    }

    /// Removes a request, waiting or running. Returns where it was, or nil if absent.
    @discardableResult
    public mutating func remove(_ id: UInt64) -> Placement? {
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        let key = keys.removeValue(forKey: id)
        let origin = origins.removeValue(forKey: id) ?? ""
        let placement: Placement
        if entry.isRunning {
            placement = .running
            running -= 1
            if usesOrigins { releaseOrigin(origin) }
        } else {
            placement = .waiting
            compactIfSparse(Int(entry.priority))
        }
        if let key, var ids = idsByKey[key] {
            ids.removeAll { $0 == id }
            idsByKey[key] = ids.isEmpty ? nil : ids
        }
        return placement
    }

    /// Removes every request; returns the running ones in start order, then the waiting ones.
    public mutating func removeAll() -> [UInt64] {
        let (runningIDs, waitingIDs) = snapshot()
        entries = SlotMap()
        running = 0
        keys = SlotMap()
        origins = SlotMap()
        runningPerOrigin = [:]
        levels = [RingDeque](repeating: RingDeque(), count: levels.count)
        idsByKey = [:]
        return runningIDs + waitingIDs
    }

    /// Moves waiting requests to running while the limits allow and the queue is not suspended:
    /// highest priority first, in order within a priority, skipping requests whose origin is at
    /// its limit or out of rate tokens (they keep their place). `now` (seconds, any monotonic
    /// clock) feeds the rate limit. Returns the ids to start, in start order.
    public mutating func takeStartable(now: Double = 0) -> [UInt64] {
        var started: [UInt64] = []
        takeStartable(now: now) { started.append($0) }
        return started
    }

    /// `takeStartable`, calling `start` with each id in start order instead of making a list.
    public mutating func takeStartable(now: Double = 0, _ start: (UInt64) -> Void) {
        // The limits do not change during the loop: read once.
        let countsOrigins = usesOrigins, rateLimit = rateLimit
        while !isSuspended, maxConcurrent == 0 || running < maxConcurrent,
              let id = nextEligible(now: now) {
            startSequence += 1
            let sequence = startSequence
            let origin = countsOrigins ? origins[id] ?? "" : ""
            entries.modify(id) { entry in
                entry.stamp = sequence
                entry.isRunning = true
            }
            running += 1
            if countsOrigins { runningPerOrigin[origin, default: 0] += 1 }
            if let rateLimit {
                let bucket = rateLimit.perHost ? origin : ""
                _ = buckets[bucket, default: TokenBucket(capacity: rateLimit.starts, interval: rateLimit.interval, now: now)].take(now: now)
            }
            start(id)
        }
    }

    /// When a waiting request held back only by the rate limit can start, or nil when none is.
    public mutating func nextStartTime(now: Double) -> Double? {
        guard let rateLimit, !isSuspended, maxConcurrent == 0 || running < maxConcurrent else { return nil }
        var earliest: Double?
        for (id, entry) in entries where !entry.isRunning
            && (maxPerHost == 0 || runningCount(origin: origins[id] ?? "") < maxPerHost) {
            let bucket = rateLimit.perHost ? origins[id] ?? "" : ""
            let time = buckets[bucket, default: TokenBucket(capacity: rateLimit.starts, interval: rateLimit.interval, now: now)]
                .nextToken(now: now)
            earliest = min(earliest ?? time, time)
        }
        return earliest
    }

    public mutating func suspend() { isSuspended = true }
    public mutating func resume() { isSuspended = false }

    /// The running ids in start order and the waiting ids in the order they will start (when no
    /// per-host or rate limit holds some back).
    public func snapshot() -> (running: [UInt64], waiting: [UInt64]) {
        var started: [(id: UInt64, sequence: UInt64)] = []
        started.reserveCapacity(running)
        // (Every slot is visited: not at all when none runs, e.g. when an idle queue is freed.)
        if running > 0 {
            for (id, entry) in entries where entry.isRunning { started.append((id, entry.stamp)) }
        }
        let runningIDs = started.sorted { $0.sequence < $1.sequence }.map(\.id)
        var waitingIDs: [UInt64] = []
        waitingIDs.reserveCapacity(waitingCount)
        for level in levels.indices.reversed() {
            for item in levels[level] where isLive(item) { waitingIDs.append(item.id) }
        }
        return (runningIDs, waitingIDs)
    }

    // MARK: Internals

    private mutating func insertWaiting(_ id: UInt64, level: Int) {
        nextTicket += 1
        entries[id] = Entry(stamp: nextTicket, priority: Int8(truncatingIfNeeded: level))
        enqueue(id, ticket: nextTicket, level: level)
    }

    /// Puts the waiting request `id`, under `ticket`, in the level of `priority`.
    private mutating func enqueue(_ id: UInt64, ticket: UInt64, level priority: Int) {
        let level = priority - Self.priorities.lowerBound
        switch order {
        case .fifo: levels[level].pushBack((id, ticket))
        case .lifo: levels[level].pushFront((id, ticket))
        }
    }

    /// Whether a level's item is a waiting request's place (not a tombstone: the request was
    /// removed, started, or moved by `setPriority`).
    private func isLive(_ item: (id: UInt64, ticket: UInt64)) -> Bool {
        Self.isLive(item, in: entries)
    }

    private static func isLive(_ item: (id: UInt64, ticket: UInt64), in entries: SlotMap<Entry>) -> Bool {
        guard let entry = entries[item.id] else { return false }
        return !entry.isRunning && entry.stamp == item.ticket
    }

    private func originHasRoom(_ origin: String) -> Bool {
        maxPerHost == 0 || runningCount(origin: origin) < maxPerHost
    }

    private mutating func hasToken(_ origin: String, now: Double) -> Bool {
        guard let rateLimit else { return true }
        let bucket = rateLimit.perHost ? origin : ""
        return buckets[bucket, default: TokenBucket(capacity: rateLimit.starts, interval: rateLimit.interval, now: now)]
            .nextToken(now: now) <= now
    }

    /// The next waiting id that may start now, or nil.
    private mutating func nextEligible(now: Double) -> UInt64? {
        // Nothing waits (every report of a queue that keeps up): no level to look through.
        // (Tombstones left in the levels go with the next look, or `compactIfSparse`.)
        guard entries.count > running else { return nil }
        let constrained = maxPerHost > 0 || rateLimit != nil
        if let rateLimit, !rateLimit.perHost, !hasToken("", now: now) { return nil }
        for level in levels.indices.reversed() {
            // Drop tombstones at the front; without per-host or per-host-rate limits the front
            // is the answer.
            while let front = levels[level].first, !isLive(front) { _ = levels[level].popFront() }
            guard let front = levels[level].first else { continue }
            if !constrained || (rateLimit?.perHost != true && maxPerHost == 0) {
                _ = levels[level].popFront()
                return front.id
            }
            for item in levels[level] where isLive(item) {
                let origin = origins[item.id] ?? ""
                guard originHasRoom(origin) else { continue }
                if rateLimit?.perHost == true, !hasToken(origin, now: now) { continue }
                if item.id == front.id { _ = levels[level].popFront() }
                return item.id
            }
        }
        return nil
    }

    /// Counts the running requests per origin when origins start to matter.
    private mutating func countOriginsIfTurnedOn(wasOn: Bool) {
        guard usesOrigins, !wasOn else { return }
        runningPerOrigin = [:]
        for (id, entry) in entries where entry.isRunning { runningPerOrigin[origins[id] ?? "", default: 0] += 1 }
    }

    private mutating func releaseOrigin(_ origin: String) {
        guard let n = runningPerOrigin[origin] else { return }
        runningPerOrigin[origin] = n > 1 ? n - 1 : nil
    }

    private mutating func compactIfSparse(_ priority: Int) {
        let level = priority - Self.priorities.lowerBound
        guard levels.indices.contains(level) else { return }
        if levels[level].count > 64, levels[level].count > 2 * waitingCount {
            let live = entries
            levels[level].retain { Self.isLive($0, in: live) }
        }
    }
}
