"""Fixtures: the loopback fixture server (Tests/Fixtures/fixture_server.py) and helpers to read what
it logged. The package under test is whatever `import requestqueue` finds: the installed one, or
the source tree with REQUESTQUEUE_LIBRARY set (scripts/test-python does the latter)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_SERVER = Path(os.environ.get("REQUESTQUEUE_FIXTURE_SERVER",
                                     ROOT / "Tests" / "Fixtures" / "fixture_server.py"))
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
_ids = itertools.count(1)


class Server:
    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def _get(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.base + path, method=method)
        with _opener.open(request, timeout=30) as response:
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


@pytest.fixture(scope="session")
def server_process() -> Iterator[Server]:
    if not FIXTURE_SERVER.exists():
        pytest.exit(f"fixture server not found: {FIXTURE_SERVER} (set REQUESTQUEUE_FIXTURE_SERVER)", 2)
    process = subprocess.Popen([sys.executable, str(FIXTURE_SERVER), "--exit-on-stdin-eof"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        pytest.exit(f"fixture server did not start: {line!r}", 2)
    try:
        yield Server(int(line.split()[1]))
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def server(server_process: Server) -> Server:
    server_process.clear()
    return server_process


@pytest.fixture
def uid() -> str:
    """A fresh id for id= / key= query parameters."""
    return f"t{os.getpid()}-{next(_ids)}"
