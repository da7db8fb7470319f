/* dead_archive.h - keep a queue's dead-letter list within dead_max: the
 * oldest entries beyond it are appended to the dead_archive file (JSON
 * lines, fsynced) and only then removed from Redis. Run by workers. */
#ifndef FERRY_DEAD_ARCHIVE_H
#define FERRY_DEAD_ARCHIVE_H

#include <hiredis/hiredis.h>

#include "config.h"
#include "queue.h"

/* Archive and trim what is beyond dead_max (up to 10,000 entries a call).
 * Without dead_archive nothing is trimmed: a warning says so, once per
 * process. Returns the entries trimmed, or -1 when the connection
 * failed. */
long long dead_archive_run(redisContext *c, const char *prefix,
    const struct queue_config *q, const struct queue_keys *k);

#endif
