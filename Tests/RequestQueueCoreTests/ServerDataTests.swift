import RequestQueueCore
import Testing

/// The parsers of what a server sends (issue 13): every one total, no trap from any byte.
@Suite struct ServerDataTests {
    private func status(_ line: String) -> Int? {
        Array(line.utf8).withUnsafeBufferPointer { ServerData.statusCode(ofStatusLine: $0) }
    }

    @Test func statusLines() {
        #expect(status("HTTP/1.1 200 OK\r\n") == 200)
        #expect(status("HTTP/1.0 404 Not Found\r\n") == 404)
        #expect(status("HTTP/2 204 \r\n") == 204)
        #expect(status("HTTP/1.1 599\r\n") == 599)
        #expect(status("HTTP/1.1 100") == 100)
        for bad in ["HTTP/1.1 0 Odd\r\n", "HTTP/1.1 99 Odd\r\n", "HTTP/1.1 1000 Odd\r\n", "HTTP/1.1 600 Odd\r\n",
                    "HTTP/1.1 abc\r\n", "HTTP/1.1 20 X\r\n", "HTTP/1.1 -200 X\r\n", "HTTP/1.1  200 X\r\n",
                    "HTTP/1.1 99999999999999999999 X\r\n", "HTTP/ 200 OK\r\n", "HTTP/1. 200 OK\r\n", "HTTP/x 200 OK",
                    "HTTP/1.1200 OK", "HTTP/1.1", "HTTP/", "", "hello", "HTTP/11111111111111111111111.1 200 OK"] {
            #expect(status(bad) == nil, "\(bad)")
        }
    }

    @Test func hugeRetryAfterDatesAreRejectedNotTrapped() {
        for bad in ["Sun, 06 Nov 100000000000000 08:49:37 GMT", "Sun, 06 Nov 9223372036854775807 08:49:37 GMT",
                    "Sun, 06 Nov -9223372036854775808 08:49:37 GMT", "Sun, 06 Nov 10000 08:49:37 GMT",
                    "Sun, 06 Nov 0 08:49:37 GMT", "Sun, 06 Nov 1994 99999999999999999999:49:37 GMT",
                    "Sun, 99999999999999999999 Nov 1994 08:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT",
                    "Sun, 06 Nov 1994 08:49:-7 GMT", "1e308", "nan", "inf", "-0", "99999999999999999999999"] {
            #expect(RetryPolicy.retryAfterSeconds(bad, now: 0) == nil, "\(bad)")
        }
        #expect(RetryPolicy.retryAfterSeconds("Fri, 31 Dec 9999 23:59:59 GMT", now: 0) == 253402300799)
        #expect(RetryPolicy.retryAfterSeconds("Mon, 01 Jan 0001 00:00:00 GMT", now: 0) == 0)
        #expect(RetryPolicy.retryAfterSeconds("999999999", now: 0) == 999999999)
        // A "now" from a broken clock is no trap either.
        #expect(RetryPolicy.retryAfterSeconds("Sun, 06 Nov 1994 08:49:37 GMT", now: .nan) == nil)
        #expect(RetryPolicy.retryAfterSeconds("Sun, 06 Nov 1994 08:49:37 GMT", now: -.infinity) == nil)
    }

    @Test func contentRanges() {
        #expect(ServerData.contentRangeStart("bytes 100-299/300") == 100)
        #expect(ServerData.contentRangeStart("bytes 0-0/*") == 0)
        #expect(ServerData.contentRangeStart("BYTES 5-9/10") == 5)
        for bad in ["bytes 99999999999999999999999-99999999999999999999999/*", "bytes 9223372036854775807-9223372036854775807/*",
                    "bytes -5-10/20", "bytes 5-", "bytes 5-9", "bytes", "", "bytes 9-5/10", "bytes 5-9/x", "bytes 5-9/9",
                    "bytes */10", "items 5-9/10", "bytes 5 -9/10", "bytes 5-9/10 trailing"] {
            #expect(ServerData.contentRangeStart(bad) == nil, "\(bad)")
        }
    }

    @Test func transferCodingsNotAskedFor() {
        #expect(ServerData.unrequestedTransferCoding("chunked") == nil)
        #expect(ServerData.unrequestedTransferCoding(" Chunked ") == nil)
        #expect(ServerData.unrequestedTransferCoding("gzip, chunked") == "gzip")
        #expect(ServerData.unrequestedTransferCoding("gzip") == "gzip")
        #expect(ServerData.unrequestedTransferCoding("chunked, deflate") == "deflate")
        #expect(ServerData.unrequestedTransferCoding("identity") == "identity")
    }

    @Test func contentLengths() {
        #expect(ServerData.isValidContentLength("0"))
        #expect(ServerData.isValidContentLength(" 123 "))
        #expect(ServerData.isValidContentLength("999999999999999999"))
        #expect(ServerData.isValidContentLength("\t7 \t"))
        for bad in ["", " ", "-5", "+5", "99999999999999999999999", "1234567890123456789", "1 2", "0x10", "5, 6", ",", " , ", ", 5", "5, x", "1e3",
                    "\u{663}", "5\u{301}", "\u{FF15}", "5\r"] {
            #expect(!ServerData.isValidContentLength(bad), "\(bad)")
            #expect(!ServerData.isValidContentLength(bytes: Array(bad.utf8)), "\(bad)")
        }
        for good in ["0", " 123 ", "999999999999999999", "\t7 \t"] {
            #expect(ServerData.isValidContentLength(bytes: Array(good.utf8)), "\(good)")
        }
        // The number, for telling two Content-Length values apart.
        #expect(ServerData.contentLength(bytes: Array("0".utf8)) == 0)
        #expect(ServerData.contentLength(bytes: Array(" 0046 ".utf8)) == 46)
        #expect(ServerData.contentLength(bytes: Array("999999999999999999".utf8)) == 999_999_999_999_999_999)
        #expect(ServerData.contentLength(bytes: Array("1234567890123456789".utf8)) == nil)
        #expect(ServerData.contentLength(bytes: Array("5, 7".utf8)) == nil)
        // A list of equal values (the field given twice, combined) is that value: RFC 9112 6.3.
        // Empty elements after the first value are ignored (RFC 9110 5.6.1.2).
        #expect(ServerData.contentLength(bytes: Array("5, 5".utf8)) == 5)
        #expect(ServerData.contentLength(bytes: Array("46,0046 ,, 46".utf8)) == 46)
        #expect(ServerData.contentLength(bytes: Array("5,".utf8)) == 5)
        #expect(ServerData.contentLength(bytes: Array("5, 5, 6".utf8)) == nil)
    }

    @Test func libcurlMessagesToldApart() {
        #expect(ServerData.isFramingError("Illegal or missing hexadecimal sequence in chunked-encoding"))
        #expect(ServerData.isFramingError("Too large response headers: 307222 > 307200"))
        #expect(!ServerData.isFramingError("Recv failure: Connection reset by peer"))
        #expect(ServerData.isFramingError("h2_process_pending_input: nghttp2_session_mem_recv() returned "
            + "-905:Too many CONTINUATION frames following a HEADER frame"))
        #expect(ServerData.isFramingError("h2_process_pending_input: nghttp2_session_mem_recv() returned "
            + "-904:Flooding was detected in this HTTP/2 session, and it must be closed"))
        #expect(!ServerData.isFramingError("h2_process_pending_input: nghttp2_session_mem_recv() returned "
            + "-901:Out of memory"))
        let fields = "h2_process_pending_input: nghttp2_session_mem_recv() returned -902:The user callback function failed"
        #expect(ServerData.isFramingError(fields) && ServerData.http2FieldsTooLarge(fields))
        #expect(!ServerData.http2FieldsTooLarge("Too large response headers: 307222 > 307200"))
        #expect(ServerData.isHTTP2ProtocolReset("HTTP/2 stream 1 was not closed cleanly: PROTOCOL_ERROR (err 1)"))
        #expect(ServerData.isHTTP2ProtocolReset("HTTP/2 stream 7 was not closed cleanly: COMPRESSION_ERROR (err 9)"))
        #expect(!ServerData.isHTTP2ProtocolReset("HTTP/2 stream 1 was not closed cleanly: REFUSED_STREAM (err 7)"))
        #expect(!ServerData.isHTTP2ProtocolReset("HTTP/2 stream 1 was not closed cleanly: INTERNAL_ERROR (err 2)"))
        #expect(!ServerData.isHTTP2ProtocolReset("HTTP/2 stream 1 was not closed cleanly before end of the underlying stream"))
        #expect(ServerData.isNotHTTPError("Received HTTP/0.9 when not allowed"))
        #expect(ServerData.isNotHTTPError("HTTP/0.9"))
        #expect(!ServerData.isNotHTTPError("HTTP/0."))
        #expect(!ServerData.isNotHTTPError("Received HTTP/1.1 when expected"))
        #expect(ServerData.isNotHTTPError("Unsupported response code in HTTP response"))
        #expect(!ServerData.isNotHTTPError("Protocol \"ftp\" not supported or disabled in libcurl"))
        #expect(!ServerData.isNotHTTPError("The redirect target URL could not be parsed: Unsupported URL scheme"))
    }

    @Test func headerBudgetCountsBytesAndLines() {
        var budget = HeaderBudget()
        var admitted = [budget.admit(lineLength: HeaderBudget.maxBytes), budget.admit(lineLength: 1)]
        #expect(admitted == [true, false])
        budget = HeaderBudget()
        admitted = (0...HeaderBudget.maxLines).map { _ in budget.admit(lineLength: 4) }
        #expect(admitted.filter { $0 }.count == HeaderBudget.maxLines && admitted.last == false)
        budget = HeaderBudget()
        admitted = [budget.admit(lineLength: Int.max), budget.admit(lineLength: -1), budget.admit(lineLength: 0)]
        #expect(admitted == [false, false, true])
    }

    @Test func progressOverTheResponsesOfOneAttempt() {
        var p = AttemptProgress()
        p.update(received: 100, length: 227)
        #expect(p.done == 100 && p.total == 227)
        p.update(received: 227, length: 227)
        // A redirect: libcurl counts the next body from 0, with the next response's length.
        p.update(received: 0, length: 0)
        #expect(p.done == 227 && p.total == 227)
        p.update(received: 10, length: 50)
        #expect(p.done == 237 && p.total == 277)
        // A new transfer for the same attempt (an answered challenge).
        p.newResponse()
        p.update(received: 2, length: 2)
        #expect(p.done == 239 && p.total == 239)
        // A server that sends more than it announced: done never passes total.
        p.update(received: 10, length: 2)
        #expect(p.done == 247 && p.total == 247)
        // Unknown length, and values no transfer can have.
        p.update(received: -5, length: -1)
        #expect(p.done == 247 && p.total == -1)
        p.update(received: .max, length: .max)
        #expect(p.done == .max && p.total == .max)
        p.newResponse()
        p.update(received: .max, length: .max)
        #expect(p.done == .max && p.total == .max)
    }

    @Test func headerFieldsAreCutWithoutTraps() {
        var bytes = Array("A: 1\r\nB:2 \r\nno colon\r\n:empty\r\nC:".utf8)
        let fields = bytes.withUnsafeMutableBufferPointer { HeaderLines.cut($0) }
        #expect(fields.count == 3)
        let lines = Array("Content-Range: bytes 1-2/3\r\nX: y\r\n".utf8)
        #expect(lines.withUnsafeBufferPointer { HeaderLines.value(named: "content-range", in: $0) } == "bytes 1-2/3")
        #expect(lines.withUnsafeBufferPointer { HeaderLines.value(named: "Y", in: $0) } == nil)
        // Names match whole and in either case only.
        #expect(lines.withUnsafeBufferPointer { HeaderLines.value(named: "CONTENT-RANGE", in: $0) } == "bytes 1-2/3")
        #expect(lines.withUnsafeBufferPointer { HeaderLines.value(named: "x", in: $0) } == "y")
        for other in ["Content-Rang", "Content-Ranges", "Content_Range", ""] {
            #expect(lines.withUnsafeBufferPointer { HeaderLines.value(named: other, in: $0) } == nil, "\(other)")
        }
    }

    /// The one-line lookup of the header callback finds what the walk over lines finds.
    @Test func oneLineLookupIsTheWalk() {
        let lines = ["Content-Length: 12\r\n", "content-length:12", "CONTENT-LENGTH: \t 7 \t\r\n", "Content-Length:\r\n",
                     "Content-Length:", "Content-Length", "Content-Length : 5\r\n", "Content-Lengths: 5\r\n",
                     "Content:Length: 5\r\n", "Content\rLength: 5\r\n", "Content-Length: 5\r\nX: y\r\n",
                     "Content-Length: 5\nContent-Length: 6\n", "X: 1\nContent-Length: 6\n", "\nContent-Length: 6",
                     "Content-Length: a:b\r\n", "Content-Length:\u{FF}\r\n", "", "\r\n", ":", "Content-Length: 5\r"]
        for text in lines {
            Array(text.utf8).withUnsafeBufferPointer { line in
                let walk = HeaderLines.valueBytes(named: "Content-Length", in: line).map(Array.init)
                let one = HeaderLines.valueBytes(ofLine: line, named: "Content-Length").map(Array.init)
                #expect(one == walk, "\(text.debugDescription)")
            }
        }
        // A name longer than a word and not a multiple of it (compared 8 bytes at a time, then one
        // by one); a newline or a difference in either part.
        let codings = ["Transfer-Encoding: chunked\r\n", "TRANSFER-ENCODING:Chunked \r\n", "transfer-encoding: gzip, chunked",
                       "Transfer-Encodinx: chunked\r\n", "Transfer\nEncoding: chunked\r\n", "Transfer-Encoding\n: chunked",
                       "Xransfer-Encoding: chunked\r\n", "Transfer-Encoding: a\nb\r\n", "Transfer-Encoding", "Transfer-Encoding:"]
        for text in codings {
            Array(text.utf8).withUnsafeBufferPointer { line in
                let walk = HeaderLines.valueBytes(named: "Transfer-Encoding", in: line).map(Array.init)
                let one = HeaderLines.valueBytes(ofLine: line, named: "Transfer-Encoding").map(Array.init)
                #expect(one == walk, "\(text.debugDescription)")
            }
        }
    }

    @Test func chunkedToldApartWithoutAString() {
        for (text, chunked) in [("chunked", true), ("CHUNKED", true), ("Chunked", true), ("chunke", false), ("chunkedx", false),
                                ("gzip", false), ("chunked, gzip", false), ("", false), ("chunk\u{E9}d", false)] {
            let bytes = Array(text.utf8)
            bytes.withUnsafeBufferPointer { #expect(HeaderLines.equalsIgnoringCase($0, "chunked") == chunked, "\(text)") }
            // The fast answer agrees with the full parse where it answers.
            if chunked { #expect(ServerData.unrequestedTransferCoding(text) == nil) }
        }
    }
}
