"""Scheduling beyond max_concurrent: per-host limits, rate limits, coalescing of equal requests,
priorities, tags, and the queue's counters. Checked against what the fixture server logged (start
times, peaks of concurrent requests per `group`)."""

from __future__ import annotations

import asyncio
import time

import pytest

import requestqueue as rq
from conftest import pattern


def starts(server, prefix: str):
    """Server-side start times of the requests whose id starts with `prefix`, by id."""
    return {e["id"]: e["start"] for e in server.requests() if e["id"] and e["id"].startswith(prefix)}


def test_new_queue_settings_and_their_validation():
    with rq.Queue() as q:
        assert q.max_per_host == 0 and q.rate_limit is None
        q.max_per_host = 3
        q.rate_limit = (10, 2)
        q.duplicates = "coalesce"
        assert q.max_per_host == 3
        assert q.rate_limit == rq.RateLimit(starts=10, interval=2.0, per_host=False)
        assert q.duplicates is rq.Duplicates.COALESCE
        q.rate_limit = rq.RateLimit(5, 0.5, per_host=True)
        assert q.rate_limit == (5, 0.5, True)
        q.rate_limit = None
        assert q.rate_limit is None
        q.rate_limit = (0, 1.0)  # zero starts: no limit
        assert q.rate_limit is None
        with pytest.raises(rq.InvalidArgumentError):
            q.max_per_host = -1
        with pytest.raises(TypeError):
            q.max_per_host = 1.5  # type: ignore[assignment]
        with pytest.raises(rq.InvalidArgumentError, match="interval"):
            q.rate_limit = (1, 0)  # the library refuses an interval outside (0, 1e6]
        with pytest.raises(rq.InvalidArgumentError):
            q.rate_limit = (1, float("inf"))
        with pytest.raises(rq.InvalidArgumentError):
            q.rate_limit = (-1, 1.0)
        with pytest.raises(TypeError):
            q.rate_limit = 5  # type: ignore[assignment]
        with pytest.raises(TypeError):
            q.rate_limit = (1, "1s")  # type: ignore[assignment]
        assert q.rate_limit is None  # a refused value changes nothing
        with pytest.raises(rq.InvalidArgumentError, match="coalesce"):
            q.duplicates = "merge"
    with rq.Queue(max_per_host=2, rate_limit=rq.RateLimit(3, 1.5), duplicates="coalesce") as q:
        assert (q.max_per_host, q.rate_limit, q.duplicates) == (2, (3, 1.5, False), "coalesce")
    with pytest.raises(rq.InvalidArgumentError):
        rq.Queue(max_per_host=-3)

    async def main():
        async with rq.AsyncQueue(max_per_host=4, rate_limit=(7, 3.0, True)) as aq:
            assert (aq.max_per_host, aq.rate_limit) == (4, (7, 3.0, True))

    asyncio.run(main())


def test_max_per_host_limits_each_origin(server, uid):
    other = server.with_host("localhost")  # the same server, another origin for the library
    with rq.Queue(max_concurrent=0, max_per_host=2) as q:
        a = [q.add(server.url(f"/delay?s=0.3&group={uid}a&id={uid}a{i}")) for i in range(5)]
        b = [q.add(other.url(f"/delay?s=0.3&group={uid}b&id={uid}b{i}")) for i in range(3)]
        # The waiting requests of the first host do not hold back the second one.
        assert [r.state for r in a] == [rq.State.RUNNING] * 2 + [rq.State.WAITING] * 3
        assert [r.state for r in b] == [rq.State.RUNNING] * 2 + [rq.State.WAITING]
        q.wait()
        assert all(r.result().status == 200 for r in a + b)
    log = server.log()
    assert log["peaks"][f"{uid}a"] == 2 and log["peaks"][f"{uid}b"] == 2
    assert len([e for e in log["requests"] if e["group"] in (f"{uid}a", f"{uid}b")]) == 8


def test_rate_limit_spaces_the_starts(server, uid):
    # 2 starts per 0.4 s: a bucket of 2 tokens, one more every 0.2 s.
    with rq.Queue(max_concurrent=0, rate_limit=(2, 0.4)) as q:
        added = time.monotonic()  # the server logs on the same clock
        requests = [q.add(server.url(f"/bytes?n=1&id={uid}-{i}")) for i in range(5)]
        q.wait()
        assert all(r.result().status == 200 for r in requests)
    times = sorted(starts(server, uid).values())
    assert len(times) == 5
    # The 3rd start waited for a token (0.2 s), the 5th for three of them (0.6 s). Measured from
    # before the adds, not from the server's first log: the server may see the first request late
    # (a busy machine), never the later ones early.
    assert times[2] - added >= 0.2
    assert times[4] - added >= 0.6


def test_rate_limit_per_host(server, uid):
    other = server.with_host("localhost")
    with rq.Queue(max_concurrent=0, rate_limit=rq.RateLimit(1, 0.6, per_host=True)) as q:
        added = time.monotonic()  # the server logs on the same clock
        a1 = q.add(server.url(f"/bytes?n=1&id={uid}a1"))
        a2 = q.add(server.url(f"/bytes?n=1&id={uid}a2"))
        b1 = q.add(other.url(f"/bytes?n=1&id={uid}b1"))
        q.wait()
        assert [r.result().status for r in (a1, a2, b1)] == [200] * 3
    t = starts(server, uid)
    assert t[f"{uid}a2"] - added >= 0.6  # the first host waited for a token
    assert t[f"{uid}b1"] < t[f"{uid}a2"]  # the second host has a bucket of its own


def test_coalesce_shares_one_transfer_between_equal_requests(server, uid):
    completions = []
    with rq.Queue(duplicates="coalesce", suspended=True) as q:
        gets = [q.add(server.url(f"/bytes?n=100&id={uid}"), on_complete=completions.append)
                for _ in range(3)]
        posts = [q.add(server.url(f"/echo?id={uid}p"), method="POST", body=b"x") for _ in range(2)]
        q.resume()
        q.wait()
        stats = q.stats
    assert completions == gets  # each its own completion
    assert [r.result().body for r in gets] == [pattern(100)] * 3
    assert all(r.result().status == 200 for r in posts)
    assert len(server.requests(id=uid)) == 1  # one transfer for the three GETs
    assert len(server.requests(id=f"{uid}p")) == 2  # POSTs are never coalesced
    assert stats.added == 5 and stats.coalesced == 2 and stats.succeeded == 5


def test_cancelling_one_coalesced_request_leaves_the_others(server, uid):
    with rq.Queue(duplicates="coalesce") as q:
        requests = [q.add(server.url(f"/delay?s=0.3&id={uid}")) for _ in range(3)]
        server.wait_for_requests(uid)
        assert requests[1].cancel() is True
        q.wait()
    with pytest.raises(rq.RequestCancelled):
        requests[1].result()
    assert requests[0].result().body == b"ok" and requests[2].result().body == b"ok"
    assert len(server.requests(id=uid)) == 1


def test_stats_count_what_happened(server, uid):
    with rq.Queue(max_concurrent=0) as q:
        q.fetch(server.url("/bytes?n=10"))
        q.fetch(server.url("/upload"), method="POST", body=b"1234567")
        with pytest.raises(rq.HTTPStatusError):
            q.fetch(server.url("/status/404"))
        flaky = q.fetch(server.url(f"/flaky?key={uid}&fail=1&mode=status&code=503&n=20"), retry=True,
                        retry_delay=0, retry_statuses=[503])
        stalled = q.add(server.url(f"/stall?s=30&id={uid}s"))
        server.wait_for_requests(f"{uid}s")
        stalled.cancel()
        q.wait()
        stats = q.stats
    assert flaky.attempts == 2
    received = 10 + len(b'{"received": 7}') + len(b"status 404") + 20
    assert stats == rq.QueueStats(added=5, started=5, retried=1, succeeded=3, cancelled=1, failed=1,
                                  coalesced=0, bytes_down=received, bytes_up=7)


def test_tags_count_list_and_cancel(server, uid):
    with rq.Queue(suspended=True) as q:
        a = [q.add(server.url(f"/bytes?n=1&id={uid}a{i}"), tag="thumbnails") for i in range(2)]
        b = q.add(server.url(f"/bytes?n=1&id={uid}b"), tag="prefetch")
        c = q.add(server.url(f"/bytes?n=1&id={uid}c"))
        assert a[0].tag == "thumbnails" and c.tag is None
        assert q.count_tag("thumbnails") == 2 and q.count_tag("prefetch") == 1
        assert q.count_tag("nothing") == 0
        assert q.snapshot(tag="thumbnails") == a and q.snapshot(tag="prefetch") == [b]
        assert q.snapshot() == a + [b, c]
        assert q.cancel_tag("thumbnails") == 2
        assert q.cancel_tag("thumbnails") == 0
        assert q.count == 2 and q.snapshot(tag="thumbnails") == []
        q.resume()
        q.wait()
        with pytest.raises(TypeError):
            q.count_tag(1)  # type: ignore[arg-type]
        with pytest.raises(rq.InvalidArgumentError):
            q.cancel_tag("a\0b")
    for request in a:
        with pytest.raises(rq.RequestCancelled):
            request.result()
    assert b.result().status == 200 and c.result().status == 200
    assert sorted(e["id"] for e in server.requests()) == [f"{uid}b", f"{uid}c"]
    with pytest.raises(TypeError):
        rq.Request(server.url("/"), tag=5)  # type: ignore[arg-type]


def test_priorities_order_waiting_requests_and_can_change_while_waiting(server, uid):
    with rq.Queue(max_concurrent=1, suspended=True) as q:
        low = q.add(server.url(f"/bytes?n=1&id={uid}low"), priority="low")
        normal1 = q.add(server.url(f"/bytes?n=1&id={uid}normal1"))
        high = q.add(server.url(f"/bytes?n=1&id={uid}high"), priority=rq.Priority.HIGH)
        top = q.add(server.url(f"/bytes?n=1&id={uid}top"), priority=2)
        normal2 = q.add(server.url(f"/bytes?n=1&id={uid}normal2"))
        assert normal1.priority is rq.Priority.NORMAL and low.priority is rq.Priority.LOW
        normal1.priority = "very_high"  # moves behind the waiting requests of its new level
        assert normal1.priority is rq.Priority.VERY_HIGH
        expected = [top, normal1, high, normal2, low]
        assert q.snapshot() == expected
        q.resume()
        q.wait()
        with pytest.raises(rq.NotActiveError):
            low.priority = rq.Priority.HIGH  # completed
    logged = [e["id"][len(uid):] for e in server.requests()]
    assert logged == ["top", "normal1", "high", "normal2", "low"]


def test_priority_of_a_new_request_and_invalid_priorities(server):
    request = rq.Request(server.url("/"))
    assert request.priority is rq.Priority.NORMAL
    request.priority = rq.Priority.VERY_LOW
    assert request.priority == -2
    with pytest.raises(rq.InvalidArgumentError, match="priority is 5, not a level from -2"):
        rq.Request(server.url("/"), priority=5)  # (the library's reason)
    with pytest.raises(rq.InvalidArgumentError, match="very_low"):
        rq.Request(server.url("/"), priority="urgent")
    with pytest.raises(TypeError):
        rq.Request(server.url("/"), priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(rq.InvalidArgumentError):
        request.priority = 3
