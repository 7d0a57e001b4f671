import Testing
import RequestQueueCore

/// The reference: plain arrays, obviously right, slow. `running` and `waiting` are in start order.
private struct ReferenceScheduler {
    var maxConcurrent = 2
    var order = QueueOrder.fifo
    var cancelsEarlierDuplicates = true
    var isSuspended = false
    var running: [UInt64] = []
    var waiting: [UInt64] = []
    /// Key of every live request, and when it was added (duplicates are replaced oldest first).
    var keys: [UInt64: Int?] = [:]
    var addTime: [UInt64: Int] = [:]
    var clock = 0

    var count: Int { running.count + waiting.count }

    func placement(of id: UInt64) -> Placement? {
        if running.contains(id) { return .running }
        if waiting.contains(id) { return .waiting }
        return nil
    }

    mutating func add(_ id: UInt64, key: Int?) -> [UInt64]? {
        if placement(of: id) != nil { return nil }
        var replaced: [UInt64] = []
        if let key, cancelsEarlierDuplicates {
            replaced = (running + waiting).filter { keys[$0] == .some(key) }.sorted { addTime[$0]! < addTime[$1]! }
            for old in replaced { remove(old) }
        }
        clock += 1
        keys[id] = key
        addTime[id] = clock
        switch order {
        case .fifo: waiting.append(id)
        case .lifo: waiting.insert(id, at: 0)
        }
        return replaced
    }

    @discardableResult
    mutating func remove(_ id: UInt64) -> Placement? {
        let where_ = placement(of: id)
        running.removeAll { $0 == id }
        waiting.removeAll { $0 == id }
        keys[id] = nil
        addTime[id] = nil
        return where_
    }

    mutating func removeAll() -> [UInt64] {
        let all = running + waiting
        running = []
        waiting = []
        keys = [:]
        addTime = [:]
        return all
    }

    mutating func takeStartable() -> [UInt64] {
        var started: [UInt64] = []
        while !isSuspended, maxConcurrent == 0 || running.count < maxConcurrent, !waiting.isEmpty {
            let id = waiting.removeFirst()
            running.append(id)
            started.append(id)
        }
        return started
    }
}

/// Random operations on the real scheduler and on the reference, compared after every step.
@Suite struct SchedulerModelTests {
    @Test(arguments: [1, 7, 99, 2024, 0x5EED_5EED] as [UInt64])
    func randomOperationsMatchTheReference(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var real = Scheduler<Int>()
        var model = ReferenceScheduler()
        var nextID: UInt64 = 1
        var everUsed: [UInt64] = []
        var runningAtLimitChange = Set<UInt64>()
        var stats = (replaced: 0, refusedAdds: 0, removedWaiting: 0, removedRunning: 0, started: 0, overLimit: 0, reAdds: 0)

        for step in 0..<3000 {
            // Phases: mostly adding (the line grows past the compaction threshold), then mostly
            // removing and starting, so that tombstones pile up and get compacted.
            let filling = (step / 300) % 2 == 0
            let roll = rng.below(100)
            var what = ""
            if roll < (filling ? 45 : 15) {
                let id = nextID
                nextID += 1
                everUsed.append(id)
                let key: Int? = rng.chance(30) ? nil : rng.below(filling ? 40 : 6)
                what = "add(\(id), key: \(String(describing: key)))"
                let got = real.add(id, key: key)
                let expected = model.add(id, key: key)
                #expect(got == expected, "seed \(seed) step \(step): \(what)")
                stats.replaced += expected?.count ?? 0
            } else if roll < (filling ? 48 : 18) {
                // An id that is live (or was, or never was): if present, nothing changes.
                let live = model.running + model.waiting
                let id: UInt64
                if !live.isEmpty, rng.chance(70) {
                    id = live[rng.below(live.count)]
                } else {
                    id = everUsed.isEmpty ? 0 : everUsed[rng.below(everUsed.count)]
                }
                if model.placement(of: id) != nil {
                    what = "add existing \(id)"
                    #expect(real.add(id, key: rng.below(6)) == nil, "seed \(seed) step \(step): \(what)")
                    stats.refusedAdds += 1
                } else if rng.chance(50) {
                    // Added again after it left: a new request that happens to reuse the id.
                    let key: Int? = rng.chance(30) ? nil : rng.below(6)
                    what = "re-add(\(id), key: \(String(describing: key)))"
                    #expect(real.add(id, key: key) == model.add(id, key: key), "seed \(seed) step \(step): \(what)")
                    stats.reAdds += 1
                } else {
                    what = "remove absent \(id)"
                    #expect(real.remove(id) == nil, "seed \(seed) step \(step): \(what)")
                }
            } else if roll < (filling ? 63 : 58) {
                // Remove a live request: waiting or running (a completion or a cancel).
                let live = model.running + model.waiting
                guard !live.isEmpty else { continue }
                let id = live[rng.below(live.count)]
                what = "remove(\(id))"
                let expected = model.remove(id)
                #expect(real.remove(id) == expected, "seed \(seed) step \(step): \(what)")
                if expected == .waiting { stats.removedWaiting += 1 } else { stats.removedRunning += 1 }
            } else if roll < 85 {
                what = "takeStartable"
                let runningBefore = real.runningCount
                let got = real.takeStartable()
                let expected = model.takeStartable()
                #expect(got == expected, "seed \(seed) step \(step): \(what)")
                stats.started += got.count
                // Invariants of one call, checked on the real scheduler alone.
                if !got.isEmpty {
                    #expect(!real.isSuspended)
                    if real.maxConcurrent > 0 { #expect(real.runningCount <= real.maxConcurrent) }
                }
                #expect(real.runningCount == runningBefore + got.count)
                if !real.isSuspended {
                    #expect(real.waitingCount == 0 || (real.maxConcurrent > 0 && real.runningCount >= real.maxConcurrent),
                            "seed \(seed) step \(step): a free slot was left with requests waiting")
                }
            } else if roll < 91 {
                let limit = rng.below(5)
                what = "maxConcurrent = \(limit)"
                real.maxConcurrent = limit
                model.maxConcurrent = limit
                runningAtLimitChange = Set(model.running)
            } else if roll < 95 {
                if rng.chance(50) {
                    what = "suspend"
                    real.suspend()
                    model.isSuspended = true
                } else {
                    what = "resume"
                    real.resume()
                    model.isSuspended = false
                }
            } else if roll < 98 {
                let order: QueueOrder = rng.chance(50) ? .fifo : .lifo
                what = "order = \(order)"
                real.order = order
                model.order = order
            } else if roll < 99 {
                let cancels = rng.chance(75)
                what = "cancelsEarlierDuplicates = \(cancels)"
                real.cancelsEarlierDuplicates = cancels
                model.cancelsEarlierDuplicates = cancels
            } else {
                what = "removeAll"
                #expect(real.removeAll() == model.removeAll(), "seed \(seed) step \(step): \(what)")
            }

            // Invariants and the full state, after every step.
            let snapshot = real.snapshot()
            guard snapshot.running == model.running, snapshot.waiting == model.waiting else {
                Issue.record("""
                    seed \(seed) step \(step) after \(what):
                    real running \(snapshot.running) waiting \(snapshot.waiting)
                    model running \(model.running) waiting \(model.waiting)
                    """)
                return
            }
            #expect(real.count == model.count)
            #expect(real.runningCount == model.running.count)
            #expect(real.waitingCount == model.waiting.count)
            #expect(real.count == snapshot.running.count + snapshot.waiting.count)
            #expect(Set(snapshot.running).isDisjoint(with: snapshot.waiting))
            #expect(Set(snapshot.running + snapshot.waiting).count == real.count)
            #expect(real.isSuspended == model.isSuspended)
            if real.maxConcurrent > 0, real.runningCount > real.maxConcurrent {
                // Only a lowered limit leaves more running than allowed, and then nothing may
                // start until the count is back under it: every running one ran before the change.
                stats.overLimit += 1
                #expect(Set(snapshot.running).isSubset(of: runningAtLimitChange),
                        "seed \(seed) step \(step): started over the limit")
            }
            // Placement of a few ids, live or not.
            for _ in 0..<3 {
                let id = UInt64(rng.below(Int(nextID) + 1))
                #expect(real.placement(of: id) == model.placement(of: id), "seed \(seed) step \(step): placement(\(id))")
            }
        }
        // The run actually exercised each kind of operation.
        #expect(stats.replaced > 20)
        #expect(stats.refusedAdds > 20)
        #expect(stats.removedWaiting > 50)
        #expect(stats.removedRunning > 50)
        #expect(stats.started > 100)
        #expect(stats.overLimit > 0)
        #expect(stats.reAdds > 10)
    }
}
