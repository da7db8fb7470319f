"""test_wait.py - Producer.wait, the module's wait() and enqueue's wait=
against a real ferryd (doc/formats.md, "Waiting for jobs"), as
clients/node's wait.test.js: jobs of queue pgi (idempotency_window 1m, into
table waits: ferryd.ini, schema.sql here) are done once their rows are in
PostgreSQL, a row the table refuses is dead with the table's error, a dead
entry purged meanwhile is dead with "purged", an id never enqueued is
unknown, jobs of queue pyi (no workers) are pending when the time is up, a
queue that keeps no ids is refused, and a connection lost during the wait
is waited out."""

import os
import threading
import time
import warnings

import pytest
import redis

import ferry_client
from ferry_client import FerryError, InvalidJobError, NotIdempotentError, \
    Producer, WaitResult
from helpers import ReplyLosingProxy, ferryctl, pg_value, wait_published


@pytest.fixture
def q(r):
    """The test's client, once ferryd published the windows of pgi and
    pyi."""
    wait_published(r, "pgi", True)
    wait_published(r, "pyi", True)
    return r


def rows(lo, hi):
    return int(pg_value("SELECT count(*) FROM waits WHERE n BETWEEN %d AND %d"
                        % (lo, hi)))


def test_jobs_waited_for_are_done_their_rows_in_postgres(q):
    p = Producer(q)
    # over 1,000 ids: ZMSCORE in several calls
    ids = p.enqueue("pgi", [{"id": "w%d" % i, "n": 50000 + i}
                            for i in range(1500)])
    got = p.wait("pgi", list(reversed(ids)), timeout=60)
    assert got == WaitResult(done=list(reversed(ids)))
    assert got.complete
    assert rows(50000, 51499) == 1500, "done before its row committed"
    # integer ids as the caller gave them; the module's wait()
    p.enqueue("pgi", [{"id": 525252, "n": 51500}, {"id": "w-last",
                                                   "n": 51501}])
    got = ferry_client.wait("pgi", [525252, "w-last", 525252], timeout=30,
                            producer=p)
    assert got == WaitResult(done=["525252", "w-last"])
    assert rows(51500, 51501) == 2


def test_enqueue_with_wait_the_outcome_beside_the_ids(q):
    p = Producer(q)
    ids = p.enqueue("pgi", [{"id": "e1", "n": 51600}, {"id": "e2", "n": 51601},
                            {"id": "e-bad", "n": "twelve"}], wait=30)
    assert ids == ["e1", "e2", "e-bad"] and ids.already == []
    assert ids.outcome.done == ["e1", "e2"]
    assert [i for i, _ in ids.outcome.dead] == ["e-bad"]
    assert ids.outcome.pending == [] and ids.outcome.unknown == []
    assert ids.outcome.complete
    assert rows(51600, 51601) == 2
    assert Producer(q).enqueue("pgi", {"id": "e0", "n": 51602}).outcome is None
    # sent again: already accepted, and still done
    again = ferry_client.enqueue("pgi", {"id": "e1", "n": 51600}, wait=5,
                                 producer=p)
    assert again.already == ["e1"] and again.outcome.done == ["e1"]
    assert rows(51600, 51600) == 1
    # refused before anything is pushed: a job without an id, a queue that
    # keeps no ids, a bad wait
    ready = q.llen("ferry:{pgi}:ready")
    py_ready = q.llen("ferry:{py}:ready")
    with pytest.raises(InvalidJobError, match="waited for by its id") as e:
        p.enqueue("pgi", [{"id": "e3", "n": 1}, {"n": 2}], wait=1)
    assert e.value.index == 1
    with pytest.raises(NotIdempotentError):
        p.enqueue("py", {"id": "e4"}, wait=1)
    with pytest.raises(ValueError):
        p.enqueue("pgi", {"id": "e5"}, wait=-1)
    assert q.llen("ferry:{pgi}:ready") == ready
    assert q.llen("ferry:{py}:ready") == py_ready
    assert q.zscore("ferry:{pgi}:ids", "e3") is None


def test_a_row_the_table_refuses_is_dead_with_its_error(q):
    p = Producer(q)
    p.enqueue("pgi", [{"id": "d-ok", "n": 51700},
                      {"id": "d-bad", "n": "not a number"},
                      {"id": 7100, "n": [1]}])
    got = p.wait("pgi", [7100, "d-bad", "d-ok"], timeout=30)
    assert got.done == ["d-ok"]
    assert [i for i, _ in got.dead] == ["7100", "d-bad"]
    for _, reason in got.dead:
        assert reason.startswith("failed by the handler: 22P02: invalid "
                                 "input syntax for type bigint"), reason
    assert '"not a number"' in got.dead[1][1]
    assert got.pending == [] and got.unknown == [] and got.complete
    assert rows(51700, 51700) == 1


def test_a_dead_entry_purged_during_the_wait_is_dead_purged(q):
    p = Producer(q)
    p.enqueue("pgi", {"id": "p-bad", "n": "x"})
    assert [i for i, _ in p.wait("pgi", ["p-bad"], timeout=30).dead] == \
        ["p-bad"]
    assert q.zscore("ferry:{pgi}:ids", "p-bad") == -1
    # held pending by a job due in 3 s while the entry is purged
    p.enqueue("pgi", {"id": "p-late", "n": 51800}, delay=3)
    got = []
    waiter = threading.Thread(target=lambda: got.append(
        p.wait("pgi", ["p-bad", "p-late"], timeout=30)))
    waiter.start()
    time.sleep(0.1)
    ferryctl("dead", "purge", "pgi", "p-bad")
    assert waiter.is_alive(), "the wait ended before the purge"
    assert q.zscore("ferry:{pgi}:ids", "p-bad") < -1, \
        "purged: minus its forget time"
    waiter.join(40)
    assert got == [WaitResult(done=["p-late"], dead=[("p-bad", "purged")])]
    # purged before the wait began: the same
    assert p.wait("pgi", ["p-bad"]).dead == [("p-bad", "purged")]


def test_ids_never_enqueued_are_unknown(q):
    t0 = time.monotonic()
    got = Producer(q).wait("pgi", ["never-enqueued", 987654], timeout=30)
    assert got == WaitResult(unknown=["never-enqueued", "987654"])
    assert not got.complete
    assert time.monotonic() - t0 < 5, "an unknown id is an outcome"


def test_the_time_up_the_ids_still_pending(q):
    q.delete("ferry:{pyi}:ready", "ferry:{pyi}:ids")
    p = Producer(q)
    p.enqueue("pyi", [{"id": "t1"}, {"id": "t2"}])       # no workers
    before = q.zrange("ferry:{pyi}:ids", 0, -1, withscores=True)
    t0 = time.monotonic()
    got = p.wait("pyi", ["t2", "never", "t1"], timeout=0.7)
    took = time.monotonic() - t0
    assert got == WaitResult(pending=["t2", "t1"], unknown=["never"])
    assert not got.complete
    assert 0.69 <= took < 2.5, took
    t0 = time.monotonic()
    assert p.wait("pyi", ["t1"], timeout=0).pending == ["t1"]   # one look
    assert time.monotonic() - t0 < 1
    # a wait writes nothing
    assert q.zrange("ferry:{pyi}:ids", 0, -1, withscores=True) == before
    assert q.llen("ferry:{pyi}:ready") == 2


def test_a_queue_that_keeps_no_ids_is_refused(q):
    p = Producer(q)
    with pytest.raises(NotIdempotentError) as e:
        p.wait("py", ["a"], timeout=1)
    assert isinstance(e.value, FerryError)
    assert "queue py keeps no ids" in str(e.value)
    assert "idempotency_window" in str(e.value)
    with pytest.raises(TypeError):
        p.wait("pgi", [1.5])
    with pytest.raises(ValueError):
        p.wait("pgi", ["a"], timeout="soon")


def test_a_connection_lost_during_the_wait_is_waited_out(q):
    proxy = ReplyLosingProxy(int(os.environ["FERRY_TEST_REDIS_PORT"]))
    client = redis.Redis(host="127.0.0.1", port=proxy.port)
    Producer(q).enqueue("pgi", {"id": "c1", "n": 51900}, delay=1.5)
    got = []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        waiter = threading.Thread(target=lambda: got.append(
            Producer(client).wait("pgi", ["c1"], timeout=30)))
        waiter.start()
        time.sleep(0.3)
        proxy.lose_next = True        # the reply of a ZMSCORE of c1
        waiter.join(40)
    assert got == [WaitResult(done=["c1"])]
    assert proxy.lost == 1
    assert any("goes on when Redis answers again" in str(w.message)
               for w in said)
    assert rows(51900, 51900) == 1
