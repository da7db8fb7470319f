'use strict';
// delayed.test.js - ferry-client's delay (ms) and runAt (a Date or Unix ms)
// against a real Redis and ferryd, as clients/python's delay= / run_at=:
// the jobs wait in the scheduled set by the Redis clock, a time past goes
// straight to ready, bad values are refused before Redis, and delayed jobs
// reach PostgreSQL no earlier than due (queue pglater; the driver,
// tests/integration/test_node_client.c, counts the rows: each once).
// Queues of their own (later, pglater), so that the other files' tests
// may run beside these.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const util = require('node:util');
const { Producer, FerryError, InvalidJobError } = require('..');
const { connect, redisMs, stat, sleep, waitFor } = require('./helpers');

const READY = 'ferry:{later}:ready';   // queue later has no workers
const SCHEDULED = 'ferry:{later}:scheduled';
let r = null;

async function redis() {
  if (r === null) r = await connect();
  await r.del([READY, SCHEDULED]);
  return r;
}

after(async () => {
  if (r !== null) await r.quit();
});

/** [due ms, document] of the scheduled set, the member's prefix cut. */
async function scheduled(key = SCHEDULED) {
  const z = await r.zRangeWithScores(key, 0, -1);
  return z.map(({ value, score }) => [score,
    value.slice(value.indexOf(':') + 1)]);
}

test('delay holds jobs in scheduled by the Redis clock', async () => {
  await redis();
  const p = new Producer(r);
  const t0 = await redisMs(r);
  await p.enqueue('later', [{ n: 1 }, { n: 1 }], { delay: 2500 });
  await p.enqueue('later', { n: 2 }, { delay: 60000 });
  assert.equal(await r.lLen(READY), 0);
  const got = await scheduled();
  assert.equal(got.length, 3, 'identical documents stay distinct');
  for (const [due] of got.slice(0, 2)) {
    assert.ok(due >= t0 + 2500 && due <= t0 + 4500, `${due - t0}`);
  }
  assert.ok(got[2][0] >= t0 + 60000 && got[2][0] <= t0 + 62000);
  await p.enqueue('later', { n: 3 }, { runAt: new Date(Date.UTC(2100, 0, 1)) });
  assert.deepEqual((await scheduled()).at(-1), [4102444800000, '{"n":3}']);
  await p.enqueue('later', { n: 4 }, { runAt: 4102444800250 });  // Unix ms
  assert.deepEqual((await scheduled()).at(-1), [4102444800250, '{"n":4}']);
  // due already: straight onto ready
  await p.enqueue('later', { n: 5 }, { runAt: Date.now() - 60000 });
  await p.enqueue('later', { n: 6 }, { delay: 0 });
  assert.deepEqual((await r.lRange(READY, 0, -1)).reverse(),
    ['{"n":5}', '{"n":6}']);
  assert.equal(await r.zCard(SCHEDULED), 5);
});

test('a job given as text is scheduled byte for byte', async () => {
  await redis();
  await new Producer(r).enqueue('later', '{"n": 7,  "x":1}', { delay: 60000 });
  assert.deepEqual((await scheduled()).map(([, d]) => d), ['{"n": 7,  "x":1}']);
});

const badOptions = [
  { delay: -1 }, { delay: '30s' }, { delay: true }, { delay: NaN },
  { delay: Infinity }, { delay: 3651 * 86400 * 1000 },
  { runAt: new Date('not a date') }, { runAt: 'tomorrow' }, { runAt: -1 },
  { runAt: {} }, { delay: 1, runAt: 1 },
];
for (const options of badOptions) {
  test(`refused before Redis: ${util.inspect(options)}`, async () => {
    await redis();
    await assert.rejects(new Producer(r).enqueue('later', { n: 1 }, options),
      (e) => {
        assert.ok(e instanceof RangeError, String(e));
        assert.ok(!(e instanceof FerryError) && !(e instanceof InvalidJobError));
        assert.match(e.message, /delay|runAt/);
        return true;
      });
    assert.equal(await r.exists([READY, SCHEDULED]), 0);
  });
}

test('delayed rows reach postgres no earlier than due, once', async () => {
  // 150 rows: n 30000..30099 with delay, 31000..31049 with runAt; queue
  // pglater writes them into the driver's table, which counts them.
  await redis();
  const p = new Producer(r);
  const t0 = await redisMs(r);
  await p.enqueue('pglater', Array.from({ length: 100 },
    (_, i) => ({ n: 30000 + i })), { delay: 1500 });
  await p.enqueue('pglater', Array.from({ length: 50 },
    (_, i) => ({ n: 31000 + i })), { runAt: new Date(t0 + 1500) });
  assert.equal(await r.zCard('ferry:{pglater}:scheduled'), 150);
  while (await redisMs(r) < t0 + 1500) {
    // both read before the clock: then not yet due when they were read
    const done = await stat(r, 'pglater', 'done');
    const ready = await r.lLen('ferry:{pglater}:ready');
    if (await redisMs(r) < t0 + 1500) {
      assert.equal(done, 0, 'a delayed job ran before it was due');
      assert.equal(ready, 0, 'a delayed job was in ready before it was due');
    }
    await sleep(20);
  }
  await waitFor(async () => await stat(r, 'pglater', 'done') >= 150, 20000);
  assert.equal(await stat(r, 'pglater', 'done'), 150);
  assert.equal(await stat(r, 'pglater', 'enqueued'), 150);
  assert.equal(await r.exists('ferry:{pglater}:scheduled'), 0);
  assert.equal(await r.lLen('ferry:{pglater}:dead'), 0);
});
