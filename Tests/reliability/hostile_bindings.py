#!/usr/bin/env python3
"""The hostile server (hostile_server.py) through the Python binding: connections closed or reset
in every phase, conflicting Content-Length values, an unasked 101 and Content-Encoding bombs, for
collected bodies, on_body, stream=True and output files, with Queue and AsyncQueue. Each request:
exactly one on_complete, the documented outcome, the process alive, and for the bombs the peak
RSS within a budget. Then queues left to the garbage collector while the server holds their
transfers: threads and descriptors back to what they were.

    REQUESTQUEUE_LIBRARY=.../librequestqueue.so PYTHONPATH=bindings/python/src \\
        python3 Tests/reliability/hostile_bindings.py [--tmp DIR] [--rss-budget-mib N]

Prints "hostile_bindings: N checks passed" and exits 0 when every check passed.
"""

import asyncio
import base64
import os
import subprocess
import sys
import tempfile
import urllib.parse

import requestqueue as rq
from requestqueue import Outcome

HERE = os.path.dirname(os.path.abspath(__file__))
checks = 0


def check(condition, message):
    global checks
    if not condition:
        print(f"hostile_bindings: FAIL: {message}", file=sys.stderr, flush=True)
        sys.exit(1)
    checks += 1


def raw(reply, extra=""):
    return "/case/raw?b64=" + urllib.parse.quote(base64.b64encode(reply.encode("latin-1")).decode(), safe="") + extra


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_kib("VmRSS")


# (reply, query, outcome after a close, body of a complete reply)
PHASES = [
    ("", "", Outcome.CONNECTION_LOST, None),
    ("HTTP/1.1 200 OK\r\nContent-Le", "", Outcome.CONNECTION_LOST, None),
    ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", "", Outcome.CONNECTION_LOST, None),
    ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n", "", Outcome.CONNECTION_LOST, None),
    ("HTTP/1.1 200 OK\r\n\r\nclose-delimited", "", Outcome.OK, b"close-delimited"),
    ("HTTP/1.1 200 OK\r\n\r\nclose-delimited", "&rst=1", Outcome.CONNECTION_LOST, None),
    ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello12", "", Outcome.BAD_RESPONSE, None),
    ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframes", "", Outcome.BAD_RESPONSE, None),
]


class Sync:
    """Runs requests on a Queue (dispatch delivery, callbacks in queue.wait)."""

    def __init__(self, base, tmp):
        self.base, self.tmp = base, tmp

    def run(self, path, sink, **options):
        completions = []
        pieces = []
        out = os.path.join(self.tmp, "hostile-bindings-out")
        if os.path.exists(out):
            os.unlink(out)
        if sink == "on_body":
            options["on_body"] = lambda request, data, offset: pieces.append(len(data))
        elif sink == "file":
            options["output_file"] = out
        with rq.Queue() as queue:
            request = queue.add(self.base + path, on_complete=completions.append, stream=(sink == "stream"), **options)
            if sink == "stream":
                try:
                    for chunk in request.iter_bytes():
                        pieces.append(len(chunk))
                except rq.RequestError:
                    pass
            queue.wait()
        check(len(completions) == 1, f"{path} ({sink}): {len(completions)} completions")
        response = request.response
        got = response.body if sink == "collected" else (
            os.path.getsize(out) if sink == "file" and os.path.exists(out) else sum(pieces))
        return response, got


def close_phases(runner):
    for reply, extra, outcome, body in PHASES:
        for sink in ("collected", "on_body", "stream", "file"):
            response, got = runner.run(raw(reply, extra), sink)
            check(response.outcome == outcome, f"{reply[:40]!r}{extra} ({sink}): {response.outcome!r} "
                  f"({response.message}), expected {outcome!r}")
            if body is not None:
                expected = body if sink == "collected" else len(body)
                check(got == expected, f"{reply[:40]!r} ({sink}): body {got!r}, expected {expected!r}")


def bombs(runner, budget_kib):
    for coding in ("gzip", "zstd", "br"):
        for sink in ("on_body", "stream", "file"):
            before = reset_peak()
            response, got = runner.run(f"/case/ce-bomb?coding={coding}&sink={sink}", sink)
            grown = status_kib("VmHWM") - before
            check(grown <= budget_kib, f"{coding} bomb ({sink}): the peak RSS grew by {grown} KiB")
            check((response.outcome == Outcome.OK and got == 128 << 20)
                  or (response.outcome == Outcome.BAD_RESPONSE and "decompression bomb" in response.message),
                  f"{coding} bomb ({sink}): {response.outcome!r} ({response.message}), {got} bytes")
        response, got = runner.run(f"/case/ce-bomb?coding={coding}&limited=1", "collected", max_response_size=1 << 20)
        check(response.outcome == Outcome.RESPONSE_TOO_LARGE and len(got) <= 1 << 20,
              f"{coding} bomb, at most 1 MiB: {response.outcome!r}, {len(got)} bytes")


ODD_COOKIES = ("HTTP/1.1 200 OK\r\nSet-Cookie: e1=1; Expires=Sun, 06 Nov 99999999999 08:49:37 GMT\r\n"
               "Set-Cookie: e2=1; Max-Age=99999999999999999999\r\nSet-Cookie: e3=1; Max-Age=-99999999999999999999\r\n"
               "Set-Cookie: e5=1; Max-Age=9223372036854775807\r\nSet-Cookie: e6=\t\x01x\r\nContent-Length: 2\r\n\r\nok")


def cookies(base):
    """Expiry dates and ages that overflow, read back through Queue.cookies()."""
    with rq.Queue() as queue:
        response = queue.fetch(base + raw(ODD_COOKIES), cookies=True)
        check(response.outcome == Outcome.OK, f"odd cookies: {response.outcome!r}")
        jar = queue.cookies()
    names = sorted(c.name for c in jar)
    check(set(names) <= {"e1", "e2", "e3", "e5", "e6"} and "e2" in names, f"odd cookies: the jar holds {names}")
    check(all(isinstance(c.expires, int) and c.expires >= 0 for c in jar), f"odd cookies: {jar}")
    # A server setting 50 new cookies on every response: the jar keeps its budget (3000 cookies),
    # the newest stay, the oldest go.
    with rq.Queue() as queue:
        for i in range(65):
            response = queue.fetch(f"{base}/case/set-cookies?count=50&size=1&prefix=f{i}_", cookies=True)
            check(response.outcome == Outcome.OK, f"cookie flood: {response.outcome!r}")
        names = {c.name for c in queue.cookies()}
    check(len(names) <= 3000 and "f64_49" in names and "f0_0" not in names,
          f"cookie flood: the jar holds {len(names)} cookies (budget 3000), newest kept: {'f64_49' in names}")


# Bytes that are not UTF-8 in a reason phrase, header names and values, a charset, a Location, a
# cookie and a body.
ODD_BYTES = [
    b"HTTP/1.1 200 \xff\xfe\x01\r\n: empty\r\n\xff\xfe: \x80\x81\r\nX-A:\xc3\x28\r\n"
    b"Content-Type: text/plain; charset=\xff\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 302 Found\r\nLocation: /case/status?code=200&x=\xff\xfe\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=no-such-charset\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00a",
    b"HTTP/1.1 200 OK\r\nSet-Cookie: \xff=\xfe; Path=/\r\nContent-Length: 2\r\n\r\nok",
]


def odd_bytes(base):
    """Every part of the response reads back as str (the bytes kept, decoded or replaced), no
    exception: headers, URL, text, cookies."""
    with rq.Queue() as queue:
        for reply in ODD_BYTES:
            response = queue.fetch(base + raw(reply.decode("latin-1")), cookies=True)
            check(response.outcome == Outcome.OK and response.status == 200, f"{reply[:30]!r}: {response.outcome!r}")
            pairs = list(response.headers.items())
            check(all(isinstance(n, str) and isinstance(v, str) for n, v in pairs) and isinstance(response.url, str)
                  and isinstance(response.text, str), f"{reply[:30]!r}: headers {pairs}, text {response.text!r}")
        check(len(pairs) == 2 and [c.name for c in queue.cookies()] == ["\ufffd"], f"odd cookie: {queue.cookies()}")


# Transfers a hostile server holds open: a bomb and an endless body streamed and never read, a
# server that never answers, a header line that never ends, an upload never read.
HELD = ["/case/ce-bomb?coding=zstd&held=1", "/case/endless-error?code=200&held=2",
        "/case/silent?held=3", "/case/endless-header-line?pace=0.05&held=4", "/case/silent?held=5&upload=1"]


def dropped(base):
    """Queues and requests left to the garbage collector while a hostile server holds their
    transfers (streams paused with libcurl's buffer full, no answer, endless headers): the binding
    frees them from its own thread (never from the collector), and the threads and descriptors of
    the process come back to what they were."""
    import gc
    import requestqueue._runtime as runtime
    import warnings

    def resources():
        return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))

    rq.Queue().close()   # the library and the binding's thread are set up
    gc.collect()
    runtime._wait_for_reaper()
    baseline = resources()

    def hold(stream_first):
        queue = rq.Queue(max_concurrent=0, defaults={"idle_timeout": 0, "low_speed_limit": (0, 0)})
        requests = []
        for path in HELD:
            options = {"stream": True} if "upload" not in path else {"method": "PUT", "body": b"u" * (8 << 20)}
            requests.append(queue.add(base + path + f"&first={stream_first}", **options))
        if stream_first:   # one chunk read from each stream, then the iterator dropped
            for request in requests[:2]:
                next(iter(request.iter_bytes()))
        requests[0].me = requests[0]   # a cycle too
        queue.me = queue

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for stream_first in (0, 1):
            hold(stream_first)
            gc.collect()
            runtime._wait_for_reaper()
    after = resources()
    check(after == baseline, f"queues dropped with held transfers: threads and descriptors {after}, before {baseline}")
    check(len(runtime._open_queues) == 0 and len(runtime._registry) == 0,
          f"dropped: {len(runtime._open_queues)} queues open, {len(runtime._registry)} requests registered")


async def async_cases(base):
    async with rq.AsyncQueue() as queue:
        for reply, extra, outcome, body in PHASES:
            completions = []
            request = queue.add(base + raw(reply, extra), on_complete=completions.append)
            try:
                await request
            except rq.RequestError:
                pass
            await queue.wait()
            check(len(completions) == 1, f"async {reply[:40]!r}: {len(completions)} completions")
            check(request.response.outcome == outcome, f"async {reply[:40]!r}{extra}: {request.response.outcome!r}")
            if body is not None:
                check(request.response.body == body, f"async {reply[:40]!r}: body {request.response.body!r}")
        completions = []
        request = queue.add(base + "/case/ce-bomb?coding=zstd&async=1", stream=True, on_complete=completions.append)
        streamed = 0
        try:
            async for chunk in request.aiter_bytes():
                streamed += len(chunk)
        except rq.RequestError:
            pass
        await queue.wait()
        check(len(completions) == 1, f"async zstd bomb: {len(completions)} completions")
        response = request.response
        check((response.outcome == Outcome.OK and streamed == 128 << 20)
              or (response.outcome == Outcome.BAD_RESPONSE and "decompression bomb" in response.message),
              f"async zstd bomb: {response.outcome!r} ({response.message}), {streamed} bytes")


def main():
    args = sys.argv[1:]
    tmp = tempfile.gettempdir()
    budget_kib = 256 * 1024
    while args:
        if args[0] == "--tmp":
            tmp = args[1]
        elif args[0] == "--rss-budget-mib":
            budget_kib = int(args[1]) * 1024
        else:
            sys.exit(f"usage: {sys.argv[0]} [--tmp DIR] [--rss-budget-mib N]")
        args = args[2:]
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "hostile_server.py"), "--exit-on-stdin-eof"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        check(line.startswith("PORT "), f"the hostile server did not start: {line!r}")
        base = f"http://127.0.0.1:{line.split()[1]}"
        runner = Sync(base, tmp)
        close_phases(runner)
        bombs(runner, budget_kib)
        cookies(base)
        odd_bytes(base)
        dropped(base)
        asyncio.run(async_cases(base))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    print(f"hostile_bindings: {checks} checks passed", flush=True)


if __name__ == "__main__":
    main()
