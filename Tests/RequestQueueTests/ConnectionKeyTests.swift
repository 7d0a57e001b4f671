import Foundation
@testable import RequestQueue
import Testing

/// The key under which the engine finds a reused connection's socket (for the stall checks): the
/// same for the same addresses and ports, different when any of them differs, in any byte of an
/// address (those hashed eight at a time and the last few alike) or in its length.
@Suite struct ConnectionKeyTests {
    static func key(_ primary: String?, _ local: String?, _ primaryPort: Int32, _ localPort: Int32) -> Int {
        func with(_ text: String?, _ body: (UnsafePointer<CChar>?) -> Int) -> Int {
            guard let text else { return body(nil) }
            return text.withCString { body($0) }
        }
        return with(primary) { p in with(local) { l in Transfer.connectionKey(p, l, primaryPort, localPort) } }
    }

    @Test func equalForTheSameConnectionAndDistinctOtherwise() {
        let addresses = ["127.0.0.1", "127.0.0.2", "127.0.0.10", "127.0.0.1\u{1}", "10.0.0.1", "::1", "::2", "",
                         "2001:db8::1", "2001:db8::2", "2001:db8:0:0:0:0:0:1", "2001:db8:0:0:0:0:0:2",
                         "12345678", "12345679", "1234567", "123456789", "fe80::1%eth0", "fe80::1%eth1"]
        var seen: [Int: String] = [:]
        for primary in addresses {
            for local in ["127.0.0.1", "::1", "192.168.1.20"] {
                for (pp, lp) in [(80, 40000), (443, 40000), (80, 40001), (40000, 80), (65535, 1), (1, 65535)] {
                    let k = Self.key(primary, local, Int32(pp), Int32(lp))
                    let name = "\(primary)|\(local)|\(pp)|\(lp)"
                    #expect(seen[k] == nil, "\(name) and \(seen[k] ?? "") share a key")
                    seen[k] = name
                    #expect(Self.key(primary, local, Int32(pp), Int32(lp)) == k)
                }
            }
        }
        // The two addresses are told apart, not only their bytes in a row.
        #expect(Self.key("127.0.0.1", "27.0.0.1", 80, 1) != Self.key("127.0.0.11", "27.0.0.1", 80, 1))
        #expect(Self.key("127.0.0.1", "127.0.0.2", 80, 1) != Self.key("127.0.0.2", "127.0.0.1", 80, 1))
        // No address is the empty one.
        #expect(Self.key(nil, nil, 80, 1) == Self.key("", "", 80, 1))
    }
}
