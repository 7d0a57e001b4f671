import CRequestQueueAPI
import Foundation
@testable import RequestQueue
import RequestQueueCore
import Testing

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// The URL parser of `rq_request_new` (libcurl's URL API behind the library's syntax rules).
private func parse(_ b: [UInt8]) throws(URLParser.Failure) -> ValidatedURL {
    let terminated = b + [0]
    return try terminated.withUnsafeBufferPointer { (all: UnsafeBufferPointer<UInt8>) throws(URLParser.Failure) -> ValidatedURL in
        let base = UnsafeRawPointer(all.baseAddress!)
        return try URLParser.parse(base.assumingMemoryBound(to: CChar.self), UnsafeBufferPointer(rebasing: all.dropLast()))
    }
}
private func parse(_ s: String) throws(URLParser.Failure) -> ValidatedURL { try parse(bytes(s)) }

/// The error of the URL parser, or nil when the URL is accepted.
private func urlError(_ b: [UInt8]) -> InputError? {
    do {
        _ = try parse(b)
        return nil
    } catch {
        if case let .input(error) = error { return error }
        Issue.record("out of memory")
        return nil
    }
}
private func urlError(_ s: String) -> InputError? { urlError(bytes(s)) }

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

@Suite struct URLTests {
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
        // Where a parser of its own would disagree with libcurl: libcurl's reading decides.
        AcceptedURL(input: "http://h:000080", scheme: "http", host: "h", port: 80),
        AcceptedURL(input: "http://%68ost/", scheme: "http", host: "host", port: 80),
        AcceptedURL(input: "http://127.1/", scheme: "http", host: "127.0.0.1", port: 80),
        AcceptedURL(input: "http://0x7f.1:81/", scheme: "http", host: "127.0.0.1", port: 81),
        AcceptedURL(input: "http://host:80\\@evil/", scheme: "http", host: "evil", port: 80),
        AcceptedURL(input: "http://a:b:c@h/", scheme: "http", host: "h", port: 80),
        AcceptedURL(input: "http://[fe80::1%eth0]/", scheme: "http", host: "fe80::1%25eth0", port: 80),
        AcceptedURL(input: "http://h./", scheme: "http", host: "h.", port: 80),
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
        let u = try parse(c.input)
        #expect(u.string == c.input)           // kept byte for byte, as given
        #expect(u.scheme == c.scheme)
        #expect(u.host == c.host)
        #expect(u.port == c.port)
        #expect(u.origin == "\(c.scheme)://\(c.host):\(c.port)")
        // Again with another fragment: the thread's last authority, not parsed by libcurl again.
        let again = c.input.utf8.count < 60000 ? c.input + "#again" : c.input
        #expect(try parse(again) == ValidatedURL.with(u)(string: again))
    }

    /// A URL with the scheme and authority of the thread's last accepted URL is not parsed by
    /// libcurl again (`LastURL`), and gets the parts a parse gives it; any other authority is
    /// parsed, and what follows the authority is still checked.
    @Test func theThreadsLastAuthorityIsNotParsedAgain() throws {
        let authority = "hTTp://User:pw@Cache-Test.example:8081"
        _ = try parse(authority + "/a")
        let parses = try #require(LastURL.current).parses
        for tail in ["", "/", "/b/c?d#e", "?x=1", "#f", "/..", "/" + String(longPath.prefix(100)), "/@evil:1/?#"] {
            let u = try parse(authority + tail)
            #expect(u.string == authority + tail)
            #expect(u.scheme == "http")
            #expect(u.host == "cache-test.example")
            #expect(u.port == 8081)
        }
        #expect(LastURL.current?.parses == parses)
        // Refused tails are refused still.
        #expect(urlError(authority + "/a b") == .invalidURL)
        #expect(urlError(bytes(authority + "/") + [0x7F]) == .invalidURL)
        #expect(urlError(bytes(authority + "?") + [0xC3, 0xA9]) == .invalidURL)
        #expect(urlError(authority + "/" + longPath) == .invalidURL)
        // An authority that starts with the same bytes is another one.
        #expect(urlError(authority + "0/") == .invalidURL) // port 80810
        #expect(try parse(authority.dropLast() + "/").port == 808)
        #expect(try parse(authority.dropLast(5) + "/").port == 80)
        #expect(try parse("https" + authority.dropFirst(4)).scheme == "https")
        #expect(LastURL.current?.parses == parses + 3)
    }

    @Test func exactlyTheMaximumLengthIsAccepted() throws {
        let url = "http://h/" + longPath
        #expect(url.utf8.count == 65536)
        #expect(try parse(url).string.utf8.count == 65536)
        #expect(urlError(url + "a") == .invalidURL)
    }

    @Test func origin() throws {
        #expect(try parse("HTTPS://API.Example.org/v1?x").origin == "https://api.example.org:443")
        #expect(try parse("http://a.b:8080").origin == "http://a.b:8080")
        #expect(try parse("http://[::1]:8080/").origin == "http://::1:8080")
        // Userinfo, path, query and fragment are not part of the origin.
        let a = try parse("http://u:p@h:81/x?y#z")
        let b = try parse("http://H:81")
        #expect(a.origin == b.origin)
        #expect(a != b)
        // The default port is explicit, so both spellings share the origin.
        #expect(try parse("http://h").origin == parse("http://h:80/").origin)
        #expect(try parse("http://h").origin != parse("https://h").origin)
    }

    @Test func acceptsAnyCollectionOfBytes() throws {
        let slice = bytes("xxhttp://h:81/yy")[2...]
        #expect(try parse(Array(slice)).port == 81)
        #expect(try parse("https://h").scheme == "https")
        #expect(try parse("http://q").host == "q")
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
        // libcurl ends the userinfo at the first "@": the rest is a bad host.
        RejectedURL("http://a@b@c/", .invalidURL),
        RejectedURL("http://us%40er:p:a@ss@host/", .invalidURL),
        RejectedURL("http://ho%00st/", .invalidURL),
        RejectedURL("http://ho%2fst/", .invalidURL),
        RejectedURL("http://h;x=y/", .invalidURL),
        // libcurl takes these; the header does not.
        RejectedURL("http:///x", .invalidURL),
        RejectedURL("http:/x", .invalidURL),
        RejectedURL("http://h:0/", .invalidURL),
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
            #expect(try parse("http://h:\(port)/").port == port)
        }
        var checked = 0
        for port in stride(from: 1, through: 65535, by: 97) {
            if try parse("https://[::1]:\(port)").port != port { Issue.record("port \(port)") }
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

}

/// The differential class: URLs that parsers read differently (userinfo with "@" and ":",
/// backslashes, percent-encoded and shortened IPv4 hosts, IPv6 literals, "#" and "?" before an
/// "@", leading zeros in ports, ...), sent for real. What the library accepts must reach the host
/// and port of the origin it computed (the Host header the server sees says so), and what libcurl
/// refuses (the curl tool on the same libcurl, exit code 3) the library refuses.
@Suite struct URLDifferentialTests {
    let fixture = Fixture.shared

    /// The curl tool's exit code for `url` (3: URL malformed), with the request it sends.
    func curlTool(_ url: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["curl", "-s", "-g", "--noproxy", "*", "--max-time", "10", "-o", "/dev/null", url]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try? p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    @Test func whatTheLibraryAcceptsIsWhatLibcurlSends() throws {
        let port = fixture.port
        let group = uniqueGroup()
        // {Q} is where the path and query that name the request go.
        let templates = [
            "http://127.0.0.1:{P}{Q}",
            "HTTP://LOCALHOST:{P}{Q}",
            "http://u:p@127.0.0.1:{P}{Q}",
            "http://u%40x:p%3Aq@127.0.0.1:{P}{Q}",
            "http://a:b:c@127.0.0.1:{P}{Q}",
            "http://127.1:{P}{Q}",
            "http://0x7f.0.0.1:{P}{Q}",
            "http://%31%32%37.0.0.1:{P}{Q}",
            "http://127.0.0.1:0{P}{Q}",
            "http://[::ffff:127.0.0.1]:{P}{Q}",
            "http://127.0.0.1:1\\@127.0.0.1:{P}{Q}",
            "http://127.0.0.1:{P}\\@127.0.0.1:1{Q}",
            "http://127.0.0.1:1{Q}#@127.0.0.1:{P}/",
            "http://127.0.0.1:1{Q}&x=?@127.0.0.1:{P}/",
            "http://127.0.0.1:{P}{Q}&p=/%0d%0aX-Injected:%201",
            "http://a@b@127.0.0.1:{P}{Q}",
            "http://127.0.0.1:{P}:{P}{Q}",
            "http://127.0.0.1:{P}@{Q}",
            "http://[127.0.0.1]:{P}{Q}",
            "http://127.0.0.1%00:{P}{Q}",
            "http://127.0.0.1%2f:{P}{Q}",
            "http://127.0.0.1:99999{Q}",
            "http://:{P}{Q}",
            "http://127.0.0.1\\:{P}{Q}",
        ]
        var checked = (accepted: 0, refusedByBoth: 0)
        for (index, template) in templates.enumerated() {
            func make(_ id: String) -> String {
                template.replacingOccurrences(of: "{P}", with: "\(port)")
                    .replacingOccurrences(of: "{Q}", with: "/headers?group=\(group)&id=\(id)")
            }
            let ours = make("lib\(index)")
            var r: OpaquePointer?
            let rc = rq_request_new(ours, &r)
            let tool = curlTool(make("tool\(index)"))
            if tool == 3 { #expect(rc == RQ_ERR_INVALID_URL, "libcurl refuses \(ours); the library said \(rc)") }
            guard rc == RQ_OK else {
                if tool == 3 { checked.refusedByBoth += 1 }
                continue
            }
            _ = rq_request_free(r)
            let origin = try parse(ours)
            let q = try makeQueue()
            let rec = Recorder()
            #expect(addAndRelease(q, try rec.request(ours, tag: "r")) == RQ_OK)
            #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
            _ = rq_queue_free(q)
            let done = try #require(rec.completion("r"))
            let log = fixture.log(group: group)
            let seen = log.entries.first { $0.id == "lib\(index)" }
            let reachesFixture = ["127.0.0.1", "localhost", "::ffff:127.0.0.1"].contains(origin.host) && origin.port == port
            if reachesFixture {
                let entry = try #require(seen, "\(ours): the fixture saw nothing (origin \(origin.origin))")
                let hostPort = (origin.host.contains(":") ? "[\(origin.host)]" : origin.host) + ":\(origin.port)"
                #expect(entry.headers["host"]?.lowercased() == hostPort, "\(ours): origin \(origin.origin)")
                #expect(done.outcome == RQ_OUTCOME_OK)
                // The curl tool sent the same thing.
                #expect(log.entries.first { $0.id == "tool\(index)" }?.headers["host"]?.lowercased() == hostPort)
            } else {
                #expect(seen == nil, "\(ours) reached the fixture, not its origin \(origin.origin)")
                #expect(done.outcome != RQ_OUTCOME_OK)
            }
            #expect(!(log.entries.contains { $0.headers.keys.contains("x-injected") }))
            checked.accepted += 1
        }
        #expect(checked.accepted >= 14)
        #expect(checked.refusedByBoth >= 5)
    }
}
