import Glibc

/// A request's header lines, kept as libcurl's header list takes them: "Name: value", or "Name;"
/// for an empty value (libcurl sends it as "Name:"), NUL-terminated. All of a request's lines are
/// in one buffer, made once by the caller's thread (`rq_request_set_header`) and read in place by
/// the engine for each attempt: one allocation for them all, none per attempt. Names are
/// validated tokens (ASCII) and compare without regard to case; values are validated (no NUL, CR
/// or LF) and trimmed.
/// Copy on write: a copy shares the buffer until one of them changes.
// @unchecked Sendable: the buffer is never written while shared (copy on write).
public struct RequestHeaders: @unchecked Sendable {
    /// One record per line: the entry's length (UInt32, its NUL included), the name's length
    /// (UInt16), then the entry. The lengths let a lookup step over a long value. A buffer of its
    /// own rather than an `Array`: making an array of a given size went through the runtime's
    /// generic metadata lookup, about 250 instructions per header set.
    private final class Storage: ManagedBuffer<Header, UInt8> {
        static func make(capacity: Int) -> Storage {
            unsafeDowncast(Storage.create(minimumCapacity: capacity) { _ in Header(capacity: capacity) }, to: Storage.self)
        }
    }

    private struct Header {
        /// Bytes used, and allocated.
        var used = 0
        var capacity = 0
        /// The number of lines (at most `Validation.maxHeaderCount`).
        var lines = 0
        /// Which of the names the engine looks for have a line: known when a line is set, so
        /// that each attempt reads a bit instead of comparing names.
        var names: Names = []
    }

    /// Nil while there is no line. All the rest is in the storage: a request holds one pointer.
    private var storage: Storage?

    public init() {}

    public var count: Int { storage?.header.lines ?? 0 }

    public var isEmpty: Bool { storage == nil }

    /// Which of the names the library or libcurl treat apart have a line.
    public var names: Names { storage?.header.names ?? [] }

    /// Header names that the library or libcurl treat apart.
    public struct Names: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let userAgent = Names(rawValue: 1)
        public static let contentType = Names(rawValue: 2)
        public static let acceptEncoding = Names(rawValue: 4)
        public static let range = Names(rawValue: 8)
        public static let transferEncoding = Names(rawValue: 16)
        public static let upgrade = Names(rawValue: 32)
        public static let cookie = Names(rawValue: 64)

        /// The name among these that `name` is (any case), if any.
        public init(of name: UnsafeBufferPointer<UInt8>) {
            let known: (Names, StaticString)? = switch name.count {
            case 5: (.range, "range")
            case 6: (.cookie, "cookie")
            case 7: (.upgrade, "upgrade")
            case 10: (.userAgent, "user-agent")
            case 12: (.contentType, "content-type")
            case 15: (.acceptEncoding, "accept-encoding")
            case 17: (.transferEncoding, "transfer-encoding")
            default: nil
            }
            if let (names, lowercased) = known, RequestHeaders.isName(name, lowercased) { self = names } else { self = [] }
        }
    }

    private static let recordHeader = 6

    /// One line, valid only inside the closure that was given it.
    public struct Line {
        /// The name as given.
        public let name: UnsafeBufferPointer<UInt8>
        /// The value (empty for "Name;").
        public let value: UnsafeBufferPointer<UInt8>
        /// The whole entry, NUL-terminated, as libcurl's header list takes it.
        public let entry: UnsafePointer<CChar>
        /// Where its record lies in the storage.
        fileprivate let record: Range<Int>

        /// Whether the name is `lowercased` (see `isName`).
        public func isNamed(_ lowercased: StaticString) -> Bool { RequestHeaders.isName(name, lowercased) }
    }

    /// Calls `body` with each line in order until it returns true; returns whether one did.
    @discardableResult
    public func contains(where body: (Line) -> Bool) -> Bool {
        guard storage != nil else { return false }
        return withBytes { b in
            var at = 0
            while let line = RequestHeaders.line(at: at, in: b) {
                if body(line) { return true }
                at = line.record.upperBound
            }
            return false
        }
    }

    /// Calls `body` with each line in order.
    public func forEach(_ body: (Line) -> Void) {
        contains { line in
            body(line)
            return false
        }
    }

    /// The line whose record starts at `at` in `b`, nil at the end.
    @inline(__always)
    private static func line(at: Int, in b: UnsafeBufferPointer<UInt8>) -> Line? {
        guard at + recordHeader <= b.count, let base = b.baseAddress else { return nil }
        let length = Int(UnsafeRawPointer(base + at).loadUnaligned(as: UInt32.self))
        let nameLength = Int(UnsafeRawPointer(base + at + 4).loadUnaligned(as: UInt16.self))
        let start = base + at + recordHeader
        // "Name: value\0" or "Name;\0".
        let valueStart = min(nameLength + 2, length - 1)
        return Line(name: UnsafeBufferPointer(start: start, count: nameLength),
                    value: UnsafeBufferPointer(start: start + valueStart, count: length - 1 - valueStart),
                    entry: UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self),
                    record: at ..< at + recordHeader + length)
    }

    /// Whether a line is named `name` (any case of its letters).
    public func contains(named name: UnsafeBufferPointer<UInt8>) -> Bool {
        contains { RequestHeaders.sameName($0.name, name) }
    }

    public func contains(named name: String) -> Bool {
        var name = name
        return name.withUTF8 { contains(named: $0) }
    }

    /// Sets the header `name` (a valid token) to `value` (valid and trimmed): in the place of a
    /// line of that name if there is one, else at the end. False when the request already has
    /// `Validation.maxHeaderCount` lines (nothing changed then).
    public mutating func set(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        var replaced: Range<Int>?
        contains { line in
            guard RequestHeaders.sameName(line.name, name) else { return false }
            replaced = line.record
            return true
        }
        guard replaced != nil || count < Validation.maxHeaderCount else { return false }
        guard let replaced else {
            appendRecord(name: name, value: value)
            return true
        }
        var made = RequestHeaders()
        withBytes { b in
            made.appendBytes(UnsafeBufferPointer(rebasing: b[..<replaced.lowerBound]))
            made.appendRecord(name: name, value: value)
            made.appendBytes(UnsafeBufferPointer(rebasing: b[replaced.upperBound...]))
        }
        made.storage?.header.lines = count
        made.storage?.header.names.formUnion(names)
        self = made
        return true
    }

    /// Calls `body` with the records.
    private func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        guard let storage else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
        return storage.withUnsafeMutablePointers { header, bytes in body(UnsafeBufferPointer(start: bytes, count: header.pointee.used)) }
    }

    /// Makes room for `extra` more bytes in a buffer of this value's own, then lets `write` fill
    /// them (given where they start).
    private mutating func append(_ extra: Int, _ write: (UnsafeMutablePointer<UInt8>) -> Void) {
        let header = storage?.header ?? Header()
        if !isKnownUniquelyReferenced(&storage) || header.used + extra > header.capacity {
            let grown = Storage.make(capacity: Swift.max(header.used + extra, header.capacity * 2))
            if let storage {
                storage.withUnsafeMutablePointerToElements { old in
                    grown.withUnsafeMutablePointerToElements { $0.initialize(from: old, count: header.used) }
                }
            }
            grown.header = Header(used: header.used, capacity: grown.header.capacity, lines: header.lines, names: header.names)
            storage = grown
        }
        storage?.withUnsafeMutablePointers { header, bytes in
            write(bytes + header.pointee.used)
            header.pointee.used += extra
        }
    }

    private mutating func appendBytes(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let from = bytes.baseAddress, !bytes.isEmpty else { return }
        append(bytes.count) { $0.initialize(from: from, count: bytes.count) }
    }

    /// Appends the record of a line ("Name: value" or "Name;", then NUL), and counts it.
    private mutating func appendRecord(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        defer {
            storage?.header.lines += 1
            storage?.header.names.formUnion(Names(of: name))
        }
        let length = name.count + (value.isEmpty ? 2 : 3 + value.count)
        append(RequestHeaders.recordHeader + length) { at in
            UnsafeMutableRawPointer(at).storeBytes(of: UInt32(length).littleEndian, as: UInt32.self)
            UnsafeMutableRawPointer(at + 4).storeBytes(of: UInt16(name.count).littleEndian, as: UInt16.self)
            var next = at + RequestHeaders.recordHeader
            if let n = name.baseAddress { next.initialize(from: n, count: name.count) }
            next += name.count
            if value.isEmpty {
                next.initialize(to: UInt8(ascii: ";"))
                next += 1
            } else {
                next.initialize(to: UInt8(ascii: ":"))
                (next + 1).initialize(to: UInt8(ascii: " "))
                if let v = value.baseAddress { (next + 2).initialize(from: v, count: value.count) }
                next += 2 + value.count
            }
            next.initialize(to: 0)
        }
    }

    /// Appends a line of other lines (a queue's defaults): no check of the count.
    public mutating func append(_ line: Line) {
        appendRecord(name: line.name, value: line.value)
    }

    /// The values of the Cookie lines, joined with "; " and NUL-terminated (the pairs of one
    /// Cookie line, RFC 6265 5.4); nil when no such line has a value.
    public var cookieValue: [CChar]? {
        guard names.contains(.cookie) else { return nil }
        var joined: [CChar] = []
        forEach { line in
            guard line.isNamed("cookie"), !line.value.isEmpty else { return }
            if !joined.isEmpty { joined += [0x3B, 0x20] }
            joined += line.value.lazy.map { CChar(bitPattern: $0) }
        }
        guard !joined.isEmpty else { return nil }
        joined.append(0)
        return joined
    }

    /// Removes the lines named `name` (any case).
    public mutating func remove(named name: UnsafeBufferPointer<UInt8>) {
        guard contains(named: name) else { return }
        var kept = RequestHeaders()
        forEach { line in
            if !RequestHeaders.sameName(line.name, name) { kept.append(line) }
        }
        self = kept
    }

    /// Whether both hold the same lines, byte for byte, in the same order.
    public func sameBytes(as other: RequestHeaders) -> Bool {
        guard count == other.count else { return false }
        return withBytes { a in
            other.withBytes { b in
                guard a.count == b.count else { return false }
                guard let p = a.baseAddress, let q = b.baseAddress, p != q else { return true }
                return memcmp(p, q, a.count) == 0
            }
        }
    }

    /// Whether both hold lines of the same names (any case) and values, in the same order.
    public func sameLines(as other: RequestHeaders) -> Bool {
        guard count == other.count else { return false }
        return withBytes { a in
            other.withBytes { b in
                var at = (0, 0)
                while let x = RequestHeaders.line(at: at.0, in: a), let y = RequestHeaders.line(at: at.1, in: b) {
                    guard RequestHeaders.sameName(x.name, y.name), x.value.elementsEqual(y.value) else { return false }
                    at = (x.record.upperBound, y.record.upperBound)
                }
                return true
            }
        }
    }

    /// Feeds the names (lowercased) and values to `hasher`: lines that are `sameLines` hash alike.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        forEach { line in
            var name: UInt64 = 0
            for c in line.name { name = name &* 31 &+ UInt64(RequestHeaders.lowercase(c)) }
            hasher.combine(name)
            hasher.combine(bytes: UnsafeRawBufferPointer(line.value))
        }
    }

    /// ASCII lowercase (a name is a token: its letters are ASCII).
    @inline(__always)
    public static func lowercase(_ c: UInt8) -> UInt8 { c &- 0x41 < 26 ? c | 0x20 : c }

    /// The name lowercased, as a String.
    public static func lowercased(_ name: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: name.lazy.map(lowercase), as: UTF8.self)
    }

    /// Whether two names are equal without regard to the case of their letters.
    public static func sameName(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count where lowercase(a[i]) != lowercase(b[i]) { return false }
        return true
    }

    /// Whether the token `name` is `lowercased` (lowercase letters, digits and "-") in any case of
    /// its letters. A token's byte c is such a byte l in any case exactly when c | 0x20 == l (no
    /// other byte of a token maps to a letter, a digit or "-"): eight bytes at a time.
    public static func isName(_ name: UnsafeBufferPointer<UInt8>, _ lowercased: StaticString) -> Bool {
        let n = name.count
        guard n == lowercased.utf8CodeUnitCount, let p = name.baseAddress else { return n == 0 && lowercased.utf8CodeUnitCount == 0 }
        let q = lowercased.utf8Start
        var i = 0
        while i + 8 <= n {
            let a = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self), b = UnsafeRawPointer(q + i).loadUnaligned(as: UInt64.self)
            guard a | 0x2020_2020_2020_2020 == b else { return false }
            i += 8
        }
        while i < n {
            guard p[i] | 0x20 == q[i] else { return false }
            i += 1
        }
        return true
    }
}
