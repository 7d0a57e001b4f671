import CRequestQueueAPI
import RequestQueue
import Testing

/// Every kind of bad input gets its documented result code, never a crash.
@Suite struct BadInputTests {
    static var garbage: OpaquePointer? { OpaquePointer(bitPattern: 0xdead_bee0) }

    @Test func nullAndForeignHandles() throws {
        var n = 0
        #expect(rq_queue_count(nil, &n) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_queue_count(Self.garbage, &n) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_add(nil, nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_cancel(nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_cancel(Self.garbage) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_queue_free(nil) == RQ_OK)
        #expect(rq_request_free(nil) == RQ_OK)
        #expect(rq_queue_new(RQ_DELIVERY_THREADED, nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_auth_cancel(nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_auth_cancel(Self.garbage) == RQ_ERR_INVALID_HANDLE)
        // A request handle is not a queue handle, and the other way round.
        var r: OpaquePointer?
        try #require(rq_request_new("http://127.0.0.1:1/", &r) == RQ_OK)
        #expect(rq_queue_count(r, &n) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_request_set_timeout(rq_queue_default(), 1) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_queue_count(rq_queue_default(), nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_free(r) == RQ_OK)
        #expect(rq_request_free(r) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_request_set_method(r, "GET") == RQ_ERR_INVALID_HANDLE)
        // Borrowed response accessors tolerate NULL.
        var size = 1
        #expect(rq_response_body(nil, &size) == nil && size == 0)
        #expect(rq_response_status(nil) == 0)
        #expect(rq_response_header(nil, "x") == nil)
        #expect(rq_response_header_count(nil) == 0)
        #expect(rq_response_outcome(nil) == RQ_OUTCOME_TRANSPORT)
    }

    @Test(arguments: [
        ("", RQ_ERR_INVALID_URL), ("not a url", RQ_ERR_INVALID_URL), ("http://", RQ_ERR_INVALID_URL),
        ("http:/x", RQ_ERR_INVALID_URL), ("http://a b/", RQ_ERR_INVALID_URL), ("http://h:99999/", RQ_ERR_INVALID_URL),
        ("http://h:0/", RQ_ERR_INVALID_URL), ("http://h:x/", RQ_ERR_INVALID_URL), ("http://h/\r\nX: y", RQ_ERR_INVALID_URL),
        ("http://h/caf\u{E9}", RQ_ERR_INVALID_URL), ("ftp://h/", RQ_ERR_UNSUPPORTED_SCHEME), ("file:///etc/passwd", RQ_ERR_UNSUPPORTED_SCHEME),
        ("gopher://h/", RQ_ERR_UNSUPPORTED_SCHEME), ("HTTPS://Example.COM:8443/p?q#f", RQ_OK), ("http://[::1]:8080/", RQ_OK),
        ("http://user:pw@h/", RQ_OK),
    ])
    func urls(url: String, expected: rq_result) {
        var r: OpaquePointer?
        #expect(rq_request_new(url, &r) == expected)
        if expected == RQ_OK { #expect(rq_request_free(r) == RQ_OK) }
    }

    @Test func hugeAndNonUTF8URLs() {
        var r: OpaquePointer?
        let huge = "http://h/" + String(repeating: "a", count: 70_000)
        #expect(rq_request_new(huge, &r) == RQ_ERR_INVALID_URL)
        let bytes: [CChar] = [0x68, 0x74, 0x74, 0x70, 0x3A, 0x2F, 0x2F, 0x68, 0x2F, -1, -2, 0]
        #expect(rq_request_new(bytes, &r) == RQ_ERR_INVALID_URL)
        #expect(rq_request_new(nil, &r) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_new("http://h/", nil) == RQ_ERR_NULL_ARGUMENT)
    }

    @Test func methodsHeadersAndNumbers() throws {
        var r: OpaquePointer?
        try #require(rq_request_new("http://127.0.0.1:1/", &r) == RQ_OK)
        defer { _ = rq_request_free(r) }
        for bad in ["", "GE T", "GET\r\n", "G(ET", String(repeating: "A", count: 65), "caf\u{E9}"] {
            #expect(rq_request_set_method(r, bad) == RQ_ERR_INVALID_METHOD, "\(bad)")
        }
        for good in ["GET", "PROPFIND", "M-SEARCH", "get"] { #expect(rq_request_set_method(r, good) == RQ_OK) }
        #expect(rq_request_set_method(r, nil) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_header(r, "X-A", "a\r\nInjected: yes") == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, "X-A", "a\nb") == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, "X A", "v") == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, "X-A:", "v") == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, "", "v") == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, nil, "v") == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_header(r, "X-A", String(repeating: "v", count: 70_000)) == RQ_ERR_INVALID_HEADER)
        #expect(rq_request_set_header(r, "X-Tab", "a\tb") == RQ_OK)
        #expect(rq_request_set_header(r, "X-Empty", "") == RQ_OK)
        for bad in [-1.0, .nan, .infinity, 2e6] {
            #expect(rq_request_set_timeout(r, bad) == RQ_ERR_INVALID_ARGUMENT)
            #expect(rq_request_set_connect_timeout(r, bad) == RQ_ERR_INVALID_ARGUMENT)
            #expect(rq_request_set_idle_timeout(r, bad) == RQ_ERR_INVALID_ARGUMENT)
            #expect(rq_request_set_retry_delay(r, bad) == RQ_ERR_INVALID_ARGUMENT)
        }
        #expect(rq_request_set_max_attempts(r, 2_000_000) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_request_set_body(r, nil, 10) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_body(r, nil, 0) == RQ_OK)
        var outcomes = [RQ_OUTCOME_OK]
        #expect(rq_request_set_retry_outcomes(r, &outcomes, 1) == RQ_ERR_INVALID_ARGUMENT)
        outcomes = [RQ_OUTCOME_CANCELLED]
        #expect(rq_request_set_retry_outcomes(r, &outcomes, 1) == RQ_ERR_INVALID_ARGUMENT)
        outcomes = [rq_outcome(rawValue: 77)]
        #expect(rq_request_set_retry_outcomes(r, &outcomes, 1) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_request_set_retry_outcomes(r, nil, 3) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_retry_outcomes(r, nil, 0) == RQ_OK)
        var state = RQ_STATE_COMPLETED
        #expect(rq_request_get_state(r, &state) == RQ_OK && state == RQ_STATE_NEW)
        #expect(rq_request_get_state(r, nil) == RQ_ERR_NULL_ARGUMENT)
    }

    @Test func queueArguments() throws {
        var q: OpaquePointer?
        #expect(rq_queue_new(rq_delivery(rawValue: 9), &q) == RQ_ERR_INVALID_ARGUMENT)
        try #require(rq_queue_new(RQ_DELIVERY_THREADED, &q) == RQ_OK)
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_order(q, rq_order(rawValue: 5)) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_queue_set_duplicates(q, rq_duplicates(rawValue: 5)) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_queue_set_max_concurrent(q, Int(bitPattern: UInt.max)) == RQ_OK)
        var max = 0
        #expect(rq_queue_get_max_concurrent(q, &max) == RQ_OK && max == Int.max)
        #expect(rq_queue_wait_idle(q, .nan) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_queue_snapshot(q, nil, nil) == RQ_ERR_NULL_ARGUMENT)
        rq_snapshot_free(nil)
    }

    @Test func everyCodeHasAName() {
        for code in Int32(-5)...Int32(40) {
            let name = String(cString: rq_result_str(code))
            #expect(!name.isEmpty)
            #expect((code >= 0 && code <= 17) == (name != "unknown result code"))
            let outcome = String(cString: rq_outcome_str(code))
            #expect((code >= 0 && code <= 13) == (outcome != "unknown outcome"))
        }
        #expect(String(cString: rq_result_str(Int32(RQ_ERR_INVALID_URL.rawValue))) == "invalid URL")
        #expect(rq_version_number() == UInt32(RQ_VERSION_MAJOR * 10000 + RQ_VERSION_MINOR * 100 + RQ_VERSION_PATCH))
        #expect(String(cString: rq_version_string()) == RQ_VERSION_STRING)
    }
}
