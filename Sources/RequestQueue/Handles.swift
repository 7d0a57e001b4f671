/// The table behind every handle given to C callers. A handle's value encodes a slot, the slot's
/// generation and the kind of object, so that a freed, stale or foreign handle is detected
/// (RQ_ERR_INVALID_HANDLE) instead of being dereferenced. A slot's generation grows at every reuse,
/// so a value comes back only after 2^32 reuses of one slot. Lookups index an array: no hashing.
import Glibc
import Synchronization

enum HandleKind: UInt {
    case queue = 1
    case request = 2
    case challenge = 3
}

// @unchecked Sendable: `slots` and `freeSlots` under `held` (a spin lock, held across the fork
// handlers).
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

    /// Every C call looks a handle up, and each section is a few array accesses: an atomic flag
    /// costs a fraction of a mutex's lock and unlock (bench/README.md, "The caller's side"). A
    /// thread that finds it taken yields the processor to the holder. ThreadSanitizer sees its
    /// acquire and release.
    private let held = Atomic<Bool>(false)
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []

    @inline(__always)
    private func acquire() {
        while !held.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            while held.load(ordering: .relaxed) { sched_yield() }
        }
    }

    @inline(__always)
    private func release() { held.store(false, ordering: .releasing) }

    /// Registers an object and returns its handle value (never 0).
    func register(_ object: AnyObject, kind: HandleKind) -> UInt {
        acquire()
        defer { release() }
        let index: Int
        if let reused = freeSlots.popLast() {
            index = reused
        } else {
            index = slots.count
            slots.append(Slot())
        }
        return slots.withUnsafeMutableBufferPointer { slots in
            var generation = slots[index].generation &+ 1
            if generation == 0 { generation = 1 }
            slots[index] = Slot(generation: generation, object: object)
            return UInt(index) << 34 | UInt(generation) << 2 | kind.rawValue
        }
    }

    /// The live object of that kind behind a handle, or nil.
    func lookup<T: AnyObject>(_ pointer: OpaquePointer?, kind: HandleKind, as type: T.Type) -> T? {
        let value = UInt(bitPattern: pointer)
        guard value & 3 == kind.rawValue else { return nil }
        let index = HandleTable.slot(of: value)
        let generation = UInt32(truncatingIfNeeded: value >> 2)
        acquire()
        let object: AnyObject? = index < slots.count && slots[index].generation == generation ? slots[index].object : nil
        release()
        // Each kind is one final class: comparing the type is the whole check.
        guard let object, ObjectIdentifier(Swift.type(of: object)) == ObjectIdentifier(T.self) else { return nil }
        return unsafeDowncast(object, to: T.self)
    }

    func remove(_ value: UInt) {
        let index = HandleTable.slot(of: value)
        let generation = UInt32(truncatingIfNeeded: value >> 2)
        acquire()
        guard index < slots.count, slots[index].generation == generation, let object = slots[index].object else {
            release()
            return
        }
        slots[index].object = nil
        freeSlots.append(index)
        release()
        // The object's last release (and its deinit) runs after the table is unlocked.
        withExtendedLifetime(object) {}
    }

    var forkRank: Int { ForkGuard.rankHandles }
    func forkPrepare() { acquire() }
    func forkParent() { release() }
    func forkChild() { release() }

    static func pointer(_ value: UInt) -> OpaquePointer? { OpaquePointer(bitPattern: value) }

    /// The slot of a handle value: small, and reused only after the handle was removed.
    static func slot(of value: UInt) -> Int { Int(value >> 34) }
}
