// The C boundary of per-request metrics (see "Metrics" in include/requestqueue.h).
import CRequestQueueAPI

@c @implementation public func rq_response_metrics(_ pointer: OpaquePointer?, _ out: UnsafeMutablePointer<rq_metrics>?) -> rq_result {
    guard let pointer else { return null("response") }
    guard let out else { return null("out_metrics") }
    let size = UInt(bitPattern: out.pointee.size)
    let least = MemoryLayout<Int>.size + MemoryLayout<Double>.size
    guard size >= UInt(least) else { return outOfRange("out_metrics->size", size, "at least \(least) (set it to sizeof(rq_metrics))") }
    let response = Unmanaged<Response>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
    let m = response.metrics
    var full = rq_metrics(size: MemoryLayout<rq_metrics>.size, queued: m.queued, dns: m.dns, connect: m.connect,
                          tls: m.tls, first_byte: m.firstByte, total: m.total, bytes_down: m.bytesDown,
                          bytes_up: m.bytesUp, attempts: response.attempts, connection_reused: m.reused ? 1 : 0,
                          wire_bytes_down: m.wireBytesDown, header_bytes_down: m.headerBytesDown)
    let byteCount = Int(min(size, UInt(MemoryLayout<rq_metrics>.size)))
    full.size = byteCount
    withUnsafeBytes(of: &full) { bytes in
        if let base = bytes.baseAddress { UnsafeMutableRawPointer(out).copyMemory(from: base, byteCount: byteCount) }
    }
    return RQ_OK
}
