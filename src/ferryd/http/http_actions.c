/* http_actions.c - who may act through the dashboard or read its dead
 * entries, and the actions that are not about dead entries (http_dead.c
 * has those): pause and resume a queue (POST /api/pause?queue=,
 * /api/resume?queue=), run as the control socket's commands. An action
 * needs [ferryd] http_token (or http_token_file) configured and sent as
 * "Authorization: Bearer TOKEN", by POST only; http_server.c refuses every
 * other POST with 403. With a token configured, a read of dead entries
 * needs it too: they may hold personal data (a job's document, an error
 * quoting a row); their counts (/api/queues, /metrics) stay open. */
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config.h"
#include "control_commands.h"
#include "http.h"
#include "master_control.h"
#include "util.h"

bool
http_actions_enabled(const struct master *m)
{
	const char *token = master_control_config(m)->http_token;

	return token != NULL && *token != '\0';
}

/* Equal in time that depends only on the lengths, not on where they
 * differ. */
static bool
token_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char diff = na != nb;

	for (size_t i = 0; i < na; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)b[i % (nb ? nb : 1)];
	return diff == 0 && nb > 0;
}

bool
http_authorized(const struct http_req *r)
{
	const char *token = master_control_config(http_req_master(r))->http_token;
	const char *auth = http_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

	if (token == NULL || *token == '\0' || auth == NULL ||
	    strncmp(auth, "Bearer ", 7) != 0)
		return false;
	return token_equal(auth + 7, token);
}

bool
http_may_see_errors(const struct http_req *r)
{
	return !http_actions_enabled(http_req_master(r)) || http_authorized(r);
}

bool
http_may_read_dead(struct http_req *r)
{
	if (!http_actions_enabled(http_req_master(r)) || http_authorized(r))
		return true;
	http_req_error(r, MHD_HTTP_FORBIDDEN, "refused: dead entries may hold "
	    "personal data (a job's document, an error quoting a row); send the "
	    "token of [ferryd] http_token as \"Authorization: Bearer TOKEN\" "
	    "(their counts are in /api/queues without it)");
	return false;
}

/* pause or resume: the control socket's answer as JSON. */
static void
pause_resume(struct http_req *r, int command)
{
	const char *queue = http_req_arg(r, "queue");
	char *argv[] = { (char *)control_commands[command].name,
		(char *)(queue != NULL ? queue : ""), NULL };
	struct buf o = BUF_INIT;

	master_control_run(http_req_master(r), command, argv, &o);
	char *text = buf_take(&o);
	bool ok = strncmp(text, "error: ", 7) != 0;
	text[strcspn(text, "\n")] = '\0';
	if (ok)
		http_req_json(r, MHD_HTTP_OK, json_pack("{s:s, s:s}", "queue",
		    argv[1], "message", text));
	else
		http_req_error(r, MHD_HTTP_NOT_FOUND, "%s", text + 7);
	free(text);
}

bool
http_actions_post(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/pause") == 0)
		pause_resume(r, CONTROL_PAUSE);
	else if (strcmp(url, "/api/resume") == 0)
		pause_resume(r, CONTROL_RESUME);
	else
		return false;
	return true;
}
