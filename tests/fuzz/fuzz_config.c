/* fuzz_config.c - config_load (src/config/config.c) on any file: it accepts or
 * refuses with at least one message, every message is "FILE: what" or
 * "FILE:LINE: what" with a line of the file, a line over CONFIG_LINE_MAX
 * or with a NUL byte (inih would cut it silently) is always refused,
 * loading is deterministic, and an accepted config holds only valid
 * queues that config_find_queue finds and config_queue_copy copies
 * unchanged. */
#include "fuzz.h"

#include <unistd.h>

#include "config.h"

static char path[64];

/* The lines of the file; *too_long when one would be cut. */
static size_t
lines_of(const char *p, size_t n, bool *too_long)
{
	size_t lines = 0, start = 0;

	*too_long = false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '\n')
			continue;
		size_t len = i - start;
		if (len > 0 && p[start + len - 1] == '\r')
			len--;
		if (len > CONFIG_LINE_MAX || memchr(p + start, '\0', len))
			*too_long = true;       /* inih would cut it */
		if (i < n || len > 0)
			lines++;
		start = i + 1;
	}
	return lines;
}

static void
check_messages(const struct config_errors *e, size_t lines)
{
	size_t plen = strlen(path);

	for (int i = 0; i < e->n; i++) {
		const char *m = e->msgs[i];
		CHECK(strncmp(m, path, plen) == 0 && m[plen] == ':');
		if (m[plen + 1] == ' ')
			continue;
		char *end;
		long line = strtol(m + plen + 1, &end, 10);
		CHECK(line >= 1 && (size_t)line <= lines + 1 && end[0] == ':' &&
		    end[1] == ' ');
	}
}

static void
check_config(const struct ferry_config *cfg)
{
	CHECK(cfg->nqueues >= 1 && cfg->nqueues <= CONFIG_MAX_QUEUES);
	for (int i = 0; i < cfg->nqueues; i++) {
		const struct queue_config *q = &cfg->queues[i];
		struct queue_config copy;
		size_t n = strlen(q->name);

		CHECK(n >= 1 && n <= CONFIG_QUEUE_NAME_MAX);
		CHECK(strspn(q->name, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == n);
		CHECK(config_find_queue(cfg, q->name) == q);
		CHECK(q->workers >= 0 && q->workers <= CONFIG_MAX_WORKERS);
		CHECK(q->batch_size >= 1);
		memset(&copy, 0, sizeof(copy));
		config_queue_copy(&copy, q);
		CHECK(!config_queue_changed(q, &copy));
		config_queue_free(&copy);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ferry_config cfg, again;
	struct config_errors errs = { 0 }, errs2 = { 0 };
	bool too_long;
	size_t lines;
	FILE *f;
	int rc, rc2;

	if (path[0] == '\0') {      /* in memory where there is /dev/shm */
		snprintf(path, sizeof(path), "%s/ferry-fuzz-config.%d.ini",
		    access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
		    (int)getpid());
	}
	CHECK((f = fopen(path, "wb")) != NULL);
	CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0);
	lines = lines_of((const char *)data, size, &too_long);

	rc = config_load(path, &cfg, &errs);
	CHECK(rc == 0 || rc == -1);
	CHECK((rc == 0) == (errs.n == 0));
	check_messages(&errs, lines);
	if (too_long)
		CHECK(rc == -1);
	if (rc == 0)
		check_config(&cfg);

	rc2 = config_load(path, &again, &errs2);
	CHECK(rc2 == rc && errs2.n == errs.n);
	for (int i = 0; i < errs.n; i++)
		CHECK(strcmp(errs.msgs[i], errs2.msgs[i]) == 0);
	if (rc == 0) {
		CHECK(again.nqueues == cfg.nqueues);
		for (int i = 0; i < cfg.nqueues; i++)
			CHECK(!config_queue_changed(&cfg.queues[i],
			    &again.queues[i]));
		config_free(&cfg);
		config_free(&again);
	}
	config_errors_free(&errs);
	config_errors_free(&errs2);
	unlink(path);
	return 0;
}
