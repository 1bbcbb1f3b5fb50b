// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The event ring of an EVD: a bounded FIFO of struct kevd_event with one
 * lock per side, after include/linux/ptr_ring.h. A data structure and
 * nothing more: every function takes the ring, and none calls out of this
 * file. What follows a produce or a consume (waking a waiter, scheduling
 * a pass, restarting a stalled CQ) is the caller's: the calls return what
 * it needs to decide. Locking rules: kevd_internal.h.
 *
 *   - Producers (post_se, post_event, the CQ drain of the owning poller)
 *     serialise on ring->prod_lock, consumers (dequeue, wait, upcall
 *     batches) on ring->cons_lock, both irqsave: a producer may run in
 *     hard-IRQ context. Resize takes cons_lock, then prod_lock, and alone
 *     replaces the slot array. A CQ drain that found the ring full takes
 *     them in the same order to flag the stall where consumers look once
 *     they freed slots (kevd_ring_reserve_flag()). Functions named
 *     __kevd_ring_*() expect the caller to hold the lock their kernel-doc
 *     names (as ptr_ring's __ptr_ring_*()); the others take it.
 *   - Consumers take events at ring->head, and every consumer copies what
 *     it takes (upcall batches into their poller's scratch): a slot is the
 *     producers' again as soon as head passes it, however long the
 *     consumer keeps the event.
 *   - Indices run free (u32, wrapping) and are never reset, so a lockless
 *     reader of prod - head sees a sane count even across a resize. The
 *     producer publishes slots with smp_store_release(&prod) and reads
 *     head with smp_load_acquire(); the consumer does the converse. A CQ
 *     drain reserves slots before it polls the CQ (kevd_ring_reserve()),
 *     so a completion is never taken from the CQ without a slot for it.
 *   - Headroom: ring->headroom slots are kept for the streams that cannot
 *     wait (CR, connection, async). DTO and software events stop at the
 *     queue length (kevd_ring_qlen()); only those streams may go past it,
 *     by the headroom: that fills the ring, except near KEVD_MAX_QLEN,
 *     where the slots are rounded up to twice the queue length. Past
 *     both go only the owner's events that must be queued again and
 *     that the ring cannot grow for (kevd_ring_grow()).
 *   - The ring owns its counters: posted, drops and overflows under
 *     prod_lock, delivered under cons_lock.
 *   - Every slot names its EVD: the producer sets ev->evd before it posts.
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include "kevd_internal.h"

static int kevd_ring_slots(u32 qlen, u32 headroom, u32 *size);

/**
 * kevd_ring_qlen_for() - the queue length a resize to @qlen would give.
 * @ring: the ring.
 * @qlen: the minimum queue length asked for.
 * @actual: the queue length the consumer would see (rounded up).
 *
 * Return: 0, or -EINVAL for a bad @qlen.
 */
int kevd_ring_qlen_for(const struct kevd_ring *ring, u32 qlen, u32 *actual)
{
	u32 size;
	int ret;

	ret = kevd_ring_slots(qlen, ring->headroom, &size);
	if (!ret)
		*actual = kevd_qlen_of(size, ring->headroom);
	return ret;
}

/**
 * kevd_ring_bytes() - memory of the slot array.
 * @ring: the ring.
 *
 * Return: bytes allocated for the slots.
 */
size_t kevd_ring_bytes(const struct kevd_ring *ring)
{
	/* unlocked (kevd_query()): may race a resize, as kevd_ring_qlen() */
	return ((size_t)READ_ONCE(ring->mask) + 1) * sizeof(*ring->slots);
}

static int kevd_ring_slots(u32 qlen, u32 headroom, u32 *size)
{
	if (!qlen || qlen > KEVD_MAX_QLEN)
		return -EINVAL;
	*size = roundup_pow_of_two(qlen + headroom);
	return 0;
}

/*
 * Room for give-back runs (struct kevd_ring_run): one per poller, as a
 * poller runs one batch at a time, and at least four, which the merge in
 * __kevd_ring_runs_add() needs. The pool is not resized while an EVD
 * exists (kevd_pollers_restart()), so a ring's room stays what it was.
 */
static u32 kevd_ring_max_runs(void)
{
	return max(kevd_nr_pollers(), 4U);
}

/**
 * kevd_ring_init() - set up an empty ring.
 * @ring: the ring.
 * @qlen: the minimum queue length, 1 .. KEVD_MAX_QLEN.
 * @headroom: slots to keep for the streams that cannot wait.
 *
 * Context: process context; may sleep.
 * Return: 0, -EINVAL for a bad @qlen, or -ENOMEM.
 */
int kevd_ring_init(struct kevd_ring *ring, u32 qlen, u32 headroom)
{
	u32 size;
	int ret;

	ret = kevd_ring_slots(qlen, headroom, &size);
	if (ret)
		return ret;
	ring->runs = kcalloc(kevd_ring_max_runs(), sizeof(*ring->runs),
			     GFP_KERNEL);
	if (!ring->runs)
		return -ENOMEM;
	ring->slots = kvcalloc(size, sizeof(*ring->slots), GFP_KERNEL);
	if (!ring->slots) {
		kfree(ring->runs);
		ring->runs = NULL;
		return -ENOMEM;
	}
	ring->mask = size - 1;
	ring->headroom = headroom;
	ring->prod = 0;
	ring->head = 0;
	ring->resv = 0;
	ring->nfenced = 0;
	ring->fence_seq = 0;
	ring->nruns = 0;
	INIT_LIST_HEAD(&ring->fenced);
	spin_lock_init(&ring->prod_lock);
	spin_lock_init(&ring->cons_lock);
	return 0;
}

/**
 * kevd_ring_destroy() - release the slots; queued events are discarded.
 * @ring: the ring.
 */
void kevd_ring_destroy(struct kevd_ring *ring)
{
	WARN_ON_ONCE(!list_empty(&ring->fenced)); /* kevd_ring_drop_fenced() */
	kvfree(ring->slots);
	ring->slots = NULL;
	kfree(ring->runs);
	ring->runs = NULL;
}

/*
 * Free slots below @limit: queued and reserved ones are used. Caller
 * holds ring->prod_lock.
 */
static u32 __kevd_ring_room(struct kevd_ring *ring, u32 limit)
{
	/* acquire: the consumer is done with every slot below head */
	u32 used = ring->prod - smp_load_acquire(&ring->head) + ring->resv;

	lockdep_assert_held(&ring->prod_lock);
	return used >= limit ? 0 : limit - used;
}

/*
 * Free slots for a producer: up to the queue length, or (@headroom) the
 * headroom past it (__kevd_ring_room()).
 */
static u32 __kevd_ring_free(struct kevd_ring *ring, bool headroom)
{
	return __kevd_ring_room(ring, kevd_ring_qlen(ring) +
				(headroom ? ring->headroom : 0));
}

/*
 * Every free slot, past the headroom too: for the owner's events that
 * the ring must take back and cannot grow for (kevd_ring_grow()).
 */
static u32 __kevd_ring_spare(struct kevd_ring *ring)
{
	return __kevd_ring_room(ring, ring->mask + 1);
}

/* Publish @ev at prod. Caller holds ring->prod_lock. */
static void __kevd_ring_push(struct kevd_ring *ring,
			     const struct kevd_event *ev)
{
	lockdep_assert_held(&ring->prod_lock);
	ring->slots[ring->prod & ring->mask] = *ev;
	/* release: the slot is written before a consumer sees prod */
	smp_store_release(&ring->prod, ring->prod + 1);
}

/*
 * Reserve up to @want free slots: the queue length's (half of them with
 * @share), or (@spare) any (__kevd_ring_spare()).
 */
static u32 __kevd_ring_reserve(struct kevd_ring *ring, u32 want, bool share,
			       bool spare)
{
	unsigned long flags;
	u32 n, free;

	spin_lock_irqsave(&ring->prod_lock, flags);
	free = spare ? __kevd_ring_spare(ring) : __kevd_ring_free(ring, false);
	n = min(want, share ? DIV_ROUND_UP(free, 2) : free);
	ring->resv += n;
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	return n;
}

/**
 * kevd_ring_reserve() - reserve slots for a CQ drain.
 * @ring: the ring.
 * @want: slots wanted.
 * @share: leave at least half of the free slots (rounded down) to other
 *	producers: software events posted while the drain polls find them.
 *
 * Context: any; takes ring->prod_lock.
 * Return: slots reserved, 0 .. @want; __kevd_ring_commit() gives them
 * back.
 */
u32 kevd_ring_reserve(struct kevd_ring *ring, u32 want, bool share)
{
	return __kevd_ring_reserve(ring, want, share, false);
}

/**
 * kevd_ring_reserve_spare() - reserve any free slots, past the headroom.
 * @ring: the ring.
 * @want: slots wanted.
 *
 * For completions the owner polled for a direct delivery that must go
 * to the ring after all, when it cannot grow (kevd_ring_grow()).
 *
 * Context: any; takes ring->prod_lock.
 * Return: slots reserved, 0 .. @want, as kevd_ring_reserve().
 */
u32 kevd_ring_reserve_spare(struct kevd_ring *ring, u32 want)
{
	return __kevd_ring_reserve(ring, want, false, true);
}

/**
 * kevd_ring_reserve_flag() - kevd_ring_reserve() under the consumers' lock.
 * @ring: the ring.
 * @want: slots wanted.
 * @share: as for kevd_ring_reserve().
 * @full: the caller's flag: set if no slot was free, else cleared.
 *
 * For a CQ drain whose kevd_ring_reserve() found the ring full. Under
 * cons_lock no consumer frees slots between this look and the flag, and
 * a consumer reads the flag under that lock after it freed slots
 * (kevd_take()): either this finds the slots the consumer freed, or the
 * consumer finds the flag. Neither side needs a full barrier.
 *
 * Context: any; takes ring->cons_lock, then ring->prod_lock (as resize).
 * Return: slots reserved, 0 .. @want.
 */
u32 kevd_ring_reserve_flag(struct kevd_ring *ring, u32 want, bool share,
			   bool *full)
{
	unsigned long flags;
	u32 n;

	spin_lock_irqsave(&ring->cons_lock, flags);
	n = kevd_ring_reserve(ring, want, share);
	WRITE_ONCE(*full, !n);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	return n;
}

/**
 * __kevd_ring_commit() - publish the slots a CQ drain filled.
 * @ring: the ring.
 * @n: slots filled from prod on (__kevd_ring_slot()); at most @reserved.
 * @reserved: what kevd_ring_reserve() gave; all of it is released.
 *
 * The drain converts each completion straight into its slot under the
 * lock, so a DTO event is written once on its way in, with one lock
 * round-trip for the whole batch (dto/cq.c).
 *
 * Context: caller holds ring->prod_lock.
 */
void __kevd_ring_commit(struct kevd_ring *ring, u32 n, u32 reserved)
{
	lockdep_assert_held(&ring->prod_lock);
	ring->resv -= reserved;
	/* counted before they can be taken: delivered never passes posted */
	ring->pstats.posted[KEVD_STREAM_DTO] += n;
	/* release: the slots are written before a consumer sees prod */
	smp_store_release(&ring->prod, ring->prod + n);
	if (n > ring->pstats.max_batch)
		ring->pstats.max_batch = n;
}

/**
 * kevd_ring_post() - queue one event.
 * @ring: the ring.
 * @ev: the event; ->evd names its EVD.
 * @stream: its stream.
 * @headroom: the stream may use the headroom (CR, connection, async).
 *
 * A full ring queues nothing. For a stream that may use the headroom, a
 * full ring is a drop: it is counted here (overflows, drops) and the
 * caller raises the overflow.
 *
 * Context: any, hard IRQ included; takes ring->prod_lock.
 * Return: 0, or -ENOSPC when the ring is full.
 */
int kevd_ring_post(struct kevd_ring *ring, const struct kevd_event *ev,
		   enum kevd_stream stream, bool headroom)
{
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring->prod_lock, flags);
	if (__kevd_ring_free(ring, headroom)) {
		ring->pstats.posted[stream]++;
		__kevd_ring_push(ring, ev);
	} else {
		ret = -ENOSPC;
		if (headroom) {
			ring->pstats.drops++;
			ring->pstats.overflows++;
		}
	}
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	return ret;
}

/**
 * kevd_ring_count_lost() - count events of @stream lost outside the ring.
 * @ring: the ring.
 * @stream: their stream.
 * @posted: events that never reached the ring: counted as posted (the
 *	EVD's free counts them as discarded).
 * @overflows: overflows the provider reported (a CQ overrun).
 *
 * Context: any; takes ring->prod_lock.
 */
void kevd_ring_count_lost(struct kevd_ring *ring, enum kevd_stream stream,
			  u32 posted, u32 overflows)
{
	unsigned long flags;

	spin_lock_irqsave(&ring->prod_lock, flags);
	ring->pstats.posted[stream] += posted;
	ring->pstats.overflows += overflows;
	spin_unlock_irqrestore(&ring->prod_lock, flags);
}

/* @n events left the front: the runs they came from (struct kevd_ring_run). */
static void __kevd_ring_runs_taken(struct kevd_ring *ring, u32 n)
{
	u32 i = 0, t;

	lockdep_assert_held(&ring->cons_lock);
	while (n && i < ring->nruns) {
		t = min(n, ring->runs[i].left);
		ring->runs[i].left -= t;
		n -= t;
		if (!ring->runs[i].left)
			i++;
	}
	if (!i)
		return;
	ring->nruns -= i;
	memmove(ring->runs, ring->runs + i, ring->nruns * sizeof(ring->runs[0]));
}

/*
 * Record a run of @k events given back from ring index @orig, at position
 * @m (after the older runs). Every entry in use cannot happen (one per
 * poller); if it did, two neighbours that @m does not separate would
 * become one: their events stay in order, only a later give-back between
 * them could no longer be placed.
 */
static void __kevd_ring_runs_add(struct kevd_ring *ring, u32 m, u32 orig,
				 u32 k)
{
	u32 p;

	if (ring->nruns == kevd_ring_max_runs()) {
		p = m == 1 ? 2 : 0;
		ring->runs[p].left += ring->runs[p + 1].left;
		ring->nruns--;
		memmove(ring->runs + p + 1, ring->runs + p + 2,
			(ring->nruns - p - 1) * sizeof(ring->runs[0]));
		if (m > p + 1)
			m--;
	}
	memmove(ring->runs + m + 1, ring->runs + m,
		(ring->nruns - m) * sizeof(ring->runs[0]));
	ring->runs[m].orig = orig;
	ring->runs[m].left = k;
	ring->nruns++;
}

/*
 * Count @n events taken at @head for the statistics. Caller holds
 * cons_lock. DTO events (numbers below 0x1000) are counted once per
 * batch, as what the others leave: per event there is one compare, no
 * read-modify-write.
 */
static void __kevd_ring_account(struct kevd_ring *ring, u32 head, u32 n)
{
	const struct kevd_event *slots = ring->slots;
	u64 *delivered = ring->cstats.delivered;
	u32 mask = ring->mask, dto = n, num, i;

	lockdep_assert_held(&ring->cons_lock);
	for (i = 0; i < n; i++) {
		num = slots[(head + i) & mask].event_number;
		if (unlikely(num >> 12)) {
			delivered[kevd_event_stream(num)]++;
			dto--;
		}
	}
	delivered[KEVD_STREAM_DTO] += dto;
	if (unlikely(ring->nruns))
		__kevd_ring_runs_taken(ring, n);
}

/**
 * __kevd_ring_pop() - take up to @max events, oldest first.
 * @ring: the ring.
 * @evs: where to copy them.
 * @max: at most this many.
 *
 * For a consumer that decides under the lock whether it may take events
 * (kevd_dequeue(): not while stopped batches may give older ones back).
 *
 * Context: caller holds ring->cons_lock.
 * Return: the number of events taken.
 */
u32 __kevd_ring_pop(struct kevd_ring *ring, struct kevd_event *evs, u32 max)
{
	const struct kevd_event *slots = ring->slots;
	u32 head = ring->head, mask = ring->mask, n, i;

	lockdep_assert_held(&ring->cons_lock);
	/* acquire: pairs with the producer's release of prod */
	n = min(max, smp_load_acquire(&ring->prod) - head);
	for (i = 0; i < n; i++)
		evs[i] = slots[(head + i) & mask];
	__kevd_ring_account(ring, head, n);
	/* release: the slots are read before a producer reuses them */
	smp_store_release(&ring->head, head + n);
	return n;
}

/**
 * kevd_ring_pop() - take up to @max events, oldest first.
 * @ring: the ring.
 * @evs: where to copy them.
 * @max: at most this many.
 * @first: set to the ring index of the first (kevd_ring_push_front()).
 * @gen: the batch's generation word (evd->upcall_gen), read under the
 *	lock: nothing is taken once it is no longer @want.
 * @want: its value when the batch began.
 *
 * For upcall batches. The runs given back before are behind what it takes
 * (the front is in order) and no batch that popped before it gives back
 * any more: it clears them, as their indices are of an older numbering.
 * That holds because a batch the policy change stopped gives back under
 * this lock after it saw the generation change, and a pop that sees the
 * change takes nothing: a batch that began before the change, and pops
 * after such a give-back, would otherwise clear the runs of batches still
 * giving back, and its own give-back would then go behind theirs.
 *
 * Context: any; takes ring->cons_lock.
 * Return: the number of events taken.
 */
u32 kevd_ring_pop(struct kevd_ring *ring, struct kevd_event *evs, u32 max,
		  u32 *first, const u32 *gen, u32 want)
{
	unsigned long flags;
	u32 n = 0;

	spin_lock_irqsave(&ring->cons_lock, flags);
	if (READ_ONCE(*gen) == want) {
		ring->nruns = 0;
		*first = ring->head;
		n = __kevd_ring_pop(ring, evs, max);
	}
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	return n;
}

/*
 * Take @n events of @slots from @first off the delivered counters. Caller
 * holds cons_lock.
 */
static void __kevd_ring_unaccount(struct kevd_ring *ring,
				  const struct kevd_event *slots, u32 mask,
				  u32 first, u32 n)
{
	u64 *delivered = ring->cstats.delivered;
	u32 i;

	lockdep_assert_held(&ring->cons_lock);
	for (i = 0; i < n; i++)
		delivered[kevd_event_stream(slots[(first + i) & mask].event_number)]--;
}

/**
 * kevd_ring_push_front() - queue events ahead of everything queued.
 * @ring: the ring.
 * @evs: the events, in order; ->evd names their EVD.
 * @k: how many.
 * @fresh: they were never queued (completions polled for direct
 *	delivery): count them as posted; else they were popped and count as
 *	not delivered after all.
 * @orig: unless @fresh, the ring index the first of them had (what
 *	kevd_ring_pop() returned in @first, plus the events before it that
 *	were delivered).
 * @spare: they may take any free slot: the headroom, and the slots
 *	past it that a ring grown beyond its queue length has.
 *
 * For events a batch took and did not deliver because the upcall policy
 * changed (popped batches, completions polled for direct delivery):
 * they become the oldest queued events again. Not into the headroom,
 * which is the room of the streams that cannot wait, unless @spare: the
 * caller grows the ring first, and spends the headroom only if it cannot. MANY batches run side by
 * side and may give back in any order: events a batch that popped earlier
 * gave back stay ahead of these (struct kevd_ring_run), so the queue's
 * front is in the order the events were first queued.
 *
 * Context: any; takes ring->cons_lock, then ring->prod_lock.
 * Return: 0, or -ENOSPC when @k slots are not free (nothing queued).
 */
int kevd_ring_push_front(struct kevd_ring *ring, const struct kevd_event *evs,
			 u32 k, bool fresh, u32 orig, bool spare)
{
	u32 head, j, m = 0, ahead = 0;
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring->cons_lock, flags);
	spin_lock(&ring->prod_lock);
	if ((spare ? __kevd_ring_spare(ring) :
		     __kevd_ring_free(ring, false)) < k) {
		ret = -ENOSPC;
		goto out;
	}
	/* the runs given back from older indices stay ahead: move them up */
	for (; !fresh && m < ring->nruns; m++) {
		if ((s32)(ring->runs[m].orig - orig) > 0)
			break;
		ahead += ring->runs[m].left;
	}
	head = ring->head - k;
	for (j = 0; j < ahead; j++)
		ring->slots[(head + j) & ring->mask] =
			ring->slots[(ring->head + j) & ring->mask];
	for (j = 0; j < k; j++)
		ring->slots[(head + ahead + j) & ring->mask] = evs[j];
	if (fresh) {
		ring->pstats.posted[KEVD_STREAM_DTO] += k;
		ring->nruns = 0;	/* they are older than any run */
	} else {
		__kevd_ring_unaccount(ring, ring->slots, ring->mask,
				      head + ahead, k);
		__kevd_ring_runs_add(ring, m, orig, k);
	}
	/* producers read head under prod_lock, which we hold */
	WRITE_ONCE(ring->head, head);
out:
	spin_unlock(&ring->prod_lock);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	return ret;
}

/*
 * kevd_ring_resize() to @size slots for @qlen (-EBUSY above it), or with
 * @from (not 0) kevd_ring_grow(): -EAGAIN, nothing changed, unless the
 * ring still has @from slots when locked.
 */
static int __kevd_ring_resize(struct kevd_ring *ring, u32 size, u32 qlen,
			      u32 from)
{
	struct kevd_event *slots, *old;
	unsigned long flags;
	u32 i, held;
	int ret = 0;

	might_sleep();
	slots = kvcalloc(size, sizeof(*slots), GFP_KERNEL);
	if (!slots)
		return -ENOMEM;

	spin_lock_irqsave(&ring->cons_lock, flags);
	spin_lock(&ring->prod_lock);
	/*
	 * A grow makes room for events already on the EVD: the fenced ones
	 * do not count there, as the ring may be full without them.
	 */
	held = from ? 0 : ring->nfenced;
	if (from && ring->mask + 1 != from)
		ret = -EAGAIN;
	else if (ring->prod - ring->head + ring->resv + held > qlen)
		ret = -EBUSY;
	if (ret) {
		spin_unlock(&ring->prod_lock);
		spin_unlock_irqrestore(&ring->cons_lock, flags);
		kvfree(slots);
		return ret;
	}
	for (i = ring->head; i != ring->prod; i++)
		slots[i & (size - 1)] = ring->slots[i & ring->mask];
	old = ring->slots;
	ring->slots = slots;
	WRITE_ONCE(ring->mask, size - 1);
	spin_unlock(&ring->prod_lock);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	kvfree(old);
	return 0;
}

/**
 * kevd_ring_resize() - change the queue length, keeping every event.
 * @ring: the ring.
 * @qlen: the new minimum queue length.
 *
 * Events keep their indices: slot i of the old array goes to slot i of
 * the new one, so order, counts and lockless readers are unaffected.
 * Slots reserved by a CQ drain in flight and the fenced events (on the
 * EVD, they enter as room frees: kevd_ring_fence()) count as used.
 *
 * Context: process context; may sleep. Takes cons_lock, then prod_lock.
 * Return: 0, -EINVAL for a bad @qlen, -ENOMEM, or -EBUSY when more events
 * are queued (or reserved, or fenced) than @qlen.
 */
int kevd_ring_resize(struct kevd_ring *ring, u32 qlen)
{
	u32 size;
	int ret;

	ret = kevd_ring_slots(qlen, ring->headroom, &size);
	if (ret)
		return ret;
	return __kevd_ring_resize(ring, size, qlen, 0);
}

/**
 * kevd_ring_grow() - kevd_ring_resize() by @k slots, without resize_mutex.
 * @ring: the ring.
 * @k: the slots to add.
 *
 * For the owner of the EVD, which does not wait for a consumer's
 * kevd_resize() in progress (it may hold resize_mutex across the
 * provider's CQ resize): the size it grows from is read unlocked, and the
 * resize is done only if no other resize changed the ring meanwhile;
 * else -EAGAIN, and the caller looks again (the other resize may have
 * made the room). So a consumer's resize is never undone by one computed
 * from the size before it.
 *
 * At the largest queue length it still grows, up to KEVD_MAX_SLOTS: the
 * queue length stays (kevd_ring_qlen()), and the slots above it are for
 * the owner's events alone, which may go past it (@spare of
 * kevd_ring_push_front(), kevd_ring_reserve_spare()). Producers fill at
 * most the queue length and the headroom, and the events a batch or a
 * direct poll holds are few: a ring of KEVD_MAX_SLOTS always has room
 * for them.
 *
 * Context: process context; may sleep. Takes cons_lock, then prod_lock.
 * Return: as kevd_ring_resize(), -EAGAIN, or -ENOSPC when the ring is as
 * large as it gets (nothing allocated: room comes from a take).
 */
int kevd_ring_grow(struct kevd_ring *ring, u32 k)
{
	u32 size = READ_ONCE(ring->mask) + 1, grown;

	if (size >= KEVD_MAX_SLOTS)
		return -ENOSPC;
	grown = min_t(u64, roundup_pow_of_two((u64)size + k + ring->headroom),
		      KEVD_MAX_SLOTS);
	return __kevd_ring_resize(ring, grown, grown, size);
}

/*
 * A connection event held back until the CQ has been drained; @key names
 * the gate of the CM's ESTABLISHED (kevd_cq_fence_gated()), else NULL.
 */
struct kevd_fenced {
	struct list_head node;
	struct kevd_event ev;
	const void *key;
	u32 seq;
};

/**
 * kevd_ring_fence() - hold an event back behind the CQ's completions.
 * @ring: the ring of an EVD with a CQ.
 * @ev: the event; ->evd names its EVD.
 * @key: a key to find it by (kevd_ring_unfence_key()), or NULL; compared,
 *	never read.
 *
 * The event waits on the ring's fenced list, not in the ring, until the
 * owning poller has drained the CQ (kevd_ring_unfence()): every
 * completion that was in the CQ now is queued before it. The caller
 * schedules that pass. The fenced events and the queued ones together
 * never exceed the queue length with its headroom; beyond that, or without
 * memory, the event is dropped and counted as kevd_ring_post() counts a
 * drop (the caller raises the overflow).
 *
 * Context: any, hard IRQ included; takes ring->prod_lock.
 * Return: 0, -ENOSPC when it was dropped for room, -ENOMEM for memory.
 */
int kevd_ring_fence(struct kevd_ring *ring, const struct kevd_event *ev,
		    const void *key)
{
	struct kevd_fenced *f = kmalloc(sizeof(*f), GFP_ATOMIC);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring->prod_lock, flags);
	if (!f || __kevd_ring_free(ring, true) <= ring->nfenced) {
		ret = f ? -ENOSPC : -ENOMEM;
		ring->pstats.drops++;
		ring->pstats.overflows++;
	} else {
		f->ev = *ev;
		f->key = key;
		f->seq = ring->fence_seq + 1;
		list_add_tail(&f->node, &ring->fenced);
		WRITE_ONCE(ring->nfenced, ring->nfenced + 1);
		/* what the poster did before (a drain's hold) comes first */
		smp_store_release(&ring->fence_seq, f->seq);
		f = NULL;
	}
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	kfree(f);
	return ret;
}

/*
 * Take the fenced events off the list, oldest first, up to the one of
 * sequence number @last_seq: all of them, or (@room) as many as the ring has
 * room for, which are queued; *@full tells whether room stopped it.
 * Caller holds prod_lock.
 */
static u32 __kevd_ring_take_fenced(struct kevd_ring *ring,
				   struct list_head *out, bool room, u32 last_seq,
				   bool *full)
{
	struct kevd_fenced *f, *tmp;
	u32 n = 0;

	lockdep_assert_held(&ring->prod_lock);
	*full = false;
	list_for_each_entry_safe(f, tmp, &ring->fenced, node) {
		if ((s32)(f->seq - last_seq) > 0)
			break;
		if (room && !__kevd_ring_free(ring, true)) {
			*full = true;
			break;
		}
		ring->pstats.posted[KEVD_STREAM_CONNECTION]++;
		if (room)
			__kevd_ring_push(ring, &f->ev);
		list_move_tail(&f->node, out);
		n++;
	}
	WRITE_ONCE(ring->nfenced, ring->nfenced - n);
	return n;
}

static void kevd_fenced_free(struct list_head *list)
{
	struct kevd_fenced *f, *tmp;

	list_for_each_entry_safe(f, tmp, list, node)
		kfree(f);
}

/**
 * kevd_ring_fence_seq() - the sequence number of the last event fenced.
 * @ring: the ring.
 *
 * Read before a drain of the CQ that may end in kevd_ring_unfence(): the
 * events fenced up to it were posted before the drain polled, so what
 * the CQ held then is in the ring once it found the CQ empty. An event
 * fenced later may follow a completion that came after the drain's last
 * poll: it waits for the next drain (its poster scheduled one). With
 * acquire: what a poster did before it fenced (a drain's hold, counted
 * in nholds) is seen too.
 *
 * Context: any.
 * Return: the sequence number.
 */
u32 kevd_ring_fence_seq(struct kevd_ring *ring)
{
	/* pairs with kevd_ring_fence()'s release */
	return smp_load_acquire(&ring->fence_seq);
}

/**
 * kevd_ring_unfence() - queue the fenced events: the CQ has been drained.
 * @ring: the ring; its EVD's CQ was just found empty (kevd_cq_unfence()).
 * @queued: set to the number of events queued (the caller wakes and
 *	schedules for them).
 * @last_seq: kevd_ring_fence_seq() before the drain: later events stay.
 *
 * Context: any; takes ring->prod_lock.
 * Return: the number of fenced events left for want of room (0 if only
 * those fenced after @last_seq are left).
 */
u32 kevd_ring_unfence(struct kevd_ring *ring, u32 *queued, u32 last_seq)
{
	unsigned long flags;
	LIST_HEAD(done);
	bool full;
	u32 left;

	spin_lock_irqsave(&ring->prod_lock, flags);
	*queued = __kevd_ring_take_fenced(ring, &done, true, last_seq, &full);
	left = full ? ring->nfenced : 0;
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	kevd_fenced_free(&done);
	return left;
}

/**
 * kevd_ring_unfence_flag() - kevd_ring_unfence() under the consumers' lock.
 * @ring: the ring.
 * @queued: set to the number of events queued.
 * @full: the caller's flag: set if events were left for want of room,
 *	else cleared (as kevd_ring_reserve_flag()).
 * @last_seq: as for kevd_ring_unfence().
 *
 * Context: any; takes ring->cons_lock, then ring->prod_lock.
 * Return: as kevd_ring_unfence().
 */
u32 kevd_ring_unfence_flag(struct kevd_ring *ring, u32 *queued, bool *full,
			   u32 last_seq)
{
	unsigned long flags;
	u32 left;

	spin_lock_irqsave(&ring->cons_lock, flags);
	left = kevd_ring_unfence(ring, queued, last_seq);
	WRITE_ONCE(*full, left != 0);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	return left;
}

/* The fenced event of @key, or NULL. Caller holds prod_lock. */
static struct kevd_fenced *__kevd_ring_fenced(struct kevd_ring *ring,
					      const void *key)
{
	struct kevd_fenced *f;

	lockdep_assert_held(&ring->prod_lock);
	list_for_each_entry(f, &ring->fenced, node)
		if (f->key == key)
			return f;
	return NULL;
}

/**
 * kevd_ring_fenced_has() - is the event of @key still fenced?
 * @ring: the ring.
 * @key: a key given to kevd_ring_fence(); not NULL.
 *
 * Context: any; takes ring->prod_lock.
 * Return: true if it is.
 */
bool kevd_ring_fenced_has(struct kevd_ring *ring, const void *key)
{
	unsigned long flags;
	bool has;

	spin_lock_irqsave(&ring->prod_lock, flags);
	has = __kevd_ring_fenced(ring, key);
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	return has;
}

/**
 * kevd_ring_fenced_ep() - is a connection event of endpoint @ep fenced?
 * @ring: the ring.
 * @ep: the endpoint (&struct kevd_connection_event's ep).
 *
 * Context: any; takes ring->prod_lock.
 * Return: true if one is.
 */
bool kevd_ring_fenced_ep(struct kevd_ring *ring, const void *ep)
{
	struct kevd_fenced *f;
	unsigned long flags;
	bool has = false;

	if (!READ_ONCE(ring->nfenced))
		return false;
	spin_lock_irqsave(&ring->prod_lock, flags);
	list_for_each_entry(f, &ring->fenced, node) {
		if (f->ev.connection.ep == ep) {
			has = true;
			break;
		}
	}
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	return has;
}

/**
 * kevd_ring_unfence_key() - queue the fenced event of @key now.
 * @ring: the ring.
 * @key: a key given to kevd_ring_fence(); not NULL.
 *
 * Ahead of the events fenced before it, which stay fenced. Without room
 * (with the headroom) it stays fenced too, and loses its key: from then
 * on it waits for the CQ as any held event.
 *
 * Context: any; takes ring->prod_lock.
 * Return: 1 if it was queued, 0 if no event of @key is fenced, -ENOSPC.
 */
int kevd_ring_unfence_key(struct kevd_ring *ring, const void *key)
{
	struct kevd_fenced *f;
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring->prod_lock, flags);
	f = __kevd_ring_fenced(ring, key);
	if (f && !__kevd_ring_free(ring, true)) {
		f->key = NULL;
		ret = -ENOSPC;
	} else if (f) {
		ring->pstats.posted[KEVD_STREAM_CONNECTION]++;
		__kevd_ring_push(ring, &f->ev);
		list_del(&f->node);
		WRITE_ONCE(ring->nfenced, ring->nfenced - 1);
		ret = 1;
	}
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	if (ret > 0)
		kfree(f);
	return ret;
}

/**
 * kevd_ring_drop_fenced() - discard the fenced events of a dead EVD.
 * @ring: the ring; nothing produces any more.
 *
 * They count as posted, so that kevd_free() counts them as discarded.
 *
 * Context: process context; takes ring->prod_lock.
 * Return: how many there were.
 */
u32 kevd_ring_drop_fenced(struct kevd_ring *ring)
{
	unsigned long flags;
	LIST_HEAD(done);
	bool full;
	u32 n;

	spin_lock_irqsave(&ring->prod_lock, flags);
	n = __kevd_ring_take_fenced(ring, &done, false, ring->fence_seq, &full);
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	kevd_fenced_free(&done);
	return n;
}
