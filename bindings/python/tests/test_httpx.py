"""requestqueue.httpx: the real httpx (Client and AsyncClient, in their own usage patterns) with the
transports, against the fixture server."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")  # scripts/test-python installs it

import requestqueue as rq  # noqa: E402
import requestqueue.httpx as rqx  # noqa: E402

from conftest import pattern  # noqa: E402


def run(coro):
    return asyncio.run(coro)


def test_async_client_gather_respects_max_concurrent(server, uid):
    async def main():
        transport = rqx.AsyncHTTPTransport(max_concurrent=2)
        async with httpx.AsyncClient(transport=transport) as client:
            responses = await asyncio.gather(*(
                client.get(server.url(f"/bytes?n={100 + i}&delay=0.2&id={uid}&group={uid}"))
                for i in range(6)))
            assert transport.queue.stats.succeeded == 6
        assert transport.queue.closed  # the client closed its transport's own queue
        return responses

    responses = run(main())
    assert [r.status_code for r in responses] == [200] * 6
    assert [r.content for r in responses] == [pattern(100 + i) for i in range(6)]
    assert isinstance(responses[0], httpx.Response)
    assert server.log()["peaks"][uid] == 2  # never more than max_concurrent at the server


def test_duplicates_are_all_sent(server, uid):
    async def main():
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            url = server.url(f"/bytes?n=10&delay=0.1&id={uid}")
            return await asyncio.gather(*(client.get(url) for _ in range(3)))

    responses = run(main())
    assert [r.status_code for r in responses] == [200] * 3
    assert len(server.requests(id=uid)) == 3


def test_given_queue_must_allow_duplicates():
    with rq.Queue() as queue:  # duplicates="cancel_earlier" by default
        with pytest.raises(ValueError, match="allow"):
            rqx.HTTPTransport(queue)
    with rq.Queue(duplicates="allow") as queue:
        transport = rqx.HTTPTransport(queue)
        transport.close()
        assert not queue.closed  # a given queue stays the caller's


def test_client_stream_iterates_the_body(server, uid):
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with client.stream("GET", server.url(f"/bytes?n=300000&id={uid}")) as response:
            assert response.status_code == 200
            received = b"".join(response.iter_bytes())
    assert received == pattern(300000)


def test_async_stream_and_headers(server, uid):
    async def main():
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            async with client.stream("GET", server.url(f"/bytes?n=5000&id={uid}")) as response:
                chunks = [chunk async for chunk in response.aiter_bytes()]
                return response, b"".join(chunks)

    response, body = run(main())
    assert body == pattern(5000)
    assert response.headers["content-length"] == "5000"


def test_request_headers_params_and_bodies(server):
    def chunks():
        yield b"it"
        yield b"erator"

    with httpx.Client(transport=rqx.HTTPTransport(), headers={"X-Client": "yes"}) as client:
        echo = client.post(server.url("/echo"), params={"q": "a b"}, content=b"raw bytes",
                           headers={"X-One": "1"}).json()
        assert echo["method"] == "POST" and echo["path"] == "/echo?q=a+b"
        assert echo["body"] == "raw bytes" and echo["headers"]["content-length"] == "9"
        assert echo["headers"]["x-one"] == "1" and echo["headers"]["x-client"] == "yes"
        assert echo["headers"]["user-agent"].startswith("python-httpx/")
        streamed = client.put(server.url("/echo"), content=chunks()).json()
        assert streamed["method"] == "PUT" and streamed["body"] == "iterator"
        # httpx sends an iterator chunked; the queue reads it whole and sends its length instead.
        assert streamed["headers"]["content-length"] == "8"
        assert "transfer-encoding" not in streamed["headers"]
        form = client.post(server.url("/echo"), data={"a": "1", "b": "x y"}).json()
        assert form["body"] == "a=1&b=x+y"
        assert form["headers"]["content-type"] == "application/x-www-form-urlencoded"
        upload = client.post(server.url("/echo"), files={"f": ("n.txt", b"hello", "text/plain")}).json()
        assert 'filename="n.txt"' in upload["body"] and "hello" in upload["body"]


def test_async_iterator_body(server):
    async def chunks():
        for piece in (b"async ", b"pieces"):
            await asyncio.sleep(0)
            yield piece

    async def main():
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            return (await client.post(server.url("/echo"), content=chunks())).json()

    echo = run(main())
    assert echo["body"] == "async pieces" and echo["headers"]["content-length"] == "12"


def test_status_errors_are_responses_and_redirects_are_httpx_s(server):
    with httpx.Client(transport=rqx.HTTPTransport(), follow_redirects=True) as client:
        response = client.get(server.url("/status/404"))
        assert response.status_code == 404 and response.text == "status 404"
        with pytest.raises(httpx.HTTPStatusError):
            response.raise_for_status()
        redirected = client.get(server.url("/redirect/2"))
        assert redirected.status_code == 200 and redirected.text == "redirected"
        assert [r.status_code for r in redirected.history] == [302, 302]  # httpx followed them
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        assert client.get(server.url("/redirect/1")).status_code == 302


def test_timeouts_map_to_httpx(server, uid):
    with httpx.Client(transport=rqx.HTTPTransport(), timeout=httpx.Timeout(5.0, read=0.3)) as client:
        with pytest.raises(httpx.ReadTimeout) as info:
            client.get(server.url(f"/stall?s=30&id={uid}"))
        assert info.value.request.url == server.url(f"/stall?s=30&id={uid}")
    assert len(server.requests(id=uid)) == 1


@pytest.mark.parametrize("method,content", [("GET", None), ("POST", b"payload")])
def test_a_read_timeout_shorter_than_the_write_timeout_is_honoured(server, uid, method, content):
    # httpx.Timeout(10.0, read=0.5): the server must start answering within 0.5 s. It closes after
    # 3 s without a byte: a ReadTimeout, not the "empty reply" seen when the write timeout (10 s)
    # was the limit.
    with httpx.Client(transport=rqx.HTTPTransport(), timeout=httpx.Timeout(10.0, read=0.5)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.request(method, server.url(f"/stall?s=3&id={uid}"), content=content)
    assert len(server.requests(id=uid)) == 1


@pytest.mark.parametrize("status", [200, 404])
def test_http_version_is_the_servers(server, status):
    # An HTTP/1.0 server: httpx's own transport says "HTTP/1.0" (a 2xx is returned at its head,
    # another status with its whole body: both ways).
    reply = f"HTTP/1.0 {status} X\r\nContent-Length: 2\r\n\r\nhi".encode()
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        response = client.get(server.raw_url(reply))
        assert (response.status_code, response.http_version, response.content) == (status, "HTTP/1.0", b"hi")
        assert client.get(server.url("/bytes?n=3")).http_version == "HTTP/1.1"


@pytest.mark.parametrize("status", [200, 404])
def test_header_bytes_beyond_ascii_reach_httpx_as_sent(server, status):
    # A UTF-8 file name in Content-Disposition, a Latin-1 byte: httpx's own transport hands httpx
    # the bytes and httpx decodes them (before: UnicodeEncodeError, httpx encoding str as ASCII).
    reply = (f"HTTP/1.1 {status} X\r\n".encode() + b"Content-Disposition: attachment; filename=\"caf\xc3\xa9.pdf\"\r\n"
             b"X-Latin: caf\xe9\r\nContent-Length: 2\r\n\r\nhi")
    expected = [(b"Content-Disposition", b'attachment; filename="caf\xc3\xa9.pdf"'), (b"X-Latin", b"caf\xe9"),
                (b"Content-Length", b"2")]
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        response = client.get(server.raw_url(reply))
        assert (response.status_code, response.headers.raw, response.content) == (status, expected, b"hi")

    async def main():
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            response = await client.get(server.raw_url(reply))
            assert (response.status_code, response.headers.raw, response.content) == (status, expected, b"hi")
    run(main())


def test_connection_errors_map_to_httpx(server):
    port = server.closed_port()
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            client.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx.ReadError):
            client.get(server.url("/reset"))
        # Closed without a response, or inside its body: httpx's own transport says
        # RemoteProtocolError ("Server disconnected without sending a response.", "peer closed
        # connection without sending complete message body").
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(server.url("/stall?s=0.2"))
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(server.url("/truncated?n=1000"))
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(server.raw_url(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
        with pytest.raises(httpx.UnsupportedProtocol):
            client.get("ftp://127.0.0.1/")


def test_retries_retry_failed_connections(server):
    port = server._get("/_/refuse-then-accept?after=0.4")["port"]
    with httpx.Client(transport=rqx.HTTPTransport(retries=5)) as client:
        response = client.get(f"http://127.0.0.1:{port}/bytes?n=7")
    assert response.status_code == 200 and response.content == pattern(7)


def test_cancelling_the_task_cancels_the_request(server, uid):
    async def main():
        transport = rqx.AsyncHTTPTransport()
        async with httpx.AsyncClient(transport=transport, timeout=None) as client:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.get(server.url(f"/stall?s=30&id={uid}")), 0.3)
            assert transport.queue.count == 0
            return transport.queue.stats

    stats = run(main())
    assert stats.cancelled == 1 and stats.succeeded == 0
    assert len(server.requests(id=uid)) == 1


def test_queue_options_and_per_request_extensions(server, uid):
    async def main():
        queue = rq.AsyncQueue(max_concurrent=1, duplicates="allow", suspended=True)
        transport = rqx.AsyncHTTPTransport(queue, tag="mine")
        async with httpx.AsyncClient(transport=transport) as client:
            low = asyncio.ensure_future(client.get(server.url(f"/bytes?n=1&id={uid}&k=low")))
            await asyncio.sleep(0.05)
            high = asyncio.ensure_future(client.get(server.url(f"/bytes?n=1&id={uid}&k=high"),
                                                    extensions={"requestqueue": {"priority": "high"}}))
            while queue.count_tag("mine") < 2:
                await asyncio.sleep(0.01)
            queue.resume()
            await asyncio.gather(low, high)
        assert not queue.closed
        await queue.aclose()

    run(main())
    assert [e["path"].rsplit("=", 1)[1] for e in server.requests(id=uid)] == ["high", "low"]


def test_sync_client_shared_by_threads(server, uid):
    results = []
    with httpx.Client(transport=rqx.HTTPTransport(max_concurrent=3)) as client:
        def fetch(i):
            results.append(client.get(server.url(f"/bytes?n={i}&delay=0.1&id={uid}&group={uid}")).content)

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results, key=len) == [pattern(i) for i in range(8)]
    assert server.log()["peaks"][uid] <= 3


def test_https_with_verify_ca_file(https_server, tls_files):
    cert, _ = tls_files
    with httpx.Client(transport=rqx.HTTPTransport(verify=str(cert))) as client:
        assert client.get(https_server.url("/bytes?n=3")).content == pattern(3)
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with pytest.raises(httpx.ConnectError):  # the system CAs do not trust the test certificate
            client.get(https_server.url("/bytes?n=3"))
    with httpx.Client(transport=rqx.HTTPTransport(verify=False)) as client:  # unsafe: no certificate check
        assert client.get(https_server.url("/bytes?n=3")).content == pattern(3)


def test_unknown_transport_option_is_refused():
    with pytest.raises(TypeError, match="unknown option"):
        rqx.HTTPTransport(stream=True)  # type: ignore[call-arg]


def test_echo_json_roundtrip(server):
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        echo = client.post(server.url("/echo"), json={"k": [1, 2]}).json()
    assert json.loads(echo["body"]) == {"k": [1, 2]}
    assert echo["headers"]["content-type"] == "application/json"


# -- streamed bodies: the response comes with the head, its body as it arrives -------------------------

def _entry_when(server, uid, condition):
    """The server's log entry of request id=uid once `condition(entry)` holds (fails after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        entries = server.requests(id=uid)
        if entries and condition(entries[0]):
            return entries[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"the server's entry of {uid} never matched: {entries}")
        time.sleep(0.01)


def test_client_stream_returns_the_head_while_the_server_holds_the_body(server, uid):
    url = server.url(f"/hold?key={uid}&n=100000&first=10&id={uid}")
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with client.stream("GET", url) as response:
            # The server has sent the head and 10 bytes, and holds the rest until released.
            assert response.status_code == 200
            assert response.headers["content-length"] == "100000"
            pieces = response.iter_bytes()
            assert next(pieces) == pattern(10)
            assert server.requests(id=uid)[0]["end"] is None
            server._get(f"/_/release?key={uid}")
            rest = b"".join(pieces)
    assert pattern(10) + rest == pattern(100000)


def test_async_client_stream_returns_the_head_while_the_server_holds_the_body(server, uid):
    async def main():
        url = server.url(f"/hold?key={uid}&n=100000&first=10&id={uid}")
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            async with client.stream("GET", url) as response:
                assert response.status_code == 200
                assert response.headers["content-length"] == "100000"
                pieces = response.aiter_bytes()
                first = await pieces.__anext__()
                assert first == pattern(10)
                assert server.requests(id=uid)[0]["end"] is None
                await asyncio.get_running_loop().run_in_executor(None, server._get, f"/_/release?key={uid}")
                return first + b"".join([piece async for piece in pieces])

    assert run(main()) == pattern(100000)


def test_closing_a_streamed_response_early_cancels_the_request(server, uid):
    url = server.url(f"/hold?key={uid}&n=100000&first=10&id={uid}")
    transport = rqx.HTTPTransport()
    with httpx.Client(transport=transport) as client:
        with client.stream("GET", url) as response:
            assert response.status_code == 200
        # Left without reading the body: the request is cancelled and the connection closed.
        assert _entry_when(server, uid, lambda e: e.get("client_gone"))["client_gone"] is True
        assert transport.queue.stats.cancelled == 1


def test_async_closing_a_streamed_response_early_cancels_the_request(server, uid):
    async def main():
        url = server.url(f"/hold?key={uid}&n=100000&first=10&id={uid}")
        transport = rqx.AsyncHTTPTransport()
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("GET", url) as response:
                assert response.status_code == 200
                async for piece in response.aiter_bytes():
                    assert piece == pattern(10)
                    break
            await asyncio.get_running_loop().run_in_executor(
                None, _entry_when, server, uid, lambda e: e.get("client_gone"))
            return transport.queue.stats.cancelled

    assert run(main()) == 1
    assert server.requests(id=uid)[0]["client_gone"] is True


def test_an_endless_body_is_read_as_it_arrives(server, uid):
    # /trickle without n= sends 1000-byte pieces until the client leaves.
    url = server.url(f"/trickle?every=0.001&size=1000&id={uid}")
    received = 0
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with client.stream("GET", url) as response:
            assert response.status_code == 200
            for piece in response.iter_bytes():
                received += len(piece)
                if received >= 50000:
                    break
    assert received >= 50000
    _entry_when(server, uid, lambda e: e["end"] is not None)


def test_a_retried_status_is_not_returned_and_the_final_body_streams(server, uid):
    url = server.url(f"/flaky?key={uid}&fail=1&mode=status&code=503&n=3000&id={uid}")
    transport = rqx.HTTPTransport(retry=True, retry_statuses=[503], retry_delay=0.01)
    with httpx.Client(transport=transport) as client:
        response = client.get(url)
    assert response.status_code == 200 and response.headers["x-attempt"] == "2"
    assert response.content == pattern(3000)


def test_an_error_status_comes_with_its_whole_body(server, uid):
    async def main():
        async with httpx.AsyncClient(transport=rqx.AsyncHTTPTransport()) as client:
            async with client.stream("GET", server.url(f"/bytes?n=2000&status=404&id={uid}")) as response:
                return response.status_code, await response.aread()

    assert run(main()) == (404, pattern(2000))


def test_a_connection_lost_after_the_head_raises_while_reading(server, uid):
    with httpx.Client(transport=rqx.HTTPTransport()) as client:
        with client.stream("GET", server.url(f"/truncated?n=10000&id={uid}")) as response:
            assert response.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):  # as httpx's own transport
                response.read()
