import Testing
import RequestQueueCore

/// RingDeque has pushes at both ends, pops at the front, `first`, iteration and `retain(where:)`.
/// Its initial capacity is 8 and it doubles when full, so sequences of 8, 16, ... elements and
/// pushes after pops exercise growth and wrap-around.
@Suite struct RingDequeTests {
    @Test func emptyDeque() {
        var d = RingDeque<Int>()
        #expect(d.isEmpty)
        #expect(d.count == 0)
        #expect(d.first == nil)
        #expect(Array(d) == [])
        #expect(d.popFront() == nil)
        #expect(d.popFront() == nil)
        #expect(d.count == 0)
        d.retain { _ in true }
        #expect(d.isEmpty)
        #expect(Array(d) == [])
    }

    @Test func pushBackKeepsOrderAcrossGrowth() {
        var d = RingDeque<Int>()
        for i in 0..<100 {
            d.pushBack(i)
            #expect(d.count == i + 1)
            #expect(d.first == 0)
        }
        #expect(Array(d) == Array(0..<100))
        for i in 0..<100 {
            #expect(d.popFront() == i)
        }
        #expect(d.isEmpty)
        #expect(d.popFront() == nil)
    }

    @Test func pushFrontReversesOrderAcrossGrowth() {
        var d = RingDeque<Int>()
        for i in 0..<40 {
            d.pushFront(i)
            #expect(d.first == i)
        }
        #expect(d.count == 40)
        #expect(Array(d) == Array((0..<40).reversed()))
        #expect(d.popFront() == 39)
        #expect(d.popFront() == 38)
        #expect(d.count == 38)
    }

    @Test func pushFrontOnFreshDequeWrapsToTheEndOfStorage() {
        var d = RingDeque<String>()
        d.pushFront("b")   // head wraps from 0 to the last slot
        d.pushBack("c")    // goes to slot 0
        d.pushFront("a")
        #expect(Array(d) == ["a", "b", "c"])
        #expect(d.popFront() == "a")
        #expect(d.popFront() == "b")
        #expect(d.popFront() == "c")
        #expect(d.popFront() == nil)
    }

    @Test func wrapAroundThenGrowWhileWrapped() {
        var d = RingDeque<Int>()
        for i in 0..<6 { d.pushBack(i) }          // slots 0...5 of 8
        for i in 0..<4 { #expect(d.popFront() == i) } // head at 4: [4, 5]
        for i in 6..<12 { d.pushBack(i) }         // fills slots 6, 7, 0, 1, 2, 3: full and wrapped
        #expect(d.count == 8)
        #expect(Array(d) == Array(4..<12))
        d.pushBack(12)                            // grows from a wrapped state
        d.pushFront(3)
        #expect(d.count == 10)
        #expect(Array(d) == Array(3...12))
        var popped: [Int] = []
        while let x = d.popFront() { popped.append(x) }
        #expect(popped == Array(3...12))
    }

    @Test func mixedEndsAroundTheSeam() {
        var d = RingDeque<Int>()
        // Repeatedly push at both ends and pop, so that head travels all around the storage.
        var model: [Int] = []
        for round in 0..<50 {
            d.pushBack(round * 3)
            model.append(round * 3)
            d.pushFront(round * 3 + 1)
            model.insert(round * 3 + 1, at: 0)
            #expect(d.popFront() == model.removeFirst())
            #expect(Array(d) == model)
            #expect(d.first == model.first)
        }
        #expect(d.count == 50)
    }

    @Test func iterationDoesNotConsume() {
        var d = RingDeque<Int>()
        for i in 0..<10 { d.pushBack(i) }
        #expect(Array(d) == Array(0..<10))
        #expect(Array(d) == Array(0..<10))
        #expect(d.map { $0 * 2 } == (0..<10).map { $0 * 2 })
        #expect(d.count == 10)
        #expect(d.first == 0)
    }

    @Test func retainKeepsOrderAndLeavesAUsableDeque() {
        var d = RingDeque<Int>()
        for i in 0..<5 { d.pushBack(i) }
        for _ in 0..<3 { _ = d.popFront() }
        for i in 5..<20 { d.pushBack(i) }         // wrapped and grown
        d.pushFront(2)
        #expect(Array(d) == Array(2..<20))
        d.retain { $0 % 3 != 0 }
        let expected = (2..<20).filter { $0 % 3 != 0 }
        #expect(Array(d) == expected)
        #expect(d.count == expected.count)
        #expect(d.first == 2)
        // Pushes at both ends and pops still work after the storage was rebuilt.
        d.pushFront(-1)
        d.pushBack(100)
        #expect(Array(d) == [-1] + expected + [100])
        #expect(d.popFront() == -1)
        #expect(d.popFront() == 2)
    }

    @Test func retainNothingThenReuse() {
        var d = RingDeque<Int>()
        for i in 0..<30 { d.pushBack(i) }
        d.retain { _ in false }
        #expect(d.isEmpty)
        #expect(d.first == nil)
        #expect(d.popFront() == nil)
        #expect(Array(d) == [])
        d.pushFront(7)
        d.pushBack(8)
        d.pushFront(6)
        #expect(Array(d) == [6, 7, 8])
    }

    @Test func retainEverythingKeepsEverything() {
        var d = RingDeque<Int>()
        for i in 0..<9 { d.pushFront(i) }
        d.retain { _ in true }
        #expect(Array(d) == Array((0..<9).reversed()))
        // Full after retain (count 9, capacity 9): the next push must grow without losing order.
        d.pushBack(-1)
        d.pushFront(9)
        #expect(Array(d) == Array((-1...9).reversed()))
    }

    /// `retain` compacts in place: the kept elements move towards the front, each dropped one is
    /// released once; the storage shrinks only when a quarter of it or less is in use.
    @Test func retainInPlaceReleasesEachDroppedElementOnceAcrossTheWrap() {
        final class Counter { var released = 0 }
        final class Token {
            let id: Int
            let counter: Counter
            init(_ id: Int, _ counter: Counter) { self.id = id; self.counter = counter }
            deinit { counter.released += 1 }
        }
        let counter = Counter()
        var d = RingDeque<Token>()
        for i in 0..<40 { d.pushBack(Token(i, counter)) }
        for _ in 0..<20 { _ = d.popFront() }
        for i in 40..<80 { d.pushBack(Token(i, counter)) }   // 60 in a storage of 64: wrapped
        #expect(counter.released == 20)
        d.retain { $0.id % 2 == 0 }                          // 30 kept: no shrink
        #expect(d.map(\.id) == Array(stride(from: 20, to: 80, by: 2)))
        #expect(counter.released == 50)
        d.retain { $0.id % 10 == 0 }                         // 6 kept: shrinks
        #expect(d.map(\.id) == [20, 30, 40, 50, 60, 70])
        #expect(counter.released == 74)
        d.pushFront(Token(-1, counter))
        for i in 80..<90 { d.pushBack(Token(i, counter)) }   // grows again
        #expect(d.map(\.id) == [-1, 20, 30, 40, 50, 60, 70] + Array(80..<90))
        d = RingDeque()
        #expect(counter.released == 91)
    }

    @Test func retainCallsThePredicateOncePerElementInOrder() {
        var d = RingDeque<Int>()
        for i in 0..<12 { d.pushBack(i) }
        for _ in 0..<5 { _ = d.popFront() }
        for i in 12..<16 { d.pushBack(i) }
        var seen: [Int] = []
        d.retain { seen.append($0); return true }
        #expect(seen == Array(5..<16))
    }

    @Test func valueSemantics() {
        var a = RingDeque<Int>()
        for i in 0..<10 { a.pushBack(i) }
        var b = a
        b.pushFront(-1)
        _ = b.popFront()
        _ = b.popFront()
        b.retain { $0 != 5 }
        #expect(Array(a) == Array(0..<10))
        #expect(Array(b) == [1, 2, 3, 4, 6, 7, 8, 9])
        _ = a.popFront()
        #expect(Array(b) == [1, 2, 3, 4, 6, 7, 8, 9])
        #expect(Array(a) == Array(1..<10))
    }

    final class Token {}

    @Test func poppedAndDroppedElementsAreReleased() {
        var d = RingDeque<Token>()
        weak var popped: Token?
        weak var dropped: Token?
        weak var kept: Token?
        do {
            let p = Token(), x = Token(), k = Token()
            popped = p
            dropped = x
            kept = k
            d.pushBack(p)
            d.pushBack(x)
            d.pushBack(k)
        }
        _ = d.popFront()
        #expect(popped == nil)
        d.retain { $0 !== dropped }
        #expect(dropped == nil)
        #expect(kept != nil)
        #expect(d.count == 1)
        #expect(d.first === kept)
    }

    /// A full deque grows with its head at every position of its storage (8 and 16 slots), from
    /// either end: the order is kept, and every element is released exactly once, when it leaves
    /// (moved, neither copied nor lost).
    @Test(arguments: [8, 16])
    func growingWhenFullFromEveryHeadPosition(capacity: Int) {
        final class Counted {
            let value: Int
            let released: (Int) -> Void
            init(_ value: Int, released: @escaping (Int) -> Void) {
                self.value = value
                self.released = released
            }
            deinit { released(value) }
        }
        for shift in 0..<capacity {
            for atFront in [false, true] {
                var releases: [Int: Int] = [:]
                do {
                    var d = RingDeque<Counted>()
                    var model: [Int] = []
                    var next = 0
                    func make() -> Counted {
                        defer { next += 1 }
                        return Counted(next) { releases[$0, default: 0] += 1 }
                    }
                    // Fill to `capacity` (grown from 8 as needed), move the head by `shift`,
                    // refill to full: the next push grows a deque whose head is at `shift`.
                    for _ in 0..<capacity { let c = make(); model.append(c.value); d.pushBack(c) }
                    for _ in 0..<shift { #expect(d.popFront()?.value == model.removeFirst()) }
                    for _ in 0..<shift { let c = make(); model.append(c.value); d.pushBack(c) }
                    #expect(d.count == capacity)
                    do {
                        let c = make()
                        if atFront { model.insert(c.value, at: 0); d.pushFront(c) } else { model.append(c.value); d.pushBack(c) }
                    }
                    #expect(d.map(\.value) == model, "shift \(shift), front \(atFront)")
                    // And it keeps working as a ring after the growth.
                    for _ in 0..<3 { #expect(d.popFront()?.value == model.removeFirst()) }
                    for _ in 0..<5 { let c = make(); model.append(c.value); d.pushBack(c) }
                    #expect(d.map(\.value) == model, "shift \(shift), front \(atFront), after growth")
                    // Drained, the deque holds nothing: no element stays behind in its storage.
                    while let x = d.popFront() { #expect(x.value == model.removeFirst()) }
                    #expect(releases.count == next, "shift \(shift), front \(atFront): kept after the drain")
                    withExtendedLifetime(d) {}
                }
                #expect(releases.count == capacity + shift + 1 + 5, "shift \(shift)")
                #expect(releases.values.allSatisfy { $0 == 1 }, "shift \(shift): an element released twice")
            }
        }
    }

    /// Growth of a large deque (2,048 elements) with the head in the middle of the storage.
    @Test func growingALargeWrappedDeque() {
        final class Counted {
            let value: Int
            let released: () -> Void
            init(_ value: Int, released: @escaping () -> Void) {
                self.value = value
                self.released = released
            }
            deinit { released() }
        }
        var made = 0, releases = 0
        do {
            var d = RingDeque<Counted>()
            var model: [Int] = []
            func push(_ i: Int, front: Bool = false) {
                made += 1
                let c = Counted(i) { releases += 1 }
                if front { d.pushFront(c); model.insert(i, at: 0) } else { d.pushBack(c); model.append(i) }
            }
            for i in 0..<2048 { push(i) }
            for _ in 0..<1300 { #expect(d.popFront()?.value == model.removeFirst()) }
            for i in 2048..<3348 { push(i) }   // full again, head at 1300
            push(-1, front: true)
            #expect(d.count == 2049)
            #expect(d.map(\.value) == model)
            #expect(made - releases == 2049)
            while let x = d.popFront() { #expect(x.value == model.removeFirst()) }
            #expect(releases == made)
        }
    }

    /// Random pushes at both ends, pops, and retains, compared after every step with an Array.
    @Test(arguments: [1, 2, 3, 42, 0xDEAD_BEEF] as [UInt64])
    func matchesArrayModel(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var d = RingDeque<Int>()
        var model: [Int] = []
        var next = 0
        for step in 0..<4000 {
            // Phases of growth and shrinking so that sizes go from 0 to a few hundred and back.
            let growing = (step / 500) % 2 == 0
            let roll = rng.below(100)
            if roll < (growing ? 35 : 20) {
                d.pushBack(next)
                model.append(next)
                next += 1
            } else if roll < (growing ? 70 : 40) {
                d.pushFront(next)
                model.insert(next, at: 0)
                next += 1
            } else if roll < 97 {
                let expected = model.isEmpty ? nil : model.removeFirst()
                #expect(d.popFront() == expected)
            } else {
                let modulus = 2 + rng.below(4)
                let remainder = rng.below(modulus)
                d.retain { $0 % modulus != remainder }
                model.removeAll { $0 % modulus == remainder }
            }
            #expect(d.count == model.count)
            #expect(d.isEmpty == model.isEmpty)
            #expect(d.first == model.first)
            if Array(d) != model {
                Issue.record("seed \(seed) step \(step): deque \(Array(d)) != model \(model)")
                return
            }
        }
    }
}
