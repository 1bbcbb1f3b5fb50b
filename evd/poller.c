// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The poller threads: a fixed pool (module parameter nr_pollers, default
 * one per online CPU) that drains the CQs and delivers the upcalls of all
 * EVDs. 10,000 EVDs are 10,000 list entries, not 10,000 threads.
 *
 * Scheduling follows NAPI (Documentation/networking/napi.rst):
 *   - kevd_schedule() sets KEVD_POLL_SCHED and queues the EVD on a
 *     poller's run list; if the bit was already set it sets
 *     KEVD_POLL_MISSED instead, and the owner makes one more pass before
 *     it lets go (kevd_poll_complete()). No notification is lost between
 *     a pass's last look and its letting go.
 *   - A pass (kevd_poll_one()) drains the CQ within the budget, delivers
 *     upcalls, and when idle arms the CQ with the extended notify; work
 *     left over sends the EVD to the tail of the list.
 *   - A round (kevd_poller_fn()), as net_rx_action(): the poller takes its
 *     whole run list in one lock round trip and makes a pass over each
 *     EVD; the EVDs it queues again itself wait on a private list and
 *     open the next round, before those queued meanwhile. No lock and no
 *     wake-up per pass.
 *
 * Ownership: while KEVD_POLL_SCHED is set exactly one poller owns the EVD:
 * it alone drains and arms the CQ. For MANY the owner hands the EVD to the
 * next poller before it runs a batch of upcalls, so batches overlap.
 *
 * Slow upcalls: an upcall runs in its poller thread. kevd_schedule()
 * avoids pollers that are inside an upcall. An upcall batch that took
 * longer than KEVD_SLOW_UPCALL_NS (or slept that long) marks its EVD
 * slow, and before a poller runs upcalls of a slow EVD it passes the
 * other EVDs it holds to the next poller. So a slow upcall delays only
 * its own EVD, except, once, the EVDs already queued behind its first
 * slow batch (with a single poller, all of them). Fast upcalls pass
 * nothing: handing the queue over at every batch made two pollers trade
 * it back and forth, a wake-up per pass.
 *
 * Locking: poller->lock (irqsave) guards the run list only. It nests
 * inside evd->lock (the completion handler); nothing is taken inside it.
 * The round's lists (todo, again) belong to the poller thread: no lock.
 */
#include <linux/cpumask.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include "kevd_internal.h"

/**
 * struct kevd_poller - one poller thread.
 * @lock: guards @run_list.
 * @run_list: EVDs waiting for a pass, in order.
 * @todo: the current round's EVDs still to pass over (thread only).
 * @again: EVDs the thread queued again itself this round (thread only).
 * @task: the thread.
 * @in_upcall: the EVD whose upcall the thread runs now, or NULL.
 * @batch: the batch it delivers (NULL for a doorbell); thread only.
 * @upcall_t0: local_clock() when that upcall batch began.
 * @idx: index in the pool.
 * @wcs: work completions of a CQ drain.
 * @evs: events of a MANY upcall batch.
 */
struct kevd_poller {
	spinlock_t lock;	/* guards run_list */
	struct list_head run_list;
	struct list_head todo;
	struct list_head again;
	struct task_struct *task;
	struct kevd *in_upcall;
	struct kevd_batch *batch;
	u64 upcall_t0;
	unsigned int idx;
	struct ib_wc wcs[KEVD_BATCH];
	struct kevd_event evs[KEVD_MANY_BATCH];
} ____cacheline_aligned_in_smp;

static struct kevd_poller *kevd_pollers;
static unsigned int kevd_npollers;
static atomic_t kevd_next_poller = ATOMIC_INIT(0);

/**
 * kevd_nr_pollers() - size of the pool.
 *
 * Return: the number of poller threads.
 */
unsigned int kevd_nr_pollers(void)
{
	return kevd_npollers;
}
EXPORT_SYMBOL_GPL(kevd_nr_pollers);	/* not public: for kevd's own tests */

/**
 * kevd_poller_pick() - the home poller for a new EVD.
 * @cpu: a CPU hint, or %KEVD_ANY for round robin.
 *
 * Return: a poller.
 */
struct kevd_poller *kevd_poller_pick(int cpu)
{
	unsigned int i;

	if (cpu == KEVD_ANY)
		i = atomic_inc_return(&kevd_next_poller);
	else
		i = cpu;
	return &kevd_pollers[i % kevd_npollers];
}

static struct kevd_poller *kevd_poller_next(struct kevd_poller *p)
{
	return &kevd_pollers[(p->idx + 1) % kevd_npollers];
}

/* The home poller, or the first after it that is not inside an upcall. */
static struct kevd_poller *kevd_target(struct kevd *evd)
{
	struct kevd_poller *p = evd->home;
	unsigned int i;

	for (i = 0; i < kevd_npollers; i++, p = kevd_poller_next(p))
		if (!READ_ONCE(p->in_upcall))
			return p;
	return evd->home;
}

static void kevd_enqueue(struct kevd_poller *p, struct kevd *evd)
{
	unsigned long flags;

	spin_lock_irqsave(&p->lock, flags);
	list_add_tail(&evd->poll_node, &p->run_list);
	spin_unlock_irqrestore(&p->lock, flags);
	wake_up_process(p->task);
}

/* Called by @p's own thread for an EVD it owns: wait for the next round. */
static void kevd_requeue(struct kevd_poller *p, struct kevd *evd)
{
	list_add_tail(&evd->poll_node, &p->again);
}

/**
 * kevd_schedule() - make sure a pass over @evd will run.
 * @evd: the EVD.
 *
 * Context: any, hard IRQ included.
 * Return: true if this call queued the EVD, false if it was owned already
 * (a pass will follow: KEVD_POLL_MISSED) or is being freed.
 */
bool kevd_schedule(struct kevd *evd)
{
	unsigned long val = READ_ONCE(evd->poll_state), new;

	do {
		if (val & BIT(KEVD_POLL_DEAD))
			return false;
		new = val | BIT(KEVD_POLL_SCHED);
		if (val & BIT(KEVD_POLL_SCHED))
			new |= BIT(KEVD_POLL_MISSED);
	} while (!try_cmpxchg(&evd->poll_state, &val, new));

	if (val & BIT(KEVD_POLL_SCHED))
		return false;
	kevd_enqueue(kevd_target(evd), evd);
	return true;
}

/*
 * Let go of @evd, unless a schedule came in during the pass: then queue it
 * again (we keep ownership). After a successful let-go the EVD may be
 * freed at once: do not touch it (wake_up_var() only hashes the address).
 */
static void kevd_poll_complete(struct kevd_poller *p, struct kevd *evd)
{
	unsigned long val = READ_ONCE(evd->poll_state), new;

	do {
		new = val & ~(BIT(KEVD_POLL_SCHED) | BIT(KEVD_POLL_MISSED));
		if ((val & BIT(KEVD_POLL_MISSED)) &&
		    !(val & BIT(KEVD_POLL_DEAD)))
			new |= BIT(KEVD_POLL_SCHED);
	} while (!try_cmpxchg(&evd->poll_state, &val, new));

	if (new & BIT(KEVD_POLL_SCHED))
		kevd_requeue(p, evd);
	else if (val & BIT(KEVD_POLL_DEAD))
		wake_up_var(&evd->poll_state);	/* kevd_poll_wait_idle() */
}

static int kevd_poller_fn(void *data);

/*
 * The poller whose thread is current (not an interrupt on it), or NULL.
 * O(1): every kevd_modify_upcall() asks, and the seed pattern calls that
 * from each upcall, whatever nr_pollers is.
 */
static struct kevd_poller *kevd_current_poller(void)
{
	if (!in_task() || !(current->flags & PF_KTHREAD) ||
	    kthread_func(current) != kevd_poller_fn)
		return NULL;
	return kthread_data(current);
}

static bool kevd_list_has(struct list_head *head, struct kevd *evd)
{
	struct kevd *pos;

	list_for_each_entry(pos, head, poll_node)
		if (pos == evd)
			return true;
	return false;
}

/*
 * Called by @p's own thread, outside any pass over @evd: if @evd waits on
 * one of @p's lists, take it off. @p owned it (KEVD_POLL_SCHED) and is the
 * only one that could have passed over it.
 */
static bool kevd_poller_unqueue(struct kevd_poller *p, struct kevd *evd)
{
	bool found;

	if (kevd_list_has(&p->todo, evd) || kevd_list_has(&p->again, evd)) {
		list_del_init(&evd->poll_node);
		return true;
	}
	spin_lock_irq(&p->lock);
	found = kevd_list_has(&p->run_list, evd);
	if (found)
		list_del_init(&evd->poll_node);
	spin_unlock_irq(&p->lock);
	return found;
}

/**
 * kevd_poll_wait_idle() - wait until no poller owns a dead EVD.
 * @evd: an EVD with KEVD_POLL_DEAD set.
 *
 * From a poller thread (an upcall that frees another EVD), @evd may be
 * queued on that very poller, which cannot make the pass this waits for:
 * it lets go of @evd itself. A poller never waits for itself.
 *
 * Context: process context; sleeps.
 */
void kevd_poll_wait_idle(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	might_sleep();
	if (p && kevd_poller_unqueue(p, evd))
		kevd_poll_complete(p, evd);
	wait_var_event(&evd->poll_state,
		       !(READ_ONCE(evd->poll_state) & BIT(KEVD_POLL_SCHED)));
}

/**
 * kevd_current_in_upcall() - is the caller inside an upcall of @evd?
 * @evd: the EVD.
 *
 * Return: true from a poller thread that runs an upcall of @evd.
 */
bool kevd_current_in_upcall(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	return p && p->in_upcall == evd;
}

/* Pass the EVDs queued on @p to the next poller: @p is about to upcall. */
static void kevd_poller_shed(struct kevd_poller *p)
{
	struct kevd_poller *to = kevd_poller_next(p);
	unsigned long flags;
	LIST_HEAD(moved);

	if (to == p)
		return;
	list_splice_init(&p->todo, &moved);
	/* Racy peek: an EVD queued just after it is served after the upcall. */
	if (!data_race(list_empty(&p->run_list))) {
		spin_lock_irqsave(&p->lock, flags);
		list_splice_tail_init(&p->run_list, &moved);
		spin_unlock_irqrestore(&p->lock, flags);
	}
	list_splice_tail_init(&p->again, &moved);
	if (list_empty(&moved))
		return;
	spin_lock_irqsave(&to->lock, flags);
	list_splice_tail(&moved, &to->run_list);
	spin_unlock_irqrestore(&to->lock, flags);
	wake_up_process(to->task);
}

/**
 * kevd_poller_upcall_begin() - the poller is about to run upcalls.
 * @p: the poller (current).
 * @evd: the EVD whose upcalls run.
 * @b: the batch they deliver, or NULL (a doorbell).
 *
 * Times the batch; a slow one marks the EVD (see "Slow upcalls" above).
 */
void kevd_poller_upcall_begin(struct kevd_poller *p, struct kevd *evd,
			      struct kevd_batch *b)
{
	WRITE_ONCE(p->in_upcall, evd);
	p->batch = b;
	if (READ_ONCE(evd->upcall_slow))
		kevd_poller_shed(p);
	p->upcall_t0 = local_clock();
}

/**
 * kevd_poller_upcall_end() - the upcalls of kevd_poller_upcall_begin() ended.
 * @p: the poller (current).
 * @evd: their EVD.
 */
void kevd_poller_upcall_end(struct kevd_poller *p, struct kevd *evd)
{
	p->batch = NULL;
	WRITE_ONCE(p->in_upcall, NULL);
	if (local_clock() - p->upcall_t0 > KEVD_SLOW_UPCALL_NS)
		WRITE_ONCE(evd->upcall_slow, true);
}

/**
 * kevd_poller_current_batch() - the batch of the upcall calling this.
 * @evd: the EVD.
 *
 * Return: the batch being delivered, if the caller is an upcall of @evd
 * (on its poller thread), else NULL.
 */
struct kevd_batch *kevd_poller_current_batch(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	return p && p->in_upcall == evd ? p->batch : NULL;
}

/**
 * kevd_poller_handoff() - give an owned EVD to the next poller (MANY).
 * @p: the current owner.
 * @evd: the EVD.
 *
 * Return: true if handed off (the caller no longer owns @evd).
 */
bool kevd_poller_handoff(struct kevd_poller *p, struct kevd *evd)
{
	struct kevd_poller *to = kevd_poller_next(p);

	if (to == p)
		return false;
	kevd_enqueue(to, evd);
	return true;
}

/*
 * defer_arm (as NAPI's napi_defer_hard_irqs): an EVD whose pass found
 * work stays queued, and is armed only after that many passes without
 * any. Under a trickle spread over many EVDs, polls then replace
 * notifications; an idle EVD costs that many empty polls, then sleeps
 * armed as usual. The EVD stays owned throughout, so nothing is missed.
 */
static bool kevd_defer_arm(struct kevd *evd, u32 work)
{
	u32 defer = READ_ONCE(kevd_param_defer_arm);

	if (!defer || !evd->cq)
		return false;
	if (work) {
		evd->empty_passes = 0;
		return true;
	}
	if (evd->empty_passes < defer) {
		evd->empty_passes++;
		return true;
	}
	return false;
}

static void kevd_poll_one(struct kevd_poller *p, struct kevd *evd)
{
	u32 budget = READ_ONCE(kevd_param_budget);
	u32 work = 0, drained = 0, got, done, want;
	bool notified, handed_off = false;
	struct kevd_direct d = { };
	int direct;

	if (test_bit(KEVD_POLL_DEAD, &evd->poll_state)) {
		kevd_poll_complete(p, evd);
		return;
	}
	notified = test_and_clear_bit(KEVD_POLL_NOTIFIED, &evd->poll_state);
	if (unlikely(READ_ONCE(evd->ring.nfenced))) {
		work = kevd_cq_unfence(evd, p->wcs, budget);
		drained = work;
	}
	while (work < budget) {
		got = 0;
		if (evd->cq) {
			want = min(budget - work, (u32)KEVD_BATCH);
			direct = kevd_deliver_direct(evd, p, &d, p->wcs, want);
			if (direct >= 0) {
				/* the ring was empty: so was the CQ, or go on */
				drained += direct;
				work += direct;
				if (!direct)
					break;
				continue;
			}
			/* No session across a MANY hand-off. */
			kevd_direct_end(evd, &d);
			got = kevd_cq_drain(evd, p->wcs, want);
		}
		drained += got;
		done = kevd_deliver(evd, p, p->evs, budget - work, &handed_off);
		if (handed_off)
			return;
		if (!got && !done)
			break;
		work += got + done;
	}
	if (notified && !drained)
		evd->postats.empty_notifications++;
	if (work >= budget || kevd_defer_arm(evd, work) ||
	    kevd_arm_and_check(evd, p, &d, p->wcs)) {
		kevd_direct_end(evd, &d);
		kevd_requeue(p, evd);
		return;
	}
	kevd_direct_end(evd, &d);
	kevd_poll_complete(p, evd);
}

/*
 * A new round: what @p queued itself during the last one, then what was
 * queued meanwhile (each EVD gets one pass per round).
 */
static bool kevd_poller_take(struct kevd_poller *p)
{
	list_splice_init(&p->again, &p->todo);
	spin_lock_irq(&p->lock);
	list_splice_tail_init(&p->run_list, &p->todo);
	spin_unlock_irq(&p->lock);
	return !list_empty(&p->todo);
}

static int kevd_poller_fn(void *data)
{
	struct kevd_poller *p = data;
	struct kevd *evd;

	for (;;) {
		set_current_state(TASK_IDLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!kevd_poller_take(p)) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		while ((evd = list_first_entry_or_null(&p->todo, struct kevd,
						       poll_node))) {
			list_del_init(&evd->poll_node);
			kevd_poll_one(p, evd);
			cond_resched();
		}
	}
	return 0;
}

/**
 * kevd_pollers_start() - start the pool (module init).
 *
 * Context: process context.
 * Return: 0, or a negative errno with nothing left running.
 */
int kevd_pollers_start(void)
{
	unsigned int n = kevd_param_pollers ?: num_online_cpus();
	unsigned int i;
	int ret;

	/* about 6 KiB a poller: 1024 of them need vmalloc */
	kevd_pollers = kvcalloc(n, sizeof(*kevd_pollers), GFP_KERNEL);
	if (!kevd_pollers)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct kevd_poller *p = &kevd_pollers[i];

		spin_lock_init(&p->lock);
		INIT_LIST_HEAD(&p->run_list);
		INIT_LIST_HEAD(&p->todo);
		INIT_LIST_HEAD(&p->again);
		p->idx = i;
		p->task = kthread_create(kevd_poller_fn, p, "kevd_poll/%u", i);
		if (IS_ERR(p->task)) {
			ret = PTR_ERR(p->task);
			goto err;
		}
		wake_up_process(p->task);
	}
	kevd_npollers = n;
	return 0;
err:
	while (i--)
		kthread_stop(kevd_pollers[i].task);
	kvfree(kevd_pollers);
	kevd_pollers = NULL;
	return ret;
}

/**
 * kevd_pollers_stop() - stop the pool (module exit).
 *
 * Every EVD is freed by then (its consumer module is gone), so the run
 * lists are empty.
 *
 * Context: process context; sleeps.
 */
void kevd_pollers_stop(void)
{
	unsigned int i;

	for (i = 0; i < kevd_npollers; i++)
		kthread_stop(kevd_pollers[i].task);
	kvfree(kevd_pollers);
	kevd_pollers = NULL;
	kevd_npollers = 0;
}
