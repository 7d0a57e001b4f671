import RequestQueueCore
import Testing

/// A request's header lines in one buffer: the entries libcurl is given, lookups by name in any
/// case, replacement in place, removal, and the equalities the engine and duplicate detection use.
struct RequestHeadersTests {
    private func set(_ h: inout RequestHeaders, _ name: String, _ value: String) -> Bool {
        var name = name, value = value
        return name.withUTF8 { n in value.withUTF8 { v in h.set(name: n, value: v) } }
    }

    private func entries(_ h: RequestHeaders) -> [String] {
        var out: [String] = []
        h.forEach { out.append(String(cString: $0.entry)) }
        return out
    }

    @Test func entriesAreTheLinesLibcurlTakesInOrder() {
        var h = RequestHeaders()
        #expect(h.isEmpty && entries(h) == [])
        #expect(set(&h, "Content-Type", "application/json"))
        #expect(set(&h, "X-Empty", ""))
        #expect(set(&h, "Accept", "*/*"))
        #expect(entries(h) == ["Content-Type: application/json", "X-Empty;", "Accept: */*"])
        #expect(h.count == 3)
        var values: [String] = []
        h.forEach { values.append(String(decoding: $0.name, as: UTF8.self) + "=" + String(decoding: $0.value, as: UTF8.self)) }
        #expect(values == ["Content-Type=application/json", "X-Empty=", "Accept=*/*"])
    }

    @Test func cookieLinesMakeOneValueForTheJarsLine() {
        var h = RequestHeaders()
        #expect(h.cookieValue == nil)
        _ = set(&h, "X", "1")
        _ = set(&h, "Cookie", "")
        #expect(h.names.contains(.cookie) && h.cookieValue == nil)
        _ = set(&h, "COOKIE", "a=1; b=2")
        var other = RequestHeaders()
        _ = set(&other, "cookie", "c=3")
        other.forEach { h.append($0) }
        #expect(h.cookieValue.map { String(decoding: $0.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) } == "a=1; b=2; c=3")
        Array("Cookie".utf8).withUnsafeBufferPointer { h.remove(named: $0) }
        #expect(h.cookieValue == nil)
    }

    @Test func aNameInAnyCaseReplacesTheLineInItsPlace() {
        var h = RequestHeaders()
        _ = set(&h, "A", "1")
        _ = set(&h, "Content-Type", "text/plain")
        _ = set(&h, "B", "2")
        #expect(set(&h, "content-TYPE", String(repeating: "x", count: 300)))
        #expect(entries(h) == ["A: 1", "content-TYPE: " + String(repeating: "x", count: 300), "B: 2"])
        #expect(set(&h, "CONTENT-TYPE", ""))
        #expect(entries(h) == ["A: 1", "CONTENT-TYPE;", "B: 2"])
        #expect(h.count == 3)
        #expect(h.contains(named: "content-type") && h.contains(named: "a") && !h.contains(named: "content"))
        #expect(h.contains(named: "Content-Type" as String) && !h.contains(named: "c" as String))
    }

    @Test func removalTakesEveryCaseOfTheName() {
        var h = RequestHeaders()
        _ = set(&h, "A", "1")
        _ = set(&h, "Keep", "k")
        _ = set(&h, "B", "2")
        var name = "KEEP"
        name.withUTF8 { h.remove(named: $0) }
        #expect(entries(h) == ["A: 1", "B: 2"] && h.count == 2)
        name = "absent"
        name.withUTF8 { h.remove(named: $0) }
        #expect(entries(h) == ["A: 1", "B: 2"])
    }

    @Test func theCountIsLimited() {
        var h = RequestHeaders()
        for i in 0..<Validation.maxHeaderCount { #expect(set(&h, "H\(i)", "v")) }
        #expect(!set(&h, "One-More", "v"))
        #expect(set(&h, "h0", "replaced"))   // a replacement adds no line
        #expect(h.count == Validation.maxHeaderCount)
    }

    @Test func linesOfAnotherAreAppendedWhole() {
        var defaults = RequestHeaders()
        _ = set(&defaults, "X-Default", "d")
        _ = set(&defaults, "X-Empty", "")
        var h = RequestHeaders()
        _ = set(&h, "Own", "o")
        defaults.forEach { h.append($0) }
        #expect(entries(h) == ["Own: o", "X-Default: d", "X-Empty;"])
        #expect(h.count == 3)
    }

    @Test func equalityByBytesAndByLines() {
        var a = RequestHeaders(), b = RequestHeaders()
        _ = set(&a, "Content-Type", "text/plain")
        _ = set(&b, "content-type", "text/plain")
        #expect(!a.sameBytes(as: b))
        #expect(a.sameLines(as: b))
        var ha = Hasher(), hb = Hasher()
        a.hash(into: &ha)
        b.hash(into: &hb)
        #expect(ha.finalize() == hb.finalize())
        var c = RequestHeaders()
        _ = set(&c, "Content-Type", "text/plain")
        #expect(a.sameBytes(as: c) && a.sameLines(as: c))
        _ = set(&c, "Content-Type", "text/Plain")   // values compare exactly
        #expect(!a.sameBytes(as: c) && !a.sameLines(as: c))
        var d = RequestHeaders()
        _ = set(&d, "Content-Typf", "text/plain")
        #expect(!a.sameLines(as: d))
        var e = a
        _ = set(&e, "X", "1")
        #expect(!a.sameLines(as: e) && !a.sameBytes(as: e))
        #expect(RequestHeaders().sameBytes(as: RequestHeaders()) && RequestHeaders().sameLines(as: RequestHeaders()))
        // Order counts.
        var f = RequestHeaders(), g = RequestHeaders()
        _ = set(&f, "A", "1")
        _ = set(&f, "B", "2")
        _ = set(&g, "B", "2")
        _ = set(&g, "A", "1")
        #expect(!f.sameLines(as: g))
    }

    /// The names the engine looks for are known from the lines set, in any case, and forgotten
    /// when their line goes.
    @Test func theNamesLookedForFollowTheLines() {
        var h = RequestHeaders()
        #expect(h.names.isEmpty)
        _ = set(&h, "USER-agent", "a")
        _ = set(&h, "Content-Type", "t")
        _ = set(&h, "Accept-Encodings", "x")   // not one of them
        _ = set(&h, "range", "bytes=1-")
        _ = set(&h, "Transfer-Encoding", "chunked")
        _ = set(&h, "Upgrade", "")
        #expect(h.names == [.userAgent, .contentType, .range, .transferEncoding, .upgrade])
        _ = set(&h, "accept-encoding", "gzip")
        #expect(h.names.contains(.acceptEncoding))
        var name = "content-TYPE"
        name.withUTF8 { h.remove(named: $0) }
        #expect(!h.names.contains(.contentType) && h.names.contains(.userAgent))
        for other in ["Rangf", "upgradE", "User-Agenu", "X"] {
            var n = other
            #expect(n.withUTF8 { RequestHeaders.Names(of: $0) } == (other == "upgradE" ? .upgrade : []))
        }
        var inherited = RequestHeaders()
        h.forEach { inherited.append($0) }
        #expect(inherited.names == h.names)
        _ = set(&h, "USER-AGENT", "b")   // a replacement keeps them
        #expect(h.names == inherited.names)
    }

    /// `isName` (a word at a time, c | 0x20) agrees with lowercasing every byte, for every token
    /// byte at every place of names of the literal's length.
    @Test func isNameAgreesWithLowercasing() {
        let tokens = (UInt8(0)...0xFF).filter { (try? Validation.headerName([$0])) != nil }
        func check(_ literal: StaticString) {
            let expected = Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
            for position in expected.indices {
                for c in tokens {
                    var name = expected
                    name[position] = c
                    let fast = name.withUnsafeBufferPointer { RequestHeaders.isName($0, literal) }
                    #expect(fast == (name.map(RequestHeaders.lowercase) == expected), "\(name)")
                }
            }
            let upper = expected.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }
            #expect(upper.withUnsafeBufferPointer { RequestHeaders.isName($0, literal) })
            #expect(!Array(expected.dropLast()).withUnsafeBufferPointer { RequestHeaders.isName($0, literal) })
        }
        check("transfer-encoding")
        check("x-1")
        check("range")
    }
}
