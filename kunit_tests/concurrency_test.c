// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_concurrency: exactly-once FIFO delivery with concurrent producers
 * (kthreads and an hrtimer in hard-IRQ context) against concurrent
 * dequeue, wait and upcalls; SINGLE_INSTANCE and MANY; TEARDOWN and free
 * while upcalls run; resize under load.
 *
 * Workers only count; the test thread asserts.
 */
#include <linux/bitmap.h>
#include <linux/cpu.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include "kevd_test.h"

#define NPROD		3		/* kthread producers; the hrtimer is #NPROD */
#define SEQ_BITS	24

struct stress;

/* A consumer: checks order per producer, so it must run serially. */
struct stress_cons {
	struct stress *s;
	s32 last[NPROD + 1];
	bool check_order;
};

struct stress {
	struct kevd *evd;
	u32 per_prod;		/* events per kthread producer */
	u32 per_timer;		/* events from the hrtimer */
	u32 total;
	unsigned long *seen;
	atomic_t delivered;
	atomic_t dups;
	atomic_t order_errors;
	atomic_t bad;
	atomic_t enospc;
	atomic_t timer_posted;
	atomic_t upcall_inside;
	atomic_t upcall_max;
	bool stop;
	bool endless;		/* producers post until stop */
	atomic_t endless_posted;
	struct hrtimer timer;
	u32 timer_seq;
	struct stress_cons cons[3];
	u32 upcall_sleep_us;
	atomic_t wait_for_overlap;
};

static void *enc(u32 prod, u32 seq)
{
	return (void *)(((unsigned long)prod << SEQ_BITS) | seq);
}

static void stress_consume(struct stress_cons *c, const struct kevd_event *ev)
{
	struct stress *s = c->s;
	unsigned long v = (unsigned long)ev->software.pointer;
	u32 prod = v >> SEQ_BITS, seq = v & ((1U << SEQ_BITS) - 1);
	u32 per = prod == NPROD ? s->per_timer : s->per_prod;

	if (ev->event_number != KEVD_SOFTWARE_EVENT || prod > NPROD ||
	    (!s->endless && seq >= per)) {
		atomic_inc(&s->bad);
		return;
	}
	if (!s->endless &&
	    test_and_set_bit(prod * s->per_prod + seq, s->seen))
		atomic_inc(&s->dups);
	if (c->check_order) {
		if ((s32)seq <= c->last[prod])
			atomic_inc(&s->order_errors);
		c->last[prod] = seq;
	}
	atomic_inc(&s->delivered);
}

static void stress_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct stress_cons *c = ctx;
	struct stress *s = c->s;
	int in = atomic_inc_return(&s->upcall_inside);
	int max = atomic_read(&s->upcall_max);
	unsigned long end;

	while (in > max && !atomic_try_cmpxchg(&s->upcall_max, &max, in))
		;
	if (atomic_xchg(&s->wait_for_overlap, 0)) {
		/*
		 * Hold the first upcall until a second one has run beside it
		 * (bounded). upcall_max, not upcall_inside: the second may
		 * come and go between two looks.
		 */
		end = jiffies + KEVD_TEST_WAIT;	/* a failure bound only */
		while (atomic_read(&s->upcall_max) < 2 &&
		       time_before(jiffies, end))
			usleep_range(50, 100);
	}
	if (s->upcall_sleep_us)
		usleep_range(s->upcall_sleep_us, 2 * s->upcall_sleep_us);
	if (ev)
		stress_consume(c, ev);
	atomic_dec(&s->upcall_inside);
}

struct producer {
	struct stress *s;
	u32 id;
	struct task_struct *task;
};

static int producer_fn(void *data)
{
	struct producer *p = data;
	struct stress *s = p->s;
	u32 seq = 0;

	while (!kthread_should_stop()) {
		if (!s->endless && seq >= s->per_prod)
			break;
		if (READ_ONCE(s->stop))
			break;
		if (kevd_post_se(s->evd, enc(p->id, seq)) == -ENOSPC) {
			/* Back off: let the consumers run (one CPU on UML). */
			atomic_inc(&s->enospc);
			usleep_range(10, 20);
			continue;
		}
		if (s->endless)
			atomic_inc(&s->endless_posted);
		seq++;
		if (!(seq & 63))
			cond_resched();
	}
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

/* The hard-IRQ producer: one event per expiry. */
static enum hrtimer_restart stress_timer_fn(struct hrtimer *t)
{
	struct stress *s = container_of(t, struct stress, timer);

	if (s->timer_seq >= s->per_timer || READ_ONCE(s->stop))
		return HRTIMER_NORESTART;
	if (!kevd_post_se(s->evd, enc(NPROD, s->timer_seq))) {
		s->timer_seq++;
		atomic_inc(&s->timer_posted);
	}
	hrtimer_forward_now(t, ns_to_ktime(20 * NSEC_PER_USEC));
	return HRTIMER_RESTART;
}

static int dequeue_fn(void *data)
{
	struct stress_cons *c = data;
	struct kevd_event ev;

	while (!kthread_should_stop()) {
		if (!kevd_dequeue(c->s->evd, &ev))
			stress_consume(c, &ev);
		else
			usleep_range(10, 20);	/* empty: let producers run */
	}
	return 0;
}

static int wait_fn(void *data)
{
	struct stress_cons *c = data;
	struct kevd_event ev;
	u32 nmore;
	int rc;

	while (!kthread_should_stop()) {
		rc = kevd_wait(c->s->evd, 10000, 1, &ev, &nmore);
		if (!rc)
			stress_consume(c, &ev);
		else if (rc != -ETIMEDOUT &&
			 !(rc == -ERESTARTSYS && kthread_should_stop()))
			atomic_inc(&c->s->bad);	/* kthread_stop() interrupts */
	}
	return 0;
}

static struct stress *stress_new(struct kunit *test, u32 per_prod,
				 u32 per_timer)
{
	struct stress *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	int i, j;

	KUNIT_ASSERT_NOT_NULL(test, s);
	s->per_prod = per_prod;
	s->per_timer = per_timer;
	s->total = NPROD * per_prod + per_timer;
	s->seen = kunit_kzalloc(test, BITS_TO_LONGS((NPROD + 1) * per_prod) *
				sizeof(long), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s->seen);
	KUNIT_ASSERT_LE(test, per_timer, per_prod);
	for (i = 0; i < ARRAY_SIZE(s->cons); i++) {
		s->cons[i].s = s;
		s->cons[i].check_order = true;
		for (j = 0; j <= NPROD; j++)
			s->cons[i].last[j] = -1;
	}
	return s;
}

static void stress_start_producers(struct kunit *test, struct stress *s,
				   struct producer *p, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		p[i].s = s;
		p[i].id = i;
		p[i].task = kthread_run(producer_fn, &p[i], "kevd_test_p%d", i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(p[i].task));
	}
	if (s->per_timer) {
		hrtimer_init(&s->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
		s->timer.function = stress_timer_fn;
		hrtimer_start(&s->timer, ns_to_ktime(20 * NSEC_PER_USEC), HRTIMER_MODE_REL_HARD);
	}
}

static void stress_stop_producers(struct stress *s, struct producer *p, int n)
{
	int i;

	WRITE_ONCE(s->stop, true);
	if (s->per_timer)
		hrtimer_cancel(&s->timer);
	for (i = 0; i < n; i++)
		kthread_stop(p[i].task);
}

static void stress_expect_exact(struct kunit *test, struct stress *s)
{
	struct kevd_param p;

	KUNIT_EXPECT_EQ(test, atomic_read(&s->delivered), (int)s->total);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->dups), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->bad), 0);
	KUNIT_EXPECT_EQ(test, bitmap_weight(s->seen, NPROD * s->per_prod),
			NPROD * s->per_prod);
	KUNIT_ASSERT_EQ(test, kevd_query(s->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_SOFTWARE], (u64)s->total);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE],
			(u64)s->total);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
}

static u32 stress_n(void)
{
	return num_online_cpus() > 1 ? 20000 : 30000;
}

/* DISABLE: kthreads and an hrtimer post; dequeue and wait consume. */
static void kevd_conc_dequeue_and_wait(struct kunit *test)
{
	struct stress *s = stress_new(test, stress_n(), 2000);
	struct producer p[NPROD];
	struct task_struct *dq, *wt;

	s->evd = kevd_test_create(test, 64, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_DISABLE, NULL, 0);
	dq = kthread_run(dequeue_fn, &s->cons[0], "kevd_test_dq");
	KUNIT_ASSERT_FALSE(test, IS_ERR(dq));
	wt = kthread_run(wait_fn, &s->cons[1], "kevd_test_wait");
	KUNIT_ASSERT_FALSE(test, IS_ERR(wt));
	stress_start_producers(test, s, p, NPROD);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->delivered, s->total));
	stress_stop_producers(s, p, NPROD);
	kthread_stop(dq);
	kthread_stop(wt);
	stress_expect_exact(test, s);
	KUNIT_EXPECT_GT(test, atomic_read(&s->timer_posted), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
}

/* SINGLE_INSTANCE upcalls and a concurrent dequeuer share the stream. */
static void kevd_conc_upcalls_and_dequeue(struct kunit *test)
{
	struct stress *s = stress_new(test, stress_n(), 2000);
	struct kevd_upcall up = { stress_upcall, NULL };
	struct producer p[NPROD];
	struct task_struct *dq;

	up.ctx = &s->cons[0];
	s->evd = kevd_test_create(test, 64, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_SINGLE_INSTANCE, &up, 0);
	dq = kthread_run(dequeue_fn, &s->cons[1], "kevd_test_dq");
	KUNIT_ASSERT_FALSE(test, IS_ERR(dq));
	stress_start_producers(test, s, p, NPROD);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->delivered, s->total));
	stress_stop_producers(s, p, NPROD);
	kthread_stop(dq);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(s->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	stress_expect_exact(test, s);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->upcall_max), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
}

/* SINGLE_INSTANCE never overlaps, even with an upcall that sleeps. */
static void kevd_conc_single_instance_serial(struct kunit *test)
{
	struct stress *s = stress_new(test, 100, 0);
	struct kevd_upcall up = { stress_upcall, NULL };
	struct producer p[NPROD];

	up.ctx = &s->cons[0];
	s->upcall_sleep_us = 100;
	s->evd = kevd_test_create(test, 16, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_SINGLE_INSTANCE, &up, 0);
	stress_start_producers(test, s, p, NPROD);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->delivered, s->total));
	stress_stop_producers(s, p, NPROD);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(s->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	stress_expect_exact(test, s);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->upcall_max), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
}

/* MANY: batches are handed to the next poller and overlap. */
static void kevd_conc_many_overlaps(struct kunit *test)
{
	struct stress *s = stress_new(test, 200, 0);
	struct kevd_upcall up = { stress_upcall, NULL };
	u32 i, j;

	up.ctx = &s->cons[0];
	s->cons[0].check_order = false;	/* concurrent by definition */
	s->evd = kevd_test_create(test, 1024, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_DISABLE, NULL, 0);
	for (i = 0; i < NPROD; i++)
		for (j = 0; j < s->per_prod; j++)
			KUNIT_ASSERT_EQ(test, kevd_post_se(s->evd, enc(i, j)), 0);
	/* With one poller, no batch can run beside another. */
	atomic_set(&s->wait_for_overlap, kevd_nr_pollers() > 1);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(s->evd, KEVD_UPCALL_MANY, &up,
						 KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->delivered, s->total));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(s->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->upcall_inside), 0);
	stress_expect_exact(test, s);
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
	/* Never a skip after expectations: it would hide their failure. */
	if (kevd_nr_pollers() > 1)
		KUNIT_EXPECT_GE(test, atomic_read(&s->upcall_max), 2);
	else
		KUNIT_EXPECT_EQ(test, atomic_read(&s->upcall_max), 1);
}

/* TEARDOWN while producers post and upcalls run: none afterwards. */
static void kevd_conc_teardown_under_load(struct kunit *test)
{
	struct stress *s = stress_new(test, 1, 0);
	struct kevd_upcall up = { stress_upcall, NULL };
	struct producer p[2];
	struct kevd_event ev;
	struct kevd_param q;
	int calls, i, dequeued = 0;

	up.ctx = &s->cons[0];
	s->cons[0].check_order = false;
	s->endless = true;
	s->upcall_sleep_us = 20;
	s->evd = kevd_test_create(test, 64, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_SINGLE_INSTANCE, &up, 0);
	s->per_timer = 0;
	stress_start_producers(test, s, p, 2);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->delivered, 200));
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(s->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	calls = atomic_read(&s->delivered);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->upcall_inside), 0);
	/* Grace period: more events, every queued pass has run. */
	for (i = 0; i < 10; i++)
		kevd_post_se(s->evd, enc(0, 0));
	kevd_test_flush_pollers(test);
	stress_stop_producers(s, p, 2);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->delivered), calls);
	while (!kevd_dequeue(s->evd, &ev))
		dequeued++;
	KUNIT_ASSERT_EQ(test, kevd_query(s->evd, &q), 0);
	KUNIT_EXPECT_EQ(test, q.stats.posted[KEVD_STREAM_SOFTWARE],
			(u64)(calls + dequeued));
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
}

struct blocker {
	struct completion entered;
	struct completion release;
	atomic_t calls;
	struct kevd *evd;
	int free_rc;
	atomic_t freed;
	struct completion free_done;
};

static void blocker_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct blocker *b = ctx;

	if (atomic_inc_return(&b->calls) == 1) {
		complete(&b->entered);
		wait_for_completion(&b->release);
	}
}

/* Wait until kevd_free() has closed @evd (it is still allocated). */
static bool kevd_test_wait_closed(struct kevd *evd)
{
	unsigned long end = jiffies + KEVD_TEST_WAIT;

	while (READ_ONCE(evd->state) & KEVD_STATE_OPEN) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

static int free_fn(void *data)
{
	struct blocker *b = data;

	b->free_rc = kevd_free(b->evd);
	atomic_set(&b->freed, 1);
	complete(&b->free_done);
	return 0;
}

/* free with an upcall in progress waits for it; none runs afterwards. */
static void kevd_conc_free_waits_for_upcall(struct kunit *test)
{
	struct kevd_upcall up = { blocker_upcall, NULL };
	struct task_struct *t;
	struct blocker *b;
	int i;

	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b);
	init_completion(&b->entered);
	init_completion(&b->release);
	init_completion(&b->free_done);
	up.ctx = b;
	b->evd = kevd_test_create(test, 64, KEVD_SOFTWARE_FLAG,
				  KEVD_UPCALL_SINGLE_INSTANCE, &up, 0);
	for (i = 0; i < 40; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(b->evd, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&b->entered,
							  KEVD_TEST_WAIT), 0);
	t = kthread_run(free_fn, b, "kevd_test_free");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	/* Once free has closed the EVD it waits for the blocked upcall. */
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_closed(b->evd));
	KUNIT_EXPECT_EQ(test, atomic_read(&b->freed), 0);
	complete(&b->release);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&b->free_done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, b->free_rc, 0);
	/* The blocked upcall finished; no other started after the free. */
	KUNIT_EXPECT_EQ(test, atomic_read(&b->calls), 1);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&b->calls), 1);
}

struct slow_pair {
	struct completion a_slow_done;
	struct completion a_entered;
	struct completion release;
	struct completion b_done;
	atomic_t a_calls;
};

static void slow_a_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct slow_pair *s = ctx;

	switch (atomic_inc_return(&s->a_calls)) {
	case 1:
		/* The stimulus (a slow upcall), not a synchronisation. */
		msleep(20);
		complete(&s->a_slow_done);
		break;
	case 2:
		complete(&s->a_entered);
		wait_for_completion(&s->release);
		break;
	}
}

static void slow_b_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	complete(ctx);
}

/*
 * Once an EVD's upcall was slow, its poller passes the EVDs it holds on
 * before each of its batches: B, queued behind A on the same poller, is
 * delivered while A's upcall blocks.
 */
static void kevd_conc_slow_upcall_sheds(struct kunit *test)
{
	struct kevd_upcall ua = { slow_a_upcall, NULL };
	struct kevd_upcall ub = { slow_b_upcall, NULL };
	struct slow_pair *s;
	struct kevd *a, *b;
	long left;

	if (kevd_nr_pollers() < 2)
		kunit_skip(test, "needs two pollers");
	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	init_completion(&s->a_slow_done);
	init_completion(&s->a_entered);
	init_completion(&s->release);
	init_completion(&s->b_done);
	ua.ctx = s;
	ub.ctx = &s->b_done;
	/* Both on poller 0 (kevd_test_create() asks for CPU 0). */
	a = kevd_test_create(test, 16, KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_SINGLE_INSTANCE, &ua, 0);
	b = kevd_test_create(test, 16, KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_SINGLE_INSTANCE, &ub, 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(a, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&s->a_slow_done,
							  KEVD_TEST_WAIT), 0);
	/* A's next upcall blocks; B must not wait for it. */
	KUNIT_ASSERT_EQ(test, kevd_post_se(a, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(b, NULL), 0);
	KUNIT_EXPECT_GT(test, wait_for_completion_timeout(&s->a_entered,
							  KEVD_TEST_WAIT), 0);
	left = wait_for_completion_timeout(&s->b_done, KEVD_TEST_WAIT);
	complete(&s->release);
	KUNIT_EXPECT_GT(test, left, 0);
	KUNIT_EXPECT_EQ(test, kevd_free(b), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(a), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->a_calls), 2);
}

static int resizer_sizes[] = { 4, 64, 16, 1024, 8, 200, 2 };

/*
 * resize up and down while producers post and consumers take events: a
 * thread that dequeues and, with @upcall, SINGLE_INSTANCE upcalls, whose
 * batches run while resizes replace the slot array.
 */
static void resize_under_load(struct kunit *test, bool upcall)
{
	struct stress *s = stress_new(test, stress_n() / 2, 1000);
	struct kevd_upcall up = { stress_upcall, &s->cons[1] };
	struct producer p[NPROD];
	struct task_struct *dq;
	int i = 0, ok = 0, busy = 0, rc;

	s->evd = kevd_test_create(test, 32, KEVD_SOFTWARE_FLAG,
				  upcall ? KEVD_UPCALL_SINGLE_INSTANCE :
					   KEVD_UPCALL_DISABLE,
				  upcall ? &up : NULL, KEVD_UPCALL_INVOC_ANY);
	dq = kthread_run(dequeue_fn, &s->cons[0], "kevd_test_dq");
	KUNIT_ASSERT_FALSE(test, IS_ERR(dq));
	stress_start_producers(test, s, p, NPROD);
	while (atomic_read(&s->delivered) < s->total) {
		rc = kevd_resize(s->evd, resizer_sizes[i++ %
						ARRAY_SIZE(resizer_sizes)]);
		if (!rc)
			ok++;
		else if (rc == -EBUSY)
			busy++;
		else
			KUNIT_FAIL(test, "resize: %d", rc);
		cond_resched();
		if (i > 10000000)
			break;
	}
	stress_stop_producers(s, p, NPROD);
	kthread_stop(dq);
	if (upcall)
		KUNIT_EXPECT_EQ(test, kevd_modify_upcall(s->evd,
							 KEVD_UPCALL_TEARDOWN,
							 NULL, 0), 0);
	stress_expect_exact(test, s);
	KUNIT_EXPECT_GT(test, ok, 0);
	kunit_info(test, "resizes: %d done, %d refused (-EBUSY)", ok, busy);
	KUNIT_EXPECT_EQ(test, kevd_free(s->evd), 0);
}

static void kevd_conc_resize_under_load(struct kunit *test)
{
	resize_under_load(test, false);
}

static void kevd_conc_resize_under_upcalls(struct kunit *test)
{
	resize_under_load(test, true);
}

/* --- CPU hotplug ------------------------------------------------------ */

#define HP_EVDS		64
#define HP_ROUNDS	100	/* shared by the test's parts */

/* the CPU that goes and comes back */
static const unsigned int hp_cpus[] = { 1 };

static void hp_cpu_desc(const unsigned int *cpu, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "cpu%u", *cpu);
}

KEVD_TEST_PARTS_PARAM(hp_cpu, hp_cpus, hp_cpu_desc, 4);

/**
 * struct hp_evd - one EVD of the hotplug test and what its upcall saw.
 * @evd: the EVD.
 * @next: the next software pointer expected (1, 2, ...).
 * @posted: events posted (written by the producer only).
 * @delivered: events delivered.
 * @order_errors: events out of order (or duplicated).
 */
struct hp_evd {
	struct kevd *evd;
	unsigned long next;
	unsigned long posted;
	atomic_t delivered;
	atomic_t order_errors;
};

static void hp_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct hp_evd *h = ctx;

	if ((unsigned long)ev->software.pointer != h->next)
		atomic_inc(&h->order_errors);
	h->next = (unsigned long)ev->software.pointer + 1;
	atomic_inc(&h->delivered);
}

/**
 * struct hp_producer - the thread that posts while CPUs come and go.
 * @hs: the EVDs.
 * @stop: set by the test thread once the hotplug rounds are over.
 * @enospc: posts that found a full EVD and were retried.
 * @done: the producer has posted its last event.
 */
struct hp_producer {
	struct hp_evd *hs;
	bool stop;
	atomic_t enospc;
	struct completion done;
};

/* Round robin over the EVDs until told to stop; a full EVD is retried. */
static int hp_producer_fn(void *data)
{
	struct hp_producer *p = data;
	unsigned long seq;
	int i;

	for (seq = 1; !READ_ONCE(p->stop); seq++) {
		for (i = 0; i < HP_EVDS; i++) {
			while (kevd_post_se(p->hs[i].evd, (void *)seq)) {
				atomic_inc(&p->enospc);
				cond_resched();
			}
			p->hs[i].posted = seq;
		}
		cond_resched();
	}
	complete(&p->done);
	return 0;
}

/*
 * CPU 1 goes offline and online again HP_ROUNDS times (over the test's
 * parts) while events flow to 64 EVDs, half of them served by CPU 1's
 * poller: each event is delivered once and in order, and no EVD is left
 * with an undelivered event.
 */
static void kevd_conc_cpu_hotplug(struct kunit *test)
{
	const struct kevd_test_part *part = test->param_value;
	const unsigned int cpu = *(const unsigned int *)part->param;
	const int rounds = DIV_ROUND_UP(HP_ROUNDS, part->parts);
	struct hp_producer *p;
	struct task_struct *t;
	struct hp_evd *hs;
	struct kevd_attr attr;
	int i, round, failed = 0;
	unsigned long total = 0;

	if (!IS_ENABLED(CONFIG_HOTPLUG_CPU) || num_online_cpus() < 2 ||
	    !cpu_online(cpu))
		kunit_skip(test, "needs CPU %u and CPU hotplug", cpu);
	hs = kunit_kcalloc(test, HP_EVDS, sizeof(*hs), GFP_KERNEL);
	p = kunit_kzalloc(test, sizeof(*p), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, hs);
	KUNIT_ASSERT_NOT_NULL(test, p);
	for (i = 0; i < HP_EVDS; i++) {
		kevd_attr_init(&attr);
		attr.qlen = 64;
		attr.flags = KEVD_SOFTWARE_FLAG;
		attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
		attr.upcall = (struct kevd_upcall){ hp_upcall, &hs[i] };
		attr.cpu = i & 1 ? cpu : 0;	/* half of them served there */
		hs[i].next = 1;
		hs[i].evd = kevd_create(NULL, &attr);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hs[i].evd);
	}
	p->hs = hs;
	init_completion(&p->done);
	t = kthread_run(hp_producer_fn, p, "kevd_test_hp");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	for (round = 0; round < rounds; round++) {
		if (remove_cpu(cpu))
			failed++;
		if (add_cpu(cpu))
			failed++;
	}
	WRITE_ONCE(p->stop, true);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&p->done,
							  KEVD_STRESS_WAIT), 0);
	KUNIT_EXPECT_EQ(test, failed, 0);
	KUNIT_EXPECT_TRUE(test, cpu_online(cpu));
	for (i = 0; i < HP_EVDS; i++) {
		KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&hs[i].delivered,
							     hs[i].posted));
		KUNIT_EXPECT_EQ(test, atomic_read(&hs[i].delivered),
				hs[i].posted);
		KUNIT_EXPECT_EQ(test, atomic_read(&hs[i].order_errors), 0);
		KUNIT_EXPECT_EQ(test, kevd_modify_upcall(hs[i].evd,
							 KEVD_UPCALL_TEARDOWN,
							 NULL, 0), 0);
		KUNIT_EXPECT_EQ(test, kevd_free(hs[i].evd), 0);
		total += hs[i].posted;
	}
	kunit_info(test, "%d hotplug rounds, %lu events on %d EVDs, %d posts found a full EVD and retried",
		   rounds, total, HP_EVDS, atomic_read(&p->enospc));
}

static struct kunit_case kevd_conc_cases[] = {
	KUNIT_CASE_SLOW(kevd_conc_dequeue_and_wait),
	KUNIT_CASE_SLOW(kevd_conc_upcalls_and_dequeue),
	KUNIT_CASE(kevd_conc_single_instance_serial),
	KUNIT_CASE(kevd_conc_many_overlaps),
	KUNIT_CASE(kevd_conc_teardown_under_load),
	KUNIT_CASE(kevd_conc_free_waits_for_upcall),
	KUNIT_CASE(kevd_conc_slow_upcall_sheds),
	KUNIT_CASE_SLOW(kevd_conc_resize_under_load),
	KUNIT_CASE_SLOW(kevd_conc_resize_under_upcalls),
	KUNIT_CASE_PARAM(kevd_conc_cpu_hotplug, hp_cpu_gen_params),
	{}
};

static struct kunit_suite kevd_conc_suite = {
	.name = "kevd_concurrency",
	.test_cases = kevd_conc_cases,
};

kunit_test_suite(kevd_conc_suite);
