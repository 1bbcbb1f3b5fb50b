// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The DTO stream: the CQ an EVD owns, its completion and event handlers,
 * and the drain of the CQ into the event ring.
 *
 * Context and locking:
 *   - kevd_comp_handler() runs in whatever context the provider calls it
 *     (hard IRQ, softirq, process). It never polls and never calls an
 *     upcall: under evd->lock it checks the EVD is alive, notes the
 *     notification and schedules the EVD on its poller, or, when a
 *     consumer waits with upcalls disabled, wakes it to pull
 *     (dto/pull.c).
 *   - kevd_cq_drain() runs only in the owner of the EVD (KEVD_POLL_SCHED:
 *     a poller's pass, or a consumer's pull, dto/pull.c), so completions
 *     leave the CQ in CQ order and enter the ring in that order. It
 *     reserves ring slots first, then polls at most that many: a
 *     completion is never taken without a slot (backpressure: the rest
 *     wait in the CQ).
 *   - Connection events (except ESTABLISHED) posted to an EVD with a CQ
 *     wait on the ring's fenced list until the owner has drained the CQ
 *     empty (kevd_cq_unfence()): the completions an endpoint had in the CQ
 *     when its DISCONNECTED was posted come before it. While a hold is on
 *     (evd->nholds, dto/drain.c: the markers behind a disconnected QP's
 *     flushes, KEVD_HOLD_WAIT at most) none is queued.
 *   - A gated QP (kevd_cq_gate_at(), cm/cm.c while an endpoint awaits its
 *     ESTABLISHED): the owner parks the first completion of it that it
 *     polls and polls the CQ no further until the gate lifts; gated QPs
 *     are on evd->gated_qps, under evd->lock, looked up only while one is
 *     gated (one list_empty() per poll otherwise). A gate whose
 *     ESTABLISHED is held behind an earlier connection event stays up
 *     until that enters the ring; a completion of its QP polled
 *     meanwhile lets it in at once (kevd_cq_lift()).
 *   - Teardown (kevd_free()): the EVD is marked dead under evd->lock, the
 *     poller lets go, the moderation's work is cancelled (dto/dim.c), so
 *     is the holds' (dto/drain.c), then ib_destroy_cq(); only then is the
 *     memory freed.
 */
#include "kevd_internal.h"

static void kevd_comp_handler(struct ib_cq *cq, void *ctx)
{
	struct kevd *evd = ctx;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	if (evd->state & KEVD_STATE_OPEN) {
		atomic64_inc(&evd->notifications);
		set_bit(KEVD_POLL_NOTIFIED, &evd->poll_state);
		/* A waiter pulls itself (dto/pull.c), unless someone owns it. */
		if (evd->waiter && !kevd_upcalls_enabled(evd->policy)) {
			if (!kevd_poll_mark_missed(evd))
				wake_up(&evd->wq);
		} else {
			kevd_schedule(evd);
		}
	}
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * The depth of a CQ that follows the queue length: the queue length the
 * EVD reports (@actual, @qlen rounded up), but no deeper than the device
 * allows, where @qlen itself fits (rxe: 32767 entries, where a queue
 * length of 20000 rounds to 32768). Beyond, the provider's error.
 */
static u32 kevd_cq_depth(const struct ib_device *dev, u32 qlen, u32 actual)
{
	u32 limit = dev->attrs.max_cqe > 0 ? dev->attrs.max_cqe : U32_MAX;

	return actual <= limit ? actual : max(qlen, limit);
}

/**
 * kevd_cq_create() - create and arm the CQ of an EVD's DTO stream.
 * @evd: the EVD (not yet visible to anyone).
 * @dev: the device.
 * @attr: depth (cq_depth, or the queue length: kevd_cq_depth()) and the
 *	rest.
 * @vector: the completion vector (kevd_cq_pick_vector()).
 * @event_handler: the CQ's async event handler (the EVD's, evd/evd.c).
 *
 * Context: process context; may sleep.
 * Return: 0, -ENOMEM, or the error of ib_create_cq().
 */
int kevd_cq_create(struct kevd *evd, struct ib_device *dev,
		   const struct kevd_attr *attr, u32 vector,
		   void (*event_handler)(struct ib_event *, void *))
{
	struct ib_cq_init_attr cq_attr = {
		.cqe = attr->cq_depth ?:
		       kevd_cq_depth(dev, attr->qlen, kevd_ring_qlen(&evd->ring)),
		.comp_vector = vector,
	};
	struct ib_cq *cq;

	int ret;

	evd->dev = dev;
	evd->comp_vector = vector;
	ret = kevd_dim_create(evd, dev);
	if (ret)
		return ret;
	cq = ib_create_cq(dev, kevd_comp_handler, event_handler, evd, &cq_attr);
	if (IS_ERR(cq))
		return PTR_ERR(cq);	/* the EVD's error path frees the dim */
	evd->cq = cq;
	evd->cq_follows_qlen = !attr->cq_depth;
	evd->solicited_only = attr->solicited_only;
	/*
	 * Nothing can be in it yet: a plain arm is enough. If it fails, the
	 * creator schedules a pass, which polls and arms again
	 * (kevd_cq_arm_check()).
	 */
	if (ib_req_notify_cq(cq, attr->solicited_only ? IB_CQ_SOLICITED :
							IB_CQ_NEXT_COMP) < 0)
		evd->arm_failed = true;
	evd->postats.arms++;
	return 0;
}

/**
 * kevd_cq_pick_vector() - the completion vector of a new EVD's CQ.
 * @dev: the device.
 * @asked: the consumer's vector, or %KEVD_ANY.
 *
 * %KEVD_ANY spreads CQs over the vectors as ib_core does: the vector the
 * fewest of kevd's CQs on @dev use now. A vector beyond the device's wraps.
 *
 * Context: process context; takes kevd_list_lock.
 * Return: a vector of @dev.
 */
u32 kevd_cq_pick_vector(struct ib_device *dev, int asked)
{
	u32 n = max(dev->num_comp_vectors, 1);

	if (asked != KEVD_ANY)
		return (u32)asked % n;
	return n > 1 ? kevd_vector_least_used(dev, n) : 0;
}

/**
 * kevd_cq_vector_cpu() - the CPU a completion vector interrupts.
 * @dev: the device.
 * @vector: the vector.
 *
 * Return: the first online CPU of the vector's affinity, where the
 * provider reports one (ib_get_vector_affinity()), else %KEVD_ANY.
 */
int kevd_cq_vector_cpu(struct ib_device *dev, u32 vector)
{
	const struct cpumask *mask = ib_get_vector_affinity(dev, vector);
	unsigned int cpu;

	if (!mask)
		return KEVD_ANY;
	cpu = cpumask_first_and(mask, cpu_online_mask);
	return cpu < nr_cpu_ids ? cpu : KEVD_ANY;
}

/*
 * Lift gate @g. Its ESTABLISHED, if still held behind an earlier
 * connection event, enters the ring first, ahead of that event: the
 * endpoint's own order before the connection stream's (without room it
 * stays held, and the endpoint's completions go ahead of it). Caller
 * holds evd->lock.
 * Return: true if it entered: the caller wakes and schedules for it
 * (kevd_producer_done()) once it dropped evd->lock.
 */
static bool kevd_cq_lift(struct kevd *evd, struct kevd_gate *g)
{
	bool queued = false;

	lockdep_assert_held(&evd->lock);
	if (g->est_held)
		queued = kevd_ring_unfence_key(&evd->ring, g) > 0;
	g->est_held = false;
	list_del_init(&g->node);
	return queued;
}

/*
 * Is @qp gated on @evd? A gate whose ESTABLISHED is only held lifts for
 * the first completion of a poll (@first): the ESTABLISHED enters ahead
 * of it (kevd_cq_lift()) and behind what earlier polls took. A later one
 * parks, the poll's earlier completions enter, and another pass lifts
 * the gate for it.
 */
static bool kevd_cq_gated(struct kevd *evd, struct ib_qp *qp, bool first)
{
	struct kevd_gate *g, *gate = NULL;
	bool queued = false, again = false;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	/* a gate whose id has no QP yet holds nothing */
	list_for_each_entry(g, &evd->gated_qps, node)
		if (qp && READ_ONCE(*g->qpp) == qp)
			gate = g;
	if (gate && gate->est_held) {
		again = !first;
		if (first) {
			queued = kevd_cq_lift(evd, gate);
			gate = NULL;
		}
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	if (queued)
		kevd_producer_done(evd);
	if (again)
		kevd_schedule(evd);
	return !!gate;
}

/*
 * The provider's poll failed (a CQ in error): for the arm, the CQ counts
 * as empty until its next notification (kevd_cq_arm_check() arms it
 * without asking for missed events), so no pass or pull spins on it.
 * ib_core's own polling would requeue forever where the provider reports
 * missed events. A poll that works again ends that (kevd_cq_poll()): an
 * arm after it asks and checks as usual. For the held events and the
 * drains it is no empty CQ, unless IB_EVENT_CQ_ERR came
 * (kevd_cq_short_empty()).
 */
static void kevd_cq_poll_failed(struct kevd *evd, int err)
{
	if (!evd->poll_warned)	/* once per EVD */
		pr_warn("kevd: EVD %u: ib_poll_cq() failed (%d): its CQ counts as empty until its next notification\n",
			evd->id, err);
	evd->poll_warned = true;
	evd->poll_failed = true;
}

/*
 * A poll came back short: was the CQ empty then? Not while a parked
 * completion holds it, nor when its last ib_poll_cq() failed (the gated
 * and marker polls return what they got before), unless an
 * IB_EVENT_CQ_ERR came: then the CQ gives nothing more.
 */
static bool kevd_cq_short_empty(const struct kevd *evd)
{
	return !evd->has_parked &&
	       (!evd->poll_failed || READ_ONCE(evd->cq_error_reported));
}

/*
 * A poll after @got completions (the parked one, or gated polls) returned
 * @ret: those go on, and a failure still counts (kevd_cq_poll_failed()).
 */
static int kevd_cq_polled_some(struct kevd *evd, int got, int ret)
{
	if (!got)
		return ret;
	if (ret < 0)
		kevd_cq_poll_failed(evd, ret);
	return got;
}

/* kevd_cq_poll() while QPs are gated or a completion is parked. */
static int kevd_cq_poll_gated(struct kevd *evd, int n, struct ib_wc *wcs)
{
	int i = 0, ret;

	if (evd->has_parked) {
		if (kevd_cq_gated(evd, evd->parked.qp, true))
			return -EAGAIN;		/* its ESTABLISHED is not in */
		wcs[i++] = evd->parked;		/* first, then what follows */
		evd->has_parked = false;
	}
	for (; i < n; i++) {
		if (list_empty(&evd->gated_qps)) {
			ret = ib_poll_cq(evd->cq, n - i, wcs + i);
			return ret < 0 ? kevd_cq_polled_some(evd, i, ret) :
					 i + ret;
		}
		/* one at a time: stop at the first completion of a gated QP */
		ret = ib_poll_cq(evd->cq, 1, &wcs[i]);
		if (ret <= 0)
			return kevd_cq_polled_some(evd, i, ret);
		if (kevd_cq_gated(evd, wcs[i].qp, !i)) {
			evd->parked = wcs[i];
			evd->has_parked = true;
			return i ?: -EAGAIN;
		}
	}
	return n;
}

/* The gated QPs and the parked completion, or ib_poll_cq() alone. */
static int __kevd_cq_poll(struct kevd *evd, int n, struct ib_wc *wcs)
{
	/* list_empty() reads once: the list is changed under evd->lock */
	if (likely(list_empty(&evd->gated_qps) && !evd->has_parked))
		return ib_poll_cq(evd->cq, n, wcs);
	return kevd_cq_poll_gated(evd, n, wcs);
}

/* Which of @d's markers is @wc, if any: KEVD_DRAIN_SEND or _RECV, or 0. */
static u8 kevd_cq_marker(const struct kevd_qp_drain *d, const struct ib_wc *wc)
{
	u64 base = (u64)(uintptr_t)d;

	if (wc->qp != d->qp || wc->wr_id < base || wc->wr_id > base + 1)
		return 0;
	return wc->wr_id == base ? KEVD_DRAIN_SEND : KEVD_DRAIN_RECV;
}

/**
 * kevd_cq_drain_seen() - a drain's last marker is in, or the CQ was empty.
 * @evd: the EVD whose drain @d is.
 * @d: the drain: done. An orphan, or a hold whose poster is done, goes.
 *
 * Context: any; the caller holds evd->lock.
 * Return: true if that let the connection events fenced go (a hold, the
 * last one): the caller schedules the pass that queues them.
 */
bool kevd_cq_drain_seen(struct kevd *evd, struct kevd_qp_drain *d)
{
	bool unheld = false;

	lockdep_assert_held(&evd->lock);
	if (!d->orphan && !d->expired && (!d->hold || d->posting)) {
		d->seen = true;
		WRITE_ONCE(d->seen_at, evd->cq_polls);
		return false;
	}
	/*
	 * Its flusher gave up, or a hold (one that expired too): the markers
	 * were all it stayed for.
	 */
	list_del(&d->node);
	WRITE_ONCE(evd->ndrains, evd->ndrains - 1);
	if (d->hold)
		unheld = kevd_cq_unhold(evd, d);
	kfree(d);
	return unheld;
}

/*
 * A completion of an orphan's QP (kevd_cq_flush_qp() gave up, and the QP
 * goes) loses its QP, which kevd_wc_to_event() must not read: no
 * completion of a QP made at the same address comes before the orphan's
 * markers, or the empty poll that ends it (kevd_cq_qp_gone()).
 */
static void kevd_cq_forget_qp(struct kevd *evd, struct ib_wc *wc)
{
	struct kevd_qp_drain *d;

	lockdep_assert_held(&evd->lock);
	list_for_each_entry(d, &evd->drains, node) {
		if (d->orphan && wc->qp == d->qp) {
			wc->qp = NULL;
			return;
		}
	}
}

/**
 * kevd_cq_convert_orphaned() - kevd_cq_convert() while a drain runs.
 * @evd: the EVD whose CQ @wc came from.
 * @wc: the completion.
 * @ev: the event.
 *
 * Context: the owner of @evd, or an upcall of it; takes evd->lock.
 */
void kevd_cq_convert_orphaned(struct kevd *evd, const struct ib_wc *wc,
			      struct kevd_event *ev)
{
	struct ib_wc copy = *wc;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	kevd_cq_forget_qp(evd, &copy);
	spin_unlock_irqrestore(&evd->lock, flags);
	kevd_wc_to_event(&copy, ev);
}

/* Take the drain markers out of @got completions; return those left. */
static int kevd_cq_take_markers(struct kevd *evd, struct ib_wc *wcs, int got)
{
	struct kevd_qp_drain *d;
	bool unheld = false;
	unsigned long flags;
	int i, kept = 0;
	u8 m = 0;

	spin_lock_irqsave(&evd->lock, flags);
	for (i = 0; i < got; i++) {
		list_for_each_entry(d, &evd->drains, node) {
			m = kevd_cq_marker(d, &wcs[i]);
			if (m)
				break;
		}
		if (!m) {
			kevd_cq_forget_qp(evd, &wcs[i]);
			if (kept != i)
				wcs[kept] = wcs[i];
			kept++;
			continue;
		}
		d->polled |= m;
		if (kevd_cq_markers_in(evd, d))
			unheld |= kevd_cq_drain_seen(evd, d);
		m = 0;
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	/* the events held for it: a pass queues them once the CQ is empty */
	if (unheld && READ_ONCE(evd->ring.nfenced))
		kevd_schedule(evd);
	return kept;
}

/*
 * A poll found the CQ empty: the drains without markers are done, and so
 * are orphans whose QP was destroyed before that poll began.
 */
static void kevd_cq_drains_empty(struct kevd *evd)
{
	struct kevd_qp_drain *d, *tmp;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	list_for_each_entry_safe(d, tmp, &evd->drains, node)
		if ((d->orphan ? d->destroyed : !d->need) && !d->seen &&
		    evd->cq_polls != d->since)
			kevd_cq_drain_seen(evd, d);
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * A QP is being drained (kevd_cq_flush_qp()): its markers are no
 * completions of the consumer's. A full batch that lost some is filled
 * again, so that a short one still means an empty CQ (kevd_cq_unfence()).
 */
static int kevd_cq_poll_markers(struct kevd *evd, int n, struct ib_wc *wcs,
				int got)
{
	int kept = 0, k;
	bool full;

	while (got > 0) {
		full = kept + got == n;
		k = kevd_cq_take_markers(evd, wcs + kept, got);
		kept += k;
		if (k == got || !full)
			goto out;
		got = __kevd_cq_poll(evd, n - kept, wcs + kept);
	}
	if (!kept)
		return got;
	/* a refill failed: what came before goes on */
	if (got < 0 && got != -EAGAIN)
		kevd_cq_poll_failed(evd, got);
out:
	if (kept < n && kevd_cq_short_empty(evd))
		kevd_cq_drains_empty(evd);
	return kept;
}

/**
 * kevd_cq_poll() - poll the CQ, holding back the completions of gated QPs.
 * @evd: the EVD; the caller owns it.
 * @n: at most this many.
 * @wcs: where to put them.
 *
 * While a QP is gated (kevd_cq_gate_at()), the first completion of it that
 * the owner polls is parked and the CQ is polled no further: the
 * completions behind it wait in the CQ, in order, until the gate lifts.
 * Other QPs' completions ahead of it flow. No gate: ib_poll_cq() alone,
 * after one list_empty(). The markers of a QP being drained are taken
 * out. While a drain waits, each call counts in evd->cq_polls: the owner
 * converts what a poll returned before it polls again, which
 * kevd_cq_flush_qp() relies on.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 * Return: what ib_poll_cq() returns (fewer than @n also when it stopped
 * at a completion it parked, or a later ib_poll_cq() failed:
 * kevd_cq_short_empty() tells whether the CQ was empty), or -EAGAIN when
 * a parked completion holds the CQ.
 */
int kevd_cq_poll(struct kevd *evd, int n, struct ib_wc *wcs)
{
	bool draining = READ_ONCE(evd->ndrains);
	int ret;

	kevd_assert_owner(evd);
	/* counted only while a drain waits: it needs no poll begun before */
	if (unlikely(draining))	/* release: pairs with kevd_cq_drained() */
		smp_store_release(&evd->cq_polls, evd->cq_polls + 1);
	/* a failure counts until the next poll (kevd_cq_arm_check()) */
	if (unlikely(evd->poll_failed))
		evd->poll_failed = false;
	ret = __kevd_cq_poll(evd, n, wcs);
	draining = draining || READ_ONCE(evd->ndrains);
	if (unlikely(draining))
		ret = kevd_cq_poll_markers(evd, n, wcs, ret);
	if (unlikely(ret < 0 && ret != -EAGAIN))
		kevd_cq_poll_failed(evd, ret);
	/* nothing (or markers only), or a failure after IB_EVENT_CQ_ERR */
	if (unlikely(draining) && ret <= 0 && kevd_cq_short_empty(evd))
		kevd_cq_drains_empty(evd);
	return ret;
}

/**
 * kevd_cq_gate_at() - hold back the completions of the QP at @qpp.
 * @evd: the EVD.
 * @gate: the caller's record, on the EVD until kevd_cq_ungate().
 * @qpp: where the QP is, or will be (an rdma_cm_id's ->qp, which
 *	rdma_create_qp() sets); it must stay valid until kevd_cq_ungate().
 *
 * For the CM binding: from before the QP can receive (rdma_accept(), or
 * before the requester's ROUTE_RESOLVED handler makes and connects it)
 * until its ESTABLISHED is queued. A completion of the QP that the owner
 * polls meanwhile waits (parked), and so does the CQ behind it; nothing
 * waits if none comes, or if the QP completes into another CQ. The gate
 * must be set before the QP can complete anything: then any poll that
 * returns a completion of it comes after the gate, through the
 * provider's own ordering, and finds the QP at @qpp (set before it
 * could complete).
 *
 * Context: any; takes evd->lock.
 */
void kevd_cq_gate_at(struct kevd *evd, struct kevd_gate *gate,
		     struct ib_qp **qpp)
{
	unsigned long flags;

	gate->qpp = qpp;
	gate->est_held = false;
	spin_lock_irqsave(&evd->lock, flags);
	list_add_tail(&gate->node, &evd->gated_qps);
	spin_unlock_irqrestore(&evd->lock, flags);
}
EXPORT_SYMBOL_GPL(kevd_cq_gate_at);	/* not public: kevd's tests */

/**
 * kevd_cq_ungate() - let a gated QP's completions go.
 * @evd: the EVD.
 * @gate: the record kevd_cq_gate_at() took.
 *
 * The EVD is scheduled: its owner hands on a parked completion first,
 * then drains the CQ and arms it again.
 *
 * A gate that kevd lifted already (its ESTABLISHED entered the ring after
 * it was held, kevd_cq_fence_gated()) stays lifted. One whose
 * ESTABLISHED is still held lets it in first, ahead of the connection
 * events it waited behind: the binding ends (disconnect, destroy), and
 * the endpoint's completions and its next event follow it.
 *
 * Context: any; takes evd->lock.
 */
void kevd_cq_ungate(struct kevd *evd, struct kevd_gate *gate)
{
	unsigned long flags;
	bool queued = false;

	spin_lock_irqsave(&evd->lock, flags);
	if (!list_empty(&gate->node))
		queued = kevd_cq_lift(evd, gate);
	spin_unlock_irqrestore(&evd->lock, flags);
	if (queued)
		kevd_producer_done(evd);
	kevd_schedule(evd);
}
EXPORT_SYMBOL_GPL(kevd_cq_ungate);	/* not public: kevd's tests */

/**
 * kevd_cq_fence_gated() - hold a gated endpoint's ESTABLISHED.
 * @evd: the EVD.
 * @ev: the ESTABLISHED (->evd set), to be held behind an earlier
 *	connection event (kevd_post_established()).
 * @gate: the endpoint's gate on @evd, up.
 *
 * The gate stays up until the event enters the ring: when the owner
 * queues the held events (kevd_cq_unfence()), or at once when it polls a
 * completion of the gated QP, or when the gate is lifted
 * (kevd_cq_ungate()). No completion of the endpoint comes before its
 * ESTABLISHED, and no cycle forms: the held events ahead of it may wait
 * for the very CQ that its completion holds.
 *
 * Context: any; takes evd->lock, then ring->prod_lock.
 * Return: as kevd_ring_fence().
 */
int kevd_cq_fence_gated(struct kevd *evd, const struct kevd_event *ev,
			struct kevd_gate *gate)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&evd->lock, flags);
	ret = kevd_ring_fence(&evd->ring, ev, gate);
	if (!ret)
		gate->est_held = true;
	spin_unlock_irqrestore(&evd->lock, flags);
	return ret;
}

/*
 * The held events just queued may include gated endpoints' ESTABLISHED
 * (kevd_cq_fence_gated()): their gates lift now. Nothing is parked: the
 * CQ was found empty.
 */
static void kevd_cq_lift_queued(struct kevd *evd)
{
	struct kevd_gate *g, *tmp;
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	list_for_each_entry_safe(g, tmp, &evd->gated_qps, node)
		if (g->est_held && !kevd_ring_fenced_has(&evd->ring, g))
			kevd_cq_lift(evd, g);
	spin_unlock_irqrestore(&evd->lock, flags);
}

/**
 * kevd_cq_evd() - the EVD whose CQ @cq is.
 * @cq: a CQ, or NULL.
 *
 * Return: the EVD, or NULL for a CQ that kevd did not create.
 */
struct kevd *kevd_cq_evd(struct ib_cq *cq)
{
	return cq && cq->comp_handler == kevd_comp_handler ? cq->cq_context :
							     NULL;
}

/**
 * kevd_cq_drop_parked() - discard the parked completion of a dead EVD.
 * @evd: the EVD; no poller owns it.
 *
 * Return: 1 if there was one (kevd_free() counts it as discarded).
 */
u32 kevd_cq_drop_parked(struct kevd *evd)
{
	u32 n = evd->has_parked;

	evd->has_parked = false;
	return n;
}

/**
 * kevd_cq_fit() - keep a CQ sized by the queue length able to hold it.
 * @evd: the EVD.
 * @qlen: the queue length the consumer asked for.
 * @actual: the queue length it is about to have (@qlen rounded up).
 *
 * A CQ whose depth came from the queue length (cq_depth 0 at create)
 * grows with it (ib_resize_cq(), to kevd_cq_depth()), so that the
 * completions of the work a consumer sized by the queue length fit; it
 * never shrinks. A CQ with an explicit depth is the consumer's to size.
 *
 * Context: process context; may sleep.
 * Return: 0, or the error of ib_resize_cq(): -EOPNOTSUPP from a provider
 * that cannot resize CQs (siw), -ENOMEM, ...
 */
int kevd_cq_fit(struct kevd *evd, u32 qlen, u32 actual)
{
	u32 depth;

	if (!evd->cq || !evd->cq_follows_qlen)
		return 0;
	depth = kevd_cq_depth(evd->dev, qlen, actual);
	if (depth <= READ_ONCE(evd->cq->cqe))
		return 0;
	return ib_resize_cq(evd->cq, depth);
}

/**
 * kevd_cq_busy() - do QPs still use the CQ?
 * @evd: the EVD.
 *
 * Return: true while a QP was created on kevd_cq(@evd) and not destroyed.
 */
bool kevd_cq_busy(struct kevd *evd)
{
	return evd->cq && atomic_read(&evd->cq->usecnt);
}

/**
 * kevd_cq_destroy() - destroy the CQ of a quiesced EVD.
 * @evd: the EVD; dead, no poller owns it.
 *
 * Context: process context; may sleep.
 */
void kevd_cq_destroy(struct kevd *evd)
{
	struct kevd_qp_drain *d, *tmp;
	unsigned long flags;
	LIST_HEAD(gone);

	if (!evd->cq)
		return;
	kevd_dim_stop(evd);	/* no ib_modify_cq() after this */
	/* no hold ends by time after this: they all go with the CQ */
	cancel_delayed_work_sync(&evd->hold_work);
	ib_destroy_cq(evd->cq);
	evd->cq = NULL;
	/*
	 * Drains whose flusher gave up, their markers never polled. Taken
	 * off under evd->lock: the CM may still be telling the EVD, which
	 * it holds a reference on, that their QP is gone (kevd_cq_qp_gone()).
	 */
	spin_lock_irqsave(&evd->lock, flags);
	list_splice_init(&evd->drains, &gone);
	spin_unlock_irqrestore(&evd->lock, flags);
	list_for_each_entry_safe(d, tmp, &gone, node)
		kfree(d);
}

/**
 * kevd_cq_unstall() - the owner moves completions again: no stall.
 * @evd: the EVD; the caller owns it.
 *
 * A drain that stopped at a full ring leaves the CQ unarmed and sets
 * cq_stalled; a dequeue clears it and pulls the rest, or reschedules
 * (kevd_consumer_done()). Upcall batches free
 * slots without a dequeue, so the owner clears it itself as soon as it
 * takes completions again, or the EVD would go idle with its CQ unarmed.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 */
void kevd_cq_unstall(struct kevd *evd)
{
	kevd_assert_owner(evd);
	if (unlikely(READ_ONCE(evd->cq_stalled)))
		WRITE_ONCE(evd->cq_stalled, false);
}

/*
 * Reserve slots; if the ring is full, note the stall for the consumer:
 * a second look and the flag under ring.cons_lock, where a take frees
 * slots and reads the flag (kevd_take()), so that no full barrier is
 * needed on the consumer's path, which a one-event dequeue takes per event.
 * With the software stream at most half of the free slots (rounded up):
 * a kevd_post_se() during the poll finds the rest.
 */
static u32 kevd_cq_reserve(struct kevd *evd, u32 want)
{
	bool share = evd->flags & KEVD_SOFTWARE_FLAG;
	u32 n = kevd_ring_reserve(&evd->ring, want, share);

	if (n) {
		kevd_cq_unstall(evd);
		return n;
	}
	n = kevd_ring_reserve_flag(&evd->ring, want, share,
				   &evd->cq_stalled);
	if (!n)
		evd->postats.backpressure_stalls++;
	return n;
}

/*
 * Convert @n work completions straight into the slots reserved for them
 * and publish them: one hold of ring->prod_lock for the batch. Only the
 * owner commits, and it delivers in the same pass, so this wakes a waiter
 * but does not schedule the EVD.
 */
static void kevd_cq_commit(struct kevd *evd, const struct ib_wc *wcs, u32 n,
			   u32 reserved)
{
	struct kevd_ring *ring = &evd->ring;
	struct kevd_event *slot;
	unsigned long flags;
	u32 i;

	spin_lock_irqsave(&ring->prod_lock, flags);
	for (i = 0; i < n; i++) {
		slot = __kevd_ring_slot(ring, i);
		kevd_wc_to_event(&wcs[i], slot);
		slot->evd = evd;
	}
	__kevd_ring_commit(ring, n, reserved);
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	if (n)
		kevd_wake_waiter(evd);
}

/*
 * Move up to @budget completions from the CQ into the ring; *@empty says
 * whether a poll found the CQ empty (kevd_cq_short_empty(), or a failed
 * poll after IB_EVENT_CQ_ERR).
 */
static u32 kevd_cq_move(struct kevd *evd, struct ib_wc *wcs, u32 budget,
			bool *empty)
{
	u32 done = 0, want, resv;
	int n;

	kevd_assert_owner(evd);
	*empty = false;
	while (done < budget) {
		want = min_t(u32, budget - done, KEVD_BATCH);
		resv = kevd_cq_reserve(evd, want);
		if (!resv)
			break;
		n = kevd_cq_poll(evd, resv, wcs);
		/*
		 * held by a parked completion: not empty; a provider error
		 * ends the drain (kevd_cq_poll_failed()), and after an
		 * IB_EVENT_CQ_ERR the CQ gives nothing more: empty
		 */
		kevd_cq_commit(evd, wcs, max(n, 0), resv);
		if (n < 0) {
			*empty = n != -EAGAIN &&
				 READ_ONCE(evd->cq_error_reported);
			break;
		}
		done += n;
		if (n < resv) {
			*empty = kevd_cq_short_empty(evd);
			break;
		}
	}
	return done;
}

/**
 * kevd_cq_requeue() - queue completions a direct delivery polled after all.
 * @evd: the EVD; the caller owns it.
 * @wcs: the completions, in CQ order.
 * @n: how many.
 * @spare: they may take any free slot (the ring cannot grow for them),
 *	else the queue length's.
 *
 * For a direct poll that an event entered the ring during
 * (kevd_deliver_direct()): they go behind it, converted, as a drain
 * would have put them.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 * Return: how many fit, 0 .. @n; the caller makes room for the rest.
 */
u32 kevd_cq_requeue(struct kevd *evd, const struct ib_wc *wcs, u32 n,
		    bool spare)
{
	u32 resv;

	kevd_assert_owner(evd);
	resv = spare ? kevd_ring_reserve_spare(&evd->ring, n) :
		       kevd_ring_reserve(&evd->ring, n, false);
	if (resv)
		kevd_cq_commit(evd, wcs, resv, resv);
	return resv;
}

/**
 * kevd_cq_drain_to() - one batch from the CQ, straight to @evs if it may.
 * @evd: the EVD; the caller owns it, and its ring was empty.
 * @wcs: room for @want work completions.
 * @want: at most this many, at most KEVD_BATCH.
 * @evs: room for @want events: the caller's (kevd_pull_into()).
 * @ndirect: set to how many went to @evs (the first ones), not the ring.
 *
 * Slots are reserved first, as for any drain. If the ring is still
 * empty after the poll, the completions are converted straight into @evs
 * and the slots given back unused; a poll that filled its reservation
 * (with the software stream, half the room: kevd_cq_reserve()) is
 * followed by another, up to @want. If an event was queued meanwhile,
 * the completions go into the ring behind it: it may be the ESTABLISHED
 * that the CM queued before lifting a gate (kevd_cq_ungate()) that this
 * very poll then passed, and no completion of an endpoint comes before
 * its ESTABLISHED.
 *
 * Context: the owner (a consumer's pull).
 * Return: the number of completions moved, to @evs and to the ring.
 */
u32 kevd_cq_drain_to(struct kevd *evd, struct ib_wc *wcs, u32 want,
		     struct kevd_event *evs, u32 *ndirect)
{
	u32 resv, i, got = 0;
	int n;

	kevd_assert_owner(evd);
	*ndirect = 0;
	while (got < want) {
		resv = kevd_cq_reserve(evd, want - got);
		if (!resv)
			break;
		n = kevd_cq_poll(evd, resv, wcs);
		/*
		 * The poll saw the gate lifted, so it sees the ESTABLISHED
		 * queued before that (the post's release of ring.prod, then
		 * evd->lock).
		 */
		smp_rmb();
		if (n <= 0 || kevd_ring_count(&evd->ring)) {
			kevd_cq_commit(evd, wcs, max(n, 0), resv);
			return got + max(n, 0);
		}
		for (i = 0; i < n; i++) {
			kevd_wc_to_event(&wcs[i], &evs[got + i]);
			evs[got + i].evd = evd;
		}
		kevd_cq_commit(evd, wcs, 0, resv);	/* the slots back */
		got += n;
		*ndirect = got;
		if (n < resv)
			break;
	}
	return got;
}

/**
 * kevd_cq_drain() - move completions from the CQ into the event ring.
 * @evd: the EVD; the caller owns it (KEVD_POLL_SCHED).
 * @wcs: room for KEVD_BATCH work completions.
 * @budget: at most this many completions.
 *
 * Stops early when the CQ is empty or the ring is full; in the latter
 * case the next dequeue pulls the rest or reschedules the EVD.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 * Return: the number of completions moved.
 */
u32 kevd_cq_drain(struct kevd *evd, struct ib_wc *wcs, u32 budget)
{
	bool empty;

	kevd_assert_owner(evd);
	return kevd_cq_move(evd, wcs, budget, &empty);
}

/**
 * kevd_cq_drain_empty() - kevd_cq_drain(), and was the CQ found empty?
 * @evd: the EVD; the caller owns it.
 * @wcs: room for KEVD_BATCH work completions.
 * @budget: at most this many completions.
 * @empty: set if a poll found the CQ empty (as kevd_cq_move() says).
 *
 * Context: the owner (dto/drain.c).
 * Return: the number of completions moved.
 */
u32 kevd_cq_drain_empty(struct kevd *evd, struct ib_wc *wcs, u32 budget,
			bool *empty)
{
	kevd_assert_owner(evd);
	return kevd_cq_move(evd, wcs, budget, empty);
}

/**
 * kevd_cq_unfence() - drain the CQ, then queue the fenced connection events.
 * @evd: the EVD; the caller owns it.
 * @wcs: room for KEVD_BATCH work completions.
 * @budget: at most this many completions.
 *
 * The fenced events are queued only once a poll found the CQ empty, and
 * only those fenced before the first poll (kevd_ring_fence_seq()): every
 * completion that was in the CQ when they were posted is then in the ring
 * before them (or once a poll fails after an IB_EVENT_CQ_ERR: the CQ
 * gives no more, and they would be held for good); and the markers of
 * every hold (kevd_cq_drain_hold()) are polled: the flushes a
 * disconnected QP adds later are in the ring too.
 * A full ring (the consumer's dequeue pulls or reschedules) or the budget
 * (a pass requeues; a pull leaves them to its consumer's next call, or to
 * a poller while a thread waits) leaves them fenced for a later pass.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 * Return: the number of completions moved.
 */
u32 kevd_cq_unfence(struct kevd *evd, struct ib_wc *wcs, u32 budget)
{
	u32 done, queued, more, last_seq;
	bool empty;

	kevd_assert_owner(evd);
	/* only those fenced before the polls: later ones wait for the next */
	last_seq = kevd_ring_fence_seq(&evd->ring);
	done = kevd_cq_move(evd, wcs, budget, &empty);
	/* a disconnected QP's flushes may still be on their way */
	if (!empty || READ_ONCE(evd->nholds))
		return done;
	if (kevd_ring_unfence(&evd->ring, &queued, last_seq)) {
		/* no room for all of them: as a drain stopped at a full ring */
		kevd_ring_unfence_flag(&evd->ring, &more, &evd->cq_stalled,
				       last_seq);
		queued += more;
	}
	if (queued && !list_empty(&evd->gated_qps))
		kevd_cq_lift_queued(evd);
	if (queued)
		kevd_producer_done(evd);
	return done;
}
