'use strict';
// run.js - `npm test`: node --test on the suites (FILES, or the files
// given). The servers come from the environment when FERRY_TEST_REDIS_PORT
// is set (tests/integration/test_node_client.c, make check); else run.js
// starts its own (servers.js: Redis, PostgreSQL, a ferryd with the queues
// of test/ferryd.ini, [queue pg] and the bullmq example's), sets the
// variables the driver would, and stops them at the end, whatever
// happened. A server that does not start fails the run with the reason.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const servers = require('./servers');

const CLIENT = path.join(__dirname, '..');
const EXAMPLE = path.join(CLIENT, 'examples', 'bullmq-migration');
const FILES = ['test/enqueue.test.js', 'test/delayed.test.js',
  'test/bullmq-migration.test.js', 'test/idempotent.test.js',
  'test/wait.test.js'];

const read = (file) => fs.readFileSync(file, 'utf8');

async function main() {
  const files = process.argv.length > 2 ? process.argv.slice(2) : FILES;
  const env = { ...process.env };
  let own = null;
  if (!process.env.FERRY_TEST_REDIS_PORT) {
    // as test_node_client.c and harness_client.c's h_client_start
    const queues = '[queue pg]\nhandler = postgres\ntable = events\n' +
      'columns = n\nworkers = 2\n' + read(path.join(__dirname, 'ferryd.ini')) +
      read(path.join(EXAMPLE, 'ferryd.ini'));
    const sql = 'CREATE TABLE events (n bigint);\n' +
      read(path.join(EXAMPLE, 'schema.sql')) +
      read(path.join(__dirname, 'schema.sql'));
    try {
      own = await servers.start(queues, sql);
    } catch (err) {
      process.stderr.write('run.js: the servers of the tests did not start, ' +
        `so every test fails: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`run.js: redis-server, PostgreSQL and ferryd in ` +
      `${own.dir}\n`);
    Object.assign(env, own.env);
  }
  const proc = spawn(process.execPath, ['--test', '--test-reporter=tap',
    ...files], { stdio: 'inherit', env, cwd: CLIENT });
  // Ctrl-C reaches node --test too (the same process group): wait for it,
  // then stop the servers (their own process groups)
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => proc.kill(sig));
  }
  const code = await new Promise((resolve) => {
    proc.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
    proc.on('error', (err) => {
      process.stderr.write(`run.js: ${process.execPath}: ${err.message}\n`);
      resolve(1);
    });
  });
  if (own !== null) await own.stop();
  return code;
}

main().then((code) => process.exit(code), (err) => {
  process.stderr.write(`run.js: ${err.stack}\n`);
  process.exit(1);
});
