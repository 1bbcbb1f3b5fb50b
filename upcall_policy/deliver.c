// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Upcall delivery, from the poller thread that owns the EVD, in process
 * context and outside every kevd lock: upcalls may sleep.
 *
 * A batch: under evd->lock the poller snapshots the policy, the upcall
 * object and the INVOC_NEW gate, and counts the batch in
 * evd->upcalls_running; it takes up to KEVD_BATCH events (one lock
 * round-trip, and one more to give in-place slots back), calls the upcall
 * for each, then uncounts the batch with an atomic (no lock) and wakes
 * TEARDOWN/free if one sleeps. Events taken
 * are delivered even if the policy changes meanwhile: exactly once, never
 * back to the ring.
 *
 *   SINGLE_INSTANCE: the owner delivers; ownership is exclusive, so two
 *	upcalls of one EVD never overlap. The batch is claimed in the ring
 *	and the upcalls read the slots in place (kevd_ring_claim()): an event
 *	is written once, by the CQ drain or the poster, and never copied.
 *	While the ring is empty, completions skip it: the owner polls the CQ
 *	and calls the upcall for each (kevd_deliver_direct()), under one
 *	policy snapshot per pass (struct kevd_direct).
 *   MANY: the owner pops (copies) the batch, and if more events wait,
 *	hands the EVD to the next poller before delivering, so batches run
 *	concurrently.
 *   NOTIFY: one doorbell (ev == NULL) per pass in which events arrived
 *	since the last doorbell; the consumer dequeues.
 *
 * more_events is true when another event follows in the batch or the ring
 * held events when the upcall was invoked.
 */
#include "kevd_internal.h"

/* Under evd->lock: may a batch run now? Counts it if so. */
static bool kevd_deliver_begin(struct kevd *evd, int *policy,
			       struct kevd_upcall *upcall)
{
	unsigned long flags;
	bool go = false;

	spin_lock_irqsave(&evd->lock, flags);
	*policy = evd->policy;
	if (!kevd_upcalls_enabled(*policy))
		goto out;
	if (evd->gate_new) {
		if (READ_ONCE(evd->ring.prod) == evd->gate_prod)
			goto out;
		evd->gate_new = false;
	}
	if (*policy == KEVD_UPCALL_NOTIFY) {
		u32 prod = READ_ONCE(evd->ring.prod);

		if (prod == evd->notify_prod ||
		    !kevd_ring_count(&evd->ring))
			goto out;
		evd->notify_prod = prod;
	}
	*upcall = evd->upcall;
	atomic_inc(&evd->upcalls_running);
	go = true;
out:
	spin_unlock_irqrestore(&evd->lock, flags);
	return go;
}

/* No lock: TEARDOWN only needs to see the count reach zero. */
static void kevd_deliver_end(struct kevd *evd)
{
	if (atomic_dec_return(&evd->upcalls_running))
		return;
	if (waitqueue_active(&evd->wq)) /* ordered by atomic_dec_return() */
		wake_up(&evd->wq);
}

/* SINGLE_INSTANCE: a batch read in place; ownership makes it the only one. */
static u32 kevd_deliver_in_place(struct kevd *evd, struct kevd_poller *p,
				 const struct kevd_upcall *upcall, u32 max)
{
	struct kevd_claim c;
	u32 i;

	if (!kevd_ring_claim(evd, max, &c))
		return 0;
	evd->postats.upcalls += c.n;
	kevd_poller_enter_upcall(p, evd);
	for (i = 0; i < c.n; i++)
		upcall->func(upcall->ctx, &c.slots[(c.first + i) & c.mask],
			     i + 1 < c.n || kevd_ring_count(&evd->ring));
	kevd_poller_enter_upcall(p, NULL);
	kevd_ring_release(evd);
	return c.n;
}

/*
 * Under evd->lock: may completions skip the ring? SINGLE_INSTANCE, the
 * INVOC_NEW gate open, nothing queued. Opens the session if so.
 */
static bool kevd_direct_begin(struct kevd *evd, struct kevd_direct *d)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	d->open = evd->policy == KEVD_UPCALL_SINGLE_INSTANCE &&
		  !evd->gate_new && !kevd_ring_count(&evd->ring);
	if (d->open) {
		d->upcall = evd->upcall;
		d->gen = evd->upcall_gen;
		atomic_inc(&evd->upcalls_running);
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	return d->open;
}

/*
 * An open session goes on without the lock while nothing changed: no
 * kevd_modify_upcall() or free since it opened (policy, object and gate
 * as snapshot) and the ring still empty (software events go first).
 */
static bool kevd_direct_continue(struct kevd *evd, struct kevd_direct *d)
{
	return READ_ONCE(evd->upcall_gen) == d->gen &&
	       !kevd_ring_count(&evd->ring);
}

/**
 * kevd_direct_end() - close a pass's direct session, if it is open.
 * @evd: the EVD.
 * @d: the session.
 *
 * Context: the owning poller thread, before it lets go of @evd.
 */
void kevd_direct_end(struct kevd *evd, struct kevd_direct *d)
{
	if (!d->open)
		return;
	d->open = false;
	kevd_deliver_end(evd);
}

/**
 * kevd_deliver_direct() - deliver completions straight from the CQ.
 * @evd: the EVD; the caller (@p) owns it and it has a CQ.
 * @p: the poller.
 * @d: the pass's session; kevd_direct_end() closes it before the pass ends.
 * @wcs: room for @budget work completions.
 * @budget: at most this many, at most KEVD_BATCH.
 *
 * When a SINGLE_INSTANCE EVD's ring is empty, the owner polls the CQ and
 * calls the upcall for each completion, converted on the stack: no slot,
 * no ring lock, no copy. Order holds: only the owner takes completions
 * from the CQ and only it delivers, and it delivers nothing from the ring
 * until the session is done; an event posted meanwhile ends the session
 * and queues behind what it delivered, as it would behind a drain. The
 * first call of a pass opens the session under evd->lock (the policy
 * snapshot, counted in upcalls_running, so TEARDOWN and free wait for it
 * like for any batch); later calls check without the lock that nothing
 * changed (kevd_direct_continue()). A session lasts one pass: at most
 * poll_budget completions and the arm check.
 *
 * Context: the owning poller thread; calls upcalls, which may sleep.
 * Return: completions delivered (0: the CQ was empty), or -EAGAIN when
 * the EVD does not qualify; the caller then drains into the ring.
 */
int kevd_deliver_direct(struct kevd *evd, struct kevd_poller *p,
			struct kevd_direct *d, struct ib_wc *wcs, u32 budget)
{
	const struct kevd_upcall *upcall = &d->upcall;
	struct kevd_event ev;
	int n, i;

	if (d->open) {
		if (!kevd_direct_continue(evd, d))
			return -EAGAIN;
	} else if (READ_ONCE(evd->policy) != KEVD_UPCALL_SINGLE_INSTANCE ||
		   !kevd_direct_begin(evd, d)) {
		/* Other policies never qualify: no lock round trip for them. */
		return -EAGAIN;
	}
	kevd_cq_unstall(evd);	/* the ring is empty */
	n = ib_poll_cq(evd->cq, budget, wcs);
	if (n > 0) {
		evd->postats.upcalls += n;
		evd->postats.direct += n;
		if (n > evd->postats.max_direct)
			evd->postats.max_direct = n;
		kevd_poller_enter_upcall(p, evd);
		for (i = 0; i < n; i++) {
			kevd_wc_to_event(&wcs[i], &ev);
			ev.evd = evd;
			upcall->func(upcall->ctx, &ev,
				     i + 1 < n || kevd_ring_count(&evd->ring));
		}
		kevd_poller_enter_upcall(p, NULL);
	}
	return max(n, 0);
}

/**
 * kevd_deliver() - deliver one batch of upcalls, as the policy says.
 * @evd: the EVD; the caller (@p) owns it.
 * @p: the poller.
 * @evs: room for KEVD_MANY_BATCH events.
 * @budget: at most this many events.
 * @handed_off: set when ownership went to another poller (MANY); the
 *	caller must not touch @evd afterwards.
 *
 * Context: the owning poller thread; calls upcalls, which may sleep.
 * Return: events delivered (1 for a doorbell), 0 when there was nothing
 * to do under the policy.
 */
u32 kevd_deliver(struct kevd *evd, struct kevd_poller *p,
		 struct kevd_event *evs, u32 budget, bool *handed_off)
{
	struct kevd_upcall upcall;
	int policy;
	u32 n, i;

	if (!kevd_deliver_begin(evd, &policy, &upcall))
		return 0;

	if (policy == KEVD_UPCALL_NOTIFY) {
		evd->postats.upcalls++;
		kevd_poller_enter_upcall(p, evd);
		upcall.func(upcall.ctx, NULL, true);
		kevd_poller_enter_upcall(p, NULL);
		kevd_deliver_end(evd);
		return 1;
	}
	if (policy == KEVD_UPCALL_SINGLE_INSTANCE) {
		n = kevd_deliver_in_place(evd, p, &upcall,
					  min_t(u32, budget, KEVD_BATCH));
		kevd_deliver_end(evd);
		return n;
	}

	n = kevd_ring_pop(evd, evs, min_t(u32, budget, KEVD_MANY_BATCH));
	if (!n) {
		kevd_deliver_end(evd);
		return 0;
	}
	evd->postats.upcalls += n;
	if (policy == KEVD_UPCALL_MANY && kevd_ring_count(&evd->ring)) {
		/*
		 * Once handed off, nothing keeps the EVD from being freed as
		 * soon as the count drops in kevd_deliver_end(), which still
		 * looks at evd->wq afterwards: hold a reference until then.
		 */
		kevd_get(evd);
		*handed_off = kevd_poller_handoff(p, evd);
		if (!*handed_off)
			kevd_put(evd);
	}

	kevd_poller_enter_upcall(p, evd);
	for (i = 0; i < n; i++)
		upcall.func(upcall.ctx, &evs[i],
			    i + 1 < n || kevd_ring_count(&evd->ring));
	kevd_poller_enter_upcall(p, NULL);
	kevd_deliver_end(evd);
	if (*handed_off)
		kevd_put(evd);
	return n;
}
