/* config.h - the ferryd.ini model: one [ferryd] section and one [queue NAME]
 * section per queue, loaded with inih, checked against a key table, all
 * errors collected at once. No I/O besides reading the file. */
#ifndef FERRY_CONFIG_H
#define FERRY_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#define CONFIG_QUEUE_NAME_MAX 48 /* letters, digits, '_', '-', '.' */
#define CONFIG_MAX_QUEUES 64
#define CONFIG_MAX_WORKERS 256   /* per queue */
#define CONFIG_LINE_MAX 199      /* inih 55 silently cuts longer lines */
#define CONFIG_IDENT_MAX 63      /* PostgreSQL's NAMEDATALEN - 1 */
#define CONFIG_MAX_SENTINELS 16
#define CONFIG_HOST_MAX 256      /* a host name or address in HOST:PORT */
#define CONFIG_CACHE_PREFIX_MAX 64 /* bytes of one cache_key_prefixes item */
#define CONFIG_CACHE_PREFIXES 16   /* items in cache_key_prefixes */

enum config_handler {
	CONFIG_HANDLER_NOOP,     /* acknowledge every job */
	CONFIG_HANDLER_EXEC,     /* run `command` per batch */
	CONFIG_HANDLER_POSTGRES, /* COPY each batch into `table` */
};

/* handler = postgres: how a batch's rows go into the table */
enum config_pg_mode {
	CONFIG_MODE_INSERT,      /* COPY every row */
	CONFIG_MODE_UPSERT,      /* insert, or update the row with the key */
	CONFIG_MODE_UPDATE,      /* update the row with the key, if any */
};

/* mode = update: a job whose key has no row */
enum config_missing {
	CONFIG_MISSING_IGNORE,   /* done: nothing to update */
	CONFIG_MISSING_DEAD,     /* dead, "update: no row with key (k)=(v)" */
};

struct queue_config {
	char name[CONFIG_QUEUE_NAME_MAX + 1];
	int line;                /* line of the [queue NAME] header */
	int workers;
	int batch_size;
	int handler;             /* enum config_handler */
	char *command;           /* handler = exec: program and arguments */
	char *handler_env;       /* handler = exec: "NAME, NAME=VALUE, ..."
	                          * (handler_env_check) */
	int max_attempts;
	int max_recoveries;
	long backoff_base_ms;
	long backoff_max_ms;
	long job_timeout_ms;     /* master kills a worker whose batch runs longer */
	long handler_timeout_ms; /* worker kills an exec handler that runs longer */
	long max_jobs_per_worker; /* 0: never recycle on job count */
	bool pipeline;           /* postgres: fetch the next batch while the
	                          * last one is written (two processing lists
	                          * per worker) */
	long max_worker_rss_mb;  /* 0: never recycle on memory */
	long rate_limit;         /* jobs per second for the whole queue, every
	                          * host: 0 = none (rate_limit.h) */
	long max_job_bytes;
	int chunk_rows;          /* ferryctl enqueue: rows per job, at most */
	long dead_max;           /* dead entries kept; 0: no bound */
	long idempotency_window_ms; /* > 0: an enqueue of an id the queue
	                          * holds is "already accepted"; a done job's
	                          * id is held this long (src/redis/lua/common.lua) */
	char *dead_archive;      /* JSON-lines file for trimmed dead entries;
	                          * "" = never trim (warn instead) */
	/* Key prefixes outside redis_prefix that a job's cache_key may name
	 * besides the queue's own cache space, comma-separated (checked);
	 * "" = only the own space (cache.c cache_key_allowed). */
	char *cache_key_prefixes;
	/* handler = postgres */
	char *table;             /* "name" or "schema.name", checked */
	char *tables;            /* several tables: "a, schema.b" (each
	                          * checked), parents first; "" = table */
	char *table_member;      /* with tables: the job member naming its
	                          * table; "" = "data" holds one array per
	                          * table (its member names) */
	char *columns;           /* copy_columns_parse spec, checked; "" =
	                          * the table's own columns */
	int mode;                /* enum config_pg_mode */
	char *key;               /* mode = upsert: "col, col" (a unique index
	                          * of the table: checked at start) */
	char *update_columns;    /* mode = upsert: "col, col"; "" = every
	                          * column written that is not in key */
	char *version;           /* mode = upsert: a column; "" = none: a row
	                          * is updated only by a greater version */
	int missing;             /* mode = update: enum config_missing */
	char *op_member;         /* mode = upsert, update: the member of a job
	                          * whose "delete" deletes by key; "" = none */
	/* Per-queue PostgreSQL overrides: "" (or NULL) = use [ferryd]'s;
	 * config_pg_conninfo merges them. */
	char *pg_host;           /* one host, or several: "a, b" (libpq) */
	char *pg_port;           /* one port, or one per host: "5432, 5433" */
	char *pg_database;
	char *pg_user;
	char *pg_password;       /* from the file, or read from: */
	char *pg_password_file;  /* its first line (config_secret.c) */
	char *pg_options;        /* replaces [ferryd] pg_options when set */
	char *pg_target_session_attrs;
};

/* One table of a queue with tables: a [table QUEUE TABLE] section, or
 * the queue's own keys for a table without one. c holds the queue's name,
 * the table, and its columns, mode, key, update_columns, version, missing
 * (each the section's, else the queue's) and op_member (the queue's); the
 * other fields are defaults, never read. */
struct config_table {
	int line;                /* of its section; 0: none */
	int set[8];              /* lines of the keys the section set */
	struct queue_config c;
};

struct ferry_config {
	char *path;              /* the file this was loaded from */

	/* [ferryd]; the first five are read at start only (not reloadable) */
	char *pidfile;
	char *user;              /* empty: keep the starting user */
	char *group;
	char *control_socket;
	char *metrics_listen;    /* "IPV4:PORT", or empty: no HTTP endpoint */
	char *http_token;        /* dashboard actions; empty: read-only */
	char *http_token_file;   /* its first line (config_secret.c) */
	char *http_allowed_hosts; /* Host names beside the listener's own */
	char *log;               /* "stderr", "syslog" or a file path */
	int log_level;           /* enum log_level (log.h) */
	char *redis_host;
	int redis_port;
	char *redis_socket;      /* non-empty: used instead of host/port */
	char *redis_user;        /* non-empty: a Redis 6+ ACL user */
	char *redis_password;    /* from the file, or read from: */
	char *redis_password_file;  /* its first line (config_secret.c) */
	int redis_db;
	/* Redis Sentinel: when set, the primary is asked of these (HOST:PORT
	 * list) instead of redis_host/redis_port (redis_addr.c) */
	char *redis_sentinels;
	char *redis_sentinel_master;    /* "sentinel monitor NAME" */
	char *redis_sentinel_password;  /* AUTH to the sentinels */
	/* Redis Cluster: seed nodes (HOST:PORT list); each queue is served
	 * by the node of its slot (cluster.c) */
	char *redis_cluster;
	/* WAIT for this many replicas after writes a failover must not lose
	 * (a fetch before its batch runs, a hand-back, an enqueue) */
	int redis_wait_replicas;
	long redis_wait_timeout_ms;
	char *redis_prefix;
	char *pg_host;           /* several hosts: libpq tries them in turn */
	char *pg_port;           /* one port, or one per host */
	char *pg_database;
	char *pg_user;
	char *pg_password;       /* "": libpq's PGPASSFILE or ~/.pgpass */
	char *pg_password_file;
	char *pg_options;        /* extra libpq conninfo, e.g. "sslmode=require" */
	/* libpq target_session_attrs; "" = read-write with several hosts */
	char *pg_target_session_attrs;
	/* refuse a server whose commits do not wait for a standby when
	 * several hosts are configured (doc/design.md, 5, "PostgreSQL
	 * failover") */
	bool require_sync_commit;
	long pg_statement_timeout_ms;
	char *pg_batches_schema; /* where ferry_batches is: never search_path */
	long done_retention_ms;  /* ferry_batches rows older than this go */
	long shutdown_timeout_ms;
	long kill_grace_ms;
	long heartbeat_ttl_ms;
	long reaper_interval_ms;
	long restart_backoff_min_ms;
	long restart_backoff_max_ms;
	long restart_backoff_reset_ms;
	/* Redis memory safety (doc/design.md, 3.8) */
	bool allow_unsafe_eviction; /* start even with allkeys-* eviction */
	bool require_persistence;   /* refuse to start without AOF or RDB */
	long memory_check_interval_ms;
	int memory_warn_percent;    /* log when used/maxmemory crosses it */
	int memory_refuse_percent;  /* ferryctl enqueue refuses at or above */
	long cache_ttl_ms;          /* ferryctl enqueue --cache: key TTL */

	int nqueues;
	struct queue_config *queues;
	int ntables;             /* of every queue with tables */
	struct config_table *tables;
};

/* Error messages, each "FILE:LINE: [section] key: what is wrong". */
struct config_errors {
	int n;
	char **msgs;
};

/* Load and check `path` into `cfg` (which is overwritten). Returns 0, or -1
 * with every problem found appended to `errs`; `cfg` is then freed. */
int config_load(const char *path, struct ferry_config *cfg,
    struct config_errors *errs);
void config_free(struct ferry_config *cfg);
void config_errors_free(struct config_errors *errs);
void config_errors_print(const struct config_errors *errs, FILE *out);

const struct queue_config *config_find_queue(const struct ferry_config *cfg,
    const char *name);
/* Table `table` of queue `queue` (one of its tables), or NULL. */
const struct queue_config *config_find_table(const struct ferry_config *cfg,
    const char *queue, const char *table);

/* True when two queues differ in anything but their worker count: running
 * workers of that queue must be replaced on reload. */
bool config_queue_changed(const struct queue_config *a,
    const struct queue_config *b);

/* Deep copy of every field of `src` into `dst`, whose strings (if any) are
 * freed first; config_queue_free frees the strings of a copy. A struct copy
 * is not enough: the strings belong to the ferry_config they came from. */
void config_queue_copy(struct queue_config *dst,
    const struct queue_config *src);
void config_queue_free(struct queue_config *q);

/* Items of a comma-separated list ("a, b" is 2, "" is 0). */
int config_pg_list_count(const char *list);

/* "IPV4:PORT" (port 1..65535) into addr and port. Returns 0, or -1 with
 * what is wrong in err. */
int config_parse_listen(const char *listen, char *addr, size_t addrsize,
    int *port, char *err, size_t errsize);

/* "HOST:PORT" (port 1..65535, no blanks in HOST) into host and port.
 * Returns 0 or -1. */
int config_parse_hostport(const char *s, char *host, size_t hostsize,
    int *port);

/* Item i (from 0) of a HOST:PORT list (redis_sentinels, redis_cluster)
 * into host and port; -1 when there is none or it is not HOST:PORT. */
int config_list_hostport(const char *list, int i, char *host,
    size_t hostsize, int *port);

/* Keys that are read only at start (pidfile, user, group, control_socket,
 * metrics_listen):
 * copy their old values into `fresh` and call `warn` for each that differed. */
void config_keep_static(const struct ferry_config *old,
    struct ferry_config *fresh, void (*warn)(const char *key,
    const char *old_value, const char *new_value));

/* The next item of a comma-separated list such as cache_key_prefixes,
 * blanks around it trimmed: true with the item in *item and *len (possibly
 * empty, for ",,"), advancing *cursor; false at the end of the list. */
bool config_list_next(const char **cursor, const char **item, size_t *len);

const char *config_handler_name(int handler);
const char *config_mode_name(int mode);

#endif
