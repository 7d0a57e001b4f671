import CCurl

/// Figures of a request's last attempt (`rq_response_metrics`). Times in seconds, -1 when they do
/// not apply.
///
/// What libcurl forgets when the handle is reused is read at the end of the attempt (libcurl's
/// counters and times, as it reports them); the figures are made from them only when someone asks
/// (most responses are never asked).
struct Metrics {
    /// Whether an attempt ran (`none`: every time -1, every count 0).
    private var measured = false
    private var queuedRaw = -1.0
    /// libcurl's times in microseconds (CURLINFO_..._TIME_T; 0 for a step it did not reach, or
    /// that was not read: the TLS handshake of an http URL, the first byte when no header came).
    private var totalMicro: curl_off_t = 0
    private var lookupMicro: curl_off_t = 0
    private var connectMicro: curl_off_t = 0
    private var handshakeMicro: curl_off_t = 0
    private var firstMicro: curl_off_t = 0
    /// CURLINFO_NUM_CONNECTS and CURLINFO_HEADER_SIZE.
    private var connects = 0
    private var header = 0
    private var secure = false
    private(set) var bytesDown: UInt64 = 0
    private(set) var bytesUp: UInt64 = 0
    private(set) var wireBytesDown: UInt64 = 0
    /// The HTTP version of the last response: 10, 11, 20 or 30; 0 when no status line came.
    private(set) var httpVersion: Int32 = 0

    /// No attempt ran (a cancelled request, a transfer that could not be set up).
    static let none = Metrics()

    /// Reads the figures of the attempt that just ended on `easy` (engine thread, before the
    /// handle is reused). `queued` is from the request's acceptance to its first attempt; `secure`
    /// tells whether the last URL was https; `received` is the decoded body of the last response;
    /// `wire` are libcurl's counts of body bytes received and sent (CURLINFO_SIZE_DOWNLOAD_T and
    /// CURLINFO_SIZE_UPLOAD_T, which the caller has read already); `version` is the HTTP version of
    /// the last response when the caller knows it from its status line (libcurl is asked otherwise).
    init(easy: UnsafeMutableRawPointer, request: Request, secure: Bool, received: Int64,
         wire: (down: curl_off_t, up: curl_off_t), version known: Int32? = nil) {
        func micro(_ info: CURLINFO) -> curl_off_t {
            var value: curl_off_t = 0
            return ccurl_easy_getinfo_off(easy, info, &value) == CURLE_OK ? value : 0
        }
        measured = true
        if request.acceptedAt > 0, request.firstAttemptAt >= request.acceptedAt {
            queuedRaw = request.firstAttemptAt - request.acceptedAt
        }
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HEADER_SIZE, &header)
        totalMicro = micro(CURLINFO_TOTAL_TIME_T)
        lookupMicro = micro(CURLINFO_NAMELOOKUP_TIME_T)
        connectMicro = micro(CURLINFO_CONNECT_TIME_T)
        // (Each read costs about 90 instructions: those whose figure is not used are left out.)
        if secure { handshakeMicro = micro(CURLINFO_APPCONNECT_TIME_T) }
        if header > 0 { firstMicro = micro(CURLINFO_STARTTRANSFER_TIME_T) }
        self.secure = secure
        bytesDown = UInt64(max(0, received))
        // libcurl's count of the body as received, before a content or transfer decoding of its
        // own (chunked framing left out), and of the header bytes of every response.
        wireBytesDown = UInt64(max(0, wire.down))
        bytesUp = UInt64(max(0, wire.up))
        httpVersion = known ?? Metrics.httpVersion(of: easy)
    }

    init() {}

    /// Only the HTTP version, for a response's head (its other figures: none).
    init(httpVersion: Int32) { self.httpVersion = httpVersion }

    /// libcurl's HTTP version of the last response on `easy`: 10, 11, 20, 30, or 0.
    static func httpVersion(of easy: UnsafeMutableRawPointer) -> Int32 {
        var version = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_1_0): return 10
        case Int(CURL_HTTP_VERSION_1_1): return 11
        case Int(CURL_HTTP_VERSION_2_0): return 20
        case Int(CURL_HTTP_VERSION_3): return 30
        default: return 0
        }
    }

    /// libcurl's time in seconds; 0 for a step it did not reach.
    private static func seconds(_ micro: curl_off_t) -> Double { micro > 0 ? Double(micro) / 1e6 : 0 }

    var queued: Double { queuedRaw }
    var total: Double { measured ? Metrics.seconds(totalMicro) : -1 }
    var headerBytesDown: UInt64 { UInt64(max(0, header)) }
    var reused: Bool { measured && connects == 0 && header > 0 }

    /// The times of the steps: libcurl reports 0 for a step it did not reach, and a reused
    /// connection skips the first ones; each step ends no earlier than the one before it and no
    /// later than the total.
    private var steps: (dns: Double, connect: Double, tls: Double, firstByte: Double) {
        guard measured else { return (-1, -1, -1, -1) }
        let total = total
        let lookup = Metrics.seconds(lookupMicro), connected = Metrics.seconds(connectMicro)
        let handshake = Metrics.seconds(handshakeMicro), first = Metrics.seconds(firstMicro)
        var dns = -1.0, connect = -1.0, tls = -1.0, firstByte = -1.0
        let madeConnection = connected > 0 || reused
        if madeConnection || lookup > 0 { dns = min(lookup, total) }
        if madeConnection { connect = min(max(connected, dns), total) }
        if secure, madeConnection, handshake > 0 || reused { tls = min(max(handshake, connect), total) }
        if header > 0 { firstByte = min(max(first, tls, connect, dns), total) }
        return (dns, connect, tls, firstByte)
    }

    var dns: Double { steps.dns }
    var connect: Double { steps.connect }
    var tls: Double { steps.tls }
    var firstByte: Double { steps.firstByte }
}
