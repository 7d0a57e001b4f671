/// The table behind every handle given to C callers. A handle's value encodes a slot, the slot's
/// generation and the kind of object, so that a freed, stale or foreign handle is detected
/// (RQ_ERR_INVALID_HANDLE) instead of being dereferenced. A slot's generation grows at every reuse,
/// so a value comes back only after 2^32 reuses of one slot. Lookups index an array: no hashing.
import CCurl
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
        /// The `HandleKind` raw value of the object (in what would be padding: 16 bytes either way).
        var kind: UInt32 = 0
        var object: AnyObject?
    }

    /// Every C call looks a handle up, and each section is a few array accesses: an atomic flag
    /// costs a fraction of a mutex's lock and unlock (bench/README.md, "The caller's side"). A
    /// thread that finds it taken yields the processor to the holder. ThreadSanitizer sees its
    /// acquire and release.
    private let held = Atomic<Bool>(false)
    private var slots: [Slot] = []
    /// Where `slots` lies, stored under the lock whenever the array grows (the only time it moves):
    /// read through under the lock (`liveAddress`); without it, only a hint for `prefetchSlot`
    /// (the array may have moved since).
    private let slotsAddress = Atomic<UInt>(0)
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
            let capacity = slots.capacity
            slots.append(Slot())
            if slots.capacity != capacity {
                slotsAddress.store(slots.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }, ordering: .relaxed)
            }
        }
        return slots.withUnsafeMutableBufferPointer { slots in
            var generation = slots[index].generation &+ 1
            if generation == 0 { generation = 1 }
            slots[index] = Slot(generation: generation, kind: UInt32(kind.rawValue), object: object)
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

    /// The address of the live object of that kind behind a handle, or 0, without taking a
    /// reference to it: the address may be that of a freed object as soon as this returns, unless
    /// the caller knows the object is held (a queue holds its requests). `rq_cancel`'s way
    /// (`Queue.cancel(handle:)`): an object in no cache is not written (the lookup's retain, an
    /// atomic instruction that waited for the object's line, was half of a cancel's time with a
    /// million waiting requests; bench/README.md, "Cancel without the request's reference count").
    func liveAddress(_ value: UInt, kind: HandleKind) -> UInt {
        guard value & 3 == kind.rawValue else { return 0 }
        let index = HandleTable.slot(of: value)
        let generation = UInt32(truncatingIfNeeded: value >> 2)
        acquire()
        defer { release() }
        // The slots where `slotsAddress` says (current under the lock): the array itself is not
        // retained for the read.
        guard index < slots.count, let slot = UnsafeMutablePointer<Slot>(bitPattern: slotsAddress.load(ordering: .relaxed))?
            .advanced(by: index), slot.pointee.generation == generation, slot.pointee.kind == UInt32(kind.rawValue) else { return 0 }
        // The reference's bits, read as a number: no retain, no release.
        return withUnsafePointer(to: &slot.pointee.object) { UnsafeRawPointer($0).load(as: UInt.self) }
    }

    /// Starts loading the slot of a handle (a hint: a prefetch never faults, and a stale address
    /// only loads a useless line).
    func prefetchSlot(_ value: UInt) {
        let address = slotsAddress.load(ordering: .relaxed)
        guard address != 0 else { return }
        ccurl_prefetch(UnsafeRawPointer(bitPattern: address &+ UInt(HandleTable.slot(of: value)) &* UInt(MemoryLayout<Slot>.stride)))
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
