// Streaming of response bodies on an inline queue (RQ_DELIVERY_INLINE): the body callback runs
// inside libcurl's write callback, with libcurl's own buffer. No copy, no chunk, no flow control:
// the callback runs before libcurl reads on, so a slow callback slows the download (and every
// transfer of the queue) by itself. See "Streaming" in include/requestqueue.h.

extension Queue {
    /// Engine thread, inside libcurl's write callback: hands `size` bytes at `data` (libcurl's
    /// buffer, valid for this call only) to the body callback of `request`, whose body has had
    /// `offset` bytes so far. The events posted before, the head of this response first, run
    /// before it (`signalOwedEvents`), in order. Returns false to stop the transfer: the request
    /// completed meanwhile (a callback cancelled it, or another thread did and its completion
    /// just ran), or the callback returned non-zero, which cancels it as documented.
    func streamInline(_ request: Request, _ data: UnsafeMutablePointer<CChar>, _ size: Int, offset: UInt64) -> Bool {
        // Events posted by other threads (a cancel's completion) run first too.
        if inlineEventsMayBePending { signalOwedEvents() }
        guard !request.completionDelivered, !request.streamStopped, let fn = request.bodyCallback else { return false }
        let bytes = UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self)
        guard fn(request.context, request.pointer, bytes, size, offset) == 0 else {
            request.streamStopped = true
            _ = cancel(request)
            return false
        }
        return true
    }
}
