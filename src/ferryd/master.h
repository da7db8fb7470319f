/* master.h - the supervising process: one libev loop that keeps the right
 * number of workers alive for every queue and acts on signals. Its state
 * (struct master) is private to the master*.c files (master_int.h); other
 * modules reach it through master_control.h. */
#ifndef FERRY_MASTER_H
#define FERRY_MASTER_H

#include <signal.h>

#include "config.h"
#include "master_id.h"

struct master;
struct control;
struct ev_loop;
struct http_server;

/* The HTTP listener (src/ferryd/http) as the master runs it: these calls
 * and nothing else, so that the API reads the master (master_control.h)
 * while the master includes nothing of the API. main fills it. */
struct master_http {
	struct http_server *server;     /* http_server_open's; NULL: none */
	void (*start)(struct http_server *h, struct ev_loop *loop,
	    struct master *m);
	void (*stopping)(struct http_server *h); /* a stop began */
	void (*close)(struct http_server *h);    /* stop serving */
	void (*release)(struct http_server *h);  /* after Redis is finished */
};

/* Run until stopped; returns the process exit status. Takes ownership of
 * cfg (heap-allocated), control (control_open's, or NULL) and http's
 * server; ident names this start in Redis (claimed by
 * master_ident_claim). */
int master_run(struct ferry_config *cfg, struct control *control,
    const struct master_http *http, const struct master_ident *ident);

/* The signals the master acts on (main blocks them until the loop runs). */
void master_signal_set(sigset_t *set);

#endif
