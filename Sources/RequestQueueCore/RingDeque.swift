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

    /// Keeps only the elements for which `keep` returns true, in order, and shrinks the storage.
    public mutating func retain(where keep: (Element) -> Bool) {
        var kept: [Element?] = []
        kept.reserveCapacity(Swift.max(count, 8))
        for element in self where keep(element) { kept.append(element) }
        count = kept.count
        head = 0
        var capacity = 8
        while capacity < count { capacity *= 2 }
        kept.append(contentsOf: repeatElement(nil, count: capacity - count))
        storage = kept
    }

    private mutating func growIfFull() {
        if count < storage.count { return }
        let capacity = storage.count
        // Moved to a new array of twice the size, in order from index 0, in two bulk moves (no
        // reference counting), nil written in bulk only in the new half and in the old slots (which
        // the old array's release then finds empty). Before, the new array was filled with nil and
        // every element taken out of the old one and written again one at a time: about 200
        // instructions more per element queued (amortized), e.g. per cancel of a million waiting
        // requests, whose completions queue up (bench/README.md, "The queue at scale"). Tried:
        // growing the array in place (`append(contentsOf:)`) cost the add path 60 instructions
        // more per request; moving a block at a time was no better.
        let newCapacity = Swift.max(8, capacity * 2)
        let head = head
        var moved = false
        let grown = storage.withUnsafeMutableBufferPointer { old -> [Element?] in
            [Element?](unsafeUninitializedCapacity: newCapacity) { new, initialized in
                // A buffer of 8 or more elements has an address; an empty old one may not.
                guard let to = new.baseAddress else { return }
                if let from = old.baseAddress {
                    to.moveInitialize(from: from + head, count: capacity - head)
                    (to + (capacity - head)).moveInitialize(from: from, count: head)
                    from.initialize(repeating: nil, count: capacity)
                }
                (to + capacity).initialize(repeating: nil, count: newCapacity - capacity)
                initialized = newCapacity
                moved = true
            }
        }
        if moved {
            storage = grown
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
