/* test_probes_held.c - /healthz and /readyz answer whatever other clients
 * hold of ferryd's HTTP listener, with a real Redis: 8 connections from
 * the probe's own address (127.0.0.1, the limit of one client) and more
 * from other addresses, over the listener's 64 in all and the connections
 * it keeps waiting for a request, held the slowloris way (nothing sent, a
 * request line cut short, or a head that never ends, a byte every 300 ms)
 * or kept alive after a request (idle in MHD's own connections), and
 * opened again as soon as the server closes one, while the test probes
 * both, one after the other, for longer than two of the server's 5 s
 * deadlines. Every probe must answer 200 within PROBE_BOUND_MS, well under
 * the 1 s Kubernetes gives a probe by default (timeoutSeconds). */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"

#define PROBE_BOUND_MS 250
#define PROBE_FOR_MS 12000
#define HELD_OWN 8              /* from 127.0.0.1, the probe's address */
#define HELD_OTHERS 24          /* other addresses, 8 connections each */
#define HELD (HELD_OWN + HELD_OTHERS * 8)

static struct ferryd d;
static int port;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(probes_held, .fini = teardown, .timeout = 240);

enum hold { HOLD_NOTHING, HOLD_SHORT_LINE, HOLD_ENDLESS_HEAD, HOLD_KEPT_ALIVE,
	HOLDS };

/* One held connection: what it sends, and how far it got. */
struct held {
	int fd;
	enum hold how;
	char from[16];
	size_t sent;
	long long next_ms;      /* its next byte */
	int reopened;
};

static char head[256];     /* what an endless head sends, a byte at a time */
static char request[128];  /* what a kept-alive connection asks, once */

static void
held_open(struct held *h)
{
	h->fd = h_http_dial(h->from, port, false);
	h->sent = 0;
	h->next_ms = 0;
}

/* Send its next bytes when due; reopen it when the server closed it. */
static void
held_keep(struct held *h, long long now)
{
	char buf[512];
	ssize_t n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != ENOTCONN)) {
		close(h->fd);
		h->reopened++;
		held_open(h);
		return;
	}
	if (h->how == HOLD_NOTHING || now < h->next_ms)
		return;
	/* the short line and the request at once; the head a byte at a time */
	const char *what = h->how == HOLD_SHORT_LINE ? "GET /heal" :
	    h->how == HOLD_KEPT_ALIVE ? request : head;
	size_t want = strlen(what);
	if (h->sent >= want)
		return;
	size_t len = h->how == HOLD_ENDLESS_HEAD ? 1 : want;
	n = send(h->fd, what + h->sent, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0)
		h->sent += (size_t)n;
	h->next_ms = now + 300;
}

/* GET path from 127.0.0.1, as a probe does: 200 within bound_ms, else 0;
 * how long it took into *ms. */
static int
probe(const char *path, long long bound_ms, long long *ms)
{
	char req[200], buf[4096];
	long long t0 = h_now_ms(), end = t0 + bound_ms;
	int fd = h_http_dial("127.0.0.1", port, false), len = 0, status = 0;
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 10.1.2.3:8080\r\n"
	    "User-Agent: kube-probe/1.29\r\nAccept: */*\r\nConnection: close\r\n"
	    "\r\n", path);
	if (poll(&p, 1, (int)bound_ms) == 1 && (p.revents & POLLOUT) &&
	    send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
		p.events = POLLIN;
		long long left;
		while ((left = end - h_now_ms()) > 0 && poll(&p, 1, (int)left) == 1) {
			ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - (size_t)len, 0);
			if (n <= 0)
				break;
			len += (int)n;
		}
	}
	close(fd);
	*ms = h_now_ms() - t0;
	buf[len] = '\0';
	if (*ms <= bound_ms && sscanf(buf, "HTTP/1.%*d %d", &status) == 1 &&
	    strstr(buf, "\r\n\r\n") != NULL)
		return status;
	return 0;
}

static int
by_value(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

Test(probes_held, probes_answer_whatever_others_hold)
{
	static struct held held[HELD];
	static long long took[1000];
	char extra[100];
	int probes = 0, failed = 0, reopened = 0;
	long long ms;

	port = test_free_port();
	snprintf(extra, sizeof(extra), "http_listen = 127.0.0.1:%d\n", port);
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
	    "X-Slow: %0200d", port, 0);
	snprintf(request, sizeof(request), "GET /api/queues HTTP/1.1\r\nHost: "
	    "127.0.0.1:%d\r\n\r\n", port);
	h_setup(&d, extra, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (probe("/readyz", 1000, &ms) != 200)
		cr_assert_lt(h_now_ms(), end, "/readyz never answered 200");

	/* the own address: request heads that never end; the others: every
	 * way */
	for (int i = 0; i < HELD; i++) {
		held[i].how = i < HELD_OWN ? HOLD_ENDLESS_HEAD : (enum hold)(i %
		    HOLDS);
		snprintf(held[i].from, sizeof(held[i].from), "127.0.0.%d",
		    i < HELD_OWN ? 1 : 10 + (i - HELD_OWN) / 8);
		held_open(&held[i]);
	}
	long long start = h_now_ms();
	while (h_now_ms() - start < PROBE_FOR_MS) {
		for (int i = 0; i < HELD; i++)
			held_keep(&held[i], h_now_ms());
		const char *path = probes % 2 == 0 ? "/healthz" : "/readyz";
		int status = probe(path, PROBE_BOUND_MS, &ms);
		if (status != 200) {
			failed++;
			fprintf(stderr, "probes_held: %s: %s after %lld ms\n", path,
			    status == 0 ? "no answer" : "not 200", ms);
		}
		took[probes++] = ms;
		h_sleep_ms(100);
	}
	for (int i = 0; i < HELD; i++) {
		reopened += held[i].reopened;
		close(held[i].fd);
	}
	qsort(took, (size_t)probes, sizeof(took[0]), by_value);
	fprintf(stderr, "probes_held: %d probes in %d s while %d connections "
	    "were held (%d reopened after the server closed them): %d failed; "
	    "answered in %lld ms (median), %lld ms (max)\n", probes,
	    PROBE_FOR_MS / 1000, HELD, reopened, failed, took[probes / 2],
	    took[probes - 1]);
	cr_assert_eq(failed, 0, "%d of %d probes did not answer 200 within "
	    "%d ms", failed, probes, PROBE_BOUND_MS);
	cr_assert_leq(took[probes - 1], PROBE_BOUND_MS);
	/* the held ones were closed by the server, not kept for good */
	cr_assert_geq(reopened, HELD, "%d reopened", reopened);
	h_stop(&d);
}
