/* due_time.c - parse --delay durations and --at times (see due_time.h). */
#define _DEFAULT_SOURCE
#include "due_time.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
	const char *unit;
	long long ms;
} units[] = {
	{ "ms", 1 }, { "s", 1000 }, { "", 1000 }, { "m", 60000 },
	{ "h", 3600000 }, { "d", 86400000 },
};

int
due_time_parse_delay(const char *s, long long *ms, char *err, size_t errsize)
{
	const char *p = s;
	long long n = 0;

	for (; isdigit((unsigned char)*p); p++)  /* past the limit: stays so */
		if (n <= DUE_TIME_DELAY_MAX_MS)
			n = n * 10 + (*p - '0');
	if (p == s) {
		snprintf(err, errsize, "--delay '%s': not a duration; give a "
		    "whole number with a unit: ms, s, m, h or d (e.g. 30s, 1500ms, "
		    "2h; a bare number is seconds)", s);
		return -1;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit) != 0)
			continue;
		if (n > DUE_TIME_DELAY_MAX_MS / units[i].ms) {
			snprintf(err, errsize, "--delay '%s': longer than the "
			    "limit of 3650d (ten years)", s);
			return -1;
		}
		*ms = n * units[i].ms;
		return 0;
	}
	snprintf(err, errsize, "--delay '%s': unknown unit '%s'; use ms, s, m, "
	    "h or d (e.g. 30s)", s, p);
	return -1;
}

/* n digits at *p into *v, moving *p on; false if they are not there. */
static bool
digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

static bool
expect(const char **p, const char *set)
{
	if (**p == '\0' || strchr(set, **p) == NULL)
		return false;
	(*p)++;
	return true;
}

int
due_time_parse_at(const char *s, long long *ms, char *err, size_t errsize)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30,
	    31 };
	const char *p = s;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, frac = 0, sign = 0;
	struct tm tm = { 0 };

	bool ok = digits(&p, 4, &y) && expect(&p, "-") && digits(&p, 2, &mo) &&
	    expect(&p, "-") && digits(&p, 2, &d) && expect(&p, "Tt ") &&
	    digits(&p, 2, &h) && expect(&p, ":") && digits(&p, 2, &mi) &&
	    expect(&p, ":") && digits(&p, 2, &sec);
	if (ok && *p == '.') {
		int scale = 100;
		for (p++; isdigit((unsigned char)*p); p++, scale /= 10)
			frac += scale * (*p - '0');
		ok = isdigit((unsigned char)p[-1]);
	}
	if (ok && (*p == 'Z' || *p == 'z'))
		p++;
	else if (ok && (*p == '+' || *p == '-')) {
		sign = *p++ == '-' ? -1 : 1;
		ok = digits(&p, 2, &oh) && expect(&p, ":") && digits(&p, 2, &om) &&
		    oh <= 23 && om <= 59;
	} else
		ok = false;
	ok = ok && *p == '\0' && y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 &&
	    d <= mdays[mo - 1] && (mo != 2 || d < 29 || (y % 4 == 0 &&
	    (y % 100 != 0 || y % 400 == 0))) && h <= 23 && mi <= 59 && sec <= 60;
	if (!ok) {
		snprintf(err, errsize, "--at '%s': not an RFC 3339 time; give "
		    "YYYY-MM-DDTHH:MM:SS with Z or an offset (e.g. "
		    "2026-12-02T10:00:00Z, 2026-12-02T11:00:00.5+01:00)", s);
		return -1;
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*ms = ((long long)timegm(&tm) - sign * (oh * 3600LL + om * 60)) * 1000 +
	    frac;
	return 0;
}
