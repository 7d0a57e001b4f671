"""The garbage collector and the binding: nothing that runs inside the collector (the destructors of
the ffi.gc handles of requests and responses, the finalizers of queues) calls the library or takes
cffi's lock, whatever the shape of the garbage; what it lets go of is still released; a queue
dropped without close() is freed (threads and descriptors return), its requests cancelled, with a
ResourceWarning. Scripts that could hang run in their own interpreter, with a timeout."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import requestqueue as rq
import requestqueue._runtime as runtime

from test_lifetime import WATCH_LIBRARY, assert_clean, run_script

# Watches the library and cffi's lock: every call of the library and every acquisition of cffi's
# lock made while this thread is inside the garbage collector (between gc.callbacks' "start" and
# "stop") is counted in IN_GC. Also counts retains/releases and request news/frees, to check that
# what the collector let go of is released later. report() prints both.
WATCH = WATCH_LIBRARY + """
import requestqueue._runtime as runtime, requestqueue._native as native
IN_GC = []
collecting = set()
def on_gc(phase, info):
    (collecting.add if phase == "start" else collecting.discard)(threading.get_ident())
gc.callbacks.append(on_gc)
COUNTS = {"retained": 0, "released": 0, "made": 0, "freed": 0}
# What each call makes or lets go of: (counters, only when it returns 0, how many: the count
# argument of the calls that take an array, else 1). A request accepted by the library gets one
# completion, whose response arrives retained (the binding gives every request an
# rq_summary_completion_fn): adding it counts that response as retained.
COUNTED = {"rq_response_retain": (("retained",), False),
           "rq_response_release": (("released",), False), "rq_response_release_many": (("released",), False),
           "rq_request_new": (("made",), True), "rq_add_url_with_summary": (("made", "retained"), True),
           "rq_add": (("retained",), True),
           "rq_request_free": (("freed",), False), "rq_request_free_many": (("freed",), False)}
class WatchedLib:
    def __init__(self, lib):
        self._lib = lib
    def __getattr__(self, name):
        function = getattr(self._lib, name)
        if not callable(function):
            return function
        def call(*args):
            if threading.get_ident() in collecting:
                IN_GC.append(name)
            result = function(*args)
            if name in COUNTED:
                counters, on_success = COUNTED[name]
                if not (on_success and result != 0):
                    for counter in counters:
                        COUNTS[counter] += args[1] if name.endswith("_many") else 1
            return result
        return call
class WatchedLock:
    def __init__(self, lock):
        self._lock = lock
    def acquire(self, *args):
        if threading.get_ident() in collecting:
            IN_GC.append("cffi lock")
        return self._lock.acquire(*args)
    def release(self):
        return self._lock.release()
    def __enter__(self):
        self.acquire()
    def __exit__(self, *exc):
        self.release()
watch_library(WatchedLib)
# (A cffi.FFI, made when the header is parsed at import, has that Python lock; the prebuilt ffi of
# requestqueue._ffi, made by _cffi_backend, has none: it parses type names in C.)
if hasattr(native.ffi, "_lock"):
    native.ffi._lock = WatchedLock(native.ffi._lock)
def report():
    gc.collect()
    runtime._drain()
    print("in gc:", sorted(set(IN_GC)))
    print("unreleased:", COUNTS["retained"] - COUNTS["released"], COUNTS["made"] - COUNTS["freed"])
"""

CLEAN_REPORT = "in gc: []\nunreleased: 0 0\n"


def run_watched(server, body: str, threshold: int = 1):
    """Runs body with the watch installed and gc.set_threshold(threshold) (1: a collection at
    nearly every allocation); the script ends with report()."""
    script = (WATCH + f"REFUSED = 'http://127.0.0.1:{server.closed_port()}'\n"
              f"gc.set_threshold({threshold})\n" + textwrap.dedent(body) + "\nreport()\n")
    return run_script(server, script)


def test_stats_after_failed_requests_does_not_deadlock(server):
    # The script, exactly: it hung every time (a failed request and its error form a
    # cycle, collected inside ffi.new while cffi holds its lock; the response's weakref callback
    # then needed that lock).
    port = server.closed_port()
    result = run_script(server, f"""
        q = rq.Queue(max_concurrent=8)
        for i in range(20):
            q.add("http://127.0.0.1:{port}/x%d" % i)
        q.wait()
        print(q.stats)
    """)
    assert_clean(result, "QueueStats(added=20, started=20, retried=0, succeeded=0, cancelled=0, "
                         "failed=20, coalesced=0, bytes_down=0, bytes_up=0)\n")


def test_failed_requests_under_gc_pressure(server):
    result = run_watched(server, """
        q = rq.Queue(max_concurrent=8)
        requests = [q.add(REFUSED + f"/x{i}") for i in range(40)]
        q.wait()
        print(q.stats.failed, sum(isinstance(r.exception(), rq.ConnectError) for r in requests))
        errors = [r.exception() for r in requests]
        del requests
        print(sum(e.response.status == 0 for e in errors), errors[0].response.url.startswith(REFUSED))
        del errors
        q.close()
    """)
    assert_clean(result, "40 40\n40 True\n" + CLEAN_REPORT)


def test_collections_run_from_callbacks(server, uid):
    result = run_watched(server, f"""
        q = rq.Queue(max_concurrent=4, duplicates="allow")
        seen = []
        def on_complete(request):
            gc.collect()
            seen.append(request.response.outcome.name)
            cycle = [request.response]
            cycle.append(cycle)
        def on_progress(request, progress):
            gc.collect()
        for i in range(10):
            q.add(BASE + f"/bytes?n=5000&id={uid}", on_complete=on_complete, on_download_progress=on_progress)
            q.add(REFUSED + f"/{{i}}", on_complete=on_complete)
        q.wait()
        print(sorted(set(seen)), len(seen))
        q.close()
    """, threshold=700)
    assert_clean(result, "['CANNOT_CONNECT', 'OK'] 20\n" + CLEAN_REPORT)


def test_cancelled_successful_and_retained_responses(server, uid):
    result = run_watched(server, f"""
        q = rq.Queue(max_concurrent=2, duplicates="allow")
        ok = [q.add(BASE + f"/bytes?n=10&header=X-A:b&id={uid}") for _ in range(10)]
        stalled = [q.add(BASE + f"/stall?s=3600&id={uid}") for _ in range(10)]
        for r in ok:
            r.result()
        del r
        q.cancel_all()
        q.wait()
        kept = [r.response for r in ok[:5]]      # unread lazy fields, kept
        partly = ok[5].response
        partly.headers                             # partly read, then dropped in a cycle
        cycle = [partly, ok, stalled]
        cycle.append(cycle)
        del ok, stalled, partly, cycle
        gc.collect()
        print(q.stats.succeeded, q.stats.cancelled, [r.headers["x-a"] for r in kept])
        print(all(r.url.startswith(BASE) and r.attempts == 1 for r in kept))
        del kept
        q.close()
    """)
    assert_clean(result, "10 10 ['b', 'b', 'b', 'b', 'b']\nTrue\n" + CLEAN_REPORT)


def test_requests_dropped_in_cycles_before_and_after_adding(server, uid):
    result = run_watched(server, f"""
        q = rq.Queue(max_concurrent=4, duplicates="allow")
        for i in range(30):
            never_added = rq.Request(BASE + "/bytes?n=1")
            never_added.me = never_added                    # a cycle, never added
            r = q.add(BASE + f"/bytes?n=3&id={uid}", on_complete=lambda r: None)
            r.me = r
            f = q.add(REFUSED + f"/{{i}}")
            f.me = f
        del never_added, r, f
        q.wait()
        print(q.stats.succeeded, q.stats.failed)
        q.close()
    """)
    assert_clean(result, "30 30\n" + CLEAN_REPORT)


def test_threads_with_their_own_and_a_shared_queue(server, uid):
    result = run_watched(server, f"""
        shared = rq.Queue(max_concurrent=8, duplicates="allow")
        failures = []
        def worker(n):
            own = rq.Queue(max_concurrent=2, duplicates="allow")
            for i in range(15):
                for queue in (own, shared):
                    try:
                        queue.fetch(REFUSED + f"/{{n}}/{{i}}")
                    except rq.ConnectError as exc:
                        failures.append(exc.response.outcome.name)
                    body = queue.fetch(BASE + f"/bytes?n=4&id={uid}").body
                    assert body == b"abcd", body
            own.close()
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(len(failures), set(failures), shared.stats.succeeded)
        shared.close()
    """)
    assert_clean(result, "120 {'CANNOT_CONNECT'} 60\n" + CLEAN_REPORT)


def test_asyncio_queue_under_gc_pressure(server, uid):
    result = run_watched(server, f"""
        async def main():
            async with rq.AsyncQueue(max_concurrent=8, duplicates="allow") as q:
                async def failing(i):
                    try:
                        await q.fetch(REFUSED + f"/{{i}}")
                    except rq.ConnectError as exc:
                        return exc.response.status
                async def cancelled(i):
                    task = asyncio.ensure_future(q.fetch(BASE + f"/stall?s=3600&id={uid}&i={{i}}"))
                    await asyncio.sleep(0)
                    task.cancel()
                    try:
                        await task
                    except asyncio.CancelledError:
                        return "cancelled"
                async def fine(i):
                    return (await q.fetch(BASE + f"/bytes?n=2&id={uid}")).body
                results = await asyncio.gather(*[f(i) for i in range(10) for f in (failing, cancelled, fine)])
                print(sorted(set(map(str, results))))
        asyncio.run(main())
    """)
    assert_clean(result, "['0', \"b'ab'\", 'cancelled']\n" + CLEAN_REPORT)


def test_stream_and_auth_requests_dropped_under_gc_pressure(server, uid):
    result = run_watched(server, f"""
        q = rq.Queue(max_concurrent=4, duplicates="allow")
        for i in range(5):
            r = q.add(BASE + f"/stall-body?n=200000&s=3600&id={uid}&i={{i}}", stream=True)
            next(iter(r.iter_bytes()))   # leaving the iterator cancels the request
            a = q.add(BASE + f"/basic-auth/u/p?id={uid}", on_auth=lambda r, c: ("u", "p"))
            a.me = a
        del r, a
        q.wait()
        print(q.stats.cancelled, q.stats.succeeded)
        q.close()
    """)
    assert_clean(result, "5 5\n" + CLEAN_REPORT)


# --------------------------------------------------------------------------------------------------
# Queues dropped without close()
# --------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_dropped_queues_are_freed(server, uid):
    result = run_script(server, f"""
        import json, select, time, urllib.request, warnings
        import requestqueue._runtime as runtime
        warnings.simplefilter("ignore", ResourceWarning)   # asserted by another test
        def resources():
            return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
        def still_running():
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))
            log = json.loads(opener.open(BASE + "/_/log").read())["requests"]
            return [e for e in log if e["id"] == "{uid}" and "end" not in e]

        rq.Queue().close()    # the library and the binding's own thread are set up
        gc.collect()
        baseline = resources()

        def idle():
            rq.Queue()
        def in_flight():
            q = rq.Queue(max_concurrent=2)
            for i in range(3):
                q.add(BASE + f"/stall?s=3600&id={uid}&i={{i}}", on_complete=lambda r: print("callback ran"))
        def referencing_itself():
            q = rq.AsyncQueue()
            q.me = q
            q2 = rq.Queue()
            q2.add(BASE + "/stall?s=3600&id={uid}", on_complete=lambda r: q2.add(BASE))
        def completed_not_dispatched():
            q = rq.Queue()
            q.add(BASE + "/bytes?n=1", on_complete=lambda r: print("callback ran"))
            select.select([q], [], [])   # its completion is ready, never dispatched
        for shape in (idle, in_flight, referencing_itself, completed_not_dispatched):
            for _ in range(25):
                shape()
        gc.collect()
        runtime._wait_for_reaper()
        print("after 100 dropped queues:", "baseline" if resources() == baseline else (baseline, resources()))
        print("open:", len(runtime._open_queues), "registered:", len(runtime._registry))
        # Every request the server saw was ended by this process (not by its exit).
        deadline = time.monotonic() + 60
        while still_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("still running at the server:", len(still_running()))
    """)
    assert_clean(result, "after 100 dropped queues: baseline\nopen: 0 registered: 0\n"
                         "still running at the server: 0\n")
    assert server.requests(id=uid)  # (the requests did reach it)


def test_dropped_queue_warns(server):
    gc.collect()  # (queues other tests left to the collector warn now, not below)
    runtime._wait_for_reaper()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        closed = rq.Queue()
        closed.close()
        with rq.Queue():
            pass
        dropped = rq.Queue(); line = sys._getframe().f_lineno  # noqa: E702
        dropped.add(server.url("/stall?s=3600&n=1"))
        dropped.add(server.url("/stall?s=3600&n=2"))
        dropped.me = dropped
        del closed, dropped
        gc.collect()
        runtime._wait_for_reaper()
    found = [w for w in caught if issubclass(w.category, ResourceWarning) and w.filename == __file__]
    assert len(found) == 1, [str(w.message) for w in found]
    assert (found[0].filename, found[0].lineno) == (__file__, line)
    assert str(found[0].message) == ("unclosed requestqueue Queue: freed by the garbage collector, "
                                     "2 requests in flight cancelled; close it with close() or a "
                                     "with block")


def test_dropped_queue_warning_shows_where_it_was_made_with_tracemalloc(server, uid):
    env_script = f"""
        import warnings
        def make():
            q = rq.AsyncQueue()
            q.me = q
        make()
        gc.collect()
        runtime._wait_for_reaper()
        print("done")
    """
    result = subprocess.run(
        [sys.executable, "-X", "tracemalloc=5", "-W", "always::ResourceWarning", "-c",
         "import gc, sys\nimport requestqueue as rq, requestqueue._runtime as runtime\n" + textwrap.dedent(env_script)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(rq.__file__).resolve().parent.parent)]
                                                         + [os.environ.get("PYTHONPATH", "")]),
             "REQUESTQUEUE_LIBRARY": rq.LIBRARY_PATH},
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    assert re.search(r'<string>:6: ResourceWarning: unclosed requestqueue AsyncQueue: freed by the '
                     r'garbage collector; close it with close\(\) or a with block\n'
                     r'Object allocated at \(most recent call last\):\n'
                     r'  File "<string>", lineno 8\n'
                     r'  File "<string>", lineno 6\n', result.stderr), result.stderr


def test_queue_closed_at_exit_does_not_warn(server, uid):
    result = run_script(server, f"""
        q = rq.Queue()
        q.add(BASE + f"/stall?s=3600&id={uid}")
        print("leaving")
    """)
    assert_clean(result, "leaving\n")


def test_failed_construction_does_not_leak_or_warn():
    gc.collect()
    runtime._wait_for_reaper()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = len(os.listdir("/proc/self/task"))
        for _ in range(20):
            with pytest.raises(rq.InvalidArgumentError):
                rq.Queue(rate_limit=(1, 1e9))    # checked by the library, after the queue exists
            with pytest.raises(rq.InvalidArgumentError):
                rq.Queue(max_connections=100001)  # likewise
        gc.collect()
        runtime._wait_for_reaper()
        assert len(os.listdir("/proc/self/task")) == tasks
    assert [str(w.message) for w in caught
            if issubclass(w.category, ResourceWarning) and w.filename == __file__] == []
