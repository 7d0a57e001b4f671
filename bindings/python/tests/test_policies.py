"""Per-request policies: retry backoff, retried statuses, Retry-After, retries of non-idempotent
methods, redirect and response-size limits, and TLS verification with a CA file (against an HTTPS
instance of the fixture server)."""

from __future__ import annotations

import pytest

import requestqueue as rq
from conftest import pattern


@pytest.fixture
def queue():
    with rq.Queue(max_concurrent=4) as q:
        yield q


def flaky_starts(server, uid):
    return [e["start"] for e in server.requests(path_prefix=f"/flaky?key={uid}")]


# -- retry -----------------------------------------------------------------------------------------


def test_retry_statuses(server, queue, uid):
    url = server.url(f"/flaky?key={uid}&fail=2&mode=status&code=503&n=30")
    response = queue.fetch(url, retry=True, retry_delay=0, retry_statuses=[429, 503])
    assert response.status == 200 and response.attempts == 3 and response.body == pattern(30)
    assert response.headers["x-attempt"] == "3"
    assert len(server.requests(path_prefix=f"/flaky?key={uid}")) == 3
    # Without retry statuses an HTTP error is not retried.
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}b&fail=2&mode=status&code=503"), retry=True, retry_delay=0)
    assert info.value.status == 503 and info.value.response.attempts == 1


def test_retry_backoff_multiplies_the_delay(server, queue, uid):
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=3&mode=status&code=502"), retry=True,
                           retry_delay=0.1, retry_backoff=2, retry_statuses=[502])
    assert response.attempts == 4
    t = flaky_starts(server, uid)
    assert len(t) == 4
    # Delays of 0.1, 0.2 and 0.4 s between the attempts (each gap also holds one exchange).
    assert t[1] - t[0] >= 0.1 - 0.02
    assert t[2] - t[1] >= 0.2 - 0.02
    assert t[3] - t[2] >= 0.4 - 0.02
    assert t[3] - t[0] >= 0.7 - 0.02


def test_retry_jitter_takes_off_at_most_its_fraction(server, queue, uid):
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=2&mode=status&code=503"), retry=True,
                           retry_delay=0.2, retry_jitter=0.5, retry_statuses=[503])
    assert response.attempts == 3
    t = flaky_starts(server, uid)
    assert t[1] - t[0] >= 0.1 - 0.02 and t[2] - t[1] >= 0.1 - 0.02  # at least half the delay


def test_retry_after_above_max_delay_ends_the_retries(server, queue, uid):
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}&fail=5&mode=status&code=503&retry_after=30"),
                    retry=True, retry_delay=0, retry_statuses=[503], retry_max_delay=1)
    assert info.value.status == 503 and info.value.response.attempts == 1
    assert info.value.response.headers["retry-after"] == "30"
    assert len(server.requests(path_prefix=f"/flaky?key={uid}")) == 1


def test_retry_after_is_honoured(server, queue, uid):
    response = queue.fetch(server.url(f"/flaky?key={uid}&fail=1&mode=status&code=429&retry_after=1"),
                           retry=True, retry_delay=0, retry_statuses=[429])
    assert response.attempts == 2
    t = flaky_starts(server, uid)
    assert t[1] - t[0] >= 1 - 0.02  # the server's Retry-After, not the 0 s retry delay


def test_non_idempotent_methods_are_retried_only_when_allowed(server, queue, uid):
    with pytest.raises(rq.HTTPStatusError) as info:
        queue.fetch(server.url(f"/flaky?key={uid}a&fail=1&mode=status&code=503"), method="POST",
                    body=b"order", retry=True, retry_delay=0, retry_statuses=[503])
    assert info.value.response.attempts == 1
    response = queue.fetch(server.url(f"/flaky?key={uid}b&fail=1&mode=status&code=503"), method="POST",
                           body=b"order", retry=True, retry_delay=0, retry_statuses=[503],
                           retry_non_idempotent=True)
    assert response.status == 200 and response.attempts == 2
    assert [e["method"] for e in server.requests(path_prefix=f"/flaky?key={uid}b")] == ["POST", "POST"]
    assert len(server.requests(path_prefix=f"/flaky?key={uid}a")) == 1


def test_invalid_retry_policies():
    url = "http://127.0.0.1/"
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(url, retry_backoff=0.5)  # below 1
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(url, retry_backoff=101)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(url, retry_jitter=1.5)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(url, retry_max_delay=-1)
    with pytest.raises(rq.InvalidArgumentError, match="400 to 599"):
        rq.Request(url, retry_statuses=[200])
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(url, retry_statuses=["503"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        rq.Request(url, retry_backoff="2")  # type: ignore[arg-type]
    rq.Request(url, retry=True, retry_backoff=100, retry_max_delay=0, retry_jitter=1, retry_statuses=[])


# -- limits ----------------------------------------------------------------------------------------


def test_max_redirects(server, queue):
    with pytest.raises(rq.TooManyRedirectsError):
        queue.fetch(server.url("/redirect/3"), max_redirects=2)
    assert queue.fetch(server.url("/redirect/3"), max_redirects=3).body == b"redirected"
    response = queue.fetch(server.url("/redirect/3"), max_redirects=0)  # the 3xx itself
    assert response.status == 302 and response.ok
    assert response.headers["location"] == "/redirect/2"
    assert [e["path"] for e in server.requests()][-1] == "/redirect/3"
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(server.url("/"), max_redirects=1001)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(server.url("/"), max_redirects=-1)


@pytest.mark.parametrize("query", ["", "&chunked=1&chunk=100"])  # announced, or counted on arrival
def test_max_response_size(server, queue, query):
    assert queue.fetch(server.url(f"/bytes?n=1000{query}"), max_response_size=1000).body == pattern(1000)
    with pytest.raises(rq.ResponseTooLargeError) as info:
        queue.fetch(server.url(f"/bytes?n=1001{query}"), max_response_size=1000)
    assert info.value.outcome is rq.Outcome.RESPONSE_TOO_LARGE
    assert isinstance(info.value, rq.RequestError) and not isinstance(info.value, rq.NetworkError)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(server.url("/"), max_response_size=-1)
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(server.url("/"), max_response_size=2**64)


# -- TLS -------------------------------------------------------------------------------------------


def test_tls_is_verified_and_a_ca_file_trusts_a_certificate(https_server, tls_files, queue, uid, tmp_path):
    cert, _ = tls_files
    with pytest.raises(rq.TLSError):  # self-signed: not trusted by the system's CAs
        queue.fetch(https_server.url(f"/bytes?n=5&id={uid}a"))
    response = queue.fetch(https_server.url(f"/bytes?n=5&id={uid}b"), ca_file=cert)
    assert response.status == 200 and response.body == b"abcde"
    metrics = response.metrics
    assert metrics is not None and metrics.tls is not None
    assert metrics.dns <= metrics.connect <= metrics.tls <= metrics.first_byte <= metrics.total
    assert queue.fetch(https_server.url("/bytes?n=1"), ca_file=str(cert).encode()).body == b"a"
    with pytest.raises(rq.TLSError):  # a CA file that does not exist
        queue.fetch(https_server.url(f"/bytes?n=5&id={uid}c"), ca_file=tmp_path / "missing.pem")
    # The handshake failed before any request was sent.
    assert [e["id"] for e in https_server.requests()] == [f"{uid}b", None]
    with pytest.raises(TypeError):
        rq.Request(https_server.url("/"), ca_file=3)  # type: ignore[arg-type]
    with pytest.raises(rq.InvalidArgumentError):
        rq.Request(https_server.url("/"), ca_file="")
