import CRequestQueueAPI
import Foundation
import RequestQueue
import Testing

/// One request: what is sent, what comes back, outcomes, progress, authentication and retry.
@Suite struct RequestTests {
    let fixture = Fixture.shared

    /// Runs one request on a fresh queue and returns its completion.
    func run(_ path: String, progress: Bool = false, configure: (OpaquePointer?) -> Void = { _ in }) throws -> (Completion, Recorder) {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        #expect(addAndRelease(q, try rec.request(fixture.url(path), tag: "r", progress: progress, configure: configure)) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        return (try #require(rec.completion("r")), rec)
    }

    @Test func successDeliversStatusHeadersBodyAndURL() throws {
        let (c, rec) = try run("/bytes?n=5000&header=X-Extra:yes")
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(c.status == 200)
        #expect(c.body == Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8.cycled(to: 5000)))
        #expect(c.headers.contains { $0.0.lowercased() == "x-extra" && $0.1 == "yes" })
        #expect(c.headers.contains { $0.0.lowercased() == "content-length" && $0.1 == "5000" })
        #expect(c.url == fixture.url("/bytes?n=5000&header=X-Extra:yes"))
        #expect(c.message == "")
        #expect(c.attempts == 1)
        #expect(rec.finalizedTags == ["r"])
    }

    @Test func httpErrorStatusIsItsOwnOutcomeWithBodyAndHeaders() throws {
        let (c, _) = try run("/status/404")
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS)
        #expect(c.status == 404)
        #expect(String(decoding: c.body, as: UTF8.self) == "status 404")
        #expect(c.headers.contains { $0.0 == "X-Status" && $0.1 == "404" })
        #expect(c.message == "The server returned a 404 error")
        let (server, _) = try run("/status/503")
        #expect(server.outcome == RQ_OUTCOME_HTTP_STATUS && server.status == 503)
        let (ok, _) = try run("/status/204")
        #expect(ok.outcome == RQ_OUTCOME_OK && ok.status == 204 && ok.body.isEmpty)
    }

    @Test func redirectsAreFollowedAndTheEffectiveURLReported() throws {
        let (c, _) = try run("/redirect/3")
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(c.url == fixture.url("/redirect/0"))
        #expect(String(decoding: c.body, as: UTF8.self) == "redirected")
        let (tooMany, _) = try run("/redirect/12")
        #expect(tooMany.outcome == RQ_OUTCOME_TOO_MANY_REDIRECTS)
        let (bad, _) = try run("/redirect-to?url=ftp://127.0.0.1/file")
        #expect(bad.outcome == RQ_OUTCOME_BAD_REDIRECT)
    }

    /// A pooled handle keeps the URL it was given: the next attempt on the same URL starts from
    /// it, not from where a redirect of the previous one led (the server sees the same path first).
    @Test func theSameURLAfterARedirectStartsOver() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let urls = ["/redirect/1?group=\(g)", "/redirect/1?group=\(g)", "/status/200?group=\(g)", "/redirect/1?group=\(g)"]
        for (i, path) in urls.enumerated() {
            #expect(addAndRelease(q, try rec.request(fixture.url(path), tag: "\(i)")) == RQ_OK)
            #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
            let c = try #require(rec.completion("\(i)"))
            #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200, "\(i): \(c.message)")
            #expect(c.url == fixture.url(i == 2 ? path : "/redirect/0?group=\(g)"), "\(i): \(c.url)")
        }
        let paths = fixture.log(group: g).entries.sorted { $0.seq < $1.seq }.map { String($0.path.prefix { $0 != "?" }) }
        #expect(paths == ["/redirect/1", "/redirect/0", "/redirect/1", "/redirect/0", "/status/200", "/redirect/1", "/redirect/0"])
    }

    /// The response's URL is libcurl's effective one, which a pooled handle does not ask for again
    /// for an attempt on the URL it was found equal to, unless the attempt may have been redirected:
    /// the same URL answered first without a redirect, then with one that is followed, then with one
    /// whose target refuses the connection (libcurl's effective URL is the target in both); and a
    /// URL that libcurl normalizes, reported as libcurl reports it each time.
    @Test func theEffectiveURLOfEachAttemptOnAPooledHandle() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let target = fixture.url("/status/201?group=\(g)")
        let refused = "http://127.0.0.1:1/refused"
        func run(_ path: String, _ tag: String) throws -> Completion {
            #expect(addAndRelease(q, try rec.request(fixture.url(path), tag: tag)) == RQ_OK)
            #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
            return try #require(rec.completion(tag))
        }
        let later = "/redirect-after?group=\(g)&key=\(g)&n=2&url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        for i in 0..<2 {
            let c = try run(later, "plain\(i)")
            #expect(c.status == 200 && c.url == fixture.url(later), "\(i): \(c.url)")
        }
        let followed = try run(later, "followed")
        #expect(followed.status == 201 && followed.url == target, "\(followed.url)")
        let failing = "/redirect-after?group=\(g)&key=\(g)-refused&n=1&url=" + refused.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let first = try run(failing, "refused0")
        #expect(first.status == 200 && first.url == fixture.url(failing), "\(first.url)")
        let second = try run(failing, "refused1")
        #expect(second.outcome == RQ_OUTCOME_CANNOT_CONNECT && second.url == refused, "\(second.outcome) \(second.url)")
        // libcurl takes the dot segments out of a path.
        for i in 0..<2 {
            let c = try run("/x/../status/200?group=\(g)", "dots\(i)")
            #expect(c.status == 200 && c.url == fixture.url("/status/200?group=\(g)"), "\(i): \(c.url)")
        }
    }

    /// A response keeps its body and its header lines in one block (the lines after the body, in
    /// the room reserved with the body's announced length, or in the block grown): bodies of every
    /// size, announced or chunked, empty or absent, with header lines few or longer than the body,
    /// all come back whole.
    @Test func bodyAndHeaderLinesOfEverySizeComeBackWhole() throws {
        let q = try makeQueue(max: 4)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let long = (0..<40).map { "header=X-Long-\($0):" + String(repeating: "v", count: 90) }.joined(separator: "&")
        var cases: [(path: String, n: Int, lines: Int)] = []
        for n in [0, 1, 100, 5000, 70_000, 300_000] {
            for chunked in [false, true] {
                for extra in [0, 40] {
                    cases.append(("/bytes?n=\(n)&chunked=\(chunked ? 1 : 0)" + (extra > 0 ? "&" + long : ""), n, extra))
                }
            }
        }
        cases.append(("/status/204?" + long, 0, 40))
        for (i, c) in cases.enumerated() {
            #expect(addAndRelease(q, try rec.request(fixture.url(c.path), tag: "\(i)")) == RQ_OK)
        }
        #expect(rq_queue_wait_idle(q, 60) == RQ_OK)
        for (i, c) in cases.enumerated() {
            let done = try #require(rec.completion("\(i)"))
            #expect(done.outcome == RQ_OUTCOME_OK, "\(c.path.prefix(40)): \(done.message)")
            #expect(done.body == Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8.cycled(to: c.n)), "\(c.path.prefix(40))")
            let longs = done.headers.filter { $0.0.hasPrefix("X-Long-") }
            #expect(longs.count == c.lines && longs.allSatisfy { $0.1 == String(repeating: "v", count: 90) }, "\(c.path.prefix(40))")
            #expect(done.headers.contains { $0.0 == "Date" }, "\(c.path.prefix(40))")
        }
    }

    /// One transfer handle serves the requests one after another (max 1): each runs with its own
    /// settings, not those of the request before it (default, own, default again).
    @Test func aPooledHandleTakesEachRequestsOwnSettings() throws {
        let g = uniqueGroup()
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        for i in 0..<3 {
            #expect(addAndRelease(q, try rec.request(fixture.url("/redirect/1?group=\(g)"), tag: "\(i)") { r in
                if i == 1 { _ = rq_request_set_max_redirects(r, 0) }
            }) == RQ_OK)
            #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        }
        #expect(rec.completion("0")?.status == 200 && rec.completion("2")?.status == 200)
        #expect(rec.completion("1")?.status != 200)
        let paths = fixture.log(group: g).entries.sorted { $0.seq < $1.seq }.map { String($0.path.prefix { $0 != "?" }) }
        #expect(paths == ["/redirect/1", "/redirect/0", "/redirect/1", "/redirect/1", "/redirect/0"])
    }

    @Test func transportFailuresMapToStableOutcomes() throws {
        let (reset, _) = try run("/reset")
        #expect(reset.outcome == RQ_OUTCOME_CONNECTION_LOST)
        #expect(!reset.message.isEmpty)
        let (truncated, _) = try run("/truncated?n=1000")
        #expect(truncated.outcome == RQ_OUTCOME_CONNECTION_LOST)
        let (timeout, _) = try run("/stall?s=10") { r in _ = rq_request_set_timeout(r, 0.5) }
        #expect(timeout.outcome == RQ_OUTCOME_TIMEOUT)
        // The server goes silent after half the body and closes at 4 s: only a real idle check times out first.
        let (idle, _) = try run("/stall-body?s=4&n=1000") { r in _ = rq_request_set_idle_timeout(r, 1) }
        #expect(idle.outcome == RQ_OUTCOME_TIMEOUT)
        // The status line had come before the library's own idle limit ended the attempt.
        #expect(idle.httpVersion == 11)
        let port = fixture.refusingPort(for: 60)
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request("http://127.0.0.1:\(port)/bytes?n=1", tag: "refused"))
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completion("refused")?.outcome == RQ_OUTCOME_CANNOT_CONNECT)
        #expect(rec.completion("refused")?.httpVersion == 0)
    }

    @Test func methodHeadersAndBodyAreSentAsGiven() throws {
        let body: [UInt8] = [0, 1, 2, 255, 10, 13] + Array("payload".utf8)
        let (c, _) = try run("/echo") { r in
            _ = rq_request_set_method(r, "PATCH")
            _ = rq_request_set_header(r, "X-One", "1")
            _ = rq_request_set_header(r, "X-Two", "two")
            _ = rq_request_set_header(r, "x-one", "uno")
            _ = rq_request_set_header(r, "X-Two", nil)
            _ = rq_request_set_header(r, "Content-Type", "application/x-test")
            _ = body.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) }
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(c.body)) as? [String: Any])
        #expect(json["method"] as? String == "PATCH")
        let headers = json["headers"] as? [String: String] ?? [:]
        #expect(headers["x-one"] == "uno")
        #expect(headers["x-two"] == nil)
        #expect(headers["content-type"] == "application/x-test")
        #expect(json["body_len"] as? Int == body.count)
        #expect((json["body"] as? String).map { Array($0.unicodeScalars.map { UInt8($0.value) }) } == body)
    }

    /// A borrowed body (rq_request_set_body_borrowed) is read in place when it is sent, not
    /// copied when it is set: a byte the caller changes after the call is sent changed. Over 1 MiB
    /// (after the server's 100 Continue), and again after a 307.
    @Test func aBorrowedBodyIsSentFromTheCallersMemory() throws {
        let size = 1_500_000
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
        defer { buffer.deallocate() }
        for path in ["/echo", "/redirect-to?url=/echo&status=307"] {
            for i in 0..<size { buffer[i] = UInt8(truncatingIfNeeded: i &* 7) }
            let (c, _) = try run(path) { r in
                _ = rq_request_set_method(r, "PUT")
                #expect(rq_request_set_body_borrowed(r, buffer.baseAddress, size) == RQ_OK)
                buffer[0] = UInt8(ascii: "B")
            }
            let json = try #require(try JSONSerialization.jsonObject(with: Data(c.body)) as? [String: Any], "\(path)")
            #expect(json["method"] as? String == "PUT", "\(path)")
            #expect(json["body_len"] as? Int == size, "\(path)")
            let sent = (json["body"] as? String).map { Array($0.unicodeScalars.map { UInt8($0.value) }) }
            #expect(sent == Array(buffer), "\(path)")
            #expect(sent?.first == UInt8(ascii: "B"), "\(path)")
        }
        // An empty borrowed body: Content-Length 0, as with rq_request_set_body.
        let (empty, _) = try run("/echo") { r in
            _ = rq_request_set_method(r, "POST")
            #expect(rq_request_set_body_borrowed(r, nil, 0) == RQ_OK)
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(empty.body)) as? [String: Any])
        #expect(json["body_len"] as? Int == 0 && (json["headers"] as? [String: String])?["content-length"] == "0")
    }

    /// A body set again replaces the one before, copied or borrowed, of any size (each kind is
    /// kept in its own way: the request frees only what it copied).
    @Test func theLastBodySetIsTheOneSent() throws {
        let lent: [UInt8] = Array("lent".utf8)
        let large = [UInt8](repeating: 0x61, count: 100_000)   // above MemoryReserve.largeBuffer
        let cases: [(name: String, expected: [UInt8], set: (OpaquePointer?) -> Void)] = [
            ("copied, then borrowed", lent, { r in
                _ = rq_request_set_body(r, "first", 5)
                _ = lent.withUnsafeBytes { rq_request_set_body_borrowed(r, $0.baseAddress, $0.count) }
            }),
            ("borrowed, then copied", Array("second".utf8), { r in
                _ = lent.withUnsafeBytes { rq_request_set_body_borrowed(r, $0.baseAddress, $0.count) }
                _ = rq_request_set_body(r, "second", 6)
            }),
            ("large, then small", Array("small".utf8), { r in
                _ = large.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) }
                _ = rq_request_set_body(r, "small", 5)
            }),
            ("small, then large", large, { r in
                _ = rq_request_set_body(r, "small", 5)
                _ = large.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) }
            }),
            ("copied, then empty", [], { r in
                _ = rq_request_set_body(r, "gone", 4)
                _ = rq_request_set_body(r, nil, 0)
            }),
        ]
        for c in cases {
            // (The borrowed bytes outlive the request: `lent` is alive until the test returns.)
            let (done, _) = try run("/echo") { r in
                _ = rq_request_set_method(r, "POST")
                c.set(r)
            }
            let json = try #require(try JSONSerialization.jsonObject(with: Data(done.body)) as? [String: Any], "\(c.name)")
            #expect(json["body_len"] as? Int == c.expected.count, "\(c.name)")
            let sent = (json["body"] as? String).map { Array($0.unicodeScalars.map { UInt8($0.value) }) }
            #expect(sent == c.expected, "\(c.name)")
        }
    }

    /// One handle, one request after the other: a request whose header lines make the same list
    /// as the one before reuses it (Transfer.OwnHeaderList); any difference (a value, a name's
    /// case, a removal, one line more, none of its own) gets its own lines.
    @Test func equalHeaderLinesAreSentAgainAndDifferentOnesAreNot() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let steps: [(tag: String, lines: [(String, String?)])] = [
            ("a1", [("Content-Type", "application/json")]),
            ("a2", [("Content-Type", "application/json")]),
            ("b", [("Content-Type", "text/plain")]),
            ("case", [("content-type", "text/plain")]),
            ("more", [("content-type", "text/plain"), ("X-More", "1")]),
            ("removed", [("content-type", "text/plain"), ("Accept", nil)]),
            ("none", []),
            ("a3", [("Content-Type", "application/json")]),
        ]
        for step in steps {
            let url = fixture.url("/inspect?step=\(step.tag)")
            #expect(addAndRelease(q, try rec.request(url, tag: step.tag) { r in
                _ = rq_request_set_method(r, "POST")
                for (name, value) in step.lines { _ = rq_request_set_header(r, name, value) }
                _ = rq_request_set_body(r, "{}", 2)
            }) == RQ_OK)
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        for step in steps {
            let c = try #require(rec.completion(step.tag))
            let json = try #require(try JSONSerialization.jsonObject(with: Data(c.body)) as? [String: Any], "\(step.tag)")
            let sent = (json["headers"] as? [[String]] ?? []).map { ($0.first ?? "", $0.last ?? "") }
            let expected = step.lines.compactMap { line in line.1.map { (line.0, $0) } }
            for (name, value) in expected {
                #expect(sent.filter { $0.0.lowercased() == name.lowercased() }.map(\.1) == [value], "\(step.tag) \(name)")
                #expect(sent.contains { $0.0 == name }, "\(step.tag): \(name) sent as given")
            }
            #expect(sent.contains { $0.0.lowercased() == "x-more" } == (step.tag == "more"), "\(step.tag)")
            #expect(sent.contains { $0.0.lowercased() == "accept" } == (step.tag != "removed"), "\(step.tag)")
            #expect(sent.contains { $0.0.lowercased() == "content-type" } == (step.tag != "none"), "\(step.tag)")
        }
    }

    /// A request with header lines of its own sends the default User-Agent and Accept-Encoding
    /// lines once each, before its own (libcurl is given them as one entry, as for a request
    /// without lines of its own), and its own lines as given, in their order; a removed default
    /// or the caller's own value replaces the default line.
    @Test func theDefaultLinesComeOnceBeforeTheRequestsOwn() throws {
        let cases: [(tag: String, lines: [(String, String?)])] = [
            ("post", [("Content-Type", "application/json"), ("X-Trace", "7")]),
            ("own agent", [("X-Trace", "7"), ("User-Agent", "mine/1")]),
            ("own encoding", [("Accept-Encoding", "gzip"), ("X-Trace", "7")]),
            ("no agent", [("User-Agent", nil), ("X-Trace", "7")]),
        ]
        for c in cases {
            let (done, _) = try run("/inspect") { r in
                _ = rq_request_set_method(r, "POST")
                for (name, value) in c.lines { _ = rq_request_set_header(r, name, value) }
                _ = rq_request_set_body(r, "{}", 2)
            }
            let json = try #require(try JSONSerialization.jsonObject(with: Data(done.body)) as? [String: Any], "\(c.tag)")
            let sent = (json["headers"] as? [[String]] ?? []).map { ($0.first ?? "", $0.last ?? "") }
            func lines(_ name: String) -> [String] { sent.filter { $0.0.lowercased() == name }.map(\.1) }
            func place(_ name: String) -> Int { sent.firstIndex { $0.0.lowercased() == name } ?? -1 }
            let own = c.lines.compactMap { line in line.1.map { (line.0, $0) } }
            for (name, value) in own { #expect(lines(name.lowercased()) == [value], "\(c.tag) \(name)") }
            // The caller's lines in their order, after the default lines.
            let places = own.map { place($0.0.lowercased()) }
            #expect(places == places.sorted() && !places.contains(-1), "\(c.tag): \(sent)")
            let agent = lines("user-agent"), encoding = lines("accept-encoding")
            switch c.tag {
            case "own agent":
                #expect(agent == ["mine/1"] && encoding.count == 1 && encoding[0].contains("gzip"), "\(sent)")
                #expect(place("accept-encoding") < places.min() ?? 0, "\(sent)")
            case "own encoding":
                #expect(encoding == ["gzip"] && agent.count == 1 && agent[0].hasPrefix("librequestqueue/"), "\(sent)")
                #expect(place("user-agent") < places.min() ?? 0, "\(sent)")
            case "no agent":
                #expect(agent.isEmpty && encoding.count == 1 && place("accept-encoding") < places.min() ?? 0, "\(sent)")
            default:
                #expect(agent.count == 1 && agent[0].hasPrefix("librequestqueue/") && encoding.count == 1
                        && encoding[0].contains("gzip") && encoding[0].contains("deflate"), "\(sent)")
                #expect(place("user-agent") < place("accept-encoding") && place("accept-encoding") < places.min() ?? 0, "\(sent)")
            }
        }
    }

    @Test func aBodyGetsNoContentTypeUnlessGivenAndHeadHasNoBody() throws {
        let (c, _) = try run("/echo") { r in
            _ = rq_request_set_method(r, "POST")
            _ = rq_request_set_body(r, "a=b", 3)
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(c.body)) as? [String: Any])
        #expect((json["headers"] as? [String: String])?["content-type"] == nil)
        #expect(json["body"] as? String == "a=b")
        let (head, _) = try run("/bytes?n=100") { r in _ = rq_request_set_method(r, "HEAD") }
        #expect(head.outcome == RQ_OUTCOME_OK && head.body.isEmpty)
        #expect(head.headers.contains { $0.0.lowercased() == "content-length" && $0.1 == "100" })
    }

    /// One request at a time on one queue: every request reuses the easy handle of the one
    /// before, which must carry nothing over (method, headers, body, credentials, HEAD's no-body).
    @Test func aRequestCarriesNothingOverFromTheOneBeforeIt() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let steps: [(tag: String, path: String, configure: (OpaquePointer?) -> Void)] = [
            ("patch", "/echo", { r in
                _ = rq_request_set_method(r, "PATCH")
                _ = rq_request_set_header(r, "X-One", "1")
                _ = rq_request_set_credentials(r, "ann", "secret")
                _ = rq_request_set_body(r, "abc", 3)
            }),
            ("get1", "/echo", { _ in }),
            ("head", "/bytes?n=100", { r in _ = rq_request_set_method(r, "HEAD") }),
            ("get2", "/echo", { _ in }),
            ("post", "/echo", { r in
                _ = rq_request_set_method(r, "POST")
                _ = rq_request_set_header(r, "X-Two", "2")
                _ = rq_request_set_body(r, "a=b", 3)
            }),
            ("get3", "/echo", { _ in }),
        ]
        for step in steps {
            // Distinct URLs: equal requests would replace each other as duplicates.
            let url = fixture.url(step.path + (step.path.contains("?") ? "&" : "?") + "step=\(step.tag)")
            #expect(addAndRelease(q, try rec.request(url, tag: step.tag, configure: step.configure)) == RQ_OK)
        }
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        func echo(_ tag: String) throws -> (method: String, headers: [String: String], body: String) {
            let c = try #require(rec.completion(tag))
            let json = try #require(try? JSONSerialization.jsonObject(with: Data(c.body)) as? [String: Any],
                                    "\(tag): \(c.status) \(c.message) \(String(decoding: c.body, as: UTF8.self))")
            return (json["method"] as? String ?? "", json["headers"] as? [String: String] ?? [:], json["body"] as? String ?? "")
        }
        let patch = try echo("patch")
        #expect(patch.method == "PATCH" && patch.headers["x-one"] == "1" && patch.body == "abc")
        #expect(patch.headers["authorization"] != nil)
        for tag in ["get1", "get2", "get3"] {
            let get = try echo(tag)
            #expect(get.method == "GET", "\(tag)")
            #expect(get.body == "", "\(tag)")
            #expect(get.headers["x-one"] == nil && get.headers["x-two"] == nil, "\(tag)")
            #expect(get.headers["authorization"] == nil && get.headers["content-type"] == nil, "\(tag)")
            #expect(get.headers["content-length"] == nil, "\(tag)")
        }
        let head = try #require(rec.completion("head"))
        #expect(head.status == 200 && head.body.isEmpty)
        let post = try echo("post")
        #expect(post.method == "POST" && post.headers["x-two"] == "2" && post.body == "a=b")
        #expect(post.headers["x-one"] == nil && post.headers["authorization"] == nil)
    }

    /// A request cancelled in the middle of its body leaves nothing behind for the next request
    /// on the same easy handle (one request at a time on one queue).
    @Test func aCancelledBodyDoesNotLeakIntoTheNextRequest() throws {
        let q = try makeQueue(max: 1)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let g = uniqueGroup()
        let stalled = try rec.request(fixture.url("/stall-body?n=2000&s=10&group=\(g)"), tag: "stalled", progress: true)
        #expect(rq_add(q, stalled) == RQ_OK)
        let deadline = Date().addingTimeInterval(10)
        while !rec.progress.contains(where: { $0.tag == "stalled" && $0.done >= 1000 }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(rq_cancel(stalled) == RQ_OK)
        _ = rq_request_free(stalled)
        #expect(addAndRelease(q, try rec.request(fixture.url("/bytes?n=100&group=\(g)"), tag: "next")) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rec.completion("stalled")?.outcome == RQ_OUTCOME_CANCELLED)
        let next = try #require(rec.completion("next"))
        #expect(next.status == 200)
        #expect(next.body == Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8.cycled(to: 100)))
    }

    /// rq_response_retain: the response, its strings and its body stay valid after the callback
    /// returned and the queue was freed, read from two threads at once, until rq_response_release.
    @Test func aRetainedResponseOutlivesItsCallbackAndItsQueue() throws {
        let kept = Locked(Handle(nil))
        let q = try makeQueue()
        var r: OpaquePointer?
        try #require(rq_request_new(fixture.url("/bytes?n=300&header=X-Kept:yes"), &r) == RQ_OK)
        #expect(rq_request_set_completion(r, { context, _, response in
            let kept = Unmanaged<Locked<Handle>>.fromOpaque(context!).takeUnretainedValue()
            kept.mutate { $0 = Handle(rq_response_retain(response)) }
        }, Unmanaged.passRetained(kept).toOpaque(), { context in Unmanaged<Locked<Handle>>.fromOpaque(context!).release() }) == RQ_OK)
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        #expect(rq_queue_free(q) == RQ_OK)
        let retained = kept.value
        try #require(retained.pointer != nil)
        let url = fixture.url("/bytes?n=300&header=X-Kept:yes")
        let reads = DispatchQueue(label: "reads", attributes: .concurrent)
        let group = DispatchGroup()
        let seen = Locked<[String]>([])
        for _ in 0..<2 {
            reads.async(group: group) {
                let response = retained.pointer
                var size = 0
                let body = rq_response_body(response, &size)
                var m = rq_metrics()
                m.size = MemoryLayout<rq_metrics>.size
                let line = [
                    "\(rq_response_status(response)) \(size) \(body.map { $0[299] } ?? 0)",
                    rq_response_header(response, "x-kept").map { String(cString: $0) } ?? "-",
                    "\(rq_response_header_count(response) > 2)",
                    String(cString: rq_response_url(response)),
                    String(cString: rq_response_error_message(response)),
                    "\(rq_response_metrics(response, &m) == RQ_OK && m.bytes_down == 300)",
                ].joined(separator: "|")
                seen.mutate { $0.append(line) }
            }
        }
        group.wait()
        let expected = "200 300 \(Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)[299 % 36])|yes|true|\(url)||true"
        #expect(seen.value == [expected, expected])
        #expect(rq_response_retain(nil) == nil)
        rq_response_release(nil)
        rq_response_release(retained.pointer)
    }

    @Test func downloadProgressIsMonotonicAndEndsWithAFinalCall() throws {
        let n = 200_000
        let (c, rec) = try run("/bytes?n=\(n)&rate=800000", progress: true)
        #expect(c.outcome == RQ_OUTCOME_OK)
        let calls = rec.progress.filter { !$0.upload }
        #expect(calls.count >= 3)
        #expect(zip(calls, calls.dropFirst()).allSatisfy { $0.done <= $1.done && $0.progress <= $1.progress })
        #expect(calls.allSatisfy { $0.progress >= 0 && $0.progress <= 1 && $0.total == Int64(n) })
        let last = try #require(calls.last)
        #expect(last.progress == 1.0 && last.done == Int64(n) && last.total == Int64(n))
        #expect(rec.progress.filter(\.upload).isEmpty)
    }

    @Test func unknownLengthIsIndeterminateUntilTheFinalCall() throws {
        let n = 100_000
        let (c, rec) = try run("/bytes?n=\(n)&chunked=1&chunk=10000&rate=400000", progress: true)
        #expect(c.outcome == RQ_OUTCOME_OK && c.body.count == n)
        let calls = rec.progress.filter { !$0.upload }
        let during = calls.dropLast()
        #expect(!during.isEmpty)
        #expect(during.allSatisfy { $0.total == -1 && $0.progress == RQ_PROGRESS_INDETERMINATE })
        let last = try #require(calls.last)
        #expect(last.progress == 1.0 && last.done == Int64(n) && last.total == Int64(n))
    }

    @Test func uploadProgressReachesTheBodySize() throws {
        let size = 3_000_000
        let body = [UInt8](repeating: 7, count: size)
        let (c, rec) = try run("/upload", progress: true) { r in
            _ = rq_request_set_method(r, "PUT")
            _ = body.withUnsafeBytes { rq_request_set_body(r, $0.baseAddress, $0.count) }
        }
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(String(decoding: c.body, as: UTF8.self).contains("\(size)"))
        let calls = rec.progress.filter(\.upload)
        #expect(zip(calls, calls.dropFirst()).allSatisfy { $0.done <= $1.done })
        #expect(calls.allSatisfy { $0.total == Int64(size) && (0...1).contains($0.progress) })
        let last = try #require(calls.last)
        #expect(last.done == Int64(size) && last.progress == 1.0)
    }

    @Test func progressAfterAFailureReportsWhatArrived() throws {
        let (c, rec) = try run("/truncated?n=10000", progress: true)
        #expect(c.outcome == RQ_OUTCOME_CONNECTION_LOST)
        let last = try #require(rec.progress.filter { !$0.upload }.last)
        #expect(last.done == 5000 && last.total == 10000 && last.progress == 0.5)
    }

    // MARK: Authentication

    @Test func withoutHandlerA401IsAnHTTPStatusError() throws {
        let (c, _) = try run("/basic-auth/user/pass")
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS)
        #expect(c.status == 401)
        #expect(String(decoding: c.body, as: UTF8.self) == "unauthorized")
    }

    @Test func challengeAnsweredLaterFromAnotherThread() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request(fixture.url("/basic-auth/user/pass"), tag: "a", auth: true))
        #expect(rec.waitForChallenges(1))
        let first = try #require(rec.challengeList.first)
        #expect(first.failures == 0 && first.status == 401)
        // The handler returned without answering; the request still holds its slot.
        #expect(count(q) == 1)
        let answered = Locked<rq_result>(RQ_ERR_INTERNAL_TEST)
        let challenge = Handle(first.challenge)
        let thread = Thread { answered.mutate { $0 = rq_auth_use_credential(challenge.pointer, "user", "wrong") } }
        thread.start()
        #expect(rec.waitForChallenges(2))
        #expect(answered.value == RQ_OK)
        let second = rec.challengeList[1]
        #expect(second.failures == 1)
        #expect(rq_auth_use_credential(first.challenge, "user", "pass") == RQ_ERR_INVALID_HANDLE)
        #expect(rq_auth_use_credential(second.challenge, "user", "pass") == RQ_OK)
        #expect(rq_auth_cancel(second.challenge) == RQ_ERR_INVALID_HANDLE)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        let c = try #require(rec.completion("a"))
        #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200)
        #expect(String(decoding: c.body, as: UTF8.self).contains("\"user\": \"user\"") || String(decoding: c.body, as: UTF8.self).contains("\"user\":\"user\""))
    }

    @Test func challengeContinueWithoutDeliversThe401() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.onChallenge = { _, challenge, _ in _ = rq_auth_continue_without(challenge) }
        _ = addAndRelease(q, try rec.request(fixture.url("/basic-auth/u/p"), tag: "a", auth: true))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("a")?.outcome == RQ_OUTCOME_HTTP_STATUS)
        #expect(rec.completion("a")?.status == 401)
    }

    /// A password answers Basic or Digest only: not NTLM (whose helper libcurl may run, NTLM_WB).
    /// (Negotiate, which would send the host's Kerberos tickets, is left out by the same setting;
    /// without tickets on the machine libcurl sends none whatever the setting, so no case here.)
    @Test(arguments: ["NTLM"])
    func aPasswordIsNotSentWithOtherSchemes(scheme: String) throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.onChallenge = { _, challenge, failures in
            _ = failures == 0 ? rq_auth_use_credential(challenge, "user", "secret") : rq_auth_continue_without(challenge)
        }
        _ = addAndRelease(q, try rec.request(fixture.url("/challenge/\(scheme)?group=\(g)"), tag: "a", auth: true))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("a")?.status == 401)
        let sent = fixture.log(group: g).entries.compactMap { $0.headers["authorization"] }
        #expect(sent.allSatisfy { !$0.lowercased().hasPrefix(scheme.lowercased()) }, "\(sent)")
    }

    @Test func challengeCancelCancelsTheRequest() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        rec.onChallenge = { _, challenge, _ in _ = rq_auth_cancel(challenge) }
        _ = addAndRelease(q, try rec.request(fixture.url("/basic-auth/u/p"), tag: "a", auth: true))
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completion("a")?.outcome == RQ_OUTCOME_CANCELLED)
    }

    @Test func cancellingARequestWaitingForItsAnswerInvalidatesTheChallenge() throws {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.request(fixture.url("/basic-auth/u/p"), tag: "a", auth: true)
        _ = rq_add(q, r)
        #expect(rec.waitForChallenges(1))
        #expect(rq_cancel(r) == RQ_OK)
        #expect(rq_auth_use_credential(rec.challengeList[0].challenge, "u", "p") == RQ_ERR_INVALID_HANDLE)
        #expect(rq_queue_wait_idle(q, 10) == RQ_OK)
        #expect(rec.completions.map { $0.outcome } == [RQ_OUTCOME_CANCELLED])
        _ = rq_request_free(r)
    }

    @Test func presetCredentialsAreSentWithTheFirstAttempt() throws {
        let g = uniqueGroup()
        let (c, _) = try run("/basic-auth/ann/secret?group=\(g)") { r in _ = rq_request_set_credentials(r, "ann", "secret") }
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(fixture.log(group: g).entries.count == 1)
    }

    // MARK: Retry

    @Test func retryIsOffByDefault() throws {
        let g = uniqueGroup()
        let (c, _) = try run("/flaky?key=\(g)&fail=1&mode=truncated&group=\(g)")
        #expect(c.outcome == RQ_OUTCOME_CONNECTION_LOST && c.attempts == 1)
        #expect(fixture.log(group: g).entries.count == 1)
    }

    @Test func retryCountAndSpacingAsTheServerSawThem() throws {
        let g = uniqueGroup()
        let (c, _) = try run("/flaky?key=\(g)&fail=2&mode=truncated&n=64&group=\(g)") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.4)
        }
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(c.attempts == 3)
        #expect(c.body.count == 64)
        let starts = fixture.log(group: g).entries.map(\.start)
        #expect(starts.count == 3)
        for (a, b) in zip(starts, starts.dropFirst()) { #expect(b - a >= 0.35) }
    }

    @Test func maxAttemptsEndsTheRetries() throws {
        let g = uniqueGroup()
        let (c, _) = try run("/flaky?key=\(g)&fail=10&mode=truncated&group=\(g)") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            _ = rq_request_set_max_attempts(r, 3)
        }
        #expect(c.outcome == RQ_OUTCOME_CONNECTION_LOST)
        #expect(c.attempts == 3)
        #expect(fixture.log(group: g).entries.count == 3)
    }

    @Test func httpStatusesAndUnlistedOutcomesAreNotRetried() throws {
        let g = uniqueGroup()
        let (status, _) = try run("/status/503?group=\(g)") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
        }
        #expect(status.outcome == RQ_OUTCOME_HTTP_STATUS && status.attempts == 1)
        let (custom, _) = try run("/flaky?key=\(g)&fail=1&mode=truncated&group=\(g)") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.05)
            var only = RQ_OUTCOME_TIMEOUT
            _ = rq_request_set_retry_outcomes(r, &only, 1)
        }
        #expect(custom.outcome == RQ_OUTCOME_CONNECTION_LOST && custom.attempts == 1)
    }

    @Test func retryRecoversFromARefusedConnection() throws {
        let port = fixture.refusingPort(for: 1.0)
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        _ = addAndRelease(q, try rec.request("http://127.0.0.1:\(port)/bytes?n=11", tag: "r") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.3)
        })
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        let c = try #require(rec.completion("r"))
        #expect(c.outcome == RQ_OUTCOME_OK && c.body.count == 11)
        #expect(c.attempts >= 2)
    }

    @Test func cancelDuringTheRetryDelayStopsTheTimer() throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.request(fixture.url("/flaky?key=\(g)&fail=100&mode=truncated&group=\(g)"), tag: "r") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.8)
        }
        _ = rq_add(q, r)
        fixture.waitForLog(group: g) { $0.entries.count == 1 && $0.entries[0].end != nil }
        Thread.sleep(forTimeInterval: 0.1)
        var state = RQ_STATE_NEW
        #expect(rq_request_get_state(r, &state) == RQ_OK && state == RQ_STATE_RUNNING)
        #expect(rq_cancel(r) == RQ_OK)
        #expect(rec.waitForCompletions(1))
        #expect(rec.completion("r")?.outcome == RQ_OUTCOME_CANCELLED)
        // Well past the delay: the timer never started another attempt, and nothing else arrived.
        Thread.sleep(forTimeInterval: 1.2)
        #expect(fixture.log(group: g).entries.count == 1)
        #expect(rec.completions.count == 1)
        _ = rq_request_free(r)
    }
}

let RQ_ERR_INTERNAL_TEST = rq_result(rawValue: 999)

extension Collection {
    /// The elements repeated to make `count` of them.
    func cycled(to count: Int) -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(count)
        while out.count < count { out.append(contentsOf: prefix(count - out.count)) }
        return out
    }
}
