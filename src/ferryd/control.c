/* control.c - the control socket, served from the master's libev loop and
 * never blocking it: each client sends one command line and reads the
 * answer (text, then a last line "ok", or a first line "error: ...").
 * The commands are src/format/control_commands.c's; master_control.c runs them.
 * Clients are non-blocking, bounded in size and in time. */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "control_commands.h"
#include "log.h"
#include "master_control.h"
#include "util.h"

#define CONTROL_BACKLOG 32
#define CONTROL_ARGS_MAX 4

struct client {
	struct control *ctl;
	int fd;
	ev_io io;
	ev_timer timer;
	char in[CONTROL_REQUEST_MAX];
	size_t inlen;
	struct buf out;
	size_t sent;
	struct client *next;
};

struct control {
	struct ev_loop *loop;     /* NULL until control_start */
	struct master *m;
	char *path;
	int fd;
	dev_t dev;               /* of our socket file: unlink only that one */
	ino_t ino;
	ev_io io;
	ev_timer resume;         /* accepting again after EMFILE */
	struct client *clients;
	int nclients;
};

static void
set_addr(struct sockaddr_un *sun, const char *path)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	snprintf(sun->sun_path, sizeof(sun->sun_path), "%s", path);
}

/* A socket file already there: another ferryd's (refuse), or a stale one
 * left by a killed ferryd (remove it). */
static int
clear_stale(const char *path, char *err, size_t errsize)
{
	struct sockaddr_un sun;
	struct stat st;

	if (lstat(path, &st) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errsize, "control socket %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errsize, "control socket %s exists and is not a "
		    "socket: remove it or set [ferryd] control_socket", path);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	set_addr(&sun, path);
	int rc = fd == -1 ? -1 : connect(fd, (struct sockaddr *)&sun,
	    sizeof(sun));
	int e = errno;
	if (fd != -1)
		close(fd);
	if (rc == 0 || e == EAGAIN) {
		snprintf(err, errsize, "control socket %s: another ferryd answers "
		    "on it; stop that one first, or set another control_socket",
		    path);
		return -1;
	}
	if (fd == -1 || e != ECONNREFUSED || unlink(path) == -1) {
		snprintf(err, errsize, "control socket %s: cannot check or remove "
		    "it: %s", path, strerror(fd == -1 || e != ECONNREFUSED ? e :
		    errno));
		return -1;
	}
	log_notice("removed stale control socket %s (nothing answered on it)",
	    path);
	return 0;
}

static int
bind_socket(struct control *c, char *err, size_t errsize)
{
	struct sockaddr_un sun;
	struct stat st;

	set_addr(&sun, c->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd == -1)
		goto fail;
	/* the umask makes the file 0600 as bind creates it: no chmod by
	 * path afterwards, which a swapped file would redirect */
	mode_t old = umask(0177);
	int rc = bind(c->fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (rc == -1 || listen(c->fd, CONTROL_BACKLOG) == -1 ||
	    lstat(c->path, &st) == -1)
		goto fail;
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return 0;
fail:
	snprintf(err, errsize, "cannot create control socket %s: %s (check "
	    "[ferryd] control_socket and its directory)", c->path,
	    strerror(errno));
	return -1;
}

struct control *
control_open(const char *path, char *err, size_t errsize)
{
	struct sockaddr_un sun;

	err[0] = '\0';
	if (path == NULL || *path == '\0')
		return NULL;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errsize, "control socket %s: path longer than %zu "
		    "bytes", path, sizeof(sun.sun_path) - 1);
		return NULL;
	}
	if (clear_stale(path, err, errsize) == -1)
		return NULL;
	struct control *c = xcalloc(1, sizeof(*c));
	c->path = xstrdup(path);
	if (bind_socket(c, err, errsize) == -1) {
		if (c->fd != -1)
			close(c->fd);
		free(c->path);
		free(c);
		return NULL;
	}
	return c;
}

int
control_chown(struct control *c, uid_t uid, gid_t gid, char *err,
    size_t errsize)
{
	struct stat st;

	if (c == NULL)
		return 0;
	/* chown what the descriptor names, after checking it is our socket:
	 * a name swapped for a link or another file between bind and here
	 * is refused instead of handed to the user */
	int fd = open(c->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || fstat(fd, &st) == -1 || !S_ISSOCK(st.st_mode) ||
	    st.st_dev != c->dev || st.st_ino != c->ino) {
		snprintf(err, errsize, "control socket %s: %s since ferryd made "
		    "it; not handing it to the user (check who else writes its "
		    "folder)", c->path, fd == -1 ? "gone or replaced" :
		    "replaced");
		if (fd != -1)
			close(fd);
		return -1;
	}
	int rc = fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
	int saved = errno;
	close(fd);
	if (rc == -1) {
		snprintf(err, errsize, "cannot chown control socket %s: %s",
		    c->path, strerror(saved));
		return -1;
	}
	return 0;
}

static void
client_free(struct client *cl)
{
	struct control *c = cl->ctl;

	ev_io_stop(c->loop, &cl->io);
	ev_timer_stop(c->loop, &cl->timer);
	close(cl->fd);
	for (struct client **p = &c->clients; *p != NULL; p = &(*p)->next) {
		if (*p == cl) {
			*p = cl->next;
			break;
		}
	}
	c->nclients--;
	buf_free(&cl->out);
	free(cl);
}

/* Split the line on blanks, find the command, run it into cl->out. */
static void
dispatch(struct control *c, char *line, struct buf *o)
{
	char *argv[CONTROL_ARGS_MAX + 1], *save = NULL;
	const struct control_command *cmd;
	int argc = 0;

	for (char *w = strtok_r(line, " \t\r", &save); w != NULL;
	    w = strtok_r(NULL, " \t\r", &save))
		if (argc <= CONTROL_ARGS_MAX)
			argv[argc++] = w;
	if (argc == 0) {
		buf_printf(o, "error: empty command (try help)\n");
		return;
	}
	if ((cmd = control_command_find(argv[0])) == NULL) {
		buf_printf(o, "error: unknown command %.64s\n", argv[0]);
		return;
	}
	if (argc - 1 != control_command_nargs(cmd)) {
		buf_printf(o, "error: usage: %s\n", cmd->usage);
		return;
	}
	master_control_run(c->m, (int)(cmd - control_commands), argv, o);
}

static void client_write_cb(struct ev_loop *loop, ev_io *io, int revents);

/* The request is complete (or refused): switch the client to writing. */
static void
answer(struct client *cl, const char *error)
{
	struct ev_loop *loop = cl->ctl->loop;

	if (error != NULL) {
		buf_printf(&cl->out, "error: %s\n", error);
	} else {
		cl->in[cl->inlen] = '\0';
		dispatch(cl->ctl, cl->in, &cl->out);
	}
	ev_io_stop(loop, &cl->io);
	ev_io_init(&cl->io, client_write_cb, cl->fd, EV_WRITE);
	cl->io.data = cl;
	ev_io_start(loop, &cl->io);
}

static void
client_read_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *cl = io->data;
	(void)loop;
	(void)revents;

	ssize_t n = read(cl->fd, cl->in + cl->inlen,
	    sizeof(cl->in) - 1 - cl->inlen);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n == -1 || (n == 0 && cl->inlen == 0)) {
		client_free(cl);
		return;
	}
	char *nl = memchr(cl->in + cl->inlen, '\n', (size_t)n);
	cl->inlen += (size_t)n;
	if (nl != NULL) {
		cl->inlen = (size_t)(nl - cl->in);
		answer(cl, NULL);
	} else if (n == 0) {
		answer(cl, NULL);       /* no newline before EOF: take it */
	} else if (cl->inlen == sizeof(cl->in) - 1) {
		answer(cl, "request too long");
	}
}

static void
client_write_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *cl = io->data;
	(void)loop;
	(void)revents;

	ssize_t n = send(cl->fd, cl->out.s + cl->sent, cl->out.len - cl->sent,
	    MSG_NOSIGNAL);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		cl->sent += (size_t)n;
	if (n <= 0 || cl->sent == cl->out.len)
		client_free(cl);
}

static void
client_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct client *cl = t->data;
	(void)loop;
	(void)revents;

	log_info("control: dropping a client silent for %.0f s",
	    CONTROL_TIMEOUT_S);
	client_free(cl);
}

/* Only our own user (the socket's mode says so too) or root. */
static bool
peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return false;
	return cred.uid == 0 || cred.uid == geteuid();
}

static void
client_new(struct control *c, int fd)
{
	struct client *cl = xcalloc(1, sizeof(*cl));

	cl->ctl = c;
	cl->fd = fd;
	ev_io_init(&cl->io, client_read_cb, fd, EV_READ);
	ev_timer_init(&cl->timer, client_timeout_cb, CONTROL_TIMEOUT_S, 0.);
	cl->io.data = cl->timer.data = cl;
	cl->next = c->clients;
	c->clients = cl;
	c->nclients++;
	ev_io_start(c->loop, &cl->io);
	ev_timer_start(c->loop, &cl->timer);
	if (c->nclients > CONTROL_CLIENTS_MAX)
		answer(cl, "too many clients, try again");
	else if (!peer_allowed(fd))
		answer(cl, "permission denied");
}

static void
resume_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct control *c = t->data;
	(void)revents;

	ev_io_start(loop, &c->io);
}

static void
accept_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct control *c = io->data;
	(void)revents;

	for (;;) {
		int fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd != -1) {
			client_new(c, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			/* out of descriptors: do not spin, try again in 1 s */
			log_warn("control socket: accept: %s (pausing 1 s)",
			    strerror(errno));
			ev_io_stop(loop, &c->io);
			ev_timer_set(&c->resume, 1., 0.);
			ev_timer_start(loop, &c->resume);
		}
		return;
	}
}

void
control_start(struct control *c, struct ev_loop *loop, struct master *m)
{
	if (c == NULL)
		return;
	c->loop = loop;
	c->m = m;
	ev_io_init(&c->io, accept_cb, c->fd, EV_READ);
	ev_init(&c->resume, resume_cb);
	c->io.data = c->resume.data = c;
	ev_io_start(loop, &c->io);
	log_info("control socket %s ready", c->path);
}

void
control_close(struct control *c)
{
	struct stat st;

	if (c == NULL)
		return;
	while (c->clients != NULL)
		client_free(c->clients);
	if (c->loop != NULL) {
		ev_io_stop(c->loop, &c->io);
		ev_timer_stop(c->loop, &c->resume);
	}
	close(c->fd);
	/* remove the file only if it is still ours */
	if (stat(c->path, &st) == 0 && st.st_dev == c->dev &&
	    st.st_ino == c->ino)
		unlink(c->path);
	free(c->path);
	free(c);
}
