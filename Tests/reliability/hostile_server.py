#!/usr/bin/env python3
"""A hostile HTTP server for the reliability suite: sends whatever bytes a test asks for, at any
pace, on 127.0.0.1 (issue 13, "hostile server data").

Usage: hostile_server.py [--exit-on-stdin-eof]
Prints "PORT <n>" once listening (as Tests/Fixtures/fixture_server.py does, so that
Tests/c/with_fixture.py can start it).

A request for /case/NAME[?query] gets the reply of case NAME (see CASES below): a status line, or
none; any headers, endless ones, endless trailers, bad chunk sizes, transfer codings never asked
for, endless bodies... So does a CONNECT (the server as a proxy) whose User-Agent is
NAME[?query]. Endless replies stop by themselves after SEND_LIMIT bytes or
SEND_SECONDS seconds, or as soon as the client closes the connection. Query parameters:
  pace=S      sleep S seconds between pieces (default 0: as fast as the socket takes them)
  to=PATH     the Location of a redirect case
  per=N       header lines per piece of endless-headers
  size=N      a body size where a case has one
/case/raw?b64=B64[&repeat=N][&split=K][&pace=S] sends exactly the base64-decoded bytes, N times (0:
endlessly), in pieces of K bytes (default: whole), so that a test can script any reply at any pace.
Connection handling, any case: keep=1 keeps the connection open after the reply (the next request
on it is read and answered as usual: a body longer than its Content-Length reaches the client
before its next request); rst=1 ends it with a reset (SO_LINGER 0) instead of a close;
close_after=S waits S seconds before the close (or reset), reading nothing.
/case/ce-bomb?coding=C&size=N sends N zero bytes (default 128 MiB) compressed with C (gzip,
deflate, br, zstd; br and zstd through the brotli and zstd commands) as Content-Encoding C.
/case/body?size=N sends a 200 with a body of N bytes ("b"), Content-Length N.
A cleartext HTTP/2 connection (prior knowledge: the client's preface instead of a request) gets
the HEADERS of a 200 on stream 1, then frames that carry nothing for the stream (empty DATA,
PRIORITY) for H2_FLOOD_SECONDS or until the client closes or resets the connection, then a DATA
frame "ok" ending the stream; the log gets {"path": "h2c-nothing", "ended": "client" or "time"}.
With "continuation" in the request's HEADERS frame (see serve_h2c_flood), CONTINUATION frames
follow a HEADERS frame that does not end the headers ("h2c-continuation" in the log); with
"hpack-bomb", one HEADERS frame of 5 KB decodes to 4 MB of header fields ("h2c-hpack-bomb"); with
"upper-name", the response has a header name in upper case, malformed in HTTP/2 ("h2c-upper-name");
with "trailers", a body "ok" and a trailer "x-trailer: t"; with "goaway", a GOAWAY that leaves the
request's stream out.
/_/log returns JSON {"requests": [{"path": ..., "headers": {...}}, ...]} of every request so far
(the log's own requests left out), so that a test can count the attempts the server saw.
"""

import base64
import functools
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib

SEND_LIMIT = 1 << 30      # bytes an endless case sends at most
SEND_SECONDS = 60.0       # and for at most this long
PIECE = 64 * 1024
H2_FLOOD_SECONDS = 20.0

log_lock = threading.Lock()
log = []


def status_and(headers, status="HTTP/1.1 200 OK"):
    return (status + "\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode()


def endless(piece):
    """The same piece, forever (the sender stops at its limits)."""
    while True:
        yield piece


def chunked(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


# Each case: a function (query) -> iterable of bytes pieces. The connection is closed after it.
def case_retry_after(q):
    status = q.get("status", "503")
    value = q.get("value", "Sun, 06 Nov 100000000000000 08:49:37 GMT")
    yield status_and([f"Retry-After: {value}", "Content-Length: 0", "Connection: close"],
                     f"HTTP/1.1 {status} Busy")


def case_endless_headers(q):
    yield b"HTTP/1.1 200 OK\r\n"
    line = b"X-Endless: " + b"h" * int(q.get("line", "1000")) + b"\r\n"
    yield from endless(line * int(q.get("per", str(max(1, PIECE // len(line))))))


def case_endless_header_line(q):
    yield b"HTTP/1.1 200 OK\r\nX-Endless: "
    yield from endless(b"h" * PIECE)


def case_endless_interim(q):
    """Informational responses (103 Early Hints), one after the other, forever."""
    hint = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    yield from endless(hint * max(1, PIECE // len(hint)))


def case_endless_trailers(q):
    yield status_and(["Transfer-Encoding: chunked", "Trailer: X-Endless"])
    yield chunked(b"hello") + b"0\r\n"
    line = b"X-Endless: " + b"t" * int(q.get("line", "1000")) + b"\r\n"
    yield from endless(line * int(q.get("per", str(max(1, PIECE // len(line))))))


def case_endless_chunk_extension(q):
    """A chunk whose extension (after "5;") never ends: bytes that are no body and no header."""
    yield status_and(["Transfer-Encoding: chunked"])
    yield b"5;"
    yield from endless(b"x" * PIECE)


def case_many_trailers(q):
    """Many small trailers, then the end: a finite reply whose trailers exceed the budget."""
    yield status_and(["Transfer-Encoding: chunked"])
    yield chunked(b"hello") + b"0\r\n"
    for i in range(int(q.get("count", "100000"))):
        yield b"X-T%d: v\r\n" % i
    yield b"\r\n"


def gzip_bomb(size):
    """`size` zero bytes, gzip-compressed (about 1000:1)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = []
    zeros = b"\0" * (1 << 20)
    left = size
    while left > 0:
        parts.append(compressor.compress(zeros[:min(left, len(zeros))]))
        left -= min(left, len(zeros))
    parts.append(compressor.flush())
    return b"".join(parts)


def case_te_gzip(q):
    body = gzip_bomb(int(q.get("size", str(64 << 20))))
    if q.get("chunked", "1") == "1":
        yield status_and(["Transfer-Encoding: gzip, chunked"])
        for i in range(0, len(body), 8192):
            yield chunked(body[i:i + 8192])
        yield b"0\r\n\r\n"
    else:
        yield status_and(["Transfer-Encoding: gzip", "Connection: close"])
        yield body


def case_http09(q):
    yield b"hello, this is HTTP/0.9 or so\n" * 10


def case_garbage(q):
    yield bytes(range(256)) * 16


def case_status(q):
    code = q.get("code", "0")
    yield status_and(["Content-Length: 5"], f"HTTP/1.1 {code} Odd") + b"hello"


def case_bad_chunk(q):
    size = q.get("chunk", "zz")
    yield status_and(["Transfer-Encoding: chunked"])
    yield chunked(b"hello") + size.encode() + b"\r\nhello\r\n0\r\n\r\n"


def case_content_range(q):
    value = q.get("range", "bytes 99999999999999999999999-99999999999999999999999/*")
    yield status_and([f"Content-Range: {value}", "Content-Length: 5"], "HTTP/1.1 206 Partial Content") + b"hello"


def case_content_length(q):
    value = q.get("length", "99999999999999999999999")
    yield status_and([f"Content-Length: {value}"]) + b"hello"


def case_endless_error(q):
    yield status_and(["Connection: close"], f"HTTP/1.1 {q.get('code', '500')} Error")
    yield from endless(b"e" * PIECE)


def case_redirect_body(q):
    body = b"r" * int(q.get("size", "227"))
    yield status_and([f"Location: {q.get('to', '/case/status?code=200')}", f"Content-Length: {len(body)}"],
                     "HTTP/1.1 302 Found") + body


def case_body(q):
    size = int(q.get("size", "0"))
    yield status_and([f"Content-Length: {size}"])
    while size > 0:
        yield b"b" * min(size, PIECE)
        size -= PIECE


def case_empty(q):
    yield status_and(["Content-Length: 0"])


def case_challenge(q):
    """401 with a body unless the request carries credentials, then a shorter 200; close=1 says
    "Connection: close" in the 401 (the answer then goes on a new connection)."""
    if q.get("_auth"):
        body = b"ok"
        yield status_and([f"Content-Length: {len(body)}"]) + body
    else:
        body = b"u" * int(q.get("size", "227"))
        close = ["Connection: close"] if q.get("close") == "1" else []
        yield status_and(['WWW-Authenticate: Basic realm="hostile"', f"Content-Length: {len(body)}"] + close,
                         "HTTP/1.1 401 Unauthorized") + body


def case_raw(q):
    data = base64.b64decode(q.get("b64", ""))
    repeat = int(q.get("repeat", "1"))
    split = int(q.get("split", "0")) or max(1, len(data))
    count = 0
    while data and (repeat == 0 or count < repeat):
        for i in range(0, len(data), split):
            yield data[i:i + split]
        count += 1


@functools.lru_cache(maxsize=16)
def compressed_zeros(coding, size):
    """`size` zero bytes compressed with a content coding (cached: a bomb is made once)."""
    if coding in ("gzip", "deflate"):
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else 15)
        zeros = b"\0" * (1 << 20)
        parts, left = [], size
        while left > 0:
            parts.append(compressor.compress(zeros[:min(left, len(zeros))]))
            left -= min(left, len(zeros))
        parts.append(compressor.flush())
        return b"".join(parts)
    command = {"br": ["brotli", "-c", "-q", "5"], "zstd": ["zstd", "-c", "-q", "-3"]}[coding]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        def feed():
            zeros = b"\0" * (1 << 20)
            left = size
            while left > 0:
                child.stdin.write(zeros[:min(left, len(zeros))])
                left -= min(left, len(zeros))
            child.stdin.close()
        writer = threading.Thread(target=feed)
        writer.start()
        out = child.stdout.read()
        writer.join()
    return out


def case_ce_bomb(q):
    """A Content-Encoding bomb: many zero bytes, compressed; chunked=1 sends it chunked."""
    coding = q.get("coding", "gzip")
    body = compressed_zeros(coding, int(q.get("size", str(128 << 20))))
    if q.get("chunked", "0") == "1":
        yield status_and([f"Content-Encoding: {coding}", "Transfer-Encoding: chunked"])
        for i in range(0, len(body), 8192):
            yield chunked(body[i:i + 8192])
        yield b"0\r\n\r\n"
    else:
        yield status_and([f"Content-Encoding: {coding}", f"Content-Length: {len(body)}"])
        yield body


def case_set_cookies(q):
    """`count` Set-Cookie lines (names prefix0, prefix1, ...) with values of `size` bytes."""
    prefix, size = q.get("prefix", "c"), int(q.get("size", "10"))
    lines = [f"Set-Cookie: {prefix}{i}={'v' * size}; Path=/" for i in range(int(q.get("count", "100")))]
    yield status_and(lines + ["Content-Length: 2"]) + b"ok"


def case_loop(q):
    """A redirect to itself, forever (`status`: the redirect's status), on a kept connection."""
    q["keep"] = "1"
    yield status_and(["Location: /case/loop?status=" + q.get("status", "302"), "Content-Length: 0"],
                     f"HTTP/1.1 {q.get('status', '302')} Again")


def case_silent(q):
    """Reads the request head only and sends nothing, for SEND_SECONDS (an upload is never read)."""
    deadline = time.monotonic() + SEND_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.1)
        yield b""


def case_paced(q):
    """The head at once, then `pieces` body pieces of `size` bytes (Content-Length announced); the
    server's pace= applies between pieces."""
    pieces, size = int(q.get("pieces", "8")), int(q.get("size", "64"))
    yield status_and([f"Content-Length: {pieces * size}"])
    for _ in range(pieces):
        yield b"b" * size


def case_challenge_raw(q):
    """401 with an oversized challenge, whatever the request carries: kind=0 a Digest nonce of 50000
    bytes, kind=1 a Basic realm of 60000 bytes."""
    value = ('Digest realm="x", nonce="' + "n" * 50000 + '", qop="auth,auth-int", algorithm="SHA-512-256", userhash=true'
             if q.get("kind", "0") == "0" else 'Basic realm="' + "r" * 60000 + '"')
    yield status_and([f"WWW-Authenticate: {value}", "Content-Length: 0"], "HTTP/1.1 401 No")


def case_upload_reset(q):
    """Reads `n` bytes of the request body (after the head), then resets the connection."""
    conn, left = q["_conn"], int(q.get("n", "65536")) - len(q["_rest"])
    while left > 0:
        piece = conn.recv(min(left, 65536))
        if not piece:
            break
        left -= len(piece)
    q["rst"] = "1"
    return iter(())


def case_long_location(q):
    """A redirect whose Location is `n` bytes long (a path padded with "a"), to the status case."""
    target = "/case/status?code=200&pad="
    location = target + "a" * max(0, int(q.get("n", "90000")) - len(target))
    yield status_and([f"Location: {location}", "Content-Length: 0"], "HTTP/1.1 302 Found")


def case_endless_redirect(q):
    """A redirect whose body never ends: chunked (chunked=1) or a huge Content-Length."""
    framing = "Transfer-Encoding: chunked" if q.get("chunked") == "1" else "Content-Length: 999999999999"
    yield status_and(["Location: /case/status?code=200", framing], f"HTTP/1.1 {q.get('status', '302')} Found")
    piece = b"r" * PIECE
    yield from endless(chunked(piece) if q.get("chunked") == "1" else piece)


def case_many_lines(q):
    """`count` tiny header lines ("a:"), then a body of 2 bytes."""
    yield b"HTTP/1.1 200 OK\r\n" + b"a:\r\n" * int(q.get("count", "9000")) + b"Content-Length: 2\r\n\r\nok"


def case_many_interim(q):
    """`count` 100 Continue responses, then a body of 2 bytes."""
    yield b"HTTP/1.1 100 Continue\r\n\r\n" * int(q.get("count", "3000")) + status_and(["Content-Length: 2"]) + b"ok"


def case_connect_endless_407(q):
    """An answer to CONNECT (the server as a proxy): a 407 whose body never ends, chunked, or with
    length=1 a Content-Length of 999999999999."""
    framing = "Content-Length: 999999999999" if q.get("length") == "1" else "Transfer-Encoding: chunked"
    yield status_and(['Proxy-Authenticate: Basic realm="hostile"', framing], "HTTP/1.1 407 Proxy Authentication Required")
    piece = b"p" * PIECE
    yield from endless(piece if q.get("length") == "1" else chunked(piece))


CASES = {
    "connect-endless-407": case_connect_endless_407,
    "raw": case_raw,
    "long-location": case_long_location,
    "many-lines": case_many_lines,
    "endless-redirect": case_endless_redirect,
    "many-interim": case_many_interim,
    "retry-after": case_retry_after,
    "endless-headers": case_endless_headers,
    "endless-header-line": case_endless_header_line,
    "endless-interim": case_endless_interim,
    "endless-trailers": case_endless_trailers,
    "many-trailers": case_many_trailers,
    "endless-chunk-extension": case_endless_chunk_extension,
    "te-gzip": case_te_gzip,
    "http09": case_http09,
    "garbage": case_garbage,
    "status": case_status,
    "bad-chunk": case_bad_chunk,
    "content-range": case_content_range,
    "content-length": case_content_length,
    "endless-error": case_endless_error,
    "redirect-body": case_redirect_body,
    "empty": case_empty,
    "challenge": case_challenge,
    "ce-bomb": case_ce_bomb,
    "set-cookies": case_set_cookies,
    "body": case_body,
    "loop": case_loop,
    "silent": case_silent,
    "upload-reset": case_upload_reset,
    "paced": case_paced,
    "challenge-raw": case_challenge_raw,
}


def read_head(conn, data=b""):
    """The head of the next request and the bytes read after it; None at the end."""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece or len(data) > 1 << 20:
            return None
        data += piece
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def reset(conn):
    """Ends the connection with a reset (RST), not a close."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def h2_request_headers(conn, data):
    """The payload of the client's first HEADERS frame (after the preface's "SM\\r\\n\\r\\n")."""
    data = data[6:]
    while True:
        while len(data) >= 9:
            length, kind = int.from_bytes(data[:3], "big"), data[3]
            if len(data) < 9 + length:
                break
            if kind == 1:
                return data[9:9 + length]
            data = data[9 + length:]
        piece = conn.recv(65536)
        if not piece:
            return b""
        data += piece


# The cleartext HTTP/2 cases (see the module's doc): what follows the server's SETTINGS, and the
# piece repeated after it (a flood) or b"" (none). 0x88 is ":status: 200" (HPACK's static entry 8).
H2_CASES = {
    # Frames that carry nothing for the stream: empty DATA, PRIORITY.
    "nothing": (h2_frame(1, 4, 1, b"\x88"), (h2_frame(0, 0, 1) + h2_frame(2, 0, 1, struct.pack(">IB", 0, 15))) * 2000),
    # CONTINUATION frames after a HEADERS frame that does not end the headers.
    "continuation": (h2_frame(1, 0, 1, b"\x88"), h2_frame(9, 0, 1) * 4000),
    # A 4000-byte field added to HPACK's dynamic table (index 62; "\x7f\xa1\x1e" is 4000 as an
    # HPACK integer with a 7-bit prefix), then 1000 one-byte references to it: 4 MB of fields
    # from 5 KB.
    "hpack-bomb": (h2_frame(1, 4, 1, b"\x88\x40\x03x-b\x7f\xa1\x1e" + b"v" * 4000 + b"\xbe" * 1000)
                   + h2_frame(0, 1, 1, b"ok"), b""),
    # A body "ok", then trailers ("x-trailer: t") in a HEADERS frame that ends the stream.
    "trailers": (h2_frame(1, 4, 1, b"\x88") + h2_frame(0, 0, 1, b"ok") + h2_frame(1, 5, 1, b"\x00\x09x-trailer\x01t"), b""),
    # A GOAWAY whose last stream is 0: the request's stream was not processed.
    "goaway": (h2_frame(7, 0, 0, struct.pack(">II", 0, 0)), b""),
    # A header name in upper case ("X-Upper: 1", HPACK literals): malformed in HTTP/2.
    "upper-name": (h2_frame(1, 4, 1, b"\x88\x00\x07X-Upper\x011") + h2_frame(0, 1, 1, b"ok"), b""),
}


def serve_h2c_flood(conn, rest):
    """A cleartext HTTP/2 connection: the case of H2_CASES named in the request's HEADERS (a header
    the client sends, such as "X-Case: ^^^^^^^^^^goaway": HPACK sends a value as it is when
    Huffman's code for it is longer), "nothing" when none is; a flood ends with a DATA frame "ok"."""
    headers = h2_request_headers(conn, rest)
    mode = next((m for m in H2_CASES if m != "nothing" and m.encode() in headers), "nothing")
    first, piece = H2_CASES[mode]
    started, ended = time.monotonic(), "time"
    try:
        # SETTINGS, an acknowledgement of the client's, the response's HEADERS (":status: 200",
        # HPACK's static entry 8), the flood, and the end of the stream.
        conn.sendall(h2_frame(4, 0, 0) + h2_frame(4, 1, 0) + first)
        while piece and time.monotonic() - started < H2_FLOOD_SECONDS:
            conn.sendall(piece)
    except OSError:
        ended = "client"
    else:
        try:
            if piece:
                conn.sendall(h2_frame(0, 1, 1, b"ok"))
            conn.settimeout(5)
            while conn.recv(65536):
                pass
        except OSError:
            pass
    with log_lock:
        log.append({"path": "h2c-" + mode, "ended": ended, "seconds": round(time.monotonic() - started, 1)})


def serve(conn):
    with conn:
        rest = b""
        while True:
            got = read_head(conn, rest)
            if got is None:
                return
            head, rest = got
            if head.startswith("PRI * HTTP/2.0"):
                return serve_h2c_flood(conn, rest)
            keep = serve_one(conn, head, rest)
            if not keep:
                return
            # A kept connection: the next request, after this one's body (Content-Length).
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length" and value.strip().isdigit():
                    length = int(value.strip())
            while len(rest) < length:
                piece = conn.recv(65536)
                if not piece:
                    return
                rest += piece
            rest = rest[length:]


def serve_one(conn, head, rest):
    """Answers one request; returns whether the connection stays open for the next one."""
    lines = head.split("\r\n")
    parts = lines[0].split(" ")
    target = parts[1] if len(parts) > 1 else "/"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if parts[0] == "CONNECT":
        # A request through the server as a proxy: the case and its query are the User-Agent
        # ("connect-endless-407?length=1"; libcurl sends it in a CONNECT, no other header).
        target = "/case/" + headers.get("user-agent", "")
    url = urllib.parse.urlsplit(target)
    if url.path == "/_/log":
        with log_lock:
            body = json.dumps({"requests": log}).encode()
        conn.sendall(status_and([f"Content-Length: {len(body)}", "Connection: close"]) + body)
        return False
    with log_lock:
        log.append({"path": target, "headers": headers})
    query = dict(urllib.parse.parse_qsl(url.query))
    if "authorization" in headers:
        query["_auth"] = "1"
    query["_conn"], query["_rest"] = conn, rest
    name = url.path[len("/case/"):] if url.path.startswith("/case/") else ""
    case = CASES.get(name)
    if case is None:
        body = f"no case {name!r}\n".encode()
        conn.sendall(status_and([f"Content-Length: {len(body)}"], "HTTP/1.1 404 Not Found") + body)
        return False
    pace = float(query.get("pace", "0"))
    sent, started = 0, time.monotonic()
    try:
        for piece in case(query):
            conn.sendall(piece)
            sent += len(piece)
            if sent >= SEND_LIMIT or time.monotonic() - started > SEND_SECONDS:
                break
            if pace > 0:
                time.sleep(pace)
        # close_after=S: the connection stays open S seconds before it is closed (a reply that
        # looked keep-alive, so that the client sends its next request on it in vain).
        # (No sleep at all otherwise: even sleep(0) lets other threads run first, and the close
        # that follows a reply must come at once, as clients reuse connections not seen closed.)
        if "close_after" in query:
            time.sleep(float(query["close_after"]))
        if query.get("rst") == "1":
            reset(conn)
            return False
        if query.get("keep") == "1":
            return True
        conn.shutdown(socket.SHUT_WR)
        # Let the client read everything before the close (no reset over unread data).
        conn.settimeout(5)
        while conn.recv(65536):
            pass
    except OSError:
        pass  # the client closed: what an endless case waits for
    return False


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    if "--exit-on-stdin-eof" in sys.argv:
        def watch():
            sys.stdin.read()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
