// libFuzzer target over every parser of server data in RequestQueueCore (issue 13): status lines,
// header fields, Retry-After (seconds and HTTP dates), Content-Range, Content-Length, transfer
// codings, the header budget and the progress arithmetic. Built by scripts/test-reliability (step
// fuzz-server) together with the Core's sources into one module:
//
//   swiftc -swift-version 6 -parse-as-library -sanitize=fuzzer,address -module-name RequestQueueCore \
//       Sources/RequestQueueCore/*.swift Tests/reliability/fuzz_server_data.swift -o fuzz_server_data
//
// The first byte of an input picks the parser; the rest is what a server would send. A trap (an
// overflow, an out-of-range index, a force unwrap) is a crash that libFuzzer reports. Each parser's
// result is also checked against what its documentation promises. Seeds: Tests/reliability/corpus-server.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerData(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let input = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let text = String(decoding: input, as: UTF8.self)
    switch selector % 8 {
    case 0:
        if let code = ServerData.statusCode(ofStatusLine: input) { check((100...599).contains(code)) }
    case 1:
        // A Retry-After value, with a "now" taken from the input too.
        var now = 0.0
        if input.count >= 8 {
            var bits: UInt64 = 0
            for i in 0..<8 { bits = bits << 8 | UInt64(input[i]) }
            now = Double(bitPattern: bits)
        }
        if let seconds = RetryPolicy.retryAfterSeconds(text, now: now) { check(seconds.isFinite && seconds >= 0) }
        if let seconds = RetryPolicy.retryAfterSeconds(text, now: 0) { check(seconds.isFinite && seconds >= 0) }
        // And through the retry decision, as the queue uses it.
        var policy = RetryPolicy()
        policy.enabled = true
        policy.statuses = [503]
        if let delay = policy.delayAfter(attempt: 1, outcome: .httpStatus, status: 503,
                                         retryAfter: RetryPolicy.retryAfterSeconds(text, now: now)) {
            check(delay >= 0)
        }
    case 2:
        if let start = ServerData.contentRangeStart(text) { check(start >= 0) }
    case 3:
        check(ServerData.isValidContentLength(text) == ServerData.isValidContentLength(bytes: Array(text.utf8)))
        if let length = ServerData.contentLength(bytes: Array(text.utf8)) { check(length >= 0 && ServerData.isValidContentLength(text)) }
        if let coding = ServerData.unrequestedTransferCoding(text) { check(coding != "chunked" && coding.count <= 64) }
        _ = ServerData.isFramingError(text)
        _ = ServerData.isNotHTTPError(text)
        _ = ServerData.isHTTP2ProtocolReset(text)
    case 4:
        // Header lines as libcurl hands them over: cut into fields, then each name looked up.
        var bytes = Array(input)
        let fields = bytes.withUnsafeMutableBufferPointer { HeaderLines.cut($0) }
        for field in fields { check(field.name >= 0 && field.name < bytes.count && field.value < bytes.count) }
        _ = Array(input).withUnsafeBufferPointer { HeaderLines.value(named: "Content-Range", in: $0) }
        Array(input).withUnsafeBufferPointer { lines in
            let bytes = HeaderLines.valueBytes(named: "Content-Length", in: lines)
            check(bytes.map { String(decoding: $0, as: UTF8.self) } == HeaderLines.value(named: "Content-Length", in: lines))
            check(HeaderLines.valueBytes(ofLine: lines, named: "Content-Length").map(Array.init) == bytes.map(Array.init))
            check(HeaderLines.valueBytes(ofLine: lines, named: "Transfer-Encoding").map(Array.init)
                  == HeaderLines.valueBytes(named: "Transfer-Encoding", in: lines).map(Array.init))
            if let codings = HeaderLines.valueBytes(ofLine: lines, named: "Transfer-Encoding"), HeaderLines.equalsIgnoringCase(codings, "chunked") {
                check(ServerData.unrequestedTransferCoding(String(decoding: codings, as: UTF8.self)) == nil)
            }
            if let bytes { _ = ServerData.isValidContentLength(bytes: bytes) }
        }
        _ = Array(input).withUnsafeBufferPointer { HeaderLines.value(named: "", in: $0) }
    case 5:
        // The header budget fed with line lengths from the input.
        var budget = HeaderBudget()
        var i = 0
        while i + 4 <= input.count {
            var length = 0
            for k in 0..<4 { length = length << 8 | Int(input[i + k]) }
            if selector & 0x80 != 0 { length = -length }
            if budget.admit(lineLength: length) { check(budget.bytes <= HeaderBudget.maxBytes) }
            i += 4
        }
        check(budget.lines <= HeaderBudget.maxLines)
    case 6, 7:
        // Progress over responses: libcurl figures (any Int64) and new responses, from the input.
        var progress = AttemptProgress()
        var lastDone: Int64 = 0
        var i = 0
        while i + 17 <= input.count {
            var received: Int64 = 0, length: Int64 = 0
            for k in 0..<8 { received = received << 8 | Int64(input[i + k]) }
            for k in 8..<16 { length = length << 8 | Int64(input[i + k]) }
            if input[i + 16] & 1 != 0 { progress.newResponse() }
            progress.update(received: received, length: length)
            check(progress.done >= lastDone)
            check(progress.total < 0 || progress.total >= progress.done)
            lastDone = progress.done
            i += 17
        }
    default:
        break
    }
    return 0
}

/// A broken promise: crash so that libFuzzer keeps the input.
private func check(_ condition: Bool) {
    if !condition { fatalError("fuzz_server_data: a parser broke its documented promise") }
}
