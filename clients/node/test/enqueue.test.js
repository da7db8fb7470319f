'use strict';
// enqueue.test.js - ferry-client against a real Redis and ferryd: the ids,
// chunks and cache keys of ferryctl enqueue (and of clients/python), the
// script by EVALSHA falling back to EVAL, refusals as error classes with
// nothing pushed, WAIT for replicas, and jobs that arrive as rows in
// PostgreSQL (queue "pg"; the driver, tests/integration/test_node_client.c,
// counts them). The servers come from the driver (helpers.js).

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const { createClient } = require('redis');
const ferry = require('..');
const { Producer, InvalidJobError, QueueFullError, NotReplicatedError } =
  ferry;
const { port, connect, stat, waitFor } = require('./helpers');

const READY = 'ferry:{node}:ready';   // queue node has no workers: jobs stay
const sha1 = (text) => crypto.createHash('sha1').update(text).digest('hex');
let r = null;

async function redis() {
  if (r === null) r = await connect();
  await r.del(READY);
  return r;
}

async function ready() {
  return (await r.lRange(READY, 0, -1)).reverse().map((e) => JSON.parse(e));
}

after(async () => {
  if (r !== null) await r.quit();
  await ferry.close();
});

test('the shipped script is the built one', () => {
  const built = process.env.FERRY_BUILT_ENQUEUE_LUA;
  assert.ok(built, 'FERRY_BUILT_ENQUEUE_LUA (gen/lua/enqueue.lua) is not set');
  assert.ok(ferry.loadScript().equals(fs.readFileSync(built)),
    'clients/node/enqueue.lua differs from the build\'s ' +
    'gen/lua/enqueue.lua: run make update-client-scripts');
});

test('ids as ferryctl prints them', async () => {
  await redis();
  const p = new Producer(r);
  assert.deepEqual(await p.enqueue('node', { id: 'a', n: 1 }), ['a']);
  assert.deepEqual(await p.enqueue('node', { id: 7 }), ['7']);
  assert.deepEqual(await p.enqueue('node', { n: 1 }), [sha1('{"n":1}')]);
  assert.deepEqual(await p.enqueue('node', '{"n": 2}'), [sha1('{"n": 2}')]);
  assert.deepEqual(await p.enqueue('node', Buffer.from('{"n": 3}')),
    [sha1('{"n": 3}')]);
  assert.deepEqual(await p.enqueue('node', '{"id": 9007199254740993}'),
    ['9007199254740993'], 'an integer id beyond 2^53, exactly');
  assert.deepEqual(await p.enqueue('node', { n: 3 }, { id: 'given' }),
    ['given']);
  assert.deepEqual(await r.lRange(READY, 0, 0), ['{"id":"given","n":3}']);
  assert.equal(await r.lIndex(READY, 3), '{"n": 2}');   // text: as it is
  assert.equal(await r.lLen(READY), 7);
  assert.equal(await r.hGet('ferry:{node}:stats', 'enqueued'), null);
});

test('chunks go by the id and their first row, built from the caller\'s object', async () => {
  await redis();
  const ids = await ferry.enqueue('node', { id: 'x', t: 'k',
    data: [1, 2, 3, 4, 5] }, { chunkRows: 2, producer: new Producer(r) });
  assert.deepEqual(ids, ['x', 'x:2', 'x:4']);
  assert.deepEqual(await ready(), [{ id: 'x', t: 'k', data: [1, 2] },
    { id: 'x:2', t: 'k', data: [3, 4] }, { id: 'x:4', t: 'k', data: [5] }]);
});

test('cache keys are the job\'s own and protected', async () => {
  await redis();
  const p = new Producer(r);
  const ids = await p.enqueue('node',
    { id: 'c', op: 'delete', data: [[1], [2], [3]] },
    { cache: true, chunkRows: 2 });
  assert.deepEqual(ids, ['c', 'c:2']);
  const jobs = await ready();
  const keys = jobs.map((j) => j.cache_key);
  assert.deepEqual(jobs.map(({ cache_key: _k, ...rest }) => rest),
    [{ id: 'c', op: 'delete' }, { id: 'c:2', op: 'delete' }]);
  // one group of keys a call ("<16 hex>.<n>"), counted in one entry
  const group = keys[0].slice(0, -2);
  for (const [i, key] of keys.entries()) {
    assert.match(key, /^ferry:\{node\}:cache:[0-9a-f]{16}\.[01]$/);
    assert.equal(key, `${group}.${i}`);
    assert.equal(await r.pTTL(key), -1);   // no TTL while the job lives
  }
  assert.match(await r.hGet('ferry:{node}:protected', group), /^2 2 \d+ 0$/);
  // after the mark of its job: its document's SHA-1 and ':'
  const value = async (k) => (await r.get(k)).slice(41);
  assert.equal(await value(keys[1]), '[[3]]');
  // the same id again: a key of its own; the first job's data stays
  await p.enqueue('node', { id: 'c:2', data: [[9]] }, { cache: true });
  const again = (await ready())[2].cache_key;
  assert.ok(!keys.includes(again));
  assert.equal(await value(again), '[[9]]');
  assert.equal(await value(keys[1]), '[[3]]');
  await assert.rejects(p.enqueue('node', { id: 'd', op: 'delete' },
    { cache: true }), (e) => e instanceof InvalidJobError &&
    e.reason.includes('without "data" cannot be cached: its members are'));
  assert.equal(await r.lLen(READY), 3);
});

test('application keys are protected', async () => {
  await redis();
  await r.set('app:node:1', '[{"a":1}]', { PX: 60000 });
  let p = new Producer(r);
  await assert.rejects(p.enqueue('node', { id: 1, cache_key: 'app:node:1' }),
    (e) => e instanceof InvalidJobError && e.reason.includes('outside the ' +
    'queue\'s cache space ferry:{node}:cache: and cache_key_prefixes'));
  p = new Producer(r, { cacheKeyPrefixes: 'app:node:, other:' });
  await assert.rejects(p.enqueue('node', [{ id: 1, cache_key: 'app:node:1' },
    { id: 2, cache_key: 'app:node:2' }]), (e) => e instanceof InvalidJobError &&
    e.reason.includes('cache_key "app:node:2" does not exist: write the key'));
  assert.equal(await r.lLen(READY), 0);
  assert.ok(await r.pTTL('app:node:1') > 0);
  assert.deepEqual(await p.enqueue('node', ['{"id":1,"cache_key":"app:node:1"}',
    { id: 2, cache_key: 'app:node:1' }]), ['1', '2']);
  assert.equal(await r.pTTL('app:node:1'), -1);
  assert.equal(await r.hGet('ferry:{node}:protected', 'app:node:1'), '2');
});

const badJobs = [
  ['{"ferry":1,"recoveries":0,"attempts":0,"job":{}}',
    'the prefix of ferry\'s own wrapper format'],
  [Buffer.from('{"a":"\xff"}', 'latin1'), 'malformed JSON: invalid UTF-8'],
  ['[1]', 'job is not a JSON object'],
  [[1], 'job is not a JSON object'],
  ['{"a":1.}', 'malformed JSON'],
  [`{"a":${'['.repeat(3000)}${']'.repeat(3000)}}`, 'malformed JSON'],
  [{ a: 'x'.repeat(100) }, 'bytes, over max_job_bytes 64'],
  [{ id: 1.5 }, 'job id is not a string or integer'],
  [{ a: NaN }, 'cannot be written as JSON'],
];
for (const [bad, reason] of badJobs) {
  test(`a bad job refuses the whole call: ${reason}`, async () => {
    await redis();
    const small = typeof bad === 'object' && !Array.isArray(bad) &&
      !Buffer.isBuffer(bad);
    const p = new Producer(r, { maxJobBytes: small ? 64 : 1 << 20 });
    await assert.rejects(p.enqueue('node', [{ n: 1 }, bad, { n: 2 }]),
      (e) => {
        assert.ok(e instanceof InvalidJobError, String(e));
        assert.equal(e.index, 1);
        assert.ok(e.reason.includes(reason), e.reason);
        assert.deepEqual(e.pushed, []);
        return true;
      });
    assert.equal(await r.lLen(READY), 0);
  });
}

test('refused before any call: text to cache, an id for an array', async () => {
  await redis();
  const p = new Producer(r);
  await assert.rejects(p.enqueue('node', ['{"n":1}'], { cache: true }),
    (e) => e instanceof InvalidJobError && e.index === 0 &&
      e.reason.includes('pushed as it is: pass an object to cache it'));
  await assert.rejects(p.enqueue('node', [{ n: 1 }], { id: 'x' }),
    /id names a single job/);
  await assert.rejects(p.enqueue('node', '{"n":1,"id":9007199254740993}'),
    (e) => e instanceof InvalidJobError && e.reason.includes('beyond 2^53'));
  await assert.rejects(p.enqueue('node', { n: 1 }, { chunkRows: 0 }),
    RangeError);
  assert.equal(await r.lLen(READY), 0);
});

test('refused above memory_refuse_percent', async () => {
  await redis();
  const info = await r.info('memory');
  const used = Number(/used_memory:(\d+)/.exec(info)[1]);
  await r.configSet('maxmemory', String(Math.floor(used * 100 / 30)));
  try {
    await assert.rejects(new Producer(r, { memoryRefusePercent: 20 })
      .enqueue('node', { n: 1 }), (e) => {
      assert.ok(e instanceof QueueFullError, String(e));
      assert.ok(e.message.includes('% full (maxmemory '), e.message);
      assert.ok(e.message.includes('queue node holds '), e.message);
      assert.ok(e.message.includes('memory_refuse_percent 20: not ' +
        'enqueueing; drain the queue'), e.message);
      return true;
    });
    assert.equal(await r.lLen(READY), 0);
    assert.deepEqual(await new Producer(r).enqueue('node', { id: 'ok' }),
      ['ok']);
  } finally {
    await r.configSet('maxmemory', '0');
  }
});

test('EVALSHA falls back to EVAL once Redis forgot the script', async () => {
  await redis();
  const p = new Producer(r);
  await r.scriptFlush();
  assert.deepEqual(await r.scriptExists(p.sha), [false]);
  assert.deepEqual(await p.enqueue('node', { id: 'e1' }), ['e1']);
  assert.deepEqual(await r.scriptExists(p.sha), [true]);
  assert.deepEqual(await p.enqueue('node', { id: 'e2' }), ['e2']);
  assert.equal(await r.lLen(READY), 2);
});

test('WAIT for replicas: in the queue, NotReplicatedError', async () => {
  await redis();
  const p = new Producer(r, { waitReplicas: 1, waitTimeoutMs: 100 });
  await assert.rejects(p.enqueue('node', [{ id: 'w' }, { id: 'v' }]), (e) => {
    assert.ok(e instanceof NotReplicatedError, String(e));
    assert.equal(e.reached, 0);
    assert.equal(e.wanted, 1);
    assert.deepEqual(e.pushed, ['w', 'v']);
    assert.ok(e.message.includes('reached 0 of 1 replicas within 100 ms'));
    return true;
  });
  assert.equal(await r.lLen(READY), 2);      // pushed, once
});

test('the shared client of enqueue() on FERRY_REDIS_URL', async () => {
  await redis();
  process.env.FERRY_REDIS_URL = `redis://127.0.0.1:${port}`;
  assert.deepEqual(await ferry.enqueue('node', { id: 's1' }), ['s1']);
  assert.deepEqual(await ferry.enqueue('node', [{ id: 's2' }, { id: 's3' }]),
    ['s2', 's3']);
  await ferry.close();
  assert.equal(await r.lLen(READY), 3);
});

test('rows reach postgres', async () => {
  // 4,300 rows: 2,500 single jobs in three calls, 1,500 rows split into 4
  // jobs, 300 rows through cache keys, in three jobs of one id (two in one
  // call, one in another): each its own key, each row written once. The
  // driver counts the rows.
  await redis();
  const p = new Producer(r);
  let ids = await p.enqueue('pg', Array.from({ length: 2500 },
    (_, i) => ({ n: i })));
  assert.equal(new Set(ids).size, 2500);
  ids = await p.enqueue('pg', { id: 'big', data: Array.from({ length: 1500 },
    (_, i) => ({ n: 10000 + i })) }, { chunkRows: 400 });
  assert.deepEqual(ids, ['big', 'big:400', 'big:800', 'big:1200']);
  ids = await p.enqueue('pg', [0, 1].map((k) => ({ id: 'cached',
    data: Array.from({ length: 100 }, (_, i) => ({ n: 20000 + k * 100 + i })) })),
  { cache: true });
  assert.deepEqual(ids, ['cached', 'cached']);
  ids = await p.enqueue('pg', { id: 'cached', data: Array.from(
    { length: 100 }, (_, i) => ({ n: 20200 + i })) }, { cache: true });
  assert.deepEqual(ids, ['cached']);
  await waitFor(async () => await stat(r, 'pg', 'done') >= 2507);
  assert.equal(await stat(r, 'pg', 'done'), 2507);
  assert.equal(await stat(r, 'pg', 'enqueued'), 2507);
  assert.equal(await r.lLen('ferry:{pg}:dead'), 0);
  // deleted with the ack, and no longer protected
  assert.deepEqual(await r.keys('ferry:{pg}:cache:*'), []);
  assert.equal(await r.exists('ferry:{pg}:protected'), 0);
});

test('without INFO in the ACL it warns once and pushes', async () => {
  await redis();
  await r.aclSetUser('producer', ['on', '>pw', '~ferry:{node}:ready',
    '-@all', '+evalsha', '+eval', '+lpush']);
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  const client = createClient({ url:
    `redis://producer:pw@127.0.0.1:${port}` });
  try {
    await client.connect();
    const p = new Producer(client);
    assert.deepEqual(await p.enqueue('node', { id: 'w1' }), ['w1']);
    assert.deepEqual(await p.enqueue('node', { id: 'w2' }), ['w2']);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(warnings.length, 1, warnings.join('; '));
    assert.equal(warnings[0].name, 'FerryWarning');
    assert.match(warnings[0].message,
      /INFO failed: .*memory_refuse_percent not checked/);
    assert.equal(await r.lLen(READY), 2);
  } finally {
    process.off('warning', onWarning);
    await client.quit();
    await r.aclDelUser('producer');
  }
});
