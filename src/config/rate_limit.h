/* rate_limit.h - a queue's rate_limit value ("N/s" or plain N, jobs per
 * second, shared by every worker on every host through a token bucket in
 * Redis, taken by fetch.lua). Pure code: parsing and the bucket's size. */
#ifndef FERRY_RATE_LIMIT_H
#define FERRY_RATE_LIMIT_H

#define RATE_LIMIT_MAX 1000000L         /* jobs per second, at most */
/* What a worker sleeps, at most, when the bucket has no token for it
 * (then it fetches again: a reload or a stop is seen within this). */
#define RATE_LIMIT_WAIT_MAX_MS 1000L

/* Parse s into *per_s (0: no limit, for "", "0" and "0/s"). NULL when
 * valid, else what is wrong with it (a constant). */
const char *rate_limit_parse(const char *s, long *per_s);
/* The bucket's size in tokens for a rate: one second's worth. */
long rate_limit_burst(long per_s);

#endif
