#!/usr/bin/env python3
"""The benchmark driver behind bench/run (which installs what it needs, then runs this).

It builds the C and Swift clients, starts nginx on a free 127.0.0.1 port (one worker, keep-alive,
access_log off) serving a 100-byte and a 10 MiB file and taking POSTs at /upload (the upload
workloads of the C clients: small JSON bodies and 10 MiB bodies from memory; nginx answers once it
has read the whole body), runs every client on the same work in the same run, interleaved (each
repetition runs every client once per workload, in a rotated order), takes the median of each figure
over the repetitions, runs the queue-only benchmark, and writes a markdown report with each figure's
ratio to the C reference on libcurl multi.

Every run of a client is checked: it must report N requests, N successes with status 200 and exactly
N times the file's size (for a POST, nginx's 2-byte answer) in body bytes; a run that does not
counts as failed. The exit status is 0 when every run of every available client passed (timing
targets never fail it), and the last line says "bench: P passed, F failed".
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
CLIENTS_DIR = os.path.join(BENCH, "clients")

SMALL_SIZE = 100
LARGE_SIZE = 10 * 1024 * 1024
# The upload workloads: POSTs of a small JSON body and of a 10 MiB body from memory; nginx answers
# each with a 2-byte body once it has read the whole request body (NGINX_CONF, /upload).
POST_SIZE = 256
POST_TYPE = "application/json"
UPLOAD_SIZE = LARGE_SIZE
UPLOAD_TYPE = "application/octet-stream"
UPLOAD_ANSWER = b"ok"
BORROWED = "c-rq-threaded-borrowed"  # the upload workloads only
POST_ARGS = {"post": [str(POST_SIZE), POST_TYPE], "upload": [str(UPLOAD_SIZE), UPLOAD_TYPE]}
REFERENCE = "c-curl"


def log(message):
    sys.stderr.write(f"bench: {message}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------------


class Client:
    def __init__(self, key, label, argv, env=None, required=False, max_n=None, note=None, posts=False):
        self.key = key
        self.label = label
        self.argv = argv  # (kind, url, n, k) -> list of arguments
        self.posts = posts  # runs the upload workloads (kinds "post" and "upload": POST_ARGS); "only": no other
        self.env = env or {}
        self.required = required  # our own clients: unavailable is a failure, not a skip
        self.max_n = max_n  # {"small": n, "large": n}: a smaller N for a slow client
        self.note = note
        self.skip_reason = None

    def runs(self, kind):
        """Whether this client runs workloads of this kind."""
        return bool(self.posts) if kind in POST_ARGS else self.posts != "only"

    def n_for(self, kind, n):
        if self.max_n and kind in self.max_n:
            return min(n, self.max_n[kind])
        return n


def make_clients(args, build):
    py = args.python
    lib = os.path.join(args.libdir, "librequestqueue.so")
    py_env = {"REQUESTQUEUE_LIBRARY": lib,
              "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "bindings", "python", "src"), CLIENTS_DIR])}
    rb_env = {"REQUESTQUEUE_LIBRARY": lib}
    rb_lib = os.path.join(ROOT, "bindings", "ruby", "lib")

    def script(interpreter, name, *extra):
        return lambda kind, url, n, k: [interpreter, *extra, os.path.join(CLIENTS_DIR, name), kind, url, str(n), str(k)]

    us_max = {"small": args.urlsession_n}

    def rq_client(mode, *shape):
        return lambda kind, url, n, k: ([os.path.join(build, "rq_client"), mode, url, str(n), str(k), *shape]
                                        + (["stream"] if kind == "large" else [])
                                        + (["post", *POST_ARGS[kind]] if kind in POST_ARGS else []))

    clients = [
        Client("c-curl", "C on libcurl multi (reference)",
               lambda kind, url, n, k: [os.path.join(build, "curl_multi"), url, str(n), str(k)]
               + (["--post", *POST_ARGS[kind]] if kind in POST_ARGS else []), required=True, posts=True),
        Client("c-rq-threaded", "librequestqueue from C, threaded delivery", rq_client("threaded"), required=True,
               posts=True),
        Client("c-rq-dispatch", "librequestqueue from C, dispatch delivery (poll loop)", rq_client("dispatch"),
               required=True, posts=True),
        Client("c-rq-threaded-refill", "librequestqueue from C, threaded, refill from the completion",
               rq_client("threaded", "refill"), required=True),
        Client("c-rq-dispatch-refill", "librequestqueue from C, dispatch, refill from the completion",
               rq_client("dispatch", "refill"), required=True),
        Client("c-rq-inline", "librequestqueue from C, inline delivery (callbacks on the engine thread)",
               rq_client("inline"), posts=True),
        Client("c-rq-inline-refill", "librequestqueue from C, inline, refill from the completion",
               rq_client("inline", "refill")),
        Client(BORROWED, "librequestqueue from C, threaded, body borrowed (`rq_request_set_body_borrowed`)",
               lambda kind, url, n, k: rq_client("threaded")(kind, url, n, k) + ["borrowed"], posts="only"),
        Client("py-rq", "Python binding, Queue", script(py, "py_requestqueue.py"), env=py_env, required=True),
        Client("py-rq-async", "Python binding, AsyncQueue (asyncio)", script(py, "py_requestqueue_async.py"),
               env=py_env),
        Client("py-pycurl", "Python pycurl CurlMulti", script(py, "py_pycurl.py"), env={"PYTHONPATH": CLIENTS_DIR}),
        Client("py-aiohttp", "Python aiohttp", script(py, "py_aiohttp.py"), env={"PYTHONPATH": CLIENTS_DIR}),
        Client("rb-rq", "Ruby binding", script("ruby", "rb_requestqueue.rb", "-I", rb_lib), env=rb_env),
        Client("rb-typhoeus", "Ruby Typhoeus Hydra", script("ruby", "rb_typhoeus.rb")),
        Client("swift-urlsession", "Swift URLSession (FoundationNetworking)",
               lambda kind, url, n, k: [os.path.join(build, "urlsession"), kind, url, str(n), str(k)],
               max_n=us_max,
               note=f"Swift URLSession runs {args.urlsession_n:,} small requests per run instead of "
                    f"{args.small_n:,} (it is slow by design: about 2.5k requests/s at any K); its "
                    "figures are per request or per second, so they compare all the same."),
    ]
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c.key for c in clients}
        if unknown:
            raise SystemExit(f"bench: unknown client(s) {', '.join(sorted(unknown))}; known: "
                             + ", ".join(c.key for c in clients))
        wanted.add(REFERENCE)
        clients = [c for c in clients if c.key in wanted]
    return clients


# --------------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------------


def run_quiet(argv, what, **kwargs):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({shlex.join(argv)}):\n{result.stdout.strip()}")
    return result.stdout


def build_clients(args, build, clients):
    cc = os.environ.get("CC", "cc")
    cflags = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"]
    curl = ["-lcurl"]
    if shutil.which("pkg-config"):
        try:
            curl = run_quiet(["pkg-config", "--libs", "libcurl"], "pkg-config").split() or curl
        except RuntimeError:
            pass
    rq = ["-I", os.path.join(ROOT, "include"), "-L", args.libdir, "-lrequestqueue", "-Wl,-rpath," + args.libdir]
    src = lambda name: os.path.join(CLIENTS_DIR, name)  # noqa: E731
    global MEASURE
    MEASURE = os.path.join(build, "measure")
    run_quiet([cc, *cflags, "-o", MEASURE, src("measure.c")], "building measure")
    run_quiet([cc, *cflags, "-o", os.path.join(build, "curl_multi"), src("curl_multi.c"), *curl], "building curl_multi")
    run_quiet([cc, *cflags, "-o", os.path.join(build, "rq_client"), src("rq_client.c"), *rq], "building rq_client")
    run_quiet([cc, *cflags, "-o", os.path.join(build, "queue_ops"), src("queue_ops.c"), *rq], "building queue_ops")
    for client in clients:
        if client.key == "swift-urlsession":
            swiftc = args.swiftc or shutil.which("swiftc")
            if not swiftc:
                client.skip_reason = "swiftc not found (Swift toolchain missing)"
                continue
            try:
                run_quiet([swiftc, "-O", "-o", os.path.join(build, "urlsession"), src("urlsession.swift")],
                          "building urlsession", cwd=build)
            except RuntimeError as error:
                client.skip_reason = "could not build: " + str(error).splitlines()[-1][:160]


# --------------------------------------------------------------------------------------------------
# nginx
# --------------------------------------------------------------------------------------------------

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 300s;
    keepalive_requests 10000000;
    default_type application/octet-stream;
    client_body_temp_path {tmp}/temp/body;
    proxy_temp_path {tmp}/temp/proxy;
    fastcgi_temp_path {tmp}/temp/fastcgi;
    uwsgi_temp_path {tmp}/temp/uwsgi;
    scgi_temp_path {tmp}/temp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {tmp}/www;
        # POSTs (the upload workloads): the mirror module reads the whole body (in memory, up to
        # 16 MiB) before the content phase, so the answer comes only after the last byte arrived
        # (`return` alone would answer first and discard the body afterwards), and answers
        # "Expect: 100-continue". The content phase finds no file and the 404 becomes "200 ok".
        location = /upload {{
            client_max_body_size 0;
            client_body_buffer_size 16m;
            mirror /_sink;
            mirror_request_body on;
            error_page 404 405 =200 @ok;
        }}
        location = /_sink {{ internal; return 204; }}
        location @ok {{ return 200 "ok"; }}
    }}
}}
"""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, tmp, binary):
        self.tmp = tmp
        self.binary = binary
        self.proc = None
        self.port = None
        os.chmod(tmp, 0o755)  # the worker runs as an unprivileged user when we are root
        www = os.path.join(tmp, "www")
        os.makedirs(www, mode=0o755, exist_ok=True)
        os.makedirs(os.path.join(tmp, "temp"), exist_ok=True)
        with open(os.path.join(www, "small.bin"), "wb") as f:
            f.write(os.urandom(SMALL_SIZE))
        with open(os.path.join(www, "large.bin"), "wb") as f:
            f.write(os.urandom(LARGE_SIZE))
        for name in ("small.bin", "large.bin"):
            os.chmod(os.path.join(www, name), 0o644)

    def start(self):
        last_error = ""
        for _ in range(5):
            port = free_port()
            conf = os.path.join(self.tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(tmp=self.tmp, port=port))
            error_log = os.path.join(self.tmp, "startup.log")
            with open(error_log, "w") as err:
                self.proc = subprocess.Popen([self.binary, "-p", self.tmp, "-c", conf, "-e", error_log],
                                             stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                             start_new_session=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                except OSError:
                    time.sleep(0.05)
                    continue
                self.port = port
                self.check()
                return
            self.stop()
            with open(error_log) as f:
                last_error = f.read().strip()
        raise RuntimeError(f"nginx did not start: {last_error}")

    def url(self, kind):
        return f"http://127.0.0.1:{self.port}/{kind}.bin"

    def upload_url(self):
        """Where POSTs go: nginx reads the whole body, then answers 200 with UPLOAD_ANSWER."""
        return f"http://127.0.0.1:{self.port}/upload"

    def check(self):
        for kind, size in (("small", SMALL_SIZE), ("large", LARGE_SIZE)):
            try:
                with urllib.request.urlopen(self.url(kind), timeout=10) as response:
                    got = len(response.read())
            except OSError as error:
                raise RuntimeError(f"nginx does not serve {self.url(kind)}: {error} (the files are in "
                                   f"{self.tmp}/www; its worker must be able to read them)") from None
            if got != size:
                raise RuntimeError(f"nginx served {got} bytes for {kind}.bin, expected {size}")
        try:
            request = urllib.request.Request(self.upload_url(), data=b"{}", method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = response.read()
        except OSError as error:
            raise RuntimeError(f"nginx does not take POSTs at {self.upload_url()}: {error}") from None
        if answer != UPLOAD_ANSWER:
            raise RuntimeError(f"nginx answered {answer[:40]!r} to a POST, expected {UPLOAD_ANSWER!r}")

    def pids(self):
        """The master's pid and its workers'."""
        if self.proc is None:
            return []
        pids = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return pids

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful shutdown of master and worker
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


# --------------------------------------------------------------------------------------------------
# Running one client
# --------------------------------------------------------------------------------------------------


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(extra)
    return env


MEASURE = None  # path of the built measure program (set by build_clients)
TICK = os.sysconf("SC_CLK_TCK")


def busy_cpu_seconds():
    """CPU seconds the whole machine spent busy since boot (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / TICK


def process_cpu_seconds(pids):
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


class Background:
    """How busy the machine was with other work during the runs: busy CPU time of the whole
    machine, less the clients' own (measured by wait4), nginx's and this driver's."""

    def __init__(self, server_pids):
        self.server_pids = server_pids
        self.other = 0.0
        self.capacity = 0.0

    def sample(self):
        return (busy_cpu_seconds(), process_cpu_seconds(self.server_pids) + process_cpu_seconds([os.getpid()]),
                time.monotonic())

    def account(self, before, client_cpu):
        after = self.sample()
        busy = after[0] - before[0]
        ours = after[1] - before[1] + client_cpu
        self.other += max(0.0, busy - ours)
        self.capacity += (after[2] - before[2]) * (os.cpu_count() or 1)

    def share(self):
        return self.other / self.capacity if self.capacity else None


BACKGROUND = None


def run_process(argv, env, timeout, tmp):
    """Runs argv under `measure`; returns (exit code, stdout, stderr, usage dict, timed out), where
    usage has maxrss_kib, user and sys of the command's process."""
    out_path = os.path.join(tmp, "client.out")
    err_path = os.path.join(tmp, "client.err")
    usage_path = os.path.join(tmp, "client.usage")
    if os.path.exists(usage_path):
        os.unlink(usage_path)
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([MEASURE, usage_path, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env, cwd=tmp, start_new_session=True)
    try:
        proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the process group we started: measure and the client
        except ProcessLookupError:
            pass
        proc.wait()
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    usage = {"maxrss_kib": 0, "user": 0.0, "sys": 0.0}
    try:
        with open(usage_path) as f:
            usage = json.load(f)
    except (OSError, ValueError):
        pass
    return proc.returncode, stdout, stderr, usage, timed_out


def run_client(client, kind, url, n, k, size, timeout, tmp):
    """One run. Returns a dict of figures, or raises RuntimeError with the reason it failed."""
    argv = client.argv(kind, url, n, k)
    before = BACKGROUND.sample() if BACKGROUND else None
    code, stdout, stderr, usage, timed_out = run_process(argv, clean_env(client.env), timeout, tmp)
    if before:
        BACKGROUND.account(before, usage["user"] + usage["sys"])
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    # Ruby prints the error on its first line, Python on its last: keep both.
    tail = (lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}" if lines else "")[:400]
    if timed_out:
        raise RuntimeError(f"no result within {timeout:.0f} s (killed). {tail}")
    result = None
    for line in reversed(stdout.strip().splitlines()):
        try:
            result = json.loads(line)
            break
        except ValueError:
            continue
    if result is None:
        raise RuntimeError(f"exit code {code}, no result line. {tail}")
    if result["n"] != n or result["ok"] != n or result["bytes"] != n * size:
        raise RuntimeError(f"wrong result: {result['ok']} of {n} requests succeeded "
                           f"({result['n']} completed), {result['bytes']} bytes instead of {n * size}. {tail}")
    if code != 0:
        raise RuntimeError(f"exit code {code} after a correct result. {tail}")
    wall, cpu = result["wall"], result["cpu"]
    figures = {
        "n": n, "wall": wall, "cpu": cpu,
        "rps": n / wall,
        "cpu_us": cpu / n * 1e6,
        "rss_mib": usage["maxrss_kib"] / 1024.0,
        "process_cpu": usage["user"] + usage["sys"],
    }
    if kind == "large":
        figures["streamed"] = bool(result.get("streamed"))
        figures["mbps"] = result["bytes"] / wall / 1e6
        figures["cpu_ms_per_body"] = cpu / n * 1e3
    if kind == "upload":
        figures["mbps"] = n * UPLOAD_SIZE / wall / 1e6
        figures["cpu_ms_per_body"] = cpu / n * 1e3
    return figures


# --------------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------------


class Results:
    def __init__(self):
        self.runs = {}  # (client, workload) -> [figures]
        self.failures = {}  # (client, workload) -> [reason]
        self.costs = {}  # (client, k) -> {"instructions": per request, "syscalls": {name: per request}}
        self.cost_notes = []  # why a part of the cost measurement did not run
        self.body_costs = {}  # (client, body) -> {"instructions": per 10 MiB body, "copy": of which memcpy}
        # (client, "post") -> {"instructions", "copy", "syscalls"} per small POST at K=64;
        # (client, "upload") -> {"instructions", "copy"} per 10 MiB upload at K=1
        self.upload_costs = {}
        self.syscall_tool = None  # "perf" or "strace": what counted the system calls
        self.passed = 0
        self.failed = 0

    def add(self, key, figures):
        self.runs.setdefault(key, []).append(figures)
        self.passed += 1

    def fail(self, key, reason):
        self.failures.setdefault(key, []).append(reason)
        self.failed += 1

    def median(self, key, metric):
        values = [r[metric] for r in self.runs.get(key, []) if metric in r]
        return statistics.median(values) if values else None


def probe(clients, nginx, tmp, results):
    """A tiny run of each client; one that cannot run is skipped (ours: a failure)."""
    for client in clients:
        if client.skip_reason:
            continue
        try:
            if client.runs("small"):
                run_client(client, "small", nginx.url("small"), 4, 2, SMALL_SIZE, 120, tmp)
            else:
                run_client(client, "post", nginx.upload_url(), 4, 2, len(UPLOAD_ANSWER), 120, tmp)
        except RuntimeError as error:
            client.skip_reason = str(error)
        if client.skip_reason:
            log(f"{client.key}: unavailable: {client.skip_reason}")
            if client.required:
                results.fail((client.key, "probe"), client.skip_reason)


def wrk_ceiling(url, connections, seconds):
    if not shutil.which("wrk"):
        return None
    try:
        out = run_quiet(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url], "wrk")
    except RuntimeError:
        return None
    match = re.search(r"Requests/sec:\s*([\d.]+)", out)
    return float(match.group(1)) if match else None


def run_matrix(args, clients, nginx, tmp, results):
    workloads = ([("small", k) for k in args.small_k] + [("large", k) for k in args.large_k]
                 + [("post", k) for k in args.post_k] + [("upload", k) for k in args.upload_k])
    active = [c for c in clients if not c.skip_reason]
    total = args.reps * sum(len([c for c in active if c.runs(kind)]) for kind, _ in workloads)
    done = 0
    counts = {"small": args.small_n, "large": args.large_n, "post": args.post_n, "upload": args.upload_n}
    sizes = {"small": SMALL_SIZE, "large": LARGE_SIZE, "post": len(UPLOAD_ANSWER), "upload": len(UPLOAD_ANSWER)}
    for rep in range(args.reps):
        for kind, k in workloads:
            these = [c for c in active if c.runs(kind)]
            shift = (rep * 3 + k) % len(these)  # a different order in each repetition and workload
            order = these[shift:] + these[:shift]
            for client in order:
                n = client.n_for(kind, counts[kind])
                size = sizes[kind]
                url = nginx.upload_url() if kind in POST_ARGS else nginx.url(kind)
                key = (client.key, f"{kind}-{k}")
                done += 1
                try:
                    figures = run_client(client, kind, url, n, k, size, args.timeout, tmp)
                    results.add(key, figures)
                    if kind in ("small", "post"):
                        summary = f"{figures['rps']:,.0f} req/s, {figures['cpu_us']:.1f} us/req"
                    else:
                        summary = f"{figures['mbps']:,.0f} MB/s"
                    log(f"[{done}/{total}] rep {rep + 1} {kind} K={k} {client.key}: {summary}, "
                        f"{figures['rss_mib']:.1f} MiB")
                except RuntimeError as error:
                    results.fail(key, str(error))
                    log(f"[{done}/{total}] rep {rep + 1} {kind} K={k} {client.key}: FAILED: {error}")


def run_queue_ops(args, build, url, tmp, results):
    binary = os.path.join(build, "queue_ops")
    for rep in range(args.reps):
        for n in args.queue_n:
            key = ("queue", n)
            code, stdout, stderr, usage, timed_out = run_process([binary, str(n), url], clean_env({}),
                                                                 args.timeout + 150, tmp)
            try:
                if timed_out:
                    raise RuntimeError("killed at its time limit")
                if code != 0:
                    raise RuntimeError(f"exit code {code}: {stderr.strip()[-300:]}")
                figures = json.loads(stdout.strip().splitlines()[-1])
                figures["rss_mib"] = usage["maxrss_kib"] / 1024.0
                results.add(key, figures)
                log(f"queue rep {rep + 1} n={n:,}: add {figures['add_ns']:.0f} ns, cancel "
                    f"{figures['cancel_ns']:.0f} ns, {figures['bytes_per_waiting']:.0f} B/waiting")
            except (RuntimeError, ValueError, IndexError) as error:
                results.fail(key, str(error))
                log(f"queue n={n}: FAILED: {error}")


# --------------------------------------------------------------------------------------------------
# Cost per request: instructions (callgrind) and system calls (strace); bench/profile uses these too
# --------------------------------------------------------------------------------------------------


def callgrind(argv, out, separate):
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if separate:
        cmd.append("--separate-threads=yes")
    subprocess.run(cmd + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def total(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def strace_counts(argv, tmp):
    """System calls of one run by name, from strace -f -c (it stops the process at every call,
    which slows it and can change how much work each poll finds ready)."""
    out = os.path.join(tmp, "strace.txt")
    subprocess.run(["strace", "-f", "-c", "-o", out] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    counts = {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
    return counts


# The calls counted one by one with perf; the others are counted together as "other".
PERF_SYSCALLS = ("poll", "ppoll", "epoll_wait", "futex", "write", "sendto", "read", "recvfrom")


def perf_works():
    """Whether perf can count system-call tracepoints here (it needs tracefs and the permission)."""
    if not shutil.which("perf"):
        return False
    result = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return result.returncode == 0 and "raw_syscalls" in result.stderr and "<not" not in result.stderr


def perf_counts(argv, tmp):
    """System calls of one run, every thread, from the kernel's tracepoints (perf stat): the
    process runs at full speed."""
    out = os.path.join(tmp, "perf.txt")
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}" for name in PERF_SYSCALLS]
    subprocess.run(["perf", "stat", "-x,", "-o", out, "-e", ",".join(events), "--"] + argv,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    found = {}
    with open(out) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 3 and parts[0].isdigit():
                found[parts[2]] = int(parts[0])
    counts = {name: found.get(f"syscalls:sys_enter_{name}", 0) for name in PERF_SYSCALLS}
    counts["other"] = found.get("raw_syscalls:sys_enter", 0) - sum(counts.values())
    return counts


def instructions_per_request(argv, n1, n2, tmp, tag):
    """Instructions per request of the whole process (every thread): callgrind at N=n1 and N=n2,
    the difference over n2 - n1. argv(n) gives the command for N=n."""
    counts = []
    for n in (n1, n2):
        out = os.path.join(tmp, f"{tag}.{n}")
        callgrind(argv(n), out, False)
        counts.append(total(out))
        os.unlink(out)
    return (counts[1] - counts[0]) / (n2 - n1)


def syscalls_per_request(argv, n1, n2, tmp, tool="strace", reps=1):
    """System calls per request by name: counted at N=n1 and N=n2 (the median of `reps` runs of
    each), the difference over n2 - n1. tool: "strace" or "perf"."""
    count = perf_counts if tool == "perf" else strace_counts
    a = [count(argv(n1), tmp) for _ in range(reps)]
    b = [count(argv(n2), tmp) for _ in range(reps)]
    calls = set().union(*a, *b)
    median = lambda runs, call: statistics.median(r.get(call, 0) for r in runs)  # noqa: E731
    return {call: (median(b, call) - median(a, call)) / (n2 - n1) for call in calls}



def copy_instructions(path):
    """Instructions counted in memcpy/memmove (exclusive), from a callgrind file. glibc copies
    blocks of this size with `rep movsb`, which callgrind counts as one instruction per byte."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    count = 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if m and re.search(r"__mem(cpy|move)", m.group(2)):
            count += int(m.group(1).replace(",", ""))
    return count


# How each C client's large bodies end up: the reference counts and discards them in its write
# callback; the library's client streams them to a body callback, collects them whole into the
# response, or has the library write them to a file.
BODY_COST_CLIENTS = (("c-curl", "discarded", []), ("c-rq-threaded", "streamed", ["stream"]),
                     ("c-rq-dispatch", "streamed", ["stream"]), ("c-rq-inline", "streamed", ["stream"]),
                     ("c-rq-threaded", "whole", []),
                     ("c-rq-dispatch", "whole", []), ("c-rq-threaded", "file", ["file"]),
                     ("c-rq-dispatch", "file", ["file"]))
# The smoke run's subsets (--quick): each delivery mode, both client shapes and each body sink once.
QUICK_BODY_COST_CLIENTS = (("c-curl", "discarded"), ("c-rq-threaded", "streamed"), ("c-rq-inline", "streamed"),
                           ("c-rq-dispatch", "file"))
QUICK_COST_CLIENTS = ("c-curl", "c-rq-threaded", "c-rq-dispatch-refill", "c-rq-inline")


def run_body_costs(args, build, nginx, tmp, results):
    """Instructions per 10 MiB body (callgrind, every thread) at K = 1: each C client at two
    values of N, the difference over the difference of N; and how many of them memcpy took."""
    if not shutil.which("valgrind"):
        return
    n1, n2 = args.body_cost_n
    url = nginx.url("large")
    for key, body, extra in BODY_COST_CLIENTS:
        if key != REFERENCE and args.only and key not in args.only.split(","):
            continue
        if args.quick and (key, body) not in QUICK_BODY_COST_CLIENTS:
            continue
        if extra == ["file"]:
            extra = ["file", os.path.join(tmp, "body-cost.bin")]
        if key == REFERENCE:
            argv = lambda n: [os.path.join(build, "curl_multi"), url, str(n), "1"]  # noqa: E731
        else:
            mode = key[len("c-rq-"):]
            argv = lambda n: [os.path.join(build, "rq_client"), mode, url, str(n), "1", *extra]  # noqa: E731
        try:
            counts = []
            for n in (n1, n2):
                out = os.path.join(tmp, f"body-{key}-{body}.{n}")
                callgrind(argv(n), out, False)
                counts.append((total(out), copy_instructions(out)))
                os.unlink(out)
        except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
            results.fail((key, f"body-{body}"), f"body cost measurement failed: {error}")
            log(f"body cost {key} {body}: FAILED: {error}")
            continue
        per = n2 - n1
        cost = {"instructions": (counts[1][0] - counts[0][0]) / per, "copy": (counts[1][1] - counts[0][1]) / per}
        results.body_costs[(key, body)] = cost
        results.passed += 1
        log(f"body cost {key} {body}: {cost['instructions']:,.0f} instructions per body, "
            f"{cost['copy']:,.0f} in memcpy")


UPLOAD_COST_CLIENTS = ("c-curl", "c-rq-threaded", "c-rq-dispatch", "c-rq-inline", BORROWED)
UPLOAD_COST_K = {"post": 64, "upload": 1}


def run_upload_costs(args, clients, nginx, tmp, results):
    """The upload workloads' costs, as those of GETs and of 10 MiB downloads: instructions
    (callgrind) and system calls per small POST at K=64 over args.cost_n requests, and instructions
    (and of which memcpy) per 10 MiB upload at K=1 over args.body_cost_n uploads."""
    callgrind_ok = bool(shutil.which("valgrind"))
    syscall_tool = results.syscall_tool
    if not callgrind_ok and syscall_tool is None:
        return
    for kind, (n1, n2) in (("post", args.cost_n), ("upload", args.body_cost_n)):
        k = UPLOAD_COST_K[kind]
        for client in clients:
            if client.key not in UPLOAD_COST_CLIENTS or client.skip_reason:
                continue
            if args.quick and client.key not in (REFERENCE, "c-rq-threaded"):
                continue  # (the smoke run: one delivery mode, one body setter)
            argv = lambda n: client.argv(kind, nginx.upload_url(), n, k)  # noqa: E731
            cost = {}
            try:
                if callgrind_ok:
                    counts = []
                    for n in (n1, n2):
                        out = os.path.join(tmp, f"{kind}-{client.key}.{n}")
                        callgrind(argv(n), out, False)
                        counts.append((total(out), copy_instructions(out)))
                        os.unlink(out)
                    cost["instructions"] = (counts[1][0] - counts[0][0]) / (n2 - n1)
                    cost["copy"] = (counts[1][1] - counts[0][1]) / (n2 - n1)
                if syscall_tool and kind == "post":
                    cost["syscalls"] = syscalls_per_request(argv, n1, n2, tmp, syscall_tool,
                                                            reps=5 if syscall_tool == "perf" else 1)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
                results.fail((client.key, f"{kind}-cost"), f"cost measurement failed: {error}")
                log(f"{kind} cost {client.key}: FAILED: {error}")
                continue
            results.upload_costs[(client.key, kind)] = cost
            results.passed += 1
            calls = sum(cost.get("syscalls", {}).values())
            log(f"{kind} cost {client.key}: {cost.get('instructions', 0):,.0f} instructions "
                f"({cost.get('copy', 0):,.0f} in memcpy), {calls:.2f} system calls per request")


COST_CLIENTS = ("c-curl", "c-rq-threaded", "c-rq-dispatch", "c-rq-threaded-refill", "c-rq-dispatch-refill",
                "c-rq-inline", "c-rq-inline-refill")
# The C reference sending the two header lines librequestqueue sends by default: a row of the cost
# table only (the targets compare with the unchanged reference).
REFERENCE_WITH_HEADERS = "c-curl-headers"
REFERENCE_WITH_HEADERS_LABEL = "C reference sending the library's default header lines (User-Agent, Accept-Encoding)"


def library_header_lines(libdir):
    """The User-Agent and Accept-Encoding lines librequestqueue sends by default (Transport.swift:
    defaultUserAgent, acceptEncodingHeader), made as it makes them, from the loaded libraries."""
    import ctypes

    class VersionInfo(ctypes.Structure):
        _fields_ = [("age", ctypes.c_int), ("version", ctypes.c_char_p), ("version_num", ctypes.c_uint),
                    ("host", ctypes.c_char_p), ("features", ctypes.c_int)]

    curl = ctypes.CDLL("libcurl.so.4")
    curl.curl_version_info.restype = ctypes.POINTER(VersionInfo)
    info = curl.curl_version_info(9).contents  # CURLVERSION_TENTH
    lib = ctypes.CDLL(os.path.join(libdir, "librequestqueue.so"))
    lib.rq_version_string.restype = ctypes.c_char_p
    agent = f"librequestqueue/{lib.rq_version_string().decode()} libcurl/{info.version.decode()}"
    codings = (["deflate", "gzip"] if info.features & (1 << 3) else []) + (["br"] if info.features & (1 << 23) else []) \
        + (["zstd"] if info.features & (1 << 26) else [])
    return [f"User-Agent: {agent}", "Accept-Encoding: " + (", ".join(codings) or "identity")]


def run_costs(args, clients, nginx, tmp, results):
    """Instructions per request (callgrind) and system calls per request (strace -f -c) of the C
    clients, at two values of N: the difference over the difference of N is one request's cost,
    with start-up and teardown cancelled out. Both counts are load-independent, unlike times."""
    callgrind_ok = bool(shutil.which("valgrind"))
    syscall_tool = "perf" if perf_works() else "strace" if shutil.which("strace") else None
    results.syscall_tool = syscall_tool
    if not callgrind_ok:
        results.cost_notes.append("valgrind is not installed: no instruction counts")
    if syscall_tool is None:
        results.cost_notes.append("neither perf (with tracepoints) nor strace works here: no system-call counts")
    if not callgrind_ok and syscall_tool is None:
        return
    n1, n2 = args.cost_n
    reference = next(c for c in clients if c.key == REFERENCE)
    with_headers = Client(REFERENCE_WITH_HEADERS, REFERENCE_WITH_HEADERS_LABEL,
                          lambda kind, url, n, k: reference.argv(kind, url, n, k) + library_header_lines(args.libdir))
    for k in args.cost_k:
        for client in clients + [with_headers]:
            if client.key not in COST_CLIENTS + (REFERENCE_WITH_HEADERS,) or client.skip_reason:
                continue
            if args.quick and client.key not in QUICK_COST_CLIENTS:
                continue
            key = (client.key, f"cost-{k}")
            argv = lambda n: client.argv("small", nginx.url("small"), n, k)  # noqa: E731
            cost = {}
            try:
                if callgrind_ok:
                    cost["instructions"] = instructions_per_request(argv, n1, n2, tmp, client.key)
                if syscall_tool:
                    cost["syscalls"] = syscalls_per_request(argv, n1, n2, tmp, syscall_tool,
                                                            reps=5 if syscall_tool == "perf" else 1)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
                results.fail(key, f"cost measurement failed: {error}")
                log(f"cost K={k} {client.key}: FAILED: {error}")
                continue
            results.costs[(client.key, k)] = cost
            results.passed += 1
            calls = sum(cost.get("syscalls", {}).values())
            log(f"cost K={k} {client.key}: {cost.get('instructions', 0):,.0f} instructions, "
                f"{calls:.2f} system calls per request")


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------


def fmt(value, digits=0):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ratio(value, ref):
    if value is None or not ref:
        return "–"
    return f"{value / ref:.2f}×"


def machine_info():
    cores = os.cpu_count()
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    os_name = "Linux"
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip().split("=", 1) for line in f if "=" in line)
        os_name = fields.get("PRETTY_NAME", os_name).strip('"')
    except OSError:
        pass
    if os.path.exists("/etc/debian_version"):
        with open("/etc/debian_version") as f:
            os_name += f" ({f.read().strip()})"
    return cores, model, mem, os_name, platform.release()


def version_of(argv, pattern=None):
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = out.strip()
    if pattern:
        match = re.search(pattern, out)
        return match.group(1) if match else None
    return out.splitlines()[0] if out else None


def linkage(libdir):
    """How the measured library links the Swift runtime: the release artifacts link it in."""
    try:
        dynamic = subprocess.run(["readelf", "-d", os.path.join(libdir, "librequestqueue.so")],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    except OSError:
        return "Swift runtime linkage unknown"
    if "libswiftCore" in dynamic:
        return "Swift runtime loaded from the toolchain"
    return "Swift runtime linked in, as released"


def software(args, clients):
    keys = {c.key for c in clients if not c.skip_reason}
    items = []
    curl = version_of(["curl-config", "--version"], r"libcurl ([\d.]+)")
    items.append(f"libcurl {curl or '?'}")
    lib_version = version_of([args.python, "-c", "import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); "
                              "l.rq_version_string.restype=ctypes.c_char_p; print(l.rq_version_string().decode())",
                              os.path.join(args.libdir, "librequestqueue.so")])
    commit = version_of(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = version_of(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
    items.append(f"librequestqueue {lib_version or '?'} (release build, {linkage(args.libdir)}"
                 + (f", commit {commit}{' with local changes' if dirty else ''}" if commit else "") + ")")
    items.append("nginx " + (version_of(["nginx", "-v"], r"nginx/([\d.]+)") or "?"))
    py_version = version_of([args.python, "-c", "import platform; print(platform.python_version())"])
    py_mods = [f"Python {py_version or '?'}"]
    if keys & {"py-rq", "py-rq-async"}:
        py_mods.append("cffi " + (version_of([args.python, "-c", "import cffi; print(cffi.__version__)"]) or "?"))
    if "py-pycurl" in keys:
        py_mods.append("pycurl " + (version_of([args.python, "-c", "import pycurl; print(pycurl.version)"],
                                               r"PycURL/([\d.]+)") or "?")
                       + " (built against libcurl "
                       + (version_of([args.python, "-c", "import pycurl; print(pycurl.version)"],
                                     r"libcurl/([\d.]+)") or "?") + ")")
    if "py-aiohttp" in keys:
        py_mods.append("aiohttp " + (version_of([args.python, "-c", "import aiohttp; print(aiohttp.__version__)"]) or "?"))
    items.append(", ".join(py_mods))
    if keys & {"rb-rq", "rb-typhoeus"}:
        rb = [f"Ruby {version_of(['ruby', '-e', 'print RUBY_VERSION']) or '?'}"]
        if "rb-rq" in keys:
            rb.append("ffi " + (version_of(["ruby", "-e", "require 'ffi'; print FFI::VERSION"]) or "?"))
        if "rb-typhoeus" in keys:
            rb.append("typhoeus " + (version_of(["ruby", "-e", "require 'typhoeus'; print Typhoeus::VERSION"]) or "?"))
        items.append(", ".join(rb))
    if "swift-urlsession" in keys:
        swiftc = args.swiftc or shutil.which("swiftc")
        items.append("Swift " + (version_of([swiftc, "--version"], r"Swift version ([\w.\-]+)") or "?"))
    return items


def cell_failures(results, key):
    failures = results.failures.get(key)
    return f" ({len(failures)} failed)" if failures else ""


def report(args, clients, results, meta):
    cores, model, mem, os_name, kernel = machine_info()
    lines = []
    add = lines.append
    add("# Benchmarks")
    add("")
    add(f"Generated by `{meta['command']}` on {meta['date']} (UTC), in {meta['duration'] / 60:.1f} minutes. "
        "Reproduce with one command from a checkout: `bench/run` (it installs what it needs; "
        "`bench/run --quick` is the short smoke run CI uses). How it works: [bench/README.md](bench/README.md).")
    add("")
    add(f"- **Machine**: {cores} cores, {model}, {fmt(mem, 0)} GiB RAM, {os_name}, Linux {kernel}. "
        f"Load average (1 min) {meta['load_start']:.2f} at the start, {meta['load_end']:.2f} at the end; "
        + (f"other processes used {meta['background']:.0%} of the machine's CPU during the client runs "
           "(busy time from /proc/stat less the clients', nginx's and the driver's own)"
           if meta.get("background") is not None else "")
        + ". The clients and nginx share the machine's cores: figures from a busy machine are lower and "
        "noisier, while the ratios, measured side by side, hold better.")
    server = "nginx on 127.0.0.1, one worker, keep-alive, access_log off, sendfile"
    if meta.get("wrk64"):
        server += (f"; its ceiling measured with wrk (1 thread): {fmt(meta['wrk64'])} requests/s over 64 "
                   f"connections, {fmt(meta['wrk1'])} over 1, for the 100-byte file")
    add(f"- **Server**: {server}.")
    add("- **Software**: " + "; ".join(software(args, clients)) + ".")
    add(f"- **Method**: {args.reps} repetition{'s' if args.reps != 1 else ''}; in each, every client runs "
        "every workload once, in a rotated order (interleaved), and each figure is the **median** over the "
        "repetitions. Each run is a fresh process. Requests/s and MB/s are over the timed phase (from before the "
        "client creates its session, queue or multi handle until the last response completed); CPU is user+sys "
        "of the whole client process (every thread) over that phase, from getrusage(RUSAGE_SELF); peak RSS is the "
        "client process's maxrss (wait4). Every run is checked: N responses with status 200 and exactly N times "
        "the file's size in body bytes. **× C** is the ratio to the C reference in the same run: above 1 is "
        "faster for requests/s and MB/s, and costlier for CPU and memory.")
    add("")

    def small(key, k, metric):
        return results.median((key, f"small-{k}"), metric)

    def large(key, k, metric):
        return results.median((key, f"large-{k}"), metric)

    by_key = {c.key: c for c in clients}

    # Targets
    add("## Targets")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    targets = []

    def target(text, value, limit, higher_is_better, shown):
        if value is None:
            verdict = "not measured"
        else:
            met = value >= limit if higher_is_better else value <= limit
            verdict = "**met**" if met else "**missed**"
        targets.append((text, verdict))
        add(f"| {text} | {shown if value is not None else '–'} | {verdict} |")

    ref_body = results.body_costs.get((REFERENCE, "discarded"), {}).get("instructions")
    for key, name in (("c-rq-threaded", "threaded"), ("c-rq-dispatch", "dispatch"), ("c-rq-inline", "inline")):
        mine = results.body_costs.get((key, "streamed"), {}).get("instructions")
        if mine is None and key == "c-rq-inline":
            continue
        value = mine / ref_body if mine and ref_body else None
        target(f"C, {name}: instructions per 10 MiB streamed body within 2× of the C reference", value, 2.0, False,
               f"{fmt(mine)} vs {fmt(ref_body)} = {value:.2f}×" if value else "")
    for k in args.large_k:
        ref = large(REFERENCE, k, "mbps")
        for key, name in (("c-rq-threaded", "threaded"), ("c-rq-dispatch", "dispatch"), ("c-rq-inline", "inline")):
            if key not in by_key and key == "c-rq-inline":
                continue
            mine = large(key, k, "mbps") if key in by_key else None
            value = mine / ref if mine and ref else None
            target(f"C, {name}: MB/s of streamed 10 MiB bodies at K={k} at least 0.95× the C reference", value, 0.95,
                   True, f"{fmt(mine)} vs {fmt(ref)} = {value:.2f}×" if value else "")
    for key, name in (("c-rq-threaded", "threaded"), ("c-rq-dispatch", "dispatch"), ("c-rq-inline", "inline"),
                      (BORROWED, "threaded, body borrowed")):
        if key not in by_key:
            continue
        mine = results.upload_costs.get((key, "post"), {}).get("instructions")
        ref = results.upload_costs.get((REFERENCE, "post"), {}).get("instructions")
        value = mine / ref if mine and ref else None
        target(f"C, {name}: instructions per {POST_SIZE}-byte POST at K=64 within 1.10× of the C reference", value,
               1.10, False, f"{fmt(mine)} vs {fmt(ref)} = {value:.2f}×" if value else "")
        for k in args.upload_k:
            ref, mine = results.median((REFERENCE, f"upload-{k}"), "mbps"), results.median((key, f"upload-{k}"), "mbps")
            value = mine / ref if mine and ref else None
            target(f"C, {name}: MB/s of 10 MiB uploads at K={k} at least 0.95× the C reference", value, 0.95, True,
                   f"{fmt(mine)} vs {fmt(ref)} = {value:.2f}×" if value else "")
    k_cpu, k_rate = 64, 1
    for key, name in (("c-rq-threaded", "threaded"), ("c-rq-dispatch", "dispatch")):
        if key not in by_key:
            continue
        ref = small(REFERENCE, k_cpu, "cpu_us")
        mine = small(key, k_cpu, "cpu_us")
        value = mine / ref if mine and ref else None
        target(f"C, {name}: CPU per request at K={k_cpu} within 1.10× of the C reference", value, 1.10, False,
               f"{fmt(mine, 1)} µs vs {fmt(ref, 1)} µs = {value:.2f}×" if value else "")
        ref = small(REFERENCE, k_rate, "rps")
        mine = small(key, k_rate, "rps")
        value = mine / ref if mine and ref else None
        target(f"C, {name}: requests/s at K={k_rate} at least 0.95× the C reference", value, 0.95, True,
               f"{fmt(mine)} vs {fmt(ref)} = {value:.2f}×" if value else "")
    for key, name in (("c-rq-threaded-refill", "threaded"), ("c-rq-dispatch-refill", "dispatch"),
                      ("c-rq-inline-refill", "inline")):
        if key not in by_key:
            continue
        ref = small(REFERENCE, 1, "rps")
        mine = small(key, 1, "rps")
        value = mine / ref if mine and ref else None
        target(f"C refill, {name}: requests/s at K=1 at least 0.95× the C reference", value, 0.95, True,
               f"{fmt(mine)} vs {fmt(ref)} = {value:.2f}×" if value else "")
        ref = small(REFERENCE, 64, "cpu_us")
        mine = small(key, 64, "cpu_us")
        value = mine / ref if mine and ref else None
        target(f"C refill, {name}: CPU per request at K=64 within 1.15× of the C reference", value, 1.15, False,
               f"{fmt(mine, 1)} µs vs {fmt(ref, 1)} µs = {value:.2f}×" if value else "")
        # The refill clients hold what the reference holds (K requests); an up-front client also
        # holds its N waiting requests (the queue benchmark's bytes per waiting request).
        ref = small(REFERENCE, 64, "rss_mib")
        mine = small(key, 64, "rss_mib")
        value = mine / ref if mine and ref else None
        target(f"C refill, {name}: peak RSS at K=64 within 1.5× of the C reference", value, 1.5, False,
               f"{fmt(mine, 1)} MiB vs {fmt(ref, 1)} MiB = {value:.2f}×" if value else "")
    for k in args.cost_k:
        ref = results.costs.get((REFERENCE, k), {})
        for key in COST_CLIENTS[1:]:
            if key not in by_key:
                continue
            cost = results.costs.get((key, k), {})
            name = key[len("c-rq-"):].replace("-refill", ", refill") + ("" if "refill" in key else ", upfront")
            if k == 64:
                mine, theirs = cost.get("instructions"), ref.get("instructions")
                value = mine / theirs if mine and theirs else None
                target(f"C {name}: instructions per request at K={k} within 1.10× of the C reference", value, 1.10,
                       False, f"{fmt(mine)} vs {fmt(theirs)} = {value:.2f}×" if value else "")
            if "syscalls" in cost and "syscalls" in ref:
                mine, theirs = sum(cost["syscalls"].values()), sum(ref["syscalls"].values())
                value = mine - theirs
                target(f"C {name}: system calls per request at K={k} at most 1 more than the C reference", value,
                       1.0, False, f"{mine:.2f} vs {theirs:.2f} = {value:+.2f}")
    if "py-rq" in by_key:
        mine, other = small("py-rq", 64, "rps"), small("py-aiohttp", 64, "rps")
        value = mine / other if mine and other else None
        target("Python binding: requests/s at K=64 at least 4× aiohttp's", value, 4.0, True,
               f"{fmt(mine)} vs {fmt(other)} = {value:.2f}×" if value else "")
        mine, other = small("py-rq", 64, "rps"), small("py-pycurl", 64, "rps")
        value = mine / other if mine and other else None
        target("Python binding: requests/s at K=64 at least pycurl's", value, 1.0, True,
               f"{fmt(mine)} vs {fmt(other)} = {value:.2f}×" if value else "")
        mine, other = small("py-rq", 64, "cpu_us"), small("py-pycurl", 64, "cpu_us")
        value = mine / other if mine and other else None
        target("Python binding: CPU per request at K=64 within 1.5× of pycurl's", value, 1.5, False,
               f"{fmt(mine, 1)} µs vs {fmt(other, 1)} µs = {value:.2f}×" if value else "")
    if "rb-rq" in by_key:
        mine, other = small("rb-rq", 64, "rps"), small("rb-typhoeus", 64, "rps")
        value = mine / other if mine and other else None
        target("Ruby binding: requests/s at K=64 at least 3× Typhoeus'", value, 3.0, True,
               f"{fmt(mine)} vs {fmt(other)} = {value:.2f}×" if value else "")
    for n in args.queue_n:
        key = ("queue", n)
        for metric, text in (("add_ns", "add"), ("cancel_ns", "cancel")):
            value = results.median(key, metric)
            target(f"Queue with {n:,} waiting: at most 1 µs per {text}", value, 1000, False,
                   f"{fmt(value)} ns")
        value = results.median(key, "bytes_per_waiting")
        target(f"Queue with {n:,} waiting: under 1 KiB per waiting request", value, 1023.999, False,
               f"{fmt(value)} bytes")
    add("")
    add("Targets are ratios measured in one run; they are reported, never enforced (a missed target does not "
        "fail `bench/run`).")
    add("")

    # Small requests
    add(f"## Small requests: {args.small_n:,} GETs of a {SMALL_SIZE}-byte file, K in flight")
    add("")
    for k in args.small_k:
        ref_rps, ref_cpu, ref_rss = (small(REFERENCE, k, m) for m in ("rps", "cpu_us", "rss_mib"))
        add(f"### K = {k}")
        add("")
        add("| client | requests/s | × C | CPU µs/request | × C | peak RSS MiB | × C |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for client in (c for c in clients if c.runs("small")):
            if client.skip_reason:
                add(f"| {client.label} | skipped | | | | | |")
                continue
            key = (client.key, f"small-{k}")
            rps, cpu, rss = (results.median(key, m) for m in ("rps", "cpu_us", "rss_mib"))
            label = client.label + cell_failures(results, key)
            if client.key == "swift-urlsession" and client.n_for("small", args.small_n) != args.small_n:
                label += f" (N={client.n_for('small', args.small_n):,})"
            add(f"| {label} | {fmt(rps)} | {ratio(rps, ref_rps)} | {fmt(cpu, 1)} | {ratio(cpu, ref_cpu)} | "
                f"{fmt(rss, 1)} | {ratio(rss, ref_rss)} |")
        add("")

    # Cost per request
    if results.costs or results.cost_notes:
        n1, n2 = args.cost_n
        add(f"## Cost per request: instructions and system calls ({args.cost_n[1]:,} minus {n1:,} requests)")
        add("")
        counter = {"perf": "`perf stat` on the kernel's system-call tracepoints (the median of 5 runs at each N)",
                   "strace": "`strace -f -c`"}.get(results.syscall_tool, "–")
        add(f"Each C client runs at N = {n1:,} and N = {n2:,} (100-byte GETs), under callgrind for instructions "
            f"and under {counter} for system calls; the difference divided by the difference of N is the cost of "
            "one request, every thread of the process included, with start-up and teardown cancelled out. "
            "Instruction counts do not depend on the machine's load. System calls do in part: at K > 1 the number "
            "of polls per request depends on how many responses each poll finds ready, and so on the relative "
            "speed of client and server. *sendto*: one per request sends it; any more are the engine's wake-ups "
            "(`curl_multi_wakeup` sends a byte on libcurl's socket pair). *write*: a dispatch queue signalling its "
            "file descriptor. *upfront*: all N added at once; *refill*: each completion callback adds "
            "the next request (the shape of the C reference). CPU µs/request is the median of the timed runs "
            "above at the same K (when that K was run). *C reference sending the library's default header lines*: "
            "the reference with the User-Agent and Accept-Encoding lines librequestqueue sends unless told "
            "otherwise (and CURLOPT_ACCEPT_ENCODING, as the library sets it); libcurl formats every header byte "
            "through its printf. The targets compare with the reference without them.")
        add("")
        for k in args.cost_k:
            ref = results.costs.get((REFERENCE, k), {})
            ref_ins, ref_calls = ref.get("instructions"), ref.get("syscalls")
            ref_cpu = small(REFERENCE, k, "cpu_us")
            add(f"### K = {k}")
            add("")
            add("| client | instructions/request | × C | system calls/request | − C | poll | futex | sendto | "
                "write | CPU µs/request | × C |")
            add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            # The reference sending the library's default header lines goes right after the reference.
            rows = [c for c in clients if c.key == REFERENCE]
            rows += [Client(REFERENCE_WITH_HEADERS, REFERENCE_WITH_HEADERS_LABEL, None)]
            rows += [c for c in clients if c.key != REFERENCE]
            for client in rows:
                cost = results.costs.get((client.key, k))
                if client.key not in COST_CLIENTS + (REFERENCE_WITH_HEADERS,) or cost is None:
                    continue
                ins, calls = cost.get("instructions"), cost.get("syscalls")
                count = sum(calls.values()) if calls is not None else None
                ref_count = sum(ref_calls.values()) if ref_calls is not None else None
                diff = f"{count - ref_count:+.2f}" if count is not None and ref_count is not None else "–"
                pick = lambda *names: sum(calls.get(n, 0) for n in names) if calls is not None else None  # noqa: E731
                cpu = small(client.key, k, "cpu_us")
                add(f"| {client.label}{cell_failures(results, (client.key, f'cost-{k}'))} | {fmt(ins)} | "
                    f"{ratio(ins, ref_ins)} | {fmt(count, 2)} | {diff} | {fmt(pick('poll', 'ppoll', 'epoll_wait'), 2)} "
                    f"| {fmt(pick('futex'), 2)} | {fmt(pick('sendto'), 2)} | {fmt(pick('write'), 2)} | {fmt(cpu, 1)} | "
                    f"{ratio(cpu, ref_cpu)} |")
            add("")
        for note in results.cost_notes:
            add(f"- {note}")
        if results.cost_notes:
            add("")

    # Cost per large body
    if results.body_costs:
        n1, n2 = args.body_cost_n
        ref = results.body_costs.get((REFERENCE, "discarded"), {})
        ref_ins, ref_copy = ref.get("instructions"), ref.get("copy")
        add(f"## Cost per 10 MiB body: instructions ({n2} minus {n1} bodies, K = 1)")
        add("")
        add("Each C client fetches the 10 MiB file N times, one at a time, under callgrind (every thread); the "
            "difference divided by the difference of N is the cost of one body. *discarded*: the reference counts "
            "the bytes in libcurl's write callback; *streamed*: a body callback "
            "(`rq_request_set_body_callback`); *whole*: collected into the response; *file*: written by the "
            "library (`rq_request_set_output_file`). The library copies a streamed (except with inline delivery, which "
            "hands out libcurl's buffer) or collected body once; glibc "
            "copies such blocks with `rep movsb`, which callgrind counts as one instruction per byte (about 10.5 "
            "million per body) although the processor moves tens of bytes per cycle: the *memcpy* column shows "
            "that part, and the last two columns the rest. The kernel's work (the socket reads, the file writes) "
            "is not counted.")
        add("")
        add("| client | body | instructions/body | × C | of which memcpy | without memcpy | × C |")
        add("|---|---|---:|---:|---:|---:|---:|")
        for key, body, _ in BODY_COST_CLIENTS:
            cost = results.body_costs.get((key, body))
            if cost is None:
                continue
            label = next((c.label for c in clients if c.key == key), key)
            ins, copy = cost["instructions"], cost["copy"]
            rest = ins - copy
            ref_rest = ref_ins - ref_copy if ref_ins is not None else None
            add(f"| {label}{cell_failures(results, (key, f'body-{body}'))} | {body} | {fmt(ins)} | "
                f"{ratio(ins, ref_ins)} | {fmt(copy)} | {fmt(rest)} | {ratio(rest, ref_rest)} |")
        add("")

    # Large bodies
    add(f"## Large bodies: {args.large_n} × {LARGE_SIZE // (1024 * 1024)} MiB, K in flight")
    add("")
    add("Each client consumes the bodies as they arrive and discards them where its API allows: the "
        "*body* column says *streamed*, or *whole* when the client received each body whole in memory "
        "(up to K bodies held at once, and a binding copies each into a bytes or String object). "
        "librequestqueue streams with `rq_request_set_body_callback`; a binding without a streaming "
        "callback gets whole bodies.")
    add("")
    for k in args.large_k:
        ref_mbps, ref_rss, ref_cpu = (large(REFERENCE, k, m) for m in ("mbps", "rss_mib", "cpu_ms_per_body"))
        add(f"### K = {k}")
        add("")
        add("| client | body | MB/s | × C | peak RSS MiB | × C | CPU ms per body | × C |")
        add("|---|---|---:|---:|---:|---:|---:|---:|")
        for client in (c for c in clients if c.runs("large")):
            if client.skip_reason:
                add(f"| {client.label} | | skipped | | | | | |")
                continue
            key = (client.key, f"large-{k}")
            runs = results.runs.get(key, [])
            body = "–" if not runs else "streamed" if all(r.get("streamed") for r in runs) else "whole"
            mbps, rss, cpu = (results.median(key, m) for m in ("mbps", "rss_mib", "cpu_ms_per_body"))
            label = client.label + cell_failures(results, key)
            add(f"| {label} | {body} | {fmt(mbps)} | {ratio(mbps, ref_mbps)} | {fmt(rss, 1)} | {ratio(rss, ref_rss)} | "
                f"{fmt(cpu, 1)} | {ratio(cpu, ref_cpu)} |")
        add("")

    # Uploads
    upload_rows = [c for c in clients if c.posts]
    add(f"## Uploads: POSTs of a {POST_SIZE}-byte JSON body and of a 10 MiB body from memory")
    add("")
    add("The C clients only (`--post` / `post SIZE CONTENT-TYPE`). Each request is a POST to nginx's `/upload`, "
        "which reads the whole body (the mirror module, in memory; it answers \"Expect: 100-continue\") before it "
        f"answers 200 with a {len(UPLOAD_ANSWER)}-byte body: the response comes after the last byte was sent. "
        f"*POST*: a {POST_SIZE}-byte JSON object with \"Content-Type: {POST_TYPE}\", {args.post_n:,} per run; "
        f"*upload*: a 10 MiB body with \"Content-Type: {UPLOAD_TYPE}\" (sent with \"Expect: 100-continue\", "
        f"libcurl's default above 1 MiB, by both), {args.upload_n} per run. The reference gives libcurl its one "
        "buffer with CURLOPT_POSTFIELDS (no copy of its own); the library's client sets the body on each request "
        "with `rq_request_set_body` (which copies it) or `rq_request_set_body_borrowed` (*borrowed*, which does "
        "not), as a caller does for every request it sends.")
    add("")
    for kind, ks in (("post", args.post_k), ("upload", args.upload_k)):
        for k in ks:
            key_of = lambda c: (c.key, f"{kind}-{k}")  # noqa: E731
            ref = lambda m: results.median((REFERENCE, f"{kind}-{k}"), m)  # noqa: E731
            if kind == "post":
                add(f"### {POST_SIZE}-byte POSTs, K = {k}")
                add("")
                add("| client | requests/s | × C | CPU µs/request | × C | peak RSS MiB | × C |")
            else:
                add(f"### 10 MiB uploads, K = {k}")
                add("")
                add("| client | MB/s | × C | CPU ms per upload | × C | peak RSS MiB | × C |")
            add("|---|---:|---:|---:|---:|---:|---:|")
            metrics = ("rps", "cpu_us") if kind == "post" else ("mbps", "cpu_ms_per_body")
            for client in upload_rows:
                if client.skip_reason:
                    add(f"| {client.label} | skipped | | | | | |")
                    continue
                rate, cpu, rss = (results.median(key_of(client), m) for m in (*metrics, "rss_mib"))
                add(f"| {client.label}{cell_failures(results, key_of(client))} | {fmt(rate)} | "
                    f"{ratio(rate, ref(metrics[0]))} | {fmt(cpu, 1)} | {ratio(cpu, ref(metrics[1]))} | {fmt(rss, 1)} | "
                    f"{ratio(rss, ref('rss_mib'))} |")
            add("")
    if results.upload_costs:
        add("### Cost per POST and per upload: instructions and system calls")
        add("")
        add(f"As for GETs and 10 MiB downloads: each client at two values of N under callgrind (every thread) and "
            f"{results.syscall_tool or 'no system-call counter'}; the difference over the difference of N. *POST*: "
            f"{args.cost_n[1]:,} minus {args.cost_n[0]:,} {POST_SIZE}-byte POSTs at K = 64; *upload*: "
            f"{args.body_cost_n[1]} minus {args.body_cost_n[0]} 10 MiB uploads at K = 1. libcurl copies a "
            "body into its upload buffer (in the reference too); glibc copies blocks above its non-temporal threshold "
            "with vector instructions (about 1 instruction per 64 bytes under callgrind) and smaller ones with "
            "`rep movsb` (1 per byte): the *memcpy* column.")
        add("")
        add("| client | instructions per POST | × C | system calls per POST | − C | instructions per upload | × C | "
            "of which memcpy |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|")
        ref_post = results.upload_costs.get((REFERENCE, "post"), {})
        ref_upload = results.upload_costs.get((REFERENCE, "upload"), {})
        ref_calls = sum(ref_post["syscalls"].values()) if "syscalls" in ref_post else None
        for client in upload_rows:
            post = results.upload_costs.get((client.key, "post"), {})
            upload = results.upload_costs.get((client.key, "upload"), {})
            if not post and not upload:
                continue
            calls = sum(post["syscalls"].values()) if "syscalls" in post else None
            diff = f"{calls - ref_calls:+.2f}" if calls is not None and ref_calls is not None else "–"
            add(f"| {client.label} | {fmt(post.get('instructions'))} | "
                f"{ratio(post.get('instructions'), ref_post.get('instructions'))} | {fmt(calls, 2)} | {diff} | "
                f"{fmt(upload.get('instructions'))} | {ratio(upload.get('instructions'), ref_upload.get('instructions'))} "
                f"| {fmt(upload.get('copy'))} |")
        add("")

    # Queue
    add("## The queue itself, without network")
    add("")
    add("`bench/clients/queue_ops.c`: on a suspended queue (dispatch delivery, duplicates allowed), N × "
        "`rq_request_new` + `rq_request_set_completion`, then N × `rq_add`, then N × `rq_cancel` in a shuffled "
        "order, each loop timed on its own; then one `rq_queue_dispatch` delivers the N cancellation "
        "completions. Memory per waiting request is the growth of the resident set from before the requests "
        "were created to after they were all added, divided by N (the request plus its place in the queue).")
    add("")
    add("| waiting requests | ns per add | ns per cancel | bytes per waiting request | of which the queue's | "
        "ns per request_new | ns per completion delivered | peak RSS MiB |")
    add("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.queue_n:
        key = ("queue", n)
        m = lambda metric: results.median(key, metric)  # noqa: E731
        partial = any(r.get("partial") for r in results.runs.get(key, []))
        label = f"{n:,}" + (" (stopped at the 60 s budget)" if partial else "") + cell_failures(results, key)
        add(f"| {label} | {fmt(m('add_ns'))} | {fmt(m('cancel_ns'))} | {fmt(m('bytes_per_waiting'))} | "
            f"{fmt(m('queue_bytes_per_waiting'))} | {fmt(m('new_ns'))} | {fmt(m('deliver_ns'))} | "
            f"{fmt(m('rss_mib'), 1)} |")
    add("")

    # Notes
    add("## Notes")
    add("")
    add("- **C reference** (`bench/clients/curl_multi.c`): libcurl multi with K easy handles, each re-added for "
        "the next request as soon as its transfer ends; body bytes counted and discarded. The engine's own cost.")
    add("- **librequestqueue from C** (`bench/clients/rq_client.c`): all N requests are added at once to one "
        "queue with `max_concurrent` = K and `RQ_DUPLICATES_ALLOW` (the N requests are equal), so its peak RSS "
        "includes N waiting requests; threaded delivery waits in `rq_queue_wait_idle`, dispatch delivery runs a "
        "`poll()` loop on `rq_queue_get_fd` + `rq_queue_dispatch`. The Python and Ruby bindings and Typhoeus "
        "also queue all N at once; pycurl, aiohttp and URLSession keep K in flight and start the next when one "
        "ends.")
    add("- **librequestqueue from C, refill** (`rq_client.c ... refill`): the shape of the C reference and of a "
        "client that learns its next request from the last response: K requests are added, and each completion "
        "callback adds the next one (with `rq_request_new` + `rq_add` + `rq_request_free`) until N were added; "
        "at most K requests exist at once, and every add comes from the delivering thread while the engine "
        "runs.")
    add("- **pycurl** is built from source against the system libcurl (`pip install --no-binary pycurl`), so "
        "that it runs the same engine as the C reference; Typhoeus (ethon) uses the system libcurl too.")
    add("- **aiohttp**: one `ClientSession` with `TCPConnector(limit=K)` and K worker tasks on the default "
        "asyncio event loop.")
    for client in clients:
        if client.note and not client.skip_reason:
            add(f"- {client.note}")
    for client in clients:
        if client.skip_reason:
            add(f"- **{client.label}** was skipped: {client.skip_reason}")
    for (key, workload), reasons in sorted(results.failures.items(), key=str):
        add(f"- **{key}, {workload}**: {len(reasons)} run(s) failed: {reasons[0]}")
    add("")
    return "\n".join(lines), targets


# --------------------------------------------------------------------------------------------------


def parse_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main():
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small N, one repetition, report to $TMPDIR/BENCHMARKS.quick.md (the CI smoke run)")
    parser.add_argument("--libdir", required=True,
                        help="directory holding librequestqueue.so (bench/run builds the checkout's and passes "
                             "it, unless given)")
    parser.add_argument("--python", default=sys.executable, help="Python for the Python clients")
    parser.add_argument("--swiftc", default=None, help="Swift compiler for the URLSession client")
    parser.add_argument("--reps", type=int, help="repetitions (5; quick 1)")
    parser.add_argument("--small-n", type=int, help="small requests per run (20000; quick 1000)")
    parser.add_argument("--small-k", type=parse_list, help="K values for small requests (1,8,64,256)")
    parser.add_argument("--large-n", type=int, help="10 MiB bodies per run (50; quick 8)")
    parser.add_argument("--large-k", type=parse_list, help="K values for large bodies (1,8)")
    parser.add_argument("--queue-n", type=parse_list,
                        help="waiting requests for the queue benchmark (10000,1000000; quick 10000,100000)")
    parser.add_argument("--urlsession-n", type=int, help="small requests per URLSession run (5000; quick 500)")
    parser.add_argument("--cost-k", type=parse_list,
                        help="K values for instructions and system calls per request (1,64; quick 64)")
    parser.add_argument("--cost-n", type=parse_list,
                        help="the two request counts of the cost measurement (1000,4000; quick 200,600)")
    parser.add_argument("--body-cost-n", type=parse_list,
                        help="the two counts of 10 MiB bodies of the cost per body (2,6; quick 1,3)")
    parser.add_argument("--post-n", type=int, help=f"small POSTs per run ({POST_SIZE}-byte JSON body; 10000; quick 1000)")
    parser.add_argument("--post-k", type=parse_list, help="K values for small POSTs (1,64; quick 64)")
    parser.add_argument("--upload-n", type=int, help="10 MiB uploads per run (20; quick 4)")
    parser.add_argument("--upload-k", type=parse_list, help="K values for 10 MiB uploads (1)")
    parser.add_argument("--timeout", type=float, help="seconds before a client run is killed (300; quick 60)")
    parser.add_argument("--only", help="comma-separated client keys (the C reference is always included)")
    parser.add_argument("--output", help="markdown report (default BENCHMARKS.md; with --quick, a temp file)")
    parser.add_argument("--json", help="also write every run's raw figures to this file")
    parser.add_argument("--command", default="bench/run", help="the command line shown in the report")
    args = parser.parse_args()

    quick = args.quick
    defaults = dict(reps=1 if quick else 5, small_n=1000 if quick else 20000, small_k=[1, 8, 64, 256],
                    large_n=8 if quick else 50, large_k=[1, 8],
                    queue_n=[10000, 100000] if quick else [10000, 1000000],
                    urlsession_n=500 if quick else 5000, timeout=60 if quick else 300,
                    cost_k=[64] if quick else [1, 64], cost_n=[200, 600] if quick else [1000, 4000],
                    body_cost_n=[1, 3] if quick else [2, 6],
                    post_n=1000 if quick else 10000, post_k=[64] if quick else [1, 64],
                    upload_n=4 if quick else 20, upload_k=[1])
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if min([args.reps, args.small_n, args.large_n, args.urlsession_n, args.post_n, args.upload_n] + args.small_k
           + args.large_k + args.queue_n + args.cost_k + args.cost_n + args.body_cost_n + args.post_k
           + args.upload_k) <= 0:
        parser.error("counts must be positive")
    if len(args.cost_n) != 2 or args.cost_n[0] >= args.cost_n[1]:
        parser.error("--cost-n: two counts, the second larger")
    if len(args.body_cost_n) != 2 or args.body_cost_n[0] >= args.body_cost_n[1]:
        parser.error("--body-cost-n: two counts, the second larger")
    if args.output is None:
        args.output = (os.path.join(tempfile.gettempdir(), "BENCHMARKS.quick.md") if quick
                       else os.path.join(ROOT, "BENCHMARKS.md"))
    if not os.path.exists(os.path.join(args.libdir, "librequestqueue.so")):
        parser.error(f"no librequestqueue.so in {args.libdir}")
    args.libdir = os.path.abspath(args.libdir)

    started = time.monotonic()
    load_start = os.getloadavg()[0]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    results = Results()
    tmp = tempfile.mkdtemp(prefix="requestqueue-bench.")
    os.chmod(tmp, 0o755)  # nginx's worker runs as an unprivileged user when we are root
    nginx = None
    try:
        build = os.path.join(tmp, "build")
        os.makedirs(build)
        clients = make_clients(args, build)
        log(f"building the clients in {build}")
        build_clients(args, build, clients)
        nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
        os.makedirs(os.path.join(tmp, "server"))
        nginx = Nginx(os.path.join(tmp, "server"), nginx_bin)
        nginx.start()
        log(f"nginx on 127.0.0.1:{nginx.port}")
        seconds = 1 if quick else 3
        wrk64 = wrk_ceiling(nginx.url("small"), 64, seconds)
        wrk1 = wrk_ceiling(nginx.url("small"), 1, seconds)
        if wrk64:
            log(f"server ceiling (wrk): {wrk64:,.0f} req/s over 64 connections, {wrk1 or 0:,.0f} over 1")
        run_dir = os.path.join(tmp, "run")
        os.makedirs(run_dir)
        probe(clients, nginx, run_dir, results)
        global BACKGROUND
        BACKGROUND = Background(nginx.pids())
        run_matrix(args, clients, nginx, run_dir, results)
        run_queue_ops(args, build, nginx.url("small"), run_dir, results)
        run_costs(args, clients, nginx, run_dir, results)
        run_body_costs(args, build, nginx, run_dir, results)
        run_upload_costs(args, clients, nginx, run_dir, results)
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    meta = {"command": args.command, "date": date, "duration": time.monotonic() - started,
            "load_start": load_start, "load_end": os.getloadavg()[0],
            "wrk64": wrk64, "wrk1": wrk1, "background": BACKGROUND.share() if BACKGROUND else None}
    text, targets = report(args, clients, results, meta)
    with open(args.output, "w") as f:
        f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta,
                       "runs": {f"{c}|{w}": r for (c, w), r in results.runs.items()},
                       "failures": {f"{c}|{w}": r for (c, w), r in results.failures.items()}}, f, indent=1)
    print(text)
    log(f"report written to {args.output}")
    for text_, verdict in targets:
        log(f"target {verdict.strip('*')}: {text_}")
    print(f"bench: {results.passed} passed, {results.failed} failed")
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as error:  # a build or nginx failure: say what, without a traceback
        log(f"error: {error}")
        print("bench: 0 passed, 1 failed")
        sys.exit(1)
