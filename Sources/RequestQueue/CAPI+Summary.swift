// The C boundary of `rq_response_get_summary`: a response's first-read figures in one call (see
// "Responses" in include/requestqueue.h).
import CRequestQueueAPI

@c @implementation public func rq_response_get_summary(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_response_summary>?) -> rq_result {
    guard let out else { return null("out_summary") }
    let size = UInt(bitPattern: out.pointee.size)
    let least = MemoryLayout<Int>.size + MemoryLayout<rq_outcome>.size
    guard size >= UInt(least) else {
        return outOfRange("out_summary->size", size, "at least \(least) (set it to sizeof(rq_response_summary))")
    }
    guard let response = response(pointer) else { return null("response") }
    copySizePrefixed(rq_response_summary(size: 0, outcome: rq_outcome(rawValue: UInt32(bitPattern: response.outcome.rawValue)),
                                         status: response.status, http_version: response.httpVersion,
                                         attempts: response.attempts, body: response.body, body_size: response.bodyCount),
                     to: out, callerSize: size, \.size)
    return RQ_OK
}
