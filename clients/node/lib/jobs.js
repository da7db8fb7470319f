'use strict';
// jobs.js - the list elements one caller's job becomes, as ferryctl enqueue
// builds them (src/format/chunk.c) and clients/python does (jobs.py): a "data"
// array of more than chunkRows rows is split into jobs
// {"id":"ID:INDEX",<the other members>,"data":[rows]}; with a cache, each
// job's "data" becomes the value of a key of its own,
// PREFIX:{QUEUE}:cache:<16 hex digits, random>.<n>, and the job names it (a
// job without "data" is refused: its members are its row and what ferry
// reads of the job). Built from the caller's objects; a job given as JSON
// text (a string or a Buffer) is pushed byte for byte. ID is the job's
// "id", else the SHA-1 of its document (as ferryctl prints it). A job that
// names a cache_key itself (the application's key) carries it as namedKey,
// so that enqueue.lua protects it; ownId is the element's own "id" as a
// worker reads it ("" without one), by which a queue that keeps ids
// deduplicates.

const crypto = require('node:crypto');
const { InvalidJobError } = require('./errors');

const ID_MAX = 128;   // src/format/job.h JOB_ID_MAX
const OWN_KEYS = new Set(['id', 'data', 'cache_key']);
// src/format/chunk.h CHUNK_BARE_REFUSAL
const BARE_REFUSAL = 'a job without "data" cannot be cached: its members ' +
  'are its row and also what ferry reads of the job (op, the table ' +
  'member); put the rows under "data", or enqueue it without the cache';

function namedKey(doc) {
  return doc !== null && typeof doc === 'object' &&
    typeof doc.cache_key === 'string' ? doc.cache_key : null;
}

// JSON.stringify writes NaN and Infinity as null; Python's json and
// jansson refuse them, and so does this.
function finiteOnly(key, value) {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`${value} is not valid JSON`);
  }
  return value;
}

/** Compact JSON, UTF-8 as it is (what a worker reads back). */
function encode(value) {
  const text = JSON.stringify(value, finiteOnly);
  if (text === undefined) throw new TypeError('it has no JSON form');
  return text;
}

function sha1(raw) {
  return crypto.createHash('sha1').update(raw).digest('hex');
}

function isIdValue(id) {
  return typeof id === 'string' || Number.isInteger(id);
}

function name(docId, raw) {
  return docId === undefined || docId === null || docId === ''
    ? sha1(raw) : String(docId);
}

function isText(doc) {
  return typeof doc === 'string' || doc instanceof Uint8Array;
}

// The top-level "id" of a text job when it is an integer written first:
// JavaScript reads integers beyond 2^53 inexactly, ferryctl does not.
function leadingIntegerId(text) {
  const m = /^[ \t\n\r]*\{[ \t\n\r]*"id"[ \t\n\r]*:[ \t\n\r]*(-?\d+)[ \t\n\r]*[,}]/
    .exec(text);
  return m ? m[1] : null;
}

function textJob(doc, index, cachePrefix, givenId, chunkRows) {
  const raw = typeof doc === 'string' ? doc : Buffer.from(doc);
  if (cachePrefix || givenId !== undefined) {
    throw new InvalidJobError(index, 'a job given as JSON text is pushed as ' +
      'it is: pass an object to cache it or give it an id');
  }
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  let parsed = null;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    parsed = null;       // enqueue.lua says what is wrong with it
  }
  const isObject = parsed !== null && typeof parsed === 'object' &&
    !Array.isArray(parsed);
  let docId = isObject && isIdValue(parsed.id) ? parsed.id : undefined;
  if (typeof docId === 'number' && !Number.isSafeInteger(docId)) {
    docId = leadingIntegerId(text);
    if (docId === null) {
      throw new InvalidJobError(index, 'its integer "id" is beyond 2^53, ' +
        'which JavaScript cannot read exactly unless it is the first ' +
        'member: write it first or as a string');
    }
  }
  const data = isObject ? parsed.data : undefined;
  if (Array.isArray(data) && data.length > chunkRows) {
    throw new InvalidJobError(index, `its "data" has ${data.length} rows, ` +
      `over chunk_rows ${chunkRows}: pass it as an object to split it`);
  }
  return [{ element: raw, id: name(docId, raw), index, key: null,
    value: '', namedKey: isObject ? namedKey(parsed) : null,
    ownId: docId === undefined ? '' : String(docId),
    layout: Array.isArray(data) ? ` 0+${data.length}` : '' }];
}

/** The keys of ferry's own of one call: "<prefix><16 hex>.<n>", a new
 * random group every KEY_GROUP keys (src/format/chunk.h CHUNK_KEY_GROUP;
 * enqueue.lua counts a group in one entry of the protected hash). */
const KEY_GROUP = 1000;
class CacheKeys {
  constructor(prefix) {
    this.prefix = prefix;
    this.count = 0;
    this.group = '';
  }

  next() {
    const n = this.count++ % KEY_GROUP;
    if (n === 0) this.group = crypto.randomBytes(8).toString('hex');
    return `${this.prefix}${this.group}.${n}`;
  }
}

// The job of rows `rows` (its data), from row `first` of a document (its
// layout " F+C": enqueue.lua refuses the document sent again in other
// chunks; none when the data is not an array).
function element(index, jobId, others, rows, cacheKeys, first) {
  const layout = Array.isArray(rows) ? ` ${first}+${rows.length}` : '';
  if (!cacheKeys) {
    return { element: encode({ id: jobId, ...others, data: rows }),
      id: jobId, index, key: null, value: '', namedKey: null, ownId: jobId,
      layout };
  }
  // a key of its own: no later job (of this id, byte-identical) writes it
  const key = cacheKeys.next();
  return { element: encode({ id: jobId, ...others, cache_key: key }),
    id: jobId, index, key, value: encode(rows), namedKey: null,
    ownId: jobId, layout };
}

/** The elements ({element, id, index, key, value}) of job `doc` (the
 * caller's `index`). cacheKeys is the call's CacheKeys with a cache, else
 * null. */
function build(doc, index, cacheKeys, chunkRows, givenId) {
  const cachePrefix = cacheKeys;
  if (isText(doc)) return textJob(doc, index, cachePrefix, givenId, chunkRows);
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new InvalidJobError(index, 'job is not a JSON object');
  }
  const has = (k) => Object.prototype.hasOwnProperty.call(doc, k);
  if (givenId !== undefined) {
    if (has('id') && doc.id !== givenId) {
      throw new InvalidJobError(index, `id=${JSON.stringify(givenId)} but ` +
        `the job's "id" is ${JSON.stringify(doc.id)}`);
    }
    const { id: _ignored, ...rest } = doc;
    doc = { id: givenId, ...rest };
  }
  const docId = doc.id;
  if (docId !== undefined && docId !== null && !isIdValue(docId)) {
    throw new InvalidJobError(index, 'job id is not a string or integer');
  }
  let raw;
  try {
    raw = encode(doc);
  } catch (e) {
    throw new InvalidJobError(index, `cannot be written as JSON: ${e.message}`);
  }
  const jobName = name(docId, raw);
  const data = doc.data;
  const split = Array.isArray(data) && data.length > chunkRows;
  if (has('cache_key') && (cachePrefix || split)) {
    throw new InvalidJobError(index, 'the job names a cache_key already: ' +
      'it cannot be ' + (cachePrefix ? 'cached again (cache: true)'
      : 'split into chunks (its key would be shared)'));
  }
  const others = {};
  for (const k of Object.keys(doc)) {
    if (!OWN_KEYS.has(k)) others[k] = doc[k];
  }
  if (split) {
    // the first chunk goes by the document's id, the others by their
    // first row: the same id for the same rows (src/format/chunk.c)
    const lastAt = Math.floor((data.length - 1) / chunkRows) * chunkRows;
    const last = `${jobName}:${lastAt}`;
    if (Buffer.byteLength(last) > ID_MAX) {
      throw new InvalidJobError(index, 'the job id is too long to name ' +
        `its chunks ("${last}", its last chunk's, must fit in ${ID_MAX} ` +
        'bytes)');
    }
    const out = [];
    for (let at = 0; at < data.length; at += chunkRows) {
      out.push(element(index, at === 0 ? jobName : `${jobName}:${at}`,
        others, data.slice(at, at + chunkRows), cachePrefix, at));
    }
    return out;
  }
  if (cachePrefix) {
    if (data === undefined) throw new InvalidJobError(index, BARE_REFUSAL);
    return [element(index, jobName, others, data, cachePrefix, 0)];
  }
  return [{ element: raw, id: jobName, index, key: null, value: '',
    namedKey: namedKey(doc),
    ownId: docId === undefined || docId === null ? '' : String(docId),
    layout: Array.isArray(data) ? ` 0+${data.length}` : '' }];
}

module.exports = { build, encode, sha1, CacheKeys, ID_MAX };
