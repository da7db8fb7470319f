/* control.h - the master's control socket: a unix socket in its libev loop
 * where ferryctl asks one command per connection (src/format/control_commands.c:
 * status, metrics, reload, pause, resume, workers, help, run by
 * master_control.c) and reads the answer until the server closes. */
#ifndef FERRY_CONTROL_H
#define FERRY_CONTROL_H

#include <ev.h>
#include <stddef.h>
#include <sys/types.h>

#define CONTROL_REQUEST_MAX 512     /* one command line, newline included */
#define CONTROL_TIMEOUT_S 5.0       /* a client's whole exchange */
#define CONTROL_CLIENTS_MAX 64

struct master;
struct control;

/* Bind `path` (mode 0600). A stale socket that nothing answers on is
 * replaced; one that answers means another ferryd: NULL and a message in
 * err. An empty path disables the socket: NULL with err "". */
struct control *control_open(const char *path, char *err, size_t errsize);
/* Hand the socket file to uid/gid (the [ferryd] user, so that ferryctl run
 * as that user may connect): by descriptor, after checking the name still
 * is the socket control_open made. NULL c is a no-op. 0, or -1 and err. */
int control_chown(struct control *c, uid_t uid, gid_t gid, char *err,
    size_t errsize);
/* Serve it in loop, the commands run on m. */
void control_start(struct control *c, struct ev_loop *loop, struct master *m);
/* Close the socket and every client, and remove the socket file. */
void control_close(struct control *c);

#endif
