/* harness_http.h - a small HTTP/1.0 client for the tests of ferryd's
 * listener (the dashboard's pages and JSON): one request per connection to
 * 127.0.0.1:port, no curl. */
#ifndef FERRY_TEST_HARNESS_HTTP_H
#define FERRY_TEST_HARNESS_HTTP_H

#include <jansson.h>
#include <stdbool.h>

/* One request: the status, the body in *body (malloc'd). auth: the
 * Authorization header's value, or NULL. Fails the test when it cannot
 * connect. */
int h_http(int port, const char *method, const char *path, const char *auth,
    char **body);
/* GET path as JSON; fails the test unless 200 and JSON. */
json_t *h_http_json(int port, const char *path);
/* One exchange (Connection: close) with these extra header lines
 * ("Host: ...\r\n"..., or NULL): HTTP/1.1 when they name a Host, else
 * HTTP/1.0. The status; the head and the body in *head and *body when not
 * NULL (malloc'd). */
int h_http_exchange(int port, const char *method, const char *path,
    const char *lines, char **head, char **body);
/* GET path with these header lines: its JSON (200 required). */
json_t *h_http_json_with(int port, const char *path, const char *lines);

/* A TCP connection to 127.0.0.1:port from the loopback address `from`
 * (127.0.0.x: each is another client to the server). With wait, once
 * connected; without, non-blocking and at once (a server that accepts
 * nothing more must not hang the test). Fails the test when it cannot. */
int h_http_dial(const char *from, int port, bool wait);

/* Member `key` of queue q in /api/queues (a depth, paused, or
 * counters.key; true is 1, false 0), -1 when there is no such queue. */
long long h_api_queue(int port, const char *q, const char *key);
/* Wait until h_api_queue says want; fails the test if not. */
void h_wait_api_queue(int port, const char *q, const char *key,
    long long want);

#endif
