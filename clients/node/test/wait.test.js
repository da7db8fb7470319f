'use strict';
// wait.test.js - Producer#wait, the module's wait() and enqueue's wait
// option against a real ferryd (doc/formats.md, "Waiting for jobs"), as
// clients/python's test_wait.py: jobs of queue pgi (idempotency_window 1m,
// into table waits: test/ferryd.ini, test/schema.sql) are done once their
// rows are in PostgreSQL, a row the table refuses is dead with the
// table's error, a dead entry purged meanwhile is dead with "purged", an
// id never enqueued is unknown, jobs of queue nodei (no workers) are
// pending when the time is up, a queue that keeps no ids is refused, and a
// connection lost during the wait is waited out.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const ferry = require('..');
const { Producer, FerryError, InvalidJobError, NotIdempotentError } = ferry;
const { connect, waitFor, sleep, pgValue, ferryctl, proxiedClient } =
  require('./helpers');

let r = null;

/** The test's client, once ferryd published the windows of pgi and
 * nodei. */
async function redis() {
  if (r === null) r = await connect();
  for (const q of ['pgi', 'nodei']) {
    await waitFor(async () => await r.hGet(`ferry:{${q}}:config`,
      'idempotency_window') !== null, 10000);
  }
  return r;
}

after(async () => {
  if (r !== null) await r.quit();
  await ferry.close();
});

const rows = (lo, hi) => Number(pgValue('SELECT count(*) FROM waits ' +
  `WHERE n BETWEEN ${lo} AND ${hi}`));

test('jobs waited for are done, their rows in postgres', async () => {
  await redis();
  const p = new Producer(r);
  // over 1,000 ids: ZMSCORE in several calls
  const jobs = Array.from({ length: 1500 }, (_, i) => ({ id: `w${i}`,
    n: 40000 + i }));
  const ids = await p.enqueue('pgi', jobs);
  const got = await p.wait('pgi', [...ids].reverse(), { timeout: 60000 });
  assert.deepEqual(got, { done: [...ids].reverse(), dead: [], pending: [],
    unknown: [] });
  assert.equal(rows(40000, 41499), 1500, 'done before its row committed');
  // integer ids as the caller gave them; the module's wait()
  await p.enqueue('pgi', [{ id: 424242, n: 41500 }, { id: 'w-last',
    n: 41501 }]);
  assert.deepEqual(await ferry.wait('pgi', [424242, 'w-last', 424242],
    { producer: p, timeout: 30000 }), { done: ['424242', 'w-last'],
    dead: [], pending: [], unknown: [] });
  assert.equal(rows(41500, 41501), 2);
});

test('enqueue with wait: the outcome beside the ids', async () => {
  await redis();
  const p = new Producer(r);
  const ids = await p.enqueue('pgi', [{ id: 'e1', n: 41600 },
    { id: 'e2', n: 41601 }, { id: 'e-bad', n: 'twelve' }], { wait: 30000 });
  assert.deepEqual([...ids], ['e1', 'e2', 'e-bad']);
  assert.deepEqual(Object.keys(ids), ['0', '1', '2'], 'outcome enumerable');
  assert.deepEqual(ids.already, []);
  assert.deepEqual(ids.outcome.done, ['e1', 'e2']);
  assert.deepEqual(ids.outcome.dead.map((d) => d.id), ['e-bad']);
  assert.deepEqual([ids.outcome.pending, ids.outcome.unknown], [[], []]);
  assert.equal(rows(41600, 41601), 2);
  // sent again: already accepted, and still done
  const again = await p.enqueue('pgi', { id: 'e1', n: 41600 }, { wait: 5000 });
  assert.deepEqual(again.already, ['e1']);
  assert.deepEqual(again.outcome.done, ['e1']);
  assert.equal(rows(41600, 41600), 1);
  // refused before anything is pushed: a job without an id, a queue that
  // keeps no ids, a bad wait
  const ready = await r.lLen('ferry:{pgi}:ready');
  const nodeReady = await r.lLen('ferry:{node}:ready');
  await assert.rejects(p.enqueue('pgi', [{ id: 'e3', n: 1 }, { n: 2 }],
    { wait: 1000 }), (e) => e instanceof InvalidJobError && e.index === 1 &&
    e.reason.includes('waited for by its id'));
  await assert.rejects(p.enqueue('node', { id: 'e4' }, { wait: 1000 }),
    NotIdempotentError);
  assert.equal(await r.lLen('ferry:{node}:ready'), nodeReady);
  await assert.rejects(p.enqueue('pgi', { id: 'e5' }, { wait: -1 }),
    RangeError);
  assert.equal(await r.lLen('ferry:{pgi}:ready'), ready);
  assert.equal(await r.zScore('ferry:{pgi}:ids', 'e3'), null);
});

test('a row the table refuses is dead with its error', async () => {
  await redis();
  const p = new Producer(r);
  await p.enqueue('pgi', [{ id: 'd-ok', n: 41700 }, { id: 'd-bad',
    n: 'not a number' }, { id: 7100, n: [1] }]);
  const got = await p.wait('pgi', [7100, 'd-bad', 'd-ok'],
    { timeout: 30000 });
  assert.deepEqual(got.done, ['d-ok']);
  assert.deepEqual(got.dead.map((d) => d.id), ['7100', 'd-bad']);
  for (const { reason } of got.dead) {
    assert.match(reason, new RegExp('^failed by the handler: 22P02: ' +
      'invalid input syntax for type bigint'));
  }
  assert.ok(got.dead[1].reason.includes('"not a number"'), got.dead[1].reason);
  assert.deepEqual([got.pending, got.unknown], [[], []]);
  assert.equal(rows(41700, 41700), 1);
});

test('a dead entry purged during the wait is dead, "purged"', async () => {
  await redis();
  const p = new Producer(r);
  await p.enqueue('pgi', { id: 'p-bad', n: 'x' });
  const dead = await p.wait('pgi', ['p-bad'], { timeout: 30000 });
  assert.deepEqual(dead.dead.map((d) => d.id), ['p-bad']);
  assert.equal(await r.zScore('ferry:{pgi}:ids', 'p-bad'), -1);
  // held pending by a job due in 3 s while the entry is purged
  await p.enqueue('pgi', { id: 'p-late', n: 41800 }, { delay: 3000 });
  let settled = false;
  const waiting = p.wait('pgi', ['p-bad', 'p-late'], { timeout: 30000 })
    .finally(() => { settled = true; });
  await sleep(100);
  await ferryctl('dead', 'purge', 'pgi', 'p-bad');
  assert.ok(!settled, 'the wait ended before the purge');
  assert.ok(await r.zScore('ferry:{pgi}:ids', 'p-bad') < -1,
    'purged: minus its forget time');
  assert.deepEqual(await waiting, { done: ['p-late'],
    dead: [{ id: 'p-bad', reason: 'purged' }], pending: [], unknown: [] });
  // purged before the wait began: the same
  assert.deepEqual((await p.wait('pgi', ['p-bad'])).dead,
    [{ id: 'p-bad', reason: 'purged' }]);
});

test('ids never enqueued are unknown', async () => {
  await redis();
  const t0 = Date.now();
  const got = await new Producer(r).wait('pgi', ['never-enqueued', 987654],
    { timeout: 30000 });
  assert.deepEqual(got, { done: [], dead: [], pending: [],
    unknown: ['never-enqueued', '987654'] });
  assert.ok(Date.now() - t0 < 5000, 'an unknown id is an outcome');
});

test('the time up: the ids still pending', async () => {
  await redis();
  await r.del(['ferry:{nodei}:ready', 'ferry:{nodei}:ids']);
  const p = new Producer(r);
  await p.enqueue('nodei', [{ id: 't1' }, { id: 't2' }]);   // no workers
  const before = await r.zRangeWithScores('ferry:{nodei}:ids', 0, -1);
  let t0 = Date.now();
  let got = await p.wait('nodei', ['t2', 'never', 't1'], { timeout: 700 });
  let took = Date.now() - t0;
  assert.deepEqual(got, { done: [], dead: [], pending: ['t2', 't1'],
    unknown: ['never'] });
  assert.ok(took >= 690 && took < 2500, `${took} ms`);
  t0 = Date.now();
  got = await p.wait('nodei', ['t1'], { timeout: 0 });      // one look
  took = Date.now() - t0;
  assert.deepEqual(got.pending, ['t1']);
  assert.ok(took < 1000, `${took} ms`);
  // a wait writes nothing
  assert.deepEqual(await r.zRangeWithScores('ferry:{nodei}:ids', 0, -1),
    before);
  assert.equal(await r.lLen('ferry:{nodei}:ready'), 2);
});

test('a queue that keeps no ids is refused', async () => {
  await redis();
  const p = new Producer(r);
  await assert.rejects(p.wait('node', ['a'], { timeout: 1000 }), (e) => {
    assert.ok(e instanceof NotIdempotentError, String(e));
    assert.ok(e instanceof FerryError);
    assert.match(e.message, /queue node keeps no ids/);
    assert.match(e.message, /idempotency_window/);
    return true;
  });
  await assert.rejects(p.wait('pgi', [1.5]), TypeError);
  await assert.rejects(p.wait('pgi', ['a'], { timeout: 'soon' }), RangeError);
});

test('a connection lost during the wait is waited out', async () => {
  await redis();
  const { proxy, client } = await proxiedClient();
  const warned = [];
  const onWarning = (w) => warned.push(w.code);
  process.on('warning', onWarning);
  try {
    await new Producer(r).enqueue('pgi', { id: 'c1', n: 41900 },
      { delay: 1500 });
    const waiting = new Producer(client).wait('pgi', ['c1'],
      { timeout: 30000 });
    await sleep(300);
    proxy.loseNext = true;          // the reply of a ZMSCORE of c1
    assert.deepEqual(await waiting, { done: ['c1'], dead: [], pending: [],
      unknown: [] });
    assert.equal(proxy.lost, 1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(warned.includes('FERRY_WAIT_RETRIED'), warned);
    assert.equal(rows(41900, 41900), 1);
  } finally {
    process.off('warning', onWarning);
    await client.disconnect();
    proxy.server.close();
  }
});
