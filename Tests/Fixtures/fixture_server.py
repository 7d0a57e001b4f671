#!/usr/bin/env python3
"""Loopback-only HTTP fixture server for the RequestQueue tests (stdlib only).

Usage: python3 fixture_server.py [--port 0] [--exit-on-stdin-eof] [--parent-pid PID] [--verbose]
                                 [--tls-cert FILE --tls-key FILE]

Binds 127.0.0.1, prints one line "PORT <n>" to stdout once listening, then
serves until SIGTERM/SIGINT (or stdin EOF with --exit-on-stdin-eof).
With --tls-cert/--tls-key (PEM files) every listener serves HTTPS instead of
HTTP (same endpoints); the TLS handshake runs on the connection's own thread.

Every request whose path does not start with /_/ is recorded (see State).
A recorded request counts as finished ("end" set, in-flight decremented)
immediately before the last write of its response, so a client never sees a
response complete while the server still counts it in flight.  Requests whose
connection is aborted (reset, stall, truncated, client gone) finish when the
handler does.

Control (not recorded):
  GET  /_/log                      {"requests": [...], "peak", "inflight", "peaks", "inflights"}
  POST|GET /_/clear                reset log, seq, peaks, flaky counters, extra listeners
  GET  /_/refuse-then-accept?after=S   {"port": P}; P starts listening after S s (default 1)
  GET  /_/release?key=K            lets the /hold requests of key K send the rest of their body
Recorded (any method; common params: delay=S, header=Name:Value (repeat),
id=..., group=...):
  /bytes?n=N&status=C&chunked=1&chunk=K&rate=B   N pattern bytes
          &ranges=1                honour "Range: bytes=S-[E]" (206 + Content-Range, 416
                                   past the end); without ranges=1 a Range header is ignored;
                                   ranges=wrong answers 206 from byte 0 whatever was asked
  /delay?s=S                       "ok" after S s (default 1)
  /text?s=TEXT&charset=CS          TEXT encoded in CS, "Content-Type: text/plain; charset=CS";
                                   without charset: UTF-8, "Content-Type: text/plain"
  /status/CODE?retry_after=V       "status CODE", X-Status header
  /basic-auth/USER/PASS            200 JSON or 401 + WWW-Authenticate
  /challenge/SCHEME                401 + "WWW-Authenticate: SCHEME", whatever the request sends
  /redirect/N                      302 -> /redirect/N-1 (query kept); /redirect/0 -> "redirected"
  /redirect-to?url=U&status=302    status + Location, empty body
  /echo                            JSON method, path, headers, body (latin-1), body_len
  /headers                         JSON of request headers
  /upload                          {"received": body length}
  /reset                           TCP RST, nothing sent
  /stall?s=S                       nothing for S s (default 30), then close
  /stall-body?n=N&s=S              Content-Length N, N//2 bytes, stall S s, close
  /truncated?n=N                   Content-Length N, N//2 bytes, close (FIN)
  /trickle?where=W&every=S&n=N&size=B   a slow server: one piece of B bytes (default 1) every S s
                                   (default 1), N pieces (default: until the client leaves);
                                   where=body: a 200 head, then body bytes (Content-Length N*B);
                                   where=headers: the status line, then header lines
                                   "X-Trickle-<i>: x" (B ignored), never a blank line;
                                   where=line: the status line, then one endless header line
                                   sent B bytes at a time
  /hold?key=K&n=N&first=F&status=C&keep=1  head (status C, default 200, Content-Length N), the first
                                   F bytes (default 0), then nothing until /_/release?key=K
                                   (then the rest) or until the client leaves (the request's
                                   log entry then has "client_gone": true); the connection
                                   closes after it, unless keep=1
  /raw?b64=B&late=L&after=S        writes the bytes of B (URL-safe base64) as they are, then
                                   closes the connection: any status line, header block or body;
                                   with late=L, keeps it open instead, writes the bytes of L
                                   S s later (default 0.05), and reads the next request on it
  /inspect                         JSON of the request as received: method, target, version,
                                   headers as [name, value] pairs in order (repeats kept), body
                                   (latin-1), body_len, conn
  /drop?key=K&n=N                  reads the request, then closes the connection without
                                   answering, for the first N requests of key K (default: every
                                   one); later ones get 200 JSON {"attempt": i}
  /expect-final?status=C           sends no "100 Continue": answers C (default 417) with
                                   Connection: close as soon as the head arrives, then reads the
                                   request body until the client closes; its log entry gets
                                   "body_len" (bytes that came after the head) and "drained": true
  /encoded?coding=E&s=TEXT         TEXT (default 2000 bytes of text) compressed with E (gzip,
                                   deflate = zlib format, raw-deflate, identity, or any other
                                   name: sent as is), "Content-Encoding: E", the compressed
                                   Content-Length (chunked=1: chunked instead)
  /flaky?key=K&fail=F&mode=M&n=N&code=C&retry_after=V&s=S
                                   first F requests per key fail (mode reset|status|
                                   truncated|stall), then 200 with N bytes (ranges=1 as
                                   for /bytes)
"""

import argparse
import base64
import gzip
import http
import json
import os
import re
import select
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import traceback
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PATTERN = b"abcdefghijklmnopqrstuvwxyz0123456789"
BLOCK = PATTERN * (65536 // len(PATTERN) + 2)
IO_SIZE = 65536


def pattern(offset, length):
    """Bytes [offset, offset + length) of PATTERN repeated forever."""
    start = offset % len(PATTERN)
    if start + length <= len(BLOCK):
        return BLOCK[start:start + length]
    return (PATTERN * ((start + length) // len(PATTERN) + 1))[start:start + length]


def pattern_pieces(n, size, start=0):
    offset = start
    while offset < n:
        k = min(size, n - offset)
        yield pattern(offset, k)
        offset += k


def chunk_frames(pieces):
    for piece in pieces:
        if piece:
            yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def reason(code):
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Status"


class State:
    """Everything shared by all listeners: request log, counters, extra listeners."""

    def __init__(self, verbose, tls=None):
        self.verbose = verbose
        self.tls = tls  # an ssl.SSLContext for HTTPS, or None
        self.lock = threading.Lock()
        self.conn_seq = 0
        self.inflight = 0
        self.group_inflight = {}
        self.listeners = []
        self.holds = {}  # key -> threading.Event set by /_/release
        self._reset()

    def _reset(self):  # caller holds the lock (or is __init__)
        self.log = []
        self.seq = 0
        self.peak = self.inflight
        self.peaks = {g: n for g, n in self.group_inflight.items() if n}
        self.flaky = {}

    def next_conn(self):
        with self.lock:
            self.conn_seq += 1
            return self.conn_seq

    def begin(self, entry, group):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.log.append(entry)
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            if group is not None:
                n = self.group_inflight.get(group, 0) + 1
                self.group_inflight[group] = n
                self.peaks[group] = max(self.peaks.get(group, 0), n)

    def end(self, entry, group):
        with self.lock:
            entry["end"] = time.monotonic()
            self.inflight -= 1
            if group is not None:
                self.group_inflight[group] -= 1

    def update(self, entry, **fields):
        with self.lock:
            entry.update(fields)

    def hold_event(self, key):
        with self.lock:
            return self.holds.setdefault(key, threading.Event())

    def flaky_attempt(self, key):
        with self.lock:
            n = self.flaky[key] = self.flaky.get(key, 0) + 1
            return n

    def snapshot(self):
        with self.lock:
            return {
                "requests": [dict(e) for e in self.log],
                "peak": self.peak,
                "inflight": self.inflight,
                "peaks": dict(self.peaks),
                "inflights": {g: n for g, n in self.group_inflight.items() if n},
            }

    def clear(self):
        with self.lock:
            self._reset()
            listeners, self.listeners = self.listeners, []
        for rec in listeners:
            rec["cancel"].set()
            with self.lock:
                server = rec["server"]
            if server is not None:
                server.shutdown()
                server.server_close()

    def listen_later(self, port, delay):
        rec = {"cancel": threading.Event(), "server": None}
        with self.lock:
            self.listeners.append(rec)

        def run():
            if rec["cancel"].wait(delay):
                return
            try:
                server = FixtureServer(("127.0.0.1", port), self)
            except OSError as exc:
                print(f"fixture: cannot listen on {port}: {exc}", file=sys.stderr, flush=True)
                return
            with self.lock:
                if rec["cancel"].is_set():
                    server.server_close()
                    return
                rec["server"] = server
            server.serve_forever(poll_interval=0.1)

        threading.Thread(target=run, daemon=True).start()


class FixtureServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address, state):
        self.state = state
        super().__init__(address, Handler)

    def server_bind(self):
        # HTTPServer.server_bind would call socket.getfqdn (a name lookup); skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def get_request(self):
        conn, address = super().get_request()
        if self.state.tls is not None:
            # Handshake later, in Handler.setup on the connection's thread, never in accept().
            conn = self.state.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fixture/1"

    entry = None
    group = None
    extra_headers = ()
    head_sent = False
    no_body = False

    # ---- plumbing -------------------------------------------------------

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()  # ssl.SSLError is an OSError: the connection is dropped
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.state = self.server.state
        self.conn_id = self.state.next_conn()

    def handle(self):
        try:
            super().handle()
        except OSError:  # BrokenPipe, ConnectionReset, socket closed by /reset, ...
            self.close_connection = True

    def log_message(self, fmt, *args):
        if self.state.verbose:
            super().log_message(fmt, *args)

    def __getattr__(self, name):
        # Route every method (GET, POST, PUT, DELETE, PATCH, OPTIONS, HEAD, ...).
        if name.startswith("do_"):
            return self.dispatch
        raise AttributeError(name)

    def handle_expect_100(self):
        # /expect-final answers with its final status instead of "100 Continue".
        if urlsplit(self.path).path == "/expect-final":
            return True
        return super().handle_expect_100()

    def q(self, name, default=None, conv=str):
        values = self.query.get(name)
        return conv(values[0]) if values else default

    def read_body(self, keep):
        """Read a Content-Length or chunked request body; returns (bytes kept, total length)."""
        parts, total = [], 0

        def take(n):
            nonlocal total
            while n > 0:
                data = self.rfile.read(min(n, IO_SIZE))
                if not data:
                    raise ConnectionAbortedError("client closed during request body")
                total += len(data)
                n -= len(data)
                if keep:
                    parts.append(data)

        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(IO_SIZE)
                if not line:
                    raise ConnectionAbortedError("client closed during chunked body")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    break
                take(size)
                self.rfile.readline(IO_SIZE)  # CRLF after chunk data
            while self.rfile.readline(IO_SIZE) not in (b"\r\n", b"\n", b""):
                pass  # trailers
        else:
            take(int(self.headers.get("Content-Length") or 0))
        return b"".join(parts), total

    def done(self):
        """Mark the recorded request finished (idempotent)."""
        if self.entry is not None:
            entry, self.entry = self.entry, None
            self.state.end(entry, self.group)

    def head(self, code, headers=(), length=0, chunked=False):
        bodyless = code < 200 or code in (204, 304)
        self.no_body = bodyless or self.command == "HEAD"
        lines = [f"{self.protocol_version} {code} {reason(code)}",
                 f"Date: {self.date_time_string()}", f"Server: {self.server_version}"]
        if not bodyless:
            lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}")
        if self.close_connection:
            lines.append("Connection: close")
        lines += [f"{k}: {v}" for k, v in list(headers) + list(self.extra_headers)]
        self.head_sent = True
        self.log_request(code)
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def emit(self, head, pieces=(), rate=0.0):
        """Write head then body pieces (paced at `rate` bytes/s if given)."""
        if self.no_body:
            pieces = ()
        pending, sent, t0 = head, 0, time.monotonic()
        for piece in pieces:
            if rate:
                self.wfile.write(pending)
                wait = t0 + sent / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                pending = piece
            elif len(pending) + len(piece) <= IO_SIZE:
                pending += piece
            else:
                self.wfile.write(pending)
                pending = piece
            sent += len(piece)
        self.done()
        self.wfile.write(pending)

    def send(self, code, body=b"", ctype="text/plain; charset=utf-8", headers=()):
        if isinstance(body, str):
            body = body.encode()
        head = self.head(code, [("Content-Type", ctype)] + list(headers), length=len(body))
        self.emit(head, [body])

    def send_json(self, obj, code=200):
        self.send(code, json.dumps(obj), "application/json")

    def stall(self, seconds):
        """Send nothing for `seconds`; returns early if the client closes the connection."""
        deadline = time.monotonic() + seconds
        poller = select.poll()
        poller.register(self.connection, select.POLLIN)
        while (left := deadline - time.monotonic()) > 0:
            if not poller.poll(min(left, 1.0) * 1000):
                continue
            try:
                # socket.socket.recv: peek at the TCP stream itself, also under TLS.
                if not socket.socket.recv(self.connection, 1, socket.MSG_PEEK):
                    return  # client hung up
            except OSError:
                return
            time.sleep(max(0.0, deadline - time.monotonic()))  # client sent more data: just wait
            return

    def reset(self):
        """Abort the connection with a TCP RST, sending nothing more."""
        self.done()
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Close the descriptor now, even though rfile/wfile still reference the socket.
        os.close(self.connection.detach())

    def truncated(self, n, code=200):
        self.close_connection = True  # then the server closes with a clean FIN
        head = self.head(code, [("Content-Type", "application/octet-stream")], length=n)
        self.wfile.write(head if self.no_body else head + pattern(0, n // 2))

    # ---- dispatch -------------------------------------------------------

    def dispatch(self):
        url = urlsplit(self.path)
        self.query = parse_qs(url.query, keep_blank_values=True)
        if url.path.startswith("/_/"):
            self.read_body(keep=False)
            return self.control(url.path)

        self.group = self.q("group")
        self.entry = {"seq": 0, "method": self.command, "path": self.path, "id": self.q("id"),
                      "group": self.group, "start": time.monotonic(), "end": None,
                      "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body_len": 0, "conn": self.conn_id}
        self.state.begin(self.entry, self.group)
        try:
            if url.path == "/expect-final":
                self.body, body_len = b"", 0  # read after the answer (expect_final)
            else:
                self.body, body_len = self.read_body(keep=url.path in ("/echo", "/inspect"))
            self.state.update(self.entry, body_len=body_len)
            self.extra_headers = [(h.partition(":")[0].strip(), h.partition(":")[2].strip())
                                  for h in self.query.get("header", []) if ":" in h]
            if self.q("delay"):
                time.sleep(float(self.q("delay")))
            self.route(url.path)
        except OSError:
            raise
        except Exception:
            traceback.print_exc()
            self.close_connection = True
            if not self.head_sent:
                self.send(500, traceback.format_exc())
        finally:
            self.done()

    def control(self, path):
        if path == "/_/log":
            self.send_json(self.state.snapshot())
        elif path == "/_/clear":
            self.state.clear()
            self.send_json({"ok": True})
        elif path == "/_/release":
            self.state.hold_event(self.q("key", "")).set()
            self.send_json({"ok": True})
        elif path == "/_/refuse-then-accept":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            self.state.listen_later(port, self.q("after", 1.0, float))
            self.send_json({"port": port})
        else:
            self.send(404, "not found")

    def route(self, path):
        parts = [unquote(p) for p in path.strip("/").split("/")]
        name, args = parts[0], parts[1:]
        if path == "/bytes":
            self.bytes()
        elif path == "/delay":
            time.sleep(self.q("s", 1.0, float))
            self.send(200, "ok")
        elif path == "/text":
            charset = self.q("charset")
            self.send(200, self.q("s", "").encode(charset or "utf-8"),
                      f"text/plain; charset={charset}" if charset else "text/plain")
        elif name == "status" and len(args) == 1:
            code = int(args[0])
            headers = [("X-Status", code)]
            if self.q("retry_after") is not None:
                headers.append(("Retry-After", self.q("retry_after")))
            self.send(code, f"status {code}", headers=headers)
        elif name == "basic-auth" and len(args) == 2:
            user, password = args
            expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if self.headers.get("Authorization", "") == expected:
                self.send_json({"authenticated": True, "user": user})
            else:
                self.send(401, "unauthorized", headers=[("WWW-Authenticate", 'Basic realm="fixture"')])
        elif name == "challenge" and len(args) == 1:
            # Always 401 with "WWW-Authenticate: SCHEME" (NTLM, Negotiate, ...): what a client
            # answers is in the log (the request's headers).
            self.send(401, "unauthorized", headers=[("WWW-Authenticate", args[0])])
        elif name == "redirect" and len(args) == 1:
            n = int(args[0])
            if n <= 0:
                self.send(200, "redirected")
            else:
                query = urlsplit(self.path).query
                self.send(302, headers=[("Location", f"/redirect/{n - 1}" + (f"?{query}" if query else ""))])
        elif path == "/redirect-to":
            if self.q("url") is None:
                return self.send(400, "missing url")
            self.send(self.q("status", 302, int), headers=[("Location", self.q("url"))])
        elif path == "/redirect-after":
            # The first n requests of a key get a 200, the later ones a redirect to url.
            if self.q("url") is None:
                return self.send(400, "missing url")
            if self.state.flaky_attempt("redirect-after:" + self.q("key", "")) <= self.q("n", 1, int):
                self.send(200, "not yet")
            else:
                self.send(302, headers=[("Location", self.q("url"))])
        elif path == "/echo":
            self.send_json({"method": self.command, "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": self.body.decode("latin-1"), "body_len": len(self.body)})
        elif path == "/inspect":
            self.send_json({"method": self.command, "target": self.path, "version": self.request_version,
                            "headers": [[k, v] for k, v in self.headers.items()],
                            "body": self.body.decode("latin-1"), "body_len": len(self.body),
                            "conn": self.conn_id})
        elif path == "/raw":
            self.raw()
        elif path == "/drop":
            self.drop()
        elif path == "/expect-final":
            self.expect_final()
        elif path == "/encoded":
            self.encoded()
        elif path == "/headers":
            self.send_json({k.lower(): v for k, v in self.headers.items()})
        elif path == "/upload":
            self.send_json({"received": self.entry["body_len"]})
        elif path == "/reset":
            self.reset()
        elif path == "/stall":
            self.stall(self.q("s", 30.0, float))
            self.close_connection = True
        elif path == "/stall-body":
            self.truncated(self.q("n", 1024, int))
            self.stall(self.q("s", 30.0, float))
        elif path == "/truncated":
            self.truncated(self.q("n", 1024, int))
        elif path == "/flaky":
            self.flaky()
        elif path == "/trickle":
            self.trickle()
        elif path == "/hold":
            self.hold()
        else:
            self.send(404, "not found")

    def trickle(self):
        where = self.q("where", "body")
        every = self.q("every", 1.0, float)
        count = self.q("n", None, int)
        size = max(1, self.q("size", 1, int))
        self.close_connection = True
        if where == "body":
            length = (count or 1 << 40) * size
            self.wfile.write(self.head(200, [("Content-Type", "application/octet-stream")], length=length))
            piece = lambda i: pattern(i * size, size)
        else:
            self.head_sent = True
            self.wfile.write(f"{self.protocol_version} 200 OK\r\n".encode("latin-1"))
            if where == "headers":
                piece = lambda i: f"X-Trickle-{i}: x\r\n".encode("latin-1")
            else:
                self.wfile.write(b"X-Endless: ")
                piece = lambda i: b"y" * size
        i = 0
        while count is None or i < count:
            self.wfile.write(piece(i))
            self.wfile.flush()
            i += 1
            if count is not None and i == count:
                break
            if self.client_gone(every):
                return
        self.done()

    def hold(self):
        n = self.q("n", 1000, int)
        first = min(n, self.q("first", 0, int))
        released = self.state.hold_event(self.q("key", ""))
        self.close_connection = not self.q("keep", 0, int)
        head = self.head(self.q("status", 200, int), [("Content-Type", "application/octet-stream")], length=n)
        self.wfile.write(head + pattern(0, first))
        self.wfile.flush()
        while not released.is_set():
            if self.client_gone(0.05):
                self.state.update(self.entry, client_gone=True)
                return
        self.emit(b"", [pattern(first, n - first)])

    def raw(self):
        data = base64.urlsafe_b64decode(self.q("b64", "") + "==")
        late = self.q("late", None)
        self.close_connection = late is None
        self.head_sent = True
        self.done()
        self.wfile.write(data)
        self.wfile.flush()
        if late is not None:  # bytes after the reply, on the connection kept open
            time.sleep(self.q("after", 0.05, float))
            self.wfile.write(base64.urlsafe_b64decode(late + "=="))
            self.wfile.flush()

    def drop(self):
        attempt = self.state.flaky_attempt("drop:" + self.q("key", ""))
        n = self.q("n", None, int)
        if n is None or attempt <= n:
            self.close_connection = True
            self.head_sent = True
            self.state.update(self.entry, dropped=True)
            return
        self.send_json({"attempt": attempt})

    def expect_final(self):
        entry = self.entry  # (sending the answer ends the entry)
        self.close_connection = True
        code = self.q("status", 417, int)
        self.send(code, f"status {code}")
        self.wfile.flush()
        total = 0
        try:
            while True:
                data = self.connection.recv(IO_SIZE)
                if not data:
                    break
                total += len(data)
        except OSError:
            pass
        self.state.update(entry, body_len=total, drained=True)

    def encoded(self):
        text = self.q("s", None)
        data = text.encode() if text is not None else b"".join(
            b"line %04d: the quick brown fox jumps over the lazy dog\n" % i for i in range(40))[:2000]
        coding = self.q("coding", "gzip")
        if coding == "gzip":
            body = gzip.compress(data)
        elif coding == "deflate":
            body = zlib.compress(data)
        elif coding == "raw-deflate":
            c = zlib.compressobj(wbits=-15)
            body = c.compress(data) + c.flush()
        else:
            body = data
        chunked = self.q("chunked", "0") not in ("0", "", "false")
        headers = [("Content-Type", "text/plain; charset=utf-8"),
                   ("Content-Encoding", "deflate" if coding == "raw-deflate" else coding)]
        head = self.head(200, headers, length=len(body), chunked=chunked)
        self.emit(head, chunk_frames([body]) if chunked else [body])

    def client_gone(self, seconds):
        """Wait `seconds`; True as soon as the client closes the connection."""
        poller = select.poll()
        poller.register(self.connection, select.POLLIN)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if poller.poll(left * 1000):
                try:
                    if not socket.socket.recv(self.connection, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                        return True
                except BlockingIOError:
                    pass
                except OSError:
                    return True
                time.sleep(min(left, 0.05))
        return False

    def bytes(self):
        n = self.q("n", 0, int)
        chunked = self.q("chunked", "0") not in ("0", "", "false")
        rate = self.q("rate", 0.0, float)
        size = self.q("chunk", 16384, int) if chunked else IO_SIZE
        if rate:
            size = max(1, min(size, int(rate / 10)))  # about ten writes per second
        code, start, end, range_headers = self.byte_range(n)
        if code == 200:
            code = self.q("status", 200, int)
        pieces = pattern_pieces(end, max(1, size), start)
        if chunked:
            pieces = chunk_frames(pieces)
        head = self.head(code, [("Content-Type", "application/octet-stream")] + range_headers,
                         length=end - start, chunked=chunked)
        self.emit(head, pieces, rate)

    def byte_range(self, n):
        """The part of an N-byte body to send: (status, start, end, headers). With ranges=1, a
        "Range: bytes=S-[E]" request header gets 206 and a Content-Range (416 when S is past the
        end); ranges=wrong answers 206 from byte 0 whatever was asked (a broken server).
        Otherwise, or without a Range header: 200 and the whole body."""
        mode = self.q("ranges", "0")
        asked = re.fullmatch(r"\s*bytes=(\d+)-(\d*)\s*", self.headers.get("Range", ""))
        if mode in ("0", "", "false") or not asked:
            return 200, 0, n, []
        if mode == "wrong":
            return 206, 0, n, [("Content-Range", f"bytes 0-{n - 1}/{n}")]
        start = int(asked.group(1))
        end = min(int(asked.group(2)) + 1, n) if asked.group(2) else n
        if start >= n or end <= start:
            return 416, 0, 0, [("Content-Range", f"bytes */{n}")]
        return 206, start, end, [("Content-Range", f"bytes {start}-{end - 1}/{n}")]

    def flaky(self):
        attempt = self.state.flaky_attempt(self.q("key", ""))
        n = self.q("n", 16, int)
        if attempt > self.q("fail", 1, int):
            code, start, end, range_headers = self.byte_range(n)
            head = self.head(code, [("Content-Type", "application/octet-stream"), ("X-Attempt", attempt)]
                             + range_headers, length=end - start)
            return self.emit(head, [pattern(start, end - start)])
        mode = self.q("mode", "status")
        if mode == "reset":
            self.reset()
        elif mode == "status":
            code = self.q("code", 503, int)
            headers = [("X-Attempt", attempt)]
            if self.q("retry_after") is not None:
                headers.append(("Retry-After", self.q("retry_after")))
            self.send(code, f"status {code}", headers=headers)
        elif mode == "truncated":
            self.truncated(n)
        elif mode == "stall":
            self.stall(self.q("s", 30.0, float))
            self.close_connection = True
        else:
            self.send(400, f"unknown mode {mode}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    parser.add_argument("--parent-pid", type=int, default=0,
                        help="exit when this process is gone (for parents whose spawn goes through "
                             "an intermediate process, so that our own parent is not theirs)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this PEM certificate (chain)")
    parser.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    args = parser.parse_args()
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)

    def stop(signum, frame):
        raise SystemExit(0)

    # A parent may hand us a signal mask with these blocked (threads of a test runner do).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = FixtureServer(("127.0.0.1", args.port), State(args.verbose, tls))

    if args.exit_on_stdin_eof:
        def watch_stdin():
            while sys.stdin.buffer.read1(IO_SIZE):
                pass
            os._exit(0)  # not a signal: the parent may have left SIGTERM blocked in our mask
        threading.Thread(target=watch_stdin, daemon=True).start()

        # The parent may have leaked the write end of our stdin into us (a pipe created without
        # close-on-exec), so EOF would never come: also exit when the parent process is gone.
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)  # not a signal: the parent may have left SIGTERM blocked in our mask
        threading.Thread(target=watch_parent, daemon=True).start()

    if args.parent_pid:
        def watch_pid():
            while True:
                try:
                    os.kill(args.parent_pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(0.5)
            os._exit(0)  # not a signal: the parent may have left SIGTERM blocked in our mask
        threading.Thread(target=watch_pid, daemon=True).start()

    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except SystemExit:
        pass
    finally:
        server.server_close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # don't wait for (or get tangled up with) handler threads


if __name__ == "__main__":
    main()
