// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The upcall policy state machine: kevd_modify_upcall().
 *
 * Every change happens under evd->lock (the rules: kevd_internal.h). The
 * count of upcall batches and NOTIFY doorbells in progress is raised under
 * it (so a TEARDOWN that set the policy sees every one that began) and
 * dropped without it; TEARDOWN and kevd_free() sleep on evd->wq until it
 * is zero. A doorbell holds no event: a policy change holds consumers
 * back only for the batches (kevd_batches_running()).
 *
 *   DISABLE <-> SINGLE_INSTANCE <-> NOTIFY <-> MANY  (any to any)
 *   any -> TEARDOWN: returns after the last upcall in progress returned.
 *
 * INVOC_ANY fires at once for events already queued when upcalls are
 * enabled, and so does a change to NOTIFY from another policy or to
 * another doorbell object; INVOC_NEW closes a gate at the current
 * producer index and the poller delivers nothing until an event arrives
 * after it (then the queue is delivered in order, older events first).
 */
#include "kevd_internal.h"

/*
 * @others batches run besides the caller's own; until they end, nothing
 * begins and consumers' dequeues wait for what they give back
 * (kevd_batches_held()). Caller holds evd->lock.
 */
static void kevd_hold_batches(struct kevd *evd, int others)
{
	lockdep_assert_held(&evd->lock);
	WRITE_ONCE(evd->held, others > 0);
}

/* Set the INVOC_NEW gate or let INVOC_ANY through. Caller holds evd->lock. */
static void kevd_set_gate(struct kevd *evd, int flag)
{
	u32 prod = READ_ONCE(evd->ring.prod);

	lockdep_assert_held(&evd->lock);
	evd->gate_new = flag == KEVD_UPCALL_INVOC_NEW;
	evd->gate_prod = prod;
	/* NOTIFY rings for what arrived after notify_prod. */
	evd->notify_prod = evd->gate_new ? prod : prod - 1;
	evd->notify_stall_rung = false;
	evd->notify_owed = false;
}

/* Do two upcall objects call the same function with the same context? */
static bool kevd_upcall_same(const struct kevd_upcall *a,
			     const struct kevd_upcall *b)
{
	return a->func == b->func && a->wc_func == b->wc_func &&
	       a->ctx == b->ctx;
}

/*
 * kevd_modify_upcall(); @forget (TEARDOWN only) also drops the upcall
 * object in the same hold of evd->lock that sets the policy, so that no
 * enable with the object kept can come between (an upcall in progress
 * uses its own copy, taken under that lock).
 */
static int __kevd_modify_upcall(struct kevd *evd, int policy,
				const struct kevd_upcall *upcall, int flag,
				bool forget)
{
	bool enable = kevd_upcalls_enabled(policy);
	unsigned long flags;
	bool inside;
	int ret = 0;

	if (!evd || !kevd_policy_valid(policy, true) ||
	    !kevd_upcall_flag_valid(flag) || (upcall && !upcall->func))
		return -EINVAL;
	inside = kevd_current_in_upcall(evd);
	if (policy == KEVD_UPCALL_TEARDOWN) {
		if (kevd_atomic_caller())
			return -EINVAL;
		if (inside)
			return -EDEADLK;
		might_sleep();
	}

	spin_lock_irqsave(&evd->lock, flags);
	if (!(evd->state & KEVD_STATE_OPEN))
		ret = -EINVAL;
	else if (enable && !upcall && !evd->upcall.func)
		ret = -EINVAL;
	else if (enable && (evd->waiter || evd->teardowns))
		ret = -EBUSY;
	if (!ret) {
		/* a new doorbell hears of what is queued (INVOC_ANY) */
		if (policy == KEVD_UPCALL_NOTIFY &&
		    flag == KEVD_UPCALL_INVOC_ANY &&
		    (evd->policy != KEVD_UPCALL_NOTIFY ||
		     (upcall && !kevd_upcall_same(upcall, &evd->upcall))))
			evd->notify_owed = true;
		if (upcall)
			evd->upcall = *upcall;
		if (enable && (!kevd_upcalls_enabled(evd->policy) ||
			       flag != evd->upcall_flag))
			kevd_set_gate(evd, flag);
		WRITE_ONCE(evd->policy, policy);
		evd->upcall_flag = flag;
		kevd_upcall_changed(evd);
		/* batches still running may hold older events than the ring */
		kevd_hold_batches(evd, kevd_batches_running(evd));
		/*
		 * A kevd_free() may return while TEARDOWN waits below, or
		 * before an enable looks at the ring after the unlock.
		 */
		if (enable || policy == KEVD_UPCALL_TEARDOWN)
			kevd_get(evd);
		if (policy == KEVD_UPCALL_TEARDOWN) {
			evd->teardowns++;
			if (forget)
				memset(&evd->upcall, 0, sizeof(evd->upcall));
		}
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	if (ret)
		return ret;

	if (inside) {
		/* From an upcall of @evd: the rest of its batch goes back now. */
		kevd_batch_revoke(evd);
		spin_lock_irqsave(&evd->lock, flags);
		if (evd->held)	/* unless others run, nothing is held now */
			kevd_hold_batches(evd, kevd_batches_running(evd) -
					  !!kevd_poller_current_batch(evd));
		spin_unlock_irqrestore(&evd->lock, flags);
	}
	if (enable) {
		/*
		 * Pairs with kevd_producer_done(): policy set, then count;
		 * and with kevd_pull() and kevd_consumer_done(): policy set,
		 * then an unarmed let-go's mark (its CQ may hold completions
		 * nobody will signal).
		 */
		smp_mb();
		if (kevd_ring_count(&evd->ring) ||
		    READ_ONCE(evd->pull_unarmed))
			kevd_schedule(evd);
		kevd_put(evd);
	} else if (policy == KEVD_UPCALL_TEARDOWN) {
		kevd_poll_wait_upcalls(evd);
		spin_lock_irqsave(&evd->lock, flags);
		evd->teardowns--;
		spin_unlock_irqrestore(&evd->lock, flags);
		kevd_put(evd);
	}
	return 0;
}

/**
 * kevd_modify_upcall() - change the upcall policy, object or flag.
 * @evd: the EVD.
 * @policy: an &enum kevd_upcall_policy value.
 * @upcall: the new upcall object, or NULL to keep the current one.
 * @flag: an &enum kevd_upcall_flag value.
 *
 * Every upcall invocation that starts after the call returns follows the
 * new policy and upcall object; one already executing finishes (DISABLE
 * does not wait for it, TEARDOWN does). Events a batch took and did not
 * deliver stay in @evd, in order, ahead of the rest: from inside an upcall
 * of the batch, before this call returns. With %KEVD_UPCALL_TEARDOWN the
 * call returns only after every upcall in progress on @evd has returned,
 * and no upcall runs afterwards until upcalls are enabled again: not
 * meanwhile, from an upcall still running or from another thread (-EBUSY),
 * so that a TEARDOWN that returned 0 leaves the upcalls torn down.
 *
 * From inside an upcall of @evd the change holds for the next invocation
 * of its batch. From another thread or an interrupt, an invocation that
 * its poller was starting as the call ran (it checks the policy once per
 * event, without a lock) may still begin with the old policy and object
 * once after the call returns; TEARDOWN waits for it too. So the context
 * of an upcall object must stay valid until a TEARDOWN has returned.
 *
 * Context: any for the enabling policies and DISABLE (from an upcall of
 * @evd it may sleep to give events back); process context for TEARDOWN,
 * which sleeps and fails with -EDEADLK from inside an upcall of @evd
 * instead of hanging.
 * Return: 0; -EINVAL for a bad policy or flag, a NULL @evd, TEARDOWN
 * from interrupt context or with interrupts disabled, an upcall
 * object without a function, an enabling policy without any upcall or
 * an EVD that kevd_free() is freeing (while that free waits); -EBUSY when
 * enabling while a thread waits in kevd_wait() or a TEARDOWN waits for
 * the upcalls in progress; -EDEADLK.
 */
int kevd_modify_upcall(struct kevd *evd, int policy,
		       const struct kevd_upcall *upcall, int flag)
{
	return __kevd_modify_upcall(evd, policy, upcall, flag, false);
}
EXPORT_SYMBOL_GPL(kevd_modify_upcall);

/**
 * kevd_teardown_forget() - TEARDOWN, and drop the upcall object.
 * @evd: the EVD.
 *
 * For an EVD whose owner module goes while the EVD must stay (evd/main.c):
 * its upcall object is code and data of that module. Without it, nobody
 * can enable upcalls again with the object kept (-EINVAL, as for an EVD
 * that never had one), and kevd_query() no longer hands it out.
 *
 * Context: process context; may sleep.
 * Return: as kevd_modify_upcall() with %KEVD_UPCALL_TEARDOWN.
 */
int kevd_teardown_forget(struct kevd *evd)
{
	return __kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN, NULL,
				    KEVD_UPCALL_INVOC_ANY, true);
}
