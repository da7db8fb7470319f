/* http_dead_redrive.h - the redrives a master runs (the dashboard's
 * retry-matching and purge-matching, http_dead_select.c), as the API lists
 * them: GET /api/dead/redrives, POST /api/dead/redrive/cancel?id=N, and
 * their count in the metrics. At most REDRIVES_MAX run at once; the last
 * REDRIVES_KEPT finished ones stay listed. */
#ifndef FERRY_HTTP_DEAD_REDRIVE_H
#define FERRY_HTTP_DEAD_REDRIVE_H

#include <jansson.h>
#include <stdbool.h>

#include "config.h"

#define REDRIVES_MAX 4
#define REDRIVES_KEPT 16

enum redrive_state { REDRIVE_RUNNING, REDRIVE_DONE, REDRIVE_CANCELLED,
	REDRIVE_FAILED };

struct redrive {
	long long id;
	bool purge;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	char to[CONFIG_QUEUE_NAME_MAX + 1];     /* retry */
	json_t *selection;      /* reason, group, id, before, after, limit */
	double rate;            /* 0: unpaced */
	long long selected;     /* -1: still counting */
	long long moved, gone, refused, skipped;
	long long reached;      /* selected entries the move has reached */
	enum redrive_state state;
	char why[400];          /* cancelled or failed: why */
	long long started_ms, finished_ms;      /* Unix ms; 0: running */
	bool cancel;            /* asked: stops before its next batch */
	/* set by its runner: called on a cancel (stop waiting, end) */
	void (*on_cancel)(struct redrive *rd, void *priv);
	void *priv;
	struct redrive *next;
};

/* A new running redrive (the registry owns it), or NULL with why in err
 * when REDRIVES_MAX run already. */
struct redrive *http_redrive_new(char *err, size_t errsize);
/* It ended: finished now, in state (why: NULL or the reason). */
void http_redrive_end(struct redrive *rd, enum redrive_state state,
    const char *why);
json_t *http_redrive_json(const struct redrive *rd);
/* ferryd is stopping: every running redrive is cancelled (a batch in
 * flight still ends: each is atomic). */
void http_redrives_stop(void);
/* After the loop: free them all. */
void http_redrives_free(void);

#endif
