// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A QP's completions out of the CQ before the QP goes (kevd_cq_flush_qp(),
 * for cm/cm.c), as ib_drain_qp() does: markers behind them.
 *
 * kevd converts a completion when it polls it and reads its QP then (the
 * event's ep_context); no provider takes a destroyed QP's completions out
 * of its CQ, ib_core frees the QP as its destroy returns, siw flushes
 * while it destroys a QP that is not in error, and rxe drops what it has
 * not flushed.
 *
 * Locking: a drain is on evd->drains under evd->lock; kevd_cq_poll()
 * (dto/cq.c) takes the markers out under it and counts its polls in
 * evd->cq_polls (release; read here with acquire). The owner converts a
 * poll's completions before it polls again: a later poll says they are
 * converted.
 */
#include <linux/slab.h>
#include "kevd_internal.h"

/* Post @d's markers on the queues of @d->qp that complete into @evd. */
static void kevd_cq_post_markers(struct kevd *evd, struct kevd_qp_drain *d)
{
	struct ib_rdma_wr swr = {
		.wr = {
			.wr_id = (u64)(uintptr_t)d,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
		},
	};
	struct ib_recv_wr rwr = { .wr_id = (u64)(uintptr_t)d };
	struct ib_qp *qp = d->qp;
	unsigned long flags;
	int markers = 0;

	/* counted first: a marker may be polled before the post returns */
	spin_lock_irqsave(&evd->lock, flags);
	d->markers = 2;
	list_add_tail(&d->node, &evd->drains);
	WRITE_ONCE(evd->ndrains, evd->ndrains + 1);
	spin_unlock_irqrestore(&evd->lock, flags);
	if (qp->send_cq == evd->cq && !ib_post_send(qp, &swr.wr, NULL))
		markers++;
	/* an SRQ's receives are not this QP's to flush */
	if (qp->recv_cq == evd->cq && !qp->srq &&
	    !ib_post_recv(qp, &rwr, NULL))
		markers++;
	spin_lock_irqsave(&evd->lock, flags);
	d->posted = markers;
	d->markers -= 2 - markers;
	/* none posted: a poll begun after this one, and converted, must do */
	if (!d->markers)
		d->seen_at = READ_ONCE(evd->cq_polls) + 1;
	spin_unlock_irqrestore(&evd->lock, flags);
}

/* Are @d's markers polled, and the completions polled with them converted? */
static bool kevd_cq_drained(struct kevd *evd, struct kevd_qp_drain *d)
{
	unsigned long flags;
	u32 polls;
	bool done;

	spin_lock_irqsave(&evd->lock, flags);
	/* a later poll says they are converted */
	polls = smp_load_acquire(&evd->cq_polls); /* pairs with kevd_cq_poll() */
	done = !d->markers && (s32)(polls - d->seen_at) >= 1;
	spin_unlock_irqrestore(&evd->lock, flags);
	return done;
}

/*
 * Poll the CQ of @evd, which the caller owns, until @d's markers are in,
 * or (none posted) until it is empty: what it polls is converted when
 * kevd_cq_drain_empty() returns. False if it cannot go on: a full ring, a
 * parked completion, no memory, or markers not flushed yet (rxe flushes
 * in its own work).
 */
static bool kevd_cq_drain_owned(struct kevd *evd, struct kevd_qp_drain *d,
				struct ib_wc *wcs)
{
	bool empty;
	u32 n;

	for (;;) {
		if (d->posted && !READ_ONCE(d->markers))
			return true;
		if (!wcs)
			return false;
		n = kevd_cq_drain_empty(evd, wcs, KEVD_BATCH, &empty);
		if (empty)
			return !READ_ONCE(d->markers);
		if (!n)
			return false;
	}
}

/**
 * kevd_cq_flush_qp() - take a QP's completions out of the CQ before it goes.
 * @evd: an EVD whose CQ @qp completes into.
 * @qp: the QP, moved to error by the caller; it destroys it next.
 *
 * kevd converts a completion when it polls it, and reads its QP then
 * (the event's ep_context is the QP's context); no provider takes a
 * destroyed QP's completions out of the CQ, and siw adds its flushes as
 * it destroys a QP that is not yet in error. So, as ib_drain_qp() does,
 * this posts a marker on each of the QP's queues that complete into
 * @evd's CQ (they complete, flushed, after everything posted before),
 * and waits until both are polled and what came with them converted:
 * by a poller, or by the caller itself when it owns the EVD (an upcall
 * of @evd) or can take it (free, or queued for a pass, even on the
 * poller whose upcall calls: kevd_poll_take()). The markers never reach
 * the consumer. From an upcall of @evd whose batch came straight from
 * the CQ, the rest of the batch goes back to the ring first: it may hold
 * completions of @qp.
 *
 * A full ring stops the polls until the consumer takes events: after
 * KEVD_FLUSH_WAIT this returns anyway, and says so.
 *
 * Context: process context; sleeps.
 */
void kevd_cq_flush_qp(struct kevd *evd, struct ib_qp *qp)
{
	unsigned long end = jiffies + KEVD_FLUSH_WAIT;
	struct kevd_qp_drain d = { .qp = qp };
	struct kevd_batch *b;
	unsigned long flags;
	struct ib_wc *wcs;
	bool done;

	might_sleep();
	wcs = kmalloc_array(KEVD_BATCH, sizeof(*wcs), GFP_KERNEL);
	kevd_cq_post_markers(evd, &d);
	if (kevd_poller_owns(evd)) {
		b = kevd_poller_current_batch(evd);
		if (b && b->wcs)
			kevd_batch_return(b, b->pos + 1);
		while (!(done = kevd_cq_drain_owned(evd, &d, wcs)) &&
		       !time_after(jiffies, end))
			schedule_timeout_uninterruptible(1);
	} else {
		while (!(done = kevd_cq_drained(evd, &d))) {
			if (kevd_poll_take(evd)) {
				/* owned: what earlier owners polled is converted */
				done = kevd_cq_drain_owned(evd, &d, wcs);
				/* arms it, as after a pull that found work */
				kevd_poll_release(evd, true);
				if (done)
					break;
			} else {
				kevd_schedule(evd);	/* or MISSED: a pass */
			}
			if (time_after(jiffies, end))
				break;
			schedule_timeout_uninterruptible(1);
		}
	}
	if (!done)
		pr_warn("kevd: EVD %u: QP %u is destroyed before its completions were taken from the CQ (a full EVD?)\n",
			evd->id, qp->qp_num);
	spin_lock_irqsave(&evd->lock, flags);
	list_del(&d.node);
	WRITE_ONCE(evd->ndrains, evd->ndrains - 1);
	spin_unlock_irqrestore(&evd->lock, flags);
	kfree(wcs);
}
EXPORT_SYMBOL_GPL(kevd_cq_flush_qp);	/* not public: cm/cm.c */
