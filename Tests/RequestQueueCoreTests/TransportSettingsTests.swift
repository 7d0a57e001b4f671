import Testing
import RequestQueueCore

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite struct TransportSettingsTests {
    @Test func proxyURLs() {
        for good in ["", "http://p:3128", "https://user:pw@proxy.example:443", "socks5h://u:p@[::1]:1080",
                     "SOCKS5://h", "socks4a://h:1", "http://h/"] {
            #expect(TransportValidation.proxy(bytes(good)), "\(good)")
        }
        for bad in ["h:3128", "ftp://h:21", "http://", "http://:80", "http://h:0", "http://h:70000", "http://h:8x",
                    "http://h/path", "http://a b:1", "socks5://[::1", "http://h:1234567", "\u{7f}"] {
            #expect(!TransportValidation.proxy(bytes(bad)), "\(bad)")
        }
        #expect(!TransportValidation.proxy([UInt8](repeating: 0x61, count: 70000)))
        #expect(!TransportValidation.proxy([0xFF, 0xFE]))
    }

    @Test func resolveEntries() {
        for good in ["h:80:127.0.0.1", "h:443:127.0.0.1,[::1]", "h:1:[fe80::1]", "a.b.c:65535:10.0.0.1,10.0.0.2"] {
            #expect(TransportValidation.resolveEntry(bytes(good)), "\(good)")
        }
        for bad in ["", "h", "h:80", "h:80:", ":80:127.0.0.1", "h:0:127.0.0.1", "h:65536:1.2.3.4", "+h:80:1.2.3.4",
                    "-h:80:1.2.3.4", "h:80:localhost", "h:80:1.2.3.4,", "h:80:[]", "h:80:[::1", "h:80 :1.2.3.4",
                    "h:x:1.2.3.4"] {
            #expect(!TransportValidation.resolveEntry(bytes(bad)), "\(bad)")
        }
    }

    @Test func hostListsAndPaths() {
        #expect(TransportValidation.hostList(bytes("a, b,*")))
        #expect(TransportValidation.hostList([]))
        #expect(!TransportValidation.hostList(bytes("a\tb")))
        #expect(TransportValidation.path(bytes("/tmp/x")))
        #expect(!TransportValidation.path([]))
        #expect(!TransportValidation.path([UInt8](repeating: 0x61, count: 4097)))
    }

    @Test func aRequestsOwnValueWinsOverTheDefaults() {
        var defaults = TransportSettings()
        defaults.userAgent = bytes("queue")
        defaults.decodeContent = false
        defaults.resolve = [bytes("h:80:1.2.3.4")]
        defaults.cookies = true
        var own = TransportSettings()
        own.userAgent = []  // "" (send none) is a value of its own
        own.cookies = false
        let merged = own.inheriting(defaults)
        #expect(merged.userAgent == [])
        #expect(merged.decodeContent == false)
        #expect(merged.resolve == [bytes("h:80:1.2.3.4")])
        #expect(merged.cookies == false)
        #expect(TransportSettings().inheriting(TransportSettings()) == TransportSettings())
        #expect(merged != own)
        #expect(own.inheriting(TransportSettings()) == own)
    }

    /// `equals` is `==`: settings never assigned are equal without a look at each one, and any
    /// assignment (even of nil) makes the comparison look at the values.
    @Test func equalsIsEquality() {
        var a = TransportSettings(), b = TransportSettings()
        #expect(a.equals(b))
        a.proxy = nil
        #expect(a.equals(b) && b.equals(a) && a == b)
        a.proxy = []
        #expect(!a.equals(b) && !b.equals(a) && a != b)
        b.proxy = []
        #expect(a.equals(b))
        a.maxSendSpeed = 5
        #expect(!a.equals(b))
        var c = TransportSettings()
        c.maxSendSpeed = 5
        #expect(!c.equals(TransportSettings()) && !TransportSettings().equals(c))
        // Each setting, assigned through a key path as the C boundary does, counts.
        var d = TransportSettings()
        d[keyPath: \TransportSettings.userAgent] = [0x61]
        #expect(!d.equals(TransportSettings()) && !TransportSettings().equals(d))
        var e = TransportSettings()
        e.decodeContent = false
        #expect(!e.equals(TransportSettings()))
        #expect(TransportSettings().inheriting(e).equals(e))
    }
}
