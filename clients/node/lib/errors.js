'use strict';
// errors.js - what ferry-client rejects with: a job ferry would never
// process (InvalidJobError, nothing of that call pushed), Redis too full to
// take more (QueueFullError), jobs in the queue but not yet on enough
// replicas (NotReplicatedError), a wait on a queue that keeps no ids
// (NotIdempotentError). Every one carries the ids already pushed by
// earlier script calls of the same enqueue, if any (as clients/python).

/** Any failure of enqueue; `pushed` lists the ids that did go in. */
class FerryError extends Error {
  constructor(message, pushed = []) {
    super(message);
    this.name = this.constructor.name;
    this.pushed = [...pushed];
  }
}

/** Job `index` (from 0, in the caller's list) can never be processed:
 * `reason` is ferry's own wording (the same as ferryctl's). */
class InvalidJobError extends FerryError {
  constructor(index, reason, pushed = []) {
    super(`job ${index}: ${reason}`, pushed);
    this.index = index;
    this.reason = reason;
  }
}

/** Redis is above memory_refuse_percent of maxmemory (or at maxmemory):
 * nothing of that call was pushed. Drain the queue or raise maxmemory. */
class QueueFullError extends FerryError {}

/** The jobs are in the queue, but fewer than `wanted` replicas had them
 * within the timeout: a failover now would lose them. Not pushed again
 * (that could enqueue them twice). */
class NotReplicatedError extends FerryError {
  constructor(message, pushed, reached, wanted) {
    super(message, pushed);
    this.reached = reached;
    this.wanted = wanted;
  }
}

/** A wait (Producer#wait, enqueue's wait) on a queue that keeps no ids:
 * its idempotency_window is 0 or not set. Nothing was pushed. */
class NotIdempotentError extends FerryError {}

module.exports = { FerryError, InvalidJobError, QueueFullError,
  NotReplicatedError, NotIdempotentError };
