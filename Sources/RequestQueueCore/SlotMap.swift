/// A map from small integer ids to values, kept in an array indexed by id: no hashing, no
/// rehashing as it grows, and neighbouring ids side by side in memory. For ids that are reused
/// slot numbers (the library's request slots), so that the largest id stays near the number of
/// live ones: memory is proportional to the largest id ever stored.
public struct SlotMap<Value>: Sequence {
    private var slots: [Value?] = []
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// The largest id stored: slot numbers stay far below it.
    public static var maxID: UInt64 { UInt64(Int32.max) }

    public subscript(id: UInt64) -> Value? {
        get { id < UInt64(slots.count) ? slots[Int(id)] : nil }
        set {
            if id >= UInt64(slots.count) {
                // An id past `maxID` is not a slot number: never stored (and never found).
                guard newValue != nil, id <= SlotMap.maxID else { return }
                // One nil at a time: ids grow by one as slots are handed out, and appending a
                // `repeatElement` sequence cost a thousand instructions for that one element.
                while slots.count <= Int(id) { slots.append(nil) }
            }
            let index = Int(id)
            let had = slots[index] != nil
            let has = newValue != nil
            if had != has { count += has ? 1 : -1 }
            slots[index] = newValue
        }
    }

    /// Removes the value of `id`; returns it, or nil if there was none.
    @discardableResult
    public mutating func removeValue(forKey id: UInt64) -> Value? {
        guard id < UInt64(slots.count), let old = slots[Int(id)].take() else { return nil }
        count -= 1
        return old
    }

    /// Calls `body` with the value of `id` to change in place (no copy, no reference counting);
    /// returns its result, or nil (calling nothing) when there is no value.
    @discardableResult
    public mutating func modify<R>(_ id: UInt64, _ body: (inout Value) -> R) -> R? {
        guard id < UInt64(slots.count) else { return nil }
        let index = Int(id)
        // Moved out and back (no copy, no reference counting), with no unwrap that could trap.
        guard var value = slots[index].take() else { return nil }
        defer { slots[index] = value }
        return body(&value)
    }

    /// Where the value of `id` lies in memory, for a prefetch hint only (never read through: it is
    /// valid only until the map changes); nil past the end.
    public func address(of id: UInt64) -> UnsafeRawPointer? {
        guard id < UInt64(slots.count) else { return nil }
        return slots.withUnsafeBufferPointer { slots in slots.baseAddress.map { UnsafeRawPointer($0 + Int(id)) } }
    }

    /// The distance in memory between the values of two consecutive ids.
    public static var stride: UInt { UInt(MemoryLayout<Value?>.stride) }

    /// The ids present, in increasing order.
    public var keys: [UInt64] { map(\.key) }

    public struct Iterator: IteratorProtocol {
        fileprivate let slots: [Value?]
        fileprivate var index = 0

        public mutating func next() -> (key: UInt64, value: Value)? {
            while index < slots.count {
                defer { index += 1 }
                if let value = slots[index] { return (UInt64(index), value) }
            }
            return nil
        }
    }

    /// The ids and values present, in increasing order of id.
    public func makeIterator() -> Iterator { Iterator(slots: slots) }
}
