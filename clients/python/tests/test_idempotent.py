"""test_idempotent.py - ferry_client on a queue that keeps ids (queue "pyi",
idempotency_window 1m in the driver's ferryd.ini): a job whose id the queue
holds is already accepted and not pushed again, and a call whose reply was
lost (a proxy in front of Redis closes the connection after the command
ran, before its reply) is sent again by the client; on a queue that keeps
no ids, the error comes through as it came."""

import json
import os
import warnings

import pytest
import redis

from ferry_client import Producer
from helpers import ReplyLosingProxy, wait_published

READY = "ferry:{pyi}:ready"
IDS = "ferry:{pyi}:ids"


def test_ids_held_are_already_accepted(r):
    wait_published(r, "pyi", True)
    r.delete(READY, IDS)
    p = Producer(r)
    ids = p.enqueue("pyi", [{"id": "a"}, {"id": 7}, {"id": "a", "v": 2},
                            {"v": 1}])
    assert list(ids) == ["a", "7", "a",
                         "05386f28d1614fecb1c7e329bd82417fb48dd452"]
    assert ids.already == ["a"]
    ids = p.enqueue("pyi", [{"id": 7}, {"id": "b"}])
    assert ids.already == ["7"]
    assert r.llen(READY) == 4
    # and the marks' member "" while a job is live
    assert sorted(r.zrange(IDS, 0, -1)) == [b"", b"7", b"a", b"b"]
    # chunks go by their ids, so a document sent again adds nothing
    doc = {"id": "big", "data": [[i] for i in range(5)]}
    assert p.enqueue("pyi", doc, chunk_rows=2).already == []
    assert p.enqueue("pyi", doc, chunk_rows=2).already == \
        ["big", "big:2", "big:4"]
    # the same document in other chunks: refused, nothing pushed
    with pytest.raises(Exception, match="sent before in other chunks"):
        p.enqueue("pyi", doc, chunk_rows=3)
    assert r.llen(READY) == 7


def test_a_lost_reply_is_sent_again(r):
    wait_published(r, "pyi", True)
    r.delete(READY, IDS)
    port = int(os.environ["FERRY_TEST_REDIS_PORT"])
    proxy = ReplyLosingProxy(port)
    p = Producer(redis.Redis(host="127.0.0.1", port=proxy.port))
    r.script_load(p.script)          # EVALSHA runs: its reply is the one lost
    proxy.lose_next = True
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ids = p.enqueue("pyi", [{"id": "l1"}, {"id": "l2"}])
    assert proxy.lost == 1
    assert list(ids) == ["l1", "l2"] and ids.already == ["l1", "l2"]
    assert r.llen(READY) == 2
    assert any("safe to send again" in str(w.message) for w in said)
    # a queue that keeps no ids: the outcome stays the caller's to judge
    proxy.lose_next = True
    with pytest.raises(redis.exceptions.ConnectionError):
        p.enqueue("py", {"id": "l3"})
    assert json.loads(r.lindex("ferry:{py}:ready", 0))["id"] == "l3"
    r.lpop("ferry:{py}:ready")


def test_a_call_fewer_replicas_have_is_sent_again(r, monkeypatch):
    """wait_replicas = 1 and no replica: each call is sent again while WAIT
    reaches fewer (it is on the primary: already accepted, nothing pushed
    twice), and at the end of the resend bound NotReplicatedError says so."""
    import ferry_client.producer as producer_mod
    from ferry_client import NotReplicatedError

    wait_published(r, "pyi", True)
    r.delete(READY, IDS)
    monkeypatch.setattr(producer_mod, "RESEND_FOR_S", 1.0)
    p = Producer(r, wait_replicas=1, wait_timeout_ms=50)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(NotReplicatedError):
            p.enqueue("pyi", [{"id": "w1"}, {"id": "w2"}])
    lags = [w for w in said if "reached 0 of 1 replicas" in str(w.message)]
    assert len(lags) >= 2
    assert r.llen(READY) == 2
    assert sorted(r.zrange(IDS, 0, -1)) == [b"", b"w1", b"w2"]
