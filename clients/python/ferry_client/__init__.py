"""ferry_client - enqueue jobs for ferry from Python with ferryctl enqueue's
guarantees (doc/producers.md): Producer(redis.Redis(...)).enqueue(...)
and .wait(...), or enqueue(...) and wait(...) on $FERRY_REDIS_URL (default
redis://localhost:6379/0)."""

import os

import redis

from .errors import FerryError, InvalidJobError, NotIdempotentError, \
    NotReplicatedError, QueueFullError
from .producer import EnqueueResult, Producer, load_script
from .wait import WaitResult

__all__ = ["Producer", "EnqueueResult", "WaitResult", "enqueue", "wait",
           "load_script", "FerryError", "InvalidJobError", "QueueFullError",
           "NotReplicatedError", "NotIdempotentError"]

_default = None


def _shared():
    global _default
    if _default is None:
        _default = Producer(redis.Redis.from_url(os.environ.get(
            "FERRY_REDIS_URL", "redis://localhost:6379/0")))
    return _default


def enqueue(queue, job_or_jobs, cache=None, cache_ttl=None, chunk_rows=None,
            id=None, delay=None, run_at=None, wait=None, producer=None):
    """Producer.enqueue on `producer`, else on a Producer with ferry's
    defaults connected to $FERRY_REDIS_URL."""
    return (producer or _shared()).enqueue(
        queue, job_or_jobs, cache=cache, cache_ttl=cache_ttl,
        chunk_rows=chunk_rows, id=id, delay=delay, run_at=run_at, wait=wait)


def wait(queue, ids, timeout=None, producer=None):
    """Producer.wait on `producer`, else on the Producer enqueue() uses
    (connected to $FERRY_REDIS_URL)."""
    return (producer or _shared()).wait(queue, ids, timeout=timeout)
