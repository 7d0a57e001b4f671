#!/usr/bin/env python3
"""Runs one program against fresh fixture servers: a plain HTTP one, and with --tls an HTTPS one.

Usage:
  with_servers.py [--tls] [--log FILE] -- PROGRAM [ARG]...

Starts `python3 Tests/Fixtures/fixture_server.py --exit-on-stdin-eof` and reads its "PORT <n>" line.
With --tls it also makes, in a temporary folder, a self-signed certificate for 127.0.0.1
(subjectAltName IP:127.0.0.1, with the openssl command) and an unrelated second one, and starts a
second fixture with --tls-cert/--tls-key. In PROGRAM's arguments it replaces {base} (the plain
server's http://127.0.0.1:<n>), {port}, {tls_base} (https://127.0.0.1:<m>), {tls_port}, {cert} (the
served certificate, usable as a CA file), {other_cert} (a certificate that did not sign it) and
{tmp} (the temporary folder); the environment also gets RQ_TEST_PORT and RQ_TEST_BASE_URL.

The program's output is passed through as it comes (and copied to --log FILE). Exits with the
program's status (128 + N when killed by signal N), or 1 when the servers cannot be started.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "Fixtures", "fixture_server.py")
sys.path.insert(0, os.path.join(HERE, "..", "c"))
from with_fixture import start_server as start_fixture, stop_server  # noqa: E402


def fail(message):
    print(f"with_servers: FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def start_server(extra=()):
    return start_fixture(FIXTURE, extra)


def make_cert(folder, name, subject_alt_name):
    cert, key = os.path.join(folder, f"{name}.pem"), os.path.join(folder, f"{name}-key.pem")
    result = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
         "-addext", f"subjectAltName={subject_alt_name}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        fail("openssl req failed: " + result.stdout.decode(errors="replace"))
    return cert, key


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tls", action="store_true", help="also start an HTTPS fixture")
    parser.add_argument("--log", help="copy the program's output to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program given after --")

    tmp = tempfile.mkdtemp(prefix="rq-reliability-")
    servers = []
    try:
        subst = {"{tmp}": tmp}
        server, port = start_server()
        servers.append(server)
        subst.update({"{base}": f"http://127.0.0.1:{port}", "{port}": str(port)})
        if args.tls:
            if not shutil.which("openssl"):
                fail("the openssl command is needed for --tls (apt-get install openssl)")
            cert, key = make_cert(tmp, "server", "IP:127.0.0.1")
            other, _ = make_cert(tmp, "other", "IP:127.0.0.1")
            tls_server, tls_port = start_server(["--tls-cert", cert, "--tls-key", key])
            servers.append(tls_server)
            subst.update({"{tls_base}": f"https://127.0.0.1:{tls_port}", "{tls_port}": str(tls_port),
                          "{cert}": cert, "{other_cert}": other})
        argv = []
        for a in command:
            for k, v in subst.items():
                a = a.replace(k, v)
            argv.append(a)
        env = dict(os.environ, RQ_TEST_PORT=str(port), RQ_TEST_BASE_URL=f"http://127.0.0.1:{port}")
        log = open(args.log, "w") if args.log else None
        print("with_servers: running " + " ".join(argv), flush=True)
        try:
            child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            print(f"with_servers: cannot run {argv[0]}: {exc}", flush=True)
            return 127
        for line in iter(child.stdout.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            if log:
                log.write(line.decode(errors="replace"))
                log.flush()
        status = child.wait()
        if log:
            log.close()
        if status < 0:
            print(f"with_servers: {argv[0]} killed by signal {-status}", flush=True)
            status = 128 - status
        return status
    finally:
        for server in servers:
            stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
