/// A double-ended queue on a ring buffer: O(1) amortized push and pop at both ends.
/// The standard library has none, and the project takes no package dependencies.
public struct RingDeque<Element> {
    /// Empty, or a power of two long (positions wrap with a mask).
    private var storage: [Element?] = []
    private var head = 0
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// (`consuming`, like `pushFront`: the element moves in, without a retain and a release.)
    public mutating func pushBack(_ element: consuming Element) {
        growIfFull()
        storage[(head + count) & (storage.count - 1)] = element
        count += 1
    }

    public mutating func pushFront(_ element: consuming Element) {
        growIfFull()
        head = (head - 1) & (storage.count - 1)
        storage[head] = element
        count += 1
    }

    public mutating func popFront() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head].take()
        head = (head + 1) & (storage.count - 1)
        count -= 1
        return element
    }

    public var first: Element? { count > 0 ? storage[head] : nil }

    /// Keeps only the elements for which `keep` returns true, in order. In place: the kept ones
    /// move towards the front within the storage (no new array, no pass to destroy the old one),
    /// which shrinks only when a quarter of it or less is used. (The scheduler compacts its waiting
    /// lines this way as cancels leave tombstones in them: with a million waiting requests, a new
    /// array per compaction was about one cache miss per cancel, bench/README.md, "The queue at
    /// scale".)
    public mutating func retain(where keep: (Element) -> Bool) {
        let capacity = storage.count
        guard capacity > 0 else { return }
        let mask = capacity - 1, head = head, count = count
        var kept = 0
        storage.withUnsafeMutableBufferPointer { slots in
            for i in 0..<count {
                let from = (head + i) & mask
                guard let element = slots[from].take() else { continue }
                if keep(element) {
                    slots[(head + kept) & mask] = element
                    kept += 1
                }
            }
        }
        self.count = kept
        var smaller = 8
        while smaller < kept { smaller *= 2 }
        if smaller * 4 <= capacity { resize(to: smaller) }
    }

    private mutating func growIfFull() {
        if count < storage.count { return }
        resize(to: Swift.max(8, storage.count * 2))
    }

    /// Moves the elements, in order from index 0, to a new array of `newCapacity` (a power of two,
    /// at least `count`), in two bulk moves (no reference counting), nil written in bulk only in the
    /// new array's free part and in the old slots moved from (which the old array's release then
    /// finds empty). Before, the new array was filled with nil and every element taken out of the
    /// old one and written again one at a time: about 200 instructions more per element queued
    /// (amortized), e.g. per cancel of a million waiting requests, whose completions queue up
    /// (bench/README.md, "The queue at scale"). Tried: growing the array in place
    /// (`append(contentsOf:)`) cost the add path 60 instructions more per request; moving a block
    /// at a time was no better.
    private mutating func resize(to newCapacity: Int) {
        let capacity = storage.count
        let head = head, count = count
        // The live elements: from `head` to the end of the storage, then from its start.
        let firstPart = Swift.min(count, capacity - head)
        var moved = false
        let resized = storage.withUnsafeMutableBufferPointer { old -> [Element?] in
            [Element?](unsafeUninitializedCapacity: newCapacity) { new, initialized in
                // A buffer of 8 or more elements has an address; an empty old one may not.
                guard let to = new.baseAddress else { return }
                if let from = old.baseAddress {
                    to.moveInitialize(from: from + head, count: firstPart)
                    (to + firstPart).moveInitialize(from: from, count: count - firstPart)
                    (from + head).initialize(repeating: nil, count: firstPart)
                    from.initialize(repeating: nil, count: count - firstPart)
                }
                (to + count).initialize(repeating: nil, count: newCapacity - count)
                initialized = newCapacity
                moved = true
            }
        }
        if moved {
            storage = resized
        } else {
            // (Not reached: the element by element way.)
            var slow = [Element?](repeating: nil, count: newCapacity)
            for i in 0..<count { slow[i] = storage[(head + i) & (capacity - 1)].take() }
            storage = slow
        }
        self.head = 0
    }
}

extension RingDeque: Sequence {
    public struct Iterator: IteratorProtocol {
        let deque: RingDeque
        var index = 0
        public mutating func next() -> Element? {
            guard index < deque.count else { return nil }
            defer { index += 1 }
            return deque.storage[(deque.head + index) & (deque.storage.count - 1)]
        }
    }
    public func makeIterator() -> Iterator { Iterator(deque: self) }
}
