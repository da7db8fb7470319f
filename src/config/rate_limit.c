/* rate_limit.c - parse a queue's rate_limit (see rate_limit.h). */
#include "rate_limit.h"

#include <ctype.h>
#include <string.h>

const char *
rate_limit_parse(const char *s, long *per_s)
{
	long v = 0;
	const char *p = s;

	*per_s = 0;
	if (*s == '\0')
		return NULL;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (*p - '0');
		if (v > RATE_LIMIT_MAX)
			break;
	}
	if (p == s || (*p != '\0' && strcmp(p, "/s") != 0) ||
	    v > RATE_LIMIT_MAX)
		return "is not a rate (allowed: N/s or N, jobs per second, "
		    "0..1000000; 0 or empty: no limit)";
	*per_s = v;
	return NULL;
}

long
rate_limit_burst(long per_s)
{
	return per_s;
}
