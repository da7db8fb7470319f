/* handler.c - which handler_ops a queue's `handler` names: one row per
 * handler (handler.h says what a new handler needs). */
#include "handler.h"

#include "util.h"

static const struct handler_ops *const handlers[] = {
	[CONFIG_HANDLER_NOOP] = &handler_noop_ops,
	[CONFIG_HANDLER_EXEC] = &handler_exec_ops,
	[CONFIG_HANDLER_POSTGRES] = &handler_pg_ops,
};

const struct handler_ops *
handler_for(int handler)
{
	if (handler < 0 || handler >= (int)FERRY_ARRAY_LEN(handlers))
		return NULL;
	return handlers[handler];
}

void
handler_nothing(void *state)
{
	(void)state;
}
