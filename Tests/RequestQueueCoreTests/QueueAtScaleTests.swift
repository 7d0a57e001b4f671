import Testing
import RequestQueueCore

/// Large queues: cancels at every position keep the order of the rest (priority, then FIFO or
/// LIFO), the duplicate index follows every removal, and a running request keeps its place in the
/// start order whatever is done to its priority.
@Suite struct QueueAtScaleTests {
    /// The order in which waiting requests start: highest priority first, in add order (FIFO) or
    /// its reverse (LIFO) within a priority.
    private static func startOrder(_ ids: [UInt64], priority: (UInt64) -> Int, order: QueueOrder) -> [UInt64] {
        let levels = Scheduler<String>.priorities.reversed()
        return levels.flatMap { level in
            let same = ids.filter { priority($0) == level }
            return order == .fifo ? same : same.reversed()
        }
    }

    @Test(arguments: [QueueOrder.fifo, .lifo])
    func cancellingAnyPositionKeepsTheOrderOfTheRest(order: QueueOrder) {
        let s = QueueState<String, UInt64>(clock: { 0 })
        _ = s.setMaxConcurrent(3)
        s.setDuplicates(.allow)
        s.setOrder(order)
        let priority = { (id: UInt64) -> Int in Int(id % 5) - 2 }
        func add(_ id: UInt64) -> [QueueAction<UInt64>] {
            Array(s.add(id, id, traits: RequestTraits(priority: priority(id)), key: { "k" }, origin: { "" }))
        }
        // Three run; then 3,000 wait in a suspended queue.
        let running: [UInt64] = [1, 2, 3]
        for id in running { #expect(add(id) == [.start(id, generation: 1, attempt: 1)]) }
        s.suspend()
        let waiting = (4...3003).map { UInt64($0) }
        for id in waiting { #expect(add(id) == []) }
        var expected = Self.startOrder(waiting, priority: priority, order: order)
        #expect(s.snapshot() == running + expected)

        // Cancel two thirds of the waiting ones and one running one, in a shuffled order; the rest
        // keeps its order after every cancel that is checked (tombstones, compactions).
        var rng = SplitMix64(seed: 16)
        var victims = waiting.filter { _ in rng.below(3) != 0 } + [2]
        for i in stride(from: victims.count - 1, to: 0, by: -1) { victims.swapAt(i, rng.below(i + 1)) }
        var liveRunning = running
        for (n, id) in victims.enumerated() {
            let actions = s.cancelled(id)
            if id == 2 {
                #expect(actions == [.abort(2), .complete(2, .cancelled(.caller), attempts: 1, sharing: false)])
                liveRunning.removeAll { $0 == 2 }
            } else {
                #expect(actions == [.complete(id, .cancelled(.caller), attempts: 0, sharing: false)])
                expected.removeAll { $0 == id }
            }
            #expect(s.phase(of: id) == nil)
            #expect(s.cancelled(id) == nil, "a second cancel of \(id) finds nothing")
            if n % 97 == 0 || n == victims.count - 1 {
                #expect(s.snapshot() == liveRunning + expected, "after \(n + 1) cancels")
            }
        }
        #expect(s.count == liveRunning.count + expected.count)
        #expect(s.scheduler.runningCount == liveRunning.count)
        #expect(s.scheduler.waitingCount == expected.count)

        // Resumed without a limit, the rest starts in exactly that order.
        #expect(Array(s.setMaxConcurrent(0)) == [])
        let starts = Array(s.resume())
        #expect(starts.count == expected.count)
        let mismatch = starts.indices.first { i in
            i >= expected.count || starts[i] != QueueAction<UInt64>.start(expected[i], generation: 1, attempt: 1)
        }
        #expect(mismatch == nil, "the start order differs from position \(mismatch ?? 0) on")
        #expect(s.scheduler.waitingCount == 0)
        #expect(s.scheduler.runningCount == liveRunning.count + expected.count)
    }

    @Test func theDuplicateIndexFollowsEveryRemovalAndStart() {
        var s = Scheduler<Int>()
        s.maxConcurrent = 4
        s.cancelsEarlierDuplicates = false
        s.suspend()
        var keys: [UInt64: Int] = [:]
        for id in 1...2000 as ClosedRange<UInt64> where id % 10 != 0 { keys[id] = Int(id % 7) }
        let key = { (id: UInt64) -> Int? in keys[id] }
        var live: [UInt64] = []
        for id in 1...2000 as ClosedRange<UInt64> {
            #expect(s.add(id, key: key(id)) == [])
            live.append(id)
        }
        func checkIndex(_ note: String) {
            for k in 0..<7 {
                #expect(s.ids(withKey: k) == live.filter { key($0) == k }, "key \(k): \(note)")
            }
        }
        checkIndex("after adding")
        var rng = SplitMix64(seed: 7)
        s.resume()
        let started = s.takeStartable()
        #expect(started == [1, 2, 3, 4])
        s.suspend()
        for step in 0..<1500 {
            let id = live.remove(at: rng.below(live.count))
            #expect(s.remove(id) == (started.contains(id) ? .running : .waiting))
            if step % 150 == 0 { checkIndex("after \(step + 1) removals") }
        }
        checkIndex("after the removals")
        // Now an equal request replaces exactly the live ones with its key, oldest first.
        s.cancelsEarlierDuplicates = true
        let equal = live.filter { key($0) == 3 }
        #expect(!equal.isEmpty)
        #expect(s.add(5000, key: 3) == equal)
        keys[5000] = 3
        live.removeAll { equal.contains($0) }
        live.append(5000)
        checkIndex("after a replacement")
        #expect(s.count == live.count)
        for id in equal { #expect(s.placement(of: id) == nil) }
    }

    @Test func aRunningRequestKeepsItsPlaceWhateverItsPriority() {
        var s = Scheduler<String>()
        s.maxConcurrent = 2
        s.addAll([1, 2, 3, 4])
        #expect(s.takeStartable() == [1, 2])
        // Changing a running request's priority records it, and moves nothing.
        let changed = [s.setPriority(2, -2), s.setPriority(1, 2)]
        #expect(changed == [true, true])
        #expect(s.priority(of: 1) == 2)
        #expect(s.priority(of: 2) == -2)
        #expect(s.placement(of: 1) == .running)
        #expect(s.snapshot().running == [1, 2])
        #expect(s.snapshot().waiting == [3, 4])
        #expect(s.runningCount == 2)
        #expect(s.waitingCount == 2)
        // A waiting one moves: 4 now goes first.
        let moved = s.setPriority(4, 1)
        #expect(moved)
        #expect(s.snapshot().waiting == [4, 3])
        #expect(s.remove(1) == .running)
        #expect(s.takeStartable() == [4])
        #expect(s.snapshot().running == [2, 4])
        #expect(s.remove(2) == .running)
        #expect(s.remove(4) == .running)
        #expect(s.takeStartable() == [3])
        #expect(s.runningCount == 1)
        #expect(s.waitingCount == 0)
    }
}
