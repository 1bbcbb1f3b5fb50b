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
 *   - A pass is the EVD's poll method (kevd_pass(), evd/pass.c, given to
 *     kevd_pollers_start() as irq_poll and NAPI take theirs): it drains
 *     the CQ within the budget, delivers upcalls, and when idle arms the
 *     CQ (or gives the EVD back, unarmed, to a consumer that pulls); it
 *     returns whether the EVD goes idle, needs another pass (the
 *     tail of the list) or was handed to another poller. This file
 *     schedules and calls nothing else of kevd's.
 *   - A round (kevd_poller_fn()), as net_rx_action(): the poller takes its
 *     whole run list in one lock round trip and makes a pass over each
 *     EVD; the EVDs it queues again itself wait on a private list and
 *     open the next round, before those queued meanwhile. No lock and no
 *     wake-up per pass. Before it runs upcalls, the poller puts the rest
 *     of its round back on its run list (kevd_poller_publish(); before a
 *     slow EVD's, on the next poller's), where other threads find it
 *     while the upcall runs. That ends the round early: one lock round
 *     trip per upcall batch, when the round holds other EVDs, and what
 *     it queued again comes after what was queued meanwhile.
 *
 * Ownership: while KEVD_POLL_SCHED is set exactly one poller owns the EVD:
 * it alone drains and arms the CQ. For MANY the owner hands the EVD to the
 * next poller not inside an upcall before it runs a batch of upcalls, so
 * batches overlap.
 * kevd_assert_owner() checks, on debug kernels, that the caller is the
 * poller thread making the pass over the EVD.
 *
 * Slow upcalls: an upcall runs in its poller thread. kevd_schedule()
 * avoids pollers that are inside an upcall, but an EVD that an upcall
 * waits on is queued on that upcall's poller, whose thread makes the
 * pass (kevd_poll_queued_here()); so is one another poller keeps for
 * another pass (kevd_poller_requeue()) or holds in a round it publishes
 * or sheds (kevd_poller_take_waited()): it may run an upcall that waits
 * for the waiter's before it comes back to it. An upcall batch that took longer
 * than KEVD_SLOW_UPCALL_NS (or slept that long) marks its EVD slow, and
 * before a poller runs upcalls of a slow EVD it passes the
 * other EVDs it holds to the next poller not inside an upcall (if every
 * other poller is inside one, to the next). So a slow upcall delays only
 * its own EVD, except, once, the EVDs already queued behind its first
 * slow batch (with a single poller, all of them). Fast upcalls pass
 * nothing: handing the queue over at every batch made two pollers trade
 * it back and forth, a wake-up per pass. A poller whose upcall waits in
 * kevd_free() or TEARDOWN (for another EVD's upcalls to end, or for the
 * poller that holds it to let go) lets go, while it waits, of the dead
 * EVDs it holds, including those passed to it or marked dead meanwhile
 * (kevd_poll_wait_upcalls(), kevd_poll_wait_idle()): no kevd_free()
 * waits for a poller that waits. And kevd_free() takes its EVD off any
 * poller's run list itself: it does not wait for a poller that is busy
 * in an upcall to reach an EVD passed to it, or one its round held when
 * the upcall began (published).
 *
 * Locking (the order is in kevd_internal.h): poller->lock guards the run
 * list only. The round's lists (todo, again) belong to the poller thread:
 * no lock; no other thread looks at them.
 */
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/isolation.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include "kevd_internal.h"
#include "kevd_trace.h"

/**
 * struct kevd_poller - one poller thread.
 * @lock: guards @run_list.
 * @run_list: EVDs waiting for a pass, in order.
 * @todo: the current round's EVDs still to pass over (thread only).
 * @again: EVDs the thread queued again itself this round (thread only).
 * @task: the thread.
 * @passing: the EVD the thread makes a pass over now, or NULL.
 * @in_upcall: the EVD whose upcall the thread runs now, or NULL.
 * @batch: the batch it delivers (NULL for a doorbell); thread only.
 * @published: the thread put the rest of its round back on @run_list
 *	before an upcall (kevd_poller_publish()); thread only.
 * @upcall_t0: local_clock() when that upcall batch began.
 * @waiting: the thread's upcall waits in kevd_free() or TEARDOWN
 *	(kevd_poll_wait_idle(), kevd_poll_wait_upcalls()); written by the
 *	thread, read by kevd_poll_kick_waiters().
 * @idx: index in the pool.
 * @cpu: the CPU it runs on while that CPU is online.
 * @scratch: the pass's buffers.
 */
struct kevd_poller {
	spinlock_t lock;	/* guards run_list */
	struct list_head run_list;
	struct list_head todo;
	struct list_head again;
	struct task_struct *task;
	struct kevd *passing;
	struct kevd *in_upcall;
	struct kevd_batch *batch;
	u64 upcall_t0;
	bool published;
	bool waiting;
	unsigned int idx;
	int cpu;
	struct kevd_scratch scratch;
} ____cacheline_aligned_in_smp;

/**
 * struct kevd_pool - the poller threads.
 * @pollers: the array.
 * @nr_pollers: its size (the nr_pollers parameter, or the online CPUs).
 * @next: round robin for kevd_poller_pick().
 * @pass: the poll method.
 * @hp_state: the CPU hotplug state of kevd_poller_cpu_online() and
 *	kevd_poller_cpu_down(), or 0.
 * @idle_waits: kevd_poll_wait_idle() calls in progress.
 * @poller_waits: kevd_wait() calls registered on a poller thread
 *	(kevd_poll_wait_enter()): while there are any, a poller that
 *	publishes its round looks for the EVDs they wait on.
 */
static struct kevd_pool {
	struct kevd_poller *pollers;
	unsigned int nr_pollers;
	atomic_t next;
	kevd_pass_fn pass;
	int hp_state;
	atomic_t idle_waits ____cacheline_aligned_in_smp;
	atomic_t poller_waits;
} kevd_pool;

/**
 * kevd_nr_pollers() - size of the pool.
 *
 * Return: the number of poller threads.
 */
unsigned int kevd_nr_pollers(void)
{
	return kevd_pool.nr_pollers;
}
EXPORT_SYMBOL_GPL(kevd_nr_pollers);	/* not public: for kevd's own tests */

/**
 * kevd_poller_pick() - the home poller for a new EVD.
 * @cpu: a CPU, or %KEVD_ANY for round robin.
 *
 * The poller that runs on @cpu; with fewer pollers than CPUs, one chosen
 * by @cpu's number.
 *
 * Return: a poller.
 */
struct kevd_poller *kevd_poller_pick(int cpu)
{
	unsigned int i;

	if (cpu == KEVD_ANY)
		return &kevd_pool.pollers[atomic_inc_return(&kevd_pool.next) %
					  kevd_pool.nr_pollers];
	for (i = 0; i < kevd_pool.nr_pollers; i++)
		if (kevd_pool.pollers[i].cpu == cpu)
			return &kevd_pool.pollers[i];
	return &kevd_pool.pollers[cpu % kevd_pool.nr_pollers];
}

static struct kevd_poller *kevd_poller_next(struct kevd_poller *p)
{
	return &kevd_pool.pollers[(p->idx + 1) % kevd_pool.nr_pollers];
}

static int kevd_poller_fn(void *data);

/**
 * kevd_current_poller() - the poller whose thread is current, or NULL.
 *
 * O(1): every kevd_modify_upcall() asks, and the seed pattern calls that
 * from each upcall, whatever nr_pollers is.
 *
 * Context: any; NULL in an interrupt, even on a poller's CPU.
 * Return: the caller's poller, or NULL off a poller thread.
 */
struct kevd_poller *kevd_current_poller(void)
{
	if (!in_task() || !(current->flags & PF_KTHREAD) ||
	    kthread_func(current) != kevd_poller_fn)
		return NULL;
	return kthread_data(current);
}

/*
 * The first poller after @p that is not inside an upcall, for what @p
 * passes on: a poller inside an upcall may stay there as long as the
 * upcall likes, even wait for the work passed to it. NULL if every other
 * poller is inside one (or there is none): @p keeps its work.
 */
static struct kevd_poller *kevd_poller_other_free(struct kevd_poller *p)
{
	struct kevd_poller *q;

	for (q = kevd_poller_next(p); q != p; q = kevd_poller_next(q))
		if (!READ_ONCE(q->in_upcall))
			return q;
	return NULL;
}

/* The home poller, or the first after it that is not inside an upcall. */
static struct kevd_poller *kevd_poller_free(struct kevd *evd)
{
	struct kevd_poller *p = evd->home;

	return READ_ONCE(p->in_upcall) ? kevd_poller_other_free(p) : p;
}

static void kevd_poller_move_on(struct kevd_poller *p, struct kevd *evd,
				bool own);
static void kevd_poller_move(struct kevd_poller *p, struct kevd *evd,
			     struct kevd_poller *q, bool own);

/*
 * @evd was just added to a run list, under that list's lock: if it is
 * dead, its kevd_free() may have looked at the run lists before, and
 * waits (kevd_poll_wait_idle()). Under the lock, @evd cannot be gone.
 */
static void kevd_poller_added(struct kevd *evd)
{
	if (unlikely(test_bit(KEVD_POLL_DEAD, &evd->poll_state)))
		wake_up_var(&evd->poll_state);
}

static void kevd_poller_enqueue(struct kevd_poller *p, struct kevd *evd)
{
	unsigned long flags;

	spin_lock_irqsave(&p->lock, flags);
	list_add_tail(&evd->poll_node, &p->run_list);
	kevd_poller_added(evd);
	spin_unlock_irqrestore(&p->lock, flags);
	wake_up_process(p->task);
}

/*
 * Queue @evd, which the caller has made owned by a queue, for its pass:
 * on the poller whose upcall waits in kevd_wait() on it, whichever thread
 * schedules (evd->wait_poller: its thread makes the pass itself,
 * kevd_pull_due(), and may be the only one free to); else on a free one,
 * else on the home. Not on a poller whose upcall waits for anything
 * else: an upcall that schedules an EVD and then waits for what its
 * upcall does would wait for itself.
 *
 * The wait may end, or begin, between the read of wait_poller and the
 * enqueue: a waiter that leaves (kevd_poll_move_off_here()), or one that
 * arrives and pulls (kevd_poll_take()), looked at the run lists before
 * @evd was there. Both look under the poller's lock, the waiter after
 * writing wait_poller, this after queuing: one of them sees the other,
 * and moves (or takes) @evd. Once queued, @evd may be freed by another
 * thread: its memory stays for the RCU read section.
 */
static void kevd_poller_queue(struct kevd *evd)
{
	struct kevd_poller *w = READ_ONCE(evd->wait_poller), *now;
	struct kevd_poller *to = w ?: kevd_poller_free(evd) ?: evd->home;

	rcu_read_lock();
	kevd_poller_enqueue(to, evd);
	now = READ_ONCE(evd->wait_poller);
	if (now != w)
		kevd_poller_move(to, evd, now ?: kevd_poller_free(evd), false);
	rcu_read_unlock();
}

/*
 * Called by @p's own thread for an EVD it owns: wait for the next round.
 * Unless an upcall on another poller waits on @evd: that poller's thread
 * makes the pass (kevd_poller_queue()); @p may run an upcall before its
 * next round, one that waits for the waiter's.
 */
static void kevd_poller_requeue(struct kevd_poller *p, struct kevd *evd)
{
	struct kevd_poller *w = READ_ONCE(evd->wait_poller);

	if (w && w != p)
		kevd_poller_queue(evd);
	else
		list_add_tail(&evd->poll_node, &p->again);
}

/*
 * Under @q's lock: take off @q's run list the EVDs @first to @last (a
 * poller's round, just put there) that an upcall on another poller waits
 * on, onto @to, if any such wait is registered. A waiter that began
 * while that round was the poller's own looked for them on the run lists
 * before they were there, and sleeps: it is woken by a pass queued on
 * its poller (kevd_pull_due()), which the caller makes. The waiter
 * counts itself (kevd_poll_wait_enter()) and writes wait_poller before
 * it looks under @q's lock; this reads both under it: one of them sees
 * the other. The walk costs the round, and only while a wait runs on a
 * poller thread.
 */
static void kevd_poller_take_waited(struct kevd_poller *q, struct kevd *first,
				    struct kevd *last, struct list_head *to)
{
	struct kevd *evd = first, *tmp;
	struct kevd_poller *w;

	lockdep_assert_held(&q->lock);
	if (!atomic_read(&kevd_pool.poller_waits))
		return;
	list_for_each_entry_safe_from(evd, tmp, &q->run_list, poll_node) {
		w = READ_ONCE(evd->wait_poller);
		if (w && w != q)
			list_move_tail(&evd->poll_node, to);
		if (evd == last)
			break;
	}
}

/* Queue each EVD of @waited (kevd_poller_take_waited()) on its waiter's. */
static void kevd_poller_queue_waited(struct list_head *waited)
{
	struct kevd *evd, *tmp;

	list_for_each_entry_safe(evd, tmp, waited, poll_node) {
		list_del_init(&evd->poll_node);
		kevd_poller_queue(evd);
	}
}

/*
 * Called by @p's own thread before it runs upcalls: put the rest of its
 * round (todo, then again) at the head of its run list. An upcall may run
 * long, or wait for another thread; meanwhile kevd_free() takes a dead
 * EVD off the run list itself, and the QP drain or a pull from another
 * poller's upcall takes one it polls (kevd_poll_take()). The round ends
 * here: the EVD whose upcalls run, if queued again, comes after these
 * (kevd_poller_take()). A dead EVD moved here is announced as any EVD
 * added to a run list (kevd_poller_added()), but only while a
 * kevd_poll_wait_idle() runs: a walk per upcall batch would cost a round
 * of N EVDs N^2. The count is read under the run list's lock, which the
 * waiter takes to look at the list after it counted itself (DEAD set
 * before): either the waiter finds the EVDs moved here, or this finds
 * the count and DEAD.
 */
static void kevd_poller_publish(struct kevd_poller *p)
{
	struct kevd *evd, *first, *last;
	unsigned long flags;
	LIST_HEAD(waited);

	list_splice_tail_init(&p->again, &p->todo);
	if (list_empty(&p->todo))
		return;
	first = list_first_entry(&p->todo, struct kevd, poll_node);
	last = list_last_entry(&p->todo, struct kevd, poll_node);
	spin_lock_irqsave(&p->lock, flags);
	list_splice_init(&p->todo, &p->run_list);
	p->published = true;
	if (atomic_read(&kevd_pool.idle_waits)) {
		list_for_each_entry(evd, &p->run_list, poll_node) {
			kevd_poller_added(evd);
			if (evd == last)
				break;
		}
	}
	kevd_poller_take_waited(p, first, last, &waited);
	spin_unlock_irqrestore(&p->lock, flags);
	kevd_poller_queue_waited(&waited);
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

	trace_kevd_schedule(evd, !(val & BIT(KEVD_POLL_SCHED)));
	if (val & BIT(KEVD_POLL_SCHED))
		return false;
	kevd_poller_queue(evd);
	return true;
}

/*
 * The owner's end of a pass: keep @evd (return true) if it needs another
 * pass (@again) or was scheduled meanwhile (MISSED), else let go. The
 * caller queues a kept EVD. After a let-go @evd may be freed at once: do
 * not touch it (wake_up_var() only hashes the address).
 */
static bool kevd_poll_let_go(struct kevd *evd, bool again)
{
	unsigned long val = READ_ONCE(evd->poll_state), new;

	do {
		new = val & ~(BIT(KEVD_POLL_SCHED) | BIT(KEVD_POLL_MISSED));
		if ((again || (val & BIT(KEVD_POLL_MISSED))) &&
		    !(val & BIT(KEVD_POLL_DEAD)))
			new |= BIT(KEVD_POLL_SCHED);
	} while (!try_cmpxchg(&evd->poll_state, &val, new));

	if (new & BIT(KEVD_POLL_SCHED))
		return true;
	if (val & BIT(KEVD_POLL_DEAD))
		wake_up_var(&evd->poll_state);	/* kevd_poll_wait_idle() */
	return false;
}

static void kevd_poll_complete(struct kevd_poller *p, struct kevd *evd)
{
	if (kevd_poll_let_go(evd, false))
		kevd_poller_requeue(p, evd);
}

/**
 * kevd_poll_try_own() - take a free EVD for a pass outside the pollers.
 * @evd: the EVD.
 *
 * For a consumer that pulls completions itself (dto/pull.c), as NAPI's
 * busy polling takes NAPI_STATE_SCHED: it succeeds only when no poller
 * owns or has queued the EVD. The caller then owns it, and gives it up
 * with kevd_poll_release().
 *
 * Context: process context.
 * Return: true if the caller now owns @evd.
 */
bool kevd_poll_try_own(struct kevd *evd)
{
	unsigned long val = READ_ONCE(evd->poll_state);

	do {
		if (val & (BIT(KEVD_POLL_SCHED) | BIT(KEVD_POLL_DEAD)))
			return false;
	} while (!try_cmpxchg(&evd->poll_state, &val,
			      val | BIT(KEVD_POLL_SCHED)));
	WRITE_ONCE(evd->busy_owner, current);
	return true;
}

/**
 * kevd_poll_release() - end a pass kevd_poll_try_own() or _take() allowed.
 * @evd: the EVD; the caller owns it.
 * @again: it needs another pass (budget used while a thread waits or
 *	after a re-arm, an arm failed, or upcalls were enabled during a
 *	pull); false also after a pull's unarmed let-go (dto/pull.c),
 *	which the consumer's next call takes from.
 *
 * Lets go of @evd, unless it needs another pass or was scheduled during
 * this one (KEVD_POLL_MISSED): then its poller gets it, ownership and
 * all, and makes that pass. After a let-go @evd may be freed at once.
 *
 * Context: process context.
 */
void kevd_poll_release(struct kevd *evd, bool again)
{
	kevd_assert_owner(evd);
	WRITE_ONCE(evd->busy_owner, NULL);
	if (kevd_poll_let_go(evd, again))
		kevd_poller_queue(evd);
}

/**
 * kevd_poll_mark_missed() - note a notification for the EVD's owner.
 * @evd: the EVD.
 *
 * For the completion handler when a consumer waits (dto/cq.c): if
 * someone owns @evd, it makes one more pass (KEVD_POLL_MISSED), as
 * kevd_schedule() would have it; if nobody does, nothing changes and the
 * caller wakes the consumer, which pulls.
 *
 * Context: any, hard IRQ included.
 * Return: true if @evd is owned (or dead): the owner has been told.
 */
bool kevd_poll_mark_missed(struct kevd *evd)
{
	unsigned long val = READ_ONCE(evd->poll_state);

	do {
		if (val & BIT(KEVD_POLL_DEAD))
			return true;
		if (!(val & BIT(KEVD_POLL_SCHED)))
			return false;
	} while (!try_cmpxchg(&evd->poll_state, &val,
			      val | BIT(KEVD_POLL_MISSED)));
	return true;
}

static bool kevd_poll_idle(struct kevd *evd)
{
	return !(READ_ONCE(evd->poll_state) & BIT(KEVD_POLL_SCHED));
}

static bool kevd_poll_dead(struct kevd *evd)
{
	return test_bit(KEVD_POLL_DEAD, &evd->poll_state);
}

/* Move the dead EVDs of @from to @to. */
static void kevd_list_take_dead(struct list_head *from, struct list_head *to)
{
	struct kevd *evd, *tmp;

	list_for_each_entry_safe(evd, tmp, from, poll_node)
		if (kevd_poll_dead(evd))
			list_move_tail(&evd->poll_node, to);
}

/*
 * Called by @p's own thread, inside an upcall that waits: let go of every
 * dead EVD queued on @p. A dead EVD needs no pass, and a kevd_free()
 * (this poller's, or another's) waits for its let-go.
 */
static void kevd_poller_release_dead(struct kevd_poller *p)
{
	struct kevd *evd, *tmp;
	LIST_HEAD(dead);

	kevd_list_take_dead(&p->todo, &dead);
	kevd_list_take_dead(&p->again, &dead);
	spin_lock_irq(&p->lock);
	kevd_list_take_dead(&p->run_list, &dead);
	spin_unlock_irq(&p->lock);
	list_for_each_entry_safe(evd, tmp, &dead, poll_node) {
		list_del_init(&evd->poll_node);
		kevd_poll_complete(p, evd);
	}
}

static bool kevd_list_has_dead(struct list_head *head)
{
	struct kevd *evd;

	list_for_each_entry(evd, head, poll_node)
		if (kevd_poll_dead(evd))
			return true;
	return false;
}

/* Is @evd on @head? Then take it off if @take. */
static bool kevd_list_find(struct list_head *head, struct kevd *evd,
			   bool take)
{
	struct kevd *e;

	list_for_each_entry(e, head, poll_node) {
		if (e != evd)
			continue;
		if (take)
			list_del_init(&evd->poll_node);
		return true;
	}
	return false;
}

/* Is @evd on @q's run list? Then take it off if @take. */
static bool kevd_poller_run_find(struct kevd_poller *q, struct kevd *evd,
				 bool take)
{
	unsigned long flags;
	bool found;

	spin_lock_irqsave(&q->lock, flags);
	found = kevd_list_find(&q->run_list, evd, take);
	spin_unlock_irqrestore(&q->lock, flags);
	return found;
}

/*
 * Called by @p's own thread: is @evd in its round (todo, again)? Then
 * take it off if @take. No lock: the round's lists are the thread's.
 */
static bool kevd_poller_round_find(struct kevd_poller *p, struct kevd *evd,
				   bool take)
{
	return kevd_list_find(&p->todo, evd, take) ||
	       kevd_list_find(&p->again, evd, take);
}

/* Is @evd on a poller's run list? Then take it off if @take. */
static bool kevd_poll_find_queued(struct kevd *evd, bool take)
{
	unsigned int i;

	for (i = 0; i < kevd_pool.nr_pollers; i++)
		if (kevd_poller_run_find(&kevd_pool.pollers[i], evd, take))
			return true;
	return false;
}

/*
 * Let go of @evd, dead, if a poller's run list holds it. The poller may
 * be inside a consumer's upcall that waits for the caller (it was passed
 * @evd by a shed, a MANY hand-off or a schedule that found every poller
 * busy), so nobody waits for it. A queued EVD is owned by its queue: who
 * takes it off owns it. The rounds' lists (todo, again) are the threads'
 * own and are not looked at.
 */
static void kevd_poll_take_dead(struct kevd *evd)
{
	if (kevd_poll_find_queued(evd, true))
		kevd_poll_let_go(evd, false);
}

/**
 * kevd_poll_take() - own an EVD now, for a poll outside its passes.
 * @evd: the EVD.
 *
 * As kevd_poll_try_own(), and also when @evd waits, queued, for a pass:
 * on a poller's run list, or in the round of the poller that calls
 * (from an upcall of another EVD). A queued EVD is owned by its queue:
 * who takes it off owns it. kevd_poll_release(@evd, true) gives it back,
 * and its pass comes after all.
 *
 * Context: process context.
 * Return: true if the caller now owns @evd.
 */
bool kevd_poll_take(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	if (kevd_poll_try_own(evd))
		return true;
	if (!(p && kevd_poller_round_find(p, evd, true)) &&
	    !kevd_poll_find_queued(evd, true))
		return false;
	WRITE_ONCE(evd->busy_owner, current);
	return true;
}

/**
 * kevd_poll_own_pull() - own an EVD for a consumer's pull.
 * @evd: the EVD.
 *
 * kevd_poll_try_own(): a pull only takes an EVD nobody owns or has
 * queued. Except from an upcall of another EVD, on a poller thread: the
 * pass @evd is queued for may be that very poller's, which cannot come
 * while the upcall waits for @evd; the pull takes @evd off its queue and
 * makes the pass itself (kevd_poll_take()).
 *
 * Context: process context.
 * Return: true if the caller now owns @evd.
 */
bool kevd_poll_own_pull(struct kevd *evd)
{
	if (kevd_poll_try_own(evd))
		return true;
	return kevd_current_poller() && kevd_poll_take(evd);
}

/**
 * kevd_poll_queued_here() - does @evd wait for a pass of the caller's poller?
 * @evd: the EVD.
 *
 * For a wait inside an upcall of another EVD (evd/evd.c,
 * kevd_wait_batch()): a pass over @evd goes to the waiter's poller,
 * whichever thread hands it on (kevd_poller_queue()); one queued
 * before the wait began may be in that poller's round. That pass cannot
 * come while the upcall waits: the waiter makes it itself
 * (kevd_poll_own_pull()). Queuing an EVD on a poller's run list wakes
 * that poller's thread, so a wait whose condition asks this sees it; the
 * round's lists are the thread's own.
 *
 * Context: process context; takes the poller's lock.
 * Return: true if @evd is queued on the calling poller thread's lists.
 */
bool kevd_poll_queued_here(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	return p && !kevd_poll_idle(evd) &&
	       (kevd_poller_round_find(p, evd, false) ||
		kevd_poller_run_find(p, evd, false));
}

/*
 * Take @evd off @p's run list (and, from @p's own thread, @own, its
 * round) and queue it on a poller not inside an upcall, if there is one;
 * if not, it stays, and waits for @p's upcall to return. The queue owns
 * @evd: moving it from one queue to another keeps it owned.
 */
static void kevd_poller_move_on(struct kevd_poller *p, struct kevd *evd,
				bool own)
{
	kevd_poller_move(p, evd, kevd_poller_free(evd), own);
}

/* The same, onto @q (if not NULL, nor @p). */
static void kevd_poller_move(struct kevd_poller *p, struct kevd *evd,
			     struct kevd_poller *q, bool own)
{
	if (q && q != p && ((own && kevd_poller_round_find(p, evd, true)) ||
			    kevd_poller_run_find(p, evd, true)))
		kevd_poller_enqueue(q, evd);
}

/**
 * kevd_poll_wait_enter() - a wait registers: its poller, counted.
 *
 * For kevd_wait()'s registration (evd->wait_poller): the calling poller
 * thread, or NULL off one. A poller's wait counts until
 * kevd_poll_wait_leave(): meanwhile a poller that publishes its round
 * passes the EVDs such a wait waits on to the waiter's poller
 * (kevd_poller_publish()).
 *
 * Context: process context; before the waiter pulls.
 * Return: the calling poller, or NULL.
 */
struct kevd_poller *kevd_poll_wait_enter(void)
{
	struct kevd_poller *p = kevd_current_poller();

	if (p)
		atomic_inc(&kevd_pool.poller_waits);
	return p;
}

/**
 * kevd_poll_wait_leave() - a wait that kevd_poll_wait_enter() counted ends.
 * @w: what kevd_poll_wait_enter() returned.
 *
 * Context: any.
 */
void kevd_poll_wait_leave(struct kevd_poller *w)
{
	if (w)
		atomic_dec(&kevd_pool.poller_waits);
}

/**
 * kevd_poll_move_off_here() - a waiter on a poller leaves: pass its EVD on.
 * @evd: the EVD; its waiter, the caller, has just unregistered (and
 *	cleared evd->wait_poller).
 *
 * A pass over @evd queued on the waiter's poller while it waited
 * (kevd_poller_queue()), which its wait did not make (it found its
 * events queued first), would wait for the upcall to return. It goes to
 * a poller not inside an upcall, if there is one.
 *
 * Context: process context; caller holds evd->lock; takes the pollers'
 * locks.
 */
void kevd_poll_move_off_here(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	lockdep_assert_held(&evd->lock);
	if (p && !kevd_poll_idle(evd))
		kevd_poller_move_on(p, evd, true);
}

/*
 * Called by @p's own thread: is a dead EVD queued on @p? Its EVDs may
 * have become dead, or been passed to it, since it last looked.
 */
static bool kevd_poller_has_dead(struct kevd_poller *p)
{
	bool found;

	if (kevd_list_has_dead(&p->todo) || kevd_list_has_dead(&p->again))
		return true;
	spin_lock_irq(&p->lock);
	found = kevd_list_has_dead(&p->run_list);
	spin_unlock_irq(&p->lock);
	return found;
}

/*
 * A wait of @p's upcall begins: from now on kevd_poll_kick_waiters()
 * wakes the thread. Full barrier: the flag is set before the lists are
 * looked at, as kevd_free() sets DEAD before it reads the flag.
 */
static void kevd_poller_wait_begin(struct kevd_poller *p)
{
	WRITE_ONCE(p->waiting, true);
	smp_mb();	/* pairs with kevd_poll_kick_waiters() */
}

/**
 * kevd_poll_kick_waiters() - an EVD was marked dead: wake waiting pollers.
 *
 * A poller whose upcall waits (kevd_poll_wait_idle(),
 * kevd_poll_wait_upcalls()) may hold the EVD that was just marked dead,
 * and that another waiter waits for: it looks at its lists again.
 *
 * Context: any; after KEVD_POLL_DEAD is set.
 */
void kevd_poll_kick_waiters(void)
{
	unsigned int i;

	smp_mb();	/* DEAD set, then the flags read: pairs with wait_begin */
	for (i = 0; i < kevd_pool.nr_pollers; i++)
		if (READ_ONCE(kevd_pool.pollers[i].waiting))
			wake_up_process(kevd_pool.pollers[i].task);
}

/**
 * kevd_poll_wait_upcalls() - wait until no upcall of @evd runs.
 * @evd: an EVD being freed or torn down.
 *
 * From a poller thread (an upcall that frees or tears down another EVD),
 * the upcall waited for may itself wait in kevd_free() for a dead EVD
 * queued on this poller: while it waits, the poller lets go of the dead
 * EVDs it holds, and of those that become dead or are passed to it.
 *
 * Context: process context; sleeps.
 */
void kevd_poll_wait_upcalls(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	might_sleep();
	if (!p) {
		wait_event(evd->wq, !atomic_read(&evd->upcalls_running));
		return;
	}
	kevd_poller_wait_begin(p);
	for (;;) {
		kevd_poller_release_dead(p);
		if (!atomic_read(&evd->upcalls_running))
			break;
		wait_event(evd->wq,
			   !atomic_read(&evd->upcalls_running) ||
			   kevd_poller_has_dead(p));
	}
	WRITE_ONCE(p->waiting, false);
}

/**
 * kevd_poll_wait_idle() - wait until no poller owns a dead EVD.
 * @evd: an EVD with KEVD_POLL_DEAD set.
 *
 * A dead EVD on a poller's run list needs no pass: the caller takes it
 * off and lets go of it itself, whatever that poller does (it may be in
 * an upcall that waits for the caller). From a poller thread (an upcall
 * that frees another EVD), @evd may also be in that very poller's round,
 * which cannot make the pass this waits for: it lets go of @evd itself.
 * A poller never waits for itself. Nor does it wait for an EVD another
 * waiting poller holds: a poller that waits lets go of the dead EVDs in
 * its round too, those passed to it meanwhile and those that become dead
 * (kevd_poll_kick_waiters()). What is left to wait for is a pass in
 * progress, its upcalls included, or a poller's round that reaches @evd
 * without running any: before its first upcall a poller puts the rest of
 * its round back on its run list (kevd_poller_publish()).
 *
 * Context: process context; sleeps.
 */
void kevd_poll_wait_idle(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	might_sleep();
	/* before the run lists are looked at, under their locks */
	atomic_inc(&kevd_pool.idle_waits);
	if (p)
		kevd_poller_wait_begin(p);
	for (;;) {
		if (p)
			kevd_poller_release_dead(p);
		kevd_poll_take_dead(evd);
		if (kevd_poll_idle(evd))
			break;
		wait_var_event(&evd->poll_state,
			       kevd_poll_idle(evd) ||
			       kevd_poll_find_queued(evd, false) ||
			       (p && kevd_poller_has_dead(p)));
	}
	if (p)
		WRITE_ONCE(p->waiting, false);
	atomic_dec(&kevd_pool.idle_waits);
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

/**
 * kevd_poller_owns() - is the caller the poller making a pass over @evd?
 * @evd: the EVD.
 *
 * For kevd_assert_owner() (debug kernels): also true inside an upcall the
 * pass runs, which executes on the same thread, and for a consumer that
 * owns @evd through kevd_poll_try_own().
 *
 * Return: true from the owner's thread during its pass.
 */
bool kevd_poller_owns(struct kevd *evd)
{
	struct kevd_poller *p = kevd_current_poller();

	if (!test_bit(KEVD_POLL_SCHED, &evd->poll_state))
		return false;
	return (p && p->passing == evd) ||
	       (in_task() && READ_ONCE(evd->busy_owner) == current);
}

/*
 * Pass the EVDs queued on @p to the next poller not inside an upcall, or
 * if every other is inside one to the next all the same: @p is about to
 * run a slow EVD's upcalls, the other poller's may be fast.
 * Return: false if there is no other poller.
 */
static bool kevd_poller_shed(struct kevd_poller *p)
{
	struct kevd_poller *to = kevd_poller_other_free(p) ?:
				 kevd_poller_next(p);
	struct kevd *evd, *first, *last;
	unsigned long flags;
	LIST_HEAD(waited);
	LIST_HEAD(moved);

	if (to == p)
		return false;
	list_splice_init(&p->todo, &moved);
	/* Racy peek: an EVD queued just after it is served after the upcall. */
	if (!data_race(list_empty(&p->run_list))) {
		spin_lock_irqsave(&p->lock, flags);
		list_splice_tail_init(&p->run_list, &moved);
		spin_unlock_irqrestore(&p->lock, flags);
	}
	list_splice_tail_init(&p->again, &moved);
	if (list_empty(&moved))
		return true;
	first = list_first_entry(&moved, struct kevd, poll_node);
	last = list_last_entry(&moved, struct kevd, poll_node);
	spin_lock_irqsave(&to->lock, flags);
	list_for_each_entry(evd, &moved, poll_node)
		kevd_poller_added(evd);
	list_splice_tail(&moved, &to->run_list);
	/* those a wait on a third poller waits on go there */
	kevd_poller_take_waited(to, first, last, &waited);
	spin_unlock_irqrestore(&to->lock, flags);
	wake_up_process(to->task);
	kevd_poller_queue_waited(&waited);
	return true;
}

/**
 * kevd_poller_upcall_begin() - the poller is about to run upcalls.
 * @p: the poller (current).
 * @evd: the EVD whose upcalls run.
 * @b: the batch they deliver, or NULL (a doorbell).
 *
 * Times the batch; a slow one marks the EVD (see "Slow upcalls" above).
 * Before the batch of a slow EVD, the EVDs @p holds go to the next
 * poller; before any other (or with no other poller), the rest of @p's
 * round goes back on its run list (kevd_poller_publish()).
 */
void kevd_poller_upcall_begin(struct kevd_poller *p, struct kevd *evd,
			      struct kevd_batch *b)
{
	WRITE_ONCE(p->in_upcall, evd);
	p->batch = b;
	if (!READ_ONCE(evd->upcall_slow) || !kevd_poller_shed(p))
		kevd_poller_publish(p);
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
	/* signed: a poller moved off a CPU going down reads another clock */
	if ((s64)(local_clock() - p->upcall_t0) > KEVD_SLOW_UPCALL_NS)
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
 * kevd_poller_handoff() - give an owned EVD to another poller (MANY).
 * @p: the current owner.
 * @evd: the EVD.
 *
 * To the next poller not inside an upcall: a busy one would hold the
 * rest of the EVD's events behind an upcall of another EVD, which may
 * even wait for them. With none, @p keeps @evd and delivers the rest
 * after its batch: the EVD waits for its own upcalls only (MANY does not
 * promise that two of them run at once).
 *
 * Return: true if handed off (the caller no longer owns @evd).
 */
bool kevd_poller_handoff(struct kevd_poller *p, struct kevd *evd)
{
	struct kevd_poller *to = kevd_poller_other_free(p);

	if (!to)
		return false;
	p->passing = NULL;	/* kevd_poller_owns(): no longer this pass's */
	kevd_poller_enqueue(to, evd);
	return true;
}

/*
 * One pass over @evd, which @p owns: the poll method's verdict decides
 * whether @p lets go of it, queues it again, or (handed off) must not
 * touch it any more.
 */
static void kevd_poller_pass(struct kevd_poller *p, struct kevd *evd)
{
	enum kevd_pass_ret ret = KEVD_PASS_IDLE;

	if (!test_bit(KEVD_POLL_DEAD, &evd->poll_state)) {
		p->passing = evd;
		ret = kevd_pool.pass(p, evd, &p->scratch);
		p->passing = NULL;
	}
	if (ret == KEVD_PASS_AGAIN)
		kevd_poller_requeue(p, evd);
	else if (ret == KEVD_PASS_IDLE)
		kevd_poll_complete(p, evd);
}

/*
 * A new round: what @p queued itself during the last one, then what was
 * queued meanwhile (each EVD gets one pass per round). After a round that
 * ended early (kevd_poller_publish()), the run list comes first: it
 * starts with that round's rest.
 */
static bool kevd_poller_take(struct kevd_poller *p)
{
	if (!p->published)
		list_splice_init(&p->again, &p->todo);
	spin_lock_irq(&p->lock);
	list_splice_tail_init(&p->run_list, &p->todo);
	p->published = false;
	spin_unlock_irq(&p->lock);
	list_splice_tail_init(&p->again, &p->todo);
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
			kevd_poller_pass(p, evd);
			cond_resched();
		}
	}
	return 0;
}

/*
 * CPU hotplug: a poller whose CPU goes down may run on any housekeeping
 * CPU, as an unbound kthread, until it comes back (the scheduler moves
 * it, with the EVDs on its lists: nothing is lost or reordered); then it
 * is bound to it again (one that wakes before this callback, the CPU
 * already inactive, is put anywhere by the scheduler's fallback first).
 * User space cannot move a poller: kthread_bind() at its start made it
 * refuse sched_setaffinity().
 */
static void kevd_poller_bind(int cpu, const struct cpumask *mask)
{
	unsigned int i;

	for (i = 0; i < kevd_pool.nr_pollers; i++)
		if (kevd_pool.pollers[i].cpu == cpu)
			set_cpus_allowed_ptr(kevd_pool.pollers[i].task, mask);
}

static int kevd_poller_cpu_online(unsigned int cpu)
{
	kevd_poller_bind(cpu, cpumask_of(cpu));
	return 0;
}

static int kevd_poller_cpu_down(unsigned int cpu)
{
	const struct cpumask *hk = housekeeping_cpumask(HK_TYPE_KTHREAD);

	/* the last active housekeeping CPU going: anywhere, then */
	if (!cpumask_intersects(hk, cpu_active_mask))
		hk = cpu_possible_mask;
	kevd_poller_bind(cpu, hk);
	return 0;
}

/**
 * kevd_pollers_start() - start the pool (module init).
 * @pass: the poll method: one pass over an EVD the calling poller owns.
 *
 * Context: process context.
 * Return: 0, or a negative errno with nothing left running.
 */
int kevd_pollers_start(kevd_pass_fn pass)
{
	struct kevd_poller *pollers;
	unsigned int i, n;
	int ret;

	/* the CPUs counted are those the pollers are placed on */
	cpus_read_lock();
	n = kevd_param_nr_pollers ?: num_online_cpus();
	/* about 9 KiB a poller: 1024 of them need vmalloc */
	pollers = kvcalloc(n, sizeof(*pollers), GFP_KERNEL);
	if (!pollers) {
		cpus_read_unlock();
		return -ENOMEM;
	}
	kevd_pool.pollers = pollers;
	kevd_pool.pass = pass;
	for (i = 0; i < n; i++) {
		struct kevd_poller *p = &pollers[i];

		spin_lock_init(&p->lock);
		INIT_LIST_HEAD(&p->run_list);
		INIT_LIST_HEAD(&p->todo);
		INIT_LIST_HEAD(&p->again);
		p->idx = i;
		/* poller i runs on the i-th online CPU (round robin) */
		p->cpu = cpumask_nth(i % num_online_cpus(), cpu_online_mask);
		p->task = kthread_create(kevd_poller_fn, p, "kevd_poll/%u", i);
		if (IS_ERR(p->task)) {
			ret = PTR_ERR(p->task);
			goto err;
		}
		kthread_bind(p->task, p->cpu);	/* and PF_NO_SETAFFINITY */
		wake_up_process(p->task);
	}
	kevd_pool.nr_pollers = n;
	ret = cpuhp_setup_state_nocalls_cpuslocked(CPUHP_AP_ONLINE_DYN,
						   "kevd/poller:online",
						   kevd_poller_cpu_online,
						   kevd_poller_cpu_down);
	if (ret < 0)
		goto err;
	kevd_pool.hp_state = ret;
	cpus_read_unlock();
	return 0;
err:
	while (i--)
		kthread_stop(pollers[i].task);
	cpus_read_unlock();
	kvfree(pollers);
	kevd_pool.pollers = NULL;
	kevd_pool.nr_pollers = 0;
	return ret;
}

/**
 * kevd_pollers_restart() - stop the pool and start it with @nr pollers.
 * @nr: as the nr_pollers parameter (0: one per online CPU).
 * @old: where the parameter's previous value goes.
 *
 * Not public: kevd's own tests walk the pool's start, the part of kevd's
 * module init that allocates, under fail-nth with each nr_pollers
 * (kunit_tests/fault_test.c). Refused while an EVD exists; nothing may
 * create one meanwhile. After a failure the pool is empty (no poller):
 * the caller starts it again.
 *
 * Context: process context; sleeps.
 * Return: 0, -EBUSY, or the error of kevd_pollers_start().
 */
int kevd_pollers_restart(unsigned int nr, unsigned int *old)
{
	might_sleep();
	if (kevd_nr_evds())
		return -EBUSY;
	kevd_pollers_stop();
	*old = READ_ONCE(kevd_param_nr_pollers);
	WRITE_ONCE(kevd_param_nr_pollers, nr);
	return kevd_pollers_start(kevd_pass);
}
EXPORT_SYMBOL_GPL(kevd_pollers_restart);	/* not public: for kevd's own tests */

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

	if (kevd_pool.hp_state > 0)
		cpuhp_remove_state_nocalls(kevd_pool.hp_state);
	kevd_pool.hp_state = 0;
	for (i = 0; i < kevd_pool.nr_pollers; i++)
		kthread_stop(kevd_pool.pollers[i].task);
	kvfree(kevd_pool.pollers);
	kevd_pool.pollers = NULL;
	kevd_pool.nr_pollers = 0;
}
