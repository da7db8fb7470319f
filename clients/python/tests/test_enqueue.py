"""test_enqueue.py - ferry_client against a real Redis and ferryd: the ids,
chunks and cache keys of ferryctl enqueue, refusals as exception classes
with nothing pushed, and jobs that arrive as rows in PostgreSQL (queue
"pg"; the driver, tests/integration/test_python_client.c, counts them)."""

import datetime
import hashlib
import json
import os
import re
import time
import warnings

import pytest
import redis

import ferry_client
from ferry_client import InvalidJobError, Producer, QueueFullError

READY = "ferry:{py}:ready"     # queue py has no workers: jobs stay


def ready(r):
    return [json.loads(e) for e in reversed(r.lrange(READY, 0, -1))]


def test_the_shipped_script_is_the_built_one():
    built = os.environ.get("FERRY_BUILT_ENQUEUE_LUA")
    assert built, "FERRY_BUILT_ENQUEUE_LUA (gen/lua/enqueue.lua) is not set"
    with open(built, "rb") as f:
        assert ferry_client.load_script() == f.read(), \
            "clients/python/ferry_client/enqueue.lua differs from the " \
            "build's gen/lua/enqueue.lua: run make update-client-scripts"


def test_ids_as_ferryctl_prints_them(r):
    r.delete(READY)
    p = Producer(r)
    assert p.enqueue("py", {"id": "a", "n": 1}) == ["a"]
    assert p.enqueue("py", {"id": 7}) == ["7"]
    assert p.enqueue("py", {"n": 1}) == \
        [hashlib.sha1(b'{"n":1}').hexdigest()]
    assert p.enqueue("py", '{"n": 2}') == \
        [hashlib.sha1(b'{"n": 2}').hexdigest()]
    assert p.enqueue("py", {"n": 3}, id="given") == ["given"]
    assert r.lrange(READY, 0, 0) == [b'{"id":"given","n":3}']
    assert r.lindex(READY, 1) == b'{"n": 2}'      # text: byte for byte
    assert r.llen(READY) == 5
    assert r.hget("ferry:{py}:stats", "enqueued") is None  # fetch.lua's


def test_chunks_go_by_the_id_and_their_first_row(r):
    r.delete(READY)
    ids = ferry_client.enqueue("py", {"id": "x", "t": "k", "data": [1, 2, 3,
                               4, 5]}, chunk_rows=2, producer=Producer(r))
    assert ids == ["x", "x:2", "x:4"]
    assert ready(r) == [{"id": "x", "t": "k", "data": [1, 2]},
                        {"id": "x:2", "t": "k", "data": [3, 4]},
                        {"id": "x:4", "t": "k", "data": [5]}]


def test_cache_keys_are_the_jobs_own_and_protected(r):
    r.delete(READY)
    p = Producer(r)
    ids = p.enqueue("py", {"id": "c", "op": "delete", "data": [[1], [2], [3]]},
                    cache=True, chunk_rows=2)
    assert ids == ["c", "c:2"]
    jobs = ready(r)
    keys = [j.pop("cache_key") for j in jobs]
    assert jobs == [{"id": "c", "op": "delete"}, {"id": "c:2", "op": "delete"}]
    # one group of keys a call ("<16 hex>.<n>"), counted in one entry
    group = keys[0][:-2]
    for i, key in enumerate(keys):
        assert re.fullmatch(r"ferry:\{py\}:cache:[0-9a-f]{16}\.[01]", key)
        assert key == "%s.%d" % (group, i)
        assert r.pttl(key) == -1             # no TTL while the job lives
    assert re.fullmatch(rb"2 2 \d+ 0", r.hget("ferry:{py}:protected", group))
    # after the mark of its job: its document's SHA-1 and ':'
    assert r.get(keys[1])[40:] == b":[[3]]"
    # the same id again: a key of its own; the first job's data stays
    p.enqueue("py", {"id": "c:2", "data": [[9]]}, cache=True)
    again = ready(r)[2]["cache_key"]
    assert again not in keys and r.get(again)[40:] == b":[[9]]"
    assert r.get(keys[1])[40:] == b":[[3]]"
    with pytest.raises(InvalidJobError, match='without "data" cannot be '
                       'cached: its members are its row'):
        p.enqueue("py", {"id": "d", "op": "delete"}, cache=True)
    assert r.llen(READY) == 3
    # delayed: the key waits with its job, protected as long
    p.enqueue("py", {"id": "e", "data": [1]}, cache=True, delay=60)
    doc = json.loads(r.zrange(SCHEDULED, -1, -1)[0].split(b":", 1)[1])
    assert r.pttl(doc["cache_key"]) == -1


def test_application_keys_are_protected(r):
    r.delete(READY)
    r.set("app:py:1", '[{"a":1}]', px=60000)
    p = Producer(r)
    with pytest.raises(InvalidJobError, match="outside the queue's cache "
                       "space ferry:{py}:cache: and cache_key_prefixes"):
        p.enqueue("py", {"id": 1, "cache_key": "app:py:1"})
    p = Producer(r, cache_key_prefixes="app:py:, other:")
    with pytest.raises(InvalidJobError, match='cache_key "app:py:2" does '
                       'not exist: write the key before the job'):
        p.enqueue("py", [{"id": 1, "cache_key": "app:py:1"},
                         {"id": 2, "cache_key": "app:py:2"}])
    assert r.llen(READY) == 0 and r.pttl("app:py:1") > 0
    assert p.enqueue("py", ['{"id":1,"cache_key":"app:py:1"}',
                            {"id": 2, "cache_key": "app:py:1"}]) == ["1", "2"]
    assert r.pttl("app:py:1") == -1
    assert r.hget("ferry:{py}:protected", "app:py:1") == b"2"


@pytest.mark.parametrize("bad, reason", [
    ('{"ferry":1,"recoveries":0,"attempts":0,"job":{}}',
     "the prefix of ferry's own wrapper format"),
    (b'{"a":"\xff"}', "malformed JSON: invalid UTF-8"),
    ("[1]", "job is not a JSON object"),
    ([1], "job is not a JSON object"),
    ('{"a":1.}', "malformed JSON"),
    ('{"a":' + "[" * 3000 + "]" * 3000 + "}", "malformed JSON"),
    ({"a": "x" * 100}, "bytes, over max_job_bytes 64"),
    ({"id": 1.5}, "job id is not a string or integer"),
    ({"a": float("nan")}, "cannot be written as JSON"),
])
def test_a_bad_job_refuses_the_whole_call(r, bad, reason):
    r.delete(READY)
    p = Producer(r, max_job_bytes=64 if isinstance(bad, dict) else 1 << 20)
    with pytest.raises(InvalidJobError) as e:
        p.enqueue("py", [{"n": 1}, bad, {"n": 2}])
    assert e.value.index == 1
    assert reason in e.value.reason, e.value.reason
    assert e.value.pushed == []
    assert r.llen(READY) == 0


def test_refused_above_memory_refuse_percent(r):
    r.delete(READY)
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", used * 100 // 30)      # about 30% full
    try:
        with pytest.raises(QueueFullError) as e:
            Producer(r, memory_refuse_percent=20).enqueue("py", {"n": 1})
        assert "% full (maxmemory " in str(e.value)
        assert "queue py holds " in str(e.value)
        assert "memory_refuse_percent 20: not enqueueing; drain the queue" \
            in str(e.value)
        assert r.llen(READY) == 0
        assert Producer(r).enqueue("py", {"id": "ok"}) == ["ok"]
    finally:
        r.config_set("maxmemory", 0)


def test_rows_reach_postgres(r):
    """4,300 rows: 2,500 single jobs in three calls, 1,500 rows split into
    4 jobs, 300 rows through cache keys, in three jobs of one id (two in
    one call, one in another): each its own key, each row written once. The
    driver counts the rows."""
    p = Producer(r)
    ids = p.enqueue("pg", [{"n": i} for i in range(2500)])
    assert len(set(ids)) == 2500
    ids = p.enqueue("pg", {"id": "big", "data": [{"n": 10000 + i}
                                                 for i in range(1500)]},
                    chunk_rows=400)
    assert ids == ["big", "big:400", "big:800", "big:1200"]
    ids = p.enqueue("pg", [{"id": "cached", "data": [{"n": 20000 + k * 100 + i}
                                                     for i in range(100)]}
                           for k in range(2)], cache=True)
    assert ids == ["cached", "cached"]
    ids = p.enqueue("pg", {"id": "cached", "data": [{"n": 20200 + i}
                                                    for i in range(100)]},
                    cache=True)
    assert ids == ["cached"]
    end = time.time() + 60
    while time.time() < end and \
            int(r.hget("ferry:{pg}:stats", "done") or 0) < 2507:
        time.sleep(0.1)
    assert int(r.hget("ferry:{pg}:stats", "done") or 0) == 2507
    assert int(r.hget("ferry:{pg}:stats", "enqueued")) == 2507
    assert r.llen("ferry:{pg}:dead") == 0
    # deleted with the ack, and no longer protected
    assert r.keys("ferry:{pg}:cache:*") == []
    assert r.exists("ferry:{pg}:protected") == 0


def test_without_info_in_the_acl_it_warns_once_and_pushes(r):
    r.delete(READY)
    r.acl_setuser("producer", enabled=True, passwords=["+pw"],
                  keys=["ferry:{py}:ready"], commands=["-@all", "+evalsha",
                                                        "+eval", "+lpush"])
    try:
        port = r.connection_pool.connection_kwargs["port"]
        p = Producer(redis.Redis(host="127.0.0.1", port=port,
                                 username="producer", password="pw"))
        with pytest.warns(RuntimeWarning, match="INFO failed: .*"
                          "memory_refuse_percent not checked"):
            assert p.enqueue("py", {"id": "w1"}) == ["w1"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert p.enqueue("py", {"id": "w2"}) == ["w2"]
        assert r.llen(READY) == 2
    finally:
        r.acl_deluser("producer")


SCHEDULED = "ferry:{py}:scheduled"


def redis_ms(r):
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def scheduled(r):
    """(due ms, document) of the scheduled set, the member's prefix cut."""
    return [(int(score), m.split(b":", 1)[1])
            for m, score in r.zrange(SCHEDULED, 0, -1, withscores=True)]


def test_delay_holds_jobs_in_scheduled_by_the_redis_clock(r):
    r.delete(READY, SCHEDULED)
    p = Producer(r)
    t0 = redis_ms(r)
    p.enqueue("py", [{"n": 1}, {"n": 1}], delay=2.5)
    p.enqueue("py", {"n": 2}, delay=datetime.timedelta(minutes=1))
    assert r.llen(READY) == 0
    got = scheduled(r)
    assert len(got) == 3            # identical documents stay distinct
    assert all(t0 + 2500 <= due <= t0 + 2500 + 2000 for due, _ in got[:2])
    assert t0 + 60000 <= got[2][0] <= t0 + 62000
    p.enqueue("py", {"n": 3}, run_at=datetime.datetime(
        2100, 1, 1, tzinfo=datetime.timezone.utc))
    assert scheduled(r)[-1] == (4102444800000, b'{"n":3}')
    # due already: straight onto ready
    p.enqueue("py", {"n": 4}, run_at=time.time() - 60)
    p.enqueue("py", {"n": 5}, delay=0)
    assert ready(r) == [{"n": 4}, {"n": 5}]
    assert r.zcard(SCHEDULED) == 4


@pytest.mark.parametrize("kw", [
    {"delay": -1}, {"delay": "30s"}, {"delay": True},
    {"delay": 3651 * 86400}, {"run_at": datetime.datetime(2030, 1, 1)},
    {"run_at": "tomorrow"}, {"delay": 1, "run_at": 1},
])
def test_bad_delays_are_refused_before_redis(r, kw):
    r.delete(READY, SCHEDULED)
    with pytest.raises(ValueError):
        Producer(r).enqueue("py", {"n": 1}, **kw)
    assert r.exists(READY, SCHEDULED) == 0


def test_delayed_rows_reach_postgres_when_due(r):
    """After test_rows_reach_postgres (2,505 jobs done in queue pg)."""
    done = "ferry:{pg}:stats"
    before = int(r.hget(done, "done") or 0)
    t0 = redis_ms(r)
    Producer(r).enqueue("pg", [{"n": 30000 + i} for i in range(100)],
                        delay=1.5)
    while redis_ms(r) < t0 + 1500:
        seen = int(r.hget(done, "done") or 0)     # read before the clock
        if redis_ms(r) < t0 + 1500:
            assert seen == before, "a delayed job ran before it was due"
        time.sleep(0.02)
    end = time.time() + 20
    while int(r.hget(done, "done") or 0) < before + 100 and time.time() < end:
        time.sleep(0.05)
    assert int(r.hget(done, "done")) == before + 100
    assert r.exists("ferry:{pg}:scheduled") == 0
