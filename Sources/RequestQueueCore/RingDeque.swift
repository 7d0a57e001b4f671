/// A double-ended queue on a ring buffer: O(1) amortized push and pop at both ends.
/// The standard library has none, and the project takes no package dependencies.
public struct RingDeque<Element> {
    private var storage: [Element?] = []
    private var head = 0
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func pushBack(_ element: Element) {
        growIfFull()
        storage[(head + count) % storage.count] = element
        count += 1
    }

    public mutating func pushFront(_ element: Element) {
        growIfFull()
        head = (head - 1 + storage.count) % storage.count
        storage[head] = element
        count += 1
    }

    public mutating func popFront() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
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
        kept.append(contentsOf: repeatElement(nil, count: Swift.max(8, count) - count))
        storage = kept
    }

    private mutating func growIfFull() {
        if count < storage.count { return }
        let newCapacity = Swift.max(8, storage.count * 2)
        var grown: [Element?] = []
        grown.reserveCapacity(newCapacity)
        for element in self { grown.append(element) }
        grown.append(contentsOf: repeatElement(nil, count: newCapacity - count))
        storage = grown
        head = 0
    }
}

extension RingDeque: Sequence {
    public struct Iterator: IteratorProtocol {
        let deque: RingDeque
        var index = 0
        public mutating func next() -> Element? {
            guard index < deque.count else { return nil }
            defer { index += 1 }
            return deque.storage[(deque.head + index) % deque.storage.count]
        }
    }
    public func makeIterator() -> Iterator { Iterator(deque: self) }
}
