'use strict';
// idempotent.test.js - ferry-client on a queue that keeps ids (queue nodei,
// idempotency_window 1m in the driver's ferryd.ini, as clients/python's
// test_idempotent.py): a job whose id the queue holds is already accepted
// and not pushed again, and a call whose reply was lost (a proxy in front
// of Redis closes the connection after the command ran, before its reply)
// is sent again; on a queue that keeps no ids the error comes through.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { Producer, NotReplicatedError } = require('..');
const { connect, waitFor, proxiedClient } = require('./helpers');

const READY = 'ferry:{nodei}:ready';
const IDS = 'ferry:{nodei}:ids';
let r = null;

async function redis() {
  if (r === null) r = await connect();
  await waitFor(async () => await r.hGet('ferry:{nodei}:config',
    'idempotency_window') !== null, 10000);
  await r.del([READY, IDS]);
  return r;
}

after(async () => {
  if (r !== null) await r.quit();
});

test('ids held are already accepted', async () => {
  await redis();
  const p = new Producer(r);
  let ids = await p.enqueue('nodei', [{ id: 'a' }, { id: 7 },
    { id: 'a', v: 2 }, { v: 1 }]);
  assert.deepEqual([...ids], ['a', '7', 'a',
    '05386f28d1614fecb1c7e329bd82417fb48dd452']);
  assert.deepEqual(ids.already, ['a']);
  ids = await p.enqueue('nodei', [{ id: 7 }, { id: 'b' }]);
  assert.deepEqual(ids.already, ['7']);
  assert.equal(await r.lLen(READY), 4);
  // and the marks' member "" while a job is live
  assert.deepEqual((await r.zRange(IDS, 0, -1)).sort(), ['', '7', 'a', 'b']);
  const doc = { id: 'big', data: [[0], [1], [2], [3], [4]] };
  assert.deepEqual((await p.enqueue('nodei', doc, { chunkRows: 2 })).already,
    []);
  assert.deepEqual((await p.enqueue('nodei', doc, { chunkRows: 2 })).already,
    ['big', 'big:2', 'big:4']);
  // the same document in other chunks: refused, nothing pushed
  await assert.rejects(p.enqueue('nodei', doc, { chunkRows: 3 }),
    /sent before in other chunks/);
  assert.equal(await r.lLen(READY), 7);
});

test('a lost reply is sent again', async () => {
  await redis();
  const { proxy, client } = await proxiedClient();
  const p = new Producer(client);
  await r.scriptLoad(p.script.toString('utf8'));  // EVALSHA runs
  const warned = [];
  const onWarning = (w) => warned.push(w.message);
  process.on('warning', onWarning);
  proxy.loseNext = true;
  const ids = await p.enqueue('nodei', [{ id: 'l1' }, { id: 'l2' }]);
  assert.equal(proxy.lost, 1);
  assert.deepEqual([...ids], ['l1', 'l2']);
  assert.deepEqual(ids.already, ['l1', 'l2']);
  assert.equal(await r.lLen(READY), 2);
  // a queue that keeps no ids: the outcome stays the caller's to judge
  proxy.loseNext = true;
  await assert.rejects(p.enqueue('node', { id: 'l3' }));
  assert.equal(JSON.parse(await r.lIndex('ferry:{node}:ready', 0)).id, 'l3');
  await r.lPop('ferry:{node}:ready');
  await new Promise((resolve) => setImmediate(resolve));
  process.off('warning', onWarning);
  assert.ok(warned.some((m) => m.includes('safe to send again')), warned);
  await client.disconnect();
  proxy.server.close();
});

test('a call fewer replicas have is sent again', async () => {
  // waitReplicas 1 and no replica: each call is sent again while WAIT
  // reaches fewer (already accepted: nothing pushed twice), and after
  // resendForMs NotReplicatedError says so
  await redis();
  const p = new Producer(r, { waitReplicas: 1, waitTimeoutMs: 50,
    resendForMs: 1000 });
  const warned = [];
  const onWarning = (w) => warned.push(w.message);
  process.on('warning', onWarning);
  await assert.rejects(p.enqueue('nodei', [{ id: 'w1' }, { id: 'w2' }]),
    NotReplicatedError);
  await new Promise((resolve) => setImmediate(resolve));
  process.off('warning', onWarning);
  assert.ok(warned.filter((m) => m.includes('reached 0 of 1 replicas'))
    .length >= 2, warned.join('\n'));
  assert.equal(await r.lLen(READY), 2);
  assert.deepEqual((await r.zRange(IDS, 0, -1)).sort(), ['', 'w1', 'w2']);
});
