import Glibc
import RequestQueueCore

/// What a completion (or an authentication challenge) hands to C: every string and buffer lives
/// in malloc'ed memory owned by this object, so the pointers given out stay valid while it lives.
/// The URL and message become C strings on first use, on the thread running the callbacks.
final class Response: @unchecked Sendable {
    let outcome: Outcome
    let status: Int32
    let body: ByteBuffer
    let attempts: UInt32
    let urlString: String
    let messageString: String
    private var urlC: UnsafeMutablePointer<CChar>?
    private var messageC: UnsafeMutablePointer<CChar>?
    /// Names and values, each NUL-terminated, one after the other.
    private let headerStorage: UnsafeMutablePointer<CChar>?
    private let headerOffsets: [(name: Int, value: Int)]
    /// Transfer figures for the final progress calls.
    let downloaded: Int64
    let downloadTotal: Int64
    let uploaded: Int64
    let uploadTotal: Int64
    /// Figures of the last attempt (`rq_response_metrics`); set before the response is posted.
    var metrics = Metrics.none

    init(outcome: Outcome, status: Int, headers: HeaderBlock = HeaderBlock(), body: ByteBuffer = ByteBuffer(),
         url: String, message: String, attempts: Int,
         downloaded: Int64 = 0, downloadTotal: Int64 = -1, uploaded: Int64 = 0, uploadTotal: Int64 = -1) {
        self.outcome = outcome
        self.status = Int32(clamping: status)
        self.body = body
        self.attempts = UInt32(clamping: attempts)
        urlString = url
        messageString = message
        self.downloaded = downloaded
        self.downloadTotal = downloadTotal
        self.uploaded = uploaded
        self.uploadTotal = uploadTotal
        // The block already holds "name\0value\0" pairs: one copy makes the C storage.
        if !headers.bytes.isEmpty, let raw = malloc(headers.bytes.count) {
            headers.bytes.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress { raw.copyMemory(from: base, byteCount: bytes.count) }
            }
            headerStorage = raw.assumingMemoryBound(to: CChar.self)
            headerOffsets = headers.offsets
        } else {
            headerStorage = nil
            headerOffsets = []
        }
    }

    deinit {
        free(urlC)
        free(messageC)
        free(headerStorage)
    }

    static func cancelled(url: String, attempts: Int, message: String = "the request was cancelled") -> Response {
        Response(outcome: .cancelled, status: 0, url: url, message: message, attempts: attempts)
    }

    var url: UnsafePointer<CChar> {
        if let urlC { return UnsafePointer(urlC) }
        let made = mallocCString(Array(urlString.utf8))
        urlC = made
        return UnsafePointer(made)
    }

    var message: UnsafePointer<CChar> {
        if let messageC { return UnsafePointer(messageC) }
        let made = mallocCString(Array(messageString.utf8))
        messageC = made
        return UnsafePointer(made)
    }

    var headerCount: Int { headerOffsets.count }

    func header(at index: Int) -> (name: UnsafePointer<CChar>, value: UnsafePointer<CChar>)? {
        guard index >= 0, index < headerOffsets.count, let headerStorage else { return nil }
        let offsets = headerOffsets[index]
        return (UnsafePointer(headerStorage + offsets.name), UnsafePointer(headerStorage + offsets.value))
    }

    func header(named name: UnsafePointer<CChar>) -> UnsafePointer<CChar>? {
        for index in 0..<headerOffsets.count {
            if let h = header(at: index), strcasecmp(h.name, name) == 0 { return h.value }
        }
        return nil
    }

    /// The first value of a header as a Swift string (for internal decisions).
    func headerValue(_ name: String) -> String? {
        name.withCString { header(named: $0) }.map { String(cString: $0) }
    }
}

/// Response headers as received: "name\0value\0" pairs in one buffer, with the offsets of each
/// name and value. Built line by line on the engine thread without an allocation per header.
struct HeaderBlock {
    private(set) var bytes: [UInt8] = []
    private(set) var offsets: [(name: Int, value: Int)] = []

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
    }

    /// The first value of a header (name compared case-insensitively), for internal decisions.
    func value(named name: String) -> String? {
        for (nameAt, valueAt) in offsets {
            let stored = bytes[nameAt..<(valueAt - 1)]
            if stored.count == name.utf8.count,
               zip(stored, name.utf8).allSatisfy({ $0 | 0x20 == $1 | 0x20 }) {
                var end = valueAt
                while end < bytes.count, bytes[end] != 0 { end += 1 }
                return String(decoding: bytes[valueAt..<end], as: UTF8.self)
            }
        }
        return nil
    }

    /// Adds one "Name: value\r\n" line; lines without a colon (the blank end line) are skipped.
    mutating func append(line: UnsafeBufferPointer<UInt8>) {
        guard let base = line.baseAddress else { return }
        var end = line.count
        while end > 0, base[end - 1] == 0x0D || base[end - 1] == 0x0A { end -= 1 }
        guard let found = memchr(base, Int32(UInt8(ascii: ":")), end) else { return }
        let colon = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
        var valueStart = colon + 1
        while valueStart < end, base[valueStart] == 0x20 || base[valueStart] == 0x09 { valueStart += 1 }
        while end > valueStart, base[end - 1] == 0x20 || base[end - 1] == 0x09 { end -= 1 }
        if bytes.capacity == 0 { bytes.reserveCapacity(512) }
        let nameAt = bytes.count
        bytes.append(contentsOf: UnsafeBufferPointer(start: base, count: colon))
        bytes.append(0)
        let valueAt = bytes.count
        bytes.append(contentsOf: UnsafeBufferPointer(start: base + valueStart, count: end - valueStart))
        bytes.append(0)
        offsets.append((nameAt, valueAt))
    }
}
