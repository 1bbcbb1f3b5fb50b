// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The event ring of an EVD: a bounded FIFO of struct kevd_event with one
 * lock per side, after include/linux/ptr_ring.h.
 *
 * Locking:
 *   - producers (post_se, post_event, the CQ drain of the owning poller)
 *     serialise on ring->prod_lock, taken with spin_lock_irqsave: a
 *     producer may run in hard-IRQ context;
 *   - consumers (dequeue, wait, upcall batches) serialise on
 *     ring->cons_lock, also irqsave;
 *   - resize takes cons_lock, then prod_lock, and alone replaces the slot
 *     array.
 *
 * Indices run free (u32, wrapping) and are never reset, so a lockless
 * reader of prod - cons sees a sane count even across a resize. The
 * producer publishes slots with smp_store_release(&prod) and reads cons
 * with smp_load_acquire(); the consumer does the converse. A CQ drain
 * reserves slots before it polls the CQ, so a completion is never taken
 * from the CQ without a slot to put it in.
 *
 * Headroom: ring->headroom slots are kept for the streams that cannot
 * wait (CR, connection, async). DTO and software events stop short of
 * them; only those streams may fill the ring completely.
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include "kevd_internal.h"

static u32 kevd_ring_size(const struct kevd_ring *ring)
{
	return ring->mask + 1;
}

/**
 * kevd_ring_qlen() - the queue length a consumer sees.
 * @ring: the ring.
 *
 * Return: slots usable by DTO and software events.
 */
u32 kevd_ring_qlen(const struct kevd_ring *ring)
{
	return kevd_ring_size(ring) - ring->headroom;
}

/**
 * kevd_ring_bytes() - memory of the slot array.
 * @ring: the ring.
 *
 * Return: bytes allocated for the slots.
 */
size_t kevd_ring_bytes(const struct kevd_ring *ring)
{
	return (size_t)kevd_ring_size(ring) * sizeof(*ring->slots);
}

/**
 * kevd_ring_count() - events queued now (a snapshot).
 * @ring: the ring.
 *
 * Context: any; lockless.
 * Return: the number of queued events.
 */
u32 kevd_ring_count(const struct kevd_ring *ring)
{
	return READ_ONCE(ring->prod) - READ_ONCE(ring->cons);
}

static int kevd_ring_slots(u32 qlen, u32 headroom, u32 *size)
{
	if (!qlen || qlen > KEVD_MAX_QLEN)
		return -EINVAL;
	*size = roundup_pow_of_two(qlen + headroom);
	return 0;
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
	ring->slots = kvcalloc(size, sizeof(*ring->slots), GFP_KERNEL);
	if (!ring->slots)
		return -ENOMEM;
	ring->mask = size - 1;
	ring->headroom = headroom;
	ring->prod = 0;
	ring->cons = 0;
	ring->resv = 0;
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
	kvfree(ring->slots);
	ring->slots = NULL;
}

/* Free slots for a producer; ring->prod_lock held. */
static u32 __kevd_ring_free(struct kevd_ring *ring, bool headroom)
{
	/* acquire: the consumer is done with every slot below cons */
	u32 used = ring->prod - smp_load_acquire(&ring->cons) + ring->resv;
	u32 limit = kevd_ring_size(ring) - (headroom ? 0 : ring->headroom);

	lockdep_assert_held(&ring->prod_lock);
	return used >= limit ? 0 : limit - used;
}

/* Publish @n events at prod; ring->prod_lock held. */
static void __kevd_ring_push(struct kevd_ring *ring,
			     const struct kevd_event *evs, u32 n)
{
	struct kevd_event *slots = ring->slots;
	u32 prod = ring->prod, mask = ring->mask;
	u32 i;

	lockdep_assert_held(&ring->prod_lock);
	for (i = 0; i < n; i++)
		slots[(prod + i) & mask] = evs[i];
	/* release: the slots are written before a consumer sees prod */
	smp_store_release(&ring->prod, prod + n);
}

/**
 * kevd_ring_reserve() - reserve slots for a CQ drain.
 * @evd: the EVD.
 * @want: slots wanted.
 *
 * Context: any; takes ring->prod_lock.
 * Return: slots reserved, 0 .. @want; kevd_ring_commit() gives them back.
 */
u32 kevd_ring_reserve(struct kevd *evd, u32 want)
{
	struct kevd_ring *ring = &evd->ring;
	unsigned long flags;
	u32 n;

	spin_lock_irqsave(&ring->prod_lock, flags);
	n = min(want, __kevd_ring_free(ring, false));
	ring->resv += n;
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	return n;
}

/**
 * kevd_ring_commit() - publish events into reserved slots.
 * @evd: the EVD.
 * @evs: the events.
 * @n: how many; at most @reserved.
 * @reserved: what kevd_ring_reserve() gave; all of it is released.
 * @stream: the stream of the events, for the statistics.
 *
 * One lock round-trip for the whole batch. Only the owning poller
 * commits (it delivers upcalls in the same pass), so this wakes a waiter
 * but does not schedule the EVD.
 *
 * Context: any; takes ring->prod_lock.
 */
void kevd_ring_commit(struct kevd *evd, const struct kevd_event *evs,
		      u32 n, u32 reserved, enum kevd_stream stream)
{
	struct kevd_ring *ring = &evd->ring;
	unsigned long flags;

	spin_lock_irqsave(&ring->prod_lock, flags);
	ring->resv -= reserved;
	__kevd_ring_push(ring, evs, n);
	evd->pstats.posted[stream] += n;
	if (n > evd->pstats.max_batch)
		evd->pstats.max_batch = n;
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	if (n)
		kevd_wake_waiter(evd);
}

/**
 * kevd_ring_post() - queue one event.
 * @evd: the EVD.
 * @ev: the event.
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
int kevd_ring_post(struct kevd *evd, const struct kevd_event *ev,
		   enum kevd_stream stream, bool headroom)
{
	struct kevd_ring *ring = &evd->ring;
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&ring->prod_lock, flags);
	if (__kevd_ring_free(ring, headroom)) {
		__kevd_ring_push(ring, ev, 1);
		evd->pstats.posted[stream]++;
	} else {
		ret = -ENOSPC;
		if (headroom) {
			evd->pstats.drops++;
			evd->pstats.overflows++;
		}
	}
	spin_unlock_irqrestore(&ring->prod_lock, flags);
	if (!ret)
		kevd_producer_done(evd);
	return ret;
}

/**
 * kevd_ring_pop() - take up to @max events, oldest first.
 * @evd: the EVD.
 * @evs: where to copy them; ->evd is set.
 * @max: at most this many.
 *
 * Context: any; takes ring->cons_lock.
 * Return: the number of events taken.
 */
u32 kevd_ring_pop(struct kevd *evd, struct kevd_event *evs, u32 max)
{
	struct kevd_ring *ring = &evd->ring;
	u64 *delivered = evd->cstats.delivered;
	const struct kevd_event *slots;
	unsigned long flags;
	u32 cons, mask, n, i;

	spin_lock_irqsave(&ring->cons_lock, flags);
	cons = ring->cons;
	slots = ring->slots;
	mask = ring->mask;
	/* acquire: pairs with the producer's release of prod */
	n = min(max, smp_load_acquire(&ring->prod) - cons);
	for (i = 0; i < n; i++) {
		evs[i] = slots[(cons + i) & mask];
		evs[i].evd = evd;
		delivered[kevd_event_stream(evs[i].event_number)]++;
	}
	/* release: the slots are read before a producer reuses them */
	smp_store_release(&ring->cons, cons + n);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	return n;
}

/**
 * kevd_ring_resize() - change the queue length, keeping every event.
 * @evd: the EVD.
 * @qlen: the new minimum queue length.
 *
 * Events keep their indices: slot i of the old array goes to slot i of
 * the new one, so order, counts and lockless readers are unaffected.
 * Slots reserved by a CQ drain in flight count as used.
 *
 * Context: process context; may sleep. Takes cons_lock, then prod_lock.
 * Return: 0, -EINVAL for a bad @qlen, -ENOMEM, or -EBUSY when more events
 * are queued (or reserved) than @qlen.
 */
int kevd_ring_resize(struct kevd *evd, u32 qlen)
{
	struct kevd_ring *ring = &evd->ring;
	struct kevd_event *slots, *old;
	unsigned long flags;
	u32 size, i;
	int ret;

	might_sleep();
	ret = kevd_ring_slots(qlen, ring->headroom, &size);
	if (ret)
		return ret;
	slots = kvcalloc(size, sizeof(*slots), GFP_KERNEL);
	if (!slots)
		return -ENOMEM;

	spin_lock_irqsave(&ring->cons_lock, flags);
	spin_lock(&ring->prod_lock);
	if (ring->prod - ring->cons + ring->resv > qlen) {
		spin_unlock(&ring->prod_lock);
		spin_unlock_irqrestore(&ring->cons_lock, flags);
		kvfree(slots);
		return -EBUSY;
	}
	for (i = ring->cons; i != ring->prod; i++)
		slots[i & (size - 1)] = ring->slots[i & ring->mask];
	old = ring->slots;
	ring->slots = slots;
	ring->mask = size - 1;
	spin_unlock(&ring->prod_lock);
	spin_unlock_irqrestore(&ring->cons_lock, flags);
	kvfree(old);
	return 0;
}
