"""producer.py - Producer.enqueue: a caller's jobs through ferry's
enqueue.lua (src/redis/lua/enqueue.lua, the script ferryctl enqueue runs), in calls
of at most CALL_JOBS jobs and CALL_BYTES bytes, each all or nothing, then
WAIT for replicas when asked (after the script, as ferryctl does). The
script is the copy shipped in this package, or the installed one
(script_path, FERRY_ENQUEUE_LUA: $(pkgdatadir)/lua/enqueue.lua).
Each job goes with its own id: on a queue with an idempotency_window, a
job whose id the queue holds is "already accepted" (EnqueueResult.already),
and a call whose reply was lost is sent again, as ferryctl does
(RESEND_FOR_S). On such a queue the producer can wait for its jobs
(Producer.wait, enqueue's wait=: wait.py)."""

import datetime
import hashlib
import os
import time
import warnings
from importlib import resources

import redis

from . import jobs as jobs_mod
from . import wait as wait_mod
from .errors import FerryError, InvalidJobError, NotReplicatedError, \
    QueueFullError

CALL_JOBS = 1000               # src/ferryctl/ctl.h CTL_CHUNK
CALL_BYTES = 16 << 20          # src/ferryctl/ctl.h CTL_CHUNK_BYTES
TTL_MAX_S = 365 * 86400        # as ferryctl enqueue --cache-ttl
DELAY_MAX_MS = 3650 * 86400 * 1000   # as ferryctl enqueue --delay (due_time.h)
# a call whose reply was lost, sent again (src/ferryctl/ctl.h CTL_RESEND_*)
RESEND_FOR_S = 60.0
RESEND_FIRST_S = 0.1
RESEND_MAX_S = 2.0


class EnqueueResult(list):
    """The ids of the jobs of an enqueue, in order (a list, as ferryctl
    prints them); already: those the queue had accepted already (an
    idempotency_window), not pushed again; outcome: with wait=, what the
    wait found (a WaitResult), else None."""

    def __init__(self, ids=(), already=(), outcome=None):
        super().__init__(ids)
        self.already = list(already)
        self.outcome = outcome


def load_script(path=None):
    """The bytes of enqueue.lua: path, $FERRY_ENQUEUE_LUA, else this
    package's copy (kept equal to the build's by make check)."""
    path = path or os.environ.get("FERRY_ENQUEUE_LUA")
    if path:
        with open(path, "rb") as f:
            return f.read()
    return resources.files(__package__).joinpath("enqueue.lua").read_bytes()


class Producer:
    """Enqueues for ferry on one Redis connection (redis.Redis). The limits
    are the queue's in ferryd.ini: max_job_bytes, [ferryd]
    memory_refuse_percent, chunk_rows, cache_key_prefixes (a list, or the
    comma-separated text), redis_prefix, redis_wait_replicas /
    redis_wait_timeout (ms). cache_ttl is accepted and unused: a cache key
    has no TTL while its job lives (ferryd removes keys left without a job
    after its cache_ttl)."""

    def __init__(self, client, prefix="ferry", max_job_bytes=1048576,
                 memory_refuse_percent=90, chunk_rows=1000, cache_ttl=86400,
                 wait_replicas=0, wait_timeout_ms=1000, script_path=None,
                 cache_key_prefixes=()):
        self.redis = client
        self.prefix = prefix
        self.max_job_bytes = int(max_job_bytes)
        self.memory_refuse_percent = int(memory_refuse_percent)
        self.chunk_rows = _positive("chunk_rows", chunk_rows, 1000000)
        self.cache_ttl = _positive("cache_ttl", cache_ttl, TTL_MAX_S)
        if isinstance(cache_key_prefixes, str):
            cache_key_prefixes = cache_key_prefixes.split(",")
        self.cache_key_prefixes = [p.strip() for p in cache_key_prefixes
                                   if p.strip()]
        self.wait_replicas = int(wait_replicas)
        self.wait_timeout_ms = int(wait_timeout_ms)
        self.script = load_script(script_path)
        self.sha = hashlib.sha1(self.script).hexdigest()
        self._said_unchecked = False

    def enqueue(self, queue, job_or_jobs, cache=None, cache_ttl=None,
                chunk_rows=None, id=None, delay=None, run_at=None, wait=None):
        """Push one job (a dict, or JSON text pushed as it is) or a list of
        them onto `queue`; returns the ids, as ferryctl enqueue prints them.
        cache=True (or a cache_ttl, unused otherwise) moves each job's
        "data" into a cache key of its own, protected (no TTL) until the
        job is done; a job naming an application's key (cache_key, under
        cache_key_prefixes) must find it there, and it is protected the
        same way. chunk_rows splits bigger "data" arrays into
        jobs ID:INDEX; id names a single job. delay (seconds, or a
        datetime.timedelta) or run_at (an aware datetime, or Unix seconds)
        holds the jobs in the queue's scheduled set until then, by the Redis
        clock (ferryctl enqueue --delay / --at). wait (seconds or a
        timedelta, on a queue with an idempotency_window; every job needs
        an id) waits for the jobs too, as wait() does: the result's
        outcome is wait()'s answer."""
        single = not isinstance(job_or_jobs, (list, tuple))
        docs = [job_or_jobs] if single else list(job_or_jobs)
        if id is not None and not single:
            raise ValueError("id= names a single job; give each job of a "
                             "list its own \"id\"")
        rows = _positive("chunk_rows", chunk_rows or self.chunk_rows, 1000000)
        if cache_ttl is not None:
            _positive("cache_ttl", cache_ttl, TTL_MAX_S)
        cached = bool(cache) or cache_ttl is not None
        due = _due_marker(delay, run_at)
        wait_s = None if wait is None else \
            wait_mod.timeout_seconds("wait", wait)
        tag = "%s:{%s}:" % (self.prefix, queue)
        elements = []
        keys = jobs_mod.CacheKeys(tag + "cache:") if cached else None
        for i, doc in enumerate(docs):
            elements += jobs_mod.build(doc, i, keys, rows,
                                       id if single else None)
        if wait_s is not None:
            # refused before anything is pushed: what could not be waited for
            for e in elements:
                if not e.own_id:
                    raise InvalidJobError(
                        e.index, "it has no \"id\" of its own, and a job is "
                        "waited for by its id: give each job an \"id\" (or "
                        "enqueue without wait=)")
            if not self._keeps_ids(tag, time.monotonic() + RESEND_FOR_S):
                raise wait_mod.not_idempotent(queue)
        pushed = EnqueueResult()
        for call in _calls(elements):
            already = self._push(tag, call, due, pushed)
            pushed += [e.id for e in call]
            pushed.already += [call[i - 1].id for i in already]
        self._replicated(queue, pushed)
        if wait_s is not None:
            pushed.outcome = wait_mod.wait_for(self, queue, pushed, wait_s)
        return pushed

    def wait(self, queue, ids, timeout=None):
        """Wait until each of the ids (str or int, as enqueue returned
        them) of jobs enqueued on `queue`, a queue with an
        idempotency_window, is done (its rows committed), dead, or the
        timeout (seconds or a timedelta, default 30) is up. Returns a
        WaitResult (done, dead as (id, reason) pairs, pending, unknown; each
        id once, in the caller's order); a timeout returns too, with the ids
        still pending. A queue that keeps no ids raises NotIdempotentError.
        Reads only: the scores of the ids (doc/formats.md, "Waiting for
        jobs")."""
        return wait_mod.wait_for(self, queue, ids, timeout)

    def _push(self, tag, call, due, pushed):
        """One call of enqueue.lua: KEYS ready, [scheduled,] [protected, the
        cache keys]; ARGV the limits, the options, five per job (K for a
        key it writes, -K for a key it names; its binding: the SHA-1 of its
        element and its layout, where the script needs them; its own id).
        The indexes
        (from 1) of the jobs already accepted."""
        keys = [tag + "ready"] + ([tag + "scheduled"] if due else [])
        if any(e.key or e.named_key for e in call):
            keys.append(tag + "protected")
        opts = ([due] if due else []) + ["ids"] + \
            ["prefix=" + p for p in self.cache_key_prefixes]
        args = [self.max_job_bytes, self.memory_refuse_percent, len(opts)] \
            + opts
        per_job = []
        for e in call:
            if e.key or e.named_key:
                keys.append(e.key or e.named_key)
            k = len(keys) if e.key else -len(keys) if e.named_key else 0
            # what binds a key of ferry's own, or a held id, to this job
            binding = hashlib.sha1(e.element).hexdigest() + e.layout \
                if e.key or e.own_id else ""
            per_job += [e.element, k, e.value, binding, e.own_id]
        args += per_job
        try:
            reply = self._resent(tag, keys, args)
        except redis.exceptions.ResponseError as err:
            raise _error(str(err), call, pushed) from None
        if reply[1] and not self._said_unchecked:
            self._said_unchecked = True     # as ferryctl: said once
            why = reply[1].decode(errors="replace")
            warnings.warn("ferry_client: %s; memory_refuse_percent not "
                          "checked (Redis still refuses at maxmemory)" % why,
                          RuntimeWarning, stacklevel=3)
        return [int(i) for i in reply[2]] if len(reply) > 2 else []

    def _resent(self, tag, keys, args):
        """The call, sent again while its outcome is unknown (the
        connection failed: Redis killed, restarted, failed over, the network
        cut; or an answer a new connection may cure: LOADING, READONLY...)
        if the queue keeps ids, which makes that safe; else the error, as
        it came. With wait_replicas, on such a queue a call counts as
        answered only once that many replicas have it (WAIT after it): a
        primary demoted before a replica had it forgets it, so it is sent
        again, as ferryctl does."""
        deadline = time.monotonic() + RESEND_FOR_S
        delay = RESEND_FIRST_S
        while True:
            reply = None
            try:
                reply = self._run(keys, args)
                why = self._replicas_lag()
                if why is None or not self._keeps_ids(tag, deadline):
                    return reply
            except (redis.exceptions.ConnectionError,
                    redis.exceptions.TimeoutError,
                    redis.exceptions.ResponseError) as err:
                if (isinstance(err, redis.exceptions.ResponseError) and
                        not _outcome_unknown(err)) or \
                        not self._keeps_ids(tag, deadline):
                    raise
                why = err
            if time.monotonic() + delay > deadline:
                if isinstance(why, Exception):
                    raise why
                return reply    # _replicated says it
            warnings.warn("ferry_client: %s; the queue keeps ids "
                          "(idempotency_window), so it is safe to send "
                          "again: in %.1f s" % (why, delay),
                          RuntimeWarning, stacklevel=4)
            time.sleep(delay)
            delay = min(delay * 2, RESEND_MAX_S)

    def _replicas_lag(self):
        """None when wait_replicas replicas have this connection's writes
        (or none are wanted), else why not. (WAIT counts the writes of the
        connection it runs on: the pool's last one, the call's, unless
        other threads share the client.)"""
        if self.wait_replicas <= 0:
            return None
        got = self.redis.execute_command("WAIT", self.wait_replicas,
                                         self.wait_timeout_ms)
        if got >= self.wait_replicas:
            return None
        return "reached %d of %d replicas within %d ms" % (
            got, self.wait_replicas, self.wait_timeout_ms)

    def _keeps_ids(self, tag, deadline):
        """Does the queue keep ids (its config hash, published by ferryd)?
        Asked again while Redis does not answer, until the deadline."""
        while True:
            try:
                return int(self.redis.hget(tag + "config",
                                           "idempotency_window") or 0) > 0
            except (redis.exceptions.ConnectionError,
                    redis.exceptions.TimeoutError):
                if time.monotonic() + RESEND_FIRST_S > deadline:
                    raise
                time.sleep(RESEND_FIRST_S)

    def _run(self, keys, args):
        try:
            return self.redis.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return self.redis.eval(self.script, len(keys), *keys, *args)

    def _replicated(self, queue, pushed):
        if self.wait_replicas <= 0 or not pushed:
            return
        got = self.redis.execute_command("WAIT", self.wait_replicas,
                                         self.wait_timeout_ms)
        if got < self.wait_replicas:
            raise NotReplicatedError(
                "%d jobs are in queue %s, but reached %d of %d replicas "
                "within %d ms: a failover now would lose them. Not pushed "
                "again (that could enqueue them twice): check the replicas"
                % (len(pushed), queue, got, self.wait_replicas,
                   self.wait_timeout_ms), pushed, got, self.wait_replicas)


def _outcome_unknown(err):
    """An error answer after which the call's outcome is unknown or a new
    connection may cure it (src/ferryctl/ctl_resend.c outcome_unknown)."""
    if isinstance(err, redis.exceptions.ReadOnlyError):
        return True     # redis-py cuts the READONLY prefix off
    return str(err).startswith(("LOADING", "READONLY", "MASTERDOWN",
                                "TRYAGAIN", "CLUSTERDOWN"))


def _positive(name, value, most):
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 1 <= value <= most:
        raise ValueError("%s must be a whole number from 1 to %d, not %r"
                         % (name, most, value))
    return value


def _due_marker(delay, run_at):
    """enqueue.lua's due marker: "delay=MS" (from now by the Redis clock)
    or "at=MS" (Unix ms), or None."""
    if delay is not None and run_at is not None:
        raise ValueError("give one of delay= and run_at=, not both")
    if delay is not None:
        if isinstance(delay, datetime.timedelta):
            delay = delay.total_seconds()
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) \
                or not 0 <= delay * 1000 <= DELAY_MAX_MS:
            raise ValueError("delay must be seconds (a number or a "
                             "timedelta) from 0 to 3650 days, not %r"
                             % (delay,))
        return "delay=%d" % round(delay * 1000)
    if run_at is not None:
        if isinstance(run_at, datetime.datetime):
            if run_at.tzinfo is None:
                raise ValueError("run_at must be an aware datetime (with "
                                 "tzinfo, e.g. datetime.timezone.utc): a "
                                 "naive one names no instant")
            run_at = run_at.timestamp()
        if isinstance(run_at, bool) or \
                not isinstance(run_at, (int, float)) or run_at < 0:
            raise ValueError("run_at must be a datetime or Unix seconds, "
                             "not %r" % (run_at,))
        return "at=%d" % round(run_at * 1000)
    return None


def _calls(elements):
    """Calls of at most CALL_JOBS jobs and CALL_BYTES bytes (a bigger job is
    a call of its own), as ferryctl's chunks (src/ferryctl/ctl_push.c)."""
    call, size = [], 0
    for e in elements:
        n = len(e.element) + len(e.value)
        if call and (len(call) == CALL_JOBS or size + n > CALL_BYTES):
            yield call
            call, size = [], 0
        call.append(e)
        size += n
    if call:
        yield call


def _error(message, call, pushed):
    """The exception for enqueue.lua's error reply (src/redis/lua/enqueue.lua)."""
    code, _, rest = message.partition(" ")
    if code == "INVALID":
        at, _, reason = rest.partition(" ")
        return InvalidJobError(call[int(at) - 1].index, reason, pushed)
    if code == "FULL":
        return QueueFullError(rest.split(" ", 2)[2], pushed)
    if "OOM" in message and "maxmemory" in message:
        return QueueFullError("redis is full (%s): drain the queue or raise "
                              "maxmemory" % message, pushed)
    return FerryError("enqueue.lua failed: %s" % message, pushed)
