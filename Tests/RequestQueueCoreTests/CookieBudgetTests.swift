import Testing
@testable import RequestQueueCore

/// A Netscape line as libcurl lists it.
private func line(_ name: String, domain: String = "example.com", path: String = "/", expires: Int64 = 0,
                  value: String = "v") -> [UInt8] {
    Array("\(domain)\tFALSE\t\(path)\tFALSE\t\(expires)\t\(name)\t\(value)".utf8)
}

private func names(_ lines: [[UInt8]]) -> [String] {
    lines.map { String(decoding: $0.split(separator: 0x09, omittingEmptySubsequences: false)[5], as: UTF8.self) }
}

@Suite struct CookieBudgetTests {
    @Test func expiryTextNeverTraps() {
        #expect(CookieBudget.expiry(Array("1700000000".utf8)[...]) == 1_700_000_000)
        #expect(CookieBudget.expiry(Array("99999999999999999999999".utf8)[...]) == Int64.max)
        #expect(CookieBudget.expiry(Array("-99999999999999999999999".utf8)[...]) == Int64.min)
        #expect(CookieBudget.expiry(Array("-5".utf8)[...]) == -5)
        for bad in ["", "-", "12x", " 1", "+1"] { #expect(CookieBudget.expiry(Array(bad.utf8)[...]) == 0, "\(bad)") }
        #expect(CookieBudget.parse(Array("no tabs".utf8)) == nil)
        #expect(CookieBudget.parse(Array("#HttpOnly_a.b\tFALSE\t/\tFALSE\t0\tn\tv".utf8))?.key == CookieBudget.parse(Array("a.b\tFALSE\t/\tFALSE\t0\tn\tx".utf8))?.key)
    }

    @Test func withinBudgetNothingChanges() {
        var budget = CookieBudget()
        let r1 = budget.received(lines: 3, bytes: 100)
        #expect(r1)
        let r2 = budget.check([line("a"), line("b"), line("c")], now: 1000)
        #expect(r2 == nil)
        #expect(budget.cookies == 3)
        // Responses without Set-Cookie lines never ask for a check.
        let r3 = budget.received(lines: 0, bytes: 0)
        #expect(!r3)
    }

    @Test func checksOnlyAsTheJarGrows() {
        var budget = CookieBudget()
        let jar = (0..<800).map { line("c\($0)") }
        _ = budget.received(lines: 800, bytes: 8000)
        let r4 = budget.check(jar, now: 0)
        #expect(r4 == nil)
        // Fewer lines than an eighth of the jar, and within the budget: no check.
        let r5 = budget.received(lines: 50, bytes: 500)
        #expect(!r5)
        let r6 = budget.received(lines: 50, bytes: 500)
        #expect(r6)
    }

    @Test func expiredThenOldestGoFirst() {
        var budget = CookieBudget()
        // The first check sees old0..., one of them expired.
        var jar = (0..<2000).map { line("old\($0)") }
        jar.append(line("gone", expires: 500))
        _ = budget.received(lines: 2001, bytes: 0)
        let r7 = budget.check(jar, now: 1000)
        #expect(r7 == nil)
        #expect(budget.cookies == 2000)
        // 1500 new cookies, listed before the old ones (libcurl's hash order is not arrival order).
        let new = (0..<1500).map { line("new\($0)") }
        let r8 = budget.received(lines: 1500, bytes: 0)
        #expect(r8)
        let kept = budget.check(new + jar, now: 1000)
        let keptNames = names(kept ?? [])
        #expect(keptNames.count == CookieBudget.keptCookies)
        #expect(!keptNames.contains("gone"))
        #expect(!keptNames.contains("old0") && keptNames.contains("old1999"))
        #expect(Set(names(new)).isSubset(of: Set(keptNames)))
        // Oldest first: the old cookies that stayed come before the new ones.
        #expect(keptNames.first == "old800" && keptNames.last == "new1499")
        #expect(budget.cookies == CookieBudget.keptCookies)
    }

    @Test func byteBudget() {
        var budget = CookieBudget()
        let big = String(repeating: "x", count: 4000)
        let jar = (0..<300).map { line("b\($0)", value: big) }
        let r9 = budget.received(lines: 300, bytes: 300 * 4000)
        #expect(r9)
        let kept = budget.check(jar, now: 0) ?? []
        #expect(kept.reduce(0) { $0 + $1.count + 1 } <= CookieBudget.keptBytes)
        #expect(names(kept).last == "b299")
        #expect(budget.bytes <= CookieBudget.keptBytes)
    }
}
