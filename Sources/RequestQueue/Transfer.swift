import CCurl
import Glibc
import RequestQueueCore

/// A libcurl easy handle and the state of the attempt it runs. Lives on the engine thread; the
/// engine keeps idle ones in a pool, so that a handle keeps its connection-independent options
/// from one attempt to the next and only what differs is set again.
final class Transfer {
    let easy: UnsafeMutableRawPointer
    private unowned let engine: Engine
    /// The attempt running on this transfer; nil while it waits in the pool. libcurl calls back
    /// only between `begin` and `end`; the callbacks still check it and stop the transfer if not.
    private(set) var request: Request?
    private(set) var generation: UInt64 = 0
    /// Position in the engine's list of running transfers.
    var slot = -1
    private let body = ByteBuffer()
    /// The response's header lines as received (without the status line), parsed by `Response`.
    private let headers = ByteBuffer()
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The resolve overrides of the current attempt (Transport.swift).
    private var resolveOverrides: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    /// The options set on the handle besides those of every attempt (URL, headers, body); nil
    /// until the first attempt.
    private var options: Options?
    private var outOfMemory = false
    private var tooLarge = false
    private var reportedDownload: (done: Int64, total: Int64) = (-1, -2)
    private var reportedUpload: (done: Int64, total: Int64) = (-1, -2)
    /// Bytes moved (headers, body up and down) at the last idle check, and when they last changed.
    private var bytesSeen: Int64 = -1
    private var lastActivity = 0.0

    // Streaming (see Streaming.swift).
    /// Where the body of the current response goes, decided when its headers end.
    private enum Sink {
        case undecided
        /// Collected into `body`, delivered in the response.
        case buffer
        /// Posted in chunks to the request's body callback.
        case callback
        /// Written to the request's output file.
        case file
    }
    private var sink = Sink.undecided
    /// The status of the current response, from its status line.
    private var status = 0
    /// Body bytes received by this attempt, and those of the current streamed body.
    private var received: Int64 = 0
    private var streamed: UInt64 = 0
    /// Whether the write callback paused the transfer, waiting for the delivery to catch up. A
    /// paused handle holds libcurl's buffered data: it is never reused.
    private(set) var paused = false
    /// With resume: the size of the file when the attempt started, asked for with a Range header.
    private var resumeFrom: Int64 = 0
    private var file: OutputFile?
    private var fileError: String?
    private var rangeError: String?

    /// The options of a request that stay on the handle between attempts. Two attempts with equal
    /// options share the handle's settings; different ones reset it. Made once per request (and
    /// again after its credentials change: see `Request.transferOptions`).
    final class Options: Equatable {
        let method: String
        let sendsBody: Bool
        let maxRedirects: Int
        let maxResponseSize: UInt64
        let caFile: CString?
        let https: Bool
        let streamsBody: Bool
        let progress: Bool
        let timeout: Double
        let connectTimeout: Double
        let user: CString?
        let password: CString?
        let auth: UInt
        let transport: TransportSettings
        let cookieJar: CookieJar?

        static func == (a: Options, b: Options) -> Bool {
            a === b || (a.method == b.method && a.sendsBody == b.sendsBody && a.maxRedirects == b.maxRedirects
                && a.maxResponseSize == b.maxResponseSize && a.caFile == b.caFile && a.https == b.https
                && a.streamsBody == b.streamsBody && a.progress == b.progress && a.timeout == b.timeout
                && a.connectTimeout == b.connectTimeout && a.user == b.user && a.password == b.password && a.auth == b.auth
                && a.transport == b.transport && a.cookieJar === b.cookieJar)
        }

        init(_ r: Request) {
            method = r.method
            sendsBody = r.sendsBody
            maxRedirects = r.maxRedirects
            maxResponseSize = r.maxResponseSize
            caFile = r.caFile
            https = r.url.scheme == "https"
            streamsBody = r.streamsBody
            progress = r.downloadProgress != nil || (r.uploadProgress != nil && r.hasBody)
            timeout = r.timeout
            connectTimeout = r.connectTimeout
            transport = r.transport
            cookieJar = r.cookieJar
            if let credentials = r.authCredentials {
                user = credentials.user
                password = credentials.password
                auth = switch credentials.scheme {
                case .basic: ccurl_auth_basic
                case .digest: ccurl_auth_digest
                case .any: ccurl_auth_any
                }
            } else if let user = r.user {
                self.user = user
                password = r.password ?? [0]
                auth = ccurl_auth_basic
            } else {
                user = nil
                password = nil
                auth = 0
            }
        }
    }

    init?(engine: Engine) {
        guard let easy = curl_easy_init() else { return nil }
        self.easy = easy
        self.engine = engine
        errorBuffer.pointee = 0
        setFixedOptions()
    }

    deinit {
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
        curl_slist_free_all(headerList)
        curl_slist_free_all(resolveOverrides)
        _ = file?.close()
    }

    /// Starts an attempt: resets the per-attempt state and sets the handle's options.
    func begin(_ request: Request, generation: UInt64) {
        self.request = request
        self.generation = generation
        outOfMemory = false
        tooLarge = false
        reportedDownload = (-1, -2)
        reportedUpload = (-1, -2)
        bytesSeen = -1
        lastActivity = Clock.now()
        sink = .undecided
        status = 0
        received = 0
        streamed = 0
        resumeFrom = 0
        fileError = nil
        rangeError = nil
        // An attempt that ended without a response (aborted) leaves its bytes here.
        body.removeAll()
        headers.removeAll()
        errorBuffer.pointee = 0
        configure(request)
    }

    /// Ends the attempt (the handle is out of the multi handle): drops what the handle points into.
    func end() {
        if headerList != nil {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, nil)
            curl_slist_free_all(headerList)
            headerList = nil
        }
        if resolveOverrides != nil {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_RESOLVE, nil)
            curl_slist_free_all(resolveOverrides)
            resolveOverrides = nil
        }
        if request?.sendsBody == true { _ = ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, nil) }
        _ = file?.close()
        file = nil
        request = nil
    }

    /// The options of every attempt that do not depend on the request.
    private func setFixedOptions() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_WRITEFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            return Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef { $0.bodyData(data, size * count) }
        })
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_HEADERFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            let accepted = Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef {
                $0.headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
            }
            return accepted ? size * count : 0
        })
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        _ = ccurl_easy_setopt_xferinfo_fn(easy) { me, _, dlnow, _, ulnow in
            guard let me else { return 0 }
            Unmanaged<Transfer>.fromOpaque(me).takeUnretainedValue()
                .progress(downloaded: Int64(dlnow), uploaded: Int64(ulnow))
            return 0
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
    }

    /// Sets the options of this attempt: those that differ from the previous attempt's (after a
    /// reset), then the URL, headers and body, which every attempt sets.
    private func configure(_ r: Request) {
        if r.firstAttemptAt == 0 { r.firstAttemptAt = lastActivity }
        if let path = r.outputPath {
            file = OutputFile(path: path)
            if r.outputResume { resumeFrom = OutputFile.resumableSize(path) }
        }
        let wanted = r.transferOptions ?? Options(r)
        r.transferOptions = wanted
        if options != wanted {
            if options != nil {
                prepareReset(options)
                curl_easy_reset(easy)
                setFixedOptions()
            }
            apply(wanted)
            options = wanted
        }
        _ = r.url.string.withCString { ccurl_easy_setopt_ptr(easy, CURLOPT_URL, $0) }
        configureHeaders(r)
        resolveOverrides = resolveList(wanted.transport)
        if let resolveOverrides { _ = ccurl_easy_setopt_ptr(easy, CURLOPT_RESOLVE, resolveOverrides) }
        if r.sendsBody {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.count))
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, UnsafeRawPointer(r.body.base) ?? UnsafeRawPointer(emptyCString))
        }
    }

    /// Sets the options of a freshly reset handle.
    private func apply(_ o: Options) {
        _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, o.maxRedirects == 0 ? 0 : 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, o.maxRedirects)
        if o.maxResponseSize > 0 {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(clamping: o.maxResponseSize))
        }
        if let caFile = o.caFile { _ = caFile.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_CAINFO, $0.baseAddress) } }
        // Over TLS, wait for a possible HTTP/2 connection to multiplex on; on plain http the wait
        // would serialize requests behind a slow response.
        if o.https { _ = ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1) }
        // A streamed body: read the connection in bigger pieces (libcurl still passes at most 16 KiB
        // to the write callback at a time).
        if o.streamsBody { _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 65536) }
        if o.progress { _ = ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0) }
        switch o.method {
        case "HEAD":
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case "GET" where !o.sendsBody:
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "POST":
            break
        default:
            _ = o.method.withCString { ccurl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) }
        }
        if o.timeout > 0 { _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(min(o.timeout * 1000, 1e12).rounded(.up))) }
        if o.connectTimeout > 0 {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(min(o.connectTimeout * 1000, 1e12).rounded(.up)))
        }
        if let user = o.user, let password = o.password {
            _ = user.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_USERNAME, $0.baseAddress) }
            _ = password.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_PASSWORD, $0.baseAddress) }
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTPAUTH, Int(bitPattern: o.auth))
        }
        applyTransport(o)
    }

    private func configureHeaders(_ r: Request) {
        var list: UnsafeMutablePointer<curl_slist>?
        // Resuming a download: our Range header replaces the request's.
        if resumeFrom > 0 { list = curl_slist_append(list, "Range: bytes=\(resumeFrom)-") ?? list }
        for header in r.headers where resumeFrom == 0 || header.lowercasedName != "range" {
            var line = Array(header.name.utf8)
            if header.value.isEmpty {
                line.append(UInt8(ascii: ";"))
            } else {
                line.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
                line.append(contentsOf: header.value)
            }
            line.append(0)
            list = line.withUnsafeBufferPointer { bytes in
                bytes.baseAddress.flatMap { curl_slist_append(list, UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            } ?? list
        }
        // libcurl would add "Content-Type: application/x-www-form-urlencoded" to a body; send the
        // caller's headers only.
        if r.sendsBody, !r.headers.contains(where: { $0.lowercasedName == "content-type" }) {
            list = curl_slist_append(list, "Content-Type:") ?? list
        }
        headerList = list
        if let list { _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list) }
    }

    /// One header line; returns false to abort the transfer (the output file cannot be used).
    private func headerLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let request else { return false }
        let bytes = line.bindMemory(to: UInt8.self)
        // A status line starts a new response (a redirect, a 100 Continue, a 401 before auth).
        if bytes.count >= 5, bytes[0] == 0x48, bytes[1] == 0x54, bytes[2] == 0x54, bytes[3] == 0x50, bytes[4] == 0x2F {
            headers.removeAll()
            status = Transfer.statusCode(bytes)
            sink = .undecided
            return true
        }
        // The blank line ends the headers: the body's destination is known now.
        if bytes.allSatisfy({ $0 == 0x0D || $0 == 0x0A }) {
            return sink != .undecided || decideSink(request)
        }
        return HeaderLines.append(line, to: headers)
    }

    /// The status code of a status line ("HTTP/1.1 206 Partial Content"), or 0.
    private static func statusCode(_ line: UnsafeBufferPointer<UInt8>) -> Int {
        guard let space = line.firstIndex(of: 0x20) else { return 0 }
        var code = 0
        var index = space + 1
        while index < line.count, index < space + 4, line[index] >= 0x30, line[index] <= 0x39 {
            code = code * 10 + Int(line[index] - 0x30)
            index += 1
        }
        return index == space + 4 ? code : 0
    }

    /// Chooses where the body of the current response goes: a 2xx response of a streaming request
    /// goes to the callback or the file (opened here), anything else to `body`. Returns false when
    /// the file cannot be used, which aborts the transfer.
    private func decideSink(_ request: Request) -> Bool {
        if status == 0 { _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        guard (200...299).contains(status), request.streamsBody else {
            sink = .buffer
            return true
        }
        streamed = 0
        guard var output = file else {
            sink = .callback
            return true
        }
        var from: Int64 = 0
        if status == 206, resumeFrom > 0 {
            // The answer to our Range: it must continue the file. (A 206 answering a Range header
            // of the caller's own is written from the start of the file, as a 200 is.)
            let start = HeaderLines.value(named: "Content-Range", in: headers.bytes).flatMap(contentRangeStart)
            guard start == resumeFrom else {
                rangeError = "the server answered a range request for byte \(resumeFrom) onward with "
                    + (start.map { "bytes from \($0)" } ?? "an unusable Content-Range")
                sink = .buffer
                return false
            }
            from = resumeFrom
        }
        if let error = output.open(from: from) {
            fileError = error
            sink = .buffer
            return false
        }
        file = output
        sink = .file
        return true
    }

    /// Body bytes from libcurl: returns `size` when taken, 0 to abort the transfer, or
    /// `ccurl_writefunc_pause` to pause it (libcurl keeps the bytes and passes them again later).
    private func bodyData(_ data: UnsafeMutablePointer<CChar>, _ size: Int) -> Int {
        guard let request else { return 0 }
        if sink == .undecided, !decideSink(request) { return 0 }
        let limit = request.maxResponseSize
        if limit > 0, UInt64(received) + UInt64(size) > limit {
            tooLarge = true
            return 0
        }
        switch sink {
        case .callback:
            guard let flow = request.flow else { return 0 }
            if !flow.admit(size) {
                paused = true
                return ccurl_writefunc_pause
            }
            guard let chunk = StreamChunk(copying: data, count: size, offset: streamed) else {
                _ = flow.delivered(size)
                outOfMemory = true
                return 0
            }
            if !engine.postChunk(request, generation, chunk) { _ = flow.delivered(size) }
            streamed += UInt64(size)
        case .file:
            if let error = file?.write(data, size) {
                fileError = error
                return 0
            }
        case .buffer, .undecided:
            guard body.append(data, size) else {
                outOfMemory = true
                return 0
            }
        }
        received += Int64(size)
        return size
    }

    /// Engine thread: resumes a transfer paused by its write callback.
    func unpause() {
        guard paused else { return }
        paused = false
        _ = ccurl_easy_unpause(easy)
    }

    private func progress(downloaded: Int64, uploaded: Int64) {
        guard let request else { return }
        if request.downloadProgress != nil {
            var length: curl_off_t = -1
            _ = ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
            let total = Int64(length)
            let done = max(downloaded, reportedDownload.done, 0)
            if done != reportedDownload.done || total != reportedDownload.total, done > 0 || total >= 0 {
                reportedDownload = (done, total)
                engine.reportProgress(request, generation, upload: false, done: done, total: total)
            }
        }
        if request.uploadProgress != nil, request.hasBody {
            let total = Int64(request.body.count)
            let done = max(uploaded, reportedUpload.done, 0)
            if done != reportedUpload.done {
                reportedUpload = (done, total)
                engine.reportProgress(request, generation, upload: true, done: done, total: total)
            }
        }
    }

    /// Whether nothing moved for the request's idle limit (libcurl's low-speed check averages over
    /// its window, so a burst followed by silence would pass it for seconds).
    func isIdle(now: Double) -> Bool {
        guard let request, request.idleTimeout > 0 else { return false }
        // Paused by us, waiting for the body callback: not the server's silence.
        if paused {
            lastActivity = now
            return false
        }
        var down: curl_off_t = 0, up: curl_off_t = 0
        var header = 0
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_DOWNLOAD_T, &down)
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &up)
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HEADER_SIZE, &header)
        let moved = Int64(down) + Int64(up) + Int64(header)
        if moved != bytesSeen {
            bytesSeen = moved
            lastActivity = now
            return false
        }
        return now - lastActivity >= request.idleTimeout
    }

    /// The response of this attempt of `request`, after libcurl reported it done with `code`.
    func response(for request: Request, code: CURLcode, message override: String? = nil) -> Response {
        var status = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        _ = ccurl_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        var downloadTotal: curl_off_t = -1
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &downloadTotal)
        var uploaded: curl_off_t = 0
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &uploaded)
        if let error = file?.close(), fileError == nil { fileError = error }
        let outcome: Outcome
        var message: String
        if let fileError, !outOfMemory, !tooLarge {
            outcome = .fileError
            message = fileError
        } else if let rangeError {
            outcome = .badResponse
            message = rangeError
        } else if code == CURLE_OK {
            outcome = status >= 400 ? .httpStatus : .ok
            message = status >= 400 ? "The server returned a \(status) error" : ""
        } else {
            outcome = outOfMemory ? .transport : tooLarge ? .responseTooLarge : Transfer.outcome(of: code)
            message = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            if outOfMemory { message = "out of memory while receiving the body" }
            if tooLarge || code == CURLE_FILESIZE_EXCEEDED {
                message = "the response body is larger than the maximum of \(request.maxResponseSize) bytes"
            }
            if let override { message = override }
        }
        // The request's own URL unless a redirect led elsewhere: no copy in the common case.
        var url = request.url.string
        if let effective, url.withCString({ strcmp($0, effective) }) != 0 { url = String(cString: effective) }
        let response = Response(outcome: outcome, status: status, headers: headers.bytes, body: body.detach(),
                                url: url, message: message, attempts: request.attempts,
                                downloaded: received, downloadTotal: Int64(downloadTotal),
                                uploaded: request.hasBody ? Int64(max(uploaded, 0)) : 0,
                                uploadTotal: request.hasBody ? Int64(request.body.count) : -1)
        response.metrics = Metrics(easy: easy, request: request, secure: url.withCString { strncasecmp($0, "https:", 6) == 0 })
        return response
    }

    static func outcome(of code: CURLcode) -> Outcome {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: .timeout
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .cannotResolveHost
        case CURLE_COULDNT_CONNECT: .cannotConnect
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2_STREAM:
            .connectionLost
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_SHUTDOWN_FAILED,
             CURLE_USE_SSL_FAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CLIENTCERT:
            .tls
        case CURLE_TOO_MANY_REDIRECTS: .tooManyRedirects
        case CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_BAD_CONTENT_ENCODING, CURLE_HTTP3: .badResponse
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: .badRedirect
        case CURLE_FILESIZE_EXCEEDED: .responseTooLarge
        default: .transport
        }
    }
}
