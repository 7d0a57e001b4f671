"""Exceptions raised in user callbacks are re-raised in the caller, never swallowed; calls that
would wait for the callback they are made from fail cleanly."""

from __future__ import annotations

import pytest

import requestqueue as rq


class Boom(Exception):
    pass


def test_exception_in_completion_is_raised_by_wait(server):
    calls = []

    def on_complete(request):
        calls.append(request)
        raise Boom("from on_complete")

    with rq.Queue() as q:
        request = q.add(server.url("/bytes?n=1"), on_complete=on_complete)
        with pytest.raises(Boom, match="from on_complete"):
            q.wait()
        assert calls == [request]
        q.wait()  # reported once: the next wait does not raise it again
        with pytest.raises(Boom):
            request.result()  # the request's own result is the exception
        assert request.response.status == 200  # what the server answered is still there


def test_exception_in_completion_is_raised_by_the_fetch_that_ran_it(server):
    with rq.Queue() as q:
        with pytest.raises(Boom):
            q.fetch(server.url("/bytes?n=1"), on_complete=lambda r: (_ for _ in ()).throw(Boom()))


def test_exception_in_progress_cancels_the_request_and_is_raised(server, uid):
    def on_progress(request, progress):
        if progress.done > 0:
            raise Boom(f"at {progress.done}")

    with rq.Queue() as q:
        request = q.add(server.url(f"/stall-body?s=30&n=2000&id={uid}"), on_download_progress=on_progress)
        with pytest.raises(Boom, match="at 1000"):
            request.result()
        q.wait()  # the cancelled transfer completes
        assert request.response.outcome is rq.Outcome.CANCELLED
        with pytest.raises(Boom):
            request.result()


def test_exception_in_auth_handler_cancels_and_is_raised(server):
    def on_auth(request, challenge):
        raise Boom("no credentials here")

    with rq.Queue() as q:
        request = q.add(server.url("/basic-auth/u/p"), on_auth=on_auth)
        with pytest.raises(Boom):
            q.wait()
        q.wait()
        assert request.response.outcome is rq.Outcome.CANCELLED


def test_bad_return_value_of_auth_handler_is_an_error(server):
    with rq.Queue() as q:
        with pytest.raises(TypeError, match="on_auth must return"):
            q.fetch(server.url("/basic-auth/u/p"), on_auth=lambda r, c: "user:pass")


def test_keyboard_interrupt_in_a_callback_propagates(server):
    def on_complete(request):
        raise KeyboardInterrupt

    with rq.Queue() as q:
        q.add(server.url("/bytes?n=1"), on_complete=on_complete)
        with pytest.raises(KeyboardInterrupt):
            q.wait()


def test_several_exceptions_are_raised_one_per_call(server):
    def on_complete(request):
        raise Boom(request.url)

    with rq.Queue(max_concurrent=0) as q:
        urls = [server.url(f"/bytes?n={i}") for i in range(3)]
        for url in urls:
            q.add(url, on_complete=on_complete)
        raised = []
        while True:
            try:
                q.wait()
                break
            except Boom as exc:
                raised.append(str(exc))
    assert sorted(raised) == sorted(urls)


def test_unreported_exception_is_raised_by_close(server):
    q = rq.Queue()
    q.add(server.url("/stall?s=30"), on_complete=lambda r: (_ for _ in ()).throw(Boom("at close")))
    with pytest.raises(Boom, match="at close"):
        q.close()
    assert q.closed


def test_exception_leaving_the_with_block_is_not_masked(server):
    with pytest.raises(ZeroDivisionError):
        with rq.Queue() as q:
            q.add(server.url("/stall?s=30"), on_complete=lambda r: (_ for _ in ()).throw(Boom()))
            1 / 0


def test_waiting_inside_a_callback_is_a_clear_error(server):
    errors = []

    def on_complete(request):
        for call in (q.wait, q.dispatch, q.close, lambda: q.fetch(server.url("/bytes?n=1"))):
            try:
                call()
            except rq.WouldDeadlockError as exc:
                errors.append(exc)

    with rq.Queue() as q:
        q.add(server.url("/bytes?n=1"), on_complete=on_complete)
        q.wait()
        assert len(errors) == 4
        assert not q.closed


def test_calls_allowed_inside_callbacks(server, uid):
    """add, cancel, suspend, resume, settings and result from inside a callback."""
    chained = []

    def on_complete(request):
        assert request.result().status == 200
        q.suspend()
        q.resume()
        q.max_concurrent = 3
        chained.append(q.add(server.url(f"/bytes?n=2&id={uid}"), on_complete=lambda r: None))
        extra = q.add(server.url("/stall?s=30"))
        assert extra.cancel()

    with rq.Queue() as q:
        q.add(server.url("/bytes?n=1"), on_complete=on_complete)
        q.wait()
        assert chained[0].result().body == b"ab"
        assert q.max_concurrent == 3
