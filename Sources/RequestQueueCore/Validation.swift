/// Checks of caller input: URLs, methods and headers. Everything here works on raw bytes, so that
/// any input (empty, huge, not UTF-8) gets an answer and never a trap.
public enum InputError: Error, Equatable, Sendable {
    case invalidURL
    case unsupportedScheme
    case invalidMethod
    case invalidHeader
}

/// A URL accepted by the library, with the parts the scheduler needs. The parts come from
/// libcurl's own parse of the URL (RequestQueue's `URLParser`), so that what the library checks
/// and counts is what libcurl sends.
public struct ValidatedURL: Equatable, Sendable {
    /// The URL as given (duplicate equality compares it byte for byte; libcurl is given it too).
    public let string: String
    /// "http" or "https", lowercased.
    public let scheme: String
    /// The host libcurl connects to (lowercased), without brackets for IPv6 literals, with a zone
    /// as "%25zone".
    public let host: String
    public let port: Int
    /// scheme://host:port, the unit of per-host limits.
    public var origin: String { "\(scheme)://\(host):\(port)" }
}

public enum Validation {
    public static let maxURLLength = 65536
    public static let maxMethodLength = 64
    public static let maxHeaderNameLength = 256
    public static let maxHeaderValueLength = 65536
    public static let maxHeaderCount = 1000

    /// The checks of a URL's bytes made before libcurl parses it: 1 to 65536 bytes of printable
    /// ASCII (no spaces or controls), an absolute URL "scheme://" whose scheme is http or https
    /// (any case), and an authority that does not start with "/" (libcurl would read
    /// "http:///x" as host "x"). Returns whether the scheme is https.
    public static func urlSyntax<Bytes: Collection>(_ b: Bytes) throws(InputError) -> Bool where Bytes.Element == UInt8 {
        guard !b.isEmpty, b.count <= maxURLLength else { throw .invalidURL }
        for c in b where c <= 0x20 || c >= 0x7F { throw .invalidURL }
        var schemeLength = 0
        var isHTTP = true, isHTTPS = true
        var index = b.startIndex
        while index != b.endIndex, b[index] != UInt8(ascii: ":") {
            let c = b[index]
            guard isAlpha(c) || (schemeLength > 0 && (isDigit(c) || c == 0x2B || c == 0x2D || c == 0x2E)) else { throw .invalidURL }
            let lower = c | 0x20
            isHTTP = isHTTP && schemeLength < 4 && lower == httpsLetters[schemeLength]
            isHTTPS = isHTTPS && schemeLength < 5 && lower == httpsLetters[schemeLength]
            schemeLength += 1
            index = b.index(after: index)
        }
        guard schemeLength > 0, index != b.endIndex else { throw .invalidURL }
        let https = isHTTPS && schemeLength == 5
        let known = https || (isHTTP && schemeLength == 4)
        // After the ":": "//", then a first authority byte that is not "/".
        var rest = b[b.index(after: index)...].makeIterator()
        guard rest.next() == UInt8(ascii: "/"), rest.next() == UInt8(ascii: "/") else {
            throw known ? .invalidURL : .unsupportedScheme
        }
        guard known else { throw .unsupportedScheme }
        guard let first = rest.next(), first != UInt8(ascii: "/") else { throw .invalidURL }
        return https
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
            guard !port.isEmpty, port.count <= 5, port.allSatisfy(isDigit) else { throw .invalidURL }
            number = port.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(number) else { throw .invalidURL }
        }
        var name = host[...]
        if name.first == UInt8(ascii: "[") {
            guard name.count >= 2, name.last == UInt8(ascii: "]") else { throw .invalidURL }
            name = name.dropFirst().dropLast()
        }
        guard !name.isEmpty else { throw .invalidURL }
        var hostString = String(decoding: name, as: UTF8.self)
        if name.contains(where: isUpper) { hostString = hostString.lowercased() }
        if let zone { hostString += "%25" + String(decoding: zone, as: UTF8.self) }
        return ValidatedURL(string: given, scheme: https ? "https" : "http", host: hostString, port: number)
    }

    private static let httpsLetters: [UInt8] = Array("https".utf8)

    private static func isUpper(_ c: UInt8) -> Bool { c >= 0x41 && c <= 0x5A }

    /// An HTTP method is a token (RFC 9110 tchar), 1 to 64 bytes.
    public static func method<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> String where Bytes.Element == UInt8 {
        guard !bytes.isEmpty, bytes.count <= maxMethodLength, bytes.allSatisfy(isTokenChar) else { throw .invalidMethod }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A header name is a token of 1 to 256 bytes.
    public static func headerName<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> String where Bytes.Element == UInt8 {
        guard !bytes.isEmpty, bytes.count <= maxHeaderNameLength, bytes.allSatisfy(isTokenChar) else { throw .invalidHeader }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A header value is any bytes but NUL, CR and LF, at most 65536 of them. Leading and trailing
    /// spaces and tabs are removed (HTTP ignores them).
    public static func headerValue<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> [UInt8] where Bytes.Element == UInt8 {
        guard bytes.count <= maxHeaderValueLength, !bytes.contains(where: { $0 == 0 || $0 == 0x0D || $0 == 0x0A }) else {
            throw .invalidHeader
        }
        var value = Array(bytes)
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        let leading = value.prefix { $0 == 0x20 || $0 == 0x09 }.count
        value.removeFirst(leading)
        return value
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
