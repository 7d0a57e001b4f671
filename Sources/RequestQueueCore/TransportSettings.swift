/// The transport settings of a request (content decoding, User-Agent, proxy, TLS, connection),
/// each nil while unset. A queue's defaults hold the same settings; at `rq_add` each setting a
/// request left unset takes the queue's value (`inheriting`). Plain values: equal settings give
/// equal libcurl options, so that a reused easy handle keeps them only when they are the same.
public struct TransportSettings: Equatable, Sendable {
    /// Send Accept-Encoding with every encoding libcurl supports and decode the body (default on).
    public var decodeContent: Bool? { didSet { pristine.value = false } }
    /// The User-Agent header; empty sends none. Unset: the library's own.
    public var userAgent: [UInt8]? { didSet { pristine.value = false } }
    /// A proxy URL (http, https, socks4, socks4a, socks5, socks5h); empty: no proxy at all, not
    /// even from the environment. Unset: libcurl's environment variables.
    public var proxy: [UInt8]? { didSet { pristine.value = false } }
    public var noProxy: [UInt8]? { didSet { pristine.value = false } }
    /// CA certificates for an https proxy's certificate.
    public var proxyCAFile: [UInt8]? { didSet { pristine.value = false } }
    public var clientCertificate: [UInt8]? { didSet { pristine.value = false } }
    public var clientKey: [UInt8]? { didSet { pristine.value = false } }
    public var keyPassword: [UInt8]? { didSet { pristine.value = false } }
    public var pinnedPublicKey: [UInt8]? { didSet { pristine.value = false } }
    public var caDirectory: [UInt8]? { didSet { pristine.value = false } }
    public var tlsMinVersion: TLSVersion? { didSet { pristine.value = false } }
    /// false turns certificate and host name verification off (unsafe).
    public var verifyTLS: Bool? { didSet { pristine.value = false } }
    public var unixSocket: [UInt8]? { didSet { pristine.value = false } }
    /// host:port:address entries, in the order given.
    public var resolve: [[UInt8]]? { didSet { pristine.value = false } }
    public var interface: [UInt8]? { didSet { pristine.value = false } }
    public var ipVersion: IPVersion? { didSet { pristine.value = false } }
    /// Seconds of idleness before TCP keep-alive probes; 0 turns keep-alive off.
    public var tcpKeepAlive: Int? { didSet { pristine.value = false } }
    /// Bytes per second; 0 is no limit.
    public var maxReceiveSpeed: Int64? { didSet { pristine.value = false } }
    public var maxSendSpeed: Int64? { didSet { pristine.value = false } }
    public var httpVersion: HTTPVersion? { didSet { pristine.value = false } }
    /// Use the queue's cookie jar.
    public var cookies: Bool? { didSet { pristine.value = false } }

    /// Whether no setting was ever assigned (every one is nil still): each assignment clears it.
    private var pristine = Pristine()

    /// A flag that equality ignores: settings are equal by their values alone.
    private struct Pristine: Equatable, Sendable {
        var value = true
        static func == (_: Pristine, _: Pristine) -> Bool { true }
    }

    public init() {}

    /// Whether every setting is unset (no setter ran, or each one it ran put nil back).
    public var isUnset: Bool { pristine.value || self == TransportSettings() }

    /// `==`, without looking at each setting when neither was ever assigned (most requests'):
    /// compared for every attempt.
    public func equals(_ other: TransportSettings) -> Bool {
        (pristine.value && other.pristine.value) || self == other
    }

    /// These settings, with every unset one taken from `defaults`.
    public func inheriting(_ d: TransportSettings) -> TransportSettings {
        if d.pristine.value { return self }
        var s = self
        s.decodeContent = decodeContent ?? d.decodeContent
        s.userAgent = userAgent ?? d.userAgent
        s.proxy = proxy ?? d.proxy
        s.noProxy = noProxy ?? d.noProxy
        s.proxyCAFile = proxyCAFile ?? d.proxyCAFile
        s.clientCertificate = clientCertificate ?? d.clientCertificate
        s.clientKey = clientKey ?? d.clientKey
        s.keyPassword = keyPassword ?? d.keyPassword
        s.pinnedPublicKey = pinnedPublicKey ?? d.pinnedPublicKey
        s.caDirectory = caDirectory ?? d.caDirectory
        s.tlsMinVersion = tlsMinVersion ?? d.tlsMinVersion
        s.verifyTLS = verifyTLS ?? d.verifyTLS
        s.unixSocket = unixSocket ?? d.unixSocket
        s.resolve = resolve ?? d.resolve
        s.interface = interface ?? d.interface
        s.ipVersion = ipVersion ?? d.ipVersion
        s.tcpKeepAlive = tcpKeepAlive ?? d.tcpKeepAlive
        s.maxReceiveSpeed = maxReceiveSpeed ?? d.maxReceiveSpeed
        s.maxSendSpeed = maxSendSpeed ?? d.maxSendSpeed
        s.httpVersion = httpVersion ?? d.httpVersion
        s.cookies = cookies ?? d.cookies
        return s
    }
}

extension ValidatedURL {
    /// The URL of a queue's defaults request, which is never sent.
    public static let placeholder = ValidatedURL(string: "http://defaults.invalid/", https: false,
                                                 host: "defaults.invalid", port: 80)
}

public enum TLSVersion: Int, Sendable {
    case tls1_0 = 10, tls1_1 = 11, tls1_2 = 12, tls1_3 = 13
}

public enum IPVersion: Int, Sendable {
    case any = 0, v4 = 4, v6 = 6
}

public enum HTTPVersion: Int, Sendable {
    /// HTTP/2 over TLS when the server offers it, HTTP/1.1 otherwise (libcurl's default).
    case automatic = 0
    case http1_1 = 11
    /// Cleartext HTTP/2 without upgrade (h2c, "prior knowledge"); HTTP/2 over TLS as well.
    case http2PriorKnowledge = 20
}

/// Checks of transport setting values, on raw bytes (never a trap).
public enum TransportValidation {
    public static let maxLength = 65536
    public static let proxySchemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

    /// Printable ASCII without spaces, 1...maxLength bytes.
    public static func isToken<Bytes: Collection>(_ b: Bytes) -> Bool where Bytes.Element == UInt8 {
        !b.isEmpty && b.count <= maxLength && b.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// A proxy URL: scheme://[user[:password]@]host[:port][/], scheme one of `proxySchemes`; or
    /// empty (no proxy).
    public static func proxy<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        let b = Array(bytes)
        if b.isEmpty { return true }
        guard isToken(b), let colon = b.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let scheme = String(decoding: b[..<colon], as: UTF8.self).lowercased()
        guard proxySchemes.contains(scheme), b.count > colon + 3, b[colon + 1] == 0x2F, b[colon + 2] == 0x2F else { return false }
        var authority = b[(colon + 3)...]
        if let slash = authority.firstIndex(of: 0x2F) {
            guard authority[slash...].count == 1 else { return false }
            authority = authority[..<slash]
        }
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        guard let first = authority.first, first != UInt8(ascii: ":") else { return false }
        return port(in: authority) != nil
    }

    /// The port after the host ("host", "host:8080", "[::1]:1080"); 0 when none; nil when invalid.
    static func port(in hostPort: ArraySlice<UInt8>) -> Int? {
        var rest = hostPort
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")), close > rest.startIndex + 1 else { return nil }
            rest = rest[(close + 1)...]
            if rest.isEmpty { return 0 }
            guard rest.first == UInt8(ascii: ":") else { return nil }
        } else {
            guard let colon = rest.firstIndex(of: UInt8(ascii: ":")) else { return 0 }
            guard colon > rest.startIndex else { return nil }
            rest = rest[colon...]
        }
        return number(rest.dropFirst(), in: 1...65535)
    }

    /// A decimal number within `range`, or nil.
    static func number(_ digits: ArraySlice<UInt8>, in range: ClosedRange<Int>) -> Int? {
        guard !digits.isEmpty, digits.count <= 6 else { return nil }
        var value = 0
        for d in digits {
            guard d >= 0x30, d <= 0x39 else { return nil }
            value = value * 10 + Int(d - 0x30)
        }
        return range.contains(value) ? value : nil
    }

    /// A resolve override as curl's --resolve takes it: host:port:address[,address...], the
    /// addresses IPv4 or bracketed IPv6 literals.
    public static func resolveEntry<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        let b = Array(bytes)
        guard isToken(b), let first = b.first, first != UInt8(ascii: "+"), first != UInt8(ascii: "-"),
              let c1 = b.firstIndex(of: UInt8(ascii: ":")), c1 > 0,
              let c2 = b[(c1 + 1)...].firstIndex(of: UInt8(ascii: ":")),
              number(b[(c1 + 1)..<c2], in: 1...65535) != nil else { return false }
        let addresses = b[(c2 + 1)...].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard !addresses.isEmpty else { return false }
        return addresses.allSatisfy { address in
            guard let f = address.first else { return false }
            if f == UInt8(ascii: "[") {
                return address.last == UInt8(ascii: "]") && address.count > 2
                    && address.dropFirst().dropLast().allSatisfy { isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
            }
            return address.allSatisfy { isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
        }
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    /// A list of host names for no-proxy: printable ASCII, spaces and commas allowed.
    public static func hostList<Bytes: Collection>(_ b: Bytes) -> Bool where Bytes.Element == UInt8 {
        b.count <= maxLength && b.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// A file path or other free text: 1...4096 bytes (NUL cannot occur in a C string).
    public static func path<Bytes: Collection>(_ b: Bytes) -> Bool where Bytes.Element == UInt8 {
        !b.isEmpty && b.count <= 4096
    }
}
