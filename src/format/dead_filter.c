/* dead_filter.c - see dead_filter.h. */
#include "dead_filter.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "due_time.h"
#include "util.h"

void
dead_filter_init(struct dead_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->before_ms = f->after_ms = -1;
}

bool
dead_filter_active(const struct dead_filter *f)
{
	return f->reason != NULL || f->group != NULL || f->reason_is != NULL ||
	    f->before_ms >= 0 ||
	    f->after_ms >= 0 || f->id_glob != NULL;
}

bool
dead_filter_is_sqlstate(const char *s)
{
	for (int i = 0; i < DEAD_FILTER_SQLSTATE_LEN; i++)
		if (!isdigit((unsigned char)s[i]) && !isupper((unsigned char)s[i]))
			return false;
	return s[DEAD_FILTER_SQLSTATE_LEN] == '\0';
}

/* The SQLSTATE that starts text ("23505: ..."), copied into out. */
static bool
leading_sqlstate(const char *text, char out[DEAD_FILTER_SQLSTATE_LEN + 1])
{
	if (text == NULL || strlen(text) <= DEAD_FILTER_SQLSTATE_LEN ||
	    text[DEAD_FILTER_SQLSTATE_LEN] != ':')
		return false;
	memcpy(out, text, DEAD_FILTER_SQLSTATE_LEN);
	out[DEAD_FILTER_SQLSTATE_LEN] = '\0';
	return dead_filter_is_sqlstate(out);
}

int
dead_filter_time(const char *what, const char *s, long long now_ms,
    long long *ms, char *err, size_t errsize)
{
	char why[300], day[40];
	long long ago;

	if (strlen(s) == 10 && snprintf(day, sizeof(day), "%sT00:00:00Z", s) > 0 &&
	    due_time_parse_at(day, ms, why, sizeof(why)) == 0)
		return 0;
	if (due_time_parse_at(s, ms, why, sizeof(why)) == 0)
		return 0;
	if (isdigit((unsigned char)s[0]) && isalpha((unsigned char)s[strlen(s) - 1]) &&
	    strchr(s, '-') == NULL && strchr(s, ':') == NULL &&
	    due_time_parse_delay(s, &ago, why, sizeof(why)) == 0) {
		*ms = now_ms - ago;
		return 0;
	}
	snprintf(err, errsize, "%s '%s': neither a time (RFC 3339: "
	    "2026-12-02T10:00:00Z or with an offset, +01:00; or a date, "
	    "2026-12-02, midnight UTC) nor a duration ago (a whole number with "
	    "a unit: 90s, 30m, 2h, 7d)", what, s);
	return -1;
}

int
dead_filter_check(const struct dead_filter *f, char *err, size_t errsize)
{
	const char *texts[] = { f->reason, f->group, f->id_glob };
	const char *names[] = { "--reason", "--group", "--id" };

	for (int i = 0; i < 3; i++)
		if (texts[i] != NULL && (texts[i][0] == '\0' ||
		    strlen(texts[i]) > DEAD_FILTER_TEXT_MAX)) {
			snprintf(err, errsize, "%s: give 1 to %d bytes of text",
			    names[i], DEAD_FILTER_TEXT_MAX);
			return -1;
		}
	if (f->before_ms >= 0 && f->after_ms >= 0 &&
	    f->after_ms >= f->before_ms) {
		snprintf(err, errsize, "--after is not earlier than --before: "
		    "no entry could be selected; give --after the earlier time");
		return -1;
	}
	return 0;
}

static bool
holds(const char *text, const char *needle)
{
	return text != NULL && strcasestr(text, needle) != NULL;
}

static bool
reason_matches(const char *want, const char *reason, const char *last_error)
{
	char state[DEAD_FILTER_SQLSTATE_LEN + 1];

	if (dead_filter_is_sqlstate(want))
		return (leading_sqlstate(last_error, state) &&
		    strcmp(state, want) == 0) ||
		    (leading_sqlstate(reason, state) && strcmp(state, want) == 0);
	return holds(reason, want) || holds(last_error, want);
}

/* The group of an entry whose reason and last_error (NULL: none) are
 * these texts. */
static char *
group_of(const char *reason, const char *last_error)
{
	char state[DEAD_FILTER_SQLSTATE_LEN + 1];

	if (leading_sqlstate(last_error, state) ||
	    leading_sqlstate(reason, state))
		return xstrdup(state);
	return xstrdup(reason != NULL ? reason : "");
}

bool
dead_filter_match(const struct dead_filter *f, const struct dead_entry *e,
    const char *id)
{
	char *reason, *last_error, *group = NULL;
	bool ok;

	if (f->id_glob != NULL && fnmatch(f->id_glob, id, 0) != 0)
		return false;
	if (!e->ok)
		return f->before_ms < 0 && f->after_ms < 0 &&
		    (f->reason == NULL || holds(DEAD_ENTRY_MALFORMED, f->reason)) &&
		    (f->group == NULL || strcmp(f->group, DEAD_ENTRY_MALFORMED) == 0) &&
		    (f->reason_is == NULL ||
		    strcmp(f->reason_is, DEAD_ENTRY_MALFORMED) == 0);
	if ((f->before_ms >= 0 && e->w.time >= f->before_ms) ||
	    (f->after_ms >= 0 && e->w.time < f->after_ms))
		return false;
	if (f->reason == NULL && f->group == NULL && f->reason_is == NULL)
		return true;
	reason = wrapper_str_text(e->w.reason);
	last_error = wrapper_str_text(e->w.last_error);
	ok = (f->reason == NULL || reason_matches(f->reason, reason, last_error)) &&
	    (f->reason_is == NULL || strcmp(f->reason_is, reason) == 0);
	if (ok && f->group != NULL) {
		group = group_of(reason, last_error);
		ok = strcmp(group, f->group) == 0;
	}
	free(group);
	free(reason);
	free(last_error);
	return ok;
}

char *
dead_filter_group(const struct dead_entry *e)
{
	char *reason, *last_error, *group;

	if (!e->ok)
		return xstrdup(DEAD_ENTRY_MALFORMED);
	reason = wrapper_str_text(e->w.reason);
	last_error = wrapper_str_text(e->w.last_error);
	group = group_of(reason, last_error);
	free(reason);
	free(last_error);
	return group;
}
