/* ctl_control.c - ferryctl's commands to the running ferryd (status,
 * metrics, reload, pause, resume, workers: src/format/control_commands.c): one
 * command line to its control socket, its answer to stdout. Needs no
 * Redis, only control_socket from the config: with a broken file they
 * still ask the running ferryd (which keeps its old configuration), at the
 * socket the file names. */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "control_commands.h"
#include "ctl.h"
#include "util.h"

#define CTL_CONTROL_TIMEOUT_S 10
#define CTL_ANSWER_MAX (64 << 20)
/* [ferryd] control_socket's default (src/config/config_keys.c) */
#define CTL_DEFAULT_SOCKET "/run/ferryd.sock"

/* The request line, or NULL after a usage message. */
static char *
request_line(int argc, char **argv)
{
	const struct control_command *cmd = control_command_find(argv[0]);

	if (!control_command_for_ctl(cmd))
		return NULL;
	if (!control_command_args_ok(cmd, argc, argv)) {
		fprintf(stderr, "usage: ferryctl %s\n", cmd->usage);
		return NULL;
	}
	if (argc == 1)
		return xasprintf("%s\n", argv[0]);
	if (argc == 2)
		return xasprintf("%s %s\n", argv[0], argv[1]);
	return xasprintf("%s %s %s\n", argv[0], argv[1], argv[2]);
}

/* Connected to the socket, or -1 after a message; *rc is the exit code. */
static int
dial(const char *config_path, const char *path, int *rc)
{
	struct timeval tv = { CTL_CONTROL_TIMEOUT_S, 0 };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	*rc = CTL_EX_UNAVAILABLE;
	if (*path == '\0' || strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "ferryctl: control_socket in %s is %s\n",
		    config_path, *path ? "too long" : "empty: ferryd serves "
		    "no control socket");
		return -1;
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd != -1 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		return fd;
	}
	int e = errno;
	if (fd != -1)
		close(fd);
	if (e == ENOENT || e == ECONNREFUSED) {
		fprintf(stderr, "ferryctl: ferryd is not running (nothing listens "
		    "on %s)\n", path);
	} else if (e == EACCES || e == EPERM) {
		fprintf(stderr, "ferryctl: permission denied on %s: run ferryctl "
		    "as the user ferryd runs as, or as root\n", path);
		*rc = CTL_EX_NOPERM;
	} else {
		fprintf(stderr, "ferryctl: cannot connect to %s: %s\n", path,
		    strerror(e));
	}
	return -1;
}

/* Send the line, read the answer until the server closes. NULL after a
 * message when the exchange failed. */
static char *
exchange(int fd, const char *path, const char *line, size_t *len)
{
	size_t cap = 4096;
	char *buf = xmalloc(cap);
	ssize_t n;

	*len = 0;
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line))
		goto fail;
	for (;;) {
		if (cap - *len < 2)
			buf = xrealloc(buf, cap *= 2);
		n = read(fd, buf + *len, cap - *len - 1);
		if (n == -1 && errno == EINTR)
			continue;
		/* the server may close before reading all we sent: a reset
		 * after its answer is its end */
		if (n == 0 || (n == -1 && errno == ECONNRESET && *len > 0))
			break;
		if (n == -1 || *len > CTL_ANSWER_MAX)
			goto fail;
		*len += (size_t)n;
	}
	buf[*len] = '\0';
	return buf;
fail:
	fprintf(stderr, "ferryctl: %s: %s: not a ferryd control socket, or "
	    "ferryd is stuck\n", path, errno == EAGAIN ? "no answer within "
	    "10 s" : *len > CTL_ANSWER_MAX ? "answer too long" : strerror(errno));
	free(buf);
	return NULL;
}

/* An answer is text ending with the line "ok", or "error: ..." lines. */
static int
report(const char *path, const char *command, char *ans, size_t len)
{
	if (len > 0 && strncmp(ans, "error: ", 7) == 0 &&
	    strlen(ans) == len && ans[len - 1] == '\n') {
		fprintf(stderr, "ferryctl: ferryd: %s", ans + 7);
		if (strcmp(ans, "error: permission denied\n") == 0)
			return CTL_EX_NOPERM;
		return strcmp(command, "reload") == 0 ? CTL_EX_CONFIG :
		    CTL_EX_REFUSED;
	}
	if (strlen(ans) == len && (strcmp(ans, "ok\n") == 0 ||
	    (len > 3 && strcmp(ans + len - 4, "\nok\n") == 0))) {
		fwrite(ans, 1, len - 3, stdout);
		return CTL_EX_OK;
	}
	for (size_t i = 0; i < len && i < 60; i++)
		if ((unsigned char)ans[i] < 0x20 || (unsigned char)ans[i] > 0x7e)
			ans[i] = '.';
	fprintf(stderr, "ferryctl: %s: not a ferryd control socket (%s%.*s%s)\n",
	    path, len == 0 ? "it closed without answering" : "it answered \"",
	    (int)(len < 60 ? len : 60), ans, len == 0 ? "" : "\"");
	return CTL_EX_PROTOCOL;
}

/* The exchange with the socket at `path`; *reached tells whether ferryd
 * was found there. */
static int
control_run(const char *config_path, const char *path, int argc,
    char **argv, bool *reached)
{
	char *line = request_line(argc, argv), *ans;
	int rc;
	size_t len;

	*reached = false;
	if (line == NULL)
		return CTL_EX_USAGE;
	int fd = dial(config_path, path, &rc);
	if (fd == -1) {
		free(line);
		return rc;
	}
	*reached = true;
	ans = exchange(fd, path, line, &len);
	close(fd);
	free(line);
	if (ans == NULL)
		return CTL_EX_PROTOCOL;
	rc = report(path, argv[0], ans, len);
	free(ans);
	return rc;
}

/* ferryctl status|metrics|reload|pause Q|resume Q|workers Q N */
int
ctl_control(struct ctl *c, int argc, char **argv)
{
	bool reached;

	return control_run(c->config_path, c->cfg->control_socket, argc, argv,
	    &reached);
}

bool
ctl_control_command(const char *name)
{
	return control_command_for_ctl(control_command_find(name));
}

/* inih: the last [ferryd] control_socket of the file. */
static int
socket_key(void *user, const char *section, const char *name,
    const char *value)
{
	char **path = user;

	if (strcmp(section, "ferryd") == 0 &&
	    strcmp(name, "control_socket") == 0) {
		free(*path);
		*path = xstrdup(value);
	}
	return 1;
}

int
ctl_control_broken(const char *config_path, int nerrors, int argc,
    char **argv)
{
	char *path = NULL;
	bool reached;
	int rc;

	if (strcmp(argv[0], "reload") == 0) {
		fprintf(stderr, "ferryctl: %s is broken (%d error%s above); the "
		    "running ferryd keeps its current configuration; nothing "
		    "reloaded: fix the file and check it with `ferryd -t`\n",
		    config_path, nerrors, nerrors == 1 ? "" : "s");
		return CTL_EX_CONFIG;
	}
	ini_parse(config_path, socket_key, &path);
	bool named = path != NULL;
	if (!named)
		path = xstrdup(CTL_DEFAULT_SOCKET);
	rc = control_run(config_path, path, argc, argv, &reached);
	if (reached)
		fprintf(stderr, "ferryctl: warning: %s is broken (%d error%s "
		    "above): this is the running ferryd, which keeps its old "
		    "configuration; fix the file and check it with `ferryd -t` "
		    "before a reload or restart\n", config_path, nerrors,
		    nerrors == 1 ? "" : "s");
	else if (rc != CTL_EX_USAGE) {
		fprintf(stderr, "ferryctl: config %s is broken (%d error%s "
		    "above): cannot find the daemon (no ferryd answers on %s, "
		    "%s); a running ferryd keeps its old configuration; fix "
		    "the file and check it with `ferryd -t`\n", config_path,
		    nerrors, nerrors == 1 ? "" : "s", path, named ?
		    "the control_socket the file names" :
		    "the default control_socket");
		rc = CTL_EX_CONFIG;
	}
	free(path);
	return rc;
}
