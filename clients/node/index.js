'use strict';
// ferry-client - enqueue jobs for ferry from Node.js with ferryctl
// enqueue's guarantees (doc/producers.md): new Producer(client)
// .enqueue(...) / .wait(...) on a node-redis v4 client of your own, or
// enqueue(...) / wait(...) on a client to $FERRY_REDIS_URL (default
// redis://localhost:6379/0) opened on first use and closed by close(). CommonJS, so that both require() and
// import (Node 18's too) load it without a build step.

const { createClient } = require('redis');
const { Producer, loadScript } = require('./lib/producer');
const { FerryError, InvalidJobError, QueueFullError, NotReplicatedError,
  NotIdempotentError } = require('./lib/errors');

let defaultProducer = null;

async function shared() {
  if (defaultProducer === null) {
    const client = createClient({ url: process.env.FERRY_REDIS_URL ||
      'redis://localhost:6379/0' });
    defaultProducer = client.connect().then(() => new Producer(client));
    defaultProducer.catch(() => { defaultProducer = null; });
  }
  return defaultProducer;
}

/** Producer#enqueue on options.producer, else on a Producer with ferry's
 * defaults connected to $FERRY_REDIS_URL. */
async function enqueue(queue, jobOrJobs, options = {}) {
  const { producer, ...rest } = options;
  return (producer || await shared()).enqueue(queue, jobOrJobs, rest);
}

/** Producer#wait on options.producer, else on the Producer enqueue() uses
 * (connected to $FERRY_REDIS_URL). */
async function wait(queue, ids, options = {}) {
  const { producer, ...rest } = options ?? {};
  return (producer || await shared()).wait(queue, ids, rest);
}

/** Closes the client enqueue() opened, if any (so that the process can
 * exit). */
async function close() {
  if (defaultProducer === null) return;
  const pending = defaultProducer;
  defaultProducer = null;
  await (await pending).redis.quit();
}

// Named one by one, so that `import { QueueFullError } from 'ferry-client'`
// finds them too (Node reads a CommonJS module's names from this line).
module.exports = { Producer, enqueue, wait, close, loadScript, FerryError,
  InvalidJobError, QueueFullError, NotReplicatedError, NotIdempotentError };
