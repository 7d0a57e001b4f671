// The C boundary: one short forwarder per function of include/requestqueue.h. Each checks its
// pointers and values, converts, and calls the core. Nothing here may trap on caller input.
import CRequestQueueAPI
import Glibc
import RequestQueueCore

// MARK: Helpers (the shared ones are in Boundary.swift)

/// A time in seconds: finite, >= 0, at most `limit`.
private func validSeconds(_ seconds: Double, limit: Double = 1e6) -> Bool {
    seconds.isFinite && seconds >= 0 && seconds <= limit
}

/// RQ_ERR_INVALID_ARGUMENT for a time in seconds that `validSeconds` refused.
private func badSeconds(_ argument: String, _ seconds: Double, function: StaticString = #function) -> rq_result {
    outOfRange(argument, seconds, "a number of seconds from 0 to 1e6", function: function)
}

/// Sets a time in seconds on a request that can still be changed, after checking it.
private func setSeconds(_ pointer: OpaquePointer?, _ field: ReferenceWritableKeyPath<Request, Double>, _ seconds: Double,
                        function: StaticString = #function) -> rq_result {
    configure(pointer, function: function) { r in
        guard validSeconds(seconds) else { return badSeconds("seconds", seconds, function: function) }
        r[keyPath: field] = seconds
        r.explicitSettings.insert(InheritedSettings.seconds(field))
        return RQ_OK
    }
}

func inputResult(_ error: InputError, function: StaticString = #function) -> rq_result {
    let code = switch error.kind {
    case .invalidURL: RQ_ERR_INVALID_URL
    case .unsupportedScheme: RQ_ERR_UNSUPPORTED_SCHEME
    case .invalidMethod: RQ_ERR_INVALID_METHOD
    case .invalidHeader: RQ_ERR_INVALID_HEADER
    }
    return fail(code, error.reason, function: function)
}

/// A process-wide queue (the default queue, the hidden one of `rq_request_start`), made on first
/// use. When it cannot be made (no thread available, say), the next call tries again: a shortage
/// is never remembered. A child process created by fork() makes its own (see ForkGuard).
// @unchecked Sendable: `made` under `lock` (a Lock, held across the fork handlers).
private final class ProcessQueue: @unchecked Sendable, ForkGuard.Participant {
    private let kind: Queue.Kind
    private let lock = Lock()
    private var made: Queue?

    init(_ kind: Queue.Kind) {
        self.kind = kind
        _ = HandleTable.shared // registered with ForkGuard first, never under `lock`
        ForkGuard.register(self)
    }

    var forkRank: Int { ForkGuard.rankProcessQueue }
    func forkPrepare() { lock.acquire() }
    func forkParent() { lock.release() }
    func forkChild() {
        made = nil
        lock.release()
    }

    var queue: Queue? {
        lock.withLock {
            if made == nil { made = Queue(delivery: .threaded, kind: kind) }
            return made
        }
    }
}

private let sharedQueue = ProcessQueue(.shared)
private let standaloneQueue = ProcessQueue(.standalone)

// MARK: Version and names

@c @implementation public func rq_version_number() -> UInt32 { UInt32(RQ_VERSION_MAJOR * 10000 + RQ_VERSION_MINOR * 100 + RQ_VERSION_PATCH) }

@c @implementation public func rq_version_string() -> UnsafePointer<CChar>? { StaticNames.version }

@c @implementation public func rq_last_error_message() -> UnsafePointer<CChar>? { LastError.message }

@c @implementation public func rq_result_str(_ result: Int32) -> UnsafePointer<CChar>? { StaticNames.result(result) }

@c @implementation public func rq_outcome_str(_ outcome: Int32) -> UnsafePointer<CChar>? { StaticNames.outcome(outcome) }

// MARK: Queues

@c @implementation public func rq_queue_new(_ delivery: rq_delivery, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> rq_result {
    guard let out else { return null("out_queue") }
    let mode: Queue.Delivery
    switch delivery {
    case RQ_DELIVERY_THREADED: mode = .threaded
    case RQ_DELIVERY_DISPATCH: mode = .dispatch
    case RQ_DELIVERY_INLINE: mode = .inline
    default:
        return outOfRange("delivery", delivery.rawValue,
                          "RQ_DELIVERY_THREADED (0), RQ_DELIVERY_DISPATCH (1) or RQ_DELIVERY_INLINE (2)")
    }
    guard let q = Queue(delivery: mode, kind: .user) else {
        return fail(RQ_ERR_SYSTEM, "no thread or descriptor could be had for the queue (a later call may succeed), or libcurl's global initialisation failed")
    }
    out.pointee = q.pointer
    return RQ_OK
}

@c @implementation public func rq_queue_free(_ pointer: OpaquePointer?) -> rq_result {
    guard pointer != nil else { return RQ_OK }
    // A queue inherited across fork() is released without its threads or locks.
    if let q = HandleTable.shared.lookup(pointer, kind: .queue, as: Queue.self), q.inherited {
        return q.abandonInChild() ? RQ_OK : fail(RQ_ERR_INVALID_HANDLE, "the queue was freed by another thread")
    }
    return withQueue(pointer) { q in
        guard q.kind == .user else {
            return fail(RQ_ERR_INVALID_STATE, q.kind == .shared ? "the default queue (rq_queue_default) cannot be freed"
                                                                : "this internal queue cannot be freed")
        }
        guard !q.isCallingBack else {
            return fail(RQ_ERR_WOULD_DEADLOCK, "called from a callback of this same queue, which it would wait for")
        }
        return reported(q.close()) { _ in "the queue was freed by another thread during the call" }
    }
}

@c @implementation public func rq_queue_default() -> OpaquePointer? { sharedQueue.queue?.pointer }

@c @implementation public func rq_queue_set_max_concurrent(_ pointer: OpaquePointer?, _ value: Int) -> rq_result {
    withQueue(pointer) { q in
        q.setMaxConcurrent(Int(clamping: UInt(bitPattern: value)))
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_max_concurrent(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_max_concurrent") }
        out.pointee = q.maxConcurrent
        return RQ_OK
    }
}

@c @implementation public func rq_queue_set_order(_ pointer: OpaquePointer?, _ order: rq_order) -> rq_result {
    withQueue(pointer) { q in
        switch order {
        case RQ_ORDER_FIFO: q.order = .fifo
        case RQ_ORDER_LIFO: q.order = .lifo
        default: return outOfRange("order", order.rawValue, "RQ_ORDER_FIFO (0) or RQ_ORDER_LIFO (1)")
        }
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_order(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_order>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_order") }
        out.pointee = q.order == .fifo ? RQ_ORDER_FIFO : RQ_ORDER_LIFO
        return RQ_OK
    }
}

@c @implementation public func rq_queue_set_duplicates(_ pointer: OpaquePointer?, _ mode: rq_duplicates) -> rq_result {
    withQueue(pointer) { q in
        switch mode {
        case RQ_DUPLICATES_CANCEL_EARLIER: q.duplicates = .cancelEarlier
        case RQ_DUPLICATES_ALLOW: q.duplicates = .allow
        case RQ_DUPLICATES_COALESCE: q.duplicates = .coalesce
        default: return outOfRange("duplicates", mode.rawValue, "RQ_DUPLICATES_CANCEL_EARLIER (0), RQ_DUPLICATES_ALLOW (1) or RQ_DUPLICATES_COALESCE (2)")
        }
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_duplicates(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_duplicates>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_duplicates") }
        out.pointee = switch q.duplicates {
        case .cancelEarlier: RQ_DUPLICATES_CANCEL_EARLIER
        case .allow: RQ_DUPLICATES_ALLOW
        case .coalesce: RQ_DUPLICATES_COALESCE
        }
        return RQ_OK
    }
}

@c @implementation public func rq_queue_set_max_per_host(_ pointer: OpaquePointer?, _ value: Int) -> rq_result {
    withQueue(pointer) { q in
        q.maxPerHost = Int(clamping: UInt(bitPattern: value))
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_max_per_host(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_max_per_host") }
        out.pointee = q.maxPerHost
        return RQ_OK
    }
}

@c @implementation public func rq_queue_set_rate_limit(_ pointer: OpaquePointer?, _ starts: UInt32, _ interval: Double, _ perHost: Int32) -> rq_result {
    withQueue(pointer) { q in
        if starts == 0 {
            q.rateLimit = nil
            return RQ_OK
        }
        guard interval.isFinite, interval > 0, interval <= 1e6 else {
            return outOfRange("interval_seconds", interval, "a number of seconds above 0 and at most 1e6")
        }
        q.rateLimit = RateLimit(starts: Int(starts), interval: interval, perHost: perHost != 0)
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_stats(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_queue_stats>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_stats") }
        let size = UInt(bitPattern: out.pointee.size)
        let least = MemoryLayout<Int>.size + MemoryLayout<UInt64>.size
        guard size >= UInt(least) else {
            return outOfRange("out_stats->size", size, "at least \(least) (set it to sizeof(rq_queue_stats))")
        }
        let s = q.statistics
        copySizePrefixed(rq_queue_stats(size: 0, added: s.added, started: s.started, retried: s.retried,
                                        succeeded: s.succeeded, cancelled: s.cancelled, failed: s.failed,
                                        coalesced: s.coalesced, bytes_down: s.bytesDown, bytes_up: s.bytesUp),
                         to: out, callerSize: size, \.size)
        return RQ_OK
    }
}

@c @implementation public func rq_queue_set_context(_ pointer: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> rq_result {
    withQueue(pointer) { q in
        q.context = context
        return RQ_OK
    }
}

@c @implementation public func rq_queue_get_context(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_context") }
        out.pointee = q.context
        return RQ_OK
    }
}

@c @implementation public func rq_queue_suspend(_ pointer: OpaquePointer?) -> rq_result {
    withQueue(pointer) { q in q.suspend(); return RQ_OK }
}

@c @implementation public func rq_queue_resume(_ pointer: OpaquePointer?) -> rq_result {
    withQueue(pointer) { q in q.resume(); return RQ_OK }
}

@c @implementation public func rq_queue_is_suspended(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_suspended") }
        out.pointee = q.isSuspended ? 1 : 0
        return RQ_OK
    }
}

@c @implementation public func rq_queue_count(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_count") }
        out.pointee = q.count
        return RQ_OK
    }
}

@c @implementation public func rq_queue_snapshot(_ pointer: OpaquePointer?, _ outList: UnsafeMutablePointer<UnsafeMutablePointer<OpaquePointer?>?>?,
                                                 _ outCount: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let outList else { return null("out_requests") }
        guard let outCount else { return null("out_count") }
        return writeList(q.snapshot(), outList, outCount)
    }
}

@c @implementation public func rq_queue_snapshot_tag(_ pointer: OpaquePointer?, _ tag: UnsafePointer<CChar>?,
                                                     _ outList: UnsafeMutablePointer<UnsafeMutablePointer<OpaquePointer?>?>?,
                                                     _ outCount: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let tag else { return null("tag") }
        guard let outList else { return null("out_requests") }
        guard let outCount else { return null("out_count") }
        return writeList(q.snapshot(tag: copyCString(tag)), outList, outCount)
    }
}

@c @implementation public func rq_queue_count_tag(_ pointer: OpaquePointer?, _ tag: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let tag else { return null("tag") }
        guard let out else { return null("out_count") }
        out.pointee = q.snapshot(tag: copyCString(tag)).count
        return RQ_OK
    }
}

@c @implementation public func rq_queue_cancel_tag(_ pointer: OpaquePointer?, _ tag: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard let tag else { return null("tag") }
        let cancelled = q.cancelAll(tag: copyCString(tag))
        out?.pointee = cancelled
        return RQ_OK
    }
}

private func writeList(_ requests: [Request], _ outList: UnsafeMutablePointer<UnsafeMutablePointer<OpaquePointer?>?>,
                       _ outCount: UnsafeMutablePointer<Int>, function: StaticString = #function) -> rq_result {
    guard let raw = malloc(max(1, requests.count) * MemoryLayout<OpaquePointer?>.stride) else {
        return fail(RQ_ERR_OUT_OF_MEMORY, "no memory for an array of \(requests.count) handles", function: function)
    }
    let list = raw.bindMemory(to: OpaquePointer?.self, capacity: max(1, requests.count))
    for (i, r) in requests.enumerated() { list[i] = r.pointer }
    outList.pointee = list
    outCount.pointee = requests.count
    return RQ_OK
}

@c @implementation public func rq_snapshot_free(_ list: UnsafeMutablePointer<OpaquePointer?>?) { free(list) }

@c @implementation public func rq_queue_cancel_all(_ pointer: OpaquePointer?) -> rq_result {
    withQueue(pointer) { q in q.cancelAll(); return RQ_OK }
}

/// RQ_ERR_WRONG_DELIVERY for a call that only a dispatch-mode queue takes.
private func wrongDelivery(_ q: Queue, _ consequence: String, function: StaticString = #function) -> rq_result {
    let how = q.delivery == .inline ? "on its engine thread (RQ_DELIVERY_INLINE)" : "on its own thread (RQ_DELIVERY_THREADED)"
    return fail(RQ_ERR_WRONG_DELIVERY, "the queue delivers \(how): \(consequence)", function: function)
}

@c @implementation public func rq_queue_get_fd(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<Int32>?) -> rq_result {
    withQueue(pointer) { q in
        guard let out else { return null("out_fd") }
        guard q.delivery == .dispatch else { return wrongDelivery(q, "it has no descriptor") }
        out.pointee = q.eventFD
        return RQ_OK
    }
}

@c @implementation public func rq_queue_dispatch(_ pointer: OpaquePointer?, _ max: Int, _ outRan: UnsafeMutablePointer<Int>?) -> rq_result {
    withQueue(pointer) { q in
        guard q.delivery == .dispatch else { return wrongDelivery(q, "nothing to dispatch") }
        guard CallbackContext.currentQueue != q.handle else {
            return fail(RQ_ERR_WOULD_DEADLOCK, "called from a callback of this same queue, which is being dispatched")
        }
        let ran = q.dispatch(limit: Int(clamping: UInt(bitPattern: max)))
        outRan?.pointee = ran
        return RQ_OK
    }
}

@c @implementation public func rq_queue_wait_idle(_ pointer: OpaquePointer?, _ timeout: Double) -> rq_result {
    withQueue(pointer) { q in
        guard !timeout.isNaN else { return outOfRange("timeout_seconds", timeout, "a number (< 0 waits without limit)") }
        guard !q.isCallingBack else {
            return fail(RQ_ERR_WOULD_DEADLOCK, "called from a callback of this same queue, which it would wait for")
        }
        let deadline: Double? = timeout < 0 || timeout.isInfinite ? nil : Clock.now() + timeout
        return reported(q.waitIdle(deadline: deadline)) { _ in "the queue was not idle after \(timeout) s" }
    }
}

@c @implementation public func rq_add(_ queuePointer: OpaquePointer?, _ requestPointer: OpaquePointer?) -> rq_result {
    withQueue(queuePointer) { q in
        let (r, result) = request(requestPointer)
        guard let r else { return result }
        guard !r.isDefaults else {
            return fail(RQ_ERR_INVALID_STATE, "the request is a queue's defaults (rq_queue_get_defaults): it is never added")
        }
        return reported(q.transport.add(r, to: q)) { code in
            code == RQ_ERR_INVALID_HANDLE ? "the request was freed by another thread during the call" : standardReason(code)
        }
    }
}

@c @implementation public func rq_cancel(_ pointer: OpaquePointer?) -> rq_result {
    CancelPrefetch.start(handle: pointer)
    if Queue.cancel(handle: pointer) { return RQ_OK }
    let (r, result) = request(pointer)
    guard let r else { return result }
    guard let q = r.lock.withLock({ r.queue }) else { return fail(RQ_ERR_NOT_ACTIVE, standardReason(RQ_ERR_NOT_ACTIVE)) }
    guard !q.inherited else { return fail(RQ_ERR_QUEUE_CLOSED, inheritedRequestReason) }
    return reported(q.cancel(r)) { _ in "the request already completed (or another cancel came first)" }
}

// MARK: Requests

/// A new GET request for the C string `url` (its bytes `bytes`), or why the URL is refused
/// (recorded as `function`'s): what `rq_request_new` and `rq_add_url` make.
func newRequest(_ url: UnsafePointer<CChar>, _ bytes: UnsafeBufferPointer<UInt8>,
                function: StaticString = #function) -> (Request?, rq_result) {
    do throws(URLParser.Failure) {
        return (Request(url: try URLParser.parse(url, bytes)), RQ_OK)
    } catch {
        switch error {
        case let .input(error): return (nil, inputResult(error, function: function))
        case .outOfMemory: return (nil, fail(RQ_ERR_OUT_OF_MEMORY, "no memory to parse the URL", function: function))
        }
    }
}

@c @implementation public func rq_request_new(_ url: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> rq_result {
    guard let url, let bytes = cStringBytes(url) else { return null("url") }
    guard let out else { return null("out_request") }
    let (r, result) = newRequest(url, bytes)
    guard let r else { return result }
    out.pointee = HandleTable.pointer(r.register())
    return RQ_OK
}

@c @implementation public func rq_request_free(_ pointer: OpaquePointer?) -> rq_result {
    guard pointer != nil else { return RQ_OK }
    let (r, result) = request(pointer)
    guard let r else { return result }
    guard !r.isDefaults else {
        return fail(RQ_ERR_INVALID_STATE, "the request is a queue's defaults (rq_queue_get_defaults): the queue frees it")
    }
    var alreadyFreed = false, release = false
    let finalize: (rq_context_free_fn, UnsafeMutableRawPointer?)? = r.lock.withLock {
        guard r.callerHolds else {
            alreadyFreed = true
            return nil
        }
        r.callerHolds = false
        release = r.handleUnused
        guard r.state == .new, let free = r.contextFree else { return nil }
        return (free, r.context)
    }
    // Freed twice while the request is still in flight: the handle lives on, but not the caller's.
    if alreadyFreed { return fail(RQ_ERR_INVALID_HANDLE, "the request was already freed (it is still in flight)") }
    if release { HandleTable.shared.remove(r.handle) }
    if let (free, context) = finalize { free(context) }
    return RQ_OK
}

@c @implementation public func rq_request_set_method(_ pointer: OpaquePointer?, _ method: UnsafePointer<CChar>?) -> rq_result {
    guard let bytes = cStringBytes(method) else { return null("method") }
    return configure(pointer) { r in
        do throws(InputError) { r.method = try Validation.method(contiguous: bytes) } catch { return inputResult(error) }
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_header(_ pointer: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> rq_result {
    guard let nameBytes = cStringBytes(name) else { return null("name") }
    return configure(pointer) { r in
        do throws(InputError) { try Validation.checkHeaderName(contiguous: nameBytes) } catch { return inputResult(error) }
        guard let valueBytes = cStringBytes(value) else {
            r.headers.remove(named: nameBytes)
            r.removedHeaders.insert(RequestHeaders.lowercased(nameBytes))
            return RQ_OK
        }
        let headerValue: UnsafeBufferPointer<UInt8>
        do throws(InputError) { headerValue = try Validation.trimmedHeaderValue(contiguous: valueBytes) } catch {
            let headerName = String(decoding: nameBytes, as: UTF8.self)
            return inputResult(InputError(.invalidHeader, "the value of header \"\(headerName)\" \(error.reason)"))
        }
        // The body's framing decides Content-Length: a caller's that differed from the body's size
        // made the server wait for bytes that never came, or read the rest of the body as the
        // next request on the connection.
        if RequestHeaders.isName(nameBytes, "content-length") { return RQ_OK }
        // Nor does it code a body any other way than chunked: another coding went out with the body
        // raw and a Content-Length beside it (RFC 9112 6.2: never both).
        if RequestHeaders.isName(nameBytes, "transfer-encoding"), !headerValue.map({ $0 | 0x20 }).elementsEqual("chunked".utf8) {
            return fail(RQ_ERR_INVALID_HEADER, "Transfer-Encoding can only be \"chunked\" (the body sent in chunks): "
                        + "the library codes a body in no other way, and frames one without it by its Content-Length")
        }
        guard r.headers.set(name: nameBytes, value: headerValue) else {
            return fail(RQ_ERR_INVALID_HEADER, "the request already has \(Validation.maxHeaderCount) headers, the most allowed")
        }
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_body(_ pointer: OpaquePointer?, _ data: UnsafeRawPointer?, _ size: Int) -> rq_result {
    let byteCount = UInt(bitPattern: size)
    guard data != nil || byteCount == 0 else { return fail(RQ_ERR_NULL_ARGUMENT, "data is NULL but size is \(byteCount)") }
    return configure(pointer) { r in
        guard byteCount <= UInt(Int.max / 2), r.setBody(copying: data, count: Int(byteCount)) else {
            return fail(RQ_ERR_OUT_OF_MEMORY, "no memory for a body of \(byteCount) bytes")
        }
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_body_borrowed(_ pointer: OpaquePointer?, _ data: UnsafeRawPointer?, _ size: Int) -> rq_result {
    let byteCount = UInt(bitPattern: size)
    guard data != nil || byteCount == 0 else { return fail(RQ_ERR_NULL_ARGUMENT, "data is NULL but size is \(byteCount)") }
    // (No memory holds more than half the address space, so no caller's buffer does.)
    guard byteCount <= UInt(Int.max) else { return fail(RQ_ERR_INVALID_ARGUMENT, "size \(byteCount) is larger than any buffer") }
    return configure(pointer) { r in
        guard r.setBody(borrowing: data, count: Int(byteCount)) else {
            return fail(RQ_ERR_OUT_OF_MEMORY, "no memory to record where the body is")
        }
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_timeout(_ pointer: OpaquePointer?, _ seconds: Double) -> rq_result {
    setSeconds(pointer, \.timeout, seconds)
}

@c @implementation public func rq_request_set_connect_timeout(_ pointer: OpaquePointer?, _ seconds: Double) -> rq_result {
    setSeconds(pointer, \.connectTimeout, seconds)
}

@c @implementation public func rq_request_set_idle_timeout(_ pointer: OpaquePointer?, _ seconds: Double) -> rq_result {
    setSeconds(pointer, \.idleTimeout, seconds)
}

@c @implementation public func rq_request_set_header_timeout(_ pointer: OpaquePointer?, _ seconds: Double) -> rq_result {
    configure(pointer) { r in
        guard validSeconds(seconds) else { return badSeconds("seconds", seconds) }
        r.headerTimeout = seconds
        r.explicitSettings.insert(.headerTimeout)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_low_speed_limit(_ pointer: OpaquePointer?, _ bytesPerSecond: Double, _ seconds: Double) -> rq_result {
    configure(pointer) { r in
        guard validSeconds(seconds) else { return badSeconds("seconds", seconds) }
        guard bytesPerSecond.isFinite, bytesPerSecond >= 0, bytesPerSecond <= 1e12 else {
            return outOfRange("bytes_per_second", bytesPerSecond, "from 0 to 1e12")
        }
        r.lowSpeed = (bytesPerSecond, seconds)
        r.explicitSettings.insert(.lowSpeed)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_credentials(_ pointer: OpaquePointer?, _ user: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?) -> rq_result {
    configure(pointer) { r in
        r.explicitSettings.insert(.credentials)
        guard let user else {
            r.user = nil
            r.password = nil
            return RQ_OK
        }
        r.user = copyCString(user)
        r.password = password.map(copyCString) ?? [0]
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_max_redirects(_ pointer: OpaquePointer?, _ maxRedirects: UInt32) -> rq_result {
    configure(pointer) { r in
        guard maxRedirects <= 1000 else { return outOfRange("max_redirects", maxRedirects, "from 0 to 1000") }
        r.maxRedirects = Int(maxRedirects)
        r.explicitSettings.insert(.maxRedirects)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_max_response_size(_ pointer: OpaquePointer?, _ maxBytes: UInt64) -> rq_result {
    configure(pointer) { r in
        r.maxResponseSize = maxBytes
        r.explicitSettings.insert(.maxResponseSize)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_ca_file(_ pointer: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> rq_result {
    configure(pointer) { r in
        r.caFile = path.map(copyCString)
        r.explicitSettings.insert(.caFile)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_completion(_ pointer: OpaquePointer?, _ fn: rq_completion_fn?, _ context: UnsafeMutableRawPointer?,
                                                         _ contextFree: rq_context_free_fn?) -> rq_result {
    configure(pointer) { r in
        r.completion = fn
        r.summaryCompletion = nil
        r.context = context
        r.contextFree = contextFree
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_upload_progress(_ pointer: OpaquePointer?, _ fn: rq_progress_fn?) -> rq_result {
    configure(pointer) { r in r.uploadProgress = fn; return RQ_OK }
}

@c @implementation public func rq_request_set_download_progress(_ pointer: OpaquePointer?, _ fn: rq_progress_fn?) -> rq_result {
    configure(pointer) { r in r.downloadProgress = fn; return RQ_OK }
}

@c @implementation public func rq_request_set_auth_handler(_ pointer: OpaquePointer?, _ fn: rq_auth_fn?) -> rq_result {
    configure(pointer) { r in r.authHandler = fn; return RQ_OK }
}

@c @implementation public func rq_request_set_retry(_ pointer: OpaquePointer?, _ enabled: Int32) -> rq_result {
    configure(pointer) { r in
        r.retry.enabled = enabled != 0
        r.explicitSettings.insert(.retry)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_retry_delay(_ pointer: OpaquePointer?, _ seconds: Double) -> rq_result {
    setSeconds(pointer, \.retry.delay, seconds)
}

@c @implementation public func rq_request_set_retry_outcomes(_ pointer: OpaquePointer?, _ outcomes: UnsafePointer<rq_outcome>?, _ count: Int) -> rq_result {
    let n = UInt(bitPattern: count)
    guard outcomes != nil || n == 0 else { return fail(RQ_ERR_NULL_ARGUMENT, "outcomes is NULL but count is \(n)") }
    return configure(pointer) { r in
        guard n <= 64 else { return outOfRange("count", n, "from 0 to 64") }
        var set = Set<Outcome>()
        for i in 0..<Int(n) {
            guard let value = outcomes?[i] else { return null("outcomes") }
            guard let outcome = Outcome(rawValue: Int32(bitPattern: value.rawValue)), outcome != .ok, outcome != .cancelled else {
                return outOfRange("outcomes[\(i)]", Int32(bitPattern: value.rawValue),
                                  "an outcome that can be retried (RQ_OUTCOME_HTTP_STATUS ... RQ_OUTCOME_FILE_ERROR)")
            }
            set.insert(outcome)
        }
        r.retry.outcomes = set
        r.explicitSettings.insert(.retryOutcomes)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_max_attempts(_ pointer: OpaquePointer?, _ maxAttempts: UInt32) -> rq_result {
    configure(pointer) { r in
        guard maxAttempts <= 1_000_000 else { return outOfRange("max_attempts", maxAttempts, "from 0 to 1000000") }
        r.retry.maxAttempts = Int(maxAttempts)
        r.explicitSettings.insert(.maxAttempts)
        return RQ_OK
    }
}

@c @implementation public func rq_request_start(_ pointer: OpaquePointer?) -> rq_result {
    let (r, result) = startableRequest(pointer)
    guard let r else { return result }
    guard let queue = standaloneQueue.queue else {
        return fail(RQ_ERR_SYSTEM, "no thread could be had for the queue of started requests; a later call may succeed")
    }
    return reported(queue.add(r)) { code in
        code == RQ_ERR_INVALID_HANDLE ? "the request was freed by another thread during the call" : standardReason(code)
    }
}

@c @implementation public func rq_request_set_priority(_ pointer: OpaquePointer?, _ priority: rq_priority) -> rq_result {
    let (r, result) = request(pointer)
    guard let r else { return result }
    let level = Int(priority.rawValue)
    let levels = Scheduler<DuplicateKey>.priorities
    guard levels.contains(level) else {
        return outOfRange("priority", level, "a level from \(levels.lowerBound) (RQ_PRIORITY_VERY_LOW) to \(levels.upperBound) (RQ_PRIORITY_VERY_HIGH)")
    }
    // A request added by another thread between the two looks is then changed in its queue.
    while true {
        let (state, queue) = r.lock.withLock { (r.state, r.queue) }
        switch state {
        case .new:
            let result = r.configure { r in r.priority = level; return RQ_OK }
            if result != RQ_ERR_REQUEST_FROZEN { return result }
        case .completed:
            return fail(RQ_ERR_NOT_ACTIVE, "the request has completed")
        case .waiting, .running:
            guard let queue else { return fail(RQ_ERR_NOT_ACTIVE, "the request has completed") }
            guard !queue.inherited else { return fail(RQ_ERR_QUEUE_CLOSED, inheritedRequestReason) }
            return reported(queue.setPriority(r, level)) { _ in "the request has completed" }
        }
    }
}

@c @implementation public func rq_request_get_priority(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_priority>?) -> rq_result {
    let (r, result) = request(pointer)
    guard let r else { return result }
    guard let out else { return null("out_priority") }
    out.pointee = rq_priority(rawValue: Int32(r.lock.withLock { r.priority }))
    return RQ_OK
}

@c @implementation public func rq_request_set_tag(_ pointer: OpaquePointer?, _ tag: UnsafePointer<CChar>?) -> rq_result {
    configure(pointer) { r in
        r.tag = tag.map(copyCString)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_retry_backoff(_ pointer: OpaquePointer?, _ multiplier: Double, _ maxDelay: Double, _ jitter: Double) -> rq_result {
    configure(pointer) { r in
        guard multiplier.isFinite, multiplier >= 1, multiplier <= 100 else { return outOfRange("multiplier", multiplier, "from 1 to 100") }
        guard validSeconds(maxDelay) else { return badSeconds("max_delay", maxDelay) }
        guard jitter.isFinite, jitter >= 0, jitter <= 1 else { return outOfRange("jitter", jitter, "from 0 to 1") }
        r.retry.multiplier = multiplier
        r.retry.maxDelay = maxDelay
        r.retry.jitter = jitter
        r.explicitSettings.insert(.retryBackoff)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_retry_statuses(_ pointer: OpaquePointer?, _ statuses: UnsafePointer<Int32>?, _ count: Int) -> rq_result {
    let n = UInt(bitPattern: count)
    guard statuses != nil || n == 0 else { return fail(RQ_ERR_NULL_ARGUMENT, "statuses is NULL but count is \(n)") }
    return configure(pointer) { r in
        guard n <= 200 else { return outOfRange("count", n, "from 0 to 200") }
        var set = Set<Int>()
        for i in 0..<Int(n) {
            guard let status = statuses?[i] else { return null("statuses") }
            guard (400...599).contains(status) else { return outOfRange("statuses[\(i)]", status, "an HTTP status from 400 to 599") }
            set.insert(Int(status))
        }
        r.retry.statuses = set
        r.explicitSettings.insert(.retryStatuses)
        return RQ_OK
    }
}

@c @implementation public func rq_request_set_retry_non_idempotent(_ pointer: OpaquePointer?, _ allow: Int32) -> rq_result {
    configure(pointer) { r in
        r.retry.retriesNonIdempotent = allow != 0
        r.explicitSettings.insert(.retryNonIdempotent)
        return RQ_OK
    }
}

@c @implementation public func rq_request_get_state(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_request_state>?) -> rq_result {
    let (r, result) = request(pointer)
    guard let r else { return result }
    guard let out else { return null("out_state") }
    out.pointee = rq_request_state(rawValue: r.lock.withLock { r.detached ? RequestState.completed.rawValue : r.state.rawValue })
    return RQ_OK
}

@c @implementation public func rq_request_get_context(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> rq_result {
    let (r, result) = request(pointer)
    guard let r else { return result }
    guard let out else { return null("out_context") }
    out.pointee = r.lock.withLock { r.context }
    return RQ_OK
}

// MARK: Responses

@c @implementation public func rq_response_outcome(_ pointer: OpaquePointer?) -> rq_outcome {
    rq_outcome(rawValue: UInt32(bitPattern: response(pointer)?.outcome.rawValue ?? Outcome.transport.rawValue))
}

@c @implementation public func rq_response_status(_ pointer: OpaquePointer?) -> Int32 { response(pointer)?.status ?? 0 }

@c @implementation public func rq_response_body(_ pointer: OpaquePointer?, _ outSize: UnsafeMutablePointer<Int>?) -> UnsafePointer<UInt8>? {
    guard let r = response(pointer) else {
        outSize?.pointee = 0
        return nil
    }
    outSize?.pointee = r.bodyCount
    return r.body
}

@c @implementation public func rq_response_header_count(_ pointer: OpaquePointer?) -> Int { response(pointer)?.headerCount ?? 0 }

@c @implementation public func rq_response_header_at(_ pointer: OpaquePointer?, _ index: Int, _ outName: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
                                                     _ outValue: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> rq_result {
    guard let r = response(pointer) else { return null("response") }
    guard let outName else { return null("out_name") }
    guard let outValue else { return null("out_value") }
    guard let header = r.header(at: Int(clamping: UInt(bitPattern: index))) else {
        return outOfRange("index", UInt(bitPattern: index), "below the response's \(r.headerCount) headers")
    }
    outName.pointee = header.name
    outValue.pointee = header.value
    return RQ_OK
}

@c @implementation public func rq_response_header(_ pointer: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> UnsafePointer<CChar>? {
    guard let r = response(pointer), let name else { return nil }
    return r.header(named: name)
}

@c @implementation public func rq_response_url(_ pointer: OpaquePointer?) -> UnsafePointer<CChar>? {
    response(pointer).map(\.url)
}

@c @implementation public func rq_response_error_message(_ pointer: OpaquePointer?) -> UnsafePointer<CChar>? {
    response(pointer).map(\.message)
}

@c @implementation public func rq_response_retain(_ pointer: OpaquePointer?) -> OpaquePointer? {
    guard let response = response(pointer) else { return nil }
    response.retainedByCaller()
    return pointer
}

@c @implementation public func rq_response_release(_ pointer: OpaquePointer?) {
    guard let response = response(pointer) else { return }
    response.releasedByCaller()
}

@c @implementation public func rq_response_attempts(_ pointer: OpaquePointer?) -> UInt32 { response(pointer)?.attempts ?? 0 }

// MARK: Authentication challenges

private func answer(_ pointer: OpaquePointer?, _ answer: Queue.AuthAnswer, function: StaticString = #function) -> rq_result {
    guard pointer != nil else { return fail(RQ_ERR_NULL_ARGUMENT, "the challenge is NULL", function: function) }
    let gone = "the challenge was already answered, or its request completed or was cancelled"
    guard let challenge = HandleTable.shared.lookup(pointer, kind: .challenge, as: Challenge.self) else {
        let bits = UInt(bitPattern: pointer) & 3
        return fail(RQ_ERR_INVALID_HANDLE, bits == HandleKind.challenge.rawValue ? gone : invalidHandleReason(pointer, .challenge),
                    function: function)
    }
    guard let request = challenge.request, let q = request.lock.withLock({ request.queue }) else {
        return fail(RQ_ERR_INVALID_HANDLE, gone, function: function)
    }
    guard !q.inherited else { return fail(RQ_ERR_QUEUE_CLOSED, inheritedRequestReason, function: function) }
    return reported(q.answer(challenge, answer), function: function) { _ in gone }
}

@c @implementation public func rq_auth_use_credential(_ pointer: OpaquePointer?, _ user: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?) -> rq_result {
    guard let user else { return null("user") }
    guard let password else { return null("password") }
    return answer(pointer, .credential(user: copyCString(user), password: copyCString(password)))
}

@c @implementation public func rq_auth_continue_without(_ pointer: OpaquePointer?) -> rq_result { answer(pointer, .continueWithout) }

@c @implementation public func rq_auth_cancel(_ pointer: OpaquePointer?) -> rq_result { answer(pointer, .cancel) }
