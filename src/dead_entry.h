/* dead_entry.h - a dead-letter entry (doc/formats.md, read by
 * src/wrapper.c) as an operator reads it: its header as JSON members, every
 * string token decoded, and the job as a JSON string when it is valid
 * UTF-8, else as base64. `ferryctl dead show` and the dead-letter archive
 * (src/dead_archive.c) say the same thing this way. Pure code: jansson
 * only, no Redis. */
#ifndef FERRY_DEAD_ENTRY_H
#define FERRY_DEAD_ENTRY_H

#include <jansson.h>
#include <stddef.h>

#include "job.h"
#include "wrapper.h"

#define DEAD_ENTRY_MALFORMED "malformed dead entry"

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

/* The name of an entry's job, as `ferryctl dead` takes it: the entry's
 * "id", else the id job_parse gives the document (its own "id", else the
 * SHA-1 of its bytes). A malformed entry (w NULL) is named by the SHA-1
 * of the whole element. An entry's "id" longer than JOB_ID_MAX bytes is cut
 * at a character boundary: the name stays valid UTF-8. */
void dead_entry_id(const struct wrapper *w, const char *el, size_t len,
    long max_job_bytes, char out[JOB_ID_MAX + 1]);

#endif
