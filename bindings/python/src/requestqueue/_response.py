"""Responses read from the library: copied at once (a head, an authentication challenge, a large
body), or, for a completion (which receives its response retained), copied in part, its other
fields read on first use (see "Lifetimes" in _runtime)."""

from __future__ import annotations

import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _runtime, _types
from ._convert import _decode
from ._native import ffi, lib, raise_result
from ._runtime import _gcp, _lazy_lock, _release_response_later
from ._types import Headers, Metrics, Outcome, Response, _built

# ffi.string without its Python-level wrapper (it is called for every header of every response).
_string: Callable[[Any], bytes] = getattr(getattr(ffi, "_backend", None), "string", ffi.string)
_NULL = ffi.NULL
_buffer: Callable[[Any, int], Any] = ffi.buffer
# ffi.unpack without its Python-level wrapper: the bytes of a `char *` and a length, copied.
_unpack: Callable[[Any, int], bytes] = getattr(getattr(ffi, "_backend", None), "unpack", ffi.unpack)
_OUTCOMES: Dict[int, Outcome] = {int(outcome): outcome for outcome in Outcome}
_METRICS_SIZE = ffi.sizeof("rq_metrics")
_SUMMARY_SIZE = ffi.sizeof("rq_response_summary")
_TRANSPORT = Outcome.TRANSPORT
_OK = Outcome.OK
_new = object.__new__


class _OutParams(threading.local):
    """The out-parameters of the library's calls made here for the fields read on first use, one
    set per thread (the GIL is released in every call of the library, so two threads must not
    share them)."""

    def __init__(self) -> None:
        self.all = (ffi.new("const char **"), ffi.new("const char **"), ffi.new("rq_metrics *"))


_out = _OutParams()


def _summary_layout() -> "struct.Struct":
    """rq_response_summary as a struct format (its fields in order, at the offsets the cdef gives,
    standard sizes), so that one unpack_from reads every field: reading them one by one through
    cffi costs about as much as the library call itself (each is a cdata attribute lookup)."""
    signed = {"outcome", "status", "http_version"}  # (the others are unsigned, or addresses)
    read = ("size", "outcome", "status", "http_version", "attempts", "body", "body_size")
    layout, at = "=", 0
    for name, field in ffi.typeof("rq_response_summary").fields:
        if name not in read:  # (a field of a later header: skipped)
            continue
        size = ffi.sizeof(field.type)
        code = {4: "I", 8: "Q"}[size]
        layout += "x" * (field.offset - at) + (code.lower() if name in signed else code)
        at = field.offset + size
    return struct.Struct(layout + "x" * (_SUMMARY_SIZE - at))


_unpack_summary = _summary_layout().unpack_from
# Free rq_response_summary structs, each with a buffer over its bytes, taken and given back by
# every completion (list.pop and list.append are atomic: a thread never reads one that another
# thread's library call is writing).
_summaries: List[Tuple[Any, Any]] = []


def _new_summary() -> Tuple[Any, Any]:
    summary = ffi.new("rq_response_summary *")
    summary.size = _SUMMARY_SIZE  # (the library writes the same size back)
    return summary, memoryview(ffi.buffer(summary))  # (a memoryview unpacks faster)


def _summary(ptr: Any) -> Response:
    """A Response with the status, body, outcome and HTTP version of a borrowed rq_response, read in
    one call (the caller copies the other fields during the callback)."""
    response: Response = _new(Response)
    fields = response.__dict__
    try:
        pair = _summaries.pop()
    except IndexError:
        pair = _new_summary()
    try:
        code = lib.rq_response_get_summary(ptr, pair[0])
        if code:
            raise_result(code, "reading a response")
        _, outcome_code, status, http_version, _, _, length = _unpack_summary(pair[1])
        # (The body's pointer read as the struct's field: cheaper than a cast of its address.)
        fields["body"] = _buffer(pair[0].body, length)[:] if length else b""
    finally:
        _summaries.append(pair)
    fields["status"] = status
    # An outcome this binding does not know (a newer library) counts as a transport failure.
    fields["outcome"] = _OUTCOMES.get(outcome_code, _TRANSPORT) if outcome_code else _OK
    fields["http_version"] = http_version
    return response


def _completed(ptr: Any, outcome_code: int, status: int, http_version: int, body: Any, length: int) -> Response:
    """The Response of a completion (an rq_summary_completion_fn: `ptr` retained for us, with its
    outcome, status, HTTP version and body). Its other fields are left in the library until used
    (see _load_field), unless the body is larger than _EAGER_BODY: then they are copied now and the
    response let go. Never raises: a completion is never lost (the Response then says why)."""
    response: Response = _new(Response)
    fields = response.__dict__
    eager = length > _EAGER_BODY
    try:
        fields["body"] = _unpack(body, length) if length else b""
        fields["status"] = status
        fields["outcome"] = _OUTCOMES.get(outcome_code, _TRANSPORT) if outcome_code else _OK  # (as _summary)
        fields["http_version"] = http_version
        if eager:
            _copy_lazy_parts(ptr, fields)
    except BaseException as exc:  # noqa: BLE001 - no memory for the copy, ...: should not happen
        lib.rq_response_release(ptr)
        return Response("", 0, Headers(), b"", _TRANSPORT, repr(exc), 0, None)
    if eager:
        lib.rq_response_release(ptr)
        return response
    if not outcome_code:
        fields["message"] = ""
    # Released after the Response is collected (see _runtime._gcp), or once every field has
    # been read.
    fields["_retained"] = _gcp(ptr, _release_response_later)
    return response


def _text(ptr: Any) -> str:
    return _decode(_string(ptr)) if ptr != _NULL else ""


def _copy_metrics(ptr: Any, out: Any) -> Optional[Metrics]:
    out.size = _METRICS_SIZE
    if lib.rq_response_metrics(ptr, out) != 0:
        return None
    # The library's -1 ("does not apply") becomes None.
    queued, dns, connect, tls, first_byte, total = (
        out.queued, out.dns, out.connect, out.tls, out.first_byte, out.total)
    metrics: Metrics = _built(Metrics, {
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
    return metrics


def _copy_response(ptr: Any) -> Response:
    """Copies everything out of a borrowed rq_response (valid only during the callback)."""
    response = _summary(ptr)
    _copy_lazy_parts(ptr, response.__dict__)
    return response


def _copy_lazy_parts(ptr: Any, fields: Dict[str, Any]) -> None:
    for name in _LAZY_PARTS:
        _read_part(ptr, fields, name)


#: A completion whose body is larger than this copies every field at once and lets the library's
#: response go, rather than keeping it (and a second copy of the body) for the fields not yet read.
_EAGER_BODY = 64 * 1024
# The fields a completion leaves in the library until used, one name per read (the metrics bring
# the attempts with them), and how they are made.
_LAZY_PARTS = ("headers", "url", "message", "metrics")


def _read_part(ptr: Any, fields: Dict[str, Any], name: str) -> None:
    if name == "headers":
        key, value, _ = _out.all
        header_at = lib.rq_response_header_at
        pairs = [(_string(key[0]), _string(value[0])) for index in range(lib.rq_response_header_count(ptr))
                 if header_at(ptr, index, key, value) == 0]
        fields["headers"] = Headers._from_bytes(pairs)  # decoded on first use
    elif name == "url":
        fields["url"] = _text(lib.rq_response_url(ptr))
    elif name == "message":
        fields["message"] = _text(lib.rq_response_error_message(ptr)) if fields["outcome"] else ""
    else:
        metrics = _copy_metrics(ptr, _out.all[2])
        fields["metrics"] = metrics
        # (The metrics hold the attempts too: one call fewer.)
        fields["attempts"] = metrics.attempts if metrics is not None else lib.rq_response_attempts(ptr)


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
                _gcp(ptr, None)  # disowned: released here, now
                _release(ptr)
    return fields[name]


def _release(ptr: Any) -> None:
    # Not once the interpreter is exiting (lib may be gone). (In a forked child, the library
    # reads and releases the parent's responses as well.)
    if not _runtime._exiting:
        lib.rq_response_release(ptr)


_types._load_field = _load_field
