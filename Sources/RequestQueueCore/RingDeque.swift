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
        guard capacity > 0 else {
            storage = [Element?](repeating: nil, count: 8)
            head = 0
            return
        }
        // Doubled in place: the array moves its elements to the larger buffer itself (a bitwise
        // move, no reference counting) and only the new half is written with nil. Before, a new
        // array was filled with nil, then every element taken out of the old one (a nil written
        // there too) and written again: with a million queued events, about 2 cache-line writes
        // per element more (bench/README.md, "The queue at scale"). The elements that had wrapped
        // around (before `head`) then move to just past the old end, where the doubled mask puts
        // them.
        storage.append(contentsOf: repeatElement(nil, count: capacity))
        for i in 0..<head { storage[capacity + i] = storage[i].take() }
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
