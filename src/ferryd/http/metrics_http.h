/* metrics_http.h - the optional HTTP endpoint ([ferryd] metrics_listen)
 * that serves the Prometheus metrics at /metrics for a scraper, through
 * libmicrohttpd run from the master's libev loop (no thread). */
#ifndef FERRY_METRICS_HTTP_H
#define FERRY_METRICS_HTTP_H

#include <ev.h>
#include <stddef.h>

struct master;
struct metrics_http;

/* Bind `listen` ("" disables it: NULL with err ""). Called before
 * privileges are dropped, so a port below 1024 works. NULL and a message
 * in err on failure. */
struct metrics_http *metrics_http_open(const char *listen, char *err,
    size_t errsize);
/* Serve it in loop, the metrics asked of m (master_control.h). */
void metrics_http_start(struct metrics_http *h, struct ev_loop *loop,
    struct master *m);
/* Stop serving, close every connection and the socket. */
void metrics_http_close(struct metrics_http *h);

#endif
