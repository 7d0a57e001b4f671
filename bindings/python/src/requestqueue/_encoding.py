"""Encoding of the conventional request arguments: ``params=`` (query string), ``data=`` (form),
``files=`` (multipart/form-data) and request bodies given as a file or an iterator.

The library takes a request body only as a whole buffer (``rq_request_set_body``): a file or an
iterator given as the body is read to its end when the request is built, before it is added.
"""

from __future__ import annotations

import binascii
import mimetypes
import os
from typing import IO, Any, Iterable, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlencode

__all__ = ["ParamsInput", "DataInput", "FilesInput", "with_params", "read_body", "encode_form"]

Scalar = Union[str, bytes, int, float, bool, None]
#: A query string or form: a mapping (a list or tuple value gives the name several times) or
#: (name, value) pairs.
ParamsInput = Union[Mapping[str, Union[Scalar, Iterable[Scalar]]], Iterable[Tuple[str, Scalar]], str]
# (bytes or a str as data= are a body as it is, without files=: see Request.)
DataInput = Union[Mapping[str, Union[Scalar, Iterable[Scalar]]], Iterable[Tuple[str, Scalar]], bytes, bytearray,
                  memoryview, str]
#: A file field's value: the contents (bytes, str, or a file open in binary mode), or a tuple
#: (filename, contents[, content_type[, headers]]).
FileContent = Union[bytes, str, IO[bytes]]
FileValue = Union[FileContent, Tuple[Optional[str], FileContent], Tuple[Optional[str], FileContent, Optional[str]],
                  Tuple[Optional[str], FileContent, Optional[str], Mapping[str, str]]]
FilesInput = Union[Mapping[str, FileValue], Iterable[Tuple[str, FileValue]]]


def _scalar(value: Scalar, what: str) -> str:
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"  # as httpx and requests-toolbelt do
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (int, float)):
        return str(value)
    raise TypeError(f"{what} values must be str, bytes, int, float, bool or None, not {type(value).__name__}")


def _pairs(items: Any, what: str) -> List[Tuple[str, str]]:
    """(name, value) pairs of a mapping or of a sequence of pairs; a list or tuple value of a
    mapping repeats the name."""
    pairs: List[Tuple[str, str]] = []
    if hasattr(items, "items"):
        for name, value in items.items():
            if not isinstance(name, str):
                raise TypeError(f"{what} names must be str, not {type(name).__name__}")
            if isinstance(value, (list, tuple)):
                pairs.extend((name, _scalar(v, what)) for v in value)
            else:
                pairs.append((name, _scalar(value, what)))
        return pairs
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} must be a mapping or (name, value) pairs, not {type(items).__name__}")
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"{what} must be a mapping or (name, value) pairs, not an item {item!r}")
        pairs.append((item[0], _scalar(item[1], what)))
    return pairs


def with_params(url: str, params: ParamsInput) -> str:
    """The URL with `params` appended to its query string (after any query it has), form-encoded;
    the URL's fragment, if any, stays last."""
    query = params if isinstance(params, str) else urlencode(_pairs(params, "params"), quote_via=quote)
    if not query:
        return url
    base, hash_, fragment = url.partition("#")
    joiner = "&" if "?" in base and not base.endswith(("?", "&")) else ("" if "?" in base else "?")
    return f"{base}{joiner}{query}{hash_}{fragment}"


def read_body(body: Any) -> bytes:
    """A body given as a file open in binary mode (anything with ``read``) or an iterator of
    bytes, read to its end. Raises TypeError for anything else (str pieces included)."""
    if isinstance(body, Mapping):
        raise TypeError("body must be bytes, str, a binary file or an iterator of bytes, not a mapping: "
                        "give a form as data= and JSON as json=")
    if hasattr(body, "read"):
        chunks: List[bytes] = []
        while True:
            piece = body.read(1 << 16)
            if not piece:
                break
            if not isinstance(piece, (bytes, bytearray, memoryview)):
                raise TypeError(f"a body file must be open in binary mode: read() gave {type(piece).__name__}")
            chunks.append(bytes(piece))
        return b"".join(chunks)
    if hasattr(body, "__aiter__"):
        raise TypeError("an async iterator body cannot be read while building a Request: read it "
                        "first (b''.join([chunk async for chunk in body]))")
    try:
        iterator = iter(body)
    except TypeError:
        raise TypeError(f"body must be bytes, str, a binary file or an iterator of bytes, "
                        f"not {type(body).__name__}") from None
    out = bytearray()
    for piece in iterator:
        if not isinstance(piece, (bytes, bytearray, memoryview)):
            raise TypeError(f"a body iterator must yield bytes, not {type(piece).__name__}")
        out += piece
    return bytes(out)


def _file_part(value: Any, name: str) -> Tuple[Optional[str], bytes, str, Mapping[str, str]]:
    filename: Optional[str]
    content_type: Optional[str] = None
    headers: Mapping[str, str] = {}
    if isinstance(value, tuple):
        if not 2 <= len(value) <= 4:
            raise TypeError(f"file {name!r}: a tuple is (filename, contents[, content_type[, headers]])")
        filename, content = value[0], value[1]
        if len(value) >= 3:
            content_type = value[2]
        if len(value) == 4:
            headers = value[3]
    else:
        content = value
        path = getattr(value, "name", None)
        filename = os.path.basename(path) if isinstance(path, str) else name
    if isinstance(content, str):
        data = content.encode("utf-8")
    elif isinstance(content, (bytes, bytearray, memoryview)):
        data = bytes(content)
    else:
        data = read_body(content)
    if content_type is None:
        guessed = mimetypes.guess_type(filename)[0] if filename else None
        content_type = guessed or "application/octet-stream"
    return filename, data, content_type, headers


def _quoted(text: str) -> str:
    # The HTML5 form encoding of names and filenames in Content-Disposition, as browsers and httpx do.
    return text.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def encode_form(data: Optional[DataInput], files: Optional[FilesInput],
                boundary: Optional[bytes] = None) -> Tuple[bytes, str]:
    """The body and Content-Type of a form: application/x-www-form-urlencoded for `data` alone,
    multipart/form-data when there are `files` (the `data` fields first, then the files)."""
    fields = [] if data is None else _pairs(data, "data")
    if files is None:
        return urlencode(fields).encode("ascii"), "application/x-www-form-urlencoded"
    file_items = list(files.items()) if hasattr(files, "items") else list(files)
    if boundary is None:
        boundary = binascii.hexlify(os.urandom(16))
    parts: List[bytes] = []
    for name, value in fields:
        parts.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                     % (boundary, _quoted(name).encode("utf-8"), value.encode("utf-8")))
    for item in file_items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"files must be a mapping or (name, value) pairs, not an item {item!r}")
        field, file_value = item
        filename, content, content_type, headers = _file_part(file_value, field)
        head = f'Content-Disposition: form-data; name="{_quoted(field)}"'
        if filename is not None:
            head += f'; filename="{_quoted(filename)}"'
        head += f"\r\nContent-Type: {content_type}"
        for header, header_value in headers.items():
            head += f"\r\n{header}: {header_value}"
        parts.append(b"--%s\r\n%s\r\n\r\n%s\r\n" % (boundary, head.encode("utf-8"), content))
    parts.append(b"--%s--\r\n" % boundary)
    return b"".join(parts), f"multipart/form-data; boundary={boundary.decode('ascii')}"
