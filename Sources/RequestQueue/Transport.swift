// Transport settings (issue 17): content decoding, User-Agent, proxies, TLS, connections, cookies,
// and a queue's defaults inherited by its requests. The C boundary is CAPI+Transport.swift.
import CCurl
import CRequestQueueAPI
import Glibc
import RequestQueueCore
import Synchronization

/// The settings of a request that a queue's defaults can give it: those set explicitly on a
/// request are its own; at `rq_add` every other one is taken from the queue's defaults request.
struct InheritedSettings: OptionSet {
    let rawValue: UInt32
    static let timeout = InheritedSettings(rawValue: 1 << 0)
    static let connectTimeout = InheritedSettings(rawValue: 1 << 1)
    static let idleTimeout = InheritedSettings(rawValue: 1 << 2)
    static let credentials = InheritedSettings(rawValue: 1 << 3)
    static let maxRedirects = InheritedSettings(rawValue: 1 << 4)
    static let maxResponseSize = InheritedSettings(rawValue: 1 << 5)
    static let caFile = InheritedSettings(rawValue: 1 << 6)
    static let retry = InheritedSettings(rawValue: 1 << 7)
    static let retryDelay = InheritedSettings(rawValue: 1 << 8)
    static let retryOutcomes = InheritedSettings(rawValue: 1 << 9)
    static let retryBackoff = InheritedSettings(rawValue: 1 << 10)
    static let retryStatuses = InheritedSettings(rawValue: 1 << 11)
    static let retryNonIdempotent = InheritedSettings(rawValue: 1 << 12)
    static let maxAttempts = InheritedSettings(rawValue: 1 << 13)
    static let headerTimeout = InheritedSettings(rawValue: 1 << 14)
    static let lowSpeed = InheritedSettings(rawValue: 1 << 15)

    /// The setting that a time setter writes.
    static func seconds(_ field: ReferenceWritableKeyPath<Request, Double>) -> InheritedSettings {
        switch field {
        case \Request.timeout: .timeout
        case \Request.connectTimeout: .connectTimeout
        case \Request.idleTimeout: .idleTimeout
        case \Request.retry.delay: .retryDelay
        default: []
        }
    }
}

/// What a queue's defaults give: a snapshot of its defaults request, taken at `rq_add`. A class:
/// `rq_add` passes an absent one along without copying its few hundred bytes.
final class RequestDefaults {
    let explicit: InheritedSettings
    /// The defaults request's values.
    let values: Request.Inheritable

    init(explicit: InheritedSettings, values: Request.Inheritable) {
        self.explicit = explicit
        self.values = values
    }
}

extension Request {
    /// Makes the defaults request of a queue: a request that is never run, configured with the
    /// usual setters.
    static func makeDefaults() -> Request {
        let r = Request(url: .placeholder)
        r.isDefaults = true
        _ = r.register()
        return r
    }

    /// The values a queue's defaults give (`inherit`).
    struct Inheritable {
        let timeout: Double, connectTimeout: Double, idleTimeout: Double
        let headerTimeout: Double?, lowSpeed: (rate: Double, time: Double)?
        let user: CString?, password: CString?
        let maxRedirects: Int, maxResponseSize: UInt64, caFile: CString?
        let retry: RetryPolicy
        let headers: RequestHeaders
        let transport: TransportSettings
    }

    var inheritable: Inheritable {
        Inheritable(timeout: timeout, connectTimeout: connectTimeout, idleTimeout: idleTimeout,
                    headerTimeout: headerTimeout, lowSpeed: lowSpeed, user: user, password: password,
                    maxRedirects: maxRedirects, maxResponseSize: maxResponseSize, caFile: caFile, retry: retry,
                    headers: headers, transport: transport)
    }

    /// Takes every setting not set on this request from `d`, and the queue's cookie jar if it uses
    /// cookies (as the queue accepts it: under the queue's monitor and this request's lock).
    func inherit(_ d: RequestDefaults?, from queue: QueueTransport) {
        if let d { inherit(d) }
        if transport.cookies == true, cookieJar == nil { cookieJar = queue.cookieJar() }
    }

    private func inherit(_ d: RequestDefaults) {
        let values = d.values
        let take = d.explicit.subtracting(explicitSettings)
        if take.contains(.timeout) { timeout = values.timeout }
        if take.contains(.connectTimeout) { connectTimeout = values.connectTimeout }
        if take.contains(.idleTimeout) { idleTimeout = values.idleTimeout }
        if take.contains(.headerTimeout) { headerTimeout = values.headerTimeout }
        if take.contains(.lowSpeed) { lowSpeed = values.lowSpeed }
        if take.contains(.credentials) {
            user = values.user
            password = values.password
        }
        if take.contains(.maxRedirects) { maxRedirects = values.maxRedirects }
        if take.contains(.maxResponseSize) { maxResponseSize = values.maxResponseSize }
        if take.contains(.caFile) { caFile = values.caFile }
        if take.contains(.retry) { retry.enabled = values.retry.enabled }
        if take.contains(.retryDelay) { retry.delay = values.retry.delay }
        if take.contains(.retryOutcomes) { retry.outcomes = values.retry.outcomes }
        if take.contains(.retryBackoff) {
            retry.multiplier = values.retry.multiplier
            retry.maxDelay = values.retry.maxDelay
            retry.jitter = values.retry.jitter
        }
        if take.contains(.retryStatuses) { retry.statuses = values.retry.statuses }
        if take.contains(.retryNonIdempotent) { retry.retriesNonIdempotent = values.retry.retriesNonIdempotent }
        if take.contains(.maxAttempts) { retry.maxAttempts = values.retry.maxAttempts }
        let removed = removedHeaders
        values.headers.forEach { line in
            guard headers.count < Validation.maxHeaderCount, !headers.contains(named: line.name),
                  removed.isEmpty || !removed.contains(RequestHeaders.lowercased(line.name)) else { return }
            headers.append(line)
        }
        transport = transport.inheriting(values.transport)
    }
}

/// A queue's defaults request and cookie jar, made on first use.
// @unchecked Sendable: every `var` under `lock`.
final class QueueTransport: @unchecked Sendable {
    private let lock = Lock()
    private var defaultsRequest: Request?
    /// Set once the defaults request is made (it stays until the queue is closed).
    private let hasDefaults = Atomic<Bool>(false)
    private var jar: CookieJar?
    private var closed = false

    /// The defaults request (made on first call); nil once the queue is closed.
    func defaults() -> Request? {
        lock.withLock {
            if defaultsRequest == nil, !closed {
                defaultsRequest = Request.makeDefaults()
                hasDefaults.store(true, ordering: .releasing)
            }
            return defaultsRequest
        }
    }

    /// `rq_add`: the queue takes the request, which takes the queue's defaults and cookie jar once
    /// accepted (`Queue.add`, under the request's lock): a request the queue refuses (already
    /// added, queue closed, ...) keeps its own settings.
    func add(_ r: Request, to q: Queue) -> rq_result {
        // Most queues have no defaults: no lock to take to know it.
        q.add(r, defaults: hasDefaults.load(ordering: .acquiring) ? snapshot() : nil, transport: self)
    }

    /// What `rq_add` gives a request: nil when the queue has no defaults.
    func snapshot() -> RequestDefaults? {
        guard let d = lock.withLock({ defaultsRequest }) else { return nil }
        // Copy the values under the defaults' lock, then apply them under the request's (never
        // both at once: requests share lock stripes).
        return d.lock.withLock { RequestDefaults(explicit: d.explicitSettings, values: d.inheritable) }
    }

    /// The queue's cookie jar (made on first call); nil when libcurl cannot make one.
    func cookieJar() -> CookieJar? {
        lock.withLock {
            if jar == nil, !closed { jar = CookieJar() }
            return jar
        }
    }

    /// Connection limits of the queue's multi handle (total, per host; 0 = none), and whether
    /// they changed since the engine last set them.
    private var connectionLimits = (total: 0, perHost: 0)
    private var connectionLimitsChanged = false
    /// Set with `connectionLimitsChanged` (under `lock`), cleared by the engine once it took the
    /// limits: a start whose queue's limits did not change (most) takes no lock to know it.
    private let connectionLimitsMayHaveChanged = Atomic<Bool>(false)

    func setConnectionLimits(total: Int, perHost: Int) {
        lock.withLock {
            connectionLimits = (total, perHost)
            connectionLimitsChanged = true
            connectionLimitsMayHaveChanged.store(true, ordering: .releasing)
        }
    }

    var currentConnectionLimits: (total: Int, perHost: Int) { lock.withLock { connectionLimits } }

    /// Engine thread, before a transfer starts: sets changed limits on the multi handle. (A change
    /// made while the engine takes the limits sets the flag again after its store below, or is
    /// taken by this call: the flag is cleared under the lock, with `connectionLimitsChanged`.)
    func applyConnectionLimits(_ multi: UnsafeMutableRawPointer) {
        guard connectionLimitsMayHaveChanged.load(ordering: .acquiring) else { return }
        guard let limits: (total: Int, perHost: Int) = lock.withLock({
            connectionLimitsMayHaveChanged.store(false, ordering: .relaxed)
            defer { connectionLimitsChanged = false }
            return connectionLimitsChanged ? connectionLimits : nil
        }) else { return }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, limits.total)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, limits.perHost)
    }

    /// The queue is freed: its defaults handle goes (the jar lives on while transfers hold it).
    func close() {
        let d: Request? = lock.withLock {
            closed = true
            defer { defaultsRequest = nil }
            return defaultsRequest
        }
        if let d { HandleTable.shared.remove(d.handle) }
    }
}

/// A libcurl share of cookies, used by every transfer of a queue that asks for cookies and by the
/// cookie calls of the C API (any thread: libcurl locks it through the shim's mutex). It holds
/// those transfers' TLS sessions too (a handle has one share; the others use `Engine.tlsShare`).
// @unchecked Sendable: libcurl locks `share` through the shim's mutex; `easy` and `budget` are used
// under `lock`.
final class CookieJar: @unchecked Sendable {
    let share: UnsafeMutableRawPointer
    /// An easy handle on the share for the API's reads and writes, under `lock`.
    private let easy: UnsafeMutableRawPointer
    private let lock = Lock()
    /// The jar's budget (under `lock`).
    private var budget = CookieBudget()

    init?() {
        guard let share = ccurl_share_new(1) else { return nil }
        guard let easy = curl_easy_init() else {
            ccurl_share_free(share)
            return nil
        }
        self.share = share
        self.easy = easy
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, ccurl_share_handle(share))
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIEFILE, "")
    }

    deinit {
        curl_easy_cleanup(easy)
        ccurl_share_free(share)
    }

    /// The cookies as lines of a Netscape cookie file (without its header), not those expired:
    /// libcurl drops expired cookies when it next stores one, so the last one it stored may be
    /// expired (a Set-Cookie with Max-Age=0 or a past Expires, which deletes a cookie, leaves one).
    func list() -> [UInt8]? {
        lock.withLock {
            guard let lines = cookieLines() else { return nil }
            let now = Int64(time(nil))
            var text: [UInt8] = []
            for line in lines where !CookieBudget.expired(line, now: now) {
                text.append(contentsOf: line)
                text.append(0x0A)
            }
            return text
        }
    }

    /// The jar's cookies as libcurl lists them (Netscape lines without newlines), under `lock`.
    private func cookieLines() -> [[UInt8]]? {
        var list: UnsafeMutablePointer<curl_slist>?
        guard ccurl_easy_getinfo_slist(easy, CURLINFO_COOKIELIST, &list) == CURLE_OK else { return nil }
        defer { curl_slist_free_all(list) }
        var lines: [[UInt8]] = []
        var item = list
        while let node = item {
            if let data = node.pointee.data {
                lines.append(Array(UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self),
                                                       count: strlen(data))))
            }
            item = node.pointee.next
        }
        return lines
    }

    func clear() {
        lock.withLock {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIELIST, "ALL")
            budget.reset()
        }
    }

    /// The engine thread, after an attempt of a request using this jar that received `lines`
    /// Set-Cookie lines of `bytes` bytes (Transfer.end): checks the jar's budget when they may
    /// have taken it over, or when enough arrived to record their order (CookieBudget).
    func received(setCookieLines lines: Int, bytes: Int) {
        lock.withLock {
            if budget.received(lines: lines, bytes: bytes) { enforceBudget() }
        }
    }

    /// Under `lock`: reads the jar and, when it is over budget, empties it and adds back what the
    /// budget keeps, oldest first (so that libcurl's own order stays the order of arrival). The
    /// queue's transfers run on its engine thread, which is where this runs after a transfer, or
    /// are held off by libcurl's share lock for each call; the API's calls take `lock`.
    private func enforceBudget() {
        guard let lines = cookieLines(), let kept = budget.check(lines, now: Int64(time(nil))) else { return }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIELIST, "ALL")
        for var line in kept {
            line.append(0)
            _ = line.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIELIST, $0.baseAddress) }
        }
    }

    /// Adds the cookies of a Netscape cookie file (or a file of Set-Cookie lines). libcurl reads
    /// it quietly: an unreadable file adds nothing, so check that it can be opened first.
    func load(_ path: UnsafePointer<CChar>) -> Bool {
        let file = fopen(path, "r")
        guard let file else { return false }
        fclose(file)
        return lock.withLock {
            // The handle's list of cookie files holds only this one: RELOAD reads them all. (Emptying
            // the list detaches the handle from the share's cookies: attach it again.)
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIEFILE, nil)
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, nil)
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, ccurl_share_handle(share))
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIEFILE, path)
            guard ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIELIST, "RELOAD") == CURLE_OK else { return false }
            enforceBudget() // a file holds any number of cookies: the budget applies to it too
            return true
        }
    }

    /// Writes every cookie to a Netscape cookie file (replacing it).
    func save(_ path: UnsafePointer<CChar>) -> Bool {
        // libcurl does not report a failed write: write the file ourselves from the list.
        guard let text = list() else { return false }
        guard let file = fopen(path, "w") else { return false }
        let header = "# Netscape HTTP Cookie File\n# Written by librequestqueue (libcurl's cookie engine).\n\n"
        var ok = fputs(header, file) >= 0
        if !text.isEmpty { ok = text.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) == $0.count } && ok }
        return fclose(file) == 0 && ok
    }
}

/// Every host:port that a request pinned to an address (any queue): libcurl keeps the entries in
/// its DNS cache, which later requests of the queue would use.
enum ResolveOverrides {
    static let lock = Lock()
    nonisolated(unsafe) static var hosts = Set<[UInt8]>() // under `lock`
    /// Whether `hosts` has an entry: set under `lock` (and never cleared), so that the attempts of
    /// a process that pins no host take no lock.
    static let any = Atomic<Bool>(false)
}

/// The default User-Agent: "librequestqueue/<version> libcurl/<version>".
let defaultUserAgent: CString = {
    var agent = "librequestqueue/" + String(cString: StaticNames.version)
    if let info = curl_version_info(CURLVERSION_TENTH), let version = info.pointee.version {
        agent += " libcurl/" + String(cString: version)
    }
    return Array(agent.utf8CString)
}()

/// The User-Agent of a request, as CURLOPT_USERAGENT takes it and as a line of the header list.
enum Agent {
    /// None is sent (an empty User-Agent setting).
    case none
    /// The library's own (`defaultUserAgent`).
    case standard
    /// The caller's, NUL-terminated; `line` is nil when it is blank (white space only), which
    /// libcurl leaves out of a header list but sends from CURLOPT_USERAGENT.
    case custom(option: CString, line: CString?)

    init(_ setting: [UInt8]?) {
        guard let setting else {
            self = .standard
            return
        }
        guard !setting.isEmpty else {
            self = .none
            return
        }
        let option = setting.map { CChar(bitPattern: $0) } + [0]
        let blank = setting.allSatisfy { $0 == 0x20 || $0 == 0x09 || ($0 >= 0x0A && $0 <= 0x0D) }
        self = .custom(option: option, line: blank ? nil : Array("User-Agent: ".utf8CString.dropLast()) + option)
    }
}

/// The header lists of requests without header lines of their own (the common case), made once
/// and never freed: libcurl only reads a list. Indexed by the lines they hold (1: the default
/// User-Agent, 2: an empty Content-Type, 4: Accept-Encoding; see `setHeaders`); nil where memory
/// ran out (the transfer then makes its own) or for the empty list.
/// The User-Agent and Accept-Encoding lines, when both are in, are one entry with the CRLF between
/// them in it: the same bytes sent, but libcurl formats each entry through its printf and compares
/// a dozen header names with each (about 1.5k instructions per request less for one entry less).
/// An empty "Accept-Encoding:" entry, which libcurl does not send, stands for the line in its
/// lookup: without it libcurl would add its own for CURLOPT_ACCEPT_ENCODING.
// nonisolated(unsafe): written once by the initializer, only read afterwards (by every engine).
nonisolated(unsafe) let sharedHeaderLists: [UnsafeMutablePointer<curl_slist>?] = (0..<8).map { index in
    var list: UnsafeMutablePointer<curl_slist>?
    let lines = index & 5 == 5
        ? [(5, acceptEncodingOffLine), (2, contentTypeOffLine), (5, agentAndEncodingLines)]
        : [(1, defaultUserAgentLine), (2, contentTypeOffLine), (4, acceptEncodingHeader)]
    for (bits, line) in lines where index & bits == bits {
        guard let longer = line.withUnsafeBufferPointer({ curl_slist_append(list, $0.baseAddress) }) else {
            curl_slist_free_all(list)
            return nil
        }
        list = longer
    }
    return list
}

/// "User-Agent: <the default>", for a header list.
let defaultUserAgentLine: CString = Array("User-Agent: ".utf8CString.dropLast()) + defaultUserAgent

/// The Accept-Encoding line libcurl sends for CURLOPT_ACCEPT_ENCODING "": every encoding it
/// decodes, in its order. libcurl formats that line anew for every request (about 5,000
/// instructions); given in the request's header list, made once here, it is not.
let acceptEncodingHeader: CString = Array("Accept-Encoding: ".utf8CString.dropLast()) + acceptedEncodings

/// The encodings of that line, as CURLOPT_ACCEPT_ENCODING takes them: the option turns decoding on
/// (libcurl's own line for it gives way to the header list's, `setHeaders`). Given as "", the same
/// list, libcurl would make it anew for every handle (about 1,300 instructions more).
let acceptedEncodings: CString = {
    let features = curl_version_info(CURLVERSION_TENTH)?.pointee.features ?? 0
    var codings: [String] = []
    if features & CURL_VERSION_LIBZ != 0 { codings += ["deflate", "gzip"] }
    if features & CURL_VERSION_BROTLI != 0 { codings.append("br") }
    if features & CURL_VERSION_ZSTD != 0 { codings.append("zstd") }
    return Array((codings.isEmpty ? "identity" : codings.joined(separator: ", ")).utf8CString)
}()

/// libcurl would add "Content-Type: application/x-www-form-urlencoded" to a body: this line
/// removes it (the caller's own header goes instead, if any).
let contentTypeOffLine: CString = Array("Content-Type:".utf8CString)

/// An empty "Accept-Encoding:" line: libcurl sends no line for it, nor its own Accept-Encoding line.
let acceptEncodingOffLine: CString = Array("Accept-Encoding:".utf8CString)

/// `defaultUserAgentLine` and `acceptEncodingHeader` as one header-list entry (libcurl ends an
/// entry with CRLF).
let agentAndEncodingLines: CString = Array(defaultUserAgentLine.dropLast() + "\r\n".utf8CString.dropLast()) + acceptEncodingHeader

extension Transfer {
    /// Sets the transport options of a freshly reset handle (called by `apply`).
    func applyTransport(_ o: Options) {
        let t = o.transport
        func string(_ option: CURLoption, _ bytes: [UInt8]?) {
            guard let bytes else { return }
            var text = bytes
            text.append(0)
            _ = text.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, option, $0.baseAddress) }
        }
        if t.decodeContent ?? true {
            // Every encoding this libcurl decodes (gzip, deflate, br, zstd on Debian's).
            _ = acceptedEncodings.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_ACCEPT_ENCODING, $0.baseAddress) }
            // While a streamed transfer is paused, libcurl keeps the decoded rest of its last read:
            // smaller reads bound it (StreamChunk.decodedReadSize).
            if o.streamsBody { _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, StreamChunk.decodedReadSize) }
        } else {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0)
        }
        // The User-Agent is set for each attempt (`configureRoute`).
        string(CURLOPT_PROXY, t.proxy)
        string(CURLOPT_NOPROXY, t.noProxy)
        string(CURLOPT_PROXY_CAINFO, t.proxyCAFile)
        string(CURLOPT_SSLCERT, t.clientCertificate)
        string(CURLOPT_SSLKEY, t.clientKey)
        string(CURLOPT_KEYPASSWD, t.keyPassword)
        string(CURLOPT_PINNEDPUBLICKEY, t.pinnedPublicKey)
        string(CURLOPT_CAPATH, t.caDirectory)
        if let version = t.tlsMinVersion {
            let value = switch version {
            case .tls1_0: CURL_SSLVERSION_TLSv1_0
            case .tls1_1: CURL_SSLVERSION_TLSv1_1
            case .tls1_2: CURL_SSLVERSION_TLSv1_2
            case .tls1_3: CURL_SSLVERSION_TLSv1_3
            }
            _ = ccurl_easy_setopt_long(easy, CURLOPT_SSLVERSION, Int(value))
        }
        if t.verifyTLS == false {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
        }
        string(CURLOPT_UNIX_SOCKET_PATH, t.unixSocket)
        string(CURLOPT_INTERFACE, t.interface)
        if let ip = t.ipVersion, ip != .any {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_IPRESOLVE, ip == .v4 ? Int(CURL_IPRESOLVE_V4) : Int(CURL_IPRESOLVE_V6))
        }
        if let idle = t.tcpKeepAlive, idle > 0 {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_KEEPIDLE, idle)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_KEEPINTVL, idle)
        }
        if let speed = t.maxReceiveSpeed, speed > 0 {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(speed))
            // libcurl 7.88 checks the limit only between bursts of reads: it reads while the
            // socket has data, up to 100 buffers at once. Buffers of a hundredth of the limit (as
            // the curl tool does below 16 KiB/s) keep a burst within one second's worth.
            _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, Int(min(max(speed / 100, 1024), 16384)))
        }
        if let speed = t.maxSendSpeed, speed > 0 { _ = ccurl_easy_setopt_off(easy, CURLOPT_MAX_SEND_SPEED_LARGE, curl_off_t(speed)) }
        switch t.httpVersion ?? .automatic {
        case .automatic: break
        case .http1_1: _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        case .http2PriorKnowledge: _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE))
        }
        // Pinning a host to an address, a local interface or an IP version: libcurl matches
        // connections by host name and port, so a connection made under such a setting must not
        // serve another request, nor may such a request take a connection made without it.
        // Debian's libcurl 7.88.1 breaks h2c on a kept connection ("Error in the HTTP2 framing
        // layer" on its second request): each h2c request makes its own connection.
        let h2c = t.httpVersion == .http2PriorKnowledge && !o.https
        if t.resolve != nil || t.interface != nil || (t.ipVersion ?? .any) != .any || h2c {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1)
        }
        if t.cookies == true, let jar = o.cookieJar {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, ccurl_share_handle(jar.share))
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIEFILE, "") // turns the cookie engine on
        } else if o.https, let share = engine.tlsShare {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, ccurl_share_handle(share))
        } else {
            // curl_easy_reset keeps a handle's share (and with it the cookies): detach it.
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, nil)
        }
    }

    /// libcurl copies the proxy's CA file and directory (its defaults: the system's) into every
    /// connection it sets up for a transfer, reused or not (two `strdup` and two `free` per
    /// transfer, about 300 instructions). With no proxy (`Route.proxyOff`) they are never read:
    /// unset then; set again, the request's or libcurl's defaults (CURLINFO_CAINFO and
    /// CURLINFO_CAPATH), when a proxy can carry the attempt.
    private func setProxyCA(off: Bool, _ o: Options) {
        var file: UnsafeMutablePointer<CChar>?, directory: UnsafeMutablePointer<CChar>?
        if !off {
            _ = ccurl_easy_getinfo_str(easy, CURLINFO_CAINFO, &file)
            _ = ccurl_easy_getinfo_str(easy, CURLINFO_CAPATH, &directory)
        }
        if !off, let own = o.transport.proxyCAFile {
            var text = own
            text.append(0)
            _ = text.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_PROXY_CAINFO, $0.baseAddress) }
        } else {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PROXY_CAINFO, file)
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PROXY_CAPATH, directory)
    }

    /// Before curl_easy_reset: libcurl 7.88's reset leaks the list of cookie files (set by
    /// CURLOPT_COOKIEFILE ""); emptying it keeps the share's cookies.
    func prepareReset(_ previous: Options?) {
        if previous?.cookieJar != nil { _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIEFILE, nil) }
    }

    /// The resolve overrides of this attempt, set on every attempt: libcurl keeps them in the
    /// queue's DNS cache, so entries of earlier requests are removed ("-host:port") for one
    /// that does not override them.
    func resolveList(_ resolve: [[UInt8]]?) -> UnsafeMutablePointer<curl_slist>? {
        guard resolve != nil || ResolveOverrides.any.load(ordering: .acquiring) else { return nil }
        let overridden = ResolveOverrides.lock.withLock { ResolveOverrides.hosts }
        guard resolve != nil || !overridden.isEmpty else { return nil }
        var list: UnsafeMutablePointer<curl_slist>?
        var mine = Set<[UInt8]>()
        for entry in resolve ?? [] {
            var hostPort = entry
            if let c1 = entry.firstIndex(of: UInt8(ascii: ":")),
               let c2 = entry[(c1 + 1)...].firstIndex(of: UInt8(ascii: ":")) { hostPort = Array(entry[..<c2]) }
            mine.insert(hostPort)
            list = append(list, entry)
        }
        for hostPort in overridden where !mine.contains(hostPort) { list = append(list, [UInt8(ascii: "-")] + hostPort) }
        if !mine.isSubset(of: overridden) {
            ResolveOverrides.lock.withLock {
                ResolveOverrides.hosts.formUnion(mine)
                ResolveOverrides.any.store(true, ordering: .releasing)
            }
        }
        return list
    }

    private func append(_ list: UnsafeMutablePointer<curl_slist>?, _ bytes: [UInt8]) -> UnsafeMutablePointer<curl_slist>? {
        var text = bytes
        text.append(0)
        return text.withUnsafeBufferPointer { b in
            b.baseAddress.flatMap { curl_slist_append(list, UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
        } ?? list
    }
}

extension Transfer {
    /// What of an attempt's options follows from whether a proxy can carry it, and the header list
    /// set on the handle.
    struct Route {
        /// Whether CURLOPT_USERAGENT is set on the handle.
        var agentOption = false
        /// Whether no proxy can carry the attempt (see `configureRoute`).
        var direct = false
        /// Whether CURLOPT_PROXY, and CURLOPT_NOPROXY, are set to "" because no proxy can carry
        /// the attempt (see `configureRoute`).
        var proxyOff = false
        var noProxyOff = false
        /// The header list set on the handle (a shared one or `OwnHeaderList.list`).
        var headers: UnsafeMutablePointer<curl_slist>?
        /// Whether CURLOPT_COOKIE is set on the handle (`ownCookies`, `Transfer.setOwnCookies`).
        var cookies = false
        /// Whether CURLOPT_NOPROGRESS is 0 for a request without progress callbacks because a
        /// proxy carries the attempt (`Transfer.progress`).
        var progress = false
    }

    /// The header list last made for a request with header lines of its own (or removals), and
    /// what it was made from. The next attempt that would make the same list (a client sending
    /// the same Content-Type with every POST) sets it again instead of making it anew: about
    /// 4,000 instructions per request (the lines, the list's allocations, their release). Kept,
    /// set on the handle or not, until a new list replaces it or the transfer goes (deinit).
    struct OwnHeaderList {
        var list: UnsafeMutablePointer<curl_slist>?
        var headers = RequestHeaders()
        var removed: Set<String> = []
        /// The options the list was made with (the User-Agent line comes from them); nil: never
        /// reused (a resumed download's Range line, or a line missing: memory ran out).
        var options: Options?
        /// The lines added besides the request's (see `sharedHeaderLists`).
        var index = 0

        func matches(_ r: Request, _ removed: Set<String>, _ o: Options, _ index: Int) -> Bool {
            list != nil && options === o && self.index == index && headers.sameBytes(as: r.headers) && self.removed == removed
        }
    }

    /// Per attempt: the User-Agent, the proxy and the header list.
    ///
    /// libcurl formats CURLOPT_USERAGENT into a "User-Agent:" line for every transfer (about
    /// 5,000 instructions) and copies it into the request. When no proxy can carry the attempt
    /// (no proxy set, none in the environment, or the proxy setting ""), the same line goes in the
    /// header list instead, made once, and libcurl sends it to the server as before. Through a
    /// proxy the option stays: libcurl also sends it in CONNECT requests to the proxy, which never
    /// carry the header list (CURLHEADER_SEPARATE, libcurl's default), and a line in the list
    /// would be sent twice through a plain proxy. When the environment names no proxy,
    /// CURLOPT_PROXY and CURLOPT_NOPROXY "" say so to libcurl, which then does not read its five
    /// variables for each transfer either (the same decision: no proxy). The environment is read
    /// here, as libcurl reads it, when the attempt starts (once per turn of the engine's loop:
    /// `Engine.proxyInEnvironment`): http_proxy, https_proxy and all_proxy in any case (libcurl
    /// 7.88 reads http_proxy, https_proxy, HTTPS_PROXY, all_proxy and ALL_PROXY for an http or
    /// https transfer, lib/url.c, detect_proxy).
    func configureRoute(_ r: Request, _ o: Options) {
        let direct: Bool
        var proxyOff = false
        if let proxy = o.transport.proxy {
            direct = proxy.isEmpty
        } else {
            let engine = engine
            let inEnvironment = engine.proxyInEnvironment ?? (ccurl_environment_names_proxy() != 0)
            engine.proxyInEnvironment = inEnvironment
            direct = !inEnvironment
            proxyOff = direct
        }
        route.direct = direct
        // Through a proxy, libcurl's progress function is on (see `Transfer.progress`).
        if !o.progress, route.progress == direct {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, direct ? 1 : 0)
            route.progress = !direct
        }
        // Only with no proxy setting: CURLOPT_PROXY is otherwise the setting's (`applyTransport`).
        if proxyOff != route.proxyOff {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PROXY, proxyOff ? UnsafeRawPointer(emptyCString) : nil)
            setProxyCA(off: proxyOff, o)
            route.proxyOff = proxyOff
        }
        let noProxyOff = proxyOff && o.transport.noProxy == nil
        if noProxyOff != route.noProxyOff {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_NOPROXY, noProxyOff ? UnsafeRawPointer(emptyCString) : nil)
            route.noProxyOff = noProxyOff
        }
        // The User-Agent goes in the header list (`agentLine`) when the attempt is direct and the
        // agent has a line, else in the option, if there is one.
        let agentLine = direct && o.agent.hasLine
        let agentOption = !agentLine && !o.agent.isNone
        if agentOption != route.agentOption {
            switch o.agent {
            case .standard where agentOption:
                _ = defaultUserAgent.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_USERAGENT, $0.baseAddress) }
            case let .custom(value, _) where agentOption:
                _ = value.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_USERAGENT, $0.baseAddress) }
            default:
                _ = ccurl_easy_setopt_ptr(easy, CURLOPT_USERAGENT, nil)
            }
            route.agentOption = agentOption
        }
        setHeaders(r, o, agentLine: agentLine)
    }

    /// The header list: the User-Agent line (`configureRoute`), a resumed download's Range, the
    /// request's header lines, an empty Content-Type for a body without one, and libcurl's
    /// Accept-Encoding line when decoding. Requests without header lines of their own share a
    /// list made once (`sharedHeaderLists`).
    private func setHeaders(_ r: Request, _ o: Options, agentLine: Bool) {
        // (Most requests have no header lines of their own, and remove none.)
        let own = !r.headers.isEmpty
        // Headers the caller removed (a NULL value), those the library or libcurl adds included.
        let removed = r.removedHeaders
        func isRemoved(_ name: String) -> Bool { !removed.isEmpty && removed.contains(name) }
        // Which of the names looked for here the request's lines have (known when they were set).
        let names = r.headers.names
        let agent = agentLine && !names.contains(.userAgent) && !isRemoved("user-agent")
        let contentType = r.sendsBody && !names.contains(.contentType)
        // Decoding (CURLOPT_ACCEPT_ENCODING, see `applyTransport`): libcurl's own line, made once.
        let encoding = (o.transport.decodeContent ?? true) && !names.contains(.acceptEncoding)
            && !isRemoved("accept-encoding")
        // With the cookie jar, the request's own Cookie lines are not in the list: their values go
        // in CURLOPT_COOKIE (`ownCookies`), which libcurl sends in the jar's line, as RFC 6265 5.4
        // wants one Cookie line (a Cookie line in the list would come as a second one).
        let jarCookies = o.cookieJar != nil && names.contains(.cookie)
        ownCookies = jarCookies ? r.headers.cookieValue : nil
        var list: UnsafeMutablePointer<curl_slist>?
        let index = (agent ? 1 : 0) | (contentType ? 2 : 0) | (encoding ? 4 : 0)
        var replaced: UnsafeMutablePointer<curl_slist>?
        if !own, removed.isEmpty, resumeFrom == 0, !agent || o.agent.isStandard, index == 0 || sharedLists[index] != nil {
            list = sharedLists[index]
        } else if resumeFrom == 0, ownHeaderList.matches(r, removed, o, index) {
            list = ownHeaderList.list
        } else {
            var whole = true // (a list short of a line, memory having run out, is not kept for reuse)
            func append(_ line: UnsafePointer<CChar>?) {
                if let line, let longer = curl_slist_append(list, line) { list = longer } else { whole = false }
            }
            // The User-Agent and Accept-Encoding lines first (libcurl sends its own lines for
            // these options before the list's too); the default ones as one entry, as in the
            // shared lists (`sharedHeaderLists`): libcurl formats each entry, about 350
            // instructions besides its bytes.
            if agent, encoding, o.agent.isStandard {
                acceptEncodingOffLine.withUnsafeBufferPointer { append($0.baseAddress) }
                agentAndEncodingLines.withUnsafeBufferPointer { append($0.baseAddress) }
            } else {
                switch o.agent {
                case .standard where agent: defaultUserAgentLine.withUnsafeBufferPointer { append($0.baseAddress) }
                case let .custom(_, line?) where agent: line.withUnsafeBufferPointer { append($0.baseAddress) }
                default: break
                }
                if encoding { acceptEncodingHeader.withUnsafeBufferPointer { append($0.baseAddress) } }
            }
            // Resuming a download: our Range header replaces the request's.
            if resumeFrom > 0 { append("Range: bytes=\(resumeFrom)-") }
            // A Transfer-Encoding of the caller's frames a body: without one it would announce
            // chunks that never come (`o.sendsBody` is part of what a kept list matches).
            let skipRange = resumeFrom > 0 && names.contains(.range)
            let skipCoding = !o.sendsBody && names.contains(.transferEncoding)
            r.headers.forEach { line in
                if !(skipRange && line.isNamed("range")) && !(skipCoding && line.isNamed("transfer-encoding"))
                    && !(jarCookies && line.isNamed("cookie")) {
                    append(line.entry)
                }
            }
            // "Name:" keeps libcurl from adding its own (Accept, Expect, User-Agent, Host, ...);
            // the body's framing stays libcurl's.
            for name in removed where name != "content-length" && name != "transfer-encoding" && !(own && r.headers.contains(named: name)) {
                append(name + ":")
            }
            if contentType { contentTypeOffLine.withUnsafeBufferPointer { append($0.baseAddress) } }
            replaced = ownHeaderList.list
            ownHeaderList = OwnHeaderList(list: list, headers: r.headers, removed: removed,
                                          options: resumeFrom == 0 && whole ? o : nil, index: index)
        }
        if list != route.headers {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)
            route.headers = list
        }
        if ownCookies == nil, route.cookies { setOwnCookies(false) }
        // (Freed once the handle no longer points to it.)
        curl_slist_free_all(replaced)
    }
}

extension Agent {
    var isStandard: Bool {
        if case .standard = self { return true }
        return false
    }

    var isNone: Bool {
        if case .none = self { return true }
        return false
    }

    /// Whether the agent can go in a header list (see `custom`).
    var hasLine: Bool {
        switch self {
        case .none: false
        case .standard: true
        case let .custom(_, line): line != nil
        }
    }
}
