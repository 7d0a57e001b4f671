"""Requests: :class:`Request` (its options, its state, its streamed body, its callbacks) and
:class:`AuthChallenge`."""

from __future__ import annotations

import collections
import threading
from operator import attrgetter as _attrgetter
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Generator,
    IO,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
    cast,
)

from . import _encoding, _runtime, _transport
from ._callbacks import _auth_cb, _body_cb, _completion_cb, _download_cb, _head_cb, _upload_cb
from ._convert import (
    PathInput,
    _UINT32_MAX,
    _UINT64_MAX,
    _INT_MAX,
    _INT_MIN,
    _cint,
    _cstring,
    _header_pairs,
    _note,
    _number,
    _parse_priority,
    _path,
    _seconds,
    _uint,
)
from ._errors import (
    OUTCOME_ERRORS,
    BodyRestartedError,
    InvalidArgumentError,
    InvalidHeaderError,
    InvalidMethodError,
    InvalidStateError,
    InvalidURLError,
    QueueClosedError,
    RequestError,
)
from ._native import RQ_ERR_INVALID_HANDLE, RQ_ERR_NOT_ACTIVE, check, ffi, lib, raise_result
from ._response import _copy_response
from ._runtime import _drain, _gcp, _release_later, _releases, _response_releases
from ._types import HeadersInput, Outcome, Priority, Progress, Response, State

if TYPE_CHECKING:
    import asyncio

    from ._async_queue import AsyncQueue
    from ._queues import Queue, _QueueBase

__all__ = ["Request", "AuthChallenge"]

CompleteCallback = Callable[["Request"], Any]
ProgressCallback = Callable[["Request", Progress], Any]
AuthCallback = Callable[["Request", "AuthChallenge"], Optional[Tuple[str, str]]]
BodyCallback = Callable[["Request", bytes, int], Any]
BodyInput = Union[bytes, bytearray, memoryview, str, "IO[bytes]", Iterable[bytes]]

_RESTART = object()  # in a stream buffer: the body started over (a retried attempt)
_NULL = ffi.NULL
_NORMAL = Priority.NORMAL
_OK = Outcome.OK
# ffi.new without its Python-level wrapper, for the out-parameters of requests' creation.
_newp: Callable[[Any], Any] = getattr(getattr(ffi, "_backend", None), "newp", ffi.new)
_REQUEST_OUT = ffi.typeof("rq_request **")
# Free out-parameters of rq_request_new, taken and given back by each request made (a pool rather
# than one per thread: list.pop and list.append are atomic, and cheaper than a thread-local).
_request_outs: List[Any] = []
_new_object = object.__new__




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
        if code == RQ_ERR_INVALID_HANDLE:
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


def _refuse_awaitable(returned: Any, name: str) -> None:
    """Callbacks are called, not awaited: what an ``async def`` callback returns (a coroutine, which
    would never run) is closed, and a TypeError says so (raised as any exception of a callback)."""
    if hasattr(returned, "__await__"):
        close = getattr(returned, "close", None)
        if close is not None:
            close()  # (no "coroutine ... was never awaited" warning on top)
        raise TypeError(f"{name} returned a coroutine: callbacks are called, not awaited (an AsyncQueue "
                        "calls them in its event loop's thread); make it a plain function (it can start "
                        "a task), or await the request instead")


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
    _handle: Any = None  # (set by _begin; by Queue.add for a request it makes by URL, once added)
    _queue: Optional["_QueueBase"] = None
    _key: Any = None  # (set by add: the key of the request in its queue's _live)
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
        self._begin(url, params, method, on_complete)
        if stream:
            self._stream = True
            self._chunks: Deque[Any] = collections.deque()
            self._chunk_waiters: List["asyncio.Future[None]"] = []
            self._head_waiters: List["asyncio.Future[None]"] = []

        if (body is not None) + (json is not None) + (data is not None or files is not None) > 1:
            raise TypeError("give one of body, json and data/files, not several")
        content_type = None
        if json is not None:
            import json as _json  # (imported when used: most programs never send JSON)

            body = _json.dumps(json).encode("utf-8")
            content_type = "application/json"
        elif files is None and isinstance(data, (bytes, bytearray, memoryview, str)):
            body = data  # bytes or a str as data=: the body as it is, as with requests
        elif data is not None or files is not None:
            body, content_type = _encoding.encode_form(data, files)
        if headers is not None or content_type is not None:
            header_list = _header_pairs(headers)
            if content_type is not None and not any(name.lower() == "content-type" for name, _ in header_list):
                header_list.append(("Content-Type", content_type))
            self._set_headers(header_list)

        if body is not None:
            if isinstance(body, str):
                body = body.encode("utf-8")
            elif not isinstance(body, (bytes, bytearray, memoryview)):
                body = _encoding.read_body(body)  # a file or an iterator: read whole (see _encoding)
            # An immutable bytes object: `body` itself when it is one (no copy), else its one copy.
            # The library reads it in place (rq_request_set_body_borrowed): this request holds it
            # until it is collected, and from add() until its completion _held_bodies does too (see
            # the Lifetimes in _runtime).
            content = bytes(body)
            self._call(lib.rq_request_set_body_borrowed, ffi.from_buffer(content) if content else ffi.NULL,
                       len(content), what="body")
            self.body = content

        if timeout is not None or connect_timeout is not None or idle_timeout is not None \
                or header_timeout is not None or retry_delay is not None:
            self._set_timeouts(timeout, connect_timeout, idle_timeout, header_timeout, retry_delay)
        if low_speed_limit is not None:
            if not (isinstance(low_speed_limit, tuple) and len(low_speed_limit) == 2):
                raise TypeError("low_speed_limit must be a (bytes_per_second, seconds) tuple")
            rate = _number(low_speed_limit[0], "low_speed_limit bytes_per_second")
            window = _seconds(low_speed_limit[1], "low_speed_limit seconds")
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
            self._call(lib.rq_request_set_max_attempts,
                       _uint(max_attempts, "max_attempts", _UINT32_MAX, InvalidArgumentError),
                       what=f"max_attempts={max_attempts}")
        if retry_backoff is not None or retry_max_delay is not None or retry_jitter is not None:
            multiplier = 1.0 if retry_backoff is None else _number(retry_backoff, "retry_backoff")
            max_delay = 0.0 if retry_max_delay is None else _seconds(retry_max_delay, "retry_max_delay")
            jitter = 0.0 if retry_jitter is None else _number(retry_jitter, "retry_jitter")
            self._call(lib.rq_request_set_retry_backoff, multiplier, max_delay, jitter,
                       what=(f"retry_backoff={multiplier!r} (1 to 100), retry_max_delay={max_delay!r}, "
                             f"retry_jitter={jitter!r} (0 to 1)"))
        if retry_statuses is not None:
            statuses = [_cint(status, "retry_statuses", _INT_MIN, _INT_MAX, InvalidArgumentError)
                        for status in retry_statuses]
            array = ffi.new("int[]", statuses) if statuses else ffi.NULL
            self._call(lib.rq_request_set_retry_statuses, array, len(statuses),
                       what=f"retry_statuses={statuses!r}")
        if retry_non_idempotent:
            self._call(lib.rq_request_set_retry_non_idempotent, 1, what="retry_non_idempotent")
        if priority is not _NORMAL:  # (the library's default)
            self._set_priority(priority)
        if tag is not None:
            self._set_tag(tag)
        if max_redirects is not None:
            self._call(lib.rq_request_set_max_redirects, _uint(max_redirects, "max_redirects", _UINT32_MAX),
                       what=f"max_redirects={max_redirects!r} (at most 1000)")
        if max_response_size is not None:
            self._call(lib.rq_request_set_max_response_size,
                       _uint(max_response_size, "max_response_size", _UINT64_MAX),
                       what=f"max_response_size={max_response_size!r}")
        if ca_file is not None:
            self._call(lib.rq_request_set_ca_file, _path(ca_file, "ca_file"), what="ca_file")
        if decode_content is not None or user_agent is not None or proxy is not None or no_proxy is not None \
                or proxy_ca_file is not None or client_cert is not None or client_key is not None \
                or key_password is not None or pinned_public_key is not None or ca_dir is not None \
                or tls_min_version is not None or unsafe_no_tls_verify is not None or unix_socket is not None \
                or resolve is not None or interface is not None or ip_version is not None \
                or tcp_keepalive is not None or max_recv_speed is not None or max_send_speed is not None \
                or http_version is not None or cookies is not None:
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

        self._set_completion()
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

    # -- construction helpers ----------------------------------------------------------------------

    @classmethod
    def _plain(cls, url: str, options: Mapping[str, Any]) -> "Request":
        """``Request(url, **options)`` for options among _PLAIN_OPTIONS only (what most requests are
        given), without binding and testing every keyword argument of __init__: about 23k
        instructions per request saved (callgrind, Python 3.11). The same steps, in the same order,
        as __init__ takes for these options."""
        request = _new_object(cls)
        request._begin(url, None, options.get("method", "GET"), options.get("on_complete"))
        if len(options) > ("method" in options) + ("on_complete" in options):  # (others than those two)
            get = options.get
            headers = get("headers")
            if headers is not None:
                request._set_headers(_header_pairs(headers))
            timeout, connect_timeout, idle_timeout = get("timeout"), get("connect_timeout"), get("idle_timeout")
            header_timeout, retry_delay = get("header_timeout"), get("retry_delay")
            if timeout is not None or connect_timeout is not None or idle_timeout is not None \
                    or header_timeout is not None or retry_delay is not None:
                request._set_timeouts(timeout, connect_timeout, idle_timeout, header_timeout, retry_delay)
            priority = get("priority", _NORMAL)
            if priority is not _NORMAL:
                request._set_priority(priority)
            tag = get("tag")
            if tag is not None:
                request._set_tag(tag)
        request._set_completion()
        return request

    # The keyword arguments that _plain takes (the others go through __init__).
    _PLAIN_OPTIONS = frozenset(("method", "on_complete", "headers", "timeout", "connect_timeout", "idle_timeout",
                               "header_timeout", "retry_delay", "priority", "tag"))

    def _set_headers(self, header_list: List[Tuple[str, Any]]) -> None:
        for name, value in header_list:
            value_arg = ffi.NULL if value is None else _cstring(value, f"value of header {name!r}",
                                                                InvalidHeaderError)
            self._call(lib.rq_request_set_header, _cstring(name, "header name", InvalidHeaderError),
                       value_arg, what=f"invalid header {name!r}")
        self.headers = tuple(header_list)

    def _set_timeouts(self, timeout: Optional[float], connect_timeout: Optional[float],
                      idle_timeout: Optional[float], header_timeout: Optional[float],
                      retry_delay: Optional[float]) -> None:
        for setter, value, name in ((lib.rq_request_set_timeout, timeout, "timeout"),
                                    (lib.rq_request_set_connect_timeout, connect_timeout, "connect_timeout"),
                                    (lib.rq_request_set_idle_timeout, idle_timeout, "idle_timeout"),
                                    (lib.rq_request_set_header_timeout, header_timeout, "header_timeout"),
                                    (lib.rq_request_set_retry_delay, retry_delay, "retry_delay")):
            if value is not None:
                self._call(setter, _seconds(value, name), what=f"{name}={value!r}")

    def _set_priority(self, priority: Union[Priority, int, str]) -> None:
        level = _parse_priority(priority)
        if level != _NORMAL:
            self._call(lib.rq_request_set_priority, level, what=f"priority={priority!r}")

    def _set_tag(self, tag: str) -> None:
        if not isinstance(tag, str):
            raise TypeError(f"tag must be str, not {type(tag).__name__}")
        self._call(lib.rq_request_set_tag, _cstring(tag, "tag", InvalidArgumentError), what="tag")
        self.tag = tag

    def _begin(self, url: str, params: Optional[_encoding.ParamsInput], method: str,
               on_complete: Optional[CompleteCallback]) -> None:
        """The start of every request: its handle, URL, method and completion callback."""
        if not isinstance(url, str):
            raise TypeError(f"url must be str, not {type(url).__name__}")
        if _releases or _response_releases:
            _drain()
        if params is not None:
            url = _encoding.with_params(url, params)
        try:
            out = _request_outs.pop()
        except IndexError:
            out = _newp(_REQUEST_OUT)
        # (_cstring only to raise its error: the URL is a str.)
        code = lib.rq_request_new(url.encode("utf-8") if "\0" not in url
                                  else _cstring(url, "url", InvalidURLError), out)
        if code:
            _request_outs.append(out)
            raise_result(code, f"invalid URL {url!r}")
        # Released after the request is collected (see _runtime._gcp).
        self._handle = _gcp(out[0], _release_later)
        _request_outs.append(out)
        # Each callback given is kept here; the others stay the class's None (likewise for stream,
        # headers, body, tag and output_file: only what is given is set).
        if on_complete is not None:
            self._on_complete = on_complete
        self.url = url
        if method != "GET" and type(method) is str:
            method = method.upper()  # as requests, httpx and aiohttp: "post" is a POST
        self.method = method
        if method != "GET":
            self._call(lib.rq_request_set_method, _cstring(method, "method", InvalidMethodError),
                       what=f"invalid method {method!r}")

    def _set_completion(self) -> None:
        # The handle is the context of the callbacks (see _registry).
        code = lib.rq_request_set_summary_completion(self._handle, _completion_cb, self._handle, _NULL)
        if code:
            raise_result(code, "completion")

    def _call(self, function: Callable[..., int], *args: Any, what: str) -> None:
        check(function(self._handle, *args), what)

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

    if TYPE_CHECKING:
        @property
        def response(self) -> Optional[Response]:
            """The response once completed (also after a failure: status 0 when none was received)."""
    else:
        # (A property whose getter is C code: read by most completion callbacks, it costs no Python
        # call.)
        response = property(_attrgetter("_response"),
                            doc="The response once completed (also after a failure: status 0 when none was received).")

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
        check(lib.rq_request_set_priority(self._handle, level), f"priority={value!r}")

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
        if queue._asynchronous:
            raise InvalidStateError(f"{self!r} belongs to an AsyncQueue: use `async for ... in "
                                    "request.aiter_bytes()`")
        return self._iter_sync(cast("Queue", queue))

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body of a ``stream=True`` request added to an :class:`AsyncQueue`, piece by piece
        (``async for chunk in request.aiter_bytes()``); see :meth:`iter_bytes`. While more than
        ``STREAM_BUFFER_LIMIT`` bytes wait to be read, the queue stops delivering callbacks (of all
        its requests), so a slow reader slows the download instead of filling memory."""
        queue = self._stream_queue("aiter_bytes")
        if not queue._asynchronous:
            raise InvalidStateError(f"{self!r} belongs to a Queue: use `for ... in request.iter_bytes()`")
        return self._iter_async(cast("AsyncQueue", queue))

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
        if queue._asynchronous:
            raise InvalidStateError(f"{self!r} belongs to an AsyncQueue: use `await request.await_head()`")
        self._wait_head_sync(cast("Queue", queue), None, timeout)
        return self._head

    async def await_head(self) -> Optional[Response]:
        """The :meth:`wait_head` of a ``stream=True`` request added to an :class:`AsyncQueue`.
        Cancelling the awaiting task cancels the request."""
        queue = self._stream_queue("await_head")
        if not queue._asynchronous:
            raise InvalidStateError(f"{self!r} belongs to a Queue: use request.wait_head()")
        await self._wait_head_async(cast("AsyncQueue", queue), None)
        return self._head

    def _wait_head_sync(self, queue: "Queue", previous: Optional[Response], timeout: Optional[float]) -> None:
        """Until a head other than `previous` arrived, or the request settled."""
        queue._run_until(lambda: self._head is not previous or self._settled, timeout, "wait_head")

    async def _wait_head_async(self, queue: "AsyncQueue", previous: Optional[Response]) -> None:
        import asyncio  # (here, not at the top: a program that never uses asyncio does not import it)

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
        import asyncio  # (here, not at the top: a program that never uses asyncio does not import it)

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
            if queue._asynchronous:
                if self._response is None:
                    raise InvalidStateError(f"{self!r} has not completed yet: await it")
            elif self._response is None or not cast("Queue", queue)._in_callback():
                # (In its own completion callback the request is complete but not yet settled.)
                cast("Queue", queue)._run_until(lambda: self._settled, timeout, f"waiting for {self!r}")
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
        import asyncio  # (here, not at the top: a program that never uses asyncio does not import it)

        queue = self._queue
        if queue is None:
            raise InvalidStateError(f"{self!r} was never added to a queue")
        if not queue._asynchronous:
            raise InvalidStateError(f"{self!r} belongs to a Queue: use request.result(); "
                                    "awaiting needs an AsyncQueue")
        queue = cast("AsyncQueue", queue)
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
        if code == RQ_ERR_NOT_ACTIVE:
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
        return not _runtime._exiting and self._callback_error is None

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
            returned = callback(self, Progress(int(done), int(total) if total >= 0 else None,
                                               float(fraction) if fraction >= 0 else None))
            if returned is not None:
                _refuse_awaitable(returned, "on_" + kind.replace(" ", "_"))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            self._callback_failed(exc, kind)

    def _body_piece(self, data: Any, size: int, offset: int) -> None:
        if not self._user_callbacks_allowed():
            return
        piece = bytes(ffi.buffer(data, size))
        if self._on_body is not None:
            try:
                returned = self._on_body(self, piece, offset)
                if returned is not None:
                    _refuse_awaitable(returned, "on_body")
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
                _refuse_awaitable(answer, "on_auth")
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

    def _complete(self, response: Response) -> None:
        """The request's completion, with its Response (made by _response._completed)."""
        queue = self._queue
        # (The class's _error stays None for a success, and _challenges () unless one came.)
        if self._callback_error is not None:
            self._error = self._callback_error
        elif response.outcome is not _OK:
            self._error = OUTCOME_ERRORS.get(int(response.outcome), RequestError)(
                response.message or response.outcome.name.lower(), self, response)
        self._response = response
        if self._challenges:
            self._challenges = ()
        if self._on_complete is not None and not _runtime._exiting:
            try:
                returned = self._on_complete(self)
                if returned is not None:
                    _refuse_awaitable(returned, "on_complete")
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
        if queue is not None:  # (what the queue does when one of its requests ends)
            if self._waiters:
                queue._wake_waiters(self)
            # (No lock: the pop is atomic, and an add() racing with it calls _became_busy
            # afterwards either way.)
            live = queue._live
            live.pop(self._key, None)
            if not live and queue._asynchronous:
                queue._became_idle()

    def _mark_reported(self) -> None:
        queue = self._queue
        if queue is not None and self._callback_error is not None:
            queue._reported(self._callback_error)
