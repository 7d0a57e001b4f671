"""httpx transports that send every request of an ``httpx.Client`` / ``httpx.AsyncClient`` through a
RequestQueue queue: its limits (``max_concurrent``, ``max_per_host``, ``rate_limit``), retries,
priorities and libcurl engine, with the httpx code around it unchanged::

    import httpx
    import requestqueue.httpx

    async with httpx.AsyncClient(transport=requestqueue.httpx.AsyncHTTPTransport(max_concurrent=8)) as client:
        responses = await asyncio.gather(*(client.get(url) for url in urls))

    with httpx.Client(transport=requestqueue.httpx.HTTPTransport(max_per_host=2)) as client:
        with client.stream("GET", url) as response:
            for chunk in response.iter_bytes():
                ...

What maps to what:

* httpx does what it does with every transport: redirects (the queue's requests follow none),
  authentication, cookies, content decoding (``Accept-Encoding`` is sent as httpx sets it and the
  body comes back as the server sent it), ``raise_for_status``.
* Timeouts (``httpx.Timeout``): ``connect`` is the request's connect timeout; ``read`` is its
  response-header timeout (the response must begin within ``read`` of the request being sent) and
  its idle timeout (the attempt fails when no byte is received or sent for that long), or for a
  request with a body the longer of ``read`` and ``write``; ``None`` disables them. ``pool`` has no
  counterpart: the time a request waits in the queue for a free slot is not limited.
* Errors are httpx's: ``ConnectError`` (refused, unknown host, TLS), ``ConnectTimeout``,
  ``ReadTimeout`` / ``WriteTimeout``, ``ReadError`` (connection reset), ``RemoteProtocolError``
  (malformed response; the server closed the connection before its response was complete, as
  httpx's transport says), ``UnsupportedProtocol``, ``TransportError`` (cancelled by someone else,
  e.g. ``queue.cancel_all()``). A status >= 400 is a response, as with httpx's own transport.
* Cancelling the task that awaits a request (``asyncio.wait_for``, a ``TaskGroup`` failing, ...)
  cancels the request in the queue.
* Request bodies (bytes, files, iterators, async iterators) are read whole before the request is
  queued: the library takes a body as one buffer.
* Response bodies stream: the response is returned as soon as the headers of a 2xx response have
  arrived (the library's response head), and its body is read as it arrives, with back-pressure
  (the transfer pauses while about 1 MiB waits unread), so ``client.stream(...)`` sees the status
  and headers before the body ends and can read a large or endless body piece by piece. Closing
  the response before its end cancels the request. A failure after the headers (connection lost,
  timeout, a retried attempt that started the body over after part of it was read) raises while
  the body is read (``RemoteProtocolError``, ``ReadTimeout``, ...). The body of any other status (an HTTP
  error, a 3xx) is read whole before the response is returned, up to 1 MiB (the rest is cut; see
  the library's "What a server sends").
* ``response.reason_phrase`` is httpx's standard phrase for the status: the library does not keep
  the server's (RFC 9112 says a client should ignore it).
* The transport's queue allows duplicates (every request is sent, as httpx users expect). A queue
  given with ``queue=`` must have ``duplicates="allow"``; it is not closed with the transport.

A proxy goes to the transport (``HTTPTransport(proxy="http://127.0.0.1:3128")``), not to the client:
``httpx.Client(proxy=...)`` (or ``mounts=``) sends its requests through httpx's own transports,
past the queue. The library honours ``http_proxy`` & co, as curl does.

Per request, ``extensions={"requestqueue": {"priority": "high", "tag": "pages"}}`` overrides the
transport's request options (the keys of :class:`TransportOptions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple, Union

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("requestqueue.httpx needs httpx: pip install httpx") from exc

from ._async_queue import AsyncQueue
from ._convert import PathInput, RateLimitInput
from ._options import TransportOptions
from ._queues import Queue
from ._request import Request
from ._errors import (
    BodyRestartedError,
    HTTPStatusError,
    RequestError,
    UnsupportedSchemeError,
)
from ._types import Duplicates, Order, Outcome, Response

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["HTTPTransport", "AsyncHTTPTransport", "TransportOptions"]


_OPTION_NAMES = frozenset(TransportOptions.__annotations__)
# Headers that describe the connection or the framing of the body: libcurl sets its own.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                         "trailer", "upgrade", "content-length"})


# Arguments of httpx's own transports, and what gives their effect here.
_HTTPX_ARGUMENTS = {"http1": 'http_version="1.1"', "http2": 'http_version="2" (the default over TLS)',
                    "limits": "max_concurrent= and max_per_host=", "cert": "client_cert= and client_key=",
                    "uds": "unix_socket=", "local_address": "interface=", "socket_options": "tcp_keepalive="}
# The transports' own keyword arguments (the queue's, and httpx's that are mapped).
_TRANSPORT_ARGUMENTS = ("max_concurrent", "mode", "max_per_host", "rate_limit", "verify", "retries")


def _check_options(options: Dict[str, Any], what: str, arguments: Tuple[str, ...] = ()) -> None:
    unknown = sorted(set(options) - _OPTION_NAMES)
    if unknown:
        instead = "".join(f"; instead of {name}=, give {_HTTPX_ARGUMENTS[name]}"
                          for name in unknown if name in _HTTPX_ARGUMENTS)
        allowed = ", ".join(arguments + tuple(sorted(_OPTION_NAMES)))
        raise TypeError(f"{what}: unknown option(s) {', '.join(unknown)}{instead} (allowed: {allowed})")


class _Base:
    """What the two transports share: options, building the queue's request, mapping the result."""

    _owns_queue = True

    def _setup(self, queue: Union[Queue, AsyncQueue, None], kind: type, max_concurrent: int, mode: Union[Order, str],
               max_per_host: int, rate_limit: RateLimitInput, verify: Union[bool, str, PathInput],
               retries: int, options: Dict[str, Any]) -> Any:
        _check_options(options, type(self).__name__, _TRANSPORT_ARGUMENTS)
        self._options = dict(options)
        # httpx decodes Content-Encoding itself (and sends its own Accept-Encoding).
        self._options["decode_content"] = False
        if verify is False:
            self._options["unsafe_no_tls_verify"] = True  # as httpx: no certificate check (unsafe)
        elif verify is not True:
            if not isinstance(verify, (str, bytes)) and not hasattr(verify, "__fspath__"):
                raise TypeError("verify must be True or the path of a CA file (an ssl.SSLContext is not supported)")
            self._options.setdefault("ca_file", verify)
        if retries:
            # httpx's own transport retries failed connections, with an exponential backoff.
            self._options.setdefault("retry", True)
            self._options.setdefault("retry_outcomes", [Outcome.CANNOT_CONNECT, Outcome.CANNOT_RESOLVE_HOST])
            self._options.setdefault("max_attempts", retries + 1)
            self._options.setdefault("retry_delay", 0.5)
            self._options.setdefault("retry_backoff", 2.0)
        if queue is None:
            return kind(max_concurrent, mode, "allow", max_per_host=max_per_host, rate_limit=rate_limit)
        if not isinstance(queue, kind):
            raise TypeError(f"{type(self).__name__} needs a {kind.__name__}, not a {type(queue).__name__}")
        if queue.duplicates != Duplicates.ALLOW:
            raise ValueError(f"the queue of a transport must allow duplicates (every request is sent): "
                             f"create it with duplicates=\"allow\", not {queue.duplicates.value!r}")
        self._owns_queue = False
        return queue

    def _build(self, request: httpx.Request, body: bytes) -> Request:
        options = self._options
        extra = request.extensions.get("requestqueue")
        if extra:
            _check_options(dict(extra), "extensions['requestqueue']")
            options = {**options, **extra}
        headers: Dict[str, Tuple[str, List[bytes]]] = {}
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.decode("latin-1")
            key = name.lower()
            if key in _HOP_BY_HOP:
                continue
            headers.setdefault(key, (name, []))[1].append(raw_value)
        header_list = [(name, (b"; " if key == "cookie" else b", ").join(values))
                       for key, (name, values) in headers.items()]
        timeouts = request.extensions.get("timeout", {})
        read, connect = timeouts.get("read"), timeouts.get("connect")
        # Without a body there is nothing to write: the read timeout alone is the idle limit.
        idle = [t for t in (read, timeouts.get("write") if body else None) if t is not None]
        try:
            return Request(str(request.url), request.method, headers=header_list, body=body or None,
                           connect_timeout=0 if connect is None else connect,
                           idle_timeout=max(idle) if idle else 0,
                           header_timeout=0 if read is None else read,
                           max_redirects=0, stream=True, **options)
        except UnsupportedSchemeError as exc:
            raise httpx.UnsupportedProtocol(str(exc), request=request) from exc
        except ValueError as exc:  # an invalid URL, header, method, ...
            raise httpx.LocalProtocolError(str(exc)) from exc

    @staticmethod
    def _streamed(request: httpx.Request, rq_request: Request, head: Optional[Response],
                  stream: Union[httpx.SyncByteStream, httpx.AsyncByteStream]) -> Optional[httpx.Response]:
        """The response to return now for the head of a 2xx response, whose body `stream` reads;
        None for no head or another status (its body comes whole with the completion)."""
        if head is None or not 200 <= head.status < 300:
            return None
        return httpx.Response(head.status, headers=head.headers._byte_pairs(), stream=stream, request=request,
                              extensions={"http_version": _http_version(head)})

    @staticmethod
    def _response(request: httpx.Request, rq_request: Request, body: bytes) -> httpx.Response:
        error = rq_request.exception()
        response = rq_request.response
        assert response is not None
        if error is None or isinstance(error, HTTPStatusError):
            return httpx.Response(response.status, headers=response.headers._byte_pairs(),
                                  stream=httpx.ByteStream(response.body), request=request,
                                  extensions={"http_version": _http_version(response)})
        raise _httpx_error(request, response, body) from error


# The library's HTTP versions (rq_response_http_version) as httpx names them.
_HTTP_VERSIONS = {10: b"HTTP/1.0", 11: b"HTTP/1.1", 20: b"HTTP/2", 30: b"HTTP/3"}


def _http_version(response: Response) -> bytes:
    return _HTTP_VERSIONS.get(response.http_version, b"HTTP/1.1")


def _read_error(request: httpx.Request, rq_request: Request, body: bytes, error: Exception) -> Exception:
    """The httpx error for a failure while a streamed body is read."""
    if isinstance(error, BodyRestartedError):
        return httpx.ReadError("the request was retried after part of its body was read, and its body "
                               "started over", request=request)
    response = rq_request.response
    if isinstance(error, HTTPStatusError) or response is None:
        # (A retried attempt ended with another status than the head's.)
        return httpx.ReadError(str(error), request=request)
    return _httpx_error(request, response, body)


class _SyncBody(httpx.SyncByteStream):
    """The body of a 2xx response of an :class:`HTTPTransport`, read as it arrives."""

    def __init__(self, request: httpx.Request, rq_request: Request, body: bytes) -> None:
        self._request, self._rq_request, self._body = request, rq_request, body

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._rq_request.iter_bytes()
        except (RequestError, BodyRestartedError) as exc:
            raise _read_error(self._request, self._rq_request, self._body, exc) from exc

    def close(self) -> None:
        self._rq_request.cancel()  # (False, harmless, once it completed)


class _AsyncBody(httpx.AsyncByteStream):
    """The body of a 2xx response of an :class:`AsyncHTTPTransport`, read as it arrives."""

    def __init__(self, request: httpx.Request, rq_request: Request, body: bytes) -> None:
        self._request, self._rq_request, self._body = request, rq_request, body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._rq_request.aiter_bytes():
                yield chunk
        except (RequestError, BodyRestartedError) as exc:
            raise _read_error(self._request, self._rq_request, self._body, exc) from exc

    async def aclose(self) -> None:
        self._rq_request.cancel()


# The beginnings of the library's messages for its limits on a server that holds an attempt (see
# "Slow servers" in requestqueue.h): idle, response headers, low speed.
_STALL_MESSAGES = ("no data received or sent for ", "the response headers were not complete ",
                   "less than ")


# The beginnings of the messages of a connection the server closed before its response was
# complete (libcurl's, and the library's own), which httpx's transport reports as a
# RemoteProtocolError; a reset is a ReadError there as here.
_CLOSED_MESSAGES = ("Empty reply from server", "transfer closed with ",
                    "the server closed the connection without answering",
                    "the connection closed before the response headers were complete")


def _httpx_error(request: httpx.Request, response: Response, body: bytes) -> Exception:
    message = response.message or response.outcome.name.lower()
    outcome = response.outcome
    metrics = response.metrics
    error: type
    if outcome == Outcome.TIMEOUT:
        # ConnectTimeout tells the caller the request was never sent (safe to send again, even a
        # POST). The library's limits on a server that holds an attempt (idle, response headers, low
        # speed; their messages are _STALL_MESSAGES) apply to a connection, kept open by an earlier
        # request or not, whose metrics show no connect step: a read or write timeout.
        if (metrics is None or metrics.connect is None) and not message.startswith(_STALL_MESSAGES):
            error = httpx.ConnectTimeout
        elif body and metrics is not None and metrics.bytes_up < len(body) and not metrics.first_byte:
            error = httpx.WriteTimeout
        else:
            error = httpx.ReadTimeout
    elif outcome in (Outcome.CANNOT_CONNECT, Outcome.CANNOT_RESOLVE_HOST, Outcome.TLS):
        error = httpx.ConnectError
    elif outcome == Outcome.CONNECTION_LOST and message.startswith(_CLOSED_MESSAGES):
        error = httpx.RemoteProtocolError
    elif outcome in (Outcome.CONNECTION_LOST, Outcome.RESPONSE_TOO_LARGE):
        error = httpx.ReadError
    elif outcome in (Outcome.BAD_RESPONSE, Outcome.BAD_REDIRECT):
        error = httpx.RemoteProtocolError
    elif outcome == Outcome.TOO_MANY_REDIRECTS:
        error = httpx.TooManyRedirects
    elif outcome == Outcome.TRANSPORT:
        error = httpx.NetworkError
    else:  # CANCELLED by someone else than the caller (cancel_all, the queue closed), ...
        error = httpx.TransportError
    return error(message, request=request)


class HTTPTransport(_Base, httpx.BaseTransport):
    """An ``httpx.BaseTransport`` on a :class:`requestqueue.Queue`, for ``httpx.Client``.

    ``HTTPTransport(queue=None, *, max_concurrent=100, mode="fifo", max_per_host=0,
    rate_limit=None, verify=True, retries=0, **options)``: without `queue`, the transport makes
    its own queue with these settings (and duplicates allowed) and closes it with the client.
    `verify` is True, a CA file, or False (no certificate check: unsafe); `retries` retries refused
    connections and unresolved hosts as httpx's transport does (not connect timeouts: the
    library's retry outcomes do not tell them from read timeouts); `options` (:class:`TransportOptions`: ``retry``,
    ``priority``, ``tag``, ...) apply to every request. Several threads may share the client.
    """

    def __init__(self, queue: Optional[Queue] = None, *, max_concurrent: int = 100,
                 mode: Union[Order, str] = Order.FIFO, max_per_host: int = 0,
                 rate_limit: RateLimitInput = None, verify: Union[bool, PathInput] = True, retries: int = 0,
                 **options: Unpack[TransportOptions]) -> None:
        self.queue: Queue = self._setup(queue, Queue, max_concurrent, mode, max_per_host, rate_limit, verify,
                                        retries, dict(options))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        rq_request = self._build(request, body)
        self.queue.add(rq_request)
        head = None
        try:
            # The head of each attempt until one is a 2xx (returned now, its body streamed) or the
            # request completes.
            while not rq_request.done():
                rq_request._wait_head_sync(self.queue, head, None)
                head = rq_request.head
                streamed = self._streamed(request, rq_request, head, _SyncBody(request, rq_request, body))
                if streamed is not None:
                    return streamed
        except BaseException:
            rq_request.cancel()  # KeyboardInterrupt, ...: the request goes too
            raise
        streamed = self._streamed(request, rq_request, rq_request.head, _SyncBody(request, rq_request, body))
        return streamed or self._response(request, rq_request, body)

    def close(self) -> None:
        if self._owns_queue:
            self.queue.close()


class AsyncHTTPTransport(_Base, httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` on a :class:`requestqueue.AsyncQueue`, for
    ``httpx.AsyncClient``; the same arguments as :class:`HTTPTransport`. Cancelling a task that
    awaits a request cancels the request."""

    def __init__(self, queue: Optional[AsyncQueue] = None, *, max_concurrent: int = 100,
                 mode: Union[Order, str] = Order.FIFO, max_per_host: int = 0,
                 rate_limit: RateLimitInput = None, verify: Union[bool, PathInput] = True, retries: int = 0,
                 **options: Unpack[TransportOptions]) -> None:
        self.queue: AsyncQueue = self._setup(queue, AsyncQueue, max_concurrent, mode, max_per_host, rate_limit,
                                             verify, retries, dict(options))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        rq_request = self._build(request, body)
        self.queue.add(rq_request)
        head = None
        # As HTTPTransport.handle_request; a cancelled task cancels the request.
        while not rq_request.done():
            await rq_request._wait_head_async(self.queue, head)
            head = rq_request.head
            streamed = self._streamed(request, rq_request, head, _AsyncBody(request, rq_request, body))
            if streamed is not None:
                return streamed
        streamed = self._streamed(request, rq_request, rq_request.head, _AsyncBody(request, rq_request, body))
        return streamed or self._response(request, rq_request, body)

    async def aclose(self) -> None:
        if self._owns_queue:
            await self.queue.aclose()
