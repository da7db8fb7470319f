'use strict';
// helpers.js - what the test files share: a node-redis client to the
// driver's redis-server (FERRY_TEST_REDIS_PORT, set by
// tests/integration/test_node_client.c; unset, every test fails, never
// skips), the Redis clock, a queue's stats, and waiting with a deadline.

const assert = require('node:assert/strict');
const { createClient } = require('redis');

const port = process.env.FERRY_TEST_REDIS_PORT;

/** A connected client to the test's Redis (quit it when done). */
async function connect() {
  assert.ok(port, 'FERRY_TEST_REDIS_PORT is not set: run these tests ' +
    'through make check (tests/integration/test_node_client)');
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  await client.connect();
  return client;
}

/** Redis' clock in ms (TIME), the clock ferry's due times follow. */
async function redisMs(r) {
  const [s, us] = await r.sendCommand(['TIME']);
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** A counter of ferry:{queue}:stats (done, enqueued, ...), 0 when unset. */
async function stat(r, queue, field) {
  return Number(await r.hGet(`ferry:{${queue}}:stats`, field) || 0);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls cond() every 50 ms until it is true or ms have passed. */
async function waitFor(cond, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end && !await cond()) await sleep(50);
}

module.exports = { port, connect, redisMs, stat, sleep, waitFor };
