"""The C callbacks, created once and never freed. Their context is the request's handle, looked up
in _runtime._registry (or, for a request added by URL in one call, an integer, looked up in
_runtime._contexts, which gives its queue): a context it no longer knows, or whose request (or
queue) was collected, is ignored, so a stale callback is harmless."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._native import ADDED_COMPLETION, SUMMARY_COMPLETION, ffi, lib
from ._response import _completed
from ._runtime import _contexts, _held_bodies, _registry, _unexpected

if TYPE_CHECKING:
    from ._request import Request


def _live_request(context: Any) -> Optional["Request"]:
    ref = _registry.get(context)
    return ref() if ref is not None else None  # (None: collected with its dropped queue)


def _on_completion(context: Any, request: Any, response: Any, outcome: int, status: int, http_version: int,
                   body: Any, size: int) -> None:
    """The completion of a request added whole (see SUMMARY_COMPLETION): `response` arrives
    retained, with its figures; _completed keeps it in the Response, or lets it go."""
    ref = _registry.pop(context, None)
    # (A body the library read in place: let go of once this callback returns, see _held_bodies.)
    held = _held_bodies.pop(context, None) if _held_bodies else None  # noqa: F841
    req = ref() if ref is not None else None
    if req is not None:
        req._complete(_completed(response, outcome, status, http_version, body, size))
    else:
        lib.rq_response_release(response)


def _on_added_completion(context: int, request: int, response: Any, outcome: int, status: int,
                         http_version: int, body: Any, size: int) -> None:
    """The completion of a request added with rq_add_url_with_summary (see Queue.add and
    ADDED_COMPLETION): its context is the integer its queue is registered under in _contexts, and
    the key of the request in that queue's _live."""
    ref = _contexts.pop(context, None)
    if ref is not None:
        queue = ref()
        if queue is not None:
            req = queue._live.get(context)
            if req is not None:
                req._complete(_completed(response, outcome, status, http_version, body, size))
                return
    lib.rq_response_release(response)  # (nobody is left to read it)


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


_completion_cb: Any = ffi.callback(SUMMARY_COMPLETION, _on_completion, onerror=_unexpected)
_added_completion_cb: Any = ffi.callback(ADDED_COMPLETION, _on_added_completion, onerror=_unexpected)
_body_cb: Any = ffi.callback("rq_data_fn", _on_body, error=0, onerror=_unexpected)
_head_cb: Any = ffi.callback("rq_head_fn", _on_head, onerror=_unexpected)
_upload_cb: Any = ffi.callback("rq_progress_fn", _on_upload, onerror=_unexpected)
_download_cb: Any = ffi.callback("rq_progress_fn", _on_download, onerror=_unexpected)
_auth_cb: Any = ffi.callback("rq_auth_fn", _on_auth, onerror=_unexpected)
