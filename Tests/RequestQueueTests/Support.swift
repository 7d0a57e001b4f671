import CRequestQueueAPI
import Foundation
import RequestQueue
import Testing

/// The fixture HTTP server (Tests/Fixtures/fixture_server.py), started once for the whole run on
/// an ephemeral port of 127.0.0.1. Tests tell their requests apart with `group` and `id` query
/// parameters and read what the server saw from its log.
final class Fixture: @unchecked Sendable {
    static let shared = Fixture()

    let port: Int
    private let process = Process()
    private let stdinPipe = Pipe()

    private init() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("Tests/Fixtures/fixture_server.py").path
        let out = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--exit-on-stdin-eof"]
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
                  headers: r["headers"] as? [String: String] ?? [:], bodyLength: r["body_len"] as? Int ?? 0)
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
final class Recorder: @unchecked Sendable {
    private let lock = NSCondition()
    private(set) var completionsStore: [Completion] = []
    private(set) var progressStore: [ProgressCall] = []
    private(set) var finalized: [String] = []
    private(set) var challenges: [(tag: String, challenge: OpaquePointer?, failures: UInt32, status: Int)] = []
    /// Called inside completion callbacks (on the delivering thread).
    var onCompletion: ((Completion, OpaquePointer?) -> Void)?
    /// Called inside auth callbacks; when nil the challenge is only recorded.
    var onChallenge: ((String, OpaquePointer?, UInt32) -> Void)?

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
                       attempts: Int(rq_response_attempts(response)), thread: UInt(bitPattern: Int(pthread_self())),
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
func addAndRelease(_ queue: OpaquePointer?, _ request: OpaquePointer?) -> rq_result {
    let rc = rq_add(queue, request)
    _ = rq_request_free(request)
    return rc
}
