'use strict';
// producer.js - Producer#enqueue: a caller's jobs through ferry's
// enqueue.lua (src/redis/lua/enqueue.lua, the script ferryctl enqueue runs, every
// check on), in script calls of at most CALL_JOBS jobs and CALL_BYTES
// bytes, each all or nothing, with the due marker of delay / runAt when
// given (the jobs go to the scheduled set), then WAIT for replicas when
// asked (after the script, as ferryctl does). EVALSHA first, EVAL when
// Redis does not have the script yet. The script is the copy shipped in
// this package (enqueue.lua, kept equal to the build's by make check), or
// the installed one (scriptPath, FERRY_ENQUEUE_LUA:
// $(pkgdatadir)/lua/enqueue.lua). Each job goes with its own id: on a queue
// with an idempotency_window, a job whose id the queue holds is "already
// accepted" (the result's `already`), and a call whose reply was lost is
// sent again, as ferryctl does (RESEND_FOR_MS). On such a queue the
// producer can wait for its jobs (Producer#wait, enqueue's wait: wait.js).

const fs = require('node:fs');
const path = require('node:path');
const { ErrorReply } = require('redis');
const jobs = require('./jobs');
const { waitFor, timeoutMs, notIdempotent } = require('./wait');
const { FerryError, InvalidJobError, NotReplicatedError, QueueFullError } =
  require('./errors');

const CALL_JOBS = 1000;          // src/ferryctl/ctl.h CTL_CHUNK
const CALL_BYTES = 16 << 20;     // src/ferryctl/ctl.h CTL_CHUNK_BYTES
const TTL_MAX_S = 365 * 86400;   // as ferryctl enqueue --cache-ttl
const DELAY_MAX_MS = 3650 * 86400 * 1000;  // as ferryctl --delay (due_time.h)
const CHUNK_ROWS_MAX = 1000000;
// a call whose reply was lost, sent again (src/ferryctl/ctl.h CTL_RESEND_*)
const RESEND_FOR_MS = 60000;
const RESEND_FIRST_MS = 100;
const RESEND_MAX_MS = 2000;

/** An error answer after which the call's outcome is unknown or a new
 * connection may cure it (src/ferryctl/ctl_resend.c outcome_unknown). */
function outcomeUnknown(err) {
  return /^(LOADING|READONLY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)/.test(
    err.message);
}

/** The text of enqueue.lua: scriptPath, $FERRY_ENQUEUE_LUA, else this
 * package's copy. */
function loadScript(scriptPath) {
  const file = scriptPath || process.env.FERRY_ENQUEUE_LUA ||
    path.join(__dirname, '..', 'enqueue.lua');
  return fs.readFileSync(file);
}

function positive(what, value, most) {
  if (!Number.isInteger(value) || value < 1 || value > most) {
    throw new RangeError(`${what} must be a whole number from 1 to ${most}, ` +
      `not ${JSON.stringify(value) ?? String(value)}`);
  }
  return value;
}

function wholeNumber(what, value) {
  if (!Number.isInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a whole number from 0, not ` +
      `${JSON.stringify(value) ?? String(value)}`);
  }
  return value;
}

function shown(value) {
  if (value instanceof Date) return `Date(${value.toString()})`;
  return JSON.stringify(value) ?? String(value);
}

/** enqueue.lua's due marker: "delay=MS" (from now by the Redis clock) or
 * "at=MS" (Unix ms), or null; as clients/python's _due_marker, in ms. A bad
 * value is a RangeError (Python: ValueError), before anything is pushed. */
function dueMarker(delay, runAt) {
  if (delay !== undefined && delay !== null &&
      runAt !== undefined && runAt !== null) {
    throw new RangeError('give one of delay and runAt, not both');
  }
  if (delay !== undefined && delay !== null) {
    if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0 ||
        delay > DELAY_MAX_MS) {
      throw new RangeError('delay must be milliseconds (a number) from 0 ' +
        `to 3650 days (${DELAY_MAX_MS}), not ${shown(delay)}`);
    }
    return `delay=${Math.round(delay)}`;
  }
  if (runAt !== undefined && runAt !== null) {
    const ms = runAt instanceof Date ? runAt.getTime() : runAt;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new RangeError('runAt must be a valid Date or Unix time in ' +
        `milliseconds (Date.now() + ms), not ${shown(runAt)}`);
    }
    return `at=${Math.round(ms)}`;
  }
  return null;
}

/** Calls of at most CALL_JOBS jobs and CALL_BYTES bytes (a bigger job is a
 * call of its own), as ferryctl's chunks (src/ferryctl/ctl_push.c). */
function calls(elements) {
  const out = [];
  let call = [];
  let size = 0;
  for (const e of elements) {
    const n = Buffer.byteLength(e.element) + Buffer.byteLength(e.value);
    if (call.length && (call.length === CALL_JOBS || size + n > CALL_BYTES)) {
      out.push(call);
      call = [];
      size = 0;
    }
    call.push(e);
    size += n;
  }
  if (call.length) out.push(call);
  return out;
}

/** The error for enqueue.lua's error reply (src/redis/lua/enqueue.lua). */
function scriptError(message, call, pushed) {
  const space = message.indexOf(' ');
  const code = space < 0 ? message : message.slice(0, space);
  const rest = space < 0 ? '' : message.slice(space + 1);
  if (code === 'INVALID') {
    const at = rest.indexOf(' ');
    return new InvalidJobError(call[Number(rest.slice(0, at)) - 1].index,
      rest.slice(at + 1), pushed);
  }
  if (code === 'FULL') {
    return new QueueFullError(rest.split(' ').slice(2).join(' '), pushed);
  }
  if (message.includes('OOM') && message.includes('maxmemory')) {
    return new QueueFullError(`redis is full (${message}): drain the queue ` +
      'or raise maxmemory', pushed);
  }
  return new FerryError(`enqueue.lua failed: ${message}`, pushed);
}

/** Enqueues for ferry on one node-redis v4 client (connected). The limits
 * are the queue's in ferryd.ini: maxJobBytes (max_job_bytes), [ferryd]
 * memoryRefusePercent, chunkRows, cacheKeyPrefixes (cache_key_prefixes: an
 * array, or the comma-separated text), prefix (redis_prefix), waitReplicas
 * / waitTimeoutMs (redis_wait_replicas, redis_wait_timeout). cacheTtl is
 * accepted and unused: a cache key has no TTL while its job lives (ferryd
 * removes keys left without a job after its cache_ttl). */
class Producer {
  constructor(client, options = {}) {
    if (!client || typeof client.evalSha !== 'function') {
      throw new TypeError('Producer needs a node-redis v4 client ' +
        '(require("redis").createClient(), connected)');
    }
    this.redis = client;
    this.prefix = options.prefix ?? 'ferry';
    this.maxJobBytes = wholeNumber('maxJobBytes',
      options.maxJobBytes ?? 1048576);
    this.memoryRefusePercent = wholeNumber('memoryRefusePercent',
      options.memoryRefusePercent ?? 90);
    this.chunkRows = positive('chunkRows', options.chunkRows ?? 1000,
      CHUNK_ROWS_MAX);
    this.cacheTtl = positive('cacheTtl', options.cacheTtl ?? 86400,
      TTL_MAX_S);
    const prefixes = options.cacheKeyPrefixes ?? [];
    this.cacheKeyPrefixes = (typeof prefixes === 'string'
      ? prefixes.split(',') : prefixes).map((p) => String(p).trim())
      .filter((p) => p !== '');
    this.waitReplicas = wholeNumber('waitReplicas', options.waitReplicas ?? 0);
    this.waitTimeoutMs = wholeNumber('waitTimeoutMs',
      options.waitTimeoutMs ?? 1000);
    this.resendForMs = wholeNumber('resendForMs',
      options.resendForMs ?? RESEND_FOR_MS);
    this.script = loadScript(options.scriptPath);
    this.sha = jobs.sha1(this.script);
    this.saidUnchecked = false;
  }

  /** Push one job (an object, or JSON text pushed as it is) or an array of
   * them onto `queue`; resolves to the ids, as ferryctl enqueue prints
   * them (`already`, a property of that array: those the queue had
   * accepted already and did not take again). cache: true (or a cacheTtl, unused otherwise) moves each job's
   * "data" into a cache key of its own, protected (no TTL) until the job is
   * done; a job naming an application's key (cache_key, under
   * cacheKeyPrefixes) must find it there, and it is protected the same
   * way. chunkRows splits bigger "data" arrays
   * into jobs ID:INDEX; id names a single job. delay (ms) or runAt (a
   * Date, or Unix ms) holds the jobs in the queue's scheduled set until
   * then, by the Redis clock (ferryctl enqueue --delay / --at). wait (ms,
   * on a queue with an idempotency_window; every job needs an id) waits
   * for the jobs too, as wait() does, and the result's `outcome` is
   * wait()'s answer. */
  async enqueue(queue, jobOrJobs, options = {}) {
    const single = !Array.isArray(jobOrJobs);
    const docs = single ? [jobOrJobs] : jobOrJobs;
    const { cache, cacheTtl, chunkRows, id, delay, runAt, wait } = options;
    if (id !== undefined && !single) {
      throw new TypeError('id names a single job; give each job of an ' +
        'array its own "id"');
    }
    if (typeof queue !== 'string' || queue === '') {
      throw new TypeError('queue must be a non-empty string (a [queue NAME] ' +
        'of ferryd.ini)');
    }
    const rows = positive('chunkRows', chunkRows ?? this.chunkRows,
      CHUNK_ROWS_MAX);
    if (cacheTtl !== undefined) positive('cacheTtl', cacheTtl, TTL_MAX_S);
    const cached = Boolean(cache) || cacheTtl !== undefined;
    const due = dueMarker(delay, runAt);
    const waitMs = wait === undefined || wait === null ? null
      : timeoutMs('wait', wait);
    const tag = `${this.prefix}:{${queue}}:`;
    const elements = [];
    const cacheKeys = cached ? new jobs.CacheKeys(`${tag}cache:`) : null;
    docs.forEach((doc, i) => {
      for (const e of jobs.build(doc, i, cacheKeys, rows,
        single ? id : undefined)) {
        elements.push(e);
      }
    });
    if (waitMs !== null) {
      // refused before anything is pushed: what could not be waited for
      const bare = elements.find((e) => e.ownId === '');
      if (bare) {
        throw new InvalidJobError(bare.index, 'it has no "id" of its own, ' +
          'and a job is waited for by its id: give each job an "id" (or ' +
          'enqueue without wait)');
      }
      if (!await this._keepsIds(tag, Date.now() + this.resendForMs)) {
        throw notIdempotent(queue);
      }
    }
    const pushed = [];
    // the jobs the queue had accepted already (an idempotency_window)
    const already = [];
    Object.defineProperty(pushed, 'already', { value: already });
    for (const call of calls(elements)) {
      const again = await this._push(tag, call, due, pushed);
      for (const e of call) pushed.push(e.id);
      for (const i of again) already.push(call[i - 1].id);
    }
    await this._replicated(queue, pushed);
    if (waitMs !== null) {
      Object.defineProperty(pushed, 'outcome',
        { value: await waitFor(this, queue, pushed, waitMs) });
    }
    return pushed;
  }

  /** Wait until each of the ids (strings or integers, as enqueue gave
   * them) of jobs enqueued on `queue`, a queue with an
   * idempotency_window, is done (its rows committed), dead, or the
   * timeout (ms, default 30000) is up. Resolves to { done, dead: [{id,
   * reason}], pending, unknown }, each id once in the caller's order; a
   * timeout resolves too, with the ids still pending. A queue that keeps
   * no ids rejects with NotIdempotentError. Reads only: the scores of the
   * ids (doc/formats.md, "Waiting for jobs"). */
  async wait(queue, ids, options = {}) {
    return waitFor(this, queue, ids, (options ?? {}).timeout);
  }

  /** One call of enqueue.lua: KEYS ready, [scheduled,] [protected, the
   * cache keys]; ARGV the limits, the options, five per job (K for a key
   * it writes, -K for a key it names; its binding: SHA-1 and layout; its
   * own id). Resolves to the indexes
   * (from 1) of the jobs already accepted. */
  async _push(tag, call, due, pushed) {
    const keys = due ? [`${tag}ready`, `${tag}scheduled`] : [`${tag}ready`];
    if (call.some((e) => e.key !== null || e.namedKey)) {
      keys.push(`${tag}protected`);
    }
    const opts = (due ? [due] : []).concat(['ids'],
      this.cacheKeyPrefixes.map((p) => `prefix=${p}`));
    const args = [String(this.maxJobBytes), String(this.memoryRefusePercent),
      String(opts.length), ...opts];
    for (const e of call) {
      let k = '0';
      if (e.key !== null || e.namedKey) {
        keys.push(e.key ?? e.namedKey);
        k = String(e.key !== null ? keys.length : -keys.length);
      }
      // what binds a key of ferry's own, or a held id, to this job
      const binding = e.key !== null || e.ownId !== ''
        ? jobs.sha1(e.element) + e.layout : '';
      args.push(e.element, k, e.value, binding, e.ownId);
    }
    let reply;
    try {
      reply = await this._resent(tag, keys, args);
    } catch (err) {
      if (err instanceof ErrorReply) {
        throw scriptError(err.message, call, pushed);
      }
      throw err;
    }
    if (reply[1] && !this.saidUnchecked) {
      this.saidUnchecked = true;     // as ferryctl: said once
      process.emitWarning(`ferry-client: ${reply[1]}; memory_refuse_percent ` +
        'not checked (Redis still refuses at maxmemory)',
      { type: 'FerryWarning', code: 'FERRY_MEMORY_UNCHECKED' });
    }
    return (reply[2] || []).map(Number);
  }

  /** The call, sent again while its outcome is unknown (no reply: the
   * connection failed, Redis was killed, restarted or failed over; or an
   * answer that a new connection may cure: LOADING, READONLY...) if the
   * queue keeps ids, which makes that safe; else the error, as it came.
   * With waitReplicas, on such a queue a call counts as answered only once
   * that many replicas have it (WAIT after it): a primary demoted before a
   * replica had it forgets it, so it is sent again, as ferryctl does. */
  async _resent(tag, keys, args) {
    const deadline = Date.now() + this.resendForMs;
    let delay = RESEND_FIRST_MS;
    for (;;) {
      let reply;
      let why;
      try {
        reply = await this._run(keys, args);
        why = await this._replicasLag();
        if (why === null || !await this._keepsIds(tag, deadline)) {
          return reply;
        }
      } catch (err) {
        if ((err instanceof ErrorReply && !outcomeUnknown(err)) ||
            !await this._keepsIds(tag, deadline)) {
          throw err;
        }
        why = err;
      }
      if (Date.now() + delay > deadline) {
        if (why instanceof Error) throw why;
        return reply;   // _replicated says it
      }
      process.emitWarning(`ferry-client: ${why instanceof Error ?
        why.message : why}; the queue keeps ids (idempotency_window), so ` +
        `it is safe to send again: in ${delay} ms`,
      { type: 'FerryWarning', code: 'FERRY_RESENT' });
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RESEND_MAX_MS);
    }
  }

  /** null when waitReplicas replicas have this connection's writes (or
   * none are wanted), else why not. */
  async _replicasLag() {
    if (this.waitReplicas <= 0) return null;
    const got = Number(await this.redis.sendCommand(['WAIT',
      String(this.waitReplicas), String(this.waitTimeoutMs)]));
    return got >= this.waitReplicas ? null : `reached ${got} of ` +
      `${this.waitReplicas} replicas within ${this.waitTimeoutMs} ms`;
  }

  /** Does the queue keep ids (its config hash, published by ferryd)? Asked
   * again while Redis does not answer, until the deadline. */
  async _keepsIds(tag, deadline) {
    for (;;) {
      try {
        return Number(await this.redis.hGet(`${tag}config`,
          'idempotency_window') || 0) > 0;
      } catch (err) {
        if (err instanceof ErrorReply || Date.now() + RESEND_FIRST_MS >
            deadline) {
          throw err;
        }
        await new Promise((resolve) => setTimeout(resolve, RESEND_FIRST_MS));
      }
    }
  }

  async _run(keys, args) {
    try {
      return await this.redis.evalSha(this.sha, { keys, arguments: args });
    } catch (err) {
      if (!(err instanceof ErrorReply) || !err.message.startsWith('NOSCRIPT')) {
        throw err;
      }
      return this.redis.eval(this.script.toString('utf8'),
        { keys, arguments: args });
    }
  }

  async _replicated(queue, pushed) {
    if (this.waitReplicas <= 0 || pushed.length === 0) return;
    const got = Number(await this.redis.sendCommand(['WAIT',
      String(this.waitReplicas), String(this.waitTimeoutMs)]));
    if (got < this.waitReplicas) {
      throw new NotReplicatedError(`${pushed.length} jobs are in queue ` +
        `${queue}, but reached ${got} of ${this.waitReplicas} replicas ` +
        `within ${this.waitTimeoutMs} ms: a failover now would lose them. ` +
        'Not pushed again (that could enqueue them twice): check the ' +
        'replicas', pushed, got, this.waitReplicas);
    }
  }
}

module.exports = { Producer, loadScript, CALL_JOBS, CALL_BYTES, DELAY_MAX_MS };
