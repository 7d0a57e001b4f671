#!/usr/bin/env python3
"""Runs one program against a fresh fixture server and checks what happened.

Usage:
  with_fixture.py --server PATH [--expect RE]... [--reject RE]... [--server-count RE=N]...
                  [--exit-code N] -- PROGRAM [ARG]...

Starts `python3 PATH --exit-on-stdin-eof`, reads its "PORT <n>" line, then runs PROGRAM with every
"{base}" in its arguments replaced by http://127.0.0.1:<n> and "{port}" by <n>; the environment
also carries RQ_TEST_PORT and RQ_TEST_BASE_URL. The test passes when the program exits with the
expected status (0 by default), its standard output matches every --expect regex and no --reject
regex, and for every --server-count RE=N the server logged exactly N requests whose path (with
its query) matches RE. Exits 0 on success, 1 with a message on failure, 2 on a usage error.
"""

import argparse
import json
import os
import re
import select
import subprocess
import sys
import threading
import urllib.request

START_TIMEOUT = 30.0


def fail(message):
    print(f"with_fixture: FAIL: {message}", flush=True)
    sys.exit(1)


def start_server(path, extra=()):
    """Starts the fixture server at `path` (with `extra` arguments); returns it and its port."""
    if not os.path.isfile(path):
        fail(f"fixture server not found: {path}")
    server = subprocess.Popen([sys.executable, path, "--exit-on-stdin-eof", *extra],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    ready, _, _ = select.select([server.stdout], [], [], START_TIMEOUT)
    line = server.stdout.readline().decode(errors="replace").strip() if ready else ""
    match = re.fullmatch(r"PORT (\d+)", line)
    if not match:
        server.kill()
        fail(f"fixture server did not print 'PORT <n>' (got {line!r}, exit {server.poll()})")
    # Keep draining its stdout so that it can never block on a full pipe.
    threading.Thread(target=server.stdout.read, daemon=True).start()
    return server, int(match.group(1))


def stop_server(server):
    try:
        server.stdin.close()  # --exit-on-stdin-eof
        server.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        server.kill()
        server.wait()


def server_log(base):
    with urllib.request.urlopen(f"{base}/_/log", timeout=30) as reply:
        return json.load(reply)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="path of fixture_server.py")
    parser.add_argument("--expect", action="append", default=[], metavar="RE")
    parser.add_argument("--reject", action="append", default=[], metavar="RE")
    parser.add_argument("--server-count", action="append", default=[], metavar="RE=N")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program given after --")
    counts = []
    for spec in args.server_count:
        regex, sep, number = spec.rpartition("=")
        if not sep or not number.isdigit():
            parser.error(f"--server-count wants RE=N, got {spec!r}")
        counts.append((regex, int(number)))

    server, port = start_server(args.server)
    base = f"http://127.0.0.1:{port}"
    try:
        argv = [a.replace("{base}", base).replace("{port}", str(port)) for a in command]
        env = dict(os.environ, RQ_TEST_PORT=str(port), RQ_TEST_BASE_URL=base)
        print("with_fixture: running " + " ".join(argv), flush=True)
        result = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = result.stdout.decode(errors="replace")
        err = result.stderr.decode(errors="replace")
        sys.stdout.write(out)
        if err:
            sys.stdout.write("--- stderr ---\n" + err)
        sys.stdout.flush()

        problems = []
        if result.returncode != args.exit_code:
            how = (f"killed by signal {-result.returncode}" if result.returncode < 0
                   else f"exit status {result.returncode}")
            problems.append(f"{how}, expected exit status {args.exit_code}")
        for regex in args.expect:
            if not re.search(regex, out, re.MULTILINE):
                problems.append(f"output does not match {regex!r}")
        for regex in args.reject:
            if re.search(regex, out, re.MULTILINE):
                problems.append(f"output matches the rejected {regex!r}")
        if counts:
            requests = server_log(base)["requests"]
            for regex, number in counts:
                seen = sum(1 for r in requests if re.search(regex, r["path"]))
                if seen != number:
                    problems.append(f"server logged {seen} requests matching {regex!r}, expected {number}")
        if problems:
            fail("; ".join(problems))
        print("with_fixture: PASS", flush=True)
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
