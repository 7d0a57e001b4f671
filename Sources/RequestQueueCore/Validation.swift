/// Checks of caller input: URLs, methods and headers. Everything here works on raw bytes, so that
/// any input (empty, huge, not UTF-8) gets an answer and never a trap.
public enum InputError: Error, Equatable, Sendable {
    case invalidURL
    case unsupportedScheme
    case invalidMethod
    case invalidHeader
}

/// A URL accepted by the library, with the parts the scheduler needs.
public struct ValidatedURL: Equatable, Sendable {
    public let string: String
    /// "http" or "https", lowercased.
    public let scheme: String
    /// The host as written (lowercased), without brackets for IPv6 literals.
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

    /// Accepts absolute http and https URLs: scheme "://" [userinfo "@"] host [":" port] [path...],
    /// printable ASCII only (no spaces or controls), a non-empty host, a port in 1...65535.
    public static func url<Bytes: Collection>(_ bytes: Bytes) throws(InputError) -> ValidatedURL where Bytes.Element == UInt8 {
        let b = Array(bytes)
        guard !b.isEmpty, b.count <= maxURLLength else { throw .invalidURL }
        for c in b where c <= 0x20 || c >= 0x7F { throw .invalidURL }
        guard let colon = b.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { throw .invalidURL }
        let schemeBytes = b[..<colon]
        guard let first = schemeBytes.first, isAlpha(first),
              schemeBytes.allSatisfy({ isAlpha($0) || isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
        else { throw .invalidURL }
        let scheme: String? = equalsIgnoringCase(schemeBytes, "http") ? "http"
            : equalsIgnoringCase(schemeBytes, "https") ? "https" : nil
        guard b.count >= colon + 3, b[colon + 1] == 0x2F, b[colon + 2] == 0x2F else {
            throw scheme != nil ? .invalidURL : .unsupportedScheme
        }
        guard let scheme else { throw .unsupportedScheme }
        // authority = from after "//" to the first "/", "?" or "#"
        let authorityStart = colon + 3
        var authorityEnd = authorityStart
        while authorityEnd < b.count, b[authorityEnd] != 0x2F, b[authorityEnd] != 0x3F, b[authorityEnd] != 0x23 {
            authorityEnd += 1
        }
        var hostPort = b[authorityStart..<authorityEnd]
        if let at = hostPort.lastIndex(of: UInt8(ascii: "@")) { hostPort = hostPort[(at + 1)...] }
        var host: ArraySlice<UInt8>
        var portBytes: ArraySlice<UInt8>? = nil
        if hostPort.first == UInt8(ascii: "[") {
            guard let close = hostPort.firstIndex(of: UInt8(ascii: "]")) else { throw .invalidURL }
            host = hostPort[(hostPort.startIndex + 1)..<close]
            let rest = hostPort[(close + 1)...]
            if !rest.isEmpty {
                guard rest.first == UInt8(ascii: ":") else { throw .invalidURL }
                portBytes = rest.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ isHexDigit($0) || $0 == 0x3A || $0 == 0x2E || $0 == 0x25 || isAlpha($0) || isDigit($0) })
            else { throw .invalidURL }
        } else {
            if let c = hostPort.lastIndex(of: UInt8(ascii: ":")) {
                host = hostPort[..<c]
                portBytes = hostPort[(c + 1)...]
            } else {
                host = hostPort
            }
            guard !host.isEmpty, host.allSatisfy({ isAlpha($0) || isDigit($0) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F || $0 == 0x25 || $0 == 0x7E })
            else { throw .invalidURL }
        }
        var port = scheme == "https" ? 443 : 80
        if let portBytes, !portBytes.isEmpty {
            guard portBytes.count <= 5, portBytes.allSatisfy(isDigit) else { throw .invalidURL }
            port = portBytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(port) else { throw .invalidURL }
        }
        let hostString = String(decoding: host, as: UTF8.self)
        return ValidatedURL(string: String(decoding: b, as: UTF8.self), scheme: scheme,
                            host: host.contains(where: isUpper) ? hostString.lowercased() : hostString, port: port)
    }

    private static func isUpper(_ c: UInt8) -> Bool { c >= 0x41 && c <= 0x5A }

    /// Whether ASCII `bytes` equal the lowercase `word`, ignoring case.
    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
        bytes.count == word.utf8CodeUnitCount
            && zip(bytes, UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)).allSatisfy { $0 | 0x20 == $1 }
    }

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
    static func isHexDigit(_ c: UInt8) -> Bool { isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66) }
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
