"""Queues: what both kinds share (:class:`_QueueBase`: settings, adding, cancelling, counting,
closing) and the synchronous :class:`Queue`."""

from __future__ import annotations

import os
import select
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

if TYPE_CHECKING:
    from typing_extensions import Unpack

from . import _runtime, _transport
from ._convert import (
    PathInput,
    RateLimitInput,
    _SIZE_MAX,
    _parse_duplicates,
    _parse_order,
    _parse_rate_limit,
    _path,
    _tag,
    _uint,
)
from ._errors import AlreadyAddedError, QueueClosedError, WaitTimeoutError, WouldDeadlockError
from ._native import RQ_ERR_INVALID_HANDLE, RQ_ERR_SYSTEM, RQ_ERR_WOULD_DEADLOCK, check, ffi, lib, raise_result
from ._callbacks import _added_completion_cb
from ._options import RequestOptions
from ._request import _REQUEST_OUT, Request, _newp, _request_outs
from ._runtime import (
    _context_values,
    _contexts,
    _creation_site,
    _drain,
    _gcp,
    _held_bodies,
    _open_queues,
    _registry,
    _release_later,
    _releases,
    _response_releases,
    _start_reaper,
)
from ._types import DUPLICATES_CODES, ORDER_CODES, Duplicates, Order, QueueStats, RateLimit, Response

__all__ = ["Queue"]

_DUPLICATES_BY_CODE = {code: dup for dup, code in DUPLICATES_CODES.items()}
_new_ref = weakref.ref
_PLAIN_OPTIONS = Request._PLAIN_OPTIONS
_new_request = object.__new__
_NULL = ffi.NULL
# What rq_add_url_with_summary returns for its URL, as rq_request_new does (see Request._begin).
_URL_ERRORS = frozenset((lib.RQ_ERR_INVALID_URL, lib.RQ_ERR_UNSUPPORTED_SCHEME, lib.RQ_ERR_OUT_OF_MEMORY))


def _check_fetchable(request: Union[Request, str], kwargs: RequestOptions) -> None:
    if kwargs.get("stream") or (isinstance(request, Request) and request._stream):
        raise TypeError("fetch() returns the completed response, whose body a stream=True request "
                        "does not keep: use add() and iterate the request's body instead")


class _QueueBase:
    """What both queue kinds share: settings, adding, cancelling, counting, closing."""

    _asynchronous = False  # an AsyncQueue (see Request: the two kinds are waited on differently)

    def __init__(
        self,
        max_concurrent: int = 2,
        mode: Union[Order, str] = Order.FIFO,
        duplicates: Union[Duplicates, str] = Duplicates.CANCEL_EARLIER,
        suspended: bool = False,
        *,
        max_per_host: int = 0,
        rate_limit: RateLimitInput = None,
        defaults: Optional[Mapping[str, Any]] = None,
        max_connections: int = 0,
        max_host_connections: int = 0,
    ) -> None:
        order = _parse_order(mode)
        dup = _parse_duplicates(duplicates)
        _uint(max_concurrent, "max_concurrent", _SIZE_MAX)
        _uint(max_per_host, "max_per_host", _SIZE_MAX)
        limit = _parse_rate_limit(rate_limit)
        _transport.check_queue_settings(defaults, max_connections, max_host_connections)
        self._closed = True  # until fully set up, so that a failure below leaves nothing to free
        self._closing = False
        self._abandoned = False
        if _runtime._reaper is None:
            _start_reaper()
        if _releases or _response_releases:
            _drain()
        filename, lineno, allocated = _creation_site()
        self._set_up()
        out = ffi.new("rq_queue **")
        code = lib.rq_queue_new(lib.RQ_DELIVERY_DISPATCH, out)
        if code:
            self._set_up_failed()
            raise_result(code, "Queue()")
        self._ptr = out[0]
        try:
            fd = ffi.new("int *")
            check(lib.rq_queue_get_fd(self._ptr, fd), "Queue()")
            self._fd = int(fd[0])
            self._lock = threading.RLock()
            # The requests in flight, by their key (Request._key: the context of a request added by
            # URL, else its handle).
            self._live: Dict[Any, Request] = {}
            # What _contexts maps the context of each request added by URL to (one per queue).
            self._self_ref = _new_ref(self)
            # Callback exceptions not yet raised to anyone, with the request whose callback raised.
            self._errors: List[Tuple[Request, BaseException]] = []
            self._rate_limit: Optional[RateLimit] = None
            self._closed = False
            self.max_concurrent = max_concurrent
            self.mode = order
            self.duplicates = dup
            if max_per_host:
                self.max_per_host = max_per_host
            if limit is not None:
                self.rate_limit = limit
            if suspended:
                self.suspend()
            if defaults or max_connections or max_host_connections:
                _transport.apply_queue_settings(self._ptr, defaults, max_connections, max_host_connections)
            self._ready()
        except BaseException:
            self._closed = True
            lib.rq_queue_free(self._ptr)
            self._set_up_failed()
            raise
        # Runs inside the garbage collector if the queue is dropped without close(): only hands it
        # to the reaper (see _free_dropped). Not at exit: the atexit hook closes queues itself.
        self._finalizer = weakref.finalize(self, _runtime._dropped.put, (
            self._ptr, _runtime._pid, type(self).__name__, filename, lineno, allocated))
        self._finalizer.atexit = False
        _open_queues.add(self)

    # -- settings ----------------------------------------------------------------------------------

    def _check(self, code: int, what: str) -> None:
        if code == RQ_ERR_INVALID_HANDLE and (self._closed or self._closing):
            raise QueueClosedError(f"{what}: the queue is closed")  # closed by another thread
        check(code, what)

    def _q(self, what: str) -> Any:
        if _releases or _response_releases:
            _drain()
        if self._closed:
            raise self._closed_error(what)
        return self._ptr

    def _closed_error(self, what: str) -> QueueClosedError:
        if self._abandoned:  # (in a forked child: see _abandon)
            return QueueClosedError(f"{what}: the queue was made by the parent process before fork(), and is "
                                    "closed in this child: make a new queue here")
        return QueueClosedError(f"{what}: the queue is closed")

    # -- cookies (requests made with cookies=True, or with it in the queue's defaults) --------------

    def cookies(self) -> List[_transport.Cookie]:
        """The cookies of the queue's jar."""
        return _transport.cookie_list(self._q("cookies"))

    def clear_cookies(self) -> None:
        """Removes every cookie of the queue's jar."""
        self._check(lib.rq_queue_cookies_clear(self._q("clear_cookies")), "clear_cookies")

    def load_cookies(self, path: PathInput) -> None:
        """Adds the cookies of a Netscape cookie file (as curl -c writes) to the jar; OSError
        when it cannot be read."""
        code = lib.rq_queue_cookies_load(self._q("load_cookies"), _path(path, "path"))
        if code == RQ_ERR_SYSTEM:
            raise OSError(f"cannot read the cookie file {path!r}")
        self._check(code, "load_cookies")

    def save_cookies(self, path: PathInput) -> None:
        """Writes every cookie of the jar to a Netscape cookie file (replacing it); OSError when
        it cannot be written."""
        code = lib.rq_queue_cookies_save(self._q("save_cookies"), _path(path, "path"))
        if code == RQ_ERR_SYSTEM:
            raise OSError(f"cannot write the cookie file {path!r}")
        self._check(code, "save_cookies")

    @property
    def max_concurrent(self) -> int:
        """The maximum number of requests running at once; 0 means unlimited. Takes effect at once."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_get_max_concurrent(self._q("max_concurrent"), out), "max_concurrent")
        return int(out[0])

    @max_concurrent.setter
    def max_concurrent(self, value: int) -> None:
        self._check(lib.rq_queue_set_max_concurrent(self._q("max_concurrent"), _uint(value, "max_concurrent", _SIZE_MAX)),
                    "max_concurrent")

    @property
    def mode(self) -> Order:
        """Order.FIFO (default) or Order.LIFO ("fifo"/"lifo"), for requests added from now on."""
        out = ffi.new("rq_order *")
        self._check(lib.rq_queue_get_order(self._q("mode"), out), "mode")
        return Order.LIFO if int(out[0]) == ORDER_CODES[Order.LIFO] else Order.FIFO

    @mode.setter
    def mode(self, value: Union[Order, str]) -> None:
        order = _parse_order(value)
        self._check(lib.rq_queue_set_order(self._q("mode"), ORDER_CODES[order]), "mode")

    @property
    def duplicates(self) -> Duplicates:
        """Duplicates.CANCEL_EARLIER (default: adding a request cancels every earlier equal one) or
        Duplicates.ALLOW. Equal means same method, URL, headers and body."""
        out = ffi.new("rq_duplicates *")
        self._check(lib.rq_queue_get_duplicates(self._q("duplicates"), out), "duplicates")
        return _DUPLICATES_BY_CODE[int(out[0])]

    @duplicates.setter
    def duplicates(self, value: Union[Duplicates, str]) -> None:
        dup = _parse_duplicates(value)
        self._check(lib.rq_queue_set_duplicates(self._q("duplicates"), DUPLICATES_CODES[dup]), "duplicates")

    @property
    def max_per_host(self) -> int:
        """The maximum number of requests running at once to one origin (scheme, host and port, as
        written in the URL), besides max_concurrent; 0 (default) means no per-host limit. A waiting
        request whose host is at its limit keeps its place while requests to other hosts start."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_get_max_per_host(self._q("max_per_host"), out), "max_per_host")
        return int(out[0])

    @max_per_host.setter
    def max_per_host(self, value: int) -> None:
        self._check(lib.rq_queue_set_max_per_host(self._q("max_per_host"), _uint(value, "max_per_host", _SIZE_MAX)),
                    "max_per_host")

    @property
    def rate_limit(self) -> Optional[RateLimit]:
        """How often requests may start: a :class:`RateLimit` ``(starts, interval, per_host)``, or
        None (default) for no limit. Set it to a RateLimit, a ``(starts, interval)`` or ``(starts,
        interval, per_host)`` tuple, or None. ``interval`` is in seconds, in (0, 1e6]."""
        return self._rate_limit

    @rate_limit.setter
    def rate_limit(self, value: RateLimitInput) -> None:
        limit = _parse_rate_limit(value)
        ptr = self._q("rate_limit")
        if limit is None:
            self._check(lib.rq_queue_set_rate_limit(ptr, 0, 1.0, 0), "rate_limit")
        else:
            self._check(lib.rq_queue_set_rate_limit(ptr, limit.starts, limit.interval, int(limit.per_host)),
                        f"rate_limit={value!r} (the interval must be in (0, 1e6] seconds)")
        self._rate_limit = limit

    @property
    def stats(self) -> QueueStats:
        """The queue's counters since it was created: a :class:`QueueStats`."""
        out = ffi.new("rq_queue_stats *")
        out.size = ffi.sizeof("rq_queue_stats")
        self._check(lib.rq_queue_get_stats(self._q("stats"), out), "stats")
        return QueueStats(added=int(out.added), started=int(out.started), retried=int(out.retried),
                          succeeded=int(out.succeeded), cancelled=int(out.cancelled),
                          failed=int(out.failed), coalesced=int(out.coalesced),
                          bytes_down=int(out.bytes_down), bytes_up=int(out.bytes_up))

    @property
    def suspended(self) -> bool:
        out = ffi.new("int *")
        self._check(lib.rq_queue_is_suspended(self._q("suspended"), out), "suspended")
        return bool(out[0])

    def suspend(self) -> None:
        """Starts no waiting request until resume(); running ones go on."""
        self._check(lib.rq_queue_suspend(self._q("suspend")), "suspend")

    def resume(self) -> None:
        """Starts waiting requests at once, up to max_concurrent."""
        self._check(lib.rq_queue_resume(self._q("resume")), "resume")

    @property
    def count(self) -> int:
        """The number of requests in the queue: running plus waiting."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_count(self._q("count"), out), "count")
        return int(out[0])

    def count_tag(self, tag: str) -> int:
        """The number of requests in the queue (running plus waiting) whose tag is `tag`."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_count_tag(self._q("count_tag"), _tag(tag), out), "count_tag")
        return int(out[0])

    def snapshot(self, tag: Optional[str] = None) -> List[Request]:
        """The requests in the queue at one instant (only those whose tag is `tag`, if given): the
        running ones in the order they started, then the waiting ones in the order they will
        start."""
        array = ffi.new("rq_request ***")
        count = ffi.new("size_t *")
        if tag is None:
            self._check(lib.rq_queue_snapshot(self._q("snapshot"), array, count), "snapshot")
        else:
            self._check(lib.rq_queue_snapshot_tag(self._q("snapshot"), _tag(tag), array, count), "snapshot")
        try:
            handles = [array[0][i] for i in range(count[0])]
        finally:
            lib.rq_snapshot_free(array[0])
        # (A completion on another thread may remove a request meanwhile: list() copies at once.)
        live = {r._handle: r for r in list(self._live.values())}
        requests = [live.get(h) for h in handles]
        return [r for r in requests if r is not None]

    def fileno(self) -> int:
        """A descriptor readable exactly while callbacks are pending (for select/poll)."""
        self._q("fileno")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._closed

    # -- requests ----------------------------------------------------------------------------------

    def add(self, request: Union[Request, str], /, **kwargs: Unpack[RequestOptions]) -> Request:
        """Adds a request: a :class:`Request`, or a URL and :class:`Request`'s keyword arguments.
        It starts at once if the queue is not suspended and has a free slot. Returns the request."""
        if type(request) is str and (not kwargs or (len(kwargs) == 1 and "on_complete" in kwargs)) \
                and not self._closed and "\0" not in request:
            # add(url) or add(url, on_complete=f): what Request(url, on_complete=f) and add() below
            # do (the same errors, in the same order), in one call of the library (rq_add_url_with_summary).
            # (Written here rather than in a method of its own: one Python call fewer per request.)
            url = request
            if _releases or _response_releases:
                _drain()
            encoded = url.encode("utf-8")
            req: Request = _new_request(Request)
            if kwargs:
                on_complete = kwargs["on_complete"]
                if on_complete is not None:
                    req._on_complete = on_complete
            req.url = url
            req.method = "GET"
            asynchronous = self._asynchronous
            if asynchronous:
                try:
                    self._before_add(req)
                except BaseException:
                    Request(url)  # (an invalid URL is reported first, as by add(Request(url)))
                    raise
            try:
                out = _request_outs.pop()
            except IndexError:
                out = _newp(_REQUEST_OUT)
            context = next(_context_values)
            # No lock (the general path below takes one; a `with` costs about 1k instructions): the
            # library resolves an add racing with a close (rq_queue_free) on another thread as if
            # one ran first, accepting the request (the close then delivers its completion, found by
            # the registrations made before the call) or refusing it (RQ_ERR_INVALID_HANDLE:
            # QueueClosedError from _check); each registration is one atomic dict operation, and a
            # completion takes no lock either.
            if self._closed:  # (closed by another thread meanwhile: the URL is checked first)
                _request_outs.append(out)
                Request(url)
                raise self._closed_error("add")
            # Known before the call: its completion may run on another thread before it returns.
            req._queue = self
            req._key = context
            live = self._live
            live[context] = req
            _contexts[context] = self._self_ref
            code = lib.rq_add_url_with_summary(self._ptr, encoded, _added_completion_cb, context, _NULL, out)
            if code != 0:
                req._queue = None
                del live[context]
                del _contexts[context]
                _request_outs.append(out)
                if code in _URL_ERRORS:
                    raise_result(code, f"invalid URL {url!r}")
                self._check(code, f"add {req!r}")
            # Released after the request is collected (see Request._begin).
            req._handle = _gcp(out[0], _release_later)
            _request_outs.append(out)
            if asynchronous and len(live) == 1:
                self._became_busy()
            return req
        if isinstance(request, Request):
            if kwargs:
                raise TypeError("keyword arguments are for a URL, not for a Request")
            req = request
        elif kwargs.keys() <= _PLAIN_OPTIONS:
            req = Request._plain(request, kwargs)
        else:
            req = Request(request, **kwargs)
        if _releases or _response_releases:
            _drain()
        asynchronous = self._asynchronous  # (the hooks below do nothing for a Queue: not called)
        if asynchronous:
            self._before_add(req)
        with self._lock:
            if self._closed:
                raise self._closed_error("add")
            ptr = self._ptr
            if req._queue is not None:
                raise AlreadyAddedError(f"{req!r} was already added to a queue; a request is single-use")
            req._queue = self
            handle = req._key = req._handle
            self._live[handle] = req
            _registry[handle] = _new_ref(req)
            body = req.body
            if body is not None:
                _held_bodies[handle] = body  # (read in place by the library until the completion)
            code = lib.rq_add(ptr, handle)
            if code != 0:
                req._queue = None
                self._live.pop(handle, None)
                _registry.pop(handle, None)
                _held_bodies.pop(handle, None)
                self._check(code, f"add {req!r}")
            if asynchronous and len(self._live) == 1:
                self._became_busy()
        return req

    def cancel_all(self) -> None:
        """Cancels every waiting and running request (each fails with RequestCancelled). The queue
        stays usable."""
        self._check(lib.rq_queue_cancel_all(self._q("cancel_all")), "cancel_all")

    def cancel_tag(self, tag: str) -> int:
        """Cancels the waiting and running requests whose tag is `tag` (each fails with
        RequestCancelled); returns how many were cancelled."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_cancel_tag(self._q("cancel_tag"), _tag(tag), out), "cancel_tag")
        return int(out[0])

    # -- hooks for the two kinds -------------------------------------------------------------------

    def _set_up(self) -> None:
        """The kind's own state, made before the library's queue."""

    def _set_up_failed(self) -> None:
        """Undoes _set_up: the queue could not be made."""

    def _ready(self) -> None:
        """The kind's own state that needs the library's queue."""

    # (add() and Request._complete() call these three for an AsyncQueue only.)
    def _before_add(self, request: Request) -> None:
        pass

    def _became_busy(self) -> None:
        pass

    def _became_idle(self) -> None:
        pass

    def _chunk_arrived(self, request: Request) -> None:
        pass

    def _chunk_taken(self, request: Request) -> None:
        pass

    def _update_reading(self) -> None:
        pass

    def _wake_waiters(self, request: Request) -> None:
        """Wakes the tasks awaiting a request that completed (AsyncQueue)."""

    def _callback_error(self, request: Request, exc: BaseException) -> None:
        with self._lock:
            self._errors.append((request, exc))

    def _reported(self, exc: BaseException) -> None:
        with self._lock:
            self._errors = [(r, e) for r, e in self._errors if e is not exc]

    def _take_error(self) -> Optional[BaseException]:
        if not self._errors:  # (read without the lock: one added meanwhile is found next time)
            return None
        with self._lock:
            for index, (request, exc) in enumerate(self._errors):
                if self._awaited(request):
                    continue  # its awaiters will receive it
                del self._errors[index]
                return exc
            return None

    def _awaited(self, request: Request) -> bool:
        return False

    def _raise_pending(self) -> None:
        exc = self._take_error()
        if exc is not None:
            raise exc

    # -- closing -----------------------------------------------------------------------------------

    def _free(self) -> None:
        """Frees the library's queue: in-flight requests are cancelled and their completions run
        here, on this thread."""
        with self._lock:
            if self._closed or self._closing:
                return  # (closed, or being closed by another thread)
            self._closing = True
        if _releases or _response_releases:
            _drain()
        code = lib.rq_queue_free(self._ptr)
        if code == RQ_ERR_WOULD_DEADLOCK:
            self._closing = False
            raise WouldDeadlockError("close() was called from a callback of this same queue")
        with self._lock:
            self._closed = True
        self._finalizer.detach()
        _open_queues.discard(self)
        check(code, "close")

    def _close(self, at_exit: bool = False) -> None:
        raise NotImplementedError

    def _abandon(self) -> None:
        """In a forked child: forget the parent's queue without touching the library."""
        self._abandoned = True
        self._closed = True
        self._finalizer.detach()
        _open_queues.discard(self)
        self._live.clear()

    def __repr__(self) -> str:
        if self._closed:
            return f"<{type(self).__name__} closed>"
        return f"<{type(self).__name__} in flight={len(self._live)}>"


class Queue(_QueueBase):
    """A queue of HTTP requests, used synchronously.

    ``Queue(max_concurrent=2, mode="fifo", duplicates="cancel_earlier", suspended=False, *,
    max_per_host=0, rate_limit=None)``.
    Requests run on the library's own thread; their callbacks run on the thread that calls
    :meth:`wait`, :meth:`fetch`, :meth:`dispatch`, :meth:`Request.result` or :meth:`close` (several
    threads may wait on one queue at once). An exception raised by a callback propagates out of
    that call. Use it as a context manager, or call :meth:`close`.
    """

    def _set_up(self) -> None:
        self._leading = False  # one thread at a time runs callbacks and polls; the others wait
        self._local = threading.local()
        self._wake_r, self._wake_w = os.pipe()

    def _set_up_failed(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _ready(self) -> None:
        self._cond = threading.Condition(self._lock)
        # Only the thread leading the dispatch polls (see _run_until): one poller serves them all.
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)
        self._poller.register(self._wake_r, select.POLLIN)
        # (Last: from here on the pipe is closed by these, not by _set_up_failed.)
        weakref.finalize(self, os.close, self._wake_r).atexit = False
        weakref.finalize(self, os.close, self._wake_w).atexit = False

    def fetch(self, request: Union[Request, str], /, **kwargs: Unpack[RequestOptions]) -> Response:
        """Adds a request and waits for it: returns its Response or raises its error
        (HTTPStatusError for a status >= 400, with the response)."""
        _check_fetchable(request, kwargs)
        return self.add(request, **kwargs).result()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits until every request added has completed, running callbacks on this thread.
        Raises WaitTimeoutError after `timeout` seconds, and the exception of a callback that
        raised. A suspended queue with waiting requests never becomes idle."""
        self._run_until(lambda: not self._live, timeout, "wait")

    def dispatch(self) -> int:
        """Runs the callbacks that are pending now, without waiting; returns how many ran. For a
        host's own event loop: call it when :meth:`fileno` is readable."""
        ran = self._dispatch_once()
        self._raise_pending()
        return ran

    def close(self) -> None:
        """Cancels every request still in flight (their completions run here) and frees the queue.
        Idempotent. Raises the exception of a callback that raised and was not yet reported."""
        self._close()
        self._raise_pending()

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._close()
        if exc_type is None:
            self._raise_pending()

    # -- internals ---------------------------------------------------------------------------------

    def _in_callback(self) -> bool:
        return getattr(self._local, "dispatching", False)

    def _dispatch_once(self) -> int:
        ptr = self._q("dispatch")
        ran = ffi.new("size_t *")
        outer = self._in_callback()  # a dispatch() from a callback is refused by the library
        self._local.dispatching = True
        try:
            code = lib.rq_queue_dispatch(ptr, 0, ran)
        finally:
            self._local.dispatching = outer
        if code == RQ_ERR_WOULD_DEADLOCK:
            raise WouldDeadlockError("dispatch() was called from a callback of this same queue")
        if code == RQ_ERR_INVALID_HANDLE and self._closing:
            return 0
        check(code, "dispatch")
        return int(ran[0])

    def _run_until(self, predicate: Callable[[], bool], timeout: Optional[float], what: str) -> None:
        if self._in_callback():
            raise WouldDeadlockError(f"{what}: called from a callback of this same queue, "
                                     "it would wait for itself")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                while True:
                    self._raise_pending()
                    if predicate():
                        return
                    if self._closed:
                        raise self._closed_error(what)
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise WaitTimeoutError(f"{what}: timed out after {timeout} s")
                    if not self._leading and not self._closing:
                        self._leading = True
                        break
                    # Another thread runs the callbacks, or closes the queue: it notifies.
                    self._cond.wait(remaining)
            try:
                ran = self._dispatch_once()
                if ran == 0 and not predicate() and not self._errors and not self._closing:
                    self._poll(None if deadline is None else deadline - time.monotonic())
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()

    def _poll(self, timeout: Optional[float]) -> None:
        if timeout is not None and timeout <= 0:
            return
        self._poller.poll(None if timeout is None else max(1, int(timeout * 1000 + 0.999)))

    def _close(self, at_exit: bool = False) -> None:
        if self._closed:
            return
        try:
            self._free()
        finally:
            if self._closed:
                os.write(self._wake_w, b"x")  # wakes a thread polling the freed queue's descriptor
            with self._cond:
                self._cond.notify_all()
        with self._cond:
            while self._closing and not self._closed:  # another thread is closing it
                self._cond.wait()
