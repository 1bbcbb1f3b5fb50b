// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A QP's completions out of the CQ before the QP goes (kevd_cq_flush_qp(),
 * for cm/cm.c), as ib_drain_qp() does: markers behind them. And a
 * disconnected QP's flushes into the ring before its endpoint's
 * connection event (kevd_cq_drain_hold()): markers again, polled in the
 * poller's own time.
 *
 * kevd converts a completion when it polls it and reads its QP then (the
 * event's ep_context); no provider takes a destroyed QP's completions out
 * of its CQ, ib_core frees the QP as its destroy returns, siw flushes
 * while it destroys a QP that is not in error, and rxe drops what it has
 * not flushed.
 *
 * Locking: a drain is on evd->drains under evd->lock; kevd_cq_poll()
 * (dto/cq.c) takes the markers out under it and counts its polls in
 * evd->cq_polls (release; read here with acquire, or READ_ONCE() where
 * only a change matters). The owner converts a poll's completions
 * before it polls again: a later poll says they are converted. A hold's
 * time (evd->hold_work) runs out under evd->lock too; the work is
 * cancelled with the CQ, before the drains go.
 */
#include <linux/slab.h>
#include "kevd_internal.h"

/*
 * Post those of @d's markers that are still to post. A queue that is
 * full refuses one (-ENOMEM: rxe, siw, mlx5) until its flushes free a
 * slot (rxe flushes in its own work): the caller tries again. Another
 * error (a provider that takes no post on a QP in error, a device in
 * error) will not go: that queue takes no marker, and its flushes are
 * ordered only as far as the CQ seen empty orders them.
 */
static void kevd_cq_post_markers(struct kevd *evd, struct kevd_qp_drain *d)
{
	u64 base = (u64)(uintptr_t)d;
	struct ib_rdma_wr swr = {
		.wr = {
			.wr_id = base,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
		},
	};
	struct ib_recv_wr rwr = { .wr_id = base + 1 };
	u8 todo, done = 0, refused = 0;
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&evd->lock, flags);
	todo = d->need & ~d->posted;
	/* counted first: a marker may be polled before its post returns */
	d->posted |= todo;
	spin_unlock_irqrestore(&evd->lock, flags);
	if (todo & KEVD_DRAIN_SEND) {
		ret = ib_post_send(d->qp, &swr.wr, NULL);
		if (!ret)
			done |= KEVD_DRAIN_SEND;
		else if (ret != -ENOMEM)
			refused |= KEVD_DRAIN_SEND;
	}
	if (todo & KEVD_DRAIN_RECV) {
		ret = ib_post_recv(d->qp, &rwr, NULL);
		if (!ret)
			done |= KEVD_DRAIN_RECV;
		else if (ret != -ENOMEM)
			refused |= KEVD_DRAIN_RECV;
	}
	if (todo == done)
		return;
	spin_lock_irqsave(&evd->lock, flags);
	d->posted &= ~(todo & ~done);
	d->need &= ~refused;
	/* the markers already in may be all there is to wait for now */
	if (refused && d->need && !d->seen && kevd_cq_markers_in(evd, d))
		kevd_cq_drain_seen(evd, d);	/* its poster's: it stays */
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * The queues of @qp, in error, that take a marker: those that complete
 * into @evd's CQ and have room at all (a send-only QP has no receive
 * queue: its marker would be refused for ever). Not an SRQ's receives:
 * they are not the QP's to flush.
 */
static noinline_for_stack u8 kevd_cq_drain_need(struct kevd *evd,
						struct ib_qp *qp)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	u8 need = 0;

	if (ib_query_qp(qp, &attr, IB_QP_CAP, &init))
		return 0;	/* no markers: an empty CQ must do */
	if (qp->send_cq == evd->cq && init.cap.max_send_wr)
		need |= KEVD_DRAIN_SEND;
	if (qp->recv_cq == evd->cq && !qp->srq && init.cap.max_recv_wr)
		need |= KEVD_DRAIN_RECV;
	return need;
}

/* Is @d done, and what was polled with its last marker converted? */
static bool kevd_cq_drained(struct kevd *evd, struct kevd_qp_drain *d)
{
	unsigned long flags;
	u32 polls;
	bool done;

	spin_lock_irqsave(&evd->lock, flags);
	/* a later poll says they are converted */
	polls = smp_load_acquire(&evd->cq_polls); /* pairs with kevd_cq_poll() */
	done = d->seen && (s32)(polls - d->seen_at) >= 1;
	spin_unlock_irqrestore(&evd->lock, flags);
	return done;
}

/*
 * @evd's ring is full (a reserve found it so): grow it by a batch, as
 * kevd_push_front() does. Not by more than the CQ held, in all, when the
 * markers were posted: completions that other QPs add meanwhile wait for
 * the consumer. A consumer's kevd_resize() in progress goes first (the
 * drain may be an upcall of a batch that resize waits for: no waiting).
 */
static bool kevd_cq_drain_grow(struct kevd *evd, struct kevd_qp_drain *d)
{
	u32 qlen, want;
	bool grown;

	if (!READ_ONCE(evd->cq_stalled) || evd->poll_failed ||
	    evd->has_parked || d->grown >= (u32)READ_ONCE(evd->cq->cqe))
		return false;	/* not full, a failed CQ, a gate, or enough */
	if (!mutex_trylock(&evd->resize_mutex))
		return false;
	qlen = kevd_ring_qlen(&evd->ring);
	want = min_t(u32, qlen + KEVD_BATCH, KEVD_MAX_QLEN);
	grown = want > qlen && !kevd_ring_resize(&evd->ring, want);
	if (grown)	/* the ring rounds up: count what it became */
		d->grown += kevd_ring_qlen(&evd->ring) - qlen;
	mutex_unlock(&evd->resize_mutex);
	return grown;
}

/*
 * Poll the CQ of @evd, which the caller owns, until @d is done: what it
 * polls is converted when kevd_cq_drain_empty() returns. A full ring
 * grows. False if it cannot go on: a gate holds the CQ, a poll failed,
 * or markers are not in yet (rxe flushes in its own work).
 */
static bool kevd_cq_drain_owned(struct kevd *evd, struct kevd_qp_drain *d,
				struct ib_wc *wcs, u32 room)
{
	bool empty;
	u32 n;

	for (;;) {
		kevd_cq_post_markers(evd, d);
		if (READ_ONCE(d->seen))
			return true;
		n = kevd_cq_drain_empty(evd, wcs, room, &empty);
		if (READ_ONCE(d->seen))
			return true;
		if (empty)
			return false;
		if (!n && !kevd_cq_drain_grow(evd, d))
			return false;
	}
}

/*
 * @qp goes next: its holds (kevd_cq_drain_hold()) whose markers are not
 * in hold the connection events no more. They become orphans (so do
 * those whose time ran out): a provider that purges a destroyed QP's
 * completions never returns the markers, and @qp's completions still in
 * the CQ are converted without it.
 * While @qp exists its address names it alone: a hold of a QP made at
 * the same address later is never taken for one of @qp's. A hold still
 * being posted is skipped: its poster is the CM handler, and every QP
 * destroy is serialised against it (kevd_cm_destroy_id() takes the
 * handler mutex; the handler's own ends run after the hold is posted), so
 * none is met here; a new path that destroys a QP beside the handler
 * must keep it so (kevd_destroy_qp() refuses a bound id, whose QP must
 * not come without it).
 */
static void kevd_cq_holds_end(struct kevd *evd, struct ib_qp *qp)
{
	struct kevd_qp_drain *d;
	bool unheld = false;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	list_for_each_entry(d, &evd->drains, node) {
		if (!(d->hold || d->expired) || d->qp != qp || d->posting)
			continue;
		if (d->hold)
			unheld |= kevd_cq_unhold(evd, d);
		d->expired = false;
		d->orphan = true;
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	if (unheld)
		kevd_schedule(evd);
}

/*
 * The flusher ends @d. If it gives up, its QP is destroyed next while the
 * CQ may still hold completions of it: @d stays, an orphan, so that they
 * are converted without reading the QP (kevd_cq_take_markers()), until
 * its markers are in, or a poll begun after the QP's destroy
 * (kevd_cq_qp_gone()) finds the CQ empty. Seen is not enough: the
 * completions polled with its last marker, or before the CQ was found
 * empty, may wait in a batch that converts each as its upcall comes
 * (kevd_cq_convert()); the orphan waits for that later poll.
 */
static void kevd_cq_drain_end(struct kevd *evd, struct kevd_qp_drain *d,
			      bool done)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	if (!done) {
		d->orphan = true;
		d->seen = false;	/* ended again by kevd_cq_drains_empty() */
		d = NULL;
	} else {
		list_del(&d->node);
		WRITE_ONCE(evd->ndrains, evd->ndrains - 1);
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	kfree(d);
}

/**
 * kevd_cq_flush_qp() - take a QP's completions out of the CQ before it goes.
 * @evd: an EVD whose CQ @qp completes into.
 * @qp: the QP; the caller destroys it next.
 * @in_error: @qp was moved to the error state.
 *
 * kevd converts a completion when it polls it, and reads its QP then
 * (the event's ep_context is the QP's context); no provider takes a
 * destroyed QP's completions out of the CQ, and siw adds its flushes as
 * it destroys a QP that is not yet in error. So, as ib_drain_qp() does,
 * this posts a marker on each of the QP's queues that complete into
 * @evd's CQ (flushed, they complete after everything posted before them;
 * an SRQ's receives are not the QP's, and a QP not in error gets none;
 * cm/cm.c waits for an SRQ QP's Last WQE Reached event first),
 * and waits until they are polled, or without markers until a poll found
 * the CQ empty, and what came with them is converted. A poller polls, or
 * the caller itself when it owns the EVD (an upcall of @evd) or can take
 * it (free, or queued for a pass, even on the poller whose upcall calls:
 * kevd_poll_take()); it grows a full ring. The markers never reach the
 * consumer. From an upcall of @evd whose batch came straight from the CQ,
 * the rest of the batch goes back to the ring first: it may hold
 * completions of @qp.
 *
 * After KEVD_FLUSH_WAIT (a gate of another QP holds the CQ, a poller
 * that holds @evd is stuck in an upcall, the CQ's polls fail and no
 * IB_EVENT_CQ_ERR came) it returns anyway, and says so;
 * what of @qp the CQ still holds is converted later without reading it
 * (ep_context NULL: kevd_cq_drain_end()).
 *
 * Context: process context; sleeps.
 */
void kevd_cq_flush_qp(struct kevd *evd, struct ib_qp *qp, bool in_error)
{
	unsigned long end = jiffies + KEVD_FLUSH_WAIT;
	struct ib_wc small[2], *wcs;
	struct kevd_qp_drain *d;
	struct kevd_batch *b;
	unsigned long flags;
	bool done = false;
	u32 room;

	might_sleep();
	/*
	 * Small, and the QP goes whatever happens here: without the record
	 * its completions still in the CQ would be converted by reading it.
	 */
	d = kzalloc(sizeof(*d), GFP_KERNEL | __GFP_NOFAIL);
	d->qp = qp;
	if (in_error)
		d->need = kevd_cq_drain_need(evd, qp);
	wcs = kmalloc_array(KEVD_BATCH, sizeof(*wcs), GFP_KERNEL);
	room = wcs ? KEVD_BATCH : ARRAY_SIZE(small);
	if (!wcs)
		wcs = small;
	spin_lock_irqsave(&evd->lock, flags);
	d->since = READ_ONCE(evd->cq_polls);
	list_add_tail(&d->node, &evd->drains);
	WRITE_ONCE(evd->ndrains, evd->ndrains + 1);
	spin_unlock_irqrestore(&evd->lock, flags);

	if (kevd_poller_owns(evd)) {
		b = kevd_poller_current_batch(evd);
		if (b && b->wcs)
			kevd_batch_return(b, b->pos + 1);
		while (!(done = kevd_cq_drain_owned(evd, d, wcs, room)) &&
		       !time_after(jiffies, end))
			schedule_timeout_uninterruptible(1);
	} else {
		while (!(done = kevd_cq_drained(evd, d))) {
			kevd_cq_post_markers(evd, d);
			if (kevd_poll_take(evd)) {
				/* owned: what earlier owners polled is converted */
				done = kevd_cq_drain_owned(evd, d, wcs, room);
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
		pr_warn("kevd: EVD %u: QP %u is destroyed before its completions were all taken from the CQ\n",
			evd->id, qp->qp_num);
	kevd_cq_holds_end(evd, qp);
	kevd_cq_drain_end(evd, d, done);
	if (wcs != small)
		kfree(wcs);
}
EXPORT_SYMBOL_GPL(kevd_cq_flush_qp);	/* not public: cm/cm.c */

/*
 * Release @d, a hold whose poster is done: its markers all polled, or
 * none posted (then the CQ seen empty must do). True if that let the
 * fenced events go.
 */
static bool kevd_cq_hold_posted(struct kevd *evd, struct kevd_qp_drain *d)
{
	lockdep_assert_held(&evd->lock);
	d->posting = false;
	/* a marker the queue never took is not waited for */
	d->need = d->posted;
	if (!d->seen && !kevd_cq_markers_in(evd, d))
		return false;
	return kevd_cq_drain_seen(evd, d);
}

/**
 * kevd_cq_drain_hold() - hold the connection events behind a QP's flushes.
 * @evd: an EVD whose CQ @qp completes into; the caller posts a connection
 *	event of @qp's endpoint to it next.
 * @qp: the QP, in error (disconnected, rejected); it stays.
 *
 * A connection event other than ESTABLISHED waits until the CQ was seen
 * empty (kevd_cq_unfence()); but a QP in error adds its flushes in the
 * provider's own time (rxe in its work, siw as it closes), after that
 * may have come. So, as kevd_cq_flush_qp() does, this posts a marker on
 * each of @qp's queues that complete into @evd's CQ; until they are
 * polled, no connection event fenced on @evd is queued (evd->nholds).
 * It never waits for a poll, and for the provider only briefly: a full
 * queue takes a marker once a flush freed a slot, which rxe and siw do
 * in their own work, but most hardware only once the flush is polled.
 * After KEVD_HOLD_POST_WAIT a marker not posted is not waited for (that
 * queue's flushes have only the CQ seen empty before the event). The
 * hold ends when its markers are polled, when @qp goes
 * (kevd_cq_flush_qp() makes it an orphan), after KEVD_HOLD_WAIT
 * (kevd_cq_holds_expire(): a provider that never flushes, a CQ in error)
 * or with the CQ; the markers never reach the consumer. While it holds,
 * a solicited-only CQ is armed for every completion (kevd_cq_arm_check()):
 * flushes are not solicited.
 *
 * Context: process context; sleeps.
 */
void kevd_cq_drain_hold(struct kevd *evd, struct ib_qp *qp)
{
	unsigned long end = jiffies + KEVD_HOLD_POST_WAIT;
	struct kevd_qp_drain *d;
	unsigned long flags;
	bool unheld, all;

	might_sleep();
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return;		/* the CQ seen empty must do */
	d->qp = qp;
	d->need = kevd_cq_drain_need(evd, qp);
	if (!d->need) {
		kfree(d);
		return;
	}
	d->hold = true;
	d->posting = true;
	spin_lock_irqsave(&evd->lock, flags);
	d->since = READ_ONCE(evd->cq_polls);
	d->hold_end = jiffies + KEVD_HOLD_WAIT;
	list_add_tail(&d->node, &evd->drains);
	WRITE_ONCE(evd->ndrains, evd->ndrains + 1);
	WRITE_ONCE(evd->nholds, evd->nholds + 1);
	spin_unlock_irqrestore(&evd->lock, flags);
	/* pending already: it comes back for this one (kevd_cq_holds_expire()) */
	queue_delayed_work(system_wq, &evd->hold_work, KEVD_HOLD_WAIT);
	for (;;) {
		kevd_cq_post_markers(evd, d);
		spin_lock_irqsave(&evd->lock, flags);
		all = d->posted == d->need;
		spin_unlock_irqrestore(&evd->lock, flags);
		if (all || time_after(jiffies, end))
			break;
		schedule_timeout_uninterruptible(1);
	}
	spin_lock_irqsave(&evd->lock, flags);
	unheld = kevd_cq_hold_posted(evd, d);
	spin_unlock_irqrestore(&evd->lock, flags);
	if (unheld)
		kevd_schedule(evd);
}
EXPORT_SYMBOL_GPL(kevd_cq_drain_hold);	/* not public: cm/cm.c */

/**
 * kevd_cq_holds_expire() - end the holds whose markers are late.
 * @work: the EVD's hold_work.
 *
 * A hold whose markers are not all polled KEVD_HOLD_WAIT after it began
 * (a provider that never flushes what was posted after the error, a CQ
 * in error) ends: the connection events it held go, late rather than
 * never, and it stays, expired, only to take its markers out should they
 * come. A hold still being posted is looked at again later. The work
 * comes back while holds remain.
 *
 * Context: process context (system_wq); takes evd->lock.
 */
void kevd_cq_holds_expire(struct work_struct *work)
{
	struct kevd *evd = container_of(to_delayed_work(work), struct kevd,
					hold_work);
	unsigned long now = jiffies, next = now + KEVD_HOLD_WAIT;
	bool unheld = false, more = false;
	struct kevd_qp_drain *d;
	unsigned long flags;
	u32 ended = 0;

	spin_lock_irqsave(&evd->lock, flags);
	list_for_each_entry(d, &evd->drains, node) {
		if (!d->hold)
			continue;
		if (d->posting || time_before(now, d->hold_end)) {
			if (time_before(d->hold_end, next))
				next = d->hold_end;
			more = true;
			continue;
		}
		unheld |= kevd_cq_unhold(evd, d);
		d->expired = true;
		ended++;
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	if (ended)
		pr_warn("kevd: EVD %u: the flushes of %u disconnected QP(s) did not come in %u s: their connection events go without them\n",
			evd->id, ended, KEVD_HOLD_WAIT / HZ);
	if (unheld)
		kevd_schedule(evd);
	if (more)
		queue_delayed_work(system_wq, &evd->hold_work,
				   max_t(long, 1, (long)(next - now)));
}

/**
 * kevd_cq_qp_gone() - the QP kevd_cq_flush_qp() gave up on is destroyed.
 * @evd: the EVD that kevd_cq_flush_qp() was called on.
 * @qp: the QP, destroyed now: a key, never read.
 *
 * Its orphaned drain, if any, ends at the next poll begun from here that
 * finds the CQ empty: what the CQ still held of the QP (siw adds flushes
 * as it destroys one not in error) is out by then, and a QP made at the
 * same address afterwards completes behind it. Its markers, if they
 * come, end it too; a provider that purges a destroyed QP's completions
 * (mlx4, mlx5) never returns them. So do the QP's holds whose markers
 * were not in (kevd_cq_flush_qp() made them orphans).
 *
 * Context: any; takes evd->lock.
 */
void kevd_cq_qp_gone(struct kevd *evd, struct ib_qp *qp)
{
	struct kevd_qp_drain *d;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	list_for_each_entry(d, &evd->drains, node) {
		if (d->orphan && d->qp == qp && !d->destroyed) {
			d->destroyed = true;
			d->since = READ_ONCE(evd->cq_polls);
		}
	}
	spin_unlock_irqrestore(&evd->lock, flags);
}
EXPORT_SYMBOL_GPL(kevd_cq_qp_gone);	/* not public: cm/cm.c */
