// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The pull path: a consumer with upcalls disabled takes completions from
 * the CQ itself, in its own context, as ib_core's IB_POLL_DIRECT and
 * uDAPL's dat_evd_dequeue() do, instead of a poller draining the CQ and
 * then waking it (two thread hops per wake-up).
 *
 *   - kevd_dequeue() and kevd_wait() pull when the ring does not hold what
 *     they need: the consumer takes ownership of the EVD as a poller
 *     would (kevd_poll_try_own(), the NAPI busy-poll rule: only if no
 *     poller owns or has queued it; from an upcall of another EVD, also
 *     one queued for a pass, which may be the caller's own poller's:
 *     kevd_poll_own_pull()), drains the CQ into the ring within
 *     the poll budget, and, if it found nothing (or a thread waits), arms
 *     the CQ with the extended notify (dto/arm.c) before it lets go,
 *     exactly as a pass does.
 *   - While a thread waits in kevd_wait() on an EVD with upcalls disabled,
 *     the completion handler wakes it instead of scheduling a poller
 *     (kevd_comp_handler()): if a poller or another pull owns the EVD, it
 *     marks it KEVD_POLL_MISSED instead, and that owner makes one more
 *     pass. The wait sleeps until a notification is pending and nobody
 *     owns the EVD (kevd_pull_pending()), then pulls.
 *   - A wait inside an upcall of another EVD, on a poller thread, also
 *     wakes and pulls when the EVD is queued for a pass of its own
 *     poller (kevd_pull_due()), which cannot come while the upcall
 *     waits: a pass over the EVD that any thread hands on while it
 *     waits is queued there (evd/poller.c, kevd_poller_queue()). One it
 *     did not make when it leaves goes to a poller not inside an upcall
 *     (kevd_pull_leave()).
 *   - A waiter that leaves with a notification pending and nobody owning
 *     the EVD schedules it (kevd_pull_leave()): a poller still covers
 *     EVDs nobody waits on, so no completion stays in the CQ unnoticed,
 *     but after the unarmed let-go below, which the consumer's next call
 *     (or query) takes from.
 *   - A pull that found work does not arm the CQ when it lets go (as a
 *     poller defers its arm, defer_arm): the caller returns with events
 *     and comes back for more, and a busy consumer then takes no
 *     notification (and no poller pass) per call. It marks the EVD
 *     (pull_unarmed). The CQ is armed by the first pull that finds it
 *     empty, which is the one before a wait sleeps; and whoever looks at
 *     the EVD another way pulls or schedules a pass when it sees the
 *     mark: a wait that registers while another thread pulls
 *     (kevd_pull_unarmed_ok() and kevd_wait_batch() see one another),
 *     kevd_query() (which pulls, so that its count has them),
 *     kevd_modify_upcall() (upcalls need a poller) and a dequeue outside
 *     process context. A dequeue that ends a stall (evd/evd.c,
 *     kevd_consumer_done()) leaves the CQ the same way, and so does the
 *     waiter's own pull once the ring holds its threshold: it returns
 *     with the events (kevd_pull_waiter_returns()). So does a poller's
 *     pass that found work on an EVD a pull has owned before (evd/pass.c,
 *     kevd_pass_hand_back()): the consumer's next call takes from there,
 *     rather than wait on its CPU while the poller keeps the EVD.
 *   - A dequeue from inside an upcall of the EVD cannot pull (its poller
 *     owns the EVD) and needs none first: it takes the rest of the
 *     upcall's own batch, which is older than the ring
 *     (kevd_batch_take()).
 *
 * The pull uses a per-CPU buffer for the work completions, under a local
 * lock for one drain at a time (it never sleeps).
 *
 * Context: the pull itself runs in a consumer thread (process context,
 * or a kevd_dequeue() caller's atomic context: it never sleeps), or in
 * the task that posts a connection event held behind the CQ
 * (kevd_pull_or_schedule(): rdma_cm's handler, say, under
 * rcu_read_lock()), with no kevd lock held; each function's kernel-doc
 * says where it runs (the pending check runs anywhere, kevd_pull_leave()
 * under evd->lock, the batch takes on poller threads too).
 */
#include <linux/sched.h>
#include <linux/local_lock.h>
#include <linux/percpu.h>
#include "kevd_internal.h"
#include "kevd_trace.h"

/*
 * The work completions of a pull: one buffer per CPU, under a local lock
 * (preemption off, or on PREEMPT_RT a per-CPU lock) for one drain of at
 * most KEVD_BATCH at a time, never for the whole pass.
 */
struct kevd_pull_buf {
	local_lock_t lock;
	struct ib_wc wcs[KEVD_BATCH];
};

static DEFINE_PER_CPU(struct kevd_pull_buf, kevd_pull_bufs) = {
	.lock = INIT_LOCAL_LOCK(lock),
};

/*
 * The arm check may find completions, or a notification bring the pull
 * back (kevd_pull_missed()), this many times; then a poller goes on.
 */
#define KEVD_PULL_REARMS	2

/*
 * The caller's buffer of a pull that may skip the ring (kevd_pull_into()):
 * @room events fit at @evs, @got are there.
 */
struct kevd_pull_to {
	struct kevd_event *evs;
	u32 room;
	u32 got;
};

/*
 * May the next batch go straight to the caller? Only while nothing older
 * than the CQ's completions is queued: an empty ring (the owner alone
 * moves completions into it), no fenced event, no stopped batch that may
 * give older events back (kevd_batches_held()). Returns the room.
 */
static u32 kevd_pull_direct_room(struct kevd *evd, struct kevd_pull_to *to)
{
	if (kevd_ring_count(&evd->ring) || READ_ONCE(evd->ring.nfenced) ||
	    kevd_batches_held(evd))
		return 0;
	return to->room - to->got;
}

/*
 * Poll up to @want completions and convert them straight into the
 * caller's buffer: no copy into a slot and out again, no consumer lock
 * (kevd_cq_drain_to(), which puts them into the ring instead if an event
 * was queued meanwhile). Counted as the upcalls' direct delivery is
 * (posted and delivered at once).
 */
static u32 kevd_pull_direct(struct kevd *evd, struct kevd_pull_to *to,
			    u32 want)
{
	u32 n, direct;

	local_lock(&kevd_pull_bufs.lock);
	n = kevd_cq_drain_to(evd, this_cpu_ptr(&kevd_pull_bufs)->wcs, want,
			     to->evs + to->got, &direct);
	local_unlock(&kevd_pull_bufs.lock);
	if (!direct)
		return n;
	to->got += direct;
	evd->postats.direct += direct;
	if (to->got > evd->postats.max_direct)
		evd->postats.max_direct = to->got;
	return n;
}

/*
 * Drain up to @want, into the caller's buffer while it may (@to), else
 * into the ring; or (@unfence) drain into the ring and queue the fenced
 * events. Returns what it moved; fewer than @want also when the caller's
 * buffer is full (then the rest waits in the CQ for its next call).
 */
static u32 kevd_pull_drain(struct kevd *evd, struct kevd_pull_to *to,
			   u32 want, bool unfence)
{
	struct ib_wc *wcs;
	u32 n, room;

	if (to && !unfence) {
		if (to->got == to->room)
			return 0;	/* the rest is the caller's next call's */
		room = kevd_pull_direct_room(evd, to);
		if (room)
			return kevd_pull_direct(evd, to, min(want, room));
	}
	local_lock(&kevd_pull_bufs.lock);
	wcs = this_cpu_ptr(&kevd_pull_bufs)->wcs;
	n = unfence ? kevd_cq_unfence(evd, wcs, want) :
		      kevd_cq_drain(evd, wcs, want);
	local_unlock(&kevd_pull_bufs.lock);
	return n;
}

static bool kevd_pull_arm(struct kevd *evd)
{
	bool again;

	local_lock(&kevd_pull_bufs.lock);
	again = kevd_cq_arm_check(evd, this_cpu_ptr(&kevd_pull_bufs)->wcs);
	local_unlock(&kevd_pull_bufs.lock);
	return again;
}

/**
 * kevd_pull_unarmed_ok() - may the CQ stay unarmed, its consumer coming back?
 * @evd: the EVD.
 * @self_ok: a waiter that is the caller itself does not count (it
 *	returns with what it took).
 *
 * For a pull that found work (kevd_pull_pass()), for a dequeue that
 * ended a stall (kevd_consumer_done()) and for a poller's pass that found
 * work for a consumer that pulls (evd/pass.c, kevd_pass_hand_back()).
 * Yes unless a thread is registered in kevd_wait(), which may sleep on
 * the CQ's next notification, or upcalls are enabled, which need a
 * poller. The mark goes up first; the waiter and the policy are read
 * after a full barrier, as kevd_wait_batch() writes the waiter and
 * kevd_modify_upcall() the policy before they read the mark: either they
 * see the mark (and pull or schedule a pass), or this sees them. On no,
 * the mark comes down and the caller arms or schedules.
 *
 * Context: process context.
 * Return: true if the CQ may stay unarmed (the mark is up).
 */
bool kevd_pull_unarmed_ok(struct kevd *evd, bool self_ok)
{
	struct task_struct *waiter;

	WRITE_ONCE(evd->pull_unarmed, true);
	smp_mb();	/* pairs with kevd_wait_batch(), kevd_modify_upcall() */
	waiter = READ_ONCE(evd->waiter);
	if ((!waiter || (self_ok && waiter == current)) &&
	    !kevd_upcalls_enabled(READ_ONCE(evd->policy)))
		return true;
	WRITE_ONCE(evd->pull_unarmed, false);
	return false;
}

/*
 * Is the caller the registered waiter, and does the ring now hold what it
 * waits for? Then it returns with the events and comes back, as a
 * dequeue does, and its pull that found them may let go unarmed (with
 * fewer it sleeps on the CQ, which must be armed).
 */
static bool kevd_pull_waiter_returns(struct kevd *evd)
{
	return READ_ONCE(evd->waiter) == current &&
	       kevd_ring_count(&evd->ring) >= evd->wait_threshold;
}

/* A pass (a pull's or a poller's) decides anew whether the CQ stays unarmed. */
void kevd_pull_unmark(struct kevd *evd)
{
	if (unlikely(READ_ONCE(evd->pull_unarmed)))
		WRITE_ONCE(evd->pull_unarmed, false);
}

/*
 * The poll budget, as a pass's; a registered waiter's own pull takes what
 * its threshold still needs in one pass when that is more (as uDAPL's
 * wait copies the CQ): else a wait with a threshold above the budget
 * would hand the rest to a poller, and a wait that polls (timeout 0)
 * would return -ETIMEDOUT with its events in the CQ. The threshold is at
 * most the queue length: the ring has room for them.
 */
static u32 kevd_pull_budget(struct kevd *evd)
{
	u32 budget = READ_ONCE(kevd_param_budget), have;

	if (READ_ONCE(evd->waiter) != current)
		return budget;
	/* the waiter's own threshold: written before it registered */
	have = kevd_ring_count(&evd->ring);
	if (evd->wait_threshold > have)
		budget = max(budget, evd->wait_threshold - have);
	return budget;
}

/*
 * Drain in batches, within @budget (kevd_pull_budget(), for the whole
 * pull: @moved counts its passes); unless it found work for a consumer
 * who comes back (kevd_pull_unarmed_ok()), arm and check, again
 * while the check finds completions (a few times). A pull that used its
 * budget lets go the same way: what is left in the CQ is the consumer's
 * next call's, not a poller's (which would keep the EVD while each of
 * its passes finds work). Returns whether the EVD needs another pass:
 * the budget is used while a thread waits (or after the check found
 * completions), or the check kept finding work.
 */
static bool kevd_pull_pass(struct kevd *evd, struct kevd_pull_to *to,
			   u32 budget, u32 *moved, bool consumer)
{
	u32 want, n;
	int rearms = 0;

	kevd_assert_owner(evd);
	kevd_pull_unmark(evd);
	if (unlikely(READ_ONCE(evd->ring.nfenced)))
		*moved += kevd_pull_drain(evd, NULL, budget, true);
	for (;;) {
		while (*moved < budget) {
			want = min_t(u32, budget - *moved, KEVD_BATCH);
			n = kevd_pull_drain(evd, to, want, false);
			*moved += n;
			/* empty, a full ring or caller, or a parked one */
			if (n < want)
				break;
		}
		/*
		 * Held events that the release at the start kept because its
		 * poll failed, or that were fenced after it began: polls that
		 * work may find the CQ empty now, and no pass may come before
		 * this pull arms and lets go.
		 */
		if (unlikely(READ_ONCE(evd->ring.nfenced)) && *moved < budget)
			*moved += kevd_pull_drain(evd, NULL, budget - *moved,
						  true);
		if (*moved && !rearms && consumer &&
		    kevd_pull_unarmed_ok(evd, kevd_pull_waiter_returns(evd)))
			return false;
		if (*moved >= budget)
			return true;
		if (!kevd_pull_arm(evd))
			return false;
		if (++rearms > KEVD_PULL_REARMS)
			return true;
	}
}

/*
 * Scheduled during the pull (a CQ notification, mostly: KEVD_POLL_MISSED)?
 * The owner makes one more pass before it lets go (the NAPI rule): the
 * pull makes it itself, a few times, rather than handing the EVD to a
 * poller, so that a busy consumer takes no poller pass (and no switch to
 * the poller's thread) per notification. Past the bound KEVD_POLL_MISSED
 * stays set, and kevd_poll_release() hands the EVD on. The test and
 * clear is fully ordered, as the let-go's cmpxchg was: what the scheduler
 * wrote before it set the bit (a fenced event, a completion) is seen by
 * the pass that follows. After a pass that used the budget that pass
 * drains only fenced events: the rest of the CQ is the consumer's next
 * call's (kevd_pull_pass()).
 */
static bool kevd_pull_missed(struct kevd *evd, int *passes)
{
	if (!test_bit(KEVD_POLL_MISSED, &evd->poll_state) ||
	    ++*passes > KEVD_PULL_REARMS)
		return false;
	return test_and_clear_bit(KEVD_POLL_MISSED, &evd->poll_state);
}

static bool __kevd_pull(struct kevd *evd, struct kevd_pull_to *to,
			bool consumer)
{
	bool again, notified = false;
	int passes = 0;
	u32 moved = 0, budget;

	if (!evd->cq || kevd_upcalls_enabled(READ_ONCE(evd->policy)))
		return false;
	if (!in_task()) {
		/* no pull here: after an unarmed let-go, a poller takes over */
		if (READ_ONCE(evd->pull_unarmed))
			kevd_schedule(evd);
		return false;
	}
	if (!kevd_poll_own_pull(evd))
		return false;
	/* once: @moved counts across the passes of this pull */
	budget = kevd_pull_budget(evd);
	do {
		notified |= test_and_clear_bit(KEVD_POLL_NOTIFIED,
					       &evd->poll_state);
		again = kevd_pull_pass(evd, to, budget, &moved, consumer);
	} while (!again && kevd_pull_missed(evd, &passes));
	/* as a pass counts them: a waiter's pull takes the notification */
	if (notified && !moved)
		evd->postats.empty_notifications++;
	kevd_dim_sample(evd, moved);
	/*
	 * A pull delivers nothing: if upcalls were enabled meanwhile, the
	 * events it queued (or the CQ it left unarmed) need a poller. Pairs
	 * with kevd_modify_upcall()'s barrier (policy set, then count and
	 * pull_unarmed read): one of us sees the other.
	 */
	smp_mb();
	if (kevd_upcalls_enabled(READ_ONCE(evd->policy)))
		again = true;
	if (consumer)
		evd->postats.pulls++;
	trace_kevd_pull(evd, moved, again);
	kevd_poll_release(evd, again);
	return true;
}

/**
 * kevd_pull() - take completions from the CQ in the caller's context.
 * @evd: the EVD.
 *
 * Does nothing for an EVD without a CQ, with upcalls enabled, owned by a
 * poller (which will fill the ring and wake the caller) or outside
 * process context (where, after an unarmed let-go, it schedules a pass).
 * Else it drains the CQ into the ring, in CQ order, with the ring's
 * backpressure, again if a notification came meanwhile, and
 * arms it before letting go unless it found work (kevd_pull_unarmed_ok()).
 *
 * Context: process context; does not sleep.
 * Return: true if it made a pass (the ring may hold more now).
 */
bool kevd_pull(struct kevd *evd)
{
	return __kevd_pull(evd, NULL, true);
}

/**
 * kevd_pull_or_schedule() - the pass an EVD needs: the caller's, or a poller's.
 * @evd: the EVD.
 * @consumer: the caller stands for the consumer, who comes back: a query
 *	after a pull's unarmed let-go, which may let go so again and counts
 *	in the pulls. Else (a post of a connection event that waits behind
 *	the CQ) the pass lets go as a poller's would, armed, or with a pass
 *	queued for what it left, and is no sign that the consumer pulls
 *	(evd/pass.c, kevd_pass_hand_back()).
 *
 * In process context the caller makes the pass itself (kevd_pull())
 * where it may, so that what the pass queues is there when it returns;
 * else (upcalls enabled, another owner, atomic context outside a task)
 * it schedules one.
 *
 * Context: any; does not sleep.
 */
void kevd_pull_or_schedule(struct kevd *evd, bool consumer)
{
	if (!(in_task() && __kevd_pull(evd, NULL, consumer)))
		kevd_schedule(evd);
}

/**
 * kevd_pull_into() - kevd_pull(), straight into the caller's buffer first.
 * @evd: the EVD.
 * @evs: room for @room events, which a take found missing from the ring.
 * @room: at least 1.
 * @got: the number of events it wrote at @evs.
 *
 * While the ring is empty (and nothing fenced or held back is older),
 * the pull converts completions straight into @evs, as the upcalls'
 * direct delivery does: no second copy, no consumer lock. The slots are
 * reserved as for any drain and given back unused, so that a batch
 * polled after an event was queued meanwhile goes into the ring behind
 * it (kevd_cq_drain_to()). Once @evs is full it stops (what is left in
 * the CQ is the caller's next call's, unless another thread waits: then
 * the pull arms, or hands the EVD to a poller); once the ring holds
 * events (a completion the arm check found, an event posted meanwhile)
 * it drains into the ring, as kevd_pull() does, and the caller takes
 * those after the ones at @evs, which are older.
 *
 * Context: process context; does not sleep.
 * Return: true if it made a pass (the ring may hold more now).
 */
bool kevd_pull_into(struct kevd *evd, struct kevd_event *evs, u32 room,
		    u32 *got)
{
	struct kevd_pull_to to = { .evs = evs, .room = room };
	bool pulled = __kevd_pull(evd, &to, true);

	*got = to.got;
	return pulled;
}

/**
 * kevd_pull_pending() - should a waiter wake up and pull?
 * @evd: the EVD.
 *
 * Context: any; lockless (a wait condition).
 * Return: true when a notification came and nobody owns the EVD.
 */
bool kevd_pull_pending(struct kevd *evd)
{
	unsigned long val = READ_ONCE(evd->poll_state);

	return (val & BIT(KEVD_POLL_NOTIFIED)) &&
	       !(val & (BIT(KEVD_POLL_SCHED) | BIT(KEVD_POLL_DEAD)));
}

/**
 * kevd_pull_due() - should a sleeping waiter wake up and pull?
 * @evd: the EVD.
 *
 * kevd_pull_pending(), or (from an upcall of another EVD) @evd waits for
 * a pass of the waiter's own poller, which only the waiter can make now
 * (kevd_poll_queued_here()): its pull takes @evd off the queue. Only
 * for an EVD with a CQ, which a pull passes over.
 *
 * Context: process context (a wait condition); takes a poller's lock.
 * Return: true when the waiter should pull.
 */
bool kevd_pull_due(struct kevd *evd)
{
	return kevd_pull_pending(evd) ||
	       (evd->cq && kevd_poll_queued_here(evd));
}

/**
 * kevd_pull_leave() - a waiter left: hand a pending notification on.
 * @evd: the EVD; the waiter is no longer registered.
 *
 * The completion handler saw the waiter under evd->lock and woke it
 * instead of scheduling a poller; kevd_wait() unregisters the waiter and
 * calls this under the same hold of that lock, so every such
 * notification is seen here (or was pulled), and nothing touches the EVD
 * after the lock is dropped (kevd_free() may succeed then). A waiter in
 * an upcall of another EVD also passes on a pass queued on its own
 * poller that it did not make (kevd_poll_move_off_here()).
 *
 * Context: caller holds evd->lock.
 */
void kevd_pull_leave(struct kevd *evd)
{
	lockdep_assert_held(&evd->lock);
	if (kevd_pull_pending(evd))
		kevd_schedule(evd);
	else if (evd->cq)
		kevd_poll_move_off_here(evd);
}

/* Event @i of @b, as a dequeue returns it. */
static void kevd_batch_event(const struct kevd_batch *b, u32 i,
			     struct kevd_event *ev)
{
	if (b->wcs)
		kevd_cq_convert(b->evd, &b->wcs[i], ev);
	else
		*ev = b->evs[i];
}

/**
 * kevd_batch_rest() - how many events kevd_batch_take() would return.
 * @evd: the EVD.
 *
 * Context: any; non-zero only inside an upcall of @evd, on its poller
 * thread.
 * Return: the events of the running upcall's batch after its own.
 */
u32 kevd_batch_rest(struct kevd *evd)
{
	struct kevd_batch *b = kevd_poller_current_batch(evd);

	return b && b->pos + 1 < b->n ? b->n - b->pos - 1 : 0;
}

/**
 * kevd_batch_take() - an upcall's own dequeue takes the rest of its batch.
 * @evd: the EVD.
 * @evs: room for @max events.
 * @max: at most this many.
 *
 * The events a batch took for the invocations after the running one are
 * older than any in the ring (a pop, a direct poll): a dequeue from
 * inside that invocation returns them first, in order, and the batch
 * goes on after them. A raw-flavour poll (wc_func) has no rest.
 *
 * Context: any; takes something only inside an upcall of @evd, on its
 * poller thread.
 * Return: the number taken.
 */
u32 kevd_batch_take(struct kevd *evd, struct kevd_event *evs, u32 max)
{
	struct kevd_batch *b = kevd_poller_current_batch(evd);
	u32 from, k, i;

	if (!b || b->pos + 1 >= b->n)
		return 0;
	from = b->pos + 1;
	k = min(max, b->n - from);
	for (i = 0; i < k; i++)
		kevd_batch_event(b, from + i, &evs[i]);
	b->pos += k;
	b->taken += k;
	return k;
}
