/* handle.c - `chaos_helper handle FILE`: the exec handler of the chaos
 * run's exec queue (command = chaos_helper handle FILE). It reads ferry's
 * job lines, appends every id to FILE first (one write per batch, O_APPEND:
 * lines of concurrent handlers never mix), waits a little so that faults
 * land on batches in flight, then answers: "retry ID" for an "ef-" job on
 * its first attempt, no answer for an id it cannot echo on one line (ferry
 * retries those), "fail ID" for a document that says "fail":true, "ok ID"
 * for everything else. A forged job (forge.c: it carries an honest job's
 * id) is logged by its marker, f-K, never by the id it carries; its answer
 * goes by that id, which settles the first job of the batch with that id
 * not answered yet: the answers come in the batch's order. */
#include "chaos.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
echoable(const char *id)
{
	for (const unsigned char *s = (const unsigned char *)id; *s; s++)
		if (*s < 0x20 || *s == 0x7f)
			return 0;
	return *id != '\0';
}

int
chaos_handle_main(int argc, char **argv)
{
	if (argc != 2)
		chaos_die("usage: chaos_helper handle FILE");
	struct chaos_buf log = { 0 }, out = { 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_error_t err;
		json_t *j = json_loadb(line, (size_t)n, JSON_DECODE_ANY, &err);
		const char *id = json_string_value(json_object_get(j, "id"));
		json_int_t attempts = json_integer_value(json_object_get(j,
		    "attempts"));
		json_t *doc = json_object_get(j, "job");
		long long forged = chaos_forged_of(line, (size_t)n);
		if (id != NULL) {
			if (forged > 0)
				chaos_buf_printf(&log, "f-%lld\n", forged);
			else
				chaos_buf_printf(&log, "%s\n", echoable(id) ? id :
				    "(unechoable)");
			if (!echoable(id))
				;
			else if (json_is_true(json_object_get(doc, "fail")))
				chaos_buf_printf(&out, "fail %s asked to fail\n", id);
			else if (strncmp(id, "ef-", 3) == 0 && attempts == 0)
				chaos_buf_printf(&out, "retry %s flaky on its first attempt\n",
				    id);
			else
				chaos_buf_printf(&out, "ok %s\n", id);
		}
		json_decref(j);
	}
	free(line);
	int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || (log.len && write(fd, log.p, log.len) != (ssize_t)log.len))
		return 1;
	close(fd);
	servers_sleep_ms(10 + getpid() % 30);
	if (out.len && write(1, out.p, out.len) != (ssize_t)out.len)
		return 1;
	chaos_buf_free(&log);
	chaos_buf_free(&out);
	return 0;
}
