// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_consumer: kevd as a kDAPL consumer uses it, through the public
 * header only (and the fake HCA for the DTO stream): what kevd accepts
 * and what reaches the consumer, a full ring that must resume, a waiter
 * whose threshold must stay reachable, overflow that is never silent.
 *
 * Workers and upcalls only count; the test thread asserts. A bounded wait
 * that runs out is a failure, never a result.
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/prandom.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/string.h>
#include <kevd/kevd.h>
#include "fake_hca.h"
#include "kevd_test_export.h"

#define CONS_WAIT	msecs_to_jiffies(60000)

static struct kevd *cons_create(struct kunit *test, u32 qlen, u32 flags,
				int policy, const struct kevd_upcall *up,
				struct kevd *async_evd)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.flags = flags;
	attr.upcall_policy = policy;
	if (up)
		attr.upcall = *up;
	attr.async_evd = async_evd;
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

static u32 cons_count(struct kevd *evd)
{
	struct kevd_param p;

	return kevd_query(evd, &p) ? 0 : p.count;
}

static u32 cons_state(struct kevd *evd)
{
	struct kevd_param p;

	return kevd_query(evd, &p) ? 0 : p.state;
}

/* Poll @evd's count until it reaches @n; false if the bound runs out. */
static bool cons_wait_count(struct kevd *evd, u32 n)
{
	unsigned long end = jiffies + CONS_WAIT;

	while (cons_count(evd) < n) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/* --- what kevd accepts --------------------------------------------------- */

/*
 * Only the numbers of enum kevd_event_number are events: one in a known
 * stream's range that DAT does not define is refused, and nothing of it
 * is ever dequeued.
 */
static void kevd_consumer_unknown_event_number(struct kunit *test)
{
	static const u32 bad[] = { 0x4242, 0x4000, 0x4009, 0x2002, 0x1002,
				   0x8006, 0x10002, 0x0002 };
	struct kevd_event ev = { };
	struct kevd *evd;
	unsigned int i;

	evd = cons_create(test, 64, KEVD_ALL_FLAGS & ~KEVD_DTO_FLAG,
			  KEVD_UPCALL_DISABLE, NULL, NULL);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ev.event_number = bad[i];
		KUNIT_EXPECT_EQ_MSG(test, kevd_post_event(evd, &ev), -EINVAL,
				    "event number %#x", bad[i]);
	}
	KUNIT_EXPECT_EQ(test, cons_count(evd), 0U);
	ev.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED;
	ev.connection.ep = evd;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &ev), 0);
	memset(&ev, 0, sizeof(ev));
	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
	KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)evd);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* --- what reaches the consumer ------------------------------------------- */

struct dto_case {
	enum ib_wc_opcode op;
	int flags;
	enum ib_wc_status status;
	u32 byte_len;
	u32 imm;
	u32 want_len;
	bool want_imm;
};

/*
 * A DTO event carries only what the verbs define: the length of received
 * messages, RDMA READs and atomics, a receive's immediate data with
 * IB_WC_WITH_IMM (a sender's completion may have the flag, as mlx5 sets
 * it, but no value), the vendor error of a failed one. The fake
 * HCA leaves the undefined fields full of garbage, as hardware does, and
 * the completions go through the poller's shared work-completion array
 * after a receive that had both, so a stale value would show.
 */
static void kevd_consumer_dto_defined_fields(struct kunit *test)
{
	static const struct dto_case cases[] = {
		{ IB_WC_RECV, IB_WC_WITH_IMM, IB_WC_SUCCESS, 100, 7, 100, true },
		{ IB_WC_SEND, 0, IB_WC_SUCCESS, 0, 0, 0, false },
		{ IB_WC_RECV, IB_WC_WITH_IMM, IB_WC_SUCCESS, 200, 9, 200, true },
		{ IB_WC_RDMA_WRITE, 0, IB_WC_SUCCESS, 0, 0, 0, false },
		{ IB_WC_RDMA_READ, 0, IB_WC_SUCCESS, 300, 0, 300, false },
		{ IB_WC_REG_MR, 0, IB_WC_SUCCESS, 0, 0, 0, false },
		{ IB_WC_LOCAL_INV, 0, IB_WC_SUCCESS, 0, 0, 0, false },
		{ IB_WC_RECV, 0, IB_WC_SUCCESS, 400, 0, 400, false },
		{ IB_WC_RECV_RDMA_WITH_IMM, IB_WC_WITH_IMM, IB_WC_SUCCESS, 0, 11,
		  0, true },
		{ IB_WC_RECV, 0, IB_WC_WR_FLUSH_ERR, 0, 0, 0, false },
		{ IB_WC_RDMA_WRITE, IB_WC_WITH_IMM, IB_WC_SUCCESS, 0, 13, 0,
		  false },
		{ IB_WC_SEND, IB_WC_WITH_IMM, IB_WC_SUCCESS, 0, 15, 0, false },
		{ IB_WC_FETCH_ADD, 0, IB_WC_SUCCESS, 8, 0, 8, false },
		{ IB_WC_COMP_SWAP, 0, IB_WC_SUCCESS, 8, 0, 8, false },
		{ IB_WC_MASKED_FETCH_ADD, 0, IB_WC_SUCCESS, 8, 0, 8, false },
		{ IB_WC_MASKED_COMP_SWAP, 0, IB_WC_SUCCESS, 8, 0, 8, false },
	};
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_event ev;
	struct kevd *evd;
	unsigned int i;
	u32 nmore;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ib_wc wc = {
			.wr_id = i,
			.status = cases[i].status,
			.opcode = cases[i].op,
			.wc_flags = cases[i].flags,
			.byte_len = cases[i].byte_len,
			.ex.imm_data = cpu_to_be32(cases[i].imm),
			.vendor_err = 0x100 + i,
		};

		KUNIT_ASSERT_EQ(test, fake_cq_add(kevd_cq(evd), &wc), 0);
	}
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		u32 want_imm = 0, want_err;

		if (cases[i].want_imm)
			want_imm = cases[i].imm;
		memset(&ev, 0x5a, sizeof(ev));
		KUNIT_ASSERT_EQ(test, kevd_wait(evd, 60 * USEC_PER_SEC, 1, &ev,
						&nmore), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
		KUNIT_EXPECT_EQ_MSG(test, ev.dto.transferred_length,
				    cases[i].want_len, "case %u", i);
		KUNIT_EXPECT_EQ_MSG(test, ev.dto.has_imm, cases[i].want_imm,
				    "case %u", i);
		KUNIT_EXPECT_EQ_MSG(test, ev.dto.imm_data, want_imm,
				    "case %u", i);
		want_err = 0;
		if (cases[i].status != IB_WC_SUCCESS)
			want_err = 0x100 + i;
		KUNIT_EXPECT_EQ_MSG(test, ev.dto.vendor_err, want_err,
				    "case %u", i);
	}
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- a full ring must resume --------------------------------------------- */

struct stall_rec {
	struct kevd *evd;
	atomic_t delivered;
	atomic_t doorbells;
	atomic_t order_errors;
	u64 next;
};

static void stall_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct stall_rec *r = ctx;

	if (!ev) {
		atomic_inc(&r->doorbells);
		return;
	}
	if (ev->dto.cookie != r->next)
		atomic_inc(&r->order_errors);
	r->next = ev->dto.cookie + 1;
	atomic_inc(&r->delivered);
}

static const int stall_policies[] = {
	KEVD_UPCALL_SINGLE_INSTANCE, KEVD_UPCALL_NOTIFY, KEVD_UPCALL_MANY,
};

static void stall_desc(const int *p, char *desc)
{
	static const char * const names[] = {
		[KEVD_UPCALL_SINGLE_INSTANCE] = "single",
		[KEVD_UPCALL_NOTIFY] = "notify",
		[KEVD_UPCALL_MANY] = "many",
	};

	strscpy(desc, names[*p], KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(stall_policy, stall_policies, stall_desc);

/*
 * A DISABLEd DTO EVD fills its ring; the rest waits in the CQ. The
 * consumer enables upcalls with INVOC_NEW and more completions follow:
 * all of them must arrive, in order where the policy orders them.
 * Completions the full ring held back count as new arrivals.
 */
static void kevd_consumer_full_ring_resumes(struct kunit *test)
{
	const int policy = *(const int *)test->param_value;
	struct stall_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_upcall up = { stall_upcall, r };
	struct kevd_param p;
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd_attr attr;
	u32 qlen, extra = 16, more = 8, total, got = 0;
	unsigned long end;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.cq_depth = 256;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.upcall = up;
	r->evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r->evd);
	KUNIT_ASSERT_EQ(test, kevd_query(r->evd, &p), 0);
	qlen = p.qlen;
	total = qlen + extra + more;

	for (i = 0; i < qlen + extra; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(r->evd)), 0);
	KUNIT_ASSERT_TRUE(test, cons_wait_count(r->evd, qlen));
	KUNIT_EXPECT_EQ(test, fake_cq_count(kevd_cq(r->evd)), extra);

	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(r->evd, policy, NULL,
						 KEVD_UPCALL_INVOC_NEW), 0);
	for (i = 0; i < more; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(r->evd)), 0);

	if (policy != KEVD_UPCALL_NOTIFY) {
		KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->delivered, total));
	} else {
		/* The doorbell tells the consumer; it dequeues everything. */
		KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->doorbells, 1));
		end = jiffies + CONS_WAIT;
		while (got < total && time_before(jiffies, end)) {
			if (kevd_dequeue(r->evd, &ev)) {
				schedule_timeout_uninterruptible(1);
				continue;
			}
			KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)got);
			got++;
		}
		KUNIT_EXPECT_EQ(test, got, total);
	}
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(r->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_NEW), 0);
	if (policy == KEVD_UPCALL_SINGLE_INSTANCE)
		KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	if (policy != KEVD_UPCALL_NOTIFY)
		KUNIT_EXPECT_EQ(test, atomic_read(&r->delivered), (int)total);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(r->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(r->evd), 0);
	fake_hca_destroy(hca);
}

/* --- the waiter's threshold stays reachable ------------------------------ */

struct waiter {
	struct kevd *evd;
	u32 threshold;
	int rc;
	struct kevd_event ev;
	struct completion done;
};

static int waiter_fn(void *data)
{
	struct waiter *w = data;
	u32 nmore;

	w->rc = kevd_wait(w->evd, KEVD_TIMEOUT_INFINITE, w->threshold, &w->ev,
			  &nmore);
	complete(&w->done);
	return 0;
}

/*
 * A thread waits for qlen events; a resize below that threshold would
 * leave it waiting forever: it fails with -EBUSY, one at or above it
 * succeeds, and the waiter wakes when its threshold is met.
 */
static void kevd_consumer_resize_keeps_threshold(struct kunit *test)
{
	struct waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct task_struct *t;
	struct kevd_param p;
	unsigned long end;
	u32 qlen, i;

	KUNIT_ASSERT_NOT_NULL(test, w);
	init_completion(&w->done);
	w->evd = cons_create(test, 256, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			     NULL, NULL);
	KUNIT_ASSERT_EQ(test, kevd_query(w->evd, &p), 0);
	qlen = p.qlen;
	w->threshold = qlen;
	t = kthread_run(waiter_fn, w, "kevd_cons_waiter");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	end = jiffies + CONS_WAIT;
	while (!(cons_state(w->evd) & KEVD_STATE_WAITED) &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_TRUE(test, cons_state(w->evd) & KEVD_STATE_WAITED);

	KUNIT_EXPECT_EQ(test, kevd_resize(w->evd, 16), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_query(w->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, qlen);
	KUNIT_EXPECT_EQ(test, kevd_resize(w->evd, 2 * qlen), 0);

	for (i = 0; i < qlen; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_se(w->evd, (void *)(uintptr_t)i), 0);
	if (!wait_for_completion_timeout(&w->done, CONS_WAIT)) {
		KUNIT_FAIL(test, "the waiter did not wake at its threshold");
		kevd_set_unwaitable(w->evd, true);
		wait_for_completion(&w->done);
	}
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_PTR_EQ(test, w->ev.software.pointer, NULL);
	kevd_set_unwaitable(w->evd, true);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
}

/* --- overflow is never silent -------------------------------------------- */

/*
 * An EVD whose connection events overflow reports each drop to its async
 * EVD; when the async EVD itself is full, it drops the report, counts it
 * and enters the overflowed state too.
 */
static void kevd_consumer_async_overflow_counted(struct kunit *test)
{
	struct kevd_event ev = { .event_number = KEVD_CONNECTION_EVENT_BROKEN };
	struct kevd_param ap, p;
	struct kevd *aevd, *evd;
	u32 posted = 0, dropped = 0, i;

	aevd = cons_create(test, 1, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE, NULL,
			   NULL);
	evd = cons_create(test, 1, KEVD_CONNECTION_FLAG, KEVD_UPCALL_DISABLE,
			  NULL, aevd);
	KUNIT_ASSERT_EQ(test, kevd_query(aevd, &ap), 0);
	/* enough drops to fill the async EVD, headroom included, and more */
	for (i = 0; i < 4 * (ap.qlen + 16); i++) {
		if (kevd_post_event(evd, &ev))
			dropped++;
		else
			posted++;
	}
	KUNIT_ASSERT_GT(test, dropped, 0U);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_TRUE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.stats.drops, (u64)dropped);
	KUNIT_ASSERT_EQ(test, kevd_query(aevd, &ap), 0);
	KUNIT_EXPECT_TRUE(test, ap.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_GT(test, ap.stats.drops, 0ULL);
	KUNIT_EXPECT_EQ(test, ap.count + ap.stats.drops, (u64)dropped);
	KUNIT_EXPECT_EQ(test, p.count, posted);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
}

/* --- the seed pattern: disable in the upcall, drain in a thread ---------- */

#define SEED_PRODUCERS	3
#define SEED_SEQ_BITS	24

struct seed {
	struct kevd *evd;
	struct ib_cq *cq;		/* DTO variant: the producers' CQ */
	bool dto;
	u32 per_producer;
	u32 total;
	unsigned long *seen;
	spinlock_t lock;		/* the consumer's records */
	u32 next[SEED_PRODUCERS];
	u64 next_cookie;
	u32 got;
	bool disabled;			/* between DISABLE and re-enable */
	atomic_t while_disabled;	/* invocations that broke the rule */
	atomic_t dups;
	atomic_t order_errors;
	atomic_t bad;
	atomic_t modify_errors;
	atomic_t upcalls;
	atomic_t produced;
	struct completion wake;
};

/* One event, from the upcall or the draining thread. */
static void seed_record(struct seed *sd, const struct kevd_event *ev)
{
	unsigned long flags;
	u32 prod, seq, idx;

	spin_lock_irqsave(&sd->lock, flags);
	if (sd->dto) {
		if (ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
		    ev->dto.status != KEVD_DTO_SUCCESS) {
			atomic_inc(&sd->bad);
			goto out;
		}
		idx = ev->dto.cookie;
		if (ev->dto.cookie != sd->next_cookie)
			atomic_inc(&sd->order_errors);
		sd->next_cookie = ev->dto.cookie + 1;
	} else {
		unsigned long v = (unsigned long)ev->software.pointer;

		if (ev->event_number != KEVD_SOFTWARE_EVENT) {
			atomic_inc(&sd->bad);
			goto out;
		}
		prod = v >> SEED_SEQ_BITS;
		seq = v & (BIT(SEED_SEQ_BITS) - 1);
		if (prod >= SEED_PRODUCERS || seq >= sd->per_producer) {
			atomic_inc(&sd->bad);
			goto out;
		}
		if (seq != sd->next[prod])
			atomic_inc(&sd->order_errors);
		sd->next[prod] = seq + 1;
		idx = prod * sd->per_producer + seq;
	}
	if (idx >= sd->total || __test_and_set_bit(idx, sd->seen))
		atomic_inc(&sd->dups);
	else
		sd->got++;
out:
	spin_unlock_irqrestore(&sd->lock, flags);
}

static void seed_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct seed *sd = ctx;
	unsigned long flags;
	bool disabled;

	atomic_inc(&sd->upcalls);
	spin_lock_irqsave(&sd->lock, flags);
	disabled = sd->disabled;
	spin_unlock_irqrestore(&sd->lock, flags);
	if (disabled)
		atomic_inc(&sd->while_disabled);
	seed_record(sd, ev);
	/* The 2006 pattern: disable from the upcall, wake the thread. */
	if (kevd_modify_upcall(sd->evd, KEVD_UPCALL_DISABLE, NULL,
			       KEVD_UPCALL_INVOC_ANY))
		atomic_inc(&sd->modify_errors);
	spin_lock_irqsave(&sd->lock, flags);
	sd->disabled = true;
	spin_unlock_irqrestore(&sd->lock, flags);
	complete(&sd->wake);
}

struct seed_producer {
	struct seed *sd;
	u32 id;
};

static int seed_produce(void *data)
{
	struct seed_producer *sp = data;
	struct seed *sd = sp->sd;
	u32 seq = 0;

	while (seq < sd->per_producer && !kthread_should_stop()) {
		int ret;

		if (sd->dto) {
			if (fake_cq_count(sd->cq) > sd->cq->cqe / 2) {
				cond_resched();
				continue;
			}
			ret = fake_cq_add_seq(sd->cq);
		} else {
			ret = kevd_post_se(sd->evd, (void *)(((unsigned long)sp->id
						<< SEED_SEQ_BITS) | seq));
		}
		if (ret) {	/* full: the consumer is behind */
			cond_resched();
			continue;
		}
		seq++;
		atomic_inc(&sd->produced);
		if (!(seq & 63))
			cond_resched();
	}
	return 0;
}

/*
 * The scenario of the 2006 kDAPL thread: each upcall (SINGLE_INSTANCE)
 * disables upcalls and wakes the consumer's thread, which dequeues until
 * -EAGAIN and enables again. After DISABLE returns, no upcall may start
 * until the thread enables: the rest of the batch goes back to the EVD,
 * ahead of newer events. Every event arrives exactly once, in order per
 * producer; on the DTO stream the completions come straight from the CQ
 * (the direct path) and arrive in CQ order.
 */
static void kevd_consumer_seed_pattern(struct kunit *test)
{
	const bool dto = *(const bool *)test->param_value;
	struct seed *sd = kunit_kzalloc(test, sizeof(*sd), GFP_KERNEL);
	struct seed_producer sp[SEED_PRODUCERS];
	struct task_struct *t[SEED_PRODUCERS];
	struct fake_hca *hca = NULL;
	struct kevd_attr attr;
	struct kevd_event ev;
	unsigned long flags;
	unsigned int i, nprod = dto ? 1 : SEED_PRODUCERS;
	u32 got;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, sd);
	sd->dto = dto;
	sd->per_producer = num_online_cpus() > 1 ? 20000 : 5000;
	if (dto)
		sd->per_producer *= SEED_PRODUCERS;
	sd->total = sd->per_producer * nprod;
	sd->seen = kunit_kcalloc(test, BITS_TO_LONGS(sd->total),
				 sizeof(long), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, sd->seen);
	spin_lock_init(&sd->lock);
	init_completion(&sd->wake);

	kevd_attr_init(&attr);
	attr.qlen = 256;
	attr.flags = dto ? KEVD_DTO_FLAG : KEVD_SOFTWARE_FLAG;
	attr.cq_depth = 1024;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.upcall = (struct kevd_upcall){ seed_upcall, sd };
	if (dto) {
		hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	}
	sd->evd = kevd_create(dto ? fake_hca_ibdev(hca) : NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, sd->evd);
	sd->cq = kevd_cq(sd->evd);

	for (i = 0; i < nprod; i++) {
		sp[i] = (struct seed_producer){ sd, i };
		t[i] = kthread_run(seed_produce, &sp[i], "kevd_seed/%u", i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(t[i]));
		get_task_struct(t[i]);
	}

	/* The consumer's thread. */
	for (;;) {
		spin_lock_irqsave(&sd->lock, flags);
		got = sd->got;
		spin_unlock_irqrestore(&sd->lock, flags);
		if (got >= sd->total)
			break;
		if (!wait_for_completion_timeout(&sd->wake, CONS_WAIT)) {
			KUNIT_FAIL(test, "no upcall for 60 s: %u of %u events",
				   got, sd->total);
			break;
		}
		while (!kevd_dequeue(sd->evd, &ev))
			seed_record(sd, &ev);
		spin_lock_irqsave(&sd->lock, flags);
		sd->disabled = false;
		spin_unlock_irqrestore(&sd->lock, flags);
		ret = kevd_modify_upcall(sd->evd, KEVD_UPCALL_SINGLE_INSTANCE,
					 NULL, KEVD_UPCALL_INVOC_ANY);
		KUNIT_EXPECT_EQ(test, ret, 0);
	}
	for (i = 0; i < nprod; i++) {
		kthread_stop(t[i]);
		put_task_struct(t[i]);
	}
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(sd->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	kunit_info(test, "%s: %u events, %d upcalls, %d while disabled",
		   dto ? "dto" : "software", sd->total,
		   atomic_read(&sd->upcalls), atomic_read(&sd->while_disabled));
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->while_disabled), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->dups), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->bad), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->modify_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&sd->produced), (int)sd->total);
	KUNIT_EXPECT_EQ(test, sd->got, sd->total);
	KUNIT_EXPECT_TRUE(test, bitmap_full(sd->seen, sd->total));
	KUNIT_EXPECT_EQ(test, kevd_dequeue(sd->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(sd->evd), 0);
	if (hca)
		fake_hca_destroy(hca);
}

KEVD_TEST_BOOL_PARAM(seed_stream, "software", "dto_direct");

/* --- DISABLE from another thread while an upcall runs --------------------- */

#define EXT_FIRST	8	/* queued before the upcall blocks */
#define EXT_TOTAL	16

static const int ext_policies[] = {
	KEVD_UPCALL_SINGLE_INSTANCE, KEVD_UPCALL_MANY,
};

KUNIT_ARRAY_PARAM(ext_policy, ext_policies, stall_desc);

struct ext_disable {
	struct completion entered;
	struct completion release;
	atomic_t calls;
};

static void ext_disable_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct ext_disable *x = ctx;

	if (atomic_inc_return(&x->calls) > 1)
		return;
	complete(&x->entered);
	wait_for_completion(&x->release);
}

/* A software EVD whose first upcall blocks (ext_disable_upcall()). */
static struct kevd *ext_disable_evd(struct kunit *test, u32 qlen, int policy,
				    struct ext_disable **xp)
{
	struct ext_disable *x = kunit_kzalloc(test, sizeof(*x), GFP_KERNEL);
	struct kevd_upcall up = { ext_disable_upcall, x };

	KUNIT_ASSERT_NOT_NULL(test, x);
	init_completion(&x->entered);
	init_completion(&x->release);
	*xp = x;
	return cons_create(test, qlen, KEVD_SOFTWARE_FLAG, policy, &up, NULL);
}

/*
 * A thread disables upcalls while the first upcall of a batch runs (it
 * blocks), after newer events arrived behind the batch. The batch's other
 * events stay ahead of the newer ones: whatever the consumer dequeues,
 * while the upcall still runs and after it returned, comes in posting
 * order, each event once, and no second upcall starts.
 */
static void kevd_consumer_external_disable(struct kunit *test)
{
	const int policy = *(const int *)test->param_value;
	u32 got[EXT_TOTAL], n = 0, nmore, i;
	struct ext_disable *x;
	struct kevd_event ev;
	struct kevd *evd;
	int ret;

	evd = ext_disable_evd(test, 64, KEVD_UPCALL_DISABLE, &x);
	for (i = 0; i < EXT_FIRST; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, policy, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
	if (!wait_for_completion_timeout(&x->entered, CONS_WAIT)) {
		complete(&x->release);
		KUNIT_FAIL(test, "no upcall");
		goto out;
	}
	for (; i < EXT_TOTAL; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)i), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
	/* the upcall still runs: anything dequeued now must be event 1 on */
	while (n < EXT_TOTAL && !kevd_dequeue(evd, &ev))
		got[n++] = (uintptr_t)ev.software.pointer;
	complete(&x->release);
	while (n < EXT_TOTAL - 1) {
		ret = kevd_wait(evd, 60 * USEC_PER_SEC, 1, &ev, &nmore);
		if (ret) {
			KUNIT_FAIL(test, "kevd_wait: %d after %u events", ret, n);
			break;
		}
		got[n++] = (uintptr_t)ev.software.pointer;
	}
	KUNIT_EXPECT_EQ(test, n, EXT_TOTAL - 1);
	for (i = 0; i < n && got[i] == i + 1; i++)
		;
	KUNIT_EXPECT_EQ_MSG(test, i, n, "dequeue %u returned event %u", i,
			    i < n ? got[i] : 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, atomic_read(&x->calls), 1);
out:
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * A NOTIFY doorbell holds no event. The consumer it woke disables upcalls
 * before the doorbell's upcall returned (it blocks here) and drains: it
 * gets the queued events at once, by dequeue and by wait. Before, the
 * doorbell counted as a batch that may give events back, and both found
 * the EVD empty until the upcall returned; a consumer that then enabled
 * NOTIFY again with INVOC_NEW never heard of those events.
 */
static void kevd_consumer_doorbell_holds_nothing(struct kunit *test)
{
	struct ext_disable *x;
	struct kevd_event ev;
	struct kevd *evd;
	u32 nmore;

	evd = ext_disable_evd(test, 16, KEVD_UPCALL_NOTIFY, &x);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, (void *)1), 0);
	if (!wait_for_completion_timeout(&x->entered, CONS_WAIT)) {
		KUNIT_FAIL(test, "no doorbell");
		goto out;
	}
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, (void *)2), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE, NULL,
						 KEVD_UPCALL_INVOC_NEW), 0);
	/* the doorbell's upcall still runs */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)1);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)2);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
out:
	complete(&x->release);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&x->calls), 1);
}

/* Doorbells of two NOTIFY objects, and a SINGLE_INSTANCE upcall. */
struct bell_pair {
	struct kevd *evd;
	atomic_t a, b;
	atomic_t si_calls;
	struct kevd_upcall up_a;
	int rc;
};

static void bell_a_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct bell_pair *bp = ctx;

	atomic_inc(&bp->a);
}

static void bell_b_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct bell_pair *bp = ctx;

	atomic_inc(&bp->b);
}

/* The first SINGLE_INSTANCE upcall goes back to NOTIFY on object a. */
static void bell_si_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct bell_pair *bp = ctx;

	if (atomic_inc_return(&bp->si_calls) == 1)
		bp->rc = kevd_modify_upcall(bp->evd, KEVD_UPCALL_NOTIFY,
					    &bp->up_a, KEVD_UPCALL_INVOC_ANY);
}

/*
 * A change to NOTIFY with INVOC_ANY rings for the events queued then,
 * also when an earlier doorbell announced them: to a new object (a's
 * doorbell rang, then b replaces a), and after SINGLE_INSTANCE gave
 * events back (a rang once for three events, SINGLE_INSTANCE took them,
 * and its first upcall went back to NOTIFY on a: the other two are
 * queued).
 * A call that changes nothing rings nothing. Before, neither b nor a
 * rang again: the events sat queued, unannounced.
 */
static void bell_pair_free(void *ctx)
{
	struct bell_pair *bp = ctx;

	kevd_free(bp->evd);
}

static void kevd_consumer_notify_rings_queued(struct kunit *test)
{
	struct bell_pair *bp = kunit_kzalloc(test, sizeof(*bp), GFP_KERNEL);
	struct kevd_upcall up_b = { bell_b_upcall, NULL };
	struct kevd_upcall up_si = { bell_si_upcall, NULL };
	struct kevd_event ev;
	unsigned long i;

	KUNIT_ASSERT_NOT_NULL(test, bp);
	bp->up_a = (struct kevd_upcall){ bell_a_upcall, bp };
	up_b.ctx = bp;
	up_si.ctx = bp;
	bp->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			      NULL, NULL);
	/* a failed assertion frees it before @bp goes */
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, bell_pair_free,
							bp), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_NOTIFY,
						 &bp->up_a,
						 KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(bp->evd, (void *)1), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&bp->a, 1));

	/* a new object */
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_NOTIFY,
						 &up_b, KEVD_UPCALL_INVOC_ANY),
			0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&bp->b, 1));
	/* the same again: nothing new */
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_NOTIFY,
						 &up_b, KEVD_UPCALL_INVOC_ANY),
			0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&bp->a), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&bp->b), 1);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(bp->evd, &ev), 0);

	/* one doorbell for three, then SINGLE_INSTANCE gives two back */
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_DISABLE,
						 NULL, 0), 0);
	for (i = 1; i <= 3; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(bp->evd, (void *)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_NOTIFY,
						 &bp->up_a,
						 KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&bp->a, 2));
	kevd_test_flush_pollers(test);
	KUNIT_ASSERT_EQ(test, atomic_read(&bp->a), 2);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(bp->evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up_si, KEVD_UPCALL_INVOC_ANY),
			0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&bp->si_calls, 1));
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&bp->a, 3));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(bp->evd, KEVD_UPCALL_DISABLE,
						 NULL, 0), 0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, bp->rc, 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&bp->si_calls), 1);
	for (i = 2; i <= 3; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(bp->evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(bp->evd, &ev), -EAGAIN);
	kunit_remove_action(test, bell_pair_free, bp);
	KUNIT_EXPECT_EQ(test, kevd_free(bp->evd), 0);
}

/*
 * An EVD with the DTO and software streams on @hca's fake CQ (@qlen,
 * @cq_depth), upcalls @up under SINGLE_INSTANCE, INVOC_ANY.
 */
static struct kevd *si_evd(struct kunit *test, struct fake_hca *hca,
			   u32 qlen, u32 cq_depth, struct kevd_upcall up)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = cq_depth;
	attr.flags = KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.upcall = up;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/* si_evd() on a new fake HCA (*@hca), its upcall @up called with @ctx. */
static struct kevd *si_hca_evd(struct kunit *test, struct fake_hca **hca,
			       u32 qlen, u32 cq_depth, struct kevd_upcall up,
			       void *ctx)
{
	*hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *hca);
	up.ctx = ctx;
	return si_evd(test, *hca, qlen, cq_depth, up);
}

/* A SINGLE_INSTANCE upcall whose first invocation switches to NOTIFY. */
struct bell_switch {
	struct kevd *evd;
	bool inside;		/* the upcall switches; else the test thread */
	int flag;		/* of the switch to NOTIFY */
	struct completion entered;
	struct completion release;
	atomic_t calls;
	atomic_t doorbells;
	atomic_t errors;
	u64 first;
};

static void bell_switch_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct bell_switch *s = ctx;

	if (!ev) {
		atomic_inc(&s->doorbells);
		return;
	}
	if (atomic_inc_return(&s->calls) != 1)
		return;
	WRITE_ONCE(s->first, ev->dto.cookie);
	if (!s->inside) {
		complete(&s->entered);
		if (!wait_for_completion_timeout(&s->release, CONS_WAIT))
			atomic_inc(&s->errors);
	} else if (kevd_modify_upcall(s->evd, KEVD_UPCALL_NOTIFY, NULL,
				      s->flag)) {
		atomic_inc(&s->errors);
	}
}

/* Who switches to NOTIFY, and with which upcall flag. */
struct bell_switch_case {
	bool inside;
	int flag;
};

static const struct bell_switch_case bell_switch_cases[] = {
	{ true, KEVD_UPCALL_INVOC_ANY }, { false, KEVD_UPCALL_INVOC_ANY },
	{ true, KEVD_UPCALL_INVOC_NEW }, { false, KEVD_UPCALL_INVOC_NEW },
};

static void bell_switch_desc(const struct bell_switch_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s_%s",
		 c->inside ? "from_upcall" : "from_thread",
		 c->flag == KEVD_UPCALL_INVOC_NEW ? "new" : "any");
}

KUNIT_ARRAY_PARAM(bell_switch, bell_switch_cases, bell_switch_desc);

#define BELL_SWITCH_WCS	4

/*
 * SINGLE_INSTANCE takes a burst of completions straight from the CQ (the
 * ring is empty) and its first upcall runs; then the consumer switches to
 * NOTIFY, from that upcall or from a thread. The completions the batch did
 * not deliver go back to the EVD: they arrived, no doorbell was rung for
 * them, so NOTIFY rings, and the consumer dequeues them, with INVOC_NEW
 * as with INVOC_ANY: they arrived after the switch. Before, they entered
 * the ring at its head without counting as arrivals, and no doorbell came
 * until another completion did; then, with INVOC_NEW (the flag changed,
 * its gate closed at the switch), still none.
 */
static void kevd_consumer_notify_after_direct(struct kunit *test)
{
	struct bell_switch *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd *evd;
	u32 i;

	KUNIT_ASSERT_NOT_NULL(test, s);
	s->inside = ((const struct bell_switch_case *)test->param_value)->inside;
	s->flag = ((const struct bell_switch_case *)test->param_value)->flag;
	init_completion(&s->entered);
	init_completion(&s->release);
	evd = si_hca_evd(test, &hca, 16, 0,
			 (struct kevd_upcall){ bell_switch_upcall }, s);
	s->evd = evd;

	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd),
						    BELL_SWITCH_WCS),
			BELL_SWITCH_WCS);
	if (!s->inside) {
		if (!wait_for_completion_timeout(&s->entered, CONS_WAIT)) {
			KUNIT_FAIL(test, "no upcall");
			goto out;
		}
		KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_NOTIFY,
							 NULL, s->flag), 0);
		complete(&s->release);
	}
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&s->doorbells, 1));
	KUNIT_EXPECT_EQ(test, atomic_read(&s->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
	for (i = 1; i < BELL_SWITCH_WCS; i++) {
		if (kevd_dequeue(evd, &ev)) {
			KUNIT_FAIL(test, "completion %u not queued", i);
			break;
		}
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, READ_ONCE(s->first) + i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
out:
	complete(&s->release);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->errors), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * The calls without a return value take NULL as doing nothing: before,
 * kevd_total_stats(NULL) oopsed holding the lock of kevd's list of EVDs,
 * and the create and free after it never returned.
 */
static void kevd_consumer_null_stats_and_attr(struct kunit *test)
{
	struct kevd *evd;

	kevd_total_stats(NULL);
	kevd_attr_init(NULL);
	evd = cons_create(test, 8, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			  NULL, NULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* --- a give-back into a ring that producers filled ---------------------- */

#define GB_FIRST	4	/* the batch: fewer than the headroom */

struct giveback {
	struct kevd *evd;
	struct completion done;
	atomic_t calls;
	int posted;		/* connection events the upcall queued */
	int rc;
};

/*
 * The first upcall of a batch (MANY, or SINGLE_INSTANCE: both copy their
 * batch out of the ring) fills the whole ring, headroom included, with
 * connection events, then disables upcalls: the three events left in its
 * batch must go back ahead of them, the ring growing to take them.
 */
static void giveback_upcall(void *ctx, const struct kevd_event *ev,
			    bool more)
{
	struct kevd_event conn = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct giveback *g = ctx;

	if (atomic_inc_return(&g->calls) > 1)
		return;
	while (!kevd_post_event(g->evd, &conn))
		g->posted++;
	g->rc = kevd_modify_upcall(g->evd, KEVD_UPCALL_DISABLE, NULL,
				   KEVD_UPCALL_INVOC_ANY);
	complete(&g->done);
}

/*
 * Queue GB_FIRST software events (pointers 0 ..), then enable @policy:
 * its first batch takes them all (the poll budget is more).
 */
static void giveback_start(struct kunit *test, struct giveback *g,
			   int policy)
{
	int i;

	for (i = 0; i < GB_FIRST; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(g->evd, (void *)(uintptr_t)i),
				0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(g->evd, policy, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
}

static const int giveback_policies[] = {
	KEVD_UPCALL_SINGLE_INSTANCE, KEVD_UPCALL_MANY,
};

KUNIT_ARRAY_PARAM(giveback_policy, giveback_policies, stall_desc);

static void kevd_consumer_giveback_full_ring(struct kunit *test)
{
	const int policy = *(const int *)test->param_value;
	struct giveback *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	struct kevd_upcall up = { giveback_upcall, g };
	struct kevd_event ev;
	int i, n = 0;

	KUNIT_ASSERT_NOT_NULL(test, g);
	init_completion(&g->done);
	g->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG,
			     KEVD_UPCALL_DISABLE, &up, NULL);
	giveback_start(test, g, policy);
	KUNIT_ASSERT_GT_MSG(test, wait_for_completion_timeout(&g->done,
							      CONS_WAIT), 0UL,
			    "the give-back did not finish");
	KUNIT_EXPECT_EQ(test, g->rc, 0);
	KUNIT_EXPECT_GT(test, g->posted, 0);
	/* the rest of the batch first, in order, then the newer events */
	for (i = 1; i < GB_FIRST; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(g->evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_SOFTWARE_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
				    (void *)(uintptr_t)i);
	}
	while (!kevd_dequeue(g->evd, &ev)) {
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
		n++;
	}
	KUNIT_EXPECT_EQ(test, n, g->posted);
	KUNIT_EXPECT_EQ(test, atomic_read(&g->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(g->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(g->evd), 0);
}

#define HR_QLEN		24	/* with the headroom's 8: 32 slots */
#define HR_HEADROOM	8	/* api.rst: what the streams that cannot wait keep */

/*
 * The first upcall of a SINGLE_INSTANCE batch of GB_FIRST events fills
 * the queue length with software events, then disables upcalls: the rest
 * of its batch goes back ahead of them.
 */
static void headroom_upcall(void *ctx, const struct kevd_event *ev,
			    bool more)
{
	struct giveback *g = ctx;

	if (atomic_inc_return(&g->calls) > 1)
		return;
	while (!kevd_post_se(g->evd, (void *)(uintptr_t)(GB_FIRST +
							   g->posted)))
		g->posted++;
	g->rc = kevd_modify_upcall(g->evd, KEVD_UPCALL_DISABLE, NULL,
				   KEVD_UPCALL_INVOC_ANY);
	complete(&g->done);
}

/*
 * A give-back into a queue that software events filled: it must not take
 * the headroom, which connection events (they cannot wait) still find
 * whole. Before, the three events given back went into it, and the sixth
 * ESTABLISHED overflowed.
 */
static void kevd_consumer_giveback_spares_headroom(struct kunit *test)
{
	struct giveback *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	struct kevd_upcall up = { headroom_upcall, g };
	struct kevd_event conn = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct kevd_event ev;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, g);
	init_completion(&g->done);
	g->evd = cons_create(test, HR_QLEN,
			     KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG,
			     KEVD_UPCALL_DISABLE, &up, NULL);
	giveback_start(test, g, KEVD_UPCALL_SINGLE_INSTANCE);
	KUNIT_ASSERT_GT_MSG(test, wait_for_completion_timeout(&g->done,
							      CONS_WAIT), 0UL,
			    "the give-back did not finish");
	KUNIT_EXPECT_EQ(test, g->rc, 0);
	KUNIT_EXPECT_GE(test, g->posted, HR_QLEN);
	for (i = 0; i < HR_HEADROOM; i++)
		KUNIT_EXPECT_EQ_MSG(test, kevd_post_event(g->evd, &conn), 0,
				    "ESTABLISHED %d", i);
	KUNIT_EXPECT_FALSE(test, cons_state(g->evd) & KEVD_STATE_OVERFLOWED);
	/* the batch's rest, the software events, the connection events */
	for (i = 1; i < GB_FIRST + g->posted; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(g->evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_SOFTWARE_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
				    (void *)(uintptr_t)i);
	}
	for (i = 0; i < HR_HEADROOM; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(g->evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(g->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, atomic_read(&g->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(g->evd), 0);
}

/**
 * struct td_undo - an upcall that enables again as a TEARDOWN waits for it.
 * @x: its first invocation blocks until released (ext_disable_upcall()).
 * @evd: the EVD.
 * @disable_first: it disables before it enables.
 * @dis_rc: what its DISABLE returned.
 * @rc: what its enabling kevd_modify_upcall() returned.
 * @td_done: the TEARDOWN returned.
 * @td_rc: what it returned.
 */
struct td_undo {
	struct ext_disable x;
	struct kevd *evd;
	bool disable_first;
	struct completion td_done;
	int dis_rc, rc, td_rc;
};

static void td_undo_upcall(void *ctx, const struct kevd_event *ev,
			   bool more)
{
	struct td_undo *t = ctx;

	ext_disable_upcall(&t->x, ev, more);
	/* SINGLE_INSTANCE: no other invocation counts meanwhile */
	if (atomic_read(&t->x.calls) != 1)
		return;
	if (t->disable_first)
		t->dis_rc = kevd_modify_upcall(t->evd, KEVD_UPCALL_DISABLE,
					       NULL, KEVD_UPCALL_INVOC_ANY);
	t->rc = kevd_modify_upcall(t->evd, KEVD_UPCALL_SINGLE_INSTANCE, NULL,
				   KEVD_UPCALL_INVOC_ANY);
}

static int td_undo_fn(void *data)
{
	struct td_undo *t = data;

	t->td_rc = kevd_modify_upcall(t->evd, KEVD_UPCALL_TEARDOWN, NULL,
				      KEVD_UPCALL_INVOC_ANY);
	complete(&t->td_done);
	return 0;
}

KEVD_TEST_BOOL_PARAM(td_undo, "enable", "disable_enable");

/*
 * A TEARDOWN that returned 0 leaves the upcalls torn down: the upcall it
 * waits for enables them again (a pattern that disables on entry and
 * enables on exit) and is refused, also after a DISABLE of its own has
 * replaced the TEARDOWN's policy (param). Before, it succeeded, the
 * TEARDOWN returned 0 all the same, and the next event called the
 * upcall, whose context the consumer may have freed by then.
 */
static void kevd_consumer_teardown_not_undone(struct kunit *test)
{
	struct td_undo *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);
	struct kevd_upcall up = { td_undo_upcall, t };
	struct task_struct *task;
	struct kevd_event ev;
	struct kevd_param p;
	unsigned long end;

	KUNIT_ASSERT_NOT_NULL(test, t);
	t->disable_first = *(const bool *)test->param_value;
	init_completion(&t->x.entered);
	init_completion(&t->x.release);
	init_completion(&t->td_done);
	t->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_SINGLE_INSTANCE, &up, NULL);
	KUNIT_ASSERT_EQ(test, kevd_post_se(t->evd, (void *)1), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&t->x.entered,
							  CONS_WAIT), 0UL);
	task = kthread_run(td_undo_fn, t, "kevd_cons_td");
	if (IS_ERR(task))
		complete(&t->x.release);
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	/* the TEARDOWN has set its policy, and waits for the upcall */
	end = jiffies + CONS_WAIT;
	while (!kevd_query(t->evd, &p) &&
	       p.upcall_policy != KEVD_UPCALL_TEARDOWN &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	complete(&t->x.release);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&t->td_done,
							  CONS_WAIT), 0UL);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_TEARDOWN);
	KUNIT_EXPECT_EQ(test, t->td_rc, 0);
	KUNIT_EXPECT_EQ(test, t->dis_rc, 0);
	KUNIT_EXPECT_EQ(test, t->rc, -EBUSY);
	KUNIT_ASSERT_EQ(test, kevd_query(t->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.upcall_policy,
			t->disable_first ? KEVD_UPCALL_DISABLE :
					   KEVD_UPCALL_TEARDOWN);
	KUNIT_ASSERT_EQ(test, kevd_post_se(t->evd, (void *)2), 0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&t->x.calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(t->evd, &ev), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)2);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(t->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(t->evd), 0);
}

/**
 * struct irq_calls - the calls that sleep, made from a hard IRQ.
 * @timer: a hard hrtimer: its callback runs in hard IRQ context.
 * @evd: an idle EVD.
 * @done: the callback ran.
 * @teardown: what kevd_modify_upcall(TEARDOWN) returned there.
 * @resize: kevd_resize().
 * @wait: kevd_wait() with a timeout of 0.
 * @nmore: what that wait reported as queued.
 * @free: kevd_free().
 * @create: kevd_create()'s error, or 0 for an EVD.
 */
struct irq_calls {
	struct hrtimer timer;
	struct kevd *evd;
	struct completion done;
	int teardown, resize, wait, free, create;
	u32 nmore;
};

static enum hrtimer_restart irq_calls_fn(struct hrtimer *timer)
{
	struct irq_calls *c = container_of(timer, struct irq_calls, timer);
	struct kevd_event ev;
	struct kevd_attr attr;

	kevd_attr_init(&attr);
	attr.flags = KEVD_SOFTWARE_FLAG;
	c->create = PTR_ERR_OR_ZERO(kevd_create(NULL, &attr));
	c->teardown = kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN, NULL,
					 KEVD_UPCALL_INVOC_ANY);
	c->resize = kevd_resize(c->evd, 32);
	c->wait = kevd_wait(c->evd, 0, 1, &ev, &c->nmore);
	c->free = kevd_free(c->evd);
	complete(&c->done);
	return HRTIMER_NORESTART;
}

/*
 * The calls that sleep, from a hard IRQ: each refuses with -EINVAL and
 * changes nothing (might_sleep() would only warn, on debug kernels, and
 * a free or resize there could hang or BUG). Before, TEARDOWN returned 0
 * and the rest went on to sleep in atomic context.
 */
static void kevd_consumer_sleeping_calls_refuse_irq(struct kunit *test)
{
	struct irq_calls *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_param p;

	KUNIT_ASSERT_NOT_NULL(test, c);
	init_completion(&c->done);
	c->nmore = U32_MAX;
	c->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			     NULL, NULL);
	KUNIT_ASSERT_EQ(test, kevd_post_se(c->evd, (void *)1), 0);
	hrtimer_init(&c->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	c->timer.function = irq_calls_fn;
	hrtimer_start(&c->timer, ns_to_ktime(1000), HRTIMER_MODE_REL_HARD);
	KUNIT_EXPECT_GT(test, wait_for_completion_timeout(&c->done, CONS_WAIT),
			0UL);
	hrtimer_cancel(&c->timer);	/* before its memory can go */
	KUNIT_EXPECT_EQ(test, c->teardown, -EINVAL);
	KUNIT_EXPECT_EQ(test, c->resize, -EINVAL);
	KUNIT_EXPECT_EQ(test, c->wait, -EINVAL);
	KUNIT_EXPECT_EQ(test, c->nmore, 1U);	/* set on this -EINVAL too */
	KUNIT_EXPECT_EQ(test, c->free, -EINVAL);
	KUNIT_EXPECT_EQ(test, c->create, -EINVAL);
	/* nothing changed: the same policy, queue length and event */
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_DISABLE);
	KUNIT_EXPECT_LT(test, p.qlen, 32U);
	KUNIT_EXPECT_EQ(test, p.count, 1U);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
}

/* --- the count of a busy EVD ------------------------------------------- */

#define CHURN_QUERIES	50000	/* kevd_query() calls beside the churn */

static int churn_fn(void *data)
{
	struct kevd *evd = data;
	struct kevd_event ev;

	while (!kthread_should_stop()) {
		if (!kevd_post_se(evd, NULL))
			kevd_dequeue(evd, &ev);
		cond_resched();
	}
	return 0;
}

/*
 * The count kevd_query() reports never exceeds the queue length, while
 * another thread posts and dequeues as fast as it can. Before, the count
 * read prod, then head: an event posted and taken between the two loads
 * made it wrap to about 2^32 (on SMP; one CPU never interleaves them).
 */
static void kevd_consumer_count_never_wraps(struct kunit *test)
{
	struct kevd *evd = cons_create(test, 8, KEVD_SOFTWARE_FLAG,
				       KEVD_UPCALL_DISABLE, NULL, NULL);
	struct task_struct *t;
	struct kevd_param p;
	u32 i, bad = 0, worst = 0;

	t = kthread_run(churn_fn, evd, "kevd_cons_churn");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	for (i = 0; i < CHURN_QUERIES; i++) {
		if (kevd_query(evd, &p))
			break;
		if (p.count > p.qlen) {
			bad++;
			worst = max(worst, p.count);
		}
		if (!(i % 64))
			cond_resched();
	}
	kthread_stop(t);
	KUNIT_EXPECT_EQ(test, i, (u32)CHURN_QUERIES);
	KUNIT_EXPECT_EQ_MSG(test, bad, 0U, "largest count %u", worst);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* --- producers beside a SINGLE_INSTANCE upcall that blocks -------------- */

#define SI_HOLD_FIRST	4	/* events of the batch whose upcall blocks */
#define SI_HOLD_LAST	4	/* posted for the upcall while it blocks */
#define SI_HOLD_ROUNDS	4	/* post-and-dequeue rounds, in queue lengths */

/**
 * struct si_hold - a SINGLE_INSTANCE upcall that blocks on its first call.
 * @calls: invocations that returned.
 * @entered: the first one runs.
 * @release: it may return.
 * @seen: the pointer of each invocation's software event.
 */
struct si_hold {
	atomic_t calls;
	struct completion entered;
	struct completion release;
	unsigned long seen[SI_HOLD_FIRST + SI_HOLD_LAST];
};

static void si_hold_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct si_hold *h = ctx;
	int n = atomic_read(&h->calls);

	if (n < ARRAY_SIZE(h->seen))
		h->seen[n] = (unsigned long)ev->software.pointer;
	if (!n) {
		complete(&h->entered);
		wait_for_completion(&h->release);
	}
	atomic_inc(&h->calls);
}

static void si_hold_release(void *ctx)
{
	struct si_hold *h = ctx;

	complete_all(&h->release);
}

/*
 * While a SINGLE_INSTANCE upcall blocks, the events its batch took and
 * those other threads dequeue are off the queue: producers get their
 * room back at once. A consumer that posts and dequeues in a thread
 * while its upcall waits (here, the test thread) loses nothing: no
 * -ENOSPC for software events, no overflow of connection events, and
 * the batch and what was posted for the upcall are delivered in order.
 */
static void kevd_consumer_si_blocked_room(struct kunit *test)
{
	struct kevd_event conn = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct kevd_upcall up = { si_hold_upcall, NULL };
	struct kevd_event ev;
	struct kevd_param p;
	struct si_hold *h;
	struct kevd *evd;
	u32 i, qlen;
	int rc = 0;

	/* not the test's: a failed assertion leaves the upcall using it */
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, h);
	init_completion(&h->entered);
	init_completion(&h->release);
	/* the upcall returns also if an assertion ends the test */
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, si_hold_release,
							h), 0);
	up.ctx = h;
	evd = cons_create(test, 8, KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG,
			  KEVD_UPCALL_DISABLE, &up, NULL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	for (i = 0; i < SI_HOLD_FIRST; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)i),
				0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	/* bounded below the hung-task report */
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&h->entered,
							  20 * HZ), 0UL);
	KUNIT_EXPECT_EQ(test, cons_count(evd), 0U);

	/* the whole queue length for software events */
	for (i = 0; i < qlen && !rc; i++) {
		rc = kevd_post_se(evd, (void *)(uintptr_t)(100 + i));
		KUNIT_EXPECT_EQ_MSG(test, rc, 0, "post %u of %u", i + 1, qlen);
	}
	for (i = 0; i < qlen && !rc; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
				    (void *)(uintptr_t)(100 + i));
	}
	/* dequeued events give their slots back at once */
	for (i = 0; i < SI_HOLD_ROUNDS * qlen && !rc; i++) {
		rc = kevd_post_event(evd, &conn);
		KUNIT_EXPECT_EQ_MSG(test, rc, 0, "round %u", i);
		if (!rc) {
			KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
			KUNIT_EXPECT_EQ(test, ev.event_number,
					(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
		}
	}
	KUNIT_EXPECT_FALSE(test, cons_state(evd) & KEVD_STATE_OVERFLOWED);

	for (i = 0; i < SI_HOLD_LAST; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_se(evd,
						   (void *)(uintptr_t)(200 + i)),
				0);
	kunit_release_action(test, si_hold_release, h);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&h->calls,
						     ARRAY_SIZE(h->seen)));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&h->calls), (int)ARRAY_SIZE(h->seen));
	for (i = 0; i < SI_HOLD_FIRST; i++)
		KUNIT_EXPECT_EQ(test, h->seen[i], (unsigned long)i);
	for (i = 0; i < SI_HOLD_LAST; i++)
		KUNIT_EXPECT_EQ(test, h->seen[SI_HOLD_FIRST + i],
				(unsigned long)(200 + i));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	kfree(h);
}

/* --- documented promises (Documentation/kevd/api.rst) -------------------- */

/*
 * FIFO across streams, and every stream's payload comes back as posted:
 * software, connection (private data), CR and RMR bind events, interleaved.
 */
static void kevd_consumer_fifo_across_streams(struct kunit *test)
{
	static const char pdata[] = "private";
	struct kevd_event in[4] = { }, ev;
	struct kevd *evd;
	unsigned int i, round;

	evd = cons_create(test, 64, KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG |
			  KEVD_CR_FLAG | KEVD_RMR_BIND_FLAG,
			  KEVD_UPCALL_DISABLE, NULL, NULL);
	in[0].event_number = KEVD_CONNECTION_EVENT_ESTABLISHED;
	in[0].connection.private_data = pdata;
	in[0].connection.private_data_size = sizeof(pdata);
	in[1].event_number = KEVD_CONNECTION_REQUEST_EVENT;
	in[2].event_number = KEVD_RMR_BIND_COMPLETION_EVENT;
	in[2].rmr_bind.status = KEVD_DTO_ERR_RMR_OPERATION_FAILED;
	for (round = 0; round < 3; round++) {
		in[0].connection.ep = (void *)(uintptr_t)(0x100 + round);
		in[1].cr.sp = (void *)(uintptr_t)(0x200 + round);
		in[1].cr.cr = (void *)(uintptr_t)(0x300 + round);
		in[1].cr.conn_qual = 0x1234500000000ULL + round;
		in[2].rmr_bind.rmr = (void *)(uintptr_t)(0x400 + round);
		in[2].rmr_bind.cookie = 0xc00c1e0000000000ULL + round;
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)round), 0);
		for (i = 0; i < 3; i++)
			KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &in[i]), 0);
	}
	for (round = 0; round < 3; round++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_SOFTWARE_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
				    (void *)(uintptr_t)round);
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
		KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep,
				    (void *)(uintptr_t)(0x100 + round));
		KUNIT_EXPECT_PTR_EQ(test, ev.connection.private_data,
				    (const void *)pdata);
		KUNIT_EXPECT_EQ(test, ev.connection.private_data_size,
				(u32)sizeof(pdata));
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_CONNECTION_REQUEST_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.cr.sp, (void *)(uintptr_t)(0x200 + round));
		KUNIT_EXPECT_PTR_EQ(test, ev.cr.cr, (void *)(uintptr_t)(0x300 + round));
		KUNIT_EXPECT_EQ(test, ev.cr.conn_qual, 0x1234500000000ULL + round);
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_RMR_BIND_COMPLETION_EVENT);
		KUNIT_EXPECT_PTR_EQ(test, ev.rmr_bind.rmr,
				    (void *)(uintptr_t)(0x400 + round));
		KUNIT_EXPECT_EQ(test, ev.rmr_bind.cookie,
				0xc00c1e0000000000ULL + round);
		KUNIT_EXPECT_EQ(test, ev.rmr_bind.status,
				(u32)KEVD_DTO_ERR_RMR_OPERATION_FAILED);
		KUNIT_EXPECT_PTR_EQ(test, ev.evd, evd);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

#define HEADROOM	8

/*
 * The headroom: software events fill the queue length and no more; the
 * streams that cannot wait get 8 slots beyond it, then drop (OVERFLOWED,
 * counted). Events queue again as space frees; OVERFLOWED stays through
 * dequeues and ends with a resize.
 */
static void kevd_consumer_headroom_and_overflow(struct kunit *test)
{
	struct kevd_event conn = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct kevd_param p;
	struct kevd_event ev;
	struct kevd *evd;
	u32 i, qlen;

	evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG,
			  KEVD_UPCALL_DISABLE, NULL, NULL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	KUNIT_ASSERT_GE(test, qlen, 16U);
	for (i = 0; i < qlen; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, NULL), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, NULL), -ENOSPC);
	for (i = 0; i < HEADROOM; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, NULL), -ENOSPC);
	KUNIT_EXPECT_EQ(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &conn), -EOVERFLOW);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, qlen + HEADROOM);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 1ULL);
	KUNIT_EXPECT_NE(test, p.state & KEVD_STATE_OVERFLOWED, 0U);

	/* space frees: the headroom first, then the queue length */
	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, NULL), -ENOSPC);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &conn), 0);
	for (i = 0; i < HEADROOM + 1; i++)
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, NULL), 0);
	KUNIT_EXPECT_NE(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);
	while (!kevd_dequeue(evd, &ev))
		;
	KUNIT_EXPECT_NE(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 2 * qlen), 0);
	KUNIT_EXPECT_EQ(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

static void query_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
}

/*
 * kevd_query() reports what it promises: the upcall object, UNWAITABLE,
 * the CQ of a DTO EVD (none without the DTO stream), memory that covers
 * the ring and grows with it.
 */
static void kevd_consumer_query_fields(struct kunit *test)
{
	struct kevd_upcall up = { query_upcall, test };
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd *evd, *dto;
	size_t mem;

	evd = cons_create(test, 64, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			  &up, NULL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_PTR_EQ(test, p.upcall.func, up.func);
	KUNIT_EXPECT_PTR_EQ(test, p.upcall.ctx, up.ctx);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, (int)KEVD_UPCALL_DISABLE);
	KUNIT_EXPECT_EQ(test, p.flags, (u32)KEVD_SOFTWARE_FLAG);
	KUNIT_EXPECT_NULL(test, p.cq);
	KUNIT_EXPECT_EQ(test, p.state & KEVD_STATE_UNWAITABLE, 0U);
	KUNIT_EXPECT_GE(test, p.mem_bytes, p.qlen * sizeof(struct kevd_event));
	mem = p.mem_bytes;
	KUNIT_EXPECT_EQ(test, kevd_set_unwaitable(evd, true), 0);
	KUNIT_EXPECT_NE(test, cons_state(evd) & KEVD_STATE_UNWAITABLE, 0U);
	KUNIT_EXPECT_EQ(test, kevd_set_unwaitable(evd, false), 0);
	KUNIT_EXPECT_EQ(test, cons_state(evd) & KEVD_STATE_UNWAITABLE, 0U);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 1024), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.mem_bytes, mem + 900 * sizeof(struct kevd_event));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	dto = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dto);
	KUNIT_EXPECT_EQ(test, kevd_query(dto, &p), 0);
	KUNIT_EXPECT_NOT_NULL(test, p.cq);
	KUNIT_EXPECT_PTR_EQ(test, p.cq, kevd_cq(dto));
	KUNIT_EXPECT_EQ(test, kevd_free(dto), 0);
	fake_hca_destroy(hca);
}

static struct kevd_test_waiter *cons_waiter_new(struct kunit *test,
						u32 timeout_us, u32 threshold)
{
	struct kevd_test_waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, w);
	init_completion(&w->done);
	w->timeout_us = timeout_us;
	w->threshold = threshold;
	w->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			     NULL, NULL);
	return w;
}

/*
 * The waiter thread @t (a reference held) of @w returns @rc and leaves
 * its EVD un-waited; then it is stopped and put.
 */
static void cons_waiter_end(struct kunit *test, struct kevd_test_waiter *w,
			    struct task_struct *t, int rc)
{
	KUNIT_EXPECT_GT(test, wait_for_completion_timeout(&w->done, CONS_WAIT),
			0UL);
	kthread_stop(t);
	put_task_struct(t);
	KUNIT_EXPECT_EQ(test, w->rc, rc);
	KUNIT_EXPECT_EQ(test, cons_state(w->evd) & KEVD_STATE_WAITED, 0U);
}

/* A signal ends kevd_wait() with -ERESTARTSYS and leaves it un-waited. */
static void kevd_consumer_wait_signal(struct kunit *test)
{
	struct kevd_test_waiter *w =
		cons_waiter_new(test, KEVD_TIMEOUT_INFINITE, 1);
	unsigned long end = jiffies + CONS_WAIT;
	struct task_struct *t;

	t = kthread_run(kevd_test_waiter_fn, w, "kevd_cons_sig");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	get_task_struct(t);
	while (!(cons_state(w->evd) & KEVD_STATE_WAITED) &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_NE(test, cons_state(w->evd) & KEVD_STATE_WAITED, 0U);
	send_sig(SIGUSR1, t, 1);
	cons_waiter_end(test, w, t, -ERESTARTSYS);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
}

/*
 * kevd_set_unwaitable(true) cancels the current wait even when a call
 * with false follows before the waiter wakes: the waiter and this thread
 * share one CPU, and both calls are made without preemption between
 * them. Before, the waiter woke to a waitable EVD and slept on until its
 * timeout.
 */
static void kevd_consumer_unwaitable_cancels_current(struct kunit *test)
{
	struct kevd_test_waiter *w =
		cons_waiter_new(test, 10 * USEC_PER_SEC, 1);
	unsigned long end = jiffies + CONS_WAIT;
	struct task_struct *t;
	struct kevd_event ev;
	bool asleep;
	u32 nmore;
	int cpu;

	cpu = raw_smp_processor_id();
	KUNIT_ASSERT_EQ(test, set_cpus_allowed_ptr(current, cpumask_of(cpu)),
			0);
	t = kthread_create(kevd_test_waiter_fn, w, "kevd_cons_cancel");
	if (IS_ERR(t)) {
		set_cpus_allowed_ptr(current, cpu_possible_mask);
		KUNIT_FAIL(test, "kthread_create: %ld", PTR_ERR(t));
		return;
	}
	get_task_struct(t);
	kthread_bind(t, cpu);
	wake_up_process(t);
	do {
		asleep = (cons_state(w->evd) & KEVD_STATE_WAITED) &&
			 (READ_ONCE(t->__state) & TASK_INTERRUPTIBLE);
		if (!asleep)
			schedule_timeout_uninterruptible(1);
	} while (!asleep && time_before(jiffies, end));
	KUNIT_EXPECT_TRUE(test, asleep);
	preempt_disable();
	kevd_set_unwaitable(w->evd, true);
	kevd_set_unwaitable(w->evd, false);
	preempt_enable();
	set_cpus_allowed_ptr(current, cpu_possible_mask);
	cons_waiter_end(test, w, t, -ECANCELED);
	/* the EVD is waitable again */
	KUNIT_EXPECT_EQ(test, kevd_post_se(w->evd, (void *)1), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(w->evd, 0, 1, &ev, &nmore), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
}

/*
 * The timeout of kevd_wait() shrinks across wake-ups: woken again and
 * again (far more often than every 2 s) by an event that never makes the
 * threshold (it is taken again at once), a 2 s wait still times out.
 * Were the timeout restarted at each wake-up, it would wait as long as
 * the pokes go on; the 60 s bound only catches that.
 */
static void kevd_consumer_wait_timeout_shrinks(struct kunit *test)
{
	struct kevd_test_waiter *w =
		cons_waiter_new(test, 2 * USEC_PER_SEC, 2);
	unsigned long end = jiffies + CONS_WAIT;
	struct task_struct *t;
	struct kevd_event ev;
	int pokes = 0;

	t = kthread_run(kevd_test_waiter_fn, w, "kevd_cons_shrink");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	while (!completion_done(&w->done) && time_before(jiffies, end)) {
		if (!kevd_post_se(w->evd, NULL)) {
			pokes++;
			kevd_dequeue(w->evd, &ev);
		}
		usleep_range(200, 500);	/* the pace of the pokes */
	}
	KUNIT_EXPECT_TRUE_MSG(test, completion_done(&w->done),
			      "kevd_wait() never timed out while woken (%d pokes)",
			      pokes);
	if (!completion_done(&w->done)) {	/* release it, then stop it */
		kevd_set_unwaitable(w->evd, true);
		wait_for_completion(&w->done);
	}
	kthread_stop(t);
	KUNIT_EXPECT_EQ(test, w->rc, -ETIMEDOUT);
	kunit_info(test, "%d pokes while it waited", pokes);
	KUNIT_EXPECT_GT(test, pokes, 1);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
}

/*
 * kevd_post_ib_event(), from the table in api.rst keyed by ib_core's name
 * of each event type: every type the running kernel names is either an
 * error with its DAT event and handle, or refused (-EINVAL).
 */
static const struct {
	const char *msg;
	u32 dat;	/* 0: not an error, refused */
	char handle;	/* q: the QP's context, s: SRQ's, c: CQ's, d: device */
} cons_doc_ib_events[] = {
	{ "CQ error", KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, 'c' },
	{ "QP fatal error", KEVD_ASYNC_ERROR_EP_BROKEN, 'q' },
	{ "QP request error", KEVD_ASYNC_ERROR_EP_BROKEN, 'q' },
	{ "QP access error", KEVD_ASYNC_ERROR_EP_BROKEN, 'q' },
	{ "communication established", 0, 0 },
	{ "send queue drained", 0, 0 },
	{ "path migration successful", 0, 0 },
	{ "path migration error", KEVD_ASYNC_ERROR_EP_BROKEN, 'q' },
	{ "device fatal error", KEVD_ASYNC_ERROR_IA_CATASTROPHIC, 'd' },
	{ "port active", 0, 0 },
	{ "port error", 0, 0 },
	{ "LID change", 0, 0 },
	{ "P_key change", 0, 0 },
	{ "SM change", 0, 0 },
	{ "SRQ error", KEVD_ASYNC_ERROR_EP_BROKEN, 's' },
	{ "SRQ limit reached", 0, 0 },
	{ "last WQE reached", 0, 0 },
	{ "client reregister", 0, 0 },
	{ "GID changed", 0, 0 },
};

#define CONS_IB_EVENT_WALK	64	/* well past the last type */

static void kevd_consumer_ib_event_map(struct kunit *test)
{
	struct ib_elems {		/* the objects an event names */
		struct ib_qp qp;
		struct ib_srq srq;
		struct ib_cq cq;
	} *o = kunit_kzalloc(test, sizeof(*o), GFP_KERNEL);
	const char *unknown = ib_event_msg(-1);
	unsigned int type, i, known = 0;
	struct ib_event ibe = { };
	struct kevd_event ev;
	struct kevd *evd;
	const char *msg;
	void *handle;
	int rc;

	KUNIT_ASSERT_NOT_NULL(test, o);
	o->qp.qp_context = &o->qp;
	o->srq.srq_context = &o->srq;
	o->cq.cq_context = &o->cq;
	evd = cons_create(test, 64, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE, NULL,
			  NULL);
	ibe.device = (struct ib_device *)&known;	/* only compared */
	for (type = 0; type < CONS_IB_EVENT_WALK; type++) {
		msg = ib_event_msg(type);
		if (!strcmp(msg, unknown))
			continue;
		known++;
		for (i = 0; i < ARRAY_SIZE(cons_doc_ib_events); i++)
			if (!strcmp(msg, cons_doc_ib_events[i].msg))
				break;
		if (i == ARRAY_SIZE(cons_doc_ib_events)) {
			KUNIT_FAIL(test, "ib_event %u (%s): not documented",
				   type, msg);
			continue;
		}
		ibe.event = type;
		switch (cons_doc_ib_events[i].handle) {
		case 'q':
			ibe.element.qp = &o->qp;
			handle = &o->qp;
			break;
		case 's':
			ibe.element.srq = &o->srq;
			handle = &o->srq;
			break;
		case 'c':
			ibe.element.cq = &o->cq;
			handle = &o->cq;
			break;
		default:
			handle = ibe.device;
		}
		rc = kevd_post_ib_event(evd, &ibe);
		if (!cons_doc_ib_events[i].dat) {
			KUNIT_EXPECT_EQ_MSG(test, rc, -EINVAL, "%s", msg);
			continue;
		}
		KUNIT_EXPECT_EQ_MSG(test, rc, 0, "%s", msg);
		if (rc || kevd_dequeue(evd, &ev)) {
			KUNIT_FAIL(test, "%s: nothing queued", msg);
			continue;
		}
		KUNIT_EXPECT_EQ_MSG(test, ev.event_number,
				    cons_doc_ib_events[i].dat, "%s", msg);
		KUNIT_EXPECT_PTR_EQ_MSG(test, ev.async.handle, handle, "%s",
					msg);
		KUNIT_EXPECT_EQ_MSG(test, ev.async.reason, type, "%s", msg);
	}
	KUNIT_EXPECT_EQ(test, known, (unsigned int)ARRAY_SIZE(cons_doc_ib_events));
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/* --- what the consumer asks of the CQ reaches it ------------------------- */

struct cq_rec {
	atomic_t n;
	u32 ops[2];
	u32 vendor_err[2];
};

static void cq_rec_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct cq_rec *r = ctx;
	int i = atomic_read(&r->n);

	if (i < 2) {
		r->ops[i] = ev->dto.status == KEVD_DTO_SUCCESS ?
			    ev->dto.operation : U32_MAX;
		r->vendor_err[i] = ev->dto.vendor_err;
	}
	atomic_inc(&r->n);
}

/*
 * comp_vector chooses the CQ's vector; solicited_only arms for solicited
 * completions only (the fake HCA treats receives as solicited), so a send
 * completion alone raises no notification and the receive after it
 * raises one; a failed completion carries the provider's vendor_err.
 */
static void kevd_consumer_cq_attributes(struct kunit *test)
{
	struct cq_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .opcode = IB_WC_SEND };
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd *evd;

	KUNIT_ASSERT_NOT_NULL(test, r);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	KUNIT_ASSERT_GE(test, fake_hca_ibdev(hca)->num_comp_vectors, 4);
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = (struct kevd_upcall){ cq_rec_upcall, r };
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.comp_vector = 3;
	attr.solicited_only = true;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_EXPECT_EQ(test, fake_cq_comp_vector(kevd_cq(evd)), 3);

	KUNIT_ASSERT_EQ(test, fake_cq_add(kevd_cq(evd), &wc), 0);
	wc.opcode = IB_WC_RECV;
	wc.status = IB_WC_REM_ACCESS_ERR;
	wc.vendor_err = 0x5a5a;
	KUNIT_ASSERT_EQ(test, fake_cq_add(kevd_cq(evd), &wc), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 2));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 2);
	KUNIT_EXPECT_EQ(test, r->ops[0], (u32)KEVD_DTO_SEND);
	KUNIT_EXPECT_EQ(test, r->vendor_err[0], 0U);
	KUNIT_EXPECT_EQ(test, r->ops[1], U32_MAX);	/* the failed receive */
	KUNIT_EXPECT_EQ(test, r->vendor_err[1], 0x5a5aU);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.notifications, 1ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * comp_vector = KEVD_ANY spreads a device's CQs over its vectors, as
 * ib_core does: eight EVDs on four vectors use each twice. A vector
 * beyond the device's wraps; a negative one (not KEVD_ANY) is refused.
 */
static void kevd_consumer_vectors_spread(struct kunit *test)
{
	struct kevd **evds, *bad;
	struct fake_hca *hca;
	struct kevd_attr attr;
	int use[4] = { }, i, v;

	evds = kunit_kcalloc(test, 9, sizeof(*evds), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evds);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	KUNIT_ASSERT_EQ(test, fake_hca_ibdev(hca)->num_comp_vectors, 4);
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	for (i = 0; i < 8; i++) {
		evds[i] = kevd_create(fake_hca_ibdev(hca), &attr);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evds[i]);
		v = fake_cq_comp_vector(kevd_cq(evds[i]));
		KUNIT_ASSERT_TRUE(test, v >= 0 && v < 4);
		use[v]++;
	}
	for (v = 0; v < 4; v++)
		KUNIT_EXPECT_EQ_MSG(test, use[v], 2, "vector %d", v);
	attr.comp_vector = 6;
	evds[8] = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evds[8]);
	KUNIT_EXPECT_EQ(test, fake_cq_comp_vector(kevd_cq(evds[8])), 2);
	attr.comp_vector = -2;
	bad = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(bad), -EINVAL);
	if (!IS_ERR(bad))
		KUNIT_EXPECT_EQ(test, kevd_free(bad), 0);
	for (i = 0; i < 9; i++)
		KUNIT_EXPECT_EQ(test, kevd_free(evds[i]), 0);
	fake_hca_destroy(hca);
}

/* --- a DAT consumer that pulls, in batches ------------------------------ */

/**
 * struct pull_cons - a consumer thread on a DTO EVD with upcalls disabled.
 * @evd: the EVD.
 * @n: completions to take with kevd_wait_batch().
 * @taken: taken so far (cookies 0, 1, ... expected).
 * @order_errors: cookies out of order.
 * @rc: the first error, or 0.
 * @done: completed when it stops.
 */
struct pull_cons {
	struct kevd *evd;
	u32 n;
	u32 taken;
	u32 order_errors;
	int rc;
	struct completion done;
};

static int pull_cons_fn(void *data)
{
	struct pull_cons *c = data;
	struct kevd_event evs[4];
	u32 nmore;
	int r, i;

	while (c->taken < c->n) {
		r = kevd_wait_batch(c->evd, 30 * USEC_PER_SEC, 1, evs,
				    ARRAY_SIZE(evs), &nmore);
		if (r < 0) {
			c->rc = r;
			break;
		}
		for (i = 0; i < r; i++, c->taken++)
			if (evs[i].dto.cookie != c->taken)
				c->order_errors++;
	}
	complete(&c->done);
	return 0;
}

/*
 * What a DAT consumer does by default: upcalls disabled, a thread that
 * waits, here for up to four events per call, then dequeues in batches.
 * Every completion once and in CQ order; the consumer pulled the CQ
 * itself (stats.pulls: its first pull comes before it sleeps).
 */
static void kevd_consumer_pull_batches(struct kunit *test)
{
	struct kevd_event *evs;
	struct task_struct *t;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct pull_cons *c;
	struct kevd_param p;
	unsigned long end;
	u32 taken = 0;
	struct kevd *evd;
	int i, n;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	evs = kunit_kcalloc(test, 8, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, c && evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_IGNORE);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.cq_depth = 512;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);

	c->evd = evd;
	c->n = 300;
	init_completion(&c->done);
	t = kthread_run(pull_cons_fn, c, "kevd_cons_pull");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(evd));
	for (i = 0; i < 300; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&c->done, CONS_WAIT),
			0);
	KUNIT_EXPECT_EQ(test, c->rc, 0);
	KUNIT_EXPECT_EQ(test, c->taken, 300U);
	KUNIT_EXPECT_EQ(test, c->order_errors, 0U);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.stats.pulls, 1ULL);

	/* the same consumer, now dequeuing: the rest in batches of 8 */
	for (i = 0; i < 100; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	end = jiffies + CONS_WAIT;
	while (taken < 100 && time_before(jiffies, end)) {
		n = kevd_dequeue_batch(evd, evs, 8);
		if (n == -EAGAIN) {	/* a poller held the EVD just then */
			cond_resched();
			continue;
		}
		KUNIT_ASSERT_GT(test, n, 0);
		for (i = 0; i < n; i++, taken++)
			KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, (u64)taken + 300);
	}
	KUNIT_EXPECT_EQ(test, taken, 100U);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 8), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], 400ULL);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(kevd_cq(evd)));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- CQ moderation ---------------------------------------------------- */

static const enum fake_hca_mode mod_modes[] = {
	FAKE_HCA_LENIENT_REPORT, FAKE_HCA_LENIENT_IGNORE,
	FAKE_HCA_STRICT_REPORT, FAKE_HCA_STRICT_IGNORE,
};

static void mod_mode_desc(const enum fake_hca_mode *m, char *desc)
{
	strscpy(desc, fake_hca_mode_name(*m), KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(mod_mode, mod_modes, mod_mode_desc);

/* A DTO EVD with upcalls disabled on @hca, its CQ @cq_depth deep (0: qlen). */
static struct kevd *cq_evd_flags(struct kunit *test, struct fake_hca *hca,
				 u32 qlen, u32 cq_depth, u32 flags)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = cq_depth;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

static struct kevd *cq_evd(struct kunit *test, struct fake_hca *hca, u32 qlen,
			   u32 cq_depth)
{
	return cq_evd_flags(test, hca, qlen, cq_depth, KEVD_DTO_FLAG);
}

/* The same, 256 and 256. */
static struct kevd *mod_evd(struct kunit *test, struct fake_hca *hca)
{
	return cq_evd(test, hca, 256, 256);
}

/*
 * A queue length that fits the device's CQs but rounds up beyond them
 * (rxe: 32767 entries, a queue length of 20000) makes an EVD: its CQ is
 * as deep as the device allows, and holds what the consumer asked for.
 * A resize the device cannot hold fails with its error and keeps every
 * event.
 */
static void kevd_consumer_cq_depth_max(struct kunit *test)
{
	struct fake_hca *hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	struct kevd_event ev;
	struct kevd_param p;
	unsigned long end;
	struct kevd *evd;
	u32 i, nmore;
	int ret;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	fake_hca_set_max_cqe(hca, 24);
	evd = cq_evd(test, hca, 20, 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.qlen, 20U);
	for (i = 0; i < 20; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(evd), i), 0);
	/*
	 * 24 may be below the queue length the EVD rounded 20 up to: while a
	 * poller's pass holds room for completions it moves, that shrink is
	 * -EBUSY (api.rst), and succeeds when tried again.
	 */
	end = jiffies + CONS_WAIT;
	while ((ret = kevd_resize(evd, 24)) == -EBUSY &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_EQ(test, ret, 0);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 40), -EINVAL);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.qlen, 24U);
	/* a wait, not a dequeue: a poller's pass may hold them a moment */
	for (i = 0; i < 20; i++) {
		KUNIT_ASSERT_EQ(test, kevd_wait(evd, 60 * USEC_PER_SEC, 1, &ev,
						&nmore), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A CQ the provider moderates (a count of completions per notification,
 * or a period after the first) holds notifications back, never
 * completions: a waiter still gets every completion once, in order, on
 * all four notify behaviours, also when fewer than the count come and
 * only the period releases them.
 */
static void kevd_consumer_moderated_cq(struct kunit *test)
{
	const enum fake_hca_mode *m = test->param_value;
	struct task_struct *t;
	struct fake_hca *hca;
	struct pull_cons *c;
	u16 count, period;
	struct kevd *evd;
	int i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	hca = fake_hca_create(*m);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = mod_evd(test, hca);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(evd), 16, 50), 0);
	fake_cq_moderation(kevd_cq(evd), &count, &period);
	KUNIT_ASSERT_EQ(test, count, (u16)16);
	KUNIT_ASSERT_EQ(test, period, (u16)50);
	c->evd = evd;
	c->n = 29 * 7 + 1;
	init_completion(&c->done);
	t = kthread_run(pull_cons_fn, c, "kevd_cons_mod");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(evd));
	/* 7 at a time (under the count), then one more: the period must */
	for (i = 0; i < 29; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 7), 7);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&c->done, CONS_WAIT),
			0);
	KUNIT_EXPECT_EQ(test, c->rc, 0);
	KUNIT_EXPECT_EQ(test, c->taken, 29U * 7 + 1);
	KUNIT_EXPECT_EQ(test, c->order_errors, 0U);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(kevd_cq(evd)));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* ib_core's profiles (drivers/infiniband/core/cq.c): comps, usec. */
static const u16 dim_profiles[][2] = {
	{ 1, 1 }, { 4, 1 }, { 4, 2 }, { 8, 2 }, { 8, 4 }, { 8, 16 },
	{ 16, 16 }, { 16, 32 }, { 32, 32 },
};

#define DIM_WINDOW	128	/* passes of one kind; lib/dim samples 64 */

/*
 * A window of passes that each take @per completions: added in one burst,
 * taken with kevd_dequeue_batch() (a pull, or a poller's pass). Returns
 * the completions taken in CQ order from *@next on.
 */
static u32 dim_window(struct kevd *evd, struct kevd_event *evs, u32 per,
		      u64 *next)
{
	unsigned long end = jiffies + CONS_WAIT;
	u32 i, got, taken = 0;
	int n, k;

	for (i = 0; i < DIM_WINDOW; i++) {
		if (fake_cq_add_seq_burst(kevd_cq(evd), per) != per)
			return taken;
		for (got = 0; got < per && time_before(jiffies, end);) {
			n = kevd_dequeue_batch(evd, evs, per - got);
			if (n == -EAGAIN) {	/* a poller has them */
				cond_resched();
				continue;
			}
			if (n < 0)
				return taken;
			for (k = 0; k < n; k++)
				if (evs[k].dto.cookie == (*next)++)
					taken++;
			got += n;
		}
	}
	return taken;
}

/*
 * Pairs of windows (passes of 1 completion, then of 64) until kevd
 * reports a moderation or @max_pairs ran; every completion must arrive
 * once and in CQ order. Return: stats.moderations.
 */
static u64 dim_traffic(struct kunit *test, struct kevd *evd, u32 max_pairs)
{
	u64 next = 0, taken = 0, added = 0;
	struct kevd_event *evs;
	struct kevd_param p;
	u32 pair;

	evs = kunit_kcalloc(test, 64, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	for (pair = 0; pair < max_pairs; pair++) {
		taken += dim_window(evd, evs, 1, &next);
		taken += dim_window(evd, evs, 64, &next);
		added += DIM_WINDOW * (1 + 64);
		KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
		if (p.stats.moderations)
			break;
		cond_resched();
	}
	/* every completion once, in CQ order */
	KUNIT_EXPECT_EQ(test, next, added);
	KUNIT_EXPECT_EQ(test, taken, next);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], next);
	kunit_kfree(test, evs);
	return p.stats.moderations;
}

#define CQ_DIM_PARAM	"/sys/module/kevd/parameters/cq_dim"

/*
 * cq_dim=1, as an administrator sets it: the consumer's pulls and the
 * pollers' passes reach lib/dim, which moves through ib_core's profiles
 * as the load changes (passes of one completion, then of 64, in turn);
 * what the provider is asked for is one of those profiles, and kevd
 * counts each in stats.moderations. Nothing is lost or reordered.
 */
static void kevd_consumer_cq_dim_moderates(struct kunit *test)
{
	struct fake_cq_stats st;
	struct fake_hca *hca;
	u16 count, period;
	u64 moderations;
	struct kevd *evd;
	int i;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	KUNIT_ASSERT_EQ(test, kevd_test_sh("echo 1 > " CQ_DIM_PARAM), 0);
	evd = mod_evd(test, hca);
	KUNIT_EXPECT_EQ(test, kevd_test_sh("echo 0 > " CQ_DIM_PARAM), 0);
	moderations = dim_traffic(test, evd, 500);
	KUNIT_EXPECT_GT(test, moderations, 0ULL);
	/* read after: a profile change may be in flight, never undone */
	fake_cq_stats(kevd_cq(evd), &st);
	KUNIT_EXPECT_GE(test, st.modifies, moderations);
	fake_cq_moderation(kevd_cq(evd), &count, &period);
	for (i = 0; i < ARRAY_SIZE(dim_profiles); i++)
		if (dim_profiles[i][0] == count && dim_profiles[i][1] == period)
			break;
	KUNIT_EXPECT_LT_MSG(test, i, (int)ARRAY_SIZE(dim_profiles),
			    "count %u period %u is no profile", count, period);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);	/* cancels a change */
	fake_hca_destroy(hca);
}

/*
 * No moderation unless asked for (cq_dim=0, the default), and none on a
 * provider without modify_cq (rxe, siw): the same traffic leaves the CQ
 * as it was.
 */
static void kevd_consumer_cq_dim_off(struct kunit *test)
{
	struct fake_cq_stats st;
	struct fake_hca *hca;
	struct kevd *evd;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = mod_evd(test, hca);
	KUNIT_EXPECT_EQ(test, dim_traffic(test, evd, 4), 0ULL);
	fake_cq_stats(kevd_cq(evd), &st);
	KUNIT_EXPECT_EQ(test, st.modifies, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	fake_hca_set_no_modify(hca);
	KUNIT_ASSERT_EQ(test, kevd_test_sh("echo 1 > " CQ_DIM_PARAM), 0);
	evd = mod_evd(test, hca);
	KUNIT_EXPECT_EQ(test, kevd_test_sh("echo 0 > " CQ_DIM_PARAM), 0);
	KUNIT_EXPECT_EQ(test, dim_traffic(test, evd, 4), 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* An upcall that counts completions and checks their cookies' order. */
struct arm_rec {
	atomic_t n;
	atomic_t order_errors;
	u64 next;
};

static void arm_rec_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct arm_rec *r = ctx;

	if (ev->dto.cookie != r->next)
		atomic_inc(&r->order_errors);
	r->next = ev->dto.cookie + 1;
	atomic_inc(&r->n);
}

/* A DTO EVD on @hca whose SINGLE_INSTANCE upcall records into @r. */
static struct kevd *arm_rec_evd(struct kunit *test, struct fake_hca *hca,
				struct arm_rec *r, int cpu)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = (struct kevd_upcall){ arm_rec_upcall, r };
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.cpu = cpu;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/*
 * A provider whose arms fail (ib_req_notify_cq() < 0) notifies nothing:
 * kevd polls its CQ until an arm works again. Every completion arrives.
 */
static void kevd_consumer_arm_failure(struct kunit *test)
{
	struct arm_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct fake_hca *hca;
	struct kevd *evd;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = arm_rec_evd(test, hca, r, KEVD_ANY);
	fake_cq_fail_arms(kevd_cq(evd), -EIO);
	for (i = 0; i < 40; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 40));
	fake_cq_fail_arms(kevd_cq(evd), 0);
	for (i = 0; i < 20; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 60));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 60);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* A software EVD whose upcall signals: it tells when its poller got there. */
struct poller_mark {
	struct completion done;
	struct kevd *evd;
};

static void poller_mark_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	complete(&((struct poller_mark *)ctx)->done);
}

/* @m's EVD: software events, SINGLE_INSTANCE, on the poller of CPU 0. */
static void poller_mark_create(struct kunit *test, struct poller_mark *m)
{
	struct kevd_attr attr;

	init_completion(&m->done);
	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = (struct kevd_upcall){ poller_mark_upcall, m };
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.cpu = 0;
	m->evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, m->evd);
}

/* Everything queued before on @m's poller has had its pass. */
static bool poller_mark_pass(struct kunit *test, struct poller_mark *m)
{
	reinit_completion(&m->done);
	KUNIT_ASSERT_EQ(test, kevd_post_se(m->evd, NULL), 0);
	return wait_for_completion_timeout(&m->done, CONS_WAIT) > 0;
}

/*
 * Until @cq is armed again (bounded). Once nothing adds to it, an armed
 * CQ is the end of the passes over it: a pass arms last and lets go.
 */
static bool cq_wait_armed(struct ib_cq *cq)
{
	unsigned long end = jiffies + CONS_WAIT;

	while (!fake_cq_armed(cq)) {
		if (time_after(jiffies, end))
			return false;
		cond_resched();
	}
	return true;
}

/*
 * A provider whose polls fail (a CQ in error): the poller does not poll
 * that CQ without end. It arms it (without asking for missed events) and
 * then polls it no more: two passes of a poller over another EVD add no
 * poll. Once polls work the next notification brings every completion,
 * once, in order.
 */
static void kevd_consumer_poll_failure(struct kunit *test)
{
	struct arm_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct poller_mark *m = kunit_kzalloc(test, sizeof(*m), GFP_KERNEL);
	struct fake_cq_stats st1, st2;
	struct fake_hca *hca;
	struct kevd *evd;

	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_NOT_NULL(test, m);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	poller_mark_create(test, m);
	evd = arm_rec_evd(test, hca, r, 0);

	fake_cq_fail_polls(kevd_cq(evd), -EIO);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 8), 8);
	/*
	 * Wait for the arm, not for passes over the other EVD: a poller
	 * about to run an upcall it timed as slow (the marker's, under TCG)
	 * hands what it has queued to the next poller, so a marker's pass
	 * need not follow this EVD's defer_arm pass. One burst brings one
	 * notification, before any pass: the pass that arms is the last.
	 * (Completions added one by one could each notify after a pass had
	 * armed again: the fake calls the handler after it disarms.)
	 */
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(evd)));
	fake_cq_stats(kevd_cq(evd), &st1);
	KUNIT_EXPECT_GT(test, st1.polls, 0);
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	fake_cq_stats(kevd_cq(evd), &st2);
	KUNIT_EXPECT_EQ(test, st2.polls, st1.polls);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 0);

	fake_cq_fail_polls(kevd_cq(evd), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 9));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 9);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(m->evd), 0);
	fake_hca_destroy(hca);
}

/*
 * The check after an arm fails once (poll_once_hook()): the poll after
 * the arm that @arms counted fails, the next one works again.
 */
struct poll_once {
	u64 arms;
	atomic_t stage;		/* 0: before the check, 1: failed, 2: after */
	atomic_t injected;
};

static void poll_once_hook(struct ib_cq *cq, void *ctx)
{
	struct poll_once *o = ctx;
	struct fake_cq_stats st;

	if (atomic_read(&o->stage) == 1) {
		fake_cq_fail_polls(cq, 0);
		atomic_set(&o->stage, 2);
		return;
	}
	fake_cq_stats(cq, &st);
	if (!atomic_read(&o->stage) && st.arms > o->arms) {
		fake_cq_fail_polls(cq, -EIO);
		atomic_set(&o->stage, 1);
	}
}

/* A completion in the window of the next arm, once. */
static void poll_once_inject(struct ib_cq *cq, void *ctx)
{
	struct poll_once *o = ctx;

	if (!atomic_xchg(&o->injected, 1))
		fake_cq_add_seq(cq);
}

/*
 * A poll that failed once does not count once polls work again. The
 * check after an arm fails; the next completion's notification brings it
 * (polls work). When that EVD is idle again, a completion lands just
 * before the arm: on a strict provider only the check finds it, so the
 * arm must ask for missed events and check as usual.
 */
static void kevd_consumer_poll_failure_passes(struct kunit *test)
{
	const enum fake_hca_mode *mode = test->param_value;
	struct arm_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct poll_once *o = kunit_kzalloc(test, sizeof(*o), GFP_KERNEL);
	struct fake_cq_stats st;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;

	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_NOT_NULL(test, o);
	hca = fake_hca_create(*mode);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = arm_rec_evd(test, hca, r, KEVD_ANY);
	cq = kevd_cq(evd);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(cq));
	fake_cq_stats(cq, &st);
	o->arms = st.arms;
	fake_cq_set_poll_hook(cq, poll_once_hook, o);

	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 1));
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&o->stage, 1));
	KUNIT_EXPECT_TRUE(test, cq_wait_armed(cq));

	fake_cq_set_arm_hook(cq, poll_once_inject, o);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count_for(&r->n, 3, 20 * HZ));
	KUNIT_EXPECT_EQ(test, atomic_read(&o->injected), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&o->stage), 2);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	fake_cq_set_arm_hook(cq, NULL, NULL);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 3);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(cq));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A wait that polls (timeout 0) for a threshold that the CQ holds, more
 * than a poll budget (64) beyond what the ring holds, takes them: the
 * waiter's pull moves what the threshold needs. The consumer pulled
 * before, so the poller's pass over the burst moved one budget into the
 * ring and left the rest in the CQ for it (kevd_pass_hand_back()).
 */
static void kevd_consumer_wait_poll_threshold(struct kunit *test)
{
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_event ev;
	struct kevd *evd;
	u32 nmore = 0, i;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 256;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cpu = 0;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 200), 200);
	/* the pass may run on either poller: no poller owns the EVD after */
	kevd_test_flush_pollers(test);

	KUNIT_ASSERT_EQ(test, kevd_wait(evd, 0, 200, &ev, &nmore), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 0ULL);
	KUNIT_EXPECT_EQ(test, nmore, 199U);
	for (i = 1; i < 200; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- a busy puller does not arm ---------------------------------------- */

/* Hold the CQ's notifications back: moderation by a count never reached. */
static void pull_mute(struct kunit *test, struct ib_cq *cq, bool mute)
{
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(cq, mute ? U16_MAX : 0, 0),
			0);
}

static u64 pull_arms(struct ib_cq *cq)
{
	struct fake_cq_stats st;

	fake_cq_stats(cq, &st);
	return st.arms;
}

/*
 * Until a dequeue of this thread pulls and finds the EVD idle: nothing
 * queued, the CQ armed, no poller on it (the pull owned it). False if the
 * bound runs out.
 */
static bool pull_idle(struct kevd *evd)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct kevd_event ev;
	struct kevd_param p;
	u64 pulls;

	for (;;) {
		if (kevd_query(evd, &p))
			return false;
		pulls = p.stats.pulls;
		if (kevd_dequeue(evd, &ev) == -EAGAIN &&
		    !kevd_query(evd, &p) && p.stats.pulls > pulls &&
		    fake_cq_armed(kevd_cq(evd)))
			return true;
		if (time_after(jiffies, end))
			return false;
		cond_resched();
	}
}

/*
 * Take @n events with call @kind (0: kevd_dequeue_batch(), 1:
 * kevd_wait_batch() that polls, 2: kevd_dequeue(), 3: kevd_wait() that
 * polls), again while a poller holds the EVD. False if the bound runs
 * out.
 */
static bool pull_take(struct kevd *evd, int kind, struct kevd_event *evs,
		      u32 n)
{
	unsigned long end = jiffies + CONS_WAIT;
	u32 got = 0, nmore;
	int ret;

	while (got < n) {
		switch (kind) {
		case 0:
			ret = kevd_dequeue_batch(evd, evs + got, n - got);
			break;
		case 1:
			ret = kevd_wait_batch(evd, 0, 1, evs + got, n - got,
					      &nmore);
			break;
		case 2:
			ret = kevd_dequeue(evd, evs + got) ?: 1;
			break;
		default:
			ret = kevd_wait(evd, 0, 1, evs + got, &nmore) ?: 1;
			break;
		}
		if (ret > 0) {
			got += ret;
			continue;
		}
		if (time_after(jiffies, end))
			return false;
		cond_resched();
	}
	return true;
}

/*
 * A consumer that keeps finding completions takes no notification per
 * call: every call that pulled work lets go without arming the CQ (its
 * caller comes back for more), with each of the four calls. The first
 * call that finds the CQ empty arms it, once, so that the idle EVD
 * sleeps covered: a completion then reaches the ring with no call at
 * all. The CQ's notifications are held back while the consumer takes
 * (moderation), so that only its calls move completions.
 */
static void kevd_consumer_pull_busy_no_arm(struct kunit *test)
{
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct ib_cq *cq;
	struct kevd *evd;
	u64 arms, next = 0;
	int i, j;

	evs = kunit_kcalloc(test, 8, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = mod_evd(test, hca);
	cq = kevd_cq(evd);
	pull_mute(test, cq, true);
	KUNIT_ASSERT_TRUE(test, pull_idle(evd));
	arms = pull_arms(cq);
	for (i = 0; i < 40; i++) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 8), 8);
		KUNIT_ASSERT_TRUE(test, pull_take(evd, i % 4, evs, 8));
		for (j = 0; j < 8; j++)
			KUNIT_EXPECT_EQ(test, evs[j].dto.cookie, next++);
	}
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms);

	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, evs), -EAGAIN);
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms + 1);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	pull_mute(test, cq, false);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_EXPECT_TRUE(test, cons_wait_count(evd, 1));
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, evs), 0);
	KUNIT_EXPECT_EQ(test, evs[0].dto.cookie, next);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A muted consumer (notifications held back as above) of an EVD with a
 * ring of @qlen, on the poller of CPU 0, takes @total completions (a
 * multiple of 8) through its own pulls, 8 per call, in order. No poller
 * pass, so no arm, until the dequeue that finds the EVD empty: that one
 * arms. Two passes of the same poller over another EVD give a pass, had
 * one been queued, time to arm.
 */
static void pull_no_poller(struct kunit *test, u32 qlen, u32 total)
{
	struct poller_mark *m = kunit_kzalloc(test, sizeof(*m), GFP_KERNEL);
	struct kevd_event *evs;
	struct kevd_attr attr;
	struct fake_hca *hca;
	struct ib_cq *cq;
	struct kevd *evd;
	u64 arms, next = 0;
	u32 i, j;

	evs = kunit_kcalloc(test, 8, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, m && evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	poller_mark_create(test, m);
	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = 256;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cpu = 0;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	cq = kevd_cq(evd);
	pull_mute(test, cq, true);
	KUNIT_ASSERT_TRUE(test, pull_idle(evd));
	arms = pull_arms(cq);

	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, total), total);
	for (i = 0; i < total / 8; i++) {
		KUNIT_ASSERT_TRUE(test, pull_take(evd, i % 4, evs, 8));
		for (j = 0; j < 8; j++)
			KUNIT_EXPECT_EQ(test, evs[j].dto.cookie, next++);
	}
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(cq));

	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, evs), -EAGAIN);
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms + 1);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(m->evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A consumer that pulls faster than its ring holds: each pull fills the
 * ring and stops there (a stall, the rest waits in the CQ), and the
 * dequeue that frees slots ends the stall without handing the EVD to a
 * poller, for the consumer pulls the rest itself: 128 completions
 * through a ring of 16.
 */
static void kevd_consumer_pull_stall_no_poller(struct kunit *test)
{
	pull_no_poller(test, 16, 128);
}

/*
 * A consumer that pulls a backlog larger than a pull's budget (the
 * default, 64) takes it all itself: a pull that used its budget lets go
 * unarmed, as one that found work does, rather than handing the EVD to a
 * poller (which kept it, passing while it found work, and armed the CQ
 * once it was empty): 200 completions through a ring of 256. (The pulls
 * fall on the kevd_dequeue_batch() calls: the other calls find 8 in the
 * ring.)
 */
static void kevd_consumer_pull_budget_no_poller(struct kunit *test)
{
	pull_no_poller(test, 256, 200);
}

/*
 * A batch wait for any number of events (threshold 1) that finds a few
 * queued tops them up from the CQ, as a batch dequeue does: one call
 * returns the ring's two software events, then 62 completions in CQ
 * order, the next one 64 more. (Before, such a wait returned what the
 * ring held, two events, and left the CQ to later calls.) Notifications
 * are held back, so only the calls move completions.
 */
static void kevd_consumer_wait_batch_tops_up(struct kunit *test)
{
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct kevd *evd;
	u64 next = 0;
	u32 nmore;
	int i;

	evs = kunit_kcalloc(test, 64, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = cq_evd_flags(test, hca, 256, 256,
			   KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	pull_mute(test, kevd_cq(evd), true);
	KUNIT_ASSERT_TRUE(test, pull_idle(evd));
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)1UL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)2UL), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 128), 128);

	KUNIT_ASSERT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 64, &nmore), 64);
	KUNIT_EXPECT_EQ(test, evs[0].event_number, (u32)KEVD_SOFTWARE_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, evs[0].software.pointer, (void *)1UL);
	KUNIT_EXPECT_PTR_EQ(test, evs[1].software.pointer, (void *)2UL);
	for (i = 2; i < 64; i++)
		KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, next++);
	KUNIT_ASSERT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 64, &nmore), 64);
	for (i = 0; i < 64; i++)
		KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, next++);
	KUNIT_ASSERT_EQ(test, kevd_dequeue_batch(evd, evs, 64), 2);
	for (i = 0; i < 2; i++)
		KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, next++);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 64), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A waiter thread on a new EVD of @hca (mod_evd()), created but not yet
 * woken; the caller puts the task_struct it holds.
 */
static struct task_struct *waiter_thread(struct kunit *test,
					 struct waiter *w,
					 struct fake_hca *hca, u32 threshold)
{
	struct task_struct *t;

	init_completion(&w->done);
	w->evd = mod_evd(test, hca);
	w->threshold = threshold;
	t = kthread_create(waiter_fn, w, "kevd_cons_waiter");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	get_task_struct(t);	/* its state is read */
	return t;
}

/*
 * Until thread @t waits in kevd_wait() on @evd, asleep (and, with @cq,
 * the CQ armed). False if the bound runs out.
 */
static bool waiter_asleep(struct kevd *evd, struct task_struct *t,
			  struct ib_cq *cq)
{
	unsigned long end = jiffies + CONS_WAIT;
	bool asleep;

	do {
		asleep = (cons_state(evd) & KEVD_STATE_WAITED) &&
			 (READ_ONCE(t->__state) & TASK_INTERRUPTIBLE) &&
			 (!cq || fake_cq_armed(cq));
		if (!asleep)
			schedule_timeout_uninterruptible(1);
	} while (!asleep && time_before(jiffies, end));
	return asleep;
}

/*
 * A waiter that a completion wakes pulls it and returns without arming
 * the CQ: it comes back, as a dequeue does, and its call that finds the
 * CQ empty arms it. One arm (a doorbell, on a real HCA) per wake-up
 * saved; before, the waiter's pull armed, and its next call armed again.
 */
static void kevd_consumer_wait_wake_no_arm(struct kunit *test)
{
	struct waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct task_struct *t;
	struct kevd_event ev;
	struct fake_hca *hca;
	struct ib_cq *cq;
	u64 arms;

	KUNIT_ASSERT_NOT_NULL(test, w);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	t = waiter_thread(test, w, hca, 1);
	cq = kevd_cq(w->evd);
	wake_up_process(t);
	/* registered, past its pulls, asleep on the armed CQ */
	KUNIT_EXPECT_TRUE(test, waiter_asleep(w->evd, t, cq));
	arms = pull_arms(cq);

	KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	if (!wait_for_completion_timeout(&w->done, CONS_WAIT)) {
		KUNIT_FAIL(test, "the completion did not wake the waiter");
		kevd_set_unwaitable(w->evd, true);
		wait_for_completion(&w->done);
	}
	put_task_struct(t);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->ev.dto.cookie, 0ULL);
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms);
	KUNIT_EXPECT_FALSE(test, fake_cq_armed(cq));
	/* its next call finds the CQ empty and arms it */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, pull_arms(cq), arms + 1);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
	fake_hca_destroy(hca);
}

/* kevd_query()'s counters of @evd, or zeros. */
static struct kevd_stats cons_stats(struct kevd *evd)
{
	struct kevd_param p;

	return kevd_query(evd, &p) ? (struct kevd_stats){ } : p.stats;
}

/*
 * A wait that fails still says how many events are queued (DAT's nmore):
 * a threshold past the queue length (-EINVAL), an EVD made unwaitable
 * (-ECANCELED). A consumer that reads nmore after any return must not
 * read what it left there.
 */
static void kevd_consumer_wait_error_nmore(struct kunit *test)
{
	struct kevd_event ev;
	struct kevd *evd;
	u32 nmore;
	int i;

	evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			  NULL, NULL);
	for (i = 0; i < 3; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)1UL), 0);

	nmore = 1000;
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 17, &ev, &nmore), -EINVAL);
	KUNIT_EXPECT_EQ(test, nmore, 3U);

	KUNIT_ASSERT_EQ(test, kevd_set_unwaitable(evd, true), 0);
	nmore = 1000;
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 4, &ev, &nmore), -ECANCELED);
	KUNIT_EXPECT_EQ(test, nmore, 3U);
	nmore = 1000;
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, &ev, 1, &nmore),
			-ECANCELED);
	KUNIT_EXPECT_EQ(test, nmore, 3U);
	KUNIT_ASSERT_EQ(test, kevd_set_unwaitable(evd, false), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * A notification that finds the CQ empty counts as empty also when the
 * waiter it woke pulls (no pass runs): a spurious one, on the armed CQ of
 * a thread asleep in kevd_wait(). Before, only a poller's pass counted
 * it, and a consumer that always waits never saw one counted.
 */
static void kevd_consumer_wait_empty_notification(struct kunit *test)
{
	struct waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct kevd_stats before, now;
	struct task_struct *t;
	struct fake_hca *hca;
	unsigned long end;
	struct ib_cq *cq;

	KUNIT_ASSERT_NOT_NULL(test, w);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	t = waiter_thread(test, w, hca, 1);
	cq = kevd_cq(w->evd);
	wake_up_process(t);
	KUNIT_EXPECT_TRUE(test, waiter_asleep(w->evd, t, cq));
	before = cons_stats(w->evd);

	fake_cq_fire(cq);
	end = jiffies + CONS_WAIT;
	do {
		now = cons_stats(w->evd);
		if (now.empty_notifications > before.empty_notifications)
			break;
		schedule_timeout_uninterruptible(1);
	} while (time_before(jiffies, end));
	KUNIT_EXPECT_EQ(test, now.notifications, before.notifications + 1);
	KUNIT_EXPECT_EQ(test, now.empty_notifications,
			before.empty_notifications + 1);
	/* it sleeps on, on the CQ armed again, and the next completion wakes it */
	KUNIT_EXPECT_TRUE(test, waiter_asleep(w->evd, t, cq));
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	if (!wait_for_completion_timeout(&w->done, CONS_WAIT)) {
		KUNIT_FAIL(test, "the completion did not wake the waiter");
		kevd_set_unwaitable(w->evd, true);
		wait_for_completion(&w->done);
	}
	put_task_struct(t);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->ev.dto.cookie, 0ULL);
	KUNIT_EXPECT_EQ(test, cons_stats(w->evd).empty_notifications,
			before.empty_notifications + 1);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
	fake_hca_destroy(hca);
}

/* Holds the first poll after it is set (a poller's) until released. */
struct poll_hold {
	struct completion entered;
	struct completion release;
	atomic_t fired;
};

static void poll_hold_fn(struct ib_cq *cq, void *ctx)
{
	struct poll_hold *h = ctx;

	if (atomic_xchg(&h->fired, 1))
		return;
	complete(&h->entered);
	wait_for_completion(&h->release);
}

/*
 * A poller's pass that finds work on an EVD whose consumer pulls gives
 * it back unarmed, but not while a thread waits: here the waiter wants
 * two events and the pass brings one, so the waiter sleeps on, and the
 * CQ must be armed for the second to wake it. The poller is held in its
 * poll until the waiter, registered meanwhile, is asleep.
 */
static void kevd_consumer_wait_keeps_arm(struct kunit *test)
{
	struct waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct poll_hold *h = kunit_kzalloc(test, sizeof(*h), GFP_KERNEL);
	struct task_struct *t;
	struct kevd_event ev;
	struct fake_hca *hca;
	unsigned long end;
	struct ib_cq *cq;
	bool ok;

	KUNIT_ASSERT_TRUE(test, w && h);
	init_completion(&h->entered);
	init_completion(&h->release);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	t = waiter_thread(test, w, hca, 2);
	cq = kevd_cq(w->evd);
	/* the consumer has pulled: a poller may give the EVD back to it */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), -EAGAIN);
	fake_cq_set_poll_hook(cq, poll_hold_fn, h);
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	ok = wait_for_completion_timeout(&h->entered, CONS_WAIT);
	KUNIT_EXPECT_TRUE(test, ok);
	wake_up_process(t);
	KUNIT_EXPECT_TRUE(test, waiter_asleep(w->evd, t, NULL));
	complete(&h->release);
	/* the poller takes the first completion, then must arm the CQ */
	end = jiffies + CONS_WAIT;
	while (!(ok = fake_cq_armed(cq)) && time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_TRUE_MSG(test, ok, "a thread waits on an unarmed CQ");
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	if (!wait_for_completion_timeout(&w->done, CONS_WAIT)) {
		KUNIT_FAIL(test, "the second completion did not wake the waiter");
		kevd_set_unwaitable(w->evd, true);
		wait_for_completion(&w->done);
	}
	put_task_struct(t);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->ev.dto.cookie, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 1ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A SINGLE_INSTANCE pass that found the CQ empty arms it; no upcall runs
 * and the pass holds no event. The consumer posts an event, disables
 * upcalls and dequeues meanwhile: it gets the event at once. Before, the
 * pass's direct session counted as a running batch until the pass ended,
 * so the dequeue returned -EAGAIN with the event queued, and a consumer
 * that then enabled INVOC_NEW again never heard of it.
 */
static void kevd_consumer_disable_during_arm(struct kunit *test)
{
	struct poll_hold *h = kunit_kzalloc(test, sizeof(*h), GFP_KERNEL);
	struct arm_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;

	KUNIT_ASSERT_TRUE(test, h && r);
	init_completion(&h->entered);
	init_completion(&h->release);
	evd = si_hca_evd(test, &hca, 16, 0,
			 (struct kevd_upcall){ arm_rec_upcall }, r);
	cq = kevd_cq(evd);

	fake_cq_set_arm_hook(cq, poll_hold_fn, h);
	fake_cq_fire(cq);	/* a pass, which finds nothing and arms */
	if (!wait_for_completion_timeout(&h->entered, CONS_WAIT)) {
		KUNIT_FAIL(test, "no arm");
		goto out;
	}
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, (void *)1), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
	/* the pass is still in its arm */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_SOFTWARE_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)1);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
out:
	complete(&h->release);
	fake_cq_set_arm_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* A thread in kevd_free(). */
struct freer {
	struct kevd *evd;
	bool started;
	int rc;
	struct completion done;
};

static int freer_fn(void *data)
{
	struct freer *f = data;

	WRITE_ONCE(f->started, true);
	f->rc = kevd_free(f->evd);
	complete(&f->done);
	return 0;
}

KEVD_TEST_BOOL_PARAM(freed_queued, "empty", "event_queued");

/*
 * A wait that begins while another thread frees the EVD (its kevd_free()
 * waits for a poller's pass to end) is refused with -EINVAL, as
 * kevd_modify_upcall() answers then: it must not register as the waiter
 * of an EVD whose memory the free releases when it returns. Before, it
 * registered (here it timed out at once: a timeout of 0). With an event
 * queued (event_queued), before, the wait took it without registering,
 * on an EVD whose free could return meanwhile.
 */
static void kevd_consumer_wait_while_freed(struct kunit *test)
{
	const bool *queued = test->param_value;
	struct poll_hold *h = kunit_kzalloc(test, sizeof(*h), GFP_KERNEL);
	struct freer *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	struct task_struct *t;
	struct kevd_event ev;
	struct fake_hca *hca;
	unsigned long end;
	struct ib_cq *cq;
	u32 nmore;
	bool ok;

	KUNIT_ASSERT_TRUE(test, h && f);
	init_completion(&h->entered);
	init_completion(&h->release);
	init_completion(&f->done);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	f->evd = cq_evd_flags(test, hca, 256, 256,
			      KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	cq = kevd_cq(f->evd);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(f->evd, &ev), -EAGAIN); /* arms */
	if (*queued)
		KUNIT_EXPECT_EQ(test, kevd_post_se(f->evd, NULL), 0);
	fake_cq_set_poll_hook(cq, poll_hold_fn, h);
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	ok = wait_for_completion_timeout(&h->entered, CONS_WAIT);
	KUNIT_ASSERT_TRUE(test, ok);
	/* a poller is inside its pass: the free waits for it to let go */
	t = kthread_run(freer_fn, f, "kevd_cons_freer");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	end = jiffies + CONS_WAIT;
	for (;;) {
		ok = READ_ONCE(f->started) &&
		     READ_ONCE(t->__state) == TASK_UNINTERRUPTIBLE;
		if (ok || !time_before(jiffies, end))
			break;
		schedule_timeout_uninterruptible(1);
	}
	KUNIT_EXPECT_TRUE(test, ok);
	KUNIT_EXPECT_EQ(test, kevd_wait(f->evd, 0, 1, &ev, &nmore), -EINVAL);
	complete(&h->release);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&f->done,
							    CONS_WAIT));
	KUNIT_EXPECT_EQ(test, f->rc, 0);
	fake_hca_destroy(hca);
}

/* A completion, once, from inside the puller's poll (fake_cq_set_poll_hook()). */
static void pull_hook_fn(struct ib_cq *cq, void *ctx)
{
	bool *fired = ctx;

	if (!*fired) {
		*fired = true;
		fake_cq_add_seq(cq);
	}
}

/*
 * A dequeue that pulls finds a completion whose notification comes while
 * it polls (the CQ armed): it takes it and lets go with the CQ unarmed.
 * Returns the event's cookie through @cookie.
 */
static void pull_unarmed(struct kunit *test, struct kevd *evd, u64 *cookie)
{
	struct kevd_event ev;
	bool fired = false;

	KUNIT_ASSERT_TRUE(test, pull_idle(evd));
	fake_cq_set_poll_hook(kevd_cq(evd), pull_hook_fn, &fired);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	fake_cq_set_poll_hook(kevd_cq(evd), NULL, NULL);
	KUNIT_ASSERT_TRUE(test, fired);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, (*cookie)++);
}

static void pull_count_up(void *ctx, const struct kevd_event *ev, bool more)
{
	atomic_inc(ctx);
}

/*
 * After a pull that found work let go with the CQ unarmed, a completion
 * comes that no notification signals; the consumer does not dequeue
 * again. It still reaches the ring once the consumer looks with
 * kevd_query() (the count keeps up), and an upcall once it enables
 * upcalls.
 */
static void kevd_consumer_pull_unarmed_covered(struct kunit *test)
{
	struct kevd_upcall up = { .func = pull_count_up };
	struct fake_hca *hca;
	struct kevd_event ev;
	atomic_t upcalls;
	struct ib_cq *cq;
	struct kevd *evd;
	u64 next = 0;

	atomic_set(&upcalls, 0);
	up.ctx = &upcalls;
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = mod_evd(test, hca);
	cq = kevd_cq(evd);

	pull_unarmed(test, evd, &next);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_EXPECT_TRUE(test, cons_wait_count(evd, 1));
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, next++);

	pull_unarmed(test, evd, &next);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&upcalls, 1));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_NEW), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&upcalls), 1);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(cq));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * An EVD that no module owns (__kevd_create() with a NULL owner) keeps
 * kevd.ko loaded until it is freed: nothing reports or frees it at a
 * module's unload, and its CQ's handlers are kevd's code. Before, kevd's
 * reference count did not move, and kevd could unload with it open.
 */
static void kevd_consumer_unowned_pins_kevd(struct kunit *test)
{
	struct kevd_attr attr;
	struct kevd *evd;
	int refs;

	refs = kevd_test_module_refs("kevd");
	KUNIT_ASSERT_GE(test, refs, 0);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = __kevd_create(NULL, &attr, NULL);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_test_module_refs("kevd"), refs + 1);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_test_module_refs("kevd"), refs);
	/* one that its module owns does not */
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_test_module_refs("kevd"), refs);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

static void reap_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	atomic_inc(ctx);
}

/*
 * A module goes and leaves an EVD that another module's EVD still uses
 * as its async EVD: kevd cannot free it, tears its upcalls down, and
 * forgets the upcall object, code of the module gone. Nobody can enable
 * upcalls again with it, and kevd_query() no longer hands it out. Before,
 * an enable with no object (keep the current one) returned 0, and the
 * next event called into the unloaded module.
 */
static void kevd_consumer_reap_forgets_upcall(struct kunit *test)
{
	static char owner;	/* a module that "goes": compared only */
	struct module *mod = (struct module *)&owner;
	atomic_t *calls = kunit_kzalloc(test, sizeof(*calls), GFP_KERNEL);
	struct kevd_upcall up = { reap_upcall, calls };
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd *a, *b;
	int refs;

	KUNIT_ASSERT_NOT_NULL(test, calls);
	refs = kevd_test_module_refs("kevd");
	KUNIT_ASSERT_GE(test, refs, 0);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_SOFTWARE_FLAG | KEVD_ASYNC_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = up;
	a = __kevd_create(NULL, &attr, mod);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, a);
	kevd_attr_init(&attr);
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.async_evd = a;
	b = kevd_create(NULL, &attr);
	if (IS_ERR_OR_NULL(b)) {	/* nothing reaps @a for the test */
		KUNIT_EXPECT_EQ(test, kevd_free(a), 0);
		KUNIT_FAIL(test, "kevd_create: %ld", PTR_ERR(b));
		return;
	}
	kevd_test_reap(mod);		/* a stays: b uses it */
	KUNIT_ASSERT_EQ(test, kevd_query(a, &p), 0);
	KUNIT_EXPECT_EQ(test, p.upcall_policy, KEVD_UPCALL_TEARDOWN);
	KUNIT_EXPECT_TRUE(test, !p.upcall.func);
	KUNIT_EXPECT_NULL(test, p.upcall.ctx);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(a, KEVD_UPCALL_SINGLE_INSTANCE,
						 NULL, KEVD_UPCALL_INVOC_ANY),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_post_se(a, NULL), 0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(calls), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(b), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(a), 0);
	/* the reference kevd took on itself for @a went with it */
	KUNIT_EXPECT_EQ(test, kevd_test_module_refs("kevd"), refs);
}

/**
 * struct qp_end - what a DTO upcall saw of a QP's completions.
 * @calls: completions delivered (only the QP's: the markers never come).
 * @bad: ones with a wrong QP context, status or order.
 * @ctx: the QP's context.
 * @next_send: the cookie the next send completion must have...
 * @next_recv: ...and the next receive completion.
 */
struct qp_end {
	atomic_t calls, bad;
	void *ctx;
	u64 next_send, next_recv;
};

#define QP_END_SENDS	3
#define QP_END_RECVS	4	/* cookies 100 and up */

static void qp_end_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qp_end *q = ctx;
	u64 *next;

	/* one invocation at a time (SINGLE_INSTANCE): plain counters */
	next = ev->dto.cookie >= 100 ? &q->next_recv : &q->next_send;
	if (ev->dto.ep_context != q->ctx ||
	    ev->dto.status != KEVD_DTO_ERR_FLUSHED || ev->dto.cookie != *next)
		atomic_inc(&q->bad);
	(*next)++;
	atomic_inc(&q->calls);
}

KEVD_TEST_BOOL_PARAM(qp_end, "notifying", "muted_solicited");

/*
 * An EVD whose upcall checks @q, on a new strict fake HCA (*@hca), with a
 * fake QP (*@qp) that flushes when it goes to error; @solicited_only as
 * the EVD's attribute.
 */
static struct kevd *qp_end_env(struct kunit *test, struct qp_end *q,
			       bool solicited_only, struct fake_hca **hca,
			       struct ib_qp **qp)
{
	struct kevd_upcall up = { qp_end_upcall, q };
	struct kevd_attr attr;
	struct kevd *evd;

	q->next_recv = 100;
	*hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *hca);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = up;
	attr.solicited_only = solicited_only;
	evd = kevd_create(fake_hca_ibdev(*hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	*qp = fake_qp_create(*hca, kevd_cq(evd), 8);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *qp);
	q->ctx = (*qp)->qp_context;
	fake_qp_flush_on_error(*qp);
	return evd;
}

/* QP_END_SENDS signalled sends (cookies 0 and up) on @qp. */
static void qp_end_sends(struct kunit *test, struct ib_qp *qp)
{
	const struct ib_send_wr *bad;
	int i;

	for (i = 0; i < QP_END_SENDS; i++) {
		struct ib_send_wr wr = {
			.wr_id = i, .opcode = IB_WR_SEND,
			.send_flags = IB_SEND_SIGNALED,
		};

		KUNIT_EXPECT_EQ(test, ib_post_send(qp, &wr, &bad), 0);
	}
}

/* Upcalls torn down, then the EVD and the fake HCA go. */
static void qp_end_free(struct kunit *test, struct kevd *evd,
			struct fake_hca *hca)
{
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * kevd_destroy_qp() takes a QP's completions out of kevd before it
 * destroys the QP, as ib_drain_qp() does for ib_core's CQs: it moves the
 * QP to error, and every work request in flight reaches the upcall,
 * flushed, in order, with the QP's context (read before the destroy
 * frees the QP); then the QP is gone and the EVD can be freed. The fake
 * QP flushes when it goes to error. Muted (param), the CQ notifies
 * nothing (moderated beyond reach), as a solicited-only CQ on rxe or siw
 * notifies no flush: kevd polls for them itself.
 */
static void kevd_consumer_destroy_qp_drains(struct kunit *test)
{
	struct qp_end *q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	bool muted = *(const bool *)test->param_value;
	const struct ib_recv_wr *bad_recv;
	struct fake_cq_stats st;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_qp *qp;
	u64 notified;
	int i, rc;

	KUNIT_ASSERT_NOT_NULL(test, q);
	evd = qp_end_env(test, q, muted, &hca, &qp);
	if (muted)
		KUNIT_EXPECT_EQ(test, rdma_set_cq_moderation(kevd_cq(evd),
							     U16_MAX, 0), 0);
	qp_end_sends(test, qp);
	for (i = 0; i < QP_END_RECVS; i++) {
		struct ib_recv_wr wr = { .wr_id = 100 + i };

		KUNIT_EXPECT_EQ(test, ib_post_recv(qp, &wr, &bad_recv), 0);
	}
	KUNIT_EXPECT_EQ(test, kevd_destroy_qp(NULL, NULL), -EINVAL);
	fake_cq_stats(kevd_cq(evd), &st);
	notified = st.notifications;
	/* converted before it returns: the QP is freed then, read by nobody */
	rc = kevd_destroy_qp(qp, NULL);
	KUNIT_EXPECT_EQ(test, rc, 0);
	if (rc)
		fake_qp_destroy(qp);
	KUNIT_EXPECT_EQ(test, fake_hca_qps_destroyed(hca), 1);
	fake_cq_stats(kevd_cq(evd), &st);
	if (muted)		/* kevd polled for them itself */
		KUNIT_EXPECT_EQ(test, st.notifications, notified);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->calls),
			QP_END_SENDS + QP_END_RECVS);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->bad), 0);
	qp_end_free(test, evd, hca);
}

/* The next event of @aevd is @evd's overflow, and nothing after it. */
static void overrun_expect_one(struct kunit *test, struct kevd *aevd,
			       struct kevd *evd)
{
	struct kevd_event ev;

	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_ASYNC_ERROR_EVD_OVERFLOW);
	KUNIT_EXPECT_PTR_EQ(test, ev.async.handle, (void *)evd);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(aevd, &ev), -EAGAIN);
}

/*
 * A CQ overrun raises the overflow event once until the consumer resizes
 * the EVD, the remedy (api.rst); rxe loses the one completion and goes
 * on, so an overrun after the remedy is heard again. Every overrun is
 * counted. Before, only the EVD's first overrun was ever reported: the
 * one after the resize raised nothing, left the EVD out of OVERFLOWED
 * and was not counted.
 */
static void kevd_consumer_cq_overrun_after_resize(struct kunit *test)
{
	struct kevd_attr attr;
	struct kevd *aevd, *evd;
	struct fake_hca *hca;
	struct kevd_param p;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 8;
	attr.flags = KEVD_ASYNC_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	aevd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, aevd);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.cq_depth = 16;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = aevd;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);

	fake_cq_overrun(kevd_cq(evd));
	fake_cq_overrun(kevd_cq(evd));
	overrun_expect_one(test, aevd, evd);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_TRUE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 2ULL);

	/* the remedy; the next overrun is heard */
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 32), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_OVERFLOWED);
	fake_cq_overrun(kevd_cq(evd));
	overrun_expect_one(test, aevd, evd);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_TRUE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 3ULL);

	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
	fake_hca_destroy(hca);
}

/* The drop a resize meets: one more connection event on a full EVD. */
struct resize_drop {
	struct kevd *evd;
	int rc;
	int calls;
};

static void resize_drop_hook(struct ib_cq *cq, void *ctx)
{
	struct kevd_event ev = { .event_number = KEVD_CONNECTION_EVENT_BROKEN };
	struct resize_drop *r = ctx;

	if (!r->calls++)
		r->rc = kevd_post_event(r->evd, &ev);
}

/*
 * A resize clears OVERFLOWED, the consumer's remedy (api.rst). An event
 * dropped while the resize runs was lost after the consumer chose it:
 * the EVD stays overflowed, and the drop's overflow event is on the
 * async EVD. Before, the resize's end cleared the state that drop set.
 */
static void kevd_consumer_resize_keeps_drop(struct kunit *test)
{
	struct kevd_event conn = { .event_number = KEVD_CONNECTION_EVENT_BROKEN };
	struct resize_drop r = { };
	struct kevd_attr attr;
	struct kevd *aevd, *evd;
	struct fake_hca *hca;
	struct kevd_param p;
	u32 i;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	aevd = cons_create(test, 8, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE, NULL,
			   NULL);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = aevd;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	for (i = 0; i < p.qlen; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, NULL), 0);
	for (i = 0; i < HEADROOM; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &conn), 0);
	KUNIT_EXPECT_EQ(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);

	/* the CQ follows the queue length: the resize resizes it first */
	r.evd = evd;
	fake_cq_set_resize_hook(kevd_cq(evd), resize_drop_hook, &r);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 2 * p.qlen), 0);
	fake_cq_set_resize_hook(kevd_cq(evd), NULL, NULL);
	KUNIT_ASSERT_EQ(test, r.calls, 1);
	KUNIT_EXPECT_EQ(test, r.rc, -EOVERFLOW);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 1ULL);
	KUNIT_EXPECT_NE(test, p.state & KEVD_STATE_OVERFLOWED, 0U);
	overrun_expect_one(test, aevd, evd);

	/* a resize with no drop during it is the remedy again */
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 4 * p.qlen), 0);
	KUNIT_EXPECT_EQ(test, cons_state(evd) & KEVD_STATE_OVERFLOWED, 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
	fake_hca_destroy(hca);
}

/* The largest queue length kevd_create() accepts (its kernel-doc). */
#define QLEN_MAX	BIT(20)

/*
 * The largest queue lengths on an EVD with the headroom (a connection
 * stream): kevd_query() reports no more than kevd_create() and
 * kevd_resize() accept, a resize to what it reports succeeds, and the
 * queue is full at that length. Before, a queue length within the
 * headroom of 2^20 got twice the slots: query reported nearly 2^21, a
 * resize to it failed with -EINVAL, and the queue took that many.
 */
static void kevd_consumer_largest_qlen(struct kunit *test)
{
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd *evd;
	u32 i, qlen;
	int rc;

	kevd_attr_init(&attr);
	attr.qlen = QLEN_MAX + 1;
	attr.flags = KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(NULL, &attr);
	rc = PTR_ERR_OR_ZERO(evd);
	if (!rc)
		kevd_free(evd);
	KUNIT_EXPECT_EQ(test, rc, -EINVAL);

	attr.qlen = QLEN_MAX - HEADROOM + 1;
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	KUNIT_EXPECT_GE(test, qlen, attr.qlen);
	KUNIT_EXPECT_LE(test, qlen, QLEN_MAX);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, qlen), 0);
	KUNIT_EXPECT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, qlen);
	/* full at the queue length (not filled past 2^20: failed above) */
	rc = 0;
	for (i = 0; i < min(qlen, QLEN_MAX) && !rc; i++)
		rc = kevd_post_se(evd, NULL);
	KUNIT_EXPECT_EQ(test, rc, 0);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, NULL), -ENOSPC);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * A give-back at the largest queue length: 2^20 software events (no
 * headroom) fill the queue while the first upcall of a batch runs, and
 * the ring cannot grow by a queue length; the rest of the batch goes
 * back above it, and the queue holds that many more than its length
 * until they are taken. Before, the give-back retried for good: the
 * DISABLE from the upcall never returned.
 */
static void kevd_consumer_giveback_at_largest(struct kunit *test)
{
	struct giveback *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	struct kevd_upcall up = { headroom_upcall, g };
	struct kevd_event ev;
	struct kevd_param p;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, g);
	init_completion(&g->done);
	g->evd = cons_create(test, QLEN_MAX, KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_DISABLE, &up, NULL);
	giveback_start(test, g, KEVD_UPCALL_SINGLE_INSTANCE);
	if (!wait_for_completion_timeout(&g->done, CONS_WAIT)) {
		/* the upcall still gives back: nothing may free the EVD */
		KUNIT_FAIL(test, "the give-back did not finish");
		return;
	}
	KUNIT_EXPECT_EQ(test, g->rc, 0);
	KUNIT_EXPECT_EQ(test, g->posted, (int)QLEN_MAX);
	KUNIT_ASSERT_EQ(test, kevd_query(g->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, (u32)QLEN_MAX);
	KUNIT_EXPECT_EQ(test, p.count, (u32)QLEN_MAX + GB_FIRST - 1);
	KUNIT_EXPECT_EQ(test, kevd_post_se(g->evd, NULL), -ENOSPC);
	/* the rest of the batch first, in order, then the upcall's events */
	for (i = 1; i <= GB_FIRST + 1; i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(g->evd, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
				    (void *)(uintptr_t)i);
	}
	KUNIT_EXPECT_EQ(test, atomic_read(&g->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(g->evd), 0);
}

/**
 * struct direct_full - software events fill the queue during a direct poll.
 * @evd: a SINGLE_INSTANCE EVD, DTO and software streams.
 * @fired: the poll hook ran (it runs once).
 * @posted: software events it queued.
 * @calls: upcalls.
 * @first: the first upcall's event.
 * @rc: what the first upcall's DISABLE returned.
 * @done: the first upcall ended.
 */
struct direct_full {
	struct kevd *evd;
	bool fired;
	int posted;
	atomic_t calls;
	struct kevd_event first;
	int rc;
	struct completion done;
};

static void direct_full_hook(struct ib_cq *cq, void *ctx)
{
	struct direct_full *d = ctx;

	if (d->fired)
		return;
	d->fired = true;
	while (!kevd_post_se(d->evd, (void *)(uintptr_t)d->posted))
		d->posted++;
}

static void direct_full_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct direct_full *d = ctx;

	if (atomic_inc_return(&d->calls) > 1)
		return;
	d->first = *ev;
	d->rc = kevd_modify_upcall(d->evd, KEVD_UPCALL_DISABLE, NULL,
				   KEVD_UPCALL_INVOC_ANY);
	complete(&d->done);
}

/*
 * The completions a SINGLE_INSTANCE poller polled for its upcalls go
 * into the ring behind the events that entered it during the poll; at
 * the largest queue length, which those events filled, they go past it.
 * Before, the poller retried for good: no upcall ever ran.
 */
static void kevd_consumer_direct_at_largest(struct kunit *test)
{
	struct direct_full *d = kunit_kzalloc(test, sizeof(*d), GFP_KERNEL);
	struct fake_hca *hca;
	struct kevd_param p;
	struct ib_cq *cq;

	KUNIT_ASSERT_NOT_NULL(test, d);
	init_completion(&d->done);
	d->evd = si_hca_evd(test, &hca, QLEN_MAX, 64,
			    (struct kevd_upcall){ direct_full_upcall }, d);
	cq = kevd_cq(d->evd);
	kevd_test_flush_pollers(test);	/* the first pass has armed */
	fake_cq_set_poll_hook(cq, direct_full_hook, d);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 2), 2);
	if (!wait_for_completion_timeout(&d->done, CONS_WAIT)) {
		/* the poller still requeues: nothing may free the EVD */
		KUNIT_FAIL(test, "no upcall");
		return;
	}
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_TRUE(test, d->fired);
	KUNIT_EXPECT_EQ(test, d->posted, (int)QLEN_MAX);
	KUNIT_EXPECT_EQ(test, d->rc, 0);
	KUNIT_EXPECT_EQ(test, d->first.event_number,
			(u32)KEVD_SOFTWARE_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, d->first.software.pointer, NULL);
	/* the rest of the software events, and both completions */
	KUNIT_ASSERT_EQ(test, kevd_query(d->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, (u32)QLEN_MAX);
	KUNIT_EXPECT_EQ(test, p.count, (u32)QLEN_MAX + 1);
	KUNIT_EXPECT_EQ(test, kevd_post_se(d->evd, NULL), -ENOSPC);
	KUNIT_EXPECT_EQ(test, atomic_read(&d->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(d->evd), 0);
	fake_hca_destroy(hca);
}

#define LATE_FENCE_US	10000000	/* a bound for a failure, not a sync */

/**
 * struct late_fence - a DISCONNECTED posted just after a drain found the
 *	CQ empty, behind a completion that came after that poll.
 * @evd: the EVD, DTO and connection streams.
 * @fired: the hook ran (it runs once).
 * @rc: what the post returned.
 */
struct late_fence {
	struct kevd *evd;
	atomic_t fired;
	int rc;
};

/* At the end of the first poll that leaves the CQ empty. */
static void late_fence_hook(struct ib_cq *cq, void *ctx)
{
	struct kevd_event ev = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = (void *)2,
	};
	struct late_fence *l = ctx;

	if (fake_cq_count(cq) || atomic_xchg(&l->fired, 1))
		return;
	fake_cq_add_cookie(cq, 2);
	l->rc = kevd_post_event(l->evd, &ev);
}

/*
 * A connection event comes after every completion that was in the CQ
 * when it was posted (api.rst), also when it is posted while the drain
 * that queues the held ones has just found the CQ empty: endpoint 1's
 * DISCONNECTED waits for that drain; endpoint 2's completion comes after
 * its last poll, then endpoint 2's DISCONNECTED. Before, the drain
 * queued both DISCONNECTEDs, and endpoint 2's completion came after its
 * DISCONNECTED, when the consumer may have freed the endpoint.
 */
static void kevd_consumer_fence_after_empty_poll(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = (void *)1,
	};
	static const struct { u32 number; u64 id; } want[] = {
		{ KEVD_DTO_COMPLETION_EVENT, 1 },
		{ KEVD_CONNECTION_EVENT_DISCONNECTED, 1 },
		{ KEVD_DTO_COMPLETION_EVENT, 2 },
		{ KEVD_CONNECTION_EVENT_DISCONNECTED, 2 },
	};
	struct kevd_attr attr;
	struct late_fence *l;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	u32 i, nmore;

	/* not the test's: after a failed assertion the hook may still run */
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	l->evd = evd;
	/*
	 * Endpoint 1's completion moved into the queue, the CQ armed again,
	 * and the pass that armed it over (its check polls after the arm):
	 * nothing polls the CQ when the hook is set.
	 */
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(evd), 1), 0);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(evd)));
	kevd_test_flush_pollers(test);
	KUNIT_ASSERT_EQ(test, fake_cq_count(kevd_cq(evd)), 0U);

	fake_cq_set_poll_hook_after(kevd_cq(evd), true);
	fake_cq_set_poll_hook(kevd_cq(evd), late_fence_hook, l);
	KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &disc), 0);
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		KUNIT_ASSERT_EQ(test, kevd_wait(evd, LATE_FENCE_US, 1, &ev,
						&nmore), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, want[i].number);
		if (want[i].number == KEVD_DTO_COMPLETION_EVENT)
			KUNIT_EXPECT_EQ(test, ev.dto.cookie, want[i].id);
		else
			KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep,
					    (void *)(uintptr_t)want[i].id);
	}
	fake_cq_set_poll_hook(kevd_cq(evd), NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&l->fired), 1);
	KUNIT_EXPECT_EQ(test, l->rc, 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
	kfree(l);
}

/* A thread in kevd_destroy_qp(), and its result. */
struct srq_destroyer {
	struct ib_qp *qp;
	int rc;
	struct completion done;
};

static int srq_destroyer_fn(void *data)
{
	struct srq_destroyer *d = data;

	d->rc = kevd_destroy_qp(d->qp, NULL);
	complete(&d->done);
	return 0;
}

/* Where the QP is when it is destroyed: connected, or not yet. */
static const enum ib_qp_state qp_srq_states[] = { IB_QPS_RTS, IB_QPS_INIT };

static void qp_srq_desc(const enum ib_qp_state *state, char *desc)
{
	strscpy(desc, *state == IB_QPS_RTS ? "connected" : "never_connected",
		KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(qp_srq, qp_srq_states, qp_srq_desc);

/*
 * A QP whose receives come from an SRQ: those it took from the SRQ are
 * not its to flush, no marker can follow them (it takes no receive of its
 * own), and the HCA may complete them after its sends' flushes. They are
 * in the CQ once it raises the Last WQE Reached event, which
 * kevd_destroy_qp() waits for, as ib_drain_qp() does: every completion
 * reaches the upcall, with the QP's context, before the QP goes. Before,
 * the drain ended at the send marker and the QP was destroyed with four
 * receives still to come, which would have named a freed QP. A QP that
 * never reached RTR (param: a request not accepted) took nothing from
 * the SRQ and is not waited for: not every HCA raises the event for it.
 */
static void kevd_consumer_destroy_qp_srq(struct kunit *test)
{
	enum ib_qp_state state = *(const enum ib_qp_state *)test->param_value;
	bool connected = state == IB_QPS_RTS;
	struct srq_destroyer *d = kunit_kzalloc(test, sizeof(*d), GFP_KERNEL);
	struct qp_end *q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	struct ib_recv_wr rwr = { .wr_id = 100 };
	const struct ib_recv_wr *bad_recv;
	struct task_struct *t;
	struct fake_hca *hca;
	unsigned long end;
	struct kevd *evd;
	struct ib_qp *qp;
	bool waited, done;
	int i;

	KUNIT_ASSERT_TRUE(test, d && q);
#ifndef KEVD_HAVE_QP_SRQ_COMPLETION
	kunit_skip(test, "this ib_core counts no Last WQE Reached event");
#endif
	init_completion(&d->done);
	evd = qp_end_env(test, q, false, &hca, &qp);
	fake_qp_use_srq(qp);
	fake_qp_set_state(qp, state);
	if (connected)
		qp_end_sends(test, qp);
	/* its receives come from the SRQ: four in progress */
	KUNIT_EXPECT_EQ(test, ib_post_recv(qp, &rwr, &bad_recv), -EINVAL);
	for (i = 0; connected && i < QP_END_RECVS; i++)
		KUNIT_EXPECT_EQ(test, fake_qp_srq_take(qp, 100 + i), 0);
	d->qp = qp;
	t = kthread_run(srq_destroyer_fn, d, "kevd_cons_srq");
	if (IS_ERR(t)) {
		fake_qp_destroy(qp);
		KUNIT_FAIL(test, "kthread_run: %ld", PTR_ERR(t));
		goto out;
	}
	/*
	 * Connected, it waits for the event; before, it destroyed the QP
	 * without it. Never connected, it does not; before, it waited.
	 */
	end = jiffies + CONS_WAIT;
	do {
		done = completion_done(&d->done);
		waited = !done && fake_qp_srq_waited(hca, qp, 0);
		if (done || waited)
			break;
		schedule_timeout_uninterruptible(1);
	} while (time_before(jiffies, end));
	KUNIT_EXPECT_EQ(test, waited, connected);
	if (waited)		/* unless its wait ran out meanwhile */
		KUNIT_EXPECT_EQ(test, fake_qp_last_wqe(hca, qp, 0),
				connected ? QP_END_RECVS : 0);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&d->done,
							    CONS_WAIT));
	KUNIT_EXPECT_EQ(test, d->rc, 0);
	KUNIT_EXPECT_EQ(test, fake_hca_qps_destroyed(hca), 1);
	/* all of them, in order, with its context: read before it went */
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->calls),
			connected ? QP_END_SENDS + QP_END_RECVS : 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->bad), 0);
out:
	qp_end_free(test, evd, hca);
}

/* @act(@evd) from @task's own poll of the CQ, once; its result. */
struct own_poll {
	struct task_struct *task;
	struct kevd *evd;
	int (*act)(struct kevd *evd);
	bool fired;
	int rc;
};

static void own_poll_fn(struct ib_cq *cq, void *ctx)
{
	struct own_poll *p = ctx;

	if (current != p->task || p->fired)
		return;
	p->fired = true;
	p->rc = p->act(p->evd);
}

static int own_poll_post(struct kevd *evd)
{
	return kevd_post_se(evd, (void *)7);
}

/*
 * A software event posted while a poll of the CQ is in flight finds room
 * in a queue that is far from full: the poll reserves at most half of
 * what is free (api.rst). A queue of 16 with 0, then 6 events queued; the
 * post comes from the poll of the consumer's own wait for one more event
 * than are queued (timeout 0; the CQ is empty): the wait takes the oldest
 * event, and the rest follow in order, the posted one last. Before, the
 * poll reserved all 16 (10) free slots, the post failed with -ENOSPC and
 * the wait timed out.
 */
static void kevd_consumer_post_se_beside_poll(struct kunit *test)
{
	struct own_poll p = { .task = current, .act = own_poll_post };
	unsigned long i, queued;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct ib_cq *cq;
	u32 nmore;
	int ret;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	p.evd = cq_evd_flags(test, hca, 16, 64,
			     KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	cq = kevd_cq(p.evd);
	for (queued = 0; queued <= 6; queued += 6) {
		KUNIT_ASSERT_TRUE(test, pull_idle(p.evd));
		for (i = 0; i < queued; i++)
			KUNIT_ASSERT_EQ(test, kevd_post_se(p.evd, (void *)i), 0);
		p.fired = false;
		fake_cq_set_poll_hook(cq, own_poll_fn, &p);
		ret = kevd_wait(p.evd, 0, queued + 1, &ev, &nmore);
		fake_cq_set_poll_hook(cq, NULL, NULL);
		KUNIT_EXPECT_TRUE(test, p.fired);
		KUNIT_EXPECT_EQ_MSG(test, p.rc, 0, "%lu queued", queued);
		KUNIT_EXPECT_EQ_MSG(test, ret, 0, "%lu queued", queued);
		/* the queued ones in order, the posted one last */
		for (i = 0; !ret && i <= queued; i++) {
			if (i && kevd_dequeue(p.evd, &ev)) {
				KUNIT_FAIL(test, "event %lu of %lu missing", i,
					   queued + 1);
				break;
			}
			KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
					    (void *)(i < queued ? i : 7));
		}
		while (!kevd_dequeue(p.evd, &ev))
			;
	}
	KUNIT_EXPECT_EQ(test, kevd_free(p.evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A batch call on a small queue with the software stream still takes as
 * many completions as it asks for straight from the CQ: its poll reserves
 * half the room (kevd_consumer_post_se_beside_poll), then polls again.
 * The CQ's notifications are muted, so only the consumer's calls poll.
 */
static void kevd_consumer_batch_fills_small_queue(struct kunit *test)
{
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;
	int i, n, next = 0;

	evs = kunit_kcalloc(test, 16, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = cq_evd_flags(test, hca, 16, 64,
			   KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	cq = kevd_cq(evd);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(cq, U16_MAX, 0), 0);
	KUNIT_ASSERT_TRUE(test, pull_idle(evd));
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 40), 40);
	for (n = 16; next < 40; n = min(16, 40 - next)) {
		KUNIT_ASSERT_EQ_MSG(test, kevd_dequeue_batch(evd, evs, 16), n,
				    "at %d", next);
		for (i = 0; i < n; i++)
			KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, (u64)next + i);
		next += n;
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 16), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* kevd_set_unwaitable(true), then (false). */
static int own_poll_cancel(struct kevd *evd)
{
	kevd_set_unwaitable(evd, true);
	return kevd_set_unwaitable(evd, false);
}

/*
 * A wait that has not registered yet is the current wait too: the cancel
 * and a false after it come while its first pull polls the empty CQ,
 * before it registers as the waiter. It returns -ECANCELED; a later wait
 * is not cancelled. Before, it registered on a waitable EVD and slept
 * until its timeout.
 */
static void kevd_consumer_unwaitable_cancels_unregistered(struct kunit *test)
{
	struct own_poll c = { .task = current, .act = own_poll_cancel };
	struct fake_hca *hca;
	struct kevd_event ev;
	struct ib_cq *cq;
	u32 nmore;
	int ret;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	c.evd = mod_evd(test, hca);
	cq = kevd_cq(c.evd);
	KUNIT_ASSERT_TRUE(test, pull_idle(c.evd));
	fake_cq_set_poll_hook(cq, own_poll_fn, &c);
	ret = kevd_wait(c.evd, 2 * USEC_PER_SEC, 1, &ev, &nmore);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_TRUE(test, c.fired);
	KUNIT_EXPECT_EQ(test, ret, -ECANCELED);

	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(c.evd, 2 * USEC_PER_SEC, 1, &ev,
					&nmore), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(c.evd), 0);
	fake_hca_destroy(hca);
}

/* --- the raw-completion flavour (kevd_upcall.wc_func) ------------------- */

/**
 * struct raw_cons - a SINGLE_INSTANCE consumer with the raw flavour.
 * @evd: its EVD.
 * @next: the cookie expected next, across both upcalls (SINGLE_INSTANCE
 *	never runs two at once; read by the test after TEARDOWN).
 * @order_errors: cookies out of order or repeated.
 * @total: completions through either upcall.
 * @calls: wc_func calls.
 * @wcs: completions through wc_func.
 * @max_n: the largest batch wc_func got.
 * @dto_events: completions through func, as DAT events.
 * @sw_events: software events through func.
 * @disable: the next wc_func call disables upcalls from inside.
 */
struct raw_cons {
	struct kevd *evd;
	u64 next;
	atomic_t order_errors;
	atomic_t total;
	atomic_t calls;
	atomic_t wcs;
	atomic_t max_n;
	atomic_t dto_events;
	atomic_t sw_events;
	bool disable;
};

static void raw_cookie(struct raw_cons *c, u64 cookie)
{
	if (cookie != c->next)
		atomic_inc(&c->order_errors);
	c->next = cookie + 1;
	atomic_inc(&c->total);
}

static void raw_wc_fn(void *ctx, const struct ib_wc *wcs, u32 n)
{
	struct raw_cons *c = ctx;
	u32 i;

	/* the call counts first: the test reads it once total is reached */
	atomic_inc(&c->calls);
	atomic_add(n, &c->wcs);
	if (n > atomic_read(&c->max_n))
		atomic_set(&c->max_n, n);
	if (READ_ONCE(c->disable)) {
		WRITE_ONCE(c->disable, false);
		kevd_modify_upcall(c->evd, KEVD_UPCALL_DISABLE, NULL,
				   KEVD_UPCALL_INVOC_ANY);
	}
	for (i = 0; i < n; i++)
		raw_cookie(c, wcs[i].wr_id);
}

static void raw_ev_fn(void *ctx, const struct kevd_event *ev, bool more)
{
	struct raw_cons *c = ctx;

	if (ev->event_number == KEVD_SOFTWARE_EVENT) {
		atomic_inc(&c->sw_events);
		return;
	}
	raw_cookie(c, ev->dto.cookie);
	atomic_inc(&c->dto_events);
}

/*
 * The raw flavour: completions the poller takes straight from the CQ
 * come as whole polls of work completions (a burst of 32 in one call),
 * the rest as DAT events to func; every completion once, in CQ order,
 * across both. Software events reach func. A wc_func that disables
 * upcalls keeps its whole batch (nothing comes back to dequeue), and
 * after it the completions wait for the consumer's dequeue.
 */
static void kevd_consumer_raw_upcall(struct kunit *test)
{
	struct kevd_upcall up = { .func = raw_ev_fn, .wc_func = raw_wc_fn };
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct raw_cons *c;
	u32 pushed, i;
	struct ib_cq *cq;
	int calls;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	evs = kunit_kcalloc(test, 8, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, c && evs);
	up.ctx = c;
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	c->evd = si_evd(test, hca, 256, 512, up);
	cq = kevd_cq(c->evd);

	/* one burst at a time, each into an idle EVD */
	for (i = 0; i < 8; i++) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 32), 32);
		KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&c->total,
							     32 * (i + 1)));
	}
	KUNIT_EXPECT_EQ(test, atomic_read(&c->wcs) +
			atomic_read(&c->dto_events), 256);
	KUNIT_EXPECT_GE(test, atomic_read(&c->max_n), 32);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_se(c->evd, NULL), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->sw_events, 3));

	/* bursts until a wc_func call disables upcalls: it keeps its batch */
	WRITE_ONCE(c->disable, true);
	calls = atomic_read(&c->calls);
	pushed = 256;
	while (atomic_read(&c->calls) == calls && pushed < 256 + 16 * 16) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 16), 16);
		pushed += 16;
		KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&c->total, pushed));
	}
	KUNIT_ASSERT_EQ(test, atomic_read(&c->calls), calls + 1);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, 8), 8);
	KUNIT_EXPECT_TRUE(test, pull_take(c->evd, 0, evs, 8));
	for (i = 0; i < 8; i++)
		KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, (u64)pushed + i);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(c->evd, evs), -EAGAIN);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->calls), calls + 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->total), (int)pushed);

	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_NEW), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->order_errors), 0);
	KUNIT_EXPECT_EQ(test, c->next, (u64)pushed);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct raw_ops - what kevd_wc_opcode() said of each raw completion.
 * @seen: completions through wc_func.
 * @failed_seen: failed ones among them.
 * @wrong: ones whose operation was not what the verbs define.
 */
struct raw_ops {
	atomic_t seen, failed_seen, wrong;
};

static void raw_ops_wc_fn(void *ctx, const struct ib_wc *wcs, u32 n)
{
	struct raw_ops *r = ctx;
	u32 i, want;

	for (i = 0; i < n; i++) {
		bool ok = wcs[i].status == IB_WC_SUCCESS;

		want = ok ? KEVD_DTO_RDMA_READ : KEVD_DTO_UNKNOWN;
		if (kevd_wc_opcode(&wcs[i]) != want)
			atomic_inc(&r->wrong);
		if (!ok)
			atomic_inc(&r->failed_seen);
		atomic_inc(&r->seen);
	}
}

static void raw_ops_ev_fn(void *ctx, const struct kevd_event *ev, bool more)
{
	struct raw_ops *r = ctx;

	atomic_inc(&r->seen);
}

/*
 * A raw-completion upcall reads its completions with kevd_wc_opcode():
 * a failed one, whose opcode the verbs leave undefined, is
 * KEVD_DTO_UNKNOWN, not the stale opcode of the slot (an RDMA READ
 * here, as the successful completion before it). Before, the helper
 * returned the stale opcode.
 */
static void kevd_consumer_raw_failed_opcode(struct kunit *test)
{
	struct raw_ops *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_upcall up = {
		.func = raw_ops_ev_fn, .wc_func = raw_ops_wc_fn, .ctx = r,
	};
	struct ib_wc wcs[2] = {
		{ .wr_id = 0, .status = IB_WC_SUCCESS,
		  .opcode = IB_WC_RDMA_READ },
		{ .wr_id = 1, .status = IB_WC_WR_FLUSH_ERR,
		  .opcode = IB_WC_RDMA_READ },	/* stale */
	};
	struct fake_hca *hca;
	struct kevd *evd;

	KUNIT_ASSERT_NOT_NULL(test, r);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = si_evd(test, hca, 16, 16, up);
	/* one burst into an idle EVD: straight to wc_func */
	KUNIT_EXPECT_EQ(test, fake_cq_add_burst(kevd_cq(evd), wcs, 2), 2);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->seen, 2));
	KUNIT_EXPECT_EQ(test, atomic_read(&r->failed_seen), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->wrong), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- backpressure while upcalls run ------------------------------------- */

struct bp_rec {
	struct completion entered;
	struct completion release;
	atomic_t dto, sw, order_errors;
	u64 next_dto;
	unsigned long next_sw;
};

static void bp_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct bp_rec *r = ctx;

	if (ev->event_number == KEVD_DTO_COMPLETION_EVENT) {
		if (ev->dto.cookie != r->next_dto)
			atomic_inc(&r->order_errors);
		r->next_dto = ev->dto.cookie + 1;
		atomic_inc(&r->dto);
		return;
	}
	if ((unsigned long)ev->software.pointer != r->next_sw)
		atomic_inc(&r->order_errors);
	r->next_sw = (unsigned long)ev->software.pointer + 1;
	if (atomic_inc_return(&r->sw) == 1) {
		complete(&r->entered);
		wait_for_completion(&r->release);
	}
}

#define BP_DTO	32

/*
 * Under SINGLE_INSTANCE, with the upcall busy, software events fill the
 * ring and completions wait in the CQ; once the upcall returns the drain
 * meets a full ring (backpressure), and everything still arrives, in
 * order per stream, nothing dropped.
 */
static void kevd_consumer_backpressure_with_upcalls(struct kunit *test)
{
	struct bp_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_upcall up = { bp_upcall, r };
	struct fake_hca *hca;
	struct kevd_param p;
	struct kevd *evd;
	unsigned long nsw = 1;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	init_completion(&r->entered);
	init_completion(&r->release);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = si_evd(test, hca, 16, 64, up);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)0UL), 0);
	if (!wait_for_completion_timeout(&r->entered, CONS_WAIT)) {
		KUNIT_FAIL(test, "no upcall");
		goto out;
	}
	while (!kevd_post_se(evd, (void *)nsw))
		nsw++;
	for (i = 0; i < BP_DTO; i++)
		KUNIT_EXPECT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	fake_cq_fire(kevd_cq(evd));
	complete(&r->release);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->dto, BP_DTO));
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->sw, nsw));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_GE(test, nsw, (unsigned long)p.qlen);
	KUNIT_EXPECT_GT(test, p.stats.backpressure_stalls, 0ULL);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], (u64)BP_DTO);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
out:
	complete(&r->release);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- an endpoint's connection events and its completions ----------------- */

#define FENCE_QLEN	16
#define FENCE_WCS	128

/*
 * An endpoint's EVD: its completions and its connection events; on the
 * poller of CPU 0, as a poller_mark's EVD.
 */
static struct kevd *fence_evd(struct kunit *test, struct fake_hca *hca)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.cpu = 0;
	attr.qlen = FENCE_QLEN;
	attr.cq_depth = 4 * FENCE_WCS;
	attr.flags = KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

static u32 fence_qlen(struct kevd *evd)
{
	struct kevd_param p;

	return kevd_query(evd, &p) ? 0 : p.qlen;
}

/*
 * Wait until the ring of @evd is full of completions, with more waiting
 * in the CQ (backpressure), and take the first one; returns its cookie.
 */
static u64 fence_fill(struct kunit *test, struct kevd *evd)
{
	u32 qlen = fence_qlen(evd), nmore = 0;
	struct kevd_event ev = { };

	KUNIT_ASSERT_LT(test, qlen + 1, (u32)FENCE_WCS);
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), FENCE_WCS),
			FENCE_WCS);
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 60 * USEC_PER_SEC, qlen, &ev,
					&nmore), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	/* at most the ring's worth left the CQ: the rest is in flight */
	KUNIT_EXPECT_GE(test, fake_cq_count(kevd_cq(evd)),
			(u32)FENCE_WCS - qlen - 1);
	return ev.dto.cookie;
}

static int fence_take(struct kevd *evd, struct kevd_event *ev)
{
	u32 nmore;

	return kevd_wait(evd, 60 * USEC_PER_SEC, 1, ev, &nmore);
}

/*
 * Take events until @number arrives; check the completions before it are
 * in order from @next. Returns how many completions came before it.
 */
static u32 fence_until(struct kunit *test, struct kevd *evd, u32 number,
		       u64 *next)
{
	struct kevd_event ev;
	u32 n = 0;

	for (;;) {
		if (fence_take(evd, &ev)) {
			KUNIT_FAIL(test, "event %#x never came", number);
			return n;
		}
		if (ev.event_number == number)
			return n;
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_DTO_COMPLETION_EVENT);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, *next);
		(*next)++;
		n++;
	}
}

/*
 * One EVD carries an endpoint's completions and its connection events.
 * DISCONNECTED, posted while its flush completions still wait in the CQ
 * (the ring is full), comes after every one of them: on the old code it
 * overtook the CQ (on rxe0, 40 of 64 flushes came after it). ESTABLISHED
 * is not held back: it comes ahead of what the CQ still holds.
 */
static void kevd_consumer_disconnect_after_flushes(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = test,
	};
	struct kevd_event est = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
		.connection.ep = test,
	};
	struct fake_hca *hca;
	struct kevd_param p;
	struct kevd *evd;
	u64 next;
	u32 n;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = fence_evd(test, hca);

	next = fence_fill(test, evd) + 1;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	n = fence_until(test, evd, KEVD_CONNECTION_EVENT_DISCONNECTED, &next);
	KUNIT_EXPECT_EQ(test, n, (u32)FENCE_WCS - 1);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(kevd_cq(evd)));

	next = fence_fill(test, evd) + 1;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &est), 0);
	n = fence_until(test, evd, KEVD_CONNECTION_EVENT_ESTABLISHED, &next);
	KUNIT_EXPECT_LE(test, n, fence_qlen(evd));
	/* the rest follow it, in order */
	while (next < 2 * FENCE_WCS) {
		struct kevd_event ev;

		if (fence_take(evd, &ev)) {
			KUNIT_FAIL(test, "completion %llu never came", next);
			break;
		}
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, next);
		next++;
	}
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_CONNECTION], 2ULL);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * A consumer that dequeues after a connection event was posted to its
 * endpoint's EVD (upcalls disabled, the CQ empty, nobody else on the
 * EVD) finds it, as on an EVD without the DTO stream: the post makes the
 * pass that queues it behind the CQ itself. Before, the post queued a
 * poller's pass, and the dequeue found the EVD empty until that poller
 * had run.
 */
static void kevd_consumer_disconnect_dequeued_after_post(struct kunit *test)
{
	struct kevd_event est = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	static const u32 want[] = { KEVD_CONNECTION_EVENT_ESTABLISHED,
				    KEVD_CONNECTION_EVENT_DISCONNECTED };
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd *evd;
	unsigned long i;
	unsigned int j;

	hca = fake_hca_create(FAKE_HCA_STRICT_IGNORE);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = fence_evd(test, hca);
	for (i = 1; i <= 8; i++) {
		est.connection.ep = (void *)i;
		disc.connection.ep = (void *)i;
		KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &est), 0);
		KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &disc), 0);
		for (j = 0; j < ARRAY_SIZE(want); j++) {
			memset(&ev, 0, sizeof(ev));
			KUNIT_ASSERT_EQ_MSG(test, kevd_dequeue(evd, &ev), 0,
					    "event %#x of endpoint %lu",
					    want[j], i);
			KUNIT_EXPECT_EQ(test, ev.event_number, want[j]);
			KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)i);
		}
		KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	}
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * The connection stream keeps its order: ESTABLISHED of one endpoint,
 * posted while DISCONNECTED of another is held behind the CQ (the ring is
 * full), comes after it, not ahead (on the old code it overtook it).
 */
static void kevd_consumer_established_behind_held(struct kunit *test)
{
	static int ep_a, ep_b;
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = &ep_a,
	};
	struct kevd_event est = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
		.connection.ep = &ep_b,
	};
	struct kevd_event ev = { };
	struct fake_hca *hca;
	struct kevd_param p;
	struct kevd *evd;
	u64 next;
	u32 n;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = fence_evd(test, hca);

	next = fence_fill(test, evd) + 1;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &est), 0);
	n = fence_until(test, evd, KEVD_CONNECTION_EVENT_DISCONNECTED, &next);
	KUNIT_EXPECT_EQ(test, n, (u32)FENCE_WCS - 1);
	KUNIT_EXPECT_EQ(test, fence_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
	KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)&ep_b);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(kevd_cq(evd)));
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_CONNECTION], 2ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

static u64 fence_sum(const u64 *per_stream)
{
	u64 sum = 0;
	int i;

	for (i = 0; i < KEVD_NR_STREAMS; i++)
		sum += per_stream[i];
	return sum;
}

/*
 * A connection event still held behind the CQ when the EVD is freed is
 * counted as discarded, as queued events are: the totals balance.
 */
static void kevd_consumer_fenced_event_discarded(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	struct kevd_stats before, after;
	struct fake_hca *hca;
	struct kevd *evd;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = fence_evd(test, hca);
	kevd_total_stats(&before);
	/* the ring stays full: DISCONNECTED cannot pass the CQ */
	fence_fill(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	kevd_total_stats(&after);
	KUNIT_EXPECT_EQ(test, after.posted[KEVD_STREAM_CONNECTION] -
			before.posted[KEVD_STREAM_CONNECTION], 1ULL);
	KUNIT_EXPECT_EQ(test, after.delivered[KEVD_STREAM_CONNECTION] -
			before.delivered[KEVD_STREAM_CONNECTION], 0ULL);
	KUNIT_EXPECT_GT(test, after.discarded - before.discarded, 1ULL);
	KUNIT_EXPECT_EQ(test, fence_sum(after.posted) - fence_sum(before.posted),
			fence_sum(after.delivered) -
			fence_sum(before.delivered) +
			after.discarded - before.discarded);
	fake_hca_destroy(hca);
}

/*
 * A CQ in error: its polls fail, and the provider reports it
 * (IB_EVENT_CQ_ERR). A DISCONNECTED held behind it then comes to the
 * thread already asleep in kevd_wait(): nothing more leaves that CQ, and
 * the consumer must learn its endpoint is gone. Until the report, a
 * failed poll holds it (the failure may pass).
 */
static void kevd_consumer_cq_error_releases_held(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = test,
	};
	struct kevd_test_waiter *w;
	struct task_struct *t;
	struct kevd_event ev;
	struct fake_hca *hca;

	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	init_completion(&w->done);
	w->timeout_us = 20 * USEC_PER_SEC;
	w->threshold = 1;
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	w->evd = fence_evd(test, hca);
	fake_cq_fail_polls(kevd_cq(w->evd), -EIO);
	KUNIT_EXPECT_EQ(test, kevd_post_event(w->evd, &disc), 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), -EAGAIN);
	t = kthread_run(kevd_test_waiter_fn, w, "kevd_cons_cqerr");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	KUNIT_EXPECT_TRUE(test, kevd_test_waiting(w->evd));
	fake_cq_overrun(kevd_cq(w->evd));
	wait_for_completion(&w->done);
	kthread_stop(t);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
	KUNIT_EXPECT_PTR_EQ(test, w->ev.connection.ep, (void *)test);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(w->evd), 0);
	fake_hca_destroy(hca);
}

/*
 * Held events that always fit: the headroom's 8 slots (api.rst), which a
 * pass's reservation in flight never takes.
 */
#define FENCE_HELD	8

/*
 * Connection events held behind the CQ are on the EVD: a resize below
 * them fails with -EBUSY, as one below the queued events does (on the old
 * code it shrank the ring under them). The CQ's polls fail, so they stay
 * held until the test lets the CQ be drained; then every one comes, after
 * the completion that was in the CQ before them.
 */
static void kevd_consumer_resize_counts_held(struct kunit *test)
{
	struct poller_mark *m = kunit_kzalloc(test, sizeof(*m), GFP_KERNEL);
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
		.connection.ep = test,
	};
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd_param p;
	unsigned long end;
	struct kevd *evd;
	u32 i, nmore;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, m);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	poller_mark_create(test, m);
	evd = fence_evd(test, hca);
	KUNIT_ASSERT_GE(test, fence_qlen(evd), (u32)FENCE_HELD);

	fake_cq_fail_polls(kevd_cq(evd), -EIO);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(evd)), 0);
	for (i = 0; i < FENCE_HELD; i++)
		KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	/*
	 * The passes the posts scheduled are over (their failed polls
	 * reserved room, which would refuse any shrink): the checks below
	 * are about the held events alone.
	 */
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	KUNIT_EXPECT_TRUE(test, poller_mark_pass(test, m));
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 1), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, FENCE_HELD - 1), -EBUSY);
	/* a pass's failed poll may still reserve room: -EBUSY, try again */
	end = jiffies + CONS_WAIT;
	while ((ret = kevd_resize(evd, FENCE_HELD)) == -EBUSY &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_EQ(test, ret, 0);

	fake_cq_fail_polls(kevd_cq(evd), 0);
	fake_cq_fire(kevd_cq(evd));
	KUNIT_EXPECT_EQ(test, fence_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	for (i = 0; i < FENCE_HELD; i++) {
		if (fence_take(evd, &ev)) {
			KUNIT_FAIL(test, "held event %u never came", i);
			break;
		}
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
	}
	KUNIT_EXPECT_EQ(test, kevd_wait(evd, 0, 1, &ev, &nmore), -ETIMEDOUT);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_CONNECTION],
			(u64)FENCE_HELD);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(m->evd), 0);
	fake_hca_destroy(hca);
}

/* --- a CQ sized by the queue length follows it ---------------------------- */

/*
 * A consumer sizes its work by the queue length. After kevd_resize() up,
 * a CQ whose depth came from the queue length holds that many
 * completions: none overruns. A provider that cannot resize CQs makes the
 * resize fail and nothing changes; an explicit CQ depth is the
 * consumer's and stays.
 */
static void kevd_consumer_resize_grows_cq(struct kunit *test)
{
	struct fake_cq_stats st;
	struct kevd_param p;
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd *evd;
	u32 qlen, i, nmore;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);

	evd = cq_evd(test, hca, 16, 0);
	KUNIT_ASSERT_EQ(test, kevd_resize(evd, 512), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	KUNIT_EXPECT_GE(test, (u32)kevd_cq(evd)->cqe, qlen);
	/* a burst of qlen completions before the consumer looks */
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), qlen),
			(int)qlen);
	for (i = 0; i < qlen; i++) {
		if (kevd_wait(evd, 60 * USEC_PER_SEC, 1, &ev, &nmore))
			break;
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
	}
	KUNIT_EXPECT_EQ(test, i, qlen);
	fake_cq_stats(kevd_cq(evd), &st);
	KUNIT_EXPECT_EQ(test, st.overruns, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);

	/* an explicit depth stays what the consumer asked */
	evd = cq_evd(test, hca, 16, 64);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 512), 0);
	KUNIT_EXPECT_EQ(test, kevd_cq(evd)->cqe, 64);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);

	/* a provider without resize_cq: refused, nothing changed */
	fake_hca_set_no_resize(hca, true);
	evd = cq_evd(test, hca, 16, 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 512), -EOPNOTSUPP);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, qlen);
	/* shrinking needs no bigger CQ */
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 4), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- the counts balance -------------------------------------------------- */

/*
 * posted = delivered + discarded + queued, per EVD and in the totals:
 * what kevd_free() discards is counted.
 */
static void kevd_consumer_counts_balance(struct kunit *test)
{
	struct kevd_stats *before = kunit_kzalloc(test, sizeof(*before),
						  GFP_KERNEL);
	struct kevd_stats *after = kunit_kzalloc(test, sizeof(*after),
						 GFP_KERNEL);
	struct kevd_param *p = kunit_kzalloc(test, sizeof(*p), GFP_KERNEL);
	struct kevd_event ev;
	struct kevd *evd;
	u64 posted = 0, delivered = 0;
	int i, s;

	KUNIT_ASSERT_NOT_NULL(test, before);
	KUNIT_ASSERT_NOT_NULL(test, after);
	KUNIT_ASSERT_NOT_NULL(test, p);
	kevd_total_stats(before);
	evd = cons_create(test, 64, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			  NULL, NULL);
	for (i = 0; i < 40; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, NULL), 0);
	for (i = 0; i < 15; i++)
		KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, p), 0);
	KUNIT_EXPECT_EQ(test, p->stats.posted[KEVD_STREAM_SOFTWARE], 40ULL);
	KUNIT_EXPECT_EQ(test, p->stats.delivered[KEVD_STREAM_SOFTWARE], 15ULL);
	KUNIT_EXPECT_EQ(test, p->count, 25U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	kevd_total_stats(after);
	for (s = 0; s < KEVD_NR_STREAMS; s++) {
		posted += after->posted[s] - before->posted[s];
		delivered += after->delivered[s] - before->delivered[s];
	}
	KUNIT_EXPECT_EQ(test, after->discarded - before->discarded, 25ULL);
	KUNIT_EXPECT_EQ(test, posted, delivered + after->discarded -
			before->discarded);
}

/**
 * struct handed_cons - a SINGLE_INSTANCE upcall that reads its counters.
 * @evd: its EVD.
 * @seen: events its upcall got, per stream.
 * @behind: upcalls whose kevd_query() counted fewer delivered (or posted)
 *	events of their stream than the upcall had got, its own included.
 * @errors: failed queries, and events of neither stream.
 */
struct handed_cons {
	struct kevd *evd;
	atomic_t seen[KEVD_NR_STREAMS];
	atomic_t behind;
	atomic_t errors;
};

static void handed_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct handed_cons *c = ctx;
	struct kevd_param p;
	int s, seen;

	if (ev->event_number == KEVD_DTO_COMPLETION_EVENT) {
		s = KEVD_STREAM_DTO;
	} else if (ev->event_number == KEVD_SOFTWARE_EVENT) {
		s = KEVD_STREAM_SOFTWARE;
	} else {
		atomic_inc(&c->errors);
		return;
	}
	seen = atomic_inc_return(&c->seen[s]);
	if (kevd_query(c->evd, &p))
		atomic_inc(&c->errors);
	else if (p.stats.delivered[s] < seen || p.stats.posted[s] < seen)
		atomic_inc(&c->behind);
}

/*
 * "delivered" counts an event once it is handed to the consumer: an
 * upcall that queries its EVD finds its own event counted, whether it
 * came straight from the CQ (the direct path of an empty ring) or from
 * the ring; so does a thread it tells.
 */
static void kevd_consumer_counts_handed(struct kunit *test)
{
	struct handed_cons *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_upcall up = { .func = handed_upcall };
	struct fake_hca *hca;
	struct kevd_param p;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, c);
	/*
	 * A drain reserves up to 64 slots while it polls (api.rst): with
	 * 128, the 8 posts below always find room beside one.
	 */
	c->evd = si_hca_evd(test, &hca, 128, 64, up, c);
	for (i = 0; i < 32; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(kevd_cq(c->evd)), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->seen[KEVD_STREAM_DTO],
						     32));
	for (i = 0; i < 8; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(c->evd, NULL), 0);
	KUNIT_EXPECT_TRUE(test,
			  kevd_test_wait_count(&c->seen[KEVD_STREAM_SOFTWARE],
					       8));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->behind), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], 32ULL);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], 32ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE], 8ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct ordered_cons - a thread that posts and dequeues, one at a time.
 * @evd: its EVD (DISABLE policy, software events).
 * @rounds: post-dequeue rounds to make.
 * @errors: failed posts and dequeues.
 * @done: the thread has finished.
 */
struct ordered_cons {
	struct kevd *evd;
	u32 rounds;
	atomic_t errors;
	struct completion done;
};

static int ordered_cons_fn(void *arg)
{
	struct ordered_cons *c = arg;
	struct kevd_event ev;
	u32 i;

	for (i = 0; i < c->rounds; i++) {
		if (kevd_post_se(c->evd, NULL) || kevd_dequeue(c->evd, &ev))
			atomic_inc(&c->errors);
		cond_resched();
	}
	complete(&c->done);
	return 0;
}

/*
 * A monitor queries an EVD while another thread posts and takes events:
 * no answer counts an event as delivered before it counts it as posted.
 */
static void kevd_consumer_query_counts_ordered(struct kunit *test)
{
	struct ordered_cons *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	const int s = KEVD_STREAM_SOFTWARE;
	struct task_struct *t;
	struct kevd_param p;
	u32 queries = 0, ahead = 0;

	KUNIT_ASSERT_NOT_NULL(test, c);
	init_completion(&c->done);
	c->rounds = 100000;
	c->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			     NULL, NULL);
	t = kthread_run(ordered_cons_fn, c, "kevd_cons_ordered");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	while (!completion_done(&c->done)) {
		if (!kevd_query(c->evd, &p) &&
		    p.stats.delivered[s] > p.stats.posted[s])
			ahead++;
		queries++;
		cond_resched();
	}
	wait_for_completion(&c->done);
	kunit_info(test, "%u queries\n", queries);
	KUNIT_EXPECT_EQ(test, ahead, 0U);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->errors), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.posted[s], (u64)c->rounds);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[s], (u64)c->rounds);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
}

/* --- a randomized, model-checked stress ---------------------------------- */

static unsigned long consumer_seed;
module_param(consumer_seed, ulong, 0444);
MODULE_PARM_DESC(consumer_seed,
		 "Seed of kevd_consumer_random (0: a random one; the test prints it)");
static unsigned int consumer_ops = 1000000;
module_param(consumer_ops, uint, 0444);
MODULE_PARM_DESC(consumer_ops,
		 "Operations per kind of kevd_consumer_random, shared by its parts (default 10^6)");

#define RND_THREADS	3
#define RND_SEQS	BIT(20)
#define RND_CHANNELS	16	/* poller threads */
#define RND_PROD_SHIFT	24

enum rnd_kind {
	RND_STRICT,	/* SINGLE/NOTIFY: order checked */
	RND_MANY,	/* MANY too: no order check */
	RND_ANY,	/* MANY too, from any thread */
};

struct rnd;

struct rnd_obj {		/* one upcall object per policy */
	struct rnd *r;
	int policy;
};

struct rnd {
	enum rnd_kind kind;
	struct kevd *evd;
	u64 seed;
	u32 ops_per_thread;
	struct mutex model;	/* the policy as the model knows it */
	int policy;
	bool disabled_inside;	/* DISABLE came from inside an upcall */
	u32 epoch;		/* DISABLEs so far */
	u32 slips;		/* ANY: invocations allowed after DISABLE */
	struct rnd_obj obj[3];	/* SINGLE, NOTIFY, MANY */
	unsigned long *posted[RND_THREADS];
	unsigned long *seen[RND_THREADS];
	spinlock_t chan_lock;	/* channel bookkeeping */
	struct task_struct *chan_task[RND_CHANNELS];
	s64 last[RND_CHANNELS][RND_THREADS];
	atomic_t inside;
	atomic_t single_inside;
	atomic_t dups, unexpected, order_errors, overlaps;
	atomic_t disabled_invocations, calls_after_disable;
	atomic_t api_errors;
	atomic_t ops;
	char why[4][96];	/* the first order errors, for the log */
};

static int rnd_obj_index(int policy)
{
	return policy == KEVD_UPCALL_SINGLE_INSTANCE ? 0 :
	       policy == KEVD_UPCALL_NOTIFY ? 1 : 2;
}

/* The channel of the current task: each consumer thread, each poller. */
static int rnd_channel(struct rnd *r)
{
	unsigned long flags;
	int i;

	spin_lock_irqsave(&r->chan_lock, flags);
	for (i = 0; i < RND_CHANNELS; i++) {
		if (!r->chan_task[i]) {
			r->chan_task[i] = current;
			memset(r->last[i], 0xff, sizeof(r->last[i]));
		}
		if (r->chan_task[i] == current)
			break;
	}
	spin_unlock_irqrestore(&r->chan_lock, flags);
	return i;
}

/*
 * An event reached the consumer. @last: the channel's last sequence per
 * producer, to check order on (one thread's), or NULL.
 */
static void rnd_seen(struct rnd *r, const struct kevd_event *ev, s64 *last)
{
	unsigned long v;
	u32 prod, seq;

	if (ev->event_number == KEVD_SOFTWARE_EVENT)
		v = (unsigned long)ev->software.pointer;
	else if (ev->event_number == KEVD_CONNECTION_EVENT_ESTABLISHED)
		v = (unsigned long)ev->connection.ep;
	else
		v = ~0UL;
	prod = v >> RND_PROD_SHIFT;
	seq = v & (BIT(RND_PROD_SHIFT) - 1);
	if (prod >= RND_THREADS || seq >= RND_SEQS ||
	    !test_bit(seq, r->posted[prod])) {
		atomic_inc(&r->unexpected);
		return;
	}
	if (test_and_set_bit(seq, r->seen[prod]))
		atomic_inc(&r->dups);
	if (!last)
		return;
	if ((s64)seq <= last[prod]) {
		int e = atomic_inc_return(&r->order_errors) - 1;

		if (e < ARRAY_SIZE(r->why))
			snprintf(r->why[e], sizeof(r->why[e]),
				 "%s: producer %u seq %u after %lld (policy %d, epoch %u)",
				 current->comm, prod, seq, last[prod],
				 READ_ONCE(r->policy), READ_ONCE(r->epoch));
	}
	last[prod] = seq;
}

/* The upcall's channel: its poller's (NULL if not checked). */
static s64 *rnd_upcall_channel(struct rnd *r)
{
	int ch;

	if (r->kind != RND_STRICT)
		return NULL;
	ch = rnd_channel(r);
	return ch < RND_CHANNELS ? r->last[ch] : NULL;
}

static const int rnd_enabled[] = {
	KEVD_UPCALL_SINGLE_INSTANCE, KEVD_UPCALL_NOTIFY, KEVD_UPCALL_MANY,
};

static int rnd_pick_policy(struct rnd *r, struct rnd_state *st)
{
	u32 n = r->kind == RND_STRICT ? 2 : 3;

	return rnd_enabled[prandom_u32_state(st) % n];
}

static void rnd_upcall_fn(void *ctx, const struct kevd_event *ev, bool more);

/* Change the policy and tell the model; under r->model. */
static void rnd_modify(struct rnd *r, int policy, int flag, bool inside)
{
	struct kevd_upcall up;
	int ret;

	lockdep_assert_held(&r->model);
	if (policy == KEVD_UPCALL_DISABLE) {
		ret = kevd_modify_upcall(r->evd, policy, NULL, flag);
	} else {
		up = (struct kevd_upcall){ rnd_upcall_fn,
					   &r->obj[rnd_obj_index(policy)] };
		ret = kevd_modify_upcall(r->evd, policy, &up, flag);
	}
	if (ret == -EBUSY && policy != KEVD_UPCALL_DISABLE)
		return;		/* a thread waits: enabling is refused */
	if (ret) {
		atomic_inc(&r->api_errors);
		return;
	}
	if (policy == KEVD_UPCALL_DISABLE) {
		r->disabled_inside = inside;
		r->epoch++;
		/*
		 * A batch of another poller may be past its check: one
		 * invocation per poller may slip. Only STRICT's single
		 * owner, disabling from its own upcall, allows none.
		 */
		r->slips = r->kind == RND_STRICT && inside ? 0 :
			   kevd_nr_pollers();
	}
	r->policy = policy;
}

static bool rnd_upcalls_on(int policy)
{
	return policy != KEVD_UPCALL_DISABLE && policy != KEVD_UPCALL_TEARDOWN;
}

static void rnd_upcall_fn(void *ctx, const struct kevd_event *ev, bool more)
{
	struct rnd_obj *o = ctx;
	struct rnd *r = o->r;
	struct rnd_state st;
	struct kevd_event e;
	bool single = o->policy == KEVD_UPCALL_SINGLE_INSTANCE;
	int n;

	/* no SINGLE_INSTANCE invocation beside any other */
	if (atomic_inc_return(&r->inside) > 1 && single)
		atomic_inc(&r->overlaps);
	if (atomic_read(&r->single_inside))
		atomic_inc(&r->overlaps);
	if (single)
		atomic_inc(&r->single_inside);

	mutex_lock(&r->model);
	if (r->policy == KEVD_UPCALL_DISABLE) {
		if (!r->slips)
			atomic_inc(&r->disabled_invocations);
		else
			r->slips--;
	}
	mutex_unlock(&r->model);

	prandom_seed_state(&st, r->seed ^ (u64)(uintptr_t)ev ^
			   atomic_read(&r->ops));
	if (ev) {
		rnd_seen(r, ev, rnd_upcall_channel(r));
	} else {
		/* NOTIFY: the doorbell; dequeue some */
		for (n = prandom_u32_state(&st) % 8; n >= 0; n--)
			if (!kevd_dequeue(r->evd, &e))
				rnd_seen(r, &e, rnd_upcall_channel(r));
	}

	/* sometimes change the policy from inside the upcall (not at the end) */
	n = prandom_u32_state(&st) % 16;
	mutex_lock(&r->model);
	if (n < 2 && r->policy != KEVD_UPCALL_TEARDOWN)
		rnd_modify(r, KEVD_UPCALL_DISABLE, KEVD_UPCALL_INVOC_ANY, true);
	else if (n == 2 && rnd_upcalls_on(r->policy))
		rnd_modify(r, rnd_pick_policy(r, &st),
			   prandom_u32_state(&st) & 1, true);
	mutex_unlock(&r->model);
	if (single)
		atomic_dec(&r->single_inside);
	atomic_dec(&r->inside);
}

struct rnd_thread {
	struct rnd *r;
	u32 id;
	u32 seq;
	u32 epoch;		/* the DISABLE period of last[] */
	s64 last[RND_THREADS];
	struct completion done;
};

/*
 * A thread's dequeue. STRICT checks order within a DISABLE period: a
 * batch stopped by the change gives its rest back ahead of the ring, and
 * until it has, a dequeue takes nothing, so events come in order even
 * while the stopped batch's last invocation runs. While upcalls are
 * enabled, a batch may hold older events than the ring's head: no order
 * to check then.
 */
static void rnd_dequeue(struct rnd_thread *t)
{
	struct rnd *r = t->r;
	struct kevd_event ev;
	s64 *last = NULL;

	mutex_lock(&r->model);
	if (r->kind == RND_STRICT && r->policy == KEVD_UPCALL_DISABLE) {
		if (t->epoch != r->epoch) {
			t->epoch = r->epoch;
			memset(t->last, 0xff, sizeof(t->last));
		}
		last = t->last;
	}
	if (!kevd_dequeue(r->evd, &ev))
		rnd_seen(r, &ev, last);
	mutex_unlock(&r->model);
}

static void rnd_post(struct rnd_thread *t, bool se)
{
	struct rnd *r = t->r;
	struct kevd_event ev = { .event_number =
				 KEVD_CONNECTION_EVENT_ESTABLISHED };
	void *v = (void *)(((unsigned long)t->id << RND_PROD_SHIFT) | t->seq);
	int ret;

	if (t->seq >= RND_SEQS)
		return;
	/* marked before the post: a consumer may see it at once */
	set_bit(t->seq, r->posted[t->id]);
	if (se) {
		ret = kevd_post_se(r->evd, v);
	} else {
		ev.connection.ep = v;
		ret = kevd_post_event(r->evd, &ev);
	}
	if (ret) {		/* full (-ENOSPC) or dropped (-EOVERFLOW) */
		clear_bit(t->seq, r->posted[t->id]);
		if (ret != -ENOSPC && ret != -EOVERFLOW)
			atomic_inc(&r->api_errors);
		return;
	}
	t->seq++;
}

static int rnd_thread_fn(void *data)
{
	struct rnd_thread *t = data;
	struct rnd *r = t->r;
	struct rnd_state st;
	struct kevd_event ev;
	u32 i, nmore, op;
	int ret;

	prandom_seed_state(&st, r->seed + t->id);
	for (i = 0; i < r->ops_per_thread; i++) {
		atomic_inc(&r->ops);
		op = prandom_u32_state(&st) % 100;
		if (op < 40) {
			rnd_post(t, true);
		} else if (op < 44) {
			rnd_post(t, false);
		} else if (op < 68) {
			rnd_dequeue(t);
		} else if (op < 72) {
			ret = kevd_wait(r->evd, prandom_u32_state(&st) % 2000,
					1 + prandom_u32_state(&st) % 8, &ev,
					&nmore);
			if (!ret)
				rnd_seen(r, &ev, NULL);
			else if (ret != -EINVAL && ret != -EBUSY &&
				 ret != -ETIMEDOUT && ret != -ECANCELED)
				atomic_inc(&r->api_errors);
		} else if (op < 84) {
			mutex_lock(&r->model);
			if (r->kind != RND_MANY ||
			    r->policy == KEVD_UPCALL_DISABLE)
				rnd_modify(r, rnd_pick_policy(r, &st),
					   prandom_u32_state(&st) & 1, false);
			mutex_unlock(&r->model);
		} else if (op < 88 && r->kind != RND_MANY) {
			mutex_lock(&r->model);
			rnd_modify(r, KEVD_UPCALL_DISABLE,
				   KEVD_UPCALL_INVOC_ANY, false);
			mutex_unlock(&r->model);
		} else if (op < 94) {
			ret = kevd_resize(r->evd, 8 + prandom_u32_state(&st) % 250);
			if (ret && ret != -EBUSY)
				atomic_inc(&r->api_errors);
		} else if (op < 96) {
			kevd_set_unwaitable(r->evd, prandom_u32_state(&st) & 1);
		} else {
			cond_resched();
		}
		if (!(i & 255))
			cond_resched();
	}
	complete(&t->done);
	return 0;
}

static const enum rnd_kind rnd_kinds[] = { RND_STRICT, RND_MANY, RND_ANY };

static void rnd_desc(const enum rnd_kind *k, char *desc)
{
	static const char * const names[] = { "strict", "many", "any" };

	strscpy(desc, names[*k], KUNIT_PARAM_DESC_SIZE);
}

KEVD_TEST_PARTS_PARAM(rnd_kind, rnd_kinds, rnd_desc, 6);

/*
 * Threads post (software and connection events), dequeue, wait with
 * random thresholds and timeouts, change the upcall policy (also from
 * inside upcalls), resize and toggle unwaitable, at random; a plain model
 * checks every event exactly once, order per producer on each consumer
 * (strict: never MANY, and a thread's dequeue only while upcalls are off),
 * no invocation while disabled (a change from another thread lets at most
 * one invocation per poller slip, the one past its check), no
 * SINGLE_INSTANCE invocation beside another. consumer_seed replays a run.
 */
static void kevd_consumer_random(struct kunit *test)
{
	const struct kevd_test_part *part = test->param_value;
	const enum rnd_kind kind = *(const enum rnd_kind *)part->param;
	struct rnd *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct rnd_thread *t = kunit_kcalloc(test, RND_THREADS, sizeof(*t),
					     GFP_KERNEL);
	struct task_struct *task;
	struct kevd_event ev;
	u64 posted = 0, seen = 0;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_NOT_NULL(test, t);
	r->kind = kind;
	r->seed = consumer_seed ?: get_random_u64();
	r->ops_per_thread = consumer_ops / part->parts / RND_THREADS;
	kunit_info(test, "seed %llu (replay: modprobe kevd_test consumer_seed=%llu consumer_ops=%u), %u operations",
		   r->seed, r->seed, consumer_ops,
		   r->ops_per_thread * RND_THREADS);
	mutex_init(&r->model);
	spin_lock_init(&r->chan_lock);
	for (i = 0; i < ARRAY_SIZE(r->obj); i++)
		r->obj[i] = (struct rnd_obj){ r, rnd_enabled[i] };
	for (i = 0; i < RND_THREADS; i++) {
		r->posted[i] = kunit_kcalloc(test, BITS_TO_LONGS(RND_SEQS),
					     sizeof(long), GFP_KERNEL);
		r->seen[i] = kunit_kcalloc(test, BITS_TO_LONGS(RND_SEQS),
					   sizeof(long), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, r->posted[i]);
		KUNIT_ASSERT_NOT_NULL(test, r->seen[i]);
	}
	r->policy = KEVD_UPCALL_DISABLE;
	r->disabled_inside = true;
	r->evd = cons_create(test, 64, KEVD_SOFTWARE_FLAG | KEVD_CONNECTION_FLAG,
			     KEVD_UPCALL_DISABLE, NULL, NULL);

	for (i = 0; i < RND_THREADS; i++) {
		t[i].r = r;
		t[i].id = i;
		t[i].epoch = U32_MAX;	/* no period yet: last[] set at first */
		init_completion(&t[i].done);
		task = kthread_run(rnd_thread_fn, &t[i], "kevd_rnd/%u", i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	}
	for (i = 0; i < RND_THREADS; i++)
		wait_for_completion(&t[i].done);

	/* quiesce (upcalls in progress take the model's lock), then drain */
	mutex_lock(&r->model);
	r->policy = KEVD_UPCALL_TEARDOWN;
	mutex_unlock(&r->model);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(r->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	while (!kevd_dequeue(r->evd, &ev))
		rnd_seen(r, &ev, NULL);
	for (i = 0; i < RND_THREADS; i++) {
		posted += bitmap_weight(r->posted[i], RND_SEQS);
		seen += bitmap_weight(r->seen[i], RND_SEQS);
		KUNIT_EXPECT_TRUE_MSG(test, bitmap_equal(r->posted[i],
							 r->seen[i], RND_SEQS),
				      "producer %u: an event lost", i);
	}
	kunit_info(test, "%llu events posted, %llu seen, %d duplicated", posted,
		   seen, atomic_read(&r->dups));
	for (i = 0; i < ARRAY_SIZE(r->why) && r->why[i][0]; i++)
		kunit_info(test, "order error: %s", r->why[i]);
	KUNIT_EXPECT_GT(test, posted, 0ULL);
	KUNIT_EXPECT_EQ(test, posted, seen);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->dups), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->unexpected), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->overlaps), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->disabled_invocations), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->api_errors), 0);
	kevd_set_unwaitable(r->evd, false);
	KUNIT_EXPECT_EQ(test, kevd_free(r->evd), 0);
}

/* --- free from another EVD's upcall --------------------------------------- */

struct free_other {
	struct kevd *b;
	struct completion a_entered;
	struct completion b_posted;
	struct completion a_done;
	struct completion release;	/* the blockers' */
	atomic_t blocked;
	atomic_t b_calls;
	int rc_teardown;
	int rc_free;
};

static void free_other_a_upcall(void *ctx, const struct kevd_event *ev,
				bool more)
{
	struct free_other *f = ctx;

	complete(&f->a_entered);
	wait_for_completion(&f->b_posted);
	f->rc_teardown = kevd_modify_upcall(f->b, KEVD_UPCALL_TEARDOWN, NULL,
					    KEVD_UPCALL_INVOC_NEW);
	f->rc_free = kevd_free(f->b);
	complete(&f->a_done);
}

static void free_other_b_upcall(void *ctx, const struct kevd_event *ev,
				bool more)
{
	struct free_other *f = ctx;

	atomic_inc(&f->b_calls);
}

static void free_other_blocker(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct free_other *f = ctx;

	atomic_inc(&f->blocked);
	wait_for_completion(&f->release);
}

/*
 * A connection EVD's upcall tears down and frees a DTO EVD (B) that is
 * queued on the very poller running the upcall: every other poller is
 * inside an upcall of its own, so B has nowhere else to go. kevd_free()
 * must return: no poller waits for itself. B's queued event is discarded,
 * never delivered.
 */
static void kevd_consumer_free_other_from_upcall(struct kunit *test)
{
	struct kevd_upcall ua = { free_other_a_upcall, NULL };
	struct kevd_upcall ub = { free_other_b_upcall, NULL };
	struct kevd_upcall ublk = { free_other_blocker, NULL };
	unsigned int n = kevd_nr_pollers(), i;
	struct kevd **blockers;
	struct kevd_attr attr;
	struct free_other *f;
	struct kevd *a;
	long left;

	if (n > nr_cpu_ids)
		kunit_skip(test, "more pollers than CPU hints");
	f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	blockers = kunit_kcalloc(test, n, sizeof(*blockers), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_NOT_NULL(test, blockers);
	init_completion(&f->a_entered);
	init_completion(&f->b_posted);
	init_completion(&f->a_done);
	init_completion(&f->release);
	ua.ctx = f;
	ub.ctx = f;
	ublk.ctx = f;

	/* Pollers 1 .. n-1 each block in an upcall. */
	kevd_attr_init(&attr);
	attr.qlen = 4;
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = ublk;
	for (i = 1; i < n; i++) {
		attr.cpu = i;
		blockers[i] = kevd_create(NULL, &attr);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, blockers[i]);
		KUNIT_ASSERT_EQ(test, kevd_post_se(blockers[i], NULL), 0);
	}
	KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&f->blocked, n - 1));

	/* A and B on poller 0 (CPU hint 0) */
	attr.cpu = 0;
	attr.upcall = ua;
	a = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, a);
	attr.upcall = ub;
	f->b = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, f->b);
	KUNIT_ASSERT_EQ(test, kevd_post_se(a, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&f->a_entered,
							  CONS_WAIT), 0);
	/* Every poller is in an upcall: B queues on its home, poller 0. */
	KUNIT_ASSERT_EQ(test, kevd_post_se(f->b, NULL), 0);
	complete(&f->b_posted);
	left = wait_for_completion_timeout(&f->a_done, CONS_WAIT);
	complete_all(&f->release);
	KUNIT_ASSERT_GT_MSG(test, left, 0,
			    "kevd_free() from the upcall did not return");
	KUNIT_EXPECT_EQ(test, f->rc_teardown, 0);
	KUNIT_EXPECT_EQ(test, f->rc_free, 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&f->b_calls), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(a), 0);
	for (i = 1; i < n; i++)
		KUNIT_EXPECT_EQ(test, kevd_free(blockers[i]), 0);
}

/* --- frees from upcalls on two pollers ------------------------------------ */

/*
 * kevd_consumer_free_queued_elsewhere: an upcall on poller 1 frees B while B
 * waits, queued, on poller 0; poller 0 then passes B to poller 1 (its
 * next EVD, C, is slow). Before the fix poller 1 slept on, woken by the
 * shed but not looking at what came: neither poller made B's pass again.
 */
struct qfree {
	struct kevd *victim;
	struct task_struct *freer;
	struct completion w_entered, w_release, x_entered, x_release;
	struct completion c_slow_done, c_again, freed;
	atomic_t c_calls;
	int free_ret;
};

/* W, X: the first call blocks its poller until the test releases it. */
static void qf_w_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qfree *q = ctx;

	complete(&q->w_entered);
	wait_for_completion(&q->w_release);
}

static void qf_x_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qfree *q = ctx;

	complete(&q->x_entered);
	wait_for_completion(&q->x_release);
}

static void qf_c_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qfree *q = ctx;

	if (atomic_inc_return(&q->c_calls) == 1) {
		/* The stimulus (a slow upcall), not a synchronisation. */
		msleep(20);
		complete(&q->c_slow_done);
	} else {
		complete(&q->c_again);	/* the batch whose begin shed B */
	}
}

static void qf_f_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qfree *q = ctx;

	WRITE_ONCE(q->freer, current);
	q->free_ret = kevd_free(q->victim);
	complete(&q->freed);
}

static void qf_nop_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
}

static struct kevd *qf_create(struct kunit *test, kevd_upcall_func fn,
			      void *ctx, int cpu)
{
	struct kevd_upcall up = { fn, ctx };

	return kevd_test_create_on(test, 16, KEVD_SOFTWARE_FLAG,
				   KEVD_UPCALL_SINGLE_INSTANCE, &up, 0, cpu);
}

/* Until @t sleeps uninterruptibly; false if the bound runs out. */
static bool qf_asleep(struct task_struct *const *t)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct task_struct *task;

	for (;;) {
		task = READ_ONCE(*t);
		if (task && READ_ONCE(task->__state) == TASK_UNINTERRUPTIBLE)
			return true;
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
}

/*
 * An upcall that frees an EVD queued on another poller, busy in an upcall
 * of its own: kevd_free() takes the EVD off that poller's run list and
 * returns at once. That poller then runs a slow EVD's batch, which passes
 * on what it holds. Both pollers in upcalls when B and C are posted puts
 * them on their home, poller 0, behind each other.
 */
static void kevd_consumer_free_queued_elsewhere(struct kunit *test)
{
	struct kevd *w, *x, *c, *b, *f;
	struct qfree *q;
	long left;

	if (kevd_nr_pollers() != 2 || !cpu_online(1))
		kunit_skip(test, "needs two pollers, on CPUs 0 and 1");
	/* not the test's: a failed assertion leaves upcalls that use it */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, q);
	init_completion(&q->w_entered);
	init_completion(&q->w_release);
	init_completion(&q->x_entered);
	init_completion(&q->x_release);
	init_completion(&q->c_slow_done);
	init_completion(&q->c_again);
	init_completion(&q->freed);
	w = qf_create(test, qf_w_upcall, q, 1);
	f = qf_create(test, qf_f_upcall, q, 1);
	x = qf_create(test, qf_x_upcall, q, 0);
	c = qf_create(test, qf_c_upcall, q, 0);
	b = qf_create(test, qf_nop_upcall, q, 0);
	q->victim = b;

	/* C is slow from now on: poller 0 sheds before its next batch */
	KUNIT_ASSERT_EQ(test, kevd_post_se(c, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->c_slow_done,
							  CONS_WAIT), 0);
	/* both pollers inside upcalls */
	KUNIT_ASSERT_EQ(test, kevd_post_se(w, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->w_entered,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(x, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->x_entered,
							  CONS_WAIT), 0);
	/* C, then B, queued on poller 0; F on poller 1, after W */
	KUNIT_ASSERT_EQ(test, kevd_post_se(c, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(b, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(f, NULL), 0);
	complete(&q->w_release);
	/*
	 * F's upcall on poller 1 frees B: it takes B off the run list of
	 * poller 0, which is still inside X's upcall
	 */
	left = wait_for_completion_timeout(&q->freed, CONS_WAIT);
	complete(&q->x_release);
	KUNIT_ASSERT_GT_MSG(test, left, 0,
			    "kevd_free() from F's upcall waits for poller 0");
	KUNIT_EXPECT_EQ(test, q->free_ret, 0);
	KUNIT_EXPECT_GT(test, wait_for_completion_timeout(&q->c_again,
							  CONS_WAIT), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->c_calls), 2);
	KUNIT_EXPECT_EQ(test, kevd_free(f), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(c), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(x), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(w), 0);
	kfree(q);
}

/*
 * kevd_consumer_free_own_queued_while_torn_down: E's upcall (poller 1) frees
 * X, queued on poller 1 itself, while Z's upcall (poller 0) tears E down
 * and waits for E's upcall to end.
 */
struct qteardown {
	struct kevd *e, *x;
	struct task_struct *tearer;
	struct completion z_entered, z_go, z_done, e_entered, e_go, freed;
	int free_ret, teardown_ret;
};

static void qt_z_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qteardown *q = ctx;

	complete(&q->z_entered);
	wait_for_completion(&q->z_go);
	WRITE_ONCE(q->tearer, current);
	q->teardown_ret = kevd_modify_upcall(q->e, KEVD_UPCALL_TEARDOWN,
					     NULL, 0);
	complete(&q->z_done);
}

static void qt_e_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qteardown *q = ctx;

	complete(&q->e_entered);
	wait_for_completion(&q->e_go);
	q->free_ret = kevd_free(q->x);
	complete(&q->freed);
}

/*
 * A poller that frees an EVD it holds queued lets go of it first, before
 * it passes anything on: here the poller it would pass X to waits, in a
 * teardown, for the very upcall that frees X.
 */
static void kevd_consumer_free_own_queued_while_torn_down(struct kunit *test)
{
	struct qteardown *q;
	struct kevd *z;
	long left;

	if (kevd_nr_pollers() != 2 || !cpu_online(1))
		kunit_skip(test, "needs two pollers, on CPUs 0 and 1");
	/* not the test's: a failed assertion leaves upcalls that use it */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, q);
	init_completion(&q->z_entered);
	init_completion(&q->z_go);
	init_completion(&q->z_done);
	init_completion(&q->e_entered);
	init_completion(&q->e_go);
	init_completion(&q->freed);
	z = qf_create(test, qt_z_upcall, q, 0);
	q->e = qf_create(test, qt_e_upcall, q, 1);
	q->x = qf_create(test, qf_nop_upcall, q, 1);

	KUNIT_ASSERT_EQ(test, kevd_post_se(z, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->z_entered,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(q->e, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->e_entered,
							  CONS_WAIT), 0);
	/* both pollers in upcalls: X goes to its home, poller 1 */
	KUNIT_ASSERT_EQ(test, kevd_post_se(q->x, NULL), 0);
	complete(&q->z_go);
	/* Z's upcall on poller 0 waits for E's upcall to end */
	KUNIT_EXPECT_TRUE(test, qf_asleep(&q->tearer));
	complete(&q->e_go);
	left = wait_for_completion_timeout(&q->freed, CONS_WAIT);
	KUNIT_ASSERT_GT_MSG(test, left, 0, "kevd_free() from E's upcall hangs");
	KUNIT_EXPECT_EQ(test, q->free_ret, 0);
	left = wait_for_completion_timeout(&q->z_done, CONS_WAIT);
	KUNIT_ASSERT_GT_MSG(test, left, 0, "the teardown from Z's upcall hangs");
	KUNIT_EXPECT_EQ(test, q->teardown_ret, 0);
	KUNIT_EXPECT_EQ(test, kevd_free(q->e), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(z), 0);
	kfree(q);
}

/*
 * kevd_consumer_free_shed_to_blocked_poller: A's upcall frees B after A's
 * batch began by passing B to the other poller, which is inside an
 * upcall that waits until A's upcall is done (here: until the test sees
 * the free return).
 */
struct qshed {
	struct kevd *b;
	struct completion x_entered, x_release, y_entered, y_release;
	struct completion a_slow_done, freed;
	atomic_t a_calls;
	int free_ret;
};

static void qs_a_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qshed *q = ctx;

	if (atomic_inc_return(&q->a_calls) == 1) {
		/* The stimulus (a slow upcall), not a synchronisation. */
		msleep(20);
		complete(&q->a_slow_done);
		return;
	}
	q->free_ret = kevd_free(q->b);
	complete(&q->freed);
}

static void qs_x_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qshed *q = ctx;

	complete(&q->x_entered);
	wait_for_completion(&q->x_release);
}

static void qs_y_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qshed *q = ctx;

	complete(&q->y_entered);
	wait_for_completion(&q->y_release);
}

/*
 * A dead EVD passed to a poller that is busy in a consumer's upcall is
 * not that poller's to let go of: kevd_free() takes it off the run list
 * itself, and does not wait for an upcall that may be waiting for it.
 */
static void kevd_consumer_free_shed_to_blocked_poller(struct kunit *test)
{
	struct kevd *a, *x, *y;
	struct qshed *q;
	long left;

	if (kevd_nr_pollers() != 2 || !cpu_online(1))
		kunit_skip(test, "needs two pollers, on CPUs 0 and 1");
	/* not the test's: a failed assertion leaves upcalls that use it */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, q);
	init_completion(&q->x_entered);
	init_completion(&q->x_release);
	init_completion(&q->y_entered);
	init_completion(&q->y_release);
	init_completion(&q->a_slow_done);
	init_completion(&q->freed);
	a = qf_create(test, qs_a_upcall, q, 0);
	x = qf_create(test, qs_x_upcall, q, 0);
	y = qf_create(test, qs_y_upcall, q, 1);
	q->b = qf_create(test, qf_nop_upcall, q, 0);

	/* A is slow from now on: poller 0 sheds before its next batch */
	KUNIT_ASSERT_EQ(test, kevd_post_se(a, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->a_slow_done,
							  CONS_WAIT), 0);
	/*
	 * both pollers inside upcalls: Y first, as poller 0 may still be
	 * inside A's upcall (X then waits for it, on its home)
	 */
	KUNIT_ASSERT_EQ(test, kevd_post_se(y, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->y_entered,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(x, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->x_entered,
							  CONS_WAIT), 0);
	/* A, then B, queued on their home, poller 0 */
	KUNIT_ASSERT_EQ(test, kevd_post_se(a, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(q->b, NULL), 0);
	/* A's batch sheds B to poller 1, then A's upcall frees B */
	complete(&q->x_release);
	left = wait_for_completion_timeout(&q->freed, CONS_WAIT);
	complete(&q->y_release);
	KUNIT_ASSERT_GT_MSG(test, left, 0,
			    "kevd_free() waits for the upcall on poller 1");
	KUNIT_EXPECT_EQ(test, q->free_ret, 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&q->a_calls), 2);
	KUNIT_EXPECT_EQ(test, kevd_free(y), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(x), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(a), 0);
	kfree(q);
}

/* --- a stop event: the consumer frees the EVD as soon as it has it ------- */

/* @evd: the EVD waited on; freed when the event comes. */
struct stop_waiter {
	struct kevd *evd;
	struct completion done;
	int wait_rc;
	int free_rc;
	struct kevd_event ev;
};

static int stop_waiter_fn(void *data)
{
	struct stop_waiter *w = data;
	u32 nmore;

	w->wait_rc = kevd_wait(w->evd, jiffies_to_usecs(CONS_WAIT), 1, &w->ev,
			       &nmore);
	if (!w->wait_rc)
		w->free_rc = kevd_free(w->evd);
	complete(&w->done);
	return 0;
}

/*
 * Start @w's waiter as a SCHED_FIFO thread on the caller's CPU, and
 * return when it waits (or the bound ran out: a post before the wait
 * begins is taken at once, no harm). The caller cannot migrate until
 * stop_waiter_posted().
 */
static void stop_waiter_start(struct kunit *test, struct stop_waiter *w)
{
	struct task_struct *t;
	unsigned long end;

	init_completion(&w->done);
	w->wait_rc = -1;
	w->free_rc = -1;
	t = kthread_create(stop_waiter_fn, w, "kevd_cons_stop");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	migrate_disable();
	kthread_bind(t, smp_processor_id());
	sched_set_fifo(t);
	wake_up_process(t);
	end = jiffies + CONS_WAIT;
	while (!(cons_state(w->evd) & KEVD_STATE_WAITED) &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
}

/* The stop event was posted: wait for the waiter's frees. */
static void stop_waiter_posted(struct kunit *test, struct stop_waiter *w)
{
	migrate_enable();
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done, CONS_WAIT),
			0);
	KUNIT_EXPECT_EQ(test, w->wait_rc, 0);
	KUNIT_EXPECT_EQ(test, w->free_rc, 0);
}

#define STOP_ROUNDS	4

/*
 * A thread of higher priority waits for a "stop" event and frees the EVD
 * the moment it has it; the test thread posts it. Both on one CPU, the
 * waiter runs as soon as the post wakes it (CONFIG_PREEMPT), before
 * kevd_post_se() returns: the post must not touch the EVD after its
 * event was taken (KASAN reports it on the UML kernel).
 */
static void kevd_consumer_free_at_stop_event(struct kunit *test)
{
	struct stop_waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, w);
	for (i = 0; i < STOP_ROUNDS; i++) {
		w->evd = cons_create(test, 16, KEVD_SOFTWARE_FLAG,
				     KEVD_UPCALL_DISABLE, NULL, NULL);
		stop_waiter_start(test, w);
		KUNIT_EXPECT_EQ(test, kevd_post_se(w->evd, w), 0);
		stop_waiter_posted(test, w);
		KUNIT_EXPECT_PTR_EQ(test, w->ev.software.pointer, (void *)w);
	}
}

/* --- an EVD being freed, and the calls that must refuse it -------------- */

/*
 * An EVD whose kevd_free() has begun and waits: its SINGLE_INSTANCE
 * upcall holds it until released.
 */
struct evd_going {
	struct kevd *evd;
	struct completion entered, release, freed;
	struct task_struct *t;
	int free_rc;
};

static void evd_going_upcall(void *ctx, const struct kevd_event *ev,
			     bool more)
{
	struct evd_going *g = ctx;

	complete(&g->entered);
	wait_for_completion(&g->release);
}

static int evd_going_free_fn(void *data)
{
	struct evd_going *g = data;

	g->free_rc = kevd_free(g->evd);
	complete(&g->freed);
	return 0;
}

/*
 * Create an EVD with @flags, run its upcall and free it from a thread;
 * return once the free has begun (the EVD is no longer open). Not the
 * test's memory: a failed assertion leaves an upcall that uses it.
 */
static struct evd_going *evd_going_start(struct kunit *test, u32 flags)
{
	struct kevd_upcall up = { evd_going_upcall, NULL };
	struct evd_going *g;
	unsigned long end;

	g = kzalloc(sizeof(*g), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, g);
	init_completion(&g->entered);
	init_completion(&g->release);
	init_completion(&g->freed);
	up.ctx = g;
	g->evd = cons_create(test, 16, flags | KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_SINGLE_INSTANCE, &up, NULL);
	KUNIT_ASSERT_EQ(test, kevd_post_se(g->evd, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&g->entered,
							  CONS_WAIT), 0);
	g->t = kthread_run(evd_going_free_fn, g, "kevd_cons_going");
	KUNIT_ASSERT_FALSE(test, IS_ERR(g->t));
	end = jiffies + CONS_WAIT;
	while ((cons_state(g->evd) & KEVD_STATE_OPEN) &&
	       time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_ASSERT_EQ(test, cons_state(g->evd) & KEVD_STATE_OPEN, 0U);
	return g;
}

/* Release the upcall: the free must end, and succeed. */
static void evd_going_finish(struct kunit *test, struct evd_going *g)
{
	long left;

	complete(&g->release);
	left = wait_for_completion_timeout(&g->freed, CONS_WAIT);
	KUNIT_ASSERT_GT(test, left, 0);
	KUNIT_EXPECT_EQ(test, g->free_rc, 0);
	kfree(g);
}

/*
 * While a thread frees an async EVD (it waits for the EVD's upcall to
 * end), a new EVD that names it as its async EVD is refused: the free
 * must not end with an EVD still using the async EVD.
 */
static void kevd_consumer_create_on_async_being_freed(struct kunit *test)
{
	struct evd_going *g = evd_going_start(test, KEVD_ASYNC_FLAG);
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = g->evd;
	evd = kevd_create(NULL, &attr);
	KUNIT_EXPECT_PTR_EQ(test, evd, ERR_PTR(-EINVAL));
	if (!IS_ERR_OR_NULL(evd))
		KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	evd_going_finish(test, g);
}

/*
 * A resize that begins while a thread frees the EVD is refused, and
 * changes nothing: the free does not wait for it, and must not end
 * while it replaces the ring.
 */
static void kevd_consumer_resize_while_freed(struct kunit *test)
{
	struct evd_going *g = evd_going_start(test, 0);
	struct kevd_param p;
	u32 qlen;

	KUNIT_ASSERT_EQ(test, kevd_query(g->evd, &p), 0);
	qlen = p.qlen;
	KUNIT_EXPECT_EQ(test, kevd_resize(g->evd, 4 * qlen), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_query(g->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.qlen, qlen);
	evd_going_finish(test, g);
}

/* A second kevd_free() of one EVD, from a thread. */
struct free_again {
	struct kevd *evd;
	struct completion done;
	int rc;
};

static int free_again_fn(void *data)
{
	struct free_again *f = data;

	f->rc = kevd_free(f->evd);
	complete(&f->done);
	return 0;
}

/*
 * A kevd_free() of an EVD that another thread is freeing (it waits for
 * the EVD's upcall) is refused at once: the first free alone tears down.
 */
static void kevd_consumer_free_while_freed(struct kunit *test)
{
	struct evd_going *g = evd_going_start(test, 0);
	struct free_again *f = kzalloc(sizeof(*f), GFP_KERNEL);
	struct task_struct *t;
	long left;

	KUNIT_ASSERT_NOT_NULL(test, f);
	init_completion(&f->done);
	f->evd = g->evd;
	t = kthread_run(free_again_fn, f, "kevd_cons_free2");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	/* bounded below the hung-task report: the old code blocked here */
	left = wait_for_completion_timeout(&f->done, 20 * HZ);
	KUNIT_EXPECT_GT(test, left, 0);
	KUNIT_EXPECT_EQ(test, f->rc, -EINVAL);
	evd_going_finish(test, g);
	if (!left)	/* the old code's second free ends after the first */
		wait_for_completion(&f->done);
	kfree(f);
}

/* A resize held inside ib_resize_cq() until released. */
struct resize_held {
	struct kevd *evd;
	struct completion entered, release, done;
	int rc;
};

static void resize_held_hook(struct ib_cq *cq, void *ctx)
{
	struct resize_held *r = ctx;

	complete(&r->entered);
	wait_for_completion(&r->release);
}

static int resize_held_fn(void *data)
{
	struct resize_held *r = data;

	r->rc = kevd_resize(r->evd, 64);
	complete(&r->done);
	return 0;
}

/*
 * kevd_free() while another thread's kevd_resize() is in progress (here
 * inside ib_resize_cq()) is refused, as while a thread waits: it must not
 * destroy the CQ and the EVD under the resize. Once the resize is done,
 * the free succeeds.
 */
static void kevd_consumer_free_while_resized(struct kunit *test)
{
	struct fake_hca *hca;
	struct resize_held *r;
	struct task_struct *t;
	struct kevd_param p;
	long left;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	/* not the test's: a failed assertion leaves a resize that uses it */
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	init_completion(&r->entered);
	init_completion(&r->release);
	init_completion(&r->done);
	r->evd = cq_evd(test, hca, 16, 0);	/* the CQ follows the queue */
	fake_cq_set_resize_hook(kevd_cq(r->evd), resize_held_hook, r);
	t = kthread_run(resize_held_fn, r, "kevd_cons_resize");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&r->entered,
							  CONS_WAIT), 0);

	KUNIT_EXPECT_EQ(test, kevd_free(r->evd), -EBUSY);
	KUNIT_EXPECT_NE(test, cons_state(r->evd) & KEVD_STATE_OPEN, 0U);

	complete(&r->release);
	left = wait_for_completion_timeout(&r->done, CONS_WAIT);
	KUNIT_ASSERT_GT(test, left, 0);
	KUNIT_EXPECT_EQ(test, r->rc, 0);
	KUNIT_EXPECT_EQ(test, kevd_query(r->evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.qlen, 64U);
	fake_cq_set_resize_hook(kevd_cq(r->evd), NULL, NULL);
	KUNIT_EXPECT_EQ(test, kevd_free(r->evd), 0);
	kfree(r);
	fake_hca_destroy(hca);
}

/* --- MANY batches stopped side by side give back in order ---------------- */

#define MANY_STOP_EVENTS	64

struct many_stop {
	struct completion entered, release[2], returned;
	atomic_t slots;
	unsigned long idx[2];	/* the event each blocked upcall holds */
};

static void many_stop_upcall(void *ctx, const struct kevd_event *ev,
			     bool more)
{
	struct many_stop *m = ctx;
	int slot = atomic_inc_return(&m->slots) - 1;

	if (slot >= 2)		/* never: both pollers are held, then DISABLE */
		return;
	m->idx[slot] = (unsigned long)ev->software.pointer;
	complete(&m->entered);
	wait_for_completion(&m->release[slot]);
	complete(&m->returned);
}

/*
 * Two MANY batches run side by side, each inside its first upcall, when
 * the consumer disables upcalls. The batch that took the older events
 * returns first and gives the rest back; then the other. Everything not
 * delivered comes back in the order it was posted: on the old code the
 * second give-back went ahead of the first (the newer events first).
 */
static void kevd_consumer_many_give_back_order(struct kunit *test)
{
	struct kevd_upcall up = { many_stop_upcall, NULL };
	struct kevd_event ev;
	struct many_stop *m;
	struct kevd *evd;
	unsigned long i, last = 0;
	int lo, n = 0;
	u32 before;

	/* a third poller would run a third batch before the DISABLE */
	if (kevd_nr_pollers() != 2 || num_online_cpus() < 2)
		kunit_skip(test, "needs two pollers, exactly");
	/* not the test's: a failed assertion leaves upcalls that use it */
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, m);
	init_completion(&m->entered);
	init_completion(&m->release[0]);
	init_completion(&m->release[1]);
	init_completion(&m->returned);
	up.ctx = m;
	evd = cons_create(test, 256, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			  NULL, NULL);
	for (i = 1; i <= MANY_STOP_EVENTS; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_MANY, &up,
						 KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&m->entered,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&m->entered,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE,
						 NULL, 0), 0);

	/* the older batch returns first, and its events come back */
	lo = m->idx[0] < m->idx[1] ? 0 : 1;
	before = cons_count(evd);
	complete(&m->release[lo]);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&m->returned,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_TRUE(test, cons_wait_count(evd, before + 1));
	complete(&m->release[!lo]);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&m->returned,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);

	/* all but the two delivered, oldest first */
	while (!kevd_dequeue(evd, &ev)) {
		i = (unsigned long)ev.software.pointer;
		KUNIT_EXPECT_GT(test, i, last);
		KUNIT_EXPECT_NE(test, i, m->idx[0]);
		KUNIT_EXPECT_NE(test, i, m->idx[1]);
		last = i;
		n++;
	}
	KUNIT_EXPECT_EQ(test, n, MANY_STOP_EVENTS - 2);
	KUNIT_EXPECT_EQ(test, atomic_read(&m->slots), 2);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	kfree(m);
}

/* --- the upcall drains with dequeue -------------------------------------- */

/**
 * struct drain_cons - a SINGLE_INSTANCE consumer that drains in its upcall.
 * @evd: its EVD.
 * @next: the software pointer, or DTO cookie, expected next (only the
 *	upcall writes it; read by the test after TEARDOWN).
 * @total: events seen, by upcall or dequeue.
 * @dequeued: of which by kevd_dequeue() inside the upcall.
 * @order_errors: events out of order.
 */
struct drain_cons {
	struct kevd *evd;
	u64 next;
	atomic_t total, dequeued, order_errors;
};

static void drain_seen(struct drain_cons *c, const struct kevd_event *ev)
{
	u64 v = ev->event_number == KEVD_SOFTWARE_EVENT ?
		(unsigned long)ev->software.pointer : ev->dto.cookie;

	if (v != c->next)
		atomic_inc(&c->order_errors);
	c->next = v + 1;
	atomic_inc(&c->total);
}

/* The DAT consumer's upcall: handle the event, then dequeue the rest. */
static void drain_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct drain_cons *c = ctx;
	struct kevd_event e;

	drain_seen(c, ev);
	while (!kevd_dequeue(c->evd, &e)) {
		drain_seen(c, &e);
		atomic_inc(&c->dequeued);
	}
}

#define DRAIN_SW	70	/* more than one upcall batch takes */
#define DRAIN_DTO	32

/*
 * An upcall that dequeues what follows its event gets the events in
 * order, each once: first those the poller took for upcalls after it,
 * then the ring. Software events (a batch popped from the ring) and
 * completions the poller takes straight from the CQ.
 */
static void kevd_consumer_drain_in_upcall(struct kunit *test)
{
	struct kevd_upcall up = { drain_upcall, NULL };
	struct drain_cons *c;
	struct fake_hca *hca;
	struct kevd_param p;
	unsigned long i;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	up.ctx = c;
	c->evd = cons_create(test, 128, KEVD_SOFTWARE_FLAG,
			     KEVD_UPCALL_DISABLE, NULL, NULL);
	for (i = 0; i < DRAIN_SW; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(c->evd, (void *)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(c->evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->total, DRAIN_SW));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->order_errors), 0);
	KUNIT_EXPECT_EQ(test, c->next, (u64)DRAIN_SW);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->total), DRAIN_SW);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->dequeued), DRAIN_SW - 1);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);

	/* completions delivered straight from the CQ */
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	memset(c, 0, sizeof(*c));
	c->evd = si_evd(test, hca, 64, 64, up);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(c->evd),
						    DRAIN_DTO), DRAIN_DTO);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->total, DRAIN_DTO));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->order_errors), 0);
	KUNIT_EXPECT_EQ(test, c->next, (u64)DRAIN_DTO);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->total), DRAIN_DTO);
	/* counted once each, whoever took them */
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], (u64)DRAIN_DTO);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO],
			(u64)DRAIN_DTO);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct drain_wait - a consumer that drains with waits inside its upcall.
 * @c: what it saw.
 * @entered: its first upcall runs.
 * @release: the test thread has disabled upcalls meanwhile.
 * @nmore_errors: waits whose @nmore was not what was left to take.
 */
struct drain_wait {
	struct drain_cons c;
	struct completion entered, release;
	atomic_t nmore_errors;
};

/*
 * The first upcall waits until another thread has disabled upcalls, as a
 * kDAPL consumer's thread does while its upcall runs, then drains with
 * waits of a threshold above one (timeout 0: it must not sleep there).
 */
static void drain_wait_upcall(void *ctx, const struct kevd_event *ev,
			      bool more)
{
	struct drain_wait *w = ctx;
	struct kevd_event e[4];
	u32 nmore;
	int n, i;

	drain_seen(&w->c, ev);
	if (completion_done(&w->entered))
		return;
	complete(&w->entered);
	if (!wait_for_completion_timeout(&w->release, CONS_WAIT))
		return;
	while ((n = kevd_wait_batch(w->c.evd, 0, 2, e, ARRAY_SIZE(e),
				    &nmore)) > 0) {
		for (i = 0; i < n; i++) {
			drain_seen(&w->c, &e[i]);
			atomic_inc(&w->c.dequeued);
		}
		/* the batch's rest and the ring: nothing else posts */
		if (nmore != DRAIN_SW - atomic_read(&w->c.total))
			atomic_inc(&w->nmore_errors);
	}
}

/*
 * A wait for two or more events from inside a SINGLE_INSTANCE upcall,
 * after another thread disabled upcalls, returns the events that the
 * upcall's batch had taken before the ring's: they count toward the
 * threshold, come in order, each once, and in @nmore. The last event,
 * one short of the threshold, stays queued for the thread.
 */
static void kevd_consumer_wait_batch_in_upcall(struct kunit *test)
{
	struct kevd_upcall up = { drain_wait_upcall, NULL };
	struct kevd_event ev;
	struct drain_wait *w;
	unsigned long i;
	bool ok;

	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	init_completion(&w->entered);
	init_completion(&w->release);
	up.ctx = w;
	w->c.evd = cons_create(test, 128, KEVD_SOFTWARE_FLAG,
			       KEVD_UPCALL_DISABLE, NULL, NULL);
	for (i = 0; i < DRAIN_SW; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(w->c.evd, (void *)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(w->c.evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	ok = wait_for_completion_timeout(&w->entered, CONS_WAIT);
	KUNIT_EXPECT_TRUE(test, ok);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(w->c.evd, KEVD_UPCALL_DISABLE,
						 NULL, 0), 0);
	complete(&w->release);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&w->c.total,
						     DRAIN_SW - 1));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(w->c.evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&w->c.dequeued), DRAIN_SW - 2);
	KUNIT_EXPECT_EQ(test, atomic_read(&w->nmore_errors), 0);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(w->c.evd, &ev), 0);
	drain_seen(&w->c, &ev);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->c.evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, atomic_read(&w->c.order_errors), 0);
	KUNIT_EXPECT_EQ(test, w->c.next, (u64)DRAIN_SW);
	KUNIT_EXPECT_EQ(test, atomic_read(&w->c.total), DRAIN_SW);
	KUNIT_EXPECT_EQ(test, kevd_free(w->c.evd), 0);
}

/* --- an event posted while the poller polls ------------------------------ */

#define RACE_SW		1000	/* the software event's tag in seen[] */
#define RACE_SEEN	4

/**
 * struct race_cons - what a SINGLE_INSTANCE upcall saw, in order.
 * @evd: the EVD.
 * @fired: the poll hook ran (once).
 * @n: events seen.
 * @seen: the first RACE_SEEN of them: DTO cookies, and RACE_SW for the
 *	software event (read by the test after TEARDOWN).
 */
struct race_cons {
	struct kevd *evd;
	atomic_t fired;
	atomic_t n;
	u64 seen[RACE_SEEN];
};

static void race_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct race_cons *c = ctx;
	int i = atomic_read(&c->n);

	if (i < RACE_SEEN)
		c->seen[i] = ev->event_number == KEVD_SOFTWARE_EVENT ?
			     RACE_SW : ev->dto.cookie;
	atomic_inc(&c->n);
}

/*
 * Inside the poller's first poll: the consumer posts a software event,
 * then work whose completion (cookie 1) the same poll finds.
 */
static void race_poll_hook(struct ib_cq *cq, void *ctx)
{
	struct race_cons *c = ctx;

	/* the pass for cookie 0, not an idle pass's check */
	if (!fake_cq_count(cq) || atomic_xchg(&c->fired, 1))
		return;
	kevd_post_se(c->evd, NULL);
	fake_cq_add_cookie(cq, 1);
}

/*
 * A software event posted before work is posted comes before that
 * work's completion, also when the poller is polling the CQ as the event
 * is posted and the poll returns the completion: the poller delivers
 * completions straight from the CQ only while nothing is queued.
 */
static void kevd_consumer_post_during_poll(struct kunit *test)
{
	struct kevd_upcall up = { race_upcall, NULL };
	struct race_cons *c;
	struct fake_hca *hca;
	struct ib_cq *cq;
	int i, sw = -1, c1 = -1;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->evd = si_hca_evd(test, &hca, 16, 16, up, c);
	cq = kevd_cq(c->evd);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(cq));	/* idle */
	fake_cq_set_poll_hook(cq, race_poll_hook, c);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(cq, 0), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->n, 3));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->n), 3);
	for (i = 0; i < 3; i++) {
		if (c->seen[i] == RACE_SW)
			sw = i;
		else if (c->seen[i] == 1)
			c1 = i;
	}
	KUNIT_EXPECT_GE(test, sw, 0);
	KUNIT_EXPECT_GT(test, c1, sw);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
	fake_hca_destroy(hca);
}

/* --- a wait from another EVD's upcall ----------------------------------- */

#define CROSS_WAIT_US	1000000	/* a bound for a failure, not a sync */

/**
 * struct cross_wait - an upcall of @a that waits on @b.
 * @hca: the fake HCA of both.
 * @a: DTO, SINGLE_INSTANCE, on CPU 0's poller; its upcall waits on @b.
 * @b: DTO and software events, upcalls disabled.
 * @threshold: the wait's threshold.
 * @timeout_us: its timeout.
 * @hold: after its wait, the upcall stays inside until @release.
 * @fired: the poll hook ran (it runs once).
 * @rc: what the wait returned.
 * @cookie: the cookie of the event it got.
 * @nmore: the events it left queued.
 * @done: the upcall's wait returned.
 * @release: a @hold upcall may return.
 */
struct cross_wait {
	struct fake_hca *hca;
	struct kevd *a, *b;
	u32 threshold;
	u32 timeout_us;
	bool hold;
	atomic_t fired;
	int rc;
	u64 cookie;
	u32 nmore;
	struct completion done;
	struct completion release;
};

/* At the start of A's poll, on A's poller: a completion for B. */
static void cross_wait_hook(struct ib_cq *cq, void *ctx)
{
	struct cross_wait *w = ctx;

	if (!atomic_xchg(&w->fired, 1))
		fake_cq_add_cookie(kevd_cq(w->b), 7);
}

static void cross_wait_upcall(void *ctx, const struct kevd_event *ev,
			      bool more)
{
	struct cross_wait *w = ctx;
	struct kevd_event got;

	w->rc = kevd_wait(w->b, w->timeout_us, w->threshold, &got, &w->nmore);
	if (!w->rc)
		w->cookie = got.dto.cookie;
	complete(&w->done);
	if (w->hold)
		wait_for_completion(&w->release);
}

/*
 * A and B on a fake HCA, both idle with their CQs armed (a pull that
 * finds nothing arms); A's upcall waits on B for @threshold events
 * (within CROSS_WAIT_US, unless the test sets another timeout before it
 * fires A), B has @b_qlen events and the poller of @b_cpu. Not the
 * test's memory: after a failed assertion the upcall may still use it.
 */
static struct cross_wait *cross_wait_new(struct kunit *test, u32 threshold,
					 u32 b_qlen, int b_cpu)
{
	struct cross_wait *w = kzalloc(sizeof(*w), GFP_KERNEL);
	struct kevd_event ev;
	struct kevd_attr attr;

	KUNIT_ASSERT_NOT_NULL(test, w);
	init_completion(&w->done);
	init_completion(&w->release);
	w->threshold = threshold;
	w->timeout_us = CROSS_WAIT_US;
	w->hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, w->hca);
	kevd_attr_init(&attr);
	attr.qlen = b_qlen;
	attr.flags = KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG;
	attr.cpu = b_cpu;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	w->b = kevd_create(fake_hca_ibdev(w->hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, w->b);
	attr.qlen = 16;
	attr.cpu = 0;
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = (struct kevd_upcall){ cross_wait_upcall, w };
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	w->a = kevd_create(fake_hca_ibdev(w->hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, w->a);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(w->b, &ev), -EAGAIN);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(w->b)));
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(w->a)));
	return w;
}

/* A's completion (through @hook, if any, at A's poll); its upcall ran. */
static void cross_wait_fire(struct kunit *test, struct cross_wait *w,
			    fake_cq_poll_hook hook)
{
	if (hook)
		fake_cq_set_poll_hook(kevd_cq(w->a), hook, w);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->a), 1), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done, CONS_WAIT),
			0);
	if (hook) {
		fake_cq_set_poll_hook(kevd_cq(w->a), NULL, NULL);
		KUNIT_EXPECT_EQ(test, atomic_read(&w->fired), 1);
	}
}

static void cross_wait_free(struct kunit *test, struct cross_wait *w)
{
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(w->a, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(w->a), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(w->b), 0);
	fake_hca_destroy(w->hca);
	kfree(w);
}

/*
 * An upcall of A waits on B, whose completion came while A's poller was
 * in its pass over A: B was queued for a pass of that very poller, which
 * cannot come while the upcall waits. The wait takes B's completion
 * itself, as it would from any thread.
 */
static void kevd_consumer_wait_from_other_upcall(struct kunit *test)
{
	struct cross_wait *w = cross_wait_new(test, 1, 16, 0);
	struct kevd_event ev;

	cross_wait_fire(test, w, cross_wait_hook);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->cookie, 7ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->b, &ev), -EAGAIN);
	cross_wait_free(test, w);
}

/*
 * The completions of B that A's poll hook adds: more than two pull
 * budgets (64 by default), so that the wait's own pull uses its budget
 * while it waits, and lets B go to a poller for the next pass.
 */
#define CROSS_WAIT_MANY	300

/* At the start of A's poll, on A's poller: CROSS_WAIT_MANY for B. */
static void cross_wait_many_hook(struct ib_cq *cq, void *ctx)
{
	struct cross_wait *w = ctx;
	int i;

	if (atomic_xchg(&w->fired, 1))
		return;
	for (i = 0; i < CROSS_WAIT_MANY; i++)
		fake_cq_add_cookie(kevd_cq(w->b), 100 + i);
}

/*
 * A's upcall waits for CROSS_WAIT_MANY completions of B (homed on
 * @b_cpu), which come while A's poller polls A; the wait's pull uses its
 * budget with the threshold not met, and hands B to a poller for the
 * next pass. The wait must get them all, in order.
 */
static void cross_wait_many(struct kunit *test, int b_cpu)
{
	struct cross_wait *w = cross_wait_new(test, CROSS_WAIT_MANY, 512,
					      b_cpu);
	struct kevd_event ev;
	int i;

	cross_wait_fire(test, w, cross_wait_many_hook);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	/* the first, with all the others queued behind it */
	KUNIT_EXPECT_EQ(test, w->cookie, 100ULL);
	KUNIT_EXPECT_EQ(test, w->nmore, (u32)CROSS_WAIT_MANY - 1);
	for (i = 1; i < CROSS_WAIT_MANY; i++) {
		if (kevd_dequeue(w->b, &ev) || ev.dto.cookie != 100 + i)
			break;
	}
	KUNIT_EXPECT_EQ(test, i, CROSS_WAIT_MANY);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->b, &ev), -EAGAIN);
	cross_wait_free(test, w);
}

/* The nr_pollers a test restarted the pool from. */
static unsigned int cross_wait_pollers;

static void cross_wait_restore(void *ctx)
{
	unsigned int old;

	/* -EBUSY if the test failed with EVDs left: the pool stays */
	kevd_pollers_restart(cross_wait_pollers, &old);
}

/* Restart the pool with one poller, started again as it was at the end. */
static void cross_wait_one_poller(struct kunit *test)
{
	int err = kevd_pollers_restart(1, &cross_wait_pollers);

	if (err == -EBUSY)	/* nothing changed */
		kunit_skip(test, "EVDs exist: the pool cannot restart");
	/* a failed start leaves no poller: start the old pool again */
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							cross_wait_restore,
							NULL), 0);
	KUNIT_ASSERT_EQ(test, err, 0);
	KUNIT_ASSERT_EQ(test, kevd_nr_pollers(), 1U);
}

static void cross_wait_pool_back(struct kunit *test)
{
	unsigned int old;

	kunit_remove_action(test, cross_wait_restore, NULL);
	KUNIT_EXPECT_EQ(test, kevd_pollers_restart(cross_wait_pollers, &old),
			0);
	KUNIT_EXPECT_EQ(test, kevd_nr_pollers(),
			cross_wait_pollers ?: num_online_cpus());
}

/*
 * With one poller, in A's upcall: every poller is inside an upcall, so B
 * goes to its home, the waiter's own poller, which cannot come while the
 * upcall waits. The waiter must make those passes itself.
 */
static void kevd_consumer_cross_wait_one_poller(struct kunit *test)
{
	cross_wait_one_poller(test);
	cross_wait_many(test, 0);
	cross_wait_pool_back(test);
}

#define CROSS_WAIT_SHORT_US	20000

/*
 * The same with B's arms failing (a provider's error) and no completion:
 * every pass the waiter makes finds nothing and queues B on its poller
 * again, as a pass whose arm failed does. The wait still ends when its
 * timeout runs out; once the arms succeed B's completions come again.
 */
static void kevd_consumer_cross_wait_arm_fails(struct kunit *test)
{
	struct cross_wait *w;
	struct kevd_event ev;
	u32 nmore;

	cross_wait_one_poller(test);
	w = cross_wait_new(test, 1, 16, 0);
	w->timeout_us = CROSS_WAIT_SHORT_US;
	fake_cq_fail_arms(kevd_cq(w->b), -EIO);
	cross_wait_fire(test, w, NULL);
	KUNIT_EXPECT_EQ(test, w->rc, -ETIMEDOUT);
	fake_cq_fail_arms(kevd_cq(w->b), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->b), 9), 0);
	KUNIT_EXPECT_EQ(test, kevd_wait(w->b, CROSS_WAIT_US, 1, &ev, &nmore),
			0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 9ULL);
	cross_wait_free(test, w);
	cross_wait_pool_back(test);
}

/**
 * struct cross_block - an upcall that holds its poller.
 * @entered: it runs.
 * @release: it may return.
 */
struct cross_block {
	atomic_t entered;
	struct completion release;
};

static void cross_block_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct cross_block *c = ctx;

	atomic_inc(&c->entered);
	wait_for_completion(&c->release);
}

static void cross_block_release(void *ctx)
{
	struct cross_block *c = ctx;

	complete_all(&c->release);
}

/*
 * CPU @cpu's poller held inside C's upcall (@c) until cross_block_end():
 * a pool of two pollers, one of them busy. Skips the test without them.
 */
static struct cross_block *cross_block_hold_on(struct kunit *test,
					       struct kevd **c, int cpu)
{
	struct kevd_upcall up = { cross_block_upcall, NULL };
	struct cross_block *blk;

	if (kevd_nr_pollers() != 2 || !cpu_online(1))
		kunit_skip(test, "needs two pollers, on CPUs 0 and 1");
	/* not the test's: a failed assertion leaves the upcall using it */
	blk = kzalloc(sizeof(*blk), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, blk);
	init_completion(&blk->release);
	/* the upcall returns also if an assertion ends the test */
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							cross_block_release,
							blk), 0);
	up.ctx = blk;
	*c = kevd_test_create_on(test, 16, KEVD_SOFTWARE_FLAG,
				 KEVD_UPCALL_SINGLE_INSTANCE, &up, 0, cpu);
	KUNIT_ASSERT_EQ(test, kevd_post_se(*c, NULL), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&blk->entered, 1));
	return blk;
}

static struct cross_block *cross_block_hold(struct kunit *test,
					    struct kevd **c)
{
	return cross_block_hold_on(test, c, 1);
}

static void cross_block_end(struct kunit *test, struct cross_block *blk,
			    struct kevd *c)
{
	kunit_release_action(test, cross_block_release, blk);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(c), 0);
	kfree(blk);
}

/*
 * Two pollers, both inside upcalls: CPU 1's holds it (C's), CPU 0's is
 * A's, which waits on B, homed on CPU 1. B's next pass must not wait
 * for CPU 1's upcall: the waiter, on a poller too, makes it.
 */
static void kevd_consumer_cross_wait_busy_pollers(struct kunit *test)
{
	struct cross_block *blk;
	struct kevd *c;

	blk = cross_block_hold(test, &c);
	cross_wait_many(test, 1);
	cross_block_end(test, blk, c);
}

#define MANY_BUSY_EVENTS	48	/* three MANY batches */

static void many_busy_upcall(void *ctx, const struct kevd_event *ev,
			     bool more)
{
	atomic_inc(ctx);
}

/*
 * CPU 1's poller held inside C's upcall; B (MANY, homed on CPU 0) gets
 * three batches' worth of events at once. Its owner must not hand it to
 * the poller inside C's upcall, which may never come back (C's upcall
 * could wait for B's events): every event is delivered while C's upcall
 * still holds its poller.
 */
static void kevd_consumer_many_skips_busy_poller(struct kunit *test)
{
	struct kevd_upcall up = { many_busy_upcall, NULL };
	struct cross_block *blk;
	struct kevd *b, *c;
	atomic_t *n;
	int i;

	blk = cross_block_hold(test, &c);
	/* not the test's: a failed assertion leaves B's upcalls using it */
	n = kzalloc(sizeof(*n), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, n);
	up.ctx = n;
	b = kevd_test_create_on(test, 64, KEVD_SOFTWARE_FLAG,
				KEVD_UPCALL_DISABLE, NULL, 0, 0);
	for (i = 0; i < MANY_BUSY_EVENTS; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(b, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(b, KEVD_UPCALL_MANY, &up,
						 KEVD_UPCALL_INVOC_ANY), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count_for(n, MANY_BUSY_EVENTS,
							 10 * HZ));
	KUNIT_EXPECT_EQ(test, atomic_read(&blk->entered), 1);
	cross_block_end(test, blk, c);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(b, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(n), MANY_BUSY_EVENTS);
	KUNIT_EXPECT_EQ(test, kevd_free(b), 0);
	kfree(n);
}

#define CROSS_WAIT_OTHER	200	/* A's threshold: above two budgets */
#define CROSS_WAIT_LEAVE	32	/* below what one dequeue's pull moves */

/*
 * CROSS_WAIT_MANY completions for B, which do not notify, and one event
 * dequeued by this thread: its cookie. The waiter's own pull may own B
 * for a moment when they come (it may have begun when the wait did): the
 * dequeue finds nothing then, and tries again, for a bounded time.
 */
static u64 cross_wait_other_first(struct kunit *test, struct cross_wait *w)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct kevd_event ev;
	int i, rc;

	for (i = 0; i < CROSS_WAIT_MANY; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->b), 100 + i),
				0);
	while ((rc = kevd_dequeue(w->b, &ev)) == -EAGAIN &&
	       time_before(jiffies, end))
		cond_resched();
	KUNIT_ASSERT_EQ(test, rc, 0);
	return ev.dto.cookie;
}

/*
 * The same pollers, and A's upcall waits for CROSS_WAIT_OTHER events of
 * B. B's CQ then gets CROSS_WAIT_MANY completions that do not notify (it
 * notifies per 1000), and another thread dequeues one: its pull, with a
 * thread waiting, moves what it can and hands B to a poller for the next
 * pass. That pass goes to the waiter's poller, which makes it, not to
 * B's home, busy in C's upcall. Every event comes once, in order (the
 * waiter's pull may have begun when the completions came: the dequeue
 * and the wait take the first two, in either order).
 */
static void kevd_consumer_cross_wait_other_dequeue(struct kunit *test)
{
	struct cross_block *blk;
	struct cross_wait *w;
	struct kevd_event ev;
	struct kevd *c;
	u64 first;
	int i;

	blk = cross_block_hold(test, &c);
	w = cross_wait_new(test, CROSS_WAIT_OTHER, 512, 1);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(w->b), 1000, 0),
			0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->a), 1), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(w->b));
	first = cross_wait_other_first(test, w);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done, CONS_WAIT),
			0);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, first + w->cookie, 201ULL);
	KUNIT_EXPECT_NE(test, first, w->cookie);
	for (i = 2; i < CROSS_WAIT_MANY; i++) {
		if (kevd_dequeue(w->b, &ev) || ev.dto.cookie != 100 + i)
			break;
	}
	KUNIT_EXPECT_EQ(test, i, CROSS_WAIT_MANY);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->b, &ev), -EAGAIN);
	cross_block_end(test, blk, c);
	cross_wait_free(test, w);
}

/*
 * Bounds for a failure, not syncs: Z's upcall waits this long for X's
 * wait, which waits longer (a wait that times out pulls once more, and
 * would then find Y on the busy poller's run list).
 */
#define KEPT_WAIT_Z	msecs_to_jiffies(5000)
#define KEPT_WAIT_X_US	20000000

/**
 * struct kept_wait - X's upcall waits on Y while Y's poller keeps it.
 * @y: DTO, upcalls disabled, on CPU 1's poller.
 * @x: SINGLE_INSTANCE on CPU 0's; its upcall waits for two events of @y.
 * @z: DTO, SINGLE_INSTANCE on CPU 1's, queued behind @y; its upcall
 *	adds @y's second completion and waits for @x's wait to return.
 * @blk0: holds CPU 0's poller until a hook lets it run @x.
 * @x_late: @z's hook lets it, not @y's: @x's wait begins after CPU 1's
 *	poller kept @y (nobody waited then), before @z's upcall.
 * @x_task: the thread of @x's upcall.
 * @fired: the hook ran (it runs once).
 * @z_fired: @z's hook ran (it runs once).
 * @waited: a hook saw @x's wait registered on @y.
 * @slept: @z's hook saw @x's wait asleep.
 * @rc: what @x's wait returned.
 * @cookie: the cookie of the event it got.
 * @nmore: the events it left queued.
 * @z_saw_x: @z's upcall saw @x's wait return.
 * @x_done: @x's wait returned.
 * @z_done: @z's upcall returned.
 */
struct kept_wait {
	struct kevd *y, *x, *z;
	struct cross_block *blk0;
	bool x_late;
	struct task_struct *x_task;
	atomic_t fired;
	atomic_t z_fired;
	bool waited;
	bool slept;
	int rc;
	u64 cookie;
	u32 nmore;
	bool z_saw_x;
	struct completion x_done;
	struct completion z_done;
};

static void kept_wait_x_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct kept_wait *k = ctx;
	struct kevd_event got;

	WRITE_ONCE(k->x_task, current);
	k->rc = kevd_wait(k->y, KEPT_WAIT_X_US, 2, &got, &k->nmore);
	if (!k->rc)
		k->cookie = got.dto.cookie;
	complete_all(&k->x_done);
}

static void kept_wait_z_upcall(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct kept_wait *k = ctx;

	fake_cq_add_cookie(kevd_cq(k->y), 2);
	k->z_saw_x = wait_for_completion_timeout(&k->x_done, KEPT_WAIT_Z) > 0;
	complete(&k->z_done);
}

/*
 * At the start of CPU 1's poll of Y (its first completion): CPU 0's
 * poller runs X, whose upcall waits on Y; once it waits, a notification
 * for Y, which CPU 1's poller owns, makes it keep Y for another pass.
 * Spins: CPU 0 does the rest meanwhile.
 */
static void kept_wait_hook(struct ib_cq *cq, void *ctx)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct kept_wait *k = ctx;
	struct kevd_param p = { };

	if (atomic_xchg(&k->fired, 1))
		return;
	if (!k->x_late) {
		complete_all(&k->blk0->release);
		while (!kevd_query(k->y, &p) &&
		       !(p.state & KEVD_STATE_WAITED) &&
		       time_before(jiffies, end))
			cpu_relax();
		k->waited = p.state & KEVD_STATE_WAITED;
	}
	fake_cq_fire(cq);
}

/*
 * At the start of CPU 1's poll of Z, before Z's upcall (@x_late: CPU 0's
 * poller runs X now): X's wait has looked for Y and sleeps (it looks
 * again only when woken for Y).
 */
static void kept_wait_z_hook(struct ib_cq *cq, void *ctx)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct kept_wait *k = ctx;
	struct task_struct *t;
	bool asleep;

	if (atomic_xchg(&k->z_fired, 1))
		return;
	if (k->x_late)
		complete_all(&k->blk0->release);
	/* one look at its state: a wake may come between two */
	do {
		t = READ_ONCE(k->x_task);
		asleep = t && (READ_ONCE(t->__state) & TASK_INTERRUPTIBLE);
		if (!asleep)
			cpu_relax();
	} while (!asleep && time_before(jiffies, end));
	k->slept = asleep;
	/* X sleeps only in its wait (no query here: it would pull Y) */
	if (k->x_late)
		k->waited = k->slept;
}

KEVD_TEST_BOOL_PARAM(kept_wait, "wait_during_pass", "wait_after_keep");

/*
 * X's upcall, on CPU 0's poller, waits on Y, which CPU 1's poller keeps
 * for another pass (defer_arm, or a notification that came during its
 * pass over Y); next in CPU 1's round is Z, whose upcall waits for X's
 * wait, which sleeps by then. The wait began during that pass over Y, or
 * after it (then only the round CPU 1 publishes before Z's upcall holds
 * Y). Y's next pass is the waiter's to make, as for any EVD an upcall
 * waits on. Before, the kept EVD stayed with CPU 1's poller, busy in Z's
 * upcall: Z's wait for X's ran out (X's wait made the pass only when its
 * timeout ran out, or once Z's upcall returned).
 */
static void kevd_consumer_cross_wait_kept_pass(struct kunit *test)
{
	struct kevd_upcall up = { kept_wait_x_upcall, NULL };
	struct cross_block *blk1;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_event ev;
	struct kept_wait *k;
	struct kevd *c0, *c1;

	blk1 = cross_block_hold_on(test, &c1, 1);
	/* not the test's: a failed assertion leaves the upcalls using it */
	k = kzalloc(sizeof(*k), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, k);
	k->x_late = *(const bool *)test->param_value;
	init_completion(&k->x_done);
	init_completion(&k->z_done);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_DTO_FLAG;
	attr.cpu = 1;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	k->y = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, k->y);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(k->y, &ev), -EAGAIN);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(k->y)));
	up.ctx = k;
	k->x = kevd_test_create_on(test, 16, KEVD_SOFTWARE_FLAG,
				   KEVD_UPCALL_SINGLE_INSTANCE, &up, 0, 0);
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = (struct kevd_upcall){ kept_wait_z_upcall, k };
	k->z = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, k->z);
	KUNIT_ASSERT_TRUE(test, cq_wait_armed(kevd_cq(k->z)));
	k->blk0 = cross_block_hold_on(test, &c0, 0);

	/* both pollers busy: each EVD goes to its home, Y before Z */
	fake_cq_set_poll_hook(kevd_cq(k->y), kept_wait_hook, k);
	fake_cq_set_poll_hook(kevd_cq(k->z), kept_wait_z_hook, k);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(k->y), 1), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(k->z), 1), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(k->x, NULL), 0);
	complete_all(&blk1->release);

	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&k->z_done,
							  CONS_WAIT), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&k->x_done,
							  CONS_WAIT), 0);
	fake_cq_set_poll_hook(kevd_cq(k->y), NULL, NULL);
	fake_cq_set_poll_hook(kevd_cq(k->z), NULL, NULL);
	KUNIT_EXPECT_TRUE(test, k->waited);
	KUNIT_EXPECT_TRUE(test, k->slept);
	KUNIT_EXPECT_TRUE(test, k->z_saw_x);
	KUNIT_EXPECT_EQ(test, k->rc, 0);
	KUNIT_EXPECT_EQ(test, k->cookie, 1ULL);
	KUNIT_EXPECT_EQ(test, k->nmore, 1U);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(k->y, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 2ULL);

	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(k->x, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(k->z, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(k->x), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(k->z), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(k->y), 0);
	cross_block_end(test, k->blk0, c0);
	cross_block_end(test, blk1, c1);
	fake_hca_destroy(hca);
	kfree(k);
}

static void cross_wait_release(void *ctx)
{
	struct cross_wait *w = ctx;

	complete_all(&w->release);
}

/* At the start of a poll of B: CROSS_WAIT_LEAVE software events for B. */
static void cross_wait_se_hook(struct ib_cq *cq, void *ctx)
{
	struct cross_wait *w = ctx;
	int i;

	if (atomic_xchg(&w->fired, 1))
		return;
	for (i = 0; i < CROSS_WAIT_LEAVE; i++)
		kevd_post_se(w->b, (void *)(uintptr_t)i);
}

/**
 * struct cross_atomic - a dequeue of B with preemption off, on CPU 0.
 * @w: the cross wait.
 * @rc: what it returned.
 * @done: it returned.
 */
struct cross_atomic {
	struct cross_wait *w;
	int rc;
	struct completion done;
};

/*
 * On CPU 0, the waiter's: the waiter cannot run until the dequeue has
 * returned, its pull's hand-on included. The waiter's first pull may
 * own B for a moment when the dequeue begins: it finds nothing then,
 * and tries again, for a bounded time.
 */
static int cross_atomic_fn(void *arg)
{
	unsigned long end = jiffies + CONS_WAIT;
	struct cross_atomic *d = arg;
	struct kevd_event ev;

	do {
		preempt_disable();
		d->rc = kevd_dequeue(d->w->b, &ev);
		preempt_enable();
		cond_resched();
	} while (d->rc == -EAGAIN && time_before(jiffies, end));
	complete(&d->done);
	return 0;
}

/*
 * Two pollers, none held. A's upcall waits for CROSS_WAIT_LEAVE events
 * of B, then stays inside until the test has taken the rest of B's
 * events. B's CQ gets CROSS_WAIT_MANY completions that do not notify,
 * and a thread on CPU 0 dequeues, with preemption off: at its pull's
 * first poll, CROSS_WAIT_LEAVE software events are posted to B, which
 * wake the waiter, and the pull moves its budget of completions into the
 * ring behind them and hands B on to the waiter's poller. The waiter
 * runs after that, and returns with its event without making that pass:
 * the pass must then go to the other poller, not wait for the upcall, so
 * that the rest comes to a consumer outside the pollers while the
 * upcall stays inside.
 */
static void kevd_consumer_cross_wait_leaves_pass(struct kunit *test)
{
	struct cross_atomic *d;
	struct task_struct *t;
	struct cross_wait *w;
	struct kevd_event ev;
	u32 nmore;
	int i;

	if (kevd_nr_pollers() != 2 || !cpu_online(1))
		kunit_skip(test, "needs two pollers, on CPUs 0 and 1");
	/* not the test's: the thread may still use it after a failure */
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, d);
	init_completion(&d->done);
	w = cross_wait_new(test, CROSS_WAIT_LEAVE, 512, 1);
	w->hold = true;
	d->w = w;
	/* the upcall returns also if an assertion ends the test */
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							cross_wait_release,
							w), 0);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(w->b), 1000, 0),
			0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->a), 1), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(w->b));
	for (i = 0; i < CROSS_WAIT_MANY; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(w->b), 100 + i),
				0);
	fake_cq_set_poll_hook(kevd_cq(w->b), cross_wait_se_hook, w);
	t = kthread_create(cross_atomic_fn, d, "kevd_cons_atomic");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	kthread_bind(t, 0);
	wake_up_process(t);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&d->done, CONS_WAIT),
			0);
	KUNIT_EXPECT_EQ(test, d->rc, 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done, CONS_WAIT),
			0);
	fake_cq_set_poll_hook(kevd_cq(w->b), NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&w->fired), 1);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	/* the upcall is still inside: the rest, from this thread */
	for (i = 0; i < CROSS_WAIT_MANY + CROSS_WAIT_LEAVE - 2; i++) {
		if (kevd_wait(w->b, CROSS_WAIT_US, 1, &ev, &nmore))
			break;
	}
	KUNIT_EXPECT_EQ(test, i, CROSS_WAIT_MANY + CROSS_WAIT_LEAVE - 2);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(w->b, &ev), -EAGAIN);
	kunit_release_action(test, cross_wait_release, w);
	cross_wait_free(test, w);
	kfree(d);
}

/* --- a free behind another EVD's upcall ---------------------------------- */

/*
 * kevd_consumer_free_behind_upcall: the one poller's round holds X and B;
 * X's upcall waits until the test thread's kevd_free() of B returns. X
 * may be slow already: a poller with nobody to pass its EVDs to keeps
 * them (kevd_poller_shed()), and must put them back all the same.
 */
struct qround {
	struct completion w_entered, w_release, x_slow_done, x_entered, freed;
	atomic_t x_calls;
	int x_slow_calls;
	bool x_gave_up;
};

KEVD_TEST_BOOL_PARAM(qround, "fast", "slow");

static void qr_w_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qround *q = ctx;

	complete(&q->w_entered);
	wait_for_completion(&q->w_release);
}

static void qr_x_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct qround *q = ctx;

	if (atomic_inc_return(&q->x_calls) <= q->x_slow_calls) {
		/* The stimulus (a slow upcall), not a synchronisation. */
		msleep(20);
		complete(&q->x_slow_done);
		return;
	}
	complete(&q->x_entered);
	if (!wait_for_completion_timeout(&q->freed, CONS_WAIT))
		WRITE_ONCE(q->x_gave_up, true);
}

/*
 * A poller's round takes every EVD queued on it at once. A kevd_free() of
 * one of them must not wait for the upcalls of the others: here X's
 * upcall waits for that very free (a consumer's upcall that waits for a
 * thread, which frees an unrelated EVD first). Before its first upcall
 * the poller puts the rest of its round back where kevd_free() finds it.
 */
static void kevd_consumer_free_behind_upcall(struct kunit *test)
{
	const bool *slow = test->param_value;
	struct kevd *w, *x, *b;
	struct qround *q;
	bool gave_up;
	int ret;

	cross_wait_one_poller(test);
	/* not the test's: a failed assertion leaves upcalls that use it */
	q = kzalloc(sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, q);
	init_completion(&q->w_entered);
	init_completion(&q->w_release);
	init_completion(&q->x_slow_done);
	init_completion(&q->x_entered);
	init_completion(&q->freed);
	q->x_slow_calls = *slow;
	w = qf_create(test, qr_w_upcall, q, 0);
	x = qf_create(test, qr_x_upcall, q, 0);
	b = qf_create(test, qf_nop_upcall, q, 0);

	if (*slow) {
		/* X is slow from now on: a shed before its batches */
		KUNIT_ASSERT_EQ(test, kevd_post_se(x, NULL), 0);
		KUNIT_ASSERT_GT(test,
				wait_for_completion_timeout(&q->x_slow_done,
							    CONS_WAIT), 0);
	}
	KUNIT_ASSERT_EQ(test, kevd_post_se(w, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->w_entered,
							  CONS_WAIT), 0);
	/* the poller is inside W's upcall: X, then B, on its run list */
	KUNIT_ASSERT_EQ(test, kevd_post_se(x, NULL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(b, NULL), 0);
	/* its next round takes both; X's upcall waits for the free */
	complete(&q->w_release);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&q->x_entered,
							  CONS_WAIT), 0);
	ret = kevd_free(b);
	complete(&q->freed);
	KUNIT_EXPECT_EQ(test, ret, 0);
	/* X's upcall has returned: its verdict is final */
	KUNIT_EXPECT_EQ(test, kevd_free(x), 0);
	gave_up = q->x_gave_up;
	KUNIT_EXPECT_FALSE_MSG(test, gave_up,
			       "kevd_free(B) waited for X's upcall");
	KUNIT_EXPECT_EQ(test, kevd_free(w), 0);
	kfree(q);
	cross_wait_pool_back(test);
}

/* --- a wait inside the upcall ------------------------------------------- */

/**
 * struct upwait_cons - an upcall that disables upcalls, then waits.
 * @evd: its EVD.
 * @calls: upcalls.
 * @rc: what kevd_wait() with a timeout returned (read by the test after
 *	@calls).
 * @rc0: and kevd_wait() with none.
 */
struct upwait_cons {
	struct kevd *evd;
	atomic_t calls;
	int rc, rc0;
};

static void upwait_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct upwait_cons *c = ctx;
	struct kevd_event e;
	u32 nmore;

	kevd_modify_upcall(c->evd, KEVD_UPCALL_DISABLE, NULL,
			   KEVD_UPCALL_INVOC_ANY);
	/* work completes: this thread would have to poll it */
	fake_cq_add_cookie(kevd_cq(c->evd), 7);
	c->rc = kevd_wait(c->evd, USEC_PER_SEC, 1, &e, &nmore);
	c->rc0 = kevd_wait(c->evd, 0, 1, &e, &nmore);
	atomic_inc(&c->calls);
}

/*
 * kevd_wait() from inside an upcall of its EVD would sleep on the poller
 * that owns the EVD, so no completion could reach it: it fails at once
 * with -EDEADLK (a timeout of 0 only looks). The completion stays for
 * the consumer's next call outside the upcall.
 */
static void kevd_consumer_wait_inside_upcall(struct kunit *test)
{
	struct kevd_upcall up = { upwait_upcall, NULL };
	struct upwait_cons *c;
	struct fake_hca *hca;
	struct kevd_event ev;
	u32 nmore;

	c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, c);
	c->evd = si_hca_evd(test, &hca, 16, 16, up, c);
	KUNIT_ASSERT_EQ(test, kevd_post_se(c->evd, NULL), 0);
	KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&c->calls, 1));
	KUNIT_EXPECT_EQ(test, c->rc, -EDEADLK);
	KUNIT_EXPECT_EQ(test, c->rc0, -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, kevd_wait(c->evd, 60 * USEC_PER_SEC, 1, &ev,
					&nmore), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 7ULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->calls), 1);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
	fake_hca_destroy(hca);
}

static struct kunit_case kevd_consumer_cases[] = {
	KUNIT_CASE_PARAM_ATTR(kevd_consumer_seed_pattern,
			      seed_stream_gen_params, { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE(kevd_consumer_unknown_event_number),
	KUNIT_CASE(kevd_consumer_disconnect_after_flushes),
	KUNIT_CASE(kevd_consumer_disconnect_dequeued_after_post),
	KUNIT_CASE(kevd_consumer_established_behind_held),
	KUNIT_CASE(kevd_consumer_fenced_event_discarded),
	KUNIT_CASE(kevd_consumer_resize_counts_held),
	KUNIT_CASE(kevd_consumer_cq_error_releases_held),
	KUNIT_CASE(kevd_consumer_dto_defined_fields),
	KUNIT_CASE_PARAM(kevd_consumer_full_ring_resumes,
			 stall_policy_gen_params),
	KUNIT_CASE(kevd_consumer_resize_keeps_threshold),
	KUNIT_CASE(kevd_consumer_free_at_stop_event),
	KUNIT_CASE(kevd_consumer_create_on_async_being_freed),
	KUNIT_CASE(kevd_consumer_resize_while_freed),
	KUNIT_CASE(kevd_consumer_free_while_freed),
	KUNIT_CASE(kevd_consumer_si_blocked_room),
	KUNIT_CASE(kevd_consumer_count_never_wraps),
	KUNIT_CASE(kevd_consumer_notify_rings_queued),
	KUNIT_CASE(kevd_consumer_unwaitable_cancels_current),
	KUNIT_CASE(kevd_consumer_unwaitable_cancels_unregistered),
	KUNIT_CASE(kevd_consumer_post_se_beside_poll),
	KUNIT_CASE(kevd_consumer_batch_fills_small_queue),
	KUNIT_CASE(kevd_consumer_unowned_pins_kevd),
	KUNIT_CASE(kevd_consumer_reap_forgets_upcall),
	KUNIT_CASE_PARAM(kevd_consumer_destroy_qp_drains, qp_end_gen_params),
	KUNIT_CASE_PARAM(kevd_consumer_destroy_qp_srq, qp_srq_gen_params),
	KUNIT_CASE(kevd_consumer_cq_overrun_after_resize),
	KUNIT_CASE(kevd_consumer_resize_keeps_drop),
	KUNIT_CASE_SLOW(kevd_consumer_largest_qlen),
	KUNIT_CASE_SLOW(kevd_consumer_giveback_at_largest),
	KUNIT_CASE_SLOW(kevd_consumer_direct_at_largest),
	KUNIT_CASE(kevd_consumer_fence_after_empty_poll),
	KUNIT_CASE(kevd_consumer_free_while_resized),
	KUNIT_CASE(kevd_consumer_async_overflow_counted),
	KUNIT_CASE(kevd_consumer_free_other_from_upcall),
	KUNIT_CASE(kevd_consumer_free_shed_to_blocked_poller),
	KUNIT_CASE(kevd_consumer_many_give_back_order),
	KUNIT_CASE(kevd_consumer_drain_in_upcall),
	KUNIT_CASE(kevd_consumer_wait_batch_in_upcall),
	KUNIT_CASE(kevd_consumer_wait_from_other_upcall),
	KUNIT_CASE(kevd_consumer_cross_wait_one_poller),
	KUNIT_CASE(kevd_consumer_cross_wait_busy_pollers),
	KUNIT_CASE(kevd_consumer_many_skips_busy_poller),
	KUNIT_CASE(kevd_consumer_cross_wait_other_dequeue),
	KUNIT_CASE_PARAM(kevd_consumer_cross_wait_kept_pass,
			 kept_wait_gen_params),
	KUNIT_CASE(kevd_consumer_cross_wait_leaves_pass),
	KUNIT_CASE(kevd_consumer_cross_wait_arm_fails),
	KUNIT_CASE_PARAM(kevd_consumer_free_behind_upcall,
			 qround_gen_params),
	KUNIT_CASE(kevd_consumer_post_during_poll),
	KUNIT_CASE(kevd_consumer_wait_inside_upcall),
	KUNIT_CASE_PARAM(kevd_consumer_external_disable,
			 ext_policy_gen_params),
	KUNIT_CASE_PARAM(kevd_consumer_giveback_full_ring,
			 giveback_policy_gen_params),
	KUNIT_CASE(kevd_consumer_giveback_spares_headroom),
	KUNIT_CASE_PARAM(kevd_consumer_teardown_not_undone, td_undo_gen_params),
	KUNIT_CASE(kevd_consumer_sleeping_calls_refuse_irq),
	KUNIT_CASE(kevd_consumer_fifo_across_streams),
	KUNIT_CASE(kevd_consumer_headroom_and_overflow),
	KUNIT_CASE(kevd_consumer_query_fields),
	KUNIT_CASE(kevd_consumer_wait_signal),
	KUNIT_CASE_SLOW(kevd_consumer_wait_timeout_shrinks),
	KUNIT_CASE(kevd_consumer_ib_event_map),
	KUNIT_CASE(kevd_consumer_resize_grows_cq),
	KUNIT_CASE(kevd_consumer_cq_attributes),
	KUNIT_CASE(kevd_consumer_vectors_spread),
	KUNIT_CASE(kevd_consumer_pull_batches),
	KUNIT_CASE(kevd_consumer_pull_busy_no_arm),
	KUNIT_CASE(kevd_consumer_pull_unarmed_covered),
	KUNIT_CASE(kevd_consumer_pull_stall_no_poller),
	KUNIT_CASE(kevd_consumer_pull_budget_no_poller),
	KUNIT_CASE(kevd_consumer_wait_batch_tops_up),
	KUNIT_CASE(kevd_consumer_wait_wake_no_arm),
	KUNIT_CASE(kevd_consumer_wait_empty_notification),
	KUNIT_CASE(kevd_consumer_wait_error_nmore),
	KUNIT_CASE(kevd_consumer_wait_keeps_arm),
	KUNIT_CASE(kevd_consumer_disable_during_arm),
	KUNIT_CASE(kevd_consumer_doorbell_holds_nothing),
	KUNIT_CASE_PARAM(kevd_consumer_notify_after_direct,
			 bell_switch_gen_params),
	KUNIT_CASE(kevd_consumer_null_stats_and_attr),
	KUNIT_CASE_PARAM(kevd_consumer_wait_while_freed,
			 freed_queued_gen_params),
	KUNIT_CASE(kevd_consumer_free_queued_elsewhere),
	KUNIT_CASE(kevd_consumer_free_own_queued_while_torn_down),
	KUNIT_CASE(kevd_consumer_raw_upcall),
	KUNIT_CASE(kevd_consumer_raw_failed_opcode),
	KUNIT_CASE(kevd_consumer_cq_depth_max),
	KUNIT_CASE_PARAM(kevd_consumer_moderated_cq, mod_mode_gen_params),
	KUNIT_CASE(kevd_consumer_cq_dim_moderates),
	KUNIT_CASE(kevd_consumer_cq_dim_off),
	KUNIT_CASE(kevd_consumer_arm_failure),
	KUNIT_CASE(kevd_consumer_poll_failure),
	KUNIT_CASE_PARAM(kevd_consumer_poll_failure_passes,
			 mod_mode_gen_params),
	KUNIT_CASE(kevd_consumer_wait_poll_threshold),
	KUNIT_CASE(kevd_consumer_backpressure_with_upcalls),
	KUNIT_CASE(kevd_consumer_counts_balance),
	KUNIT_CASE(kevd_consumer_counts_handed),
	KUNIT_CASE(kevd_consumer_query_counts_ordered),
	KUNIT_CASE_PARAM_ATTR(kevd_consumer_random, rnd_kind_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	{}
};

static struct kunit_suite kevd_consumer_suite = {
	.name = "kevd_consumer",
	.test_cases = kevd_consumer_cases,
};

kunit_test_suite(kevd_consumer_suite);
