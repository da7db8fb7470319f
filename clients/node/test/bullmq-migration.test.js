'use strict';
// bullmq-migration.test.js - doc/bullmq.md's worked example as it is
// written there: its producer (examples/bullmq-migration/producer.js)
// against the driver's Redis and ferryd, whose queue page_views is the
// example's ferryd.ini section writing into the example's schema.sql
// (tests/integration/test_node_client.c loads both and checks every row
// in PostgreSQL: exactly the 2,510 views sent, each once). The doc must
// show these three files as they are here.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { connect, stat, waitFor } = require('./helpers');
const { pageViewProducer, sendBatch } =
  require('../examples/bullmq-migration/producer');

const EXAMPLE = path.join(__dirname, '..', 'examples', 'bullmq-migration');
const DOC = path.join(__dirname, '..', '..', '..', 'doc', 'bullmq.md');
const T0 = Date.UTC(2026, 11, 2, 10, 0, 0);
let r = null;

after(async () => {
  if (r !== null) await r.quit();
});

// View i as the driver's SQL expects it back (test_node_client.c)
function view(i) {
  return { userId: i, path: `/p/${i % 7}`, viewedAt: new Date(T0 + i * 1000) };
}

const range = (from, to) => Array.from({ length: to - from }, (_, k) =>
  view(from + k));

test('doc/bullmq.md shows the example files as they are', () => {
  const doc = fs.readFileSync(DOC, 'utf8');
  for (const file of ['producer.js', 'ferryd.ini', 'schema.sql']) {
    const text = fs.readFileSync(path.join(EXAMPLE, file), 'utf8');
    assert.ok(doc.includes('\n' + text + '```\n'), `doc/bullmq.md does not ` +
      `show examples/bullmq-migration/${file} as it is (in a fenced block)`);
  }
});

test('the example\'s batches arrive as rows; a bad one is dead-lettered',
  async () => {
    r = await connect();
    const p = pageViewProducer(r);
    assert.deepEqual(await sendBatch(p, 'views-1', range(0, 2500)),
      ['views-1', 'views-1:500', 'views-1:1000', 'views-1:1500',
        'views-1:2000']);
    assert.deepEqual(await sendBatch(p, 'views-2', range(2500, 2510),
      { delay: 1000 }), ['views-2']);
    assert.equal(await r.zCard('ferry:{page_views}:scheduled'), 1);
    // user_id NULL: the table refuses it (23502), ferry dead-letters that
    // job with the reason and keeps its bytes
    assert.deepEqual(await sendBatch(p, 'views-bad',
      [{ userId: null, path: '/', viewedAt: new Date(T0) }]), ['views-bad']);
    await waitFor(async () => await stat(r, 'page_views', 'done') >= 6 &&
      await stat(r, 'page_views', 'dead') >= 1, 30000);
    assert.equal(await stat(r, 'page_views', 'done'), 6);
    assert.equal(await stat(r, 'page_views', 'dead'), 1);
    const dead = await r.lRange('ferry:{page_views}:dead', 0, -1);
    assert.equal(dead.length, 1);
    assert.match(dead[0], /23502/);
    assert.ok(dead[0].endsWith(`"job":${JSON.stringify({ id: 'views-bad',
      data: [{ user_id: null, path: '/', viewed_at: new Date(T0)
        .toISOString() }] })}}`), dead[0]);     // the bytes sent
    assert.equal(await r.exists(['ferry:{page_views}:ready',
      'ferry:{page_views}:scheduled']), 0);
  });
