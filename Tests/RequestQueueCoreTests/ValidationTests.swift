import Testing
import RequestQueueCore

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

private func syntaxError(_ s: String) -> InputError? {
    do { _ = try Validation.urlSyntax(Array(s.utf8)); return nil } catch { return error }
}
private func syntaxError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.urlSyntax(b); return nil } catch { return error }
}
private func methodError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.method(b); return nil } catch { return error }
}
private func headerNameError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.headerName(b); return nil } catch { return error }
}
private func headerValueError(_ b: [UInt8]) -> InputError? {
    do { _ = try Validation.headerValue(b); return nil } catch { return error }
}

/// The pure part of URL checking: the syntax rules applied before libcurl parses a URL, and the
/// assembling of libcurl's parts. The whole parser (with libcurl) is tested in
/// RequestQueueTests/URLTests.swift.
@Suite struct ValidationTests {
    @Test func limitsMatchTheCHeader() {
        #expect(Validation.maxURLLength == 65536)
        #expect(Validation.maxMethodLength == 64)
        #expect(Validation.maxHeaderNameLength == 256)
        #expect(Validation.maxHeaderValueLength == 65536)
        #expect(Validation.maxHeaderCount == 1000)
    }

    // MARK: URL syntax (before libcurl)

    /// The one-pass check of common URLs answers as `urlSyntax` and `authorityEnd` do, and takes
    /// the usual URLs (the others go to `urlSyntax`, which explains a refusal).
    @Test func commonURLAgreesWithTheFullChecks() throws {
        var urls = ["http://h", "https://h", "HTTP://h/x", "HtTpS://h:8080/p?q#f", "http://h?x", "http://h#x",
                    "http://[::1]:80/", "http://u:p@h/", "http:///x", "https:///", "http://", "https://", "http:/x",
                    "httpx://h/", "http:x", "hTtp://h", "ftp://h/", "h://x", "http:\\h", "https//h/x", "http//h/x",
                    "http://h/a b", "http://h/\u{7F}", "http://h/é", "http://h\t/", "Http://H/", "httpS://h",
                    "https:/", "https:", "http://h/" + String(repeating: "a", count: 65536 - 9),
                    "http://h/" + String(repeating: "a", count: 65536 - 10), "https://a.b.c:1/d/e?f=g#h", "http:// h/",
                    "\u{0}http://h/", "http://h/\u{0}", "hXtp://h/", "@ttp://h/", "http;//h/", "http:/\u{2F}h"]
        // Every kind of byte at every place (the check reads 8 bytes at a time, then the rest).
        for c: UInt8 in [0x00, 0x09, 0x20, 0x21, 0x2F, 0x3A, 0x3F, 0x23, 0x40, 0x48, 0x53, 0x68, 0x73, 0x7E, 0x7F, 0x80, 0xFF] {
            for position in 0..<21 {
                var b = bytes("https://host/path/xyz")
                b[position] = c
                urls.append(String(decoding: b, as: UTF8.self))
            }
        }
        var taken = 0
        for url in urls {
            let b = bytes(url)
            guard let common = b.withUnsafeBufferPointer({ Validation.commonURL($0) }) else { continue }
            taken += 1
            #expect(try Validation.urlSyntax(b) == common.https, "\(url)")
            #expect(b.withUnsafeBufferPointer { Validation.authorityEnd($0) } == common.authorityEnd, "\(url)")
        }
        #expect(taken > 20)
        for url in ["http://h", "https://127.0.0.1:8080/small.bin", "HTTPS://example.com?q", "http://[::1]/"] {
            #expect(bytes(url).withUnsafeBufferPointer { Validation.commonURL($0) } != nil, "\(url)")
        }
    }

    @Test func urlSyntax() throws {
        #expect(try Validation.urlSyntax(bytes("http://h")) == false)
        #expect(try Validation.urlSyntax(bytes("HtTpS://h")) == true)
        #expect(try Validation.urlSyntax(bytes("https://h/" + String(repeating: "a", count: 65536 - 10))) == true)
        #expect(syntaxError("https://h/" + String(repeating: "a", count: 65536 - 9)) == .invalidURL)
        for bad in ["", "http", "http:", ":", "://h", "1http://h", "-http://h", "h_t://h", "http:/h", "http:h",
                    "https:\\\\h", "http://", "http:///x", "http:////x", "http://h/ ", "example.com/x"] {
            #expect(syntaxError(bad) == .invalidURL, "\(bad)")
        }
        for other in ["ftp://h/", "FTP://h", "ftp:", "ftp:x", "httpx://h", "htt://h", "http+unix://h", "ws://h",
                      "mailto:x", "localhost:8080", "data:text/plain,hi", "file:///etc/passwd"] {
            #expect(syntaxError(other) == .unsupportedScheme, "\(other)")
        }
    }

    @Test func everyControlAndNonASCIIByteIsRejectedAnywhere() {
        let valid = bytes("http://h/p?q#f")
        for byte in Array(UInt8(0)...0x20) + Array(UInt8(0x7F)...0xFF) {
            for position in [0, 4, 7, 8, 9, valid.count] {
                var b = valid
                b.insert(byte, at: position)
                if syntaxError(b) != .invalidURL {
                    Issue.record("byte \(byte) at \(position): \(String(describing: syntaxError(b)))")
                }
            }
        }
        // ftp with a non-ASCII byte: the characters are checked before the scheme.
        #expect(syntaxError(bytes("ftp://h/") + [0x80]) == .invalidURL)
        #expect(syntaxError([UInt8](repeating: 0xFF, count: 70_000)) == .invalidURL)
        #expect(syntaxError([UInt8](repeating: 0x3A, count: 70_000)) == .invalidURL)
    }

    @Test func acceptsAnyCollectionOfBytes() throws {
        #expect(try Validation.urlSyntax(bytes("xxhttps://h:81/yy")[2...]) == true)
        #expect(try Validation.urlSyntax("https://h".utf8) == true)
        #expect(try Validation.urlSyntax(ContiguousArray(bytes("http://q"))) == false)
    }

    // MARK: Assembling libcurl's parts

    private func assemble(_ scheme: String, _ host: String, _ port: String?, zone: String? = nil) throws(InputError) -> ValidatedURL {
        try Validation.url(given: "g", https: scheme == "https", host: Array(host.utf8), zone: zone.map { Array($0.utf8) },
                           port: port.map { Array($0.utf8) })
    }

    @Test func assemblesTheOriginFromLibcurlsParts() throws {
        #expect(try assemble("http", "Example.COM", "8080").origin == "http://example.com:8080")
        #expect(try assemble("https", "h", "443").origin == "https://h:443")
        #expect(try assemble("http", "[::1]", "80").host == "::1")
        #expect(try assemble("http", "h", nil).port == 80)
        #expect(try assemble("https", "h", nil).port == 443)
        #expect(try assemble("http", "[FE80::1]", "81", zone: "eth0").origin == "http://fe80::1%25eth0:81")
        let u = try assemble("http", "h", "65535")
        #expect(u.string == "g" && u.port == 65535 && u.scheme == "http")
    }

    @Test func rejectsWhatTheHeaderForbidsEvenWhenLibcurlTakesIt() {
        #expect(throws: InputError.invalidURL) { try assemble("http", "h", "0") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "h", "65536") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "h", "") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "h", "123456") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "h", "8o") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "[]", "80") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "", "80") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "[", "80") }
        #expect(throws: InputError.invalidURL) { try assemble("http", "[::1", "80") }
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

    /// The one-pass checks `rq_request_set_header` uses agree with `headerName` and `headerValue`:
    /// the same names and values accepted, the same stored bytes, the same messages, for every byte
    /// at every place, and the name lowercased as `String.lowercased` does.
    @Test func contiguousHeaderChecksAgreeWithTheGenericOnes() {
        func name(_ b: [UInt8]) -> Result<(String, String), InputError> {
            b.withUnsafeBufferPointer { p in
                Result { () throws(InputError) in
                    try Validation.checkHeaderName(contiguous: p)
                    return (String(decoding: p, as: UTF8.self), RequestHeaders.lowercased(p))
                }
            }
        }
        func value(_ b: [UInt8]) -> Result<[UInt8], InputError> {
            b.withUnsafeBufferPointer { p in Result { () throws(InputError) in Array(try Validation.trimmedHeaderValue(contiguous: p)) } }
        }
        var names: [[UInt8]] = [[], bytes("Content-Type"), bytes("x-lower"), bytes("ALLUPPER@"), Array(repeating: 0x41, count: 256),
                                Array(repeating: 0x61, count: 257)]
        var values: [[UInt8]] = [[], bytes(" "), bytes("\t \t"), bytes(" a "), bytes("application/json"),
                                 Array(repeating: 0x20, count: 65536), Array(repeating: 0x61, count: 65537)]
        for c in UInt8(0)...0xFF {
            for position in 0..<5 {
                var n = bytes("AbCdE")
                n[position] = c
                names.append(n)
                var v = bytes(" v-v ")
                v[position] = c
                values.append(v)
            }
        }
        for n in names {
            let generic = Result { () throws(InputError) in try Validation.headerName(n) }
            switch (name(n), generic) {
            case let (.success(fast), .success(slow)):
                #expect(fast.0 == slow && fast.1 == slow.lowercased(), "\(n)")
            case let (.failure(fast), .failure(slow)):
                #expect(fast.reason == slow.reason, "\(n)")
            default:
                Issue.record("disagree on \(n)")
            }
        }
        for v in values {
            let generic = Result { () throws(InputError) in try Validation.headerValue(v) }
            switch (value(v), generic) {
            case let (.success(fast), .success(slow)): #expect(fast == slow, "\(v)")
            case let (.failure(fast), .failure(slow)): #expect(fast.reason == slow.reason, "\(v)")
            default: Issue.record("disagree on \(v)")
            }
        }
    }

    /// The methods `rq_request_set_method` takes as literals are the bytes given; every other
    /// method is checked and made as `method` does.
    @Test func contiguousMethodsAgreeWithTheGenericCheck() {
        var methods = HTTPMethods.idempotent.union(HTTPMethods.sendingBody).union(HTTPMethods.coalescable)
            .union(HTTPMethods.seeOtherFollowed).map(bytes)
        for m in ["CONNECT", "get", "Post", "GETS", "GE", "POS", "PUTT", "OPTION", "DELETe", "", "G T", "X\u{7F}"] {
            methods.append(bytes(m))
        }
        for m in methods.map({ $0 }) where !m.isEmpty {
            for position in 0..<m.count {   // every method with one byte changed
                var changed = m
                changed[position] ^= 0x01
                methods.append(changed)
            }
        }
        for m in methods {
            let fast = m.withUnsafeBufferPointer { p in Result { () throws(InputError) in try Validation.method(contiguous: p) } }
            let slow = Result { () throws(InputError) in try Validation.method(m) }
            switch (fast, slow) {
            case let (.success(a), .success(b)): #expect(a == b && Array(a.utf8) == m, "\(m)")
            case let (.failure(a), .failure(b)): #expect(a.reason == b.reason, "\(m)")
            default: Issue.record("disagree on \(m)")
            }
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

    /// Each refusal says what exactly was wrong (for rq_last_error_message).
    @Test func reasonsNameTheByteThePartAndTheLimit() {
        let cases: [(InputError?, String)] = [
            (syntaxError("http://h/a b"), "byte 10 of the URL is a space (0x20): percent-encode it as %20"),
            (syntaxError(bytes("http://h/") + [0xC3, 0xA9]), "byte 9 of the URL is a non-ASCII byte (0xC3): URLs are ASCII, percent-encode it"),
            // In the host, percent-encoding is not the answer: its IDNA form is.
            (syntaxError(bytes("http://u@b") + [0xC3, 0xBC] + bytes("cher.example/")),
             "byte 10 of the URL is a non-ASCII byte (0xC3): a host name is ASCII: give its IDNA form (\"xn--\" labels)"),
            (syntaxError(bytes("http://h/") + [0x01]), "byte 9 of the URL is a control character (0x01)"),
            (syntaxError(""), "the URL is empty"),
            (syntaxError("https://h/" + String(repeating: "a", count: 65536)), "the URL is 65546 bytes long, more than the 65536 allowed"),
            (syntaxError("ftp://h/"), "the scheme is \"ftp\": only http and https are supported"),
            (syntaxError("http:/h"), "\"//\" must follow \"http:\" (an absolute URL: http://host/path)"),
            (syntaxError("http:///x"), "the URL has no host after \"http://\""),
            (syntaxError("example.com/x"), "byte 11 of the URL is \"/\" (0x2F), which cannot be in a scheme: the URL must be absolute, starting with http:// or https://"),
            (methodError(bytes("GE T")), "byte 2 of the method is a space (0x20): the method must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"),
            (methodError([]), "the method is empty"),
            (headerNameError(bytes("X:A")), "byte 1 of the header name is \":\" (0x3A): the header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"),
            (headerValueError(bytes("a\r\nb")), "has a carriage return (CR, 0x0D) at byte 1: a value cannot hold CR, LF or NUL"),
        ]
        for (error, reason) in cases {
            #expect(error?.reason == reason)
        }
        #expect(throws: InputError.invalidURL) { try Validation.url(given: "g", https: false, host: Array("h".utf8), zone: nil, port: Array("0".utf8)) }
        do { _ = try Validation.url(given: "g", https: false, host: Array("h".utf8), zone: nil, port: Array("70000".utf8)) } catch {
            #expect(error.reason == "the port 70000 is not from 1 to 65535")
        }
    }
}
