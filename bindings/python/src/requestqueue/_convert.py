"""Conversions of the caller's arguments to what the library takes: strings and paths as bytes,
and the enumerations and settings given by name. Only what Python needs (types, encodings, names,
the range of the C type): the library checks the values themselves and says why it refuses one."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

from ._errors import InvalidArgumentError
from ._native import ffi
from ._types import Duplicates, HeadersInput, Order, Priority, RateLimit

PathInput = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
RateLimitInput = Union[RateLimit, Tuple[int, float], Tuple[int, float, bool], None]

# The ranges of the C types of the library's parameters.
_UINT32_MAX = 0xFFFFFFFF
_UINT64_MAX = 0xFFFFFFFFFFFFFFFF
_SIZE_MAX = (1 << (8 * ffi.sizeof("size_t"))) - 1
_INT_MIN, _INT_MAX = -(1 << (8 * ffi.sizeof("int") - 1)), (1 << (8 * ffi.sizeof("int") - 1)) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


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


def _cint(value: int, name: str, minimum: int, maximum: int, error: type = TypeError) -> int:
    """An int that the C parameter's type can hold (`error` for another type). Whether the library
    accepts the value is its own check (RQ_ERR_INVALID_ARGUMENT, with its reason)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum or value > maximum:
        raise InvalidArgumentError(f"{name} must be between {minimum} and {maximum}, not {value}")
    return value


def _uint(value: int, name: str, maximum: int, error: type = TypeError) -> int:
    """An int that an unsigned C parameter of at most `maximum` can hold (see _cint)."""
    return _cint(value, name, 0, maximum, error)


_PRIORITY_LEVELS = {priority.name: int(priority) for priority in Priority}  # (Priority[name] is slow)


def _parse_priority(value: Union[Priority, int, str]) -> int:
    """The rq_priority of a Priority, an int or a level's name (the library checks the level)."""
    if isinstance(value, str):
        level = _PRIORITY_LEVELS.get(value.upper())
        if level is None:
            names = ", ".join(repr(p.name.lower()) for p in Priority)
            raise InvalidArgumentError(f"priority must be one of {names} or an int, not {value!r}")
        return level
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"priority must be a Priority, an int or a name, not {type(value).__name__}")
    return _cint(value, "priority", _INT_MIN, _INT_MAX)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _note(exc: BaseException, text: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(text)


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


def _tag(tag: str) -> bytes:
    if not isinstance(tag, str):
        raise TypeError(f"tag must be str, not {type(tag).__name__}")
    return _cstring(tag, "tag", InvalidArgumentError)


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


def _seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    return float(value)


def _number(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


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
    if len(pairs) > 1 and len({name.lower() for name, _ in pairs}) < len(pairs):
        return _merge_repeated(pairs)
    return pairs


def _merge_repeated(pairs: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """A header named more than once (any case) becomes one field, where it first appears, with its
    values joined by ", " ("; " for Cookie), as RFC 9110 5.3 (RFC 6265 5.4) allows and httpx does:
    the library sends a name once (a later one replaces it). None removes what came before it."""
    merged: Dict[str, Tuple[str, Any]] = {}
    for name, value in pairs:
        key = name.lower()
        first = merged.get(key)
        if first is None or first[1] is None or value is None:
            merged[key] = (first[0] if first is not None else name, value)
            continue
        joined: Any = value
        separator = "; " if key == "cookie" else ", "
        if isinstance(first[1], str) and isinstance(value, str):
            joined = first[1] + separator + value
        elif isinstance(first[1], (str, bytes)) and isinstance(value, (str, bytes)):
            joined = b"".join(v.encode("utf-8") if isinstance(v, str) else v
                              for v in (first[1], separator, value))
        merged[key] = (first[0], joined)  # (another type: left for _cstring to refuse)
    return list(merged.values())
