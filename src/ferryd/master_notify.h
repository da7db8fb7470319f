/* master_notify.h - the master's side of systemd's service protocol
 * (sd_notify(3), the unit's Type=notify): READY=1 once the queues run,
 * RELOADING=1 and READY=1 around a reload, STOPPING=1 on shutdown, STATUS=
 * lines for `systemctl status`, and WATCHDOG=1 from the master's loop at
 * half of WatchdogSec=. Where NOTIFY_SOCKET is unset (not started by
 * systemd with Type=notify) it sends nothing and costs nothing. */
#ifndef FERRY_MASTER_NOTIFY_H
#define FERRY_MASTER_NOTIFY_H

struct master;

/* How often the STATUS= line is refreshed. */
#define MASTER_NOTIFY_STATUS_S 5.0

/* The queues run: READY=1, the first STATUS=, the watchdog timer. */
void master_notify_start(struct master *m);
/* Around a reload (SIGHUP, `ferryctl reload`). */
void master_notify_reloading(struct master *m);
void master_notify_reloaded(struct master *m);
/* The master begins to stop. */
void master_notify_stopping(struct master *m);
/* Its timers off (the loop is about to end). */
void master_notify_stop(struct master *m);

#endif
