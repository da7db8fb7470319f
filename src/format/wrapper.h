/* wrapper.h - read the two formats ferry puts around a producer's document
 * (the wrapper of requeued jobs and the dead-letter entry), by the grammar
 * of doc/formats.md, exactly as parse_wrapper / parse_dead in
 * src/redis/lua/common.lua read them. Pure code: no Redis, no I/O, no JSON
 * library. */
#ifndef FERRY_WRAPPER_H
#define FERRY_WRAPPER_H

#include <stdbool.h>
#include <stddef.h>

#define WRAPPER_STR_MAX 4096    /* a string token, quotes included */
#define WRAPPER_HEAD "{\"ferry\":1,"
#define WRAPPER_JOB_MARK ",\"job\":"

enum wrapper_kind {
	WRAPPER_JOB,            /* {"ferry":1,"recoveries":..,"job":<doc>} */
	WRAPPER_DEAD,           /* {"reason":..,"job":<doc>} */
};

/* A string token as written, quotes included (p NULL when absent). */
struct wrapper_str {
	const char *p;
	size_t n;
};

struct wrapper {
	long long recoveries, attempts, seq, time;  /* seq, time: -1 absent */
	struct wrapper_str reason, worker, id, first_error, last_error;
	struct wrapper_str *stamps;     /* malloc'd; nstamps of them */
	int nstamps;
	const char *doc;                /* the producer's bytes */
	size_t doc_len;
};

/* Parse el (len bytes, not NUL-terminated) as `kind`. 0 when it matches
 * the grammar (w points into el; free with wrapper_free), -1 when it is
 * malformed (w is zeroed). Never reads outside el. */
int wrapper_parse(const char *el, size_t len, enum wrapper_kind kind,
    struct wrapper *w);
void wrapper_free(struct wrapper *w);

/* The text a token stands for, as a malloc'd NUL-terminated string (valid
 * UTF-8, no NUL: the grammar allows no \u0000). NULL for an absent one. */
char *wrapper_str_text(struct wrapper_str s);

/* Does el start like a wrapper? (ferryctl refuses such documents.) */
bool wrapper_looks_like(const char *el, size_t len);

#endif
