/* due_time.h - the values of `ferryctl enqueue --delay` and `--at`: a
 * duration ("30s", "1500ms", "2h", a bare number is seconds) and an RFC
 * 3339 time ("2026-12-02T10:00:00Z", "2026-12-02T11:00:00.250+01:00").
 * Pure code: the due time itself is computed by Redis (enqueue.lua). */
#ifndef FERRY_DUE_TIME_H
#define FERRY_DUE_TIME_H

#include <stddef.h>

#define DUE_TIME_DELAY_MAX_MS (3650LL * 86400 * 1000)   /* ten years */

/* A duration in ms into *ms: 0, or -1 with err saying why. */
int due_time_parse_delay(const char *s, long long *ms, char *err,
    size_t errsize);
/* An RFC 3339 time as Unix ms into *ms: 0, or -1 with err saying why. */
int due_time_parse_at(const char *s, long long *ms, char *err,
    size_t errsize);

#endif
