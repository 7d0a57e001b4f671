"""The binding's process-wide state: requests in flight, what the garbage collector let go of
(released at safe points by ``_drain``), the reaper thread that frees dropped queues, fork and
interpreter exit.

The binding is split by concept: ``_native`` (the library and its errors), ``_convert`` (argument
conversions), ``_runtime`` (this module), ``_response`` (responses read from the library),
``_callbacks`` (the C callbacks), ``_request`` (:class:`Request`, :class:`AuthChallenge`),
``_queues`` (what both queue kinds share, and :class:`Queue`) and ``_async_queue``
(:class:`AsyncQueue`).

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
  whose request was collected, is ignored, so no callback can reach a freed Python object. A
  request added by URL in one call (``rq_add_url_with_summary``: ``add(url)``, ``add(url, on_complete=f)``) has
  no handle before that call, and its completion may run on another thread before the call
  returns: its context is an integer of ``_context_values`` (never reused), registered before the
  call in ``_contexts``, which refers to the request's queue (weakly: one reference per queue, not
  one per request), and in that queue's ``_live``, which holds its requests in flight by key.
* Nothing that can run inside the garbage collector (finalizers, weakref callbacks, the
  destructors of ``ffi.gc`` pointers) calls the library, cffi or takes a lock: the collector can run
  at any allocation, also while this thread holds one of the library's locks, or cffi's (inside
  ``ffi.new`` of a ``cffi.FFI``, made when the header is parsed at import; the prebuilt ffi of
  ``_ffi`` has no Python-level lock). What it lets go of is only appended to ``_releases`` or ``_response_releases``
  (``deque.append``, a C function that takes no lock, is the destructor of the ``ffi.gc`` pointers
  below: no Python code runs) and released at the next safe point, ``_drain``, all of a kind in one
  call (``rq_request_free_many``, ``rq_response_release_many``): every entry into the binding that calls the library
  (creating a request or a queue, ``add``, every queue method, dispatching, closing), the reaper
  thread, and exit.
* A response is borrowed from the library only during its callback. A completion receives its
  response retained, with its status, outcome, HTTP version and body as arguments (every request's
  completion is an ``rq_summary_completion_fn``; no call): it copies those, and the other fields of the
  :class:`Response` (URL, headers, message, attempts, metrics) are read from it on first use, under
  ``_lazy_lock``, and kept. It is released once every field has been read, or after the Response is
  garbage collected (the retained pointer, in the Response's ``__dict__``, is an ``ffi.gc`` pointer
  whose destructor queues it in ``_response_releases``), never once the interpreter is exiting. A forked
  child reads and releases the parent's responses through the library, which allows it (see "Fork"
  in requestqueue.h). A completion with a body larger than ``_EAGER_BODY`` bytes
  copies everything at once instead and lets it go (the retained response would hold a second copy
  of the body), as does an authentication challenge.
* A request body is always an immutable ``bytes`` object (the one given, or the binding's one copy
  of a bytearray, memoryview, str, file, ...), which the library reads in place
  (``rq_request_set_body_borrowed``: no copy in the library). The :class:`Request` holds it (its
  ``body``) while it lives, and ``_held_bodies`` from ``add`` until the request's completion
  callback returns: a queue dropped with requests in flight is collected with them, and its requests
  keep sending until the reaper frees it. A request never added is collected with its body; the
  library never reads the body of a request that is not added, and nothing can add it any more.
* A :class:`Request` releases its handle after it is garbage collected (its handle is an ``ffi.gc``
  pointer queued in ``_releases``; the library keeps a request in flight for itself), never once
  the interpreter is exiting. (In a forked child, the parent's requests are released too: the
  library frees the child's copy of the handle, see "Fork" in requestqueue.h.)
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

import atexit
import collections
import itertools
import os
import sys
import threading
import warnings
import weakref
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Tuple

from ._native import ffi, lib

try:  # (what tracemalloc re-exports, without its module, which imports pickle, linecache, ...)
    from _tracemalloc import get_traceback_limit, is_tracing
except ImportError:  # (an interpreter without the C module)
    from tracemalloc import get_traceback_limit, is_tracing

if TYPE_CHECKING:
    from ._queues import _QueueBase
    from ._request import Request

# handle -> weak reference to the request in flight (added, completion not yet run). Keys are
# rq_request * cdata, which hash and compare by address, so the void * context of a callback finds
# its request. Weak: the request's queue holds it (see the Lifetimes above).
_registry: Dict[Any, "weakref.ReferenceType[Request]"] = {}
# The same for the requests added by URL in one call (rq_add_url_with_summary, see Queue.add): the handle is
# not known before the call, so their context is an integer of _context_values (never reused),
# registered before it. It maps to the queue (its _self_ref: weak, as above), whose _live holds the
# request under that same integer.
_contexts: Dict[int, "weakref.ReferenceType[_QueueBase]"] = {}
# handle -> the body of a request in flight (added, completion not yet run), which the library reads
# in place (rq_request_set_body_borrowed): held strongly, because a queue dropped with its requests
# collects them (and their `body`) while its requests still run until the reaper frees it.
_held_bodies: Dict[Any, bytes] = {}
_context_values = itertools.count(1)  # (next() of a count is atomic)
_open_queues: "weakref.WeakSet[_QueueBase]" = weakref.WeakSet()
_pid = os.getpid()  # the process that owns the library's threads
_exiting = False
# What the garbage collector let go of, released by _drain: `_releases` holds the rq_request *
# handles of collected Requests, `_response_releases` the retained rq_response * of collected
# Responses (one deque per kind, each released in one call). Only appended to, by the destructors
# of ffi.gc pointers (_gcp below), which can run inside the collector: deque.append is C code and
# takes no lock.
_releases: Deque[Any] = collections.deque()
_response_releases: Deque[Any] = collections.deque()
_release_later = _releases.append
_release_response_later = _response_releases.append
# Held by the thread that empties the two deques (never inside the collector: see _drain).
_drain_lock = threading.Lock()
_starmap, _repeat = itertools.starmap, itertools.repeat
# ffi.gc without its Python-level wrapper: _gcp(pointer, _release_later) is a pointer equal to (and
# hashing as) `pointer` that queues `pointer` in _releases when it is garbage (likewise with
# _release_response_later for a retained rq_response *); _gcp(that, None) disowns it.
_gcp: Callable[..., Any] = getattr(getattr(ffi, "_backend", None), "gcp", ffi.gc)


# Queues nobody closed, handed over by their finalizer (SimpleQueue.put is safe inside the
# collector): freed by the reaper thread. Also carries the reaper's stop (None) and flush marks.
_dropped: "SimpleQueue[Any]" = SimpleQueue()
_reaper: Optional[threading.Thread] = None
_reaper_lock = threading.Lock()
# Held while a retained response is read, and across fork().
_lazy_lock = threading.Lock()


# fork(): the library itself keeps working in the child (see "Fork" in requestqueue.h: its locks
# are free there, responses can be read and released, the parent's queues refuse every call but
# rq_queue_free). What is left to do here is this module's own state: its locks, the reaper thread
# (not copied into the child), and the parent's queues, whose Python locks a thread of the parent
# may hold (they are forgotten without them).
def _before_fork() -> None:
    _lazy_lock.acquire()
    _drain_lock.acquire()


def _after_fork_in_parent() -> None:
    _drain_lock.release()
    _lazy_lock.release()


def _after_fork_in_child() -> None:
    global _pid, _dropped, _reaper, _reaper_lock
    _pid = os.getpid()
    _dropped, _reaper, _reaper_lock = SimpleQueue(), None, threading.Lock()  # the reaper stayed there
    _drain_lock.release()
    _lazy_lock.release()
    for queue in list(_open_queues):
        queue._abandon()
    _registry.clear()
    _contexts.clear()
    _held_bodies.clear()


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
    """Does the releases the garbage collector queued in _releases and _response_releases, each
    kind in one call. At safe points only: never inside the collector."""
    if _exiting:
        return
    while _releases or _response_releases:
        # (The lock only makes each length below true until the pops: other threads only append.)
        with _drain_lock:
            # (As many popleft() calls as there are entries, made by starmap's C loop.)
            responses = list(_starmap(_response_releases.popleft, _repeat((), len(_response_releases))))
            requests = list(_starmap(_releases.popleft, _repeat((), len(_releases))))
        if responses:
            lib.rq_response_release_many(responses, len(responses))
        if requests:
            lib.rq_request_free_many(requests, len(requests))


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
    try:
        warnings.warn_explicit(message, ResourceWarning, filename, lineno)
    except Warning as warning:  # -W error: an exception nobody can catch (we are in the reaper thread)
        # Reported as Python reports a ResourceWarning it cannot raise (an unclosed file's, under -W
        # error), not as a failure of the binding.
        sys.stderr.write(f"Exception ignored in: <requestqueue {kind} made at {filename}:{lineno}>\n"
                         f"{type(warning).__name__}: {warning}\n")


# The files whose frames create a queue (skipped by _creation_site): the queues' own, and the httpx
# transport's (which makes the queue of a client: the warning then names the line of the transport).
_QUEUE_FILES = frozenset(os.path.join(os.path.dirname(__file__), name + ".py")
                         for name in ("_queues", "_async_queue", "httpx"))


def _creation_site() -> Tuple[str, int, Optional[Tuple[Tuple[str, int], ...]]]:
    """The file and line outside the queue modules that is creating a queue; with tracemalloc tracing,
    also the stack there (oldest frame first, at most tracemalloc's traceback limit of frames),
    for the ResourceWarning of a queue dropped without close()."""
    frame: Any = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename in _QUEUE_FILES:
        frame = frame.f_back
    site = frame.f_code.co_filename, frame.f_lineno
    if not is_tracing():
        return site[0], site[1], None
    stack: List[Tuple[str, int]] = []
    while frame is not None and len(stack) < get_traceback_limit():
        stack.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return site[0], site[1], tuple(reversed(stack))


def _unexpected(exc_type: Any, exc_value: Any, traceback: Any) -> None:
    # Only reached if the binding itself fails inside a callback or the reaper; user code is wrapped.
    sys.stderr.write(f"requestqueue: internal error in a callback: {exc_value!r}\n")
