import CRequestQueueAPI
import Foundation
import Glibc
import RequestQueue
import Testing

/// The head callback (rq_request_set_head_callback): the status and headers of each attempt's
/// final response, before its body pieces and the completion.
@Suite struct HeadTests {
    let fixture = Fixture.shared

    /// Runs one request with a head callback on a fresh queue; returns its completion and stream log.
    func run(_ path: String, body: Bool = true, delivery: rq_delivery = RQ_DELIVERY_THREADED,
             recorder: Recorder = Recorder(), configure: (OpaquePointer?) -> Void = { _ in }) throws -> (Completion, StreamLog.Stream) {
        let q = try makeQueue(delivery)
        defer { _ = rq_queue_free(q) }
        let r = try recorder.streamingRequest(fixture.url(path), tag: "r", body: body, head: true, configure: configure)
        #expect(addAndRelease(q, r) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        return (try #require(recorder.completion("r")), recorder.streams.stream("r"))
    }

    @Test func theHeadComesBeforeTheChunksAndTheCompletion() throws {
        for delivery in [RQ_DELIVERY_THREADED, RQ_DELIVERY_DISPATCH] {
            let (c, s) = try run("/bytes?n=100000&chunked=1&chunk=5000&header=X-Head:yes", delivery: delivery)
            #expect(c.outcome == RQ_OUTCOME_OK && c.status == 200)
            #expect(s.sequence == ["head 200", "chunk", "done"])
            let head = try #require(s.heads.first)
            #expect(head.status == 200 && head.bodySize == 0 && head.outcome == RQ_OUTCOME_OK)
            #expect(head.headers["x-head"] == "yes" && head.headers["transfer-encoding"] == "chunked")
            #expect(head.url == c.url)
        }
    }

    @Test func theHeadHasTheHTTPVersionOfItsStatusLine() throws {
        // (The httpx transport returns a 2xx response at its head: its http_version comes from it.)
        let (c, s) = try run("/bytes?n=10")
        #expect(c.outcome == RQ_OUTCOME_OK && s.heads.first?.httpVersion == 11)
        let reply = Data("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let (d, t) = try run("/raw?b64=\(reply)")
        #expect(d.outcome == RQ_OUTCOME_OK && t.heads.first?.httpVersion == 10)
    }

    @Test func aBufferedRequestGetsItsHeadToo() throws {
        let (c, s) = try run("/bytes?n=10", body: false)
        #expect(c.outcome == RQ_OUTCOME_OK && c.body == FixturePattern.bytes(0, 10))
        #expect(s.sequence == ["head 200", "done"])
    }

    @Test func aFollowedRedirectGivesOneHeadTheFinalOne() throws {
        let (c, s) = try run("/redirect/3")
        #expect(c.outcome == RQ_OUTCOME_OK)
        #expect(s.sequence == ["head 200", "chunk", "done"])
        #expect(s.heads.first?.url == fixture.url("/redirect/0"))
        // Not followed: the 302 is the final response, and has the head.
        let (notFollowed, t) = try run("/redirect/3") { _ = rq_request_set_max_redirects($0, 0) }
        #expect(notFollowed.status == 302)
        #expect(t.sequence == ["head 302", "done"])
        #expect(t.heads.first?.headers["location"] == "/redirect/2")
    }

    @Test func anHTTPErrorGetsAHeadAndItsBodyInTheCompletion() throws {
        let (c, s) = try run("/bytes?n=100&status=404")
        #expect(c.outcome == RQ_OUTCOME_HTTP_STATUS && c.status == 404 && c.body == FixturePattern.bytes(0, 100))
        #expect(s.sequence == ["head 404", "done"])
        #expect(s.heads.first?.outcome == RQ_OUTCOME_HTTP_STATUS && s.heads.first?.bodySize == 0)
    }

    @Test func aRetriedRequestGetsOneHeadPerAttempt() throws {
        let g = uniqueGroup()
        let (c, s) = try run("/flaky?key=\(g)&fail=2&mode=status&code=503&n=50") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.01)
            var statuses: [Int32] = [503]
            _ = rq_request_set_retry_statuses(r, &statuses, 1)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.attempts == 3)
        #expect(s.sequence == ["head 503", "head 503", "head 200", "chunk", "done"])
        #expect(s.heads.map { $0.headers["x-attempt"] } == ["1", "2", "3"])
        // An attempt cut in its body: its head and pieces, then the next attempt's from offset 0.
        let h = uniqueGroup()
        let (d, t) = try run("/flaky?key=\(h)&fail=1&mode=truncated&n=1000") { r in
            _ = rq_request_set_retry(r, 1)
            _ = rq_request_set_retry_delay(r, 0.01)
        }
        #expect(d.outcome == RQ_OUTCOME_OK && d.attempts == 2)
        #expect(t.sequence == ["head 200", "chunk", "head 200", "chunk", "done"])
        #expect(t.starts == 2)
    }

    @Test func aFailureBeforeTheHeadersGivesNoHead() throws {
        let (c, s) = try run("/reset")
        #expect(c.outcome != RQ_OUTCOME_OK)
        #expect(s.sequence == ["done"])
    }

    /// The server sends the head and holds the body: the head arrives while the body cannot have.
    @Test func theHeadArrivesWhileTheServerHoldsTheBody() throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let retained = Locked(Handle(nil))
        rec.streams.onHead = { _, _, head in retained.mutate { $0 = Handle(rq_response_retain(head)) } }
        let r = try rec.streamingRequest(fixture.url("/hold?key=\(g)&n=5000&group=\(g)"), tag: "r", head: true)
        #expect(addAndRelease(q, r) == RQ_OK)
        let deadline = Date().addingTimeInterval(10)
        while rec.streams.stream("r").heads.isEmpty, Date() < deadline { usleep(2000) }
        #expect(rec.streams.stream("r").sequence == ["head 200"])
        #expect(rec.completions.isEmpty)
        #expect(fixture.log(group: g).entries.first?.end == nil)
        _ = fixture.get("/_/release?key=\(g)")
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let s = rec.streams.stream("r")
        #expect(s.sequence == ["head 200", "chunk", "done"])
        #expect(s.bytes == FixturePattern.bytes(0, 5000))
        // A retained head stays readable after its callback.
        let head = try #require(retained.value.pointer)
        #expect(rq_response_status(head) == 200)
        #expect(rq_response_header(head, "content-length").map { String(cString: $0) } == "5000")
        rq_response_release(head)
    }

    @Test func cancellingAfterTheHeadEndsTheTransfer() throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        let r = try rec.streamingRequest(fixture.url("/hold?key=\(g)&n=5000&first=100&group=\(g)"), tag: "r", head: true)
        #expect(rq_add(q, r) == RQ_OK)
        let deadline = Date().addingTimeInterval(10)
        while rec.streams.stream("r").calls == 0, Date() < deadline { usleep(2000) }
        #expect(rq_cancel(r) == RQ_OK)
        _ = rq_request_free(r)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(rec.completion("r")?.outcome == RQ_OUTCOME_CANCELLED)
        #expect(rec.streams.stream("r").sequence == ["head 200", "chunk", "done"])
        #expect(fixture.waitForLog(group: g) { $0.entries.first?.clientGone == true }.entries.first?.clientGone == true)
    }

    @Test func aHeadForA401OnlyWhenNothingAnswersIt() throws {
        // Answered with a credential by the handler: only the final 200 has a head.
        let useCredential: rq_auth_fn = { _, _, challenge, _, _ in _ = rq_auth_use_credential(challenge, "u", "p") }
        let (ok, s) = try run("/basic-auth/u/p") { _ = rq_request_set_auth_handler($0, useCredential) }
        #expect(ok.status == 200)
        #expect(s.sequence == ["head 200", "chunk", "done"])
        // Answered "continue without": the 401 completes the request, after its head.
        let continueWithout: rq_auth_fn = { _, _, challenge, _, _ in _ = rq_auth_continue_without(challenge) }
        let (denied, t) = try run("/basic-auth/u/p") { _ = rq_request_set_auth_handler($0, continueWithout) }
        #expect(denied.status == 401)
        #expect(t.sequence == ["head 401", "done"])
        #expect(t.heads.first?.headers["www-authenticate"] == "Basic realm=\"fixture\"")
        // No handler.
        let (plain, u) = try run("/basic-auth/u/p")
        #expect(plain.status == 401 && u.sequence == ["head 401", "done"])
        // A credential rejected, then the request cancelled by the handler: no head at all.
        let anyScheme: rq_auth_fn = { _, _, challenge, failures, _ in
            _ = failures == 0 ? rq_auth_use_credential(challenge, "u", "wrong") : rq_auth_cancel(challenge)
        }
        let (cancelled, v) = try run("/basic-auth/u/p") { _ = rq_request_set_auth_handler($0, anyScheme) }
        #expect(cancelled.outcome == RQ_OUTCOME_CANCELLED)
        #expect(v.sequence == ["done"])
    }

    @Test func coalescedRequestsEachGetTheHead() throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE) == RQ_OK)
        #expect(rq_queue_suspend(q) == RQ_OK)
        let rec = Recorder()
        for tag in ["a", "b", "c"] {
            // "c" has no head callback.
            let r = try rec.streamingRequest(fixture.url("/bytes?n=10&group=\(g)"), tag: tag, body: false, head: tag != "c")
            #expect(addAndRelease(q, r) == RQ_OK)
        }
        #expect(rq_queue_resume(q) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(fixture.log(group: g).entries.count == 1)
        #expect(rec.streams.stream("a").sequence == ["head 200", "done"])
        #expect(rec.streams.stream("b").sequence == ["head 200", "done"])
        #expect(rec.streams.stream("c").sequence == ["done"])
        // A request with a head callback does not join a transfer already running (its head may
        // have come): it runs on its own.
        let h = uniqueGroup()
        let first = try rec.streamingRequest(fixture.url("/hold?key=\(h)&n=10&group=\(h)"), tag: "d", body: false, head: true)
        #expect(addAndRelease(q, first) == RQ_OK)
        let deadline = Date().addingTimeInterval(10)
        while rec.streams.stream("d").heads.isEmpty, Date() < deadline { usleep(2000) }
        let second = try rec.streamingRequest(fixture.url("/hold?key=\(h)&n=10&group=\(h)"), tag: "e", body: false, head: true)
        #expect(addAndRelease(q, second) == RQ_OK)
        fixture.waitForLog(group: h) { $0.entries.count == 2 }
        _ = fixture.get("/_/release?key=\(h)")
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(fixture.log(group: h).entries.count == 2)
        #expect(rec.streams.stream("e").sequence == ["head 200", "done"])
    }

    /// The engine makes a head only when a request getting the attempt's events has a head
    /// callback (Request.headWanted): a follower's counts when its leader has none.
    @Test func aCoalescedRequestGetsTheHeadWhenTheOneItSharesHasNoHeadCallback() throws {
        let g = uniqueGroup()
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        #expect(rq_queue_set_duplicates(q, RQ_DUPLICATES_COALESCE) == RQ_OK)
        #expect(rq_queue_suspend(q) == RQ_OK)
        let rec = Recorder()
        for tag in ["lead", "follow"] {
            let r = try rec.streamingRequest(fixture.url("/bytes?n=10&group=\(g)"), tag: tag, body: false, head: tag == "follow")
            #expect(addAndRelease(q, r) == RQ_OK)
        }
        #expect(rq_queue_resume(q) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        #expect(fixture.log(group: g).entries.count == 1)
        #expect(rec.streams.stream("lead").sequence == ["done"])
        #expect(rec.streams.stream("follow").sequence == ["head 200", "done"])
    }

    @Test func badHeadCallbackInput() throws {
        let onHead: rq_head_fn = { _, _, _ in }
        #expect(rq_request_set_head_callback(nil, onHead) == RQ_ERR_NULL_ARGUMENT)
        #expect(rq_request_set_head_callback(BadInputTests.garbage, onHead) == RQ_ERR_INVALID_HANDLE)
        var r: OpaquePointer?
        try #require(rq_request_new(fixture.url("/bytes?n=1"), &r) == RQ_OK)
        #expect(rq_request_set_head_callback(r, onHead) == RQ_OK)
        #expect(rq_request_set_head_callback(r, nil) == RQ_OK)
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        _ = rq_queue_suspend(q)
        #expect(rq_add(q, r) == RQ_OK)
        #expect(rq_request_set_head_callback(r, onHead) == RQ_ERR_REQUEST_FROZEN)
        #expect(rq_request_free(r) == RQ_OK)
    }
}
