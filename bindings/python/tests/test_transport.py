"""Transport settings (issue 17) as keyword arguments, against real nginx, tinyproxy and microsocks
started by Tests/Fixtures/transport_servers.py."""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterator, Tuple

import pytest

import requestqueue as rq
from conftest import ROOT

sys.path.insert(0, str(ROOT / "Tests" / "Fixtures"))
from transport_servers import TransportServers  # noqa: E402


@pytest.fixture(scope="module")
def tx() -> Iterator[Dict[str, str]]:
    with TransportServers() as servers:
        yield servers.endpoints


def get(url: str, queue: Any = None, **options: Any) -> rq.Response:
    """The response, whatever its outcome (fetch would raise on failures)."""
    if queue is None:
        with rq.Queue() as q:
            return get(url, q, **options)
    request = queue.add(url, **options)
    queue.wait()
    assert request.response is not None
    return request.response


def test_content_decoding_gzip_br_zstd_and_opt_out(tx: Dict[str, str]) -> None:
    size = int(tx["text_size"])
    for path, encoding in (("/text", "gzip"), ("/br", "br"), ("/zstd", "zstd")):
        response = get(tx["http"] + path)
        assert response.headers["content-encoding"] == encoding
        assert len(response.body) == size and response.text.startswith("line 00000")
    raw = get(tx["http"] + "/text", decode_content=False, headers={"Accept-Encoding": "gzip"})
    assert raw.body[:2] == b"\x1f\x8b" and len(raw.body) < size
    assert get(tx["http"] + "/ae", decode_content=False).body == b""
    assert get(tx["http"] + "/bad-gzip").outcome == rq.Outcome.BAD_RESPONSE


def test_user_agent_default_request_and_queue(tx: Dict[str, str]) -> None:
    assert get(tx["http"] + "/ua").text.startswith(f"librequestqueue/{rq.library_version()} libcurl/")
    assert get(tx["http"] + "/ua", user_agent="mine/1").text == "mine/1"
    with rq.Queue(defaults={"user_agent": "queue/2"}) as q:
        assert get(tx["http"] + "/ua", q).text == "queue/2"
        assert get(tx["http"] + "/ua", q, user_agent="own/3").text == "own/3"


def test_queue_defaults_and_precedence(tx: Dict[str, str]) -> None:
    with rq.Queue(defaults={"headers": {"X-Default": "from-queue"}, "max_response_size": 100}) as q:
        assert get(tx["http"] + "/x-default", q, headers={"X-Own": "o"}).text == "x-default=from-queue x-own=o"
        assert get(tx["http"] + "/x-default", q, headers={"X-Default": "mine"}).text == "x-default=mine x-own="
        assert get(tx["http"] + "/text", q).outcome == rq.Outcome.RESPONSE_TOO_LARGE
        assert get(tx["http"] + "/text", q, max_response_size=0).ok
    with pytest.raises(TypeError):
        rq.Queue(defaults={"on_complete": print})


def test_proxies(tx: Dict[str, str]) -> None:
    with rq.Queue(max_concurrent=1) as q:
        assert "rqtestproxy" in get(tx["http"] + "/via", q, proxy=tx["proxy"]).text
        assert get(tx["http"] + "/via", q).text == "via="  # the same handle, without the proxy
        assert get(tx["http"] + "/via", q, proxy=tx["proxy"], no_proxy=["127.0.0.1"]).text == "via="
        assert "rqtestproxy" in get(tx["http"] + "/via", q, proxy=tx["https_proxy"], proxy_ca_file=tx["ca"]).text
        assert not get(tx["http"] + "/via", q, proxy=tx["https_proxy"]).ok  # its CA is not the system's
        assert get(tx["http"] + "/ua", q, proxy=tx["socks"]).ok
        assert not get(tx["http"] + "/ua", q, proxy=tx["socks_bad_password"]).ok
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(tx["http"], proxy="ftp://proxy:21")


def test_tls_client_certificate_pinning_and_unsafe_switch(tx: Dict[str, str]) -> None:
    with rq.Queue(max_concurrent=1, defaults={"ca_file": tx["ca"]}) as q:
        assert get(tx["mtls"] + "/proto", q).status == 400
        response = get(tx["mtls"] + "/proto", q, client_cert=tx["client_cert"], client_key=tx["client_key"],
                       key_password=tx["key_password"])
        assert response.status == 200 and "client=CN=rq-client" in response.text
        assert get(tx["tls"] + "/proto", q, pinned_public_key=tx["pin"]).ok
        assert get(tx["tls"] + "/proto", q, pinned_public_key=tx["wrong_pin"]).outcome == rq.Outcome.TLS
        assert get(tx["tls"] + "/proto", q, tls_min_version="1.3").outcome == rq.Outcome.TLS
    with rq.Queue(max_concurrent=1) as q:
        assert get(tx["tls"] + "/proto", q, unsafe_no_tls_verify=True).ok
        assert get(tx["tls"] + "/proto", q).outcome == rq.Outcome.TLS
        assert get(tx["tls"] + "/proto", q, ca_dir=tx["ca_dir"]).ok


def test_connections_unix_socket_resolve_ip_version(tx: Dict[str, str]) -> None:
    with rq.Queue(max_concurrent=1) as q:
        assert get("http://via-socket.invalid/host", q, unix_socket=tx["unix_socket"]).text == "via-socket.invalid"
        pinned = f"http://pinned.invalid:{tx['http_port']}/host"
        assert get(pinned, q, resolve=[f"pinned.invalid:{tx['http_port']}:127.0.0.1"]).text == "pinned.invalid"
        assert get(pinned, q).outcome == rq.Outcome.CANNOT_RESOLVE_HOST
        assert not get(tx["http"] + "/host", q, ip_version=6).ok
        assert get(tx["http"] + "/host", q, ip_version=4, tcp_keepalive=30, max_recv_speed=10**6).ok


def test_http_version_reported(tx: Dict[str, str]) -> None:
    with rq.Queue(max_concurrent=1, defaults={"ca_file": tx["ca"]}) as q:
        # The version is in the response and in its metrics.
        def versions(url: str, **options: Any) -> Tuple[int, int]:
            response = get(url, q, **options)
            assert response.metrics is not None
            return response.http_version, response.metrics.http_version

        assert versions(tx["http"] + "/proto") == (11, 11)
        assert versions(tx["tls"] + "/proto") == (20, 20)
        assert versions(tx["tls"] + "/proto", http_version="1.1") == (11, 11)
        for _ in range(3):  # (h2c connections are not kept: Debian's libcurl breaks them)
            response = get(tx["h2c"] + "/proto", q, http_version="2-prior-knowledge")
            assert response.http_version == 20 and response.text.startswith("HTTP/2.0")
            assert response.metrics is not None and response.metrics.http_version == 20
        assert versions("http://127.0.0.1:1/proto") == (0, 0)  # no response


def test_cookies_jar_list_save_clear_load(tx: Dict[str, str], tmp_path: Any) -> None:
    with rq.Queue(max_concurrent=1, defaults={"cookies": True}) as q:
        assert get(tx["http"] + "/cookies/set?name=flavour&value=oat", q).ok
        assert get(tx["http"] + "/cookies", q).text == "cookie=flavour=oat"
        assert get(tx["http"] + "/cookies", q, cookies=False).text == "cookie="
        [cookie] = q.cookies()
        assert (cookie.name, cookie.value, cookie.domain) == ("flavour", "oat", "127.0.0.1")
        q.save_cookies(tmp_path / "jar.txt")
        q.clear_cookies()
        assert q.cookies() == []
        q.load_cookies(tmp_path / "jar.txt")
        assert get(tx["http"] + "/cookies", q).text == "cookie=flavour=oat"
        with pytest.raises(OSError):
            q.load_cookies(tmp_path / "missing.txt")


def test_connection_limits(tx: Dict[str, str]) -> None:
    with rq.Queue(max_concurrent=3, max_connections=1) as q:
        requests = [q.add(tx["http"] + f"/text?{i}") for i in range(3)]
        q.wait()
        reused = [r.result().metrics.connection_reused for r in requests]  # type: ignore[union-attr]
        assert sum(reused) == 2


def test_httpx_transport_decodes_once_and_passes_transport_options(tx: Dict[str, str]) -> None:
    httpx = pytest.importorskip("httpx")
    import requestqueue.httpx as rqx

    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        response = client.get(tx["http"] + "/text")  # httpx asks for gzip and decodes it itself
        assert response.headers["content-encoding"] == "gzip"
        assert len(response.content) == int(tx["text_size"])
    with httpx.Client(transport=rqx.HTTPTransport(proxy=tx["proxy"])) as client:
        assert "rqtestproxy" in client.get(tx["http"] + "/via").text
    with httpx.Client(transport=rqx.HTTPTransport(verify=False)) as client:  # unsafe: no check
        assert client.get(tx["tls"] + "/proto").text.startswith("HTTP/2.0")


def test_a_streamed_decoded_body_stays_bounded_in_memory(tx: Dict[str, str]) -> None:
    # 64 MiB of zeros, gzip-compressed by nginx to about 290 KB on the wire, read by a slow on_body:
    # the transfer pauses, and libcurl holds at most one 16 KiB read's decoded output meanwhile.
    import resource
    import time

    size = 64 << 20
    with open(f"{tx['www']}/zeros.txt", "wb") as f:
        chunk = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            f.write(chunk)
    received = [0]

    def on_body(request: Any, data: bytes, offset: int) -> None:
        received[0] += len(data)
        time.sleep(0.0002)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with rq.Queue() as q:
        request = q.add(tx["http"] + "/files/zeros.txt", on_body=on_body)
        q.wait()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert request.response is not None and request.response.headers["content-encoding"] == "gzip"
    assert received[0] == size
    assert grown_kib < 32 * 1024, f"peak RSS grew by {grown_kib} KiB while streaming a 64 MiB decoded body"
