// The budget of a queue's cookie jar (RQ_OPTION_COOKIES; header "Cookies"): what the jar keeps
// when a server sets more cookies than it may hold. libcurl's cookie engine itself bounds only one
// response (50 cookies, about 4 KiB each); this bounds the jar.

/// The jar's budget and the bookkeeping that enforces it at a cost proportional to the cookies
/// servers set (none for responses that set none). After a transfer that received Set-Cookie lines,
/// `received` says whether the jar must be read now (`check`): when it may be over budget, or when
/// more lines arrived since the last check than an eighth of the jar (so that the order of arrival
/// is known to within that eighth: a check costs one pass over the jar, and happens at most once
/// per eighth of the jar's cookies received, or per response that may take it over budget).
///
/// `check` reads the jar as libcurl lists it (CURLINFO_COOKIELIST: Netscape lines, no creation
/// time, in hash order) and, when it holds more than `maxCookies` cookies or `maxBytes` bytes of
/// lines, picks what stays: expired cookies go first, then the oldest (first seen by the
/// earliest check; cookies first seen by the same check in libcurl's order, which is the order of
/// creation within a domain), until the jar is back within `keptCookies` and `keptBytes` (the
/// slack keeps a flood from making every response rewrite the jar).
public struct CookieBudget: Sendable {
    public static let maxCookies = 3000
    /// Bytes of the jar's Netscape lines (as `rq_queue_cookies_list` returns them, newlines counted).
    public static let maxBytes = 1 << 20
    public static let keptCookies = 2700
    public static let keptBytes = 900 * 1024
    /// What a Set-Cookie line may add to its cookie's Netscape line besides its own bytes (the
    /// domain, path and flags when the line does not carry them): the estimate is checked anyway.
    static let lineAllowance = 64

    /// The jar's size at the last check (expired cookies not counted), and what arrived since.
    public private(set) var cookies = 0
    public private(set) var bytes = 0
    private var pendingLines = 0
    private var pendingBytes = 0
    /// The check that first saw each cookie of the jar (by domain, path and name).
    private var firstSeen: [[UInt8]: UInt64] = [:]
    private var checks: UInt64 = 0

    public init() {}

    /// A transfer ended that received `lines` Set-Cookie lines of `bytes` bytes: whether the jar
    /// must be checked now.
    public mutating func received(lines: Int, bytes lineBytes: Int) -> Bool {
        guard lines > 0 else { return false }
        pendingLines = CookieBudget.sum(pendingLines, lines)
        let (allowance, overflow) = lines.multipliedReportingOverflow(by: CookieBudget.lineAllowance)
        pendingBytes = CookieBudget.sum(pendingBytes, CookieBudget.sum(max(0, lineBytes), overflow ? Int.max : allowance))
        return pendingLines >= cookies / 8
            || CookieBudget.sum(cookies, pendingLines) > CookieBudget.maxCookies
            || CookieBudget.sum(bytes, pendingBytes) > CookieBudget.maxBytes
    }

    /// Reads the jar (`lines`: its Netscape lines without newlines, in libcurl's order) at time
    /// `now` (seconds since 1970): nil when it is within the budget (nothing to change), else the
    /// lines to keep, oldest first (the caller empties the jar and adds them back in this order).
    public mutating func check(_ lines: [[UInt8]], now: Int64) -> [[UInt8]]? {
        defer {
            checks &+= 1
            pendingLines = 0
            pendingBytes = 0
        }
        var live: [(generation: UInt64, index: Int, key: [UInt8])] = []
        live.reserveCapacity(lines.count)
        var total = 0
        for (index, line) in lines.enumerated() {
            guard let cookie = CookieBudget.parse(line), !CookieBudget.expired(cookie.expires, now: now) else { continue }
            live.append((firstSeen[cookie.key] ?? checks, index, cookie.key))
            total = CookieBudget.sum(total, line.count + 1)
        }
        let over = live.count > CookieBudget.maxCookies || total > CookieBudget.maxBytes
        var keptFrom = 0
        if over {
            live.sort { ($0.generation, $0.index) < ($1.generation, $1.index) }
            var count = live.count
            while keptFrom < live.count, count > CookieBudget.keptCookies || total > CookieBudget.keptBytes {
                total -= lines[live[keptFrom].index].count + 1
                count -= 1
                keptFrom += 1
            }
        }
        var seen: [[UInt8]: UInt64] = [:]
        seen.reserveCapacity(live.count - keptFrom)
        for entry in live[keptFrom...] { seen[entry.key] = entry.generation }
        firstSeen = seen
        cookies = live.count - keptFrom
        bytes = total
        return over ? live[keptFrom...].map { lines[$0.index] } : nil
    }

    /// The jar was emptied.
    public mutating func reset() { self = CookieBudget() }

    /// Whether a Netscape line of the jar is that of a cookie expired at `now` (seconds since 1970),
    /// as libcurl judges it (a cookie it would not send); false for a line that is not a cookie.
    public static func expired(_ line: [UInt8], now: Int64) -> Bool {
        guard let cookie = parse(line) else { return false }
        return expired(cookie.expires, now: now)
    }

    private static func expired(_ expires: Int64, now: Int64) -> Bool { expires != 0 && expires < now }

    /// A Netscape cookie line's identity (domain without the "#HttpOnly_" mark, path, name: what
    /// makes a cookie replace another) and expiry (0: a session cookie). nil for a line that is
    /// not a cookie.
    static func parse(_ line: [UInt8]) -> (key: [UInt8], expires: Int64)? {
        let fields = line.split(separator: 0x09, maxSplits: 6, omittingEmptySubsequences: false)
        guard fields.count >= 6 else { return nil }
        var domain = fields[0][...]
        let mark = Array("#HttpOnly_".utf8)
        if domain.starts(with: mark) { domain = domain.dropFirst(mark.count) }
        var key = Array(domain)
        key.append(0x09)
        key.append(contentsOf: fields[2])
        key.append(0x09)
        key.append(contentsOf: fields[5])
        return (key, expiry(fields[4]))
    }

    /// libcurl writes the expiry as a decimal curl_off_t; anything else counts as a session
    /// cookie's 0, and a value too large for Int64 as the largest.
    static func expiry(_ text: ArraySlice<UInt8>) -> Int64 {
        var digits = text[...]
        let negative = digits.first == 0x2D
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return 0 }
        var value: Int64 = 0
        for digit in digits {
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (plus, o2) = times.addingReportingOverflow(Int64(digit - 0x30))
            if o1 || o2 { return negative ? Int64.min : Int64.max }
            value = plus
        }
        return negative ? -value : value
    }

    private static func sum(_ a: Int, _ b: Int) -> Int {
        let (s, o) = a.addingReportingOverflow(b)
        return o ? Int.max : s
    }
}
