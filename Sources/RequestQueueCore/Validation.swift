/// Checks of caller input: URLs, methods and headers. Everything here works on raw bytes, so that
/// any input (empty, huge, not UTF-8) gets an answer and never a trap.
/// Why caller input was refused: its kind (which result code) and the reason in words, precise
/// enough to act on (which byte, which part, which limit), for `rq_last_error_message`. Two errors
/// are equal when their kinds are (`.invalidURL` and the others stand for any reason).
public struct InputError: Error, Equatable, Sendable {
    public enum Kind: Sendable {
        case invalidURL
        case unsupportedScheme
        case invalidMethod
        case invalidHeader
    }

    public let kind: Kind
    public let reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public static var invalidURL: InputError { InputError(.invalidURL, "") }
    public static var unsupportedScheme: InputError { InputError(.unsupportedScheme, "") }
    public static var invalidMethod: InputError { InputError(.invalidMethod, "") }
    public static var invalidHeader: InputError { InputError(.invalidHeader, "") }

    public static func == (a: InputError, b: InputError) -> Bool { a.kind == b.kind }

    public static func url(_ reason: String) -> InputError { InputError(.invalidURL, reason) }

    /// A byte as messages show it: the character when printable, and its hexadecimal value.
    static func describe(_ c: UInt8) -> String {
        let hex = "0x" + (c < 0x10 ? "0" : "") + String(c, radix: 16, uppercase: true)
        switch c {
        case 0x20: return "a space (\(hex))"
        case 0x09: return "a tab (\(hex))"
        case 0x0D: return "a carriage return (CR, \(hex))"
        case 0x0A: return "a line feed (LF, \(hex))"
        case 0x00: return "a NUL byte"
        case 0x21...0x7E: return "\"\(Character(Unicode.Scalar(c)))\" (\(hex))"
        case 0x80...: return "a non-ASCII byte (\(hex))"
        default: return "a control character (\(hex))"
        }
    }
}

/// A URL accepted by the library, with the parts the scheduler needs. The parts come from
/// libcurl's own parse of the URL (RequestQueue's `URLParser`), so that what the library checks
/// and counts is what libcurl sends.
public struct ValidatedURL: Equatable, Sendable {
    /// The URL as given (duplicate equality compares it byte for byte; libcurl is given it too).
    public let string: String
    /// The host libcurl connects to (lowercased), without brackets for IPv6 literals, with a zone
    /// as "%25zone".
    public let host: String
    /// Kept small: every waiting request holds its URL.
    private let portNumber: UInt16
    /// Whether the scheme is https (else http).
    public let https: Bool
    public var port: Int { Int(portNumber) }
    /// "http" or "https", lowercased.
    public var scheme: String { https ? "https" : "http" }
    /// scheme://host:port, the unit of per-host limits.
    public var origin: String { "\(scheme)://\(host):\(port)" }

    /// `port` is 1...65535 (`Validation.url` checks it).
    init(string: String, https: Bool, host: String, port: UInt16) {
        self.string = string
        self.https = https
        self.host = host
        portNumber = port
    }

    /// The same parts for another spelling of the URL with the same scheme and authority.
    public func with(string: String) -> ValidatedURL {
        ValidatedURL(string: string, https: https, host: host, port: portNumber)
    }
}

public enum Validation {
    public static let maxURLLength = 65536
    public static let maxMethodLength = 64
    public static let maxHeaderNameLength = 256
    public static let maxHeaderValueLength = 65536
    public static let maxHeaderCount = 1000

    /// Whether byte `offset` of a URL is in its host: after "://" and any user information's "@",
    /// before the path, query or fragment. (For an error message only.)
    static func isInHost<Bytes: Collection>(_ b: Bytes, _ offset: Int) -> Bool where Bytes.Element == UInt8 {
        let bytes = Array(b)
        guard let separator = (0..<max(0, bytes.count - 2)).first(where: { bytes[$0] == 0x3A && bytes[$0 + 1] == 0x2F && bytes[$0 + 2] == 0x2F })
        else { return false }
        let start = separator + 3
        let end = bytes[start...].firstIndex(where: { $0 == 0x2F || $0 == 0x3F || $0 == 0x23 }) ?? bytes.count
        let host = bytes[start..<end].lastIndex(of: 0x40).map { $0 + 1 } ?? start
        return offset >= host && offset < end
    }

    /// The checks of a URL's bytes made before libcurl parses it: 1 to 65536 bytes of printable
    /// ASCII (no spaces or controls), an absolute URL "scheme://" whose scheme is http or https
    /// (any case), and an authority that does not start with "/" (libcurl would read
    /// "http:///x" as host "x"). Returns whether the scheme is https.
    public static func urlSyntax<Bytes: Collection>(_ b: Bytes) throws(InputError) -> Bool where Bytes.Element == UInt8 {
        guard !b.isEmpty else { throw .url("the URL is empty") }
        guard b.count <= maxURLLength else { throw .url("the URL is \(b.count) bytes long, more than the \(maxURLLength) allowed") }
        // One pass over contiguous bytes finds nothing to report in almost every URL.
        let printable = b.withContiguousStorageIfAvailable { bytes -> Bool in
            var i = 0
            while i < bytes.count {
                guard bytes[i] > 0x20, bytes[i] < 0x7F else { return false }
                i += 1
            }
            return true
        }
        if printable != true {
            for (i, c) in b.enumerated() where c <= 0x20 || c >= 0x7F {
                let fix = c == 0x20 ? ": percent-encode it as %20" : c < 0x80 ? ""
                    : isInHost(b, i) ? ": a host name is ASCII: give its IDNA form (\"xn--\" labels)"
                    : ": URLs are ASCII, percent-encode it"
                throw .url("byte \(i) of the URL is \(InputError.describe(c))\(fix)")
            }
        }
        var schemeLength = 0
        var isHTTP = true, isHTTPS = true
        var index = b.startIndex
        while index != b.endIndex, b[index] != UInt8(ascii: ":") {
            let c = b[index]
            guard isAlpha(c) || (schemeLength > 0 && (isDigit(c) || c == 0x2B || c == 0x2D || c == 0x2E)) else {
                throw .url("byte \(schemeLength) of the URL is \(InputError.describe(c)), which cannot be in a scheme: "
                           + "the URL must be absolute, starting with http:// or https://")
            }
            let lower = c | 0x20
            isHTTP = isHTTP && schemeLength < 4 && lower == httpsLetter(schemeLength)
            isHTTPS = isHTTPS && schemeLength < 5 && lower == httpsLetter(schemeLength)
            schemeLength += 1
            index = b.index(after: index)
        }
        guard schemeLength > 0, index != b.endIndex else {
            throw .url(schemeLength == 0 ? "the URL starts with \":\": it has no scheme (http:// or https://)"
                                         : "the URL has no scheme: it must be absolute, starting with http:// or https://")
        }
        let https = isHTTPS && schemeLength == 5
        let known = https || (isHTTP && schemeLength == 4)
        // After the ":": "//", then a first authority byte that is not "/". (The messages are
        // made only for a refused URL.)
        var rest = b[b.index(after: index)...].makeIterator()
        var scheme: String { String(decoding: b.prefix(schemeLength), as: UTF8.self) }
        var unsupported: InputError { InputError(.unsupportedScheme, "the scheme is \"\(scheme)\": only http and https are supported") }
        guard rest.next() == UInt8(ascii: "/"), rest.next() == UInt8(ascii: "/") else {
            throw known ? .url("\"//\" must follow \"\(scheme):\" (an absolute URL: \(scheme)://host/path)") : unsupported
        }
        guard known else { throw unsupported }
        guard let first = rest.next(), first != UInt8(ascii: "/") else {
            throw .url("the URL has no host after \"\(scheme)://\"")
        }
        return https
    }

    /// `urlSyntax` and `authorityEnd` in one pass for the common URL: printable ASCII, at most
    /// `maxURLLength` bytes, starting "http://" or "https://" (any case) and a first authority
    /// byte other than "/". Returns whether it is https and where its authority ends, as those
    /// two would; nil for any other URL (which `urlSyntax` then accepts or explains).
    public static func commonURL(_ b: UnsafeBufferPointer<UInt8>) -> (https: Bool, authorityEnd: Int)? {
        let n = b.count
        guard n >= 8, n <= maxURLLength, let p = b.baseAddress else { return nil }
        // `| 0x20` lowercases a letter; no other byte becomes one of these letters.
        guard p[0] | 0x20 == UInt8(ascii: "h"), p[1] | 0x20 == UInt8(ascii: "t"), p[2] | 0x20 == UInt8(ascii: "t"),
              p[3] | 0x20 == UInt8(ascii: "p") else { return nil }
        let https = p[4] | 0x20 == UInt8(ascii: "s")
        let colon = https ? 5 : 4
        guard colon + 3 < n, p[colon] == UInt8(ascii: ":"), p[colon + 1] == UInt8(ascii: "/"), p[colon + 2] == UInt8(ascii: "/"),
              p[colon + 3] != UInt8(ascii: "/") else { return nil }
        // Printable ASCII, 8 bytes at a time: a word has a byte below 0x21 when
        // (w - 0x21...) & ~w & 0x80... is not 0, a byte above 0x7E when (w + 0x01...) | w has a
        // high bit set (both exact: no false positive or negative).
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        var i = 0
        while i + 8 <= n {
            let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            guard (w &- ones &* 0x21) & ~w & highs == 0, ((w &+ ones) | w) & highs == 0 else { return nil }
            i += 8
        }
        while i < n {
            guard p[i] > 0x20, p[i] < 0x7F else { return nil }
            i += 1
        }
        i = colon + 3
        while i < n, p[i] != UInt8(ascii: "/"), p[i] != UInt8(ascii: "?"), p[i] != UInt8(ascii: "#") { i += 1 }
        return (https, i)
    }

    /// Where the "scheme://authority" of a URL accepted by `urlSyntax` ends: the offset of the first
    /// "/", "?" or "#" after the "//", or the URL's length. libcurl reads the host and port from
    /// the bytes before it (lib/urlapi.c, HOSTNAME_END).
    public static func authorityEnd(_ b: UnsafeBufferPointer<UInt8>) -> Int {
        var i = 0
        while i < b.count, b[i] != UInt8(ascii: ":") { i += 1 }
        i += 3
        while i < b.count, b[i] != UInt8(ascii: "/"), b[i] != UInt8(ascii: "?"), b[i] != UInt8(ascii: "#") { i += 1 }
        return min(i, b.count)
    }

    /// Assembles an accepted URL from libcurl's parts of it: `https` from `urlSyntax` (which reads
    /// the scheme as libcurl does: the letters, digits, "+", "-" and "." before the first ":"),
    /// `host` as libcurl reports it (IPv6 literals in brackets), `zone` the IPv6 zone id or nil,
    /// `port` the port libcurl reports, nil when the URL has none (the scheme's default). The
    /// port must be 1...65535 (libcurl also takes 0).
    public static func url<Bytes: BidirectionalCollection>(given: String, https: Bool, host: Bytes, zone: Bytes?, port: Bytes?)
        throws(InputError) -> ValidatedURL where Bytes.Element == UInt8 {
        var number = https ? 443 : 80
        if let port {
            let text = String(decoding: port, as: UTF8.self)
            guard !port.isEmpty, port.count <= 5, port.allSatisfy(isDigit) else {
                throw .url("the port \"\(text)\" is not a number from 1 to 65535")
            }
            number = port.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(number) else { throw .url("the port \(number) is not from 1 to 65535") }
        }
        var name = host[...]
        if name.first == UInt8(ascii: "[") {
            guard name.count >= 2, name.last == UInt8(ascii: "]") else {
                throw .url("the IPv6 host \"\(String(decoding: host, as: UTF8.self))\" has no closing \"]\"")
            }
            name = name.dropFirst().dropLast()
        }
        guard !name.isEmpty else { throw .url("the URL's host is empty") }
        var hostString = String(decoding: name, as: UTF8.self)
        if name.contains(where: isUpper) { hostString = hostString.lowercased() }
        if let zone { hostString += "%25" + String(decoding: zone, as: UTF8.self) }
        return ValidatedURL(string: given, https: https, host: hostString, port: UInt16(truncatingIfNeeded: number))
    }

    /// The letter of "https" at `index` (0 past its end).
    private static func httpsLetter(_ index: Int) -> UInt8 {
        switch index {
        case 0: UInt8(ascii: "h")
        case 1, 2: UInt8(ascii: "t")
        case 3: UInt8(ascii: "p")
        case 4: UInt8(ascii: "s")
        default: 0
        }
    }

    private static func isUpper(_ c: UInt8) -> Bool { c >= 0x41 && c <= 0x5A }

    /// An HTTP method is a token (RFC 9110 tchar), 1 to 64 bytes.
    public static func method<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> String where Bytes.Element == UInt8 {
        try token(bytes, what: "the method", limit: maxMethodLength, kind: .invalidMethod)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `method` for the bytes of a C string: a method the library names (`HTTPMethods`) is its
    /// string literal, with no check or copy of the bytes; any other goes through `method`.
    public static func method(contiguous b: UnsafeBufferPointer<UInt8>) throws(InputError) -> String {
        func equal(_ literal: StaticString) -> Bool {
            guard b.count == literal.utf8CodeUnitCount, let p = b.baseAddress else { return false }
            let q = literal.utf8Start
            for i in 0..<b.count where p[i] != q[i] { return false }
            return true
        }
        switch b.count {
        case 3: if equal("GET") { return "GET" } else if equal("PUT") { return "PUT" }
        case 4: if equal("POST") { return "POST" } else if equal("HEAD") { return "HEAD" }
        case 5: if equal("PATCH") { return "PATCH" } else if equal("TRACE") { return "TRACE" }
        case 6: if equal("DELETE") { return "DELETE" }
        case 7: if equal("OPTIONS") { return "OPTIONS" }
        default: break
        }
        return try method(b)
    }

    /// A header name is a token of 1 to 256 bytes.
    public static func headerName<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> String where Bytes.Element == UInt8 {
        try token(bytes, what: "the header name", limit: maxHeaderNameLength, kind: .invalidHeader)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A header value is any bytes but NUL, CR and LF, at most 65536 of them. Leading and trailing
    /// spaces and tabs are removed (HTTP ignores them).
    public static func headerValue<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> [UInt8] where Bytes.Element == UInt8 {
        guard bytes.count <= maxHeaderValueLength else {
            throw InputError(.invalidHeader, "is \(bytes.count) bytes long, more than the \(maxHeaderValueLength) allowed")
        }
        for (i, c) in bytes.enumerated() where c == 0 || c == 0x0D || c == 0x0A {
            throw InputError(.invalidHeader, "has \(InputError.describe(c)) at byte \(i): a value cannot hold CR, LF or NUL")
        }
        var value = Array(bytes)
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        let leading = value.prefix { $0 == 0x20 || $0 == 0x09 }.count
        value.removeFirst(leading)
        return value
    }

    /// `headerName` for the bytes of a C string, checked in place against a bitmap of the token
    /// bytes: accepts and refuses exactly what `headerName` does, with its messages (made only for
    /// a refused name).
    public static func checkHeaderName(contiguous b: UnsafeBufferPointer<UInt8>) throws(InputError) {
        let n = b.count
        guard n > 0, n <= maxHeaderNameLength, let p = b.baseAddress else {
            _ = try headerName(b)
            return
        }
        // RFC 9110 tchar as a bitmap: bit c of `low` (c < 64) or of `high` (64 <= c < 128).
        let low: UInt64 = 0x03FF_6CFA_0000_0000, high: UInt64 = 0x57FF_FFFF_C7FF_FFFE
        for i in 0..<n {
            let c = p[i]
            guard c < 0x80, ((c < 0x40 ? low : high) &>> UInt64(c & 0x3F)) & 1 != 0 else {
                _ = try headerName(b)
                return
            }
        }
    }

    /// `headerValue` for the bytes of a C string: the check for NUL, CR and LF eight bytes at a
    /// time, then the trim, in place: the trimmed bytes of `b`. Accepts and refuses exactly what
    /// `headerValue` does, with its messages (made only for a refused value).
    public static func trimmedHeaderValue(contiguous b: UnsafeBufferPointer<UInt8>) throws(InputError) -> UnsafeBufferPointer<UInt8> {
        let n = b.count
        guard n > 0, n <= maxHeaderValueLength, let p = b.baseAddress else {
            _ = try headerValue(b)
            return UnsafeBufferPointer(start: b.baseAddress, count: 0)
        }
        // A word holds a 0 byte when (w - 0x01...) & ~w & 0x80... is not 0 (exact); CR and LF are
        // the 0 bytes of w ^ 0x0D... and w ^ 0x0A....
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ w: UInt64) -> Bool { (w &- ones) & ~w & highs != 0 }
        var i = 0
        while i + 8 <= n {
            let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            guard !hasZero(w), !hasZero(w ^ (ones &* 0x0D)), !hasZero(w ^ (ones &* 0x0A)) else {
                _ = try headerValue(b)
                return UnsafeBufferPointer(start: p, count: 0)
            }
            i += 8
        }
        while i < n {
            let c = p[i]
            guard c != 0, c != 0x0D, c != 0x0A else {
                _ = try headerValue(b)
                return UnsafeBufferPointer(start: p, count: 0)
            }
            i += 1
        }
        var start = 0, end = n
        while start < end, p[start] == 0x20 || p[start] == 0x09 { start += 1 }
        while end > start, p[end - 1] == 0x20 || p[end - 1] == 0x09 { end -= 1 }
        return UnsafeBufferPointer(start: p + start, count: end - start)
    }

    /// An HTTP token (RFC 9110 tchar) of 1 to `limit` bytes; the error names the first bad byte.
    private static func token<Bytes: Collection>(_ bytes: Bytes, what: String, limit: Int, kind: InputError.Kind) throws(InputError)
        where Bytes.Element == UInt8 {
        guard !bytes.isEmpty else { throw InputError(kind, "\(what) is empty") }
        guard bytes.count <= limit else { throw InputError(kind, "\(what) is \(bytes.count) bytes long, more than the \(limit) allowed") }
        for (i, c) in bytes.enumerated() where !isTokenChar(c) {
            throw InputError(kind, "byte \(i) of \(what) is \(InputError.describe(c)): \(what) must be an HTTP token "
                                   + "(letters, digits and !#$%&'*+-.^_`|~)")
        }
    }

    static func isAlpha(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }
    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func isTokenChar(_ c: UInt8) -> Bool {
        if isAlpha(c) || isDigit(c) { return true }
        switch c {
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
