/// The table behind every handle given to C callers. A handle's value encodes a never-reused
/// number and the kind of object, so that a freed, stale or foreign handle is detected
/// (RQ_ERR_INVALID_HANDLE) instead of being dereferenced.
enum HandleKind: UInt {
    case queue = 1
    case request = 2
    case challenge = 3
}

final class HandleTable: @unchecked Sendable {
    static let shared = HandleTable()

    private let monitor = Lock()
    private var nextNumber: UInt = 1
    private var objects: [UInt: AnyObject] = [:]

    /// Registers an object and returns its handle value (never 0).
    func register(_ object: AnyObject, kind: HandleKind) -> UInt {
        monitor.withLock {
            let value = nextNumber << 2 | kind.rawValue
            nextNumber += 1
            objects[value] = object
            return value
        }
    }

    /// The live object of that kind behind a handle, or nil.
    func lookup<T: AnyObject>(_ pointer: OpaquePointer?, kind: HandleKind, as type: T.Type) -> T? {
        let value = UInt(bitPattern: pointer)
        guard value & 3 == kind.rawValue else { return nil }
        return monitor.withLock { objects[value] } as? T
    }

    func remove(_ value: UInt) {
        monitor.withLock { _ = objects.removeValue(forKey: value) }
    }

    static func pointer(_ value: UInt) -> OpaquePointer? { OpaquePointer(bitPattern: value) }
}
