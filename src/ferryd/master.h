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
struct http_server;

/* Run until stopped; returns the process exit status. Takes ownership of
 * cfg (heap-allocated), control and http (control_open's and
 * http_server_open's, either NULL); ident names this start in Redis
 * (claimed by master_ident_claim). */
int master_run(struct ferry_config *cfg, struct control *control,
    struct http_server *http, const struct master_ident *ident);

/* The signals the master acts on (main blocks them until the loop runs). */
void master_signal_set(sigset_t *set);

#endif
