import Glibc
import RequestQueueCore

/// What a completion (or an authentication challenge) hands to C: every string and buffer lives
/// in malloc'ed memory owned by this object, so the pointers given out stay valid while it lives.
final class Response: @unchecked Sendable {
    let outcome: Outcome
    let status: Int32
    let body: ByteBuffer
    let attempts: UInt32
    let url: UnsafeMutablePointer<CChar>
    let message: UnsafeMutablePointer<CChar>
    /// Names and values, each NUL-terminated, one after the other.
    private let headerStorage: UnsafeMutablePointer<CChar>?
    private let headerOffsets: [(name: Int, value: Int)]
    /// Transfer figures for the final progress calls.
    let downloaded: Int64
    let downloadTotal: Int64
    let uploaded: Int64
    let uploadTotal: Int64

    init(outcome: Outcome, status: Int, headers: [(name: [UInt8], value: [UInt8])] = [], body: ByteBuffer = ByteBuffer(),
         url: String, message: String, attempts: Int,
         downloaded: Int64 = 0, downloadTotal: Int64 = -1, uploaded: Int64 = 0, uploadTotal: Int64 = -1) {
        self.outcome = outcome
        self.status = Int32(clamping: status)
        self.body = body
        self.attempts = UInt32(clamping: attempts)
        self.url = mallocCString(Array(url.utf8))
        self.message = mallocCString(Array(message.utf8))
        self.downloaded = downloaded
        self.downloadTotal = downloadTotal
        self.uploaded = uploaded
        self.uploadTotal = uploadTotal
        let size = headers.reduce(0) { $0 + $1.name.count + $1.value.count + 2 }
        var offsets: [(Int, Int)] = []
        if size > 0, let raw = malloc(size) {
            let storage = raw.assumingMemoryBound(to: UInt8.self)
            var position = 0
            for header in headers {
                let nameAt = position
                for b in header.name { storage[position] = b; position += 1 }
                storage[position] = 0; position += 1
                let valueAt = position
                for b in header.value { storage[position] = b; position += 1 }
                storage[position] = 0; position += 1
                offsets.append((nameAt, valueAt))
            }
            headerStorage = raw.assumingMemoryBound(to: CChar.self)
        } else {
            headerStorage = nil
        }
        headerOffsets = offsets
    }

    deinit {
        free(url)
        free(message)
        free(headerStorage)
    }

    static func cancelled(url: String, attempts: Int, message: String = "the request was cancelled") -> Response {
        Response(outcome: .cancelled, status: 0, url: url, message: message, attempts: attempts)
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
