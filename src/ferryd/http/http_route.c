/* http_route.c - where a request to the master's HTTP listener goes
 * (http_server.c parses it and calls http_route), after the checks every
 * request passes. Against DNS rebinding (a page of another site whose name
 * resolves to this listener), every request but /metrics and the probes
 * (/healthz, /readyz: http_health.c) must name the listener in its Host
 * header: its configured address, localhost, 127.0.0.1, [::1] or a name of
 * [ferryd] http_allowed_hosts, with its port (else 421); a request without
 * a Host header (HTTP/1.0) is served: a browser always sends one. Then GET
 * and HEAD go to the page, the metrics, the probes and the API, a read of
 * dead entries only for who may (the token, when one is configured:
 * http_may_read_dead); POST goes to the actions, for the token only. */
#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "config.h"
#include "http.h"
#include "http_dead_redrive.h"
#include "master_control.h"
#include "util.h"

/* The Host header names this listener: host[:port] with one of its names
 * and its port (an absent port is 80). */
static bool
host_ok(const struct http_req *r, const struct http_listener *l,
    const char *host)
{
	static const char *const names[] = { "localhost", "127.0.0.1",
	    "[::1]" };
	const char *colon;
	size_t n;

	if (host == NULL)         /* HTTP/1.0 without one: not a browser's */
		return true;
	if (host[0] == '[') {
		const char *end = strchr(host, ']');
		if (end == NULL)
			return false;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] != ':' && end[1] != '\0')
			return false;
	} else {
		colon = strrchr(host, ':');
	}
	n = colon != NULL ? (size_t)(colon - host) : strlen(host);
	if (strcmp(colon != NULL ? colon + 1 : "80", l->port) != 0)
		return false;
	for (size_t i = 0; i < FERRY_ARRAY_LEN(names); i++)
		if (strlen(names[i]) == n && strncasecmp(host, names[i], n) == 0)
			return true;
	if (strcmp(l->addr, "0.0.0.0") != 0 && strlen(l->addr) == n &&
	    strncmp(host, l->addr, n) == 0)
		return true;
	/* [ferryd] http_allowed_hosts: names separated by blanks or commas */
	const char *v = master_control_config(
	    http_req_master(r))->http_allowed_hosts;
	while (*(v += strspn(v, " \t,")) != '\0') {
		size_t len = strcspn(v, " \t,");
		if (len == n && strncasecmp(v, host, n) == 0)
			return true;
		v += len;
	}
	return false;
}

/* Read by machines that name the listener by an address of their own (a
 * Kubernetes probe sends the pod's IP), and no page a browser could be
 * led to: served whatever the Host header says. */
static bool
host_free(const char *url)
{
	return strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0 ||
	    strcmp(url, "/readyz") == 0;
}

/* /api/dead and every path below it: dead entries, their errors, the
 * selections of them. */
static bool
dead_url(const char *url)
{
	return strncmp(url, "/api/dead", 9) == 0 && (url[9] == '\0' ||
	    url[9] == '/');
}

/* GET and HEAD: the page, the metrics, the probes, the API; a read of dead
 * entries only for who may (the token, when one is configured). */
static void
route_get(struct http_req *r, const char *url)
{
	if (dead_url(url) && !http_may_read_dead(r)) {
		return;                 /* answered: 403 */
	} else if (strcmp(url, "/") == 0) {
		http_dashboard(r);
	} else if (strcmp(url, "/metrics") == 0) {
		struct buf o = BUF_INIT;
		master_control_metrics(http_req_master(r), &o);
		http_health_metrics(&o);
		http_dead_redrive_metrics(&o);
		size_t len = o.len;
		http_req_answer(r, MHD_HTTP_OK, "text/plain; version=0.0.4; "
		    "charset=utf-8", buf_take(&o), len);
	} else if (!http_health_get(r, url) && !http_api_get(r, url) &&
	    !http_dead_get(r, url) && !http_dead_select_get(r, url) &&
	    !http_dead_redrive_get(r, url)) {
		char *text = xstrdup("not found: the dashboard is at /, the "
		    "metrics at /metrics\n");
		http_req_answer(r, MHD_HTTP_NOT_FOUND, "text/plain", text,
		    strlen(text));
	}
}

/* POST: the actions, with the token only (http_actions.c). */
static void
route_post(struct http_req *r, const char *url)
{
	if (!http_authorized(r)) {
		http_req_error(r, MHD_HTTP_FORBIDDEN, "%s",
		    !http_actions_enabled(http_req_master(r)) ? "read-only: no "
		    "[ferryd] http_token is configured, actions are off" :
		    "refused: send the token of [ferryd] http_token as "
		    "\"Authorization: Bearer TOKEN\"");
		return;
	}
	if (!http_dead_post(r, url) && !http_dead_select_post(r, url) &&
	    !http_dead_redrive_post(r, url) && !http_actions_post(r, url))
		http_req_error(r, MHD_HTTP_NOT_FOUND, "no action at %s", url);
}

void
http_route(struct http_req *r, bool get, const char *url,
    const struct http_listener *l)
{
	if (!host_free(url) && !host_ok(r, l, http_req_header(r,
	    MHD_HTTP_HEADER_HOST)))
		http_req_error(r, MHD_HTTP_MISDIRECTED_REQUEST, "Host: not this "
		    "listener (%s, localhost, 127.0.0.1 or [::1] with port %s; "
		    "a page of another site is refused)", l->listen, l->port);
	else if (get)
		route_get(r, url);
	else
		route_post(r, url);
}
