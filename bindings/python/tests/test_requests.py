"""Requests and responses, with the synchronous Queue: method, headers, body, timeouts, retry,
progress, authentication, errors mapped from outcomes, invalid input."""

from __future__ import annotations

import dataclasses
import threading
from typing import List
from urllib.parse import urlencode

import pytest

import requestqueue as rq


@pytest.fixture
def queue():
    with rq.Queue(max_concurrent=4) as q:
        yield q


# -- responses -------------------------------------------------------------------------------------


def test_fetch_returns_status_headers_body_url(server, queue):
    response = queue.fetch(server.url("/bytes?n=1000&header=X-Custom:hello%20there"))
    assert response.status == 200
    assert response.ok and response.outcome is rq.Outcome.OK and response.message == ""
    assert response.body == (b"abcdefghijklmnopqrstuvwxyz0123456789" * 28)[:1000]
    assert response.headers["x-custom"] == "hello there"
    assert response.headers["X-CUSTOM"] == "hello there"
    assert response.headers.get_all("content-length") == ["1000"]
    assert ("X-Custom", "hello there") in response.headers.raw
    assert "content-type" in response.headers and "nope" not in response.headers
    assert response.url == server.url("/bytes?n=1000&header=X-Custom:hello%20there")
    assert response.attempts == 1
    assert len(server.requests(path_prefix="/bytes")) == 1


def test_responses_are_ordinary_dataclass_instances(server, queue):
    # The binding builds them without calling __init__, and a Response reads some fields on first
    # use: they must still behave as instances holding every field, and once every field has been
    # read, hold nothing else (the library's response let go).
    response = queue.fetch(server.url("/bytes?n=10"))
    assert dataclasses.replace(response) == response
    for value in (response, response.metrics):
        assert set(vars(value)) == {field.name for field in dataclasses.fields(value)}
        assert dataclasses.replace(value) == value
    assert type(response.metrics.bytes_down) is int and type(response.metrics.connection_reused) is bool


def test_a_response_equals_one_made_from_its_fields(server, queue):
    response = queue.fetch(server.url("/bytes?n=10&header=X-A:b"))
    values = {field.name: getattr(response, field.name) for field in dataclasses.fields(rq.Response)}
    assert [type(v) for v in values.values()] == [str, int, rq.Headers, bytes, rq.Outcome, str, int, rq.Metrics, int]
    made = rq.Response(**values)
    assert made == response and response == made and repr(made) == repr(response)
    assert dataclasses.asdict(made) == dataclasses.asdict(response)
    assert dataclasses.astuple(response)[:3] == (values["url"], 200, values["headers"])
    other = queue.fetch(server.url("/bytes?n=11"))
    assert other != response and dataclasses.replace(other, body=b"x") != other
    with pytest.raises(dataclasses.FrozenInstanceError):
        other.url = "changed"  # type: ignore[misc]


def test_url_is_the_effective_one_after_redirects(server, queue):
    response = queue.fetch(server.url("/redirect/3"))
    assert response.status == 200 and response.body == b"redirected"
    assert response.url == server.url("/redirect/0")
    assert [e["path"] for e in server.requests()] == ["/redirect/3", "/redirect/2", "/redirect/1",
                                                      "/redirect/0"]


def test_method_headers_and_body_are_sent(server, queue):
    response = queue.fetch(server.url("/echo"), method="PUT",
                           headers={"X-One": "1", "X-Two": "two", "Accept": None},
                           body=b"\x00binary\xffbody")
    echo = response.json()
    assert echo["method"] == "PUT"
    assert echo["headers"]["x-one"] == "1" and echo["headers"]["x-two"] == "two"
    assert echo["body"] == "\x00binary\xffbody" and echo["body_len"] == 12
    logged = server.requests(path_prefix="/echo")[0]
    assert logged["method"] == "PUT" and logged["body_len"] == 12


def test_headers_as_pairs_and_str_body(server, queue):
    echo = queue.fetch(server.url("/echo"), method="POST", headers=[("X-A", "é"), ("X-B", b"raw")],
                       body="grüße").json()
    assert echo["body_len"] == len("grüße".encode())
    # The fixture decodes header bytes as Latin-1: UTF-8 was sent.
    assert echo["headers"]["x-a"].encode("latin-1").decode("utf-8") == "é"
    assert echo["headers"]["x-b"] == "raw"


def test_json_body_sets_content_type(server, queue):
    echo = queue.fetch(server.url("/echo"), method="POST", json={"a": [1, 2]}).json()
    assert echo["headers"]["content-type"] == "application/json"
    assert echo["body"] == '{"a": [1, 2]}'


def test_head_fetches_no_body(server, queue):
    response = queue.fetch(server.url("/bytes?n=5000"), method="HEAD")
    assert response.status == 200 and response.body == b""
    assert response.headers["content-length"] == "5000"


def test_response_text_uses_charset(server, queue):
    # Cyrillic in cp1251: bytes above 0x7f that are not UTF-8, so only the charset of Content-Type
    # gives the text back.
    text = "Привет, мир"
    response = queue.fetch(server.url("/text?" + urlencode({"s": text, "charset": "cp1251"})))
    assert response.headers["content-type"] == "text/plain; charset=cp1251"
    assert response.body == text.encode("cp1251")
    assert response.encoding == "cp1251" and response.text == text
    # No charset: UTF-8.
    response = queue.fetch(server.url("/text?" + urlencode({"s": "déjà vu €"})))
    assert response.headers["content-type"] == "text/plain"
    assert response.encoding == "utf-8" and response.text == "déjà vu €"


# -- errors ----------------------------------------------------------------------------------------


def test_http_status_error_carries_the_response(server, queue):
    request = queue.add(server.url("/status/404"))
    with pytest.raises(rq.HTTPStatusError) as info:
        request.result()
    error = info.value
    assert error.status == 404 and error.response.status == 404
    assert error.response.body == b"status 404"
    assert error.response.headers["x-status"] == "404"
    assert error.outcome is rq.Outcome.HTTP_STATUS
    assert error.request is request and request.response is error.response
    assert "404" in str(error)
    assert isinstance(error, rq.RequestError) and isinstance(error, rq.RequestQueueError)
    assert request.exception() is error


def test_connection_refused_is_connect_error(server, queue):
    port = server.closed_port()
    with pytest.raises(rq.ConnectError) as info:
        queue.fetch(f"http://127.0.0.1:{port}/")
    assert isinstance(info.value, ConnectionError) and isinstance(info.value, rq.NetworkError)
    assert info.value.response.status == 0 and info.value.outcome is rq.Outcome.CANNOT_CONNECT


def test_reset_and_truncated_are_connection_lost(server, queue):
    with pytest.raises(rq.ConnectionLostError):
        queue.fetch(server.url("/reset"))
    with pytest.raises(rq.ConnectionLostError):
        queue.fetch(server.url("/truncated?n=1000"))


def test_a_reply_that_is_not_http_is_bad_response(queue):
    # A real server on 127.0.0.1 that answers in another protocol (requestqueue.h, "What a server sends").
    import socket
    listener = socket.create_server(("127.0.0.1", 0))
    seen: List[bytes] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            seen.append(connection.recv(65536))
            connection.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with pytest.raises(rq.BadResponseError) as info:
            queue.fetch(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    finally:
        thread.join()
        listener.close()
    assert seen and seen[0].startswith(b"GET / HTTP/1.1\r\n")
    assert info.value.outcome is rq.Outcome.BAD_RESPONSE and info.value.response.status == 0


def test_too_many_redirects(server, queue):
    with pytest.raises(rq.TooManyRedirectsError):
        queue.fetch(server.url("/redirect/15"))


def test_timeout(server, queue, uid):
    with pytest.raises(rq.RequestTimeoutError) as info:
        queue.fetch(server.url(f"/stall?s=30&id={uid}"), timeout=0.3)
    assert isinstance(info.value, TimeoutError)
    assert info.value.outcome is rq.Outcome.TIMEOUT
    assert len(server.requests(id=uid)) == 1


def test_idle_timeout(server, queue):
    with pytest.raises(rq.RequestTimeoutError) as info:
        queue.fetch(server.url("/stall?s=30"), idle_timeout=1)
    assert info.value.outcome is rq.Outcome.TIMEOUT


def test_header_timeout_ends_headers_that_trickle(server, queue):
    # A header line every 0.1 s, never a blank line: never idle, never complete.
    with pytest.raises(rq.RequestTimeoutError) as info:
        queue.fetch(server.url("/trickle?where=headers&every=0.1"), header_timeout=0.5)
    assert info.value.outcome is rq.Outcome.TIMEOUT
    assert "response headers were not complete 0.5 seconds after" in info.value.message


def test_low_speed_limit_ends_a_body_that_trickles(server, queue):
    # 10 bytes/s of body, under the limit of 1000 bytes/s over 0.5 s.
    with pytest.raises(rq.RequestTimeoutError) as info:
        queue.fetch(server.url("/trickle?where=body&every=0.1"), low_speed_limit=(1000, 0.5))
    assert info.value.outcome is rq.Outcome.TIMEOUT
    assert "less than 1000.0 bytes per second received or sent over 0.5 seconds" in info.value.message


def test_header_timeout_and_low_speed_limit_come_from_the_queue_defaults(server):
    # Each request sets its own total timeout: a limit not inherited would end it with that one.
    with rq.Queue(defaults={"header_timeout": 0.5}) as q:
        with pytest.raises(rq.RequestTimeoutError) as info:
            q.fetch(server.url("/trickle?where=headers&every=0.1"), timeout=20)
        assert "response headers were not complete 0.5 seconds after" in info.value.message
        # The request's own value wins (0: no limit), so the total timeout ends it.
        with pytest.raises(rq.RequestTimeoutError) as info:
            q.fetch(server.url("/trickle?where=headers&every=0.1"), timeout=1.5, header_timeout=0)
        assert "response headers" not in info.value.message
    with rq.Queue(defaults={"low_speed_limit": (1000, 0.5)}) as q:
        with pytest.raises(rq.RequestTimeoutError) as info:
            q.fetch(server.url("/trickle?where=body&every=0.1"), timeout=20)
        assert "less than 1000.0 bytes per second received or sent over 0.5 seconds" in info.value.message
        with pytest.raises(rq.RequestTimeoutError) as info:
            q.fetch(server.url("/trickle?where=body&every=0.1"), timeout=1.5, low_speed_limit=(0, 0))
        assert "bytes per second" not in info.value.message
    with pytest.raises(TypeError):
        rq.Queue(defaults={"low_speed_limit": 5})
    with pytest.raises(rq.InvalidArgumentError):
        rq.Queue(defaults={"header_timeout": -1})


def test_slow_server_limits_are_checked_by_the_library():
    url = "http://127.0.0.1/"
    for bad in ({"header_timeout": -1}, {"header_timeout": float("nan")}, {"header_timeout": 1e7},
                {"low_speed_limit": (-1, 5)}, {"low_speed_limit": (1, -5)}, {"low_speed_limit": (1e13, 5)},
                {"low_speed_limit": (1, float("inf"))}):
        with pytest.raises(rq.InvalidArgumentError, match=next(iter(bad))):
            rq.Request(url, **bad)  # type: ignore[arg-type]
    for wrong in ({"header_timeout": "5"}, {"low_speed_limit": 5}, {"low_speed_limit": (1, 2, 3)},
                  {"low_speed_limit": ("1", 5)}, {"low_speed_limit": [1, 5]}):
        with pytest.raises(TypeError):
            rq.Request(url, **wrong)  # type: ignore[arg-type]
    # 0 turns each off.
    rq.Request(url, header_timeout=0, low_speed_limit=(0, 0))
    rq.Request(url, header_timeout=1e6, low_speed_limit=(1e12, 1e6))


def test_invalid_input_raises_at_construction():
    with pytest.raises(rq.InvalidURLError):
        rq.Request("not a url")
    with pytest.raises(rq.InvalidURLError):
        rq.Request("http://127.0.0.1/\0x")
    with pytest.raises(rq.UnsupportedSchemeError):
        rq.Request("ftp://127.0.0.1/")
    with pytest.raises(rq.InvalidMethodError):
        rq.Request("http://127.0.0.1/", method="GE T")
    with pytest.raises(rq.InvalidHeaderError):
        rq.Request("http://127.0.0.1/", headers={"X-A": "a\r\nInjected: 1"})
    with pytest.raises(rq.InvalidHeaderError):
        rq.Request("http://127.0.0.1/", headers={"Bad Name": "v"})
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request("http://127.0.0.1/", timeout=-1)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request("http://127.0.0.1/", retry_delay=float("nan"))
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request("http://127.0.0.1/", retry_outcomes=[rq.Outcome.OK])
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request("http://127.0.0.1/", max_attempts=-1)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        rq.Request("http://127.0.0.1/", connect_timeout=-5)
    with pytest.raises(TypeError):
        rq.Request(b"http://127.0.0.1/")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rq.Request("http://127.0.0.1/", body=b"x", json={})
    with pytest.raises(TypeError):
        rq.Request("http://127.0.0.1/", timeout="1")  # type: ignore[arg-type]


def test_result_codes_map_to_exceptions():
    # Every rq_result error code has its class, and the library's own name for it is in the message.
    for code, cls in rq.RESULT_ERRORS.items():
        assert cls.code == code
    assert set(rq.RESULT_ERRORS) == set(range(1, 18))
    assert set(rq.OUTCOME_ERRORS) == set(range(1, 14))  # (the header itself: test_binding.py)
    assert rq.OUTCOME_ERRORS[rq.Outcome.HTTP_STATUS] is rq.HTTPStatusError
    with pytest.raises(rq.InvalidURLError, match="invalid URL"):
        rq.Request("nope")


def test_errors_carry_the_librarys_reason():
    # What exactly was wrong comes from the library (rq_last_error_message), not from the binding.
    cases = [
        (lambda: rq.Request("http://h/a b"), rq.InvalidURLError,
         "byte 10 of the URL is a space (0x20): percent-encode it as %20"),
        (lambda: rq.Request("ftp://h/"), rq.UnsupportedSchemeError,
         'the scheme is "ftp": only http and https are supported'),
        (lambda: rq.Request("http://h:0/"), rq.InvalidURLError, "the port 0 is not from 1 to 65535"),
        (lambda: rq.Request("http://h/", method="GE T"), rq.InvalidMethodError,
         "byte 2 of the method is a space (0x20)"),
        (lambda: rq.Request("http://h/", headers={"X-A": "a\rb"}), rq.InvalidHeaderError,
         'the value of header "X-A" has a carriage return (CR, 0x0D) at byte 1'),
        (lambda: rq.Request("http://h/", retry_jitter=1.5), rq.InvalidArgumentError, "jitter is 1.5, not from 0 to 1"),
    ]
    for make, cls, reason in cases:
        with pytest.raises(cls) as caught:
            make()
        assert reason in str(caught.value)
        assert reason in rq.ffi.string(rq.lib.rq_last_error_message()).decode()


# -- retry -----------------------------------------------------------------------------------------


def test_retry_until_success(server, queue, uid):
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=2&mode=reset&n=10"),
                           retry=True, retry_delay=0)
    assert response.status == 200 and response.attempts == 3
    assert response.headers["x-attempt"] == "3"
    assert len(server.requests(path_prefix=f"/flaky?key={uid}")) == 3


def test_no_retry_by_default_and_max_attempts(server, queue, uid):
    with pytest.raises(rq.ConnectionLostError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}a&fail=5&mode=reset"))
    assert info.value.response.attempts == 1
    with pytest.raises(rq.ConnectionLostError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}b&fail=5&mode=reset"), retry=True, retry_delay=0,
                    max_attempts=2)
    assert info.value.response.attempts == 2
    assert len(server.requests(path_prefix=f"/flaky?key={uid}b")) == 2


def test_retry_outcomes_select_what_is_retried(server, queue, uid):
    # Only timeouts are retried here: a reset fails at once.
    with pytest.raises(rq.ConnectionLostError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}&fail=5&mode=reset"), retry=True, retry_delay=0,
                    retry_outcomes=[rq.Outcome.TIMEOUT])
    assert info.value.response.attempts == 1


# -- progress --------------------------------------------------------------------------------------


def test_download_progress(server, queue):
    reports: List[rq.Progress] = []
    response = queue.fetch(server.url("/bytes?n=300000"),
                           on_download_progress=lambda request, p: reports.append(p))
    assert len(response.body) == 300000
    assert reports, "no progress reported"
    assert reports[-1] == rq.Progress(done=300000, total=300000, fraction=1.0)
    dones = [p.done for p in reports]
    assert dones == sorted(dones)
    assert all(p.fraction is None or 0.0 <= p.fraction <= 1.0 for p in reports)


def test_download_progress_of_unknown_length(server, queue):
    reports: List[rq.Progress] = []
    queue.fetch(server.url("/bytes?n=50000&chunked=1&chunk=1000"),
                on_download_progress=lambda request, p: reports.append(p))
    assert reports[-1] == rq.Progress(done=50000, total=50000, fraction=1.0)
    assert all(p.total is None and p.fraction is None for p in reports[:-1])


def test_upload_progress(server, queue):
    reports: List[rq.Progress] = []
    body = b"u" * 200000
    response = queue.fetch(server.url("/upload"), method="POST", body=body,
                           on_upload_progress=lambda request, p: reports.append(p))
    assert response.json() == {"received": 200000}
    assert reports[-1] == rq.Progress(done=200000, total=200000, fraction=1.0)


# -- authentication --------------------------------------------------------------------------------


def test_401_without_handler_is_an_http_status_error(server, queue):
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url("/basic-auth/user/pass"))
    assert info.value.status == 401
    assert info.value.response.headers["www-authenticate"] == 'Basic realm="fixture"'


def test_preemptive_credentials(server, queue):
    response = queue.fetch(server.url("/basic-auth/user/pass"), auth=("user", "pass"))
    assert response.json() == {"authenticated": True, "user": "user"}
    assert len(server.requests()) == 1


def test_auth_handler_returning_a_credential(server, queue):
    seen = []

    def on_auth(request, challenge):
        seen.append((challenge.failure_count, challenge.response.status,
                     challenge.response.headers["www-authenticate"]))
        return ("user", "wrong") if challenge.failure_count == 0 else ("user", "pass")

    response = queue.fetch(server.url("/basic-auth/user/pass"), on_auth=on_auth)
    assert response.status == 200
    assert seen == [(0, 401, 'Basic realm="fixture"'), (1, 401, 'Basic realm="fixture"')]
    assert len(server.requests()) == 3


def test_auth_handler_continue_without_and_cancel(server, queue):
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url("/basic-auth/u/p"), on_auth=lambda r, c: c.continue_without())
    assert info.value.status == 401
    with pytest.raises(rq.RequestCancelled):
        queue.fetch(server.url("/basic-auth/u/p"), on_auth=lambda r, c: c.cancel())


def test_auth_answered_later_from_another_thread(server, queue):
    threads = []
    challenges = []

    def on_auth(request, challenge):
        challenges.append(challenge)
        thread = threading.Thread(target=challenge.use_credential, args=("u", "p"))
        threads.append(thread)
        thread.start()
        return None  # answered later

    assert queue.fetch(server.url("/basic-auth/u/p"), on_auth=on_auth).status == 200
    for thread in threads:
        thread.join()
    assert len(challenges) == 1 and challenges[0].answered
    with pytest.raises(rq.InvalidStateError):
        challenges[0].cancel()  # a challenge is answered once


def test_request_attributes_as_given_and_by_default(tmp_path):
    plain = rq.Request("http://127.0.0.1:1/")
    assert (plain.url, plain.method, plain.headers, plain.body, plain.tag, plain.output_file) == \
        ("http://127.0.0.1:1/", "GET", (), None, None, None)
    target = tmp_path / "out"
    full = rq.Request("http://127.0.0.1:1/", "POST", headers={"X-A": "1"}, body="hé", tag="t",
                      output_file=target)
    assert (full.method, full.headers, full.body, full.tag, full.output_file) == \
        ("POST", (("X-A", "1"),), "hé".encode(), "t", target)
    as_json = rq.Request("http://127.0.0.1:1/", "POST", json={"a": 1})
    assert as_json.body == b'{"a": 1}' and as_json.headers == (("Content-Type", "application/json"),)
