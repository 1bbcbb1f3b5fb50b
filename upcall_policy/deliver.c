// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Upcall delivery, from the poller thread that owns the EVD, in process
 * context and outside every kevd lock: upcalls may sleep.
 *
 * A batch: under evd->lock the poller snapshots the policy, the upcall
 * object and the INVOC_NEW gate, and counts the batch in
 * evd->upcalls_running; it copies up to KEVD_BATCH events (SINGLE_INSTANCE)
 * or KEVD_MANY_BATCH (MANY) out of the ring into the poller's scratch
 * (one lock round-trip: their slots are the producers' again at once,
 * however long the upcalls take), calls the upcall for each, then
 * uncounts the batch with an atomic (no lock) and wakes TEARDOWN/free if
 * one sleeps. Events taken are delivered exactly once:
 * by this batch, or, after a policy change, by whoever takes them from
 * the head of the EVD where the batch gave them back (below).
 *
 *   SINGLE_INSTANCE: the owner delivers; ownership is exclusive, so two
 *	upcalls of one EVD never overlap. While the ring is empty,
 *	completions skip it: the owner polls the CQ
 *	and calls the upcall for each (kevd_deliver_direct()), under one
 *	policy snapshot per pass (struct kevd_direct).
 *   MANY: the owner pops (copies) the batch, and if more events wait,
 *	hands the EVD to the next poller before delivering, so batches run
 *	concurrently.
 *   NOTIFY: one doorbell (ev == NULL) per pass in which events arrived
 *	since the last doorbell; the consumer dequeues.
 *
 * The invocation rule (Documentation/kevd/api.rst): every invocation that
 * starts after kevd_modify_upcall() returned follows the new policy and
 * upcall object. Before each invocation the batch compares the policy
 * generation it snapshot with evd->upcall_gen (one load, no lock); on a
 * change it stops, and the events it took but did not deliver go back
 * to the head of the EVD, in order (kevd_batch_return()). A change made
 * from inside an upcall of the batch returns them before
 * kevd_modify_upcall() returns, so the consumer's next dequeue sees them.
 * A SINGLE_INSTANCE batch does not begin while an older batch (MANY) is
 * still running; the last one to end schedules the EVD again.
 *
 * more_events is true when another event follows in the batch or the ring
 * held events when the upcall was invoked.
 */
#include <linux/slab.h>
#include "kevd_internal.h"
#include "kevd_trace.h"

/*
 * A NOTIFY doorbell's mark: notify_prod and notify_stall_rung as the
 * doorbell set them (@prod) and as they were before (@prev, @prev_stall),
 * and the notify_owed it cleared (@prev_owed).
 */
struct kevd_bell {
	u32 prod;
	u32 prev;
	bool prev_stall;
	bool prev_owed;
};

/*
 * May a batch run now? Counts it if so; a NOTIFY doorbell marks what it
 * rings for in @bell. Takes evd->lock.
 */
static bool kevd_deliver_begin(struct kevd *evd, int *policy,
			       struct kevd_upcall *upcall, u32 *gen,
			       struct kevd_bell *bell)
{
	unsigned long flags;
	bool go = false, stalled;

	spin_lock_irqsave(&evd->lock, flags);
	*policy = evd->policy;
	if (!kevd_upcalls_enabled(*policy))
		goto out;
	/* nothing begins beside batches a policy change stopped */
	if (evd->held) {
		if (kevd_batches_running(evd))
			goto out;
		WRITE_ONCE(evd->held, false);
	}
	/* no SINGLE_INSTANCE upcall beside an older MANY batch */
	if (*policy == KEVD_UPCALL_SINGLE_INSTANCE &&
	    atomic_read(&evd->upcalls_running))
		goto out;
	/*
	 * Completions a full ring holds back in the CQ enter it only after
	 * this batch frees slots: they count as arrivals (else a full ring
	 * with INVOC_NEW or a rung NOTIFY would wait for itself). So do
	 * those a direct batch gave back at the head (notify_owed, which
	 * the gate cleared when it closed).
	 */
	stalled = READ_ONCE(evd->cq_stalled);
	if (evd->gate_new) {
		if (READ_ONCE(evd->ring.prod) == evd->gate_prod && !stalled &&
		    !evd->notify_owed)
			goto out;
		evd->gate_new = false;
	}
	if (*policy == KEVD_UPCALL_NOTIFY) {
		u32 prod = READ_ONCE(evd->ring.prod);

		if (!kevd_ring_count(&evd->ring))
			goto out;
		if (prod == evd->notify_prod && !evd->notify_owed &&
		    (!stalled || evd->notify_stall_rung))
			goto out;
		bell->prev = evd->notify_prod;
		bell->prev_stall = evd->notify_stall_rung;
		bell->prev_owed = evd->notify_owed;
		bell->prod = prod;
		/* one doorbell per stall; the next one needs an arrival */
		evd->notify_stall_rung = prod == evd->notify_prod &&
					 !evd->notify_owed;
		evd->notify_prod = prod;
		evd->notify_owed = false;
	}
	*upcall = evd->upcall;
	*gen = evd->upcall_gen;
	atomic_add(kevd_upcall_weight(*policy), &evd->upcalls_running);
	go = true;
out:
	spin_unlock_irqrestore(&evd->lock, flags);
	return go;
}

/*
 * A doorbell that a kevd_modify_upcall() stopped before its call did not
 * ring: the arrivals it marked still need one, from the new policy and
 * object. Unless a later doorbell or a new gate (kevd_set_gate()) moved
 * the mark since, put it back. The change scheduled the EVD (its ring is
 * not empty), so a pass follows this one. Takes evd->lock.
 */
static void kevd_notify_unring(struct kevd *evd, const struct kevd_bell *bell)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	if (evd->notify_prod == bell->prod) {
		evd->notify_prod = bell->prev;
		evd->notify_stall_rung = bell->prev_stall;
		evd->notify_owed |= bell->prev_owed;
	}
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * No lock: TEARDOWN and free only need to see the count reach zero, a
 * held wait its batches' part (a doorbell holds no event). The last MANY
 * or held batch to end schedules the EVD if events wait: a batch may have
 * held back for it.
 */
static void kevd_deliver_end(struct kevd *evd, int policy)
{
	int left = atomic_sub_return(kevd_upcall_weight(policy),
				     &evd->upcalls_running);

	if (left && ((left & KEVD_BATCHES_MASK) ||
		     policy == KEVD_UPCALL_NOTIFY))
		return;
	if (waitqueue_active(&evd->wq)) /* ordered by atomic_sub_return() */
		wake_up(&evd->wq);
	if ((policy == KEVD_UPCALL_MANY || READ_ONCE(evd->held)) &&
	    kevd_ring_count(&evd->ring) &&
	    kevd_upcalls_enabled(READ_ONCE(evd->policy)))
		kevd_schedule(evd);
}

/*
 * Producers filled the ring while the owner held @k events it must queue
 * (a direct poll's, behind an event queued meanwhile; a give-back): grow
 * it rather than lose them or deliver them out of order. They may have
 * filled the headroom too: the new queue length holds all of it, or the
 * resize would refuse (-EBUSY) for good while nobody dequeues.
 * Return: false if the ring cannot grow (at its largest, or no memory):
 * the caller's events then take any free slot, past the queue length and
 * the headroom (a ring at its largest always has room for them).
 */
static bool kevd_make_room(struct kevd *evd, u32 k)
{
	int err = kevd_ring_grow(&evd->ring, k);

	if (err)
		cond_resched();
	/* -EAGAIN: another resize changed the ring; look again */
	return !err || err == -EAGAIN;
}

/*
 * Push events back to the head of @evd, making room if it has none: the
 * ring grows, and only if it cannot do they take the headroom, which the
 * streams that cannot wait would find full (and the slots past it).
 * @fresh: they never were in the ring; else @orig was the ring index of
 * the first (kevd_ring_push_front()).
 */
static void kevd_push_front(struct kevd *evd, const struct kevd_event *evs,
			    u32 k, bool fresh, u32 orig)
{
	bool spare = false;

	while (kevd_ring_push_front(&evd->ring, evs, k, fresh, orig, spare))
		spare |= !kevd_make_room(evd, k);
}

/*
 * Queue completions a direct poll took behind an event that entered the
 * ring during the poll, where a drain would have put them.
 */
static void kevd_push_back_wcs(struct kevd *evd, const struct ib_wc *wcs,
			       u32 n)
{
	bool spare = false;
	u32 done = 0;

	while ((done += kevd_cq_requeue(evd, wcs + done, n - done, spare)) < n)
		spare |= !kevd_make_room(evd, n - done);
}

/* Polled completions the ring never saw, converted a few at a time. */
#define KEVD_CONVERT_CHUNK	4

/*
 * Push polled completions back to the head of @evd, in order, in one
 * push: between two, a dequeue in another thread (the batch may give
 * back from an upcall, a QP flush, with nothing held) would take the
 * events of the later ones first. A give-back is not the fast path: more
 * than a chunk is converted into memory of its own (no reclaim from a
 * poller). Without memory, in chunks, the last chunk first, each earlier
 * one ahead of it.
 */
static void kevd_push_front_wcs(struct kevd *evd, const struct ib_wc *wcs,
				u32 k)
{
	struct kevd_event small[KEVD_CONVERT_CHUNK], *big = NULL, *evs = small;
	u32 chunk = KEVD_CONVERT_CHUNK, end = k, n, i;

	if (k > chunk)
		big = kmalloc_array(k, sizeof(*big), GFP_NOWAIT | __GFP_NOWARN);
	if (big) {
		evs = big;
		chunk = k;
	}
	while (end) {
		n = min(end, chunk);
		end -= n;
		for (i = 0; i < n; i++)
			kevd_cq_convert(evd, &wcs[end + i], &evs[i]);
		kevd_push_front(evd, evs, n, true, 0);
	}
	kfree(big);
}

/*
 * Polled completions entered the ring at its head: for NOTIFY they are
 * arrivals that ring.prod did not count. Before the batch ends: the pass
 * that the end or the policy change schedules sees the mark.
 */
static void kevd_notify_owe(struct kevd *evd)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	evd->notify_owed = true;
	spin_unlock_irqrestore(&evd->lock, flags);
}

/**
 * kevd_batch_return() - give back the events of a batch from @from on.
 * @b: the batch; its upcall's poller owns it.
 * @from: the first event not delivered.
 *
 * They go back to the head of the EVD, in order, and the batch ends at
 * @from: popped events and polled completions are pushed to the front.
 *
 * Context: the poller thread of the batch (after an upcall, or inside
 * one through kevd_modify_upcall()); may sleep.
 */
void kevd_batch_return(struct kevd_batch *b, u32 from)
{
	struct kevd *evd = b->evd;
	u32 k = b->n - from;

	if (!k)
		return;
	if (b->wcs) {
		/* a direct batch, counted when handed (kevd_deliver_direct()) */
		evd->postats.direct -= k;
		kevd_push_front_wcs(evd, b->wcs + from, k);
		kevd_notify_owe(evd);
	} else {
		kevd_push_front(evd, b->evs + from, k, false, b->first + from);
	}
	b->n = from;
	kevd_wake_waiter(evd);
}

enum kevd_batch_kind { KEVD_BATCH_WCS, KEVD_BATCH_EVS };

/*
 * The upcall's more_events: another event follows in the batch, or the
 * ring holds events now.
 */
static bool kevd_batch_more(const struct kevd_batch *b, u32 i)
{
	return i + 1 < b->n || kevd_ring_count(&b->evd->ring);
}

/*
 * The invocations of a batch, specialised per kind (no branch per event):
 * per event, one load of the generation, one store of the position (for
 * an upcall that changes the policy or dequeues), the upcall. @b->n and
 * @b->pos are read again after each upcall: kevd_batch_revoke() lowers
 * the one, kevd_batch_take() raises the other, from inside one.
 */
static __always_inline void kevd_batch_loop(struct kevd_batch *b,
					    const struct kevd_upcall *upcall,
					    const enum kevd_batch_kind kind)
{
	/* what no upcall changes, in registers across the calls */
	struct kevd *evd = b->evd;
	const u32 gen = b->gen;
	const struct kevd_event *evs = b->evs;
	const struct ib_wc *wcs = b->wcs;
	const struct kevd_event *ev;
	struct kevd_event conv;
	u32 i;

	for (i = 0; i < b->n; i = b->pos + 1) {
		if (unlikely(kevd_upcall_gen_changed(evd, gen))) {
			kevd_batch_return(b, i);
			break;
		}
		b->pos = i;
		if (kind == KEVD_BATCH_WCS) {
			kevd_cq_convert(evd, &wcs[i], &conv);
			ev = &conv;
		} else {
			ev = &evs[i];
		}
		upcall->func(upcall->ctx, ev, kevd_batch_more(b, i));
	}
}

/*
 * Deliver the events of @b, one invocation each, until the batch is done
 * or the policy changed. Returns the number of invocations.
 */
static u32 kevd_batch_run(struct kevd_poller *p, struct kevd_batch *b,
			  const struct kevd_upcall *upcall, int policy)
{
	trace_kevd_upcall_batch_begin(b->evd, policy, b->n);
	kevd_poller_upcall_begin(p, b->evd, b);
	if (b->wcs)
		kevd_batch_loop(b, upcall, KEVD_BATCH_WCS);
	else
		kevd_batch_loop(b, upcall, KEVD_BATCH_EVS);
	kevd_poller_upcall_end(p, b->evd);
	trace_kevd_upcall_batch_end(b->evd, policy, b->n);
	return b->n - b->taken;
}

/*
 * The raw flavour (kevd_upcall.wc_func): the whole poll in one call, not
 * converted. It counts as delivered before the call (pos at its end), so
 * a policy change inside it gives nothing back; one that came before it
 * sends the batch to the ring, converted.
 */
static u32 kevd_batch_run_wcs(struct kevd_poller *p, struct kevd_batch *b,
			      const struct kevd_upcall *upcall)
{
	trace_kevd_upcall_batch_begin(b->evd, KEVD_UPCALL_SINGLE_INSTANCE,
				      b->n);
	kevd_poller_upcall_begin(p, b->evd, b);
	if (unlikely(kevd_upcall_gen_changed(b->evd, b->gen))) {
		kevd_batch_return(b, 0);
	} else {
		b->pos = b->n - 1;
		upcall->wc_func(upcall->ctx, b->wcs, b->n);
	}
	kevd_poller_upcall_end(p, b->evd);
	trace_kevd_upcall_batch_end(b->evd, KEVD_UPCALL_SINGLE_INSTANCE, b->n);
	return b->n;
}

/*
 * May completions skip the ring? SINGLE_INSTANCE, the INVOC_NEW gate
 * open, nothing queued. Opens the session if so. Takes evd->lock.
 */
static bool kevd_direct_begin(struct kevd *evd, struct kevd_direct *d)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	d->open = evd->policy == KEVD_UPCALL_SINGLE_INSTANCE &&
		  !evd->gate_new && !kevd_ring_count(&evd->ring) &&
		  !atomic_read(&evd->upcalls_running);
	if (d->open) {
		d->upcall = evd->upcall;
		d->gen = evd->upcall_gen;
		WRITE_ONCE(evd->held, false);	/* nothing runs */
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
	return !kevd_upcall_gen_changed(evd, d->gen) &&
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
	kevd_assert_owner(evd);
	if (!d->open)
		return;
	d->open = false;
	kevd_deliver_end(evd, KEVD_UPCALL_SINGLE_INSTANCE);
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
 * no ring lock, no copy; or, with the raw flavour (wc_func), once for
 * the whole poll, not converted (kevd_batch_run_wcs()). Order holds:
 * only the owner takes completions from the CQ and only it delivers, and
 * it delivers nothing from the ring until the session is done; an event
 * posted meanwhile ends the session and queues behind what it delivered,
 * as it would behind a drain, and one that entered the ring during the
 * poll goes ahead of what the poll found (kevd_cq_requeue()). The
 * first call of a pass opens the session under evd->lock (the policy
 * snapshot, counted in upcalls_running, so TEARDOWN and free wait for it
 * like for any batch); later calls check without the lock that nothing
 * changed (kevd_direct_continue()). A session lasts one pass's polls, at
 * most poll_budget completions; it ends before the arm check, which
 * queues what it polls and runs no upcall.
 *
 * Context: the owning poller thread; calls upcalls, which may sleep.
 * Return: completions taken from the CQ (0: it was empty; those a policy
 * change stopped went back to the ring), or -EAGAIN when the EVD does
 * not qualify; the caller then drains into the ring.
 */
int kevd_deliver_direct(struct kevd *evd, struct kevd_poller *p,
			struct kevd_direct *d, struct ib_wc *wcs, u32 budget)
{
	struct kevd_batch b = { .evd = evd, .wcs = wcs };
	u32 done;
	int n;

	kevd_assert_owner(evd);
	if (d->open) {
		if (!kevd_direct_continue(evd, d))
			return -EAGAIN;
	} else if (READ_ONCE(evd->policy) != KEVD_UPCALL_SINGLE_INSTANCE ||
		   !kevd_direct_begin(evd, d)) {
		/* Other policies never qualify: no lock round trip for them. */
		return -EAGAIN;
	}
	kevd_cq_unstall(evd);	/* the ring is empty */
	n = kevd_cq_poll(evd, budget, wcs);
	if (n <= 0)
		return 0;	/* empty, or held: nothing to go on with */
	/*
	 * An event queued during the poll goes first: a software event
	 * posted before the work whose completion the poll found, or the
	 * ESTABLISHED queued before a gate this poll passed (as in
	 * kevd_cq_drain_to()). Then the session ends (the ring is not
	 * empty) and the pass delivers from the ring.
	 */
	smp_rmb();
	if (unlikely(kevd_ring_count(&evd->ring))) {
		kevd_push_back_wcs(evd, wcs, n);
		return n;
	}
	b.gen = d->gen;		/* the session's, set when it opened */
	b.n = n;
	/*
	 * Delivered once handed to the upcalls, as from the ring: one that
	 * queries finds its own event counted. A give-back takes its events
	 * off again (kevd_batch_return()).
	 */
	evd->postats.direct += n;
	if (d->upcall.wc_func) {
		done = kevd_batch_run_wcs(p, &b, &d->upcall);
		evd->postats.upcalls += !!done;	/* one invocation */
	} else {
		done = kevd_batch_run(p, &b, &d->upcall,
				      KEVD_UPCALL_SINGLE_INSTANCE);
		evd->postats.upcalls += done;
	}
	/* delivered: by its upcall, or by a dequeue inside one */
	if (b.n > evd->postats.max_direct)
		evd->postats.max_direct = b.n;
	/* polled: those not delivered went back to the ring */
	return n;
}

/**
 * kevd_batch_revoke() - the policy changed inside an upcall of @evd.
 * @evd: the EVD.
 *
 * Called by kevd_modify_upcall() after the change: if the caller is an
 * upcall of @evd, the rest of its batch goes back to the EVD now, before
 * the consumer that changed the policy can dequeue.
 *
 * Context: any; from an upcall, its poller thread (may sleep).
 */
void kevd_batch_revoke(struct kevd *evd)
{
	struct kevd_batch *b = kevd_poller_current_batch(evd);

	if (b)
		kevd_batch_return(b, b->pos + 1);
}

/**
 * kevd_deliver() - deliver one batch of upcalls, as the policy says.
 * @evd: the EVD; the caller (@p) owns it.
 * @p: the poller.
 * @evs: room for KEVD_BATCH events.
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
	struct kevd_batch b = { .evd = evd, .evs = evs };
	struct kevd_upcall upcall;
	struct kevd_bell bell;
	int policy;
	u32 n;

	kevd_assert_owner(evd);
	if (!kevd_deliver_begin(evd, &policy, &upcall, &b.gen, &bell))
		return 0;

	if (policy == KEVD_UPCALL_NOTIFY) {
		n = 0;
		trace_kevd_upcall_batch_begin(evd, policy, 1);
		kevd_poller_upcall_begin(p, evd, NULL);
		if (!kevd_upcall_gen_changed(evd, b.gen)) {
			evd->postats.upcalls++;
			upcall.func(upcall.ctx, NULL, true);
			n = 1;
		} else {
			kevd_notify_unring(evd, &bell);
		}
		kevd_poller_upcall_end(p, evd);
		trace_kevd_upcall_batch_end(evd, policy, n);
		kevd_deliver_end(evd, policy);
		return n;
	}
	n = min_t(u32, budget, policy == KEVD_UPCALL_MANY ? KEVD_MANY_BATCH :
							   KEVD_BATCH);
	n = kevd_ring_pop(&evd->ring, evs, n, &b.first, &evd->upcall_gen,
			  b.gen);
	if (!n) {
		kevd_deliver_end(evd, policy);
		return 0;
	}
	b.n = n;
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

	n = kevd_batch_run(p, &b, &upcall, policy);
	/* after a hand-off the next owner writes postats: not ours now */
	if (*handed_off)
		atomic64_add(n, &evd->handed_upcalls);
	else
		evd->postats.upcalls += n;
	kevd_deliver_end(evd, policy);
	if (*handed_off)
		kevd_put(evd);
	return n;
}
