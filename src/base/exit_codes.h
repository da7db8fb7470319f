/* exit_codes.h - every exit status ferry's programs give, each defined
 * once: ferryd's (doc/ferryd.8), a worker's to its master (the contract
 * between them), and ferryctl's (tests/ctl_docs.sh reads the CTL_EX_ lines:
 * each is in ctl_usage() and doc/ferryctl.1). sysexits.h values
 * where one fits. No code: only numbers. */
#ifndef FERRY_EXIT_CODES_H
#define FERRY_EXIT_CODES_H

/* ferryd */
#define FERRY_EX_OK 0           /* stopped cleanly, or -t found the file valid */
#define FERRY_EX_START 1        /* could not start (the reason on stderr) */
#define FERRY_EX_USAGE 64       /* bad command line */
#define FERRY_EX_CONFIG 78      /* sysexits EX_CONFIG: bad configuration */

/* a worker process, read by its master */
#define FERRY_EXIT_OK 0         /* clean stop or recycle: restart at once */
#define FERRY_EXIT_FATAL 100    /* cannot work (bad credentials, unsafe
                                 * commits...): tried again after
                                 * restart_backoff_max or on a reload */

/* ferryctl */
#define CTL_EX_OK 0
#define CTL_EX_NOTFOUND 1       /* no dead entry with that id */
#define CTL_EX_REFUSED CTL_EX_NOTFOUND /* ferryd answered "error: ..." */
#define CTL_EX_UNREPLICATED 3   /* enqueued, but fewer replicas than
                                 * redis_wait_replicas acknowledged it */
#define CTL_EX_DEAD 4           /* enqueue --wait: every job settled, some
                                 * of them dead */
#define CTL_EX_PENDING 5        /* enqueue --wait: the time was up with jobs
                                 * pending, or some unknown to the queue */
#define CTL_EX_USAGE FERRY_EX_USAGE
#define CTL_EX_DATAERR 65       /* a job or archive line refused, or a
                                 * malformed dead entry to replay */
#define CTL_EX_UNAVAILABLE 69   /* Redis cannot be reached or refused */
#define CTL_EX_IOERR 74         /* stdin or stdout failed */
#define CTL_EX_TEMPFAIL 75      /* redis too full to enqueue: try later */
#define CTL_EX_PROTOCOL 76      /* the control socket is not ferryd's */
#define CTL_EX_NOPERM 77        /* the control socket refused us */
#define CTL_EX_CONFIG FERRY_EX_CONFIG /* the config file is broken */

#endif
