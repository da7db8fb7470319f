/* metrics_http.c - GET /metrics over HTTP for Prometheus ([ferryd]
 * metrics_listen). libmicrohttpd parses HTTP; it runs in "external epoll"
 * mode: its epoll descriptor is watched by the master's libev loop and
 * MHD_run() is called when it is ready or when MHD's timeout is due, so
 * the master stays one thread and never blocks on a slow scraper. */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "control.h"
#include "log.h"
#include "master.h"
#include "metrics.h"
#include "util.h"

#define HTTP_CONNECTIONS_MAX 16
#define HTTP_TIMEOUT_S 5

struct metrics_http {
	struct MHD_Daemon *daemon;
	struct master *m;
	ev_io io;
	ev_timer timer;
	char listen[64];
};

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics_http *h = cls;
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_warn("metrics_listen %s: %s", h->listen, msg);
}

static enum MHD_Result
answer(struct MHD_Connection *conn, unsigned status, const char *type,
    char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body,
	    mode);
	if (r == NULL) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct metrics_http *h = cls;
	static char not_found[] = "not found: the metrics are at /metrics\n";
	static char not_allowed[] = "only GET and HEAD\n";
	(void)version;
	(void)upload_data;
	(void)con_cls;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		*upload_data_size = 0;   /* a body, if any, is not read */
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
		    not_allowed, sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	}
	if (strcmp(url, "/metrics") != 0)
		return answer(conn, MHD_HTTP_NOT_FOUND, "text/plain", not_found,
		    sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
	struct control_out o = { NULL, 0, 0 };
	metrics_prometheus(h->m, &o);
	return answer(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; "
	    "charset=utf-8", o.s, o.len, MHD_RESPMEM_MUST_FREE);
}

struct metrics_http *
metrics_http_open(const char *listen, char *err, size_t errsize)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char addr[INET_ADDRSTRLEN], why[160];
	int port;

	err[0] = '\0';
	if (listen == NULL || *listen == '\0')
		return NULL;
	if (config_parse_listen(listen, addr, sizeof(addr), &port, why,
	    sizeof(why)) == -1) {
		snprintf(err, errsize, "[ferryd] metrics_listen: \"%s\" %s", listen,
		    why);
		return NULL;
	}
	inet_pton(AF_INET, addr, &sin.sin_addr);
	sin.sin_port = htons((uint16_t)port);
	struct metrics_http *h = xcalloc(1, sizeof(*h));
	snprintf(h->listen, sizeof(h->listen), "%s", listen);
	/* EXTERNAL_LOGGER first: MHD warns (on every start) otherwise */
	h->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG,
	    (uint16_t)port, NULL, NULL, on_request, h,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
	    MHD_OPTION_END);
	if (h->daemon == NULL) {
		snprintf(err, errsize, "cannot listen on %s for metrics (check "
		    "[ferryd] metrics_listen: is the port in use?)", listen);
		free(h);
		return NULL;
	}
	return h;
}

/* Let MHD work, then wake up again when its next timeout is due. */
static void
run(struct metrics_http *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(h->daemon);
	ev_timer_stop(h->m->loop, &h->timer);
	if (MHD_get_timeout(h->daemon, &ms) == MHD_YES) {
		ev_timer_set(&h->timer, (double)ms / 1000., 0.);
		ev_timer_start(h->m->loop, &h->timer);
	}
}

static void
io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	run(w->data);
}

static void
timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	run(w->data);
}

void
metrics_http_start(struct metrics_http *h, struct master *m)
{
	if (h == NULL)
		return;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon,
	    MHD_DAEMON_INFO_EPOLL_FD);
	h->m = m;
	ev_io_init(&h->io, io_cb, info->epoll_fd, EV_READ);
	h->io.data = h;
	ev_io_start(m->loop, &h->io);
	ev_init(&h->timer, timer_cb);
	h->timer.data = h;
	log_info("metrics served over HTTP at http://%s/metrics", h->listen);
}

void
metrics_http_close(struct metrics_http *h)
{
	if (h == NULL)
		return;
	if (h->m != NULL) {
		ev_io_stop(h->m->loop, &h->io);
		ev_timer_stop(h->m->loop, &h->timer);
	}
	MHD_stop_daemon(h->daemon);
	free(h);
}
