"""What one request costs the binding, counted (not timed): the calls it makes into the library.
Each call through cffi costs about as much as the Python code around it, so the count is part of
the binding's speed (issue 16)."""

from __future__ import annotations

import collections
import gc
from typing import Any, Counter

import pytest

import requestqueue as rq
import requestqueue._native as native
from conftest import patch_lib
import requestqueue._runtime as runtime


class CallCounter:
    """The library, with every call counted by name."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: Counter[str] = collections.Counter()
        self.items: Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._lib, name)
        if not callable(function):
            return function

        def call(*args: Any) -> Any:
            self.calls[name] += 1
            if name.endswith("_many"):  # (array, count): the count of the items, by name
                self.items[name] += args[1]
            return function(*args)
        return call


@pytest.fixture
def counter(monkeypatch):
    gc.collect()
    runtime._drain()  # (what earlier tests left to release is not counted)
    return patch_lib(monkeypatch, CallCounter(native.lib))


def per_request(counter: CallCounter) -> Counter[str]:
    """The calls that are not about the queue as a whole (making it, dispatching, freeing it)."""
    return collections.Counter({name: n for name, n in counter.calls.items() if not name.startswith("rq_queue_")})


N = 50
# A request added by URL, completed, read (status, outcome, body) and dropped: made, given its
# completion and added in one call; its response arrives retained, with its status, outcome and
# body, in the completion's arguments (no call); both released once dropped, with the others
# dropped meanwhile (one call for each kind).
EXPECTED = {"rq_add_url_with_summary": N}
RELEASED = {"rq_response_release_many": N, "rq_request_free_many": N}


@pytest.mark.parametrize("kind", ["Queue", "AsyncQueue"])
def test_library_calls_per_request(server, counter, kind):
    seen = []

    def on_complete(request):
        response = request.response
        seen.append((response.status, response.outcome, len(response.body), response.http_version))

    if kind == "Queue":
        with rq.Queue(max_concurrent=8, duplicates="allow") as q:
            for _ in range(N):
                q.add(server.url("/bytes?n=10"), on_complete=on_complete)
            q.wait()
    else:
        import asyncio

        async def main():
            async with rq.AsyncQueue(max_concurrent=8, duplicates="allow") as q:
                for _ in range(N):
                    q.add(server.url("/bytes?n=10"), on_complete=on_complete)
                await q.wait()
        asyncio.run(main())
    gc.collect()
    runtime._drain()  # (what the collector let go of is released at the next call into the binding)
    assert seen == [(200, rq.Outcome.OK, 10, 11)] * N
    calls = per_request(counter)
    releases = {name: calls.pop(name) for name in RELEASED if name in calls}
    assert calls == EXPECTED
    # Released in batches: every one exactly once, in at most one call per request.
    assert counter.items == RELEASED and all(1 <= n <= N for n in releases.values()) and len(releases) == 2


def test_library_calls_per_request_added_whole(server, counter):
    """A Request added whole: made, given its completion, added; its response arrives retained
    with its summary in the completion's arguments, as for one added by URL."""
    seen = []
    with rq.Queue(max_concurrent=8, duplicates="allow") as q:
        for _ in range(N):
            q.add(rq.Request(server.url("/bytes?n=10"), on_complete=lambda r: seen.append(
                (r.response.status, r.response.outcome, r.response.body, r.response.http_version))))
        q.wait()
    gc.collect()
    runtime._drain()
    assert seen == [(200, rq.Outcome.OK, b"abcdefghij", 11)] * N
    calls = per_request(counter)
    releases = {name: calls.pop(name) for name in RELEASED if name in calls}
    assert calls == {"rq_request_new": N, "rq_request_set_summary_completion": N, "rq_add": N}
    assert counter.items == RELEASED and len(releases) == 2


def test_reading_every_field_adds_the_calls_of_those_fields_only(server, counter):
    with rq.Queue() as q:
        response = q.fetch(server.url("/bytes?n=10&header=X-A:b"))
    before = per_request(counter)
    assert response.url.endswith("header=X-A:b") and response.headers["x-a"] == "b"
    assert response.message == "" and response.attempts == 1 and response.metrics.bytes_down == 10
    read = per_request(counter) - before
    # The URL, the headers (count, then each), the metrics (with the attempts); the message of a
    # success is known without a call; then the response is released at once.
    assert set(read) == {"rq_response_url", "rq_response_header_count", "rq_response_header_at",
                         "rq_response_metrics", "rq_response_release"}
    assert read["rq_response_release"] == 1 and read["rq_response_metrics"] == 1


# add(url, **options) builds the request without Request.__init__ when every option is one of these
# (Request._plain): it must do exactly what Request(url, **options) does, errors included.
PLAIN_CASES = [
    {"method": "POST"},
    {"headers": {"X-A": "1", "X-B": None}},
    {"headers": [("X-A", "1"), ("X-A", "2")], "timeout": 5},
    {"connect_timeout": 3, "idle_timeout": 4.5, "header_timeout": 2, "retry_delay": 1},
    {"priority": "high", "tag": "t"},
    {"priority": rq.Priority.NORMAL, "on_complete": print},
    {"headers": {"X-Bad\n": "v"}},
    {"headers": {"X-A": "v\r\nX-B: w"}},
    {"headers": 5},
    {"timeout": "soon"},
    {"timeout": -1},
    {"priority": "urgent"},
    {"priority": 7},
    {"tag": 5},
    {"tag": "a\0b"},
    {"method": "NOT A METHOD"},
]


def added(make):
    """What adding gave: the request's fields, or the exception's type and text."""
    try:
        request = make()
    except Exception as exc:  # noqa: BLE001 - compared by the callers
        return type(exc), str(exc)
    return (request.method, request.headers, request.tag, request.priority, request.url,
            request._on_complete, request.body, request.state)


@pytest.mark.parametrize("options", PLAIN_CASES, ids=lambda o: ",".join(f"{k}={v!r}" for k, v in o.items()))
def test_add_by_url_does_what_request_does(server, options):
    assert options.keys() <= rq.Request._PLAIN_OPTIONS
    url = server.url("/echo")

    with rq.Queue(suspended=True) as q:
        by_url = added(lambda: q.add(url, **options))
        by_request = added(lambda: q.add(rq.Request(url, **options)))
        q.cancel_all()
    assert by_url == by_request


# add(url) and add(url, on_complete=f) make, complete and add the request in one library call
# (rq_add_url_with_summary): the same request, and the same errors in the same order, as add(Request(url)).
URL_CASES = ["/echo", "not a url", "http://a b/", "ftp://127.0.0.1/", "http://x\0y/", "http://\udc80/", 5, None]


@pytest.mark.parametrize("path", URL_CASES, ids=repr)
@pytest.mark.parametrize("state", ["open", "closed"])
def test_add_url_in_one_call_does_what_request_does(server, path, state):
    url = server.url(path) if path == "/echo" else path

    with rq.Queue(suspended=True) as q:
        if state == "closed":
            q.close()
        by_url = added(lambda: q.add(url, on_complete=print))
        by_request = added(lambda: q.add(rq.Request(url, on_complete=print)))
        if state == "open":
            q.cancel_all()
    assert by_url == by_request


def test_add_url_completes_every_request_once_from_threads(server):
    """Requests added by URL from four threads while a fifth waits on the queue: each completes
    exactly once, with its own response (its completion may run before add() has returned)."""
    import threading

    done: Counter[str] = collections.Counter()
    with rq.Queue(max_concurrent=16, duplicates="allow") as q:
        def add_many(t: int) -> None:
            for i in range(100):
                q.add(server.url(f"/bytes?n={i}&id={t}-{i}"),
                      on_complete=lambda r: done.update([f"{r.url} {len(r.response.body)}"]))

        threads = [threading.Thread(target=add_many, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        q.wait()
    assert done == collections.Counter(server.url(f"/bytes?n={i}&id={t}-{i}") + f" {i}"
                                       for t in range(4) for i in range(100))
