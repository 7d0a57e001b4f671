"""Loads librequestqueue with cffi in ABI mode (no C compiler needed), declared from its real header.

The library is looked for, in this order:

1. ``REQUESTQUEUE_LIBRARY``: the full path of the library. When it is set, nothing else is tried.
2. The copy bundled with the package: ``requestqueue/_lib/librequestqueue.so``.
3. The system loader: ``librequestqueue.so.0`` (``LD_LIBRARY_PATH``, ``ldconfig``'s cache, ...).

The header (``requestqueue.h``), from which the cdef is made, is looked for in this order:
``REQUESTQUEUE_HEADER`` (a full path; when set, nothing else is tried), the copy bundled with the
package, the ``include/`` folder of the source checkout the package is run from, then ``include/``
beside the library's folder and its parent, then ``/usr/local/include`` and ``/usr/include``.

The declarations come from ``_ffi``, generated from include/requestqueue.h by
``bindings/python/gen_ffi.py`` (cffi's out-of-line ABI mode: read by ``_cffi_backend`` without
parsing C, and without importing cffi's Python side or pycparser), when the header found is that
one (same size and CRC-32) or has the same declarations. Any other header is parsed here and its
declarations given to ``cffi.FFI.cdef``, which takes about 0.1 s.

If nothing loads, :class:`~requestqueue.LibraryNotFoundError` (an ``ImportError``) lists every place
tried and why it failed.
"""

from __future__ import annotations

import os
from binascii import crc32
from pathlib import Path
from types import ModuleType
from typing import Any, List, Mapping, NoReturn, Optional, Sequence, Tuple

from ._errors import RESULT_ERRORS, APIError, LibraryNotFoundError
from ._header import Header, HeaderError, parse_header

try:
    from . import _ffi as _prebuilt
except ImportError:  # a _cffi_backend that does not read this module's format: the header is parsed
    _prebuilt = None  # type: ignore[assignment]

__all__ = ["ffi", "lib", "LIBRARY_PATH", "HEADER_PATH", "HEADER", "check", "raise_result"]

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE_DIR / "_lib"
LIBRARY_NAME = "librequestqueue.so"
SYSTEM_NAME = "librequestqueue.so.0"
HEADER_NAME = "requestqueue.h"


def header_candidates(environ: Mapping[str, str], bundled_dir: Path,
                      library_path: Optional[str]) -> List[Tuple[str, Path]]:
    """The places the header is looked for, in order, each with a label for error messages."""
    explicit = environ.get("REQUESTQUEUE_HEADER")
    if explicit:
        return [("REQUESTQUEUE_HEADER", Path(explicit))]
    places = [("bundled", bundled_dir / HEADER_NAME)]
    if len(PACKAGE_DIR.parents) > 3:  # <checkout>/bindings/python/src/requestqueue
        places.append(("source checkout", PACKAGE_DIR.parents[3] / "include" / HEADER_NAME))
    if library_path and os.sep in library_path:
        lib_dir = Path(library_path).resolve().parent
        places += [("beside the library", lib_dir.parent / "include" / HEADER_NAME),
                   ("beside the library", lib_dir.parent.parent / "include" / HEADER_NAME)]
    places += [("system", Path("/usr/local/include") / HEADER_NAME),
               ("system", Path("/usr/include") / HEADER_NAME)]
    return places


def library_candidates(environ: Mapping[str, str], bundled_dir: Path) -> List[Tuple[str, str]]:
    """The libraries tried, in order, each with a label for error messages."""
    explicit = environ.get("REQUESTQUEUE_LIBRARY")
    if explicit:
        return [("REQUESTQUEUE_LIBRARY", explicit)]
    return [("bundled", str(bundled_dir / LIBRARY_NAME)), ("system loader", SYSTEM_NAME)]


def _fail(what: str, tried: Sequence[str], hint: str) -> NoReturn:
    lines = "\n".join(f"  - {t}" for t in tried)
    raise LibraryNotFoundError(f"requestqueue: cannot load {what}. Tried:\n{lines}\n{hint}")


def _prebuilt_header(prebuilt: ModuleType) -> Header:
    """What parse_header made of the header that `prebuilt` was generated from."""
    return Header(cdef=prebuilt.CDEF, defines=dict(prebuilt.DEFINES), functions=list(prebuilt.FUNCTIONS))


def load_header(environ: Mapping[str, str], bundled_dir: Path, library_path: Optional[str],
                prebuilt: Optional[ModuleType] = None) -> Tuple[Path, Header, bool]:
    """(path, header, whether `prebuilt`'s declarations are the header's)."""
    tried: List[str] = []
    seen = set()
    for label, path in header_candidates(environ, bundled_dir, library_path):
        if path in seen:
            continue
        seen.add(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            tried.append(f"{label}: {path}: {exc.strerror or exc}")
            continue
        if prebuilt is not None and len(data) == prebuilt.HEADER_SIZE and crc32(data) == prebuilt.HEADER_CRC32:
            return path, _prebuilt_header(prebuilt), True
        try:
            header = parse_header(data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"))
        except (HeaderError, UnicodeDecodeError) as exc:
            tried.append(f"{label}: {path}: cannot parse it: {exc}")
            continue
        return path, header, prebuilt is not None and header.cdef == prebuilt.CDEF
    _fail("the C header requestqueue.h", tried,
          "Set REQUESTQUEUE_HEADER to the path of requestqueue.h, or reinstall the package "
          "(pip install ./bindings/python bundles the header with the library).")


def load_library(ffi_: Any, environ: Mapping[str, str], bundled_dir: Path) -> Tuple[str, Any]:
    tried: List[str] = []
    for label, path in library_candidates(environ, bundled_dir):
        if label == "bundled" and not os.path.exists(path):
            tried.append(f"{label}: {path}: not present")
            continue
        try:
            return path, ffi_.dlopen(path)
        except OSError as exc:
            reason = str(exc).split(".  Additionally, ctypes.util.find_library()")[0]
            tried.append(f"{label}: {path}: {reason}")
    _fail("librequestqueue", tried,
          "Set REQUESTQUEUE_LIBRARY to the full path of librequestqueue.so (scripts/build-lib prints "
          "its folder), install the library system-wide, or install the package with "
          "'pip install ./bindings/python' from a source checkout, which builds and bundles it.")


def _new_ffi() -> Any:
    from cffi import FFI  # (cffi's Python side and pycparser: imported only when a header is parsed)

    return FFI()


def load(environ: Mapping[str, str] = os.environ, bundled_dir: Path = BUNDLED_DIR,
         prebuilt: Optional[ModuleType] = _prebuilt) -> Tuple[Any, Any, str, Path, Header]:
    """Finds the library and its header; returns (ffi, lib, library path, header path, header).
    The ffi is `prebuilt`'s when its declarations are the header's, else a ``cffi.FFI`` made from
    the header."""
    # The library is located first, so that a header installed beside it can be found.
    probe = prebuilt.ffi if prebuilt is not None else _new_ffi()
    library_path, library = load_library(probe, environ, bundled_dir)
    header_path, header, use_prebuilt = load_header(environ, bundled_dir, library_path, prebuilt)
    if use_prebuilt:
        ffi_, lib_ = probe, library  # (loaded with the prebuilt declarations already)
    else:
        ffi_ = _new_ffi()
        ffi_.cdef(header.cdef)
        lib_ = ffi_.dlopen(library_path)
    loaded = int(lib_.rq_version_number())
    major, minor = int(header.defines["RQ_VERSION_MAJOR"]), int(header.defines["RQ_VERSION_MINOR"])
    if loaded // 10000 != major or (loaded // 100) % 100 < minor:
        version = ffi_.string(lib_.rq_version_string()).decode()
        raise LibraryNotFoundError(
            f"requestqueue: the library {library_path} is version {version}, but the header "
            f"{header_path} is version {header.defines['RQ_VERSION_STRING']}; they must have the "
            f"same major version and the library at least the header's minor version.")
    return ffi_, lib_, library_path, header_path, header


class _Functions:
    """The library's functions and constants as plain attributes. (cffi's library object finds
    them through a __getattr__ hook, which makes every ``lib.rq_...`` read several times slower:
    the binding makes several calls per request.)"""


#: The completion callback of every request (``rq_summary_completion_fn``: the response retained,
#: with its outcome, status, HTTP version and body as arguments), as the binding receives it: the
#: body as ``const char *`` (the same pointer as the header's ``const uint8_t *``; cffi copies a
#: ``char`` array into bytes at once, a ``uint8_t`` one into a list). See _callbacks.
SUMMARY_COMPLETION = "void(*)(void *, rq_request *, rq_response *, int, int, int, const char *, size_t)"
#: The same for the requests the binding adds with ``rq_add_url_with_summary`` (see
#: _callbacks._on_added_completion), with the context and the request as pointer-sized integers.
ADDED_COMPLETION = "void(*)(intptr_t, intptr_t, rq_response *, int, int, int, const char *, size_t)"


def _resolved(ffi_: Any, library: Any) -> Any:
    functions = _Functions()
    for name in dir(library):
        try:
            setattr(functions, name, getattr(library, name))
        except (AttributeError, ffi_.error):  # declared by the header, absent from the library: fails when used
            pass
    # rq_add_url_with_summary called with its context as an integer (a counter's value, see
    # Queue.add), and given a completion that receives it as one: a pointer-sized integer is
    # passed as a pointer is (in the same register or stack slot, on every ABI the library builds
    # for), and cffi converts an integer far more cheaply than it makes or reads a `void *` cdata.
    # (The completion's rq_outcome is passed as the int it is, its body as a `const char *`.)
    if hasattr(functions, "rq_add_url_with_summary"):
        functions.rq_add_url_with_summary = ffi_.cast(
            f"rq_result(*)(rq_queue *, const char *, {ADDED_COMPLETION}, intptr_t, rq_context_free_fn, "
            "rq_request **)", functions.rq_add_url_with_summary)
    if hasattr(functions, "rq_request_set_summary_completion"):
        functions.rq_request_set_summary_completion = ffi_.cast(
            f"rq_result(*)(rq_request *, {SUMMARY_COMPLETION}, void *, rq_context_free_fn)",
            functions.rq_request_set_summary_completion)
    return functions


ffi, _library, LIBRARY_PATH, HEADER_PATH, HEADER = load()
#: Whether the declarations are _ffi's (else the header was parsed, and given to cffi.FFI.cdef).
PREBUILT: bool = _prebuilt is not None and ffi is _prebuilt.ffi
lib = _resolved(ffi, _library)

# The results the binding tells apart before check() (from the header: its enums are in the cdef).
RQ_ERR_INVALID_HANDLE: int = lib.RQ_ERR_INVALID_HANDLE
RQ_ERR_NOT_ACTIVE: int = lib.RQ_ERR_NOT_ACTIVE
RQ_ERR_WOULD_DEADLOCK: int = lib.RQ_ERR_WOULD_DEADLOCK
RQ_ERR_SYSTEM: int = lib.RQ_ERR_SYSTEM


def _string(ptr: Any) -> str:
    return ffi.string(ptr).decode("utf-8", "replace") if ptr != ffi.NULL else ""


def result_message(code: int) -> str:
    return _string(lib.rq_result_str(code))


def last_error_reason() -> str:
    """Why the library's last failed call on this thread failed (``rq_last_error_message``),
    without the function's name that starts it."""
    text = _string(lib.rq_last_error_message())
    name, sep, reason = text.partition(": ")
    return reason if sep and name.startswith("rq_") else text


def raise_result(code: int, what: str) -> NoReturn:
    """Raises the exception of `code`, which the library's call just returned on this thread:
    "<what>: <name of the code>: <the library's reason>"."""
    cls = RESULT_ERRORS.get(code, APIError)
    reason = last_error_reason()
    raise cls(f"{what}: {result_message(code)}" + (f": {reason}" if reason else ""), code)


def check(code: int, what: str) -> None:
    """Raises the exception mapped from an rq_result, if it is not RQ_OK (call it right after the
    call that returned `code`, on the same thread: the message is the library's)."""
    if code != 0:
        raise_result(code, what)
