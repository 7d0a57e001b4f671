import Testing
import RequestQueueCore

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// The error of Validation.url, or nil when the URL is accepted.
private func urlError(_ b: [UInt8]) -> InputError? {
    do {
        _ = try Validation.url(b)
        return nil
    } catch {
        return error
    }
}
private func urlError(_ s: String) -> InputError? { urlError(bytes(s)) }

private func methodError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.method(b); return nil } catch { return error }
}
private func headerNameError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.headerName(b); return nil } catch { return error }
}
private func headerValueError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.headerValue(b); return nil } catch { return error }
}

struct AcceptedURL: Sendable, CustomTestStringConvertible {
    let input: String
    let scheme: String
    let host: String
    let port: Int
    var testDescription: String { input.count > 80 ? "\(input.prefix(60))... (\(input.utf8.count) bytes)" : input }
}

struct RejectedURL: Sendable, CustomTestStringConvertible {
    let input: [UInt8]
    let error: InputError
    init(_ input: String, _ error: InputError) { self.input = Array(input.utf8); self.error = error }
    init(bytes: [UInt8], _ error: InputError) { self.input = bytes; self.error = error }
    var testDescription: String {
        let text = String(decoding: input, as: UTF8.self)
        let shown = text.count > 80 ? "\(text.prefix(40))... (\(input.count) bytes)" : text.debugDescription
        return "\(shown) -> \(error)"
    }
}

private let longPath = String(repeating: "a", count: Validation.maxURLLength - "http://h/".utf8.count)

@Suite struct ValidationTests {
    @Test func limitsMatchTheCHeader() {
        #expect(Validation.maxURLLength == 65536)
        #expect(Validation.maxMethodLength == 64)
        #expect(Validation.maxHeaderNameLength == 256)
        #expect(Validation.maxHeaderValueLength == 65536)
        #expect(Validation.maxHeaderCount == 1000)
    }

    // MARK: URLs

    @Test(arguments: [
        AcceptedURL(input: "http://example.com/path", scheme: "http", host: "example.com", port: 80),
        AcceptedURL(input: "https://example.com/", scheme: "https", host: "example.com", port: 443),
        AcceptedURL(input: "http://host", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "https://host", scheme: "https", host: "host", port: 443),
        AcceptedURL(input: "HTTP://Example.COM:8080/Path/X", scheme: "http", host: "example.com", port: 8080),
        AcceptedURL(input: "HtTpS://H", scheme: "https", host: "h", port: 443),
        AcceptedURL(input: "http://127.0.0.1:8080/x", scheme: "http", host: "127.0.0.1", port: 8080),
        AcceptedURL(input: "https://h:1", scheme: "https", host: "h", port: 1),
        AcceptedURL(input: "https://h:65535/", scheme: "https", host: "h", port: 65535),
        AcceptedURL(input: "http://h:00080/", scheme: "http", host: "h", port: 80),
        AcceptedURL(input: "https://h:80", scheme: "https", host: "h", port: 80),
        AcceptedURL(input: "http://h:443", scheme: "http", host: "h", port: 443),
        // An empty port means the default one (RFC 3986 allows "host:").
        AcceptedURL(input: "http://h:/p", scheme: "http", host: "h", port: 80),
        AcceptedURL(input: "http://[::1]:/x", scheme: "http", host: "::1", port: 80),
        AcceptedURL(input: "http://[::1]:8080/x", scheme: "http", host: "::1", port: 8080),
        AcceptedURL(input: "https://[::1]", scheme: "https", host: "::1", port: 443),
        AcceptedURL(input: "http://[2001:DB8::A]/", scheme: "http", host: "2001:db8::a", port: 80),
        AcceptedURL(input: "http://[fe80::1%25eth0]:81/", scheme: "http", host: "fe80::1%25eth0", port: 81),
        AcceptedURL(input: "http://[::ffff:127.0.0.1]:9/", scheme: "http", host: "::ffff:127.0.0.1", port: 9),
        AcceptedURL(input: "http://user:secret@host:81/p", scheme: "http", host: "host", port: 81),
        AcceptedURL(input: "http://user@host", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://us%40er:p:a@ss@host/", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://user:pw@[::1]:7/", scheme: "http", host: "::1", port: 7),
        AcceptedURL(input: "http://host?q=1&r=a:b@c", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://host:8080?q=1", scheme: "http", host: "host", port: 8080),
        AcceptedURL(input: "http://host#frag:99", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://host/p@x:99?a#b", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://h/a%20b?x=[1]&y={}|\\^`\"<>", scheme: "http", host: "h", port: 80),
        AcceptedURL(input: "http://my_host-1.example~x/", scheme: "http", host: "my_host-1.example~x", port: 80),
        AcceptedURL(input: "http://xn--bcher-kva.example/", scheme: "http", host: "xn--bcher-kva.example", port: 80),
        AcceptedURL(input: "http://h/" + longPath, scheme: "http", host: "h", port: 80),
    ])
    func acceptedURL(_ c: AcceptedURL) throws {
        let u = try Validation.url(bytes(c.input))
        #expect(u.string == c.input)           // kept byte for byte, as given
        #expect(u.scheme == c.scheme)
        #expect(u.host == c.host)
        #expect(u.port == c.port)
        #expect(u.origin == "\(c.scheme)://\(c.host):\(c.port)")
    }

    @Test func exactlyTheMaximumLengthIsAccepted() throws {
        let url = "http://h/" + longPath
        #expect(url.utf8.count == 65536)
        #expect(try Validation.url(bytes(url)).string.utf8.count == 65536)
        #expect(urlError(url + "a") == .invalidURL)
    }

    @Test func origin() throws {
        #expect(try Validation.url(bytes("HTTPS://API.Example.org/v1?x")).origin == "https://api.example.org:443")
        #expect(try Validation.url(bytes("http://a.b:8080")).origin == "http://a.b:8080")
        #expect(try Validation.url(bytes("http://[::1]:8080/")).origin == "http://::1:8080")
        // Userinfo, path, query and fragment are not part of the origin.
        let a = try Validation.url(bytes("http://u:p@h:81/x?y#z"))
        let b = try Validation.url(bytes("http://H:81"))
        #expect(a.origin == b.origin)
        #expect(a != b)
        // The default port is explicit, so both spellings share the origin.
        #expect(try Validation.url(bytes("http://h")).origin == Validation.url(bytes("http://h:80/")).origin)
        #expect(try Validation.url(bytes("http://h")).origin != Validation.url(bytes("https://h")).origin)
    }

    @Test func acceptsAnyCollectionOfBytes() throws {
        let slice = bytes("xxhttp://h:81/yy")[2...]
        #expect(try Validation.url(slice).port == 81)
        #expect(try Validation.url("https://h".utf8).scheme == "https")
        #expect(try Validation.url(ContiguousArray(bytes("http://q"))).host == "q")
    }

    @Test(arguments: [
        // Empty, blanks, controls, non-ASCII.
        RejectedURL("", .invalidURL),
        RejectedURL(" ", .invalidURL),
        RejectedURL(" http://h/", .invalidURL),
        RejectedURL("http://h/ ", .invalidURL),
        RejectedURL("http://exa mple.com/", .invalidURL),
        RejectedURL("http://h/a b", .invalidURL),
        RejectedURL("http://h/\t", .invalidURL),
        RejectedURL("http://h/\r\nX: y", .invalidURL),
        RejectedURL("http://h/\n", .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0x00] + bytes("x"), .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0x01], .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0x1F], .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0x7F], .invalidURL),
        RejectedURL("http://héllo.com/", .invalidURL),
        RejectedURL("http://h/caf\u{E9}", .invalidURL),
        RejectedURL("http://h/\u{1F600}", .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0x80], .invalidURL),
        RejectedURL(bytes: bytes("http://h/") + [0xFF, 0xFE], .invalidURL),
        RejectedURL(bytes: [0xC3, 0xA9] + bytes("http://h/"), .invalidURL),
        // ftp with a non-ASCII byte: the characters are checked before the scheme.
        RejectedURL(bytes: bytes("ftp://h/") + [0x80], .invalidURL),
        // Not absolute, or a malformed scheme.
        RejectedURL("example.com/path", .invalidURL),
        RejectedURL("/path", .invalidURL),
        RejectedURL("http", .invalidURL),
        RejectedURL("://host/", .invalidURL),
        RejectedURL(":", .invalidURL),
        RejectedURL("1http://h/", .invalidURL),
        RejectedURL("h_t://h/", .invalidURL),
        RejectedURL("-http://h/", .invalidURL),
        // Missing "//".
        RejectedURL("http:", .invalidURL),
        RejectedURL("http:h", .invalidURL),
        RejectedURL("http:example.com/x", .invalidURL),
        RejectedURL("http:/example.com/x", .invalidURL),
        RejectedURL("https:\\\\h", .invalidURL),
        RejectedURL("HTTPS:/h", .invalidURL),
        // Empty host.
        RejectedURL("http://", .invalidURL),
        RejectedURL("https://", .invalidURL),
        RejectedURL("http:///path", .invalidURL),
        RejectedURL("http://:8080/", .invalidURL),
        RejectedURL("http://user@/", .invalidURL),
        RejectedURL("http://user:pw@:80", .invalidURL),
        RejectedURL("http://?q=1", .invalidURL),
        RejectedURL("http://#f", .invalidURL),
        RejectedURL("http://[]/", .invalidURL),
        RejectedURL("http://[]:80/", .invalidURL),
        // Bad host characters.
        RejectedURL("http://ho!st/", .invalidURL),
        RejectedURL("http://a,b/", .invalidURL),
        RejectedURL("http://h\\evil.com/", .invalidURL),
        RejectedURL("http://::1/", .invalidURL),
        RejectedURL("http://h:80:80/", .invalidURL),
        // Malformed IPv6 literals.
        RejectedURL("http://[::1/", .invalidURL),
        RejectedURL("http://[::1]x/", .invalidURL),
        RejectedURL("http://[::1]]/", .invalidURL),
        RejectedURL("http://[::1]:0/", .invalidURL),
        RejectedURL("http://[::1]:65536/", .invalidURL),
        RejectedURL("http://[:!:1]/", .invalidURL),
        // Bad ports.
        RejectedURL("http://h:0/", .invalidURL),
        RejectedURL("http://h:00000", .invalidURL),
        RejectedURL("http://h:65536/", .invalidURL),
        RejectedURL("http://h:99999", .invalidURL),
        RejectedURL("http://h:123456/", .invalidURL),
        RejectedURL("http://h:000080", .invalidURL),
        RejectedURL("http://h:8o/", .invalidURL),
        RejectedURL("http://h:abc/", .invalidURL),
        RejectedURL("http://h:-1/", .invalidURL),
        RejectedURL("http://h:+80/", .invalidURL),
        RejectedURL("http://h:0x50/", .invalidURL),
        RejectedURL("http://h:99999999999999999999999/", .invalidURL),
        // Too long: 65537 bytes.
        RejectedURL("http://h/" + longPath + "a", .invalidURL),
        // Other schemes.
        RejectedURL("ftp://h/x", .unsupportedScheme),
        RejectedURL("FTP://h/x", .unsupportedScheme),
        RejectedURL("file:///etc/passwd", .unsupportedScheme),
        RejectedURL("ftp://", .unsupportedScheme),
        RejectedURL("ws://h/", .unsupportedScheme),
        RejectedURL("httpx://h/", .unsupportedScheme),
        RejectedURL("http+unix://h/", .unsupportedScheme),
        RejectedURL("htt://h/", .unsupportedScheme),
        RejectedURL("mailto:x", .unsupportedScheme),
        RejectedURL("mailto:someone@example.com", .unsupportedScheme),
        RejectedURL("javascript:alert(1)", .unsupportedScheme),
        RejectedURL("data:text/plain,hi", .unsupportedScheme),
        RejectedURL("ftp:", .unsupportedScheme),
        RejectedURL("ftp:x", .unsupportedScheme),
        // "host:port" without a scheme parses as scheme "localhost" (RFC 3986 agrees).
        RejectedURL("localhost:8080", .unsupportedScheme),
        RejectedURL("example.com:80/x", .unsupportedScheme),
    ])
    func rejectedURL(_ c: RejectedURL) {
        #expect(urlError(c.input) == c.error)
    }

    @Test func everyControlAndNonASCIIByteIsRejectedAnywhere() {
        let valid = bytes("http://h/p?q#f")
        for byte in Array(UInt8(0)...0x20) + Array(UInt8(0x7F)...0xFF) {
            for position in [0, 4, 7, 8, 9, valid.count] {
                var b = valid
                b.insert(byte, at: position)
                if urlError(b) != .invalidURL {
                    Issue.record("byte \(byte) at \(position): \(String(describing: urlError(b)))")
                }
            }
        }
        // Every printable ASCII byte other than space is accepted in the path.
        for byte in UInt8(0x21)...0x7E {
            #expect(urlError(valid + [byte]) == nil, "byte \(byte)")
        }
    }

    @Test func everyPortFromOneTo65535IsAccepted() throws {
        for port in [1, 2, 9, 10, 99, 100, 999, 1000, 9999, 10000, 65534, 65535] {
            #expect(try Validation.url(bytes("http://h:\(port)/")).port == port)
        }
        var checked = 0
        for port in stride(from: 1, through: 65535, by: 97) {
            if try Validation.url(bytes("https://[::1]:\(port)")).port != port { Issue.record("port \(port)") }
            checked += 1
        }
        #expect(checked == 676)
    }

    @Test func hugeInputIsRejectedWithoutTrapping() {
        #expect(urlError([UInt8](repeating: 0x61, count: 1 << 20)) == .invalidURL)
        #expect(urlError(bytes("http://h/") + [UInt8](repeating: 0x61, count: 1 << 20)) == .invalidURL)
        #expect(urlError([UInt8](repeating: 0x3A, count: 70_000)) == .invalidURL)
        #expect(urlError([UInt8](repeating: 0xFF, count: 70_000)) == .invalidURL)
    }

    // MARK: Methods

    @Test(arguments: ["GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT",
                      "get", "M-SEARCH", "X_CUSTOM", "PROPFIND", "!#$%&'*+-.^_`|~09AZaz",
                      String(repeating: "A", count: 64)])
    func acceptedMethod(_ method: String) throws {
        #expect(try Validation.method(bytes(method)) == method)   // case kept as given
    }

    @Test func rejectedMethods() {
        var cases: [[UInt8]] = [
            [], bytes("GE T"), bytes(" GET"), bytes("GET "), bytes("GET\r\n"), bytes("GET\n"),
            bytes("GET\t"), bytes("GET\0"), bytes("G\u{C9}T"), [0x47, 0x80], [0xFF], [0x7F],
            bytes(String(repeating: "A", count: 65)), bytes(String(repeating: "A", count: 10_000)),
        ]
        // Every separator of RFC 9110 (not a tchar).
        for c in "\"(),/:;<=>?@[\\]{}" { cases.append(bytes("G\(c)T")) }
        for c in cases {
            #expect(methodError(c) == .invalidMethod, "\(c)")
        }
    }

    @Test func methodTokenCharactersExactly() {
        let tchar = Set(bytes("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
        for byte in UInt8(0)...0xFF {
            let accepted = methodError([byte]) == nil
            #expect(accepted == tchar.contains(byte), "byte \(byte)")
            #expect((headerNameError([byte]) == nil) == tchar.contains(byte), "byte \(byte)")
        }
    }

    // MARK: Header names

    @Test func headerNames() throws {
        #expect(try Validation.headerName(bytes("Content-Type")) == "Content-Type")
        #expect(try Validation.headerName(bytes("x-custom_header.1")) == "x-custom_header.1")
        #expect(try Validation.headerName(bytes("!#$%&'*+-.^_`|~")) == "!#$%&'*+-.^_`|~")
        let longest = String(repeating: "n", count: 256)
        #expect(try Validation.headerName(bytes(longest)) == longest)
        let rejected: [[UInt8]] = [
            [], bytes(longest + "n"), bytes("X Y"), bytes("X:Y"), bytes("X-Foo:"), bytes(" X"), bytes("X "),
            bytes("X\r"), bytes("X\n"), bytes("X\0"), bytes("X\t"), bytes("N\u{E4}me"), [0x80], [0x7F],
            bytes("X(Y)"), bytes("X\"Y"),
        ]
        for name in rejected {
            #expect(headerNameError(name) == .invalidHeader, "\(name)")
        }
    }

    // MARK: Header values

    @Test func headerValuesAreTrimmed() throws {
        #expect(try Validation.headerValue(bytes("")) == [])
        #expect(try Validation.headerValue(bytes("abc")) == bytes("abc"))
        #expect(try Validation.headerValue(bytes("  abc  ")) == bytes("abc"))
        #expect(try Validation.headerValue(bytes("\t a b \t")) == bytes("a b"))
        #expect(try Validation.headerValue(bytes("a \t b")) == bytes("a \t b"))   // inner kept
        #expect(try Validation.headerValue(bytes(" \t \t ")) == [])
        #expect(try Validation.headerValue(bytes("\t")) == [])
        #expect(try Validation.headerValue(bytes(" x")) == bytes("x"))
        #expect(try Validation.headerValue(bytes("x ")) == bytes("x"))
        // Only space and tab are trimmed: other bytes at the ends stay.
        #expect(try Validation.headerValue([0x0B, 0x41, 0x0C]) == [0x0B, 0x41, 0x0C])
        #expect(try Validation.headerValue([0xA0, 0x41, 0xA0]) == [0xA0, 0x41, 0xA0])
    }

    @Test func headerValuesKeepAnyByteButNulCRLF() throws {
        // obs-text, not UTF-8, controls other than NUL/CR/LF, DEL: kept byte for byte.
        let odd: [UInt8] = [0x80, 0xFF, 0xC3, 0x28, 0x01, 0x1F, 0x7F, 0x09, 0x41]
        #expect(try Validation.headerValue(odd) == odd)
        let excluded: Set<UInt8> = [0x0A, 0x0D, 0x20, 0x09]
        let every: [UInt8] = (UInt8(1)...UInt8(0xFF)).filter { (b: UInt8) -> Bool in !excluded.contains(b) }
        #expect(try Validation.headerValue(every) == every)
        #expect(try Validation.headerValue(bytes("caf\u{E9} \u{1F600}")) == bytes("caf\u{E9} \u{1F600}"))
    }

    @Test func headerValuesWithNulCROrLFAreRejected() {
        for bad: UInt8 in [0x00, 0x0D, 0x0A] {
            for value in [[bad], [bad, 0x41], [0x41, bad], [0x41, bad, 0x42], [0x20, bad, 0x20]] {
                #expect(headerValueError(value) == .invalidHeader, "\(value)")
            }
        }
        #expect(headerValueError(bytes("a\r\nInjected: yes")) == .invalidHeader)
    }

    @Test func headerValueLength() throws {
        let longest = [UInt8](repeating: 0x76, count: 65536)
        #expect(try Validation.headerValue(longest) == longest)
        #expect(headerValueError(longest + [0x76]) == .invalidHeader)
        // The limit applies to the value as given, before trimming.
        #expect(headerValueError(longest + [0x20]) == .invalidHeader)
        #expect(headerValueError([UInt8](repeating: 0x20, count: 65537)) == .invalidHeader)
        #expect(try Validation.headerValue([UInt8](repeating: 0x20, count: 65536)) == [])
    }
}
