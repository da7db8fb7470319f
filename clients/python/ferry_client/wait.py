"""wait.py - Producer.wait: how a producer waits for the jobs it enqueued
with ids on a queue that keeps them (doc/formats.md, "Waiting for jobs"):
nothing is written and no worker does anything for it. ZMSCORE of the ids
still pending, in calls of at most CALL_IDS, says for each: [0, 1)
pending, -1 dead, T >= 1 done (its rows committed), -T < -1 dead and then purged or
archived, no score unknown. Again after a pause (PAUSE_FIRST_S within
QUICK_S of an outcome or the start, else 1.5 times the last pause, at most
PAUSE_MAX_S, never past the deadline) until none is pending or the time is
up; a connection error is a round without an answer (the scores are the
whole state: redis-py connects again and nothing is missed). The dead ones'
reasons come last, from their dead entries (LRANGE of the dead list in
pages of DEAD_PAGE, newest first); an entry not found gives "purged"."""

import datetime
import json
import re
import time
import warnings
from dataclasses import dataclass, field

import redis

from .errors import NotIdempotentError

CALL_IDS = 1000
PAUSE_FIRST_S = 0.010
QUICK_S = 1.0       # PAUSE_FIRST_S within this of an outcome or the start
PAUSE_MAX_S = 0.250
DEAD_PAGE = 1000
DEFAULT_TIMEOUT_S = 30.0
JOB_MEMBER = ',"job":'
LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

_STR = r'"((?:[^"\\\x00-\x1f]|\\.)*)"'
_LEADING_ID = re.compile(r'^[ \t\n\r]*\{[ \t\n\r]*"id"[ \t\n\r]*:[ \t\n\r]*'
                         r'("(?:[^"\\\x00-\x1f]|\\.)*"|-?[0-9]+)'
                         r'[ \t\n\r]*[,}]')
_MEMBERS = (("reason", re.compile(r'^\{"reason":' + _STR)),
            ("last_error", re.compile(r',"last_error":' + _STR)),
            ("id", re.compile(r',"id":' + _STR)))


@dataclass
class WaitResult:
    """The outcome of each id waited for, each once, in the caller's
    order: done (the job's rows committed), dead (a list of (id, reason)
    pairs; reason "purged" when the entry was purged or archived before it
    was read), pending (still waiting, scheduled, running or retried when
    the time was up) and unknown (not held by the queue: never accepted
    with this id, or forgotten idempotency_window after it settled)."""
    done: list = field(default_factory=list)
    dead: list = field(default_factory=list)
    pending: list = field(default_factory=list)
    unknown: list = field(default_factory=list)

    @property
    def complete(self):
        """True when every id has an outcome, done or dead: none pending
        or unknown."""
        return not self.pending and not self.unknown


def timeout_seconds(name, value):
    """A wait's timeout in seconds (a number from 0 or a timedelta), None:
    the default; else a ValueError naming the option."""
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value < float("inf"):
        raise ValueError("%s must be seconds (a number from 0, or a "
                         "timedelta), not %r" % (name, value))
    return float(value)


def id_list(ids):
    """The ids as the queue holds them (str; an integer as written), each
    once, in the caller's order."""
    if isinstance(ids, (str, int)):
        ids = [ids]
    try:
        items = list(ids)
    except TypeError:
        raise TypeError("ids must be a list of job ids (str or int), as "
                        "enqueue returns them, not %r" % (ids,)) from None
    out, seen = [], set()
    for i in items:
        if isinstance(i, str) and i != "":
            s = i
        elif isinstance(i, int) and not isinstance(i, bool):
            s = str(i)
        else:
            raise TypeError("a job id is a non-empty str or an int, not %r"
                            % (i,))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _text(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return value


def document_id(text):
    """The id a document goes by: its "id", a str or an integer as written,
    else None. The document may be anything (a hostile one included)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        m = _LEADING_ID.match(text)          # not JSON: a leading "id"
        if m is None:
            return None
        if not m.group(1).startswith('"'):
            return m.group(1)
        try:
            return json.loads(m.group(1))
        except ValueError:
            return None
    if not isinstance(doc, dict):
        return None
    v = doc.get("id")
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return "%d" % v                  # 7.0 as src/redis/lua/common.lua dead_id
    return None


def dead_entry(raw):
    """(id, reason) of a dead entry (doc/formats.md, "dead-entry"): its
    members before the first ',"job":' (no str of the grammar holds it),
    then the job's document. The reason is the entry's, with its last_error
    (the handler's or the table's) after a colon; the id the entry's "id",
    else the document's; None when neither names the job."""
    text = _text(raw)
    at = text.find(JOB_MEMBER)
    head = text if at < 0 else text[:at] + "}"
    try:
        members = json.loads(head)
        if not isinstance(members, dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError):
        # a malformed entry: its leading "reason", its "last_error", "id"
        members = {}
        for name, pattern in _MEMBERS:
            m = pattern.search(head)
            if m is not None:
                try:
                    members[name] = json.loads('"%s"' % m.group(1))
                except ValueError:
                    pass
    reason = members.get("reason")
    if not isinstance(reason, str):
        reason = "unknown reason (a malformed dead entry)"
    last = members.get("last_error")
    if isinstance(last, str) and last and last not in reason:
        reason = "%s: %s" % (reason, last)
    job_id = members.get("id")
    if not isinstance(job_id, str):
        job_id = None
        if at >= 0:
            job_id = document_id(text[at + len(JOB_MEMBER):-1])
    return job_id, reason


def not_idempotent(queue):
    """The error for a queue that keeps no ids."""
    return NotIdempotentError(
        "queue %s keeps no ids (its idempotency_window is 0 or not set, or "
        "ferryd has not published it yet): only the jobs of a queue with an "
        "idempotency_window above 0 can be waited for; set "
        "idempotency_window in its [queue %s] section of ferryd.ini"
        % (queue, queue))


def keeps_ids(client, tag, deadline):
    """Does the queue keep ids? Its config hash's idempotency_window,
    asked again while the connection fails, until the deadline (then the
    error)."""
    pause = PAUSE_FIRST_S
    while True:
        try:
            return int(client.hget(tag + "config", "idempotency_window")
                       or 0) > 0
        except LOST:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 1.5, PAUSE_MAX_S)


def _dead_reasons(client, key, reasons):
    """Fills reasons (id -> None) with the reasons of the dead ids: their
    newest entries in the dead list; an id whose entry is not there is
    "purged"."""
    wanted = sum(1 for v in reasons.values() if v is None)
    start = 0
    while wanted > 0:
        page = client.lrange(key, start, start + DEAD_PAGE - 1)
        for raw in page:
            job_id, reason = dead_entry(raw)
            if job_id is not None and job_id in reasons and \
                    reasons[job_id] is None:
                reasons[job_id] = reason
                wanted -= 1
        if len(page) < DEAD_PAGE:
            break
        start += DEAD_PAGE
    for job_id, v in reasons.items():
        if v is None:
            reasons[job_id] = "purged"


def wait_for(producer, queue, ids, timeout):
    """The outcome of each id (see the top of this file): a WaitResult."""
    seconds = timeout_seconds("timeout", timeout)
    if not isinstance(queue, str) or not queue:
        raise TypeError("queue must be a non-empty str (a [queue NAME] of "
                        "ferryd.ini)")
    wanted = id_list(ids)
    client = producer.redis
    tag = "%s:{%s}:" % (producer.prefix, queue)
    deadline = time.monotonic() + seconds
    if not keeps_ids(client, tag, deadline):
        raise not_idempotent(queue)
    state = {}                     # id -> "done" | "dead" | "unknown"
    pending = wanted
    pause = PAUSE_FIRST_S
    warned = False
    last_outcome = time.monotonic()
    while True:
        saw_outcome = False
        try:
            got = {}               # a round counts whole or not at all
            for i in range(0, len(pending), CALL_IDS):
                part = pending[i:i + CALL_IDS]
                scores = client.zmscore(tag + "ids", part)
                for job_id, score in zip(part, scores):
                    if score is None:
                        got[job_id] = "unknown"
                    elif score < 0 or score >= 1:
                        got[job_id] = "done" if score >= 1 else "dead"
            state.update(got)
            saw_outcome = bool(got)
            pending = [i for i in pending if i not in got]
        except LOST as err:
            if not warned:
                warned = True     # said once a wait
                warnings.warn("ferry_client: %s; waiting for the jobs of "
                              "queue %s goes on when Redis answers again "
                              "(the ids' scores are the whole state)"
                              % (err, queue), RuntimeWarning, stacklevel=3)
        left = deadline - time.monotonic()
        if not pending or left <= 0:
            break
        if saw_outcome:
            last_outcome = time.monotonic()
        pause = PAUSE_FIRST_S if time.monotonic() - last_outcome < QUICK_S \
            else min(pause * 1.5, PAUSE_MAX_S)
        time.sleep(min(pause, left))
    reasons = {i: None for i, s in state.items() if s == "dead"}
    tries = 0
    while reasons:
        try:
            _dead_reasons(client, tag + "dead", reasons)
            break
        except LOST:
            # the outcomes are known: their reasons are read even past the
            # deadline
            tries += 1
            if tries > 20:
                raise
            reasons = dict.fromkeys(reasons)
            time.sleep(PAUSE_MAX_S)
    out = WaitResult()
    for job_id in wanted:
        s = state.get(job_id)
        if s == "done":
            out.done.append(job_id)
        elif s == "dead":
            out.dead.append((job_id, reasons[job_id]))
        elif s == "unknown":
            out.unknown.append(job_id)
        else:
            out.pending.append(job_id)
    return out
