/* http.h - one request to the master's HTTP listener (http_server.c), as
 * the pages and the API (http_api.c, http_dead.c, http_dashboard.c) see
 * it: its arguments and headers, and its answer, given at once or later
 * (after a Redis reply): the connection waits, suspended, meanwhile. */
#ifndef FERRY_HTTP_H
#define FERRY_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct http_req;
struct master;

/* The master the request asks (master_control.h). */
struct master *http_req_master(const struct http_req *r);
/* A query argument, a request header (case-insensitive), or NULL; valid
 * until the answer. */
const char *http_req_arg(const struct http_req *r, const char *name);
const char *http_req_header(const struct http_req *r, const char *name);
/* The answer (once): body is taken (freed by the server). A request not
 * answered when its handler returns waits for it. After the listener
 * closed, the answer only frees what is left. */
void http_req_answer(struct http_req *r, unsigned status, const char *type,
    char *body, size_t len);
/* The answer as JSON text (o is taken; NULL: 500). */
void http_req_json(struct http_req *r, unsigned status, json_t *o);
/* {"error": "..."} with that status. */
void http_req_error(struct http_req *r, unsigned status, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

/* http_route.c: the listener a request came to (its [ferryd] http_listen,
 * and that address and port apart), and where the request goes: the Host
 * check (421 unless it names the listener; /metrics and the probes are
 * served to any), then GET or HEAD (get) to the page, the metrics, the
 * probes or the API, else POST to the actions. */
struct http_listener {
	const char *listen, *addr, *port;
};
void http_route(struct http_req *r, bool get, const char *url,
    const struct http_listener *l);

/* The routes (true: the url is theirs and r is answered or will be). */
bool http_api_get(struct http_req *r, const char *url);
bool http_dead_get(struct http_req *r, const char *url);
bool http_dead_post(struct http_req *r, const char *url);
/* http_dead_select.c: GET /api/dead/summary, POST /api/dead/retry-matching,
 * /purge-matching, /replay-reason and /purge-reason */
bool http_dead_select_get(struct http_req *r, const char *url);
bool http_dead_select_post(struct http_req *r, const char *url);
/* http_dead_redrive.c: GET /api/dead/redrives, POST
 * /api/dead/redrive/cancel, and the redrives counted in Prometheus text. */
bool http_dead_redrive_get(struct http_req *r, const char *url);
bool http_dead_redrive_post(struct http_req *r, const char *url);
struct buf;
void http_dead_redrive_metrics(struct buf *o);
bool http_actions_post(struct http_req *r, const char *url);
void http_dashboard(struct http_req *r);
/* http_health.c: GET /healthz and /readyz, and their answers counted in
 * Prometheus text. */
bool http_health_get(struct http_req *r, const char *url);
/* The answer to probe path ("/healthz", "/readyz") from what m holds: its
 * status, content type and body (malloc'd, a string); false when path is
 * no probe. Counted. */
bool http_health_answer(struct master *m, const char *path,
    unsigned *status, const char **type, char **body);
struct buf;
void http_health_metrics(struct buf *o);

/* http_api.c: the length of the host part of a master id (host:pid:hex),
 * and the depths of struct metrics_figures by name, in the order the page
 * shows them (HTTP_DEPTHS of them). */
#include <stdint.h>
size_t http_host_len(const char *master_id);
struct metrics_figures;
#define HTTP_DEPTHS 6
extern const char *const http_depth_names[HTTP_DEPTHS];
int64_t http_depth(const struct metrics_figures *f, int i);
/* The jobs producers ever pushed, as `ferryctl stats` counts them: those
 * workers took (the stats hash's `enqueued`) and those still in ready. */
int64_t http_enqueued(const struct metrics_figures *f);

/* http_actions.c: the request carries "Authorization: Bearer TOKEN" with
 * [ferryd] http_token (constant-time compare); false when no token is
 * configured. */
bool http_authorized(const struct http_req *r);
bool http_actions_enabled(const struct master *m);
/* May r read dead entries (GET /api/dead...: documents, errors, selections)?
 * Anyone may without a token configured (doc/security.md: the open mode);
 * with one, only a request that carries it. false after a 403 saying to
 * send it. */
bool http_may_read_dead(struct http_req *r);
/* May r see the workers' last errors (they may quote a row, as a dead
 * entry's errors do)? As http_may_read_dead, without an answer: a caller
 * that may not shows HTTP_ERROR_HIDDEN instead. */
bool http_may_see_errors(const struct http_req *r);
#define HTTP_ERROR_HIDDEN "(hidden: errors may quote a row; send the token " \
	"of [ferryd] http_token)"

#endif
