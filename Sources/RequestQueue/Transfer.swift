import CCurl
import Glibc
import RequestQueueCore

/// A libcurl easy handle and the state of the attempt it runs. Lives on the engine thread; the
/// engine keeps idle ones in a pool, so that a handle keeps its connection-independent options
/// from one attempt to the next and only what differs is set again (with libcurl < 8.1.0 each
/// attempt runs on a new handle given the same options: `renewHandle`).
final class Transfer {
    private(set) var easy: UnsafeMutableRawPointer
    /// unowned(unsafe): the engine owns its transfers (running or pooled; a request's reference
    /// to one is dropped when it stops running) and drops them all when its thread ends, before
    /// the engine itself can go; a checked reference costs a retain and a release for every use.
    unowned(unsafe) let engine: Engine
    /// The attempt running on this transfer; nil while it waits in the pool. libcurl calls back
    /// only between `begin` and `end`; the callbacks still check it and stop the transfer if not.
    private(set) var request: Request?
    private(set) var generation: UInt64 = 0
    /// Position in the engine's list of running transfers.
    var slot = -1
    private let body = ByteBuffer()
    /// The response's header lines as received (without the status line), parsed by `Response`.
    private let headers = ByteBuffer()
    /// How the attempt's User-Agent, proxy and header list are set on the handle (Transport.swift).
    var route = Route()
    /// The last header list made for a request with header lines of its own (Transport.swift).
    var ownHeaderList = OwnHeaderList()
    /// `sharedHeaderLists`, read once (a global's every read checks its initialization).
    let sharedLists = sharedHeaderLists
    /// The resolve overrides of the current attempt (Transport.swift).
    private var resolveOverrides: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    /// The options set on the handle besides those of every attempt (URL, headers, body); nil
    /// until the first attempt.
    private var options: Options?
    /// The URL set on the handle (CURLOPT_URL, or CURLOPT_CURLU: `setParsedURL`), nil after a
    /// reset. libcurl starts each transfer from it, a redirect of the previous one notwithstanding
    /// (Curl_pretransfer): an attempt on the same URL leaves it set (setting it copies and frees
    /// strings, about 500 instructions).
    private var urlSet: String?
    /// Whether libcurl's effective URL of an attempt on `urlSet` that followed no redirect was
    /// found to be that URL itself (libcurl normalizes a URL when it parses it, the same way each
    /// time): `response` then does not ask again for such an attempt.
    private var urlSetIsEffective = false
    /// `urlSet` parsed, when it is set as CURLOPT_CURLU (`setParsedURL`); owned by the transfer.
    private var urlHandle: OpaquePointer?
    /// `urlHandle`'s URL as libcurl writes it (curl_url_get, once, with the handle): given with it
    /// as CURLOPT_URL, so that a transfer on a new handle (`renewHandle`) does not make it again.
    private var urlHandleText: UnsafeMutablePointer<CChar>?
    /// The request's own Cookie lines' values, for CURLOPT_COOKIE, when it uses the cookie jar
    /// (Transport.swift, `setHeaders`); set on the handle for each request of the attempt that
    /// goes to the request's origin (`connected`).
    var ownCookies: [CChar]?
    /// Whether CURLOPT_POSTFIELDS points into the attempt's request body (unset by `end`).
    private var postFieldsSet = false
    /// Whether CURLOPT_HTTP_VERSION is HTTP/1.1 for this attempt's body (`bodyOverHTTP1Above`) rather
    /// than what the options say.
    private var versionForBody = false
    private var outOfMemory = false
    private var tooLarge = false
    private var reportedDownload: (done: Int64, total: Int64) = (-1, -2)
    /// The slow-server limits of this attempt (idle, response headers, low speed), checked by the
    /// engine ten times a second through `stall(now:)`.
    private var watch = TransferWatch(limits: TransferWatch.Limits(idle: 0, headers: 0, lowSpeed: (0, 0)), now: 0)
    /// Bytes moved by this attempt as `stall` last counted them (of them, those libcurl counted:
    /// `TransferWatch.Sample.counted`), and the counters they came from.
    private var moved: Int64 = 0
    private var movedCounted: Int64 = 0
    private var counted: (curl: Int64, upload: Int64, tcp: Int64) = (0, 0, -1)
    /// The TCP socket of the attempt's connection (-1: unknown), and the socket libcurl opened for
    /// it, if it opened one (learnt before connecting, confirmed once connected: see `connected`).
    private(set) var socket: Int32 = -1
    private var openedSocket: Int32 = -1
    /// Whether the headers of the response being received are not complete yet.
    private var awaitingHeaders = true
    /// Whether the request was sent on a connection and no status line came back since: libcurl
    /// sends it again on a new connection when a kept one closed unanswered (`connected`).
    private var sentUnanswered = false
    /// Whether such a resend of a non-idempotent request was refused: the attempt ends with
    /// RQ_OUTCOME_CONNECTION_LOST.
    private var resendRefused = false
    /// Set when the request was not sent on the kept connection libcurl chose, which had bytes
    /// waiting (`connected`): the engine begins the attempt again on another transfer
    /// (`Engine.readFinished`), which a new connection serves.
    private(set) var beginsAgain = false
    /// Whether the attempt stopped at a 303 that libcurl would follow with the request's own
    /// method, or at a 304 with a Location (see `headEnded`): that 3xx is the response.
    private var seeOtherKept = false
    /// Whether the end of the current response's headers was handled (`headEnded`), and whether
    /// its head waits for the end of the attempt (a 401).
    private var headHandled = false
    private var headDeferred = false
    /// Whether the next line libcurl passes may be a status line: the first line of the reply to a
    /// request sent (`connected`), of the response after an informational one, or after a response
    /// whose body had no trailers. A header or trailer line that starts like a status line
    /// ("HTTP/1.1 500 Oops: x") is a field to libcurl, and to the library.
    private var statusLineNext = true
    /// Whether the current response's body is chunked: lines after its headers are trailers (as
    /// after an HTTP/2 or HTTP/3 response's: `multiplexed`, from its status line).
    private var chunked = false
    private var multiplexed = false

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
    /// The status of the current response, from its status line; -1 when that was not HTTP.
    private var status = 0
    /// The HTTP version of that status line when it is "HTTP/1.0" or "HTTP/1.1" (10, 11); 0 for
    /// any other (libcurl is asked then: see `response`).
    private var statusVersion: Int32 = 0
    /// The Content-Length of the current response, -1 while it sent none.
    private var contentLength: Int64 = -1
    /// Status lines received by this attempt, and libcurl's Content-Length of the response that
    /// was the `lengthRead.response`th when `reserveBody` read it (-1: none read).
    private var responses = 0
    private var lengthRead: (response: Int, length: curl_off_t) = (-1, -1)
    /// Body bytes received by this attempt, and those of the current streamed body.
    private var received: Int64 = 0
    private var streamed: UInt64 = 0
    /// The chunk buffer of the streamed body being filled: what it received since the last post
    /// is posted as a piece when it is full, at the end of the engine's turn (`postFilledChunk`)
    /// and before a pause, so that what arrived never waits for more.
    private var chunk: StreamChunk?
    /// How many bytes of `chunk` were posted.
    private var posted = 0
    /// The fast path of `bodyData`: where the next byte of `chunk` goes, and how many more bytes
    /// it takes (its free room, within the maximum response size). Open (`fillRoom` > 0) only
    /// while `chunk` holds bytes of this turn of the engine, so is registered to be posted at its
    /// end (`Engine.filling`); `syncFill` brings `chunk.count` up to date and closes it.
    private var fillNext: UnsafeMutablePointer<UInt8>?
    private var fillRoom = 0
    /// Whether the write callback paused the transfer, waiting for the delivery to catch up. A
    /// paused handle holds libcurl's buffered data: it is never reused.
    private(set) var paused = false
    /// With resume: the size of the file when the attempt started, asked for with a Range header.
    private(set) var resumeFrom: Int64 = 0
    private var file: OutputFile?
    private var fileError: String?
    /// Why the server's reply was refused: not HTTP, over the header budget, a transfer coding not
    /// asked for, a Content-Range that does not continue the file. The attempt ends with
    /// RQ_OUTCOME_BAD_RESPONSE and this message.
    private var protocolError: String?
    /// Set by the engine when the perform watch reset the attempt's connection, which held the
    /// engine (`Engine.noteResetConnections`): a failure then ends the attempt with
    /// RQ_OUTCOME_BAD_RESPONSE and this message.
    var heldEngine: String?
    /// The header budget of this transfer: the headers and trailers of all its responses
    /// (redirects, informational ones, the final one).
    private var headerBudget = HeaderBudget()
    /// The Set-Cookie lines (and their bytes) of this attempt's responses, for the jar's budget.
    private var setCookies = (lines: 0, bytes: 0)
    /// Whether the collected body of a non-2xx answer to a streaming request reached
    /// `ServerData.errorBodyLimit` (the rest was not read).
    private var errorBodyCut = false

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
        /// The User-Agent to send (Transport.swift).
        let agent: Agent
        /// Made from a request that set none of the settings kept in its box
        /// (`Request.hasOwnOptions`) and had no answered credentials: those are the defaults.
        let fromDefaults: Bool

        static func == (a: Options, b: Options) -> Bool {
            a === b || (a.method == b.method && a.sendsBody == b.sendsBody && a.maxRedirects == b.maxRedirects
                && a.maxResponseSize == b.maxResponseSize && a.caFile == b.caFile && a.https == b.https
                && a.streamsBody == b.streamsBody && a.progress == b.progress && a.timeout == b.timeout
                && a.connectTimeout == b.connectTimeout && a.user == b.user && a.password == b.password && a.auth == b.auth
                && a.transport.equals(b.transport) && a.cookieJar === b.cookieJar)
        }

        init(_ r: Request) {
            method = r.method
            sendsBody = r.sendsBody
            maxRedirects = r.maxRedirects
            maxResponseSize = r.maxResponseSize
            caFile = r.caFile
            https = r.url.https
            streamsBody = r.streamsBody
            progress = r.downloadProgress != nil || (r.uploadProgress != nil && r.hasBody)
            timeout = r.timeout
            connectTimeout = r.connectTimeout
            transport = r.transport
            cookieJar = r.cookieJar
            agent = Agent(transport.userAgent)
            (user, password, auth) = Options.credentials(r)
            fromDefaults = !r.hasOwnOptions && r.authCredentials == nil
        }

        /// Whether `Options(r)` would equal these options, without making them: a request whose
        /// options are those of the handle's previous attempt shares them (most do). False may
        /// be wrong (the caller then makes the request's options and compares them in full).
        func same(as r: Request) -> Bool {
            guard method == r.method, sendsBody == r.sendsBody, https == r.url.https, timeout == r.timeout,
                  connectTimeout == r.connectTimeout else { return false }
            // Two requests that kept every boxed setting at its default have the same ones.
            let plain = !r.hasOwnOptions && r.authCredentials == nil
            if plain || fromDefaults { return plain && fromDefaults }
            guard maxRedirects == r.maxRedirects, maxResponseSize == r.maxResponseSize, caFile == r.caFile,
                  streamsBody == r.streamsBody, progress == (r.downloadProgress != nil || (r.uploadProgress != nil && r.hasBody)),
                  cookieJar === r.cookieJar else { return false }
            let (user, password, auth) = Options.credentials(r)
            return self.user == user && self.password == password && self.auth == auth && transport.equals(r.transport)
        }

        /// The user name, password and CURLOPT_HTTPAUTH of a request's attempts.
        private static func credentials(_ r: Request) -> (CString?, CString?, UInt) {
            if let credentials = r.authCredentials {
                let auth = switch credentials.scheme {
                case .basic: ccurl_auth_basic
                case .digest: ccurl_auth_digest
                case .any: ccurl_auth_password
                }
                return (credentials.user, credentials.password, auth)
            }
            if let user = r.user { return (user, r.password ?? [0], ccurl_auth_basic) }
            return (nil, nil, 0)
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
        curl_url_cleanup(urlHandle)
        curl_free(urlHandleText)
        errorBuffer.deallocate()
        curl_slist_free_all(ownHeaderList.list)
        curl_slist_free_all(resolveOverrides)
        _ = file?.close()
    }

    /// libcurl before 8.1.0 keeps, from one transfer of a handle to the next, a pointer to the last
    /// response header it stored for its headers API, into memory that the next transfer frees
    /// (fixed in 8.1.0, "headers: clear (possibly) lingering pointer in init"): a response whose
    /// first header line is a continuation line (obs-fold) then has libcurl append that line to
    /// freed memory, a double free that a server could use to crash the host. Debian 12's 7.88.1
    /// has it. There a handle serves one transfer only (`renewHandle`).
    static let handleServesOneTransfer = libcurlBefore8_1

    /// Whether the libcurl in use is older than 8.1.0 (Debian 12's is 7.88.1).
    private static let libcurlBefore8_1 = (curl_version_info(CURLVERSION_TENTH)?.pointee.version_num ?? 0) < 0x08_01_00

    /// libcurl before 8.1.0 uploads over HTTP/2 badly once the server answers before it has read
    /// the body: when the answer is a redirect that libcurl follows, libcurl goes on offering the
    /// rest of the body on a stream the server no longer reads, and waits (busy) for a
    /// flow-control window that never opens, until the idle timeout (nginx: `return 307` to a
    /// POST of 200 KB, 6 times in 10 on a loaded machine); an answer that comes with the stream's
    /// reset is lost. A body over the usual window (64 KiB) goes over HTTP/1.1 there, unless the
    /// request asked for a version (RQ_OPTION_HTTP_VERSION). Int.max from libcurl 8.1.0.
    static let bodyOverHTTP1Above = libcurlBefore8_1 ? 65536 : Int.max

    /// Whether the handle ran a transfer since it was made (`begin`).
    private var handleUsed = false

    /// Whether the handle must be replaced before the next attempt (`handleServesOneTransfer`).
    var needsNewHandle: Bool { handleUsed && Transfer.handleServesOneTransfer }

    /// Engine thread, while the transfer is idle: replaces the handle by a new one with the same
    /// options (see `needsNewHandle`). False when no handle could be made (out of memory): the
    /// old one stays, and still needs replacing.
    func renewHandle() -> Bool {
        guard let fresh = curl_easy_init() else { return false }
        prepareReset(options)
        curl_easy_cleanup(easy)
        easy = fresh
        handleUsed = false
        versionForBody = false
        route = Route()
        setFixedOptions()
        if let options { apply(options) }
        // The URL of the handle's last attempt, as it was given (`configure` sets another).
        if let urlHandle {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_URL, urlHandleText)
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_CURLU, UnsafeRawPointer(urlHandle))
        } else if let url = urlSet, !setURL(url) {
            urlSet = nil
        }
        return true
    }

    /// Starts an attempt: resets the per-attempt state and sets the handle's options.
    func begin(_ request: Request, generation: UInt64) {
        self.request = request
        self.generation = generation
        handleUsed = true
        outOfMemory = false
        tooLarge = false
        reportedDownload = (-1, -2)
        let now = Clock.now()
        watch = TransferWatch(limits: request.watchLimits, now: now)
        moved = 0
        movedCounted = 0
        counted = (0, 0, -1)
        socket = -1
        openedSocket = -1
        awaitingHeaders = true
        sentUnanswered = false
        resendRefused = false
        beginsAgain = false
        seeOtherKept = false
        headHandled = false
        headDeferred = false
        statusLineNext = true
        chunked = false
        contentLength = -1
        if request.firstAttemptAt == 0 { request.firstAttemptAt = now }
        sink = .undecided
        status = 0
        statusVersion = 0
        responses = 0
        lengthRead = (-1, -1)
        received = 0
        streamed = 0
        resumeFrom = 0
        // (Tested first: assigning nil to a nil String still calls the runtime's release.)
        if fileError != nil { fileError = nil }
        if protocolError != nil { protocolError = nil }
        if heldEngine != nil { heldEngine = nil }
        headerBudget = HeaderBudget()
        errorBodyCut = false
        // Progress counts over the responses of one attempt; an answered authentication
        // challenge continues the attempt on a new transfer, maybe of another handle: what spans
        // the transfers is kept on the request. (The upload figure stays at its highest: a body
        // sent again within the attempt does not take it back.)
        if request.progressAttempt != request.attempts {
            request.progressAttempt = request.attempts
            request.download = AttemptProgress()
            request.uploadReported = -1
        } else {
            request.download.newResponse()
        }
        // An attempt that ended without a response (aborted) leaves its bytes here.
        body.removeAll()
        headers.removeAll()
        errorBuffer.pointee = 0
        configure(request)
    }

    /// Ends the attempt (the handle is out of the multi handle): drops what the handle points into.
    func end() {
        if setCookies.lines > 0 { // the cookie jar's budget (CookieJar.received)
            options?.cookieJar?.received(setCookieLines: setCookies.lines, bytes: setCookies.bytes)
            setCookies = (0, 0)
        }
        if resolveOverrides != nil {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_RESOLVE, nil)
            curl_slist_free_all(resolveOverrides)
            resolveOverrides = nil
        }
        if postFieldsSet {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, nil)
            postFieldsSet = false
        }
        _ = file?.close()
        file = nil
        if let flow = request?.flow {
            // A chunk not posted yet (the attempt was stopped while filling it) is dropped.
            if let left = chunk { _ = flow.delivered(left) }
            if flow.stopStreaming() { engine.chunkPoolUnused() }
        }
        chunk = nil
        posted = 0
        fillNext = nil
        fillRoom = 0
        request = nil
    }

    /// The options of every attempt that do not depend on the request.
    /// (libcurl calls back only while the transfer, or for the close of a socket the engine, is
    /// alive and held elsewhere: the callbacks borrow it, `_withUnsafeGuaranteedRef`, rather than
    /// retain and release it for each call.)
    private func setFixedOptions() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // A transfer stopped while its host name resolves leaves the resolver thread to finish on
        // its own: libcurl would otherwise wait for it (up to the DNS timeout) on this thread.
        _ = ccurl_easy_setopt_long(easy, CURLOPT_QUICK_EXIT, 1)
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        ccurl_easy_http_only(easy)
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_WRITEFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            return Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef {
                $0.engine.noteCallback()
                return $0.bodyData(data, size * count)
            }
        })
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        _ = ccurl_easy_setopt_data_fn(easy, CURLOPT_HEADERFUNCTION, { data, size, count, me in
            guard let me, let data else { return 0 }
            let accepted = Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef {
                $0.engine.noteCallback()
                return $0.headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
            }
            return accepted ? size * count : 0
        })
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        _ = ccurl_easy_setopt_xferinfo_fn(easy) { me, _, dlnow, _, ulnow in
            guard let me else { return 0 }
            let go = Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef {
                $0.progress(downloaded: Int64(dlnow), uploaded: Int64(ulnow))
            }
            return go ? 0 : 1
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
        // Sockets: learn the attempt's TCP socket (see `stall`).
        _ = ccurl_easy_setopt_sockopt_fn(easy) { me, fd, _ in
            if let me { Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef { $0.openedSocket = fd } }
            return 0 // CURL_SOCKOPT_OK
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_SOCKOPTDATA, me)
        _ = ccurl_easy_setopt_prereq_fn(easy) { me, primaryIP, localIP, primaryPort, localPort in
            guard let me else { return 0 } // CURL_PREREQFUNC_OK
            let send = Unmanaged<Transfer>.fromOpaque(me)._withUnsafeGuaranteedRef {
                $0.connected(primaryIP: primaryIP, localIP: localIP, primaryPort: primaryPort, localPort: localPort)
            }
            return send ? 0 : 1 // CURL_PREREQFUNC_OK, CURL_PREREQFUNC_ABORT
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PREREQDATA, me)
        // A connection outlives the transfer that opened it: its close reaches the engine.
        _ = ccurl_easy_setopt_closesocket_fn(easy) { engine, fd in
            if let engine { Unmanaged<Engine>.fromOpaque(engine)._withUnsafeGuaranteedRef { $0.socketClosed(fd) } }
            return close(fd)
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(engine).toOpaque())
    }

    /// Sets the options of this attempt: those that differ from the previous attempt's (after a
    /// reset), then the URL, headers and body, which every attempt sets.
    private func configure(_ r: Request) {
        // (A request whose settings are all defaults has no output file: its box is not read then.)
        if r.hasOwnOptions, let path = r.outputPath {
            file = OutputFile(path: path)
            if r.outputResume { resumeFrom = OutputFile.resumableSize(path) }
        }
        let wanted: Options
        if let known = r.transferOptions {
            wanted = known
        } else {
            if let current = options, current.same(as: r) { wanted = current } else { wanted = Options(r) }
            r.transferOptions = wanted
        }
        if options !== wanted {
            if options != wanted {
                if options != nil {
                    prepareReset(options)
                    curl_easy_reset(easy)
                    versionForBody = false
                    route = Route()
                    urlSet = nil
                    urlSetIsEffective = false
                    setFixedOptions()
                }
                apply(wanted)
            }
            options = wanted
        }
        if !Transfer.sameBytes(urlSet, r.url.string) {
            urlSet = setURL(r.url.string) ? r.url.string : nil
            urlSetIsEffective = false
        } else if urlHandle == nil {
            setParsedURL(r.url.string)
        }
        configureRoute(r, wanted)
        resolveOverrides = resolveList(wanted.transport.resolve)
        if let resolveOverrides { _ = ccurl_easy_setopt_ptr(easy, CURLOPT_RESOLVE, resolveOverrides) }
        if r.sendsBody {
            _ = ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.count))
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, r.body.baseAddress ?? UnsafeRawPointer(emptyCString))
            postFieldsSet = true
        }
        let http1 = r.body.count > Transfer.bodyOverHTTP1Above && (wanted.transport.httpVersion ?? .automatic) == .automatic
        if http1 != versionForBody {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(http1 ? CURL_HTTP_VERSION_1_1 : CURL_HTTP_VERSION_2TLS))
            versionForBody = http1
        }
    }

    /// Sets the URL of the handle's attempts (a new one: CURLOPT_URL, which libcurl parses for each
    /// transfer). False when it could not be set.
    private func setURL(_ url: String) -> Bool {
        if urlHandle != nil {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_CURLU, nil)
            curl_url_cleanup(urlHandle)
            urlHandle = nil
            curl_free(urlHandleText)
            urlHandleText = nil
        }
        return url.withCString { ccurl_easy_setopt_ptr(easy, CURLOPT_URL, $0) } == CURLE_OK
    }

    /// The handle's URL again: from now on given as libcurl's parsed URL handle (CURLOPT_CURLU),
    /// made here and kept (`urlHandle`) while the handle's attempts are for that URL. With
    /// CURLOPT_URL, libcurl parses the URL for every transfer and reads the normalized URL back
    /// (about 12,000 instructions); with CURLOPT_CURLU it copies the parsed handle. The URL string
    /// libcurl would make from it at each transfer on a new handle (about 7,000 instructions,
    /// `renewHandle`) is made here once and given as CURLOPT_URL with it: libcurl then takes the
    /// string as it is and the parts from the handle (after a redirect it parses the new URL as
    /// before). Only for a URL that comes again: for one used once, parsing it here as well would
    /// cost more. Memory running out leaves CURLOPT_URL.
    private func setParsedURL(_ url: String) {
        guard let handle = curl_url() else { return }
        guard url.withCString({ curl_url_set(handle, CURLUPART_URL, $0, ccurl_url_set_flags) }) == CURLUE_OK else {
            curl_url_cleanup(handle)
            return
        }
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &text, 0) == CURLUE_OK else {
            curl_url_cleanup(handle)
            return
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_URL, text)
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_CURLU, UnsafeRawPointer(handle))
        urlHandle = handle
        urlHandleText = text
    }

    /// Whether `a` holds the bytes of `b`: memcmp on the strings' storage (`==` on two strings
    /// with storage of their own costs about 250 instructions).
    static func sameBytes(_ a: String?, _ b: String) -> Bool {
        guard let a, a.utf8.count == b.utf8.count else { return false }
        let same = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                guard let p = x.baseAddress, let q = y.baseAddress else { return x.count == 0 }
                return memcmp(p, q, x.count) == 0
            }
        }
        return (same ?? nil) ?? (a == b)
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
        // A streamed body: read the connection in pieces of a chunk's size (libcurl still passes at
        // most 16 KiB to the write callback at a time). Decoding reads less (applyTransport).
        if o.streamsBody { _ = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, StreamChunk.capacity) }
        if o.progress { _ = ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0) }
        // libcurl takes every method that sends a body for a POST, which it turns into a GET on a
        // 301 or 302 (as browsers do; RFC 9110 15.4.2-3 allows it for POST only): other methods
        // keep theirs, and their body, as on a 307 or 308.
        if o.sendsBody, o.method != "POST" {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_POSTREDIR, Int(CURL_REDIR_POST_301 | CURL_REDIR_POST_302))
        }
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

    /// One header line (or trailer); returns false to abort the transfer: the reply is refused
    /// (`protocolError`) or the output file cannot be used.
    private func headerLine(_ line: UnsafeRawBufferPointer) -> Bool {
        // (The request is taken only where it is used: a reference for every line costs.)
        guard request != nil else { return false }
        let bytes = line.bindMemory(to: UInt8.self)
        // A status line starts a new response (a redirect, a 100 Continue, a 401 before auth). It
        // is the first line libcurl passes of a response, whatever it holds: libcurl also takes
        // "http/1.1 200" for one, which `statusCode` refuses (RFC 9112's HTTP-name is "HTTP").
        if statusLineNext {
            statusLineNext = false
            chunked = false
            headers.removeAll()
            sink = .undecided
            awaitingHeaders = true
            sentUnanswered = false
            headHandled = false
            headDeferred = false
            responses += 1
            // "HTTP/2 200" on a plain http connection, where HTTP/2 was not asked for (h2c): libcurl
            // 7.88 takes it, then reports HTTP/2 for that response and the later ones on the
            // connection, and makes later requests to the host wait for it as for an HTTP/2 one.
            guard let code = ServerData.statusCode(ofStatusLine: bytes),
                  bytes[5] == 0x31 || options?.transport.httpVersion == .http2PriorKnowledge
                  || hopIsHTTPS(firstHop: responses == 1) else {
                status = -1
                return refuse("the server's reply is not HTTP (status line \"\(Transfer.printable(bytes))\")")
            }
            status = code
            contentLength = -1
            // A switch to another protocol that the request did not ask for (the library never
            // does): what follows is not HTTP, and libcurl would hand it over as the body.
            if code == 101, let request, !request.headers.names.contains(.upgrade) {
                return refuse("the server switched protocols (101 Switching Protocols), which was not asked for")
            }
            multiplexed = bytes[5] == 0x32 || bytes[5] == 0x33
            // "HTTP/1.0 " or "HTTP/1.1 " (a status line has at least 10 bytes here).
            statusVersion = bytes[5] == 0x31 && bytes[6] == 0x2E && bytes[8] == 0x20 && bytes[7] | 1 == 0x31
                ? 10 + Int32(bytes[7] - 0x30) : 0
            // An HTTP/1.x response on a direct https connection: ALPN chose HTTP/1.1 for it (see
            // `carriesHTTP1`). (Plain http needs no note.)
            if statusVersion != 0, route.direct, socket >= 0, let request, request.url.https { engine.noteHTTP1(socket) }
            return headerBudget.admit(lineLength: bytes.count) || refuseOverBudget()
        }
        guard headerBudget.admit(lineLength: bytes.count) else { return refuseOverBudget() }
        // The blank line ends the headers: the body's destination is known now. (After a 1xx
        // response, the final response's headers are still to come.)
        if bytes.allSatisfy({ $0 == 0x0D || $0 == 0x0A }) {
            guard let request else { return false }
            // After an informational response comes the next one; after a chunked body, or any
            // HTTP/2 response (`multiplexed`), its trailers (libcurl ends them with no blank
            // line of its own). (A request sent again, a redirect's or an authentication's, may
            // have its status line next: `connected`.)
            statusLineNext = (100...199).contains(status) || !(chunked || multiplexed)
            // (A 101 that is not refused was asked for: libcurl takes what follows as its body.)
            if !(100...199).contains(status) || status == 101 {
                awaitingHeaders = false
                headEnded(request)
                if seeOtherKept { return false }
            }
            return sink != .undecided || decideSink(request)
        }
        // A line is one field whose name ends at its first colon: only a line with its colon where
        // the name's would be can be the field (most lines are neither: no lookup for them).
        if bytes.count > 17, bytes[17] == 0x3A, let codings = HeaderLines.valueBytes(ofLine: bytes, named: "Transfer-Encoding") {
            if !HeaderLines.equalsIgnoringCase(codings, "chunked"),
               let coding = ServerData.unrequestedTransferCoding(String(decoding: codings, as: UTF8.self)) {
                return refuse("the server used the transfer coding \"\(coding)\", which was not asked for")
            }
            chunked = true
        }
        if bytes.count > 14, bytes[14] == 0x3A, let length = HeaderLines.valueBytes(ofLine: bytes, named: "Content-Length") {
            guard let value = ServerData.contentLength(bytes: length) else {
                return refuse("the server sent an invalid Content-Length (\"\(String(decoding: length, as: UTF8.self).prefix(64))\")")
            }
            // Two different lengths: the body's end is ambiguous (libcurl would take the last one,
            // and what lies beyond the other could pass for the next response).
            if contentLength >= 0, value != contentLength {
                return refuse("the server sent two different Content-Length values (\(contentLength) and \(value))")
            }
            contentLength = value
        }
        if bytes.count > 10, bytes[10] == 0x3A, options?.cookieJar != nil,
           HeaderLines.valueBytes(ofLine: bytes, named: "Set-Cookie") != nil {
            setCookies = (setCookies.lines + 1, setCookies.bytes + bytes.count) // within the header budget
        }
        guard HeaderLines.append(line, to: headers) else {
            outOfMemory = true
            return false
        }
        return true
    }

    /// The headers of a response other than a 1xx ended (called once per response: trailers end
    /// with a blank line too). Its head goes to the head callback now, before any body piece,
    /// unless libcurl follows it (a redirect), or it is a 401, which an authentication may answer
    /// (libcurl's own, on this transfer, or the authentication handler, once the attempt ended):
    /// its head is then made at the end of the attempt and posted only if nothing answered it.
    private func headEnded(_ request: Request) {
        guard !headHandled else { return }
        headHandled = true
        if (300...399).contains(status), followsRedirect(request) {
            // A 303 asks for a GET of its Location (RFC 9110 15.4.4). libcurl 7.88 makes a GET of
            // a POST, but sends any other method (CURLOPT_CUSTOMREQUEST: PUT, DELETE, ...) there
            // again: such a 303 is not followed; it ends the attempt as its response. So does a
            // 304, which answers a conditional request and is no redirect (RFC 9110 15.4.5):
            // libcurl follows any 3xx with a Location.
            if status != 304, status != 303 || HTTPMethods.seeOtherFollowed.contains(request.method) {
                // libcurl sends the next request: its response's headers are awaited.
                awaitingHeaders = true
                return
            }
            seeOtherKept = true
        }
        if status == 401 {
            headDeferred = true
            return
        }
        // (Most requests have no head callback: the engine is not called for them.)
        if request.headWanted { engine.postHead(request, generation) { head(for: request) } }
    }

    /// Whether libcurl follows the current 3xx response: redirects are on, it has a Location and
    /// the maximum number of redirects is not reached (as libcurl decides).
    private func followsRedirect(_ request: Request) -> Bool {
        guard request.maxRedirects > 0,
              let location = HeaderLines.value(named: "Location", in: headers.bytes),
              location.contains(where: { $0 != " " && $0 != "\t" && $0 != "\r" && $0 != "\n" }) else { return false }
        var count = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &count)
        return count < request.maxRedirects
    }

    /// The head of the current response: its status, headers, URL and HTTP version, no body.
    private func head(for request: Request) -> Response {
        var effective: UnsafeMutablePointer<CChar>?
        _ = ccurl_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        let head = Response(outcome: status >= 400 ? .httpStatus : .ok, status: status, headers: headers.bytes,
                            url: effective.map { String(cString: $0) } ?? request.url.string,
                            message: status >= 400 ? "The server returned a \(status) error" : "", attempts: request.attempts)
        head.metrics = Metrics(httpVersion: route.direct && statusVersion != 0 ? statusVersion : Metrics.httpVersion(of: easy))
        return head
    }

    /// Refuses a reply whose status lines, header lines and trailers went over the header budget
    /// (a status line too: a run of 1xx responses is nothing else).
    private func refuseOverBudget() -> Bool {
        refuse("the response's header lines and trailers exceed \(HeaderBudget.maxBytes) bytes or \(HeaderBudget.maxLines) lines")
    }

    /// Refuses the server's reply: the attempt ends with RQ_OUTCOME_BAD_RESPONSE and `message`.
    private func refuse(_ message: String) -> Bool {
        if protocolError == nil { protocolError = message }
        return false
    }

    /// At most 64 bytes of a line, control and non-ASCII bytes shown as "?", for a message.
    private static func printable(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var end = min(bytes.count, 64)
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[0..<end]).map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x3F }, as: UTF8.self)
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
            let start = HeaderLines.value(named: "Content-Range", in: headers.bytes).flatMap(ServerData.contentRangeStart)
            guard start == resumeFrom else {
                protocolError = "the server answered a range request for byte \(resumeFrom) onward with "
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

    /// The most a collected body reserves from its announced length: a server can announce more
    /// than it sends. A larger body grows from there by doubling.
    static let bodyReserveLimit = 16 << 20

    /// Collected body: makes room for the length the server announced (Content-Length, as sent:
    /// compressed when the body is decoded), within the maximum response size, the limit of an
    /// error body of a streaming request, and `bodyReserveLimit`, and for the response's header
    /// lines after it (complete now, but for trailers), which `Response` copies there. No room is
    /// no failure here: `append` reports it if the bytes come.
    private func reserveBody(_ request: Request) {
        var length: curl_off_t = -1
        guard ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK else { return }
        // libcurl's figure for this response stays as it is until its end: `response` reuses it.
        lengthRead = (responses, length)
        guard length > 0 else { return }
        var size = min(Int(clamping: length), Transfer.bodyReserveLimit)
        if request.maxResponseSize > 0 { size = min(size, Int(clamping: request.maxResponseSize)) }
        if request.streamsBody { size = min(size, ServerData.errorBodyLimit) }
        // (Header lines are within `HeaderBudget.maxBytes`: no overflow.)
        _ = body.reserve(size + headers.count)
    }

    /// Body bytes from libcurl: returns `size` when taken, 0 to abort the transfer, or
    /// `ccurl_writefunc_pause` to pause it (libcurl keeps the bytes and passes them again later).
    private func bodyData(_ data: UnsafeMutablePointer<CChar>, _ size: Int) -> Int {
        // A streamed body's piece that fits in the chunk being filled (most of them): copied,
        // and nothing else (no lock, no reference counting).
        if size <= fillRoom, sink == .callback, let next = fillNext {
            UnsafeMutableRawPointer(next).copyMemory(from: data, byteCount: size)
            fillNext = next + size
            fillRoom -= size
            streamed += UInt64(size)
            received += Int64(size)
            return size
        }
        guard let request else { return 0 }
        if sink == .undecided, !decideSink(request) { return 0 }
        let limit = request.maxResponseSize
        if limit > 0, UInt64(received) + UInt64(size) > limit {
            tooLarge = true
            return 0
        }
        switch sink {
        case .callback:
            // Inline delivery: libcurl's own buffer goes to the callback, now (Streaming+Inline.swift).
            if let queue = engine.inlineQueue {
                guard queue.streamInline(request, data, size, offset: streamed) else { return 0 }
                streamed += UInt64(size)
                break
            }
            guard let flow = request.flow else { return 0 }
            syncFill()
            // A piece that does not fit in the chunk being filled needs an empty one. When the
            // undelivered chunks reached the flow's limit, the transfer pauses here, before any
            // byte of the piece was taken (libcurl passes it again on resuming).
            var fresh: StreamChunk?
            if size > (chunk.map { $0.capacity - $0.count } ?? 0) {
                switch flow.takeChunk(from: engine.chunkPool, beyondLimit: false) {
                case .chunk(let empty):
                    fresh = empty
                case .full:
                    // What was gathered goes out first: its delivery is what resumes the transfer.
                    postFilledChunk()
                    paused = true
                    return ccurl_writefunc_pause
                case .outOfMemory:
                    outOfMemory = true
                    return 0
                }
            }
            // One copy, into a recycled chunk; the pieces of one turn of the engine share it.
            var taken = 0
            while taken < size {
                if chunk == nil {
                    if let empty = fresh {
                        chunk = empty
                        fresh = nil
                    } else if case .chunk(let empty) = flow.takeChunk(from: engine.chunkPool, beyondLimit: true) {
                        // (No piece is larger than a chunk: libcurl passes at most its read size, which is
                        // no more than a chunk's capacity.)
                        chunk = empty
                    } else {
                        outOfMemory = true
                        return 0
                    }
                }
                guard let current = chunk else { return 0 }
                // The first bytes since the last post: posted at the end of this turn.
                if current.count == posted { engine.filling(self) }
                let n = current.fill(data + taken, size - taken)
                taken += n
                streamed += UInt64(n)
                if current.isFull { postFilledChunk(holding: fresh?.capacity ?? 0) }
            }
            if let fresh { _ = flow.delivered(fresh) }
            received += Int64(size)
            // The next pieces that fit take the fast path above.
            if let current = chunk, current.count > posted {
                fillNext = current.bytes + current.count
                fillRoom = current.capacity - current.count
                if limit > 0 { fillRoom = Int(clamping: min(UInt64(fillRoom), limit - UInt64(received))) }
            }
            return size
        case .file:
            if let error = file?.write(data, size) {
                fileError = error
                return 0
            }
        case .buffer, .undecided:
            // The first piece: room for the whole body at once (on a body's first byte, not at the
            // end of the headers: only the response that sends the body is reserved for).
            if body.count == 0 { reserveBody(request) }
            // A streaming request's answer that is not the body asked for (an HTTP error, ...):
            // its first part only.
            if request.streamsBody, size > ServerData.errorBodyLimit - body.count {
                let room = max(0, ServerData.errorBodyLimit - body.count)
                if room > 0, body.append(data, room) { received += Int64(room) }
                errorBodyCut = true
                return 0
            }
            guard body.append(data, size) else {
                outOfMemory = true
                return 0
            }
        }
        received += Int64(size)
        return size
    }

    /// Engine thread: posts what the chunk being filled received since the last post, if
    /// anything (at the end of each turn of the engine's loop, when the chunk is full, and before
    /// a pause), as a piece of it: no copy. A full chunk is then given back (its pieces hold it
    /// until delivered); another goes on filling. (Pieces of one buffer, not a small copy of each:
    /// a chunk posted with a few bytes used to be copied into a buffer of their size, about 70
    /// of 117 posts per 10 MiB body at K = 1, bench/README.md.)
    /// `holding`: the capacity of an empty chunk taken for the next bytes and not in `chunk` yet.
    func postFilledChunk(holding: Int = 0) {
        syncFill()
        guard let current = chunk, current.count > posted, let request, let flow = request.flow else { return }
        // (The bytes since the last post are the last ones streamed; clamped all the same.)
        let unposted = UInt64(current.count - posted)
        let offset = streamed >= unposted ? streamed - unposted : 0
        let piece: StreamChunk
        if posted == 0, current.isFull {
            // A whole buffer goes as it is, with the engine's hold on it.
            current.offset = offset
            piece = current
            chunk = nil
        } else {
            piece = current.piece(from: posted, offset: offset)
            posted = current.count
            if current.isFull {
                chunk = nil
                posted = 0
                _ = flow.delivered(current)
            }
        }
        let urgent = flow.backlogged(filling: (chunk?.capacity ?? 0) + holding)
        if !engine.postChunk(request, generation, piece, urgent: urgent) { _ = flow.delivered(piece) }
    }

    /// Brings the count of the chunk being filled up to date with the fast path's copies (see
    /// `fillNext`), and closes the fast path.
    private func syncFill() {
        if let next = fillNext, let current = chunk { current.count = next - current.bytes }
        fillNext = nil
        fillRoom = 0
    }

    /// Engine thread: resumes a transfer paused by its write callback.
    func unpause() {
        guard paused else { return }
        paused = false
        _ = ccurl_easy_unpause(easy)
    }

    /// libcurl's progress function; returns false to abort the transfer.
    private func progress(downloaded: Int64, uploaded: Int64) -> Bool {
        guard let request else { return true }
        // libcurl reads a proxy's answer to CONNECT one byte at a time, for as long as bytes come,
        // before it returns from `curl_multi_perform` (7.88's lib/http_proxy.c, recv_CONNECT_resp;
        // later ones' cf-h1-proxy.c alike): a proxy sending an endless body with a 407 (chunked,
        // or of a huge Content-Length) held the engine thread, every transfer of the queue and
        // the request's own timeout, for as long as it went on. That loop calls this function for
        // every byte, so a transfer through a proxy has it on (`configureRoute`), and calls beyond
        // any other use of one perform end the attempt (an answer's headers are within the header
        // budget; a body this long with a 407 is no proxy's).
        if !route.direct {
            let performs = engine.performs
            progressCalls = progressCalls.perform == performs ? (performs, progressCalls.count + 1) : (performs, 1)
            if progressCalls.count > Transfer.progressCallsPerPerform {
                return refuse("the proxy's answer to CONNECT did not end within \(Transfer.progressCallsPerPerform) bytes")
            }
        }
        if request.downloadProgress != nil {
            var length: curl_off_t = -1
            _ = ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
            request.download.update(received: downloaded, length: Int64(length))
            let done = request.download.done, total = request.download.total
            if done != reportedDownload.done || total != reportedDownload.total, done > 0 || total >= 0 {
                reportedDownload = (done, total)
                engine.reportProgress(request, generation, upload: false, done: done, total: total)
            }
        }
        if request.uploadProgress != nil, request.hasBody {
            let total = Int64(request.body.count)
            let done = max(uploaded, request.uploadReported, 0)
            if done != request.uploadReported {
                request.uploadReported = done
                engine.reportProgress(request, generation, upload: true, done: done, total: total)
            }
        }
        return true
    }

    /// The calls of the progress function within one `curl_multi_perform` (`Engine.performs`), and
    /// their most for a transfer through a proxy (see `progress`): a transfer's other calls in one
    /// perform are one per read of its connection, at most 100 (libcurl's own bound).
    private var progressCalls = (perform: 0, count: 0)
    static let progressCallsPerPerform = 65536

    /// libcurl has a connection for the attempt (new or reused) and is about to send the request:
    /// find its socket. A socket libcurl opened for this attempt is recorded under the
    /// connection's addresses (if its local port confirms it is the one that connected), so that
    /// later attempts reusing the connection find it there.
    /// Returns false to refuse sending: a request already sent that got no status line back is
    /// being sent again (libcurl does so when a kept connection closed unanswered), and its method
    /// is not idempotent: the server may have acted on it, so it goes again only when the caller
    /// allowed retries of such methods.
    private func connected(primaryIP: UnsafeMutablePointer<CChar>?, localIP: UnsafeMutablePointer<CChar>?,
                           primaryPort: Int32, localPort: Int32) -> Bool {
        if sentUnanswered, let request, !request.retry.retriesNonIdempotent,
           !HTTPMethods.idempotent.contains(request.method) {
            resendRefused = true
            return false
        }
        let key = Transfer.connectionKey(primaryIP, localIP, primaryPort, localPort, seed: keySeed)
        let opened = openedSocket
        openedSocket = -1
        counted.tcp = -1
        if opened >= 0, ccurl_local_port(opened) == localPort {
            engine.socketConnected(opened, key: key)
            socket = opened
        } else {
            socket = engine.socket(for: key)
            // A kept HTTP/1.x connection must have nothing to read before a request goes on it:
            // bytes there were sent before the request (a response nobody asked for, a body after
            // a HEAD's or a 204's head, a 408 on the idle connection, its close) and would be read
            // as its reply. libcurl 7.88 uses such a connection again (8.0 no longer does: "deny
            // reuse on unclean connections"). The request does not go out on it, whatever its
            // method: the connection is reset (libcurl finds it dead from then on), this transfer
            // refuses to send, and the engine begins the attempt again on another one. (Letting
            // libcurl's send fail instead, and libcurl send the request on a new connection, left
            // that failure's message in the error buffer, where libcurl 7.88 keeps the first of a
            // transfer: a later error of the reply was reported as that "Send failure".)
            if socket >= 0, carriesHTTP1(socket), ccurl_socket_has_input(socket) != 0 {
                _ = ccurl_tcp_reset(socket)
                beginsAgain = true
                return false
            }
        }
        sentUnanswered = true
        statusLineNext = true
        if ownCookies != nil, let request {
            let send = atOrigin(of: request)
            if send || route.cookies { setOwnCookies(send) }
        }
        return true
    }

    /// Whether the kept connection with socket `fd` that libcurl chose for the next request of
    /// the attempt speaks HTTP/1.x (an HTTP/2 one may receive frames at any time): plain http
    /// (cleartext HTTP/2 never keeps its connection: Transport.swift), or https where a response
    /// came back as HTTP/1.x on it (`statusLine`).
    private func carriesHTTP1(_ fd: Int32) -> Bool {
        !hopIsHTTPS(firstHop: responses == 0) || engine.carriedHTTP1(fd)
    }

    /// Whether the request of the attempt being sent or answered goes over https: the URL's for
    /// the first one, libcurl's connection's after a response (a redirect may change it). True
    /// when libcurl does not say.
    private func hopIsHTTPS(firstHop: Bool) -> Bool {
        if firstHop { return request?.url.https ?? true }
        var scheme: UnsafeMutablePointer<CChar>?
        guard ccurl_easy_getinfo_str(easy, CURLINFO_SCHEME, &scheme) == CURLE_OK, let scheme else { return true }
        return strcasecmp(scheme, "https") == 0
    }

    /// Whether the request about to be sent goes to the scheme, host name and port of the request's
    /// URL: the first one, or one a redirect led back there (libcurl's rule for a Cookie or
    /// Authorization line of the caller's, which it sends nowhere else).
    private func atOrigin(of request: Request) -> Bool {
        var redirects = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
        guard redirects > 0 else { return true }
        var effective: UnsafeMutablePointer<CChar>?
        guard ccurl_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK, let effective,
              let url = try? URLParser.parse(effective, UnsafeBufferPointer(start: UnsafeRawPointer(effective)
                  .assumingMemoryBound(to: UInt8.self), count: strlen(effective))) else { return false }
        return url.https == request.url.https && url.port == request.url.port && url.host == request.url.host
    }

    /// Sets CURLOPT_COOKIE to `ownCookies` (libcurl copies it), or unsets it.
    func setOwnCookies(_ on: Bool) {
        if on, let ownCookies {
            _ = ownCookies.withUnsafeBufferPointer { ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIE, $0.baseAddress) }
        } else {
            _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COOKIE, nil)
        }
        route.cookies = on && ownCookies != nil
    }

    /// A connection's key in the engine's table of sockets: a hash of its addresses and ports
    /// (FNV-1a from a seed drawn once per process; `Hasher` cost six times as much, and this runs
    /// for every attempt).
    static func connectionKey(_ primaryIP: UnsafePointer<CChar>?, _ localIP: UnsafePointer<CChar>?,
                              _ primaryPort: Int32, _ localPort: Int32, seed: UInt64 = connectionKeySeed) -> Int {
        var hash = seed
        func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        func mix(text: UnsafePointer<CChar>?) {
            var next = text
            while let at = next, at.pointee != 0 {
                mix(UInt8(bitPattern: at.pointee))
                next = at + 1
            }
            mix(UInt8(0))
        }
        func mix(port: Int32) {
            mix(UInt8(truncatingIfNeeded: port))
            mix(UInt8(truncatingIfNeeded: port >> 8))
        }
        mix(text: primaryIP)
        mix(text: localIP)
        mix(port: primaryPort)
        mix(port: localPort)
        return Int(truncatingIfNeeded: hash)
    }

    private static let connectionKeySeed = UInt64.random(in: .min ... .max) | 1
    /// `connectionKeySeed`, read once per transfer (a static's every read checks its lazy
    /// initialization).
    private let keySeed = Transfer.connectionKeySeed

    /// Engine thread: the completion message when the attempt broke one of its slow-server limits
    /// (`TransferWatch`), nil while it is fine. Bytes count in both directions, headers included.
    func stall(now: Double) -> String? {
        guard let request else { return nil }
        var down: curl_off_t = 0, up: curl_off_t = 0, pretransfer: curl_off_t = 0
        var header = 0
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_DOWNLOAD_T, &down)
        // A request that sends no body uploads nothing.
        if request.sendsBody { _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &up) }
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HEADER_SIZE, &header)
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer)
        // libcurl's counters start again on a redirect: count what grew, and a change as a byte.
        let curl = Int64(clamping: down).addingReportingOverflow(Int64(clamping: up)).partialValue
            .addingReportingOverflow(Int64(header)).partialValue
        var grown = curl >= counted.curl ? curl - counted.curl : 1
        movedCounted = movedCounted.addingReportingOverflow(grown).overflow ? Int64.max : movedCounted + grown
        // The socket also sees what libcurl has not counted yet: a header line still arriving, TLS
        // records. (On an HTTP/2 connection shared by several requests it sees them all.)
        let tcp = ccurl_tcp_bytes(socket)
        if tcp >= 0 {
            if counted.tcp >= 0, tcp >= counted.tcp { grown = max(grown, tcp - counted.tcp) }
            counted.tcp = tcp
        }
        moved = moved.addingReportingOverflow(grown).overflow ? Int64.max : moved + grown
        let uploading = Int64(up) != counted.upload
        counted = (curl, Int64(up), counted.tcp)
        let sample = TransferWatch.Sample(moved: moved, connecting: pretransfer == 0, uploading: uploading,
                                          awaitingHeaders: awaitingHeaders, paused: paused, counted: movedCounted)
        return watch.check(now: now, sample).map { watch.message($0) }
    }

    /// The response of this attempt of `request`, after libcurl reported it done with `code`.
    func response(for request: Request, code reported: CURLcode, message override: String? = nil) -> Response {
        let code = answeredEarly(request, reported) ? CURLE_OK : reported
        // libcurl's status of the last response; 0 for a reply that is not HTTP. A transfer that
        // ended well without a proxy: the last status line libcurl handed over is that response's
        // (libcurl passes a proxy's CONNECT answers to the header callback too), and its version.
        let ownStatusLine = code == CURLE_OK && route.direct && self.status > 0
        var status = ownStatusLine ? self.status : 0
        if !ownStatusLine, self.status >= 0 { _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        // The effective URL is the one set unless libcurl followed a redirect, or tried to (a
        // 3xx was the only response, or there were several).
        let followedNone = responses == 0 || (responses == 1 && !(300...399).contains(self.status))
        var effective: UnsafeMutablePointer<CChar>?
        if !(followedNone && urlSetIsEffective) { _ = ccurl_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective) }
        var downloadTotal = lengthRead.length
        if lengthRead.response != responses {
            _ = ccurl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &downloadTotal)
        }
        // A request that sends no body uploads nothing.
        var uploaded: curl_off_t = 0
        if request.sendsBody { _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &uploaded) }
        var downloaded: curl_off_t = 0
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_DOWNLOAD_T, &downloaded)
        request.download.update(received: Int64(downloaded), length: Int64(downloadTotal))
        if let error = file?.close(), fileError == nil { fileError = error }
        // The request's own URL unless a redirect led elsewhere: no copy in the common case.
        var url = request.url.string
        var secure = request.url.https
        if let effective {
            if url.withCString({ strcmp($0, effective) }) != 0 {
                url = String(cString: effective)
                secure = strncasecmp(effective, "https:", 6) == 0
                // After a redirect whose Location has no fragment, the request's own fragment
                // applies (RFC 9110 10.2.2); libcurl's URL is the Location's.
                let hash = UInt8(ascii: "#")
                if strchr(effective, Int32(hash)) == nil, let at = request.url.string.utf8.firstIndex(of: hash) {
                    url += request.url.string[at...]
                }
            } else if followedNone, urlSet != nil {
                urlSetIsEffective = true
            }
        }
        let outcome: Outcome
        var message: String
        if let protocolError {
            outcome = .badResponse
            message = protocolError
        } else if let heldEngine, code != CURLE_OK {
            outcome = .badResponse
            message = heldEngine
        } else if seeOtherKept {
            outcome = .ok
            message = ""
        } else if resendRefused {
            outcome = .connectionLost
            message = "the server closed the connection without answering; the \(request.method) request was not "
                + "sent again, as the server may have acted on it (rq_request_set_retry_non_idempotent allows it)"
        } else if let fileError, !outOfMemory, !tooLarge {
            outcome = .fileError
            message = fileError
        } else if code == CURLE_OK, awaitingHeaders, responses > 0 {
            // libcurl ends a reply whose connection closed inside its headers as if it were whole.
            outcome = .connectionLost
            message = "the connection closed before the response headers were complete"
        } else if code == CURLE_OK || errorBodyCut {
            outcome = status >= 400 ? .httpStatus : .ok
            message = status >= 400 ? "The server returned a \(status) error" : ""
            if errorBodyCut { message += " (its body was cut at \(ServerData.errorBodyLimit) bytes)" }
        } else {
            message = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            if code == CURLE_OUT_OF_MEMORY, !outOfMemory, sink == .undecided {
                // libcurl's own limit of one header line (100 KiB) reports "out of memory".
                outcome = .badResponse
                message = "a header line of the response is longer than libcurl's limit of 100 KiB"
            } else if code == CURLE_OUT_OF_MEMORY, !outOfMemory, paused {
                // A paused transfer: libcurl keeps what it decoded from its last read, up to its
                // limit (64 MiB). Only a compressed body expands that much from one read.
                outcome = .badResponse
                message = "the response body expands to more than libcurl keeps for a paused transfer "
                    + "(64 MiB decoded from one read of the connection: a decompression bomb)"
            } else if code == CURLE_HTTP2, errorBuffer.pointee == 0 {
                // libcurl 7.88 says nothing more when the HTTP/2 session has ended under the
                // transfer (nghttp2 has nothing left to read or write): the server sent a GOAWAY
                // that left the stream out (it was not processed), or nghttp2 ended the session
                // for a frame it refused. Like a connection closed before the answer.
                outcome = .connectionLost
                message = "the HTTP/2 connection ended before the response was complete (a GOAWAY from the server, "
                    + "or frames that broke the protocol)"
            } else if code == CURLE_HTTP2_STREAM, errorBuffer.pointee == 0, request.sendsBody {
                // As `answeredEarly`, but libcurl had not handed the response over (or its body
                // was cut): nothing of it can be delivered.
                outcome = .connectionLost
                message = "the server closed the HTTP/2 stream while the request body was being sent (after an "
                    + "early answer, which libcurl 7.88 then drops, or a cut one)"
            } else if code == CURLE_BAD_FUNCTION_ARGUMENT, status != 0 {
                // libcurl's reading of header fields (its headers API) refuses a line where it
                // finds no name: a bare CR before a header line's colon, a continuation line with
                // no field before it, a chunked trailer without a colon or with a NUL byte (such a
                // header line is CURLE_WEIRD_SERVER_REPLY).
                outcome = .badResponse
                message = "a header or trailer line of the response is malformed (no colon, a CR before its colon, "
                    + "a NUL byte, or a continuation line with no field before it)"
            } else if code == CURLE_WRITE_ERROR, !outOfMemory, !tooLarge,
                      errorBuffer.pointee == 0 || message == "Failed reading the chunked-encoded stream",
                      HeaderLines.valueBytes(named: "Content-Encoding", in: headers.bytes) != nil {
                // libcurl's gzip, deflate and br decoders refuse bytes after the end of the
                // compressed data (a second gzip member too) with a write error and no message
                // (its chunked reader's, in chunks); the library's own refusals of body bytes come
                // with libcurl's "Failure writing output to destination".
                outcome = .badResponse
                message = "the response body does not decode: bytes follow the end of its compressed data"
            } else {
                outcome = outOfMemory ? .transport : tooLarge ? .responseTooLarge
                    : Transfer.outcome(of: code, message: message, statusSeen: status != 0)
            }
            if code == CURLE_HTTP2_STREAM, ServerData.isHTTP2ProtocolReset(message) {
                message = "the HTTP/2 response broke the protocol, and its stream was reset (libcurl: \(message))"
            }
            if code == CURLE_RECV_ERROR, !outOfMemory, ServerData.http2FieldsTooLarge(message) {
                message = "the response's HTTP/2 header or trailer fields are larger than libcurl takes (128 KiB)"
            }
            if outOfMemory { message = "out of memory while receiving the response" }
            if tooLarge || code == CURLE_FILESIZE_EXCEEDED {
                message = "the response body is larger than the maximum of \(request.maxResponseSize) bytes"
            }
            if let override { message = override }
        }
        let response = Response(outcome: outcome, status: status, headers: headers.bytes, body: body.detach(),
                                url: consume url, message: consume message, attempts: request.attempts,
                                downloaded: received, progress: (request.download.done, request.download.total),
                                // (At its highest in the attempt: a body sent again on a new transfer
                                // after a challenge, that failed at once, does not take it back.)
                                uploaded: request.hasBody ? max(Int64(uploaded), request.uploadReported, 0) : 0,
                                uploadTotal: request.hasBody ? Int64(request.body.count) : -1)
        if headDeferred { response.deferredHead = head(for: request) }
        response.metrics = Metrics(easy: easy, request: request, secure: secure,
                                   received: received, wire: (downloaded, uploaded),
                                   version: ownStatusLine && statusVersion != 0 ? statusVersion : nil)
        return response
    }

    /// Whether a transfer libcurl reports failed was answered in full before its request body was
    /// all sent, over HTTP/2. A server may answer without reading the whole body (nginx's
    /// `return`, an error page, a redirect) and then reset the stream with NO_ERROR, which asks
    /// the client to stop sending (RFC 9113 8.1). libcurl 7.88 had delivered the whole response
    /// (the stream closed cleanly, after its headers), then fails the body's next send with
    /// CURLE_HTTP2_STREAM and no message ("stream %u closed", an infof). Such a response stands,
    /// unless its Content-Length says its body was cut.
    private func answeredEarly(_ request: Request, _ code: CURLcode) -> Bool {
        guard code == CURLE_HTTP2_STREAM, errorBuffer.pointee == 0, request.sendsBody, multiplexed,
              status >= 200, !awaitingHeaders, protocolError == nil, heldEngine == nil else { return false }
        guard contentLength >= 0 else { return true }
        var downloaded: curl_off_t = 0
        _ = ccurl_easy_getinfo_off(easy, CURLINFO_SIZE_DOWNLOAD_T, &downloaded)
        return Int64(downloaded) == contentLength
    }

    /// The outcome of a failed transfer from libcurl's code, its message and whether a status line
    /// came in the attempt.
    static func outcome(of code: CURLcode, message: String, statusSeen: Bool) -> Outcome {
        switch code {
        // libcurl reports invalid chunked framing as a receive error, like a broken connection.
        // So does it for its own limit of header bytes.
        case CURLE_RECV_ERROR where ServerData.isFramingError(message): .badResponse
        // A malformed HTTP/2 response: nghttp2 resets its stream (so does a server, for a protocol error).
        case CURLE_HTTP2_STREAM where ServerData.isHTTP2ProtocolReset(message): .badResponse
        // A reply that is not HTTP (libcurl takes it for HTTP/0.9, which it refuses); otherwise a
        // redirect to a scheme or URL that is not allowed.
        case CURLE_UNSUPPORTED_PROTOCOL where !statusSeen || ServerData.isNotHTTPError(message): .badResponse
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
