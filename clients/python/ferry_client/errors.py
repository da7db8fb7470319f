"""errors.py - what ferry_client raises: a job ferry would never process
(InvalidJobError, nothing of that call pushed), Redis too full to take more
(QueueFullError), jobs in the queue but not yet on enough replicas
(NotReplicatedError), a wait on a queue that keeps no ids
(NotIdempotentError). Every one carries the ids already pushed by earlier
calls of the same enqueue, if any."""


class FerryError(Exception):
    """Any failure of enqueue or wait; `pushed` lists the ids that did go
    in."""

    def __init__(self, message, pushed=()):
        super().__init__(message)
        self.pushed = list(pushed)


class InvalidJobError(FerryError, ValueError):
    """Job `index` (from 0, in the caller's list) can never be processed:
    `reason` is ferry's own wording (the same as ferryctl's)."""

    def __init__(self, index, reason, pushed=()):
        super().__init__("job %d: %s" % (index, reason), pushed)
        self.index = index
        self.reason = reason


class QueueFullError(FerryError):
    """Redis is above memory_refuse_percent of maxmemory (or at maxmemory):
    nothing of that call was pushed. Drain the queue or raise maxmemory."""


class NotReplicatedError(FerryError):
    """The jobs are in the queue, but fewer than `wanted` replicas had them
    within the timeout: a failover now would lose them. Not pushed again
    (that could enqueue them twice)."""

    def __init__(self, message, pushed, reached, wanted):
        super().__init__(message, pushed)
        self.reached = reached
        self.wanted = wanted


class NotIdempotentError(FerryError):
    """A wait (Producer.wait, enqueue's wait=) on a queue that keeps no ids:
    its idempotency_window is 0 or not set. Nothing was pushed."""
