/* master_events.c - the ring of recent events behind /api/events: a fixed
 * array written round, in the master process only (one thread: no lock). */
#include "master_events.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define EVENT_TEXT_MAX 240

struct event {
	int64_t time_ms;          /* CLOCK_REALTIME */
	char kind[16];
	char text[EVENT_TEXT_MAX];
};

static struct event ring[MASTER_EVENTS_MAX];
static unsigned long nevents;     /* ever recorded */

void
master_event(const char *kind, const char *fmt, ...)
{
	struct event *e = &ring[nevents % MASTER_EVENTS_MAX];
	struct timespec ts;
	char text[1024];
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	e->time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	/* cut at a character boundary: json_pack drops invalid UTF-8 */
	util_utf8_copy(e->text, sizeof(e->text), text, strlen(text));
	nevents++;
}

json_t *
master_events_json(void)
{
	json_t *a = json_array();
	unsigned long n = nevents < MASTER_EVENTS_MAX ? nevents :
	    MASTER_EVENTS_MAX;

	for (unsigned long i = 0; a != NULL && i < n; i++) {
		const struct event *e = &ring[(nevents - 1 - i) % MASTER_EVENTS_MAX];
		json_array_append_new(a, json_pack("{s:I, s:s, s:s}", "time_ms",
		    (json_int_t)e->time_ms, "kind", e->kind, "text", e->text));
	}
	return a;
}
