// The C boundary of the calls that do the work of several (see "Calls that do the work of
// several" in include/requestqueue.h): each is the functions it names, in one call.
import CRequestQueueAPI
import RequestQueueCore

@c @implementation public func rq_add_url(_ queuePointer: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ completion: rq_completion_fn?,
                                          _ context: UnsafeMutableRawPointer?, _ contextFree: rq_context_free_fn?,
                                          _ out: UnsafeMutablePointer<OpaquePointer?>?) -> rq_result {
    addURL(queuePointer, url, context, contextFree, out) { $0.completion = completion }
}

@c @implementation public func rq_add_url_with_summary(_ queuePointer: OpaquePointer?, _ url: UnsafePointer<CChar>?,
                                                       _ completion: rq_summary_completion_fn?, _ context: UnsafeMutableRawPointer?,
                                                       _ contextFree: rq_context_free_fn?,
                                                       _ out: UnsafeMutablePointer<OpaquePointer?>?) -> rq_result {
    addURL(queuePointer, url, context, contextFree, out) { $0.summaryCompletion = completion }
}

@c @implementation public func rq_request_set_summary_completion(_ pointer: OpaquePointer?, _ fn: rq_summary_completion_fn?,
                                                                 _ context: UnsafeMutableRawPointer?,
                                                                 _ contextFree: rq_context_free_fn?) -> rq_result {
    configure(pointer) { r in
        r.completion = nil
        r.summaryCompletion = fn
        r.context = context
        r.contextFree = contextFree
        return RQ_OK
    }
}

/// `rq_add_url` and `rq_add_url_with_summary`: a GET of `url` whose completion `setCompletion`
/// sets, with `context` and `contextFree`, added to the queue; errors recorded as `function`'s.
private func addURL(_ queuePointer: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ context: UnsafeMutableRawPointer?,
                    _ contextFree: rq_context_free_fn?, _ out: UnsafeMutablePointer<OpaquePointer?>?,
                    function: StaticString = #function, _ setCompletion: (Request) -> Void) -> rq_result {
    guard let url, let bytes = cStringBytes(url) else { return null("url", function: function) }
    guard let out else { return null("out_request", function: function) }
    // The URL first, then the queue: the results of rq_request_new then rq_add.
    let (made, result) = newRequest(url, bytes, function: function)
    guard let r = made else { return result }
    return withQueue(queuePointer, function: function) { q in
        // Nobody else knows the request yet: its completion is set without its lock.
        setCompletion(r)
        r.context = context
        r.contextFree = contextFree
        let handle = r.register()
        let result = q.transport.add(r, to: q)
        guard result == RQ_OK else {
            // Never accepted, never handed out: released without its finalizer (the context is
            // still the caller's).
            r.lock.withLock { r.callerHolds = false }
            HandleTable.shared.remove(handle)
            return reported(result, function: function)
        }
        out.pointee = HandleTable.pointer(handle)
        return RQ_OK
    }
}

/// Calls a request's `rq_summary_completion_fn` with `response`, retained for the callback, and
/// its summary's figures (see `writeSummary`).
func callSummaryCompletion(_ fn: rq_summary_completion_fn, _ request: Request, _ response: Response) {
    response.retainedByCaller()
    fn(request.context, request.pointer, response.pointer, rq_outcome(rawValue: UInt32(bitPattern: response.outcome.rawValue)),
       response.status, response.httpVersion, response.body, response.bodyCount)
}

@c @implementation public func rq_response_retain_summary(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_response_summary>?) -> rq_result {
    let result = writeSummary(pointer, out)
    if result == RQ_OK { response(pointer)?.retainedByCaller() }
    return result
}

@c @implementation public func rq_response_release_many(_ responses: UnsafePointer<OpaquePointer?>?, _ count: Int) {
    guard let responses else { return }
    for index in 0..<max(count, 0) { response(responses[index])?.releasedByCaller() }
}

@c @implementation public func rq_request_free_many(_ requests: UnsafePointer<OpaquePointer?>?, _ count: Int) -> rq_result {
    guard count != 0 else { return RQ_OK }
    guard let requests else { return null("requests") }
    // (A size_t above Int.max arrives negative: no array is that long.)
    guard count > 0 else { return outOfRange("count", UInt(bitPattern: count), "the length of the array") }
    var first = RQ_OK
    var reason = ""
    for index in 0..<count {
        let result = rq_request_free(requests[index])
        if result != RQ_OK && first == RQ_OK {
            first = result
            // rq_request_free's own message, "rq_request_free: <reason>", without its name.
            let message = String(cString: LastError.message)
            reason = "requests[\(index)]: " + (message.split(separator: " ", maxSplits: 1).last.map(String.init) ?? message)
        }
    }
    return first == RQ_OK ? RQ_OK : fail(first, reason)
}
