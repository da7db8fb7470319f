/* http_server.c - the master's HTTP listener ([ferryd] http_listen):
 * GET /metrics for Prometheus, the probes, the dashboard (/,
 * http_dashboard.c) and its API (/api/..., http_api.c, http_dead.c,
 * http_actions.c), whose answers may wait for a Redis reply: such a
 * request's connection is suspended until http_req_answer.
 * libmicrohttpd parses HTTP; it runs in "external epoll"
 * mode: its epoll descriptor is watched by the master's libev loop and
 * MHD_run() is called when it is ready or when MHD's timeout is due, so
 * the master stays one thread and never blocks on a slow scraper.
 *
 * The listening socket is ferryd's own, not MHD's: MHD 0.9.75 takes its
 * listening socket out of its epoll set at the connection limit and never
 * puts it back in external epoll mode, so 17 idle connections wedged the
 * endpoint for good. ferryd accepts, and each connection waits in the front
 * door (http_door.c) until its request head has arrived whole, within
 * HTTP_DOOR_DEADLINE_MS. Then a probe (GET or HEAD /healthz, /readyz) is
 * answered at once and closed, without MHD; anything else goes to MHD
 * (MHD_add_connection), which holds HTTP_CONNECTIONS_MAX at most (counted
 * through its connection notices; past them, 503) and refuses a client's
 * beyond HTTP_CONNECTIONS_PER_IP, so one client cannot take them all. So
 * connections that send nothing, or a head that never ends, hold nothing
 * of MHD's, and whatever others hold, a probe is answered.
 *
 * Where a request goes, and the checks it passes first (its Host header,
 * the token), is http_route.c's. Every answer forbids framing, sniffing,
 * caching and referrers. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "http.h"
#include "http_dead_redrive.h"
#include "http_door.h"
#include "log.h"
#include "util.h"

#define HTTP_CONNECTIONS_MAX 64
#define HTTP_CONNECTIONS_PER_IP 8
#define HTTP_TIMEOUT_S 5
/* the kernel's queue of connections not accepted yet: a burst larger than
 * it drops the SYNs past it, a probe's among them, which its client sends
 * again only a second later (the door takes them as fast as they come) */
#define HTTP_BACKLOG 1024
#define HTTP_LOG_INTERVAL_MS 10000

struct http_server {
	struct MHD_Daemon *daemon;
	struct ev_loop *loop;     /* NULL when not serving */
	struct master *m;
	struct http_door *door;   /* accepts; hands on whole heads */
	unsigned open;          /* connections MHD holds */
	ev_io io;               /* on MHD's epoll descriptor */
	ev_timer timer;         /* MHD's next timeout */
	int64_t logged_ms;      /* when MHD last had a line logged */
	unsigned quiet;         /* MHD lines not logged since */
	char listen[64];
	char addr[INET_ADDRSTRLEN];  /* of metrics_listen */
	char port[8];
	struct http_req *waiting; /* suspended for a Redis reply */
};

/* MHD's messages, at most one line per HTTP_LOG_INTERVAL_MS: a client
 * that opens connections over its limit must not flood the log. */
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *h = cls;
	int64_t now = util_monotonic_ms();
	char msg[512];

	if (h->logged_ms != 0 && now - h->logged_ms < HTTP_LOG_INTERVAL_MS) {
		h->quiet++;
		return;
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	if (h->quiet > 0)
		log_warn("metrics_listen %s: %s (and %u more messages in the last "
		    "%d s)", h->listen, msg, h->quiet, HTTP_LOG_INTERVAL_MS / 1000);
	else
		log_warn("metrics_listen %s: %s", h->listen, msg);
	h->logged_ms = now;
	h->quiet = 0;
}

/* One request, from its first call to MHD's notice that it completed
 * (or to its late answer, when that comes after the notice). */
struct http_req {
	struct http_server *h;
	struct MHD_Connection *conn;
	bool answered, suspended, completed;
	bool orphan;              /* the listener closed while it waited */
	unsigned status;
	char type[64];
	char *body;
	size_t len;
	struct http_req *next;    /* h->waiting: suspended */
};

static void
req_free(struct http_req *r)
{
	free(r->body);
	free(r);
}

struct master *
http_req_master(const struct http_req *r)
{
	return r->h->m;
}

const char *
http_req_arg(const struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *
http_req_header(const struct http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static void run(struct http_server *h);

static void
unlink_waiting(struct http_server *h, struct http_req *r)
{
	for (struct http_req **p = &h->waiting; *p != NULL; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			return;
		}
}

void
http_req_answer(struct http_req *r, unsigned status, const char *type,
    char *body, size_t len)
{
	if (r->orphan) {          /* the listener closed: nobody waits */
		free(body);
		if (r->completed)
			req_free(r);
		return;
	}
	if (r->answered) {
		free(body);
		return;
	}
	r->answered = true;
	r->status = status;
	snprintf(r->type, sizeof(r->type), "%s", type);
	r->body = body;
	r->len = len;
	if (r->suspended) {
		r->suspended = false;
		unlink_waiting(r->h, r);
		MHD_resume_connection(r->conn);
		run(r->h);
	}
}

void
http_req_json(struct http_req *r, unsigned status, json_t *o)
{
	char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (text == NULL) {
		http_req_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory "
		    "writing the answer");
		return;
	}
	http_req_answer(r, status, "application/json", text, strlen(text));
}

void
http_req_error(struct http_req *r, unsigned status, const char *fmt, ...)
{
	char raw[1024], msg[512];
	va_list ap;

	/* the message may echo a request's bytes: made valid UTF-8, or
	 * json_pack fails */
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	util_utf8_copy(msg, sizeof(msg), raw, strlen(raw));
	json_t *o = json_pack("{s:s}", "error", msg);
	char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text == NULL)
		text = xstrdup("{\"error\":\"out of memory\"}");
	http_req_answer(r, status, "application/json", text, strlen(text));
}

/* The headers of every answer: no caching, no sniffing, no framing, no
 * referrer; the page's style and script are inline (http_dashboard.c). */
static const char *const common_headers[][2] = {
	{ MHD_HTTP_HEADER_CACHE_CONTROL, "no-store" },
	{ "X-Content-Type-Options", "nosniff" },
	{ "X-Frame-Options", "DENY" },
	{ "Referrer-Policy", "no-referrer" },
	{ "Content-Security-Policy", "default-src 'self'; script-src 'self' "
	    "'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' "
	    "data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
	    "frame-ancestors 'none'" },
};

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
	for (size_t i = 0; i < FERRY_ARRAY_LEN(common_headers); i++)
		MHD_add_response_header(r, common_headers[i][0],
		    common_headers[i][1]);
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
		    "GET, HEAD, POST");
	enum MHD_Result ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct http_server *h = cls;
	struct http_req *r = *con_cls;
	static char not_allowed[] = "only GET, HEAD and POST\n";
	bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
	    strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	(void)version;
	(void)upload_data;

	if (!get && !post) {
		*upload_data_size = 0;   /* a body, if any, is not read */
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
		    not_allowed, sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	}
	if (r == NULL) {              /* the headers: nothing done yet */
		r = xcalloc(1, sizeof(*r));
		r->h = h;
		r->conn = conn;
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_data_size != 0) { /* a POST's body is not read */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->orphan) {
		static char stopping[] = "{\"error\":\"ferryd is stopping\"}";
		return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "application/json", stopping, sizeof(stopping) - 1,
		    MHD_RESPMEM_PERSISTENT);
	}
	if (!r->answered && !r->suspended) {
		const struct http_listener l = { h->listen, h->addr, h->port };
		http_route(r, get, url, &l);
	}
	if (!r->answered) {           /* a Redis reply answers it */
		if (!r->suspended) {
			r->suspended = true;
			r->next = h->waiting;
			h->waiting = r;
			MHD_suspend_connection(conn);
		}
		return MHD_YES;
	}
	char *body = r->body;
	r->body = NULL;
	return answer(conn, r->status, r->type, body, r->len,
	    MHD_RESPMEM_MUST_FREE);
}

/* MHD is done with a request: it is freed, or when an answer is still to
 * come from Redis, freed by that answer. */
static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_req *r = *con_cls;
	(void)cls;
	(void)conn;
	(void)toe;

	if (r == NULL)
		return;
	*con_cls = NULL;
	r->completed = true;
	if (!r->orphan)           /* an orphan waits for its Redis reply */
		req_free(r);
}

/* MHD's notice of a connection opened or closed: the count of what it
 * holds. */
static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *h = cls;
	(void)conn;
	(void)socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		h->open++;
	else if (h->open > 0)
		h->open--;
}

/* An answer written by ferryd itself, without MHD, and the connection
 * closed: the head (len bytes, peeked by the door) read first, so that
 * the close ends it cleanly (unread bytes would reset it). A new
 * connection's send buffer takes a small answer whole; if it does not,
 * the client gets less. */
static void
answer_raw(int fd, size_t len, unsigned status, const char *type,
    const char *body, bool head_only)
{
	struct buf o = BUF_INIT;

	recv(fd, NULL, len, MSG_TRUNC | MSG_DONTWAIT);   /* TCP: discarded */
	buf_printf(&o, "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: "
	    "%zu\r\nConnection: close\r\n", status,
	    MHD_get_reason_phrase_for(status), type, strlen(body));
	for (size_t i = 0; i < FERRY_ARRAY_LEN(common_headers); i++)
		buf_printf(&o, "%s: %s\r\n", common_headers[i][0],
		    common_headers[i][1]);
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		buf_printf(&o, "%s: 1\r\n", MHD_HTTP_HEADER_RETRY_AFTER);
	buf_printf(&o, "\r\n%s", head_only ? "" : body);
	if (send(fd, o.s, o.len, MSG_NOSIGNAL | MSG_DONTWAIT) == -1)
		log_debug("metrics_listen: an answer not sent: %s",
		    strerror(errno));
	buf_free(&o);
	close(fd);
}

/* The probe a head asks for ("/healthz" or "/readyz", by GET or HEAD:
 * *head_only), or NULL. A query string is ignored, as MHD does. */
static const char *
probe_of(const char *head, size_t len, bool *head_only)
{
	static const char *const probes[] = { "/healthz", "/readyz" };
	size_t m = len > 4 && memcmp(head, "GET ", 4) == 0 ? 4 : len > 5 &&
	    memcmp(head, "HEAD ", 5) == 0 ? 5 : 0;

	*head_only = m == 5;
	for (size_t i = 0; m > 0 && i < FERRY_ARRAY_LEN(probes); i++) {
		size_t n = strlen(probes[i]);
		if (len > m + n && memcmp(head + m, probes[i], n) == 0 &&
		    (head[m + n] == ' ' || head[m + n] == '?'))
			return probes[i];
	}
	return NULL;
}

/* The door hands on a connection whose head has arrived: a probe is
 * answered now, from what the master holds (whatever MHD's connections
 * are held by); anything else goes to MHD, or gets 503 while MHD holds
 * all it may. */
static void
on_head(void *priv, int fd, const struct sockaddr *sa, socklen_t salen,
    const char *head, size_t len)
{
	struct http_server *h = priv;
	const char *probe, *type;
	unsigned status;
	bool head_only;
	char *body;

	if ((probe = probe_of(head, len, &head_only)) != NULL &&
	    http_health_answer(h->m, probe, &status, &type, &body)) {
		answer_raw(fd, len, status, type, body, head_only);
		free(body);
		return;
	}
	if (h->open >= HTTP_CONNECTIONS_MAX) {
		answer_raw(fd, len, MHD_HTTP_SERVICE_UNAVAILABLE, "application/json",
		    "{\"error\":\"busy: every connection of this listener is "
		    "held; retry in a second\"}", false);
		return;
	}
	/* MHD owns it from here (and closes one it refuses, such as one over
	 * the per-client limit) */
	MHD_add_connection(h->daemon, fd, sa, salen);
	run(h);
}

/* socket, bind and listen on addr:port; -1 with errno on failure. */
static int
listen_on(const char *addr, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int one = 1;

	inet_pton(AF_INET, addr, &sin.sin_addr);
	sin.sin_port = htons((uint16_t)port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, HTTP_BACKLOG) == -1) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

struct http_server *
http_server_open(const char *listen, char *err, size_t errsize)
{
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
	int fd = listen_on(addr, port);
	if (fd == -1) {
		snprintf(err, errsize, "cannot listen on %s for metrics: %s (check "
		    "[ferryd] metrics_listen: is the port in use?)", listen,
		    strerror(errno));
		return NULL;
	}
	struct http_server *h = xcalloc(1, sizeof(*h));
	snprintf(h->listen, sizeof(h->listen), "%s", listen);
	snprintf(h->addr, sizeof(h->addr), "%s", addr);
	snprintf(h->port, sizeof(h->port), "%d", port);
	/* EXTERNAL_LOGGER first: MHD warns (on every start) otherwise */
	h->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
	    MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
	    on_request, h,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned)HTTP_CONNECTIONS_PER_IP,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
	    MHD_OPTION_END);
	if (h->daemon == NULL) {
		snprintf(err, errsize, "cannot start the HTTP server for metrics "
		    "on %s (libmicrohttpd refused its options)", listen);
		close(fd);
		free(h);
		return NULL;
	}
	if ((h->door = http_door_new(fd, listen, on_head, h, err, errsize)) ==
	    NULL) {
		MHD_stop_daemon(h->daemon);
		close(fd);
		free(h);
		return NULL;
	}
	return h;
}

/* Let MHD work, then wake up again when its next timeout is due. */
static void
run(struct http_server *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(h->daemon);
	ev_timer_stop(h->loop, &h->timer);
	if (MHD_get_timeout(h->daemon, &ms) == MHD_YES) {
		ev_timer_set(&h->timer, (double)ms / 1000., 0.);
		ev_timer_start(h->loop, &h->timer);
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
http_server_start(struct http_server *h, struct ev_loop *loop,
    struct master *m)
{
	if (h == NULL)
		return;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon,
	    MHD_DAEMON_INFO_EPOLL_FD);
	h->loop = loop;
	h->m = m;
	ev_io_init(&h->io, io_cb, info->epoll_fd, EV_READ);
	h->io.data = h;
	ev_io_start(loop, &h->io);
	ev_init(&h->timer, timer_cb);
	h->timer.data = h;
	http_door_start(h->door, loop);
	log_info("metrics served over HTTP at http://%s/metrics", h->listen);
}

void
http_server_stopping(struct http_server *h)
{
	(void)h;
	http_redrives_stop();
}

void
http_server_release(struct http_server *h)
{
	(void)h;
	http_redrives_free();
}

void
http_server_close(struct http_server *h)
{
	if (h == NULL)
		return;
	http_door_close(h->door);
	if (h->loop != NULL) {
		ev_io_stop(h->loop, &h->io);
		ev_timer_stop(h->loop, &h->timer);
	}
	h->loop = NULL;
	/* MHD refuses to stop with suspended connections: answer them now;
	 * their Redis replies, when they come, find them orphaned */
	while (h->waiting != NULL) {
		struct http_req *r = h->waiting;
		h->waiting = r->next;
		r->suspended = false;
		r->orphan = true;
		MHD_resume_connection(r->conn);
	}
	MHD_run(h->daemon);
	MHD_stop_daemon(h->daemon);
	free(h);
}
