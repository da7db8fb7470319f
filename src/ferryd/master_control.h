/* master_control.h - what the control socket (control.c) and the HTTP
 * endpoint (http_server.c) may ask of the master, without seeing its
 * state: run one control command, write the Prometheus metrics, and the
 * view of queues and workers that metrics.c reads. */
#ifndef FERRY_MASTER_CONTROL_H
#define FERRY_MASTER_CONTROL_H

#include "buf.h"

struct master;
struct metrics_view;

/* Run command (an enum control_command_id of control_commands.h) with
 * argv[0] its name and its arguments after it, already counted: its
 * answer (text, then "ok", or one "error: ..." line first) goes into o. */
void master_control_run(struct master *m, int command, char **argv,
    struct buf *o);
/* The Prometheus text format 0.0.4 of `metrics`, without the "ok". */
void master_control_metrics(struct master *m, struct buf *o);
/* The dashboard's reads (http_api.c): the configuration running now and
 * the last Redis figures (metrics.h). */
struct ferry_config;
struct metrics;
const struct ferry_config *master_control_config(const struct master *m);
const struct metrics *master_control_figures(const struct master *m);
/* The master's event loop: the dashboard's paced redrive
 * (http_dead_select.c) waits on a timer of it. */
struct ev_loop;
struct ev_loop *master_control_loop(const struct master *m);
/* Fill v with the master's queues and workers now (metrics_view_fn). */
void master_control_view(struct master *m, struct metrics_view *v);

#endif
