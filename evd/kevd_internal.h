/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd internals shared by evd/, dto/ and upcall_policy/.
 *
 * Locking: the one statement of the rules; each file's header points here.
 * Outermost first:
 *
 *   evd->resize_mutex
 *	one kevd_resize() at a time (process context); kevd_free() holds it
 *	(a trylock: refused while a resize runs) to mark the EVD closed, and
 *	a QP drain that grows a full ring (a trylock, dto/drain.c).
 *   evd->lock (spin_lock_irqsave)
 *	upcall policy, upcall object and flag, state bits, the waiter, the
 *	gated QPs; the count of upcall batches in progress (an atomic) is
 *	raised under it and dropped without it. The completion handler reads
 *	the state under it in hard-IRQ context.
 *   ring->cons_lock (spin_lock_irqsave)
 *	the consumer index and counters; serialises dequeue, wait and upcall
 *	batches; and evd->cq_stalled, which a drain sets under it
 *	(kevd_ring_reserve_flag()) and a take reads and clears under it.
 *   ring->prod_lock (spin_lock_irqsave)
 *	the producer index and counters, the slot reservations of CQ drains,
 *	the fenced events; taken inside evd->lock to hold or let in a gated
 *	endpoint's ESTABLISHED (dto/cq.c).
 *   poller->lock (spin_lock_irqsave)
 *	the run list of a poller thread; taken inside evd->lock (the
 *	completion handler schedules under it), no kevd lock inside it
 *	(the wake-up of a kevd_free() waiter, wake_up_var(), runs under
 *	it: kevd_poller_added()).
 *   kevd_list_lock (a mutex, evd/debugfs.c)
 *	the global list of EVDs; taken alone.
 *
 * Only resize, kevd_ring_push_front() and a drain that found the ring full
 * (kevd_ring_reserve_flag(), kevd_ring_unfence_flag()) nest the two ring
 * locks (cons_lock, then prod_lock). evd->lock is never taken inside a
 * ring lock.
 *
 * Wording, everywhere: "Caller holds X" means the function expects X held
 * and says so with lockdep_assert_held(); "takes X" means it acquires X
 * itself. "The caller owns the EVD" means the rule below, and the function
 * says so with kevd_assert_owner().
 *
 * Ownership (the NAPI rule): an EVD whose KEVD_POLL_SCHED bit is set
 * belongs to exactly one owner, which alone drains its CQ, arms the CQ
 * and delivers SINGLE_INSTANCE upcalls: a poller, or a consumer that
 * pulls with upcalls disabled (kevd_poll_try_own(), dto/pull.c). kevd_schedule() from any context
 * either takes the bit and queues the EVD, or, if it is taken, sets
 * KEVD_POLL_MISSED so the owner makes one more pass before letting go.
 */
#ifndef _KEVD_INTERNAL_H
#define _KEVD_INTERNAL_H

#include <linux/cache.h>
#include <linux/jiffies.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/math64.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <kevd/kevd.h>

#define KEVD_MAX_QLEN		BIT(20)
/* The largest ring: twice the largest queue length (kevd_ring_grow()). */
#define KEVD_MAX_SLOTS		(2 * KEVD_MAX_QLEN)
/* Slots only the streams that cannot wait (CR, connection, async) use. */
#define KEVD_HEADROOM		8
/*
 * Work completions polled per ib_poll_cq() call, and events per
 * SINGLE_INSTANCE batch. MANY batches are smaller, so that more of them
 * run side by side.
 */
#define KEVD_BATCH		64
#define KEVD_MANY_BATCH		16
/*
 * An upcall batch longer than this (running or asleep) marks its EVD slow
 * (evd/poller.c); as NAPI's netdev_budget_usecs, 2 ms.
 */
#define KEVD_SLOW_UPCALL_NS	(2 * NSEC_PER_MSEC)
/* kevd_cq_flush_qp() waits at most this long for a QP's markers */
#define KEVD_FLUSH_WAIT		(5 * HZ)
/*
 * kevd_cq_drain_hold() waits at most this long for a full queue to take
 * its marker: in a CM handler, which holds up the id's events.
 */
#define KEVD_HOLD_POST_WAIT	(HZ / 5)
/*
 * A hold whose markers are not in after this long ends (kevd's work, not
 * the handler's): the connection events it held go late rather than
 * never, should the provider never flush them (or the CQ fail).
 */
#define KEVD_HOLD_WAIT		(5 * HZ)

/* Bits of kevd->poll_state. */
enum {
	KEVD_POLL_SCHED,	/* owned by a poller (queued or running) */
	KEVD_POLL_MISSED,	/* scheduled again while owned */
	KEVD_POLL_DEAD,		/* being freed: never scheduled again */
	KEVD_POLL_NOTIFIED,	/* a CQ notification came since the last pass */
};

/* Producer-side counters: written under ring->prod_lock. */
struct kevd_prod_stats {
	u64 posted[KEVD_NR_STREAMS];
	u64 overflows;
	u64 drops;
	u64 max_batch;
};

/* Consumer-side counters: written under ring->cons_lock. */
struct kevd_cons_stats {
	u64 delivered[KEVD_NR_STREAMS];
};

/**
 * struct kevd_ring_run - events a stopped upcall batch gave back.
 * @orig: the ring index its first event had when the batch popped it.
 * @left: how many of them are still queued (at the front, in this run).
 */
struct kevd_ring_run {
	u32 orig;
	u32 left;
};

/**
 * struct kevd_ring - the event ring of one EVD.
 * @prod: next slot to fill; written under @prod_lock, read anywhere.
 * @resv: slots reserved by a CQ drain in flight; under @prod_lock.
 * @prod_lock: serialises producers.
 * @fenced: connection events waiting for the CQ to be drained (struct
 *	kevd_fenced, oldest first); under @prod_lock.
 * @nfenced: their number; written under @prod_lock, read anywhere.
 * @fence_seq: the sequence number of the last event fenced; written
 *	under @prod_lock with release, read with acquire
 *	(kevd_ring_fence_seq()).
 * @pstats: producer counters; written under @prod_lock.
 * @head: next slot to take, and the first that producers may not reuse;
 *	written under @cons_lock (a pop with release; a give-back, which
 *	lowers it, also under @prod_lock, where producers read it), read
 *	anywhere.
 * @cons_lock: serialises consumers.
 * @cstats: consumer counters; written under @cons_lock.
 * @nruns: the runs in @runs; under @cons_lock.
 * @runs: room for one run per poller (kevd_ring_max_runs()): the runs
 *	of events given back by stopped upcall batches that are
 *	still at the front, oldest first (kevd_ring_push_front()): a later
 *	give-back goes behind the older ones. Their @orig are ring indices
 *	of one numbering, which a give-back changes: the next batch's pop
 *	clears them (kevd_ring_pop()). Under @cons_lock.
 * @slots: the events; replaced only by resize, under both locks.
 * @mask: number of slots minus one (a power of two minus one).
 * @headroom: slots kept for the streams that cannot wait.
 *
 * Producer and consumer state live on separate cache lines; the fields
 * both sides read but only resize writes share a third one.
 */
struct kevd_ring {
	u32 prod ____cacheline_aligned_in_smp;
	u32 resv;
	spinlock_t prod_lock;	/* serialises producers */
	u32 nfenced;
	u32 fence_seq;
	struct list_head fenced;
	struct kevd_prod_stats pstats;

	u32 head ____cacheline_aligned_in_smp;
	spinlock_t cons_lock;	/* serialises consumers */
	struct kevd_cons_stats cstats;
	u32 nruns;
	struct kevd_ring_run *runs;

	struct kevd_event *slots ____cacheline_aligned_in_smp;
	u32 mask;
	u32 headroom;
};

/*
 * Counters of the owner (a poller, or a consumer's pull; the completion
 * handler's are atomics).
 * direct: DTO events delivered straight from the CQ (kevd_deliver_direct(),
 * and a batch call's pull, kevd_pull_into()), counted here as posted and
 * delivered once handed to the consumer (a direct batch before its
 * upcalls; its give-back takes them off again); max_direct: the largest
 * such batch (for a pull, the most one call took that way).
 */
struct kevd_poll_stats {
	u64 upcalls;
	u64 direct;
	u64 max_direct;
	u64 empty_notifications;
	u64 arms;
	u64 repolls;
	u64 backpressure_stalls;
	u64 pulls;
};

struct kevd_poller;

/**
 * struct kevd_batch - the events an upcall batch delivers.
 * @evd: the EVD.
 * @first: the ring index of the first event (popped events: where their
 *	give-back goes, kevd_ring_push_front()).
 * @gen: evd->upcall_gen when the batch began; it stops when that changes.
 * @pos: the event whose invocation runs now, or the last one that a
 *	dequeue from inside it took (kevd_batch_take()).
 * @n: events in the batch; lowered when the rest goes back to the EVD.
 * @taken: of which a dequeue from inside an upcall took this many.
 * @wcs: completions polled for direct delivery, or NULL...
 * @evs: ...or events popped from the ring.
 *
 * On the stack of the poller thread that delivers it, which publishes it
 * for the batch's own upcalls (kevd_poller_current_batch()).
 */
struct kevd_batch {
	struct kevd *evd;
	u32 first;
	u32 gen;
	u32 pos;
	u32 n;
	u32 taken;
	struct ib_wc *wcs;
	struct kevd_event *evs;
};

/**
 * struct kevd_direct - a pass's direct delivery (kevd_deliver_direct()).
 * @upcall: the upcall object, snapshot under evd->lock when it opened.
 * @gen: evd->upcall_gen then.
 * @open: counted in evd->upcalls_running; kevd_direct_end() closes it.
 *
 * One per pass, on the owning poller's stack: the snapshot and the count
 * are taken once for all the CQ polls of the pass (arm check included),
 * not once per poll.
 */
struct kevd_direct {
	struct kevd_upcall upcall;
	u32 gen;
	bool open;
};

/**
 * struct kevd - an event dispatcher.
 * @ring: the event ring, with its counters.
 * @lock: protects the fields down to @wait_poller.
 * @policy: the upcall policy.
 * @upcall: the upcall object.
 * @upcall_flag: INVOC_NEW or INVOC_ANY.
 * @state: KEVD_STATE_* bits.
 * @upcall_gen: bumped under @lock by every change of policy, upcall
 *	object or flag; a direct session (&struct kevd_direct) delivers only
 *	while it is unchanged.
 * @upcalls_running: upcalls being delivered now: a batch counts 1, a
 *	NOTIFY doorbell KEVD_BELL (kevd_batches_running()); raised under
 *	@lock (so TEARDOWN sees every batch that began), dropped without it.
 * @held: a policy change found batches running (not the caller's own):
 *	until none runs, they may hold events older than the ring's head,
 *	so no batch begins and a consumer's dequeue takes nothing
 *	(kevd_batches_held()). Written under @lock.
 * @teardowns: TEARDOWN calls waiting for the upcalls in progress to
 *	return; enabling fails meanwhile (-EBUSY). Under @lock. Not the
 *	policy: a DISABLE may replace a waiting TEARDOWN's.
 * @gate_new: INVOC_NEW is waiting for the first new arrival...
 * @gate_prod: ...that is, for ring.prod to move past this.
 * @notify_prod: ring.prod at the last NOTIFY doorbell.
 * @notify_stall_rung: that doorbell was for a stalled CQ, not an arrival.
 * @notify_owed: completions a direct batch polled and did not deliver went
 *	to the ring's head since (kevd_batch_return()): they arrived without
 *	moving ring.prod, and NOTIFY rings for them as for an arrival; or a
 *	change to NOTIFY (INVOC_ANY) from another policy or upcall owes a
 *	doorbell for what is queued (kevd_modify_upcall()).
 * @waiter: the thread in kevd_wait(), or NULL.
 * @unwait_gen: counts kevd_set_unwaitable(true) calls. A wait samples it
 *	as it begins: a call after that cancels it (-ECANCELED), registered
 *	or not yet, even if the EVD was made waitable again before it woke.
 *	Written under @lock, read without it.
 * @wait_gen: the registered wait's sample of @unwait_gen; under @lock.
 * @wait_threshold: its threshold.
 * @wait_poller: the waiter's poller, when the waiter is a poller thread
 *	(an upcall of another EVD, or a timeout-0 wait in one of this EVD)
 *	and the EVD has a CQ, else NULL: a pass over the EVD is queued
 *	there, and the waiter makes it (kevd_poller_queue()). Written under
 *	@lock, read without it.
 * @resize_qlen: the queue length a kevd_resize() in progress makes, or 0;
 *	a wait may not begin with a threshold above it.
 * @wq: waiters in kevd_wait() and TEARDOWN/free sleep here.
 * @resize_mutex: serialises kevd_resize() calls, and kevd_free() and a
 *	drain's ring growth with them (not under @lock).
 * @flags: stream flags; fixed at create.
 * @poll_state: KEVD_POLL_* bits.
 * @poll_node: on a poller's run list while queued.
 * @home: the poller that serves the EVD by default.
 * @busy_owner: the consumer thread that owns the EVD for a pull
 *	(kevd_poll_try_own()), or NULL.
 * @cq_stalled: the last CQ drain stopped at a full ring. Set by the
 *	owner under ring.cons_lock (kevd_ring_reserve_flag()); cleared by the
 *	take that frees slots, under that lock too (kevd_take()), by a
 *	resize, or by the owner once it takes completions again.
 * @pull_unarmed: a pull that found work let go with the CQ unarmed, its
 *	consumer being on its way back (dto/pull.c); set by the owner, or
 *	by a consumer's dequeue that ended a stall (kevd_consumer_done()),
 *	cleared by the owner's next pass; read by anyone who must then make
 *	sure of a pass.
 * @upcall_slow: an upcall batch took longer than KEVD_SLOW_UPCALL_NS;
 *	its poller passes its other EVDs on before each batch (sticky).
 * @empty_passes: passes without work since the EVD last had some
 *	(defer_arm); the owning poller's.
 * @notifications: completion notifications received (atomic).
 * @handed_upcalls: upcalls of MANY batches that ran after their poller
 *	handed the EVD on (atomic: the next owner counts in @postats).
 * @postats: the owning poller's counters; a pull's too (pulls: once a
 *	pull has owned the EVD, a poller's pass that finds work gives it
 *	back unarmed, evd/pass.c).
 * @cq: the CQ of the DTO stream, or NULL.
 * @dev: its device (fixed at create; the CQ goes before the EVD leaves
 *	the global list).
 * @dim: the CQ's adaptive moderation (cq_dim, dto/dim.c), or NULL.
 * @moderations: profiles it applied (its work's counter).
 * @comp_vector: its completion vector.
 * @gated_qps: QPs gated (struct kevd_gate, kevd_cq_gate_at()); changed under
 *	@lock, checked for emptiness without it on every poll.
 * @cq_polls: polls of the CQ begun while a drain waited (written by the
 *	owner; kevd_cq_flush_qp() reads it).
 * @drains: QPs whose markers kevd_cq_flush_qp() waits for, or
 *	kevd_cq_drain_hold()'s connection events do (struct kevd_qp_drain,
 *	below), under @lock.
 * @ndrains: their number: a poll looks for markers while it is not 0.
 * @nholds: drains whose markers hold the connection events fenced
 *	(kevd_cq_drain_hold()): while it is not 0 none is queued. Written
 *	under @lock, read anywhere.
 * @hold_work: ends the holds whose markers are not in after
 *	KEVD_HOLD_WAIT (kevd_cq_holds_expire()); cancelled with the CQ.
 * @has_parked: @parked holds a gated QP's completion (owner only).
 * @parked: the first completion of a gated QP that the owner polled.
 * @cq_follows_qlen: the CQ's depth came from the queue length (kevd_cq_fit()).
 * @solicited_only: arm for solicited completions only.
 * @cq_error_reported: an IB_EVENT_CQ_ERR came: a failed poll counts as an
 *	empty CQ from now on (dto/cq.c).
 * @cq_overrun_raised: a CQ overrun raised the overflow event, and no
 *	kevd_resize() since; under @lock.
 * @cq_overruns_unraised: CQ overruns that raised none (@cq_overrun_raised
 *	was set); under @lock: a resize that one came during raises it.
 * @overflow_marks: times @state was marked OVERFLOWED; under @lock: a
 *	resize that one came during leaves the state set.
 * @arm_failed: the last ib_req_notify_cq() failed (owner only): the CQ is
 *	polled on every pass until an arm succeeds.
 * @poll_failed: the last ib_poll_cq() failed, and no arm came since
 *	(owner only): for the arm, the CQ counts as empty until its next
 *	notification; for held events and drains only after
 *	@cq_error_reported (dto/cq.c).
 * @poll_warned: a failed poll of this EVD's CQ was logged (owner only).
 * @discarded: events queued when kevd_free() discarded them.
 * @async_evd: receives this EVD's async errors; holds a reference.
 * @async_users: EVDs that use this one as their async EVD.
 * @cm_users: CM bindings that post to this EVD (cm/cm.c).
 * @kept: memory its events point to that outlives its owner: the private
 *	data of requests kevd ended itself (kevd_keep()); freed with the EVD.
 *	Each allocation begins with its list_head. Under @lock.
 * @ref: the EVD's lifetime.
 * @rcu: the memory goes a grace period after the last reference
 *	(kevd_put()): a post may still be returning from an EVD whose
 *	consumer took the event and freed it.
 * @list: on the global list of EVDs (debugfs, totals).
 * @id: a number for debugfs.
 * @owner: the module that created the EVD (kevd_create()'s THIS_MODULE;
 *	NULL when no module owns it, or once reported at its unload:
 *	evd/main.c). Compared, never dereferenced. While it is NULL kevd.ko
 *	holds a reference of its own, dropped with the EVD's memory
 *	(kevd_release_rcu()), so that kevd never unloads with it open.
 */
struct kevd {
	struct kevd_ring ring;

	spinlock_t lock ____cacheline_aligned_in_smp; /* control state */
	int policy;
	struct kevd_upcall upcall;
	int upcall_flag;
	u32 state;
	u32 upcall_gen;
	atomic_t upcalls_running;
	bool held;
	u32 teardowns;
	bool gate_new;
	u32 gate_prod;
	u32 notify_prod;
	bool notify_stall_rung;
	bool notify_owed;
	struct task_struct *waiter;
	u32 unwait_gen;
	u32 wait_gen;
	u32 wait_threshold;
	struct kevd_poller *wait_poller;
	u32 resize_qlen;
	wait_queue_head_t wq;
	struct mutex resize_mutex;	/* one kevd_resize() at a time */

	u32 flags;
	unsigned long poll_state;
	struct list_head poll_node;
	struct kevd_poller *home;
	struct task_struct *busy_owner;
	bool cq_stalled;
	bool pull_unarmed;
	bool upcall_slow;
	u8 empty_passes;
	atomic64_t notifications;
	atomic64_t handed_upcalls;
	struct kevd_poll_stats postats;

	struct ib_cq *cq;
	struct ib_device *dev;
	struct kevd_dim *dim;
	u64 moderations;
	u32 comp_vector;
	struct list_head gated_qps;
	u32 cq_polls;
	struct list_head drains;
	u32 ndrains;
	u32 nholds;
	struct delayed_work hold_work;
	bool has_parked;
	struct ib_wc parked;
	bool cq_follows_qlen;
	bool solicited_only;
	bool cq_error_reported;
	bool cq_overrun_raised;
	u32 cq_overruns_unraised;
	u32 overflow_marks;
	bool arm_failed;
	bool poll_failed;
	bool poll_warned;
	u64 discarded;

	struct kevd *async_evd;
	atomic_t async_users;
	atomic_t cm_users;
	struct list_head kept;
	struct kref ref;
	struct rcu_head rcu;
	struct list_head list;
	unsigned int id;
	struct module *owner;
};

/* evd/evd.c: what the CM binding (cm/cm.c) needs */
int kevd_cm_hold(struct kevd *evd, u32 flag);
void kevd_keep(struct kevd *evd, struct list_head *allocs);
void kevd_cm_unhold(struct kevd *evd);

/* cm/cm.c */
void kevd_cm_exit(void);

/* evd/ring.c: the ring as a data structure; it calls nothing outside */
int kevd_ring_init(struct kevd_ring *ring, u32 qlen, u32 headroom);
void kevd_ring_destroy(struct kevd_ring *ring);
/*
 * The queue length of @size slots that keep @headroom: the rest, but no
 * more than kevd_create() and kevd_resize() accept. A queue length within
 * the headroom of KEVD_MAX_QLEN needs twice that many slots; the queue
 * stays KEVD_MAX_QLEN long (the headroom above it), so that
 * kevd_query() reports a length kevd_resize() takes.
 */
static inline u32 kevd_qlen_of(u32 size, u32 headroom)
{
	return min_t(u32, size - headroom, KEVD_MAX_QLEN);
}

/**
 * kevd_ring_qlen() - the queue length a consumer sees.
 * @ring: the ring.
 *
 * Inline: kevd_wait() reads it on every call.
 *
 * Context: any; lockless (a resize may change it).
 * Return: slots usable by DTO and software events.
 */
static inline u32 kevd_ring_qlen(const struct kevd_ring *ring)
{
	/* unlocked readers (kevd_wait(), query) may race a resize */
	return kevd_qlen_of(READ_ONCE(ring->mask) + 1, ring->headroom);
}

int kevd_ring_qlen_for(const struct kevd_ring *ring, u32 qlen, u32 *actual);
/**
 * kevd_ring_count() - events queued now (a snapshot).
 * @ring: the ring.
 *
 * Context: any; lockless.
 * Return: the number of queued events.
 */
static inline u32 kevd_ring_count(const struct kevd_ring *ring)
{
	/*
	 * head first: prod never falls behind a head read before it, so
	 * the count never wraps (read the other way round, events posted
	 * and taken between the two loads made it about 2^32). It may
	 * still count events taken between the loads: never beyond the
	 * ring.
	 */
	u32 head = smp_load_acquire(&ring->head);

	return min(READ_ONCE(ring->prod) - head, READ_ONCE(ring->mask) + 1);
}

size_t kevd_ring_bytes(const struct kevd_ring *ring);
u32 kevd_ring_reserve(struct kevd_ring *ring, u32 want, bool share);
u32 kevd_ring_reserve_spare(struct kevd_ring *ring, u32 want);
u32 kevd_ring_reserve_flag(struct kevd_ring *ring, u32 want, bool share,
			   bool *full);
void __kevd_ring_commit(struct kevd_ring *ring, u32 n, u32 reserved);
int kevd_ring_post(struct kevd_ring *ring, const struct kevd_event *ev,
		   enum kevd_stream stream, bool headroom);
void kevd_ring_count_lost(struct kevd_ring *ring, enum kevd_stream stream,
			  u32 posted, u32 overflows);
u32 __kevd_ring_pop(struct kevd_ring *ring, struct kevd_event *evs, u32 max);
u32 kevd_ring_pop(struct kevd_ring *ring, struct kevd_event *evs, u32 max,
		  u32 *first, const u32 *gen, u32 want);
int kevd_ring_push_front(struct kevd_ring *ring, const struct kevd_event *evs,
			 u32 k, bool fresh, u32 orig, bool spare);
int kevd_ring_resize(struct kevd_ring *ring, u32 qlen);
int kevd_ring_grow(struct kevd_ring *ring, u32 k);
int kevd_ring_fence(struct kevd_ring *ring, const struct kevd_event *ev,
		    const void *key);
bool kevd_ring_fenced_has(struct kevd_ring *ring, const void *key);
bool kevd_ring_fenced_ep(struct kevd_ring *ring, const void *ep);
int kevd_ring_unfence_key(struct kevd_ring *ring, const void *key);
u32 kevd_ring_fence_seq(struct kevd_ring *ring);
u32 kevd_ring_unfence(struct kevd_ring *ring, u32 *queued, u32 last_seq);
u32 kevd_ring_unfence_flag(struct kevd_ring *ring, u32 *queued, bool *full,
			   u32 last_seq);
u32 kevd_ring_drop_fenced(struct kevd_ring *ring);

/**
 * __kevd_ring_slot() - the @i-th slot after the producer index.
 * @ring: the ring.
 * @i: 0 .. slots reserved - 1.
 *
 * A CQ drain fills the slots it reserved through this, then publishes
 * them with __kevd_ring_commit(), all under one hold of the lock.
 *
 * Context: caller holds ring->prod_lock.
 * Return: the slot.
 */
static inline struct kevd_event *__kevd_ring_slot(struct kevd_ring *ring,
						  u32 i)
{
	lockdep_assert_held(&ring->prod_lock);
	return &ring->slots[(ring->prod + i) & ring->mask];
}

/**
 * kevd_event_stream() - the stream an event number belongs to.
 * @event_number: an &enum kevd_event_number value.
 *
 * Inline: the ring's pop counts every event by stream.
 *
 * Return: the stream, or KEVD_NR_STREAMS for an unknown number.
 */
static inline enum kevd_stream kevd_event_stream(u32 event_number)
{
	switch (event_number >> 12) {
	case 0x00:
		return KEVD_STREAM_DTO;
	case 0x01:
		return KEVD_STREAM_RMR_BIND;
	case 0x02:
		return KEVD_STREAM_CR;
	case 0x04:
		return KEVD_STREAM_CONNECTION;
	case 0x08:
		return KEVD_STREAM_ASYNC;
	case 0x10:
		return KEVD_STREAM_SOFTWARE;
	}
	return KEVD_NR_STREAMS;
}

/* evd/evd.c */
/**
 * kevd_get() - take a reference (kevd_put() drops it).
 * @evd: the EVD.
 */
static inline void kevd_get(struct kevd *evd)
{
	kref_get(&evd->ref);
}

void kevd_put(struct kevd *evd);
int kevd_raise_overflow(struct kevd *evd, enum kevd_stream stream);

/**
 * kevd_upcalls_enabled() - does a policy call upcalls?
 * @policy: an upcall policy.
 *
 * Return: true for SINGLE_INSTANCE, NOTIFY and MANY.
 */
static inline bool kevd_upcalls_enabled(int policy)
{
	return policy == KEVD_UPCALL_SINGLE_INSTANCE ||
	       policy == KEVD_UPCALL_NOTIFY || policy == KEVD_UPCALL_MANY;
}

/**
 * kevd_policy_valid() - is @policy an upcall policy a caller may set?
 * @policy: the value.
 * @teardown: TEARDOWN is acceptable (kevd_modify_upcall(), not create).
 *
 * The one check of policy values: create, modify and the default_policy
 * parameter (which names only these) agree through it.
 *
 * Return: true if it is.
 */
static inline bool kevd_policy_valid(int policy, bool teardown)
{
	return policy == KEVD_UPCALL_DISABLE || kevd_upcalls_enabled(policy) ||
	       (teardown && policy == KEVD_UPCALL_TEARDOWN);
}

/**
 * kevd_upcall_flag_valid() - is @flag an upcall flag?
 * @flag: the value.
 *
 * Return: true for INVOC_NEW and INVOC_ANY.
 */
static inline bool kevd_upcall_flag_valid(int flag)
{
	return flag == KEVD_UPCALL_INVOC_NEW || flag == KEVD_UPCALL_INVOC_ANY;
}

/**
 * kevd_wake_waiter() - events were published: wake a thread in kevd_wait().
 * @evd: the EVD.
 *
 * The full barrier pairs with the one in kevd_wait() (waiter registered,
 * then count read) and in kevd_modify_upcall() (policy set, then prod
 * read): either the producer sees the waiter or the enabled policy, or
 * they see its event.
 *
 * Context: any; after the producer dropped ring->prod_lock.
 */
static inline void kevd_wake_waiter(struct kevd *evd)
{
	smp_mb(); /* publish, then look for waiters and the policy */
	if (waitqueue_active(&evd->wq)) /* ordered by the smp_mb() above */
		wake_up(&evd->wq);
}

/* The upcall policy, object or flag changed. Caller holds evd->lock. */
static inline void kevd_upcall_changed(struct kevd *evd)
{
	lockdep_assert_held(&evd->lock);
	WRITE_ONCE(evd->upcall_gen, evd->upcall_gen + 1);
}

/*
 * No lock: has the policy, object or flag changed since a batch or direct
 * session took @gen? The one load between two invocations.
 */
static inline bool kevd_upcall_gen_changed(const struct kevd *evd, u32 gen)
{
	return READ_ONCE(evd->upcall_gen) != gen;
}

/* evd/poller.c: scheduling; it calls the pass through a pointer */

/**
 * struct kevd_scratch - a poller's buffers for its passes.
 * @wcs: work completions of a CQ drain or direct delivery.
 * @evs: events of an upcall batch.
 */
struct kevd_scratch {
	struct ib_wc wcs[KEVD_BATCH];
	struct kevd_event evs[KEVD_BATCH];
};

/* What a pass tells its poller (kevd_pass()). */
enum kevd_pass_ret {
	KEVD_PASS_IDLE,		/* let go: armed, idle, or back to its puller */
	KEVD_PASS_AGAIN,	/* queue again for the next round */
	KEVD_PASS_GONE,		/* handed to another poller: hands off */
};

typedef enum kevd_pass_ret (*kevd_pass_fn)(struct kevd_poller *p,
					   struct kevd *evd,
					   struct kevd_scratch *s);

int kevd_pollers_start(kevd_pass_fn pass);
void kevd_pollers_stop(void);
int kevd_pollers_restart(unsigned int nr, unsigned int *old);
void kevd_test_reap(struct module *mod);
struct kevd_poller *kevd_poller_pick(int cpu);
bool kevd_schedule(struct kevd *evd);
void kevd_poll_wait_idle(struct kevd *evd);
void kevd_poll_kick_waiters(void);
void kevd_poll_wait_upcalls(struct kevd *evd);
struct kevd_poller *kevd_current_poller(void);
bool kevd_current_in_upcall(struct kevd *evd);
int kevd_teardown_forget(struct kevd *evd);

/*
 * Is the caller where it may not sleep: interrupt context, or interrupts
 * disabled? The calls that sleep refuse it with -EINVAL, not a splat
 * (might_sleep() warns on debug kernels only) and a hang or a BUG. A
 * spinlock held in process context stays might_sleep()'s to report.
 */
static inline bool kevd_atomic_caller(void)
{
	return !in_task() || irqs_disabled();
}

/*
 * A wait's timeout in jiffies, rounded up (the timer wheel then waits at
 * least that many whole ticks). Not usecs_to_jiffies(): its limit, an
 * unsigned int that jiffies_to_usecs(MAX_JIFFY_OFFSET) overflows on 64
 * bit, turns the largest finite timeouts into MAX_JIFFY_OFFSET, a wait
 * that never ends.
 */
static inline long kevd_timeout_jiffies(u32 timeout_us)
{
	if (timeout_us == KEVD_TIMEOUT_INFINITE)
		return MAX_SCHEDULE_TIMEOUT;
	return DIV_ROUND_UP_ULL((u64)timeout_us * HZ, USEC_PER_SEC);
}

bool kevd_poller_owns(struct kevd *evd);
bool kevd_poll_try_own(struct kevd *evd);
bool kevd_poll_take(struct kevd *evd);
bool kevd_poll_own_pull(struct kevd *evd);
bool kevd_poll_queued_here(struct kevd *evd);
void kevd_poll_move_off_here(struct kevd *evd);
struct kevd_poller *kevd_poll_wait_enter(void);
void kevd_poll_wait_leave(struct kevd_poller *w);
void kevd_poll_release(struct kevd *evd, bool again);
bool kevd_poll_mark_missed(struct kevd *evd);
struct kevd_batch *kevd_poller_current_batch(struct kevd *evd);
void kevd_poller_upcall_begin(struct kevd_poller *p, struct kevd *evd,
			      struct kevd_batch *b);
void kevd_poller_upcall_end(struct kevd_poller *p, struct kevd *evd);
bool kevd_poller_handoff(struct kevd_poller *p, struct kevd *evd);
unsigned int kevd_nr_pollers(void);
unsigned int kevd_nr_evds(void);
struct kevd *kevd_get_owned(struct module *mod);

/*
 * kevd_assert_owner() - on kernels with lockdep, warn unless the caller is
 * the poller making a pass over @evd (or an upcall that pass runs), or the
 * consumer thread that owns it for a pull (evd->busy_owner, dto/pull.c):
 * the rule "only the owner drains, arms and delivers", as
 * kernel/irq_work.c asserts its context.
 */
#define kevd_assert_owner(evd)						\
	do {								\
		if (IS_ENABLED(CONFIG_LOCKDEP))				\
			WARN_ON_ONCE(!kevd_poller_owns(evd));		\
	} while (0)

/**
 * kevd_producer_done() - events were queued: wake and schedule.
 * @evd: the EVD.
 *
 * Context: any; after the producer dropped ring->prod_lock. The barrier
 * is kevd_wake_waiter()'s.
 */
static inline void kevd_producer_done(struct kevd *evd)
{
	kevd_wake_waiter(evd);
	if (kevd_upcalls_enabled(READ_ONCE(evd->policy)))
		kevd_schedule(evd);
}

/*
 * A NOTIFY doorbell's weight in evd->upcalls_running: it holds no event,
 * so the batches a policy change waits for are the count's low bits,
 * read in one go with the rest (TEARDOWN and free wait for all of it).
 * Batches run one per poller (nr_pollers <= 1024).
 */
#define KEVD_BELL		0x10000
#define KEVD_BATCHES_MASK	(KEVD_BELL - 1)

static inline int kevd_upcall_weight(int policy)
{
	return policy == KEVD_UPCALL_NOTIFY ? KEVD_BELL : 1;
}

/* Upcall batches of @evd in progress, doorbells not counted. */
static inline int kevd_batches_running(struct kevd *evd)
{
	return atomic_read(&evd->upcalls_running) & KEVD_BATCHES_MASK;
}

/**
 * kevd_batches_held() - may running batches hold older events than the ring?
 * @evd: the EVD.
 *
 * True after a policy change found upcall batches running, until the last
 * of them ended: they give back what they did not deliver, ahead of the
 * ring's head, so a consumer's dequeue or wait takes nothing meanwhile.
 * An upcall of @evd itself is not held (it may be such a batch).
 *
 * Context: any; under ring.cons_lock for a dequeue (the give-back takes it).
 * Return: true when a consumer must not take events now.
 */
static inline bool kevd_batches_held(struct kevd *evd)
{
	return unlikely(READ_ONCE(evd->held)) &&
	       kevd_batches_running(evd) &&
	       !kevd_current_in_upcall(evd);
}

/* evd/params.c */
extern unsigned int kevd_param_budget;
extern unsigned int kevd_param_defer_arm;
extern unsigned int kevd_param_cq_dim;
extern unsigned int kevd_param_qlen;
extern int kevd_param_policy;
extern unsigned int kevd_param_nr_pollers;
extern int kevd_param_notify_check;

enum kevd_notify_check {
	KEVD_CHECK_AUTO,	/* trust a positive return, else poll one */
	KEVD_CHECK_REPORT,	/* trust the return value only */
	KEVD_CHECK_POLL,	/* ignore the return value, poll one */
};

/* evd/debugfs.c */
void kevd_debugfs_init(void);
void kevd_debugfs_exit(void);
void kevd_register(struct kevd *evd);
void kevd_unregister(struct kevd *evd);
void kevd_read_stats(struct kevd *evd, struct kevd_stats *st);
u32 kevd_vector_least_used(struct ib_device *dev, u32 nvec);

/* dto/cq.c */
u32 kevd_cq_pick_vector(struct ib_device *dev, int asked);
int kevd_cq_vector_cpu(struct ib_device *dev, u32 vector);
int kevd_cq_create(struct kevd *evd, struct ib_device *dev,
		   const struct kevd_attr *attr, u32 vector,
		   void (*event_handler)(struct ib_event *, void *));
void kevd_cq_destroy(struct kevd *evd);

/* dto/dim.c: adaptive moderation of the CQ (cq_dim) */
struct kevd_dim;
int kevd_dim_create(struct kevd *evd, struct ib_device *dev);
void kevd_dim_stop(struct kevd *evd);
void kevd_dim_free(struct kevd *evd);
void __kevd_dim_sample(struct kevd *evd, u32 completions);

/* A pass of the owner took @completions from the CQ (dto/dim.c). */
static inline void kevd_dim_sample(struct kevd *evd, u32 completions)
{
	if (unlikely(evd->dim) && completions)
		__kevd_dim_sample(evd, completions);
}

bool kevd_cq_busy(struct kevd *evd);
int kevd_cq_fit(struct kevd *evd, u32 qlen, u32 actual);
void kevd_cq_unstall(struct kevd *evd);
/**
 * struct kevd_gate - a QP whose completions wait for its ESTABLISHED.
 * @node: on the EVD's gated_qps; off it (empty) once lifted.
 * @qpp: where the QP is, or will be (kevd_cq_gate_at()).
 * @est_held: its ESTABLISHED is held behind an earlier connection event
 *	(kevd_cq_fence_gated()): the gate lifts when that enters the ring.
 *	Under evd->lock.
 */
struct kevd_gate {
	struct list_head node;
	struct ib_qp **qpp;
	bool est_held;
};

int kevd_cq_poll(struct kevd *evd, int n, struct ib_wc *wcs);
u32 kevd_cq_requeue(struct kevd *evd, const struct ib_wc *wcs, u32 n,
		    bool spare);
void kevd_cq_convert_orphaned(struct kevd *evd, const struct ib_wc *wc,
			      struct kevd_event *ev);

/**
 * kevd_cq_convert() - a completion polled earlier, as an event of @evd.
 * @evd: the EVD whose CQ it came from.
 * @wc: the completion.
 * @ev: the event.
 *
 * For completions a batch holds across upcalls (a direct delivery, its
 * give-back, a dequeue inside one of its upcalls): an upcall may block
 * while kevd_cq_flush_qp() gives up on their QP and the QP is destroyed,
 * so an orphan's QP is not read (dto/cq.c). One load while no drain
 * runs.
 *
 * Context: the owner of @evd, or an upcall of it.
 */
static inline void kevd_cq_convert(struct kevd *evd, const struct ib_wc *wc,
				   struct kevd_event *ev)
{
	if (likely(!READ_ONCE(evd->ndrains)))
		kevd_wc_to_event(wc, ev);
	else
		kevd_cq_convert_orphaned(evd, wc, ev);
	ev->evd = evd;
}

void kevd_cq_gate_at(struct kevd *evd, struct kevd_gate *gate,
		     struct ib_qp **qpp);
void kevd_cq_ungate(struct kevd *evd, struct kevd_gate *gate);
int kevd_cq_fence_gated(struct kevd *evd, const struct kevd_event *ev,
			struct kevd_gate *gate);
int kevd_post_established(struct kevd *evd, const struct kevd_event *ev,
			  struct kevd_gate *gate);
u32 kevd_cq_drop_parked(struct kevd *evd);
u32 kevd_cq_unfence(struct kevd *evd, struct ib_wc *wcs, u32 budget);
u32 kevd_cq_drain(struct kevd *evd, struct ib_wc *wcs, u32 budget);
u32 kevd_cq_drain_empty(struct kevd *evd, struct ib_wc *wcs, u32 budget,
			bool *empty);
struct kevd *kevd_cq_evd(struct ib_cq *cq);
u32 kevd_cq_drain_to(struct kevd *evd, struct ib_wc *wcs, u32 want,
		     struct kevd_event *evs, u32 *ndirect);

/* The queues of a drained QP (struct kevd_qp_drain): bits. */
#define KEVD_DRAIN_SEND		BIT(0)
#define KEVD_DRAIN_RECV		BIT(1)

/**
 * struct kevd_qp_drain - a QP's completions on their way out of the CQ.
 * @node: on evd->drains, under evd->lock.
 * @qp: the QP, in error: about to be destroyed, or (@hold) disconnected.
 * @need: its queues that complete into the EVD's CQ and take a marker
 *	(KEVD_DRAIN_SEND, KEVD_DRAIN_RECV); 0 when it gets none: then an
 *	empty CQ does.
 * @posted: the markers posted (a full queue refuses one until the
 *	flushes free a slot).
 * @polled: the markers polled.
 * @since: evd->cq_polls when the drain began.
 * @seen: all of them polled, or (none needed) a poll begun after @since
 *	found the CQ empty.
 * @seen_at: evd->cq_polls of that poll.
 * @orphan: kevd_cq_flush_qp() gave up, and @qp goes: its completions
 *	still in the CQ are converted without it (ep_context NULL). Freed
 *	when its markers are in, or when a poll begun after @destroyed (at
 *	@since) finds the CQ empty, or with the CQ (kevd_cq_destroy()).
 * @destroyed: an orphan's QP is destroyed (kevd_cq_qp_gone()).
 * @grown: slots the drain added to a full ring (its owner only).
 * @hold: kevd_cq_drain_hold()'s: the connection events fenced wait for
 *	its markers (counted in evd->nholds); freed when they are polled,
 *	or an orphan once its QP goes (kevd_cq_flush_qp()).
 * @posting: its markers are still being posted: a hold seen meanwhile
 *	is freed by its poster.
 * @hold_end: when a hold ends if its markers are not in (jiffies).
 * @expired: a hold that ended so: it holds nothing, and goes when its
 *	markers are in, or as an orphan once its QP goes.
 *
 * The markers' wr_ids are the record's address (send) and the next
 * (receive). All fields but @node and @qp are under evd->lock.
 */
struct kevd_qp_drain {
	struct list_head node;
	struct ib_qp *qp;
	u8 need;
	u8 posted;
	u8 polled;
	bool seen;
	u32 since;
	u32 seen_at;
	bool orphan;
	bool destroyed;
	u32 grown;
	bool hold;
	bool posting;
	unsigned long hold_end;
	bool expired;
};

bool kevd_cq_drain_seen(struct kevd *evd, struct kevd_qp_drain *d);

/* Are all the markers @d waits for polled? Caller holds evd->lock. */
static inline bool kevd_cq_markers_in(struct kevd *evd,
				      const struct kevd_qp_drain *d)
{
	lockdep_assert_held(&evd->lock);
	return d->polled == (d->orphan ? d->posted : d->need);
}

/*
 * @d, a hold, holds no more (its markers are in, its QP goes, its time
 * ran out). Caller holds evd->lock. Return: true if it was the last one:
 * the caller schedules the pass that queues the events it held.
 */
static inline bool kevd_cq_unhold(struct kevd *evd, struct kevd_qp_drain *d)
{
	lockdep_assert_held(&evd->lock);
	d->hold = false;
	WRITE_ONCE(evd->nholds, evd->nholds - 1);
	return !evd->nholds;
}

/* dto/drain.c */
void kevd_cq_flush_qp(struct kevd *evd, struct ib_qp *qp, bool in_error);
void kevd_cq_qp_gone(struct kevd *evd, struct ib_qp *qp);
void kevd_cq_drain_hold(struct kevd *evd, struct ib_qp *qp);
void kevd_cq_holds_expire(struct work_struct *work);

/* dto/wc.c: kevd_wc_to_event(), kevd_wc_status(), kevd_wc_opcode() are public */

/* upcall_policy/deliver.c */
u32 kevd_deliver(struct kevd *evd, struct kevd_poller *p,
		 struct kevd_event *evs, u32 budget, bool *handed_off);
int kevd_deliver_direct(struct kevd *evd, struct kevd_poller *p,
			struct kevd_direct *d, struct ib_wc *wcs, u32 budget);
void kevd_direct_end(struct kevd *evd, struct kevd_direct *d);
void kevd_batch_return(struct kevd_batch *b, u32 from);
void kevd_batch_revoke(struct kevd *evd);

/* dto/arm.c */
bool kevd_cq_arm_check(struct kevd *evd, struct ib_wc *wcs);

/* dto/pull.c */
u32 kevd_batch_rest(struct kevd *evd);
u32 kevd_batch_take(struct kevd *evd, struct kevd_event *evs, u32 max);
bool kevd_pull(struct kevd *evd);
void kevd_pull_or_schedule(struct kevd *evd, bool consumer);
bool kevd_pull_into(struct kevd *evd, struct kevd_event *evs, u32 room,
		    u32 *got);
bool kevd_pull_unarmed_ok(struct kevd *evd, bool self_ok);
void kevd_pull_unmark(struct kevd *evd);
bool kevd_pull_pending(struct kevd *evd);
bool kevd_pull_due(struct kevd *evd);
void kevd_pull_leave(struct kevd *evd);

/* evd/pass.c */
enum kevd_pass_ret kevd_pass(struct kevd_poller *p, struct kevd *evd,
			     struct kevd_scratch *s);

#endif /* _KEVD_INTERNAL_H */
