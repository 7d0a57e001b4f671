"""Fixtures: the loopback fixture server (Tests/Fixtures/fixture_server.py), an HTTPS instance of it
with a self-signed certificate, and helpers to read what it logged. The package under test is
whatever `import requestqueue` finds: the installed one, or the source tree with
REQUESTQUEUE_LIBRARY set (scripts/test-python does the latter)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_SERVER = Path(os.environ.get("REQUESTQUEUE_FIXTURE_SERVER",
                                     ROOT / "Tests" / "Fixtures" / "fixture_server.py"))
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
_ids = itertools.count(1)
PATTERN = b"abcdefghijklmnopqrstuvwxyz0123456789"


def pattern(n: int, start: int = 0) -> bytes:
    """Bytes [start, start + n) of the fixture server's body pattern (/bytes, /flaky)."""
    return (PATTERN * ((start + n) // len(PATTERN) + 1))[start:start + n]


class Server:
    def __init__(self, port: int, scheme: str = "http", host: str = "127.0.0.1",
                 opener: Any = _opener) -> None:
        self.port = port
        self.scheme = scheme
        self.base = f"{scheme}://{host}:{port}"
        self._control = f"{scheme}://127.0.0.1:{port}"
        self._opener = opener

    def url(self, path: str) -> str:
        return self.base + path

    def raw_url(self, reply: bytes) -> str:
        """The URL of /raw answering with these bytes as they are."""
        return self.url("/raw?b64=" + base64.urlsafe_b64encode(reply).decode().rstrip("="))

    def with_host(self, host: str) -> "Server":
        """The same server under another host name: another origin for the library ("localhost")."""
        return Server(self.port, self.scheme, host, self._opener)

    def _get(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self._control + path, method=method)
        with self._opener.open(request, timeout=30) as response:
            return json.loads(response.read())

    def log(self) -> Dict[str, Any]:
        return self._get("/_/log")

    def requests(self, id: Optional[str] = None, path_prefix: Optional[str] = None) -> List[Dict[str, Any]]:
        """Logged requests (in arrival order), optionally only those with this id= or path prefix."""
        entries = self.log()["requests"]
        if id is not None:
            entries = [e for e in entries if e["id"] == id]
        if path_prefix is not None:
            entries = [e for e in entries if e["path"].startswith(path_prefix)]
        return entries

    def wait_for_requests(self, id: str, count: int = 1) -> List[Dict[str, Any]]:
        """Polls the log until `count` requests with this id have arrived (or fails after 30 s)."""
        deadline = time.monotonic() + 30
        while True:
            entries = self.requests(id=id)
            if len(entries) >= count:
                return entries
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not receive {count} request(s) with id={id}")
            time.sleep(0.005)

    def clear(self) -> None:
        self._get("/_/clear", method="POST")

    def closed_port(self) -> int:
        """A port on 127.0.0.1 where nothing listens (connections are refused)."""
        return self._get("/_/refuse-then-accept?after=3600")["port"]


def _start_server(*extra: str) -> "Tuple[subprocess.Popen[str], int]":
    if not FIXTURE_SERVER.exists():
        pytest.exit(f"fixture server not found: {FIXTURE_SERVER} (set REQUESTQUEUE_FIXTURE_SERVER)", 2)
    process = subprocess.Popen([sys.executable, str(FIXTURE_SERVER), "--exit-on-stdin-eof", *extra],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        pytest.exit(f"fixture server did not start: {line!r}", 2)
    return process, int(line.split()[1])


def _stop_server(process: "subprocess.Popen[str]") -> None:
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def server_process() -> Iterator[Server]:
    process, port = _start_server()
    try:
        yield Server(port)
    finally:
        _stop_server(process)


@pytest.fixture
def server(server_process: Server) -> Server:
    server_process.clear()
    return server_process


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made with the openssl command) and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl command is needed for the HTTPS tests (scripts/test-python installs it)")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="session")
def https_server_process(tls_files: Tuple[Path, Path]) -> Iterator[Server]:
    cert, key = tls_files
    process, port = _start_server("--tls-cert", str(cert), "--tls-key", str(key))
    context = ssl.create_default_context(cafile=str(cert))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    try:
        yield Server(port, "https", opener=opener)
    finally:
        _stop_server(process)


@pytest.fixture
def https_server(https_server_process: Server) -> Server:
    """The fixture server over HTTPS, with the certificate of `tls_files` (its log is read over
    HTTPS too, verified with that certificate)."""
    https_server_process.clear()
    return https_server_process


@pytest.fixture
def uid() -> str:
    """A fresh id for id= / key= query parameters."""
    return f"t{os.getpid()}-{next(_ids)}"


def patch_lib(monkeypatch, wrapper):
    """Puts `wrapper` in place of the library in every module of the binding that calls it."""
    from requestqueue import _native as native
    real = native.lib
    for name, module in list(sys.modules.items()):
        if name.startswith("requestqueue.") and getattr(module, "lib", None) is real:
            monkeypatch.setattr(module, "lib", wrapper)
    return wrapper
