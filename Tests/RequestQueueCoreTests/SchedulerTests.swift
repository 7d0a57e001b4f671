import Testing
import RequestQueueCore

/// A scheduler with string keys, the given limit and order.
private func scheduler(max: Int = 2, order: QueueOrder = .fifo) -> Scheduler<String> {
    var s = Scheduler<String>()
    s.maxConcurrent = max
    s.order = order
    return s
}

extension Scheduler {
    /// Adds ids without keys, expecting each to be accepted and to replace nothing.
    mutating func addAll(_ ids: [UInt64], sourceLocation: SourceLocation = #_sourceLocation) {
        for id in ids {
            #expect(add(id, key: nil) == [], sourceLocation: sourceLocation)
        }
    }

    /// Removes `id`, which must be running, and returns what starts next.
    mutating func finish(_ id: UInt64, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt64] {
        #expect(remove(id) == .running, sourceLocation: sourceLocation)
        return takeStartable()
    }
}

@Suite struct SchedulerTests {
    // MARK: Defaults and counts

    @Test func defaults() {
        let s = Scheduler<String>()
        #expect(s.maxConcurrent == 2)
        #expect(s.order == .fifo)
        #expect(s.cancelsEarlierDuplicates)
        #expect(!s.isSuspended)
        #expect(s.count == 0)
        #expect(s.runningCount == 0)
        #expect(s.waitingCount == 0)
        #expect(s.snapshot().running == [])
        #expect(s.snapshot().waiting == [])
        #expect(s.placement(of: 1) == nil)
    }

    @Test func addOnlyQueuesUntilTakeStartable() {
        var s = scheduler(max: 2)
        s.addAll([1, 2, 3])
        #expect(s.placement(of: 1) == .waiting)
        #expect(s.runningCount == 0)
        #expect(s.waitingCount == 3)
        #expect(s.takeStartable() == [1, 2])
        #expect(s.takeStartable() == [])
        #expect(s.placement(of: 1) == .running)
        #expect(s.placement(of: 2) == .running)
        #expect(s.placement(of: 3) == .waiting)
    }

    @Test func countsFollowEveryChange() {
        var s = scheduler(max: 2)
        s.addAll([10, 11, 12, 13])
        #expect((s.count, s.runningCount, s.waitingCount) == (4, 0, 4))
        _ = s.takeStartable()
        #expect((s.count, s.runningCount, s.waitingCount) == (4, 2, 2))
        #expect(s.remove(13) == .waiting)
        #expect((s.count, s.runningCount, s.waitingCount) == (3, 2, 1))
        #expect(s.remove(10) == .running)
        #expect((s.count, s.runningCount, s.waitingCount) == (2, 1, 1))
        #expect(s.takeStartable() == [12])
        #expect((s.count, s.runningCount, s.waitingCount) == (2, 2, 0))
        #expect(s.remove(99) == nil)
        #expect((s.count, s.runningCount, s.waitingCount) == (2, 2, 0))
    }

    @Test func placement() {
        var s = scheduler(max: 1)
        s.addAll([1, 2])
        _ = s.takeStartable()
        #expect(s.placement(of: 1) == .running)
        #expect(s.placement(of: 2) == .waiting)
        #expect(s.placement(of: 3) == nil)
        #expect(s.remove(1) == .running)
        #expect(s.placement(of: 1) == nil)
        #expect(s.placement(of: 2) == .waiting)
    }

    // MARK: Order

    @Test func fifoWithOneSlotStartsInAddOrder() {
        var s = scheduler(max: 1, order: .fifo)
        s.addAll([5, 3, 9, 1, 7])
        var started = s.takeStartable()
        #expect(started == [5])
        #expect(s.takeStartable() == [])
        var current = started[0]
        while true {
            let next = s.finish(current)
            if next.isEmpty { break }
            #expect(next.count == 1)
            started += next
            current = next[0]
        }
        #expect(started == [5, 3, 9, 1, 7])
        #expect(s.count == 0)
    }

    @Test func lifoGoesAheadOfWaitingButNeverAheadOfRunning() {
        var s = scheduler(max: 1, order: .lifo)
        s.addAll([1])
        #expect(s.takeStartable() == [1])
        s.addAll([2, 3, 4])
        #expect(s.takeStartable() == [])             // 1 keeps its slot
        #expect(s.snapshot().running == [1])
        #expect(s.snapshot().waiting == [4, 3, 2])
        #expect(s.finish(1) == [4])
        s.addAll([5])
        #expect(s.takeStartable() == [])             // 4 is never displaced
        #expect(s.snapshot().running == [4])
        #expect(s.snapshot().waiting == [5, 3, 2])
        #expect(s.finish(4) == [5])
        #expect(s.finish(5) == [3])
        #expect(s.finish(3) == [2])
        #expect(s.finish(2) == [])
    }

    @Test func changingTheOrderAffectsOnlyLaterAdds() {
        var s = scheduler(max: 0, order: .fifo)
        s.suspend()
        s.addAll([1, 2])
        s.order = .lifo
        #expect(s.snapshot().waiting == [1, 2])
        s.addAll([3, 4])
        #expect(s.snapshot().waiting == [4, 3, 1, 2])
        s.order = .fifo
        #expect(s.snapshot().waiting == [4, 3, 1, 2])
        s.addAll([5])
        #expect(s.snapshot().waiting == [4, 3, 1, 2, 5])
        s.resume()
        #expect(s.takeStartable() == [4, 3, 1, 2, 5])
        #expect(s.snapshot().running == [4, 3, 1, 2, 5])
    }

    // MARK: Limit

    @Test func neverMoreRunningThanTheLimit() {
        for limit in 1...5 {
            var s = scheduler(max: limit)
            s.addAll((1...12).map { UInt64($0) })
            #expect(s.takeStartable() == (1...limit).map { UInt64($0) })
            #expect(s.runningCount == limit)
            #expect(s.takeStartable() == [])
            // Finishing one frees exactly one slot.
            #expect(s.finish(1) == [UInt64(limit + 1)])
            #expect(s.runningCount == limit)
        }
    }

    @Test func zeroMeansUnlimited() {
        var s = scheduler(max: 0)
        let ids = (1...300).map { UInt64($0) }
        s.addAll(ids)
        #expect(s.takeStartable() == ids)
        #expect(s.runningCount == 300)
        #expect(s.waitingCount == 0)
        s.addAll([1000])
        #expect(s.takeStartable() == [1000])
    }

    @Test func raisingTheLimitStartsMoreAtOnce() {
        var s = scheduler(max: 1)
        s.addAll([1, 2, 3, 4, 5, 6])
        #expect(s.takeStartable() == [1])
        s.maxConcurrent = 3
        #expect(s.takeStartable() == [2, 3])
        #expect(s.takeStartable() == [])
        s.maxConcurrent = 0
        #expect(s.takeStartable() == [4, 5, 6])
        #expect(s.runningCount == 6)
    }

    @Test func loweringTheLimitNeverRemovesRunningOnes() {
        var s = scheduler(max: 3)
        s.addAll([1, 2, 3, 4, 5])
        #expect(s.takeStartable() == [1, 2, 3])
        s.maxConcurrent = 1
        #expect(s.runningCount == 3)
        #expect(s.snapshot().running == [1, 2, 3])
        #expect(s.takeStartable() == [])
        #expect(s.finish(2) == [])                   // 2 running, limit 1
        #expect(s.finish(1) == [])                   // 1 running, limit 1
        #expect(s.finish(3) == [4])
        #expect(s.snapshot() == ([4], [5]))
    }

    // MARK: Suspend and resume

    @Test func suspendedStartsNothingAndResumeStartsUpToTheLimit() {
        var s = scheduler(max: 2)
        s.suspend()
        #expect(s.isSuspended)
        s.addAll([1, 2, 3])
        #expect(s.takeStartable() == [])
        #expect(s.runningCount == 0)
        s.suspend()                                  // no-op
        #expect(s.isSuspended)
        s.resume()
        #expect(!s.isSuspended)
        #expect(s.takeStartable() == [1, 2])
        s.suspend()
        #expect(s.runningCount == 2)                 // suspending cancels nothing
        #expect(s.finish(1) == [])                   // a freed slot stays free while suspended
        #expect(s.placement(of: 3) == .waiting)
        s.resume()
        #expect(s.takeStartable() == [3])
    }

    // MARK: Snapshot

    @Test func snapshotListsRunningInStartOrderThenWaitingInStartOrder() {
        var s = scheduler(max: 3, order: .lifo)
        s.addAll([10, 20, 30])
        #expect(s.takeStartable() == [30, 20, 10])
        s.addAll([40, 50])
        s.order = .fifo
        s.addAll([5])
        #expect(s.snapshot().running == [30, 20, 10])
        #expect(s.snapshot().waiting == [50, 40, 5])
        #expect(s.finish(20) == [50])
        #expect(s.snapshot().running == [30, 10, 50])
        #expect(s.snapshot().waiting == [40, 5])
        // The start order is by start, not by id or by add order: many ids, started in reverse.
        var t = scheduler(max: 0, order: .lifo)
        let ids = (1...200).map { UInt64($0 * 7919 % 1000) }
        t.addAll(ids)
        #expect(t.takeStartable() == ids.reversed())
        #expect(t.snapshot().running == ids.reversed())
    }

    // MARK: Removal

    @Test func removingAWaitingRequestSkipsIt() {
        var s = scheduler(max: 1)
        s.addAll([1, 2, 3, 4])
        #expect(s.takeStartable() == [1])
        #expect(s.remove(2) == .waiting)
        #expect(s.remove(4) == .waiting)
        #expect(s.remove(2) == nil)
        #expect(s.snapshot().waiting == [3])
        #expect(s.waitingCount == 1)
        #expect(s.finish(1) == [3])
        #expect(s.finish(3) == [])
        #expect(s.count == 0)
    }

    @Test func removingTheHeadOfTheWaitingLineAndEveryWaitingOne() {
        var s = scheduler(max: 1)
        s.addAll([1, 2, 3])
        #expect(s.takeStartable() == [1])
        #expect(s.remove(2) == .waiting)
        #expect(s.remove(3) == .waiting)
        #expect(s.finish(1) == [])
        s.addAll([4])
        #expect(s.takeStartable() == [4])
    }

    @Test func removingARunningRequestFreesItsSlot() {
        var s = scheduler(max: 2)
        s.addAll([1, 2, 3])
        _ = s.takeStartable()
        #expect(s.remove(2) == .running)
        #expect(s.remove(2) == nil)
        #expect(s.snapshot().running == [1])
        #expect(s.takeStartable() == [3])
        #expect(s.snapshot().running == [1, 3])
    }

    @Test(arguments: [QueueOrder.fifo, .lifo])
    func compactionAfterManyRemovalsKeepsOrder(order: QueueOrder) {
        var s = scheduler(max: 1, order: order)
        s.suspend()
        let ids = (1...400).map { UInt64($0) }
        s.addAll(ids)
        var expected = order == .fifo ? ids : ids.reversed()
        // Remove three quarters, scattered, so that tombstones far outnumber live entries.
        for id in ids where id % 4 != 0 {
            #expect(s.remove(id) == .waiting)
        }
        expected.removeAll { $0 % 4 != 0 }
        #expect(s.waitingCount == 100)
        #expect(s.snapshot().waiting == expected)
        // Adds after compaction go to the right end.
        s.addAll([1001, 1002])
        expected = order == .fifo ? expected + [1001, 1002] : [1002, 1001] + expected
        #expect(s.snapshot().waiting == expected)
        // Remove all but a few more, down to an empty line and back.
        for id in expected.dropLast(3) { #expect(s.remove(id) == .waiting) }
        expected = Array(expected.suffix(3))
        #expect(s.snapshot().waiting == expected)
        s.resume()
        var started: [UInt64] = s.takeStartable()
        while let current = started.last, s.count > 0 {
            let next = s.finish(current)
            if next.isEmpty { break }
            started += next
        }
        #expect(started == expected)
    }

    @Test func removeAllReturnsRunningInStartOrderThenWaiting() {
        var s = scheduler(max: 2, order: .lifo)
        s.addAll([1, 2])
        #expect(s.takeStartable() == [2, 1])
        s.addAll([3, 4, 5])
        #expect(s.remove(4) == .waiting)
        #expect(s.removeAll() == [2, 1, 5, 3])
        #expect(s.count == 0)
        #expect(s.runningCount == 0)
        #expect(s.waitingCount == 0)
        for id: UInt64 in 1...5 { #expect(s.placement(of: id) == nil) }
        #expect(s.takeStartable() == [])
        #expect(s.removeAll() == [])
        // Still usable, with the same settings.
        s.addAll([6, 7])
        #expect(s.takeStartable() == [7, 6])
    }

    @Test func removeAllForgetsKeys() {
        var s = scheduler(max: 1)
        #expect(s.add(1, key: "a") == [])
        _ = s.takeStartable()
        #expect(s.add(2, key: "a") == [1])
        #expect(s.removeAll() == [2])
        #expect(s.add(3, key: "a") == [])
        #expect(s.count == 1)
    }

    // MARK: Duplicates

    @Test func anEqualKeyReplacesEarlierWaitingAndRunningRequests() {
        var s = scheduler(max: 1)
        #expect(s.add(1, key: "a") == [])
        #expect(s.takeStartable() == [1])
        #expect(s.add(2, key: "a") == [1])        // the running one
        #expect(s.placement(of: 1) == nil)
        #expect(s.runningCount == 0)
        #expect(s.add(3, key: "b") == [])
        #expect(s.add(4, key: "a") == [2])        // the waiting one
        #expect(s.placement(of: 2) == nil)
        #expect(s.snapshot().waiting == [3, 4])
        #expect(s.count == 2)
        #expect(s.takeStartable() == [3])
        #expect(s.add(5, key: "b") == [3])
        #expect(s.takeStartable() == [4])
        #expect(s.snapshot() == ([4], [5]))
    }

    @Test func requestsWithoutKeyAreNeverDuplicates() {
        var s = scheduler(max: 1)
        #expect(s.add(1, key: nil) == [])
        #expect(s.add(2, key: nil) == [])
        #expect(s.add(3, key: "x") == [])
        #expect(s.add(4, key: nil) == [])
        #expect(s.count == 4)
    }

    @Test func noReplacementWhenDuplicatesAreAllowed() {
        var s = scheduler(max: 1)
        s.cancelsEarlierDuplicates = false
        #expect(s.add(1, key: "a") == [])
        #expect(s.takeStartable() == [1])
        #expect(s.add(2, key: "a") == [])
        #expect(s.add(3, key: "a") == [])
        #expect(s.count == 3)
        #expect(s.snapshot() == ([1], [2, 3]))
        // Turning cancellation back on applies to the next add, which replaces every live
        // earlier request with its key, oldest first (running 1, then waiting 2 and 3).
        s.cancelsEarlierDuplicates = true
        #expect(s.add(4, key: "a") == [1, 2, 3])
        #expect(s.snapshot() == ([], [4]))
    }

    @Test func keysOfRemovedRequestsAreForgotten() {
        var s = scheduler(max: 1)
        // Completed while running.
        #expect(s.add(1, key: "a") == [])
        #expect(s.takeStartable() == [1])
        #expect(s.remove(1) == .running)
        #expect(s.add(2, key: "a") == [])
        // Removed while waiting.
        #expect(s.add(3, key: "b") == [])
        #expect(s.remove(3) == .waiting)
        #expect(s.add(4, key: "b") == [])
        // Replaced ones are forgotten too: 6 replaces 5, then 7 replaces only 6.
        #expect(s.add(5, key: "c") == [])
        #expect(s.add(6, key: "c") == [5])
        #expect(s.add(7, key: "c") == [6])
        // Removing one of several allowed duplicates forgets only that one.
        s.cancelsEarlierDuplicates = false
        #expect(s.add(8, key: "d") == [])
        #expect(s.add(9, key: "d") == [])
        #expect(s.add(10, key: "d") == [])
        #expect(s.remove(9) == .waiting)
        s.cancelsEarlierDuplicates = true
        #expect(s.add(11, key: "d") == [8, 10])
        #expect(s.snapshot().running == [])
        #expect(s.snapshot().waiting == [2, 4, 7, 11])
    }

    @Test func addingAnIDTwiceReturnsNilAndChangesNothing() {
        var s = scheduler(max: 1, order: .lifo)
        #expect(s.add(1, key: "a") == [])
        #expect(s.add(2, key: "b") == [])
        #expect(s.add(2, key: "c") == nil)        // waiting id
        #expect(s.add(2, key: nil) == nil)
        #expect(s.snapshot() == ([], [2, 1]))
        #expect(s.count == 2)
        #expect(s.takeStartable() == [2])
        #expect(s.add(2, key: "a") == nil)        // running id: does not replace 1 either
        #expect(s.placement(of: 1) == .waiting)
        #expect(s.snapshot() == ([2], [1]))
        // The refused adds registered no key: "c" replaces nothing.
        #expect(s.add(3, key: "c") == [])
        // The refused add of 2 with key "a" did not register 2 under "a": only 1 is replaced.
        #expect(s.add(4, key: "a") == [1])
        #expect(s.placement(of: 2) == .running)
        #expect(s.snapshot() == ([2], [4, 3]))
    }

    @Test func reAddingARemovedWaitingIDPutsItAtTheEnd() {
        // The C library never reuses an id (handles are never reused), but the scheduler's API
        // accepts an id that is no longer present. Its waiting-line tombstone must not revive it.
        var s = scheduler(max: 1)
        s.suspend()
        s.addAll([1, 2, 3])
        #expect(s.remove(1) == .waiting)
        s.addAll([1])
        #expect(s.waitingCount == 3)
        #expect(s.snapshot().waiting == [2, 3, 1])
        s.resume()
        #expect(s.takeStartable() == [2])
        #expect(s.finish(2) == [3])
        #expect(s.finish(3) == [1])
        #expect(s.finish(1) == [])
        #expect(s.count == 0)
    }

    @Test func reAddingAnIDManyTimes() {
        var s = scheduler(max: 0, order: .lifo)
        s.suspend()
        s.addAll([100, 200])
        for _ in 0..<300 {
            #expect(s.add(7, key: "k") == [])
            #expect(s.remove(7) == .waiting)
        }
        #expect(s.add(7, key: "k") == [])
        #expect(s.snapshot().waiting == [7, 200, 100])
        #expect(s.waitingCount == 3)
        s.resume()
        #expect(s.takeStartable() == [7, 200, 100])
        #expect(s.takeStartable() == [])
        // Completed, then added again: waiting once more, and its key replaces nothing.
        #expect(s.remove(7) == .running)
        #expect(s.add(7, key: "k") == [])
        #expect(s.placement(of: 7) == .waiting)
        #expect(s.add(8, key: "k") == [7])
        #expect(s.takeStartable() == [8])
        #expect(s.snapshot().running == [200, 100, 8])
    }
}
