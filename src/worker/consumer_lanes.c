/* consumer_lanes.c - a worker's cycle with two batches open (pipeline =
 * yes): while the handler writes one lane's batch (its rows sent, the
 * COMMIT's reply not read), the worker fetches and prepares the next batch
 * into its other lane (the handler's prepare: postgres encodes its rows
 * into a second buffer), then reads the first batch's result, sends the
 * next, and settles the first while the next is written. So Redis, the
 * worker and PostgreSQL work at the same time instead of in turn.
 *
 * Each lane is a processing list of its own with its own batch key beside
 * it, registered under the worker's master like any worker's list, so
 * everything that holds for one list holds for each: the master hands both
 * back when the worker dies (the scoreboard slot says it has two), a dead
 * host's reaper finds both in owners, and a batch that committed before
 * its worker died is fenced by its own key (doc/design.md, I4).
 * The handler's connection carries one batch at a time: the next is sent
 * only once the one before has its result.
 *
 * A worker that dies gives a recovery only to what it was working on: the
 * scoreboard's lanes_busy marks a lane while its batch is fetched and
 * checked, and from its send until its result is read
 * (consumer_lane_busy), not while it waits ready behind the batch in
 * flight, nor while it waits out an outage. So the neighbours of a batch
 * that kills (or hangs) its worker are handed back as they were, and the
 * isolation of recovered jobs (doc/design.md, 3.2) is what it is with one
 * lane. A batch in flight stays busy while the one before it is settled:
 * its COMMIT may be under way. */
#include "consumer.h"
#include "consumer_int.h"

/* Land the batch in flight (its result, then its settle); *flight is
 * cleared. True when the worker must stop (*ex). */
static bool
land_flight(struct consumer *c, struct consumer_lane **flight,
    enum consumer_exit *ex)
{
	struct consumer_lane *ln = *flight;

	*flight = NULL;
	return consumer_land(c, ln, consumer_finish_handler(c, ln), ex);
}

enum consumer_exit
consumer_serve_lanes(struct consumer *c)
{
	struct consumer_lane *flight = NULL;    /* sent, its result unread */
	enum consumer_exit ex = CONSUMER_EXIT_OK, ex2;
	bool stop = false;
	int next = 0;

	while (!stop && !c->should_stop() && !c->evicted &&
	    consumer_connected(c)) {
		struct consumer_lane *ln = &c->lanes[next];
		/* with a batch in flight, only a batch that is there already:
		 * nothing to overlap with, or paused, lands the one in flight */
		bool ready = consumer_next_batch(c, ln, flight == NULL);
		if (flight != NULL)
			consumer_resume_batch(c, flight);   /* its clock again */
		if (!ready) {
			if (flight != NULL && !c->evicted)
				stop = land_flight(c, &flight, &ex);
			continue;
		}
		next = 1 - next;
		if (flight != NULL) {
			/* parked behind the flight, its rows encoded ahead */
			consumer_lane_busy(c, ln, false);
			consumer_ahead_handler(c, ln);
			enum handler_status st = consumer_finish_handler(c, flight);
			if (st != HANDLER_DONE) {
				/* ln's batch stays in its list, unrun: the master
				 * hands it back when this worker has exited */
				consumer_land(c, flight, st, &ex);
				return ex;
			}
		}
		consumer_begin_batch(c, ln);
		consumer_lane_busy(c, ln, true);
		bool sent = false;
		enum handler_status st = consumer_send_handler(c, ln, &sent);
		if (flight != NULL) {
			/* settled while ln is written */
			stop = consumer_land(c, flight, HANDLER_DONE, &ex);
			flight = NULL;
		}
		if (sent) {
			flight = ln;
			consumer_resume_batch(c, ln);
		} else if (!c->evicted && consumer_land(c, ln,
		    consumer_retry_handler(c, ln, st), &ex2)) {
			if (!stop)
				ex = ex2;
			stop = true;
		}
	}
	/* stopping (or told to exit) with a batch in flight: it may have
	 * committed, so its result is read and settled, unless this worker
	 * was handed back (its jobs are another's now) */
	if (flight != NULL && !c->evicted && land_flight(c, &flight, &ex2) &&
	    !stop)
		ex = ex2;
	return ex;
}
