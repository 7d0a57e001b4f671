"""The binding itself: the cdef made from the real header covers all of it, the Python enums mirror
the header's, and the library is located as documented, with a clear error otherwise."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import requestqueue as rq
from requestqueue import _header, _native, _types


def header_text() -> str:
    return Path(rq.HEADER_PATH).read_text()


def test_every_function_of_the_header_is_declared_and_exported():
    # Found independently of the preprocessor: every "RQ_API <type> name(" in the header.
    declared = re.findall(r"\bRQ_API\b[^;(]*?\b(rq_\w+)\s*\(", header_text())
    assert len(declared) > 50
    assert _native.HEADER.functions == declared
    for name in declared:
        assert f"{name}(" in _native.HEADER.cdef
        assert callable(getattr(rq.lib, name)), name  # present in the loaded library


def test_every_enumerator_and_type_of_the_header_is_in_the_cdef():
    text = header_text()
    for name in re.findall(r"^\s*(RQ_[A-Z_]+)\s*=\s*\d+", text, re.MULTILINE):
        assert hasattr(rq.lib, name), name
    for name in re.findall(r"typedef\s+(?:struct|enum)\s+\w+\s*(?:\{[^}]*\})?\s*(rq_\w+)\s*;", text):
        assert rq.ffi.typeof(name) is not None
    for name in re.findall(r"typedef\s+\w+\s*\(\*(rq_\w+_fn)\)", text):
        assert rq.ffi.typeof(name).kind == "function"


def header_enum(prefix: str):
    """{name without prefix: value} of the enumerators named PREFIX... in the header, read from the
    header's text (not from the cdef) and checked against the loaded library's values."""
    found = {}
    for name, value in re.findall(rf"\b({prefix}[A-Z_]+)\s*=\s*(-?\d+)", header_text()):
        assert getattr(rq.lib, name) == int(value), name
        found[name[len(prefix):]] = int(value)
    assert found, prefix
    return found


def test_python_enums_mirror_the_header():
    assert {m.name: m.value for m in rq.Outcome} == header_enum("RQ_OUTCOME_")
    assert {m.name: m.value for m in rq.State} == header_enum("RQ_STATE_")
    assert {m.name: m.value for m in rq.Priority} == header_enum("RQ_PRIORITY_")
    assert {m.name: _types.ORDER_CODES[m] for m in rq.Order} == header_enum("RQ_ORDER_")
    assert {m.name: _types.DUPLICATES_CODES[m] for m in rq.Duplicates} == header_enum("RQ_DUPLICATES_")
    assert {m.value for m in rq.Order} == {name.lower() for name in header_enum("RQ_ORDER_")}
    assert {m.value for m in rq.Duplicates} == {name.lower() for name in header_enum("RQ_DUPLICATES_")}


def test_every_result_and_outcome_has_its_exception():
    """The exception mapping cannot drift from the header: every rq_result error code and every
    rq_outcome but OK has its own exception class, exported by the package and shown in the
    README's hierarchy."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()  # bindings/python
    results = header_enum("RQ_ERR_")
    assert set(rq.RESULT_ERRORS) == set(results.values())
    outcomes = header_enum("RQ_OUTCOME_")
    assert set(rq.OUTCOME_ERRORS) == set(outcomes.values()) - {outcomes["OK"]}
    classes = list(rq.RESULT_ERRORS.values()) + list(rq.OUTCOME_ERRORS.values())
    assert len(set(classes)) == len(classes)  # one class per code
    for name, code in results.items():
        cls = rq.RESULT_ERRORS[code]
        assert issubclass(cls, rq.APIError) and cls.code == code, name
        assert f"RQ_ERR_{name}" in (cls.__doc__ or ""), (name, cls)
        message = rq.ffi.string(rq.lib.rq_result_str(code)).decode()
        assert message and message != "unknown result code", name
    for name, code in outcomes.items():
        if name == "OK":
            continue
        cls = rq.OUTCOME_ERRORS[code]
        assert issubclass(cls, rq.RequestError) and cls.outcome_code == code, name
        assert rq.Outcome[name] == code
        assert f"RQ_OUTCOME_{name}" in (cls.__doc__ or ""), (name, cls)
        assert rq.ffi.string(rq.lib.rq_outcome_str(code)).decode() != "unknown outcome", name
    for cls in classes + [rq.RequestQueueError, rq.RequestError, rq.NetworkError, rq.APIError,
                          rq.BodyRestartedError, rq.LibraryNotFoundError]:
        assert getattr(rq, cls.__name__) is cls and cls.__name__ in rq.__all__
        assert cls.__name__ in readme, f"{cls.__name__} is missing from the README's error hierarchy"


def test_version_macros_and_runtime_version_agree():
    defines = _native.HEADER.defines
    assert defines["RQ_VERSION_NUMBER"] == (defines["RQ_VERSION_MAJOR"] * 10000
                                            + defines["RQ_VERSION_MINOR"] * 100
                                            + defines["RQ_VERSION_PATCH"])
    assert rq.lib.RQ_VERSION_NUMBER == defines["RQ_VERSION_NUMBER"]
    assert rq.lib.rq_version_number() == defines["RQ_VERSION_NUMBER"]
    assert rq.library_version() == defines["RQ_VERSION_STRING"]
    assert defines["RQ_PROGRESS_INDETERMINATE"] == -1.0
    # The SONAME is written once: the header's major version.
    assert _native.SYSTEM_NAME == f"librequestqueue.so.{defines['RQ_VERSION_MAJOR']}"


def test_preprocessor_handles_conditionals_macros_and_comments():
    header = _header.parse_header(r"""
        /* a comment with "quotes", 'apostrophes' and a fake #define X 1 */
        #ifndef GUARD_H
        #define GUARD_H
        #include <stdint.h>
        #ifdef __cplusplus
        extern "C" {
        #endif
        #if defined(__GNUC__) || defined(__clang__)
        #define API __attribute__((visibility("default")))
        #define DEPRECATED(msg) __attribute__((deprecated(msg)))
        #else
        #define API
        #define DEPRECATED(msg)
        #endif
        #define A 2
        #define B (A * 10 + 1)   // 21
        #define NAME "x\"y"
        #define HALF (1.0 / 2)
        #define MULTI 1 + \
                      2
        #if B > 20 && !defined(NOPE)
        API int yes(void);
        #elif 1
        API int no_elif(void);
        #else
        API int no_else(void);
        #endif
        #if 0
        #if 1
        API int nested_no(void);
        #endif
        #endif
        DEPRECATED("use yes") API int old(int (*cb)(void *), const char *s);
        typedef void (*fn_t)(int);
        #ifdef __cplusplus
        }
        #endif
        #endif
    """)
    assert header.functions == ["yes", "old"]
    assert header.defines == {"A": 2, "B": 21, "NAME": 'x"y', "HALF": 0.5, "MULTI": 3}
    assert "extern" not in header.cdef and "__attribute__" not in header.cdef
    assert "#define B 21" in header.cdef
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(header.cdef)  # cffi accepts it
    with pytest.raises(_header.HeaderError, match="#error"):
        _header.parse_header("#error stop\n")
    with pytest.raises(_header.HeaderError, match="unterminated"):
        _header.parse_header("#if 1\nint f(void);\n")


# -- locating the library --------------------------------------------------------------------------


def import_in_subprocess(env_changes, tmp_path, code="import requestqueue"):
    env = dict(os.environ)
    env.pop("REQUESTQUEUE_LIBRARY", None)
    env.pop("REQUESTQUEUE_HEADER", None)
    package_parent = str(Path(rq.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_an_explicit_library_that_does_not_load_is_a_clear_error(tmp_path):
    missing = tmp_path / "nowhere" / "librequestqueue.so"
    result = import_in_subprocess({"REQUESTQUEUE_LIBRARY": str(missing)}, tmp_path)
    assert result.returncode != 0
    assert "LibraryNotFoundError" in result.stderr
    tried = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(tried) == 1  # nothing else was tried
    assert tried[0].startswith(f"  - REQUESTQUEUE_LIBRARY: {missing}: ")
    assert "cannot open shared object file" in tried[0]  # the loader's own reason


def test_lookup_order_and_error_listing_everything_tried(tmp_path, monkeypatch):
    assert _native.library_candidates({"REQUESTQUEUE_LIBRARY": "/x/lib.so"}, tmp_path) == [
        ("REQUESTQUEUE_LIBRARY", "/x/lib.so")]
    assert _native.library_candidates({}, tmp_path) == [
        ("bundled", str(tmp_path / "librequestqueue.so")), ("system loader", "librequestqueue.so.0")]
    # (In this process the library is loaded already, so the system loader would find it by its
    # SONAME: look for a name that cannot exist.)
    monkeypatch.setattr(_native, "SYSTEM_NAME", "librequestqueue-test-absent.so.0")
    with pytest.raises(rq.LibraryNotFoundError) as info:
        _native.load(environ={}, bundled_dir=tmp_path)
    message = str(info.value)
    assert f"bundled: {tmp_path / 'librequestqueue.so'}: not present" in message
    assert "system loader: librequestqueue-test-absent.so.0" in message
    assert "REQUESTQUEUE_LIBRARY" in message  # says what to do
    assert isinstance(info.value, ImportError)


def test_import_without_configuration(tmp_path):
    """With no environment variable: the bundled library (installed package), else the system
    loader, else an error naming both."""
    result = import_in_subprocess({}, tmp_path, "import requestqueue; print(requestqueue.LIBRARY_PATH)")
    bundled = Path(rq.__file__).resolve().parent / "_lib" / "librequestqueue.so"
    if bundled.exists():
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(bundled)
    elif result.returncode == 0:
        assert result.stdout.strip() == "librequestqueue.so.0"  # installed system-wide
    else:
        assert f"bundled: {bundled}: not present" in result.stderr
        assert "system loader: librequestqueue.so.0" in result.stderr


def test_bundled_library_and_header_are_used(tmp_path):
    (tmp_path / "librequestqueue.so").symlink_to(Path(rq.LIBRARY_PATH).resolve())
    (tmp_path / "requestqueue.h").write_text(header_text())
    ffi, lib, library_path, header_path, header = _native.load(environ={}, bundled_dir=tmp_path)
    assert library_path == str(tmp_path / "librequestqueue.so")
    assert header_path == tmp_path / "requestqueue.h"
    assert lib.rq_version_number() == header.defines["RQ_VERSION_NUMBER"]


def test_a_header_that_cannot_be_found_is_a_clear_error(tmp_path):
    env = {"REQUESTQUEUE_LIBRARY": str(Path(rq.LIBRARY_PATH).resolve()),
           "REQUESTQUEUE_HEADER": str(tmp_path / "missing.h")}
    with pytest.raises(rq.LibraryNotFoundError, match="REQUESTQUEUE_HEADER: .*missing.h"):
        _native.load(environ=env, bundled_dir=tmp_path)


def test_a_header_of_another_major_version_is_refused(tmp_path):
    other = re.sub(r"#define RQ_VERSION_MAJOR \d+", "#define RQ_VERSION_MAJOR 99", header_text())
    (tmp_path / "requestqueue.h").write_text(other)
    env = {"REQUESTQUEUE_LIBRARY": str(Path(rq.LIBRARY_PATH).resolve()),
           "REQUESTQUEUE_HEADER": str(tmp_path / "requestqueue.h")}
    with pytest.raises(rq.LibraryNotFoundError, match="same major version"):
        _native.load(environ=env, bundled_dir=tmp_path)


def test_the_prebuilt_declarations_are_the_headers():
    """requestqueue/_ffi.py (cffi's out-of-line module, which the import uses instead of parsing the
    header) is exactly what bindings/python/gen_ffi.py makes of the checkout's header: it cannot go
    stale unnoticed. And the import uses it whenever the header it found is that header."""
    checkout = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("gen_ffi", checkout / "bindings" / "python" / "gen_ffi.py")
    assert spec is not None and spec.loader is not None
    gen_ffi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_ffi)
    header = (checkout / "include" / "requestqueue.h").read_bytes()
    committed = (Path(rq.__file__).resolve().parent / "_ffi.py").read_text(encoding="utf-8")
    assert committed == gen_ffi.generate(header), \
        "requestqueue/_ffi.py is stale: run python3 bindings/python/gen_ffi.py"
    if Path(rq.HEADER_PATH).read_bytes() == header:
        assert _native.PREBUILT and rq.ffi is _native._prebuilt.ffi


def test_a_header_with_other_declarations_is_parsed(tmp_path):
    """A header whose declarations are not the prebuilt ones is parsed and given to cffi, as the
    binding always did; one that differs only outside its declarations (a comment) still uses the
    prebuilt ones."""
    (tmp_path / "librequestqueue.so").symlink_to(Path(rq.LIBRARY_PATH).resolve())
    text = (Path(__file__).resolve().parents[3] / "include" / "requestqueue.h").read_text()
    (tmp_path / "requestqueue.h").write_text(text + "/* a comment */\n")
    ffi, lib, _, _, header = _native.load(environ={}, bundled_dir=tmp_path)
    assert ffi is _native._prebuilt.ffi and header.cdef == _native._prebuilt.CDEF
    (tmp_path / "requestqueue.h").write_text(text + "#define RQ_TEST_EXTRA 7\n")
    ffi, lib, _, _, header = _native.load(environ={}, bundled_dir=tmp_path)
    assert ffi is not _native._prebuilt.ffi and hasattr(ffi, "cdef")  # a cffi.FFI
    assert lib.RQ_TEST_EXTRA == 7 and header.defines["RQ_TEST_EXTRA"] == 7
    assert lib.rq_version_number() == header.defines["RQ_VERSION_NUMBER"]
    # Without the prebuilt module (a _cffi_backend that cannot read it), the same.
    ffi, lib, _, _, header = _native.load(environ={}, bundled_dir=tmp_path, prebuilt=None)
    assert hasattr(ffi, "cdef") and lib.RQ_TEST_EXTRA == 7


def test_the_import_loads_only_what_every_program_needs(tmp_path):
    """Importing the package neither parses the header (cffi's Python side, pycparser) nor imports
    asyncio, json or tracemalloc (about 0.25 s before); requestqueue.AsyncQueue still works, and
    imports asyncio then."""
    code = ("import sys, requestqueue as rq\n"
            "print(sorted(m for m in ('asyncio', 'cffi', 'pycparser', 'json', 'tracemalloc') if m in sys.modules))\n"
            "assert {'AsyncQueue', 'STREAM_BUFFER_LIMIT'} <= set(dir(rq))\n"
            "from requestqueue import AsyncQueue\n"
            "print(AsyncQueue is rq.AsyncQueue is rq._async_queue.AsyncQueue, rq.STREAM_BUFFER_LIMIT > 0,"
            " 'asyncio' in sys.modules)\n")
    result = import_in_subprocess({"REQUESTQUEUE_LIBRARY": str(Path(rq.LIBRARY_PATH).resolve())}, tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\nTrue True True\n"
    with pytest.raises(AttributeError, match="no attribute 'AsyncQueueX'"):
        rq.AsyncQueueX  # noqa: B018


def test_package_is_typed():
    assert (Path(rq.__file__).parent / "py.typed").exists()
