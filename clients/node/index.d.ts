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
  /** How long a call whose outcome is unknown (or that fewer than
   * waitReplicas replicas have) is sent again on a queue that keeps ids,
   * in ms (default 60000, as ferryctl). */
  resendForMs?: number;
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
  /** Then wait up to this many ms for the jobs (Producer#wait): the
   * result's outcome. Only on a queue with an idempotency_window (else a
   * NotIdempotentError before anything is pushed), and every job needs an
   * id of its own (else an InvalidJobError, nothing pushed). */
  wait?: number;
}

export interface WaitOptions {
  /** How long to wait, in ms (default 30000; 0: look once). */
  timeout?: number;
}

/** The outcome of each id waited for, each once, in the caller's order. */
export interface WaitResult {
  /** Done: the job's rows are committed. */
  done: string[];
  /** Dead-lettered, with the dead entry's reason ("purged" when the entry
   * was purged or archived before it was read). */
  dead: { id: string; reason: string }[];
  /** Still waiting, scheduled, running or retried when the time was up. */
  pending: string[];
  /** Not held by the queue: never accepted with this id, or forgotten
   * idempotency_window after it settled. */
  unknown: string[];
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
  readonly resendForMs: number;
  /** The script's SHA-1, as EVALSHA takes it. */
  readonly sha: string;
  /** Resolves to the ids pushed, as ferryctl enqueue prints them. Bad
   * options (chunkRows, cacheTtl, delay, runAt) reject with a RangeError
   * before anything is pushed. */
  enqueue(queue: string, jobOrJobs: Job | Job[],
    options?: EnqueueOptions): Promise<EnqueueResult>;
  /** Waits until each job of ids (enqueued on queue, which must keep ids:
   * an idempotency_window above 0, else NotIdempotentError) is done, dead
   * or the timeout is up; resolves (never rejects) on a timeout, with the
   * ids still pending. Reads only; a lost connection is waited out. */
  wait(queue: string, ids: ReadonlyArray<string | number | bigint>,
    options?: WaitOptions): Promise<WaitResult>;
}

/** The ids of an enqueue, in order; already: those the queue had accepted
 * already (a queue with an idempotency_window), not pushed again; outcome:
 * with the wait option, what the wait found (else undefined). */
export type EnqueueResult = string[] & { readonly already: string[];
  readonly outcome?: WaitResult };

/** Producer#enqueue on options.producer, else on a shared client to
 * $FERRY_REDIS_URL (default redis://localhost:6379/0). */
export function enqueue(queue: string, jobOrJobs: Job | Job[],
  options?: EnqueueOptions & { producer?: Producer }): Promise<EnqueueResult>;

/** Producer#wait on options.producer, else on the shared client of
 * enqueue(). */
export function wait(queue: string,
  ids: ReadonlyArray<string | number | bigint>,
  options?: WaitOptions & { producer?: Producer }): Promise<WaitResult>;

/** Closes the shared client enqueue() opened, if any. */
export function close(): Promise<void>;

/** The bytes of enqueue.lua: path, $FERRY_ENQUEUE_LUA, else the package's
 * copy. */
export function loadScript(path?: string): Buffer;

/** Any failure of enqueue or wait; pushed lists the ids that did go
 * in. */
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

/** A wait (Producer#wait, enqueue's wait option) on a queue that keeps no
 * ids: its idempotency_window is 0 or not set. Nothing was pushed. */
export class NotIdempotentError extends FerryError {}
