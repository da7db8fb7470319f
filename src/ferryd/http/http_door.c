/* http_door.c - the HTTP listener's front door. ferryd accepts every
 * connection itself and holds it here until its request head has arrived
 * whole (the blank line that ends it), looked at with MSG_PEEK and never
 * read, so that whoever takes it next (MHD) reads it all: at most
 * HTTP_DOOR_DEADLINE_MS after its accept however its bytes trickle (not
 * reset by a byte, as MHD's idle timeout is), and at most HTTP_DOOR_MAX
 * connections at once (a new one closes the oldest). Then the owner's
 * callback takes it (http_server.c: a probe answered at once, the rest to
 * MHD). So a client that connects and sends nothing, or a head that never
 * ends, holds none of MHD's connections (64, 8 per client address), and a
 * probe gets its answer whatever those are held by: a probe sends its
 * head at once, and only HTTP_DOOR_MAX connections opened meanwhile could
 * push it out.
 *
 * A peeked byte stays in the socket, so a level-triggered watcher would
 * fire again at once: the waiting connections are in an epoll set of the
 * door's own, edge-triggered (woken when more bytes arrive), whose
 * descriptor the master's libev loop watches. They sit in a list oldest
 * first, which is also the order of their deadlines: one timer. */
#include "http_door.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define DOOR_EVENTS 64
#define DOOR_LOG_INTERVAL_MS 10000
#define DOOR_PAUSE_S 0.5                /* accept paused: out of fds */

/* One connection waiting for its head. */
struct door_conn {
	int fd;
	struct sockaddr_storage ss;
	socklen_t sslen;
	int64_t deadline_ms;
	struct door_conn *prev, *next;  /* oldest first */
};

struct http_door {
	struct ev_loop *loop;
	int listen_fd, epfd;
	ev_io accept_io;        /* on listen_fd */
	ev_io ready_io;         /* on epfd */
	ev_timer deadline;      /* the oldest's deadline */
	ev_timer pause;         /* accepting again after EMFILE */
	struct door_conn *oldest, *newest;
	unsigned waiting;
	unsigned long pushed_out;       /* closed for newer ones, unlogged */
	int64_t logged_ms;
	http_door_fn *fn;
	void *priv;
	char name[64];
	char head[HTTP_DOOR_HEAD_MAX];
};

static void
unlink_conn(struct http_door *d, struct door_conn *c)
{
	*(c->prev != NULL ? &c->prev->next : &d->oldest) = c->next;
	*(c->next != NULL ? &c->next->prev : &d->newest) = c->prev;
	d->waiting--;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

static void
drop(struct http_door *d, struct door_conn *c)
{
	unlink_conn(d, c);
	close(c->fd);
	free(c);
}

/* The timer on the oldest's deadline, or stopped when none waits. */
static void
arm(struct http_door *d)
{
	ev_timer_stop(d->loop, &d->deadline);
	if (d->oldest == NULL)
		return;
	int64_t left = d->oldest->deadline_ms - util_monotonic_ms();
	ev_timer_set(&d->deadline, left > 0 ? (double)left / 1000. : 0., 0.);
	ev_timer_start(d->loop, &d->deadline);
}

/* Closing connections to make room says so, a line per interval at most:
 * more than HTTP_DOOR_MAX clients that send nothing is an attack. */
static void
say_pushed_out(struct http_door *d)
{
	int64_t now = util_monotonic_ms();

	if (d->pushed_out == 0 || (d->logged_ms != 0 &&
	    now - d->logged_ms < DOOR_LOG_INTERVAL_MS))
		return;
	log_warn("metrics_listen %s: %d connections waited for their request "
	    "at once: closed %lu of them, the oldest, for newer ones (a client "
	    "holds connections without sending a request?)", d->name,
	    HTTP_DOOR_MAX, d->pushed_out);
	d->pushed_out = 0;
	d->logged_ms = now;
}

/* The length of the head in b (up to and with its blank line), 0 when it
 * has not ended yet. */
static size_t
head_len(const char *b, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (b[i] == '\n' && (b[i + 1] == '\n' || (b[i + 1] == '\r' &&
		    i + 2 < n && b[i + 2] == '\n')))
			return i + (b[i + 1] == '\n' ? 2 : 3);
	return 0;
}

/* Look at what c has sent: its whole head goes to the owner; the peer
 * gone (or an error) closes it; else it waits on. */
static void
look(struct http_door *d, struct door_conn *c)
{
	ssize_t n = recv(c->fd, d->head, sizeof(d->head), MSG_PEEK);
	size_t len;

	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return;
	if (n <= 0) {
		drop(d, c);
		return;
	}
	len = head_len(d->head, (size_t)n);
	if (len == 0 && (size_t)n < sizeof(d->head))
		return;
	if (len == 0)
		len = (size_t)n;        /* longer than the door looks: as it is */
	unlink_conn(d, c);
	d->fn(d->priv, c->fd, (struct sockaddr *)&c->ss, c->sslen, d->head, len);
	free(c);
}

static void
ready_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_door *d = w->data;
	struct epoll_event ev[DOOR_EVENTS];
	int n;
	(void)loop;
	(void)revents;

	do {
		n = epoll_wait(d->epfd, ev, DOOR_EVENTS, 0);
		for (int i = 0; i < n; i++)
			look(d, ev[i].data.ptr);
	} while (n == DOOR_EVENTS);
	arm(d);
}

static void
deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_door *d = w->data;
	int64_t now = util_monotonic_ms();
	(void)loop;
	(void)revents;

	while (d->oldest != NULL && d->oldest->deadline_ms <= now)
		drop(d, d->oldest);
	arm(d);
}

/* A new connection waits; the oldest makes room when the door is full. */
static void
admit(struct http_door *d, int fd, const struct sockaddr_storage *ss,
    socklen_t sslen)
{
	struct door_conn *c = xcalloc(1, sizeof(*c));
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET,
		.data.ptr = c };

	if (d->waiting >= HTTP_DOOR_MAX) {
		drop(d, d->oldest);
		d->pushed_out++;
		say_pushed_out(d);
	}
	c->fd = fd;
	c->ss = *ss;
	c->sslen = sslen;
	c->deadline_ms = util_monotonic_ms() + HTTP_DOOR_DEADLINE_MS;
	c->prev = d->newest;
	*(d->newest != NULL ? &d->newest->next : &d->oldest) = c;
	d->newest = c;
	d->waiting++;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
		log_warn("metrics_listen %s: epoll_ctl: %s (a connection closed)",
		    d->name, strerror(errno));
		drop(d, c);
		return;
	}
	look(d, c);             /* its head may be there already */
}

static void
pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_door *d = w->data;
	(void)revents;

	ev_io_start(loop, &d->accept_io);
}

/* What waits in the listen queue, HTTP_DOOR_MAX at a time: a flood of
 * connections must leave the loop its other work (the queue stays
 * readable, and the watcher fires again next turn). */
static void
accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_door *d = w->data;
	(void)revents;

	for (int taken = 0; taken < HTTP_DOOR_MAX; taken++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(d->listen_fd, (struct sockaddr *)&ss, &len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd != -1) {
			admit(d, fd, &ss, len);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			/* the listen queue stays readable: pause, or the loop spins */
			log_warn("metrics_listen %s: accept: %s (accepting again in "
			    "%.1f s; raise the open files limit of ferryd?)", d->name,
			    strerror(errno), DOOR_PAUSE_S);
			ev_io_stop(loop, w);
			ev_timer_set(&d->pause, DOOR_PAUSE_S, 0.);
			ev_timer_start(loop, &d->pause);
		} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
			log_warn("metrics_listen %s: accept: %s", d->name,
			    strerror(errno));
		}
		break;
	}
	arm(d);
}

struct http_door *
http_door_new(int listen_fd, const char *name, http_door_fn *fn, void *priv,
    char *err, size_t errsize)
{
	int epfd = epoll_create1(EPOLL_CLOEXEC);

	if (epfd == -1) {
		snprintf(err, errsize, "cannot serve HTTP on %s: epoll_create1: %s",
		    name, strerror(errno));
		return NULL;
	}
	struct http_door *d = xcalloc(1, sizeof(*d));
	d->listen_fd = listen_fd;
	d->epfd = epfd;
	d->fn = fn;
	d->priv = priv;
	snprintf(d->name, sizeof(d->name), "%s", name);
	return d;
}

void
http_door_start(struct http_door *d, struct ev_loop *loop)
{
	d->loop = loop;
	ev_io_init(&d->accept_io, accept_cb, d->listen_fd, EV_READ);
	d->accept_io.data = d;
	ev_io_init(&d->ready_io, ready_cb, d->epfd, EV_READ);
	d->ready_io.data = d;
	ev_init(&d->deadline, deadline_cb);
	d->deadline.data = d;
	ev_init(&d->pause, pause_cb);
	d->pause.data = d;
	ev_io_start(loop, &d->ready_io);
	ev_io_start(loop, &d->accept_io);
}

void
http_door_close(struct http_door *d)
{
	if (d == NULL)
		return;
	if (d->loop != NULL) {
		ev_io_stop(d->loop, &d->accept_io);
		ev_io_stop(d->loop, &d->ready_io);
		ev_timer_stop(d->loop, &d->deadline);
		ev_timer_stop(d->loop, &d->pause);
	}
	while (d->oldest != NULL)
		drop(d, d->oldest);
	close(d->epfd);
	close(d->listen_fd);
	free(d);
}
