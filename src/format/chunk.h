/* chunk.h - what `ferryctl enqueue` pushes for one input document: a job
 * whose "data" holds more than chunk_rows rows becomes several jobs, and
 * with --cache each job's data moves into a cache key the job names.
 * Pure code: no Redis, no I/O. */
#ifndef FERRY_CHUNK_H
#define FERRY_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

struct chunk_job {
	const char *el;         /* the list element */
	size_t el_len;
	bool owned;             /* el is malloc'd (else it is the input's) */
	char *key;              /* cache key to write, or NULL */
	char *cache;            /* its value, malloc'd, or NULL */
	char *named_key;        /* a key the document names itself, written
	                         * by the application (set by the caller),
	                         * or NULL */
	size_t cache_len;
	char id[JOB_ID_MAX + 1];
	bool has_id;            /* the element has an "id" of its own (set
	                         * by the caller), else id is its SHA-1 */
	/* " F+C" when the job holds rows F to F+C-1 of a document's "data"
	 * array (its id's layout: src/redis/lua/enqueue.lua refuses the
	 * document sent again in other chunks), else "" */
	char layout[48];
	char sha[41];           /* the SHA-1 of el in hex, where the enqueue
	                         * needs it (set by the caller), or "" */
};

struct chunk_jobs {
	struct chunk_job *v;
	size_t n, cap;
	/* where each cache key's group comes from: the caller seeds it
	 * with random bits (getrandom), so that keys differ across calls
	 * and processes */
	uint64_t key_seed;
	uint64_t key_group;     /* the group of the keys drawn last */
	unsigned key_count;     /* keys drawn so far */
};

/* Keys of ferry's own come in groups of at most this many, each group
 * "<prefix><16 hex>." and its keys' index (src/redis/lua/common.lua counts a
 * group in one entry of the protected hash). */
#define CHUNK_KEY_GROUP 1000

/* Why a document without "data" cannot move into a cache key: its members
 * are at once the row and what the sink reads of the job (op, the table
 * member), which the job must keep. */
#define CHUNK_BARE_REFUSAL "a job without \"data\" cannot be cached: its " \
	"members are its row and also what ferry reads of the job (op, the " \
	"table member); put the rows under \"data\", or enqueue it without " \
	"the cache"

/* Append the jobs of document doc (valid for job_parse, id `id`):
 * - "data" an array of more than chunk_rows rows: one job per chunk_rows
 *   rows, {"id":"<id>",<the other members>,"data":[<rows>]} for the first,
 *   "<id>:<F>" for the next ones, F the index of its first row (from 0):
 *   a chunk's id names its rows, and its layout says which;
 * - cache_prefix non-NULL ("PREFIX:{QUEUE}:cache:"): each job becomes
 *   {"id":"<id>",<the other members>,"cache_key":"<prefix><16 hex>.<n>"}
 *   and its "data" the key's value. The key is the job's own (its group,
 *   the hex part, drawn from out->key_seed every CHUNK_KEY_GROUP keys, n
 *   its index in the group): no other job, of the same id or
 *   byte-identical, ever writes it. A document without "data" is refused
 *   (CHUNK_BARE_REFUSAL).
 * Otherwise the document is pushed as it is. Returns 0, or -1 with what is
 * wrong in err (nothing appended). */
int chunk_document(const char *doc, size_t len, const char *id,
    int chunk_rows, const char *cache_prefix, struct chunk_jobs *out,
    char *err, size_t errsize);
void chunk_jobs_free(struct chunk_jobs *jobs);

#endif
