/* test_http.c - the metrics endpoint ([ferryd] metrics_listen) under
 * connections that hold it: a client over its per-client limit leaves room
 * for the others, and the endpoint answers again as soon as connections
 * close (MHD's own listening socket stayed out of its epoll set for good
 * once 17 connections were open at the same time). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(http, .fini = teardown, .timeout = 240);

/* GET /metrics from `from` with a 2 s receive timeout: 1 when the answer
 * is a 200 with the metrics, 0 otherwise (closed, nothing, an error). */
static int
scrape_ok(const char *from, int port)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct timeval tv = { 2, 0 };
	char buf[512];
	int fd = h_http_dial(from, port, true);

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		close(fd);
		return 0;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0;
}

/* Scrape from `from` until it answers, at most `ms`: 1 if it did. */
static int
scrape_within(const char *from, int port, long long ms)
{
	long long end = h_now_ms() + ms;

	do {
		if (scrape_ok(from, port))
			return 1;
		h_sleep_ms(50);
	} while (h_now_ms() < end);
	return 0;
}

Test(http, held_connections_neither_wedge_nor_starve)
{
	enum { HOG = 40, CROWD = 10, PER_CROWD = 8 };
	int hog[HOG], crowd[CROWD * PER_CROWD];
	char extra[64], from[32];
	int port = test_free_port();

	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", port);
	h_setup(&d, extra, "[queue q]\nworkers = 1\n");
	h_expect_log(&d, "metrics_listen 127.0.0.1:");
	h_start(&d, 1);
	h_wait_log(&d, "metrics served over HTTP", 1);
	cr_assert(scrape_ok("127.0.0.1", port), "no answer at the start");

	/* one client holds 40 idle connections: another still gets in */
	for (int i = 0; i < HOG; i++)
		hog[i] = h_http_dial("127.0.0.1", port, true);
	h_sleep_ms(200);
	cr_assert(scrape_within("127.0.0.2", port, 3000),
	    "one client's 40 connections starved another client");

	/* ten more clients with 8 each: over the limit of the whole endpoint;
	 * then everyone leaves, and it answers again at once */
	for (int c = 0; c < CROWD; c++) {
		snprintf(from, sizeof(from), "127.0.0.%d", 10 + c);
		for (int i = 0; i < PER_CROWD; i++)
			crowd[c * PER_CROWD + i] = h_http_dial(from, port, true);
	}
	h_sleep_ms(300);
	for (int i = 0; i < HOG; i++)
		close(hog[i]);
	for (int i = 0; i < CROWD * PER_CROWD; i++)
		close(crowd[i]);
	long long closed = h_now_ms();
	cr_assert(scrape_within("127.0.0.1", port, 2000),
	    "the endpoint did not answer within 2 s of the connections closing");
	fprintf(stderr, "http: answered again %lld ms after 120 held "
	    "connections closed\n", h_now_ms() - closed);

	/* the master's loop was never stuck, and MHD's refusals of the
	 * over-limit connections are a few lines, not one per connection */
	struct h_run r;
	cr_assert_eq(h_ctl(&r, d.config, NULL, "status", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
	int lines = h_count_in_file(d.log, "msg=\"metrics_listen 127.0.0.1:");
	cr_assert_leq(lines, 3, "%d log lines from the HTTP endpoint", lines);
	h_stop(&d);
}
