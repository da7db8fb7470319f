/* test_hooks.h - fault points for the tests (test_hooks.c); in the
 * installed ferryd each returns "not set". */
#ifndef FERRY_TEST_HOOKS_H
#define FERRY_TEST_HOOKS_H

/* A file whose removal makes the worker exit between a batch's COMMIT and
 * its Redis ack (once: whoever unlinks it exits), or NULL. */
const char *test_hook_exit_after_commit(void);

/* A file whose removal makes the worker stop itself (SIGSTOP) right after
 * a fetch moved jobs into its list, before its batch clock starts (once:
 * whoever unlinks it freezes), or NULL. */
const char *test_hook_freeze_after_fetch(void);

#endif
