/* proctitle.h - the title `ps` shows for this process ("ferryd: master",
 * "ferryd: worker orders/2 idle"), written over the memory of argv and
 * environ the way PostgreSQL's ps_status.c and nginx's ngx_setproctitle.c
 * do on Linux, and the short name (comm, 15 bytes) `top` and `ps -o comm`
 * show. */
#ifndef FERRY_PROCTITLE_H
#define FERRY_PROCTITLE_H

/* Move environ out of the way so that the title may use its memory: call
 * once, before any proctitle_set() and after nothing reads argv any more
 * (the strings are overwritten). -1 when the arguments were not captured
 * (no glibc): titles then only set comm. */
int proctitle_init(void);
/* "ferryd: " and the text formatted: what `ps` shows from now on. Cheap
 * (a copy into memory we own): call it on state changes, never per job. */
void proctitle_set(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* The short name (PR_SET_NAME), cut to 15 bytes. */
void proctitle_set_comm(const char *name);

#endif
