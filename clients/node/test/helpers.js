'use strict';
// helpers.js - what the test files share: a node-redis client to the
// servers' redis-server (FERRY_TEST_REDIS_PORT, set by test/run.js, which
// starts them for npm test, or by tests/integration/test_node_client.c;
// unset, every test fails, never skips), PostgreSQL's answers
// (FERRY_TEST_PG_PORT), ferryctl on ferryd's configuration
// (FERRY_TEST_FERRYCTL, FERRY_TEST_CONFIG), the Redis clock, a queue's
// stats, waiting with a deadline, and a proxy in front of Redis that loses
// a reply.

const assert = require('node:assert/strict');
const { execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { createClient } = require('redis');

const port = process.env.FERRY_TEST_REDIS_PORT;

/** A connected client to the test's Redis (quit it when done). */
async function connect() {
  assert.ok(port, 'FERRY_TEST_REDIS_PORT is not set: run these tests with ' +
    'npm test (test/run.js starts the servers) or through make check ' +
    '(tests/integration/test_node_client)');
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

/** The first column of the first row of sql on the servers' PostgreSQL
 * (database ferry), as text. */
function pgValue(sql) {
  const pgPort = process.env.FERRY_TEST_PG_PORT;
  assert.ok(pgPort, 'FERRY_TEST_PG_PORT is not set: run these tests with ' +
    'npm test or through make check');
  const bindir = process.env.PG_BINDIR || '/usr/lib/postgresql/15/bin';
  const psql = fs.existsSync(path.join(bindir, 'psql'))
    ? path.join(bindir, 'psql') : 'psql';
  return execFileSync(psql, ['-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1',
    '-h', '127.0.0.1', '-p', pgPort, '-U', 'postgres', '-d', 'ferry', '-c',
    sql], { encoding: 'utf8' }).trim();
}

/** Runs `ferryctl -c CONFIG args...` on the servers' ferryd.ini; resolves
 * to its output, rejects when it fails. */
function ferryctl(...args) {
  const bin = process.env.FERRY_TEST_FERRYCTL;
  const config = process.env.FERRY_TEST_CONFIG;
  assert.ok(bin && config, 'FERRY_TEST_FERRYCTL and FERRY_TEST_CONFIG are ' +
    'not set: run these tests with npm test or through make check');
  return new Promise((resolve, reject) => {
    execFile(bin, ['-c', config, ...args], (err, stdout, stderr) => {
      if (err) reject(new Error(`ferryctl ${args.join(' ')}: ${err.message}` +
        `${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** 127.0.0.1:port in front of Redis. With loseNext set, the next request
 * is forwarded, its reply dropped and the connection closed: the command
 * ran, the client never hears of it. */
function replyLosingProxy() {
  const proxy = { loseNext: false, lost: 0 };
  proxy.server = net.createServer((client) => {
    const upstream = net.connect(Number(port), '127.0.0.1');
    client.on('data', (data) => upstream.write(data));
    upstream.on('data', (data) => {
      if (proxy.loseNext) {
        proxy.loseNext = false;
        proxy.lost += 1;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(data);
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  return new Promise((resolve) => proxy.server.listen(0, '127.0.0.1',
    () => resolve(proxy)));
}

/** A replyLosingProxy and a client connected through it (its errors,
 * which the proxy causes on purpose, are not thrown). */
async function proxiedClient() {
  const proxy = await replyLosingProxy();
  const client = createClient({
    url: `redis://127.0.0.1:${proxy.server.address().port}`,
  });
  client.on('error', () => {});
  await client.connect();
  return { proxy, client };
}

module.exports = { port, connect, redisMs, stat, sleep, waitFor, pgValue,
  ferryctl, replyLosingProxy, proxiedClient };
