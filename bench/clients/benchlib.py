"""Shared by the Python benchmark clients: argument parsing and the JSON result line.

Every client prints one JSON line on stdout: {"n", "ok", "bytes", "wall", "cpu", "streamed"} where
"cpu" is the user+sys time of the whole process (every thread) during the timed phase, which starts
before the client creates its engine (session, multi handle, queue) and ends when the last response
completed, and "streamed" says whether bodies were consumed piece by piece as they arrived.
"""
import json
import resource
import sys
import time


def parse_args(usage):
    if len(sys.argv) != 5 or sys.argv[1] not in ("small", "large"):
        sys.stderr.write(f"usage: {sys.argv[0]} small|large URL N K  ({usage})\n")
        sys.exit(2)
    try:
        n, k = int(sys.argv[3]), int(sys.argv[4])
    except ValueError:
        n = k = 0
    if n <= 0 or k <= 0:
        sys.stderr.write("N and K must be positive integers\n")
        sys.exit(2)
    return sys.argv[1], sys.argv[2], n, min(k, n)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Timer:
    def __init__(self):
        self.cpu = cpu_seconds()
        self.wall = time.monotonic()

    def report(self, n, ok, received, streamed):
        wall = time.monotonic() - self.wall
        cpu = cpu_seconds() - self.cpu
        print(json.dumps({"n": n, "ok": ok, "bytes": received, "wall": wall, "cpu": cpu,
                          "streamed": streamed}), flush=True)
        return ok == n
