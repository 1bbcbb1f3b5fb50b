// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_api: every kDAT call's happy path and error paths, the upcall
 * policies and flags, overflow.
 */
#include <linux/bitmap.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include "kevd_test.h"
#include "kevd_trace.h"

#define SW	KEVD_SOFTWARE_FLAG

static struct kevd *sw_evd(struct kunit *test, u32 qlen)
{
	return kevd_test_create(test, qlen, SW, KEVD_UPCALL_DISABLE, NULL,
				KEVD_UPCALL_INVOC_NEW);
}

static void *ptr(unsigned long v)
{
	return (void *)v;
}

static void kevd_api_create_errors(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd_attr attr, a;
	struct kevd *noasync;

	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, NULL)), -EINVAL);
	kevd_attr_init(&attr);
	attr.flags = SW;

	a = attr; a.qlen = 0;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.qlen = U32_MAX;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.qlen = KEVD_MAX_QLEN + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.flags = 0;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.flags = 0x2;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.flags = KEVD_DTO_FLAG;	/* DTO needs a device */
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.upcall_policy = KEVD_UPCALL_TEARDOWN;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.upcall_policy = 3;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.upcall_policy = KEVD_UPCALL_MANY;	/* no upcall */
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.upcall_flag = 2;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	a = attr; a.cpu = nr_cpu_ids;
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);

	noasync = sw_evd(test, 4);
	a = attr; a.async_evd = noasync;	/* not an async EVD */
	KUNIT_EXPECT_EQ(test, PTR_ERR(kevd_create(NULL, &a)), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_free(noasync), 0);

	a = attr; a.upcall_policy = KEVD_UPCALL_NOTIFY; a.upcall = up;
	noasync = kevd_create(NULL, &a);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, noasync);
	KUNIT_EXPECT_EQ(test, kevd_free(noasync), 0);
}

static void kevd_api_create_query(struct kunit *test)
{
	struct kevd_param p;
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	KUNIT_EXPECT_EQ(test, attr.flags, (u32)KEVD_DEFAULT_FLAG);
	KUNIT_EXPECT_NE(test, attr.upcall_policy, KEVD_UPCALL_TEARDOWN);
	KUNIT_EXPECT_GE(test, attr.qlen, 1U);
	KUNIT_EXPECT_EQ(test, attr.upcall_flag, KEVD_UPCALL_INVOC_NEW);
	KUNIT_EXPECT_EQ(test, attr.cpu, KEVD_ANY);

	evd = kevd_test_create(test, 100, SW | KEVD_CONNECTION_FLAG,
			       KEVD_UPCALL_DISABLE, NULL,
			       KEVD_UPCALL_INVOC_ANY);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.qlen, 100U);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.flags, (u32)(SW | KEVD_CONNECTION_FLAG));
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_DISABLE);
	KUNIT_EXPECT_EQ(test, p.upcall_flag, KEVD_UPCALL_INVOC_ANY);
	KUNIT_EXPECT_EQ(test, p.state, (u32)KEVD_STATE_OPEN);
	KUNIT_EXPECT_NULL(test, p.cq);
	KUNIT_EXPECT_NULL(test, kevd_cq(evd));
	KUNIT_EXPECT_EQ(test, kevd_query(evd, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_query(NULL, &p), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(NULL), -EINVAL);
}

static void kevd_api_post_dequeue_fifo(struct kunit *test)
{
	struct kevd_event ev;
	struct kevd_param p;
	struct kevd *evd = sw_evd(test, 8), *nosw;
	unsigned long i;
	u32 qlen;

	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(NULL, &ev), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_post_se(NULL, NULL), -EINVAL);

	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	for (i = 0; i < qlen; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	/* Full: -ENOSPC, nothing queued, no overflow. */
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, ptr(999)), -ENOSPC);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, qlen);
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 0ULL);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_SOFTWARE], (u64)qlen);

	for (i = 0; i < qlen; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_SOFTWARE_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(i));
		KUNIT_EXPECT_PTR_EQ(test, ev.evd, evd);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE], (u64)qlen);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);

	nosw = kevd_test_create(test, 8, KEVD_CONNECTION_FLAG,
				KEVD_UPCALL_DISABLE, NULL, 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(nosw, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_free(nosw), 0);
}

static void kevd_api_post_event_streams(struct kunit *test)
{
	struct kevd_event ev = { .event_number = KEVD_CONNECTION_EVENT_ESTABLISHED };
	struct kevd_event out;
	struct kevd *evd;

	evd = kevd_test_create(test, 8, KEVD_CONNECTION_FLAG | SW,
			       KEVD_UPCALL_DISABLE, NULL, 0);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), 0);
	ev.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), 0);
	ev.event_number = KEVD_DTO_COMPLETION_EVENT;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), -EINVAL);
	ev.event_number = KEVD_SOFTWARE_EVENT;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), -EINVAL);
	ev.event_number = KEVD_CONNECTION_REQUEST_EVENT;	/* no CR flag */
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), -EINVAL);
	ev.event_number = 0x7777;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, NULL), -EINVAL);

	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &out), 0);
	KUNIT_EXPECT_EQ(test, out.event_number,
			(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &out), 0);
	KUNIT_EXPECT_EQ(test, out.event_number,
			(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

static void kevd_api_resize(struct kunit *test)
{
	struct kevd *evd = sw_evd(test, 8);
	struct kevd_event ev;
	struct kevd_param p;
	unsigned long i;

	for (i = 0; i < 6; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, KEVD_MAX_QLEN + 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_resize(NULL, 8), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 5), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 100), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.qlen, 100U);
	KUNIT_EXPECT_EQ(test, p.count, 6U);
	for (i = 6; i < 50; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	/* Take some, so the live range wraps in the smaller array. */
	for (i = 0; i < 45; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(i));
	}
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 5), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 5U);
	KUNIT_EXPECT_LT(test, p.qlen, 100U);
	for (i = 45; i < 50; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(i));
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

static void kevd_api_modify_upcall_errors(struct kunit *test)
{
	struct kevd_upcall nofunc = { NULL, NULL };
	struct kevd *evd = sw_evd(test, 8);
	struct kevd_param p;

	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(NULL, 0, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, 3, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, 99, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, -2, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE,
						 NULL, 2), -EINVAL);
	/* Enabling without any upcall object, or with a NULL function. */
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_MANY,
						 NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_MANY,
						 &nofunc, 0), -EINVAL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_DISABLE);
	/* TEARDOWN outside any upcall returns at once. */
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_TEARDOWN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* INVOC_ANY fires for events queued before enabling. */
static void kevd_api_invoc_any(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd *evd = sw_evd(test, 16);
	struct kevd_rec *r;
	unsigned long i;

	r = kevd_rec_new(test);
	up.ctx = r;
	for (i = 0; i < 5; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->calls, 5));
	KUNIT_EXPECT_EQ(test, atomic_read(&r->errors), 0);
	/* more_events was true for all but the last. */
	KUNIT_EXPECT_EQ(test, atomic_read(&r->last_more_false), 1);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->calls), 5);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* What the upcall of kevd_api_in_place saw and did, for the test thread. */
struct in_place_rec {
	struct kevd *evd;
	atomic_t calls;
	unsigned long seen[8];
	struct kevd *first_evd;
	unsigned long first_after;	/* event 0 read again after resizes */
	int grow_rc;
	int shrink_rc;
	int post_rc;
	int dequeue_rc;
	unsigned long dequeued;
	u32 count_inside;
	u32 qlen_inside;
};

static void in_place_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct in_place_rec *r = ctx;
	int n = atomic_read(&r->calls);
	struct kevd_event out = {};
	struct kevd_param p;

	if (n < ARRAY_SIZE(r->seen))
		r->seen[n] = (unsigned long)ev->software.pointer;
	if (n == 0) {
		r->first_evd = ev->evd;
		/* The batch's events are no longer queued: they do not count. */
		r->shrink_rc = kevd_resize(r->evd, 2);
		/* Grow twice: ev must outlive both. */
		r->grow_rc = kevd_resize(r->evd, 64);
		if (!r->grow_rc)
			r->grow_rc = kevd_resize(r->evd, 200);
		r->first_after = (unsigned long)ev->software.pointer;
		/*
		 * An event posted now comes after the batch; a dequeue from
		 * the upcall gets the batch's next event, which the batch
		 * then skips.
		 */
		r->post_rc = kevd_post_se(r->evd, ptr(100));
		r->dequeue_rc = kevd_dequeue(r->evd, &out);
		r->dequeued = (unsigned long)out.software.pointer;
		if (!kevd_query(r->evd, &p)) {
			r->count_inside = p.count;
			r->qlen_inside = p.qlen;
		}
	}
	atomic_inc(&r->calls);
}

/*
 * Resize and dequeue from inside a SINGLE_INSTANCE upcall neither lose
 * nor move what the batch holds, and the dequeue takes the batch's next
 * event before anything newer.
 */
static void kevd_api_in_place(struct kunit *test)
{
	struct kevd_upcall up = { in_place_upcall, NULL };
	struct in_place_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_event ev;
	struct kevd_param p;
	unsigned long i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	r->evd = sw_evd(test, 8);
	up.ctx = r;
	for (i = 0; i < 6; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(r->evd, ptr(i)), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(r->evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->calls, 6));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(r->evd, KEVD_UPCALL_DISABLE,
						 NULL, 0), 0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->calls), 6);
	/* 0, then 2..5 (the upcall dequeued 1), then the posted 100 */
	KUNIT_EXPECT_EQ(test, r->seen[0], 0UL);
	for (i = 1; i < 5; i++)
		KUNIT_EXPECT_EQ(test, r->seen[i], i + 1);
	KUNIT_EXPECT_EQ(test, r->seen[5], 100UL);
	KUNIT_EXPECT_EQ(test, r->shrink_rc, 0);
	KUNIT_EXPECT_EQ(test, r->grow_rc, 0);
	KUNIT_EXPECT_EQ(test, r->first_after, 0UL);
	KUNIT_EXPECT_PTR_EQ(test, r->first_evd, r->evd);
	KUNIT_EXPECT_EQ(test, r->post_rc, 0);
	KUNIT_EXPECT_EQ(test, r->dequeue_rc, 0);
	KUNIT_EXPECT_EQ(test, r->dequeued, 1UL);
	KUNIT_EXPECT_EQ(test, r->count_inside, 1U);
	KUNIT_EXPECT_GE(test, r->qlen_inside, 200U);

	/* The batch is over: shrinking works. */
	KUNIT_EXPECT_EQ(test, kevd_resize(r->evd, 2), 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(r->evd, &ev), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(r->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_SOFTWARE], 7ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE], 7ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(r->evd), 0);
}

/* INVOC_NEW waits for an arrival, then delivers oldest first. */
static void kevd_api_invoc_new(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd *evd = sw_evd(test, 16);
	struct kevd_rec *r;
	unsigned long i;

	r = kevd_rec_new(test);
	up.ctx = r;
	for (i = 0; i < 3; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_NEW), 0);
	/* Every pass that enabling scheduled has run: still no upcall. */
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->calls), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(3)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->calls, 4));
	KUNIT_EXPECT_EQ(test, atomic_read(&r->errors), 0);
	KUNIT_EXPECT_EQ(test, r->next, 4ULL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * NOTIFY rings a doorbell without an event; dequeue finds them all. No
 * doorbell rings again for the same arrivals, even while they stay
 * queued; a new arrival rings one.
 */
static void kevd_api_notify(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd_event ev;
	struct kevd_param p;
	struct kevd_rec *r;
	struct kevd *evd;
	unsigned long i;
	int rung;

	r = kevd_rec_new(test);
	up.ctx = r;
	evd = kevd_test_create(test, 64, SW, KEVD_UPCALL_NOTIFY, &up,
			       KEVD_UPCALL_INVOC_NEW);
	for (i = 0; i < 20; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->doorbells, 1));
	kevd_test_flush_pollers(test);
	rung = atomic_read(&r->doorbells);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->doorbells), rung);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(20)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->doorbells, rung + 1));
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->doorbells), rung + 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->calls), atomic_read(&r->doorbells));
	for (i = 0; i < 21; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(i));
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.upcalls, (u64)atomic_read(&r->doorbells));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* Swaps the NOTIFY upcall object of @evd inside its first doorbell's batch. */
struct kevd_notify_swap {
	struct kevd *evd;
	struct kevd_upcall up;
	int flag;
	atomic_t fired;
	int rc;
};

/*
 * A probe on kevd_upcall_batch_begin: it runs on the poller between the
 * doorbell's policy snapshot and the call, the window a consumer's
 * kevd_modify_upcall() from another CPU can land in.
 */
static void kevd_notify_swap_probe(void *data, const struct kevd *evd,
				   int policy, u32 n)
{
	struct kevd_notify_swap *s = data;

	if (policy != KEVD_UPCALL_NOTIFY || atomic_read(&s->fired) ||
	    evd != READ_ONCE(s->evd) || atomic_cmpxchg(&s->fired, 0, 1))
		return;
	WRITE_ONCE(s->rc, kevd_modify_upcall(s->evd, KEVD_UPCALL_NOTIFY,
					     &s->up, s->flag));
}

/* At the test's end, however it ends: no probe runs after it. */
static void kevd_notify_swap_unprobe(void *s)
{
	unregister_trace_kevd_upcall_batch_begin(kevd_notify_swap_probe, s);
	tracepoint_synchronize_unregister();
}

/*
 * A NOTIFY doorbell that a change of the upcall object (same policy and
 * flag) stopped before its call is not lost: the new object rings for
 * the events already queued, and the old one does not ring.
 */
static void kevd_api_notify_swap_object(struct kunit *test)
{
	static const int flags[] = { KEVD_UPCALL_INVOC_ANY,
				     KEVD_UPCALL_INVOC_NEW };
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd_notify_swap *s;
	unsigned long bound = msecs_to_jiffies(10000);
	struct kevd_rec *old, *new;
	struct kevd_event ev;
	struct kevd_param p;
	unsigned int i;
	bool rung;
	int ret;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	if (!IS_ENABLED(CONFIG_TRACEPOINTS))
		kunit_skip(test, "no tracepoints in this kernel");
	atomic_set(&s->fired, 1);	/* the probe waits for an EVD */
	ret = register_trace_kevd_upcall_batch_begin(kevd_notify_swap_probe,
						     s);
	KUNIT_ASSERT_EQ(test, ret, 0);
	ret = kunit_add_action_or_reset(test, kevd_notify_swap_unprobe, s);
	KUNIT_ASSERT_EQ(test, ret, 0);
	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		old = kevd_rec_new(test);
		new = kevd_rec_new(test);
		up.ctx = old;
		s->up = (struct kevd_upcall){ kevd_rec_upcall, new };
		s->flag = flags[i];
		s->rc = -1;
		WRITE_ONCE(s->evd, kevd_test_create(test, 8, SW,
						    KEVD_UPCALL_NOTIFY, &up,
						    flags[i]));
		atomic_set_release(&s->fired, 0);	/* the probe looks now */
		KUNIT_EXPECT_EQ(test, kevd_post_se(s->evd, ptr(i + 1)), 0);
		rung = kevd_test_wait_count_for(&new->doorbells, 1, bound);
		KUNIT_EXPECT_TRUE(test, rung);
		KUNIT_EXPECT_EQ(test, atomic_read(&s->fired), 1);
		KUNIT_EXPECT_EQ(test, READ_ONCE(s->rc), 0);
		KUNIT_EXPECT_EQ(test, atomic_read(&old->doorbells), 0);
		KUNIT_EXPECT_EQ(test, kevd_dequeue(s->evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(i + 1));
		KUNIT_EXPECT_EQ(test, kevd_modify_upcall(s->evd,
							 KEVD_UPCALL_TEARDOWN,
							 NULL, 0), 0);
		KUNIT_ASSERT_EQ(test, kevd_query(s->evd, &p), 0);
		KUNIT_EXPECT_EQ(test, p.stats.upcalls,
				(u64)atomic_read(&new->doorbells));
		atomic_set(&s->fired, 1);	/* and no longer */
		KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
	}
}

static void kevd_api_teardown_inside_upcall(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd_rec *r;
	struct kevd *evd;

	r = kevd_rec_new(test);
	up.ctx = r;
	evd = kevd_test_create(test, 8, SW, KEVD_UPCALL_SINGLE_INSTANCE, &up,
			       KEVD_UPCALL_INVOC_NEW);
	r->evd = evd;
	r->rc = 1;
	r->done_at = 1;
	r->action = KEVD_REC_TEARDOWN_INSIDE;
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(0)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&r->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, r->rc, -EDEADLK);

	r->rc = 1;
	r->done_at = 2;
	r->action = KEVD_REC_FREE_INSIDE;
	reinit_completion(&r->done);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(1)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&r->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, r->rc, -EDEADLK);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

struct kevd_waiter {
	struct kevd *evd;
	u32 timeout_us;
	u32 threshold;
	struct kevd_event ev;
	u32 nmore;
	int rc;
	struct completion done;
};

static int kevd_waiter_fn(void *data)
{
	struct kevd_waiter *w = data;

	w->rc = kevd_wait(w->evd, w->timeout_us, w->threshold, &w->ev,
			  &w->nmore);
	complete(&w->done);
	return 0;
}

static void kevd_api_wait(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd *evd = sw_evd(test, 8);
	struct task_struct *task;
	struct kevd_waiter *w;
	struct kevd_rec *r;
	struct kevd_event ev;
	struct kevd_param p;
	u32 nmore;

	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 0, &ev, &nmore), -EINVAL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, p.qlen + 1, &ev, &nmore),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, NULL, &nmore), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 2000, 1, &ev, &nmore), -ETIMEDOUT);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_WAITED);

	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(1)), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(2)), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 3, &ev, &nmore), -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, nmore, 2U);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, KEVD_TIMEOUT_INFINITE, 2, &ev,
					&nmore), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(1));
	KUNIT_EXPECT_EQ(test, nmore, 1U);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);

	/* A waiter in another thread: second waiter, free, enable refused. */
	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	w->evd = evd;
	w->timeout_us = KEVD_TIMEOUT_INFINITE;
	w->threshold = 2;
	init_completion(&w->done);
	task = kthread_run(kevd_waiter_fn, w, "kevd_test_wait");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(evd));
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, 0), -EBUSY);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(10)), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(11)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_PTR_EQ(test, w->ev.software.pointer, ptr(10));
	KUNIT_EXPECT_EQ(test, w->nmore, 1U);

	/* Unwaitable: a blocked waiter returns, later waits return at once. */
	reinit_completion(&w->done);
	w->threshold = 3;
	task = kthread_run(kevd_waiter_fn, w, "kevd_test_wait");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(evd));
	KUNIT_EXPECT_EQ(test, kevd_set_unwaitable(evd, true), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, w->rc, -ECANCELED);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, KEVD_TIMEOUT_INFINITE, 1, &ev,
					&nmore), -ECANCELED);
	KUNIT_EXPECT_EQ(test, kevd_set_unwaitable(evd, false), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, ptr(11));

	/* Wait with upcalls enabled. */
	r = kevd_rec_new(test);
	up.ctx = r;
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_NOTIFY, &up,
						 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), -EINVAL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_WAITED);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* kevd_dequeue_batch(): order, exactly once, empty, errors, upcalls on. */
static void kevd_api_dequeue_batch(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd *evd = sw_evd(test, 16);
	struct kevd_event *evs;
	struct kevd_param p;
	unsigned long i;
	int n;

	evs = kunit_kcalloc(test, 16, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(NULL, evs, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, NULL, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 16), -EAGAIN);

	for (i = 1; i <= 5; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 3), 3);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_PTR_EQ(test, evs[i].software.pointer, ptr(i + 1));
	/* asks for more than is queued: gets the rest, in order */
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 16), 2);
	KUNIT_EXPECT_PTR_EQ(test, evs[0].software.pointer, ptr(4));
	KUNIT_EXPECT_PTR_EQ(test, evs[1].software.pointer, ptr(5));
	KUNIT_EXPECT_PTR_EQ(test, evs[1].evd, evd);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 16), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE], 5ULL);
	KUNIT_EXPECT_EQ(test, p.count, 0U);

	/* NOTIFY: the doorbell's consumer takes the lot in one call */
	up.ctx = kevd_rec_new(test);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_NOTIFY, &up,
						 KEVD_UPCALL_INVOC_ANY), 0);
	for (i = 6; i <= 9; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	n = kevd_dequeue_batch(evd, evs, 16);
	KUNIT_EXPECT_EQ(test, n, 4);
	for (i = 0; i < 4 && i < n; i++)
		KUNIT_EXPECT_PTR_EQ(test, evs[i].software.pointer, ptr(i + 6));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

struct kevd_batch_waiter {
	struct kevd *evd;
	u32 threshold;
	u32 n;
	struct kevd_event evs[8];
	u32 nmore;
	int rc;
	struct completion done;
};

static int kevd_batch_waiter_fn(void *data)
{
	struct kevd_batch_waiter *w = data;

	w->rc = kevd_wait_batch(w->evd, KEVD_TIMEOUT_INFINITE, w->threshold,
				w->evs, w->n, &w->nmore);
	complete(&w->done);
	return 0;
}

/* kevd_wait_batch(): thresholds, timeouts, many at once, upcalls on. */
static void kevd_api_wait_batch(struct kunit *test)
{
	struct kevd_upcall up = { kevd_rec_upcall, NULL };
	struct kevd *evd = sw_evd(test, 8);
	struct kevd_batch_waiter *w;
	struct task_struct *task;
	struct kevd_event evs[4];
	struct kevd_param p;
	unsigned long i;
	u32 nmore;

	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 0, &nmore),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 0, evs, 4, &nmore),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, p.qlen + 1, evs, 4,
					      &nmore), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, NULL, 4, &nmore),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 4, NULL),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 4, &nmore),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 2000, 1, evs, 4, &nmore),
			-ETIMEDOUT);

	/* below the threshold: times out, takes nothing */
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(1)), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(2)), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 3, evs, 4, &nmore),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, nmore, 2U);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(3)), 0);
	/* at the threshold: at most n, oldest first, the rest counted */
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 3, evs, 2, &nmore), 2);
	KUNIT_EXPECT_PTR_EQ(test, evs[0].software.pointer, ptr(1));
	KUNIT_EXPECT_PTR_EQ(test, evs[1].software.pointer, ptr(2));
	KUNIT_EXPECT_EQ(test, nmore, 1U);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 4, &nmore), 1);
	KUNIT_EXPECT_PTR_EQ(test, evs[0].software.pointer, ptr(3));
	KUNIT_EXPECT_EQ(test, nmore, 0U);

	/* a sleeping waiter wakes at its threshold and takes the lot */
	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	w->evd = evd;
	w->threshold = 4;
	w->n = ARRAY_SIZE(w->evs);
	init_completion(&w->done);
	task = kthread_run(kevd_batch_waiter_fn, w, "kevd_test_wait");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(evd));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, 0), -EBUSY);
	for (i = 10; i < 14; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, ptr(i)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, w->rc, 4);
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_PTR_EQ(test, w->evs[i].software.pointer,
				    ptr(i + 10));
	KUNIT_EXPECT_EQ(test, w->nmore, 0U);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE],
			p.stats.posted[KEVD_STREAM_SOFTWARE]);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_WAITED);

	/* upcalls enabled: no wait */
	up.ctx = kevd_rec_new(test);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_NOTIFY, &up,
						 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 4, &nmore),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

static void kevd_api_overflow(struct kunit *test)
{
	struct kevd_event ev = { .event_number = KEVD_CONNECTION_EVENT_BROKEN };
	struct kevd *aevd, *evd;
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd_event out;
	u32 i, posted = 0;
	int rc;

	aevd = kevd_test_create(test, 8, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE,
				NULL, 0);
	kevd_attr_init(&attr);
	attr.qlen = 4;
	attr.flags = KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = aevd;
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), -EBUSY);

	for (i = 0; i < 1000; i++) {
		rc = kevd_post_event(evd, &ev);
		if (rc)
			break;
		posted++;
	}
	KUNIT_EXPECT_EQ(test, rc, -EOVERFLOW);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	/* The connection stream may use the headroom too. */
	KUNIT_EXPECT_GT(test, posted, p.qlen);
	KUNIT_EXPECT_EQ(test, p.count, posted);
	KUNIT_EXPECT_TRUE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 1ULL);
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 1ULL);

	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &out), 0);
	KUNIT_EXPECT_EQ(test, out.event_number,
			(u32)KEVD_ASYNC_ERROR_EVD_OVERFLOW);
	KUNIT_EXPECT_PTR_EQ(test, out.async.handle, (void *)evd);
	KUNIT_EXPECT_EQ(test, out.async.reason, (u32)KEVD_STREAM_CONNECTION);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(aevd, &out), -EAGAIN);

	/* Growing the EVD is the remedy: it clears the state. */
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 64), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.count, posted);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), 0);

	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
}

static void kevd_api_total_stats(struct kunit *test)
{
	struct kevd_stats before, after;
	struct kevd *evd = sw_evd(test, 8);
	struct kevd_event ev;

	kevd_total_stats(&before);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	kevd_total_stats(&after);
	/* Freed EVDs keep counting in the totals. */
	KUNIT_EXPECT_EQ(test, after.posted[KEVD_STREAM_SOFTWARE],
			before.posted[KEVD_STREAM_SOFTWARE] + 1);
	KUNIT_EXPECT_EQ(test, after.delivered[KEVD_STREAM_SOFTWARE],
			before.delivered[KEVD_STREAM_SOFTWARE] + 1);
}

/*
 * /sys/kernel/debug/kevd/evds at 10,000 EVDs: read by cat in user space
 * (the seq_file has no read_iter for the kernel to read it), every EVD
 * is listed exactly once.
 */
#define DBG_EVDS	10000
#define DBG_COPY	"/dev/kevd-test-evds"

static void kevd_api_debugfs_10k(struct kunit *test)
{
	unsigned int id, lines = 0, dups = 0, i, max_id = 0;
	unsigned long *seen, *ours;
	char *text, *line, *end;
	struct kevd **evds;

	if (kevd_test_sh("test -r /sys/kernel/debug/kevd/evds"))
		kunit_skip(test, "debugfs is not mounted");
	evds = kvcalloc(DBG_EVDS, sizeof(*evds), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evds);
	for (i = 0; i < DBG_EVDS; i++) {
		evds[i] = sw_evd(test, 1);
		max_id = max(max_id, evds[i]->id);
	}
	seen = bitmap_zalloc(max_id + 1, GFP_KERNEL);
	ours = bitmap_zalloc(max_id + 1, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, seen);
	KUNIT_ASSERT_NOT_NULL(test, ours);
	for (i = 0; i < DBG_EVDS; i++)
		__set_bit(evds[i]->id, ours);

	KUNIT_EXPECT_EQ(test, kevd_test_sh("cat /sys/kernel/debug/kevd/evds >"
					   DBG_COPY), 0);
	text = kevd_test_read_file(DBG_COPY, 16 << 20);
	kevd_test_sh("rm -f " DBG_COPY);
	KUNIT_ASSERT_NOT_NULL(test, text);
	for (line = text; (end = strchr(line, '\n')); line = end + 1) {
		*end = 0;
		lines++;
		if (sscanf(line, "evd%u ", &id) == 1 && id <= max_id &&
		    test_bit(id, ours) && __test_and_set_bit(id, seen))
			dups++;
	}
	kvfree(text);
	KUNIT_EXPECT_EQ(test, dups, 0U);
	KUNIT_EXPECT_GE(test, lines, (unsigned int)DBG_EVDS);
	KUNIT_EXPECT_TRUE(test, bitmap_equal(seen, ours, max_id + 1));
	for (i = 0; i < DBG_EVDS; i++)
		KUNIT_EXPECT_EQ(test, kevd_free(evds[i]), 0);
	bitmap_free(seen);
	bitmap_free(ours);
	kvfree(evds);
}

/*
 * A wait's timeout in jiffies is finite for every finite value, and
 * rounded up, neither shorter nor a tick longer than asked. Before,
 * usecs_to_jiffies() made the largest finite ones (above its 32-bit
 * limit, from U32_MAX - 1998 at HZ=1000) MAX_JIFFY_OFFSET: waits
 * without end.
 */
static void kevd_api_timeout_jiffies(struct kunit *test)
{
	static const u32 us[] = {
		1, 999, 1000, 1001, 4000, 10000, 1000000,
		U32_MAX - 4000000, U32_MAX - 1999, U32_MAX - 1998, U32_MAX - 1,
	};
	u64 asked, got;
	long j;
	int i;

	KUNIT_EXPECT_EQ(test, kevd_timeout_jiffies(KEVD_TIMEOUT_INFINITE),
			MAX_SCHEDULE_TIMEOUT);
	KUNIT_EXPECT_EQ(test, kevd_timeout_jiffies(0), 0L);
	for (i = 0; i < ARRAY_SIZE(us); i++) {
		j = kevd_timeout_jiffies(us[i]);
		/* in units of 1/(HZ * USEC_PER_SEC) s: exact */
		asked = (u64)us[i] * HZ;
		got = (u64)j * USEC_PER_SEC;
		KUNIT_EXPECT_LT_MSG(test, j, (long)MAX_JIFFY_OFFSET,
				    "%u us", us[i]);
		KUNIT_EXPECT_GE_MSG(test, got, asked, "%u us", us[i]);
		KUNIT_EXPECT_LT_MSG(test, got, asked + USEC_PER_SEC,
				    "%u us", us[i]);
	}
}

static struct kunit_case kevd_api_cases[] = {
	KUNIT_CASE(kevd_api_create_errors),
	KUNIT_CASE(kevd_api_create_query),
	KUNIT_CASE(kevd_api_post_dequeue_fifo),
	KUNIT_CASE(kevd_api_post_event_streams),
	KUNIT_CASE(kevd_api_resize),
	KUNIT_CASE(kevd_api_modify_upcall_errors),
	KUNIT_CASE(kevd_api_invoc_any),
	KUNIT_CASE(kevd_api_invoc_new),
	KUNIT_CASE(kevd_api_in_place),
	KUNIT_CASE(kevd_api_notify),
	KUNIT_CASE(kevd_api_notify_swap_object),
	KUNIT_CASE(kevd_api_teardown_inside_upcall),
	KUNIT_CASE(kevd_api_wait),
	KUNIT_CASE(kevd_api_timeout_jiffies),
	KUNIT_CASE(kevd_api_dequeue_batch),
	KUNIT_CASE(kevd_api_wait_batch),
	KUNIT_CASE(kevd_api_overflow),
	KUNIT_CASE(kevd_api_total_stats),
	KUNIT_CASE_SLOW(kevd_api_debugfs_10k),
	{}
};

static struct kunit_suite kevd_api_suite = {
	.name = "kevd_api",
	.test_cases = kevd_api_cases,
};

kunit_test_suite(kevd_api_suite);
