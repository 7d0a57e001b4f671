"""The examples of bindings/python/README.md run as written, against a local `python3 -m
http.server` as the README says (on a free port instead of 8000)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import requestqueue as rq

README = Path(__file__).resolve().parents[1] / "README.md"


def examples():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_text("<html>hello</html>\n" * 100)
    process = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
                               cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"port (\d+)", line)
    assert match, line
    yield int(match.group(1))
    process.kill()
    process.wait()


def run_example(code: str, port: int, cwd=None) -> subprocess.CompletedProcess:
    code = code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    env = dict(os.environ)
    package_parent = str(Path(rq.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("REQUESTQUEUE_LIBRARY", rq.LIBRARY_PATH)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_readme_has_the_examples():
    assert len(examples()) == 5
    assert all(len(code.strip().splitlines()) <= 14 for code in examples())


def test_sync_example(http_server):
    result = run_example(examples()[1], http_server)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str([200] * 20)
    assert re.fullmatch(r"failed: 404 \d+ bytes", lines[1])


def test_asyncio_example(http_server):
    result = run_example(examples()[2], http_server)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{1900 * 100} bytes in 100 responses\n"


def test_callbacks_example(http_server):
    result = run_example(examples()[3], http_server)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "done: 200"
    assert any(line.endswith("1900 bytes 100%") for line in lines)


def test_streaming_example(http_server, tmp_path):
    (tmp_path / "page.html").write_text("a partial copy")  # resumed: http.server ignores the Range
    result = run_example(examples()[4], http_server, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["200 1900 bytes written", "1900 bytes streamed; 2 requests succeeded"]
    assert (tmp_path / "page.html").read_text() == "<html>hello</html>\n" * 100


def test_httpx_example(http_server):
    pytest.importorskip("httpx")  # scripts/test-python installs it
    result = run_example(examples()[0], http_server)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "20 responses, at most 8 at once\n"
