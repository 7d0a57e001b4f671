// The C boundary of per-request metrics (see "Metrics" in include/requestqueue.h).
import CRequestQueueAPI

@c @implementation public func rq_response_metrics(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_metrics>?) -> rq_result {
    guard let out else { return null("out_metrics") }
    let size = UInt(bitPattern: out.pointee.size)
    let least = MemoryLayout<Int>.size + MemoryLayout<Double>.size
    guard size >= UInt(least) else { return outOfRange("out_metrics->size", size, "at least \(least) (set it to sizeof(rq_metrics))") }
    guard let response = response(pointer) else { return null("response") }
    let m = response.metrics
    copySizePrefixed(rq_metrics(size: 0, queued: m.queued, dns: m.dns, connect: m.connect, tls: m.tls,
                                first_byte: m.firstByte, total: m.total, bytes_down: m.bytesDown, bytes_up: m.bytesUp,
                                attempts: response.attempts, connection_reused: m.reused ? 1 : 0,
                                wire_bytes_down: m.wireBytesDown, header_bytes_down: m.headerBytesDown, http_version: m.httpVersion),
                     to: out, callerSize: size, \.size)
    return RQ_OK
}
