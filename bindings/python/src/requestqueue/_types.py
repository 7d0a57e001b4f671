"""Value types: enums mirroring the header's, response headers, Response and Progress."""

from __future__ import annotations

import enum
import json as _json
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union

__all__ = ["Outcome", "State", "Order", "Duplicates", "Headers", "Response", "Progress"]


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
    """How equal requests are treated: ``"cancel_earlier"`` (default) or ``"allow"``."""

    CANCEL_EARLIER = "cancel_earlier"
    ALLOW = "allow"


ORDER_CODES = {Order.FIFO: 0, Order.LIFO: 1}
DUPLICATES_CODES = {Duplicates.CANCEL_EARLIER: 0, Duplicates.ALLOW: 1}


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


@dataclass(frozen=True)
class Response:
    """What the server answered, copied out of the library (it stays valid forever).

    For a failure without any response (connection refused, cancelled before starting) ``status``
    is 0 and ``body`` empty.
    """

    #: The effective URL: the last one fetched, after redirects.
    url: str
    #: The HTTP status of the last response received, or 0 when none was received.
    status: int
    headers: Headers
    body: bytes
    outcome: Outcome
    #: The library's description of a failure ("" on success).
    message: str
    #: The number of attempts made (1 without retries; 0 when cancelled before starting).
    attempts: int

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
        return _json.loads(self.body, **kwargs)

    def __repr__(self) -> str:
        return (f"<Response {self.status} {self.outcome.name} {self.url} "
                f"({len(self.body)} bytes)>")


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
