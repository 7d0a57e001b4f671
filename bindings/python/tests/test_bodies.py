"""Request bodies: the library reads the request's immutable ``bytes`` body in place
(rq_request_set_body_borrowed: no copy), a mutable body is copied once when the request is made,
and the binding holds the bytes while the library may read them: until the completion callback of
an added request (also when its queue is dropped with it in flight), and no longer after."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading

import pytest

import requestqueue as rq
import requestqueue._runtime as runtime
from requestqueue._native import ffi


@pytest.fixture
def queue():
    with rq.Queue() as q:
        yield q


def _overwrite(body: bytes, byte: bytes) -> None:
    """Writes `byte` over every byte of the bytes object `body`, in place (only for a bytes object
    nobody else can see: the test's own)."""
    address = int(ffi.cast("uintptr_t", ffi.from_buffer(body)))
    ctypes.memset(address, byte[0], len(body))


def test_a_bytes_body_is_read_in_place_not_copied(server, queue):
    # What the server receives is what the bytes object holds when the request is sent: the
    # library never made a copy of its own when the request was made.
    body = bytes(bytearray(b"a" * 100000))  # (a fresh object, the test's only)
    request = rq.Request(server.url("/echo"), "POST", body=body)
    _overwrite(body, b"b")
    response = queue.fetch(request)
    assert response.json()["body_len"] == 100000
    assert response.json()["body"] == "b" * 100000
    assert request.body is body


@pytest.mark.parametrize("kind", [bytearray, lambda b: memoryview(bytearray(b))])
def test_a_mutable_body_is_copied_when_the_request_is_made(server, queue, kind):
    source = bytearray(b"a" * 1000)
    body = kind(source) if kind is bytearray else memoryview(source)
    request = rq.Request(server.url("/echo"), "POST", body=body)
    source[:] = b"z" * 1000
    response = queue.fetch(request)
    assert response.json()["body"] == "a" * 1000
    assert request.body == b"a" * 1000 and type(request.body) is bytes


def test_str_json_and_form_bodies_are_sent(server, queue):
    assert queue.fetch(server.url("/echo"), method="POST", body="grüße").json()["body"] == \
        "grüße".encode().decode("latin-1")
    assert queue.fetch(server.url("/echo"), method="POST", json={"a": 1}).json()["body"] == '{"a": 1}'
    assert queue.fetch(server.url("/echo"), method="POST", data={"a": "1"}).json()["body"] == "a=1"


def test_bytes_or_str_as_data_are_the_body_as_with_requests(server, queue):
    for data in (b"raw=1&x", "raw=1&x", bytearray(b"raw=1&x")):
        echoed = queue.fetch(server.url("/echo"), method="POST", data=data).json()
        assert echoed["body"] == "raw=1&x"
        assert "application/x-www-form-urlencoded" not in str(echoed.get("headers", {})).lower()
    with pytest.raises(TypeError, match="mapping or"):
        rq.Request(server.url("/echo"), "POST", data=b"x", files={"f": b"y"})


def test_the_body_is_held_until_the_completion_and_released_after(server, queue, uid):
    body = bytes(bytearray(b"h" * 5000))
    base = sys.getrefcount(body)
    seen = []
    request = queue.add(rq.Request(server.url(f"/hold?key={uid}&n=1&id={uid}"), "POST", body=body,
                                   on_complete=lambda r: seen.append(sys.getrefcount(body))))
    server.wait_for_requests(uid)
    del request
    gc.collect()
    assert sys.getrefcount(body) == base + 2  # the request (held by its queue) and the binding
    server._get(f"/_/release?key={uid}")
    queue.wait()
    assert seen == [base + 2]  # still held while the completion runs
    gc.collect()
    assert sys.getrefcount(body) == base  # let go of after it
    assert not runtime._held_bodies


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_queue_dropped_with_a_request_in_flight_holds_its_body_until_freed(server, uid):
    # The queue and its request are garbage together, while the library still runs the request:
    # its body stays alive until the queue is freed (the reaper), then it is let go of.
    body = bytes(bytearray(b"d" * 5000))
    base = sys.getrefcount(body)
    # The reaper waits at `gate` (before freeing the queue) until the test opens it.
    gate = threading.Event()

    class Blocker:
        def set(self) -> None:
            gate.wait()

    runtime._start_reaper()
    runtime._dropped.put(Blocker())
    dropped = rq.Queue()
    dropped.add(rq.Request(server.url(f"/hold?key={uid}&n=1&id={uid}"), "POST", body=body))
    try:
        server.wait_for_requests(uid)
        del dropped
        gc.collect()
        assert sys.getrefcount(body) == base + 1  # the request was collected; the binding holds it
        gate.set()
        runtime._wait_for_reaper()
        assert sys.getrefcount(body) == base
    finally:
        gate.set()
        server._get(f"/_/release?key={uid}")


def test_a_request_never_added_lets_go_of_its_body(server):
    body = bytes(bytearray(b"n" * 5000))
    base = sys.getrefcount(body)
    request = rq.Request(server.url("/echo"), "POST", body=body)
    assert sys.getrefcount(body) == base + 1
    del request
    gc.collect()
    assert sys.getrefcount(body) == base
    assert not runtime._held_bodies


def test_a_failed_add_lets_go_of_its_body(server):
    body = bytes(bytearray(b"f" * 5000))
    base = sys.getrefcount(body)
    closed = rq.Queue()
    closed.close()
    request = rq.Request(server.url("/echo"), "POST", body=body)
    with pytest.raises(rq.QueueClosedError):
        closed.add(request)
    del request
    gc.collect()
    assert sys.getrefcount(body) == base
    assert not runtime._held_bodies
