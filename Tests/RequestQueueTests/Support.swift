import CRequestQueueAPI
import Foundation
import RequestQueue
import Testing

/// The fixture HTTP server (Tests/Fixtures/fixture_server.py), started once for the whole run on
/// an ephemeral port of 127.0.0.1. Tests tell their requests apart with `group` and `id` query
/// parameters and read what the server saw from its log.
final class Fixture: Sendable {
    static let shared = Fixture()

    let port: Int
    private let process = Process()
    private let stdinPipe = Pipe()

    private init() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("Tests/Fixtures/fixture_server.py").path
        let out = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--exit-on-stdin-eof", "--parent-pid", "\(getpid())"]
        process.standardOutput = out
        process.standardInput = stdinPipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { fatalError("cannot start the fixture server: \(error)") }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { fatalError("fixture server exited before printing its port") }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else { fatalError("unexpected fixture output: \(text)") }
        self.port = port
    }

    var base: String { "http://127.0.0.1:\(port)" }

    func url(_ path: String) -> String { base + path }

    /// GET on the fixture with the curl command (independent of the library under test).
    func get(_ path: String) -> Data {
        let p = Process()
        let out = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["curl", "-s", "--max-time", "10", url(path)]
        p.standardOutput = out
        try? p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return data
    }

    struct Entry {
        let seq: Int
        let path: String
        let id: String?
        let method: String
        let start: Double
        let end: Double?
        let headers: [String: String]
        let bodyLength: Int
        /// A /hold request whose client left before the body was released.
        var clientGone = false
    }

    struct Log {
        let entries: [Entry]
        let peaks: [String: Int]
    }

    /// The server's log, reduced to the requests of one group.
    func log(group: String) -> Log {
        let data = get("/_/log")
        guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return Log(entries: [], peaks: [:]) }
        let requests = json["requests"] as? [[String: Any]] ?? []
        let entries = requests.filter { ($0["group"] as? String) == group }.map { r in
            Entry(seq: r["seq"] as? Int ?? 0, path: r["path"] as? String ?? "", id: r["id"] as? String,
                  method: r["method"] as? String ?? "", start: r["start"] as? Double ?? 0, end: r["end"] as? Double,
                  headers: r["headers"] as? [String: String] ?? [:], bodyLength: r["body_len"] as? Int ?? 0,
                  clientGone: r["client_gone"] as? Bool ?? false)
        }
        return Log(entries: entries, peaks: json["peaks"] as? [String: Int] ?? [:])
    }

    /// Polls the log until `condition` holds (or 10 s pass); returns the last log seen.
    @discardableResult
    func waitForLog(group: String, _ condition: (Log) -> Bool) -> Log {
        let deadline = Date().addingTimeInterval(10)
        var log = self.log(group: group)
        while !condition(log), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            log = self.log(group: group)
        }
        return log
    }

    /// A port on which connections are refused for `seconds`, then accepted by the fixture.
    func refusingPort(for seconds: Double) -> Int {
        let data = get("/_/refuse-then-accept?after=\(seconds)")
        let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        return json?["port"] as? Int ?? 0
    }
}

/// A unique group name per test, so that tests running in parallel can share the fixture.
/// Seconds on the clock the fixture server logs with (Python's time.monotonic: CLOCK_MONOTONIC).
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func uniqueGroup(_ name: String = #function) -> String {
    let cleaned = name.filter { $0.isLetter || $0.isNumber }
    return "\(cleaned)-\(UUID().uuidString.prefix(8))"
}

/// What a completion callback received, copied out of the borrowed response.
struct Completion: Sendable {
    let tag: String
    let outcome: rq_outcome
    let status: Int
    let body: [UInt8]
    let headers: [(String, String)]
    let url: String
    let message: String
    let attempts: Int
    /// `rq_response_http_version` (the value of `rq_metrics.http_version` too).
    let httpVersion: Int32
    let thread: UInt
    let time: Double
}

struct ProgressCall: Sendable {
    let tag: String
    let upload: Bool
    let progress: Double
    let done: Int64
    let total: Int64
}

/// Collects every callback of the requests made through it.
// @unchecked Sendable: every stored var under `lock` (an NSCondition, which Mutex cannot replace).
final class Recorder: @unchecked Sendable {
    private let lock = NSCondition()
    private(set) var completionsStore: [Completion] = []
    private(set) var progressStore: [ProgressCall] = []
    private(set) var finalized: [String] = []
    private(set) var challenges: [(tag: String, challenge: OpaquePointer?, failures: UInt32, status: Int)] = []
    private var completionHook: ((Completion, OpaquePointer?) -> Void)?
    private var challengeHook: ((String, OpaquePointer?, UInt32) -> Void)?
    /// Called inside completion callbacks (on the delivering thread).
    var onCompletion: ((Completion, OpaquePointer?) -> Void)? {
        get { lock.lock(); defer { lock.unlock() }; return completionHook }
        set { lock.lock(); completionHook = newValue; lock.unlock() }
    }
    /// Called inside auth callbacks; when nil the challenge is only recorded.
    var onChallenge: ((String, OpaquePointer?, UInt32) -> Void)? {
        get { lock.lock(); defer { lock.unlock() }; return challengeHook }
        set { lock.lock(); challengeHook = newValue; lock.unlock() }
    }

    var completions: [Completion] { lock.lock(); defer { lock.unlock() }; return completionsStore }
    var progress: [ProgressCall] { lock.lock(); defer { lock.unlock() }; return progressStore }
    var finalizedTags: [String] { lock.lock(); defer { lock.unlock() }; return finalized }
    var challengeList: [(tag: String, challenge: OpaquePointer?, failures: UInt32, status: Int)] {
        lock.lock(); defer { lock.unlock() }; return challenges
    }

    func completion(_ tag: String) -> Completion? { completions.first { $0.tag == tag } }

    /// Waits until `count` completions arrived (10 s at most); returns whether they did.
    @discardableResult
    func waitForCompletions(_ count: Int, timeout: Double = 10) -> Bool {
        lock.lock(); defer { lock.unlock() }
        let deadline = Date().addingTimeInterval(timeout)
        while completionsStore.count < count {
            if !lock.wait(until: deadline) { return completionsStore.count >= count }
        }
        return true
    }

    @discardableResult
    func waitForChallenges(_ count: Int, timeout: Double = 10) -> Bool {
        lock.lock(); defer { lock.unlock() }
        let deadline = Date().addingTimeInterval(timeout)
        while challenges.count < count {
            if !lock.wait(until: deadline) { return challenges.count >= count }
        }
        return true
    }

    fileprivate func record(_ c: Completion, _ request: OpaquePointer?) {
        onCompletion?(c, request)
        lock.lock(); completionsStore.append(c); lock.broadcast(); lock.unlock()
    }

    fileprivate func record(_ p: ProgressCall) { lock.lock(); progressStore.append(p); lock.unlock() }

    fileprivate func recordFinalized(_ tag: String) { lock.lock(); finalized.append(tag); lock.broadcast(); lock.unlock() }

    fileprivate func recordChallenge(_ tag: String, _ challenge: OpaquePointer?, _ failures: UInt32, _ status: Int) {
        lock.lock(); challenges.append((tag, challenge, failures, status)); lock.broadcast(); lock.unlock()
        onChallenge?(tag, challenge, failures)
    }

    /// Creates a request for `url` whose callbacks report here under `tag`. Returns the caller's handle.
    func request(_ url: String, tag: String, progress: Bool = false, auth: Bool = false,
                 configure: (OpaquePointer?) -> Void = { _ in }) throws -> OpaquePointer? {
        var r: OpaquePointer?
        let rc = rq_request_new(url, &r)
        try #require(rc == RQ_OK, "rq_request_new(\(url)) = \(String(cString: rq_result_str(Int32(rc.rawValue))))")
        _ = attach(r, tag: tag)
        if progress {
            #expect(rq_request_set_download_progress(r, onDownload) == RQ_OK)
            #expect(rq_request_set_upload_progress(r, onUpload) == RQ_OK)
        }
        if auth { #expect(rq_request_set_auth_handler(r, onAuth) == RQ_OK) }
        configure(r)
        return r
    }
}

extension Recorder {
    /// Routes the completion (and the context finalizer) of `r` to this recorder under `tag`.
    func attach(_ r: OpaquePointer?, tag: String) -> OpaquePointer? {
        let box = Unmanaged.passRetained(Tagged(tag: tag, recorder: self)).toOpaque()
        #expect(rq_request_set_completion(r, onDone, box, onFinalize) == RQ_OK)
        return r
    }
}

final class Tagged {
    let tag: String
    let recorder: Recorder
    init(tag: String, recorder: Recorder) { self.tag = tag; self.recorder = recorder }
}

private func tagged(_ context: UnsafeMutableRawPointer?) -> Tagged? {
    context.map { Unmanaged<Tagged>.fromOpaque($0).takeUnretainedValue() }
}

private let onDone: rq_completion_fn = { context, request, response in
    guard let t = tagged(context) else { return }
    var size = 0
    let body = rq_response_body(response, &size)
    var headers: [(String, String)] = []
    for i in 0..<rq_response_header_count(response) {
        var name: UnsafePointer<CChar>?
        var value: UnsafePointer<CChar>?
        if rq_response_header_at(response, i, &name, &value) == RQ_OK, let name, let value {
            headers.append((String(cString: name), String(cString: value)))
        }
    }
    let c = Completion(tag: t.tag, outcome: rq_response_outcome(response), status: Int(rq_response_status(response)),
                       body: body.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [], headers: headers,
                       url: String(cString: rq_response_url(response)), message: String(cString: rq_response_error_message(response)),
                       attempts: Int(rq_response_attempts(response)), httpVersion: rq_response_http_version(response), thread: UInt(bitPattern: Int(pthread_self())),
                       time: Date().timeIntervalSince1970)
    t.recorder.record(c, request)
}

private let onFinalize: rq_context_free_fn = { context in
    guard let context else { return }
    let t = Unmanaged<Tagged>.fromOpaque(context).takeRetainedValue()
    t.recorder.recordFinalized(t.tag)
}

private let onDownload: rq_progress_fn = { context, _, progress, done, total in
    guard let t = tagged(context) else { return }
    t.recorder.record(ProgressCall(tag: t.tag, upload: false, progress: progress, done: done, total: total))
}

private let onUpload: rq_progress_fn = { context, _, progress, done, total in
    guard let t = tagged(context) else { return }
    t.recorder.record(ProgressCall(tag: t.tag, upload: true, progress: progress, done: done, total: total))
}

private let onAuth: rq_auth_fn = { context, _, challenge, failures, response in
    guard let t = tagged(context) else { return }
    t.recorder.recordChallenge(t.tag, challenge, failures, Int(rq_response_status(response)))
}

/// A new queue; fails the test if it cannot be created.
func makeQueue(_ delivery: rq_delivery = RQ_DELIVERY_THREADED, max: Int = 2) throws -> OpaquePointer? {
    var q: OpaquePointer?
    try #require(rq_queue_new(delivery, &q) == RQ_OK)
    try #require(rq_queue_set_max_concurrent(q, max) == RQ_OK)
    return q
}

func count(_ queue: OpaquePointer?) -> Int {
    var n = 0
    _ = rq_queue_count(queue, &n)
    return n
}

/// Adds a request and frees the caller's handle (the queue keeps what it needs).
/// One step of a loop that waits for a queue's callbacks (at most about 50 ms): a dispatch queue's
/// descriptor polled and its callbacks run here; any other queue waited on briefly.
func awaitCallbacks(_ queue: OpaquePointer?, _ delivery: rq_delivery) {
    if delivery == RQ_DELIVERY_DISPATCH {
        var fd: Int32 = -1
        _ = rq_queue_get_fd(queue, &fd)
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, 50)
        _ = rq_queue_dispatch(queue, 0, nil)
    } else {
        _ = rq_queue_wait_idle(queue, 0.05)
    }
}

func addAndRelease(_ queue: OpaquePointer?, _ request: OpaquePointer?) -> rq_result {
    let rc = rq_add(queue, request)
    _ = rq_request_free(request)
    return rc
}

// MARK: - Streaming and metrics (StreamingTests)

/// The fixture's body pattern (Tests/Fixtures/fixture_server.py): "abc...xyz0...9" repeated.
enum FixturePattern {
    static let unit = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
    /// Enough of the pattern to compare a chunk of up to 256 KiB starting at any phase.
    static let block: [UInt8] = unit.cycled(to: 262_144 + unit.count)

    /// Bytes [offset, offset + count) of the pattern.
    static func bytes(_ offset: Int = 0, _ count: Int) -> [UInt8] {
        Array(unit.cycled(to: offset % unit.count + count).dropFirst(offset % unit.count))
    }

    /// Whether `data` is the pattern from `offset` on, compared with memcmp (fast in debug builds).
    static func matches(_ data: UnsafeBufferPointer<UInt8>, at offset: UInt64) -> Bool {
        var done = 0
        while done < data.count {
            let n = min(262_144, data.count - done)
            let phase = Int((offset + UInt64(done)) % UInt64(unit.count))
            let same = block.withUnsafeBufferPointer { memcmp(data.baseAddress! + done, $0.baseAddress! + phase, n) == 0 }
            if !same { return false }
            done += n
        }
        return true
    }
}

/// What the body callbacks (and metrics) of one recorder's requests received, per tag.
// @unchecked Sendable: every stored var under `lock`.
final class StreamLog: @unchecked Sendable {
    struct Stream {
        /// The bytes of the current body (since the last chunk at offset 0), if kept.
        var bytes: [UInt8] = []
        /// Bytes of the current body, and of every chunk received.
        var count: UInt64 = 0
        var totalReceived: UInt64 = 0
        var calls = 0
        /// Chunks at offset 0: 1 per body; more when a retry started the body over.
        var starts = 0
        /// Every chunk continued the previous one (offset == bytes so far).
        var contiguous = true
        /// Every chunk was the fixture's pattern at its offset.
        var matchesPattern = true
        var threads: Set<UInt> = []
        /// Chunks whose bytes did not begin in memory where the previous chunk's ended: the
        /// buffers the chunks were in, when each one's pieces come in order.
        var buffers = 0
        var lastEnd: UInt?
        /// Chunk calls seen when the completion ran (nil before it).
        var callsAtCompletion: Int?
        var metrics: rq_metrics?
        var metricsResult: rq_result?
        /// The heads received (rq_request_set_head_callback), and the order of the callbacks:
        /// "head <status>", "chunk" (one entry for consecutive chunks), "done".
        var heads: [Head] = []
        var sequence: [String] = []
    }

    struct Head {
        let status: Int
        let url: String
        let headers: [String: String]
        let bodySize: Int
        let outcome: rq_outcome
        let httpVersion: Int32
    }

    private let lock = NSLock()
    private var streams: [String: Stream] = [:]
    private var keep = true
    private var chunkHook: ((String, Stream) -> Int32)?
    private var responseHook: ((String, OpaquePointer?) -> Void)?
    private var headHook: ((String, Stream, OpaquePointer?) -> Void)?

    private func locked<T>(_ body: () -> T) -> T { lock.lock(); defer { lock.unlock() }; return body() }

    /// Whether chunk bytes are kept (not for huge bodies).
    var keepBytes: Bool {
        get { locked { keep } }
        set { locked { keep = newValue } }
    }
    /// Runs after each chunk is recorded (tag, stream so far); its result is the callback's.
    var onChunk: ((String, Stream) -> Int32)? {
        get { locked { chunkHook } }
        set { locked { chunkHook = newValue } }
    }
    /// Runs inside the completion callback with the borrowed response, before it is recorded.
    var onResponse: ((String, OpaquePointer?) -> Void)? {
        get { locked { responseHook } }
        set { locked { responseHook = newValue } }
    }
    /// Runs after each head is recorded (tag, stream so far), with the borrowed head.
    var onHead: ((String, Stream, OpaquePointer?) -> Void)? {
        get { locked { headHook } }
        set { locked { headHook = newValue } }
    }

    fileprivate func recordHead(_ tag: String, _ response: OpaquePointer?) {
        var size = 0
        _ = rq_response_body(response, &size)
        var headers: [String: String] = [:]
        for i in 0..<rq_response_header_count(response) {
            var name: UnsafePointer<CChar>?
            var value: UnsafePointer<CChar>?
            if rq_response_header_at(response, i, &name, &value) == RQ_OK, let name, let value {
                headers[String(cString: name).lowercased()] = String(cString: value)
            }
        }
        let head = Head(status: Int(rq_response_status(response)), url: String(cString: rq_response_url(response)),
                        headers: headers, bodySize: size, outcome: rq_response_outcome(response),
                        httpVersion: rq_response_http_version(response))
        lock.lock()
        var s = streams[tag] ?? Stream()
        s.heads.append(head)
        s.sequence.append("head \(head.status)")
        streams[tag] = s
        let hook = headHook
        lock.unlock()
        hook?(tag, s, response)
    }

    func stream(_ tag: String) -> Stream { lock.lock(); defer { lock.unlock() }; return streams[tag] ?? Stream() }

    fileprivate func record(_ tag: String, _ data: UnsafeBufferPointer<UInt8>, offset: UInt64) -> Int32 {
        lock.lock()
        var s = streams[tag] ?? Stream()
        if offset == 0 {
            s.starts += 1
            s.count = 0
            s.bytes.removeAll()
        }
        if offset != s.count { s.contiguous = false }
        if !FixturePattern.matches(data, at: offset) { s.matchesPattern = false }
        if keep { s.bytes.append(contentsOf: data) }
        s.count = offset + UInt64(data.count)
        s.totalReceived += UInt64(data.count)
        let start = UInt(bitPattern: data.baseAddress)
        if start != s.lastEnd { s.buffers += 1 }
        s.lastEnd = start + UInt(data.count)
        s.calls += 1
        if s.sequence.last != "chunk" { s.sequence.append("chunk") }
        s.threads.insert(UInt(bitPattern: Int(pthread_self())))
        streams[tag] = s
        let hook = chunkHook
        lock.unlock()
        return hook?(tag, s) ?? 0
    }

    fileprivate func recordCompletion(_ tag: String, _ response: OpaquePointer?) {
        onResponse?(tag, response)
        var m = rq_metrics()
        m.size = MemoryLayout<rq_metrics>.size
        let rc = rq_response_metrics(response, &m)
        lock.lock()
        var s = streams[tag] ?? Stream()
        s.callsAtCompletion = s.calls
        s.sequence.append("done")
        s.metrics = rc == RQ_OK ? m : nil
        s.metricsResult = rc
        streams[tag] = s
        lock.unlock()
    }
}

private let streamLogs = Locked<[ObjectIdentifier: (Recorder, StreamLog)]>([:])

extension Recorder {
    /// The stream log of this recorder (created on first use; kept for the whole run).
    var streams: StreamLog {
        var log: StreamLog!
        streamLogs.mutate { table in
            if let entry = table[ObjectIdentifier(self)] { log = entry.1 } else {
                log = StreamLog()
                table[ObjectIdentifier(self)] = (self, log)
            }
        }
        return log
    }

    /// Like `request`, with a completion that also records the metrics (and runs
    /// `streams.onResponse`), and with the body streamed to `streams` when `body` is true.
    func streamingRequest(_ url: String, tag: String, body: Bool = true, progress: Bool = false, head: Bool = false,
                          configure: (OpaquePointer?) -> Void = { _ in }) throws -> OpaquePointer? {
        var r: OpaquePointer?
        let rc = rq_request_new(url, &r)
        try #require(rc == RQ_OK, "rq_request_new(\(url)) = \(String(cString: rq_result_str(Int32(rc.rawValue))))")
        _ = streams
        let box = Unmanaged.passRetained(Tagged(tag: tag, recorder: self)).toOpaque()
        #expect(rq_request_set_completion(r, onDoneWithMetrics, box, onFinalize) == RQ_OK)
        if body { #expect(rq_request_set_body_callback(r, onData) == RQ_OK) }
        if progress { #expect(rq_request_set_download_progress(r, onDownload) == RQ_OK) }
        if head { #expect(rq_request_set_head_callback(r, onHead) == RQ_OK) }
        configure(r)
        return r
    }
}

private let onHead: rq_head_fn = { context, _, response in
    guard let t = tagged(context) else { return }
    t.recorder.streams.recordHead(t.tag, response)
}

private let onData: rq_data_fn = { context, _, data, size, offset in
    guard let t = tagged(context), let data else { return 1 }
    return t.recorder.streams.record(t.tag, UnsafeBufferPointer(start: data, count: size), offset: offset)
}

private let onDoneWithMetrics: rq_completion_fn = { context, request, response in
    if let t = tagged(context) { t.recorder.streams.recordCompletion(t.tag, response) }
    onDone(context, request, response)
}

/// The resident set size of this process in bytes (VmRSS of /proc/self/status).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    let kib = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
    return kib * 1024
}
