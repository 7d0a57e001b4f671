"""Value types: enums mirroring the header's, response headers, Response and Progress."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union

__all__ = ["Outcome", "State", "Order", "Duplicates", "Priority", "Headers", "Response", "Progress",
           "Metrics", "QueueStats", "RateLimit"]


class Outcome(enum.IntEnum):
    """How a request ended (``rq_outcome``)."""

    OK = 0
    CANCELLED = 1
    HTTP_STATUS = 2
    TIMEOUT = 3
    CANNOT_RESOLVE_HOST = 4
    CANNOT_CONNECT = 5
    CONNECTION_LOST = 6
    TLS = 7
    TOO_MANY_REDIRECTS = 8
    BAD_RESPONSE = 9
    BAD_REDIRECT = 10
    TRANSPORT = 11
    RESPONSE_TOO_LARGE = 12
    FILE_ERROR = 13


class State(enum.IntEnum):
    """Where a request is in its life (``rq_request_state``)."""

    NEW = 0
    WAITING = 1
    RUNNING = 2
    COMPLETED = 3


class Order(str, enum.Enum):
    """Which waiting request starts next: ``"fifo"`` (default) or ``"lifo"``."""

    FIFO = "fifo"
    LIFO = "lifo"


class Duplicates(str, enum.Enum):
    """How equal requests are treated: ``"cancel_earlier"`` (default: adding a request cancels every
    earlier equal one), ``"allow"`` (each is sent) or ``"coalesce"`` (an equal GET/HEAD/OPTIONS
    request shares the transfer of the one already in the queue; each gets the result)."""

    CANCEL_EARLIER = "cancel_earlier"
    ALLOW = "allow"
    COALESCE = "coalesce"


class Priority(enum.IntEnum):
    """Priority levels (``rq_priority``): waiting requests of a higher level start first; within a
    level the queue's order (FIFO or LIFO) applies. Running requests are never preempted."""

    VERY_LOW = -2
    LOW = -1
    NORMAL = 0
    HIGH = 1
    VERY_HIGH = 2


ORDER_CODES = {Order.FIFO: 0, Order.LIFO: 1}
DUPLICATES_CODES = {Duplicates.CANCEL_EARLIER: 0, Duplicates.ALLOW: 1, Duplicates.COALESCE: 2}


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class Headers(Mapping[str, str]):
    """Response headers: a read-only mapping with case-insensitive names.

    ``headers["content-type"]`` gives the first value of that name; :meth:`get_all` every value;
    :attr:`raw` the (name, value) pairs in the order received, names as the server sent them.
    Values are decoded as UTF-8 when valid, else as Latin-1 (no byte is lost).
    """

    __slots__ = ("_bytes", "_raw_pairs", "_index_map")

    def __init__(self, pairs: Iterable[Tuple[str, str]] = ()) -> None:
        self._bytes: Optional[List[Tuple[bytes, bytes]]] = None
        self._raw_pairs: Optional[Tuple[Tuple[str, str], ...]] = tuple(pairs)
        self._index_map: Optional[Dict[str, List[str]]] = None

    @classmethod
    def _from_bytes(cls, pairs: List[Tuple[bytes, bytes]]) -> "Headers":
        headers = cls.__new__(cls)
        headers._bytes = pairs
        headers._raw_pairs = None
        headers._index_map = None
        return headers

    @property
    def raw(self) -> Tuple[Tuple[str, str], ...]:
        if self._raw_pairs is None:
            self._raw_pairs = tuple((_decode(n), _decode(v)) for n, v in self._bytes or ())
            self._bytes = None
        return self._raw_pairs

    def _byte_pairs(self) -> List[Tuple[bytes, bytes]]:
        """The pairs as bytes: as received while they were not decoded (:attr:`raw` not read
        yet), else encoded as UTF-8 (a value decoded as Latin-1 then comes back in UTF-8)."""
        if self._bytes is not None:
            return self._bytes
        return [(name.encode("utf-8"), value.encode("utf-8")) for name, value in self._raw_pairs or ()]

    @property
    def _index(self) -> Dict[str, List[str]]:
        if self._index_map is None:
            index: Dict[str, List[str]] = {}
            for name, value in self.raw:
                index.setdefault(name.lower(), []).append(value)
            self._index_map = index
        return self._index_map

    def __getitem__(self, name: str) -> str:
        return self._index[name.lower()][0]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __iter__(self) -> Iterator[str]:
        seen = set()
        for name, _ in self.raw:
            if name.lower() not in seen:
                seen.add(name.lower())
                yield name

    def __len__(self) -> int:
        return len(self._index)

    def get_all(self, name: str) -> List[str]:
        """Every value of the header `name`, in order (empty if absent)."""
        return list(self._index.get(name.lower(), ()))

    def __repr__(self) -> str:
        return f"Headers({list(self.raw)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self.raw == other.raw
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


_CHARSET = re.compile(r"charset\s*=\s*\"?([\w.:-]+)", re.IGNORECASE)


def _built(cls: Any, fields: Dict[str, Any]) -> Any:
    """An instance of the frozen dataclass `cls` holding `fields` (every field of it, by name),
    equal to ``cls(**fields)`` but made without running its ``__init__``, which sets the fields one
    by one: the completion of every request builds a Response and its Metrics this way."""
    instance = object.__new__(cls)
    instance.__dict__.update(fields)
    return instance


_NO_DEFAULT: Any = object()


def _load_field(response: "Response", name: str) -> Any:
    """Reads the field `name` of a Response from the library response it still holds, keeps it in
    the instance and returns it. Replaced by the binding (_response); a Response without a library
    response behind it has no such attribute."""
    raise AttributeError(name)


class _LazyField:
    """A field of :class:`Response` that a completion does not copy: read from the library on first
    use (``_load_field``), then kept in the instance's ``__dict__``, which, this being a non-data
    descriptor, takes precedence from then on (and is where ``__init__`` puts every field of a
    Response made by the caller). On the class, it gives the field's default or, for a field
    without one, raises AttributeError, as ``dataclasses`` expects of a descriptor-typed field."""

    __slots__ = ("name", "default")

    def __init__(self, default: Any = _NO_DEFAULT) -> None:
        self.name = ""
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            if self.default is _NO_DEFAULT:
                raise AttributeError(self.name)
            return self.default
        return _load_field(instance, self.name)


@dataclass(frozen=True)
class Response:
    """What the server answered. It stays valid forever, from any thread, whatever becomes of its
    request and queue.

    A completion copies the status, the outcome and the body; the other fields (the URL, the
    headers, the message, the attempts, the metrics) are read from the library the first time they
    are used and kept from then on (the library keeps its response until every field has been read
    or the Response is garbage collected). A Response behaves as an ordinary frozen dataclass
    (``dataclasses.fields``, ``replace``, ``asdict``, ``==``, ``copy``, ``pickle``).

    For a failure without any response (connection refused, cancelled before starting) ``status``
    is 0 and ``body`` empty.
    """

    #: The effective URL: the last one fetched, after redirects.
    url: str = _LazyField()  # type: ignore[assignment]
    #: The HTTP status of the last response received, or 0 when none was received.
    status: int
    headers: Headers = _LazyField()  # type: ignore[assignment]
    body: bytes
    outcome: Outcome
    #: The library's description of a failure ("" on success).
    message: str = _LazyField()  # type: ignore[assignment]
    #: The number of attempts made (1 without retries; 0 when cancelled before starting).
    attempts: int = _LazyField()  # type: ignore[assignment]
    #: Timings and byte counts of the request (None only if the library could not report them).
    metrics: Optional["Metrics"] = _LazyField(None)  # type: ignore[assignment]
    #: The HTTP version of the response: 10, 11, 20 (HTTP/2) or 30; 0 when none was received.
    http_version: int = 0

    def __getstate__(self) -> Dict[str, Any]:
        # Every field, read now: a copy or a pickle never shares (or carries) the library response.
        return {name: getattr(self, name) for name in _RESPONSE_FIELDS}

    @property
    def ok(self) -> bool:
        """True when the request succeeded (a status below 400)."""
        return self.outcome == Outcome.OK

    @property
    def encoding(self) -> str:
        match = _CHARSET.search(self.headers.get("content-type", ""))
        return match.group(1) if match else "utf-8"

    @property
    def text(self) -> str:
        """The body decoded with the charset of Content-Type (UTF-8 by default)."""
        try:
            return self.body.decode(self.encoding, "replace")
        except LookupError:
            return self.body.decode("utf-8", "replace")

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON."""
        import json as _json  # (imported when used)

        return _json.loads(self.body, **kwargs)

    @property
    def status_code(self) -> int:
        """:attr:`status`, under the name requests and httpx use."""
        return self.status

    @property
    def content(self) -> bytes:
        """:attr:`body`, under the name requests and httpx use."""
        return self.body

    def raise_for_status(self) -> "Response":
        """Raises the error of a request that did not succeed (:class:`HTTPStatusError` for a
        status >= 400, :class:`RequestTimeoutError`, ... with this response in ``error.response``);
        returns the response itself otherwise, so that calls chain:
        ``data = response.raise_for_status().json()``."""
        if self.outcome != Outcome.OK:
            from ._errors import OUTCOME_ERRORS, RequestError
            raise OUTCOME_ERRORS.get(int(self.outcome), RequestError)(
                self.message or self.outcome.name.lower(), None, self)  # type: ignore[arg-type]
        return self

    def __repr__(self) -> str:
        return (f"<Response {self.status} {self.outcome.name} {self.url} "
                f"({len(self.body)} bytes)>")


_RESPONSE_FIELDS = tuple(field.name for field in fields(Response))


@dataclass(frozen=True)
class Metrics:
    """Figures of one request (``rq_metrics``), read when it completed: :attr:`Response.metrics`.

    Times are seconds, None when they do not apply (no attempt started, no TLS over plain http, the
    step was not reached). ``dns`` to ``total`` count from the start of the last attempt and never
    decrease in that order (leaving out those that are None); after redirects, ``dns`` to
    ``first_byte`` add up their times over the exchanges of the attempt and ``total`` spans them
    all. The completion of a cancelled request has no figures of a transfer: every time is None
    and the byte counts are 0 (``attempts`` still counts the attempts made).
    """

    #: Time spent waiting in the queue, from ``add`` to the start of the first attempt.
    queued: Optional[float]
    #: Host name resolved (near 0 on a reused connection).
    dns: Optional[float]
    #: Connection made (near 0 on a reused connection).
    connect: Optional[float]
    #: TLS handshake done (None over plain http).
    tls: Optional[float]
    #: First byte of the response received.
    first_byte: Optional[float]
    #: End of the attempt.
    total: Optional[float]
    #: Body bytes received by the last attempt, as delivered (of a resumed download: this transfer's
    #: bytes only).
    bytes_down: int
    #: Body bytes sent by the last attempt.
    bytes_up: int
    #: The number of attempts made, as :attr:`Response.attempts`.
    attempts: int
    #: True when the last attempt used a connection kept open by an earlier request.
    connection_reused: bool
    #: The body of the last response as it came from the server (chunked framing not counted),
    #: before any decoding of libcurl's own; equal to ``bytes_down`` unless a coding was decoded.
    wire_bytes_down: int
    #: Bytes of the status and header lines of every response of the last attempt (redirects and
    #: 1xx included), as received.
    header_bytes_down: int
    #: The HTTP version of the last response, as :attr:`Response.http_version`: 10, 11, 20 (HTTP/2)
    #: or 30; 0 when the last attempt received no status line.
    http_version: int


@dataclass(frozen=True)
class QueueStats:
    """A queue's counters since it was created (``rq_queue_stats``): :attr:`Queue.stats`."""

    #: Requests accepted by ``add`` (coalesced ones included).
    added: int
    #: Requests whose first attempt started.
    started: int
    #: Further attempts started by retry.
    retried: int
    #: Completions that succeeded (Outcome.OK).
    succeeded: int
    #: Completions that were cancelled (Outcome.CANCELLED).
    cancelled: int
    #: Completions with any other outcome.
    failed: int
    #: Requests that shared the transfer of an equal one (``duplicates="coalesce"``).
    coalesced: int
    #: Body bytes received by completed requests.
    bytes_down: int
    #: Body bytes sent by completed requests.
    bytes_up: int


class RateLimit(NamedTuple):
    """At most ``starts`` request starts per ``interval`` seconds (a token bucket holding
    ``starts`` tokens, refilled continuously), for the whole queue or, with ``per_host``, for each
    origin (scheme, host and port). Retries of a running request take no token."""

    starts: int
    interval: float = 1.0
    per_host: bool = False


class Progress(NamedTuple):
    """One progress report of an upload or a download.

    ``done`` is the number of bytes transferred so far in this attempt, ``total`` the expected
    number or None when unknown, ``fraction`` done / total in [0, 1] or None when the total is
    unknown. The last report of a successful transfer has ``fraction == 1.0`` and ``done == total``.
    """

    done: int
    total: Optional[int]
    fraction: Optional[float]


HeadersInput = Union[Mapping[str, Union[str, bytes, None]], Iterable[Tuple[str, Union[str, bytes, None]]]]
