/* http_door.h - the HTTP listener's front door (http_door.c): every
 * connection accepted waits there until its request head has arrived
 * whole, within a deadline, then goes to its owner (http_server.c). */
#ifndef FERRY_HTTP_DOOR_H
#define FERRY_HTTP_DOOR_H

#include <ev.h>
#include <stddef.h>
#include <sys/socket.h>

/* How long a connection may take to send its whole request head, from
 * its accept, however its bytes trickle; and how many may wait at once
 * (a new one closes the oldest). */
#define HTTP_DOOR_DEADLINE_MS 5000
#define HTTP_DOOR_MAX 128
/* The most of a head the door looks at: a longer one goes on as it is. */
#define HTTP_DOOR_HEAD_MAX 8192

struct http_door;

/* A connection whose head has arrived: fd (non-blocking; the callee owns
 * it now), the client's address, and the head's bytes peeked (still in
 * the socket, unread: len of them, up to and with its blank line). */
typedef void http_door_fn(void *priv, int fd, const struct sockaddr *sa,
    socklen_t salen, const char *head, size_t len);

/* The door of listen_fd (listening, non-blocking; the door closes it at
 * the end), handing each whole head to fn. name: the listener, for the
 * log. NULL and a message in err on failure. */
struct http_door *http_door_new(int listen_fd, const char *name,
    http_door_fn *fn, void *priv, char *err, size_t errsize);
/* Accept in loop from now on. */
void http_door_start(struct http_door *d, struct ev_loop *loop);
/* Close every waiting connection and the listening socket. */
void http_door_close(struct http_door *d);

#endif
