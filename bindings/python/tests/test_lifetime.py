"""Lifetimes that cannot crash: the interpreter exits cleanly with requests in flight (sync queues,
asyncio queues, a thread still waiting, queues nobody references), and a forked child neither
hangs nor touches the parent's queues. Each case runs in its own interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import requestqueue as rq

PRELUDE = """
import asyncio, gc, os, sys, threading
import requestqueue as rq
BASE = sys.argv[1]
"""

# For a script that watches the library: every module of the binding that calls it gets wrap(lib).
WATCH_LIBRARY = """
def watch_library(wrap):
    import requestqueue._native as native
    real = native.lib
    watched = wrap(real)
    for name, module in list(sys.modules.items()):
        if name.startswith("requestqueue.") and getattr(module, "lib", None) is real:
            module.lib = watched
    return watched
"""


def run_script(server, body: str):
    env = dict(os.environ)
    package_parent = str(Path(rq.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("REQUESTQUEUE_LIBRARY", rq.LIBRARY_PATH)
    script = PRELUDE + textwrap.dedent(body)
    # The timeout only keeps a hang from blocking the suite; a clean exit takes well under a second.
    return subprocess.run([sys.executable, "-X", "dev", "-c", script, server.base], env=env,
                          capture_output=True, text=True, timeout=120)


# asyncio's debug mode (-X dev) reports callbacks that took longer than 0.1 s: a matter of how busy
# the machine is, not of correctness.
SLOW_CALLBACK = re.compile(r"^Executing <[^\n]*> took \d+\.\d+ seconds\n", re.MULTILINE)


def assert_clean(result, expected_stdout: str = "", expected_stderr: str = "") -> None:
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert SLOW_CALLBACK.sub("", result.stderr) == expected_stderr
    assert result.stdout == expected_stdout


def stalled(server, uid):
    """Requests logged for uid: every one must have been ended (the client went away)."""
    return server.requests(id=uid)


def test_exit_with_requests_in_flight_on_a_sync_queue(server, uid):
    result = run_script(server, f"""
        q = rq.Queue(max_concurrent=3)
        for i in range(10):
            q.add(BASE + f"/stall?s=30&id={uid}&n={{i}}", on_complete=lambda r: print("callback at exit"))
        q.add(BASE + "/bytes?n=10&id={uid}-done")  # completes, never dispatched
        print("leaving")
    """)
    assert_clean(result, "leaving\n")
    # The server saw the running requests (3 at most at once).
    assert server.log()["peak"] <= 4


def test_exit_while_another_thread_waits(server, uid):
    result = run_script(server, f"""
        q = rq.Queue()
        q.add(BASE + "/stall?s=30&id={uid}")
        started = threading.Event()
        def waiter():
            started.set()
            try:
                q.wait()
            except rq.QueueClosedError:
                pass
        threading.Thread(target=waiter, daemon=True).start()
        started.wait()
        print("leaving")
    """)
    assert_clean(result, "leaving\n")


def test_exit_inside_a_with_block_via_sys_exit(server, uid):
    result = run_script(server, f"""
        with rq.Queue() as q:
            request = q.add(BASE + "/stall?s=30&id={uid}", on_complete=lambda r: print("completed", r.response.outcome.name))
            sys.exit(0)
    """)
    assert_clean(result, "completed CANCELLED\n")  # the with block closed it: callbacks still run


def test_exit_with_asyncio_requests_in_flight(server, uid):
    result = run_script(server, f"""
        async def main():
            q = rq.AsyncQueue(max_concurrent=50)
            tasks = [asyncio.ensure_future(q.fetch(BASE + f"/stall?s=30&id={uid}&n={{i}}")) for i in range(100)]
            await asyncio.sleep(0)
            print("leaving with", q.count, "in flight")
            return q   # the loop closes with the requests in flight and the reader registered

        q = asyncio.run(main())
    """)
    assert_clean(result, "leaving with 100 in flight\n")


def test_exit_with_unreferenced_queues_and_requests(server, uid):
    result = run_script(server, f"""
        def make():
            q = rq.Queue()
            q.add(BASE + "/stall?s=30&id={uid}", on_download_progress=lambda r, p: None,
                  on_auth=lambda r, c: None)
        for _ in range(5):
            make()
        gc.collect()
        print("leaving")
    """)
    # Dropped without close(): freed (by the binding's reaper thread), with a ResourceWarning (-X
    # dev shows them) at the line that made each.
    assert_clean(result, "leaving\n", "<string>:7: ResourceWarning: unclosed requestqueue Queue: freed by "
                         "the garbage collector, 1 request in flight cancelled; close it with close() "
                         "or a with block\n" * 5)


def test_queue_dropped_inside_a_callback(server, uid):
    result = run_script(server, f"""
        holder = {{"q": rq.Queue()}}
        def on_complete(request):
            holder.clear()   # the last reference to the queue goes away inside its own callback
            gc.collect()
        q = holder["q"]
        q.add(BASE + "/bytes?n=1&id={uid}", on_complete=on_complete)
        q.add(BASE + "/stall?s=30&id={uid}")
        q.dispatch()
        import select
        while holder:
            select.select([q], [], [])
            q.dispatch()
        del q
        gc.collect()
        print("ok")
    """)
    # The stalled request was still in flight when the queue was dropped.
    assert_clean(result, "ok\n", "<string>:6: ResourceWarning: unclosed requestqueue Queue: freed by the "
                                  "garbage collector, 1 request in flight cancelled; close it with close() "
                                  "or a with block\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_touch_the_parents_queue(server, uid):
    result = run_script(server, f"""
        q = rq.Queue()
        running = q.add(BASE + "/stall?s=30&id={uid}")
        pid = os.fork()
        if pid == 0:
            # The library's threads do not exist here: the queue is closed for the child, and the
            # child's exit (atexit) must not wait for them.
            try:
                q.add(BASE + "/bytes?n=1")
            except rq.QueueClosedError:
                print("child: closed", flush=True)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status), flush=True)
        print("parent", q.fetch(BASE + "/bytes?n=3").body.decode(), running.state.name)
        running.cancel()
        q.close()
    """)
    assert_clean(result, "child: closed\nchild exit 0\nparent abc RUNNING\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_reads_the_parents_responses(server, uid):
    result = run_script(server, WATCH_LIBRARY + textwrap.dedent(f"""
        class Watched:  # the library, noting which processes read responses
            def __init__(self, lib):
                self.lib, self.readers = lib, set()
            def __getattr__(self, name):
                if name.startswith("rq_response"):
                    self.readers.add(os.getpid())
                return getattr(self.lib, name)
        watched = watch_library(Watched)
        q = rq.Queue()
        unread = q.fetch(BASE + "/bytes?n=5&header=X-A:b&id={uid}")
        partly = q.fetch(BASE + "/redirect/1?id={uid}")
        partly.headers
        assert "url" not in vars(unread) and "url" not in vars(partly)
        pid = os.fork()
        if pid == 0:
            try:
                for r in (unread, partly):
                    print("child", r.status, r.url[len(BASE):], r.headers["content-length"],
                          r.attempts, r.metrics.bytes_down, repr(r.message), flush=True)
                # (The library allows it in the child: see "Fork" in requestqueue.h.)
                print("child read the library:", os.getpid() in watched.readers, flush=True)
            except BaseException as exc:
                print("child failed", repr(exc), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent", unread.headers["x-a"], partly.body.decode(), flush=True)
        q.close()
    """))
    assert_clean(result, f"child 200 /bytes?n=5&header=X-A:b&id={uid} 5 1 5 ''\n"
                         f"child 200 /redirect/0?id={uid} 10 1 10 ''\n"
                         "child read the library: True\n"
                         "parent b redirected\n")


def test_exit_with_unread_responses(server, uid):
    result = run_script(server, f"""
        q = rq.Queue(max_concurrent=4, duplicates="allow")
        kept = [q.add(BASE + f"/bytes?n=10&id={uid}") for _ in range(50)]
        q.wait()
        q.close()
        responses = [r.response for r in kept]
        cycle = [responses[0]]
        cycle.append(cycle)  # collected only as the interpreter goes away
        del cycle
        print("leaving", sum(r.status for r in responses))
    """)
    assert_clean(result, "leaving 10000\n")


def test_exit_while_threads_keep_fetching_and_running_callbacks(server, uid):
    result = run_script(server, f"""
        q = rq.Queue(max_concurrent=8)
        busy = threading.Event()

        def worker():
            n = 0
            while True:
                try:
                    q.fetch(BASE + f"/bytes?n=100000&id={uid}&i={{n}}",
                            on_download_progress=lambda r, p: p.done and busy.set())
                except rq.QueueClosedError:
                    return
                except rq.RequestCancelled:
                    pass
                n += 1

        for _ in range(3):
            threading.Thread(target=worker, daemon=True).start()
        busy.wait()  # (bytes arrived: the server has logged a request; a first progress has none)
        print("leaving")
    """)
    assert_clean(result, "leaving\n")
    assert server.requests(id=uid)
