/* proctitle.c - Linux has no setproctitle(3): /proc/PID/cmdline, which ps
 * reads, is the memory where the kernel put argv (and right after it
 * environ). So, like PostgreSQL (ps_status.c) and nginx
 * (ngx_setproctitle.c), take that whole contiguous area for the title:
 * copy the environment elsewhere first, then write the title at argv[0]
 * and pad the rest with NULs (the kernel shows up to the first NUL once
 * the end of argv is overwritten, the whole argv area otherwise: either
 * way ps shows the title alone).
 *
 * main()'s argv is captured by a constructor: glibc passes (argc, argv,
 * envp) to the functions of .init_array, which spares main.c a call.
 * Without glibc the constructor sees nothing and only comm is set. */
#include "proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "util.h"

#define PROCTITLE_PREFIX "ferryd: "

extern char **environ;

static int saved_argc;
static char **saved_argv;
static char *area;              /* argv[0] .. end of the last env string */
static size_t area_size;
static size_t shown;            /* bytes of the title last written */
/* the environment's copy, and its strings listed apart: setenv() writes
 * over an entry of environ, or replaces the whole array, without freeing
 * ours (kept reachable, which is all LeakSanitizer asks) */
static char **env_array, **env_copies;

#ifdef __GLIBC__
__attribute__((constructor)) static void
capture_arguments(int argc, char **argv, char **envp)
{
	(void)envp;
	saved_argc = argc;
	saved_argv = argv;
}
#endif

/* The end of the run of strings that starts at `end` and continues
 * through strs[] for as long as each string follows the previous one. */
static char *
contiguous_end(char *end, char **strs)
{
	for (int i = 0; strs != NULL && strs[i] != NULL; i++)
		if (strs[i] == end)
			end = strs[i] + strlen(strs[i]) + 1;
	return end;
}

int
proctitle_init(void)
{
	if (area != NULL)
		return 0;
	if (saved_argv == NULL || saved_argc < 1 || saved_argv[0] == NULL)
		return -1;
	char *start = saved_argv[0];
	char *end = contiguous_end(start + strlen(start) + 1, saved_argv + 1);
	end = contiguous_end(end, environ);

	/* the environment moves to the heap: getenv() and setenv() go on
	 * working while the title overwrites its old place */
	int n = 0;
	while (environ != NULL && environ[n] != NULL)
		n++;
	env_copies = xcalloc((size_t)n + 1, sizeof(*env_copies));
	env_array = xcalloc((size_t)n + 1, sizeof(*env_array));
	for (int i = 0; i < n; i++)
		env_array[i] = env_copies[i] = xstrdup(environ[i]);
	environ = env_array;
	/* and the arguments, for whoever still reads argv (its strings) */
	for (int i = 0; i < saved_argc; i++)
		saved_argv[i] = xstrdup(saved_argv[i]);
	area = start;
	area_size = (size_t)(end - start);
	shown = area_size;              /* the old arguments: clear them all */
	return 0;
}

void
proctitle_set(const char *fmt, ...)
{
	va_list ap;

	if (area == NULL || area_size < 2)
		return;
	size_t used = sizeof(PROCTITLE_PREFIX) - 1;
	if (used >= area_size)
		used = area_size - 1;
	memcpy(area, PROCTITLE_PREFIX, used);
	va_start(ap, fmt);
	int len = vsnprintf(area + used, area_size - used, fmt, ap);
	va_end(ap);
	if (len > 0)
		used += (size_t)len < area_size - used ? (size_t)len :
		    area_size - used - 1;
	/* only what the last title used: the rest is NULs already */
	if (shown > used)
		memset(area + used, '\0', shown - used);
	shown = used;
}

void
proctitle_set_comm(const char *name)
{
	char comm[16];

	snprintf(comm, sizeof(comm), "%s", name);
	prctl(PR_SET_NAME, comm);
}
