/* http_server.h - the master's optional HTTP listener ([ferryd]
 * metrics_listen): /metrics, the probes, the dashboard and its API,
 * through libmicrohttpd run from the master's libev loop (no thread). */
#ifndef FERRY_HTTP_SERVER_H
#define FERRY_HTTP_SERVER_H

#include <ev.h>
#include <stddef.h>

struct master;
struct http_server;

/* Bind `listen` ("" disables it: NULL with err ""). Called before
 * privileges are dropped, so a port below 1024 works. NULL and a message
 * in err on failure. */
struct http_server *http_server_open(const char *listen, char *err,
    size_t errsize);
/* Serve it in loop, the metrics asked of m (master_control.h). */
void http_server_start(struct http_server *h, struct ev_loop *loop,
    struct master *m);
/* A stop began: paced redrives (http_dead_redrive.c) end between batches. */
void http_server_stopping(struct http_server *h);
/* Stop serving, close every connection and the socket. */
void http_server_close(struct http_server *h);
/* After the master has finished with Redis (every reply called back):
 * free the redrives that are left. */
void http_server_release(struct http_server *h);

#endif
