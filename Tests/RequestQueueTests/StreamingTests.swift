import CRequestQueueAPI
import Foundation
import Glibc
import RequestQueue
import Testing

/// Streaming bodies to a callback or a file (with resume), and per-request metrics.
@Suite struct StreamingTests {
    let fixture = Fixture.shared

    /// Runs one request on a fresh threaded queue; returns its completion and what was streamed.
    func run(_ path: String, body: Bool = true, progress: Bool = false, recorder: Recorder = Recorder(),
             configure: (OpaquePointer?) -> Void = { _ in }) throws -> (Completion, StreamLog.Stream, Recorder) {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let r = try recorder.streamingRequest(fixture.url(path), tag: "r", body: body, progress: progress, configure: configure)
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        return (try #require(recorder.completion("r")), recorder.streams.stream("r"), recorder)
    }

    /// A fresh folder for output files, removed by `cleanup`.
    func folder() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("rq-streaming-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func contents(_ url: URL) -> [UInt8]? { (try? Data(contentsOf: url)).map { Array($0) } }

    // MARK: Body callback

    @Test func chunksConcatenateToTheExactBodyBeforeTheCompletion() throws {
        let n = 1_000_003
        let (c, s, rec) = try run("/bytes?n=\(n)&chunked=1&chunk=10000", progress: true)
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200)
        #expect(c.body.isEmpty)
        #expect(s.bytes == FixturePattern.bytes(0, n))
        #expect(s.starts == 1 && s.contiguous && s.matchesPattern)
        #expect(s.calls > 1)
        // Every chunk ran before the completion, off the test's thread (on the queue's delivery).
        #expect(s.callsAtCompletion == s.calls)
        #expect(!s.threads.contains(UInt(bitPattern: Int(pthread_self()))))
        #expect(s.metrics?.bytes_down == UInt64(n))
        let last = try #require(rec.progress.last)
        #expect(last.done == Int64(n) && last.progress == 1.0)
    }

    @Test func onlyTheBodyOfASuccessIsStreamed() throws {
        // An HTTP error's body is delivered in the response, as without streaming.
        let (error, s, _) = try run("/bytes?n=100&status=404")
        #expect(error.outcome == RQ_OUTCOME_HTTP_STATUS && error.status == 404)
        #expect(error.body == FixturePattern.bytes(0, 100))
        #expect(s.calls == 0)
        // Redirect responses are not streamed; the final one is.
        let (redirected, r, _) = try run("/redirect/2")
        #expect(redirected.outcome == RQ_OUTCOME_OK && redirected.body.isEmpty)
        #expect(String(decoding: r.bytes, as: UTF8.self) == "redirected")
        #expect(r.starts == 1)
    }

    /// The maximum response size cuts a streamed body at the limit, wherever it falls in a piece
    /// or a chunk (no Content-Length announces the size: the streamed bytes are counted), and a
    /// body of exactly the limit passes whole.
    @Test(arguments: [1, 300_001, 600_000])
    func theMaximumResponseSizeCutsAStreamedBody(limit: Int) throws {
        let (cut, s, _) = try run("/bytes?n=1000000&chunked=1&chunk=10000") { r in
            _ = rq_request_set_max_response_size(r, UInt64(limit))
        }
        #expect(cut.outcome == RQ_OUTCOME_RESPONSE_TOO_LARGE)
        #expect(s.count <= UInt64(limit) && s.contiguous && s.matchesPattern)
        let (fits, f, _) = try run("/bytes?n=\(limit)&chunked=1&chunk=10000") { r in
            _ = rq_request_set_max_response_size(r, UInt64(limit))
        }
        #expect(fits.outcome == RQ_OUTCOME_OK)
        #expect(f.bytes == FixturePattern.bytes(0, limit))
    }

    @Test func returningNonZeroCancelsAndStopsTheChunks() throws {
        let rec = Recorder()
        rec.streams.onChunk = { _, _ in 1 }
        let (c, s, _) = try run("/bytes?n=20000000", recorder: rec)
        #expect(c.outcome == RQ_OUTCOME_CANCELLED)
        #expect(s.calls == 1)
        #expect(s.callsAtCompletion == 1)
        #expect(rec.finalizedTags == ["r"])
    }

    @Test func aRetryStartsTheStreamOverFromOffsetZero() throws {
        let g = uniqueGroup()
        let n = 100_000
        let (c, s, _) = try run("/flaky?key=\(g)&fail=1&mode=truncated&n=\(n)&group=\(g)") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.attempts == 2)
        // The failed attempt delivered half the body; the second started again at offset 0.
        #expect(s.starts == 2)
        #expect(s.totalReceived == UInt64(n / 2 + n))
        #expect(s.bytes == FixturePattern.bytes(0, n))
        #expect(s.contiguous && s.matchesPattern)
        #expect(s.metrics?.bytes_down == UInt64(n) && s.metrics?.attempts == 2)
    }

    /// A dispatch-mode host that dispatches slowly: the transfer pauses instead of buffering, so
    /// the process grows by far less than the 200 MiB body.
    @Test func aSlowConsumerPausesTheTransferAndMemoryStaysBounded() throws {
        let n = 200 * 1024 * 1024
        let q = try makeQueue(RQ_DELIVERY_DISPATCH, max: 1)
        defer { _ = rq_queue_free(q) }
        var fd: Int32 = -1
        try #require(rq_queue_get_fd(q, &fd) == RQ_OK)
        let rec = Recorder()
        let log = rec.streams
        log.keepBytes = false
        let baseline = residentBytes()
        let peak = Locked(baseline)
        log.onChunk = { _, s in
            if s.calls % 16 == 0 {
                let now = residentBytes()
                peak.mutate { $0 = max($0, now) }
            }
            usleep(250) // a slow consumer: at most 16 KiB per 0.25 ms, about 64 MB/s
            return 0
        }
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(n)"), tag: "big"))
        let deadline = Date().addingTimeInterval(120)
        while rec.completions.isEmpty, Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 1000) == 1 { _ = rq_queue_dispatch(q, 1, nil) }
        }
        let c = try #require(rec.completion("big"))
        let s = log.stream("big")
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(s.count == UInt64(n) && s.contiguous && s.matchesPattern)
        let growth = peak.value - baseline
        #expect(growth < 64 * 1024 * 1024, "resident memory grew by \(growth / 1024 / 1024) MiB for a 200 MiB body")
    }

    /// While the host does not dispatch, the server is held back (it cannot finish sending), the
    /// idle timeout does not fire, and the transfer completes once the host dispatches again.
    @Test func aPausedTransferHoldsTheServerBackWithoutTimingOut() throws {
        let g = uniqueGroup()
        let n = 64 * 1024 * 1024
        let q = try makeQueue(RQ_DELIVERY_DISPATCH, max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.streams.keepBytes = false
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(n)&group=\(g)&id=held"), tag: "held") { r in
            _ = rq_request_set_idle_timeout(r, 1)
        })
        let cancelled = try rec.streamingRequest(fixture.url("/bytes?n=\(n)&group=\(g)&id=cancelled"), tag: "cancelled")
        _ = rq_add(q, cancelled)
        fixture.waitForLog(group: g) { $0.entries.count == 2 }
        Thread.sleep(forTimeInterval: 2.5)
        // Both started, neither could send its whole body: the client stopped reading.
        let log = fixture.log(group: g)
        #expect(log.entries.count == 2)
        #expect(log.entries.allSatisfy { $0.end == nil })
        #expect(rq_cancel(cancelled) == RQ_OK)
        _ = rq_request_free(cancelled)
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        let held = try #require(rec.completion("held"))
        #expect(held.outcome == RQ_OUTCOME_OK)
        #expect(rec.streams.stream("held").count == UInt64(n))
        #expect(rec.completion("cancelled")?.outcome == RQ_OUTCOME_CANCELLED)
        let c = rec.streams.stream("cancelled")
        #expect(c.count < UInt64(n) && c.callsAtCompletion == c.calls)
    }

    @Test func freeingAQueueWithAPausedStreamDeliversItsChunksThenTheCancellation() throws {
        let g = uniqueGroup()
        var q: OpaquePointer?
        try #require(rq_queue_new(RQ_DELIVERY_DISPATCH, &q) == RQ_OK)
        let rec = Recorder()
        rec.streams.keepBytes = false
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=\(64 * 1024 * 1024)&group=\(g)"), tag: "s"))
        fixture.waitForLog(group: g) { $0.entries.count == 1 }
        // More than the pause threshold is waiting for dispatch when the queue is freed.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(rq_queue_free(q) == RQ_OK)
        let c = try #require(rec.completion("s"))
        #expect(c.outcome == RQ_OUTCOME_CANCELLED && c.message == "the queue was freed")
        let s = rec.streams.stream("s")
        #expect(s.calls > 0 && s.callsAtCompletion == s.calls && s.contiguous && s.matchesPattern)
    }

    @Test func chunksRunOnTheDispatchingThread() throws {
        let q = try makeQueue(RQ_DELIVERY_DISPATCH)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=300000"), tag: "d"))
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let s = rec.streams.stream("d")
        let me = UInt(bitPattern: Int(pthread_self()))
        #expect(s.threads == [me])
        #expect(s.bytes == FixturePattern.bytes(0, 300_000))
        #expect(rec.completion("d")?.thread == me)
    }

    /// Pieces are gathered into larger ones within a turn of the engine's loop, but what arrived
    /// never waits for more: while the server holds the rest of the body back, the callback has
    /// already had every byte sent so far, in both delivery modes and whatever the size of the
    /// last piece libcurl passed (16 KiB exactly is the largest it passes at once).
    @Test(arguments: [100, 16384, 16384 * 3, 70000])
    func whatArrivedIsDeliveredWhileTheServerHoldsTheRest(first: Int) throws {
        for delivery in [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH] {
            let key = uniqueGroup() + "-\(first)-\(delivery.rawValue)"
            let n = first + 1000
            let q = try makeQueue(delivery)
            defer { _ = rq_queue_free(q) }
            let rec = Recorder()
            _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/hold?key=\(key)&n=\(n)&first=\(first)"), tag: "h"))
            // Watchdog only: the bytes come as soon as the engine read them (a piece waiting for
            // more would wait here until the deadline, then fail).
            let deadline = Date().addingTimeInterval(20)
            while rec.streams.stream("h").count < UInt64(first), Date() < deadline {
                if delivery == RQ_DELIVERY_DISPATCH { _ = rq_queue_dispatch(q, 0, nil) }
                usleep(1000)
            }
            let held = rec.streams.stream("h")
            #expect(held.count == UInt64(first), "\(held.count) of the \(first) bytes sent were delivered")
            #expect(rec.completion("h") == nil)
            _ = fixture.get("/_/release?key=\(key)")
            #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
            let s = rec.streams.stream("h")
            #expect(rec.completion("h")?.outcome == RQ_OUTCOME_OK)
            #expect(s.count == UInt64(n) && s.contiguous && s.matchesPattern && s.callsAtCompletion == s.calls)
        }
    }

    /// A collected body is allocated once from its Content-Length, within a bound: a server that
    /// announces 16 GiB and sends 10 bytes does not make the process map 16 GiB (its peak of
    /// virtual memory, which untouched mappings raise too, grows by far less).
    @Test func aContentLengthFarAboveWhatIsSentReservesNoHugeBuffer() throws {
        let key = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let before = try #require(virtualMemoryPeak())
        _ = addAndRelease(q, try rec.request(fixture.url("/hold?key=\(key)&n=\(16 << 30)&first=10"), tag: "r") { r in
            _ = rq_request_set_idle_timeout(r, 1)
        })
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let c = try #require(rec.completion("r"))
        #expect(c.outcome == RQ_OUTCOME_TIMEOUT, "\(c.outcome): \(c.message)")
        let growth = try #require(virtualMemoryPeak()) - before
        #expect(growth < 8 << 30, "the peak of virtual memory grew by \(growth >> 20) MiB")
        _ = fixture.get("/_/release?key=\(key)")
    }

    /// VmPeak of /proc/self/status, in bytes.
    func virtualMemoryPeak() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmPeak:") }),
              let kib = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else { return nil }
        return kib * 1024
    }

    /// Flow control counts the memory that waiting pieces hold, not only their bytes: a body sent
    /// in many small pieces to a host that does not dispatch holds about what it sent, not a
    /// mostly empty buffer per piece. (Measured as the bytes malloc has handed out: an untouched
    /// buffer does not raise the resident size.)
    @Test func manySmallPiecesWaitingForDispatchHoldLittleMemory() throws {
        let g = uniqueGroup()
        let count = 2000, size = 100
        let q = try makeQueue(RQ_DELIVERY_DISPATCH)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let baseline = allocatedBytes()
        _ = addAndRelease(q, try rec.streamingRequest(
            fixture.url("/trickle?where=body&every=0.001&n=\(count)&size=\(size)&group=\(g)"), tag: "t"))
        // Nothing is dispatched until the server has sent the whole body (200 KB: the sockets'
        // buffers hold it even while the transfer is paused).
        let sent = fixture.waitForLog(group: g) { $0.entries.first?.end != nil }
        #expect(sent.entries.first?.end != nil)
        let growth = allocatedBytes() - baseline
        #expect(growth < 64 << 20, "malloc'ed memory grew by \(growth >> 20) MiB for \(count) pieces of \(size) bytes")
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let s = rec.streams.stream("t")
        #expect(rec.completion("t")?.outcome == RQ_OUTCOME_OK)
        #expect(s.count == UInt64(count * size) && s.contiguous && s.matchesPattern)
    }

    /// Bytes malloc holds from the system (its arenas, and the blocks mapped on their own), read
    /// from glibc's malloc_info report (malloc.h is not in the Glibc module: found with dlsym).
    func allocatedBytes() -> Int {
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_info") else { return 0 }
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return 0 }
        _ = unsafeBitCast(symbol, to: MallocInfo.self)(0, stream)
        fclose(stream)
        defer { free(buffer) }
        guard let buffer else { return 0 }
        // The totals after the last heap: <system type="current" size="S"/> and
        // <total type="mmap" count="N" size="S"/>.
        let xml = String(cString: buffer)
        guard let tail = xml.range(of: "</heap>", options: .backwards).map({ xml[$0.upperBound...] }) else { return 0 }
        func figure(after marker: String) -> Int {
            guard let at = tail.range(of: marker) else { return 0 }
            let rest = tail[at.upperBound...]
            guard let open = rest.range(of: "size=\"") else { return 0 }
            return Int(rest[open.upperBound...].prefix { $0.isNumber }) ?? 0
        }
        return figure(after: "<system type=\"current\"") + figure(after: "<total type=\"mmap\"")
    }

    @Test func streamingRequestsNeverShareATransfer() throws {
        let g = uniqueGroup()
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE)
        let rec = Recorder()
        let url = fixture.url("/bytes?n=5000&delay=0.2&group=\(g)")
        for name in ["a", "b"] {
            _ = addAndRelease(q, try rec.streamingRequest(url, tag: name, body: false) { r in
                _ = rq_request_set_output_file(r, dir.appendingPathComponent(name).path, 0)
            })
        }
        _ = addAndRelease(q, try rec.streamingRequest(url, tag: "c"))
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(fixture.log(group: g).entries.count == 3)
        #expect(contents(dir.appendingPathComponent("a")) == FixturePattern.bytes(0, 5000))
        #expect(contents(dir.appendingPathComponent("b")) == FixturePattern.bytes(0, 5000))
        #expect(rec.streams.stream("c").bytes == FixturePattern.bytes(0, 5000))
    }

    // MARK: Output file

    @Test func theOutputFileGetsTheExactBody() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("out.bin")
        // An older, longer file is truncated.
        try Data(repeating: 0x78, count: 500_000).write(to: file)
        let n = 300_000
        let (c, s, rec) = try run("/bytes?n=\(n)&chunked=1", body: false, progress: true) { r in
            #expect(rq_request_set_output_file(r, file.path, 0) == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200 && c.body.isEmpty)
        #expect(contents(file) == FixturePattern.bytes(0, n))
        #expect(s.metrics?.bytes_down == UInt64(n))
        #expect(rec.progress.last?.done == Int64(n))
        let mode = (try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int) ?? 0
        #expect(mode & 0o600 == 0o600)
    }

    @Test func aFileNameNeedNotBeUTF8() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        // "caf\xE9.bin" in Latin-1: a valid Linux file name, not valid UTF-8.
        let name: [CChar] = Array(dir.path.utf8CString.dropLast()) + [0x2F, 0x63, 0x61, 0x66, -23, 0x2E, 0x62, 0x69, 0x6E, 0]
        let (c, _, _) = try run("/bytes?n=1000", body: false) { r in
            #expect(name.withUnsafeBufferPointer { rq_request_set_output_file(r, $0.baseAddress, 0) } == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK)
        let fd = open(name, O_RDONLY)
        #expect(fd >= 0)
        var buffer = [UInt8](repeating: 0, count: 2000)
        let n = read(fd, &buffer, buffer.count)
        close(fd)
        #expect(Array(buffer.prefix(max(0, n))) == FixturePattern.bytes(0, 1000))
    }

    @Test func anHTTPErrorLeavesTheFileAlone() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let existing = dir.appendingPathComponent("keep.txt")
        try Data("keep me".utf8).write(to: existing)
        let (c, _, _) = try run("/bytes?n=10&status=404", body: false) { r in _ = rq_request_set_output_file(r, existing.path, 0) }
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS && c.status == 404)
        #expect(c.body == FixturePattern.bytes(0, 10))
        #expect(contents(existing) == Array("keep me".utf8))
        let absent = dir.appendingPathComponent("absent.bin")
        let (missing, _, _) = try run("/status/500", body: false) { r in _ = rq_request_set_output_file(r, absent.path, 1) }
        #expect(missing.outcome == RQ_OUTCOME_HTTP_STATUS)
        #expect(!FileManager.default.fileExists(atPath: absent.path))
    }

    @Test func resumeSendsARangeAndAppendsThe206() throws {
        let g = uniqueGroup()
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("partial.bin")
        let n = 300_000, k = 100_000
        try Data(FixturePattern.bytes(0, k)).write(to: file)
        let (c, s, _) = try run("/bytes?n=\(n)&ranges=1&group=\(g)", body: false) { r in
            #expect(rq_request_set_output_file(r, file.path, 1) == RQ_OK)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 206)
        #expect(c.headers.contains { $0.0 == "Content-Range" && $0.1 == "bytes \(k)-\(n - 1)/\(n)" })
        #expect(fixture.log(group: g).entries.map { $0.headers["range"] } == ["bytes=\(k)-"])
        #expect(contents(file) == FixturePattern.bytes(0, n))
        #expect(s.metrics?.bytes_down == UInt64(n - k))
    }

    @Test func aRangeOfTheCallersOwnIsWrittenAsTheWholeFile() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("part.bin")
        try Data(repeating: 0x78, count: 50).write(to: file)
        let (c, _, _) = try run("/bytes?n=1000&ranges=1", body: false) { r in
            _ = rq_request_set_header(r, "Range", "bytes=100-199")
            _ = rq_request_set_output_file(r, file.path, 0)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 206)
        #expect(contents(file) == FixturePattern.bytes(100, 100))
    }

    @Test func aServerIgnoringTheRangeGetsTheFileRewritten() throws {
        let g = uniqueGroup()
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("partial.bin")
        let n = 200_000
        try Data(repeating: 0x78, count: 50_000).write(to: file)
        let (c, _, _) = try run("/bytes?n=\(n)&group=\(g)", body: false) { r in _ = rq_request_set_output_file(r, file.path, 1) }
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200)
        #expect(fixture.log(group: g).entries.map { $0.headers["range"] } == ["bytes=50000-"])
        #expect(contents(file) == FixturePattern.bytes(0, n))
    }

    @Test func aRangeFromTheWrongPlaceIsABadResponseAndTheFileIsKept() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("partial.bin")
        try Data(FixturePattern.bytes(0, 1000)).write(to: file)
        let (c, _, _) = try run("/bytes?n=5000&ranges=wrong", body: false) { r in _ = rq_request_set_output_file(r, file.path, 1) }
        #expect(c.outcome == RQ_OUTCOME_BAD_RESPONSE)
        #expect(c.message.contains("1000"))
        #expect(contents(file) == FixturePattern.bytes(0, 1000))
    }

    @Test func resumingACompleteFileIsA416AndKeepsIt() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("done.bin")
        try Data(FixturePattern.bytes(0, 5000)).write(to: file)
        let (c, _, _) = try run("/bytes?n=5000&ranges=1", body: false) { r in _ = rq_request_set_output_file(r, file.path, 1) }
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS && c.status == 416)
        #expect(contents(file) == FixturePattern.bytes(0, 5000))
    }

    @Test func aRetryWithResumeContinuesFromTheCurrentSize() throws {
        let g = uniqueGroup()
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("flaky.bin")
        let n = 100_000
        let (c, s, _) = try run("/flaky?key=\(g)&fail=1&mode=truncated&n=\(n)&ranges=1&group=\(g)", body: false) { r in
            _ = rq_request_set_output_file(r, file.path, 1)
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 206 && c.attempts == 2)
        // The first attempt got half the body, then lost the connection: it stayed in the file.
        #expect(fixture.log(group: g).entries.map { $0.headers["range"] } == [nil, "bytes=\(n / 2)-"])
        #expect(contents(file) == FixturePattern.bytes(0, n))
        #expect(s.metrics?.bytes_down == UInt64(n / 2))
    }

    @Test func fileProblemsAreFileErrors() throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let nowhere = dir.appendingPathComponent("missing/out.bin").path
        let (missing, _, _) = try run("/bytes?n=10", body: false) { r in _ = rq_request_set_output_file(r, nowhere, 0) }
        #expect(missing.outcome == RQ_OUTCOME_FILE_ERROR)
        #expect(missing.message.contains(nowhere) && missing.message.contains("No such file or directory"))
        let (folder, _, _) = try run("/bytes?n=10", body: false) { r in _ = rq_request_set_output_file(r, dir.path, 1) }
        #expect(folder.outcome == RQ_OUTCOME_FILE_ERROR)
        // Only regular files: the engine thread never opens anything that could block it.
        #expect(folder.message.contains(dir.path) && folder.message.contains("not a regular file"))
        #expect(String(cString: rq_outcome_str(Int32(RQ_OUTCOME_FILE_ERROR.rawValue))) == "file error")
    }

    // MARK: Metrics

    @Test func metricsAreOrderedAndCountTheBytes() throws {
        let (down, s, _) = try run("/bytes?n=5000", body: false)
        #expect(down.outcome == RQ_OUTCOME_OK)
        let m = try #require(s.metrics)
        #expect(m.size == MemoryLayout<rq_metrics>.size)
        #expect(m.bytes_down == 5000 && m.bytes_up == 0 && m.attempts == 1)
        #expect(m.queued >= 0 && m.dns >= 0)
        #expect(m.dns <= m.connect && m.connect <= m.first_byte && m.first_byte <= m.total)
        #expect(m.tls == -1)
        #expect(m.connection_reused == 0)
        let body = [UInt8](repeating: 1, count: 100_000)
        let (up, u, _) = try run("/upload", body: false) { r in
            _ = rq_request_set_method(r, "PUT")
            _ = body.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) }
        }
        #expect(up.outcome == RQ_OUTCOME_OK)
        #expect(u.metrics?.bytes_up == 100_000)
        #expect(u.metrics?.bytes_down == UInt64(up.body.count))
    }

    @Test func metricsShowTheQueueWaitAndTheReusedConnection() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/delay?s=0.3&group=\(g)&id=slow"), tag: "slow", body: false))
        _ = addAndRelease(q, try rec.streamingRequest(fixture.url("/bytes?n=10&group=\(g)&id=next"), tag: "next", body: false))
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        let slow = try #require(rec.streams.stream("slow").metrics)
        let next = try #require(rec.streams.stream("next").metrics)
        let log = fixture.log(group: g)
        #expect(log.entries.map(\.id) == ["slow", "next"])
        // It waited for the whole slow request, which the server held for 0.3 s.
        #expect(next.queued >= 0.3)
        #expect(slow.queued < next.queued)
        #expect(slow.total >= 0.3)
        // The same connection served both, as the server saw it.
        let connections = Fixture.connections(fixture.get("/_/log"), group: g)
        #expect(connections.count == 2 && connections[0] == connections[1])
        #expect(slow.connection_reused == 0 && next.connection_reused == 1)
        #expect(next.dns <= next.connect && next.connect <= next.first_byte && next.first_byte <= next.total)
    }

    @Test func metricsOverTLSIncludeTheHandshake() throws {
        let tls = try #require(TLSFixture.shared, "cannot start the HTTPS fixture (openssl and python3 needed)")
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for tag in ["first", "second"] {
            _ = addAndRelease(q, try rec.streamingRequest(tls.url("/bytes?n=1000&id=\(tag)"), tag: tag, body: false) { r in
                _ = rq_request_set_ca_file(r, tls.certificate)
            })
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completions.map(\.outcome) == [RQ_OUTCOME_OK, RQ_OUTCOME_OK])
        let first = try #require(rec.streams.stream("first").metrics)
        let second = try #require(rec.streams.stream("second").metrics)
        #expect(first.connection_reused == 0 && second.connection_reused == 1)
        for m in [first, second] {
            #expect(m.tls >= 0)
            #expect(m.dns <= m.connect && m.connect <= m.tls && m.tls <= m.first_byte && m.first_byte <= m.total)
            #expect(m.bytes_down == 1000)
        }
        // Only the new connection had a handshake to make.
        #expect(first.tls > first.connect)
    }

    @Test func metricsSizeAndArguments() throws {
        let rec = Recorder()
        let results = Locked<[String: rq_result]>([:])
        let partial = Locked<rq_metrics?>(nil)
        rec.streams.onResponse = { _, response in
            var m = rq_metrics()
            m.size = 0
            results.mutate { $0["zero"] = rq_response_metrics(response, &m) }
            results.mutate { $0["null out"] = rq_response_metrics(response, nil) }
            // A caller that knows only the first field: the rest is left alone.
            m = rq_metrics()
            m.size = MemoryLayout<Int>.size + MemoryLayout<Double>.size
            m.dns = 42
            m.attempts = 42
            results.mutate { $0["small"] = rq_response_metrics(response, &m) }
            partial.mutate { $0 = m }
        }
        let (c, s, _) = try run("/bytes?n=10", body: false, recorder: rec)
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(results.value == ["zero": RQ_ERR_INVALID_ARGUMENT, "null out": RQ_ERR_NULL_ARGUMENT, "small": RQ_OK])
        let m = try #require(partial.value)
        #expect(m.size == 16 && m.queued >= 0 && m.dns == 42 && m.attempts == 42)
        #expect(s.metricsResult == RQ_OK)
        var out = rq_metrics()
        out.size = MemoryLayout<rq_metrics>.size
        #expect(rq_response_metrics(nil, &out) == RQ_ERR_NULL_ARGUMENT)
    }

    @Test func aRequestCancelledBeforeItStartedHasNoFigures() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_suspend(q)
        let rec = Recorder()
        let r = try rec.streamingRequest(fixture.url("/bytes?n=10"), tag: "never", body: false)
        _ = rq_add(q, r)
        #expect(rq_cancel(r) == RQ_OK)
        _ = rq_request_free(r)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        let m = try #require(rec.streams.stream("never").metrics)
        #expect(m.attempts == 0)
        #expect([m.queued, m.dns, m.connect, m.tls, m.first_byte, m.total].allSatisfy { $0 == -1 })
        #expect(m.bytes_down == 0 && m.bytes_up == 0 && m.connection_reused == 0)
    }

    // MARK: Bad input

    @Test func badStreamingInput() throws {
        let onData: rq_data_fn = { _, _, _, _, _ in 0 }
        #expect(rq_request_set_body_callback(nil, onData) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_body_callback(BadInputTests.garbage, onData) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_request_set_output_file(nil, "/tmp/x", 0) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_output_file(BadInputTests.garbage, "/tmp/x", 0) == RQ_ERR_INVALID_HANDLE)
        var r: OpaquePointer?
        try #require(rq_request_new(fixture.url("/bytes?n=1"), &r) == RQ_OK)
        #expect(rq_request_set_output_file(r, "", 0) == RQ_ERR_INVALID_ARGUMENT)
        #expect(rq_request_set_body_callback(r, onData) == RQ_OK)
        #expect(rq_request_set_output_file(r, "/tmp/x", 0) == RQ_ERR_INVALID_STATE)
        #expect(rq_request_set_body_callback(r, nil) == RQ_OK)
        #expect(rq_request_set_output_file(r, "/tmp/x", 1) == RQ_OK)
        #expect(rq_request_set_body_callback(r, onData) == RQ_ERR_INVALID_STATE)
        #expect(rq_request_set_output_file(r, nil, 0) == RQ_OK)
        #expect(rq_request_set_body_callback(r, onData) == RQ_OK)
        // A queue's request can no longer be changed.
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_suspend(q)
        #expect(rq_add(q, r) == RQ_OK)
        #expect(rq_request_set_body_callback(r, nil) == RQ_ERR_REQUEST_FROZEN)
        #expect(rq_request_set_output_file(r, "/tmp/x", 0) == RQ_ERR_REQUEST_FROZEN)
        #expect(rq_request_free(r) == RQ_OK)
    }
}

extension Fixture {
    /// The server's connection numbers of one group's requests, in the order they arrived.
    static func connections(_ log: Data, group: String) -> [Int] {
        guard let json = try? JSONSerialization.jsonObject(with: log) as? [String: Any] else { return [] }
        let requests = json["requests"] as? [[String: Any]] ?? []
        return requests.filter { ($0["group"] as? String) == group }.compactMap { $0["conn"] as? Int }
    }
}

/// A second fixture server speaking HTTPS, with a self-signed certificate for 127.0.0.1 made with
/// the openssl command (nil when it cannot start).
final class TLSFixture: Sendable {
    static let shared: TLSFixture? = TLSFixture()

    let port: Int
    /// The served certificate, usable as a CA file.
    let certificate: String
    private let process = Process()
    private let stdinPipe = Pipe()

    private init?() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rq-tls-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        certificate = folder.appendingPathComponent("cert.pem").path
        let key = folder.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", key,
                             "-out", certificate, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        guard (try? openssl.run()) != nil else { return nil }
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { return nil }
        let out = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root.appendingPathComponent("Tests/Fixtures/fixture_server.py").path,
                             "--exit-on-stdin-eof", "--parent-pid", "\(getpid())", "--tls-cert", certificate, "--tls-key", key]
        process.standardOutput = out
        process.standardInput = stdinPipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else { return nil }
        self.port = port
    }

    func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }
}
