#!/usr/bin/env python3
"""Real servers for the transport tests (issue 17), started on 127.0.0.1 ephemeral ports.

Starts, in a temporary folder:
  - nginx with `gzip on`, precompressed br and zstd files, echo endpoints (User-Agent,
    Accept-Encoding, Via, Cookie, Host), cookie setting (with a Domain too), PUT uploads (WebDAV, /upload/NAME into
    the `uploads` folder), a Unix socket listener, an h2c (HTTP/2 prior knowledge) listener, an
    HTTPS+HTTP/2 listener, and an HTTPS listener that requires a client certificate
    (ssl_verify_client on);
  - tinyproxy (an HTTP proxy that adds a Via header);
  - microsocks (a SOCKS5 proxy with a user name and password).
Certificates come from openssl: a CA, a server certificate for 127.0.0.1 and localhost, a client
certificate with a passphrase-protected key. Missing Debian packages (nginx-light, tinyproxy,
microsocks, brotli, zstd, openssl) are installed with apt-get.

Usage:
  transport_servers.py --json           prints one JSON line of endpoints, runs until stdin closes
  transport_servers.py -- PROGRAM ARGS  runs PROGRAM with RQ_TX_<NAME> environment variables (one
                                        per endpoint) and exits with its status
As a module: `with TransportServers() as s: s.endpoints[...]`.
"""

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PACKAGES = {"nginx": "nginx-light", "tinyproxy": "tinyproxy", "microsocks": "microsocks",
            "brotli": "brotli", "zstd": "zstd", "openssl": "openssl", "stunnel4": "stunnel4"}
TEXT = b"".join(b"line %05d: the quick brown fox jumps over the lazy dog\n" % i for i in range(2000))


def ensure_packages():
    missing = [pkg for tool, pkg in PACKAGES.items()
               if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool)]
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + missing
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, name, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on port {port}")


def run(*cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


class TransportServers:
    def __init__(self):
        self.dir = None
        self.procs = []
        self.endpoints = {}

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        ensure_packages()
        d = self.dir = tempfile.mkdtemp(prefix="rq-transport-")
        self.make_certs(d)
        www = os.path.join(d, "www")
        os.mkdir(www)
        os.mkdir(os.path.join(d, "uploads"))
        with open(os.path.join(www, "text.txt"), "wb") as f:
            f.write(TEXT)
        with open(os.path.join(www, "big.bin"), "wb") as f:  # /files/big.bin: 4 MiB that do not compress
            f.write(os.urandom(4 << 20))
        run("brotli", "-k", "-f", os.path.join(www, "text.txt"))
        run("zstd", "-q", "-k", "-f", os.path.join(www, "text.txt"))
        ports = {name: free_port() for name in ("http", "h2c", "tls", "mtls", "proxy", "socks", "tls_proxy")}
        sock = os.path.join(d, "nginx.sock")
        self.write_nginx(d, www, ports, sock)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.spawn("nginx", [nginx, "-p", d, "-c", os.path.join(d, "nginx.conf")])
        for name in ("http", "h2c", "tls", "mtls"):
            wait_port(ports[name], self.procs[-1][1], "nginx")
        conf = os.path.join(d, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write(f"Port {ports['proxy']}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\n"
                    f"MaxClients 50\nLogLevel Error\nLogFile \"{d}/tinyproxy.log\"\nPidFile \"{d}/tinyproxy.pid\"\n"
                    "DisableViaHeader No\nViaProxyName \"rqtestproxy\"\n")
        self.spawn("tinyproxy", ["tinyproxy", "-d", "-c", conf])
        wait_port(ports["proxy"], self.procs[-1][1], "tinyproxy")
        stunnel = os.path.join(d, "stunnel.conf")
        with open(stunnel, "w") as f:  # an https proxy: TLS in front of tinyproxy
            f.write(f"foreground = yes\npid =\n[proxy]\naccept = 127.0.0.1:{ports['tls_proxy']}\n"
                    f"connect = 127.0.0.1:{ports['proxy']}\ncert = {d}/server.pem\nkey = {d}/server-key.pem\n")
        self.spawn("stunnel", ["stunnel4", stunnel])
        wait_port(ports["tls_proxy"], self.procs[-1][1], "stunnel")
        self.spawn("microsocks", ["microsocks", "-i", "127.0.0.1", "-p", str(ports["socks"]),
                                  "-u", "rquser", "-P", "rqpass"])
        wait_port(ports["socks"], self.procs[-1][1], "microsocks")
        pin = self.pin(os.path.join(d, "server.pem"))
        self.endpoints = {
            "http": f"http://127.0.0.1:{ports['http']}",
            "http_port": str(ports["http"]),
            "h2c": f"http://127.0.0.1:{ports['h2c']}",
            "tls": f"https://127.0.0.1:{ports['tls']}",
            "tls_localhost": f"https://localhost:{ports['tls']}",
            "mtls": f"https://127.0.0.1:{ports['mtls']}",
            "unix_socket": sock,
            "ca": os.path.join(d, "ca.pem"),
            "ca_dir": os.path.join(d, "cadir"),
            "client_cert": os.path.join(d, "client.pem"),
            "client_key": os.path.join(d, "client-key.pem"),
            "key_password": "rqsecret",
            "pin": pin,
            "wrong_pin": "sha256//" + base64.b64encode(hashlib.sha256(b"not the key").digest()).decode(),
            "proxy": f"http://127.0.0.1:{ports['proxy']}",
            "https_proxy": f"https://127.0.0.1:{ports['tls_proxy']}",
            "socks": f"socks5h://rquser:rqpass@127.0.0.1:{ports['socks']}",
            "socks_bad_password": f"socks5://rquser:wrong@127.0.0.1:{ports['socks']}",
            "text_size": str(len(TEXT)),
            "text_sha256": hashlib.sha256(TEXT).hexdigest(),
            "tmp": d,
            "www": www,
            "uploads": os.path.join(d, "uploads"),
        }

    def spawn(self, name, cmd):
        log = open(os.path.join(self.dir, name + ".out"), "wb")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, proc))

    def stop(self):
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs = []
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    @staticmethod
    def make_certs(d):
        def p(name):
            return os.path.join(d, name)
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", p("ca-key.pem"),
            "-out", p("ca.pem"), "-subj", "/CN=rq test CA")
        ext = p("server.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for name, subject, extra in (("server", "/CN=127.0.0.1", ["-extfile", ext]), ("client", "/CN=rq-client", [])):
            run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", p(name + "-plain-key.pem"),
                "-out", p(name + ".csr"), "-subj", subject)
            run("openssl", "x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.pem"), "-CAkey", p("ca-key.pem"),
                "-CAcreateserial", "-days", "2", "-out", p(name + ".pem"), *extra)
        os.rename(p("server-plain-key.pem"), p("server-key.pem"))
        run("openssl", "pkey", "-in", p("client-plain-key.pem"), "-aes256", "-passout", "pass:rqsecret",
            "-out", p("client-key.pem"))
        os.mkdir(p("cadir"))
        shutil.copy(p("ca.pem"), p("cadir/ca.pem"))
        run("openssl", "rehash", p("cadir"))

    @staticmethod
    def pin(cert):
        der = subprocess.run(
            "openssl x509 -in '%s' -pubkey -noout | openssl pkey -pubin -outform der" % cert,
            shell=True, check=True, stdout=subprocess.PIPE).stdout
        return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()

    @staticmethod
    def write_nginx(d, www, ports, sock):
        common = f"""
        location = /text {{ default_type text/plain; alias {www}/text.txt; }}
        location = /br {{ default_type text/plain; add_header Content-Encoding br; alias {www}/text.txt.br; gzip off; }}
        location = /zstd {{ default_type text/plain; add_header Content-Encoding zstd; alias {www}/text.txt.zst; gzip off; }}
        location = /bad-gzip {{ default_type text/plain; add_header Content-Encoding gzip; return 200 "not gzip at all"; }}
        location = /ua {{ default_type text/plain; return 200 "$http_user_agent"; }}
        location = /ae {{ default_type text/plain; return 200 "$http_accept_encoding"; }}
        location = /via {{ default_type text/plain; return 200 "via=$http_via"; }}
        location = /host {{ default_type text/plain; return 200 "$host"; }}
        location = /cookies {{ default_type text/plain; return 200 "cookie=$http_cookie"; }}
        location = /cookies/set {{ default_type text/plain; add_header Set-Cookie "$arg_name=$arg_value; Path=/"; return 200 "set"; }}
        location = /cookies/set-domain {{ default_type text/plain; add_header Set-Cookie "$arg_name=$arg_value; Domain=$arg_domain; Path=/"; return 200 "set"; }}
        location = /proto {{ default_type text/plain; return 200 "$server_protocol client=$ssl_client_s_dn"; }}
        location = /to-ua {{ return 307 /ua; }}
        location = /trailers {{ default_type text/plain; add_trailer X-Checksum "abc"; return 200 "with trailers"; }}
        location = /x-default {{ default_type text/plain; return 200 "x-default=$http_x_default x-own=$http_x_own"; }}
        location /files/ {{ default_type text/plain; alias {www}/; }}
        location /upload/ {{ dav_methods PUT; client_max_body_size 16m; alias {d}/uploads/; }}
        """
        conf = f"""
daemon off;
master_process off;
worker_processes 1;
error_log {d}/nginx-error.log error;
pid {d}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    gzip on;
    gzip_min_length 0;
    gzip_types text/plain application/json;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{ports['http']};
        listen unix:{sock};
        {common}
    }}
    server {{
        listen 127.0.0.1:{ports['h2c']} http2;
        {common}
    }}
    server {{
        listen 127.0.0.1:{ports['tls']} ssl http2;
        ssl_certificate {d}/server.pem;
        ssl_certificate_key {d}/server-key.pem;
        ssl_session_cache shared:rqtls:1m;
        location = /tls-session {{ default_type text/plain; return 200 "session=$ssl_session_reused"; }}
        {common}
    }}
    server {{
        listen 127.0.0.1:{ports['mtls']} ssl http2;
        ssl_certificate {d}/server.pem;
        ssl_certificate_key {d}/server-key.pem;
        ssl_client_certificate {d}/ca.pem;
        ssl_verify_client on;
        {common}
    }}
}}
"""
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)


def main(argv):
    with TransportServers() as servers:
        if argv[:1] == ["--json"]:
            print(json.dumps(servers.endpoints), flush=True)
            sys.stdin.read()
            return 0
        if argv[:1] == ["--"]:
            argv = argv[1:]
        if not argv:
            print(__doc__, file=sys.stderr)
            return 2
        env = dict(os.environ)
        for name, value in servers.endpoints.items():
            env["RQ_TX_" + name.upper()] = value
        return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
