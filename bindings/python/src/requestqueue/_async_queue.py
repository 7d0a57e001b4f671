"""The asyncio queue: :class:`AsyncQueue`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, List, Optional, Set, Union

if TYPE_CHECKING:
    from typing_extensions import Unpack

from ._errors import InvalidStateError, WaitTimeoutError, WouldDeadlockError
from ._native import RQ_ERR_WOULD_DEADLOCK, check, ffi, lib
from ._options import RequestOptions
from ._queues import _QueueBase, _check_fetchable
from ._request import Request
from ._runtime import _drain, _releases, _response_releases
from ._types import Response

__all__ = ["AsyncQueue", "STREAM_BUFFER_LIMIT"]

#: An :class:`AsyncQueue` stops delivering callbacks while the unread buffer of a request being
#: iterated with :meth:`Request.aiter_bytes` holds more than this many bytes.
STREAM_BUFFER_LIMIT = 1 << 20


class AsyncQueue(_QueueBase):
    """A queue of HTTP requests for asyncio.

    ``AsyncQueue(max_concurrent=2, mode="fifo", duplicates="cancel_earlier", suspended=False, *,
    max_per_host=0, rate_limit=None)``.
    ``await queue.fetch(url)`` gives the Response; ``queue.add(...)`` returns a :class:`Request`
    that can be awaited. The queue's descriptor is watched with ``loop.add_reader`` while requests
    are in flight, so every callback runs in the event loop's thread. Cancelling a task that awaits
    a request cancels the request; cancelling the request makes its awaiters raise
    RequestCancelled. An exception raised by a callback is raised by the awaits of that request,
    or, if nobody awaits it, by the next ``await queue.wait()`` or ``close()``.
    """

    _asynchronous = True

    def _set_up(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._reading = False
        self._dispatching = False
        self._idle_waiters: List["asyncio.Future[None]"] = []
        # Requests being iterated whose unread buffer is over STREAM_BUFFER_LIMIT: while there is
        # one, the queue's descriptor is not watched (no callback is delivered).
        self._backlogged: Set[Request] = set()

    async def fetch(self, request: Union[Request, str], /, **kwargs: Unpack[RequestOptions]) -> Response:
        """Adds a request and waits for it: returns its Response or raises its error."""
        _check_fetchable(request, kwargs)
        return await self.add(request, **kwargs)

    async def wait(self, timeout: Optional[float] = None) -> None:
        """Waits until every request added has completed. Raises WaitTimeoutError after `timeout`
        seconds, and the exception of a callback that raised and was not awaited by anyone."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            self._raise_pending()
            if not self._live:
                return
            if self._closed:
                raise self._closed_error("wait")
            future: asyncio.Future[None] = loop.create_future()
            self._idle_waiters.append(future)
            self._update_reading()
            try:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise WaitTimeoutError(f"wait: timed out after {timeout} s")
                try:
                    await asyncio.wait_for(future, remaining)
                except asyncio.TimeoutError:
                    raise WaitTimeoutError(f"wait: timed out after {timeout} s") from None
            finally:
                if future in self._idle_waiters:
                    self._idle_waiters.remove(future)

    def dispatch(self) -> int:
        """Runs the callbacks that are pending now (the event loop does this by itself)."""
        ran = self._dispatch_once()
        return ran

    def close(self) -> None:
        """Cancels every request still in flight (their awaiters raise RequestCancelled) and frees
        the queue. Idempotent. Raises the exception of a callback that nobody received."""
        self._close()
        self._raise_pending()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncQueue":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._close()
        if exc_type is None:
            self._raise_pending()

    def __enter__(self) -> "AsyncQueue":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._close()
        if exc_type is None:
            self._raise_pending()

    # -- internals ---------------------------------------------------------------------------------

    def _before_add(self, request: Request) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise InvalidStateError("AsyncQueue.add() must be called in a running asyncio event loop "
                                    "(use Queue for synchronous code)") from None
        if self._loop is not loop:
            with self._lock:
                if self._loop is not loop:
                    if self._live:
                        raise InvalidStateError("this AsyncQueue has requests in flight in another event loop")
                    self._loop = loop

    def _became_busy(self) -> None:
        self._update_reading()

    def _became_idle(self) -> None:
        self._backlogged.clear()
        self._stop_reading()
        self._wake_idle_waiters()

    def _update_reading(self) -> None:
        """Watches the descriptor while requests are in flight, unless a reader is behind."""
        paused = False
        if self._backlogged:
            self._backlogged = {r for r in self._backlogged
                                if r._iterating and not r._settled and r._buffered > STREAM_BUFFER_LIMIT}
            # Never while a task awaits another request of this queue, or the queue itself: the
            # reader may be that task (awaiting inside its loop), which would then wait forever.
            paused = bool(self._backlogged) and not self._idle_waiters and not any(
                r._waiters or (r._stream and r._head_waiters) for r in list(self._live.values()) if r not in self._backlogged)
        want = bool(self._live) and not paused and not self._closed and not self._closing
        if want and not self._reading and self._loop is not None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True
        elif not want and self._reading:
            self._stop_reading()

    def _chunk_arrived(self, request: Request) -> None:
        if request._iterating and request._buffered > STREAM_BUFFER_LIMIT:
            self._backlogged.add(request)
            if self._reading:
                self._update_reading()

    def _chunk_taken(self, request: Request) -> None:
        if request in self._backlogged and request._buffered <= STREAM_BUFFER_LIMIT:
            self._backlogged.discard(request)
            self._update_reading()

    def _stop_reading(self) -> None:
        if self._reading and self._loop is not None:
            self._reading = False
            try:
                self._loop.remove_reader(self._fd)
            except Exception:  # noqa: BLE001 - the loop is already closed (interpreter exit)
                pass

    def _dispatch_once(self) -> int:
        if self._closed or self._closing:
            return 0
        if _releases or _response_releases:
            _drain()
        ran = ffi.new("size_t *")
        outer, self._dispatching = self._dispatching, True
        try:
            code = lib.rq_queue_dispatch(self._ptr, 0, ran)
        finally:
            self._dispatching = outer
        if code == RQ_ERR_WOULD_DEADLOCK:
            raise WouldDeadlockError("dispatch() was called from a callback of this same queue")
        check(code, "dispatch")
        return int(ran[0])

    def _on_readable(self) -> None:
        try:
            self._dispatch_once()
        except Exception as exc:  # noqa: BLE001 - reported to the loop, as asyncio does
            if self._loop is not None:
                self._loop.call_exception_handler(
                    {"message": "requestqueue: dispatch failed", "exception": exc})

    def _awaited(self, request: Request) -> bool:
        return bool(request._waiters)

    def _callback_error(self, request: Request, exc: BaseException) -> None:
        super()._callback_error(request, exc)
        if not self._awaited(request):
            # A wait() in progress should hear about it now, not when the queue is idle.
            self._wake_idle_waiters()

    def _wake_idle_waiters(self) -> None:
        for future in self._idle_waiters:
            if not future.done():
                try:
                    future.set_result(None)
                except RuntimeError:  # its loop is closed (interpreter exit)
                    pass

    def _wake_waiters(self, request: Request) -> None:
        # Its awaiters will receive the callback's exception: it is reported to them.
        if request._callback_error is not None:
            self._reported(request._callback_error)
        waiters, request._waiters = request._waiters, ()
        for future in waiters:
            if not future.done():
                try:
                    future.set_result(None)
                except RuntimeError:  # its loop is closed (interpreter exit)
                    pass

    def _close(self, at_exit: bool = False) -> None:
        if self._closed:
            return
        if self._dispatching:
            raise WouldDeadlockError("close() was called from a callback of this same queue")
        self._stop_reading()
        self._free()
        self._wake_idle_waiters()
