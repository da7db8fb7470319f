'use strict';
// producer.js - the ferry side of doc/bullmq.md's worked example: the web
// tier sends page views in batches to queue page_views, which ferryd
// writes into PostgreSQL (ferryd.ini and schema.sql beside this file).
// It replaces a BullMQ Queue.add of each batch and the Worker that
// INSERTed it. Tested by test/bullmq-migration.test.js.

const { Producer } = require('ferry-client');

const QUEUE = 'page_views';

/** A producer with the limits of the queue's ferryd.ini section. */
function pageViewProducer(client) {
  return new Producer(client, { chunkRows: 500, maxJobBytes: 1048576 });
}

/** A view as a row of page_views (columns = user_id, path, viewed_at). */
function row(view) {
  return { user_id: view.userId, path: view.path,
    viewed_at: view.viewedAt.toISOString() };
}

/** One batch of views as one job named batchId (BullMQ's jobId); a batch
 * of more than chunk_rows views becomes the jobs batchId:0, batchId:1...
 * options: { delay } (ms, as BullMQ's) or { runAt } (a Date). Resolves to
 * the job ids. */
async function sendBatch(producer, batchId, views, options = {}) {
  return producer.enqueue(QUEUE, { id: batchId, data: views.map(row) },
    options);
}

module.exports = { QUEUE, pageViewProducer, sendBatch };
