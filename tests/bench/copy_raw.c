/* copy_raw.c - benchmark helper of scripts/bench pg: the physical ceiling
 * of one PostgreSQL client, to compare ferry's sink with.
 *
 *   copy_raw [-c CLIENTS] CONNINFO TABLE FILE ROWS_PER_TX [copy|insert]
 *   copy_raw [-c CLIENTS] CONNINFO TABLE FILE ROWS_PER_TX upsert SETUP_SQL TX_SQL
 *
 * FILE holds rows in COPY text format (one line a row, columns separated by
 * tabs, as COPY TABLE FROM STDIN reads them). All rows are read into memory
 * first; then the clock runs while they are sent:
 *
 *   copy    one COPY TABLE FROM STDIN statement per ROWS_PER_TX rows, each
 *           its own transaction (autocommit: no BEGIN/COMMIT round trips,
 *           the fewest a client can do)
 *   insert  one INSERT INTO TABLE VALUES ($1, $2, ...) per row (a prepared
 *           statement, parameters as text), ROWS_PER_TX rows a transaction;
 *           with 1, each INSERT commits alone (autocommit, pgbench-style)
 *   upsert  SETUP_SQL once before the clock (a temporary staging table),
 *           then per ROWS_PER_TX rows TX_SQL as one query string, e.g.
 *           "BEGIN;COPY stage (a, b) FROM STDIN;INSERT INTO TABLE ...
 *           SELECT ... FROM stage ON CONFLICT ...;COMMIT", the rows sent
 *           at its COPY: two round trips, as ferry's upsert does
 *
 * -c CLIENTS (default 1): that many processes (forked after the rows are
 * read), each with its own connection and a contiguous 1/CLIENTS share of
 * the rows, into the same table. All connect first; the clock starts when
 * the last one is connected and stops when the last one is done.
 *
 * Prints: rows seconds rows_per_second. Exit status 0 done, 1 a server
 * error, 2 usage.
 * Built by scripts/bench: gcc -O2 copy_raw.c $(pkg-config --cflags --libs libpq) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <libpq-fe.h>

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static PGconn *conn;

static void
fail(const char *what, PGresult *r)
{
	fprintf(stderr, "copy_raw: %s: %s", what,
	    r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(conn));
	PQclear(r);
	PQfinish(conn);
	exit(1);
}

/* TX_SQL with the rows [from, to) for its COPY; every result must be OK. */
static void
tx_with_copy(const char *tx_sql, const char *from, const char *to)
{
	PGresult *r;

	if (PQsendQuery(conn, tx_sql) != 1)
		fail("send", NULL);
	while ((r = PQgetResult(conn)) != NULL) {
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_COPY_IN) {
			PQclear(r);
			if (PQputCopyData(conn, from, (int)(to - from)) != 1 ||
			    PQputCopyEnd(conn, NULL) != 1)
				fail("copy data", NULL);
			continue;
		}
		if (st != PGRES_COMMAND_OK)
			fail(tx_sql, r);
		PQclear(r);
	}
}

static void
exec_ok(const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail(sql, r);
	PQclear(r);
}

int
main(int argc, char **argv)
{
	long clients = 1;
	if (argc > 2 && strcmp(argv[1], "-c") == 0) {
		clients = atol(argv[2]);
		if (clients < 1 || clients > 256) {
			fprintf(stderr, "copy_raw: -c takes 1 to 256 clients, not "
			    "\"%s\"\n", argv[2]);
			return 2;
		}
		argv += 2;
		argc -= 2;
	}
	int upsert = argc == 8 && strcmp(argv[5], "upsert") == 0;
	if (argc < 5 || (argc > 6 && !upsert) || atol(argv[4]) < 1 ||
	    (argc == 6 && strcmp(argv[5], "copy") != 0 &&
	    strcmp(argv[5], "insert") != 0)) {
		fprintf(stderr, "usage: copy_raw [-c CLIENTS] CONNINFO TABLE FILE ROWS_PER_TX "
		    "[copy|insert]\n"
		    "       copy_raw [-c CLIENTS] CONNINFO TABLE FILE ROWS_PER_TX upsert "
		    "SETUP_SQL TX_SQL\n");
		return 2;
	}
	long per_tx = atol(argv[4]);
	int insert = argc == 6 && strcmp(argv[5], "insert") == 0;

	/* the rows: one buffer, lines kept with their '\n' */
	FILE *f = fopen(argv[3], "r");
	if (f == NULL) {
		perror(argv[3]);
		return 2;
	}
	size_t cap = 1 << 20, len = 0;
	char *data = malloc(cap);
	size_t got;
	while (data != NULL && (got = fread(data + len, 1, cap - len, f)) > 0)
		if ((len += got) == cap)
			data = realloc(data, cap *= 2);
	fclose(f);
	if (data == NULL) {
		fprintf(stderr, "copy_raw: out of memory\n");
		return 2;
	}
	long nrows = 0;
	for (size_t i = 0; i < len; i++)
		nrows += data[i] == '\n';
	char **line = malloc(sizeof(*line) * (size_t)(nrows + 1));
	int ncols = 1;
	line[0] = data;
	for (size_t i = 0, k = 1; i < len; i++)
		if (data[i] == '\n')
			line[k++] = data + i + 1;
	for (char *p = data; nrows > 0 && p < line[1]; p++)
		ncols += *p == '\t';

	/* -c: fork the clients; each takes rows [lo, hi) and reports on
	 * ready that it is connected, then waits for go to close */
	long lo = 0, hi = nrows;
	int ready[2], go[2];
	pid_t *kids = NULL;
	if (clients > 1) {
		if (pipe(ready) != 0 || pipe(go) != 0) {
			perror("copy_raw: pipe");
			return 2;
		}
		kids = calloc((size_t)clients, sizeof(*kids));
		for (long k = 0; k < clients; k++) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("copy_raw: fork");
				return 2;
			}
			if (pid == 0) {
				lo = nrows * k / clients;
				hi = nrows * (k + 1) / clients;
				close(ready[0]);
				close(go[1]);
				break;
			}
			kids[k] = pid;
		}
		if (lo == 0 && hi == nrows) {
			/* the parent: wait until all are connected, start the
			 * clock, let them go, wait for them all */
			close(ready[1]);
			close(go[0]);
			char c;
			for (long k = 0; k < clients; k++)
				if (read(ready[0], &c, 1) != 1) {
					fprintf(stderr, "copy_raw: a client failed "
					    "before it was ready\n");
					return 1;
				}
			double t0 = now_s();
			close(go[1]);
			int bad = 0, status;
			for (long k = 0; k < clients; k++)
				if (waitpid(kids[k], &status, 0) != kids[k] ||
				    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
					bad = 1;
			double secs = now_s() - t0;
			if (bad) {
				fprintf(stderr, "copy_raw: a client failed\n");
				return 1;
			}
			printf("%ld %.6f %.0f\n", nrows, secs,
			    secs > 0 ? nrows / secs : 0);
			return 0;
		}
	}

	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
		fail("connect", NULL);

	char *table = PQescapeIdentifier(conn, argv[2], strlen(argv[2]));
	size_t sqlsz = strlen(table) + 64 + (size_t)ncols * 8;
	char *sql = malloc(sqlsz);
	const char **params = malloc(sizeof(*params) * (size_t)ncols);
	if (insert) {
		size_t off = (size_t)snprintf(sql, sqlsz, "INSERT INTO %s VALUES (",
		    table);
		for (int c = 1; c <= ncols; c++)
			off += (size_t)snprintf(sql + off, sqlsz - off, "%s$%d",
			    c > 1 ? ", " : "", c);
		snprintf(sql + off, sqlsz - off, ")");
		PGresult *r = PQprepare(conn, "ins", sql, ncols, NULL);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			fail("prepare", r);
		PQclear(r);
	} else {
		snprintf(sql, sqlsz, "COPY %s FROM STDIN", table);
	}
	if (upsert) {
		PGresult *r = PQexec(conn, argv[6]);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			fail(argv[6], r);
		PQclear(r);
	}

	if (clients > 1) {
		char c = 'r';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 0)
			return 1;
	}
	double t0 = now_s();
	for (long first = lo; first < hi; first += per_tx) {
		long end = first + per_tx < hi ? first + per_tx : hi;
		int tx = insert && per_tx > 1;
		if (tx)
			exec_ok("BEGIN");
		if (upsert) {
			tx_with_copy(argv[7], line[first], line[end]);
		} else if (insert) {
			for (long i = first; i < end; i++) {
				/* split the line in place: tabs and '\n' become NULs
				 * (the rows are plain text, no COPY escapes) */
				char *p = line[i];
				for (int c = 0; c < ncols; c++) {
					params[c] = p;
					p += strcspn(p, "\t\n");
					*p++ = '\0';
				}
				PGresult *r = PQexecPrepared(conn, "ins", ncols, params,
				    NULL, NULL, 0);
				if (PQresultStatus(r) != PGRES_COMMAND_OK)
					fail("insert", r);
				PQclear(r);
			}
		} else {
			PGresult *r = PQexec(conn, sql);
			if (PQresultStatus(r) != PGRES_COPY_IN)
				fail("copy", r);
			PQclear(r);
			if (PQputCopyData(conn, line[first],
			    (int)(line[end] - line[first])) != 1 ||
			    PQputCopyEnd(conn, NULL) != 1)
				fail("copy data", NULL);
			r = PQgetResult(conn);
			if (PQresultStatus(r) != PGRES_COMMAND_OK)
				fail("copy end", r);
			PQclear(r);
			while ((r = PQgetResult(conn)) != NULL)
				PQclear(r);
		}
		if (tx)
			exec_ok("COMMIT");
	}
	double secs = now_s() - t0;

	if (clients == 1)
		printf("%ld %.6f %.0f\n", nrows, secs,
		    secs > 0 ? nrows / secs : 0);
	PQfreemem(table);
	PQfinish(conn);
	free(sql);
	free(params);
	free(line);
	free(data);
	return 0;
}
