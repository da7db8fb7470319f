"""ferry_client - enqueue jobs for ferry from Python with ferryctl enqueue's
guarantees (README "Producing jobs"): Producer(redis.Redis(...)).enqueue(...),
or enqueue(...) on $FERRY_REDIS_URL (default redis://localhost:6379/0)."""

import os

import redis

from .errors import FerryError, InvalidJobError, NotReplicatedError, \
    QueueFullError
from .producer import EnqueueResult, Producer, load_script

__all__ = ["Producer", "EnqueueResult", "enqueue", "load_script", "FerryError",
           "InvalidJobError", "QueueFullError", "NotReplicatedError"]

_default = None


def enqueue(queue, job_or_jobs, cache=None, cache_ttl=None, chunk_rows=None,
            id=None, delay=None, run_at=None, producer=None):
    """Producer.enqueue on `producer`, else on a Producer with ferry's
    defaults connected to $FERRY_REDIS_URL."""
    global _default
    if producer is None:
        if _default is None:
            _default = Producer(redis.Redis.from_url(os.environ.get(
                "FERRY_REDIS_URL", "redis://localhost:6379/0")))
        producer = _default
    return producer.enqueue(queue, job_or_jobs, cache=cache,
                            cache_ttl=cache_ttl, chunk_rows=chunk_rows, id=id,
                            delay=delay, run_at=run_at)
