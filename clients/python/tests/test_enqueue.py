"""test_enqueue.py - ferry_client against a real Redis and ferryd: the ids,
chunks and cache keys of ferryctl enqueue, refusals as exception classes
with nothing pushed, and jobs that arrive as rows in PostgreSQL (queue
"pg"; the driver, tests/integration/test_python_client.c, counts them)."""

import datetime
import hashlib
import json
import os
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


def test_chunks_are_id_index(r):
    r.delete(READY)
    ids = ferry_client.enqueue("py", {"id": "x", "t": "k", "data": [1, 2, 3,
                               4, 5]}, chunk_rows=2, producer=Producer(r))
    assert ids == ["x:0", "x:1", "x:2"]
    assert ready(r) == [{"id": "x:0", "t": "k", "data": [1, 2]},
                        {"id": "x:1", "t": "k", "data": [3, 4]},
                        {"id": "x:2", "t": "k", "data": [5]}]


def test_cache_keys_get_the_ttl(r):
    r.delete(READY)
    p = Producer(r)
    ids = p.enqueue("py", {"id": "c", "data": [[1], [2], [3]]}, cache_ttl=60,
                    chunk_rows=2)
    assert ids == ["c:0", "c:1"]
    assert ready(r) == [{"id": "c:0", "cache_key": "ferry:{py}:cache:c:0"},
                        {"id": "c:1", "cache_key": "ferry:{py}:cache:c:1"}]
    assert r.get("ferry:{py}:cache:c:1") == b"[[3]]"
    assert 50000 < r.pttl("ferry:{py}:cache:c:0") <= 60000
    p.enqueue("py", {"id": "d", "n": 1}, cache=True)   # no data: the doc
    assert r.get("ferry:{py}:cache:d") == b'{"id":"d","n":1}'
    assert r.pttl("ferry:{py}:cache:d") > 86000000


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
        assert "full (memory_refuse_percent 20): not enqueueing; drain the " \
            "queue or raise maxmemory" in str(e.value)
        assert r.llen(READY) == 0
        assert Producer(r).enqueue("py", {"id": "ok"}) == ["ok"]
    finally:
        r.config_set("maxmemory", 0)


def test_rows_reach_postgres(r):
    """4,300 rows: 2,500 single jobs in three calls, 1,500 rows split into
    4 jobs, 300 rows through a cache key. The driver counts the rows."""
    p = Producer(r)
    ids = p.enqueue("pg", [{"n": i} for i in range(2500)])
    assert len(set(ids)) == 2500
    ids = p.enqueue("pg", {"id": "big", "data": [{"n": 10000 + i}
                                                 for i in range(1500)]},
                    chunk_rows=400)
    assert ids == ["big:0", "big:1", "big:2", "big:3"]
    ids = p.enqueue("pg", {"id": "cached", "data": [{"n": 20000 + i}
                                                    for i in range(300)]},
                    cache=True)
    assert ids == ["cached"]
    end = time.time() + 60
    while time.time() < end and \
            int(r.hget("ferry:{pg}:stats", "done") or 0) < 2505:
        time.sleep(0.1)
    assert int(r.hget("ferry:{pg}:stats", "done") or 0) == 2505
    assert int(r.hget("ferry:{pg}:stats", "enqueued")) == 2505
    assert r.llen("ferry:{pg}:dead") == 0
    assert r.exists("ferry:{pg}:cache:cached") == 0   # deleted with the ack


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
    p.enqueue("py", [{"n": 1}, {"n": 1}], delay=2.5, cache=True)
    p.enqueue("py", {"n": 2}, delay=datetime.timedelta(minutes=1))
    assert r.llen(READY) == 0
    got = scheduled(r)
    assert len(got) == 3            # identical documents stay distinct
    assert all(t0 + 2500 <= due <= t0 + 2500 + 2000 for due, _ in got[:2])
    assert t0 + 60000 <= got[2][0] <= t0 + 62000
    # cached: the documents name their cache keys, which outlive the delay
    doc = json.loads(got[0][1])
    assert r.pttl(doc["cache_key"]) > 86400 * 1000
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
