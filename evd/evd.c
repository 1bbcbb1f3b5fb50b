// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * EVD objects and the kDAT calls: create, free, dequeue, post_se, resize,
 * query, wait. The upcall policy lives in upcall_policy/, the CQ in dto/.
 *
 * Locking: kevd_internal.h has the rules and the order; kevd_list_lock
 * (evd/debugfs.c) guards the global list of EVDs.
 *
 * Lifetime: a kref. The consumer holds one reference from kevd_create()
 * to kevd_free(); an EVD that names another as its async EVD holds one on
 * it; a kevd_resize() holds one for its call (it may meet a free in
 * progress, and fail, while that free returns); the debugfs reader relies
 * on kevd_list_lock instead (an EVD leaves the list before its last
 * reference goes). kevd_free() quiesces
 * the EVD (no upcall, no poller, no CQ handler) before it drops the
 * consumer's reference. A post is not quiesced: the event it publishes
 * may be taken, and the EVD freed, before it returns. It runs under
 * rcu_read_lock(), and the memory goes a grace period after the last
 * reference.
 */
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include "kevd_internal.h"
#include "kevd_trace.h"

static const u32 kevd_stream_flag[KEVD_NR_STREAMS] = {
	[KEVD_STREAM_DTO]		= KEVD_DTO_FLAG,
	[KEVD_STREAM_RMR_BIND]		= KEVD_RMR_BIND_FLAG,
	[KEVD_STREAM_CR]		= KEVD_CR_FLAG,
	[KEVD_STREAM_CONNECTION]	= KEVD_CONNECTION_FLAG,
	[KEVD_STREAM_ASYNC]		= KEVD_ASYNC_FLAG,
	[KEVD_STREAM_SOFTWARE]		= KEVD_SOFTWARE_FLAG,
};

/* Is @num one of enum kevd_event_number (not merely in a known stream)? */
static bool kevd_event_number_valid(u32 num)
{
	switch (num) {
	case KEVD_DTO_COMPLETION_EVENT:
	case KEVD_RMR_BIND_COMPLETION_EVENT:
	case KEVD_CONNECTION_REQUEST_EVENT:
	case KEVD_CONNECTION_EVENT_ESTABLISHED:
	case KEVD_CONNECTION_EVENT_PEER_REJECTED:
	case KEVD_CONNECTION_EVENT_NON_PEER_REJECTED:
	case KEVD_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
	case KEVD_CONNECTION_EVENT_DISCONNECTED:
	case KEVD_CONNECTION_EVENT_BROKEN:
	case KEVD_CONNECTION_EVENT_TIMED_OUT:
	case KEVD_CONNECTION_EVENT_UNREACHABLE:
	case KEVD_ASYNC_ERROR_EVD_OVERFLOW:
	case KEVD_ASYNC_ERROR_IA_CATASTROPHIC:
	case KEVD_ASYNC_ERROR_EP_BROKEN:
	case KEVD_ASYNC_ERROR_TIMED_OUT:
	case KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR:
	case KEVD_SOFTWARE_EVENT:
		return true;
	}
	return false;
}

/*
 * Slots were freed after a CQ drain stopped at a full ring (the caller
 * cleared cq_stalled): restart it. A dequeue or wait (@taker) in process
 * context with upcalls disabled pulls the rest itself, when its ring
 * falls short (dto/pull.c): it leaves the CQ as a pull's unarmed let-go
 * does, mark first, and schedules a pass only if a thread waits.
 * Anything else (a resize, a dequeue outside process context) schedules
 * one.
 */
static void kevd_consumer_done(struct kevd *evd, bool taker)
{
	if (taker && in_task() && evd->cq && kevd_pull_unarmed_ok(evd, true))
		return;
	kevd_schedule(evd);
}

static void kevd_release_rcu(struct rcu_head *rcu)
{
	struct kevd *evd = container_of(rcu, struct kevd, rcu);
	bool pinned = !evd->owner;	/* no module: kevd holds itself */
	struct list_head *a, *tmp;

	list_for_each_safe(a, tmp, &evd->kept)
		kfree(a);		/* kevd_keep(): the list_head first */
	kevd_ring_destroy(&evd->ring);
	kevd_dim_free(evd);
	kfree(evd);
	/* kevd's exit waits for this callback (rcu_barrier()) */
	if (pinned)
		module_put(THIS_MODULE);
}

static void kevd_release(struct kref *ref)
{
	struct kevd *evd = container_of(ref, struct kevd, ref);

	call_rcu(&evd->rcu, kevd_release_rcu);
}

/**
 * kevd_put() - drop a reference; the last one frees the memory.
 * @evd: the EVD.
 *
 * The memory goes after an RCU grace period: the posts
 * (kevd_post_se(), kevd_post_event()) touch the EVD after they publish
 * their event, under rcu_read_lock(), and a consumer may take that
 * event and free the EVD before the post returns. kevd's exit waits for
 * the last of these (rcu_barrier()).
 */
void kevd_put(struct kevd *evd)
{
	kref_put(&evd->ref, kevd_release);
}

static void kevd_set_overflowed(struct kevd *evd)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	WRITE_ONCE(evd->state, evd->state | KEVD_STATE_OVERFLOWED);
	evd->overflow_marks++;
	spin_unlock_irqrestore(&evd->lock, flags);
}

static const char *kevd_stream_name(enum kevd_stream stream)
{
	static const char * const names[KEVD_NR_STREAMS] = {
		[KEVD_STREAM_DTO]		= "DTO",
		[KEVD_STREAM_RMR_BIND]		= "RMR bind",
		[KEVD_STREAM_CR]		= "connection request",
		[KEVD_STREAM_CONNECTION]	= "connection",
		[KEVD_STREAM_ASYNC]		= "async",
		[KEVD_STREAM_SOFTWARE]		= "software",
	};

	return stream < KEVD_NR_STREAMS ? names[stream] : "unknown";
}

/**
 * kevd_raise_overflow() - report that @evd dropped an event.
 * @evd: the EVD that overflowed (the drop is already counted).
 * @stream: the stream whose event was dropped.
 *
 * Marks @evd overflowed, warns (rate-limited, naming the EVD) and posts
 * %KEVD_ASYNC_ERROR_EVD_OVERFLOW, whose handle is @evd, to its async EVD.
 * An async EVD that is itself full counts the drop and enters the
 * overflowed state too, and raises nothing further.
 *
 * Context: any.
 * Return: 0, or -ENOSPC if the overflow event itself was dropped.
 */
int kevd_raise_overflow(struct kevd *evd, enum kevd_stream stream)
{
	struct kevd_event ev = {
		.event_number = KEVD_ASYNC_ERROR_EVD_OVERFLOW,
		.async = { .handle = evd, .reason = stream },
	};
	struct kevd *aevd = evd->async_evd;
	int ret = 0;

	kevd_set_overflowed(evd);
	trace_kevd_overflow(evd, stream);
	pr_warn_ratelimited("kevd: EVD %u overflowed: a %s event was dropped%s\n",
			    evd->id, kevd_stream_name(stream),
			    aevd ? "" : " (no async EVD)");
	if (!aevd)
		return 0;
	ev.evd = aevd;
	/* the event may be taken, @evd and @aevd freed (kevd_post_se()) */
	rcu_read_lock();
	if (kevd_ring_post(&aevd->ring, &ev, KEVD_STREAM_ASYNC, true)) {
		kevd_set_overflowed(aevd);
		pr_warn_ratelimited("kevd: EVD %u overflowed: the overflow event of EVD %u was dropped\n",
				    aevd->id, evd->id);
		ret = -ENOSPC;
	} else {
		kevd_producer_done(aevd);
	}
	rcu_read_unlock();
	return ret;
}

/* The async event handler of the EVD's CQ (kevd_cq_create()). */
static void kevd_cq_event(struct ib_event *event, void *ctx)
{
	struct kevd *evd = ctx;
	unsigned long flags;
	bool raise;

	if (event->event != IB_EVENT_CQ_ERR)
		return;
	/*
	 * Once the pass below released the held events, or the overflow
	 * event is on the async EVD, a consumer may free this EVD, and not
	 * every provider waits for this handler before it destroys the CQ:
	 * the EVD's memory lasts until a grace period after its free. The
	 * store of cq_error_reported may already let a running pass release
	 * them, so the read-side section begins before it.
	 */
	rcu_read_lock();
	/*
	 * A CQ overrun. Some providers lose the one completion and go on
	 * (rxe): each is counted and logged; the overflow event, naming this
	 * EVD, comes once until kevd_resize() (the remedy) re-arms it.
	 */
	spin_lock_irqsave(&evd->lock, flags);
	raise = !evd->cq_overrun_raised;
	evd->cq_overrun_raised = true;
	if (!raise)
		evd->cq_overruns_unraised++;
	WRITE_ONCE(evd->cq_error_reported, true);
	spin_unlock_irqrestore(&evd->lock, flags);
	kevd_ring_count_lost(&evd->ring, KEVD_STREAM_DTO, 0, 1);
	/* connection events held behind a CQ that fails its polls go now */
	kevd_schedule(evd);
	if (raise)
		kevd_raise_overflow(evd, KEVD_STREAM_DTO);
	else
		pr_warn_ratelimited("kevd: EVD %u: its CQ overran again: a completion was lost (overflow raised already: resize the EVD)\n",
				    evd->id);
	rcu_read_unlock();
}

/**
 * kevd_attr_init() - fill attributes with kevd's defaults.
 * @attr: the attributes; NULL does nothing.
 *
 * Queue length and upcall policy come from the module parameters
 * default_qlen and default_policy; streams are the DAT default
 * (%KEVD_DEFAULT_FLAG), INVOC_NEW, no upcall, any CPU and vector.
 *
 * Context: any.
 */
void kevd_attr_init(struct kevd_attr *attr)
{
	if (!attr)
		return;
	memset(attr, 0, sizeof(*attr));
	attr->qlen = READ_ONCE(kevd_param_qlen);
	attr->flags = KEVD_DEFAULT_FLAG;
	attr->upcall_policy = READ_ONCE(kevd_param_policy);
	attr->upcall_flag = KEVD_UPCALL_INVOC_NEW;
	attr->cpu = KEVD_ANY;
	attr->comp_vector = KEVD_ANY;
}
EXPORT_SYMBOL_GPL(kevd_attr_init);

/*
 * A new EVD uses @aevd as its async EVD: kevd_free(@aevd) refuses from now
 * on. Under @aevd's lock, as kevd_free() checks: an EVD being freed is
 * refused (-EINVAL).
 */
static int kevd_async_hold(struct kevd *aevd)
{
	unsigned long flags;
	int ret = -EINVAL;

	spin_lock_irqsave(&aevd->lock, flags);
	if (aevd->state & KEVD_STATE_OPEN) {
		atomic_inc(&aevd->async_users);
		kevd_get(aevd);
		ret = 0;
	}
	spin_unlock_irqrestore(&aevd->lock, flags);
	return ret;
}

static void kevd_async_unhold(struct kevd *aevd)
{
	atomic_dec(&aevd->async_users);
	kevd_put(aevd);
}

static int kevd_check_attr(struct ib_device *dev, const struct kevd_attr *attr)
{
	if (!attr || !attr->qlen || attr->qlen > KEVD_MAX_QLEN)
		return -EINVAL;
	if (!attr->flags || (attr->flags & ~KEVD_ALL_FLAGS))
		return -EINVAL;
	if ((attr->flags & KEVD_DTO_FLAG) && !dev)
		return -EINVAL;
	if (!kevd_policy_valid(attr->upcall_policy, false) ||
	    !kevd_upcall_flag_valid(attr->upcall_flag))
		return -EINVAL;
	if (kevd_upcalls_enabled(attr->upcall_policy) && !attr->upcall.func)
		return -EINVAL;
	if (attr->cpu != KEVD_ANY && (attr->cpu < 0 || attr->cpu >= nr_cpu_ids))
		return -EINVAL;
	if (attr->comp_vector != KEVD_ANY && attr->comp_vector < 0)
		return -EINVAL;
	if (attr->async_evd && !(attr->async_evd->flags & KEVD_ASYNC_FLAG))
		return -EINVAL;
	return 0;
}

/**
 * __kevd_create() - create an EVD; consumers call kevd_create().
 * @dev: the device of the DTO stream's CQ; may be NULL without
 *	%KEVD_DTO_FLAG.
 * @attr: attributes, from kevd_attr_init() and the consumer.
 * @owner: the module that owns it (THIS_MODULE of the caller), or NULL:
 *	no module. If that module unloads with the EVD open, kevd reports
 *	it and frees it (evd/main.c). An EVD that no module owns keeps kevd
 *	loaded until it is freed (its CQ's handlers are kevd's code).
 *
 * With %KEVD_DTO_FLAG the EVD owns a CQ on @dev (kevd_cq()), armed and
 * served by a poller thread. The queue length may be larger than asked;
 * kevd_query() reports it.
 *
 * Context: process context; may sleep.
 * Return: the EVD; ERR_PTR(-EINVAL) from interrupt context or with
 * interrupts disabled, for a queue length of 0 or above
 * 2^20, no or unknown stream flags, the DTO stream without a device,
 * TEARDOWN or an unknown policy, an enabling policy without an upcall
 * function, a bad upcall flag or CPU, a negative completion vector other
 * than %KEVD_ANY, or an async EVD without the async
 * stream or being freed; -ENOMEM; or the error of ib_create_cq().
 */
struct kevd *__kevd_create(struct ib_device *dev, const struct kevd_attr *attr,
			   struct module *owner)
{
	u32 headroom = 0, vector;
	struct kevd *evd;
	int ret, cpu;

	if (kevd_atomic_caller())
		return ERR_PTR(-EINVAL);
	might_sleep();
	ret = kevd_check_attr(dev, attr);
	if (ret)
		return ERR_PTR(ret);

	cpu = attr->cpu;
	evd = kzalloc(sizeof(*evd), GFP_KERNEL);
	if (!evd)
		return ERR_PTR(-ENOMEM);
	if (attr->flags & (KEVD_CR_FLAG | KEVD_CONNECTION_FLAG |
			   KEVD_ASYNC_FLAG | KEVD_RMR_BIND_FLAG))
		headroom = KEVD_HEADROOM;
	ret = kevd_ring_init(&evd->ring, attr->qlen, headroom);
	if (ret)
		goto err_free;

	spin_lock_init(&evd->lock);
	init_waitqueue_head(&evd->wq);
	mutex_init(&evd->resize_mutex);
	kref_init(&evd->ref);
	INIT_LIST_HEAD(&evd->poll_node);
	atomic_set(&evd->async_users, 0);
	atomic_set(&evd->cm_users, 0);
	INIT_LIST_HEAD(&evd->kept);
	INIT_LIST_HEAD(&evd->gated_qps);
	INIT_LIST_HEAD(&evd->drains);
	INIT_DELAYED_WORK(&evd->hold_work, kevd_cq_holds_expire);
	atomic_set(&evd->upcalls_running, 0);
	evd->flags = attr->flags;
	evd->policy = attr->upcall_policy;
	evd->upcall = attr->upcall;
	evd->upcall_flag = attr->upcall_flag;
	evd->state = KEVD_STATE_OPEN;
	evd->owner = owner;

	if (attr->async_evd) {
		ret = kevd_async_hold(attr->async_evd);
		if (ret)
			goto err_ring;
		evd->async_evd = attr->async_evd;
	}
	if (attr->flags & KEVD_DTO_FLAG) {
		/* the CQ's vector, then the poller where it interrupts */
		vector = kevd_cq_pick_vector(dev, attr->comp_vector);
		if (cpu == KEVD_ANY)
			cpu = kevd_cq_vector_cpu(dev, vector);
		evd->home = kevd_poller_pick(cpu);
		ret = kevd_cq_create(evd, dev, attr, vector, kevd_cq_event);
		if (ret)
			goto err_async;
	} else {
		evd->home = kevd_poller_pick(cpu);
	}
	if (!owner)
		__module_get(THIS_MODULE);	/* until its memory goes */
	kevd_register(evd);
	trace_kevd_create(evd);
	if (evd->arm_failed)	/* the CQ is not armed: a pass arms it */
		kevd_schedule(evd);
	return evd;

err_async:
	if (evd->async_evd)
		kevd_async_unhold(evd->async_evd);
err_ring:
	kevd_dim_free(evd);
	kevd_ring_destroy(&evd->ring);
err_free:
	kfree(evd);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_GPL(__kevd_create);

/**
 * kevd_free() - destroy an EVD.
 * @evd: the EVD.
 *
 * Refused while a stream still feeds the EVD: QPs on its CQ, EVDs that
 * use it as their async EVD, CM bindings that post to it, a thread in
 * kevd_wait() or in kevd_resize(). Otherwise upcalls
 * are torn down, the poller lets go, the CQ is destroyed, queued events
 * are discarded and the memory is released: when kevd_free() returns, no
 * upcall runs or will run and no poller or handler touches the EVD.
 *
 * Context: process context; may sleep. Not from an upcall of @evd.
 * Return: 0, -EINVAL for a NULL @evd, a call from interrupt context or
 * with interrupts disabled, or an EVD that another thread is
 * freeing (while that free waits; after it returned the EVD is gone, as
 * for any call), -EBUSY while referenced, or -EDEADLK from inside an
 * upcall of @evd.
 */
int kevd_free(struct kevd *evd)
{
	unsigned long flags;
	u32 parked;

	if (!evd || kevd_atomic_caller())
		return -EINVAL;
	if (kevd_current_in_upcall(evd))
		return -EDEADLK;
	might_sleep();
	/* being freed: its free may hold the mutex below while it marks it */
	if (!(READ_ONCE(evd->state) & KEVD_STATE_OPEN))
		return -EINVAL;
	/* a resize in progress uses the EVD; one that begins now fails */
	if (!mutex_trylock(&evd->resize_mutex))
		return -EBUSY;

	spin_lock_irqsave(&evd->lock, flags);
	/* another thread's free waits: it alone tears down */
	if (!(evd->state & KEVD_STATE_OPEN)) {
		spin_unlock_irqrestore(&evd->lock, flags);
		mutex_unlock(&evd->resize_mutex);
		return -EINVAL;
	}
	if (evd->waiter || atomic_read(&evd->async_users) ||
	    atomic_read(&evd->cm_users) || kevd_cq_busy(evd)) {
		spin_unlock_irqrestore(&evd->lock, flags);
		mutex_unlock(&evd->resize_mutex);
		return -EBUSY;
	}
	WRITE_ONCE(evd->policy, KEVD_UPCALL_TEARDOWN);
	kevd_upcall_changed(evd);
	WRITE_ONCE(evd->state, evd->state & ~KEVD_STATE_OPEN);
	set_bit(KEVD_POLL_DEAD, &evd->poll_state);
	spin_unlock_irqrestore(&evd->lock, flags);
	mutex_unlock(&evd->resize_mutex);

	/* No upcall in progress, the poller has let go: then the CQ. */
	kevd_poll_kick_waiters();
	kevd_poll_wait_upcalls(evd);
	kevd_poll_wait_idle(evd);
	kevd_cq_destroy(evd);

	/* nothing produces or consumes any more: count what is left */
	parked = kevd_cq_drop_parked(evd);
	/* a parked completion was polled, never queued: posted, discarded */
	kevd_ring_count_lost(&evd->ring, KEVD_STREAM_DTO, parked, 0);
	WRITE_ONCE(evd->discarded, kevd_ring_count(&evd->ring) +
				   kevd_ring_drop_fenced(&evd->ring) + parked);
	trace_kevd_free(evd);
	kevd_unregister(evd);
	if (evd->async_evd)
		kevd_async_unhold(evd->async_evd);
	kevd_put(evd);
	return 0;
}
EXPORT_SYMBOL_GPL(kevd_free);

/**
 * kevd_cm_hold() - a CM binding will post to @evd: kevd_free() refuses.
 * @evd: an open EVD.
 * @flag: the stream flag it must have.
 *
 * Context: any; takes evd->lock.
 * Return: 0, or -EINVAL for an EVD without @flag or being freed.
 */
int kevd_cm_hold(struct kevd *evd, u32 flag)
{
	unsigned long flags;
	int ret = -EINVAL;

	spin_lock_irqsave(&evd->lock, flags);
	if ((evd->state & KEVD_STATE_OPEN) && (evd->flags & flag)) {
		atomic_inc(&evd->cm_users);
		ret = 0;
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	return ret;
}

/**
 * kevd_cm_unhold() - a CM binding no longer posts to @evd.
 * @evd: an EVD kevd_cm_hold() succeeded on.
 *
 * Context: any.
 */
void kevd_cm_unhold(struct kevd *evd)
{
	atomic_dec(&evd->cm_users);
}

/**
 * kevd_keep() - keep memory that events of @evd point to until it goes.
 * @evd: an EVD kevd_cm_hold() succeeded on, and not yet released.
 * @allocs: kmalloc()ed blocks, each beginning with its list_head; they
 *	move to @evd, which kfree()s them when its memory goes.
 *
 * Context: any; takes evd->lock.
 */
void kevd_keep(struct kevd *evd, struct list_head *allocs)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	list_splice_tail_init(allocs, &evd->kept);
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * Take up to @max events, oldest first. Under cons_lock: a batch that a
 * policy change stopped gives its events back under it too.
 */
static u32 kevd_take(struct kevd *evd, struct kevd_event *evs, u32 max)
{
	bool stalled = false;
	unsigned long flags;
	u32 n = 0;

	spin_lock_irqsave(&evd->ring.cons_lock, flags);
	if (!kevd_batches_held(evd))
		n = __kevd_ring_pop(&evd->ring, evs, max);
	/* a drain flags a full ring under this lock (kevd_cq_reserve()) */
	if (n && unlikely(READ_ONCE(evd->cq_stalled))) {
		WRITE_ONCE(evd->cq_stalled, false);
		stalled = true;
	}
	spin_unlock_irqrestore(&evd->ring.cons_lock, flags);
	if (stalled)
		kevd_consumer_done(evd, true);
	return n;
}

/* kevd_take(), without the lock round trip when nothing is queued. */
static u32 kevd_take_queued(struct kevd *evd, struct kevd_event *evs, u32 max)
{
	return kevd_ring_count(&evd->ring) ? kevd_take(evd, evs, max) : 0;
}

/*
 * A take that finds the ring short by at least this many, or by any
 * number once it has events, pulls straight into the caller's buffer
 * (kevd_pull_into()); for less (a one-event dequeue on an empty ring) a
 * poll of the few it needs would cost more than the ring's copy, so the
 * pull fills the ring for the calls that follow.
 */
#define KEVD_PULL_INTO_MIN	16

/*
 * Take what the ring holds; if that is not @max, pull completions from
 * the CQ in the caller's context (dto/pull.c), straight into @evs or into
 * the ring, and take again: the ring's events are older than the pull's,
 * and those the pull wrote at @evs older than what it left in the ring,
 * so the order holds.
 */
static u32 __kevd_take_or_pull(struct kevd *evd, struct kevd_event *evs,
			       u32 max)
{
	u32 got = kevd_take_queued(evd, evs, max);
	u32 direct;

	if (got == max)
		return got;
	if (got || max - got >= KEVD_PULL_INTO_MIN) {
		if (!kevd_pull_into(evd, evs + got, max - got, &direct))
			return got;
		got += direct;
	} else if (!kevd_pull(evd)) {
		return got;
	}
	if (got < max)
		got += kevd_take_queued(evd, evs + got, max - got);
	return got;
}

/*
 * Take up to @max events: from inside an upcall of @evd, first the rest
 * of its batch, which comes before the ring (kevd_batch_take()); one
 * load when no upcall of @evd runs. Then the ring, and with @pull the CQ
 * too (__kevd_take_or_pull()), or the ring alone (kevd_take()).
 */
static __always_inline u32 kevd_take_rest_first(struct kevd *evd,
						struct kevd_event *evs,
						u32 max, bool pull)
{
	u32 got = 0;

	if (unlikely(atomic_read(&evd->upcalls_running))) {
		got = kevd_batch_take(evd, evs, max);
		if (got == max)
			return got;
	}
	return got + (pull ? __kevd_take_or_pull(evd, evs + got, max - got) :
			     kevd_take(evd, evs + got, max - got));
}

/* A dequeue's take: the rest of a running batch, the ring, the CQ. */
static u32 kevd_take_or_pull(struct kevd *evd, struct kevd_event *evs,
			     u32 max)
{
	return kevd_take_rest_first(evd, evs, max, true);
}

/* The events a take here would see: the ring's, and a batch's rest. */
static u32 kevd_take_count(struct kevd *evd)
{
	u32 n = kevd_ring_count(&evd->ring);

	if (unlikely(atomic_read(&evd->upcalls_running)))
		n += kevd_batch_rest(evd);
	return n;
}

/**
 * kevd_dequeue() - take the oldest event.
 * @evd: the EVD.
 * @ev: where to put it.
 *
 * Events that an upcall batch took and gives back after a policy change
 * are older than any in the ring: until the batches that may hold them
 * have ended, a dequeue outside their upcalls finds the EVD empty.
 *
 * With upcalls disabled, a dequeue in process context that finds the
 * ring empty takes completions from the CQ itself (in CQ order, no poller
 * involved), unless a poller owns the EVD at that moment.
 *
 * From inside an upcall of @evd, the events its batch took for the
 * invocations after the running one come first: they are older than the
 * ring's, and the batch skips them.
 *
 * Context: any.
 * Return: 0, -EAGAIN when the EVD is empty, -EINVAL for NULL arguments.
 */
int kevd_dequeue(struct kevd *evd, struct kevd_event *ev)
{
	if (!evd || !ev)
		return -EINVAL;
	return kevd_take_or_pull(evd, ev, 1) ? 0 : -EAGAIN;
}
EXPORT_SYMBOL_GPL(kevd_dequeue);

/**
 * kevd_dequeue_batch() - take up to @n of the oldest events in one call.
 * @evd: the EVD.
 * @evs: room for @n events; filled oldest first.
 * @n: at most this many, at least 1.
 *
 * What @n calls of kevd_dequeue() would return, with one lock round-trip
 * (an extension beyond DAT, as ib_poll_cq() takes many completions at
 * once): the same order, the same rule for events a stopped batch gives
 * back, the same pull from the CQ when the ring holds fewer than @n;
 * that pull converts completions straight into @evs while nothing older
 * is queued (Documentation/kevd/design.rst, the pull path).
 *
 * Context: any.
 * Return: the number of events taken, 1 .. @n; -EAGAIN when the EVD is
 * empty; -EINVAL for NULL arguments or @n of 0.
 */
int kevd_dequeue_batch(struct kevd *evd, struct kevd_event *evs, u32 n)
{
	u32 got;

	if (!evd || !evs || !n)
		return -EINVAL;
	got = kevd_take_or_pull(evd, evs, min_t(u32, n, INT_MAX));
	return got ? got : -EAGAIN;
}
EXPORT_SYMBOL_GPL(kevd_dequeue_batch);

/**
 * kevd_post_se() - post a software event.
 * @evd: an EVD with %KEVD_SOFTWARE_FLAG.
 * @pointer: the event's pointer.
 *
 * The queue is full when its queue length of events are queued. The
 * events an upcall batch took, and those dequeued, no longer count,
 * however long the upcalls run. A poll of the EVD's CQ in progress counts
 * the room it reserved for the completions it may take (api.rst): that
 * -ENOSPC lasts one poll.
 *
 * Context: any, hard IRQ included.
 * Return: 0, -EINVAL for a NULL @evd or an EVD without the software
 * stream, -ENOSPC when the queue is full (nothing is queued and no
 * overflow is raised).
 */
int kevd_post_se(struct kevd *evd, void *pointer)
{
	struct kevd_event ev = {
		.event_number = KEVD_SOFTWARE_EVENT,
		.evd = evd,
		.software.pointer = pointer,
	};
	int ret;

	if (!evd || !(evd->flags & KEVD_SOFTWARE_FLAG))
		return -EINVAL;
	rcu_read_lock();	/* the event may be taken, the EVD freed */
	ret = kevd_ring_post(&evd->ring, &ev, KEVD_STREAM_SOFTWARE, false);
	if (!ret)
		kevd_producer_done(evd);
	rcu_read_unlock();
	return ret;
}
EXPORT_SYMBOL_GPL(kevd_post_se);

/*
 * A connection event of an endpoint must not overtake the completions its
 * endpoint has in the CQ: all but ESTABLISHED, which comes first, wait for
 * the poller to drain the CQ (kevd_cq_unfence()). Nor may ESTABLISHED
 * overtake an earlier connection event that still waits: the stream's
 * order comes first, and it waits behind it. nfenced is read without
 * prod_lock: an event fenced before this post was counted under it, and
 * one queued meanwhile entered the ring before this post takes the lock.
 */
static bool kevd_fenced(struct kevd *evd, const struct kevd_event *ev)
{
	return evd->cq && kevd_event_stream(ev->event_number) ==
			  KEVD_STREAM_CONNECTION &&
	       (ev->event_number != KEVD_CONNECTION_EVENT_ESTABLISHED ||
		READ_ONCE(evd->ring.nfenced));
}

/**
 * kevd_post_event() - post a CR, connection, RMR bind or async event.
 * @evd: the EVD; it must have the event's stream flag.
 * @ev: the event (->evd is ignored).
 *
 * For connection managers and providers that feed an EVD. These streams
 * cannot wait, so they may use the EVD's headroom; if even that is full,
 * the event is dropped, counted, the EVD enters the overflowed state and
 * %KEVD_ASYNC_ERROR_EVD_OVERFLOW goes to its async EVD.
 *
 * On an EVD that also has the DTO stream, a connection event other than
 * ESTABLISHED becomes visible only after a pass has drained the CQ:
 * every completion in the CQ when it was posted (an endpoint's flushes
 * before its DISCONNECTED) is queued ahead of it. In process context,
 * with upcalls disabled and nobody on the EVD, the post makes that pass
 * itself, as a consumer's pull would; the event is then queued when it
 * returns, unless that pass could not empty the CQ (more than a poll
 * budget, a full ring, a completion held for an endpoint's ESTABLISHED,
 * a failing poll) or a disconnected QP's flushes are still due. Else,
 * and for what that pass left, a poller makes it. ESTABLISHED is queued
 * at once, ahead of whatever the CQ still holds, unless an earlier
 * connection event is still held: then it is held behind that one, and
 * what the CQ holds comes first (the stream's order before the rest).
 *
 * Context: any, hard IRQ included.
 * Return: 0, -EINVAL for a DTO or software event, a number that is not in
 * &enum kevd_event_number or a stream the EVD does not have, -EOVERFLOW
 * when the event was dropped for room, -ENOMEM when a connection event
 * to be held behind the CQ was dropped for memory.
 */
int kevd_post_event(struct kevd *evd, const struct kevd_event *ev)
{
	int ret = kevd_post_established(evd, ev, NULL);

	return ret > 0 ? 0 : ret;
}
EXPORT_SYMBOL_GPL(kevd_post_event);

/**
 * kevd_post_established() - kevd_post_event(), for a gated endpoint.
 * @evd: the EVD.
 * @ev: the event: the CM's ESTABLISHED of the endpoint whose QP @gate
 *	holds back on @evd; any event with @gate NULL.
 * @gate: the endpoint's gate (kevd_cq_gate_at()), or NULL.
 *
 * An ESTABLISHED held behind an earlier connection event keeps its
 * endpoint's gate up until it enters the ring (kevd_cq_fence_gated()):
 * then the caller must leave the gate to kevd, which lifts it, and lift
 * it itself only when it ends the binding (kevd_cq_ungate()).
 *
 * Context: any, hard IRQ included.
 * Return: as kevd_post_event(), or 1: held, and the gate stays.
 */
int kevd_post_established(struct kevd *evd, const struct kevd_event *ev,
			  struct kevd_gate *gate)
{
	enum kevd_stream stream;
	struct kevd_event e;
	int ret;

	if (!evd || !ev || !kevd_event_number_valid(ev->event_number))
		return -EINVAL;
	stream = kevd_event_stream(ev->event_number);
	if (stream == KEVD_NR_STREAMS || stream == KEVD_STREAM_DTO ||
	    stream == KEVD_STREAM_SOFTWARE ||
	    !(evd->flags & kevd_stream_flag[stream]))
		return -EINVAL;
	e = *ev;
	e.evd = evd;
	rcu_read_lock();	/* the event may be taken, the EVD freed */
	if (kevd_fenced(evd, ev)) {
		ret = gate ? kevd_cq_fence_gated(evd, &e, gate) :
			     kevd_ring_fence(&evd->ring, &e, NULL);
		if (!ret)	/* the pass that unfences */
			kevd_pull_or_schedule(evd, false);
		ret = ret ?: !!gate;
	} else {
		ret = kevd_ring_post(&evd->ring, &e, stream, true);
		if (!ret)
			kevd_producer_done(evd);
	}
	if (ret < 0)
		kevd_raise_overflow(evd, stream);
	rcu_read_unlock();
	if (ret < 0)
		return ret == -ENOMEM ? ret : -EOVERFLOW;
	return ret;
}

/**
 * kevd_post_ib_event() - route an ib_core async event into an EVD.
 * @evd: an EVD with %KEVD_ASYNC_FLAG.
 * @event: the event, as a QP, CQ or device event handler receives it.
 *
 * For consumers' QP event handlers. Mapping:
 *
 *   IB_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR,
 *   PATH_MIG_ERR, SRQ_ERR              KEVD_ASYNC_ERROR_EP_BROKEN
 *                                      (handle: the QP's context)
 *   IB_EVENT_DEVICE_FATAL              KEVD_ASYNC_ERROR_IA_CATASTROPHIC
 *                                      (handle: the ib_device)
 *   IB_EVENT_CQ_ERR                    KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR
 *                                      (handle: the CQ's context)
 *
 * The reason is the ib_event type. Other events are not errors.
 *
 * Context: any (event handlers may run in interrupt context).
 * Return: 0; -EINVAL for a NULL argument, an EVD without the async stream
 * or an event that is not an error; -EOVERFLOW if the EVD had to drop it.
 */
int kevd_post_ib_event(struct kevd *evd, const struct ib_event *event)
{
	struct kevd_event ev = { .async.reason = event ? event->event : 0 };

	if (!evd || !event)
		return -EINVAL;
	switch (event->event) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_PATH_MIG_ERR:
		ev.event_number = KEVD_ASYNC_ERROR_EP_BROKEN;
		ev.async.handle = event->element.qp ?
				  event->element.qp->qp_context : NULL;
		break;
	case IB_EVENT_SRQ_ERR:
		ev.event_number = KEVD_ASYNC_ERROR_EP_BROKEN;
		ev.async.handle = event->element.srq ?
				  event->element.srq->srq_context : NULL;
		break;
	case IB_EVENT_DEVICE_FATAL:
		ev.event_number = KEVD_ASYNC_ERROR_IA_CATASTROPHIC;
		ev.async.handle = event->device;
		break;
	case IB_EVENT_CQ_ERR:
		ev.event_number = KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR;
		ev.async.handle = event->element.cq ?
				  event->element.cq->cq_context : NULL;
		break;
	default:
		return -EINVAL;
	}
	return kevd_post_event(evd, &ev);
}
EXPORT_SYMBOL_GPL(kevd_post_ib_event);

/**
 * kevd_resize() - change the queue length.
 * @evd: the EVD.
 * @qlen: the new minimum queue length.
 *
 * No queued or incoming event is lost or reordered, also while producers
 * and upcalls run. A successful resize also clears the overflowed state,
 * unless an event was dropped while it ran.
 * The events of an upcall batch that is running are no longer queued:
 * they do not count. If a policy change gives some back and the queue
 * has no room for them then, it grows to take them.
 *
 * A thread in kevd_wait() keeps its threshold reachable: a resize below
 * it fails, and a wait that begins during a resize is held to the smaller
 * of the two queue lengths.
 *
 * A DTO EVD whose CQ depth came from the queue length (cq_depth 0) grows
 * its CQ along (ib_resize_cq()), so the CQ holds what the EVD accepts; a
 * provider that cannot resize CQs (siw) makes the resize fail, nothing
 * changed. The CQ grows first: if the queue then cannot (-ENOMEM,
 * -EBUSY), the CQ keeps its new depth, which holds more than before.
 *
 * Completions that a poller or a pull is moving from the CQ into the
 * queue at that moment count as queued: a shrink may fail with -EBUSY
 * while they are in flight, and succeed when tried again. So do
 * connection events held behind the CQ (kevd_post_event()): they are on
 * the EVD, and enter the queue once the CQ has been drained.
 *
 * Context: process context; may sleep.
 * Return: 0, -EINVAL for a bad argument, a call from interrupt context or
 * with interrupts disabled, or an EVD that kevd_free() is
 * freeing (while that free waits; after it returned the EVD is gone, as
 * for any call), -EBUSY when the queued events do
 * not fit in @qlen or a thread waits for more events than the queue
 * length the resize would give (@qlen rounded up, as kevd_query() then
 * reports it), -ENOMEM,
 * or the error of ib_resize_cq() (-EOPNOTSUPP where the provider has none).
 */
int kevd_resize(struct kevd *evd, u32 qlen)
{
	u32 actual, unraised = 0, marks = 0;
	bool missed = false;
	unsigned long flags;
	int ret = 0;

	if (!evd || kevd_atomic_caller() ||
	    kevd_ring_qlen_for(&evd->ring, qlen, &actual))
		return -EINVAL;
	might_sleep();
	/*
	 * A resize that meets a free in progress fails, and the free may
	 * return before this one has unlocked: the memory stays until then.
	 */
	kevd_get(evd);
	mutex_lock(&evd->resize_mutex);
	spin_lock_irqsave(&evd->lock, flags);
	/* not on an EVD being freed (kevd_free() holds the mutex to mark it) */
	if (!(evd->state & KEVD_STATE_OPEN))
		ret = -EINVAL;
	else if (evd->waiter && evd->wait_threshold > actual)
		ret = -EBUSY;
	else
		evd->resize_qlen = actual;
	unraised = evd->cq_overruns_unraised;
	marks = evd->overflow_marks;
	spin_unlock_irqrestore(&evd->lock, flags);
	if (!ret)
		ret = kevd_cq_fit(evd, qlen, actual);
	if (!ret)
		ret = kevd_ring_resize(&evd->ring, qlen);

	spin_lock_irqsave(&evd->lock, flags);
	if (evd->resize_qlen) {
		evd->resize_qlen = 0;
		/* an event dropped during the resize was lost after it began */
		if (!ret && evd->overflow_marks == marks)
			WRITE_ONCE(evd->state,
				   evd->state & ~KEVD_STATE_OVERFLOWED);
		if (!ret) {
			/*
			 * The next CQ overrun raises the overflow again; one
			 * that came during the resize, unraised, raises it now.
			 */
			missed = evd->cq_overruns_unraised != unraised;
			evd->cq_overrun_raised = missed;
		}
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	if (missed)
		kevd_raise_overflow(evd, KEVD_STREAM_DTO);
	trace_kevd_resize(evd, qlen, ret);
	/*
	 * A stall flagged before the resize's hold of ring.cons_lock is seen
	 * here; one flagged after it found the new slots full too, and waits
	 * for a take.
	 */
	if (!ret && READ_ONCE(evd->cq_stalled)) {
		WRITE_ONCE(evd->cq_stalled, false);
		kevd_consumer_done(evd, false);
	}
	/* last: until here kevd_free() is refused */
	mutex_unlock(&evd->resize_mutex);
	kevd_put(evd);
	return ret;
}
EXPORT_SYMBOL_GPL(kevd_resize);

/**
 * kevd_query() - report an EVD's parameters, state and statistics.
 * @evd: the EVD.
 * @param: where to put them.
 *
 * Context: any.
 * Return: 0, or -EINVAL for NULL arguments.
 */
int kevd_query(struct kevd *evd, struct kevd_param *param)
{
	unsigned long flags;

	if (!evd || !param)
		return -EINVAL;
	memset(param, 0, sizeof(*param));
	spin_lock_irqsave(&evd->lock, flags);
	param->upcall_policy = evd->policy;
	param->upcall_flag = evd->upcall_flag;
	param->upcall = evd->upcall;
	param->state = evd->state;
	spin_unlock_irqrestore(&evd->lock, flags);
	/*
	 * After a pull's unarmed let-go the CQ may hold completions that no
	 * notification will bring: in process context the query pulls them
	 * itself, so that the count it reports has them; elsewhere (or if
	 * the EVD is owned) a pass takes them after it returns (dto/pull.c).
	 */
	if (READ_ONCE(evd->pull_unarmed))
		kevd_pull_or_schedule(evd, true);
	param->qlen = kevd_ring_qlen(&evd->ring);
	param->count = kevd_ring_count(&evd->ring);
	param->flags = evd->flags;
	param->cq = evd->cq;
	param->mem_bytes = ksize(evd) + kevd_ring_bytes(&evd->ring);
	kevd_read_stats(evd, &param->stats);
	return 0;
}
EXPORT_SYMBOL_GPL(kevd_query);

/**
 * kevd_set_unwaitable() - make kevd_wait() return at once, or not.
 * @evd: the EVD.
 * @unwaitable: true: the current and every later wait returns -ECANCELED.
 *
 * The current wait returns -ECANCELED also when a call with false follows
 * before it woke up: it was cancelled. A wait that meets its threshold
 * without registering (from the queue, or from its own poll of the CQ
 * when the queue falls short) takes its events, also if this call comes
 * during that poll; one that registers is cancelled.
 *
 * Context: any.
 * Return: 0, or -EINVAL for a NULL @evd.
 */
int kevd_set_unwaitable(struct kevd *evd, bool unwaitable)
{
	unsigned long flags;

	if (!evd)
		return -EINVAL;
	spin_lock_irqsave(&evd->lock, flags);
	if (unwaitable) {
		WRITE_ONCE(evd->state, evd->state | KEVD_STATE_UNWAITABLE);
		/* the current wait ends, whatever comes before it wakes */
		WRITE_ONCE(evd->unwait_gen, evd->unwait_gen + 1);
	} else {
		WRITE_ONCE(evd->state, evd->state & ~KEVD_STATE_UNWAITABLE);
	}
	/*
	 * Under the lock: the waiter unregisters under it, and may then
	 * free the EVD (cancel, then free) before a wake-up after it.
	 */
	wake_up(&evd->wq);
	spin_unlock_irqrestore(&evd->lock, flags);
	return 0;
}
EXPORT_SYMBOL_GPL(kevd_set_unwaitable);

/* Was the registered wait cancelled (kevd_set_unwaitable())? */
static bool kevd_wait_cancelled(struct kevd *evd)
{
	return READ_ONCE(evd->unwait_gen) != evd->wait_gen ||
	       (READ_ONCE(evd->state) & KEVD_STATE_UNWAITABLE);
}

/* The last batch to end wakes evd->wq (kevd_deliver_end()). */
static bool kevd_wait_ready(struct kevd *evd, u32 threshold)
{
	return (kevd_ring_count(&evd->ring) >= threshold &&
		!kevd_batches_held(evd)) || kevd_wait_cancelled(evd);
}

/*
 * No lock: may a wait take events without registering? Upcalls disabled,
 * nobody waiting, open (not being freed) and waitable, a reachable
 * threshold.
 */
static bool kevd_wait_fast_ok(struct kevd *evd, u32 threshold)
{
	return !kevd_upcalls_enabled(READ_ONCE(evd->policy)) &&
	       !READ_ONCE(evd->waiter) &&
	       (READ_ONCE(evd->state) & (KEVD_STATE_OPEN |
					 KEVD_STATE_UNWAITABLE)) ==
	       KEVD_STATE_OPEN &&
	       threshold <= kevd_ring_qlen(&evd->ring);
}

/*
 * The threshold met, with a pull from the CQ first if the ring falls
 * short (as a dequeue does): take up to @n without registering. Returns
 * what it took, 0 if the wait must register and may sleep. A threshold
 * of one is met by any event: the wait takes as a dequeue does, straight
 * from the CQ into @evs if the ring is short.
 */
static u32 kevd_wait_fast(struct kevd *evd, u32 threshold,
			  struct kevd_event *evs, u32 n)
{
	if (threshold == 1)
		return kevd_take_or_pull(evd, evs, n);
	if (kevd_take_count(evd) < threshold)
		kevd_pull(evd);
	if (kevd_take_count(evd) < threshold)
		return 0;
	return kevd_take_rest_first(evd, evs, n, false);
}

/*
 * Register the waiter, or say why not. @gen: its sample of
 * evd->unwait_gen, taken as the wait began: a cancel since then, even
 * undone, cancels it.
 */
static int kevd_wait_begin(struct kevd *evd, u32 threshold, bool sleeps,
			   u32 gen, u32 *nmore)
{
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&evd->lock, flags);
	/* not on an EVD being freed: its free returns, and frees, soon */
	if (!(evd->state & KEVD_STATE_OPEN) ||
	    kevd_upcalls_enabled(evd->policy) ||
	    threshold > kevd_ring_qlen(&evd->ring) ||
	    (evd->resize_qlen && threshold > evd->resize_qlen))
		ret = -EINVAL;
	else if (evd->waiter)
		ret = -EBUSY;
	else if ((evd->state & KEVD_STATE_UNWAITABLE) ||
		 evd->unwait_gen != gen)
		ret = -ECANCELED;
	/*
	 * From an upcall of @evd the caller is the poller that owns it: it
	 * would sleep on the thread that must move its completions.
	 */
	else if (sleeps && kevd_current_in_upcall(evd))
		ret = -EDEADLK;
	if (!ret) {
		WRITE_ONCE(evd->waiter, current);
		evd->wait_gen = gen;
		evd->wait_threshold = threshold;
		/* a pull passes over a CQ: only then may the waiter pass */
		if (evd->cq)
			WRITE_ONCE(evd->wait_poller, kevd_poll_wait_enter());
		WRITE_ONCE(evd->state, evd->state | KEVD_STATE_WAITED);
	} else {
		/* under the lock: a free waiting meanwhile may return after */
		*nmore = kevd_take_count(evd);
		trace_kevd_wait_end(evd, ret, *nmore);
	}
	spin_unlock_irqrestore(&evd->lock, flags);
	return ret;
}

/*
 * Unregister the waiter. Everything a wait reads of the EVD afterwards
 * happens here, under evd->lock: once the waiter is gone kevd_free() may
 * succeed in another thread.
 */
static void kevd_wait_end(struct kevd *evd, int ret, u32 *nmore)
{
	unsigned long flags;

	spin_lock_irqsave(&evd->lock, flags);
	WRITE_ONCE(evd->waiter, NULL);
	kevd_poll_wait_leave(evd->wait_poller);
	WRITE_ONCE(evd->wait_poller, NULL);
	WRITE_ONCE(evd->state, evd->state & ~KEVD_STATE_WAITED);
	/* a notification the handler gave the waiter goes to a poller */
	kevd_pull_leave(evd);
	*nmore = kevd_take_count(evd);
	trace_kevd_wait_end(evd, ret, *nmore);
	spin_unlock_irqrestore(&evd->lock, flags);
}

/*
 * The time a wait has left after a wake-up, by its @deadline: a wait
 * condition that is true at once (a pass queued on the waiter's own
 * poller, kevd_pull_due(), which may find nothing) returns @left
 * unchanged, and the wait must still end on time.
 */
static long kevd_wait_left(long left, unsigned long deadline)
{
	unsigned long now = jiffies;

	if (left == MAX_SCHEDULE_TIMEOUT || !left)
		return left;
	return time_before(now, deadline) ? (long)(deadline - now) : 0;
}

/**
 * kevd_wait_batch() - wait for events, then take up to @n at once.
 * @evd: the EVD; upcalls must be disabled.
 * @timeout_us: microseconds, or %KEVD_TIMEOUT_INFINITE; 0 polls.
 * @threshold: wait until this many events are queued, 1 .. queue length.
 * @evs: room for @n events; filled oldest first.
 * @n: at most this many, at least 1 (it may be below @threshold).
 * @nmore: events still queued after them; set on every return but the
 *	-EINVAL of a NULL pointer or a zero @threshold or @n.
 *
 * kevd_wait() that returns what has gathered, not one event: with
 * @threshold 1 and @n large, one wake-up takes a whole burst (an
 * extension beyond DAT, as io_uring's wait for many completions). The
 * remaining timeout shrinks across wake-ups; every exit path leaves the
 * EVD un-waited. A wait whose threshold is already met, or met by a pull
 * from the CQ (as a dequeue pulls), takes the events without registering
 * as the waiter: like a dequeue, it must not race
 * the consumer's own kevd_free() (which refuses only a registered one).
 * With @threshold 1 that take is kevd_dequeue_batch()'s: what the ring
 * holds, topped up from the CQ up to @n. Inside an upcall of @evd, the
 * events its batch took for the invocations after the running one count
 * toward @threshold and come first, as for kevd_dequeue(), and count in
 * @nmore. @nmore counts what the EVD queues, not the completions still
 * in the CQ (a pull takes at most a budget, or what the threshold needs):
 * a consumer that dequeues until -EAGAIN, rather than @nmore times, also
 * gets those.
 *
 * Context: process context; sleeps, but not from an upcall of @evd
 * (which may disable upcalls and then wait with a timeout of 0 only).
 * Return: the number of events taken, 1 .. @n; -ETIMEDOUT, -ERESTARTSYS
 * on a signal, -EBUSY if another thread waits, -EINVAL for bad arguments
 * (a call from interrupt context or with interrupts disabled too),
 * enabled upcalls or an EVD that another thread is freeing (while that
 * free waits; after it returned the EVD is gone, as for any call),
 * -ECANCELED when the EVD is or becomes unwaitable, -EDEADLK for a wait
 * that would sleep inside an upcall of @evd.
 */
int kevd_wait_batch(struct kevd *evd, u32 timeout_us, u32 threshold,
		    struct kevd_event *evs, u32 n, u32 *nmore)
{
	unsigned long deadline;
	u32 got, gen;
	long left;
	int ret;

	if (!evd || !evs || !nmore || !threshold || !n)
		return -EINVAL;
	if (kevd_atomic_caller()) {
		*nmore = kevd_take_count(evd);
		return -EINVAL;
	}
	might_sleep();
	trace_kevd_wait_begin(evd, threshold, n);
	/* a cancel from here on is this wait's, registered or not yet */
	gen = READ_ONCE(evd->unwait_gen);
	/*
	 * Enough queued, or pulled from the CQ: take them without
	 * registering a waiter (two evd->lock round-trips per call saved),
	 * as uDAPL's wait first dequeues. Anything else (an error to report,
	 * too few events) goes the registered way.
	 */
	if (kevd_wait_fast_ok(evd, threshold)) {
		got = kevd_wait_fast(evd, threshold, evs, min_t(u32, n, INT_MAX));
		if (got) {
			*nmore = kevd_take_count(evd);
			trace_kevd_wait_end(evd, got, *nmore);
			return got;
		}
	}
	ret = kevd_wait_begin(evd, threshold, timeout_us != 0, gen, nmore);
	if (ret)
		return ret;
	/* Pairs with kevd_pull_unarmed_ok(): waiter set, then its mark read. */
	smp_mb();

	left = kevd_timeout_jiffies(timeout_us);
	deadline = jiffies + left;
	for (;;) {
		if (!kevd_wait_ready(evd, threshold)) {
			/* upcalls are disabled: the waiter pulls (dto/pull.c) */
			if (kevd_pull(evd) && kevd_wait_ready(evd, threshold))
				continue;
			/*
			 * A pull let go unarmed: another thread's, or this
			 * one's, which met the threshold before another
			 * consumer took the events. A pass arms the CQ
			 * before this sleeps on it.
			 */
			if (READ_ONCE(evd->pull_unarmed))
				kevd_schedule(evd);
			if (!left) {
				ret = -ETIMEDOUT;
				break;
			}
			left = wait_event_interruptible_timeout(evd->wq,
								kevd_wait_ready(evd, threshold) ||
								kevd_pull_due(evd),
								left);
			if (left < 0) {
				ret = left;
				break;
			}
			left = kevd_wait_left(left, deadline);
			cond_resched();
			continue;
		}
		if (kevd_wait_cancelled(evd)) {
			ret = -ECANCELED;
			break;
		}
		/* Another consumer may have taken them: wait on. */
		got = kevd_take_rest_first(evd, evs, min_t(u32, n, INT_MAX),
					   false);
		if (got) {
			ret = got;
			break;
		}
	}
	kevd_wait_end(evd, ret, nmore);
	return ret;
}
EXPORT_SYMBOL_GPL(kevd_wait_batch);

/**
 * kevd_wait() - wait for events, then take one (the uDAPL call).
 * @evd: the EVD; upcalls must be disabled.
 * @timeout_us: microseconds, or %KEVD_TIMEOUT_INFINITE; 0 polls.
 * @threshold: wait until this many events are queued, 1 .. queue length.
 * @ev: the event taken.
 * @nmore: events still queued after it; set on every return but the
 *	-EINVAL of a NULL pointer or a zero @threshold.
 *
 * The remaining timeout shrinks across wake-ups; it is rounded up to
 * ticks, and every finite value ends. Every exit path leaves the EVD
 * un-waited. @nmore counts what the EVD queues, not completions still in
 * the CQ (kevd_wait_batch()).
 *
 * Context: process context; sleeps, but not from an upcall of @evd
 * (which may disable upcalls and then wait with a timeout of 0 only).
 * Return: 0 with an event, -ETIMEDOUT, -ERESTARTSYS on a signal, -EBUSY
 * if another thread waits, -EINVAL for bad arguments (a call from
 * interrupt context or with interrupts disabled too), enabled upcalls or
 * an EVD that another thread is freeing (while that free waits),
 * -ECANCELED when the EVD is or becomes unwaitable, -EDEADLK for a wait
 * that would sleep inside an upcall of @evd.
 */
int kevd_wait(struct kevd *evd, u32 timeout_us, u32 threshold,
	      struct kevd_event *ev, u32 *nmore)
{
	int ret = kevd_wait_batch(evd, timeout_us, threshold, ev, 1, nmore);

	return ret < 0 ? ret : 0;
}
EXPORT_SYMBOL_GPL(kevd_wait);

/**
 * kevd_cq() - the CQ of the DTO stream.
 * @evd: the EVD.
 *
 * Consumers create their QPs on it; their wr_id is the DTO cookie. A QP
 * must not be destroyed while completions of it may still be in the CQ
 * (kevd reads its qp_context for each): kevd_destroy_qp() drains and
 * destroys it (or by hand: Documentation/kevd/api.rst, "Teardown
 * order"); not ib_drain_qp(), which waits for ever on a CQ not from
 * ib_alloc_cq().
 *
 * Context: any.
 * Return: the CQ, or NULL for an EVD without the DTO stream.
 */
struct ib_cq *kevd_cq(struct kevd *evd)
{
	return evd ? evd->cq : NULL;
}
EXPORT_SYMBOL_GPL(kevd_cq);
