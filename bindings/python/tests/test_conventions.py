"""The conventions users of requests and httpx type without thinking: raise_for_status, status_code
and content, params=, data=, files=, bodies from a file or an iterator, and typed options that
mypy --strict checks."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import requestqueue as rq

from conftest import pattern

SRC = Path(rq.__file__).resolve().parent.parent


def test_response_aliases_and_raise_for_status(server):
    with rq.Queue() as q:
        ok = q.fetch(server.url("/bytes?n=5"))
        assert ok.status_code == 200 and ok.content == pattern(5)
        assert ok.raise_for_status() is ok
        missing = q.add(server.url("/status/404"))
        q.wait()
        response = missing.response
        assert response is not None and response.status_code == 404
        with pytest.raises(rq.HTTPStatusError) as info:
            response.raise_for_status()
        assert info.value.response is response and info.value.status == 404
        refused = q.add(f"http://127.0.0.1:{server.closed_port()}/")
        q.wait()
        assert refused.response is not None
        with pytest.raises(rq.ConnectError):
            refused.response.raise_for_status()


def test_params_are_appended_to_the_query(server, uid):
    with rq.Queue() as q:
        q.fetch(server.url(f"/echo?id={uid}"), params={"q": "a b&c", "n": [1, 2], "t": True, "e": None})
        q.fetch(server.url(f"/echo?id={uid}#frag"), params=[("x", "é")])
        q.fetch(server.url("/echo"), params="raw=1", headers={"X-Id": uid})
    paths = [e["path"] for e in server.requests(path_prefix="/echo")]
    assert paths == [f"/echo?id={uid}&q=a%20b%26c&n=1&n=2&t=true&e=", f"/echo?id={uid}&x=%C3%A9", "/echo?raw=1"]


def test_form_data(server):
    with rq.Queue() as q:
        echo = q.fetch(server.url("/echo"), method="POST", data={"a": "1", "b": ["x y", "z"]}).json()
    assert echo["body"] == "a=1&b=x+y&b=z"
    assert echo["headers"]["content-type"] == "application/x-www-form-urlencoded"


def test_multipart_files(server, tmp_path):
    path = tmp_path / "report.csv"
    path.write_bytes(b"a,b\n1,2\n")
    with rq.Queue() as q, open(path, "rb") as handle:
        echo = q.fetch(server.url("/echo"), method="POST", data={"title": "T"},
                       files={"upload": handle, "raw": ("x.bin", b"\x00\x01", "application/x-thing"),
                              "text": ("n.txt", "hé")}).json()
    content_type = echo["headers"]["content-type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    boundary = content_type.split("boundary=", 1)[1]
    body = echo["body"].encode("latin-1")
    b = boundary.encode()
    assert body == (
        b"--" + b + b'\r\nContent-Disposition: form-data; name="title"\r\n\r\nT\r\n'
        + b"--" + b + b'\r\nContent-Disposition: form-data; name="upload"; filename="report.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\na,b\n1,2\n\r\n"
        + b"--" + b + b'\r\nContent-Disposition: form-data; name="raw"; filename="x.bin"\r\n'
        b"Content-Type: application/x-thing\r\n\r\n\x00\x01\r\n"
        + b"--" + b + b'\r\nContent-Disposition: form-data; name="text"; filename="n.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nh\xc3\xa9\r\n"
        + b"--" + b + b"--\r\n")


def test_body_from_a_file_or_an_iterator(server, tmp_path):
    path = tmp_path / "body.bin"
    path.write_bytes(pattern(200000))
    with rq.Queue() as q, open(path, "rb") as handle:
        from_file = q.fetch(server.url("/upload"), method="PUT", body=handle).json()
        from_iter = q.fetch(server.url("/echo"), method="POST", body=(p for p in [b"one", b"two"])).json()
        from_bytesio = q.fetch(server.url("/echo"), method="POST", body=io.BytesIO(b"bio")).json()
    assert from_file == {"received": 200000}
    assert from_iter["body"] == "onetwo" and from_iter["headers"]["content-length"] == "6"
    assert from_bytesio["body"] == "bio"
    with pytest.raises(TypeError, match="binary mode"):
        rq.Request(server.url("/"), "POST", body=io.StringIO("text"))
    with pytest.raises(TypeError, match="yield bytes"):
        rq.Request(server.url("/"), "POST", body=iter(["str"]))
    with pytest.raises(TypeError, match="not several"):
        rq.Request(server.url("/"), "POST", body=b"x", data={"a": "b"})


MYPY_GOOD = """
    import requestqueue as rq

    def main() -> None:
        with rq.Queue(max_concurrent=4) as queue:
            queue.add("http://127.0.0.1:1/", timeout=3.0, params={"a": "b"}, retry=True)
            response = queue.fetch("http://127.0.0.1:1/", data={"k": "v"}, priority="high")
            print(response.raise_for_status().status_code, len(response.content))
"""


MYPY_BAD = [
    ('queue.add("http://127.0.0.1:1/", tiemout=3.0)', 'Unexpected keyword argument "tiemout"'),
    ('queue.fetch("http://127.0.0.1:1/", retry_delay="5")', 'Argument "retry_delay"'),
    ('queue.fetch("http://127.0.0.1:1/", header_timeout=5.0, low_speed_limit=(1.0, "60"))',
     'Argument "low_speed_limit"'),
]


def test_mypy_strict_catches_misspelt_options(tmp_path):
    pytest.importorskip("mypy")  # scripts/test-python installs it
    (tmp_path / "good.py").write_text(textwrap.dedent(MYPY_GOOD))
    for i, (call, _) in enumerate(MYPY_BAD):
        (tmp_path / f"bad{i}.py").write_text(textwrap.dedent(MYPY_GOOD) + textwrap.indent(call, " " * 8) + "\n")
    # The package is checked as a user sees it (its own findings are not the user's).
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-requestqueue.*]\nfollow_imports = silent\n"
                      "[mypy-cffi.*]\nignore_missing_imports = True\n")
    # The source tree (scripts/test-python), or the installed package (found by mypy itself).
    env = dict(os.environ) if "-packages" in str(SRC) else {**os.environ, "MYPYPATH": str(SRC)}
    # One run for every file (mypy's start-up is most of its time): each file's findings are its own.
    files = ["good.py"] + [f"bad{i}.py" for i in range(len(MYPY_BAD))]
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", str(config),
                          *files], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    findings = {name: [line for line in run.stdout.splitlines() if line.startswith(name + ":")] for name in files}
    assert findings["good.py"] == [], run.stdout
    for i, (_, message) in enumerate(MYPY_BAD):
        assert any(message in line for line in findings[f"bad{i}.py"]), run.stdout


def test_typed_options_cover_every_request_argument():
    import inspect
    from requestqueue._options import RequestOptions

    parameters = set(inspect.signature(rq.Request.__init__).parameters) - {"self", "url"}
    assert set(RequestOptions.__annotations__) == parameters
