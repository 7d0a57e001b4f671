"""End-to-end tests of rqfetch (examples-c/rqfetch/), run by scripts/test-rqfetch.

rqfetch runs against the fixture server (Tests/Fixtures/fixture_server.py). Every test checks
observed facts: files written, lines printed, exit statuses, what the server logged, and on a
real terminal (tmux) what the screen showed. The program under test is $RQFETCH (built by
Tests/rqfetch/build.sh when unset).
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURE = ROOT / "Tests" / "Fixtures" / "fixture_server.py"
PATTERN = b"abcdefghijklmnopqrstuvwxyz0123456789"
WAIT = 60  # generous limit for conditions that hold within a second or two


def pattern(n):
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def rqfetch_path():
    path = os.environ.get("RQFETCH")
    if not path:
        out = subprocess.run(["bash", str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
        path = out.strip().splitlines()[-1]
        os.environ["RQFETCH"] = path
    return path


RQFETCH = rqfetch_path()
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Server:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(FIXTURE), "--exit-on-stdin-eof"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def log(self):
        with OPENER.open(self.base + "/_/log") as r:
            return json.load(r)

    def paths(self):
        return [e["path"] for e in self.log()["requests"]]

    def ids(self):
        return [e["id"] for e in self.log()["requests"]]

    def clear(self):
        req = urllib.request.Request(self.base + "/_/clear", method="POST")
        with OPENER.open(req) as r:
            r.read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def srv(server):
    server.clear()
    return server


def run(args, cwd, input=None, env=None, timeout=WAIT):
    """Runs rqfetch with standard output and error captured (so not on a terminal)."""
    return subprocess.run([RQFETCH, *args], cwd=cwd, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=timeout, env=env)


def wait_until(predicate, what, timeout=WAIT, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{detail()}")
        time.sleep(0.05)


# ---- parsing rqfetch's plain output ---------------------------------------------------------------

TAIL = r"(?P<url>\S+)(?: -> (?P<file>.+)| \((?P<message>.*)\))?$"
FIELDS = (r"(?P<status>ok|failed|cancelled)\s+(?P<http>\d+|-)\s+(?P<bytes>\d+) B\s+"
          r"(?P<time>\d+\.\d\d s|-)\s+(?P<tries>\d+) tr(?:y|ies)\s+" + TAIL)
EVENT = re.compile(r"^\[\s*(?P<n>\d+)/(?P<total>\d+)\] " + FIELDS)
ROW = re.compile(r"^\s+(?P<index>\d+)  " + FIELDS)
TOTAL = re.compile(r"^Total: (?P<requests>\d+) requests?, (?P<ok>\d+) ok, (?P<failed>\d+) failed, "
                   r"(?P<cancelled>\d+) cancelled, (?P<retried>\d+) retried; (?P<bytes>\d+) bytes "
                   r"\(.*\) in [\d.]+ s \(.*/s\)$")


def parse(text):
    """Splits plain output into events, summary rows (by URL order) and totals."""
    lines = text.splitlines()
    assert "Summary:" in lines, text
    cut = lines.index("Summary:")
    events = [m.groupdict() for m in map(EVENT.match, lines[:cut]) if m]
    assert re.match(r"^\s+# +status +HTTP +bytes +time +tries +URL$", lines[cut + 1]), lines[cut + 1]
    rows = [m.groupdict() for m in map(ROW.match, lines[cut + 2:]) if m]
    totals = [m.groupdict() for m in map(TOTAL.match, lines) if m]
    assert len(totals) == 1, text
    return events, rows, {k: int(v) for k, v in totals[0].items()}


def check_row(row, status, http, nbytes, tries, url, file=None, message=None):
    assert row["status"] == status, row
    assert row["http"] == str(http), row
    assert int(row["bytes"]) == nbytes, row
    assert int(row["tries"]) == tries, row
    assert row["url"] == url, row
    if file is not None:
        assert row["file"] == file, row
    if message is not None:
        assert re.search(message, row["message"] or ""), row


def files_in(d):
    return sorted(os.listdir(d))


# ---- help, version, bad input ---------------------------------------------------------------------

def declared_options():
    """The options declared in options.c: long names from the getopt_long table, short letters."""
    source = (ROOT / "examples-c" / "rqfetch" / "options.c").read_text()
    longs = re.findall(r'\{"([a-z0-9.-]+)", (?:no|required)_argument, NULL, (\'.\'|\w+)\}', source)
    shorts = re.search(r'short_options\[\] = ":?([^"]*)"', source).group(1).replace(":", "")
    assert len(longs) >= 15 and len(shorts) >= 10, (longs, shorts)
    return longs, shorts


def test_help_documents_every_option(tmp_path):
    r = run(["--help"], tmp_path)
    assert r.returncode == 0 and r.stderr == b""
    text = r.stdout.decode()
    assert text.startswith("Usage: rqfetch [OPTION]... [URL]...\n")
    longs, shorts = declared_options()
    documented = re.findall(r"^  (?:-(.), )?\s*--([a-z0-9.-]*[a-z0-9])", text, re.M)
    doc_long = {name: short for short, name in documented}
    for name, val in longs:
        assert name in doc_long, f"--{name} is not in --help"
        if val.startswith("'"):
            assert doc_long[name] == val[1], f"-{val[1]} is not shown with --{name}"
    assert set(shorts) == {s for s in doc_long.values() if s}, (shorts, doc_long)
    assert "Exit status" in text
    assert run(["-h"], tmp_path).stdout == r.stdout


def test_version(tmp_path):
    r = run(["--version"], tmp_path)
    assert r.returncode == 0
    assert re.match(r"rqfetch \d+\.\d+\.\d+\nlibrequestqueue \d+\.\d+\.\d+ \(built against", r.stdout.decode())


BAD_INPUT = [
    (["--frobnicate", "{base}/bytes?n=1"], None, r"unknown option '--frobnicate'"),
    (["-Z", "{base}/bytes?n=1"], None, r"unknown option '-Z'"),
    (["--re", "1", "{base}/bytes?n=1"], None, r"ambiguous option '--re'"),
    (["--plain=yes", "{base}/bytes?n=1"], None, r"option '--plain' takes no value"),
    (["{base}/bytes?n=1", "-j"], None, r"option '-j' needs a value"),
    (["{base}/bytes?n=1", "--timeout"], None, r"option '--timeout' needs a value"),
    (["-j", "many", "{base}/bytes?n=1"], None, r"bad value 'many': -j/--jobs needs a whole number"),
    (["-t", "-1", "{base}/bytes?n=1"], None, r"bad value '-1': -t/--timeout needs a number of seconds"),
    (["-r", "2x", "{base}/bytes?n=1"], None, r"bad value '2x': -r/--retry"),
    (["--retry-delay", "nan", "{base}/bytes?n=1"], None, r"bad value 'nan': --retry-delay"),
    (["{base}/bytes?n=1", "http://bad host/"], None, r"bad URL 'http://bad host/' \(argument 2\): invalid URL"),
    (["{base}/bytes?n=1", "ftp://example.org/x"], None,
     r"bad URL 'ftp://example.org/x' \(argument 2\): unsupported URL scheme"),
    (["{base}/bytes?n=1", "not-a-url"], None, r"bad URL 'not-a-url' \(argument 2\)"),
    (["-i", "{tmp}/list.txt"], None, r"bad URL 'http://x y' \({tmp}/list.txt:3\): invalid URL"),
    (["-i", "{tmp}/missing.txt"], None, r"cannot read the URL list '{tmp}/missing.txt': No such file"),
    (["-i", "{tmp}"], None, r"cannot read the URL list '{tmp}': Is a directory"),
    (["-i", "-"], "", r"no URL given \(the URL lists are empty\)"),
    ([], "", r"no URL given \(standard input holds none\)"),
    (["-H", "NoColon", "{base}/bytes?n=1"], None, r"bad header 'NoColon': expected 'NAME: VALUE'"),
    (["-H", "Bad Name: v", "{base}/bytes?n=1"], None, r"bad header 'Bad Name: v' for -H: invalid .*header"),
    (["-X", "GE T", "{base}/bytes?n=1"], None, r"bad method 'GE T' for -X: invalid .*method"),
    (["-u", "alice", "{base}/bytes?n=1"], None, r"option '-u' needs USER:PASSWORD"),
    (["-d", "@{tmp}/missing.bin", "{base}/bytes?n=1"], None, r"cannot read the data file '{tmp}/missing.bin'"),
    (["-c", "-o", "{tmp}/out", "{base}/bytes?n=1"], None, r"-c/--stdout and -o/--output-dir cannot be used together"),
    (["-o", "{tmp}/list.txt", "{base}/bytes?n=1"], None, r"the output directory '{tmp}/list.txt' is not a directory"),
]


@pytest.mark.parametrize("args,stdin,message", BAD_INPUT, ids=[m for _, _, m in BAD_INPUT])
def test_bad_input_is_refused_with_a_usage_line(srv, tmp_path, args, stdin, message):
    (tmp_path / "list.txt").write_text(f"# two good, one bad\n{srv.base}/bytes?n=1\n"
                                       f"http://x y\n{srv.base}/bytes?n=2\n")
    fill = lambda s: s.replace("{base}", srv.base).replace("{tmp}", str(tmp_path))
    r = run([fill(a) for a in args], tmp_path, input=None if stdin is None else stdin.encode())
    err = r.stderr.decode()
    assert r.returncode == 2, err
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert re.fullmatch("rqfetch: " + fill(message) + ".*", lines[0]), err
    assert lines[1] == "Usage: rqfetch [OPTION]... [URL]..."
    assert lines[2] == "Try 'rqfetch --help' for more information."
    assert r.stdout == b""
    assert srv.paths() == [], "bad input must fetch nothing"


# ---- plain output (not a terminal) ---------------------------------------------------------------

def test_plain_run_writes_files_and_reports_every_request(srv, tmp_path):
    b = srv.base
    urls = [f"{b}/bytes?n=1000&id=a", f"{b}/bytes?n=70000&chunked=1&id=b", f"{b}/status/404",
            f"{b}/redirect/2", f"{b}/bytes?n=0&id=e", f"{b}/bytes?n=5&x=%2F..%2F"]
    r = run(["-o", "out", *urls], tmp_path)
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert r.stderr == b""
    assert out.startswith(f"rqfetch: 6 URLs on {b}, at most 4 at once, FIFO, saving into out\n")
    events, rows, totals = parse(out)

    # One event per request, numbered in completion order.
    assert [int(e["n"]) for e in events] == [1, 2, 3, 4, 5, 6]
    assert sorted(e["url"] for e in events) == sorted(urls)
    # The summary lists them in the order given.
    assert [row["index"] for row in rows] == ["1", "2", "3", "4", "5", "6"]
    check_row(rows[0], "ok", 200, 1000, 1, urls[0], file="out/bytes_n=1000_id=a")
    check_row(rows[1], "ok", 200, 70000, 1, urls[1], file="out/bytes_n=70000_chunked=1_id=b")
    check_row(rows[2], "failed", 404, len(b"status 404"), 1, urls[2],
              message=r"^The server returned a 404 error$")
    check_row(rows[3], "ok", 200, len(b"redirected"), 1, urls[3], file="out/2")
    check_row(rows[4], "ok", 200, 0, 1, urls[4], file="out/bytes_n=0_id=e")
    check_row(rows[5], "ok", 200, 5, 1, urls[5], file="out/bytes_n=5_x=_2F.._2F")
    for row in rows:
        assert row["time"] != "-"
    assert totals == {"requests": 6, "ok": 5, "failed": 1, "cancelled": 0, "retried": 0,
                      "bytes": 1000 + 70000 + 10 + 10 + 0 + 5}

    # Exactly the bodies of the successful requests, and nothing else (no temporary files).
    assert files_in(tmp_path / "out") == sorted(["bytes_n=1000_id=a", "bytes_n=70000_chunked=1_id=b",
                                                  "2", "bytes_n=0_id=e", "bytes_n=5_x=_2F.._2F"])
    assert (tmp_path / "out" / "bytes_n=1000_id=a").read_bytes() == pattern(1000)
    assert (tmp_path / "out" / "bytes_n=70000_chunked=1_id=b").read_bytes() == pattern(70000)
    assert (tmp_path / "out" / "2").read_bytes() == b"redirected"
    assert (tmp_path / "out" / "bytes_n=0_id=e").read_bytes() == b""
    ids = srv.ids()
    assert sorted(i for i in ids if i) == ["a", "b", "e"]
    assert ids.count(None) == 5  # the 404, three redirect hops, x=


def test_all_ok_exits_0_and_saves_in_the_current_directory(srv, tmp_path):
    r = run([f"{srv.base}/bytes?n=10&id=1", f"{srv.base}/bytes?n=20&id=2"], tmp_path)
    assert r.returncode == 0, r.stdout
    _, rows, totals = parse(r.stdout.decode())
    assert [row["file"] for row in rows] == ["bytes_n=10_id=1", "bytes_n=20_id=2"]
    assert totals["ok"] == 2 and totals["failed"] == 0
    assert (tmp_path / "bytes_n=20_id=2").read_bytes() == pattern(20)


def test_existing_files_are_not_overwritten_unless_forced(srv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "bytes_n=10").write_bytes(b"old")
    url = f"{srv.base}/bytes?n=10"
    # Two URLs with the same name in one run, and an existing file: three distinct files.
    r = run(["-o", str(out), url, url], tmp_path)
    assert r.returncode == 0, r.stdout
    _, rows, _ = parse(r.stdout.decode())
    assert sorted(row["file"] for row in rows) == [f"{out}/bytes_n=10.1", f"{out}/bytes_n=10.2"]
    assert (out / "bytes_n=10").read_bytes() == b"old"
    assert (out / "bytes_n=10.1").read_bytes() == pattern(10)
    assert (out / "bytes_n=10.2").read_bytes() == pattern(10)

    # -f overwrites what was there before, but never a file written earlier in the same run.
    r = run(["-f", "-o", str(out), url, url], tmp_path)
    assert r.returncode == 0, r.stdout
    _, rows, _ = parse(r.stdout.decode())
    assert sorted(row["file"] for row in rows) == [f"{out}/bytes_n=10", f"{out}/bytes_n=10.1"]
    assert (out / "bytes_n=10").read_bytes() == pattern(10)
    assert files_in(out) == ["bytes_n=10", "bytes_n=10.1", "bytes_n=10.2"]


def test_output_directory_is_created(srv, tmp_path):
    r = run(["-o", "a/b/c", f"{srv.base}/bytes?n=3"], tmp_path)
    assert r.returncode == 0, r.stdout
    assert (tmp_path / "a" / "b" / "c" / "bytes_n=3").read_bytes() == pattern(3)


def test_stdout_mode_writes_bodies_in_url_order(srv, tmp_path):
    b = srv.base
    # The first body arrives last; the failed request's body is not written.
    urls = [f"{b}/bytes?n=5&delay=0.3&id=a", f"{b}/bytes?n=7&id=b", f"{b}/status/404",
            f"{b}/bytes?n=3&id=c"]
    r = run(["-c", "-j", "4", *urls], tmp_path)
    assert r.returncode == 1
    assert r.stdout == pattern(5) + pattern(7) + pattern(3)
    err = r.stderr.decode()
    assert "bodies to standard output" in err
    events, rows, totals = parse(err)
    assert events[-1]["url"] == urls[0], "the delayed request finished last"
    assert [row["file"] for row in rows] == ["(stdout)", "(stdout)", None, "(stdout)"]
    assert totals["ok"] == 3 and totals["failed"] == 1
    assert files_in(tmp_path) == []


def test_urls_from_arguments_lists_and_standard_input(srv, tmp_path):
    b = srv.base
    (tmp_path / "one.txt").write_text(f"# comment\n\n  {b}/bytes?n=1&id=list1  \r\n{b}/bytes?n=1&id=list2\n")
    (tmp_path / "two.txt").write_text(f"{b}/bytes?n=1&id=list3")  # no final newline
    stdin = f"{b}/bytes?n=1&id=stdin1\n#x\n{b}/bytes?n=1&id=stdin2\n".encode()
    r = run(["-j", "1", "-c", f"{b}/bytes?n=1&id=arg1", "-i", "one.txt", "-i", "-", "-i", "two.txt",
             f"{b}/bytes?n=1&id=arg2"], tmp_path, input=stdin)
    assert r.returncode == 0, r.stderr
    assert srv.ids() == ["arg1", "arg2", "list1", "list2", "stdin1", "stdin2", "list3"]

    # No URL argument and no -i: the URLs come from standard input.
    srv.clear()
    r = run(["-c", "-j", "1"], tmp_path, input=f"{b}/bytes?n=1&id=s1\n{b}/bytes?n=2&id=s2\n".encode())
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(1) + pattern(2)
    assert srv.ids() == ["s1", "s2"]


def test_concurrency_limit(srv, tmp_path):
    b = srv.base
    r = run(["-c", "-j", "3", *[f"{b}/delay?s=0.5&id={i}" for i in range(7)]], tmp_path)
    assert r.returncode == 0, r.stderr
    log = srv.log()
    assert log["peak"] == 3
    # The first three ran together from the start: each started before any of them ended.
    first = [e for e in log["requests"] if e["id"] in ("0", "1", "2")]
    assert max(e["start"] for e in first) < min(e["end"] for e in first)


def test_no_limit_with_j0(srv, tmp_path):
    r = run(["-c", "-j", "0", *[f"{srv.base}/delay?s=0.5&id={i}" for i in range(6)]], tmp_path)
    assert r.returncode == 0, r.stderr
    assert srv.log()["peak"] == 6


@pytest.mark.parametrize("flag,order", [("--fifo", ["0", "1", "2", "3", "4"]),
                                        ("--lifo", ["0", "4", "3", "2", "1"])])
def test_fifo_and_lifo(srv, tmp_path, flag, order):
    urls = [f"{srv.base}/bytes?n=1&id={i}" for i in range(5)]
    r = run(["-c", "-j", "1", flag, *urls], tmp_path)
    assert r.returncode == 0, r.stderr
    # With one slot the first URL starts when added; the others wait and start in this order.
    assert srv.ids() == order
    assert ("LIFO" if flag == "--lifo" else "FIFO") in r.stderr.decode().splitlines()[0]


def test_timeout_fails_the_request(srv, tmp_path):
    url = f"{srv.base}/stall?s=30&id=slow"
    r = run(["-t", "0.5", "-o", "out", url, f"{srv.base}/bytes?n=4&id=fast"], tmp_path)
    assert r.returncode == 1
    _, rows, totals = parse(r.stdout.decode())
    check_row(rows[0], "failed", "-", 0, 1, url, message=r"[Tt]imed out")
    check_row(rows[1], "ok", 200, 4, 1, f"{srv.base}/bytes?n=4&id=fast")
    assert totals["failed"] == 1
    assert srv.ids().count("slow") == 1
    assert files_in(tmp_path / "out") == ["bytes_n=4_id=fast"]


def test_retries_recover_and_give_up(srv, tmp_path):
    b = srv.base
    ok_url = f"{b}/flaky?key=recovers&fail=2&mode=truncated&n=3000"
    bad_url = f"{b}/flaky?key=gives-up&fail=9&mode=truncated&n=3000"
    r = run(["-r", "2", "--retry-delay", "0.1", "-o", "out", ok_url, bad_url], tmp_path)
    assert r.returncode == 1
    out = r.stdout.decode()
    assert "up to 2 retries after 0.1 s" in out.splitlines()[0]
    _, rows, totals = parse(out)
    check_row(rows[0], "ok", 200, 3000, 3, ok_url, file="out/flaky_key=recovers_fail=2_mode=truncated_n=3000")
    check_row(rows[1], "failed", 200, 1500, 3, bad_url)  # the last attempt's partial body
    assert totals["retried"] == 2
    paths = srv.paths()
    assert sum("key=recovers" in p for p in paths) == 3
    assert sum("key=gives-up" in p for p in paths) == 3
    assert (tmp_path / "out" / "flaky_key=recovers_fail=2_mode=truncated_n=3000").read_bytes() == pattern(3000)
    assert files_in(tmp_path / "out") == ["flaky_key=recovers_fail=2_mode=truncated_n=3000"]


def test_http_errors_are_not_retried(srv, tmp_path):
    r = run(["-c", "-r", "3", "--retry-delay", "0", f"{srv.base}/status/503"], tmp_path)
    assert r.returncode == 1
    _, rows, _ = parse(r.stderr.decode())
    check_row(rows[0], "failed", 503, 10, 1, f"{srv.base}/status/503")
    assert "\nTotal: 1 request, 0 ok, 1 failed, 0 cancelled, 0 retried; 10 bytes " in r.stderr.decode()
    assert srv.paths() == ["/status/503"]


def test_method_headers_and_body_like_curl(srv, tmp_path):
    (tmp_path / "part.bin").write_bytes(b"x=1\ny=\x01\x02\n")
    r = run(["-c", "-X", "PUT", "-H", "X-Test: yes it is ", "-H", "Accept:", "-H", "Content-Type: text/plain",
             "-d", "a=1", "-d", "@part.bin", f"{srv.base}/echo"], tmp_path)
    assert r.returncode == 0, r.stderr
    echo = json.loads(r.stdout)
    assert echo["method"] == "PUT"
    assert echo["body"] == "a=1&x=1\ny=\x01\x02\n"
    assert echo["headers"]["x-test"] == "yes it is"
    assert echo["headers"]["accept"] == ""
    assert echo["headers"]["content-type"] == "text/plain"
    assert echo["headers"]["user-agent"].startswith("rqfetch/")

    # -d alone: POST, form content type; @- reads standard input.
    r = run(["-c", "-d", "@-", f"{srv.base}/echo"], tmp_path, input=b"from stdin")
    assert r.returncode == 0, r.stderr
    echo = json.loads(r.stdout)
    assert echo["method"] == "POST" and echo["body"] == "from stdin"
    assert echo["headers"]["content-type"] == "application/x-www-form-urlencoded"


def test_basic_auth(srv, tmp_path):
    good, bad = f"{srv.base}/basic-auth/alice/s3cret:x", f"{srv.base}/basic-auth/alice/other"
    r = run(["-c", "-u", "alice:s3cret:x", good, bad], tmp_path)
    assert r.returncode == 1
    assert json.loads(r.stdout) == {"authenticated": True, "user": "alice"}
    _, rows, _ = parse(r.stderr.decode())
    check_row(rows[0], "ok", 200, len(r.stdout), 1, good)
    check_row(rows[1], "failed", 401, len(b"unauthorized"), 1, bad)


@pytest.mark.parametrize("sig,code,name", [(signal.SIGINT, 130, "Ctrl-C \\(SIGINT\\)"),
                                           (signal.SIGTERM, 143, "SIGTERM")])
def test_interrupt_in_plain_mode(srv, tmp_path, sig, code, name):
    b = srv.base
    fast = [f"{b}/bytes?n=1000&id=fast{i}" for i in range(2)]
    slow = [f"{b}/bytes?n=3000000&rate=300000&id=slow{i}" for i in range(4)]
    out_path = tmp_path / "stdout.txt"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([RQFETCH, "-j", "3", "-o", "out", *fast, *slow], cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE)
        try:
            # Interrupt once both fast ones are saved and three slow ones are transferring.
            wait_until(lambda: out_path.read_text().count("] ok ") == 2 and
                       sum(e["end"] is None for e in srv.log()["requests"]) == 3,
                       "two completions and three transfers in flight", detail=out_path.read_text)
            proc.send_signal(sig)
            proc.wait(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
    out = out_path.read_text()
    assert proc.returncode == code, out
    assert proc.stderr.read() == b""
    assert "Interrupted: cancelling 3 running and 1 waiting requests (Ctrl-C again quits at once)\n" in out
    assert re.search(f"^Interrupted by {name}\\.$", out, re.M)
    _, rows, totals = parse(out)
    assert [row["status"] for row in rows] == ["ok", "ok", "cancelled", "cancelled", "cancelled", "cancelled"]
    assert [int(row["tries"]) for row in rows[2:]] == [1, 1, 1, 0]
    assert rows[5]["time"] == "-"
    assert totals["ok"] == 2 and totals["cancelled"] == 4
    # Only the complete files: nothing partial, nothing temporary.
    assert files_in(tmp_path / "out") == ["bytes_n=1000_id=fast0", "bytes_n=1000_id=fast1"]
    assert "slow3" not in srv.ids()


# ---- on a terminal (tmux) -------------------------------------------------------------------------

class Tmux:
    """A private tmux server with one session running one command in a real pseudo-terminal.

    The exit status is written to a file by a bash wrapper (bash waits for the program and goes
    on when the program handled Ctrl-C itself). tmux's own #{pane_dead_status} is not used: it is
    lost when the pane's SIGCHLD arrives while tmux runs utempter for the closing pane.
    """

    count = 0

    def __init__(self, tmp_path, width=120, height=40):
        Tmux.count += 1
        self.dir = tmp_path / f"tmux{Tmux.count}"
        self.dir.mkdir()
        self.socket = f"rqfetch-test-{os.getpid()}-{Tmux.count}"
        conf = self.dir / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g history-limit 50000\nset -g status off\n")
        self.cmd = ["tmux", "-L", self.socket, "-f", str(conf)]
        self.size = (width, height)
        self.status_file = self.dir / "status"

    def tmux(self, *args):
        return subprocess.run([*self.cmd, *args], check=True, capture_output=True, text=True).stdout

    def start(self, argv, cwd, env=()):
        wrapper = 'status_file=$1; shift; "$@"; echo "$?" > "$status_file"'
        self.tmux("new-session", "-d", "-s", "t", "-x", str(self.size[0]), "-y", str(self.size[1]),
                  "-c", str(cwd), "--", "bash", "-c", wrapper, "bash", str(self.status_file),
                  "env", "-u", "NO_COLOR", *env, *argv)

    def screen(self, escapes=False):
        return self.tmux("capture-pane", "-p", "-J", *(["-e"] if escapes else []), "-t", "t")

    def history(self, escapes=False):
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-E", "-", *(["-e"] if escapes else []),
                         "-t", "t")

    def exit_status(self):
        try:
            text = self.status_file.read_text()
        except FileNotFoundError:
            return None
        return int(text) if text.endswith("\n") else None

    def wait_exit(self, timeout=WAIT):
        wait_until(lambda: self.exit_status() is not None, "the program to exit", timeout, self.screen)
        return self.exit_status()

    def wait_screen(self, regex, what, timeout=WAIT):
        return wait_until(lambda: re.search(regex, self.screen(), re.M), what, timeout, self.screen)

    def close(self):
        subprocess.run([*self.cmd, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path):
    if not shutil.which("tmux"):
        pytest.fail("tmux is needed (scripts/test-rqfetch installs it)")
    t = Tmux(tmp_path)
    yield t
    t.close()


KNOWN_BAR = r"^  /bytes\?n=600000&rate=\S*\s+\[=*>\s*\]\s+(\d+)%\s+[\d.]+ (?:B|KiB)/[\d.]+ KiB\s+[\d.]+ KiB/s\s+ETA \d+:\d\d"
SPINNER = r"^  /bytes\?n=400000&chunke\S*\s+\[\s*<=>\s*\]\s+[\d.]+ (?:B|KiB)\s+(?:[\d.]+ KiB/s|--)"
OVERALL = r"^  all\s+\[[=> ]+\] (\d+)/9 done, (\d+) failed, (\d+) running  "


def test_terminal_shows_bars_and_summary(srv, tmp_path, tmux):
    b = srv.base
    urls = ([f"{b}/bytes?n=600000&rate=200000&id=k{i}" for i in range(3)] +
            [f"{b}/bytes?n=400000&chunked=1&rate=150000&id=u{i}" for i in range(2)] +
            [f"{b}/status/404", f"{b}/bytes?n=10&id=s1", f"{b}/flaky?key=t&fail=1&mode=truncated&n=50",
             f"{b}/delay?s=2&id=w"])
    tmux.start([RQFETCH, "-j", "6", "-r", "1", "--retry-delay", "0.1", "-o", "out", *urls], tmp_path)

    # Live progress: a bar with a percentage part-way, a bouncing bar for unknown sizes, the total.
    m = tmux.wait_screen(KNOWN_BAR, "a bar with bytes, rate and ETA")
    assert 0 <= int(m.group(1)) <= 100
    tmux.wait_screen(r"^  /bytes\?n=600000\S*\s+\[=+>\s+\]\s+([1-9]|[1-9]\d)%", "a bar part-way")
    tmux.wait_screen(SPINNER, "a bouncing bar for a transfer of unknown size")
    tmux.wait_screen(OVERALL, "the overall bar")
    tmux.wait_screen(r"^  /delay\?s=2&id=w\s+\[\s*<=>\s*\]\s+waiting for the response  0:0\d$",
                     "a transfer waiting for its response")
    # Failures and retried requests are listed above the bars as they finish.
    tmux.wait_screen(r"^\[\s*\d/9\] failed\s+404 .* /status/404 \(The server returned a 404 error\)$",
                     "the 404 listed")

    assert tmux.wait_exit() == 1
    hist = tmux.history()
    port = srv.port
    assert f"Summary (URLs on http://127.0.0.1:{port}, files in out):" in hist
    rows = re.findall(r"^\s+(\d+)  (ok|failed)\s+(\d+)\s+(\d+) B\s+\d+\.\d\d s\s+(\d) tr\w+\s+(\S+)(?: -> (\S+))?",
                      hist, re.M)
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("1", "ok", "200", "600000", "1"), ("2", "ok", "200", "600000", "1"), ("3", "ok", "200", "600000", "1"),
        ("4", "ok", "200", "400000", "1"), ("5", "ok", "200", "400000", "1"), ("6", "failed", "404", "10", "1"),
        ("7", "ok", "200", "10", "1"), ("8", "ok", "200", "50", "2"), ("9", "ok", "200", "2", "1")]
    assert rows[0][5] == "/bytes?n=600000&rate=200000&id=k0" and rows[0][6] == "bytes_n=600000_rate=200000_id=k0"
    assert re.search(r"^Total: 9 requests, 8 ok, 1 failed, 0 cancelled, 1 retried; 2600072 bytes", hist, re.M)
    # Notable events went above the bars: the failure, and the request that needed a retry.
    assert re.search(r"^\[\s*\d/9\] ok\s+200\s+50 B .* 2 tries\s+/flaky\?key=t&fail=1&mode=truncated&n=50$",
                     hist, re.M)
    # The bars are gone; the last overall line stays, complete.
    assert re.search(r"^  all\s+\[=+\] 9/9 done, 1 failed, 0 running  ", hist, re.M)
    assert not re.search(r"^  /bytes", tmux.screen(), re.M)
    # Colors: the status words are green or red on a terminal.
    colored = tmux.history(escapes=True)
    assert re.search(r"\x1b\[32m\s*ok", colored) and re.search(r"\x1b\[31m\s*failed", colored)
    assert len(files_in(tmp_path / "out")) == 8


def test_terminal_ctrl_c_cancels_cleanly(srv, tmp_path, tmux):
    b = srv.base
    fast = [f"{b}/bytes?n=1000&id=fast{i}" for i in range(2)]
    slow = [f"{b}/bytes?n=3000000&rate=300000&id=slow{i}" for i in range(4)]
    tmux.start([RQFETCH, "-j", "3", "-o", "out", *fast, *slow], tmp_path)
    tmux.wait_screen(r"^  all\s+\[.*\] 2/6 done, 0 failed, 3 running", "two done and three running")
    wait_until(lambda: len(re.findall(r"^  /bytes\?n=3000000\S*\s+\[=*>\s*\]\s+([1-9]|[1-9]\d)%",
                                      tmux.screen(), re.M)) == 3, "three bars part-way", detail=tmux.screen)
    tmux.tmux("send-keys", "-t", "t", "C-c")
    assert tmux.wait_exit() == 130
    hist = tmux.history()
    assert "Interrupted: cancelling 3 running and 1 waiting requests (Ctrl-C again quits at once)" in hist
    assert re.search(r"^  all\s+\[.*\] 6/6 done, 0 failed, 4 cancelled, 0 running", hist, re.M)
    statuses = re.findall(r"^\s+\d  (ok|cancelled)\s", hist, re.M)
    assert statuses == ["ok", "ok", "cancelled", "cancelled", "cancelled", "cancelled"]
    assert "Interrupted by Ctrl-C (SIGINT)." in hist
    assert re.search(r"^Total: 6 requests, 2 ok, 0 failed, 4 cancelled", hist, re.M)
    assert files_in(tmp_path / "out") == ["bytes_n=1000_id=fast0", "bytes_n=1000_id=fast1"]
    assert "slow3" not in srv.ids()


@pytest.mark.parametrize("how", [["--plain"], ["--no-color"], ["env:NO_COLOR=1"]])
def test_terminal_plain_and_no_color(srv, tmp_path, tmux, how):
    urls = [f"{srv.base}/bytes?n=10&id=a", f"{srv.base}/status/404"]
    env = [h[4:] for h in how if h.startswith("env:")]
    flags = [h for h in how if not h.startswith("env:")]
    tmux.start([RQFETCH, "-o", "out", *flags, *urls], tmp_path, env=env)
    assert tmux.wait_exit() == 1
    colored = tmux.history(escapes=True)
    assert "\x1b[3" not in colored, "no colors"
    hist = tmux.history()
    if flags == ["--plain"]:
        # One line per request, as when the output is not a terminal.
        assert re.search(r"^\[1/2\] (ok|failed) ", hist, re.M) and re.search(r"^\[2/2\] (ok|failed) ", hist, re.M)
        assert "Summary:" in hist and "  all  " not in hist
    else:
        assert re.search(r"^  all\s+\[=+\] 2/2 done, 1 failed", hist, re.M)


# ---- the README's demo ----------------------------------------------------------------------------

def test_demo_in_a_terminal(tmp_path, tmux):
    """scripts/demo as a newcomer runs it: live bars, then the summary and the check of the files."""
    tmux.size = (140, 45)
    # RQFETCH: the program this run already built (the demo would otherwise build it again).
    tmux.start(["bash", str(ROOT / "scripts" / "demo")], ROOT, env=[f"TMPDIR={tmp_path}", f"RQFETCH={RQFETCH}"])
    tmux.wait_screen(r"^rqfetch: 300 URLs on http://127\.0\.0\.1:\d+, at most 8 at once, FIFO, timeout 5 s, "
                     r"up to 3 retries after 0\.3 s, saving into ",
                     "rqfetch to start")
    tmux.wait_screen(r"^  /bytes\?n=\d+&rate=\S*\s+\[=*>\s*\]\s+([1-9]|[1-9]\d)%", "a bar part-way")
    tmux.wait_screen(r"^  /bytes\?n=\d+&chunked=1\S*\s+\[\s*<=>\s*\]", "a bouncing bar")
    tmux.wait_screen(r"^  all\s+\[[=> ]+\] \d+/300 done, \d failed, [1-8] running", "the overall bar")
    assert tmux.wait_exit(timeout=300) == 0
    hist = tmux.history()
    assert re.search(r"^Total: 300 requests, 297 ok, 3 failed, 0 cancelled, (\d+) retried", hist, re.M)
    retried = int(re.search(r" (\d+) retried;", hist).group(1))
    assert retried == 18 + 4 + 5, "each flaky URL needed a retry, and no other URL"
    assert "demo: checked: the 297 files expected are in" in hist
    failed = re.findall(r"^\s+\d+  failed\s+(\d+) .* (\S+) \(The server returned a \d+ error\)$", hist, re.M)
    assert sorted(failed) == [("404", "/status/404?id=missing-1"), ("404", "/status/404?id=missing-2"),
                              ("503", "/status/503?id=unavailable")]
    assert len(os.listdir(tmp_path / "rqfetch-demo")) == 297


# ---- transport options (issue 17), against nginx, tinyproxy and microsocks --------------------

@pytest.fixture(scope="module")
def tx():
    sys.path.insert(0, str(ROOT / "Tests" / "Fixtures"))
    from transport_servers import TransportServers
    with TransportServers() as servers:
        yield servers.endpoints


def fetch_stdout(args, tmp_path):
    r = run(["--plain", "-c", *args], tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def test_transport_decoding_agent_and_proxies(tx, tmp_path):
    assert len(fetch_stdout([tx["http"] + "/br"], tmp_path)) == int(tx["text_size"])
    assert fetch_stdout(["--raw", "-H", "Accept-Encoding: gzip", tx["http"] + "/text"], tmp_path)[:2] == b"\x1f\x8b"
    assert fetch_stdout([tx["http"] + "/ua"], tmp_path) == b"rqfetch/0.1.0"
    assert fetch_stdout(["-A", "agent/7", tx["http"] + "/ua"], tmp_path) == b"agent/7"
    assert b"rqtestproxy" in fetch_stdout(["-x", tx["proxy"], tx["http"] + "/via"], tmp_path)
    assert fetch_stdout(["-x", tx["proxy"], "--noproxy", "127.0.0.1", tx["http"] + "/via"], tmp_path) == b"via="
    assert fetch_stdout(["--proxy", tx["socks"], tx["http"] + "/host"], tmp_path) == b"127.0.0.1"
    assert b"rqtestproxy" in fetch_stdout(["-x", tx["https_proxy"], "--proxy-cacert", tx["ca"], tx["http"] + "/via"],
                                          tmp_path)
    env = dict(os.environ, http_proxy=tx["proxy"])
    assert b"rqtestproxy" in run(["--plain", "-c", tx["http"] + "/via"], tmp_path, env=env).stdout
    assert run(["--plain", "-c", "-x", "", tx["http"] + "/via"], tmp_path, env=env).stdout == b"via="
    r = run(["-x", "ftp://proxy:21", tx["http"] + "/ua"], tmp_path)
    assert r.returncode == 2 and b"-x/--proxy" in r.stderr


def test_transport_tls_connections_versions_and_cookies(tx, tmp_path):
    body = fetch_stdout(["--cacert", tx["ca"], "-E", tx["client_cert"] + ":" + tx["key_password"],
                         "--key", tx["client_key"], tx["mtls"] + "/proto"], tmp_path)
    assert body == b"HTTP/2.0 client=CN=rq-client"
    assert fetch_stdout(["-k", "--http1.1", tx["tls"] + "/proto"], tmp_path).startswith(b"HTTP/1.1")
    r = run(["--plain", "-c", "--cacert", tx["ca"], "--pinnedpubkey", tx["wrong_pin"], tx["tls"] + "/proto"], tmp_path)
    assert r.returncode == 1
    assert fetch_stdout(["--http2-prior-knowledge", tx["h2c"] + "/proto"], tmp_path).startswith(b"HTTP/2.0")
    assert fetch_stdout(["--unix-socket", tx["unix_socket"], "http://sock.invalid/host"], tmp_path) == b"sock.invalid"
    port = tx["http_port"]
    assert fetch_stdout(["--resolve", f"pinned.invalid:{port}:127.0.0.1", "-4", "--keepalive-time", "30",
                         "--limit-rate", "10M", f"http://pinned.invalid:{port}/host"], tmp_path) == b"pinned.invalid"
    jar = tmp_path / "jar.txt"
    fetch_stdout(["--cookie-jar", str(jar), tx["http"] + "/cookies/set?name=k&value=v"], tmp_path)
    assert "\tk\tv" in jar.read_text()
    assert fetch_stdout(["-b", str(jar), tx["http"] + "/cookies"], tmp_path) == b"cookie=k=v"
    assert run(["-b", str(tmp_path / "missing"), tx["http"] + "/cookies"], tmp_path).returncode == 2
