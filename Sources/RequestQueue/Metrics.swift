import CCurl

/// Figures of a request's last attempt (`rq_response_metrics`). Times in seconds, -1 when they do
/// not apply.
struct Metrics {
    var queued = -1.0
    var dns = -1.0
    var connect = -1.0
    var tls = -1.0
    var firstByte = -1.0
    var total = -1.0
    var bytesDown: UInt64 = 0
    var bytesUp: UInt64 = 0
    var wireBytesDown: UInt64 = 0
    var headerBytesDown: UInt64 = 0
    var reused = false
    /// The HTTP version of the last response: 10, 11, 20 or 30; 0 when no status line came.
    var httpVersion: Int32 = 0

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
        func seconds(_ info: CURLINFO) -> Double {
            var micro: curl_off_t = 0
            guard ccurl_easy_getinfo_off(easy, info, &micro) == CURLE_OK, micro > 0 else { return 0 }
            return Double(micro) / 1e6
        }
        if request.acceptedAt > 0, request.firstAttemptAt >= request.acceptedAt {
            queued = request.firstAttemptAt - request.acceptedAt
        }
        var connects = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        var header = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HEADER_SIZE, &header)
        total = seconds(CURLINFO_TOTAL_TIME_T)
        // libcurl reports 0 for a step it did not reach; a reused connection skips the first ones.
        let lookup = seconds(CURLINFO_NAMELOOKUP_TIME_T)
        let connected = seconds(CURLINFO_CONNECT_TIME_T)
        // (Each read costs about 90 instructions: those whose figure is not used are left out.)
        let handshake = secure ? seconds(CURLINFO_APPCONNECT_TIME_T) : 0
        let first = header > 0 ? seconds(CURLINFO_STARTTRANSFER_TIME_T) : 0
        reused = connects == 0 && header > 0
        let madeConnection = connected > 0 || reused
        if madeConnection || lookup > 0 { dns = min(lookup, total) }
        if madeConnection { connect = min(max(connected, dns), total) }
        if secure, madeConnection, handshake > 0 || reused { tls = min(max(handshake, connect), total) }
        if header > 0 { firstByte = min(max(first, tls, connect, dns), total) }
        bytesDown = UInt64(max(0, received))
        // libcurl's count of the body as received, before a content or transfer decoding of its
        // own (chunked framing left out), and of the header bytes of every response.
        wireBytesDown = UInt64(max(0, wire.down))
        headerBytesDown = UInt64(max(0, header))
        bytesUp = UInt64(max(0, wire.up))
        if let known {
            httpVersion = known
            return
        }
        var version = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_1_0): httpVersion = 10
        case Int(CURL_HTTP_VERSION_1_1): httpVersion = 11
        case Int(CURL_HTTP_VERSION_2_0): httpVersion = 20
        case Int(CURL_HTTP_VERSION_3): httpVersion = 30
        default: httpVersion = 0
        }
    }

    init() {}
}
