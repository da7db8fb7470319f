/* control_commands.c - see control_commands.h. */
#include "control_commands.h"

#include <stdlib.h>
#include <string.h>

const struct control_command control_commands[CONTROL_NCOMMANDS] = {
	[CONTROL_STATUS] = { "status", CONTROL_ARGS_NONE, "status",
	    "ferryd's workers and queues" },
	[CONTROL_METRICS] = { "metrics", CONTROL_ARGS_NONE, "metrics",
	    "its metrics, Prometheus text format" },
	[CONTROL_RELOAD] = { "reload", CONTROL_ARGS_NONE, "reload",
	    "re-read the configuration (as SIGHUP)" },
	[CONTROL_PAUSE] = { "pause", CONTROL_ARGS_QUEUE, "pause QUEUE",
	    "its workers stop fetching jobs" },
	[CONTROL_RESUME] = { "resume", CONTROL_ARGS_QUEUE, "resume QUEUE",
	    "they fetch again" },
	[CONTROL_WORKERS] = { "workers", CONTROL_ARGS_QUEUE_COUNT,
	    "workers QUEUE N", "run N workers for QUEUE (until reload)" },
	[CONTROL_HELP] = { "help", CONTROL_ARGS_NONE, "help", NULL },
};

int
control_command_nargs(const struct control_command *cmd)
{
	return cmd->args == CONTROL_ARGS_NONE ? 0 :
	    cmd->args == CONTROL_ARGS_QUEUE ? 1 : 2;
}

const struct control_command *
control_command_find(const char *name)
{
	for (int i = 0; i < CONTROL_NCOMMANDS; i++)
		if (strcmp(control_commands[i].name, name) == 0)
			return &control_commands[i];
	return NULL;
}

bool
control_command_for_ctl(const struct control_command *cmd)
{
	return cmd != NULL && cmd->help != NULL;
}

bool
control_command_args_ok(const struct control_command *cmd, int argc,
    char **argv)
{
	char *end;

	if (argc - 1 != control_command_nargs(cmd))
		return false;
	if (cmd->args != CONTROL_ARGS_QUEUE_COUNT)
		return true;
	return *argv[2] != '\0' && strtol(argv[2], &end, 10) >= 0 &&
	    *end == '\0';
}
