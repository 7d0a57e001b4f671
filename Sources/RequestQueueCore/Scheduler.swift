/// Order in which waiting requests start.
public enum QueueOrder: Sendable {
    /// A new request waits behind every waiting request.
    case fifo
    /// A new request goes ahead of every waiting request (never ahead of running ones).
    case lifo
}

/// Where a request stands in a scheduler.
public enum Placement: Equatable, Sendable {
    case waiting
    case running
}

/// The queue's decisions, without I/O: which requests wait, which run, which start next, and which
/// earlier duplicates a new request replaces. Requests are identified by unique integer ids; `Key`
/// is the duplicate-equality key of a request.
///
/// Every mutation returns what the caller must act on (ids to start, ids cancelled as duplicates);
/// the caller owns the requests themselves. Not thread-safe: the owner serializes access.
public struct Scheduler<Key: Hashable> {
    /// Maximum number of running requests; 0 means unlimited.
    public var maxConcurrent: Int = 2
    public var order: QueueOrder = .fifo
    /// When true, adding a request removes every earlier request with an equal key.
    public var cancelsEarlierDuplicates = true
    public private(set) var isSuspended = false

    /// Waiting ids in start order, each with the ticket of its add. Removed ids stay behind as
    /// tombstones (skipped, then compacted), so that removing a waiting request costs O(1); the
    /// ticket tells a tombstone from a later add of the same id.
    private var waitingOrder = RingDeque<(id: UInt64, ticket: UInt64)>()
    /// The live waiting requests, with their tickets and duplicate keys.
    private var waiting: [UInt64: (ticket: UInt64, key: Key?)] = [:]
    private var nextTicket: UInt64 = 0
    /// The running requests with the sequence number of their start and their key.
    private var running: [UInt64: (sequence: UInt64, key: Key?)] = [:]
    private var startSequence: UInt64 = 0
    /// Live (waiting or running) ids per duplicate key, oldest first.
    private var idsByKey: [Key: [UInt64]] = [:]

    public init() {}

    /// Number of requests in the queue: running plus waiting.
    public var count: Int { waiting.count + running.count }
    public var runningCount: Int { running.count }
    public var waitingCount: Int { waiting.count }

    public func placement(of id: UInt64) -> Placement? {
        if running[id] != nil { return .running }
        if waiting[id] != nil { return .waiting }
        return nil
    }

    /// Adds a waiting request. Returns the ids of earlier equal requests that it replaces (they are
    /// removed; the caller completes them as cancelled). Adding an id already present changes
    /// nothing and returns nil.
    public mutating func add(_ id: UInt64, key: Key?) -> [UInt64]? {
        guard placement(of: id) == nil else { return nil }
        var replaced: [UInt64] = []
        if let key {
            if cancelsEarlierDuplicates, let earlier = idsByKey[key] {
                for old in earlier { _ = remove(old) }
                replaced = earlier
            }
            idsByKey[key, default: []].append(id)
        }
        nextTicket += 1
        waiting[id] = (nextTicket, key)
        switch order {
        case .fifo: waitingOrder.pushBack((id, nextTicket))
        case .lifo: waitingOrder.pushFront((id, nextTicket))
        }
        return replaced
    }

    /// Removes a request, waiting or running. Returns where it was, or nil if absent.
    @discardableResult
    public mutating func remove(_ id: UInt64) -> Placement? {
        let key: Key?
        let placement: Placement
        if let entry = running.removeValue(forKey: id) {
            key = entry.key
            placement = .running
        } else if let entry = waiting.removeValue(forKey: id) {
            key = entry.key
            placement = .waiting
            compactIfSparse()
        } else {
            return nil
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
        running = [:]
        waiting = [:]
        waitingOrder = RingDeque()
        idsByKey = [:]
        return runningIDs + waitingIDs
    }

    /// Moves waiting requests to running while slots are free and the queue is not suspended.
    /// Returns the ids to start, in start order.
    public mutating func takeStartable() -> [UInt64] {
        var started: [UInt64] = []
        while !isSuspended, maxConcurrent == 0 || running.count < maxConcurrent,
              let id = popWaiting() {
            let key = waiting.removeValue(forKey: id)?.key ?? nil
            startSequence += 1
            running[id] = (startSequence, key)
            started.append(id)
        }
        return started
    }

    public mutating func suspend() { isSuspended = true }
    public mutating func resume() { isSuspended = false }

    /// The running ids in start order and the waiting ids in the order they will start.
    public func snapshot() -> (running: [UInt64], waiting: [UInt64]) {
        let runningIDs = running.sorted { $0.value.sequence < $1.value.sequence }.map(\.key)
        let waitingIDs = waitingOrder.filter(isLive).map(\.id)
        return (runningIDs, waitingIDs)
    }

    /// Pops the next live waiting id, dropping tombstones on the way.
    private mutating func popWaiting() -> UInt64? {
        while let entry = waitingOrder.popFront() {
            if isLive(entry) { return entry.id }
        }
        return nil
    }

    private func isLive(_ entry: (id: UInt64, ticket: UInt64)) -> Bool {
        waiting[entry.id]?.ticket == entry.ticket
    }

    private mutating func compactIfSparse() {
        if waitingOrder.count > 64, waitingOrder.count > 2 * waiting.count {
            waitingOrder.retain(where: isLive)
        }
    }
}
