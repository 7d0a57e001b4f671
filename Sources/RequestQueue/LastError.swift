import CRequestQueueAPI
import Glibc

/// The message of the last failed call on each thread (`rq_last_error_message`): "<function>:
/// <reason>", in a malloc'ed string owned by the thread (a pthread key whose destructor frees it).
/// Only failures write it, so a successful call costs nothing.
enum LastError {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { free($0) }
        return key
    }()

    /// The calling thread's message ("" before its first failure).
    static var message: UnsafePointer<CChar> {
        guard let text = pthread_getspecific(key) else { return emptyCString }
        return UnsafePointer(text.assumingMemoryBound(to: CChar.self))
    }

    /// Replaces the calling thread's message with "<function>: <reason>". `function` is a
    /// `#function` (the C function's name, its Swift argument labels cut off).
    static func set(_ function: StaticString, _ reason: String) {
        var text: [UInt8] = []
        function.withUTF8Buffer { name in text.append(contentsOf: name.prefix { $0 != UInt8(ascii: "(") }) }
        text.append(contentsOf: ": ".utf8)
        text.append(contentsOf: reason.utf8)
        // Out of memory: the old message goes, rather than stay and mislead.
        let copy = malloc(text.count + 1)?.assumingMemoryBound(to: UInt8.self)
        if let copy {
            copy.update(from: text, count: text.count)
            copy[text.count] = 0
        }
        let old = pthread_getspecific(key)
        pthread_setspecific(key, copy)
        free(old)
    }
}

/// Returns `code` after recording why the call made as `function` failed. For the C boundary:
/// `return fail(RQ_ERR_INVALID_ARGUMENT, "seconds is \(s): ...")`.
@inline(never)
func fail(_ code: rq_result, _ reason: @autoclosure () -> String, function: StaticString = #function) -> rq_result {
    LastError.set(function, reason())
    return code
}

/// Returns `code`, recording `reason(code)` first when it is an error: for results that come back
/// from the queue's own methods.
func reported(_ code: rq_result, function: StaticString = #function, _ reason: (rq_result) -> String = standardReason) -> rq_result {
    if code != RQ_OK { LastError.set(function, reason(code)) }
    return code
}

/// The reasons the queue's methods fail for, in general terms.
func standardReason(_ code: rq_result) -> String {
    switch code {
    case RQ_ERR_INVALID_HANDLE: "the handle was freed (by another thread) during the call"
    case RQ_ERR_ALREADY_ADDED: "the request was already added to a queue or started: a request is single-use"
    case RQ_ERR_QUEUE_CLOSED: "the queue is being freed and accepts no more requests"
    case RQ_ERR_NOT_ACTIVE: "the request is not waiting or running: it was never added, or it has completed"
    case RQ_ERR_TIMED_OUT: "the queue was not idle at the time limit"
    case RQ_ERR_REQUEST_FROZEN: "the request was already added or started: its settings can no longer change"
    default: String(cString: StaticNames.result(Int32(bitPattern: code.rawValue)))
    }
}

/// A handle, as messages show it.
func describeHandle(_ pointer: OpaquePointer?) -> String {
    "0x" + String(UInt(bitPattern: pointer), radix: 16)
}

/// Why a handle that is not NULL is not a live one of `kind`.
func invalidHandleReason(_ pointer: OpaquePointer?, _ kind: HandleKind) -> String {
    let names: [UInt: String] = [HandleKind.queue.rawValue: "queue", HandleKind.request.rawValue: "request",
                                 HandleKind.challenge.rawValue: "authentication challenge"]
    let wanted = names[kind.rawValue] ?? "handle"
    let bits = UInt(bitPattern: pointer) & 3
    if bits != kind.rawValue {
        if let other = names[bits] { return "\(describeHandle(pointer)) is a \(other) handle, not a \(wanted)" }
        return "\(describeHandle(pointer)) is not a \(wanted) handle of this library"
    }
    return "the \(wanted) \(describeHandle(pointer)) was freed (or is not a handle of this library)"
}
