"""The synchronous Queue: limits, order, suspend, duplicates, cancel, cancel all, count, snapshot,
closing, several threads, and the host-loop integration (fileno + dispatch)."""

from __future__ import annotations

import gc
import select
import threading
import time
import weakref
from typing import List

import pytest

import requestqueue as rq


def test_defaults_and_settings():
    with rq.Queue() as q:
        assert q.max_concurrent == 2
        assert q.mode is rq.Order.FIFO and q.mode == "fifo"
        assert q.duplicates is rq.Duplicates.CANCEL_EARLIER
        assert q.suspended is False and q.count == 0 and q.snapshot() == []
        q.max_concurrent = 0
        q.mode = "lifo"
        q.duplicates = "allow"
        assert (q.max_concurrent, q.mode, q.duplicates) == (0, rq.Order.LIFO, rq.Duplicates.ALLOW)
        with pytest.raises(rq.InvalidArgumentError):
            q.max_concurrent = -1
        q.max_concurrent = 2**64 - 1  # any size_t: the library counts it as SSIZE_MAX
        assert q.max_concurrent == 2**63 - 1
        with pytest.raises(rq.InvalidArgumentError):
            q.max_concurrent = 2**64  # not a size_t
        q.max_concurrent = 0
        with pytest.raises(rq.InvalidArgumentError):
            q.mode = "sideways"
        with pytest.raises(rq.InvalidArgumentError):
            q.duplicates = "sometimes"
    with pytest.raises(rq.InvalidArgumentError, match="sideways"):
        rq.Queue(mode="sideways")
    with pytest.raises(rq.InvalidArgumentError):
        rq.Queue(max_concurrent=-2)
    with pytest.raises(TypeError):
        rq.Queue(max_concurrent=1.5)  # type: ignore[arg-type]
    with rq.Queue(max_concurrent=7, mode=rq.Order.LIFO, duplicates="allow", suspended=True) as q:
        assert (q.max_concurrent, q.mode, q.duplicates, q.suspended) == (7, "lifo", "allow", True)


def test_max_concurrent_limits_running_requests(server, uid):
    with rq.Queue(max_concurrent=2) as q:
        requests = [q.add(server.url(f"/delay?s=0.3&group={uid}&id={i}")) for i in range(6)]
        states = [r.state for r in requests]
        assert states == [rq.State.RUNNING] * 2 + [rq.State.WAITING] * 4
        assert q.count == 6
        assert q.snapshot() == requests
        q.wait()
        assert q.count == 0 and all(r.state is rq.State.COMPLETED for r in requests)
        assert all(r.result().status == 200 for r in requests)
    log = server.log()
    assert log["peaks"][uid] == 2
    assert {e["id"] for e in log["requests"][:2]} == {"0", "1"}  # the first two started first


def test_raising_the_limit_starts_waiting_requests_at_once(server, uid):
    with rq.Queue(max_concurrent=1) as q:
        requests = [q.add(server.url(f"/stall?s=30&id={uid}{i}")) for i in range(3)]
        assert [r.state for r in requests] == [rq.State.RUNNING, rq.State.WAITING, rq.State.WAITING]
        q.max_concurrent = 3
        assert [r.state for r in requests] == [rq.State.RUNNING] * 3
        q.cancel_all()
        q.wait()


def run_in_order(server, uid, mode) -> List[str]:
    with rq.Queue(max_concurrent=1, mode=mode, suspended=True) as q:
        requests = [q.add(server.url(f"/bytes?n=1&id={uid}{name}")) for name in "abc"]
        snapshot_ids = [r.url[-1] for r in q.snapshot()]
        assert all(r.state is rq.State.WAITING for r in requests)
        q.resume()
        q.wait()
    logged = [e["id"][-1] for e in server.requests() if e["id"] and e["id"].startswith(uid)]
    assert logged == snapshot_ids
    return logged


def test_fifo_order(server, uid):
    assert run_in_order(server, uid, "fifo") == ["a", "b", "c"]


def test_lifo_order(server, uid):
    assert run_in_order(server, uid, "lifo") == ["c", "b", "a"]


def test_suspend_and_resume(server, uid):
    with rq.Queue(suspended=True) as q:
        requests = [q.add(server.url(f"/bytes?n=3&id={uid}{i}")) for i in range(3)]
        assert q.suspended and q.count == 3
        assert [r.state for r in requests] == [rq.State.WAITING] * 3
        with pytest.raises(rq.WaitTimeoutError):
            q.wait(timeout=0.2)  # a suspended queue with waiting requests is not idle
        assert server.requests(id=f"{uid}0") == []
        q.resume()
        assert not q.suspended
        q.wait()
        q.suspend()
        assert q.suspended
    assert [r.result().body for r in requests] == [b"abc"] * 3
    assert len(server.requests()) == 3


def test_duplicates_cancel_earlier_equal_requests(server, uid):
    with rq.Queue(max_concurrent=1, suspended=True) as q:
        first = q.add(server.url(f"/echo?id={uid}"))
        other_header = q.add(server.url(f"/echo?id={uid}"), headers={"X-Differs": "1"})
        other_body = q.add(server.url(f"/echo?id={uid}"), method="POST", body=b"1")
        second = q.add(server.url(f"/echo?id={uid}"))
        assert q.count == 3
        q.resume()
        q.wait()
    with pytest.raises(rq.RequestCancelled):
        first.result()
    assert first.response.attempts == 0
    for request in (other_header, other_body, second):
        assert request.result().status == 200
    assert len(server.requests(id=uid)) == 3


def test_duplicates_allowed(server, uid):
    with rq.Queue(duplicates="allow") as q:
        requests = [q.add(server.url(f"/echo?id={uid}")) for _ in range(3)]
        q.wait()
    assert all(r.result().status == 200 for r in requests)
    assert len(server.requests(id=uid)) == 3


def test_cancel_running_and_waiting_requests(server, uid):
    with rq.Queue(max_concurrent=1) as q:
        running = q.add(server.url(f"/stall?s=30&id={uid}r"))
        waiting = q.add(server.url(f"/bytes?n=1&id={uid}w"))
        assert running.state is rq.State.RUNNING and waiting.state is rq.State.WAITING
        server.wait_for_requests(f"{uid}r")
        assert waiting.cancel() is True
        assert q.snapshot() == [running]
        assert running.cancel() is True
        assert running.cancel() is False  # only one cancel wins
        with pytest.raises(rq.RequestCancelled) as info:
            running.result()
        assert info.value.outcome is rq.Outcome.CANCELLED
        with pytest.raises(rq.RequestCancelled):
            waiting.result()
        assert waiting.response.attempts == 0
        assert running.cancel() is False  # completed
    assert server.requests(id=f"{uid}w") == []
    assert len(server.requests(id=f"{uid}r")) == 1
    assert rq.Request(server.url("/")).cancel() is False  # never added


def test_cancel_all(server, uid):
    completions = []
    with rq.Queue(max_concurrent=2) as q:
        requests = [q.add(server.url(f"/stall?s=30&id={uid}{i}"), on_complete=completions.append)
                    for i in range(4)]
        q.cancel_all()
        assert q.count == 0
        q.wait()
        # The queue stays usable.
        assert q.fetch(server.url("/bytes?n=2")).body == b"ab"
    assert completions == requests  # each completion exactly once, in order
    for request in requests:
        with pytest.raises(rq.RequestCancelled):
            request.result()


def test_request_is_single_use(server):
    with rq.Queue() as q, rq.Queue() as other:
        request = q.add(server.url("/bytes?n=1"))
        with pytest.raises(rq.AlreadyAddedError):
            q.add(request)
        with pytest.raises(rq.AlreadyAddedError):
            other.add(request)
        with pytest.raises(TypeError):
            q.add(request, method="POST")
        q.wait()
        assert request.result().status == 200


def test_close_cancels_in_flight_requests_and_runs_their_completions(server, uid):
    completed = []
    q = rq.Queue(max_concurrent=1)
    requests = [q.add(server.url(f"/stall?s=30&id={uid}{i}"), on_complete=completed.append)
                for i in range(3)]
    q.close()
    assert q.closed
    assert completed == requests
    for request in requests:
        with pytest.raises(rq.RequestCancelled) as info:
            request.result()
        assert "freed" in info.value.message
        assert request.state is rq.State.COMPLETED
    q.close()  # idempotent
    with pytest.raises(rq.QueueClosedError):
        q.add(server.url("/"))
    with pytest.raises(rq.QueueClosedError):
        q.count
    q.wait()  # a closed queue is idle


def test_result_with_timeout(server):
    with rq.Queue() as q:
        request = q.add(server.url("/stall?s=30"))
        with pytest.raises(rq.WaitTimeoutError):
            request.result(timeout=0.2)
        with pytest.raises(TimeoutError):
            q.wait(timeout=0)
        with pytest.raises(rq.InvalidStateError):
            request.exception()
        assert not request.done()
        request.cancel()
        with pytest.raises(rq.RequestCancelled):
            request.result()
        assert request.done() and isinstance(request.exception(), rq.RequestCancelled)
    with pytest.raises(rq.InvalidStateError):
        rq.Request(server.url("/")).result()


def test_several_threads_share_a_queue(server, uid):
    results = {}
    errors = []

    def worker(n: int) -> None:
        try:
            for i in range(10):
                response = q.fetch(server.url(f"/bytes?n={n * 10 + i}&id={uid}"))
                results[(n, i)] = len(response.body)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with rq.Queue(max_concurrent=3) as q:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert results == {(n, i): n * 10 + i for n in range(4) for i in range(10)}
    assert len(server.requests(id=uid)) == 40
    assert server.log()["peak"] <= 3


def test_a_thread_waiting_while_another_closes(server):
    q = rq.Queue()
    request = q.add(server.url("/stall?s=30"))
    outcome = []

    def waiter() -> None:
        try:
            request.result()
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    while not q._leading:  # until the waiter polls the queue's descriptor
        time.sleep(0.001)
    q.close()
    thread.join()
    assert len(outcome) == 1 and isinstance(outcome[0], rq.RequestCancelled)


def test_adds_racing_a_close_complete_once_or_raise(server, uid):
    """add(url) takes no lock of the queue (the library orders an add racing with the close): while
    one thread closes the queue, each add of three other threads either returns a request whose
    completion then runs exactly once, or raises QueueClosedError; nothing stays registered."""
    import requestqueue._runtime as runtime

    for attempt in range(3):
        q = rq.Queue(max_concurrent=4, duplicates="allow")
        completed: List[rq.Request] = []
        added: List[rq.Request] = []
        refused: List[int] = []
        start = threading.Barrier(4)

        def adder() -> None:
            start.wait()
            while True:
                try:
                    added.append(q.add(server.url(f"/bytes?n=1&id={uid}"), on_complete=completed.append))
                except rq.QueueClosedError:
                    refused.append(1)
                    return

        threads = [threading.Thread(target=adder) for _ in range(3)]
        for thread in threads:
            thread.start()
        start.wait()
        while len(added) < 100:  # (adds under way in every thread: the close races with them)
            time.sleep(0.001)
        q.close()  # (the completions of the requests still in flight run here)
        for thread in threads:
            thread.join()
        assert len(refused) == 3
        assert sorted(map(id, completed)) == sorted(map(id, added))  # each exactly once
        assert all(r.done() for r in added)
        assert not q._live and all(ref() is not q for ref in list(runtime._contexts.values()))


def test_fileno_and_dispatch_for_a_host_event_loop(server):
    done = []
    with rq.Queue() as q:
        q.add(server.url("/bytes?n=10"), on_complete=done.append)
        assert q.dispatch() == 0 or done  # nothing pending yet (or already completed)
        while not done:
            readable, _, _ = select.select([q], [], [])
            assert readable == [q]
            assert q.dispatch() >= 1
        assert done[0].result().body == b"abcdefghij"
        readable, _, _ = select.select([q], [], [], 0)
        assert readable == []  # readable exactly while callbacks are pending


def test_requests_and_callbacks_are_kept_alive_until_their_completion(server):
    seen = []
    q = rq.Queue()

    def add_one(i: int) -> "weakref.ref[rq.Request]":
        marker = object()

        def on_complete(request: rq.Request) -> None:
            seen.append((i, marker is not None, request.result().status))

        return weakref.ref(q.add(server.url(f"/bytes?n={i}"), on_complete=on_complete,
                                 on_download_progress=lambda r, p: None))

    refs = [add_one(i) for i in range(5)]
    gc.collect()
    assert all(ref() is not None for ref in refs)  # held by the queue while in flight
    q.wait()
    assert sorted(seen) == [(i, True, 200) for i in range(5)]
    gc.collect()
    assert all(ref() is None for ref in refs)  # released after their completion
    q.close()


def test_an_unreferenced_idle_queue_is_freed(server):
    q = rq.Queue()
    q.fetch(server.url("/bytes?n=1"))
    ref = weakref.ref(q)
    del q
    gc.collect()
    assert ref() is None
