#!/usr/bin/env python3
"""Where librequestqueue spends its CPU per request: instruction counts from callgrind and system
calls from strace, per request, for the C client and the C reference on the same nginx.

    bench/profile [--k 64] [--n 2000,6000] [--mode threaded|dispatch|inline] [--shape upfront|refill] [--top 30]
                  [--post SIZE]

--post SIZE: POSTs of a SIZE-byte body from memory (the upload workloads of bench/run: "Content-Type:
application/json", or application/octet-stream above 64 KiB) to nginx's /upload, instead of GETs.

Each program runs at two values of N; the difference divided by the difference of N is the cost of
one request, with start-up and teardown cancelled out. Reports:
  - instructions per request: the C reference, and the library's client per thread (main, engine,
    delivery) with callgrind --separate-threads;
  - the library's functions by inclusive instructions per request (the engine thread and the
    thread that adds requests), demangled;
  - system calls per request (strace -f -c), which callgrind does not see: futex wake-ups and the
    writes that wake the engine are where the threads' handoffs cost.
Instruction counts are repeatable from run to run, unlike times on a shared machine.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver  # noqa: E402


def functions(path):
    """Inclusive instructions per (source file, function). Inlined code makes callgrind split one
    function over several source files: those entries are kept apart (summing them can count a
    call twice)."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--tree=none", "--inclusive=yes", path],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    costs = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if not m or m.group(2).startswith("=>"):
            continue
        name = re.sub(r" \[.*\]$", "", m.group(2))
        file_, _, fn = name.rpartition(":")
        where = os.path.basename(file_) if file_ not in ("???", "") else ""
        if "librequestqueue" in line or "Sources/RequestQueue" in file_ or fn.startswith("rq_"):
            costs[(where or "lib", fn)] += int(m.group(1).replace(",", ""))
        elif fn.startswith("curl_") or fn in ("malloc", "free", "calloc", "realloc"):
            costs[("", fn)] += int(m.group(1).replace(",", ""))
    return costs


def demangle(names):
    tool = shutil.which("swift-demangle") or "/opt/swift/usr/bin/swift-demangle"
    if not os.path.exists(tool):
        return names
    out = subprocess.run([tool, "--simplified"], input="\n".join(names), stdout=subprocess.PIPE, text=True).stdout
    lines = out.splitlines()
    return lines if len(lines) == len(names) else names


def thread_files(prefix):
    """callgrind --separate-threads writes PREFIX-01, -02, ... in thread creation order."""
    base = os.path.basename(prefix)
    folder = os.path.dirname(prefix)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if re.fullmatch(re.escape(base) + r"-\d+", f))


def context_switches(argv):
    """Voluntary and involuntary context switches of a run (every thread), from wait4."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed with exit code {proc.returncode}")
    return usage.ru_nvcsw, usage.ru_nivcsw


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--libdir", required=True)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--n", default="2000,6000", help="two request counts")
    parser.add_argument("--mode", default="threaded", choices=["threaded", "dispatch", "inline"])
    parser.add_argument("--shape", default="upfront", choices=["upfront", "refill"],
                        help="upfront: all N added at once; refill: each completion adds the next")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--post", type=int, default=0, help="POST a body of this many bytes instead of GET")
    args = parser.parse_args()
    n1, n2 = (int(x) for x in args.n.split(","))
    per = n2 - n1
    if per <= 0:
        parser.error("--n: the second count must be larger")

    tmp = tempfile.mkdtemp(prefix="requestqueue-profile.")
    os.chmod(tmp, 0o755)
    nginx = None
    try:
        build = os.path.join(tmp, "build")
        os.makedirs(build)
        cc = os.environ.get("CC", "cc")
        src = lambda name: os.path.join(driver.CLIENTS_DIR, name)  # noqa: E731
        driver.run_quiet([cc, "-O2", "-g", "-std=c11", "-o", os.path.join(build, "curl_multi"), src("curl_multi.c"),
                          "-lcurl"], "building curl_multi")
        driver.run_quiet([cc, "-O2", "-g", "-std=c11", "-I", os.path.join(driver.ROOT, "include"), "-o",
                          os.path.join(build, "rq_client"), src("rq_client.c"), "-L", args.libdir, "-lrequestqueue",
                          "-Wl,-rpath," + args.libdir], "building rq_client")
        os.makedirs(os.path.join(tmp, "server"))
        nginx = driver.Nginx(os.path.join(tmp, "server"), shutil.which("nginx") or "/usr/sbin/nginx")
        nginx.start()
        url = nginx.upload_url() if args.post else nginx.url("small")
        kind = driver.POST_TYPE if args.post <= 64 << 10 else driver.UPLOAD_TYPE
        post = [str(args.post), kind] if args.post else []
        ref = lambda n: [os.path.join(build, "curl_multi"), url, str(n), str(args.k)] + (["--post", *post] if post else [])  # noqa: E731
        shape = ["refill"] if args.shape == "refill" else []
        shape += ["post", *post] if post else []
        lib = lambda n: [os.path.join(build, "rq_client"), args.mode, url, str(n), str(args.k), *shape]  # noqa: E731

        print(f"# Cost per request, K={args.k}, {args.mode} delivery, {args.shape} shape"
              + (f", POST of {args.post:,} bytes" if args.post else "") + " "
              f"(N={n2:,} minus N={n1:,}, over {per:,})\n")
        for n in (n1, n2):
            driver.callgrind(ref(n), os.path.join(tmp, f"ref.{n}"), False)
            driver.callgrind(lib(n), os.path.join(tmp, f"lib.{n}"), True)
        ref_per = (driver.total(os.path.join(tmp, f"ref.{n2}")) - driver.total(os.path.join(tmp, f"ref.{n1}"))) / per
        threads1, threads2 = thread_files(os.path.join(tmp, f"lib.{n1}")), thread_files(os.path.join(tmp, f"lib.{n2}"))
        if len(threads1) != len(threads2):
            raise RuntimeError("the two runs did not start the same threads")
        per_thread = [(driver.total(b) - driver.total(a)) / per for a, b in zip(threads1, threads2)]
        print("## Instructions per request\n")
        print(f"- C reference on libcurl multi: {ref_per:,.0f}")
        print(f"- librequestqueue client: {sum(per_thread):,.0f} ({sum(per_thread) / ref_per:.2f}x), by thread: "
              + ", ".join(f"#{i + 1} {v:,.0f}" for i, v in enumerate(per_thread)))
        print("  (thread #1 is main(): rq_request_new + rq_add (+ callbacks in dispatch mode); the busiest "
              "other thread is the engine, which also runs the callbacks in inline mode; a threaded queue also has a "
              "delivery thread)\n")

        for index in sorted(range(len(per_thread)), key=lambda i: -per_thread[i])[:2]:
            a, b = functions(threads1[index]), functions(threads2[index])
            rows = sorted(((b[key] - a[key]) / per, key) for key in set(a) | set(b))
            # An entry above the thread's own total is callgrind counting a thread's start routine
            # twice (the pthread trampoline): leave it out.
            rows = [r for r in reversed(rows) if 50 <= r[0] <= per_thread[index] * 1.01][: args.top]
            names = demangle([key[1] for _, key in rows])
            print(f"## Thread #{index + 1}: inclusive instructions per request\n")
            print("| instructions | function | source file |")
            print("|---:|---|---|")
            for (value, key), name in zip(rows, names):
                print(f"| {value:,.0f} | {name[:140]} | {key[0] or '(libcurl/libc)'} |")
            print()

        # libcurl and libc on both sides: what the library makes libcurl do beyond the reference.
        ra, rb = functions(os.path.join(tmp, f"ref.{n1}")), functions(os.path.join(tmp, f"ref.{n2}"))
        engine = max(range(len(per_thread)), key=lambda i: per_thread[i])
        la, lb = functions(threads1[engine]), functions(threads2[engine])
        keys = {key for key in set(rb) | set(lb) if key[0] == ""}
        rows = sorted(((rb[k] - ra[k]) / per, (lb[k] - la[k]) / per, k[1]) for k in keys)
        rows = [r for r in rows if max(r[0], r[1]) >= 300]
        rows.sort(key=lambda r: -abs(r[1] - r[0]))
        print("## libcurl and libc, inclusive instructions per request: reference vs the engine thread\n")
        print("| function | C reference | librequestqueue | difference |")
        print("|---|---:|---:|---:|")
        for ref_value, lib_value, name in rows[: args.top]:
            print(f"| {name} | {ref_value:,.0f} | {lib_value:,.0f} | {lib_value - ref_value:+,.0f} |")
        print()

        print("## Context switches per request (wait4, without valgrind)\n")
        print("| | C reference | librequestqueue |")
        print("|---|---:|---:|")
        (rv1, ri1), (rv2, ri2) = context_switches(ref(n1)), context_switches(ref(n2))
        (lv1, li1), (lv2, li2) = context_switches(lib(n1)), context_switches(lib(n2))
        print(f"| voluntary (a thread blocked: waits, wake-ups) | {(rv2 - rv1) / per:.2f} | {(lv2 - lv1) / per:.2f} |")
        print(f"| involuntary (preempted) | {(ri2 - ri1) / per:.2f} | {(li2 - li1) / per:.2f} |")
        print()

        if shutil.which("strace"):
            print("## System calls per request (strace -f -c)\n")
            print("| call | C reference | librequestqueue |")
            print("|---|---:|---:|")
            r, l = driver.syscalls_per_request(ref, n1, n2, tmp), driver.syscalls_per_request(lib, n1, n2, tmp)
            for call in sorted(set(r) | set(l), key=lambda c: -(r.get(c, 0) + l.get(c, 0))):
                rv, lv = r.get(call, 0), l.get(call, 0)
                if max(rv, lv) >= 0.05:
                    print(f"| {call} | {rv:.2f} | {lv:.2f} |")
            print(f"| all | {sum(r.values()):.2f} | {sum(l.values()):.2f} |")
            print()
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.CalledProcessError) as error:
        sys.stderr.write(f"profile: error: {error}\n")
        sys.exit(1)
