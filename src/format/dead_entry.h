/* dead_entry.h - a dead-letter entry (doc/formats.md, read by
 * src/format/wrapper.c) as an operator reads it: its header as JSON members, every
 * string token decoded, and the job as a JSON string when it is valid
 * UTF-8, else as base64; and back: the job's bytes from such members. The
 * one decoder of dead entries: `ferryctl dead` (src/ferryctl/ctl_dead.c), the
 * dead-letter archive (src/redis/dead_archive.c) and `ferryctl dead restore`
 * (src/ferryctl/ctl_restore.c) read them with it. Pure code: jansson only, no
 * Redis. */
#ifndef FERRY_DEAD_ENTRY_H
#define FERRY_DEAD_ENTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "job.h"
#include "wrapper.h"

#define DEAD_ENTRY_MALFORMED "malformed dead entry"

/* One element of a dead-letter list, read by the grammar. */
struct dead_entry {
	const char *el;         /* its bytes (not owned) */
	size_t len;
	bool ok;                /* it matches the grammar: w is set */
	struct wrapper w;       /* points into el */
	bool truncated;         /* dead_entry_read_cut: el is a prefix */
	size_t total;           /* the whole entry's length */
	char *buf;              /* owned copy of a cut entry, or NULL */
};

/* The bytes of an entry that name it for the dashboard's replay and
 * purge: its first DEAD_ENTRY_REF_BYTES bytes (all of a shorter one)
 * and its length. src/redis/lua/dead_page.lua computes the same in Redis. */
#define DEAD_ENTRY_REF_BYTES 4096

/* Read el (len bytes; it must outlive e). Free with dead_entry_free. */
void dead_entry_read(struct dead_entry *e, const char *el, size_t len);
void dead_entry_free(struct dead_entry *e);
/* Read the first len bytes of an entry of total bytes (len < total: a
 * cut entry, truncated set) for display only: its header when the cut
 * falls in the document, and w.doc its prefix, cut back at a UTF-8
 * character boundary. A cut in the header leaves ok false. len ==
 * total is dead_entry_read. The entry is copied: el need not outlive e. */
void dead_entry_read_cut(struct dead_entry *e, const char *el, size_t len,
    size_t total);
/* The SHA-1 (hex) of the entry's first DEAD_ENTRY_REF_BYTES bytes
 * followed by total in decimal; el holds at least that prefix. */
void dead_entry_ref(const char *el, size_t len, size_t total, char out[41]);
/* Add the members an operator reads of an entry that matches the grammar:
 * dead_entry_header, then dead_entry_job. 0, or -1 when jansson failed
 * (or e is malformed). */
int dead_entry_decode(json_t *obj, const struct dead_entry *e);
/* The cache key its job names (job.h's cache_key), malloc'd, or NULL (also
 * for a malformed entry). The caller checks cache_key_allowed. */
char *dead_entry_cache_key(const struct dead_entry *e);

/* Add the header members of w to obj in the grammar's order: reason,
 * attempts, recoveries, time, worker, then id, stamps (an array of
 * strings), first_error, last_error where the entry has them. 0, or -1
 * when a jansson call failed (obj may hold some of them: the caller
 * falls back to the raw bytes, nothing is dropped silently). */
int dead_entry_header(json_t *obj, const struct wrapper *w);
/* Add the document: "job" as a JSON string when it is valid UTF-8, else
 * "job_base64". 0, or -1 when jansson failed. */
int dead_entry_job(json_t *obj, const char *doc, size_t len);
/* Add "raw_base64" (the whole element) and "raw" when it is valid UTF-8:
 * what is shown of an element that does not match the grammar. 0 or -1. */
int dead_entry_raw(json_t *obj, const char *el, size_t len);
/* The inverse of dead_entry_job: the job's bytes from obj's "job" (a
 * string) or "job_base64". 0 with them in *p and *n (*buf malloc'd when
 * decoded from base64, else NULL); -1 with what is wrong in *why. */
int dead_entry_job_bytes(json_t *obj, const char **p, size_t *n, char **buf,
    const char **why);

/* The name of an entry's job, as `ferryctl dead` takes it: the entry's
 * "id", else the id job_parse gives the document (its own "id", else the
 * SHA-1 of its bytes). A malformed entry (w NULL) is named by the SHA-1
 * of the whole element. An entry's "id" longer than JOB_ID_MAX bytes is cut
 * at a character boundary: the name stays valid UTF-8. */
void dead_entry_id(const struct wrapper *w, const char *el, size_t len,
    long max_job_bytes, char out[JOB_ID_MAX + 1]);

#endif
