/// A double-ended queue on a ring buffer: O(1) amortized push and pop at both ends.
/// The standard library has none, and the project takes no package dependencies.
///
/// The storage is a buffer of its own (`Storage`) rather than an `Array`: only the live range of
/// its slots holds elements (the others are uninitialized memory), so that growing moves the
/// elements into the new buffer and frees the old one as it is, without writing nil into the
/// slots moved from nor into the new free half, and without the old array's release reading
/// every slot again to destroy it; and the slots hold `Element`, not `Element?` (an id and a
/// ticket: 16 bytes instead of 24). With a million cancellations waiting for their delivery, the
/// Array's passes were 1.6 of a cancel's 9.8 cache misses (bench/README.md, "The queue at scale:
/// prefetching a cancel's state, and the delivery line's own buffer").
/// Copy on write: a copy shares the buffer until one of them changes.
public struct RingDeque<Element> {
    /// Where the live range is; the capacity is `mask + 1`, a power of two.
    struct Header {
        var head: Int
        var count: Int
        var mask: Int
    }

    /// The slots `head ..< head + count` (modulo the capacity) hold elements, the others nothing.
    final class Storage: ManagedBuffer<Header, Element> {
        deinit {
            withUnsafeMutablePointers { header, slots in
                let (first, second) = RingDeque.parts(header.pointee)
                (slots + header.pointee.head).deinitialize(count: first)
                slots.deinitialize(count: second)
            }
        }

        /// A buffer of `capacity` slots (a power of two), empty.
        static func make(capacity: Int) -> Storage {
            let buffer = Storage.create(minimumCapacity: capacity) { _ in Header(head: 0, count: 0, mask: capacity - 1) }
            return unsafeDowncast(buffer, to: Storage.self)
        }
    }

    /// Nil until the first push (an empty deque allocates nothing).
    private var storage: Storage?
    /// The storage's header and slots (nil with it), kept beside it so that an operation reaches
    /// them without a retain and a release of the storage (one pair per push cost the add path
    /// about 40 instructions). A copy of the deque shares them with the storage.
    private var header: UnsafeMutablePointer<Header>?
    private var slots: UnsafeMutablePointer<Element>?

    public init() {}

    public var count: Int { header?.pointee.count ?? 0 }

    public var isEmpty: Bool { count == 0 }

    /// The live range's two parts: from `head` to the end of the storage, then from its start.
    @inline(__always)
    static func parts(_ header: Header) -> (first: Int, second: Int) {
        let first = Swift.min(header.count, header.mask + 1 - header.head)
        return (first, header.count - first)
    }

    /// (`consuming`, like `pushFront`: the element moves in, without a retain and a release.)
    public mutating func pushBack(_ element: consuming Element) {
        makeUnique(extra: 1)
        guard let header, let slots else { return }
        (slots + ((header.pointee.head + header.pointee.count) & header.pointee.mask)).initialize(to: element)
        header.pointee.count += 1
    }

    public mutating func pushFront(_ element: consuming Element) {
        makeUnique(extra: 1)
        guard let header, let slots else { return }
        header.pointee.head = (header.pointee.head - 1) & header.pointee.mask
        (slots + header.pointee.head).initialize(to: element)
        header.pointee.count += 1
    }

    public mutating func popFront() -> Element? {
        guard count > 0 else { return nil }
        makeUnique(extra: 0)
        guard let header, let slots else { return nil }
        let element = (slots + header.pointee.head).move()
        header.pointee.head = (header.pointee.head + 1) & header.pointee.mask
        header.pointee.count -= 1
        return element
    }

    public var first: Element? {
        guard let header, let slots, header.pointee.count > 0 else { return nil }
        return slots[header.pointee.head]
    }

    /// Keeps only the elements for which `keep` returns true, in order. In place: the kept ones
    /// move towards the front within the storage (no new buffer), which shrinks only when a
    /// quarter of it or less is used. (The scheduler compacts its waiting lines this way as
    /// cancels leave tombstones in them: with a million waiting requests, a new array per
    /// compaction was about one cache miss per cancel, bench/README.md, "The queue at scale".)
    public mutating func retain(where keep: (Element) -> Bool) {
        guard count > 0 else { return }
        makeUnique(extra: 0)
        guard let header, let slots else { return }
        let head = header.pointee.head, count = header.pointee.count, mask = header.pointee.mask
        var kept = 0
        for i in 0..<count {
            let element = (slots + ((head + i) & mask)).move()
            if keep(element) {
                (slots + ((head + kept) & mask)).initialize(to: element)
                kept += 1
            }
        }
        header.pointee.count = kept
        var smaller = 8
        while smaller < kept { smaller *= 2 }
        if smaller * 4 <= mask + 1 { rebuild(capacity: smaller) }
    }

    /// Makes the storage this deque's own (copied if shared), with room for `extra` more elements.
    @inline(__always)
    private mutating func makeUnique(extra: Int) {
        if isKnownUniquelyReferenced(&storage), let header, header.pointee.count + extra <= header.pointee.mask + 1 {
            return
        }
        grow(extra: extra)
    }

    /// Empty, shared or full: a buffer of its own, doubled when full (8 slots at first).
    @inline(never)
    private mutating func grow(extra: Int) {
        let capacity = (header?.pointee.mask ?? -1) + 1
        rebuild(capacity: count + extra <= capacity ? capacity : Swift.max(8, capacity * 2))
    }

    /// A new buffer of `newCapacity` slots (a power of two, at least `count`) holding the elements
    /// in order from slot 0: moved, in two bulk moves without reference counting, when the old
    /// buffer is this deque's alone (which is then freed holding nothing); copied when it is shared.
    private mutating func rebuild(capacity newCapacity: Int) {
        let new = Storage.make(capacity: newCapacity)
        let (newHeader, newSlots) = new.withUnsafeMutablePointers { ($0, $1) }
        if let header, let from = slots {
            let (first, second) = RingDeque.parts(header.pointee)
            if isKnownUniquelyReferenced(&storage) {
                newSlots.moveInitialize(from: from + header.pointee.head, count: first)
                (newSlots + first).moveInitialize(from: from, count: second)
                header.pointee.count = 0
            } else {
                newSlots.initialize(from: from + header.pointee.head, count: first)
                (newSlots + first).initialize(from: from, count: second)
            }
            newHeader.pointee.count = first + second
        }
        storage = new
        header = newHeader
        slots = newSlots
    }
}

extension RingDeque: Sequence {
    public struct Iterator: IteratorProtocol {
        let deque: RingDeque
        var index = 0
        public mutating func next() -> Element? {
            guard let header = deque.header, let slots = deque.slots, index < header.pointee.count else { return nil }
            defer { index += 1 }
            return slots[(header.pointee.head + index) & header.pointee.mask]
        }
    }
    public func makeIterator() -> Iterator { Iterator(deque: self) }
}
