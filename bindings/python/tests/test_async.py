"""AsyncQueue: hundreds of concurrent requests, callbacks on the loop's thread, cancellation from
another task, callbacks that raise, waiting, closing."""

from __future__ import annotations

import asyncio
import threading

import pytest

import requestqueue as rq


class Boom(Exception):
    pass


def run(coro):
    return asyncio.run(coro)


def test_hundreds_of_concurrent_requests(server, uid):
    callback_threads = set()

    async def main():
        async with rq.AsyncQueue(max_concurrent=100) as q:
            def on_progress(request, progress):
                callback_threads.add(threading.get_ident())

            responses = await asyncio.gather(*(
                q.fetch(server.url(f"/bytes?n={i}&delay=0.2&id={uid}&group={uid}"),
                        on_download_progress=on_progress)
                for i in range(400)))
            assert q.count == 0
            return responses

    responses = run(main())
    assert [len(r.body) for r in responses] == list(range(400))
    assert all(r.status == 200 for r in responses)
    assert callback_threads == {threading.get_ident()}  # every callback on the loop's thread
    log = server.log()
    assert len([e for e in log["requests"] if e["id"] == uid]) == 400
    assert 1 < log["peaks"][uid] <= 100


def test_add_returns_an_awaitable_request(server):
    async def main():
        async with rq.AsyncQueue() as q:
            request = q.add(server.url("/bytes?n=4"))
            response = await request
            assert response.body == b"abcd"
            assert (await request) is response  # awaiting again gives the same result
            assert request.result() is response
            with pytest.raises(rq.HTTPStatusError) as info:
                await q.fetch(server.url("/status/503"))
            assert info.value.status == 503 and info.value.response.body == b"status 503"

    run(main())


def test_cancel_from_another_task(server, uid):
    async def main():
        async with rq.AsyncQueue() as q:
            fetching = asyncio.ensure_future(q.fetch(server.url(f"/stall?s=30&id={uid}")))
            await asyncio.sleep(0)  # let the task add its request
            (request,) = q.snapshot()
            assert request.state is rq.State.RUNNING

            async def canceller():
                await asyncio.get_running_loop().run_in_executor(None, server.wait_for_requests, uid)
                assert request.cancel() is True

            await canceller()
            with pytest.raises(rq.RequestCancelled):
                await fetching
            assert q.count == 0

    run(main())


def test_cancelling_the_awaiting_task_cancels_the_request(server, uid):
    async def main():
        async with rq.AsyncQueue() as q:
            request = q.add(server.url(f"/stall?s=30&id={uid}"))
            task = asyncio.ensure_future(request)
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await q.wait()
            assert request.response.outcome is rq.Outcome.CANCELLED
            assert q.count == 0

    run(main())


def test_a_request_awaited_by_two_tasks_survives_one_cancellation(server):
    async def main():
        async with rq.AsyncQueue() as q:
            request = q.add(server.url("/delay?s=0.2"))
            first = asyncio.ensure_future(request)
            second = asyncio.ensure_future(request)
            await asyncio.sleep(0)
            first.cancel()
            assert (await second).status == 200
            with pytest.raises(asyncio.CancelledError):
                await first

    run(main())


def test_cancel_all_and_close_fail_awaiters_with_request_cancelled(server):
    async def main():
        q = rq.AsyncQueue(max_concurrent=1)
        tasks = [asyncio.ensure_future(q.fetch(server.url(f"/stall?s=30&n={i}"))) for i in range(3)]
        await asyncio.sleep(0)
        assert q.count == 3
        q.cancel_all()
        for task in tasks:
            with pytest.raises(rq.RequestCancelled):
                await task
        tasks = [asyncio.ensure_future(q.fetch(server.url(f"/stall?s=30&m={i}"))) for i in range(2)]
        await asyncio.sleep(0)
        q.close()
        for task in tasks:
            with pytest.raises(rq.RequestCancelled, match="freed"):
                await task
        with pytest.raises(rq.QueueClosedError):
            q.add(server.url("/"))

    run(main())


def test_exception_in_progress_callback_is_raised_by_the_awaited_fetch(server):
    async def main():
        async with rq.AsyncQueue() as q:
            def on_progress(request, progress):
                if progress.done:
                    raise Boom("progress")

            with pytest.raises(Boom, match="progress"):
                await q.fetch(server.url("/stall-body?s=30&n=2000"), on_download_progress=on_progress)
            await q.wait()  # already reported to the awaiter: not raised again

    run(main())


def test_exception_in_an_unawaited_callback_is_raised_by_wait(server):
    async def main():
        q = rq.AsyncQueue()
        q.add(server.url("/bytes?n=1"), on_complete=lambda r: (_ for _ in ()).throw(Boom("unawaited")))
        with pytest.raises(Boom, match="unawaited"):
            await q.wait()
        await q.wait()
        # ... and at the end of an `async with` block.
        with pytest.raises(Boom, match="at exit"):
            async with q:  # closing cancels the request: its completion runs and raises
                q.add(server.url("/stall?s=30"), on_complete=lambda r: (_ for _ in ()).throw(Boom("at exit")))

    run(main())


def test_exception_raised_while_wait_is_in_progress(server):
    async def main():
        async with rq.AsyncQueue() as q:
            q.add(server.url("/stall?s=30"))
            q.add(server.url("/bytes?n=1"), on_complete=lambda r: (_ for _ in ()).throw(Boom("during wait")))
            with pytest.raises(Boom, match="during wait"):
                await q.wait()  # raised at once, although a request is still in flight
            assert q.count == 1
            q.cancel_all()
            await q.wait()

    run(main())


def test_wait_timeout_and_idle(server):
    async def main():
        async with rq.AsyncQueue() as q:
            await q.wait()  # idle: returns at once
            request = q.add(server.url("/stall?s=30"))
            with pytest.raises(rq.WaitTimeoutError):
                await q.wait(timeout=0.2)
            request.cancel()
            await q.wait()
            # No reader is left on the loop once the queue is idle.
            assert asyncio.get_running_loop().remove_reader(q.fileno()) is False

    run(main())


def test_auth_challenge_answered_by_another_task(server):
    async def main():
        async with rq.AsyncQueue() as q:
            challenges: "asyncio.Queue[rq.AuthChallenge]" = asyncio.Queue()
            fetching = asyncio.ensure_future(q.fetch(server.url("/basic-auth/a/b"),
                                                     on_auth=lambda r, c: challenges.put_nowait(c)))
            challenge = await challenges.get()
            assert challenge.response.status == 401 and challenge.failure_count == 0
            challenge.use_credential("a", "b")
            assert (await fetching).json()["user"] == "a"

    run(main())


def test_add_needs_a_running_loop_and_one_loop_at_a_time(server):
    q = rq.AsyncQueue()
    with pytest.raises(rq.InvalidStateError, match="event loop"):
        q.add(server.url("/"))

    async def first():
        return await q.fetch(server.url("/bytes?n=1"))

    assert run(first()).body == b"a"
    assert run(first()).body == b"a"  # a new loop once the queue is idle
    q.close()


def test_awaiting_a_request_of_a_sync_queue_is_an_error(server):
    with rq.Queue() as q:
        request = q.add(server.url("/bytes?n=1"))

        async def main():
            await request

        with pytest.raises(rq.InvalidStateError, match="Queue"):
            run(main())
        assert request.result().status == 200
