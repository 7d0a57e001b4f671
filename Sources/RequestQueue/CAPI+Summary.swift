// The C boundary of `rq_response_get_summary`: a response's first-read figures in one call (see
// "Responses" in include/requestqueue.h).
import CRequestQueueAPI

@c @implementation public func rq_response_get_summary(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_response_summary>?) -> rq_result {
    writeSummary(pointer, out)
}

/// Writes the summary of the response behind `pointer` into `out` (see `rq_response_get_summary`);
/// errors are recorded as `function`'s.
func writeSummary(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_response_summary>?,
                  function: StaticString = #function) -> rq_result {
    guard let out else { return null("out_summary", function: function) }
    let size = UInt(bitPattern: out.pointee.size)
    let least = MemoryLayout<Int>.size + MemoryLayout<rq_outcome>.size
    guard size >= UInt(least) else {
        return outOfRange("out_summary->size", size, "at least \(least) (set it to sizeof(rq_response_summary))",
                          function: function)
    }
    guard let response = response(pointer) else { return null("response", function: function) }
    copySizePrefixed(rq_response_summary(size: 0, outcome: rq_outcome(rawValue: UInt32(bitPattern: response.outcome.rawValue)),
                                         status: response.status, http_version: response.httpVersion,
                                         attempts: response.attempts, body: response.body, body_size: response.bodyCount),
                     to: out, callerSize: size, \.size)
    return RQ_OK
}
