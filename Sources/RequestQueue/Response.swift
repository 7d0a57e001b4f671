import CCurl
import Glibc
import RequestQueueCore

/// What a completion (or an authentication challenge) hands to C: every string and buffer lives
/// in malloc'ed memory owned by this object, so the pointers given out stay valid while it lives
/// (during its callback, or while the caller retains it). The URL, the message and the header
/// fields are made on first use, by whichever thread asks first.
// @unchecked Sendable: `let`s; the `...Made` fields under its striped `lock`; `metrics`,
// `deferredHead` and `httpVersion` written on the engine thread only, before the engine hands the
// response to the queue (under its monitor), never after.
final class Response: @unchecked Sendable {
    let outcome: Outcome
    let status: Int32
    let attempts: UInt32
    /// Where the URL comes from: the string given, or (a cancellation's response) the request's
    /// URL, read when first asked for. A cancel then neither reads the request's URL nor retains
    /// its storage: with a million waiting requests, one cache miss fewer per cancel
    /// (bench/README.md, "The queue at scale"). The request's URL never changes once it is added.
    private enum URLSource {
        case given(String)
        case request(Request)
    }
    private let urlSource: URLSource
    var urlString: String {
        switch urlSource {
        case let .given(string): string
        case let .request(request): request.url.string
        }
    }
    let messageString: String
    /// One malloc'ed block: the body, then the header lines as received. On first use the lines
    /// are cut in place into NUL-terminated names and values, whose offsets `fieldsMade` keeps.
    private let storage: UnsafeMutablePointer<UInt8>?
    let bodyCount: Int
    private let headerBytes: Int
    private var headerStorage: UnsafeMutablePointer<UInt8>? { headerBytes > 0 ? storage.map { $0 + bodyCount } : nil }
    /// What is made on first use, under one of the responses' shared locks.
    private var fieldsMade: [HeaderLines.Field]?
    private var urlMade: UnsafeMutablePointer<CChar>?
    private var messageMade: UnsafeMutablePointer<CChar>?
    private static let locks = LockStripes(count: 64)
    private var lock: StripedLock { Response.locks.lock(for: Int(bitPattern: UInt(bitPattern: ObjectIdentifier(self))) >> 6) }
    /// Body bytes of the attempt's final response (the queue's `bytes_down`), and the final
    /// download progress of the attempt (over all its responses; see `AttemptProgress`).
    let downloaded: Int64
    let downloadDone: Int64
    let downloadTotal: Int64
    let uploaded: Int64
    let uploadTotal: Int64
    /// Figures of the last attempt (`rq_response_metrics`); set before the response is posted.
    var metrics = Metrics.none
    /// The head of a 401 that ended the attempt, posted only if no authentication answers it
    /// (see `Transfer.headEnded`); set before the response is posted.
    var deferredHead: Response?
    /// The HTTP version of the response (10, 11, 20, 30; 0 without one), `rq_response_http_version`.
    var httpVersion: Int32 { metrics.httpVersion }

    /// `body` is malloc'ed memory of which the response takes ownership (`ByteBuffer.detach`); the
    /// header lines are copied after it.
    init(outcome: Outcome, status: Int, headers: UnsafeBufferPointer<UInt8> = UnsafeBufferPointer(start: nil, count: 0),
         body: (base: UnsafeMutablePointer<UInt8>?, count: Int) = (nil, 0),
         url: String, message: String, attempts: Int,
         downloaded: Int64 = 0, progress: (done: Int64, total: Int64) = (0, -1), uploaded: Int64 = 0, uploadTotal: Int64 = -1) {
        self.outcome = outcome
        self.status = Int32(clamping: status)
        self.attempts = UInt32(clamping: attempts)
        urlSource = .given(url)
        messageString = message
        self.downloaded = downloaded
        downloadDone = progress.done
        downloadTotal = progress.total
        self.uploaded = uploaded
        self.uploadTotal = uploadTotal
        let bodyCount = body.base == nil ? 0 : body.count
        self.bodyCount = bodyCount
        // The lines go in the body's block when they fit (`Transfer.reserveBody` makes room for
        // them), else in the block grown. Out of memory for them: the body alone (and no headers)
        // is still delivered.
        let size = bodyCount + headers.count
        if !headers.isEmpty, let lines = headers.baseAddress,
           let grown = body.base.flatMap({ malloc_usable_size($0) >= size ? UnsafeMutableRawPointer($0) : nil })
               ?? realloc(body.base, size) {
            let block = grown.assumingMemoryBound(to: UInt8.self)
            (block + bodyCount).update(from: lines, count: headers.count)
            storage = block
            headerBytes = headers.count
        } else {
            storage = body.base
            headerBytes = 0
        }
    }

    /// The body bytes (a valid pointer even when empty).
    var body: UnsafePointer<UInt8> {
        UnsafePointer(storage) ?? UnsafeRawPointer(emptyCString).assumingMemoryBound(to: UInt8.self)
    }

    deinit {
        free(urlMade)
        free(messageMade)
        free(storage)
    }

    /// The response of a cancelled request: no status, no headers, no body, its URL the request's.
    /// Made by the delivery right before the completion callback (`Queue.Completion.cancelled`).
    private init(cancelled request: Request, attempts: Int, message: String) {
        outcome = .cancelled
        status = 0
        self.attempts = UInt32(clamping: attempts)
        urlSource = .request(request)
        messageString = message
        downloaded = 0
        downloadDone = 0
        downloadTotal = -1
        uploaded = 0
        uploadTotal = -1
        bodyCount = 0
        storage = nil
        headerBytes = 0
    }

    static func cancelled(_ request: Request, attempts: Int, message: String) -> Response {
        Response(cancelled: request, attempts: attempts, message: message)
    }

    var url: UnsafePointer<CChar> {
        lock.withLock {
            if let urlMade { return UnsafePointer(urlMade) }
            let made = mallocCString(Array(urlString.utf8))
            urlMade = made
            return UnsafePointer(made)
        }
    }

    var message: UnsafePointer<CChar> {
        lock.withLock {
            if let messageMade { return UnsafePointer(messageMade) }
            let made = mallocCString(Array(messageString.utf8))
            messageMade = made
            return UnsafePointer(made)
        }
    }

    /// The headers' fields, cut out of the storage on first use.
    private var fields: [HeaderLines.Field] {
        lock.withLock {
            if let fieldsMade { return fieldsMade }
            let made = headerStorage.map { HeaderLines.cut(UnsafeMutableBufferPointer(start: $0, count: headerBytes)) } ?? []
            fieldsMade = made
            return made
        }
    }

    var headerCount: Int { fields.count }

    func header(at index: Int) -> (name: UnsafePointer<CChar>, value: UnsafePointer<CChar>)? {
        let fields = fields
        guard index >= 0, index < fields.count, let headerStorage else { return nil }
        let raw = UnsafeRawPointer(headerStorage)
        return (raw.advanced(by: fields[index].name).assumingMemoryBound(to: CChar.self),
                raw.advanced(by: fields[index].value).assumingMemoryBound(to: CChar.self))
    }

    func header(named name: UnsafePointer<CChar>) -> UnsafePointer<CChar>? {
        for index in 0..<fields.count {
            if let h = header(at: index), strcasecmp(h.name, name) == 0 { return h.value }
        }
        return nil
    }

    /// The first value of a header as a Swift string (for internal decisions).
    func headerValue(_ name: String) -> String? {
        name.withCString { header(named: $0) }.map { String(cString: $0) }
    }
}

extension HeaderLines {
    /// Appends one line to `lines`; false when memory ran out. A line always ends with a newline
    /// in the stored copy (so that a NUL can replace it when the lines are cut).
    @inline(__always)
    static func append(_ line: UnsafeRawBufferPointer, to lines: ByteBuffer) -> Bool {
        guard let base = line.baseAddress, let first = line.first else { return true }
        if first == 0x20 || first == 0x09, lines.count > 0 { return fold(line, into: lines) }
        guard lines.append(base, line.count) else { return false }
        if line.last != 0x0A {
            var newline: UInt8 = 0x0A
            return lines.append(&newline, 1)
        }
        return true
    }

    /// A line that starts with a space or a tab continues the value of the line before (obs-fold,
    /// RFC 9112 5.2): it is joined to it with one space, as a recipient must.
    private static func fold(_ line: UnsafeRawBufferPointer, into lines: ByteBuffer) -> Bool {
        func blank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        lines.removeLast(while: blank)
        var start = 0, end = line.count
        while start < end, blank(line[start]) { start += 1 }
        while end > start, blank(line[end - 1]) { end -= 1 }
        var space: UInt8 = 0x20, newline: UInt8 = 0x0A
        guard lines.append(&space, 1) else { return false }
        if end > start, let base = line.baseAddress, !lines.append(base + start, end - start) { return false }
        return lines.append(&newline, 1)
    }
}
