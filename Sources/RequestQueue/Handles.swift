/// The table behind every handle given to C callers. A handle's value encodes a slot, the slot's
/// generation and the kind of object, so that a freed, stale or foreign handle is detected
/// (RQ_ERR_INVALID_HANDLE) instead of being dereferenced. A slot's generation grows at every reuse,
/// so a value comes back only after 2^32 reuses of one slot. Lookups index an array: no hashing.
enum HandleKind: UInt {
    case queue = 1
    case request = 2
    case challenge = 3
}

// @unchecked Sendable: `slots` and `freeSlots` under `lock` (a Lock, held across the fork handlers).
final class HandleTable: @unchecked Sendable, ForkGuard.Participant {
    static let shared: HandleTable = {
        let table = HandleTable()
        ForkGuard.register(table)
        return table
    }()

    private struct Slot {
        var generation: UInt32 = 0
        var object: AnyObject?
    }

    private let lock = Lock()
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []

    /// Registers an object and returns its handle value (never 0).
    func register(_ object: AnyObject, kind: HandleKind) -> UInt {
        lock.withLock {
            let index: Int
            if let reused = freeSlots.popLast() {
                index = reused
            } else {
                index = slots.count
                slots.append(Slot())
            }
            slots[index].generation &+= 1
            if slots[index].generation == 0 { slots[index].generation = 1 }
            slots[index].object = object
            return UInt(index) << 34 | UInt(slots[index].generation) << 2 | kind.rawValue
        }
    }

    /// The live object of that kind behind a handle, or nil.
    func lookup<T: AnyObject>(_ pointer: OpaquePointer?, kind: HandleKind, as type: T.Type) -> T? {
        let value = UInt(bitPattern: pointer)
        guard value & 3 == kind.rawValue else { return nil }
        let index = HandleTable.slot(of: value)
        let generation = UInt32(truncatingIfNeeded: value >> 2)
        let object: AnyObject? = lock.withLock {
            guard index < slots.count, slots[index].generation == generation else { return nil }
            return slots[index].object
        }
        // Each kind is one final class: comparing the type is the whole check.
        guard let object, ObjectIdentifier(Swift.type(of: object)) == ObjectIdentifier(T.self) else { return nil }
        return unsafeDowncast(object, to: T.self)
    }

    func remove(_ value: UInt) {
        let index = HandleTable.slot(of: value)
        let generation = UInt32(truncatingIfNeeded: value >> 2)
        lock.withLock {
            guard index < slots.count, slots[index].generation == generation, slots[index].object != nil else { return }
            slots[index].object = nil
            freeSlots.append(index)
        }
    }

    var forkRank: Int { ForkGuard.rankHandles }
    func forkPrepare() { lock.acquire() }
    func forkParent() { lock.release() }
    func forkChild() { lock.release() }

    static func pointer(_ value: UInt) -> OpaquePointer? { OpaquePointer(bitPattern: value) }

    /// The slot of a handle value: small, and reused only after the handle was removed.
    static func slot(of value: UInt) -> Int { Int(value >> 34) }
}
