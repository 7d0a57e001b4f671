"""Responses read on first use: a completion copies the status, outcome and body and keeps the
library's response for the other fields (URL, headers, message, attempts, metrics), which must
give the right values whenever and from whatever thread they are first read, and the library's
response must be let go exactly once: when every field has been read, or when the Response is
garbage collected."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import threading
from typing import Any, Dict, List, Set

import pytest

import requestqueue as rq
import requestqueue._callbacks as callbacks_module
import requestqueue._native as native
import requestqueue._response as response_module
import requestqueue._runtime as runtime

from conftest import patch_lib, pattern

LAZY = ("url", "headers", "message", "attempts", "metrics")


class CountingLib:
    """The library, with its calls to rq_response_retain / rq_response_release, and the responses
    that completions receive retained, counted (releases
    only of the responses retained through it: responses of earlier tests may be collected
    meanwhile)."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.retained = 0
        self.released = 0
        self._held: Dict[int, int] = {}  # address -> retains not yet released
        self._ever: Set[int] = set()
        self.extra_releases = 0

    def _retained(self, ptr: Any) -> None:
        address = int(native.ffi.cast("uintptr_t", ptr))
        self._held[address] = self._held.get(address, 0) + 1
        self._ever.add(address)
        self.retained += 1

    def rq_response_retain(self, ptr: Any) -> Any:
        self._retained(ptr)
        return self._lib.rq_response_retain(ptr)

    def rq_response_release_many(self, pointers: Any, count: int) -> None:
        for ptr in pointers[:count]:
            self._released(ptr)
        self._lib.rq_response_release_many(pointers, count)

    def rq_response_release(self, ptr: Any) -> None:
        self._released(ptr)
        self._lib.rq_response_release(ptr)

    def _released(self, ptr: Any) -> None:
        address = int(native.ffi.cast("uintptr_t", ptr))
        if address in self._held:
            self.released += 1
            self._held[address] -= 1
            if not self._held[address]:
                del self._held[address]
        elif address in self._ever:
            self.extra_releases += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)


@pytest.fixture
def counting(monkeypatch):
    counting = patch_lib(monkeypatch, CountingLib(native.lib))
    completed = callbacks_module._completed

    def counted(ptr: Any, *summary: Any) -> rq.Response:  # a completion's response arrives retained
        counting._retained(ptr)
        return completed(ptr, *summary)

    monkeypatch.setattr(callbacks_module, "_completed", counted)
    yield counting
    gc.collect()
    runtime._drain()  # (what the collector lets go of is released at the next call into the binding)
    assert counting.released == counting.retained and counting.extra_releases == 0


def unread(response: rq.Response) -> bool:
    return not any(name in vars(response) for name in ("url", "headers", "attempts", "metrics"))


def test_fields_read_after_the_callback_and_the_queue_are_gone(server, uid):
    with rq.Queue(max_concurrent=2) as q:
        redirected = q.fetch(server.url(f"/redirect/2?id={uid}"))
        plain = q.fetch(server.url(f"/bytes?n=5&header=X-A:b&id={uid}"))
        with pytest.raises(rq.HTTPStatusError) as http_error:
            q.fetch(server.url("/status/404"))
        with pytest.raises(rq.ConnectError) as refused:
            q.fetch(f"http://127.0.0.1:{server.closed_port()}/")
    assert all(unread(r) for r in (redirected, plain, http_error.value.response))
    # Other responses come and go meanwhile, so that memory freed too early would be reused.
    with rq.Queue(max_concurrent=4, duplicates="allow") as q:
        for request in [q.add(server.url("/bytes?n=300&header=X-A:zzzzzzzz")) for _ in range(100)]:
            assert request.result().headers["x-a"] == "zzzzzzzz"
    gc.collect()

    assert redirected.body == b"redirected" and redirected.status == 200
    assert redirected.url == server.url(f"/redirect/0?id={uid}")
    assert plain.url == server.url(f"/bytes?n=5&header=X-A:b&id={uid}")
    assert plain.headers["x-a"] == "b" and plain.headers.get_all("Content-Length") == ["5"]
    assert ("X-A", "b") in plain.headers.raw
    assert plain.message == "" and plain.attempts == 1 and plain.body == b"abcde"
    metrics = plain.metrics
    assert isinstance(metrics, rq.Metrics) and metrics.bytes_down == 5 and metrics.attempts == 1
    assert metrics.total is not None and metrics.total >= 0 and metrics.tls is None
    failed = http_error.value.response
    assert failed.status == 404 and failed.outcome is rq.Outcome.HTTP_STATUS
    assert failed.url == server.url("/status/404") and failed.message and failed.attempts == 1
    assert failed.headers.get("content-length") == str(len(failed.body))
    no_answer = refused.value.response
    assert no_answer.status == 0 and no_answer.body == b"" and no_answer.headers.raw == ()
    assert no_answer.outcome is rq.Outcome.CANNOT_CONNECT and no_answer.message


def test_two_threads_read_the_same_responses(server):
    with rq.Queue(max_concurrent=4, duplicates="allow") as q:
        requests = [q.add(server.url(f"/bytes?n={i}&header=X-N:{i}")) for i in range(300)]
        q.wait()
    responses = [request.response for request in requests]
    assert all(unread(r) for r in responses)
    start = threading.Barrier(2)
    results: List[Any] = [None, None]
    failures: List[BaseException] = []

    def read(slot: int) -> None:
        try:
            start.wait()
            order = responses if slot == 0 else responses[::-1]
            seen = {id(r): (r.url, r.headers["x-n"], r.headers.raw, r.metrics.bytes_down, r.attempts, r.message)
                    for r in order}
            results[slot] = [seen[id(r)] for r in responses]
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=read, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert results[0] == results[1]
    for i, (url, number, raw, bytes_down, attempts, message) in enumerate(results[0]):
        assert url == server.url(f"/bytes?n={i}&header=X-N:{i}") and number == str(i)
        assert ("Content-Length", str(i)) in raw
        assert bytes_down == i and attempts == 1 and message == ""
        assert responses[i].body == pattern(i)


def test_responses_dropped_unread_are_released(server, counting):
    with rq.Queue(max_concurrent=4, duplicates="allow") as q:
        requests = [q.add(server.url("/bytes?n=10")) for _ in range(200)]
        q.wait()
        assert counting.retained == 200 and counting.released == 0
        assert all(r.response.status == 200 and unread(r.response) for r in requests)
        del requests
        gc.collect()
        assert counting.released == 0  # never inside the collector: at the next call into the binding
        assert q.count == 0 and counting.released == 200


def test_a_response_read_in_full_is_released_while_it_lives(server, counting):
    with rq.Queue() as q:
        response = q.fetch(server.url("/bytes?n=10"))
    assert counting.retained == 1
    assert response.headers["content-length"] == "10" and response.url and counting.released == 0
    assert response.metrics.bytes_down == 10 and counting.released == 1
    assert set(vars(response)) == {field.name for field in dataclasses.fields(response)}
    assert response.attempts == 1 and response.message == "" and counting.released == 1


def test_copies_and_pickles_never_share_the_library_response(server, counting):
    with rq.Queue() as q:
        first = q.fetch(server.url("/bytes?n=10&header=X-A:1"))
        second = q.fetch(server.url("/bytes?n=10&header=X-A:2"))
    copied = copy.copy(first)
    deep = copy.deepcopy(second)
    pickled = pickle.loads(pickle.dumps(second))
    replaced = dataclasses.replace(first, status=201)
    assert counting.retained == 2 and counting.released == 2  # every field read to copy them
    for value in (copied, deep, pickled, replaced):
        assert set(vars(value)) == {field.name for field in dataclasses.fields(value)}
    assert copied == first and deep == second and pickled == second and replaced.status == 201
    assert copied.headers["x-a"] == "1" and pickled.headers["x-a"] == "2"
    del first, second
    gc.collect()
    assert counting.released == 2 and copied.metrics.bytes_down == 10


def test_a_large_body_is_copied_with_everything_else(server, counting):
    size = response_module._EAGER_BODY + 1
    with rq.Queue() as q:
        response = q.fetch(server.url(f"/bytes?n={size}"))
        small = q.fetch(server.url(f"/bytes?n={response_module._EAGER_BODY}"))
    # Only the small one is still held (the large one was let go in its completion).
    assert counting.retained - counting.released == 1 and "_retained" not in vars(response)
    assert set(vars(response)) == {field.name for field in dataclasses.fields(response)}
    assert response.body == pattern(size) and response.headers["content-length"] == str(size)
    assert response.metrics.bytes_down == size and small.body == pattern(response_module._EAGER_BODY)


def test_a_response_made_by_hand_has_every_field_it_was_given(server):
    response = rq.Response("u", 200, rq.Headers([("A", "b")]), b"", rq.Outcome.OK, "", 1)
    assert response.metrics is None and response.headers["a"] == "b"
    bare = object.__new__(rq.Response)
    with pytest.raises(AttributeError):
        bare.url
    assert rq.Response.metrics is None
