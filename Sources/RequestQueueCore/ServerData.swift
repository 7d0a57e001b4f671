// Parsers of what a server sends (status lines, header fields, Content-Range, transfer codings,
// byte counts). A server controls every byte: each function here is total (no input traps, every
// number is range-checked before any arithmetic) and bounded (budgets instead of growth). They are
// fuzzed by Tests/reliability/fuzz_server_data.swift and tested in ServerDataTests.

public enum ServerData {
    /// The body of a non-2xx answer to a request that streams its body (callback or output file)
    /// is collected in the response up to this many bytes; the rest is not read.
    public static let errorBodyLimit = 1 << 20

    /// The status code of a status line ("HTTP/1.1 206 Partial Content\r\n"): "HTTP/" a version of
    /// at most 3 digits, an optional "." and one digit, one space, exactly three digits, then a
    /// space, CR, LF or the end. Nil unless the code is 100...599: a reply that is not HTTP.
    public static func statusCode(ofStatusLine line: UnsafeBufferPointer<UInt8>) -> Int? {
        func digit(_ i: Int) -> Int? {
            guard i < line.count, line[i] >= 0x30, line[i] <= 0x39 else { return nil }
            return Int(line[i] - 0x30)
        }
        // "HTTP/"
        guard line.count >= 5, line[0] == 0x48, line[1] == 0x54, line[2] == 0x54, line[3] == 0x50, line[4] == 0x2F else {
            return nil
        }
        var i = 5
        var major = 0
        while digit(i) != nil, major < 3 { i += 1; major += 1 }
        guard major > 0 else { return nil }
        if i < line.count, line[i] == 0x2E {
            guard digit(i + 1) != nil else { return nil }
            i += 2
        }
        guard i < line.count, line[i] == 0x20 else { return nil }
        guard let a = digit(i + 1), let b = digit(i + 2), let c = digit(i + 3) else { return nil }
        let end = i + 4
        guard end == line.count || line[end] == 0x20 || line[end] == 0x0D || line[end] == 0x0A else { return nil }
        let code = a * 100 + b * 10 + c
        return (100...599).contains(code) ? code : nil
    }

    /// The first byte position of a Content-Range value ("bytes 100-299/300" gives 100): the unit
    /// "bytes", first-last with first <= last, and the complete length (or "*") above last. Nil
    /// for anything else, numbers of more than 18 digits included.
    public static func contentRangeStart(_ value: String) -> Int64? {
        var rest = Substring(value.trimmingSpaces)
        guard rest.prefix(6).lowercased() == "bytes " else { return nil }
        rest = rest.dropFirst(6)
        guard let first = number(&rest), rest.popFirst() == "-", let last = number(&rest), first <= last,
              rest.popFirst() == "/" else { return nil }
        if rest == "*" { return first }
        guard let length = number(&rest), rest.isEmpty, last < length else { return nil }
        return first
    }

    /// Takes 1 to 18 decimal digits off the front of `text`.
    private static func number(_ text: inout Substring) -> Int64? {
        let digits = text.prefix { $0 >= "0" && $0 <= "9" }
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        text = text.dropFirst(digits.count)
        return Int64(digits)
    }

    /// The first transfer coding of a Transfer-Encoding value other than "chunked", lowercased;
    /// nil when there is none. The library asks for no transfer coding (it sends no TE header), so
    /// any other one is a protocol violation (and libcurl would decode it unasked: a gzip bomb).
    public static func unrequestedTransferCoding(_ value: String) -> String? {
        for coding in value.split(separator: ",") {
            let name = String(coding).trimmingSpaces.lowercased()
            if !name.isEmpty, name != "chunked" { return String(name.prefix(64)) }
        }
        return nil
    }

    /// Whether a Content-Length value is valid: 1 to 18 decimal digits, nothing else, or a list of
    /// such values that are all equal ("5, 5": the field sent twice and combined, which RFC 9112
    /// 6.3 processes as that value; empty elements after the first value are ignored, RFC 9110
    /// 5.6.1.2). (libcurl ignores one that does not fit its numbers and reads until the connection
    /// closes; of a list, it takes the first value.)
    public static func isValidContentLength(_ value: String) -> Bool { isValidContentLength(bytes: value.utf8) }

    /// `isValidContentLength` on the value's bytes (every response has one: no String is made).
    public static func isValidContentLength<Bytes: BidirectionalCollection>(bytes value: Bytes) -> Bool
        where Bytes.Element == UInt8 {
        contentLength(bytes: value) != nil
    }

    /// The number of a valid Content-Length value (see `isValidContentLength`), nil for an
    /// invalid one. (18 digits fit in an Int64.)
    public static func contentLength<Bytes: BidirectionalCollection>(bytes value: Bytes) -> Int64?
        where Bytes.Element == UInt8 {
        guard value.contains(0x2C) else { return decimalLength(value) }
        // (The first element must be a value: libcurl reads the number at the start.)
        let elements = value.split(separator: 0x2C, omittingEmptySubsequences: false)
        guard let length = decimalLength(elements[0]) else { return nil }
        for element in elements.dropFirst() where !element.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
            guard decimalLength(element) == length else { return nil }
        }
        return length
    }

    /// One Content-Length value: 1 to 18 decimal digits between optional spaces and tabs.
    private static func decimalLength<Bytes: BidirectionalCollection>(_ value: Bytes) -> Int64?
        where Bytes.Element == UInt8 {
        var digits = value[...]
        while let first = digits.first, first == 0x20 || first == 0x09 { digits = digits.dropFirst() }
        while let last = digits.last, last == 0x20 || last == 0x09 { digits = digits.dropLast() }
        guard (1...18).contains(digits.count) else { return nil }
        var number: Int64 = 0
        for digit in digits {
            guard digit >= 0x30, digit <= 0x39 else { return nil }
            number = number * 10 + Int64(digit - 0x30)
        }
        return number
    }

    /// Whether libcurl's error message for an unsupported protocol says the reply was not HTTP
    /// ("Received HTTP/0.9 when not allowed": libcurl takes any such reply for HTTP/0.9, which it
    /// refuses; "Unsupported response code in HTTP response"; "Unsupported HTTP version in
    /// response"). The same code also reports a redirect to a scheme that is not allowed.
    public static func isNotHTTPError(_ message: String) -> Bool {
        contains(message, "HTTP/0.9") || message.hasSuffix("in HTTP response") || message.hasSuffix("in response")
    }

    /// Whether `text` holds `part`, bytes compared. (`String.contains(_:)` comes from Swift's
    /// string-processing module, which the library does not load: Package.swift.)
    static func contains(_ text: String, _ part: String) -> Bool {
        let text = Array(text.utf8), part = Array(part.utf8)
        guard part.count <= text.count else { return false }
        for start in 0...(text.count - part.count) where text[start..<(start + part.count)].elementsEqual(part) {
            return true
        }
        return false
    }

    /// Whether libcurl's error message for a receive error says the reply's framing was invalid:
    /// bad chunked framing ("... in chunked-encoding"), more header bytes than libcurl takes
    /// ("Too large response headers: ..."), or HTTP/2 frames refused (libcurl 7.88:
    /// "h2_process_pending_input: nghttp2_session_mem_recv() returned -904:Flooding was
    /// detected ...", "-905:Too many CONTINUATION frames ...", and -902, see
    /// `http2FieldsTooLarge`). libcurl reports them as CURLE_RECV_ERROR, like a broken connection.
    public static func isFramingError(_ message: String) -> Bool {
        message.hasSuffix("in chunked-encoding") || message.hasPrefix("Too large response headers")
            || message.hasPrefix(nghttp2Refused + "-904:") || message.hasPrefix(nghttp2Refused + "-905:")
            || http2FieldsTooLarge(message)
    }

    /// Whether libcurl's message says one of its HTTP/2 callbacks refused what nghttp2 decoded
    /// ("... returned -902:The user callback function failed"): libcurl 7.88 does for header or
    /// trailer fields past its 128 KiB (its only refusal of a server's frames there, besides
    /// running out of memory).
    public static func http2FieldsTooLarge(_ message: String) -> Bool {
        message.hasPrefix(nghttp2Refused + "-902:")
    }

    /// Whether libcurl's message for a reset HTTP/2 stream (CURLE_HTTP2_STREAM, "HTTP/2 stream 1 was
    /// not closed cleanly: PROTOCOL_ERROR (err 1)") names a broken protocol rather than a server
    /// that gave up: nghttp2 resets a stream whose response is malformed (a header name in upper
    /// case, a connection-specific field, a bad :status, a Content-Length the DATA frames do not
    /// match, a NUL, CR or LF in a value) with PROTOCOL_ERROR, and FLOW_CONTROL_ERROR,
    /// FRAME_SIZE_ERROR and COMPRESSION_ERROR are the protocol's too. REFUSED_STREAM, CANCEL,
    /// INTERNAL_ERROR and the others are not.
    public static func isHTTP2ProtocolReset(_ message: String) -> Bool {
        guard message.hasPrefix("HTTP/2 stream "), message.hasSuffix(")") else { return false }
        return ["PROTOCOL_ERROR (err 1)", "FLOW_CONTROL_ERROR (err 3)", "FRAME_SIZE_ERROR (err 6)",
                "COMPRESSION_ERROR (err 9)"].contains { message.hasSuffix(" was not closed cleanly: " + $0) }
    }

    private static let nghttp2Refused = "h2_process_pending_input: nghttp2_session_mem_recv() returned "

}

/// The budget of the header sections of one transfer: the status lines, header lines and chunked
/// trailers of all its responses (redirects, informational responses, the final one), in bytes
/// and in lines. A transfer over it is refused.
public struct HeaderBudget: Sendable {
    /// 256 KiB (libcurl itself stops at 300 KiB of headers, trailers not counted).
    public static let maxBytes = 256 * 1024
    public static let maxLines = 10_000

    public private(set) var bytes = 0
    public private(set) var lines = 0

    public init() {}

    /// Counts one line of `lineLength` bytes; false when it does not fit in the budget.
    public mutating func admit(lineLength: Int) -> Bool {
        guard lineLength >= 0, lineLength <= HeaderBudget.maxBytes - bytes, lines < HeaderBudget.maxLines else { return false }
        bytes += lineLength
        lines += 1
        return true
    }
}

/// Download progress over the responses of one attempt: a redirect's body, a 401 answered with
/// credentials, then the final response. libcurl counts each response's body from 0; `done` adds
/// them up, so that it never decreases within the attempt, and `total` is the bytes of the
/// earlier responses plus the announced length of the current one (-1 while it is unknown),
/// never below `done`. Every sum saturates.
public struct AttemptProgress: Sendable {
    /// Body bytes of the earlier responses of the attempt.
    private var base: Int64 = 0
    /// Body bytes of the current response (libcurl's count), and its announced length.
    private var current: Int64 = 0
    private var length: Int64 = -1

    public init() {}

    /// A new transfer continues the attempt (libcurl's count starts again from 0).
    public mutating func newResponse() {
        base = Self.add(base, current)
        current = 0
        length = -1
    }

    /// libcurl's figures: body bytes received of the current response (a smaller number than
    /// before means a new response began) and its Content-Length, or -1.
    public mutating func update(received: Int64, length: Int64) {
        let received = max(received, 0)
        if received < current { newResponse() }
        current = received
        self.length = length
    }

    public var done: Int64 { Self.add(base, current) }
    public var total: Int64 { length < 0 ? -1 : max(Self.add(base, length), done) }

    private static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }
}

/// Response header lines ("Name: value\r\n" each, as libcurl hands them over, status line left
/// out): collected as they are on the engine thread, without parsing, and cut into fields only
/// when someone reads them.
public enum HeaderLines {
    /// Offsets of a field's name and value in the lines.
    public struct Field: Sendable {
        public let name: Int
        public let value: Int
    }

    /// Each "name: value" line: the offsets of the name, its end (the colon), and the value's
    /// start and end (blanks around it left out). Lines without a colon are skipped.
    private static func forEachField(_ bytes: UnsafeBufferPointer<UInt8>,
                                     _ body: (_ name: Int, _ colon: Int, _ value: Int, _ end: Int) -> Bool) {
        var start = 0
        while start < bytes.count {
            var next = start
            while next < bytes.count, bytes[next] != 0x0A { next += 1 }
            var end = next
            while end > start, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            var colon = start
            while colon < end, bytes[colon] != 0x3A { colon += 1 }
            if colon < end {
                var value = colon + 1
                while value < end, bytes[value] == 0x20 || bytes[value] == 0x09 { value += 1 }
                if !body(start, colon, value, end) { return }
            }
            start = next + 1
        }
    }

    /// Cuts the lines in place into NUL-terminated names and values; returns their offsets.
    public static func cut(_ bytes: UnsafeMutableBufferPointer<UInt8>) -> [Field] {
        var fields: [Field] = []
        var ends: [(colon: Int, end: Int)] = []
        forEachField(UnsafeBufferPointer(bytes)) { name, colon, value, end in
            // A last line without its newline (memory ran out while storing it) has no room for
            // the value's NUL: left out.
            guard end < bytes.count else { return false }
            fields.append(Field(name: name, value: value))
            ends.append((colon, end))
            return true
        }
        // After the scan: a value's end may be the newline the scan looks for.
        for (colon, end) in ends {
            bytes[colon] = 0
            bytes[end] = 0
        }
        return fields
    }

    /// Whether `bytes` spell `name`, ASCII letters in either case. (On both buffers: iterating a
    /// String's UTF-8 view costs tens of instructions per byte.)
    private static func equalIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ name: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == name.count else { return false }
        var i = 0
        while i < bytes.count {
            guard bytes[i] | 0x20 == name[i] | 0x20 else { return false }
            i += 1
        }
        return true
    }

    /// The first value of a header (name compared case-insensitively), for internal decisions.
    public static func value(named name: String, in bytes: UnsafeBufferPointer<UInt8>) -> String? {
        valueBytes(named: name, in: bytes).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `valueBytes(named:in:)` of one header line as libcurl hands it over ("Name: value\r\n"),
    /// without the walk over every line: the value when the line's field is `name`, blanks around
    /// it left out. (Bytes after a first newline that is not the last byte: the walk.) The name is
    /// compared first, then only the rest of the line is looked at: it runs for every response.
    /// `name`: ASCII letters, digits and "-".
    public static func valueBytes(ofLine line: UnsafeBufferPointer<UInt8>, named name: StaticString) -> UnsafeBufferPointer<UInt8>? {
        guard let p = line.baseAddress else { return nil }
        // libcurl's lines end with their only newline: the last byte.
        var end = line.count
        if end > 0, p[end - 1] == 0x0A { end -= 1 }
        let length = name.utf8CodeUnitCount
        let n = name.utf8Start
        // The name ends at the first colon, so the line's first colon must follow the name's bytes
        // (no newline among them: the scan for a newline goes on after them).
        var matches = length < end && p[length] == 0x3A
        var i = 0
        // Eight bytes at a time, the last eight overlapping the ones before; a name shorter than
        // that one by one. (A byte equal to one of the name's with 0x20 set is no newline: the
        // name holds no "*".)
        func sameWord(at i: Int) -> Bool {
            UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self) | 0x2020_2020_2020_2020
                == UnsafeRawPointer(n + i).loadUnaligned(as: UInt64.self) | 0x2020_2020_2020_2020
        }
        if length >= 8 {
            while matches, i + 8 <= length {
                matches = sameWord(at: i)
                i += 8
            }
            if matches, i < length { matches = sameWord(at: length - 8) }
            i = length
        }
        while matches, i < length {
            matches = p[i] != 0x0A && p[i] | 0x20 == n[i] | 0x20
            i += 1
        }
        var scan = matches ? length + 1 : 0
        while scan < end, p[scan] != 0x0A { scan += 1 }
        guard scan == end else { return valueBytes(named: name.description, in: line) }
        guard matches else { return nil }
        while end > length + 1, p[end - 1] == 0x0D || p[end - 1] == 0x20 || p[end - 1] == 0x09 { end -= 1 }
        var value = length + 1
        while value < end, p[value] == 0x20 || p[value] == 0x09 { value += 1 }
        return UnsafeBufferPointer(start: p + value, count: end - value)
    }

    /// Whether `bytes` spell `lowercase` (ASCII letters in either case), e.g. a Transfer-Encoding
    /// value "chunked" (the common case, without the String that `ServerData.unrequestedTransferCoding`
    /// makes).
    public static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return equalIgnoringCase(bytes, UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount))
    }

    /// The bytes of `value(named:in:)`, without making a String.
    public static func valueBytes(named name: String, in bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8>? {
        var name = name
        return name.withUTF8 { name in
            var found: UnsafeBufferPointer<UInt8>?
            forEachField(bytes) { start, colon, value, end in
                if equalIgnoringCase(UnsafeBufferPointer(rebasing: bytes[start..<colon]), name) {
                    found = UnsafeBufferPointer(rebasing: bytes[value..<end])
                    return false
                }
                return true
            }
            return found
        }
    }
}
