"""Streaming bodies (on_body, iter_bytes, aiter_bytes), output files with resume, response metrics,
and memory that stays bounded for a large streamed download."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List, Tuple

import pytest

import requestqueue as rq
from conftest import pattern


class Boom(Exception):
    pass


@pytest.fixture
def queue():
    with rq.Queue(max_concurrent=4) as q:
        yield q


def run(coro):
    return asyncio.run(coro)


# -- on_body ---------------------------------------------------------------------------------------


def test_on_body_receives_the_body_in_order_instead_of_the_response(server, queue):
    events: List[Tuple[str, int, int]] = []
    pieces: List[bytes] = []

    def on_body(request, data, offset):
        events.append(("body", offset, len(data)))
        pieces.append(data)

    request = queue.add(server.url("/bytes?n=300000"), on_body=on_body,
                        on_complete=lambda r: events.append(("complete", 0, 0)))
    response = request.result()
    assert b"".join(pieces) == pattern(300000)
    assert all(isinstance(p, bytes) and p for p in pieces)
    offsets = [offset for kind, offset, _ in events if kind == "body"]
    sizes = [size for kind, _, size in events if kind == "body"]
    assert offsets == [sum(sizes[:i]) for i in range(len(sizes))]  # contiguous, from 0
    assert events[-1][0] == "complete"  # every piece before the completion
    assert response.status == 200 and response.body == b""
    assert response.metrics.bytes_down == 300000


def test_on_body_is_not_called_for_an_error_status(server, queue):
    pieces: List[bytes] = []
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url("/bytes?n=500&status=404"), on_body=lambda r, d, o: pieces.append(d))
    assert pieces == []
    assert info.value.status == 404 and info.value.response.body == pattern(500)


def test_exception_in_on_body_cancels_the_request_and_is_raised(server, queue, uid):
    calls = []

    def on_body(request, data, offset):
        calls.append(offset)
        raise Boom(f"at {offset}")

    request = queue.add(server.url(f"/bytes?n=20000000&id={uid}"), on_body=on_body)
    with pytest.raises(Boom, match="at 0"):
        request.result()
    queue.wait()
    assert calls == [0]  # pieces that arrive after the failure are not handed to the callback
    assert request.response.outcome is rq.Outcome.CANCELLED
    assert len(server.requests(id=uid)) == 1


def test_cancel_from_on_body(server, queue):
    seen = []

    def on_body(request, data, offset):
        seen.append(offset)
        request.cancel()

    with pytest.raises(rq.RequestCancelled):
        queue.fetch(server.url("/bytes?n=20000000"), on_body=on_body)
    assert seen[0] == 0


def test_a_retried_attempt_starts_the_body_over_at_offset_zero(server, queue, uid):
    attempts: List[List[bytes]] = []

    def on_body(request, data, offset):
        if offset == 0:
            attempts.append([])
        attempts[-1].append(data)

    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=1&mode=truncated&n=100000"), retry=True,
                           retry_delay=0, on_body=on_body)
    assert response.attempts == 2 and response.body == b""
    assert len(attempts) == 2
    assert b"".join(attempts[0]) == pattern(50000)  # the truncated first attempt
    assert b"".join(attempts[1]) == pattern(100000)


def test_only_one_destination_for_the_body(server):
    url = server.url("/")
    with pytest.raises(TypeError, match="one place"):
        rq.Request(url, on_body=lambda r, d, o: None, stream=True)
    with pytest.raises(TypeError, match="one place"):
        rq.Request(url, on_body=lambda r, d, o: None, output_file="/tmp/x")
    with pytest.raises(TypeError, match="one place"):
        rq.Request(url, stream=True, output_file="/tmp/x")
    with pytest.raises(TypeError, match="resume"):
        rq.Request(url, resume=True)


# -- iter_bytes (Queue) ----------------------------------------------------------------------------


def test_iter_bytes(server, queue):
    request = queue.add(server.url("/bytes?n=1000000&chunked=1&chunk=30000"), stream=True)
    chunks = list(request.iter_bytes())
    assert b"".join(chunks) == pattern(1000000) and len(chunks) > 1
    response = request.result()
    assert response.body == b"" and response.metrics.bytes_down == 1000000
    assert list(request.iter_bytes()) == []  # read already: nothing more


def test_iter_bytes_raises_the_error_of_the_request(server, queue):
    request = queue.add(server.url("/bytes?n=300&status=503"), stream=True)
    with pytest.raises(rq.HTTPStatusError) as info:
        for _ in request.iter_bytes():
            raise AssertionError("no piece of an error response is streamed")
    assert info.value.response.body == pattern(300)
    request = queue.add(server.url("/truncated?n=100000"), stream=True)
    received = bytearray()
    with pytest.raises(rq.ConnectionLostError):
        for chunk in request.iter_bytes():
            received += chunk
    assert bytes(received) == pattern(50000)


def test_leaving_iter_bytes_early_cancels_the_request(server, queue, uid):
    request = queue.add(server.url(f"/bytes?n=50000000&id={uid}"), stream=True)
    for chunk in request.iter_bytes():
        assert chunk
        break
    with pytest.raises(rq.RequestCancelled):
        request.result()
    assert len(server.requests(id=uid)) == 1


def test_iter_bytes_after_a_retry_restarts_the_body(server, queue, uid):
    # The first attempt is truncated after 50000 bytes; the retry comes 1 s later.
    request = queue.add(server.url(f"/flaky?key={uid}&fail=1&mode=truncated&n=100000"), stream=True,
                        retry=True, retry_delay=1)
    first = bytearray()
    with pytest.raises(rq.BodyRestartedError) as info:
        for chunk in request.iter_bytes():
            first += chunk
    assert info.value.request is request
    assert 0 < len(first) <= 50000 and bytes(first) == pattern(len(first))
    assert b"".join(request.iter_bytes()) == pattern(100000)  # the new attempt, from its start
    assert request.result().attempts == 2


def test_a_body_read_after_a_retry_holds_only_the_last_attempt(server, queue, uid):
    request = queue.add(server.url(f"/flaky?key={uid}&fail=1&mode=truncated&n=100000"), stream=True,
                        retry=True, retry_delay=0)
    queue.wait()  # everything arrives before anyone reads: the failed attempt's data is dropped
    assert b"".join(request.iter_bytes()) == pattern(100000)


def test_fetch_refuses_stream(server, queue):
    with pytest.raises(TypeError, match="add"):
        queue.fetch(server.url("/bytes?n=1"), stream=True)
    with pytest.raises(TypeError, match="add"):
        queue.fetch(rq.Request(server.url("/bytes?n=1"), stream=True))

    async def main():
        async with rq.AsyncQueue() as q:
            with pytest.raises(TypeError, match="add"):
                await q.fetch(server.url("/bytes?n=1"), stream=True)

    run(main())
    assert server.requests() == []


def test_iter_bytes_needs_stream_and_the_right_queue(server, queue):
    plain = queue.add(server.url("/bytes?n=1"))
    with pytest.raises(rq.InvalidStateError, match="stream=True"):
        plain.iter_bytes()
    with pytest.raises(rq.InvalidStateError, match="never added"):
        rq.Request(server.url("/"), stream=True).iter_bytes()
    streamed = queue.add(server.url("/bytes?n=1"), stream=True)
    with pytest.raises(rq.InvalidStateError, match="aiter_bytes|Queue"):
        streamed.aiter_bytes()
    assert b"".join(streamed.iter_bytes()) == b"a"


def test_wait_head_gives_status_and_headers_before_the_body(server, queue, uid):
    request = queue.add(server.url(f"/hold?key={uid}&n=5000&id={uid}"), stream=True)
    assert request.head is None
    head = request.wait_head()
    assert head is request.head and not request.done()  # the server still holds the body
    assert head.status == 200 and head.headers["content-length"] == "5000" and head.body == b""
    assert head.url == server.url(f"/hold?key={uid}&n=5000&id={uid}")
    server._get(f"/_/release?key={uid}")
    assert b"".join(request.iter_bytes()) == pattern(5000)
    # A redirect that is followed has no head; each attempt of a retried request has its own.
    redirected = queue.add(server.url("/redirect/2"), stream=True)
    assert b"".join(redirected.iter_bytes()) == b"redirected"
    assert redirected.head.status == 200 and redirected.head.url == server.url("/redirect/0")
    retried = queue.add(server.url(f"/flaky?key={uid}&fail=1&mode=status&code=503&n=10"), stream=True,
                        retry=True, retry_statuses=[503], retry_delay=0.01)
    assert retried.wait_head().status == 503
    assert b"".join(retried.iter_bytes()) == pattern(10)
    assert retried.head.status == 200 and retried.head.headers["x-attempt"] == "2"
    # None when the request ended before any response.
    failed = queue.add(server.url("/reset"), stream=True)
    assert failed.wait_head() is None
    with pytest.raises(rq.RequestError):
        failed.result()
    with pytest.raises(rq.InvalidStateError, match="stream=True"):
        queue.add(server.url("/bytes?n=1")).wait_head()


def test_await_head(server, uid):
    async def main():
        async with rq.AsyncQueue() as q:
            request = q.add(server.url(f"/hold?key={uid}&n=5000&id={uid}"), stream=True)
            head = await request.await_head()
            assert head.status == 200 and not request.done()
            await asyncio.get_running_loop().run_in_executor(None, server._get, f"/_/release?key={uid}")
            assert b"".join([piece async for piece in request.aiter_bytes()]) == pattern(5000)
            error = q.add(server.url("/status/404"), stream=True)
            assert (await error.await_head()).status == 404

    run(main())


# -- aiter_bytes (AsyncQueue) ----------------------------------------------------------------------


def test_aiter_bytes(server):
    async def main():
        async with rq.AsyncQueue() as q:
            requests = [q.add(server.url(f"/bytes?n={n}"), stream=True) for n in (0, 1, 700000)]
            bodies = []
            for request in requests:
                bodies.append(b"".join([chunk async for chunk in request.aiter_bytes()]))
            assert bodies == [b"", b"a", pattern(700000)]
            assert [(await r).body for r in requests] == [b""] * 3
            with pytest.raises(rq.InvalidStateError, match="iter_bytes|Queue"):
                q.add(server.url("/bytes?n=1"), stream=True).iter_bytes()
            error = q.add(server.url("/status/404"), stream=True)
            with pytest.raises(rq.HTTPStatusError):
                async for _ in error.aiter_bytes():
                    pass

    run(main())


def test_a_slow_async_reader_holds_back_the_transfer(server):
    """While the unread buffer is over STREAM_BUFFER_LIMIT the queue stops delivering, so it stays
    near that limit however far the reader is behind (without it, the body piles up in memory)."""
    size = 8 * rq.STREAM_BUFFER_LIMIT
    high_water = 0

    async def main():
        nonlocal high_water
        async with rq.AsyncQueue() as q:
            request = q.add(server.url(f"/bytes?n={size}"), stream=True)
            received = 0
            async for chunk in request.aiter_bytes():
                received += len(chunk)
                high_water = max(high_water, request._buffered)
                await asyncio.sleep(0.001)  # a slow reader
            assert received == size
            assert (await request).metrics.bytes_down == size

    run(main())
    assert rq.STREAM_BUFFER_LIMIT <= high_water <= 3 * rq.STREAM_BUFFER_LIMIT


def test_a_reader_may_await_other_requests_of_its_queue(server, uid):
    """Deliveries held back for a slow reader go on while a task awaits another request of the
    queue (the reader itself may be that task) or the queue itself."""
    size = 8 * rq.STREAM_BUFFER_LIMIT

    async def main():
        async with rq.AsyncQueue(max_concurrent=0) as q:
            request = q.add(server.url(f"/bytes?n={size}"), stream=True)
            received = fetched = 0
            async for chunk in request.aiter_bytes():
                if received == 0:
                    while request._buffered <= rq.STREAM_BUFFER_LIMIT and not request.done():
                        await asyncio.sleep(0.01)  # let the buffer fill up: deliveries stop
                    assert q._reading is False
                    response = await asyncio.wait_for(q.fetch(server.url(f"/bytes?n=3&id={uid}")), 60)
                    fetched += len(response.body)
                received += len(chunk)
            assert (received, fetched) == (size, 3)

    run(main())


def test_cancelling_the_reading_task_cancels_the_request(server, uid):
    async def main():
        async with rq.AsyncQueue() as q:
            request = q.add(server.url(f"/bytes?n=50000000&id={uid}"), stream=True)
            started = asyncio.Event()

            async def reader():
                async for _ in request.aiter_bytes():
                    started.set()

            task = asyncio.ensure_future(reader())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(rq.RequestCancelled):
                await request

    run(main())


# -- output files ----------------------------------------------------------------------------------


def test_output_file(server, queue, tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"x" * 500000)  # an existing file is replaced
    response = queue.fetch(server.url("/bytes?n=200000"), output_file=target)
    assert target.read_bytes() == pattern(200000)
    assert response.body == b"" and response.metrics.bytes_down == 200000
    # A str path, relative to the working directory.
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        queue.fetch(server.url("/bytes?n=10"), output_file="relative.bin")
    finally:
        os.chdir(old)
    assert (tmp_path / "relative.bin").read_bytes() == b"abcdefghij"


def test_output_file_is_not_touched_by_an_error_status(server, queue, tmp_path):
    target = tmp_path / "never.bin"
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url("/bytes?n=100&status=500"), output_file=target)
    assert info.value.response.body == pattern(100)
    assert not target.exists()


def test_resume_continues_a_partial_file_with_a_range_request(server, queue, tmp_path, uid):
    target = tmp_path / "partial.bin"
    target.write_bytes(pattern(40000))
    response = queue.fetch(server.url(f"/bytes?n=100000&ranges=1&id={uid}"), output_file=target, resume=True)
    assert response.status == 206
    assert target.read_bytes() == pattern(100000)
    assert response.metrics.bytes_down == 60000  # this transfer's bytes only
    assert server.requests(id=uid)[0]["headers"]["range"] == "bytes=40000-"
    # Complete already: the server answers 416, an HTTP error, and the file stays as it was.
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url(f"/bytes?n=100000&ranges=1&id={uid}"), output_file=target, resume=True)
    assert info.value.status == 416
    assert target.read_bytes() == pattern(100000)


def test_resume_with_a_server_that_ignores_ranges_rewrites_the_file(server, queue, tmp_path, uid):
    target = tmp_path / "partial.bin"
    target.write_bytes(b"stale" * 1000)
    response = queue.fetch(server.url(f"/bytes?n=30000&id={uid}"), output_file=target, resume=True)
    assert response.status == 200 and target.read_bytes() == pattern(30000)
    assert server.requests(id=uid)[0]["headers"]["range"] == "bytes=5000-"


def test_resume_refuses_a_range_that_starts_elsewhere(server, queue, tmp_path):
    target = tmp_path / "partial.bin"
    target.write_bytes(pattern(1000))
    with pytest.raises(rq.BadResponseError):
        queue.fetch(server.url("/bytes?n=5000&ranges=wrong"), output_file=target, resume=True)
    assert target.read_bytes() == pattern(1000)


def test_resume_after_a_failed_attempt(server, queue, tmp_path, uid):
    """A failed attempt leaves what it wrote; the retry continues from there."""
    target = tmp_path / "retried.bin"
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=1&mode=truncated&n=100000&ranges=1"),
                           output_file=target, resume=True, retry=True, retry_delay=0)
    assert response.attempts == 2 and response.status == 206
    assert target.read_bytes() == pattern(100000)
    logged = server.requests(path_prefix=f"/flaky?key={uid}")
    assert "range" not in logged[0]["headers"] and logged[1]["headers"]["range"] == "bytes=50000-"


def test_an_output_file_that_cannot_be_written_is_an_output_file_error(server, queue, tmp_path):
    target = tmp_path / "no-such-folder" / "out.bin"
    with pytest.raises(rq.OutputFileError) as info:
        queue.fetch(server.url("/bytes?n=100"), output_file=target)
    assert isinstance(info.value, OSError) and isinstance(info.value, rq.RequestError)
    assert info.value.outcome is rq.Outcome.FILE_ERROR
    assert str(target) in info.value.message
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(server.url("/"), output_file="")
    with pytest.raises(TypeError):
        rq.Request(server.url("/"), output_file=5)  # type: ignore[arg-type]


# -- metrics ---------------------------------------------------------------------------------------


def test_metrics(server, uid):
    with rq.Queue() as q:
        first = q.fetch(server.url(f"/bytes?n=1234&id={uid}"))
        second = q.fetch(server.url("/upload"), method="POST", body=b"u" * 1000)
    m = first.metrics
    assert m.attempts == 1 and m.bytes_down == 1234 and m.bytes_up == 0
    assert m.tls is None  # plain http
    assert 0 <= m.queued and 0 <= m.dns <= m.connect <= m.first_byte <= m.total
    assert m.connection_reused is False
    m2 = second.metrics
    assert m2.bytes_up == 1000 and m2.bytes_down == len(b'{"received": 1000}')
    conns = [e["conn"] for e in server.requests()]
    assert m2.connection_reused is (conns[0] == conns[1]) is True


def test_metrics_of_a_request_cancelled_before_it_started(server):
    with rq.Queue(suspended=True) as q:
        request = q.add(server.url("/bytes?n=1"))
        request.cancel()
        q.wait()
    m = request.response.metrics
    assert m == rq.Metrics(queued=None, dns=None, connect=None, tls=None, first_byte=None, total=None,
                           bytes_down=0, bytes_up=0, attempts=0, connection_reused=False,
                           wire_bytes_down=0, header_bytes_down=0, http_version=0)


def test_metrics_count_wire_and_header_bytes(server, queue):
    plain = queue.fetch(server.url("/bytes?n=1234")).metrics
    chunked = queue.fetch(server.url("/bytes?n=1234&chunked=1")).metrics
    # No coding decoded: the bytes on the wire are the body delivered (chunked framing not counted).
    assert plain.bytes_down == plain.wire_bytes_down == 1234
    assert chunked.bytes_down == chunked.wire_bytes_down == 1234
    direct = queue.fetch(server.url("/redirect/0"))
    lines = sum(len(name) + len(value) + 4 for name, value in direct.headers.raw)  # "name: value\r\n"
    assert lines + len("HTTP/1.1 200 \r\n\r\n") <= direct.metrics.header_bytes_down < lines + 100
    # The headers of the redirects followed count too.
    assert queue.fetch(server.url("/redirect/2")).metrics.header_bytes_down > 2 * direct.metrics.header_bytes_down


def test_metrics_count_attempts_and_the_last_attempts_bytes(server, queue, uid):
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=2&mode=status&code=503&n=77"), retry=True,
                           retry_delay=0, retry_statuses=[503])
    assert response.metrics.attempts == response.attempts == 3
    assert response.metrics.bytes_down == 77


# -- bounded memory --------------------------------------------------------------------------------

MEMORY_SCRIPT = """
import asyncio, os, sys
import requestqueue as rq

BASE, MODE, SIZE, TARGET = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def rss(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

with rq.Queue() as q:
    q.fetch(BASE + "/bytes?n=100000")  # warm up: every code path loaded once
before = rss("VmRSS")
url = BASE + f"/bytes?n={SIZE}"
received = 0
if MODE == "collect":  # the default: the whole body in memory (shows that the bound means something)
    with rq.Queue() as q:
        received = len(q.fetch(url).body)
elif MODE == "on_body":
    def on_body(request, data, offset):
        global received
        received += len(data)
    with rq.Queue() as q:
        q.fetch(url, on_body=on_body)
elif MODE == "iter_bytes":
    with rq.Queue() as q:
        for chunk in q.add(url, stream=True).iter_bytes():
            received += len(chunk)
elif MODE == "aiter_bytes":
    async def main():
        global received
        async with rq.AsyncQueue() as q:
            async for chunk in q.add(url, stream=True).aiter_bytes():
                received += len(chunk)
    asyncio.run(main())
elif MODE == "output_file":
    with rq.Queue() as q:
        q.fetch(url, output_file=TARGET)
    received = os.path.getsize(TARGET)
print(received, rss("VmHWM") - before)
"""


@pytest.mark.parametrize("mode", ["on_body", "iter_bytes", "aiter_bytes", "output_file", "collect"])
def test_memory_stays_bounded_for_a_large_streamed_download(server, mode, tmp_path):
    size = 128 << 20
    env = dict(os.environ)
    package_parent = str(Path(rq.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("REQUESTQUEUE_LIBRARY", rq.LIBRARY_PATH)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(MEMORY_SCRIPT), server.base, mode, str(size),
                             str(tmp_path / "big.bin")], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    received, growth = map(int, result.stdout.split())
    assert received == size
    if mode == "collect":
        assert growth >= size  # the peak holds the whole body at least once
    else:
        assert growth < 32 << 20, f"{mode}: the peak memory grew by {growth >> 20} MiB"
