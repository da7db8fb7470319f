'use strict';
/* idem_enqueue.js - benchmark helper of scripts/bench idem (rates): one Node
 * process enqueues the first N lines of FILE (one JSON job a line, each with
 * an "id") into QUEUE through the Node client (clients/node, its
 * node_modules installed by npm ci), in calls of CALL jobs: Producer#enqueue
 * with an array of CALL jobs (the text of each line, pushed as it is), or
 * with one job when CALL is 1, each call awaited before the next.
 *
 *   node idem_enqueue.js ROOT PORT QUEUE FILE N CALL
 *
 * ROOT is the source tree (the client is ROOT/clients/node). The clock
 * runs from the first call to the end of the last (connecting and reading
 * the file are left out). Prints: jobs elapsed_us jobs_per_s already
 * (already: the jobs the queue answered "already accepted"; 0 expected).
 * Exit status 0 done, 1 an error, 2 usage. */

const fs = require('node:fs');
const path = require('node:path');

async function main() {
  const [root, port, queue, file, nArg, callArg] = process.argv.slice(2);
  const n = Number(nArg);
  const call = Number(callArg);
  if (!root || !Number.isInteger(n) || n < 1 || !Number.isInteger(call) ||
      call < 1) {
    process.stderr.write('usage: node idem_enqueue.js ROOT PORT QUEUE FILE ' +
      'N CALL\n');
    process.exit(2);
  }
  const client = path.join(root, 'clients', 'node');
  const { createClient } = require(require.resolve('redis', { paths: [client] }));
  const { Producer } = require(client);
  const lines = fs.readFileSync(file, 'utf8').split('\n', n)
    .filter((l) => l !== '');
  if (lines.length !== n) throw new Error(`${file} has ${lines.length} of ${n} lines`);
  const redis = createClient({ url: `redis://127.0.0.1:${port}/0` });
  await redis.connect();
  const p = new Producer(redis);
  // the script in Redis' cache before the clock starts (EVAL once otherwise)
  await redis.scriptLoad(fs.readFileSync(path.join(client, 'enqueue.lua'), 'utf8'));
  let pushed = 0;
  let already = 0;
  const t0 = process.hrtime.bigint();
  if (call === 1) {
    for (const line of lines) {
      const ids = await p.enqueue(queue, line);
      pushed += ids.length;
      already += ids.already.length;
    }
  } else {
    for (let i = 0; i < n; i += call) {
      const ids = await p.enqueue(queue, lines.slice(i, i + call));
      pushed += ids.length;
      already += ids.already.length;
    }
  }
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  await redis.quit();
  if (pushed !== n) throw new Error(`pushed ${pushed} of ${n} jobs`);
  process.stdout.write(`${n} ${Math.round(us)} ${Math.round(n * 1e6 / us)} ${already}\n`);
}

main().catch((err) => {
  process.stderr.write(`idem_enqueue: ${err.stack || err}\n`);
  process.exit(1);
});
