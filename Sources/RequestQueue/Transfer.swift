import CCurl
import Glibc
import RequestQueueCore

/// One attempt of a request on a libcurl easy handle. Lives on the engine thread.
final class Transfer {
    let request: Request
    let generation: UInt64
    let easy: UnsafeMutableRawPointer
    private unowned let engine: Engine
    private var body = ByteBuffer()
    private var headers = HeaderBlock()
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var outOfMemory = false
    private var tooLarge = false
    private var reportedDownload: (done: Int64, total: Int64) = (-1, -2)
    private var reportedUpload: (done: Int64, total: Int64) = (-1, -2)
    /// Bytes moved (headers, body up and down) at the last idle check, and when they last changed.
    private var bytesSeen: Int64 = -1
    private var lastActivity = Clock.now()

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
    /// Whether the write callback paused the transfer, waiting for the delivery to catch up.
    private(set) var paused = false
    /// With resume: the size of the file when the attempt started, asked for with a Range header.
    private var resumeFrom: Int64 = 0
    private var file: OutputFile?
    private var fileError: String?
    private var rangeError: String?

    init(request: Request, generation: UInt64, easy: UnsafeMutableRawPointer, engine: Engine) {
        self.request = request
        self.generation = generation
        self.easy = easy
        self.engine = engine
        errorBuffer.pointee = 0
    }

    deinit {
        errorBuffer.deallocate()
        curl_slist_free_all(headerList)
        _ = file?.close()
    }

    /// Sets every option of this attempt on the (reset) easy handle.
    func configure() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let r = request
        if r.firstAttemptAt == 0 { r.firstAttemptAt = Clock.now() }
        if let path = r.outputPath {
            file = OutputFile(path: path)
            if r.outputResume { resumeFrom = OutputFile.resumableSize(path) }
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me)
        _ = r.url.string.withCString { ccurl_easy_setopt_ptr(easy, CURLOPT_URL, $0) }
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, r.maxRedirects)
        if r.maxRedirects == 0 { _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0) }
        if r.maxResponseSize > 0 {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(clamping: r.maxResponseSize))
        }
        if let caFile = r.caFile { _ = caFile.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_CAINFO, $0.baseAddress) } }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        // Over TLS, wait for a possible HTTP/2 connection to multiplex on; on plain http the wait
        // would serialize requests behind a slow response.
        if r.url.scheme == "https" { _ = ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1) }
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_WRITEFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            return Unmanaged<Transfer>.fromOpaque(me).takeUnretainedValue().bodyData(data, size * count)
        })
        // A streamed body: read the connection in bigger pieces (libcurl still passes at most 16 KiB
        // to the write callback at a time).
        if r.streamsBody { _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 65536) }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_HEADERFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            let accepted = Unmanaged<Transfer>.fromOpaque(me).takeUnretainedValue()
                .headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
            return accepted ? size * count : 0
        })
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        if r.downloadProgress != nil || (r.uploadProgress != nil && r.hasBody) {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
            _ = ccurl_easy_setopt_xferinfo_fn(easy) { me, _, dlnow, _, ulnow in
                guard let me else { return 0 }
                Unmanaged<Transfer>.fromOpaque(me).takeUnretainedValue()
                    .progress(downloaded: Int64(dlnow), uploaded: Int64(ulnow))
                return 0
            }
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
        }
        configureMethodAndBody()
        configureHeaders()
        if r.timeout > 0 { _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(min(r.timeout * 1000, 1e12).rounded(.up))) }
        if r.connectTimeout > 0 {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(min(r.connectTimeout * 1000, 1e12).rounded(.up)))
        }
        if let credentials = r.authCredentials {
            setCredentials(credentials.user, credentials.password)
            let auth: UInt = switch credentials.scheme {
            case .basic: ccurl_auth_basic
            case .digest: ccurl_auth_digest
            case .any: ccurl_auth_any
            }
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTPAUTH, Int(bitPattern: auth))
        } else if let user = r.user {
            setCredentials(user, r.password ?? [0])
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTPAUTH, Int(bitPattern: ccurl_auth_basic))
        }
    }

    private func setCredentials(_ user: CString, _ password: CString) {
        _ = user.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_USERNAME, $0.baseAddress) }
        _ = password.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_PASSWORD, $0.baseAddress) }
    }

    private func configureMethodAndBody() {
        let r = request
        let sendsBody = r.sendsBody
        switch r.method {
        case "HEAD":
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
            return
        case "GET" where !sendsBody:
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
            return
        case "POST":
            break
        default:
            _ = r.method.withCString { ccurl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) }
        }
        if sendsBody {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.count))
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, UnsafeRawPointer(r.body.base) ?? UnsafeRawPointer(emptyCString))
        }
    }

    private func configureHeaders() {
        let r = request
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
            return sink != .undecided || decideSink()
        }
        headers.append(line: bytes)
        return true
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
    private func decideSink() -> Bool {
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
            let start = headers.value(named: "Content-Range").flatMap(contentRangeStart)
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
        if sink == .undecided, !decideSink() { return 0 }
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
            if !engine.postChunk(self, chunk) { _ = flow.delivered(size) }
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
        if request.downloadProgress != nil {
            var length: curl_off_t = -1
            _ = ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
            let total = Int64(length)
            let done = max(downloaded, reportedDownload.done, 0)
            if done != reportedDownload.done || total != reportedDownload.total, done > 0 || total >= 0 {
                reportedDownload = (done, total)
                engine.reportProgress(self, upload: false, done: done, total: total)
            }
        }
        if request.uploadProgress != nil, request.hasBody {
            let total = Int64(request.body.count)
            let done = max(uploaded, reportedUpload.done, 0)
            if done != reportedUpload.done {
                reportedUpload = (done, total)
                engine.reportProgress(self, upload: true, done: done, total: total)
            }
        }
    }

    /// Whether nothing moved for the request's idle limit (libcurl's low-speed check averages over
    /// its window, so a burst followed by silence would pass it for seconds).
    func isIdle(now: Double) -> Bool {
        guard request.idleTimeout > 0 else { return false }
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

    /// The response of this attempt, after libcurl reported it done with `code`.
    func response(code: CURLcode, message override: String? = nil) -> Response {
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
        let url = effective.map { String(cString: $0) } ?? request.url.string
        let response = Response(outcome: outcome, status: status, headers: headers, body: body,
                                url: url, message: message, attempts: request.attempts,
                                downloaded: received, downloadTotal: Int64(downloadTotal),
                                uploaded: request.hasBody ? Int64(max(uploaded, 0)) : 0,
                                uploadTotal: request.hasBody ? Int64(request.body.count) : -1)
        response.metrics = Metrics(easy: easy, request: request, effectiveURL: url)
        return response
    }

    /// Drops what the easy handle points into, before it is reset.
    func release() {
        curl_slist_free_all(headerList)
        headerList = nil
        _ = file?.close()
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
