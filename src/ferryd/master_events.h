/* master_events.h - the master's recent events (worker deaths, hand-backs,
 * reloads, Redis outages) in a small in-memory ring for the dashboard's
 * /api/events. Survives nothing: a restarted ferryd starts empty. */
#ifndef FERRY_MASTER_EVENTS_H
#define FERRY_MASTER_EVENTS_H

#include <jansson.h>

#define MASTER_EVENTS_MAX 200     /* the ring keeps the newest ones */

/* Record one event of `kind` (worker, handback, reload, redis) now; the
 * text is cut at 240 bytes. Called where the master logs it. */
void master_event(const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Every event kept, newest first: [{"time_ms", "kind", "text"}]. */
json_t *master_events_json(void);

#endif
