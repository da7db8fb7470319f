/* config.h - the ferryd.ini model: one [ferryd] section and one [queue NAME]
 * section per queue, loaded with inih, checked against a key table, all
 * errors collected at once. No I/O besides reading the file. */
#ifndef FERRY_CONFIG_H
#define FERRY_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

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
	                          * id is held this long (src/lua/common.lua) */
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

/* True when queue `a` under config `ca` and queue `b` under `cb` (the same
 * queue before and after a reload) use the postgres handler and talk to
 * PostgreSQL differently: the conninfo (inherited [ferryd] pg_* keys
 * included) or [ferryd] pg_statement_timeout. config_queue_changed, which
 * sees only the queues, cannot tell. */
bool config_queue_sink_changed(const struct ferry_config *ca,
    const struct queue_config *a, const struct ferry_config *cb,
    const struct queue_config *b);

/* The libpq conninfo string for queue `q` (NULL: [ferryd] alone): host,
 * port, dbname, user and password, each from `q` when set there, else from
 * [ferryd], omitted when empty; values in single quotes with ' and \
 * escaped (host and port lists without the blanks around their items).
 * Then target_session_attrs (pg_target_session_attrs, or read-write when
 * there are several hosts), pg_options (the queue's if set, else
 * [ferryd]'s) verbatim, and connect_timeout=5 and application_name=ferryd;
 * pg_options wins over the three. Malloc'd. */
char *config_pg_conninfo(const struct ferry_config *cfg,
    const struct queue_config *q);

/* How many hosts queue `q` (NULL: [ferryd] alone) names in pg_host, its
 * own or [ferryd]'s: 0 (libpq's default), 1, or more (a failover set). */
int config_pg_nhosts(const struct ferry_config *cfg,
    const struct queue_config *q);

/* Items of a comma-separated list ("a, b" is 2, "" is 0). */
int config_pg_list_count(const char *list);

/* Whether a COMMIT on a server with these settings (SHOW
 * synchronous_commit, SHOW synchronous_standby_names) waits until a
 * standby has it: NULL if it does, else why not (a constant). */
const char *config_pg_commit_risk(const char *synchronous_commit,
    const char *standby_names);

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

/* Password files (config_secret.c). config_load calls config_secret_fill:
 * each redis_password_file / pg_password_file set ([ferryd] or a queue's)
 * fills its key with the file's first line (trailing newline dropped);
 * refused, through `error` (queue index or -1, the _file key, what is
 * wrong), when the key is set inline too or the file cannot be read or is
 * empty. */
typedef void (*config_secret_error_fn)(void *ctx, int queue, const char *key,
    const char *why);
void config_secret_fill(struct ferry_config *cfg, config_secret_error_fn error,
    void *ctx);
/* The first line of file `path` into *value (malloc'd): NULL, or what is
 * wrong (malloc'd) with *value NULL. */
char *config_secret_read(const char *path, char **value);
/* A password every user may read: when cfg's file (cfg->path) sets one
 * itself (redis_password, redis_sentinel_password, pg_password, not
 * through a _file key) and its mode has 004, that key; else the first
 * redis_password_file / pg_password_file naming such a file, that key.
 * The file in *file, its mode in *mode. NULL when there is none. */
const char *config_secret_exposed(const struct ferry_config *cfg,
    const char **file, mode_t *mode);

const char *config_handler_name(int handler);
const char *config_mode_name(int mode);

#endif
