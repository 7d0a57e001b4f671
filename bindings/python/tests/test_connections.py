"""The queue's kept connections: what the transfers of a busy moment opened stays open for the
next busy moment, whatever ran in between (libcurl sizes its connection cache by the transfers
running when a connection is returned; the engine sizes it by the most that ran at once)."""

from __future__ import annotations

import requestqueue as rq


def held_batch(q, server, key: str, count: int):
    """`count` requests running at once (held by the server until all arrived), then released."""
    requests = [q.add(server.url(f"/hold?key={key}&n=10&keep=1&id={key}&i={i}")) for i in range(count)]
    server.wait_for_requests(key, count)
    server._get(f"/_/release?key={key}")
    q.wait()
    return [r.result() for r in requests]


def test_connections_of_a_busy_moment_outlive_a_quiet_one(server, uid):
    with rq.Queue(max_concurrent=8) as q:
        first = held_batch(q, server, f"{uid}a", 8)
        assert all(r.status == 200 for r in first)
        # A quiet moment: one transfer at a time. libcurl's own rule (4 idle connections per
        # transfer in the multi handle when a connection comes back) closed the busy moment's
        # connections down to 4 here.
        for i in range(6):
            assert q.fetch(server.url(f"/bytes?n=10&i={i}")).status == 200
        second = held_batch(q, server, f"{uid}b", 8)
    reused = [r.metrics.connection_reused for r in second]
    assert reused == [True] * 8, reused
