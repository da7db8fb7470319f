/* test_hooks.c - fault points only the tests' ferryd has. The installed
 * ferryd is built without FERRY_TEST_HOOKS: no environment variable can
 * make it misbehave. `make check` builds tests/ferryd-hooks from the same
 * objects with this file compiled with FERRY_TEST_HOOKS. */
#include "test_hooks.h"

#include <stdlib.h>

const char *
test_hook_exit_after_commit(void)
{
#ifdef FERRY_TEST_HOOKS
	return getenv("FERRY_TEST_EXIT_AFTER_COMMIT");
#else
	return NULL;
#endif
}

const char *
test_hook_freeze_after_fetch(void)
{
#ifdef FERRY_TEST_HOOKS
	return getenv("FERRY_TEST_FREEZE_AFTER_FETCH");
#else
	return NULL;
#endif
}
