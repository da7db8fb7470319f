// index.d.ts - the types of ferry-client (index.js, lib/*.js).
import type { RedisClientType } from 'redis';

/** A job: an object (encoded, can be split or cached) or JSON text
 * (a string or Buffer, pushed byte for byte). */
export type Job = Record<string, unknown> | string | Uint8Array;

export interface ProducerOptions {
  /** redis_prefix (default "ferry"). */
  prefix?: string;
  /** The queue's max_job_bytes (default 1048576; 0: no limit). */
  maxJobBytes?: number;
  /** [ferryd] memory_refuse_percent (default 90; 0: not checked). */
  memoryRefusePercent?: number;
  /** The queue's chunk_rows (default 1000). */
  chunkRows?: number;
  /** Accepted and unused: a cache key has no TTL while its job lives
   * (ferryd removes keys left without a job after its cache_ttl). */
  cacheTtl?: number;
  /** The queue's cache_key_prefixes: an array, or the comma-separated
   * text. A job may name an application's key under one of them; the
   * key must exist, and it is protected until the job is done. */
  cacheKeyPrefixes?: string[] | string;
  /** redis_wait_replicas (default 0: no WAIT). */
  waitReplicas?: number;
  /** redis_wait_timeout in ms (default 1000). */
  waitTimeoutMs?: number;
  /** enqueue.lua to run instead of the package's copy (else
   * $FERRY_ENQUEUE_LUA, else the copy). */
  scriptPath?: string;
}

export interface EnqueueOptions {
  /** Move each job's "data" into a cache key of its own,
   * PREFIX:{QUEUE}:cache:ID:<random>, protected (no TTL) until the job is
   * done. A job without "data" is refused. */
  cache?: boolean;
  /** Implies cache; the value is unused. */
  cacheTtl?: number;
  /** Split a "data" array of more rows into jobs ID:INDEX. */
  chunkRows?: number;
  /** The id of a single job (not of an array). */
  id?: string | number;
  /** Hold the jobs in the queue's scheduled set for this many ms from now,
   * by the Redis clock (0 to 3650 days; ferryctl enqueue --delay). */
  delay?: number;
  /** Hold them until then: a Date or Unix time in ms, by the Redis clock
   * (ferryctl enqueue --at); a time past pushes them at once. Not with
   * delay. */
  runAt?: Date | number;
}

export class Producer {
  constructor(client: RedisClientType<any, any, any>, options?: ProducerOptions);
  readonly prefix: string;
  readonly maxJobBytes: number;
  readonly memoryRefusePercent: number;
  readonly chunkRows: number;
  readonly cacheTtl: number;
  readonly cacheKeyPrefixes: string[];
  readonly waitReplicas: number;
  readonly waitTimeoutMs: number;
  /** The script's SHA-1, as EVALSHA takes it. */
  readonly sha: string;
  /** Resolves to the ids pushed, as ferryctl enqueue prints them. Bad
   * options (chunkRows, cacheTtl, delay, runAt) reject with a RangeError
   * before anything is pushed. */
  enqueue(queue: string, jobOrJobs: Job | Job[],
    options?: EnqueueOptions): Promise<EnqueueResult>;
}

/** The ids of an enqueue, in order; already: those the queue had accepted
 * already (a queue with an idempotency_window), not pushed again. */
export type EnqueueResult = string[] & { readonly already: string[] };

/** Producer#enqueue on options.producer, else on a shared client to
 * $FERRY_REDIS_URL (default redis://localhost:6379/0). */
export function enqueue(queue: string, jobOrJobs: Job | Job[],
  options?: EnqueueOptions & { producer?: Producer }): Promise<EnqueueResult>;

/** Closes the shared client enqueue() opened, if any. */
export function close(): Promise<void>;

/** The bytes of enqueue.lua: path, $FERRY_ENQUEUE_LUA, else the package's
 * copy. */
export function loadScript(path?: string): Buffer;

/** Any failure of enqueue; pushed lists the ids that did go in. */
export class FerryError extends Error {
  readonly pushed: string[];
}

/** Job index (from 0, in the caller's array) can never be processed;
 * nothing of that script call went in. */
export class InvalidJobError extends FerryError {
  readonly index: number;
  readonly reason: string;
}

/** Redis is at or above memory_refuse_percent of maxmemory, or at
 * maxmemory; nothing of that script call went in. */
export class QueueFullError extends FerryError {}

/** The jobs are in the queue but fewer than wanted replicas had them in
 * time; they are not pushed again. */
export class NotReplicatedError extends FerryError {
  readonly reached: number;
  readonly wanted: number;
}
