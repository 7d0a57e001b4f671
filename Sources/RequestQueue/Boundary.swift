// What every C function of the boundary (CAPI*.swift) uses: handle lookups with their error
// results and messages, response access, and the copy of size-prefixed structs. Nothing here may
// trap on caller input.
import CRequestQueueAPI
import Glibc

// Every error result is returned through `fail` or `reported`, which record the message of
// `rq_last_error_message`; `function` is the C function's name (#function at its call site).

/// The live queue behind `pointer`, or the error (a queue inherited across fork() is closed).
func queue(_ pointer: OpaquePointer?, function: StaticString = #function) -> (Queue?, rq_result) {
    guard pointer != nil else { return (nil, fail(RQ_ERR_NULL_ARGUMENT, "the queue is NULL", function: function)) }
    guard let q = HandleTable.shared.lookup(pointer, kind: .queue, as: Queue.self) else {
        return (nil, fail(RQ_ERR_INVALID_HANDLE, invalidHandleReason(pointer, .queue), function: function))
    }
    guard !q.inherited else { return (nil, fail(RQ_ERR_QUEUE_CLOSED, inheritedQueueReason, function: function)) }
    return (q, RQ_OK)
}

private let inheritedQueueReason = "the queue was made by the parent process before fork(): in this child its threads do not "
    + "exist, and only rq_queue_free works on it (make a new queue here)"
let inheritedRequestReason = "the request is in a queue of the parent process, made before fork(): in this child "
    + "it cannot be cancelled or changed"

func request(_ pointer: OpaquePointer?, function: StaticString = #function) -> (Request?, rq_result) {
    guard pointer != nil else { return (nil, fail(RQ_ERR_NULL_ARGUMENT, "the request is NULL", function: function)) }
    guard let r = HandleTable.shared.lookup(pointer, kind: .request, as: Request.self) else {
        return (nil, fail(RQ_ERR_INVALID_HANDLE, invalidHandleReason(pointer, .request), function: function))
    }
    return (r, RQ_OK)
}

/// Runs `body` with the queue behind `pointer`, or returns why there is none.
func withQueue(_ pointer: OpaquePointer?, function: StaticString = #function, _ body: (Queue) -> rq_result) -> rq_result {
    let (q, result) = queue(pointer, function: function)
    guard let q else { return result }
    return body(q)
}

/// Runs `body` on the request's configuration, if it exists and can still be changed.
func configure(_ pointer: OpaquePointer?, function: StaticString = #function, _ body: (Request) -> rq_result) -> rq_result {
    let (r, result) = request(pointer, function: function)
    guard let r else { return result }
    let configured = r.configure(body)
    if configured == RQ_ERR_REQUEST_FROZEN { return fail(configured, standardReason(configured), function: function) }
    return configured
}

/// RQ_ERR_NULL_ARGUMENT, naming the argument.
func null(_ argument: String, function: StaticString = #function) -> rq_result {
    fail(RQ_ERR_NULL_ARGUMENT, "\(argument) is NULL", function: function)
}

/// RQ_ERR_INVALID_ARGUMENT for a number out of its range.
func outOfRange(_ argument: String, _ value: some CustomStringConvertible, _ range: String,
                function: StaticString = #function) -> rq_result {
    fail(RQ_ERR_INVALID_ARGUMENT, "\(argument) is \(value), not \(range)", function: function)
}

/// The response behind a `const rq_response *` handed out in a callback (not checked: the header
/// says a response pointer is valid only during its callback or while retained), or nil for NULL.
func response(_ pointer: OpaquePointer?) -> Response? {
    guard let pointer else { return nil }
    return Unmanaged<Response>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
}

extension Response {
    /// The `rq_response *` handed to C callbacks (borrowed: the response lives while the event does).
    var pointer: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    /// A reference owned by the C caller (`rq_response_retain`), given back by `releasedByCaller`.
    func retainedByCaller() { _ = Unmanaged.passUnretained(self).retain() }
    func releasedByCaller() { Unmanaged.passUnretained(self).release() }
}

/// Copies a size-prefixed struct (`rq_queue_stats`, `rq_metrics`) to the caller's `out`, whose own
/// `size` field is `callerSize` (already checked to cover at least the first field): as many bytes
/// as both know, with `size` set to that count, so that callers built with an older, smaller
/// struct keep working.
func copySizePrefixed<T>(_ value: T, to out: UnsafeMutablePointer<T>, callerSize: UInt, _ size: WritableKeyPath<T, Int>) {
    var full = value
    let byteCount = Int(min(callerSize, UInt(MemoryLayout<T>.size)))
    full[keyPath: size] = byteCount
    withUnsafeBytes(of: &full) { bytes in
        if let base = bytes.baseAddress { UnsafeMutableRawPointer(out).copyMemory(from: base, byteCount: byteCount) }
    }
}
