'use strict';
// wait.js - Producer#wait: how a producer waits for the jobs it enqueued
// with ids on a queue that keeps them (doc/formats.md, "Waiting for jobs"):
// nothing is written and no worker does anything for it. ZMSCORE of the ids
// still pending, in calls of at most CALL_IDS, says for each: [0, 1)
// pending, -1 dead, T >= 1 done (its rows committed), -T < -1 dead and then purged or
// archived, no score unknown. Again after a pause (PAUSE_FIRST_MS within
// QUICK_MS of an outcome or the start, else 1.5 times the last pause, at most
// PAUSE_MAX_MS, never past the deadline) until none is pending or the time
// is up; a connection error is a round without an answer (the scores are
// the whole state: the client reconnects and nothing is missed). The dead
// ones' reasons come last, from their dead entries (LRANGE of the dead list
// in pages of DEAD_PAGE, newest first); an entry not found gives "purged".

const { ErrorReply, ClientClosedError, DisconnectsClientError } =
  require('redis');
const { FerryError, NotIdempotentError } = require('./errors');

const CALL_IDS = 1000;
const PAUSE_FIRST_MS = 10;
const QUICK_MS = 1000;   // PAUSE_FIRST_MS within this of an outcome or start
const PAUSE_MAX_MS = 250;
const DEAD_PAGE = 1000;
const DEFAULT_TIMEOUT_MS = 30000;
// a round may end this long after the deadline, so that a short timeout
// still reads every score once
const ROUND_GRACE_MS = 1000;
const JOB_MEMBER = ',"job":';
// a document's leading "id" member: a JSON string or an integer
const LEADING_ID = new RegExp('^[ \\t\\n\\r]*\\{[ \\t\\n\\r]*"id"' +
  '[ \\t\\n\\r]*:[ \\t\\n\\r]*("(?:[^"\\\\\\x00-\\x1f]|\\\\.)*"|-?\\d+)' +
  '[ \\t\\n\\r]*[,}]');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The timeout (ms) of a wait: a finite number from 0, else a RangeError
 * (what names the option in the message). */
function timeoutMs(what, value) {
  if (value === undefined || value === null) return DEFAULT_TIMEOUT_MS;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${what} must be milliseconds (a number from 0), ` +
      `not ${JSON.stringify(value) ?? String(value)}`);
  }
  return value;
}

/** The ids as the queue holds them (strings; an integer as written), each
 * once, in the caller's order. */
function idList(ids) {
  const list = typeof ids === 'string' || typeof ids === 'number' ||
    typeof ids === 'bigint' ? [ids] : ids;
  if (list === null || list === undefined ||
      typeof list[Symbol.iterator] !== 'function') {
    throw new TypeError('ids must be an array of job ids (strings or ' +
      'integers), as enqueue resolves to');
  }
  const out = [];
  const seen = new Set();
  for (const id of list) {
    let s;
    if (typeof id === 'string' && id !== '') s = id;
    else if (typeof id === 'bigint' || Number.isSafeInteger(id)) s = String(id);
    else {
      throw new TypeError('a job id is a non-empty string or an integer, ' +
        `not ${JSON.stringify(id) ?? String(id)}`);
    }
    if (!seen.has(s)) {
      seen.add(s);
      out.push(s);
    }
  }
  return out;
}

/** Is err a connection's failure (the client reconnects), not Redis'
 * answer, a client closed by its owner or a mistake? */
function lostConnection(err) {
  return !(err instanceof ErrorReply) && !(err instanceof FerryError) &&
    !(err instanceof ClientClosedError) &&
    !(err instanceof DisconnectsClientError) &&
    !(err instanceof TypeError) && !(err instanceof RangeError);
}

class TimeUp extends Error {}

/** The promise, or a TimeUp rejection at the deadline (a command queued
 * while the client reconnects must not hold the wait long past it; its
 * answer, if it comes, is dropped). */
function byDeadline(promise, deadline) {
  let timer;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new TimeUp('the time is up')),
      Math.max(0, deadline - Date.now()));
  });
  promise.catch(() => {});
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The id a document goes by: its "id", a string or an integer as written
 * (read from the text when it is beyond 2^53), else null. The document may
 * be anything (a hostile one included). */
function documentId(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    doc = undefined;
  }
  if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) {
    if (typeof doc.id === 'string') return doc.id;
    if (typeof doc.id === 'number' && Number.isInteger(doc.id)) {
      if (Number.isSafeInteger(doc.id)) return String(doc.id);
    } else {
      return null;
    }
  }
  // not JSON, or an integer id beyond 2^53: a leading "id" member
  const m = LEADING_ID.exec(text);
  if (m === null) return null;
  if (m[1][0] !== '"') return m[1];
  try {
    return JSON.parse(m[1]);
  } catch (e) {
    return null;
  }
}

/** {id, reason} of a dead entry (doc/formats.md, "dead-entry"): its members
 * before the first ',"job":' (no str of the grammar holds it), then the
 * job's document. The reason is the entry's, with its last_error (the
 * handler's or the table's) after a colon; the id the entry's "id", else
 * the document's; null when neither names the job. */
function deadEntry(text) {
  const at = text.indexOf(JOB_MEMBER);
  const head = at < 0 ? text : text.slice(0, at) + '}';
  let members = null;
  try {
    members = JSON.parse(head);
  } catch (e) {
    members = null;
  }
  if (members === null || typeof members !== 'object') {
    // a malformed entry: its leading "reason", its "last_error" and "id"
    members = {};
    const str = '"((?:[^"\\\\\\x00-\\x1f]|\\\\.)*)"';
    for (const [name, re] of [['reason', `^\\{"reason":${str}`],
      ['last_error', `,"last_error":${str}`], ['id', `,"id":${str}`]]) {
      const m = new RegExp(re).exec(head);
      try {
        if (m) members[name] = JSON.parse(`"${m[1]}"`);
      } catch (e) {
        // not read
      }
    }
  }
  let reason = typeof members.reason === 'string' ? members.reason
    : 'unknown reason (a malformed dead entry)';
  if (typeof members.last_error === 'string' && members.last_error !== '' &&
      !reason.includes(members.last_error)) {
    reason = `${reason}: ${members.last_error}`;
  }
  let id = typeof members.id === 'string' ? members.id : null;
  if (id === null && at >= 0) {
    id = documentId(text.slice(at + JOB_MEMBER.length, -1));
  }
  return { id, reason };
}

/** Does the queue keep ids? Its config hash's idempotency_window, asked
 * again while the connection fails, until the deadline (then the error). */
async function keepsIds(redis, tag, deadline) {
  let pause = PAUSE_FIRST_MS;
  for (;;) {
    try {
      return Number(await redis.hGet(`${tag}config`,
        'idempotency_window') || 0) > 0;
    } catch (err) {
      if (!lostConnection(err) || Date.now() + pause > deadline) throw err;
      await sleep(pause);
      pause = Math.min(pause * 1.5, PAUSE_MAX_MS);
    }
  }
}

/** The error for a queue that keeps no ids. */
function notIdempotent(queue) {
  return new NotIdempotentError(`queue ${queue} keeps no ids (its ` +
    'idempotency_window is 0 or not set, or ferryd has not published it ' +
    'yet): only the jobs of a queue with an idempotency_window above 0 ' +
    'can be waited for; set idempotency_window in its [queue ' +
    `${queue}] section of ferryd.ini`);
}

/** Refuses a queue that keeps no ids (NotIdempotentError). */
async function assertKeepsIds(redis, tag, queue, deadline) {
  if (!await keepsIds(redis, tag, deadline)) throw notIdempotent(queue);
}

/** The reasons of the dead ids (a Map id -> reason, filled): their newest
 * entries in the dead list; an id whose entry is not there is "purged". */
async function deadReasons(redis, key, reasons) {
  let wanted = 0;
  for (const v of reasons.values()) if (v === null) wanted++;
  for (let start = 0; wanted > 0; start += DEAD_PAGE) {
    const page = await redis.lRange(key, start, start + DEAD_PAGE - 1);
    for (const text of page) {
      const { id, reason } = deadEntry(text);
      if (id !== null && reasons.get(id) === null) {
        reasons.set(id, reason);
        wanted--;
      }
    }
    if (page.length < DEAD_PAGE) break;
  }
  for (const [id, v] of reasons) if (v === null) reasons.set(id, 'purged');
}

/** The outcome of each id (see the top of this file). */
async function waitFor(producer, queue, ids, timeout) {
  const ms = timeoutMs('timeout', timeout);
  if (typeof queue !== 'string' || queue === '') {
    throw new TypeError('queue must be a non-empty string (a [queue NAME] ' +
      'of ferryd.ini)');
  }
  const list = idList(ids);
  const redis = producer.redis;
  const tag = `${producer.prefix}:{${queue}}:`;
  const deadline = Date.now() + ms;
  await assertKeepsIds(redis, tag, queue, deadline);
  const state = new Map();         // id -> 'done' | 'dead' | 'unknown'
  let pending = list;
  let pause = PAUSE_FIRST_MS;
  let warned = false;
  let lastOutcome = Date.now();
  for (;;) {
    let sawOutcome = false;
    try {
      // a round counts whole or not at all
      const got = new Map();
      const late = Math.max(deadline, Date.now() + ROUND_GRACE_MS);
      for (let i = 0; i < pending.length; i += CALL_IDS) {
        const part = pending.slice(i, i + CALL_IDS);
        const scores = await byDeadline(redis.zmScore(`${tag}ids`, part),
          late);
        part.forEach((id, k) => {
          const score = scores[k] === null || scores[k] === undefined
            ? null : Number(scores[k]);
          if (score === null || score < 0 || score >= 1) {
            got.set(id, score === null ? 'unknown' : score >= 1 ? 'done'
              : 'dead');
          }
        });
      }
      for (const [id, s] of got) state.set(id, s);
      sawOutcome = got.size > 0;
      pending = pending.filter((id) => !got.has(id));
    } catch (err) {
      if (!lostConnection(err)) throw err;
      if (!warned && !(err instanceof TimeUp)) {
        warned = true;       // said once a wait
        process.emitWarning(`ferry-client: ${err.message}; waiting for ` +
          `the jobs of queue ${queue} goes on when Redis answers again ` +
          '(the ids\' scores are the whole state)',
        { type: 'FerryWarning', code: 'FERRY_WAIT_RETRIED' });
      }
    }
    const left = deadline - Date.now();
    if (pending.length === 0 || left <= 0) break;
    if (sawOutcome) lastOutcome = Date.now();
    pause = Date.now() - lastOutcome < QUICK_MS ? PAUSE_FIRST_MS
      : Math.min(pause * 1.5, PAUSE_MAX_MS);
    await sleep(Math.min(pause, left));
  }
  const reasons = new Map();
  for (const [id, s] of state) if (s === 'dead') reasons.set(id, null);
  if (reasons.size > 0) {
    for (let tries = 0; ; tries++) {
      try {
        await deadReasons(redis, `${tag}dead`, reasons);
        break;
      } catch (err) {
        // the outcomes are known: their reasons are read even past the
        // deadline
        if (!lostConnection(err) || tries === 20) throw err;
        for (const id of reasons.keys()) reasons.set(id, null);
        await sleep(PAUSE_MAX_MS);
      }
    }
  }
  const out = { done: [], dead: [], pending: [], unknown: [] };
  for (const id of list) {
    const s = state.get(id);
    if (s === 'done') out.done.push(id);
    else if (s === 'dead') out.dead.push({ id, reason: reasons.get(id) });
    else if (s === 'unknown') out.unknown.push(id);
    else out.pending.push(id);
  }
  return out;
}

module.exports = { waitFor, assertKeepsIds, notIdempotent, timeoutMs, deadEntry,
  documentId, idList, CALL_IDS, PAUSE_FIRST_MS, PAUSE_MAX_MS, DEAD_PAGE };
