/* harness_http.c - the tests' HTTP/1.0 client (harness_http.h). */
#include "harness_http.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

int
h_http_exchange(int port, const char *method, const char *path,
    const char *lines, char **head, char **body)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 30, 0 };
	char req[2048];
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM, 0), status = 0;
	ssize_t n;

	if (lines == NULL)
		lines = "";
	cr_assert(fd != -1 && buf != NULL);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0,
	    "connect to the listener on port %d", port);
	/* HTTP/1.1 requires a Host */
	int rl = snprintf(req, sizeof(req), "%s %s HTTP/1.%c\r\n%sConnection: "
	    "close\r\nContent-Length: 0\r\n\r\n", method, path,
	    strstr(lines, "Host:") != NULL ? '1' : '0', lines);
	cr_assert(rl > 0 && (size_t)rl < sizeof(req));
	cr_assert_eq(write(fd, req, (size_t)rl), rl);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0)
		if ((len += (size_t)n) + 1 == cap)
			cr_assert((buf = realloc(buf, cap *= 2)) != NULL);
	close(fd);
	buf[len] = '\0';
	sscanf(buf, "HTTP/1.%*d %d", &status);
	char *end = strstr(buf, "\r\n\r\n");
	cr_assert_not_null(end, "no answer to %s %s", method, path);
	if (body != NULL)
		*body = strdup(end + 4);
	end[2] = '\0';
	if (head != NULL)
		*head = strdup(buf);
	free(buf);
	return status;
}

int
h_http_dial(const char *from, int port, bool wait)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | (wait ? 0 : SOCK_NONBLOCK), 0);

	cr_assert_neq(fd, -1, "socket: %s", strerror(errno));
	inet_pton(AF_INET, from, &src.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0,
	    "bind %s: %s", from, strerror(errno));
	int rc = connect(fd, (struct sockaddr *)&dst, sizeof(dst));
	cr_assert(rc == 0 || (!wait && errno == EINPROGRESS),
	    "connect from %s: %s", from, strerror(errno));
	return fd;
}

int
h_http(int port, const char *method, const char *path, const char *auth,
    char **body)
{
	char lines[512] = "";

	if (auth != NULL)
		snprintf(lines, sizeof(lines), "Authorization: %s\r\n", auth);
	return h_http_exchange(port, method, path, lines, NULL, body);
}

json_t *
h_http_json_with(int port, const char *path, const char *lines)
{
	char *body;
	int status = h_http_exchange(port, "GET", path, lines, NULL, &body);
	json_t *o = json_loads(body, 0, NULL);

	cr_assert_eq(status, 200, "GET %s: %d %s", path, status, body);
	cr_assert_not_null(o, "GET %s: not JSON: %s", path, body);
	free(body);
	return o;
}

json_t *
h_http_json(int port, const char *path)
{
	return h_http_json_with(port, path, NULL);
}

long long
h_api_queue(int port, const char *q, const char *key)
{
	json_t *o = h_http_json(port, "/api/queues"), *e;
	size_t i;
	long long v = -1;

	json_array_foreach(json_object_get(o, "queues"), i, e) {
		if (strcmp(h_jstr(e, "name"), q) != 0)
			continue;
		json_t *x = json_object_get(e, key);
		if (x == NULL)
			x = json_object_get(json_object_get(e, "counters"), key);
		v = json_is_true(x) ? 1 : json_is_false(x) ? 0 :
		    json_integer_value(x);
	}
	json_decref(o);
	return v;
}

void
h_wait_api_queue(int port, const char *q, const char *key, long long want)
{
	long long end = h_now_ms() + H_DEADLINE_MS, got;

	while ((got = h_api_queue(port, q, key)) != want && h_now_ms() < end)
		h_sleep_ms(100);
	cr_assert_eq(got, want, "/api/queues of port %d: %s %s is %lld, not %lld",
	    port, q, key, got, want);
}
