"""What a newcomer does after reading only the READMEs and the header: short, plain scripts, each
run in its own interpreter under ``python -X dev -W error`` (every warning an error, asyncio's debug
mode on) against the fixture server, with what they print checked whole and nothing else on
stderr. Also the Python examples of the top-level README.md, run as written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import requestqueue as rq

from test_readme import http_server, run_example  # noqa: F401 - http_server is a fixture

ROOT_README = Path(__file__).resolve().parents[3] / "README.md"

# HOLD: a request the fixture server holds, with its head sent, until the client leaves (it then
# ends it: no request is left running on the shared server after the script).
PRELUDE = "import requestqueue as rq, sys\nBASE = sys.argv[1]\nHOLD = BASE + '/hold?n=1&key=' + sys.argv[2]\n"

# asyncio's debug mode (-X dev) reports callbacks that took longer than 0.1 s: a matter of how busy
# the machine is, not of correctness.
SLOW_CALLBACK = re.compile(r"^Executing <[^\n]*> took \d+\.\d+ seconds\n", re.MULTILINE)


def run(server, body: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    package_parent = str(Path(rq.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("REQUESTQUEUE_LIBRARY", rq.LIBRARY_PATH)
    script = PRELUDE + textwrap.dedent(body)
    # (The timeout only keeps a hang from blocking the suite.)
    return subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", script, server.base, uuid.uuid4().hex],
                          env=env, capture_output=True, text=True, timeout=120)


def clean(result, stdout: str, returncode: int = 0) -> None:
    assert SLOW_CALLBACK.sub("", result.stderr) == "", result.stderr
    assert result.stdout == stdout
    assert result.returncode == returncode


# -- the plain things -------------------------------------------------------------------------------

def test_fetch_text_json_headers_and_post(server):
    clean(run(server, """
        with rq.Queue() as q:
            r = q.fetch(BASE + "/text?s=caf%C3%A9&charset=latin-1")
            print(r.status, r.headers["Content-Type"], r.text, r.encoding)
            r = q.fetch(BASE + "/echo", method="POST", json={"a": 1})
            print(r.ok, r.json()["body"], r.json()["headers"]["content-type"])
            print(q.fetch(BASE + "/headers", headers={"X-Token": "abc"}, timeout=5).json()["x-token"])
            print(q.fetch(BASE + "/bytes?n=3").raise_for_status().body)
    """), "200 text/plain; charset=latin-1 café latin-1\nTrue {\"a\": 1} application/json\nabc\nb'abc'\n")


def test_one_request_without_a_queue(server):
    # requests.get(url) and Ruby's RequestQueue.request(url): one call, no queue to manage.
    clean(run(server, f"""
        print(rq.fetch(BASE + "/bytes?n=3").body, rq.fetch(BASE + "/echo", method="POST", json=[1]).json()["body"])
        try:
            rq.fetch("http://127.0.0.1:{server.closed_port()}/")
        except rq.ConnectError:
            print("ConnectError")
    """), "b'abc' [1]\nConnectError\n")


def test_a_method_in_lower_case_is_sent_in_upper_case(server):
    # As requests, httpx and aiohttp do: method="post" is a POST (servers answer 501 or 405 to "post").
    clean(run(server, """
        with rq.Queue() as q:
            print([q.fetch(BASE + "/echo", method=m, body=b"x").json()["method"] for m in ("post", "Put", "DELETE")])
            print(q.add(BASE + "/echo", method="patch", timeout=5).result().json()["method"])
            print(rq.Request(BASE + "/echo", method="options").method)
    """), "['POST', 'PUT', 'DELETE']\nPATCH\nOPTIONS\n")


def test_errors_are_the_builtin_kinds(server):
    clean(run(server, f"""
        with rq.Queue() as q:
            for url, kind in [("http://127.0.0.1:{server.closed_port()}/", ConnectionError),
                              ("not a url", ValueError), ("ftp://127.0.0.1/", ValueError),
                              (BASE + "/delay?s=1", TimeoutError), (BASE + "/status/404", rq.HTTPStatusError)]:
                try:
                    q.fetch(url, timeout=0.3)
                except kind as error:
                    print(type(error).__name__)
    """), "ConnectError\nInvalidURLError\nUnsupportedSchemeError\nRequestTimeoutError\nHTTPStatusError\n")


def test_priorities_limits_and_cancel(server):
    clean(run(server, """
        order = []
        with rq.Queue(max_concurrent=1) as q:
            q.add(BASE + "/delay?s=0.2", on_complete=lambda r: order.append("first"))
            q.add(BASE + "/bytes?n=1&id=low", priority="low", on_complete=lambda r: order.append("low"))
            q.add(BASE + "/bytes?n=1&id=high", priority="high", on_complete=lambda r: order.append("high"))
            doomed = q.add(BASE + "/bytes?n=1&id=c", on_complete=lambda r: print("completion of the cancelled one"))
            print(doomed.cancel(), q.count)
            q.wait()
            q.wait()                      # twice: nothing left, returns at once
        print(order)
        try:
            doomed.result()
        except rq.RequestCancelled:
            print("RequestCancelled")
    """), "True 3\ncompletion of the cancelled one\n['first', 'high', 'low']\nRequestCancelled\n")



def test_a_header_given_twice_is_sent_once_with_both_values(server):
    # A list of pairs, or names that differ in case only: the library sends a name once (a later
    # one replaces it), so only the last value went out, while request.headers showed both. Joined
    # as RFC 9110 5.3 allows ("; " for Cookie), as httpx does; None still removes.
    clean(run(server, """
        def sent(name, headers):
            return [h for h in rq.fetch(BASE + "/inspect", headers=headers).json()["headers"] if h[0].lower() == name]
        print(sent("accept", [("Accept", "text/html"), ("accept", "application/json")]))
        print(sent("cookie", {"Cookie": "a=1", "cookie": "b=2"}))
        print(sent("accept", [("Accept", "text/html"), ("Accept", None)]))
        print(rq.Request(BASE, headers=[("Accept", "a"), ("ACCEPT", b"b")]).headers)
    """), "[['Accept', 'text/html, application/json']]\n[['Cookie', 'a=1; b=2']]\n[]\n(('Accept', b'a, b'),)\n")


def test_a_request_cancelled_as_a_duplicate_says_what_to_do(server):
    # requests and httpx send both (two threads fetching one URL, say); a queue cancels the earlier
    # of two equal requests by default (the original's allowDuplicateRequests = NO). The message
    # said "cancelled by a duplicate request added later", not what to do about it.
    clean(run(server, """
        with rq.Queue() as q:
            first, second = q.add(HOLD), q.add(HOLD)
            try:
                first.result()
            except rq.RequestCancelled as error:
                print(error)
            second.cancel()
        with rq.Queue(duplicates="allow") as q:
            print([r.result().status for r in [q.add(BASE + "/bytes?n=1") for _ in range(2)]])
    """), "cancelled by an equal request added later (to send both, allow duplicates on the queue)\n[200, 200]\n")



def test_a_transport_option_refused_says_which_rule_it_broke(server):
    # The library's reason was "option 3: the value is not valid for this option (see rq_option in
    # requestqueue.h)": a number a Python user never wrote, and no rule.
    clean(run(server, """
        for options in ({"proxy": "ftp://127.0.0.1:1"}, {"unix_socket": "/" + "x" * 200}):
            try:
                rq.Request(BASE, **options)
            except rq.InvalidArgumentError as error:
                print(str(error).split("invalid argument: ")[1])
    """), "RQ_OPTION_PROXY: the value is not a proxy URL (http, https, socks4, socks4a, socks5 or "
          "socks5h://[user:password@]host[:port], printable ASCII without spaces) or \"\" for none\n"
          "RQ_OPTION_UNIX_SOCKET: the value is not a path of 1 to 107 bytes\n")

# -- callbacks that misbehave -----------------------------------------------------------------------

def test_an_exception_in_a_callback_is_raised_by_wait_and_the_queue_goes_on(server):
    clean(run(server, """
        def boom(request):
            raise RuntimeError("boom")
        with rq.Queue() as q:
            q.add(BASE + "/bytes?n=5", on_complete=boom)
            try:
                q.wait()
            except RuntimeError as error:
                print("wait raised", error)
            print(q.fetch(BASE + "/bytes?n=2").body)
    """), "wait raised boom\nb'ab'\n")


def test_sys_exit_in_a_callback_ends_the_script_with_its_code(server):
    clean(run(server, """
        with rq.Queue() as q:
            q.add(BASE + "/bytes?n=5", on_complete=lambda r: sys.exit(7))
            q.add(HOLD)
            q.wait()
        print("not reached")
    """), "", returncode=7)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signals")
def test_ctrl_c_during_wait_and_fetch(server):
    clean(run(server, """
        import os, signal, threading
        for how in ("wait", "fetch"):
            with rq.Queue() as q:
                try:
                    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
                    q.add(HOLD) if how == "wait" else q.fetch(HOLD)
                    q.wait()
                except KeyboardInterrupt:
                    print(how, "interrupted")
    """), "wait interrupted\nfetch interrupted\n")


def test_an_async_def_callback_is_refused_clearly(server):
    # Callbacks are called, not awaited. An `async def` one on an AsyncQueue silently never ran (its
    # coroutine dropped, "never awaited" at best); now it fails the request with a TypeError that
    # says so, raised by the await of the request, as any exception of a callback.
    clean(run(server, """
        import asyncio
        async def on_done(request):
            print("never printed")
        async def progress(request, p):
            print("never printed")
        async def main():
            async with rq.AsyncQueue() as q:
                for options in ({"on_complete": on_done}, {"on_download_progress": progress}):
                    try:
                        await q.add(BASE + "/bytes?n=1", **options)
                    except TypeError as error:
                        print(str(error).split(":")[0])
        asyncio.run(main())
    """), "on_complete returned a coroutine\non_download_progress returned a coroutine\n")


# -- lifetimes --------------------------------------------------------------------------------------

def test_use_after_close_and_a_response_that_outlives_its_queue(server):
    clean(run(server, """
        q = rq.Queue()
        r = q.fetch(BASE + "/bytes?n=5")
        q.close()
        q.close()                                     # twice: nothing happens
        print(r.status, r.body, r.headers["content-length"], r.url.endswith("/bytes?n=5"))
        try:
            q.add(BASE + "/bytes?n=5")
        except rq.QueueClosedError as error:
            print(error)
        request = rq.Request(BASE + "/bytes?n=1")
        with rq.Queue() as q2:
            q2.add(request)
            q2.wait()
            try:
                q2.add(request)
            except rq.AlreadyAddedError:
                print("AlreadyAddedError")
    """), "200 b'abcde' 5 True\nadd: the queue is closed\nAlreadyAddedError\n")


def test_a_queue_from_several_threads(server):
    clean(run(server, """
        import threading
        statuses = []
        with rq.Queue(max_concurrent=4) as q:
            def work(i):
                for j in range(10):
                    statuses.append(q.fetch(BASE + f"/bytes?n={i}&j={j}").status)
            threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
            for t in threads: t.start()
            for t in threads: t.join()
        print(len(statuses), set(statuses))
    """), "40 {200}\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork(server):
    clean(run(server, """
        import os
        q = rq.Queue()
        r = q.fetch(BASE + "/bytes?n=3")
        pid = os.fork()
        if pid == 0:
            try:
                q.fetch(BASE + "/bytes?n=3")
            except rq.QueueClosedError as error:  # (it said only "the queue is closed")
                print("child:", error, flush=True)
            with rq.Queue() as q2:
                print("child:", q2.fetch(BASE + "/bytes?n=4").status, r.headers["content-length"], flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent:", q.fetch(BASE + "/bytes?n=5").status)
        q.close()
    """), "child: add: the queue was made by the parent process before fork(), and is closed in this child: "
          "make a new queue here\nchild: 200 3\nparent: 200\n")


def test_asyncio(server):
    clean(run(server, f"""
        import asyncio
        async def main():
            async with rq.AsyncQueue(max_concurrent=2) as q:
                responses = await asyncio.gather(*(q.fetch(BASE + f"/bytes?n={{i}}") for i in range(5)))
                print([len(r.body) for r in responses])
                try:
                    await q.fetch("http://127.0.0.1:{server.closed_port()}/")
                except ConnectionError as error:
                    print(type(error).__name__)
                try:
                    await asyncio.wait_for(q.fetch(HOLD), 0.2)
                except asyncio.TimeoutError:
                    print("wait_for timed out; in the queue:", q.count)
                print((await q.add(BASE + "/bytes?n=2")).body)
        asyncio.run(main())
    """), "[0, 1, 2, 3, 4]\nConnectError\nwait_for timed out; in the queue: 0\nb'ab'\n")


# -- warnings: -W error makes them exceptions that nobody can catch ----------------------------------

def test_an_unclosed_queue_under_W_error_is_reported_as_python_reports_an_unclosed_file(server):
    # With -W error a ResourceWarning the binding's reaper thread emits is an exception with nobody to
    # raise it to: Python reports an unclosed file that way as "Exception ignored in: <file>" and the
    # warning; the binding said "internal error in a callback", as if it had a bug.
    result = run(server, """
        import gc
        def forget():
            q = rq.Queue()
            q.add(HOLD)
        forget()
        gc.collect()
        rq._runtime._wait_for_reaper()
        print("end")
    """)
    assert result.returncode == 0
    assert result.stdout == "end\n"
    assert "internal error" not in result.stderr
    assert result.stderr == ("Exception ignored in: <requestqueue Queue made at <string>:7>\n"
                             "ResourceWarning: unclosed requestqueue Queue: freed by the garbage collector, 1 request "
                             "in flight cancelled; close it with close() or a with block\n")


# -- the httpx transport ----------------------------------------------------------------------------

def test_httpx_read_timeout_on_a_kept_alive_connection_is_a_read_timeout(server):
    # A request sent on a connection kept open by an earlier one, whose answer is too slow, was
    # raised as httpx.ConnectTimeout: a promise that the request was never sent, on which callers
    # (and retry policies) resend even a POST.
    pytest.importorskip("httpx")
    clean(run(server, """
        import httpx, requestqueue.httpx
        with httpx.Client(transport=requestqueue.httpx.HTTPTransport(), timeout=0.5) as client:
            print(client.get(BASE + "/bytes?n=1").status_code)
            for method in ("GET", "POST"):
                try:
                    client.request(method, BASE + "/delay?s=1", content=b"x" if method == "POST" else None)
                except httpx.TimeoutException as error:
                    print(method, type(error).__name__)
    """), "200\nGET ReadTimeout\nPOST ReadTimeout\n")


def test_an_unclosed_httpx_client_is_reported_at_the_line_that_made_its_transport(server):
    # The warning named a line inside requestqueue/httpx.py, where the transport makes its queue.
    pytest.importorskip("httpx")
    result = run(server, """
        import asyncio, gc, httpx, requestqueue.httpx
        async def main():
            client = httpx.AsyncClient(transport=requestqueue.httpx.AsyncHTTPTransport())
            print((await client.get(BASE + "/bytes?n=3")).status_code)
        asyncio.run(main())
        gc.collect()
        rq._runtime._wait_for_reaper()
    """)
    assert (result.returncode, result.stdout) == (0, "200\n"), result.stderr
    assert SLOW_CALLBACK.sub("", result.stderr) == (
        "Exception ignored in: <requestqueue AsyncQueue made at <string>:7>\n"
        "ResourceWarning: unclosed requestqueue AsyncQueue: freed by the garbage collector; close it with "
        "close() or a with block\n")



def test_httpx_arguments_of_httpx_own_transport_say_what_to_give_instead(server):
    # Copied from httpx's documentation: HTTPTransport(http2=True), limits=... The TypeError listed
    # the allowed options without the transport's own (max_concurrent, verify, retries, ...) and
    # without what replaces httpx's.
    pytest.importorskip("httpx")
    clean(run(server, """
        import httpx, requestqueue.httpx
        for options in ({"http2": True}, {"limits": httpx.Limits(max_connections=4)}):
            try:
                requestqueue.httpx.HTTPTransport(**options)
            except TypeError as error:
                print(str(error).split(" (allowed: ")[0], "|", str(error).split(" (allowed: ")[1][:48])
    """), 'HTTPTransport: unknown option(s) http2; instead of http2=, give http_version="2" (the default over TLS) | '
          'max_concurrent, mode, max_per_host, rate_limit, \n'
          'HTTPTransport: unknown option(s) limits; instead of limits=, give max_concurrent= and max_per_host= | '
          'max_concurrent, mode, max_per_host, rate_limit, \n')

# -- the top-level README ---------------------------------------------------------------------------

def root_examples():
    return re.findall(r"```python\n(.*?)```", ROOT_README.read_text(), re.DOTALL)


def test_root_readme_has_its_python_examples():
    assert len(root_examples()) == 3


def test_root_readme_sync_example(http_server):  # noqa: F811
    result = run_example(root_examples()[0], http_server)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str([200] * 20)
    assert re.fullmatch(r"failed: 404 \d+ bytes", lines[1])


def test_root_readme_asyncio_example(http_server):  # noqa: F811
    result = run_example(root_examples()[1], http_server)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{1900 * 100} bytes in 100 responses\n"


def test_root_readme_streaming_example(http_server, tmp_path):  # noqa: F811
    result = run_example(root_examples()[2], http_server, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["200 1900 bytes written", "1900 bytes streamed; 2 requests succeeded"]
