"""HTTP conformance through the binding (the C side is Tests/c/test_conformance.c): removing a
default header with None, the charset of Content-Type, repeated and folded response headers,
redirect methods, and no silent resending of a POST on a kept connection."""

from __future__ import annotations

import base64

import pytest

import requestqueue as rq


@pytest.fixture
def queue():
    with rq.Queue(max_concurrent=1) as q:
        yield q


def raw(server, text: bytes) -> str:
    return server.url("/raw?b64=" + base64.urlsafe_b64encode(text).decode().rstrip("="))


def sent_headers(response) -> dict:
    return {name.lower(): value for name, value in response.json()["headers"]}


def test_none_removes_a_header_the_library_would_send(server, queue):
    headers = sent_headers(queue.fetch(server.url("/inspect")))
    assert {"accept", "user-agent", "accept-encoding"} <= set(headers)
    removed = sent_headers(queue.fetch(server.url("/inspect"),
                                       headers={"Accept": None, "User-Agent": None, "Accept-Encoding": None}))
    assert not {"accept", "user-agent", "accept-encoding"} & set(removed)


def test_a_content_length_list_of_equal_values_is_that_length(server, queue):
    # RFC 9112 6.3: "5, 5" (the field sent twice and combined) is processed as 5; different values
    # are refused.
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello"
    assert queue.fetch(raw(server, reply)).body == b"hello"
    with pytest.raises(rq.BadResponseError):
        queue.fetch(raw(server, b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!"))


def test_text_uses_the_charset_of_content_type(server, queue):
    response = queue.fetch(server.url("/text?s=%C3%A9t%C3%A9&charset=iso-8859-1"))
    assert response.body == "été".encode("latin-1")
    assert response.encoding == "iso-8859-1" and response.text == "été"


def test_repeated_and_folded_headers(server, queue):
    response = queue.fetch(raw(server, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nSet-Cookie: a=1\r\n"
                                       b"set-cookie: b=2\r\nX-Folded: one\r\n two\r\n\r\n"))
    assert response.headers["SET-COOKIE"] == "a=1"
    assert response.headers.get_all("set-cookie") == ["a=1", "b=2"]
    assert response.headers["x-folded"] == "one two"


@pytest.mark.parametrize("method, status, then", [("POST", 302, "GET"), ("POST", 307, "POST"),
                                                   ("PUT", 302, "PUT"), ("PUT", 308, "PUT")])
def test_redirect_methods(server, queue, method, status, then):
    response = queue.fetch(server.url(f"/redirect-to?status={status}&url=/inspect"), method=method, body=b"data")
    seen = response.json()
    assert seen["method"] == then
    assert seen["body"] == ("" if then == "GET" else "data")


def test_a_303_to_a_put_is_delivered_not_followed(server, queue):
    response = queue.fetch(server.url("/redirect-to?status=303&url=/inspect"), method="PUT", body=b"data")
    assert response.status == 303 and response.headers["location"] == "/inspect"
    assert not server.requests(path_prefix="/inspect")


def test_a_post_is_not_sent_twice_unasked(server, queue, uid):
    queue.fetch(server.url("/bytes?n=1"))  # a kept connection, which /drop then closes unanswered
    with pytest.raises(rq.RequestError) as caught:
        queue.fetch(server.url(f"/drop?key={uid}&n=1"), method="POST", body=b"order")
    assert caught.value.response.outcome is rq.Outcome.CONNECTION_LOST
    assert "not sent again" in caught.value.response.message
    assert len(server.requests(path_prefix=f"/drop?key={uid}")) == 1
    queue.fetch(server.url("/bytes?n=1"))
    assert queue.fetch(server.url(f"/drop?key={uid}-get&n=1")).status == 200  # a GET is sent again
    assert len(server.requests(path_prefix=f"/drop?key={uid}-get")) == 2
