/* http_dead_args.c - the arguments of the dashboard's dead-entry API
 * (http_dead*.c): numbers in a range, and a selection (reason, group, id,
 * before, after: dead_filter.h) as /api/dead, /api/dead/summary and
 * retry-matching take it. Each answers 400 saying what is wrong. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_filter.h"
#include "http.h"
#include "http_dead.h"
#include "util.h"

int
http_dead_arg_long(struct http_req *r, const char *name, long def, long lo,
    long hi, long *out)
{
	const char *s = http_req_arg(r, name);
	char *end;

	if (s == NULL || *s == '\0') {
		*out = def;
		return 0;
	}
	long n = strtol(s, &end, 10);
	if (*end != '\0' || n < lo || n > hi) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s: \"%s\" is not a "
		    "number in %ld..%ld", name, s, lo, hi);
		return -1;
	}
	*out = n;
	return 0;
}

/* A text argument into buf, or NULL when absent. -1 after an answer. */
static int
text_arg(struct http_req *r, const char *name, char *buf, const char **out)
{
	const char *v = http_req_arg(r, name);

	*out = NULL;
	if (v == NULL || *v == '\0')
		return 0;
	if (strlen(v) > DEAD_FILTER_TEXT_MAX) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s: longer than %d bytes",
		    name, DEAD_FILTER_TEXT_MAX);
		return -1;
	}
	snprintf(buf, DEAD_FILTER_TEXT_MAX + 1, "%s", v);
	*out = buf;
	return 0;
}

static int
time_arg(struct http_req *r, const char *name, long long *ms)
{
	const char *v = http_req_arg(r, name);
	char err[400];

	*ms = -1;
	if (v == NULL || *v == '\0')
		return 0;
	if (dead_filter_time(name, v, util_realtime_ms(), ms, err,
	    sizeof(err)) == 0)
		return 0;
	http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	return -1;
}

int
http_dead_arg_number(struct http_req *r, const char *name, double lo,
    double hi, double *out)
{
	const char *v = http_req_arg(r, name);
	char *end;

	*out = 0;
	if (v == NULL || *v == '\0')
		return 0;
	*out = strtod(v, &end);
	if (end != v && *end == '\0' && *out >= lo && *out <= hi)
		return 0;
	http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s: \"%s\" is not a number "
	    "from %g to %g", name, v, lo, hi);
	return -1;
}

int
http_dead_filter_args(struct http_req *r, bool exact,
    struct http_dead_filter_text *t, struct dead_filter *f)
{
	char err[300];

	dead_filter_init(f);
	if (exact && (text_arg(r, "reason", t->reason, &f->reason_is) != 0 ||
	    f->reason_is == NULL)) {
		if (f->reason_is == NULL)
			http_req_error(r, MHD_HTTP_BAD_REQUEST, "reason: missing (the "
			    "reason of the entries, as /api/dead lists it)");
		return -1;
	}
	if ((!exact && text_arg(r, "reason", t->reason, &f->reason) != 0) ||
	    text_arg(r, "group", t->group, &f->group) != 0 ||
	    text_arg(r, "id", t->id_glob, &f->id_glob) != 0 ||
	    time_arg(r, "before", &f->before_ms) != 0 ||
	    time_arg(r, "after", &f->after_ms) != 0)
		return -1;
	if (dead_filter_check(f, err, sizeof(err)) != 0) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
		return -1;
	}
	return 0;
}

