/* job.h - one job as a worker sees it, parsed from a Redis list element:
 * a producer's document (from ready) or ferry's wrapper around one (from
 * requeue; doc/formats.md), which remembers attempts, recoveries, batch
 * stamps and errors. The document itself is never re-encoded, so it stays
 * byte for byte what the producer pushed. Pure code: no Redis, no I/O. */
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
	char digest[41];        /* the SHA-1 of raw in hex, once job_digest
	                         * asked ("" until then) */
	int attempts;
	int recoveries;
	char **stamps;          /* batch keys it may have been written under */
	int nstamps;
	bool bury;              /* recovered past max_recoveries, or refused
	                         * now for a reason that may not have held in
	                         * its batches (refusal_varies): the sink
	                         * checks its stamps, then it is dead-lettered
	                         * (with bury_reason) unless one of them
	                         * committed it */
	const char *bury_reason; /* NULL: "worker died while processing" */
	char *cache_key;        /* envelope "cache_key", or NULL */
	bool has_data;          /* the document has a "data" member */
	bool scanned;           /* json_scan_document accepted raw (job_check's
	                         * fast path): readers need not validate it */
	/* Set by the worker from the cache key (src/redis/cache.c), or NULL: the
	 * value as JSON for an exec handler's line (a string as a JSON
	 * string, a hash as an object, a list as an array), and the document
	 * the postgres sink reads instead of raw ({"data":<rows>}). */
	char *cache;
	size_t cache_len;
	char *rows;
	size_t rows_len;
	bool cache_missing;     /* the cache key was gone */
	bool refusal_varies;    /* invalid (or bury_reason) for a reason that
	                         * depends on settings or on the cache key's
	                         * value, not on the document alone: over
	                         * max_job_bytes, a cache key gone, refused
	                         * by cache_key_prefixes or holding a value
	                         * ferry cannot use. A reload or a producer
	                         * may change it between two attempts. */
	/* NULL, or why the job can never be processed: "empty job",
	 * "job is N bytes, over max_job_bytes M", "malformed JSON: ...",
	 * "job is not a JSON object", "job id is not a string or integer",
	 * "job id is longer than 128 bytes", "cache_key is not ...",
	 * "cache key expired or evicted" (set by the worker) */
	const char *invalid;
	char invalid_buf[256];
};

/* Parse a producer's document (not NUL-terminated, len bytes) into j, and
 * name it. Never fails: a job that cannot be processed has j->invalid set
 * (and still an id). A document that looks like ferry's wrapper is a
 * document like any other. */
void job_parse(struct job *j, const char *doc, size_t len, long max_job_bytes);
/* An element of a worker's processing list: a wrapper when `wrapped` (the
 * batch came from requeue; a malformed one is invalid, "malformed ferry
 * wrapper"), else a document. A job without an id of its own is named (the
 * SHA-1 of its document) only when job_id asks: a worker needs the name of
 * a failed job only. j->id is "" until then. */
void job_parse_held(struct job *j, const char *el, size_t len,
    long max_job_bytes, bool wrapped);
/* The job's id: its own, or the SHA-1 of its document in hex. */
const char *job_id(struct job *j);
/* The SHA-1 of its document in hex, whatever the job's id: a name that no
 * limit or check changes (job_id differs for a job over max_job_bytes,
 * read unparsed, and the same job under a higher limit). */
const char *job_digest(struct job *j);
void job_free(struct job *j);

/* The line an exec handler reads for this job, with a trailing newline:
 * {"id":"...","attempts":A,"recoveries":R,"job":<raw>} and, when the job
 * has cache data, ,"cache":<j->cache> before the last brace.
 * Returns a malloc'd string; its length in *len. */
char *job_handler_line(const struct job *j, size_t *len);

/* SHA-1 of data as 40 lowercase hex digits + NUL. */
void job_sha1_hex(const void *data, size_t len, char out[41]);

#endif
