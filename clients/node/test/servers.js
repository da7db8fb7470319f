'use strict';
// servers.js - the servers of the suites when no driver gave them (npm
// test, test/run.js): a private redis-server on a free 127.0.0.1 port,
// PostgreSQL (initdb and pg_ctl of $PG_BINDIR, default
// /usr/lib/postgresql/15/bin; as root run as the user postgres through
// runuser, its folder given to that user) with database ferry, and a ferryd
// with the queues of test/ferryd.ini, all in one temp folder removed by
// stop(). As tests/integration/test_node_client.c sets them up (with
// harness_client.c's [queue pg] into table events). A server that cannot
// start is an Error with the reason and the end of its log, after what did
// start was stopped.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { createClient } = require('redis');

const CLIENT = path.join(__dirname, '..');
const TOP = path.join(CLIENT, '..', '..');
const PG_BINDIR = process.env.PG_BINDIR || '/usr/lib/postgresql/15/bin';
const START_MS = 60000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The last lines of a log file, or '' when there is none. */
function tail(file, lines = 30) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines)
      .join('\n');
  } catch (e) {
    return '';
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const file = path.join(dir || '.', name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch (e) {
      // next
    }
  }
  return null;
}

function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch (e) {
    return false;
  }
}

/** ferryd: $FERRYD, else the build's (build/src/ferryd or build/ferryd
 * beside clients/), else on PATH. */
function findFerryd() {
  if (process.env.FERRYD) return process.env.FERRYD;
  for (const file of [path.join(TOP, 'build', 'src', 'ferryd'),
    path.join(TOP, 'build', 'ferryd')]) {
    if (executable(file)) return file;
  }
  const found = onPath('ferryd');
  if (found === null) {
    throw new Error('no ferryd: set FERRYD, build it (build/ferryd: ' +
      'mkdir build && cd build && ../configure && make) or put it on PATH');
  }
  return found;
}

/** ferryctl: $FERRYCTL, else beside ferryd, else on PATH. */
function findFerryctl(ferryd) {
  if (process.env.FERRYCTL) return process.env.FERRYCTL;
  const beside = path.join(path.dirname(ferryd), 'ferryctl');
  if (executable(beside)) return beside;
  const found = onPath('ferryctl');
  if (found === null) {
    throw new Error(`no ferryctl beside ${ferryd} nor on PATH: set FERRYCTL`);
  }
  return found;
}

/** The enqueue.lua ferryd's build made (for the test that the client's
 * copy is the same), else the installed one, else null. */
function builtScript(ferryd) {
  const dir = path.dirname(ferryd);
  for (const file of [path.join(dir, 'gen', 'lua', 'enqueue.lua'),
    path.join(dir, '..', 'gen', 'lua', 'enqueue.lua'),
    path.join(dir, '..', 'share', 'ferry', 'lua', 'enqueue.lua')]) {
    if (fs.existsSync(file)) return file;
  }
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Does a TCP connection to 127.0.0.1:port answer PING with PONG? */
function pong(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      got += data;
      if (got.includes('\r\n')) done(got.startsWith('+PONG'));
    });
  });
}

/** Runs a program to its end; its output goes to log (appended). An
 * Error naming it, its exit and the end of the log when it fails. */
function run(argv, log, options = {}) {
  const fd = fs.openSync(log, 'a');
  try {
    execFileSync(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd],
      timeout: START_MS, ...options });
  } catch (e) {
    throw new Error(`${argv.join(' ')} failed (${e.status !== null &&
      e.status !== undefined ? `exit ${e.status}` : e.signal || e.message}):` +
      `\n${tail(log)}`);
  } finally {
    fs.closeSync(fd);
  }
}

/** A child process (its own process group, output to log) and a promise
 * of its exit. */
function child(argv, log, options = {}) {
  const fd = fs.openSync(log, 'a');
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd],
    detached: true, ...options });
  fs.closeSync(fd);
  proc.exited = new Promise((resolve) => {
    proc.on('exit', (code, signal) => resolve(signal || `exit ${code}`));
    proc.on('error', (err) => resolve(err.message));
  });
  proc.gone = null;
  proc.exited.then((how) => { proc.gone = how; });
  return proc;
}

/** SIGTERM, then SIGKILL after ms; resolves when it exited. */
async function stopChild(proc, ms = 10000) {
  if (!proc || proc.gone !== null) return;
  try {
    proc.kill('SIGTERM');
  } catch (e) {
    return;
  }
  const timer = setTimeout(() => {
    try {
      proc.kill('SIGKILL');
    } catch (e) {
      // gone
    }
  }, ms);
  await proc.exited;
  clearTimeout(timer);
}

/** As root, the user postgres runs PostgreSQL's programs (it refuses
 * root): [prefix of argv, uid, gid]; else nobody else. */
function pgUser() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    return { prefix: [], uid: null, gid: null };
  }
  let uid;
  let gid;
  try {
    uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
    gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
  } catch (e) {
    throw new Error('running as root, but there is no user postgres to run ' +
      'initdb and postgres as (apt-get install postgresql-15 creates it)');
  }
  return { prefix: ['runuser', '-u', 'postgres', '--'], uid, gid };
}

class Servers {
  constructor() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-node-test-'));
    fs.chmodSync(this.dir, 0o755);    // the user postgres goes through it
    this.redis = null;
    this.pg = null;
    this.ferryd = null;
    this.env = {};
  }

  async startRedis() {
    const bin = process.env.REDIS_SERVER || 'redis-server';
    const log = path.join(this.dir, 'redis.log');
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      fs.rmSync(log, { force: true });
      const proc = child([bin, '--port', String(port), '--bind', '127.0.0.1',
        '--dir', this.dir, '--save', '', '--appendonly', 'no',
        '--daemonize', 'no'], log);
      const end = Date.now() + START_MS;
      while (proc.gone === null && Date.now() < end && !await pong(port)) {
        await sleep(20);
      }
      if (proc.gone === null && await pong(port)) {
        this.redis = { proc, port };
        return port;
      }
      await stopChild(proc, 1000);
      const why = tail(log);
      if (attempt < 3 && why.includes('Address already in use')) continue;
      throw new Error(`${bin} did not start on 127.0.0.1:${port} ` +
        `(${proc.gone || 'no PONG within 60 s'}): ${why || 'no output; ' +
        'is redis-server installed (scripts/deps)?'}`);
    }
  }

  async startPg(sql) {
    const user = pgUser();
    const dir = path.join(this.dir, 'pg');
    const data = path.join(dir, 'data');
    const log = path.join(dir, 'postgres.log');
    fs.mkdirSync(dir);
    if (user.uid !== null) fs.chownSync(dir, user.uid, user.gid);
    const bin = (name) => path.join(PG_BINDIR, name);
    if (!executable(bin('initdb')) || !executable(bin('pg_ctl'))) {
      throw new Error(`no initdb and pg_ctl in ${PG_BINDIR} (set PG_BINDIR; ` +
        'scripts/deps installs postgresql-15)');
    }
    const setup = path.join(this.dir, 'pg-setup.log');
    run([...user.prefix, bin('initdb'), '-D', data, '-U', 'postgres', '-A',
      'trust', '-E', 'UTF8', '--no-locale', '--no-sync', '--no-instructions'],
    setup, { cwd: dir });
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        run([...user.prefix, bin('pg_ctl'), '-D', data, '-l', log, '-w',
          '-t', '60', '-o', `-k ${dir} -h 127.0.0.1 -p ${port} -c fsync=off ` +
          '-c full_page_writes=off -c shared_buffers=32MB', 'start'], setup,
        { cwd: dir });
      } catch (e) {
        if (attempt < 3 && tail(log).includes('Address already in use')) {
          continue;
        }
        throw new Error(`${e.message}\n${tail(log)}`);
      }
      this.pg = { user, data, port, dir };
      break;
    }
    const psql = [executable(bin('psql')) ? bin('psql') : 'psql', '-X', '-q',
      '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(this.pg.port),
      '-U', 'postgres'];
    run([...psql, '-d', 'postgres', '-c', 'CREATE DATABASE ferry'], setup);
    const file = path.join(this.dir, 'schema.sql');
    fs.writeFileSync(file, sql);
    run([...psql, '-d', 'ferry', '-f', file], setup);
    return this.pg.port;
  }

  async startFerryd(queues) {
    const ferryd = findFerryd();
    const ferryctl = findFerryctl(ferryd);
    const config = path.join(this.dir, 'ferryd.ini');
    fs.writeFileSync(config, '[ferryd]\n' +
      `pidfile = ${this.dir}/ferryd.pid\n` +
      `log = ${this.dir}/ferryd.log\n` +
      'log_level = debug\n' +
      `control_socket = ${this.dir}/ferryd.sock\n` +
      `redis_host = 127.0.0.1\nredis_port = ${this.redis.port}\n` +
      `pg_host = 127.0.0.1\npg_port = ${this.pg.port}\n` +
      'pg_database = ferry\npg_user = postgres\n\n' + queues);
    run([ferryctl, '-c', config, 'init-db'],
      path.join(this.dir, 'init-db.log'));
    const log = path.join(this.dir, 'ferryd.log');
    const out = path.join(this.dir, 'ferryd.out');
    this.ferryd = child([ferryd, '-f', '-c', config], out);
    // up once ferryctl status answers through its control socket
    const end = Date.now() + START_MS;
    for (;;) {
      if (this.ferryd.gone !== null) {
        throw new Error(`${ferryd} exited (${this.ferryd.gone}):\n` +
          `${tail(out)}\n${tail(log)}`);
      }
      try {
        execFileSync(ferryctl, ['-c', config, 'status'], { stdio: 'ignore' });
        break;
      } catch (e) {
        if (Date.now() > end) {
          throw new Error(`${ferryd} did not answer ferryctl status within ` +
            `60 s:\n${tail(out)}\n${tail(log)}`);
        }
        await sleep(50);
      }
    }
    await this.published(queues, end);
    return { ferryd, ferryctl, config };
  }

  /** Waits until ferryd published the idempotency_window of each queue
   * that has one (ids.lua), as the tests expect it. */
  async published(queues, end) {
    const names = [];
    let queue = null;
    for (const line of queues.split('\n')) {
      const m = /^\s*\[queue\s+([^\]\s]+)\s*\]/.exec(line);
      if (m) queue = m[1];
      else if (queue && /^\s*idempotency_window\s*=/.test(line)) {
        names.push(queue);
      }
    }
    const r = createClient({ url: `redis://127.0.0.1:${this.redis.port}` });
    r.on('error', () => {});
    await r.connect();
    try {
      for (const q of names) {
        while (await r.hGet(`ferry:{${q}}:config`, 'idempotency_window') ===
            null) {
          if (Date.now() > end || this.ferryd.gone !== null) {
            throw new Error(`ferryd did not publish the idempotency_window ` +
              `of queue ${q}:\n${tail(path.join(this.dir, 'ferryd.log'))}`);
          }
          await sleep(50);
        }
      }
    } finally {
      await r.quit();
    }
  }

  /** Stops what started and removes the folder; never throws. */
  async stop() {
    await stopChild(this.ferryd);
    if (this.pg !== null) {
      const argv = [...this.pg.user.prefix, path.join(PG_BINDIR, 'pg_ctl'),
        '-D', this.pg.data, '-m', 'immediate', '-w', 'stop'];
      try {
        execFileSync(argv[0], argv.slice(1), { stdio: 'ignore',
          timeout: 30000 });
      } catch (e) {
        process.stderr.write(`servers.js: ${argv.join(' ')} failed: ` +
          `${e.message}\n`);
      }
      this.pg = null;
    }
    await stopChild(this.redis && this.redis.proc);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts Redis, PostgreSQL (schema: sql) and ferryd (queues: the ini
 * text of its queue sections); resolves to { env, stop } where env holds
 * the variables test_node_client.c would set. On failure, stops what
 * started and rejects with the reason. */
async function start(queues, sql) {
  const s = new Servers();
  try {
    const redisPort = await s.startRedis();
    const pgPort = await s.startPg(sql);
    const { ferryd, ferryctl, config } = await s.startFerryd(queues);
    const env = {
      FERRY_TEST_REDIS_PORT: String(redisPort),
      FERRY_TEST_PG_PORT: String(pgPort),
      FERRY_TEST_CONFIG: config,
      FERRY_TEST_FERRYCTL: ferryctl,
    };
    const script = process.env.FERRY_BUILT_ENQUEUE_LUA || builtScript(ferryd);
    if (script !== null) env.FERRY_BUILT_ENQUEUE_LUA = script;
    return { env, dir: s.dir, stop: () => s.stop() };
  } catch (err) {
    await s.stop();
    throw err;
  }
}

module.exports = { start, findFerryd, tail };
