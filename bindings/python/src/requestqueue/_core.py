"""Requests, queues and the callbacks that connect them to the library.

Lifetimes
---------
* Every queue is created in the library's dispatch delivery mode: its callbacks run only inside
  ``rq_queue_dispatch`` / ``rq_queue_free`` called by this module, on the calling Python thread (for
  :class:`AsyncQueue`, on the event loop's thread, from ``loop.add_reader``). No callback ever
  arrives on a thread of the library.
* The context given to the library for a request is the request's own handle, not a pointer to a
  Python object (handle values are never reused within a process): the callbacks look it up in
  ``_registry``, which refers to the :class:`Request` (weakly: its queue holds it, with its
  callbacks) from ``add`` until its completion callback. A context the registry no longer knows, or
  whose request was collected, is ignored, so no callback can reach a freed Python object.
* Nothing that can run inside the garbage collector (``Request.__del__``, weakref callbacks,
  finalizers) calls the library, cffi or takes a lock: the collector can run at any allocation,
  also while this thread holds cffi's lock (inside ``ffi.new``) or one of the library's. What it
  lets go of is only appended to ``_releases`` (a deque: safe there) and released at the next safe
  point, ``_drain``: every entry into the binding that calls the library (creating a request or a
  queue, ``add``, every queue method, dispatching, closing), the reaper thread, and exit.
* A response is borrowed from the library only during its callback. A completion copies its status,
  outcome and body, and retains it (``rq_response_retain``): the other fields of the
  :class:`Response` (URL, headers, message, attempts, metrics) are read from it on first use, under
  ``_lazy_lock``, and kept. It is released once every field has been read, or after the Response is
  garbage collected (its weakref's callback queues the weakref in ``_releases``; ``_retained`` maps
  each weakref to the Response's ``__dict__``), never once the interpreter is exiting. A forked
  child reads and releases the parent's responses through the library, which allows it (see "Fork"
  in requestqueue.h). A completion with a body larger than ``_EAGER_BODY`` bytes
  copies everything at once instead (the retained response would hold a second copy of the body),
  as does an authentication challenge.
* A :class:`Request` releases its handle after it is garbage collected (queued in ``_releases``; the
  library keeps a request in flight for itself), except in a forked child for a request of the
  parent and once the interpreter is exiting.
* The C callbacks are module globals created once, never freed.
* Streaming (``stream=True``): the pieces of the body are kept in the request's buffer until
  :meth:`Request.iter_bytes` / :meth:`Request.aiter_bytes` hands them out. The library pauses a
  transfer while more than about 1 MiB waits for delivery, so memory stays bounded as long as the
  binding stops delivering while the reader is behind: a :class:`Queue` delivers only inside the
  iterator (or another wait), when the buffer is empty; an :class:`AsyncQueue` stops watching its
  descriptor while an iterated buffer holds more than ``STREAM_BUFFER_LIMIT`` bytes.
* Queues are closed by ``close()``, by their context manager, and at interpreter exit by an
  ``atexit`` hook (``rq_queue_free`` cancels what is in flight and delivers its completions before
  returning). Nothing global holds a queue: ``_registry`` holds its requests in flight only weakly
  (the queue holds them, and each holds its queue), so a queue nobody references any more, with its
  requests, is garbage. Its finalizer (inside the collector) only hands it to the reaper, a thread
  of this module started with the first queue, which frees it (its requests still in flight are
  cancelled; their callbacks are not called: nobody holds them any more) and emits a
  ResourceWarning, as an unclosed file does. In a child created by ``fork()`` the parent's queues
  are closed (the library refuses them too); the child makes its own.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import json as _json
import os
import select
import sys
import threading
import time
import tracemalloc
import warnings
import weakref
from queue import SimpleQueue
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Dict,
    Generator,
    IO,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Union,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

from ._errors import (
    OUTCOME_ERRORS,
    AlreadyAddedError,
    BodyRestartedError,
    InvalidArgumentError,
    InvalidHeaderError,
    InvalidMethodError,
    InvalidStateError,
    InvalidURLError,
    QueueClosedError,
    RequestError,
    WaitTimeoutError,
    WouldDeadlockError,
)
from . import _encoding, _transport, _types
from ._options import RequestOptions
from ._native import check, ffi, lib, raise_result
from ._types import (
    DUPLICATES_CODES,
    ORDER_CODES,
    Duplicates,
    Headers,
    HeadersInput,
    Metrics,
    Order,
    Outcome,
    Priority,
    Progress,
    QueueStats,
    RateLimit,
    Response,
    State,
    _built,
)

__all__ = ["Request", "AuthChallenge", "Queue", "AsyncQueue", "STREAM_BUFFER_LIMIT"]

_RQ_ERR_INVALID_HANDLE = 2
_RQ_ERR_NOT_ACTIVE = 10
_RQ_ERR_WOULD_DEADLOCK = 15

CompleteCallback = Callable[["Request"], Any]
ProgressCallback = Callable[["Request", Progress], Any]
AuthCallback = Callable[["Request", "AuthChallenge"], Optional[Tuple[str, str]]]
BodyCallback = Callable[["Request", bytes, int], Any]
BodyInput = Union[bytes, bytearray, memoryview, str, "IO[bytes]", Iterable[bytes]]
PathInput = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
RateLimitInput = Union[RateLimit, Tuple[int, float], Tuple[int, float, bool], None]

#: An :class:`AsyncQueue` stops delivering callbacks while the unread buffer of a request being
#: iterated with :meth:`Request.aiter_bytes` holds more than this many bytes.
STREAM_BUFFER_LIMIT = 1 << 20
_RESTART = object()  # in a stream buffer: the body started over (a retried attempt)
_UINT32_MAX = 0xFFFFFFFF
_UINT64_MAX = 0xFFFFFFFFFFFFFFFF

# --------------------------------------------------------------------------------------------------
# Process-wide state
# --------------------------------------------------------------------------------------------------

# handle -> weak reference to the request in flight (added, completion not yet run). Keys are
# rq_request * cdata, which hash and compare by address, so the void * context of a callback finds
# its request. Weak: the request's queue holds it (see the Lifetimes above).
_registry: Dict[Any, "weakref.ReferenceType[Request]"] = {}
_open_queues: "weakref.WeakSet[_QueueBase]" = weakref.WeakSet()
_pid = os.getpid()  # the process that owns the library's threads
_exiting = False
# What the garbage collector let go of, released by _drain: rq_request * handles of collected
# Requests, and the weakrefs of collected Responses (keys of _retained). Only appended to by code
# that can run inside the collector (deque.append takes no lock).
_releases: Deque[Any] = collections.deque()
_release_later = _releases.append
# Queues nobody closed, handed over by their finalizer (SimpleQueue.put is safe inside the
# collector): freed by the reaper thread. Also carries the reaper's stop (None) and flush marks.
_dropped: "SimpleQueue[Any]" = SimpleQueue()
_reaper: Optional[threading.Thread] = None
_reaper_lock = threading.Lock()


# fork(): the library itself keeps working in the child (see "Fork" in requestqueue.h: its locks
# are free there, responses can be read and released, the parent's queues refuse every call but
# rq_queue_free). What is left to do here is this module's own state: its locks, the reaper thread
# (not copied into the child), and the parent's queues, whose Python locks a thread of the parent
# may hold (they are forgotten without them).
def _before_fork() -> None:
    _lazy_lock.acquire()


def _after_fork_in_parent() -> None:
    _lazy_lock.release()


def _after_fork_in_child() -> None:
    global _pid, _dropped, _reaper, _reaper_lock
    _pid = os.getpid()
    _dropped, _reaper, _reaper_lock = SimpleQueue(), None, threading.Lock()  # the reaper stayed there
    _lazy_lock.release()
    for queue in list(_open_queues):
        queue._abandon()
    _registry.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


@atexit.register
def _close_all_at_exit() -> None:
    """Closes every open queue before the interpreter goes away: in-flight requests are cancelled
    and their completions delivered (without running user callbacks: there is no caller left to
    hear about them). The reaper first frees the queues dropped so far, and stops."""
    global _exiting
    reaper = _reaper
    if reaper is not None and reaper.is_alive():
        _dropped.put(None)
        reaper.join()
    _drain()
    _exiting = True
    while True:
        for queue in list(_open_queues):
            try:
                queue._close(at_exit=True)
            except BaseException:  # noqa: BLE001 - nothing can be reported at exit
                pass
        try:
            item = _dropped.get_nowait()  # dropped meanwhile (a collection while closing)
        except Exception:  # noqa: BLE001 - queue.Empty: all done
            break
        if isinstance(item, tuple):
            try:
                _free_dropped(item)
            except BaseException:  # noqa: BLE001 - nothing can be reported at exit
                pass


def _drain() -> None:
    """Does the releases the garbage collector queued in _releases. At safe points only: never
    inside the collector."""
    if _exiting:
        return
    while _releases:
        try:
            item = _releases.popleft()
        except IndexError:  # another thread took the last one
            break
        if type(item) is weakref.ref:  # a collected Response
            with _lazy_lock:
                entry = _retained.pop(id(item), None)
                ptr = entry[1].pop("_retained", None) if entry is not None else None
            if ptr is not None:
                lib.rq_response_release(ptr)
        else:
            lib.rq_request_free(item)


def _start_reaper() -> None:
    global _reaper
    with _reaper_lock:
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="requestqueue-reaper", daemon=True)
            _reaper.start()


def _reap() -> None:
    """The reaper thread: frees the queues that were dropped without close() (see _dropped)."""
    dropped = _dropped  # (a forked child gets its own)
    while True:
        item = dropped.get()
        if item is None:
            return
        try:
            if isinstance(item, tuple):
                _free_dropped(item)
                _drain()
            else:
                item.set()  # _wait_for_reaper's mark: everything before it is done
        except BaseException as exc:  # noqa: BLE001 - the reaper must go on
            _unexpected(type(exc), exc, exc.__traceback__)


def _wait_for_reaper() -> None:
    """Returns once every queue dropped so far (handed to the reaper) has been freed."""
    if _reaper is not None and _reaper.is_alive():
        done = threading.Event()
        _dropped.put(done)
        done.wait()


def _free_dropped(info: Tuple[Any, ...]) -> None:
    """Frees a queue that was garbage collected without close(), outside the collector, and warns
    as an unclosed file does. Its requests were collected with it: their completions (cancelled)
    find nobody in _registry, so no callback of the caller runs."""
    ptr, pid, kind, filename, lineno, allocated = info
    if pid != _pid:
        return
    count = ffi.new("size_t *")
    in_flight = int(count[0]) if lib.rq_queue_count(ptr, count) == 0 else 0
    lib.rq_queue_free(ptr)
    message = f"unclosed requestqueue {kind}: freed by the garbage collector"
    if in_flight:
        message += f", {in_flight} request{'s' if in_flight != 1 else ''} in flight cancelled"
    message += "; close it with close() or a with block"
    if allocated is not None:
        message += "\nObject allocated at (most recent call last):" + "".join(
            f'\n  File "{file}", lineno {line}' for file, line in allocated)
    warnings.warn_explicit(message, ResourceWarning, filename, lineno)


def _creation_site() -> Tuple[str, int, Optional[Tuple[Tuple[str, int], ...]]]:
    """The file and line outside this module that is creating a queue; with tracemalloc tracing,
    also the stack there (oldest frame first, at most tracemalloc's traceback limit of frames),
    for the ResourceWarning of a queue dropped without close()."""
    frame: Any = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    site = frame.f_code.co_filename, frame.f_lineno
    if not tracemalloc.is_tracing():
        return site[0], site[1], None
    stack = []
    while frame is not None and len(stack) < tracemalloc.get_traceback_limit():
        stack.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return site[0], site[1], tuple(reversed(stack))


def _cstring(value: Union[str, bytes], what: str, error: type) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise TypeError(f"{what} must be str or bytes, not {type(value).__name__}")
    if b"\0" in data:
        raise error(f"{what} contains a NUL character: {value!r}")
    return data


def _path(value: PathInput, what: str) -> bytes:
    """A file system path as the bytes the library opens (str paths encoded as the OS does)."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), not {type(value).__name__}")
    data = os.fsencode(value)
    if not data:
        raise InvalidArgumentError(f"{what} is empty")
    if b"\0" in data:
        raise InvalidArgumentError(f"{what} contains a NUL character: {value!r}")
    return data


def _uint(value: int, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0 or value > maximum:
        raise InvalidArgumentError(f"{name} must be between 0 and {maximum}, not {value}")
    return value


def _parse_priority(value: Union[Priority, int, str]) -> Priority:
    try:
        if isinstance(value, str):
            return Priority[value.upper()]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"priority must be a Priority, an int or a name, not {type(value).__name__}")
        return Priority(value)
    except (KeyError, ValueError):
        names = ", ".join(repr(p.name.lower()) for p in Priority)
        low, high = min(Priority).value, max(Priority).value
        raise InvalidArgumentError(f"priority must be one of {names} ({low} to {high}), not {value!r}") from None


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# ffi.string without its Python-level wrapper (it is called for every header of every response).
_string: Callable[[Any], bytes] = getattr(getattr(ffi, "_backend", None), "string", ffi.string)
_NULL = ffi.NULL
_NORMAL = Priority.NORMAL
_OUTCOMES: Dict[int, Outcome] = {int(outcome): outcome for outcome in Outcome}
_METRICS_SIZE = ffi.sizeof("rq_metrics")
# ffi.new without its Python-level wrapper, for the out-parameter of every request's creation.
_newp: Callable[[Any], Any] = getattr(getattr(ffi, "_backend", None), "newp", ffi.new)
_REQUEST_OUT = ffi.typeof("rq_request **")


class _OutParams(threading.local):
    """The out-parameters of _copy_response, one set per thread (the GIL is released in every call
    of the library, so two dispatching threads must not share them)."""

    def __init__(self) -> None:
        self.all = (ffi.new("size_t *"), ffi.new("const char **"), ffi.new("const char **"),
                    ffi.new("rq_metrics *"))


_out = _OutParams()


def _text(ptr: Any) -> str:
    return _decode(_string(ptr)) if ptr != _NULL else ""


def _copy_metrics(ptr: Any, out: Any) -> Optional[Metrics]:
    out.size = _METRICS_SIZE
    if lib.rq_response_metrics(ptr, out) != 0:
        return None
    # The library's -1 ("does not apply") becomes None.
    queued, dns, connect, tls, first_byte, total = (
        out.queued, out.dns, out.connect, out.tls, out.first_byte, out.total)
    return _built(Metrics, {
        "queued": queued if queued >= 0 else None,
        "dns": dns if dns >= 0 else None,
        "connect": connect if connect >= 0 else None,
        "tls": tls if tls >= 0 else None,
        "first_byte": first_byte if first_byte >= 0 else None,
        "total": total if total >= 0 else None,
        "bytes_down": out.bytes_down,
        "bytes_up": out.bytes_up,
        "attempts": out.attempts,
        "connection_reused": bool(out.connection_reused),
        "wire_bytes_down": out.wire_bytes_down,
        "header_bytes_down": out.header_bytes_down,
        "http_version": out.http_version,
    })


def _copy_response(ptr: Any) -> Response:
    """Copies everything out of a borrowed rq_response (valid only during the callback)."""
    size = _out.all[0]
    body_ptr = lib.rq_response_body(ptr, size)
    length = size[0]
    body = ffi.buffer(body_ptr, length)[:] if length else b""
    outcome_code = lib.rq_response_outcome(ptr)
    fields = {
        "status": lib.rq_response_status(ptr),
        "body": body,
        # An outcome this binding does not know (a newer library) counts as a transport failure.
        "outcome": _OUTCOMES.get(outcome_code, Outcome.TRANSPORT),
        "http_version": lib.rq_response_http_version(ptr),
    }
    for name in _LAZY_PARTS:
        _read_part(ptr, fields, name)
    return _built(Response, fields)


#: A completion whose body is larger than this copies every field at once and lets the library's
#: response go, rather than keeping it (and a second copy of the body) for the fields not yet read.
_EAGER_BODY = 64 * 1024
# The fields a completion leaves in the library until used, one name per read (the metrics bring
# the attempts with them), and how they are made.
_LAZY_PARTS = ("headers", "url", "message", "metrics")
# id(weakref to a Response) -> (that weakref, the Response's __dict__), for every Response made with
# a retained rq_response (in the __dict__, as "_retained", until released), until it is collected:
# the weakref's callback queues the weakref in _releases, and _drain releases it. (Keyed by id: a
# weakref hashes as its Response, which reads every field.)
_retained: Dict[int, Tuple[Any, Dict[str, Any]]] = {}
# Held while a retained response is read, and across fork().
_lazy_lock = threading.Lock()
_new_ref = weakref.ref


def _read_part(ptr: Any, fields: Dict[str, Any], name: str) -> None:
    if name == "headers":
        _, key, value, _ = _out.all
        header_at = lib.rq_response_header_at
        pairs = [(_string(key[0]), _string(value[0])) for index in range(lib.rq_response_header_count(ptr))
                 if header_at(ptr, index, key, value) == 0]
        fields["headers"] = Headers._from_bytes(pairs)  # decoded on first use
    elif name == "url":
        fields["url"] = _text(lib.rq_response_url(ptr))
    elif name == "message":
        fields["message"] = _text(lib.rq_response_error_message(ptr)) if fields["outcome"] else ""
    else:
        metrics = _copy_metrics(ptr, _out.all[3])
        fields["metrics"] = metrics
        # (The metrics hold the attempts too: one call fewer.)
        fields["attempts"] = metrics.attempts if metrics is not None else lib.rq_response_attempts(ptr)


def _completed_response(ptr: Any) -> Response:
    """The Response of a completion: status, outcome and body copied now; the other fields read
    from the retained rq_response on first use (see _load_field)."""
    size = _out.all[0]
    body_ptr = lib.rq_response_body(ptr, size)
    length = size[0]
    if length > _EAGER_BODY:
        return _copy_response(ptr)
    response = object.__new__(Response)
    fields = response.__dict__
    fields["status"] = lib.rq_response_status(ptr)
    fields["body"] = ffi.buffer(body_ptr, length)[:] if length else b""
    outcome_code = lib.rq_response_outcome(ptr)
    # An outcome this binding does not know (a newer library) counts as a transport failure.
    fields["outcome"] = _OUTCOMES.get(outcome_code, Outcome.TRANSPORT)
    fields["http_version"] = lib.rq_response_http_version(ptr)
    if not outcome_code:
        fields["message"] = ""
    fields["_retained"] = lib.rq_response_retain(ptr)
    ref = _new_ref(response, _release_later)
    _retained[id(ref)] = (ref, fields)
    return response


def _load_field(response: Response, name: str) -> Any:
    """Reads the field `name` of a Response from its retained rq_response (the reader holds the
    Response, so it cannot be collected meanwhile); lets the rq_response go once every field has
    been read. Called by _types._LazyField."""
    fields = response.__dict__
    with _lazy_lock:
        if name not in fields:
            ptr = fields.get("_retained")
            if ptr is None:  # not made by a completion (object.__new__ by hand)
                raise AttributeError(name)
            _read_part(ptr, fields, "metrics" if name == "attempts" else name)
            if "headers" in fields and "url" in fields and "message" in fields and "metrics" in fields:
                del fields["_retained"]
                _release(ptr)
    return fields[name]


def _release(ptr: Any) -> None:
    # Not once the interpreter is exiting (lib may be gone). (In a forked child, the library
    # reads and releases the parent's responses as well.)
    if not _exiting:
        lib.rq_response_release(ptr)


_types._load_field = _load_field


def _note(exc: BaseException, text: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(text)


# --------------------------------------------------------------------------------------------------
# The C callbacks (created once; they only look up tokens, so a stale one is harmless)
# --------------------------------------------------------------------------------------------------


def _unexpected(exc_type: Any, exc_value: Any, traceback: Any) -> None:
    # Only reached if this module itself fails inside a callback; user code is wrapped.
    sys.stderr.write(f"requestqueue: internal error in a callback: {exc_value!r}\n")


def _live_request(context: Any) -> Optional["Request"]:
    ref = _registry.get(context)
    return ref() if ref is not None else None  # (None: collected with its dropped queue)


def _on_completion(context: Any, request: Any, response: Any) -> None:
    ref = _registry.pop(context, None)
    req = ref() if ref is not None else None
    if req is not None:
        req._complete(response)


def _on_upload(context: Any, request: Any, progress: float, done: int, total: int) -> None:
    req = _live_request(context)
    if req is not None:
        req._progress(req._on_upload_progress, "upload progress", progress, done, total)


def _on_download(context: Any, request: Any, progress: float, done: int, total: int) -> None:
    req = _live_request(context)
    if req is not None:
        req._progress(req._on_download_progress, "download progress", progress, done, total)


def _on_auth(context: Any, request: Any, challenge: Any, failure_count: int, response: Any) -> None:
    req = _live_request(context)
    if req is None:
        lib.rq_auth_cancel(challenge)  # never leave a challenge without an answer
        return
    req._authenticate(challenge, int(failure_count), response)


def _on_head(context: Any, request: Any, head: Any) -> None:
    req = _live_request(context)
    if req is not None:
        req._head_arrived(head)


def _on_body(context: Any, request: Any, data: Any, size: int, offset: int) -> int:
    req = _live_request(context)
    if req is not None:
        req._body_piece(data, int(size), int(offset))
    return 0  # a callback that raised has already cancelled the request


_completion_cb: Any = ffi.callback("rq_completion_fn", _on_completion, onerror=_unexpected)
_body_cb: Any = ffi.callback("rq_data_fn", _on_body, error=0, onerror=_unexpected)
_head_cb: Any = ffi.callback("rq_head_fn", _on_head, onerror=_unexpected)
_upload_cb: Any = ffi.callback("rq_progress_fn", _on_upload, onerror=_unexpected)
_download_cb: Any = ffi.callback("rq_progress_fn", _on_download, onerror=_unexpected)
_auth_cb: Any = ffi.callback("rq_auth_fn", _on_auth, onerror=_unexpected)


# --------------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------------


class AuthChallenge:
    """An authentication challenge: the server answered 401.

    Answer it exactly once, now (inside the ``on_auth`` callback) or later (from any thread or
    task): :meth:`use_credential`, :meth:`continue_without` or :meth:`cancel`. Until it is answered
    the request keeps its place among the running requests. An ``on_auth`` callback may instead
    return a ``(user, password)`` tuple, which answers with that credential.
    """

    def __init__(self, request: "Request", handle: Any, failure_count: int, response: Response) -> None:
        self.request = request
        #: The number of credentials the server already rejected for this request (0 at first).
        self.failure_count = failure_count
        #: The 401 response: status, headers (WWW-Authenticate, ...) and body.
        self.response = response
        self._handle = handle
        self._answered = False
        self._lock = threading.Lock()

    @property
    def answered(self) -> bool:
        return self._answered

    def _answer(self, what: str, call: Callable[[], int]) -> None:
        with self._lock:
            if self._answered:
                raise InvalidStateError(f"{what}: this challenge was already answered")
            self._answered = True
            code = call()
        if code == _RQ_ERR_INVALID_HANDLE:
            raise InvalidStateError(f"{what}: the request completed or was cancelled before the answer")
        check(code, what)

    def use_credential(self, user: str, password: str) -> None:
        """Sends the request again with this user and password (Basic or Digest, as asked)."""
        u = _cstring(user, "user", InvalidArgumentError)
        p = _cstring(password, "password", InvalidArgumentError)
        self._answer("use_credential", lambda: lib.rq_auth_use_credential(self._handle, u, p))

    def continue_without(self) -> None:
        """Goes on without a credential: the request fails with HTTPStatusError (401)."""
        self._answer("continue_without", lambda: lib.rq_auth_continue_without(self._handle))

    def cancel(self) -> None:
        """Cancels the request (it fails with RequestCancelled)."""
        self._answer("cancel", lambda: lib.rq_auth_cancel(self._handle))

    def __repr__(self) -> str:
        return f"<AuthChallenge failures={self.failure_count} answered={self._answered} for {self.request!r}>"


class Request:
    """One HTTP exchange. Build it, then hand it to a queue (``queue.add(request)``); it is
    single-use. Invalid input raises at once (:class:`InvalidURLError`, ...).

    Callbacks, all optional, run on the thread that waits on the queue (or, for
    :class:`AsyncQueue`, in its event loop):

    * ``on_complete(request)``: exactly once, when the request ends, however it ends.
    * ``on_upload_progress(request, progress)`` / ``on_download_progress(request, progress)``:
      with a :class:`Progress`.
    * ``on_auth(request, challenge)``: the server answered 401; see :class:`AuthChallenge`.
    * ``on_body(request, data, offset)``: the body of a 2xx response piece by piece (``data`` is
      bytes, ``offset`` its position in the body of the current attempt: 0 again when a retry
      starts the body over) instead of collecting it in :attr:`Response.body`.

    An exception raised by a callback is not swallowed: the request fails with it (a running
    request is cancelled) and it is raised again in the caller (see the queues' docs).

    Where the body of a 2xx response goes: into :attr:`Response.body` (default), to ``on_body``,
    to :meth:`iter_bytes` / :meth:`aiter_bytes` (``stream=True``), or into ``output_file``
    (written by the library's own thread; ``resume=True`` continues a partial file with a Range
    request). With the last three, memory stays bounded whatever the size of the body, and the
    completed response's body is empty; the body of any other response (an HTTP error, ...) is
    still collected in the response.
    """

    # Instance attributes whose initial value is shared: each request sets its own when it changes.
    _owner = 0  # the pid of the process whose library owns _handle (0: no handle yet)
    _queue: Optional["_QueueBase"] = None
    _response: Optional[Response] = None
    _error: Optional[BaseException] = None
    _callback_error: Optional[BaseException] = None
    _settled = False
    _challenges: Tuple[AuthChallenge, ...] = ()  # kept alive until completion, for a later answer
    # stream=True (with _chunks, the pieces not yet handed out by iter_bytes()/aiter_bytes(), and
    # _chunk_waiters, the futures of aiter_bytes() waiting for one, made in __init__): the total size
    # of those pieces, the size of the current attempt's body so far, the bytes of it already handed
    # out, and the number of iterators reading it.
    _buffered = 0
    _attempt_bytes = 0
    _handed_out = 0
    _iterating = 0
    _stream = False
    # stream=True: the head of the current attempt's final response (see `head`).
    _head: Optional[Response] = None
    # The callbacks given (see __init__), and the futures awaiting the request (a list once one does).
    _on_complete: Optional[CompleteCallback] = None
    _on_upload_progress: Optional[ProgressCallback] = None
    _on_download_progress: Optional[ProgressCallback] = None
    _on_auth: Optional[AuthCallback] = None
    _on_body: Optional[BodyCallback] = None
    _waiters: "Union[Tuple[()], List[asyncio.Future[None]]]" = ()
    # Public attributes whose value is the same for most requests (set by __init__ when not).
    #: The headers as given (a value of None removed that header).
    headers: Tuple[Tuple[str, Union[str, bytes, None]], ...] = ()
    #: The body as bytes (None when there is none).
    body: Optional[bytes] = None
    #: The tag given at construction (None when none): see Queue.count_tag/cancel_tag/snapshot.
    tag: Optional[str] = None
    #: The output file given at construction (None when none).
    output_file: Optional[PathInput] = None

    def __init__(
        self,
        url: str,
        method: str = "GET",
        *,
        headers: Optional[HeadersInput] = None,
        body: Optional[BodyInput] = None,
        json: Any = None,
        params: Optional[_encoding.ParamsInput] = None,
        data: Optional[_encoding.DataInput] = None,
        files: Optional[_encoding.FilesInput] = None,
        timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        header_timeout: Optional[float] = None,
        low_speed_limit: Optional[Tuple[float, float]] = None,
        auth: Optional[Tuple[str, str]] = None,
        retry: bool = False,
        retry_delay: Optional[float] = None,
        retry_outcomes: Optional[Iterable[Union[Outcome, int]]] = None,
        max_attempts: Optional[int] = None,
        retry_backoff: Optional[float] = None,
        retry_max_delay: Optional[float] = None,
        retry_jitter: Optional[float] = None,
        retry_statuses: Optional[Iterable[int]] = None,
        retry_non_idempotent: bool = False,
        priority: Union[Priority, int, str] = Priority.NORMAL,
        tag: Optional[str] = None,
        max_redirects: Optional[int] = None,
        max_response_size: Optional[int] = None,
        ca_file: Optional[PathInput] = None,
        decode_content: Optional[bool] = None,
        user_agent: Optional[str] = None,
        proxy: Optional[str] = None,
        no_proxy: Optional[Union[str, Iterable[str]]] = None,
        proxy_ca_file: Optional[PathInput] = None,
        client_cert: Optional[PathInput] = None,
        client_key: Optional[PathInput] = None,
        key_password: Optional[str] = None,
        pinned_public_key: Optional[str] = None,
        ca_dir: Optional[PathInput] = None,
        tls_min_version: Optional[str] = None,
        unsafe_no_tls_verify: Optional[bool] = None,
        unix_socket: Optional[PathInput] = None,
        resolve: Optional[Union[str, Iterable[str]]] = None,
        interface: Optional[str] = None,
        ip_version: Optional[int] = None,
        tcp_keepalive: Optional[int] = None,
        max_recv_speed: Optional[int] = None,
        max_send_speed: Optional[int] = None,
        http_version: Optional[str] = None,
        cookies: Optional[bool] = None,
        stream: bool = False,
        output_file: Optional[PathInput] = None,
        resume: bool = False,
        on_complete: Optional[CompleteCallback] = None,
        on_upload_progress: Optional[ProgressCallback] = None,
        on_download_progress: Optional[ProgressCallback] = None,
        on_auth: Optional[AuthCallback] = None,
        on_body: Optional[BodyCallback] = None,
    ) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url must be str, not {type(url).__name__}")
        if _releases:
            _drain()
        if params is not None:
            url = _encoding.with_params(url, params)
        out = _newp(_REQUEST_OUT)
        # (_cstring only to raise its error: the URL is a str.)
        code = lib.rq_request_new(url.encode("utf-8") if "\0" not in url
                                  else _cstring(url, "url", InvalidURLError), out)
        if code:
            raise_result(code, f"invalid URL {url!r}")
        self._handle = out[0]
        self._owner = _pid
        # Each callback given is kept here; the others stay the class's None (likewise below for
        # stream, headers, body, tag and output_file: only what is given is set).
        self._on_complete = on_complete
        if stream:
            self._stream = True
            self._chunks: Deque[Any] = collections.deque()
            self._chunk_waiters: List["asyncio.Future[None]"] = []
            self._head_waiters: List["asyncio.Future[None]"] = []

        self.url = url
        self.method = method
        if method != "GET":
            self._call(lib.rq_request_set_method, _cstring(method, "method", InvalidMethodError),
                       what=f"invalid method {method!r}")

        if (body is not None) + (json is not None) + (data is not None or files is not None) > 1:
            raise TypeError("give one of body, json and data/files, not several")
        content_type = None
        if json is not None:
            body = _json.dumps(json).encode("utf-8")
            content_type = "application/json"
        elif data is not None or files is not None:
            body, content_type = _encoding.encode_form(data, files)
        if headers is not None or content_type is not None:
            header_list = self._header_pairs(headers)
            if content_type is not None and not any(name.lower() == "content-type" for name, _ in header_list):
                header_list.append(("Content-Type", content_type))
            for name, value in header_list:
                value_arg = ffi.NULL if value is None else _cstring(value, f"value of header {name!r}",
                                                                    InvalidHeaderError)
                self._call(lib.rq_request_set_header, _cstring(name, "header name", InvalidHeaderError),
                           value_arg, what=f"invalid header {name!r}")
            self.headers = tuple(header_list)

        if body is not None:
            if isinstance(body, str):
                body = body.encode("utf-8")
            elif not isinstance(body, (bytes, bytearray, memoryview)):
                body = _encoding.read_body(body)  # a file or an iterator: read whole (see _encoding)
            content = bytes(body)
            self._call(lib.rq_request_set_body, ffi.from_buffer(content) if content else ffi.NULL,
                       len(content), what="body")
            self.body = content

        if timeout is not None or connect_timeout is not None or idle_timeout is not None \
                or header_timeout is not None or retry_delay is not None:
            for setter, value, name in ((lib.rq_request_set_timeout, timeout, "timeout"),
                                        (lib.rq_request_set_connect_timeout, connect_timeout, "connect_timeout"),
                                        (lib.rq_request_set_idle_timeout, idle_timeout, "idle_timeout"),
                                        (lib.rq_request_set_header_timeout, header_timeout, "header_timeout"),
                                        (lib.rq_request_set_retry_delay, retry_delay, "retry_delay")):
                if value is not None:
                    self._call(setter, self._seconds(value, name), what=f"{name}={value!r}")
        if low_speed_limit is not None:
            if not (isinstance(low_speed_limit, tuple) and len(low_speed_limit) == 2):
                raise TypeError("low_speed_limit must be a (bytes_per_second, seconds) tuple")
            rate = self._number(low_speed_limit[0], "low_speed_limit bytes_per_second")
            window = self._seconds(low_speed_limit[1], "low_speed_limit seconds")
            self._call(lib.rq_request_set_low_speed_limit, rate, window,
                       what=f"low_speed_limit={low_speed_limit!r}")
        if auth is not None:
            if not (isinstance(auth, tuple) and len(auth) == 2):
                raise TypeError("auth must be a (user, password) tuple")
            self._call(lib.rq_request_set_credentials,
                       _cstring(auth[0], "user", InvalidArgumentError),
                       _cstring(auth[1], "password", InvalidArgumentError), what="auth")
        if retry:
            self._call(lib.rq_request_set_retry, 1, what="retry")
        if retry_outcomes is not None:
            codes = [int(Outcome(o)) for o in retry_outcomes]
            array = ffi.new("rq_outcome[]", codes) if codes else ffi.NULL
            self._call(lib.rq_request_set_retry_outcomes, array, len(codes),
                       what=f"retry_outcomes={codes!r}")
        if max_attempts is not None:
            if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 0:
                raise InvalidArgumentError(f"max_attempts must be an int >= 0, not {max_attempts!r}")
            if max_attempts > 0xFFFFFFFF:
                raise InvalidArgumentError(f"max_attempts is too large: {max_attempts}")
            self._call(lib.rq_request_set_max_attempts, max_attempts, what=f"max_attempts={max_attempts}")
        if retry_backoff is not None or retry_max_delay is not None or retry_jitter is not None:
            multiplier = 1.0 if retry_backoff is None else self._number(retry_backoff, "retry_backoff")
            max_delay = 0.0 if retry_max_delay is None else self._seconds(retry_max_delay, "retry_max_delay")
            jitter = 0.0 if retry_jitter is None else self._number(retry_jitter, "retry_jitter")
            self._call(lib.rq_request_set_retry_backoff, multiplier, max_delay, jitter,
                       what=(f"retry_backoff={multiplier!r} (1 to 100), retry_max_delay={max_delay!r}, "
                             f"retry_jitter={jitter!r} (0 to 1)"))
        if retry_statuses is not None:
            statuses = list(retry_statuses)
            for status in statuses:
                if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
                    raise InvalidArgumentError(f"retry_statuses must be HTTP statuses from 400 to 599, "
                                               f"not {status!r}")
            array = ffi.new("int[]", statuses) if statuses else ffi.NULL
            self._call(lib.rq_request_set_retry_statuses, array, len(statuses),
                       what=f"retry_statuses={statuses!r}")
        if retry_non_idempotent:
            self._call(lib.rq_request_set_retry_non_idempotent, 1, what="retry_non_idempotent")
        if priority is not _NORMAL:  # (the library's default)
            level = _parse_priority(priority)
            if level is not _NORMAL:
                self._call(lib.rq_request_set_priority, int(level), what=f"priority={priority!r}")
        if tag is not None:
            if not isinstance(tag, str):
                raise TypeError(f"tag must be str, not {type(tag).__name__}")
            self._call(lib.rq_request_set_tag, _cstring(tag, "tag", InvalidArgumentError), what="tag")
            self.tag = tag
        if max_redirects is not None:
            self._call(lib.rq_request_set_max_redirects, _uint(max_redirects, "max_redirects", _UINT32_MAX),
                       what=f"max_redirects={max_redirects!r} (at most 1000)")
        if max_response_size is not None:
            self._call(lib.rq_request_set_max_response_size,
                       _uint(max_response_size, "max_response_size", _UINT64_MAX),
                       what=f"max_response_size={max_response_size!r}")
        if ca_file is not None:
            self._call(lib.rq_request_set_ca_file, _path(ca_file, "ca_file"), what="ca_file")
        _transport.apply_transport(self._handle, {
            "decode_content": decode_content, "user_agent": user_agent, "proxy": proxy, "no_proxy": no_proxy,
            "proxy_ca_file": proxy_ca_file,
            "client_cert": client_cert, "client_key": client_key, "key_password": key_password,
            "pinned_public_key": pinned_public_key, "ca_dir": ca_dir, "tls_min_version": tls_min_version,
            "unsafe_no_tls_verify": unsafe_no_tls_verify, "unix_socket": unix_socket, "resolve": resolve,
            "interface": interface, "ip_version": ip_version, "tcp_keepalive": tcp_keepalive,
            "max_recv_speed": max_recv_speed, "max_send_speed": max_send_speed, "http_version": http_version,
            "cookies": cookies})

        if (on_body is not None) + self._stream + (output_file is not None) > 1:
            sinks = [name for name, given in (("on_body", on_body is not None), ("stream=True", self._stream),
                                              ("output_file", output_file is not None)) if given]
            raise TypeError(f"the body goes to one place: give only one of {' and '.join(sinks)}")
        if resume and output_file is None:
            raise TypeError("resume=True needs an output_file")
        if output_file is not None:
            self._call(lib.rq_request_set_output_file, _path(output_file, "output_file"), int(bool(resume)),
                       what=f"output_file={output_file!r}")
            self.output_file = output_file

        # The handle is the context of the callbacks (see _registry).
        code = lib.rq_request_set_completion(self._handle, _completion_cb, self._handle, _NULL)
        if code:
            raise_result(code, "completion")
        if on_upload_progress is not None:
            self._on_upload_progress = on_upload_progress
            self._call(lib.rq_request_set_upload_progress, _upload_cb, what="on_upload_progress")
        if on_download_progress is not None:
            self._on_download_progress = on_download_progress
            self._call(lib.rq_request_set_download_progress, _download_cb, what="on_download_progress")
        if on_auth is not None:
            self._on_auth = on_auth
            self._call(lib.rq_request_set_auth_handler, _auth_cb, what="on_auth")
        if on_body is not None or stream:
            self._on_body = on_body
            self._call(lib.rq_request_set_body_callback, _body_cb, what="on_body")
        if stream:
            self._call(lib.rq_request_set_head_callback, _head_cb, what="stream")

    def __del__(self) -> None:
        # Runs inside the garbage collector: only queues the caller's handle for _drain. Never in
        # a forked child for a request of the parent, nor once the interpreter is exiting (as the
        # interpreter goes away, the module's globals become None: _pid then no longer matches).
        if self._owner == _pid and not _exiting:
            _release_later(self._handle)

    # -- construction helpers ----------------------------------------------------------------------

    def _call(self, function: Callable[..., int], *args: Any, what: str) -> None:
        check(function(self._handle, *args), what)

    @staticmethod
    def _seconds(value: float, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
        return float(value)

    @staticmethod
    def _number(value: float, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
        return float(value)

    @staticmethod
    def _header_pairs(headers: Optional[HeadersInput]) -> List[Tuple[str, Any]]:
        if headers is None:
            return []
        items = headers.items() if hasattr(headers, "items") else headers
        pairs = []
        for item in items:
            name, value = item
            if not isinstance(name, str):
                raise TypeError(f"header names must be str, not {type(name).__name__}")
            pairs.append((name, value))
        return pairs

    # -- state -------------------------------------------------------------------------------------

    @property
    def queue(self) -> Optional["_QueueBase"]:
        """The queue this request was added to (None before)."""
        return self._queue

    @property
    def state(self) -> State:
        """NEW, WAITING, RUNNING or COMPLETED, as the library sees it now."""
        if self._queue is not None and self._queue._abandoned:
            return State.COMPLETED if self._response is not None else State.NEW
        out = ffi.new("rq_request_state *")
        check(lib.rq_request_get_state(self._handle, out), "state")
        return State(int(out[0]))

    def done(self) -> bool:
        """True once the request has completed (its response or error is known)."""
        return self._response is not None

    @property
    def response(self) -> Optional[Response]:
        """The response once completed (also after a failure: status 0 when none was received)."""
        return self._response

    @property
    def priority(self) -> Priority:
        """The request's :class:`Priority` (NORMAL by default). It may be changed while the request
        waits in a queue: it then moves to its new level (behind the waiting requests of that
        level in FIFO order, ahead of them in LIFO order); for a running request a change has no
        effect. Setting it on a completed request raises NotActiveError."""
        if self._queue is not None and self._queue._abandoned:
            raise QueueClosedError("priority: the request belongs to another process")
        out = ffi.new("rq_priority *")
        check(lib.rq_request_get_priority(self._handle, out), "priority")
        return Priority(int(out[0]))

    @priority.setter
    def priority(self, value: Union[Priority, int, str]) -> None:
        level = _parse_priority(value)
        if self._queue is not None and self._queue._abandoned:
            raise QueueClosedError("priority: the request belongs to another process")
        check(lib.rq_request_set_priority(self._handle, int(level)), f"priority={value!r}")

    # -- streaming ---------------------------------------------------------------------------------

    def iter_bytes(self) -> Iterator[bytes]:
        """The body of a ``stream=True`` request added to a :class:`Queue`, piece by piece, as it
        arrives (callbacks of the queue run on this thread meanwhile). The iteration ends when
        the request has completed; then it raises the request's error, if any (for an HTTP error
        status, :class:`HTTPStatusError` with the whole error body in its response). Nothing is
        yielded for a non-2xx response.

        Leaving the loop early (``break``, an exception) cancels the request. Data delivered while
        nobody iterates (another thread waiting on the queue) is kept in memory until read. If a
        retry starts the body over after part of it was read, :class:`BodyRestartedError` is
        raised; call ``iter_bytes()`` again to read the new attempt's body from its start.
        """
        queue = self._stream_queue("iter_bytes")
        if not isinstance(queue, Queue):
            raise InvalidStateError(f"{self!r} belongs to an AsyncQueue: use `async for ... in "
                                    "request.aiter_bytes()`")
        return self._iter_sync(queue)

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body of a ``stream=True`` request added to an :class:`AsyncQueue`, piece by piece
        (``async for chunk in request.aiter_bytes()``); see :meth:`iter_bytes`. While more than
        ``STREAM_BUFFER_LIMIT`` bytes wait to be read, the queue stops delivering callbacks (of all
        its requests), so a slow reader slows the download instead of filling memory."""
        queue = self._stream_queue("aiter_bytes")
        if not isinstance(queue, AsyncQueue):
            raise InvalidStateError(f"{self!r} belongs to a Queue: use `for ... in request.iter_bytes()`")
        return self._iter_async(queue)

    @property
    def head(self) -> Optional[Response]:
        """For a ``stream=True`` request: the head of the response, as soon as its headers have
        arrived, before its body (None until then): a :class:`Response` with the ``status``,
        ``headers`` and ``url`` of the final response of the latest attempt (not of a redirect that
        is followed, nor of a 401 answered by ``on_auth``), an empty ``body``, and ``outcome``
        HTTP_STATUS for a status >= 400. A retried attempt replaces it with its own. See
        :meth:`wait_head` / :meth:`await_head`."""
        return self._head

    def wait_head(self, timeout: Optional[float] = None) -> Optional[Response]:
        """Waits (running the :class:`Queue`'s callbacks on this thread, at most `timeout`
        seconds) until the head of the response of a ``stream=True`` request has arrived, or the
        request has completed; returns :attr:`head`, None when the request completed without one
        (it failed before a response's headers arrived: :meth:`result` raises why)."""
        queue = self._stream_queue("wait_head")
        if not isinstance(queue, Queue):
            raise InvalidStateError(f"{self!r} belongs to an AsyncQueue: use `await request.await_head()`")
        self._wait_head_sync(queue, None, timeout)
        return self._head

    async def await_head(self) -> Optional[Response]:
        """The :meth:`wait_head` of a ``stream=True`` request added to an :class:`AsyncQueue`.
        Cancelling the awaiting task cancels the request."""
        queue = self._stream_queue("await_head")
        if not isinstance(queue, AsyncQueue):
            raise InvalidStateError(f"{self!r} belongs to a Queue: use request.wait_head()")
        await self._wait_head_async(queue, None)
        return self._head

    def _wait_head_sync(self, queue: "Queue", previous: Optional[Response], timeout: Optional[float]) -> None:
        """Until a head other than `previous` arrived, or the request settled."""
        queue._run_until(lambda: self._head is not previous or self._settled, timeout, "wait_head")

    async def _wait_head_async(self, queue: "AsyncQueue", previous: Optional[Response]) -> None:
        while self._head is previous and not self._settled:
            loop = asyncio.get_running_loop()
            if loop is not queue._loop:
                raise InvalidStateError(f"{self!r} runs in another event loop: await it there")
            future: asyncio.Future[None] = loop.create_future()
            self._head_waiters.append(future)
            queue._update_reading()
            try:
                await future
            except asyncio.CancelledError:
                if not self._settled:
                    self.cancel()
                raise
            finally:
                if future in self._head_waiters:
                    self._head_waiters.remove(future)

    def _stream_queue(self, what: str) -> "_QueueBase":
        if not self._stream:
            raise InvalidStateError(f"{what}: {self!r} was not created with stream=True")
        if self._queue is None:
            raise InvalidStateError(f"{what}: {self!r} was never added to a queue")
        return self._queue

    def _next_chunk(self) -> Optional[bytes]:
        """The next buffered piece (None when the buffer is empty); raises BodyRestartedError at
        the place where a retried attempt started the body over."""
        if not self._chunks:
            return None
        item = self._chunks.popleft()
        if item is _RESTART:
            self._handed_out = 0
            raise BodyRestartedError(f"the body of {self!r} started over (the request was retried "
                                     "after part of its body was read)", self)
        piece: bytes = item
        self._buffered -= len(piece)
        self._handed_out += len(piece)
        queue = self._queue
        if queue is not None:
            queue._chunk_taken(self)
        return piece

    def _iter_sync(self, queue: "Queue") -> Iterator[bytes]:
        finished = False
        try:
            while True:
                chunk = self._next_chunk()
                if chunk is not None:
                    yield chunk
                elif self._settled:
                    finished = True
                    self._outcome()  # raises the request's error, if any
                    return
                else:
                    queue._run_until(lambda: bool(self._chunks) or self._settled, None, "iter_bytes")
        except BodyRestartedError:
            finished = True
            raise
        finally:
            if not finished and not self._settled:
                self.cancel()  # the reader went away: stop the transfer

    async def _iter_async(self, queue: "AsyncQueue") -> AsyncIterator[bytes]:
        finished = False
        self._iterating += 1
        try:
            while True:
                chunk = self._next_chunk()
                if chunk is not None:
                    yield chunk
                elif self._settled:
                    finished = True
                    self._outcome()
                    return
                else:
                    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                    self._chunk_waiters.append(future)
                    queue._update_reading()
                    try:
                        await future
                    finally:
                        if future in self._chunk_waiters:
                            self._chunk_waiters.remove(future)
        except BodyRestartedError:
            finished = True
            raise
        finally:
            self._iterating -= 1
            if not finished and not self._settled:
                self.cancel()
            queue._update_reading()

    def exception(self) -> Optional[BaseException]:
        """The error of a completed request (None if it succeeded). Raises InvalidStateError if it
        has not completed yet."""
        if self._response is None:
            raise InvalidStateError(f"{self!r} has not completed yet")
        self._mark_reported()
        return self._error

    def result(self, timeout: Optional[float] = None) -> Response:
        """The response, or raises the request's error.

        With a :class:`Queue`, waits for the request (running the queue's callbacks on this
        thread), at most `timeout` seconds (then WaitTimeoutError). With an :class:`AsyncQueue`
        use ``await request`` instead: ``result()`` only reads a completed request.
        """
        if not self._settled:
            queue = self._queue
            if queue is None:
                raise InvalidStateError(f"{self!r} was never added to a queue")
            if isinstance(queue, AsyncQueue):
                if self._response is None:
                    raise InvalidStateError(f"{self!r} has not completed yet: await it")
            elif isinstance(queue, Queue) and (self._response is None or not queue._in_callback()):
                # (In its own completion callback the request is complete but not yet settled.)
                queue._run_until(lambda: self._settled, timeout, f"waiting for {self!r}")
        return self._outcome()

    def _outcome(self) -> Response:
        assert self._response is not None
        self._mark_reported()
        if self._error is not None:
            raise self._error
        return self._response

    def __await__(self) -> Generator[Any, None, Response]:
        return self._wait_async().__await__()

    async def _wait_async(self) -> Response:
        queue = self._queue
        if queue is None:
            raise InvalidStateError(f"{self!r} was never added to a queue")
        if not isinstance(queue, AsyncQueue):
            raise InvalidStateError(f"{self!r} belongs to a Queue: use request.result(); "
                                    "awaiting needs an AsyncQueue")
        if not self._settled:
            loop = asyncio.get_running_loop()
            if loop is not queue._loop:
                raise InvalidStateError(f"{self!r} runs in another event loop: await it there")
            future: asyncio.Future[None] = loop.create_future()
            if not self._waiters:
                self._waiters = []
            self._waiters.append(future)
            queue._update_reading()  # (deliveries paused for a slow reader resume for this wait)
            try:
                await future
            except asyncio.CancelledError:
                # The awaiting task was cancelled: cancel the request too (unless another task
                # still waits for it).
                if future in self._waiters:
                    self._waiters.remove(future)
                if not self._settled and not self._waiters:
                    self.cancel()
                raise
        return self._outcome()

    def cancel(self) -> bool:
        """Cancels a waiting or running request: it fails with RequestCancelled. Returns False
        when it was not active (never added, or already completed)."""
        if self._queue is None or self._queue._abandoned or self._response is not None:
            return False
        code = lib.rq_cancel(self._handle)
        if code == _RQ_ERR_NOT_ACTIVE:
            return False
        check(code, "cancel")
        return True

    def __repr__(self) -> str:
        if self._response is not None:
            status = f"done {self._response.outcome.name} {self._response.status}"
        elif self._queue is not None:
            status = "added"
        else:
            status = "new"
        return f"<Request {self.method} {self.url} {status}>"

    # -- callbacks (called by the C trampolines, on the dispatching thread) ------------------------

    def _user_callbacks_allowed(self) -> bool:
        return not _exiting and self._callback_error is None

    def _callback_failed(self, exc: BaseException, kind: str) -> None:
        _note(exc, f"(raised in the {kind} callback of {self!r})")
        first = self._callback_error is None
        if first:
            self._callback_error = exc
        queue = self._queue
        if queue is not None:
            queue._callback_error(self, exc)
        if first and self._response is None:
            # Stop the transfer: its result is now this exception.
            lib.rq_cancel(self._handle)

    def _progress(self, callback: Optional[ProgressCallback], kind: str,
                  fraction: float, done: int, total: int) -> None:
        if callback is None or not self._user_callbacks_allowed():
            return
        try:
            callback(self, Progress(int(done), int(total) if total >= 0 else None,
                                    float(fraction) if fraction >= 0 else None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            self._callback_failed(exc, kind)

    def _body_piece(self, data: Any, size: int, offset: int) -> None:
        if not self._user_callbacks_allowed():
            return
        piece = bytes(ffi.buffer(data, size))
        if self._on_body is not None:
            try:
                self._on_body(self, piece, offset)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                self._callback_failed(exc, "body")
            return
        if offset == 0 and self._attempt_bytes:
            # A retried attempt starts the body over: what the reader has not seen yet of the
            # failed attempt is dropped; if it saw part of it, it is told where the new body starts.
            self._chunks.clear()
            self._buffered = 0
            if self._handed_out:
                self._chunks.append(_RESTART)
        self._attempt_bytes = offset + size
        self._chunks.append(piece)
        self._buffered += size
        self._wake_chunk_waiters()
        queue = self._queue
        if queue is not None:
            queue._chunk_arrived(self)

    def _head_arrived(self, ptr: Any) -> None:
        if not self._stream or not self._user_callbacks_allowed():
            return
        self._head = _copy_response(ptr)
        self._wake(self._head_waiters)

    def _wake_chunk_waiters(self) -> None:
        self._wake(self._chunk_waiters)

    @staticmethod
    def _wake(futures: "List[asyncio.Future[None]]") -> None:
        for future in futures:
            if not future.done():
                try:
                    future.set_result(None)
                except RuntimeError:  # its loop is closed (interpreter exit)
                    pass
        futures.clear()

    def _authenticate(self, handle: Any, failure_count: int, response_ptr: Any) -> None:
        challenge = AuthChallenge(self, handle, failure_count, _copy_response(response_ptr))
        if self._on_auth is None or not self._user_callbacks_allowed():
            challenge.cancel()
            return
        self._challenges += (challenge,)  # keeps it for a later answer
        try:
            answer = self._on_auth(self, challenge)
            if answer is not None:
                if not (isinstance(answer, tuple) and len(answer) == 2):
                    raise TypeError(f"on_auth must return None or a (user, password) tuple, not {answer!r}")
                challenge.use_credential(*answer)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            if not challenge.answered:
                try:
                    challenge.cancel()
                except RequestError:
                    pass
            self._callback_failed(exc, "auth")

    def _complete(self, response_ptr: Any) -> None:
        queue = self._queue
        try:
            response = _completed_response(response_ptr)
        except BaseException as exc:  # noqa: BLE001 - should not happen; never lose the completion
            response = Response("", 0, Headers(), b"", Outcome.TRANSPORT, repr(exc), 0, None)
        error: Optional[BaseException] = None
        if self._callback_error is not None:
            error = self._callback_error
        elif response.outcome != Outcome.OK:
            error = OUTCOME_ERRORS.get(int(response.outcome), RequestError)(
                response.message or response.outcome.name.lower(), self, response)
        self._error = error
        self._response = response
        self._challenges = ()
        if self._on_complete is not None and not _exiting:
            try:
                self._on_complete(self)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                _note(exc, f"(raised in the completion callback of {self!r})")
                if self._callback_error is None:
                    self._callback_error = exc
                    self._error = exc
                if queue is not None:
                    queue._callback_error(self, exc)
        self._settled = True
        if self._stream:
            self._wake_chunk_waiters()
            self._wake(self._head_waiters)
        if queue is not None:
            queue._finished(self)

    def _mark_reported(self) -> None:
        queue = self._queue
        if queue is not None and self._callback_error is not None:
            queue._reported(self._callback_error)


# --------------------------------------------------------------------------------------------------
# Queues
# --------------------------------------------------------------------------------------------------


def _parse_order(value: Union[Order, str]) -> Order:
    try:
        return Order(value)
    except ValueError:
        raise InvalidArgumentError(f"mode must be 'fifo' or 'lifo', not {value!r}") from None


def _parse_duplicates(value: Union[Duplicates, str]) -> Duplicates:
    try:
        return Duplicates(value)
    except ValueError:
        raise InvalidArgumentError(
            f"duplicates must be 'cancel_earlier', 'allow' or 'coalesce', not {value!r}") from None


def _check_max_concurrent(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_concurrent must be an int, not {type(value).__name__}")
    if value < 0 or value > 2**63:
        raise InvalidArgumentError(f"max_concurrent must be >= 0 (0 = unlimited), not {value}")


_DUPLICATES_BY_CODE = {code: dup for dup, code in DUPLICATES_CODES.items()}


def _tag(tag: str) -> bytes:
    if not isinstance(tag, str):
        raise TypeError(f"tag must be str, not {type(tag).__name__}")
    return _cstring(tag, "tag", InvalidArgumentError)


def _check_max_per_host(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_per_host must be an int, not {type(value).__name__}")
    if value < 0 or value > 2**63:
        raise InvalidArgumentError(f"max_per_host must be >= 0 (0 = no per-host limit), not {value}")


def _parse_rate_limit(value: RateLimitInput) -> Optional[RateLimit]:
    if value is None:
        return None
    if not isinstance(value, tuple) or not 2 <= len(value) <= 3:
        raise TypeError("rate_limit must be None, a RateLimit or a (starts, interval[, per_host]) "
                        f"tuple, not {value!r}")
    limit = RateLimit(*value)
    starts = _uint(limit.starts, "rate_limit starts", _UINT32_MAX)
    if isinstance(limit.interval, bool) or not isinstance(limit.interval, (int, float)):
        raise TypeError(f"rate_limit interval must be a number of seconds, not {limit.interval!r}")
    if not isinstance(limit.per_host, bool):
        raise TypeError(f"rate_limit per_host must be a bool, not {limit.per_host!r}")
    if starts == 0:
        return None  # no limit
    return RateLimit(starts, float(limit.interval), limit.per_host)


def _check_fetchable(request: Union[Request, str], kwargs: RequestOptions) -> None:
    if kwargs.get("stream") or (isinstance(request, Request) and request._stream):
        raise TypeError("fetch() returns the completed response, whose body a stream=True request "
                        "does not keep: use add() and iterate the request's body instead")


class _QueueBase:
    """What both queue kinds share: settings, adding, cancelling, counting, closing."""

    def __init__(
        self,
        max_concurrent: int = 2,
        mode: Union[Order, str] = Order.FIFO,
        duplicates: Union[Duplicates, str] = Duplicates.CANCEL_EARLIER,
        suspended: bool = False,
        max_per_host: int = 0,
        rate_limit: RateLimitInput = None,
        defaults: Optional[Mapping[str, Any]] = None,
        max_connections: int = 0,
        max_host_connections: int = 0,
    ) -> None:
        order = _parse_order(mode)
        dup = _parse_duplicates(duplicates)
        _check_max_concurrent(max_concurrent)
        _check_max_per_host(max_per_host)
        limit = _parse_rate_limit(rate_limit)
        _transport.check_queue_settings(defaults, max_connections, max_host_connections)
        self._closed = True  # until fully set up, so that a failure below leaves nothing to free
        self._closing = False
        self._abandoned = False
        if _reaper is None:
            _start_reaper()
        if _releases:
            _drain()
        filename, lineno, allocated = _creation_site()
        out = ffi.new("rq_queue **")
        check(lib.rq_queue_new(lib.RQ_DELIVERY_DISPATCH, out), "Queue()")
        self._ptr = out[0]
        try:
            fd = ffi.new("int *")
            check(lib.rq_queue_get_fd(self._ptr, fd), "Queue()")
            self._fd = int(fd[0])
            self._lock = threading.RLock()
            self._live: Dict[Any, Request] = {}  # handle -> request in flight
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
        except BaseException:
            self._closed = True
            lib.rq_queue_free(self._ptr)
            raise
        # Runs inside the garbage collector if the queue is dropped without close(): only hands it
        # to the reaper (see _free_dropped). Not at exit: the atexit hook closes queues itself.
        self._finalizer = weakref.finalize(self, _dropped.put, (self._ptr, _pid, type(self).__name__,
                                                                filename, lineno, allocated))
        self._finalizer.atexit = False
        _open_queues.add(self)
        if defaults or max_connections or max_host_connections:
            try:
                _transport.apply_queue_settings(self._ptr, defaults, max_connections, max_host_connections)
            except BaseException:
                self._closed = True
                lib.rq_queue_free(self._ptr)
                _open_queues.discard(self)
                raise

    # -- settings ----------------------------------------------------------------------------------

    def _check(self, code: int, what: str) -> None:
        if code == _RQ_ERR_INVALID_HANDLE and (self._closed or self._closing):
            raise QueueClosedError(f"{what}: the queue is closed")  # closed by another thread
        check(code, what)

    def _q(self, what: str) -> Any:
        if _releases:
            _drain()
        if self._closed:
            raise QueueClosedError(f"{what}: the queue is closed")
        return self._ptr

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
        if lib.rq_queue_cookies_load(self._q("load_cookies"), _path(path, "path")) == 17:
            raise OSError(f"cannot read the cookie file {path!r}")

    def save_cookies(self, path: PathInput) -> None:
        """Writes every cookie of the jar to a Netscape cookie file (replacing it); OSError when
        it cannot be written."""
        if lib.rq_queue_cookies_save(self._q("save_cookies"), _path(path, "path")) == 17:
            raise OSError(f"cannot write the cookie file {path!r}")

    @property
    def max_concurrent(self) -> int:
        """The maximum number of requests running at once; 0 means unlimited. Takes effect at once."""
        out = ffi.new("size_t *")
        self._check(lib.rq_queue_get_max_concurrent(self._q("max_concurrent"), out), "max_concurrent")
        return int(out[0])

    @max_concurrent.setter
    def max_concurrent(self, value: int) -> None:
        _check_max_concurrent(value)
        self._check(lib.rq_queue_set_max_concurrent(self._q("max_concurrent"), value), "max_concurrent")

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
        _check_max_per_host(value)
        self._check(lib.rq_queue_set_max_per_host(self._q("max_per_host"), value), "max_per_host")

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
        with self._lock:
            return [self._live[h] for h in handles if h in self._live]

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
        if isinstance(request, Request):
            if kwargs:
                raise TypeError("keyword arguments are for a URL, not for a Request")
            req = request
        else:
            req = Request(request, **kwargs)
        if _releases:
            _drain()
        self._before_add(req)
        with self._lock:
            if self._closed:
                raise QueueClosedError("add: the queue is closed")
            ptr = self._ptr
            if req._queue is not None:
                raise AlreadyAddedError(f"{req!r} was already added to a queue; a request is single-use")
            req._queue = self
            handle = req._handle
            self._live[handle] = req
            _registry[handle] = _new_ref(req)
            code = lib.rq_add(ptr, handle)
            if code != 0:
                req._queue = None
                del self._live[handle]
                _registry.pop(handle, None)
                self._check(code, f"add {req!r}")
            if len(self._live) == 1:
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

    def _finished(self, request: Request) -> None:
        with self._lock:
            self._live.pop(request._handle, None)
            idle = not self._live
        if idle:
            self._became_idle()

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
        if _releases:
            _drain()
        code = lib.rq_queue_free(self._ptr)
        if code == _RQ_ERR_WOULD_DEADLOCK:
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
        self._closing = False
        self._leading = False  # one thread at a time runs callbacks and polls; the others wait
        self._local = threading.local()
        self._wake_r, self._wake_w = os.pipe()
        try:
            super().__init__(max_concurrent, mode, duplicates, suspended, max_per_host, rate_limit,
                             defaults, max_connections, max_host_connections)
        except BaseException:
            os.close(self._wake_r)
            os.close(self._wake_w)
            raise
        self._cond = threading.Condition(self._lock)
        weakref.finalize(self, os.close, self._wake_r).atexit = False
        weakref.finalize(self, os.close, self._wake_w).atexit = False
        # Only the thread leading the dispatch polls (see _run_until): one poller serves them all.
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)
        self._poller.register(self._wake_r, select.POLLIN)

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
        if code == _RQ_ERR_WOULD_DEADLOCK:
            raise WouldDeadlockError("dispatch() was called from a callback of this same queue")
        if code == _RQ_ERR_INVALID_HANDLE and self._closing:
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
                        raise QueueClosedError(f"{what}: the queue is closed")
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
        self._closing = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._reading = False
        self._dispatching = False
        self._idle_waiters: List["asyncio.Future[None]"] = []
        # Requests being iterated whose unread buffer is over STREAM_BUFFER_LIMIT: while there is
        # one, the queue's descriptor is not watched (no callback is delivered).
        self._backlogged: Set[Request] = set()
        super().__init__(max_concurrent, mode, duplicates, suspended, max_per_host, rate_limit,
                             defaults, max_connections, max_host_connections)

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
                raise QueueClosedError("wait: the queue is closed")
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
                r._waiters or (r._stream and r._head_waiters) for r in self._live.values() if r not in self._backlogged)
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
        if _releases:
            _drain()
        ran = ffi.new("size_t *")
        outer, self._dispatching = self._dispatching, True
        try:
            code = lib.rq_queue_dispatch(self._ptr, 0, ran)
        finally:
            self._dispatching = outer
        if code == _RQ_ERR_WOULD_DEADLOCK:
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

    def _finished(self, request: Request) -> None:
        if request._waiters:
            # Its awaiters will receive the callback's exception: it is reported to them.
            if request._callback_error is not None:
                self._reported(request._callback_error)
            for future in request._waiters:
                if not future.done():
                    try:
                        future.set_result(None)
                    except RuntimeError:  # its loop is closed (interpreter exit)
                        pass
            request._waiters.clear()
        super()._finished(request)

    def _close(self, at_exit: bool = False) -> None:
        if self._closed:
            return
        if self._dispatching:
            raise WouldDeadlockError("close() was called from a callback of this same queue")
        self._stop_reading()
        self._free()
        self._wake_idle_waiters()
