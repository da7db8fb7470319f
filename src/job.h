/* job.h - one job as a worker sees it, parsed from a Redis list element.
 * Pure code: no Redis, no I/O. See src/lua/common.lua for the wrapper that
 * ferry puts around a producer's document when it must remember attempts,
 * recoveries, a batch key or errors; the document itself is never
 * re-encoded, so it stays byte for byte what the producer pushed. */
#ifndef FERRY_JOB_H
#define FERRY_JOB_H

#include <stdbool.h>
#include <stddef.h>

#define JOB_ID_MAX 128          /* longer envelope ids are refused */
#define JOB_CACHE_KEY_MAX 512   /* longer cache keys are refused */

struct job {
	const char *el;         /* the list element (not owned) */
	size_t el_len;
	const char *raw;        /* the producer's document inside el */
	size_t raw_len;
	char id[JOB_ID_MAX + 1]; /* envelope "id" (string or integer), else
	                         * the SHA-1 of raw in hex */
	int attempts;
	int recoveries;
	char *batch;            /* batch key stamped by a reclaim, or NULL */
	char *cache_key;        /* envelope "cache_key", or NULL */
	bool has_data;          /* the document has a "data" member */
	/* Set by the worker from the cache key (src/cache.c), or NULL: the
	 * value as JSON for an exec handler's line (a string as a JSON
	 * string, a hash as an object, a list as an array), and the document
	 * the postgres sink reads instead of raw ({"data":<rows>}). */
	char *cache;
	size_t cache_len;
	char *rows;
	size_t rows_len;
	bool cache_missing;     /* the cache key was gone (invalid says so) */
	/* NULL, or why the job can never be processed: "empty job",
	 * "job is N bytes, over max_job_bytes M", "malformed JSON: ...",
	 * "job is not a JSON object", "job id is not a string or integer",
	 * "job id is longer than 128 bytes", "cache_key is not ...",
	 * "cache key expired or evicted" (set by the worker) */
	const char *invalid;
	char invalid_buf[256];
};

/* Parse element `el` (not NUL-terminated, len bytes) into j. Never fails:
 * a job that cannot be processed has j->invalid set (and still an id). */
void job_parse(struct job *j, const char *el, size_t len, long max_job_bytes);
/* job_parse, except that a job without an id of its own is named (the
 * SHA-1 of its document) only when job_id asks: a worker needs the name of
 * a failed job only. j->id is "" until then. */
void job_parse_unnamed(struct job *j, const char *el, size_t len,
    long max_job_bytes);
/* The job's id: its own, or the SHA-1 of its document in hex. */
const char *job_id(struct job *j);
void job_free(struct job *j);

/* The line an exec handler reads for this job, with a trailing newline:
 * {"id":"...","attempts":A,"recoveries":R,"job":<raw>} and, when the job
 * has cache data, ,"cache":<j->cache> before the last brace.
 * Returns a malloc'd string; its length in *len. */
char *job_handler_line(const struct job *j, size_t *len);

/* SHA-1 of data as 40 lowercase hex digits + NUL. */
void job_sha1_hex(const void *data, size_t len, char out[41]);

#endif
