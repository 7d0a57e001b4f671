import CRequestQueueAPI

/// The static strings handed to C: allocated once, never freed.
// nonisolated(unsafe): each pointer below is set once, at its lazy (thread-safe) initialization,
// and points to bytes that nothing writes or frees after.
enum StaticNames {
    nonisolated(unsafe) static let version = make(RQ_VERSION_STRING)

    nonisolated(unsafe) private static let results: [UnsafePointer<CChar>] = [
        "ok", "NULL argument", "invalid handle (freed, or not of this kind)", "invalid argument",
        "invalid URL", "unsupported URL scheme (only http and https)", "invalid HTTP method",
        "invalid header name or value", "request already added or started", "request can no longer be changed",
        "request is not waiting or running", "not allowed in the current state", "wrong delivery mode for this call",
        "queue is closed", "timed out waiting", "would deadlock: called from this queue's own callback",
        "out of memory", "system resource unavailable",
    ].map(make)
    nonisolated(unsafe) private static let unknownResult = make("unknown result code")

    nonisolated(unsafe) private static let outcomes: [UnsafePointer<CChar>] = [
        "ok", "cancelled", "HTTP status error", "timed out", "cannot resolve host", "cannot connect",
        "connection lost", "TLS error", "too many redirects", "bad response", "bad redirect", "transport error",
        "response too large", "file error",
    ].map(make)
    nonisolated(unsafe) private static let unknownOutcome = make("unknown outcome")

    static func result(_ code: Int32) -> UnsafePointer<CChar> {
        code >= 0 && Int(code) < results.count ? results[Int(code)] : unknownResult
    }

    static func outcome(_ code: Int32) -> UnsafePointer<CChar> {
        code >= 0 && Int(code) < outcomes.count ? outcomes[Int(code)] : unknownOutcome
    }

    private static func make(_ string: String) -> UnsafePointer<CChar> {
        UnsafePointer(mallocCString(Array(string.utf8)))
    }
}
