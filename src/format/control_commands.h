/* control_commands.h - the commands of ferryd's control socket, in one
 * table that both sides read: src/ferryd/control.c serves them (and lists them
 * for `help`), ferryctl sends them (src/ferryctl/ctl_control.c), checks their
 * arguments and lists them in --help (src/ferryctl/ctl.c). A new command is one
 * row here and its handler in master_control.c. Pure code: no I/O. */
#ifndef FERRY_CONTROL_COMMANDS_H
#define FERRY_CONTROL_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

enum control_command_id {
	CONTROL_STATUS,
	CONTROL_METRICS,
	CONTROL_RELOAD,
	CONTROL_PAUSE,
	CONTROL_RESUME,
	CONTROL_WORKERS,
	CONTROL_HELP,
	CONTROL_NCOMMANDS
};

/* What follows the name on the request line. */
enum control_args {
	CONTROL_ARGS_NONE,          /* status */
	CONTROL_ARGS_QUEUE,         /* pause QUEUE */
	CONTROL_ARGS_QUEUE_COUNT,   /* workers QUEUE N: N a number >= 0 */
};

struct control_command {
	const char *name;
	enum control_args args;
	const char *usage;          /* "pause QUEUE": both sides' messages */
	const char *help;           /* ferryctl --help's line; NULL: the
	                             * socket's own (ferryctl does not send it) */
};

/* Every command, indexed by its id, in the order help and --help list
 * them. */
extern const struct control_command control_commands[CONTROL_NCOMMANDS];

/* The words after the name: 0, 1 or 2. */
int control_command_nargs(const struct control_command *cmd);
/* The command called `name`, or NULL. */
const struct control_command *control_command_find(const char *name);
/* Does ferryctl offer it (a command it sends to the socket)? */
bool control_command_for_ctl(const struct control_command *cmd);
/* argc words (argv[0] the name) have the command's shape: the count, and
 * a count argument that is a whole number >= 0 (ferryd checks its bound). */
bool control_command_args_ok(const struct control_command *cmd, int argc,
    char **argv);

#endif
