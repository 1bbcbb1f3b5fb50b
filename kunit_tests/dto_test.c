// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_dto: the DTO stream on the fake HCA, under all four notify
 * behaviours; the 2006 race made visible; the extended notify closing it;
 * status and opcode mapping; backpressure; CQ overrun; teardown while the
 * HCA fires.
 */
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include "kevd_test.h"
#include "fake_hca.h"

static unsigned int dto_stress_events;
module_param(dto_stress_events, uint, 0444);
MODULE_PARM_DESC(dto_stress_events,
		 "Completions per notify mode in kevd_dto_stress, shared by its six consumers and their parts (0: 10^6 with two CPUs or more, 10^5 with one)");

static const enum fake_hca_mode all_modes[] = {
	FAKE_HCA_LENIENT_REPORT, FAKE_HCA_LENIENT_IGNORE,
	FAKE_HCA_STRICT_REPORT, FAKE_HCA_STRICT_IGNORE,
};

static void mode_desc(const enum fake_hca_mode *m, char *desc)
{
	strscpy(desc, fake_hca_mode_name(*m), KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(dto_mode, all_modes, mode_desc);

/* A DTO consumer: cookies must arrive as 0, 1, 2, ... */
struct dto_rec {
	atomic_t delivered;
	atomic_t order_errors;
	atomic_t bad;
	u64 next;
};

static void dto_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct dto_rec *r = ctx;

	if (!ev || ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
	    ev->dto.status != KEVD_DTO_SUCCESS) {
		atomic_inc(&r->bad);
		return;
	}
	if (ev->dto.cookie != r->next)
		atomic_inc(&r->order_errors);
	r->next = ev->dto.cookie + 1;
	atomic_inc(&r->delivered);
}

struct dto_env {
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;
	struct dto_rec rec;
};

static struct dto_env *dto_env_new(struct kunit *test, enum fake_hca_mode m,
				   u32 qlen, u32 cq_depth, int policy,
				   struct kevd *async_evd)
{
	struct dto_env *e = kunit_kzalloc(test, sizeof(*e), GFP_KERNEL);
	struct kevd_attr attr;

	KUNIT_ASSERT_NOT_NULL(test, e);
	e->hca = fake_hca_create(m);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, e->hca);
	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = cq_depth;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = policy;
	attr.upcall.func = dto_upcall;
	attr.upcall.ctx = &e->rec;
	attr.cpu = 0;
	attr.async_evd = async_evd;
	e->evd = kevd_create(fake_hca_ibdev(e->hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, e->evd);
	e->cq = kevd_cq(e->evd);
	KUNIT_ASSERT_NOT_NULL(test, e->cq);
	return e;
}

static void dto_env_free(struct kunit *test, struct dto_env *e)
{
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(e->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(e->evd), 0);
	fake_hca_destroy(e->hca);
}

/* --- the mapping ------------------------------------------------------ */

/*
 * The status table of Documentation/kevd/api.rst ("DTO status"), keyed by
 * ib_core's own name for each status: the meaning, not kevd's table.
 */
static const struct {
	const char *msg;
	u32 dat;
} kevd_doc_status[] = {
	{ "success", KEVD_DTO_SUCCESS },
	{ "local length error", KEVD_DTO_ERR_LOCAL_LENGTH },
	{ "local QP operation error", KEVD_DTO_ERR_LOCAL_EP },
	{ "local EE context operation error", KEVD_DTO_ERR_LOCAL_EP },
	{ "local protection error", KEVD_DTO_ERR_LOCAL_PROTECTION },
	{ "WR flushed", KEVD_DTO_ERR_FLUSHED },
	{ "memory bind operation error", KEVD_DTO_ERR_RMR_OPERATION_FAILED },
	{ "bad response error", KEVD_DTO_ERR_BAD_RESPONSE },
	{ "local access error", KEVD_DTO_ERR_LOCAL_PROTECTION },
	{ "remote invalid request error", KEVD_DTO_ERR_REMOTE_RESPONDER },
	{ "remote access error", KEVD_DTO_ERR_REMOTE_ACCESS },
	{ "remote operation error", KEVD_DTO_ERR_REMOTE_RESPONDER },
	{ "transport retry counter exceeded", KEVD_DTO_ERR_TRANSPORT },
	{ "RNR retry counter exceeded", KEVD_DTO_ERR_RECEIVER_NOT_READY },
	{ "local RDD violation error", KEVD_DTO_ERR_LOCAL_PROTECTION },
	{ "remote invalid RD request", KEVD_DTO_ERR_REMOTE_RESPONDER },
	{ "operation aborted", KEVD_DTO_ERR_PARTIAL_PACKET },
	{ "invalid EE context number", KEVD_DTO_ERR_TRANSPORT },
	{ "invalid EE context state", KEVD_DTO_ERR_TRANSPORT },
	{ "fatal error", KEVD_DTO_ERR_TRANSPORT },
	{ "response timeout error", KEVD_DTO_ERR_TRANSPORT },
	{ "general error", KEVD_DTO_ERR_LOCAL_MM_ERROR },
};

#define KEVD_WC_STATUS_WALK	256	/* well past the last status */

/*
 * Walk every status the running kernel's ib_core names: each must have
 * its documented DAT meaning, and every documented row must be one of
 * them; a value ib_core does not know maps to LOCAL_MM_ERROR.
 */
static void kevd_dto_status_map(struct kunit *test)
{
	const char *unknown = ib_wc_status_msg(-1);
	unsigned int s, i, known = 0;
	const char *msg;

	for (s = 0; s < KEVD_WC_STATUS_WALK; s++) {
		msg = ib_wc_status_msg(s);
		if (!strcmp(msg, unknown)) {
			KUNIT_EXPECT_EQ_MSG(test, kevd_wc_status(s),
					    (u32)KEVD_DTO_ERR_LOCAL_MM_ERROR,
					    "status %u (not ib_core's)", s);
			continue;
		}
		known++;
		for (i = 0; i < ARRAY_SIZE(kevd_doc_status); i++)
			if (!strcmp(msg, kevd_doc_status[i].msg))
				break;
		if (i == ARRAY_SIZE(kevd_doc_status)) {
			KUNIT_FAIL(test, "status %u (%s): no documented DAT status",
				   s, msg);
			continue;
		}
		KUNIT_EXPECT_EQ_MSG(test, kevd_wc_status(s),
				    kevd_doc_status[i].dat, "status %u (%s)", s,
				    msg);
	}
	KUNIT_EXPECT_EQ(test, known, (unsigned int)ARRAY_SIZE(kevd_doc_status));
	KUNIT_EXPECT_EQ(test, kevd_wc_status(-1),
			(u32)KEVD_DTO_ERR_LOCAL_MM_ERROR);
}

static void kevd_dto_opcode_map(struct kunit *test)
{
	static const struct { int op; int flags; u32 dat; } map[] = {
		{ IB_WC_SEND, 0, KEVD_DTO_SEND },
		{ IB_WC_RDMA_WRITE, 0, KEVD_DTO_RDMA_WRITE },
		{ IB_WC_RDMA_WRITE, IB_WC_WITH_IMM, KEVD_DTO_RDMA_WRITE_IMMED },
		{ IB_WC_RDMA_READ, 0, KEVD_DTO_RDMA_READ },
		{ IB_WC_COMP_SWAP, 0, KEVD_DTO_CMP_AND_SWAP },
		{ IB_WC_MASKED_COMP_SWAP, 0, KEVD_DTO_CMP_AND_SWAP },
		{ IB_WC_FETCH_ADD, 0, KEVD_DTO_FETCH_AND_ADD },
		{ IB_WC_MASKED_FETCH_ADD, 0, KEVD_DTO_FETCH_AND_ADD },
		{ IB_WC_BIND_MW, 0, KEVD_DTO_BIND_MW },
		{ IB_WC_LOCAL_INV, 0, KEVD_DTO_LMR_INVALIDATE },
		{ IB_WC_REG_MR, 0, KEVD_DTO_LMR_FMR },
		{ IB_WC_RECV, 0, KEVD_DTO_RECEIVE },
		{ IB_WC_RECV, IB_WC_WITH_IMM, KEVD_DTO_RECEIVE },
		{ IB_WC_RECV, IB_WC_WITH_INVALIDATE,
		  KEVD_DTO_RECEIVE_WITH_INVALIDATE },
		{ IB_WC_RECV_RDMA_WITH_IMM, IB_WC_WITH_IMM,
		  KEVD_DTO_RECEIVE_IMMED },
		{ IB_WC_LSO, 0, KEVD_DTO_UNKNOWN },
		{ 0x7f, 0, KEVD_DTO_UNKNOWN },
	};
	struct ib_wc wc = {};
	int i;

	for (i = 0; i < ARRAY_SIZE(map); i++) {
		wc.opcode = map[i].op;
		wc.wc_flags = map[i].flags;
		KUNIT_EXPECT_EQ_MSG(test, kevd_wc_opcode(&wc), map[i].dat,
				    "opcode %d flags %d", map[i].op,
				    map[i].flags);
	}
	/* a failed completion's opcode is undefined: a stale one is not read */
	wc.status = IB_WC_WR_FLUSH_ERR;
	for (i = 0; i < ARRAY_SIZE(map); i++) {
		wc.opcode = map[i].op;
		wc.wc_flags = map[i].flags;
		KUNIT_EXPECT_EQ_MSG(test, kevd_wc_opcode(&wc),
				    (u32)KEVD_DTO_UNKNOWN,
				    "failed, stale opcode %d", map[i].op);
	}
}

static void kevd_dto_wc_to_event(struct kunit *test)
{
	struct ib_qp qp = { .qp_context = &qp };
	struct kevd_event ev;
	struct ib_wc wc = {
		.wr_id = 0x1234567890ULL,
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_RECV_RDMA_WITH_IMM,
		.wc_flags = IB_WC_WITH_IMM,
		.byte_len = 4096,
		.qp = &qp,
		.ex.imm_data = cpu_to_be32(0xdeadbeef),
	};

	memset(&ev, 0xa5, sizeof(ev));
	kevd_wc_to_event(&wc, &ev);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 0x1234567890ULL);
	KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, (void *)&qp);
	KUNIT_EXPECT_EQ(test, ev.dto.transferred_length, 4096U);
	KUNIT_EXPECT_EQ(test, ev.dto.operation, (u16)KEVD_DTO_RECEIVE_IMMED);
	KUNIT_EXPECT_TRUE(test, ev.dto.has_imm);
	KUNIT_EXPECT_EQ(test, ev.dto.imm_data, 0xdeadbeefU);

	/* A flushed completion: length and operation are defined, zero. */
	wc.status = IB_WC_WR_FLUSH_ERR;
	wc.byte_len = 77;
	memset(&ev, 0xa5, sizeof(ev));
	kevd_wc_to_event(&wc, &ev);
	KUNIT_EXPECT_EQ(test, ev.dto.status, (u32)KEVD_DTO_ERR_FLUSHED);
	KUNIT_EXPECT_EQ(test, ev.dto.transferred_length, 0U);
	KUNIT_EXPECT_EQ(test, ev.dto.operation, (u16)KEVD_DTO_UNKNOWN);
	KUNIT_EXPECT_FALSE(test, ev.dto.has_imm);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 0x1234567890ULL);
}

/* --- the race --------------------------------------------------------- */

struct inject {
	atomic_t left;		/* CQEs still to inject, one per arm */
	atomic_t injected;
};

static void inject_hook(struct ib_cq *cq, void *ctx)
{
	struct inject *in = ctx;

	if (atomic_dec_if_positive(&in->left) >= 0) {
		fake_cq_add_seq(cq);
		atomic_inc(&in->injected);
	}
}

static void count_handler(struct ib_cq *cq, void *ctx)
{
	atomic_inc(ctx);
}

/*
 * The plain drain-then-arm sequence (test-only, never a kevd mode) on a
 * strict HCA with a CQE landing in the arm window: no notification ever
 * comes and the CQE stays unseen. This is the 2006 bug.
 */
static void kevd_dto_race_visible(struct kunit *test)
{
	struct ib_cq_init_attr ca = { .cqe = 16 };
	struct inject in = { ATOMIC_INIT(1), ATOMIC_INIT(0) };
	struct fake_hca *hca;
	atomic_t notified = ATOMIC_INIT(0);
	struct ib_wc wc;
	struct ib_cq *cq;

	hca = fake_hca_create(FAKE_HCA_STRICT_IGNORE);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	cq = ib_create_cq(fake_hca_ibdev(hca), count_handler, NULL, &notified,
			  &ca);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, cq);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	/* drain ... */
	while (ib_poll_cq(cq, 1, &wc) > 0)
		;
	/* ... then arm; a completion lands in between. */
	fake_cq_set_arm_hook(cq, inject_hook, &in);
	ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
	fake_cq_set_arm_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&in.injected), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&notified), 0);
	KUNIT_EXPECT_EQ(test, fake_cq_count(cq), 1U);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	ib_destroy_cq(cq);
	fake_hca_destroy(hca);
}

/* --- every consumer: DISABLE (dequeue, wait), SINGLE, NOTIFY, MANY ------- */

enum dto_cons_kind {
	DTO_CONS_DEQUEUE,	/* DISABLE, a thread dequeues */
	DTO_CONS_WAIT,		/* DISABLE, a thread waits */
	DTO_CONS_SINGLE,	/* SINGLE_INSTANCE, completions only */
	DTO_CONS_SINGLE_MIXED,	/* SINGLE_INSTANCE */
	DTO_CONS_NOTIFY,	/* the doorbell dequeues */
	DTO_CONS_MANY,		/* no order: each cookie once */
};

static const char * const dto_cons_names[] = {
	"dequeue", "wait", "single", "single_mixed", "notify", "many",
};

struct dto_case {
	enum fake_hca_mode mode;
	enum dto_cons_kind cons;
};

/* every notify behaviour with every consumer */
static const struct dto_case dto_cases[] = {
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_DEQUEUE },
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_WAIT },
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_SINGLE },
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_SINGLE_MIXED },
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_NOTIFY },
	{ FAKE_HCA_LENIENT_REPORT, DTO_CONS_MANY },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_DEQUEUE },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_WAIT },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_SINGLE },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_SINGLE_MIXED },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_NOTIFY },
	{ FAKE_HCA_LENIENT_IGNORE, DTO_CONS_MANY },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_DEQUEUE },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_WAIT },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_SINGLE },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_SINGLE_MIXED },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_NOTIFY },
	{ FAKE_HCA_STRICT_REPORT, DTO_CONS_MANY },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_DEQUEUE },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_WAIT },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_SINGLE },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_SINGLE_MIXED },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_NOTIFY },
	{ FAKE_HCA_STRICT_IGNORE, DTO_CONS_MANY },
};

static void dto_case_desc(const struct dto_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s_%s",
		 fake_hca_mode_name(c->mode), dto_cons_names[c->cons]);
}

KUNIT_ARRAY_PARAM(dto_case, dto_cases, dto_case_desc);
KEVD_TEST_PARTS_PARAM(dto_stress, dto_cases, dto_case_desc, 3);

/*
 * What a consumer saw: completions (cookies 0, 1, 2, ... in CQ order) and
 * software events (0, 1, 2, ... in posting order). Ordered consumers
 * check the sequence; MANY marks a bitmap (each cookie once).
 */
struct dto_cons {
	enum dto_cons_kind kind;
	struct kevd *evd;
	atomic_t dto, sw, order_errors, dups, bad;
	u64 next_dto;
	unsigned long next_sw;
	unsigned long *seen;	/* MANY */
	u32 nbits;
	struct task_struct *thread;	/* DISABLE's consumer */
	/* an upcall of software event @hold_sw waits for @release */
	unsigned long hold_sw;
	struct completion *entered, *release;
};

static bool dto_cons_ordered(const struct dto_cons *c)
{
	return c->kind != DTO_CONS_MANY;
}

static void dto_cons_record(struct dto_cons *c, const struct kevd_event *ev)
{
	if (ev->event_number == KEVD_DTO_COMPLETION_EVENT &&
	    ev->dto.status == KEVD_DTO_SUCCESS) {
		if (!dto_cons_ordered(c)) {
			if (ev->dto.cookie >= c->nbits ||
			    test_and_set_bit(ev->dto.cookie, c->seen))
				atomic_inc(&c->dups);
		} else {
			if (ev->dto.cookie != c->next_dto)
				atomic_inc(&c->order_errors);
			c->next_dto = ev->dto.cookie + 1;
		}
		atomic_inc(&c->dto);
	} else if (ev->event_number == KEVD_SOFTWARE_EVENT) {
		if (dto_cons_ordered(c)) {
			if ((unsigned long)ev->software.pointer != c->next_sw)
				atomic_inc(&c->order_errors);
			c->next_sw = (unsigned long)ev->software.pointer + 1;
		}
		atomic_inc(&c->sw);
	} else {
		atomic_inc(&c->bad);
	}
}

static void dto_cons_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct dto_cons *c = ctx;
	struct kevd_event e;

	if (ev) {
		dto_cons_record(c, ev);
		if (c->release && ev->event_number == KEVD_SOFTWARE_EVENT &&
		    (unsigned long)ev->software.pointer == c->hold_sw) {
			complete(c->entered);
			wait_for_completion(c->release);
		}
		return;
	}
	while (!kevd_dequeue(c->evd, &e))	/* NOTIFY's doorbell */
		dto_cons_record(c, &e);
}

static int dto_cons_thread(void *data)
{
	struct dto_cons *c = data;
	struct kevd_event ev;
	u32 nmore;
	int rc;

	while (!kthread_should_stop()) {
		if (c->kind == DTO_CONS_WAIT)
			rc = kevd_wait(c->evd, 10000, 1, &ev, &nmore);
		else
			rc = kevd_dequeue(c->evd, &ev);
		if (!rc)
			dto_cons_record(c, &ev);
		else if (rc == -EAGAIN)	/* a backoff, not a synchronisation */
			usleep_range(20, 100);
		else if (rc != -ETIMEDOUT)
			atomic_inc(&c->bad);
	}
	return 0;
}

static const int dto_cons_policy[] = {
	[DTO_CONS_DEQUEUE] = KEVD_UPCALL_DISABLE,
	[DTO_CONS_WAIT] = KEVD_UPCALL_DISABLE,
	[DTO_CONS_SINGLE] = KEVD_UPCALL_SINGLE_INSTANCE,
	[DTO_CONS_SINGLE_MIXED] = KEVD_UPCALL_SINGLE_INSTANCE,
	[DTO_CONS_NOTIFY] = KEVD_UPCALL_NOTIFY,
	[DTO_CONS_MANY] = KEVD_UPCALL_MANY,
};

/* A DTO EVD (with the software stream but for SINGLE) and its consumer. */
static struct dto_cons *dto_cons_new(struct kunit *test, struct fake_hca *hca,
				     enum dto_cons_kind kind, u32 qlen,
				     u32 cq_depth, u32 nbits)
{
	struct dto_cons *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_attr attr;

	KUNIT_ASSERT_NOT_NULL(test, c);
	c->kind = kind;
	if (kind == DTO_CONS_MANY) {
		c->nbits = nbits;
		c->seen = kunit_kcalloc(test, BITS_TO_LONGS(nbits),
					sizeof(long), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, c->seen);
	}
	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = cq_depth;
	attr.flags = KEVD_DTO_FLAG;
	if (kind != DTO_CONS_SINGLE)
		attr.flags |= KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = dto_cons_policy[kind];
	attr.upcall.func = dto_cons_upcall;
	attr.upcall.ctx = c;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	c->evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, c->evd);
	if (attr.upcall_policy == KEVD_UPCALL_DISABLE) {
		c->thread = kthread_run(dto_cons_thread, c, "kevd_test_cons");
		KUNIT_ASSERT_FALSE(test, IS_ERR(c->thread));
	}
	return c;
}

/* Stop the consumer (TEARDOWN, or its thread) and free the EVD. */
static void dto_cons_free(struct kunit *test, struct dto_cons *c)
{
	if (c->thread)
		kthread_stop(c->thread);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(c->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(c->evd), 0);
}

/* The checks every consumer must pass once @dto and @sw events arrived. */
static void dto_cons_expect(struct kunit *test, struct dto_cons *c, u64 dto,
			    u32 sw)
{
	struct kevd_param p;

	KUNIT_EXPECT_EQ(test, (u64)atomic_read(&c->dto), dto);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->sw), (int)sw);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->dups), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&c->bad), 0);
	if (c->seen)
		KUNIT_EXPECT_EQ(test, (u64)bitmap_weight(c->seen, c->nbits), dto);
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], dto);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], dto);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_SOFTWARE], (u64)sw);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
}

struct sw_producer {
	struct kevd *evd;
	u32 n;
	atomic_t posted;
	atomic_t errors;
};

/* Software events 0 .. n-1, retried while the ring is full. */
static int sw_producer_fn(void *data)
{
	struct sw_producer *s = data;
	u32 i = 0;
	int rc;

	while (i < s->n && !kthread_should_stop()) {
		rc = kevd_post_se(s->evd, (void *)(unsigned long)i);
		if (!rc)
			atomic_set(&s->posted, ++i);
		else if (rc != -ENOSPC)
			atomic_inc(&s->errors);
		cond_resched();
	}
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

/*
 * kevd on every behaviour and every consumer: every CQE injected in an
 * arm window arrives, once, in order where the consumer orders.
 */
static void kevd_dto_race_closed(struct kunit *test)
{
	const struct dto_case *dc = test->param_value;
	struct inject in = { ATOMIC_INIT(200), ATOMIC_INIT(0) };
	struct fake_cq_stats st;
	struct fake_hca *hca;
	struct dto_cons *c;
	struct ib_cq *cq;

	hca = fake_hca_create(dc->mode);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	c = dto_cons_new(test, hca, dc->cons, 64, 256, 256);
	cq = kevd_cq(c->evd);
	fake_cq_set_arm_hook(cq, inject_hook, &in);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	/* Each arm injects one until 200 were injected; all must arrive. */
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->dto, 201));
	fake_cq_set_arm_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&in.injected), 200);
	fake_cq_stats(cq, &st);
	KUNIT_EXPECT_EQ(test, st.polled, st.added);
	dto_cons_expect(test, c, st.added, 0);
	if (dc->cons != DTO_CONS_DEQUEUE && dc->cons != DTO_CONS_WAIT) {
		struct kevd_param p;

		KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
		KUNIT_EXPECT_GE(test, p.stats.repolls, 1ULL);
	}
	dto_cons_free(test, c);
	fake_hca_destroy(hca);
}

/* --- the stress ------------------------------------------------------- */

struct dto_producer {
	struct ib_cq *cq;
	u32 n;
	u32 depth;
	atomic_t done;
	atomic_t fired;
};

/*
 * Bursts of 1..16 CQEs, as an HCA writes them, with random gaps; while
 * the CQ is half full the producer backs off briefly instead of spinning,
 * so the pollers get the CPU when there are fewer CPUs than busy threads.
 */
static int dto_producer_fn(void *data)
{
	struct dto_producer *p = data;
	u32 i = 0, room, burst;
	int got;

	while (i < p->n && !kthread_should_stop()) {
		room = p->depth / 2 - min(fake_cq_count(p->cq), p->depth / 2);
		if (!room) {
			usleep_range(5, 10);
			continue;
		}
		burst = min3(room, p->n - i, get_random_u32_inclusive(1, 16));
		got = fake_cq_add_seq_burst(p->cq, burst);
		if (got > 0)
			i += got;
		if (!get_random_u32_below(64)) {
			fake_cq_fire(p->cq);
			atomic_inc(&p->fired);
		}
		/* Now and then a gap: the poller drains, arms and races us. */
		if (!get_random_u32_below(8))
			usleep_range(5, 20);
		else
			cond_resched();
	}
	atomic_set(&p->done, 1);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

struct rand_inject {
	atomic_t injected;
};

static void rand_inject_hook(struct ib_cq *cq, void *ctx)
{
	struct rand_inject *in = ctx;

	if (!get_random_u32_below(2) && fake_cq_count(cq) < cq->cqe / 2 &&
	    !fake_cq_add_seq(cq))
		atomic_inc(&in->injected);
}

static u32 dto_stress_n(void)
{
	if (dto_stress_events)
		return dto_stress_events;
	return num_online_cpus() > 1 ? 1000000 : 100000;
}

/*
 * A producer on another CPU, random CQEs in the arm window, random
 * spurious notifications, and (but for "single") software events posted
 * meanwhile: every cookie and every software event once, in order where
 * the consumer orders, for every notify behaviour and every consumer.
 * Each pair runs as three cases, each with its share of the
 * completions.
 */
static void kevd_dto_stress(struct kunit *test)
{
	const struct kevd_test_part *part = test->param_value;
	const struct dto_case *dc = part->param;
	struct rand_inject in = { ATOMIC_INIT(0) };
	u32 n = dto_stress_n() / ARRAY_SIZE(dto_cons_names) / part->parts;
	u32 nsw = 0;
	struct task_struct *t, *swt = NULL;
	struct sw_producer *sp = NULL;
	struct dto_producer *prod;
	struct fake_cq_stats st;
	struct kevd_param p;
	struct fake_hca *hca;
	struct dto_cons *c;
	struct ib_cq *cq;

	hca = fake_hca_create(dc->mode);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	c = dto_cons_new(test, hca, dc->cons, 256, 1024, 3 * n + 1024);
	cq = kevd_cq(c->evd);
	prod = kunit_kzalloc(test, sizeof(*prod), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, prod);
	prod->cq = cq;
	prod->n = n;
	prod->depth = cq->cqe;
	if (dc->cons != DTO_CONS_SINGLE) {
		nsw = n / 10;
		sp = kunit_kzalloc(test, sizeof(*sp), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, sp);
		sp->evd = c->evd;
		sp->n = nsw;
		swt = kthread_run(sw_producer_fn, sp, "kevd_test_sw");
		KUNIT_ASSERT_FALSE(test, IS_ERR(swt));
	}
	fake_cq_set_arm_hook(cq, rand_inject_hook, &in);
	t = kthread_create(dto_producer_fn, prod, "kevd_test_dto");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	if (num_online_cpus() > 1)
		kthread_bind(t, cpumask_last(cpu_online_mask));
	wake_up_process(t);

	/* A bound for slow machines (TCG), not a timing assertion. */
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count_for(&prod->done, 1,
							 KEVD_STRESS_WAIT));
	/* Returns once the hooks running have added what they add. */
	fake_cq_set_arm_hook(cq, NULL, NULL);
	fake_cq_stats(cq, &st);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->dto, st.added));
	if (sp) {
		KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&sp->posted, nsw));
		KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&c->sw, nsw));
		kthread_stop(swt);
		KUNIT_EXPECT_EQ(test, atomic_read(&sp->errors), 0);
	}
	kthread_stop(t);

	fake_cq_stats(cq, &st);
	KUNIT_EXPECT_EQ(test, st.added, (u64)n + atomic_read(&in.injected));
	KUNIT_EXPECT_EQ(test, st.overruns, 0ULL);
	KUNIT_EXPECT_EQ(test, st.polled, st.added);
	dto_cons_expect(test, c, st.added, nsw);
	KUNIT_ASSERT_EQ(test, kevd_query(c->evd, &p), 0);
	kunit_info(test, "%s/%s: %llu CQEs (%d injected in the arm window), %u software, %llu notifications (%d spurious), %llu arms, %llu repolls, %llu empty, max batch %llu, %d delivered, %d duplicated",
		   fake_hca_mode_name(dc->mode), dto_cons_names[dc->cons],
		   st.added, atomic_read(&in.injected), nsw,
		   p.stats.notifications, atomic_read(&prod->fired),
		   p.stats.arms, p.stats.repolls, p.stats.empty_notifications,
		   p.stats.max_batch, atomic_read(&c->dto),
		   atomic_read(&c->dups));
	dto_cons_free(test, c);
	fake_hca_destroy(hca);
}

#define MIXED_TAIL	8

/*
 * The ring path for certain: while the upcall of software event @sw
 * blocks, event @sw + 1 is queued and completions arrive; the pass after
 * it finds the ring not empty and drains them behind that event.
 */
static void mixed_through_ring(struct kunit *test, struct dto_cons *r,
			       unsigned long sw)
{
	DECLARE_COMPLETION_ONSTACK(entered);
	DECLARE_COMPLETION_ONSTACK(release);
	struct ib_cq *cq = kevd_cq(r->evd);
	int i;

	r->hold_sw = sw;
	r->entered = &entered;
	r->release = &release;
	KUNIT_EXPECT_EQ(test, kevd_post_se(r->evd, (void *)sw), 0);
	if (!wait_for_completion_timeout(&entered, KEVD_TEST_WAIT))
		KUNIT_FAIL(test, "the upcall of software event %lu never ran", sw);
	KUNIT_EXPECT_EQ(test, kevd_post_se(r->evd, (void *)(sw + 1)), 0);
	for (i = 0; i < MIXED_TAIL; i++)
		KUNIT_EXPECT_EQ(test, fake_cq_add_seq(cq), 0);
	fake_cq_fire(cq);
	complete(&release);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->sw, sw + 2));
	r->release = NULL;
}

/*
 * SINGLE_INSTANCE with completions and software events together: while
 * the ring is empty completions go straight from the CQ to the upcall,
 * else through the ring behind the software events. Neither stream may
 * lose, repeat or reorder an event across the switches. Both paths must
 * run: the last few completions come when everything else was delivered
 * (the ring is empty: the direct path), and the last ones come behind a
 * software event queued while an upcall blocks (the ring path).
 */
static void kevd_dto_mixed_streams(struct kunit *test)
{
	u32 nsw = dto_stress_n() / 20, posted = 0;
	struct dto_producer *prod;
	struct fake_cq_stats st;
	struct task_struct *t;
	struct fake_hca *hca;
	struct kevd_param p;
	struct dto_cons *r;
	struct kevd *evd;
	u32 ndto;
	int rc, i;

	hca = fake_hca_create(FAKE_HCA_STRICT_IGNORE);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	r = dto_cons_new(test, hca, DTO_CONS_SINGLE_MIXED, 64, 256, 0);
	evd = r->evd;
	prod = kunit_kzalloc(test, sizeof(*prod), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, prod);
	prod->cq = kevd_cq(evd);
	prod->n = dto_stress_n() / 10;
	prod->depth = prod->cq->cqe;
	t = kthread_run(dto_producer_fn, prod, "kevd_test_mixed");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));

	while (posted < nsw) {
		rc = kevd_post_se(evd, (void *)(unsigned long)posted);
		if (!rc)
			posted++;
		else if (rc != -ENOSPC)
			break;
		cond_resched();
	}
	KUNIT_EXPECT_EQ(test, posted, nsw);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count_for(&prod->done, 1,
							 KEVD_STRESS_WAIT));
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->dto, prod->n));
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->sw, nsw));
	for (i = 0; i < MIXED_TAIL; i++) {
		KUNIT_EXPECT_EQ(test, fake_cq_add_seq(prod->cq), 0);
		fake_cq_fire(prod->cq);
	}
	ndto = prod->n + MIXED_TAIL;
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->dto, ndto));
	kthread_stop(t);
	mixed_through_ring(test, r, nsw);
	nsw += 2;
	ndto += MIXED_TAIL;
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->dto, ndto));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	fake_cq_stats(prod->cq, &st);
	KUNIT_EXPECT_EQ(test, st.added, (u64)ndto);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->dto), (int)ndto);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->sw), (int)nsw);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->bad), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], (u64)ndto);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], (u64)ndto);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_SOFTWARE], (u64)nsw);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE],
			(u64)nsw);
	KUNIT_EXPECT_EQ(test, p.stats.upcalls, (u64)ndto + nsw);
	kunit_info(test, "completions: %llu straight from the CQ, %llu through the ring",
		   evd->postats.direct, evd->ring.cstats.delivered[KEVD_STREAM_DTO]);
	KUNIT_EXPECT_GT(test, evd->postats.direct, 0ULL);
	KUNIT_EXPECT_GT(test, evd->ring.cstats.delivered[KEVD_STREAM_DTO], 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

#define DIRECT_N	8

/* Wait (bounded) until no poller owns @evd: its pass, arm and check are over. */
static bool dto_wait_let_go(struct kevd *evd)
{
	unsigned long end = jiffies + KEVD_TEST_WAIT;

	while (READ_ONCE(evd->poll_state) & BIT(KEVD_POLL_SCHED)) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/*
 * Completions skip an empty ring whatever policy came before: after
 * DISABLE and SINGLE_INSTANCE again, each completion that finds the ring
 * empty and the EVD idle goes straight from the CQ to the upcall, none
 * through the ring. (One that lands while the poller still owns the EVD,
 * in the check after its arm, is polled by that check into the ring: so
 * each is added only once the poller has let go.)
 */
static void kevd_dto_direct_after_policy_change(struct kunit *test)
{
	const enum fake_hca_mode *m = test->param_value;
	struct dto_env *e;
	struct kevd_param p;
	u64 direct;
	int i;

	e = dto_env_new(test, *m, 64, 64, KEVD_UPCALL_DISABLE, NULL);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(e->evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	for (i = 0; i < DIRECT_N; i++) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
		fake_cq_fire(e->cq);
		KUNIT_ASSERT_TRUE(test, kevd_test_wait_count(&e->rec.delivered,
							     i + 1));
		KUNIT_ASSERT_TRUE(test, dto_wait_let_go(e->evd));
	}
	/* TEARDOWN waits for the session: its counters are final */
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(e->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	direct = READ_ONCE(e->evd->postats.direct);
	KUNIT_EXPECT_EQ(test, direct, (u64)DIRECT_N);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], (u64)DIRECT_N);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.bad), 0);
	dto_env_free(test, e);
}

/* --- a connection event held behind the CQ ------------------------------ */

#define DEFER_ARM_PARAM	"/sys/module/kevd/parameters/defer_arm"
#define DEFER_ARM_SAVED	"/dev/kevd-defer-arm"	/* writable on both kernels */
#define FENCE_REST	20	/* completions left in the CQ by a full ring */

/* What the upcall of an endpoint's EVD saw: completions, then DISCONNECTED. */
struct fence_rec {
	struct dto_rec dto;	/* the completions, checked by dto_upcall() */
	atomic_t disc;
	atomic_t disc_after;	/* completions delivered before it */
};

static void fence_rec_upcall(void *ctx, const struct kevd_event *ev,
			     bool more)
{
	struct fence_rec *r = ctx;

	if (ev->event_number == KEVD_CONNECTION_EVENT_DISCONNECTED) {
		atomic_set(&r->disc_after, atomic_read(&r->dto.delivered));
		atomic_inc(&r->disc);
		return;
	}
	dto_upcall(&r->dto, ev, more);
}

static void defer_arm_restore(void *unused)
{
	kevd_test_sh("cat " DEFER_ARM_SAVED " > " DEFER_ARM_PARAM);
}

/*
 * A poll hook that, once a poll has found the CQ empty, adds @burst
 * completions at the start of the next poll: after the pass's last
 * delivery, the completions its closing unfence moves.
 */
struct fence_late {
	u32 burst;
	int stage;	/* 0: not empty yet, 1: armed, 2: added */
};

static void fence_late_hook(struct ib_cq *cq, void *ctx)
{
	struct fence_late *l = ctx;

	if (l->stage == 1) {
		fake_cq_add_seq_burst(cq, l->burst);
		l->stage = 2;
	} else if (!l->stage && !fake_cq_count(cq)) {
		l->stage = 1;
	}
}

/*
 * With defer_arm=0 (each pass that ends idle arms at once), a
 * DISCONNECTED held behind a CQ that a full ring backs up is delivered
 * once upcalls have made room and the CQ is empty: the pass that empties
 * the CQ queues it. (Before, only a pass's start did: the EVD armed and
 * slept with the event held, until some other activity.) With @late,
 * more than a ring's worth of completions lands after the pass's last
 * direct poll: the unfence that closes the pass moves a ring's worth,
 * and the pass must deliver them, not stop with the CQ unarmed.
 */
static void fence_held_run(struct kunit *test, u32 late)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	struct fence_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct fence_late *l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	unsigned long end = jiffies + KEVD_TEST_WAIT;
	struct kevd_attr attr;
	struct fake_hca *hca;
	struct kevd_param p;
	struct kevd *evd;
	struct ib_cq *cq;
	bool came;
	u32 qlen;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_NOT_NULL(test, l);
	KUNIT_ASSERT_EQ(test, kevd_test_sh("cat " DEFER_ARM_PARAM " > "
					   DEFER_ARM_SAVED), 0);
	ret = kunit_add_action_or_reset(test, defer_arm_restore, NULL);
	KUNIT_ASSERT_EQ(test, ret, 0);
	KUNIT_ASSERT_EQ(test, kevd_test_sh("echo 0 > " DEFER_ARM_PARAM), 0);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 8;
	attr.cq_depth = 64;
	attr.flags = KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.upcall.func = fence_rec_upcall;
	attr.upcall.ctx = r;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.cpu = 0;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	cq = kevd_cq(evd);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	qlen = p.qlen;
	l->burst = late ? qlen + late : 0;

	/* a full ring, the rest in the CQ, the poller gone idle */
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(cq, qlen + FENCE_REST),
			qlen + FENCE_REST);
	while (!kevd_query(evd, &p) && p.count < qlen) {
		KUNIT_ASSERT_FALSE(test, time_after(jiffies, end));
		schedule_timeout_uninterruptible(1);
	}
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	KUNIT_EXPECT_EQ(test, fake_cq_count(cq), (u32)FENCE_REST);
	/* held; the pass it schedules cannot queue it (no room) */
	KUNIT_ASSERT_EQ(test, kevd_post_event(evd, &disc), 0);
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	if (late)	/* nothing polls the CQ now */
		fake_cq_set_poll_hook(cq, fence_late_hook, l);
	/* one pass: the ring's events, the CQ's straight to the upcall */
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 NULL, KEVD_UPCALL_INVOC_ANY),
			0);
	came = kevd_test_wait_count_for(&r->disc, 1, msecs_to_jiffies(10000));
	KUNIT_EXPECT_TRUE(test, came);
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	KUNIT_EXPECT_EQ(test, l->stage, late ? 2 : 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->dto.delivered),
			(int)(qlen + FENCE_REST + l->burst));
	KUNIT_EXPECT_EQ(test, atomic_read(&r->disc_after),
			(int)(qlen + FENCE_REST + l->burst));
	KUNIT_EXPECT_EQ(test, atomic_read(&r->dto.order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->dto.bad), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

static void kevd_dto_fence_without_defer(struct kunit *test)
{
	fence_held_run(test, 0);
}

static void kevd_dto_fence_late_completions(struct kunit *test)
{
	fence_held_run(test, 1);
}

/* --- notifications, backpressure, overrun, teardown ------------------- */

static void kevd_dto_empty_and_spurious(struct kunit *test)
{
	const enum fake_hca_mode *m = test->param_value;
	struct kevd_param p;
	struct dto_env *e;
	int i;

	e = dto_env_new(test, *m, 64, 64, KEVD_UPCALL_SINGLE_INSTANCE, NULL);
	for (i = 0; i < 50; i++)
		fake_cq_fire(e->cq);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.delivered), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, p.stats.notifications, 50ULL);
	KUNIT_EXPECT_GE(test, p.stats.empty_notifications, 1ULL);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], 0ULL);
	for (i = 0; i < 5; i++) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
		fake_cq_fire(e->cq);
	}
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&e->rec.delivered, 5));
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.delivered), 5);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.order_errors), 0);
	dto_env_free(test, e);
}

/* A burst larger than the ring waits in the CQ: complete, in order. */
static void kevd_dto_backpressure(struct kunit *test)
{
	struct kevd *aevd;
	struct kevd_event ev;
	struct kevd_param p;
	struct dto_env *e;
	unsigned long end;
	u32 taken = 0;
	int i;

	aevd = kevd_test_create(test, 8, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE,
				NULL, 0);
	e = dto_env_new(test, FAKE_HCA_STRICT_REPORT, 16, 512,
			KEVD_UPCALL_DISABLE, aevd);
	for (i = 0; i < 300; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	end = jiffies + KEVD_TEST_WAIT;
	while (taken < 300 && time_before(jiffies, end)) {
		if (kevd_dequeue(e->evd, &ev)) {
			schedule_timeout_uninterruptible(1);
			continue;
		}
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)taken);
		taken++;
	}
	KUNIT_EXPECT_EQ(test, taken, 300U);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	KUNIT_EXPECT_GE(test, p.stats.backpressure_stalls, 1ULL);
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 0ULL);
	KUNIT_EXPECT_EQ(test, p.stats.drops, 0ULL);
	KUNIT_EXPECT_FALSE(test, p.state & KEVD_STATE_OVERFLOWED);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(aevd, &ev), -EAGAIN);
	dto_env_free(test, e);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
}

/* CQ overruns give one overflow event naming the EVD; each counts. */
static void kevd_dto_cq_overrun(struct kunit *test)
{
	struct kevd *aevd;
	struct kevd_event ev;
	struct kevd_param p;
	struct dto_env *e;

	aevd = kevd_test_create(test, 8, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE,
				NULL, 0);
	e = dto_env_new(test, FAKE_HCA_STRICT_REPORT, 16, 16,
			KEVD_UPCALL_DISABLE, aevd);
	fake_cq_overrun(e->cq);
	fake_cq_overrun(e->cq);
	fake_cq_overrun(e->cq);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_ASYNC_ERROR_EVD_OVERFLOW);
	KUNIT_EXPECT_PTR_EQ(test, ev.async.handle, (void *)e->evd);
	KUNIT_EXPECT_EQ(test, ev.async.reason, (u32)KEVD_STREAM_DTO);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(aevd, &ev), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	KUNIT_EXPECT_TRUE(test, p.state & KEVD_STATE_OVERFLOWED);
	/* each counted: rxe loses a completion at each */
	KUNIT_EXPECT_EQ(test, p.stats.overflows, 3ULL);
	dto_env_free(test, e);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
}

/* free refuses while a QP uses the CQ (ib_create_qp takes cq->usecnt). */
static void kevd_dto_free_with_qp(struct kunit *test)
{
	struct dto_env *e;

	e = dto_env_new(test, FAKE_HCA_STRICT_REPORT, 16, 16,
			KEVD_UPCALL_DISABLE, NULL);
	atomic_inc(&e->cq->usecnt);
	KUNIT_EXPECT_EQ(test, kevd_free(e->evd), -EBUSY);
	atomic_dec(&e->cq->usecnt);
	dto_env_free(test, e);
}

/*
 * TEARDOWN and free while the HCA keeps adding CQEs and firing: no upcall
 * after TEARDOWN returns, and free completes with the handler still being
 * called until destroy_cq (KASAN would see a use after free).
 */
static void kevd_dto_teardown_while_firing(struct kunit *test)
{
	const enum fake_hca_mode *m = test->param_value;
	struct dto_env *e;
	int calls;

	e = dto_env_new(test, *m, 64, 256, KEVD_UPCALL_SINGLE_INSTANCE, NULL);
	KUNIT_ASSERT_EQ(test, fake_cq_start_firing(e->cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&e->rec.delivered, 100));
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(e->evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	calls = atomic_read(&e->rec.delivered);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.delivered), calls);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.order_errors), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(e->evd), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.delivered), calls);
	fake_hca_destroy(e->hca);
}

/* Take the next event of @evd (DISABLE) within the test bound. */
static int gate_take(struct kevd *evd, struct kevd_event *ev)
{
	u32 nmore;

	return kevd_wait(evd, 60 * USEC_PER_SEC, 1, ev, &nmore);
}

/* A completion of @qp with cookie @cookie into @cq. */
static void gate_add(struct kunit *test, struct ib_cq *cq, struct ib_qp *qp,
		     u64 cookie)
{
	struct ib_wc wc = {
		.wr_id = cookie, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
		.byte_len = 8, .qp = qp,
	};

	KUNIT_EXPECT_EQ(test, fake_cq_add(cq, &wc), 0);
}

/*
 * Two fake QPs whose context is themselves, and an EVD of @flags with a
 * CQ they complete into, on a new fake HCA (*@hca); upcalls disabled.
 */
static struct kevd *gate_env(struct kunit *test, u32 flags,
			     struct fake_hca **hca, struct ib_qp **qa,
			     struct ib_qp **qb)
{
	struct kevd_attr attr;
	struct kevd *evd;

	*qa = kunit_kzalloc(test, sizeof(**qa), GFP_KERNEL);
	*qb = kunit_kzalloc(test, sizeof(**qb), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, *qa && *qb);
	(*qa)->qp_context = *qa;
	(*qb)->qp_context = *qb;
	*hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *hca);
	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.cq_depth = 256;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cpu = 0;
	evd = kevd_create(fake_hca_ibdev(*hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/*
 * A hold (kevd_cq_drain_hold()) waits for markers the provider flushes in
 * its own time, and flushes are not solicited: while it is on, a
 * solicited-only CQ is armed for every completion, or the DISCONNECTED it
 * holds waits for some unrelated solicited completion. The hold here is
 * the state kevd_cq_drain_hold() leaves while its markers are out; once
 * it ends, the flush comes first, then the DISCONNECTED.
 */
static void kevd_dto_hold_arms_any(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	struct ib_wc wc = {
		.status = IB_WC_WR_FLUSH_ERR, .opcode = IB_WC_SEND, .wr_id = 7,
	};
	struct fake_cq_stats st;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_event ev;
	unsigned long flags;
	struct ib_cq *cq;
	struct kevd *evd;
	u64 arms, fired;
	int i;

	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.solicited_only = true;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	cq = kevd_cq(evd);

	spin_lock_irqsave(&evd->lock, flags);
	WRITE_ONCE(evd->nholds, 1);
	spin_unlock_irqrestore(&evd->lock, flags);
	fake_cq_stats(cq, &st);
	arms = st.arms;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	/* the pass it scheduled finds the CQ empty, holds it, and arms */
	for (i = 0; i < 66; i++) {
		kevd_test_flush_pollers(test);
		fake_cq_stats(cq, &st);
		if (st.arms > arms && fake_cq_armed(cq))
			break;
	}
	KUNIT_ASSERT_GT(test, st.arms, arms);
	/* armed so that any completion added now notifies: a flush does */
	KUNIT_ASSERT_TRUE(test, fake_cq_armed(cq));
	fired = st.notifications;
	KUNIT_ASSERT_EQ(test, fake_cq_add(cq, &wc), 0);
	fake_cq_stats(cq, &st);
	KUNIT_EXPECT_EQ(test, st.notifications, fired + 1);

	spin_lock_irqsave(&evd->lock, flags);
	WRITE_ONCE(evd->nholds, 0);
	spin_unlock_irqrestore(&evd->lock, flags);
	/* the wait's own pull queues the DISCONNECTED behind the flush */
	KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 7ULL);
	KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * An EVD (completions and connection events, upcalls disabled) on a
 * strict fake HCA, and a fake QP in error that completes into its CQ,
 * with @nrecv receives the consumer posted (cookies 1 ... @nrecv) that
 * the provider has not flushed yet.
 */
static struct kevd *hold_env(struct kunit *test, struct fake_hca **hca,
			     struct ib_qp **qp, u32 nrecv)
{
	struct ib_recv_wr wr = { };
	struct kevd *evd;

	evd = kevd_test_dto_conn_evd(test, hca);
	*qp = fake_qp_create(*hca, kevd_cq(evd), 8);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *qp);
	for (wr.wr_id = 1; wr.wr_id <= nrecv; wr.wr_id++)
		KUNIT_ASSERT_EQ(test, ib_post_recv(*qp, &wr, NULL), 0);
	return evd;
}

/* The holds on now (kevd_cq_drain_hold()). */
static u32 hold_count(struct kevd *evd)
{
	return READ_ONCE(evd->nholds);
}

/* The flushes of receives @from ... @to of @qp come next, in order. */
static void hold_expect_flushes(struct kunit *test, struct kevd *evd,
				struct ib_qp *qp, u64 from, u64 to)
{
	struct kevd_event ev;

	for (; from <= to; from++) {
		KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_DTO_COMPLETION_EVENT);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, from);
		KUNIT_EXPECT_EQ(test, ev.dto.status, (u32)KEVD_DTO_ERR_FLUSHED);
		KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, (void *)qp);
	}
}

/* The endpoint's DISCONNECTED, as the CM posts it after a hold. */
static void hold_disconnect(struct kunit *test, struct kevd *evd)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};

	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
}

/* The DISCONNECTED comes next (within the test's bound). */
static void hold_expect_disconnected(struct kunit *test, struct kevd *evd)
{
	struct kevd_event ev;

	KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
}

static void hold_end(struct kunit *test, struct kevd *evd,
		     struct fake_hca *hca, struct ib_qp *qp)
{
	struct kevd_event ev;

	/* the markers never reach the consumer */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, hold_count(evd), 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_qp_destroy(qp);
	fake_hca_destroy(hca);
}

/*
 * A hold (kevd_cq_drain_hold(), the CM's on DISCONNECTED) puts a marker
 * on each queue of the QP: the DISCONNECTED posted after it waits while
 * the provider has not flushed, and comes after the flushes, which keep
 * their endpoint; the markers never reach the consumer.
 */
static void kevd_dto_hold_orders_flushes(struct kunit *test)
{
	struct kevd_event ev;
	struct fake_hca *hca;
	struct ib_qp *qp;
	struct kevd *evd;

	evd = hold_env(test, &hca, &qp, 3);
	kevd_cq_drain_hold(evd, qp);
	KUNIT_EXPECT_EQ(test, hold_count(evd), 1U);
	hold_disconnect(test, evd);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	/* the send marker, the three receives, the receive marker */
	KUNIT_ASSERT_EQ(test, fake_qp_flush(qp), 5);
	hold_expect_flushes(test, evd, qp, 1, 3);
	hold_expect_disconnected(test, evd);
	hold_end(test, evd, hca, qp);
}

/*
 * A provider that never flushes what was posted after the error (or a
 * CQ gone bad) never returns the markers: the hold ends after
 * KEVD_HOLD_WAIT all the same, and the DISCONNECTED comes, late rather
 * than never. Markers that come after that still never reach the
 * consumer, and the flushes still name their endpoint.
 */
static void kevd_dto_hold_expires(struct kunit *test)
{
	struct fake_hca *hca;
	struct ib_qp *qp;
	struct kevd *evd;

	evd = hold_env(test, &hca, &qp, 2);
	kevd_cq_drain_hold(evd, qp);
	hold_disconnect(test, evd);
	/* the test's bound (60 s) is well past the hold's */
	hold_expect_disconnected(test, evd);
	KUNIT_ASSERT_EQ(test, fake_qp_flush(qp), 4);
	hold_expect_flushes(test, evd, qp, 1, 2);
	hold_end(test, evd, hca, qp);
}

/*
 * A queue that refuses the marker for another reason than being full
 * (-EINVAL, -EIO: a provider that takes no post on a QP in error, or a
 * device in error) will not take it later: one try per queue, no
 * retrying for KEVD_HOLD_POST_WAIT in the CM's handler, and no hold.
 */
static void kevd_dto_hold_post_refused(struct kunit *test)
{
	struct fake_hca *hca;
	struct ib_qp *qp;
	struct kevd *evd;
	u32 posts;

	evd = hold_env(test, &hca, &qp, 2);
	fake_qp_fail_posts(qp, -EINVAL);
	posts = fake_qp_posts(qp);
	kevd_cq_drain_hold(evd, qp);
	KUNIT_EXPECT_EQ(test, fake_qp_posts(qp) - posts, 2U);
	KUNIT_EXPECT_EQ(test, hold_count(evd), 0U);
	hold_disconnect(test, evd);
	hold_expect_disconnected(test, evd);
	fake_qp_fail_posts(qp, 0);
	KUNIT_ASSERT_EQ(test, fake_qp_flush(qp), 2);
	hold_expect_flushes(test, evd, qp, 1, 2);
	hold_end(test, evd, hca, qp);
}

/*
 * The CM binding's gate (an endpoint before its ESTABLISHED): the first
 * completion of the gated QP A is parked and the CQ behind it waits (so
 * does B's DISCONNECTED, held behind the CQ); B's completions ahead of
 * it flow, and the CQ stays unarmed. A's ESTABLISHED, posted with
 * kevd_post_event() while B's DISCONNECTED is held, is held behind it
 * (the connection stream's order): once the gate lifts, the CQ drains in
 * order, then both. (The CM's own post keeps the gate up for it:
 * kevd_cm_established_before_own_completions.)
 */
static void kevd_dto_gate_holds_qp(struct kunit *test)
{
	struct kevd_event est = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	void *ep;
	/* B0 B1 A2 B3 A4: B's first two flow, A2 waits with what follows */
	static const bool of_a[] = { false, false, true, false, true };
	struct ib_qp *qa, *qb;
	struct kevd_gate gate;
	struct fake_hca *hca;
	struct kevd_param *p = kunit_kzalloc(test, sizeof(*p), GFP_KERNEL);
	struct kevd_event ev;
	struct kevd *evd;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, p);
	evd = gate_env(test, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, &hca, &qa,
		       &qb);
	est.connection.ep = qa;
	disc.connection.ep = qb;

	kevd_cq_gate_at(evd, &gate, &qa);
	for (i = 0; i < ARRAY_SIZE(of_a); i++)
		gate_add(test, kevd_cq(evd), of_a[i] ? qa : qb, i);
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	kevd_test_flush_pollers(test);	/* the EVD's pass came and went */
	KUNIT_ASSERT_EQ(test, kevd_query(evd, p), 0);
	KUNIT_EXPECT_EQ(test, p->count, 2U);
	KUNIT_EXPECT_EQ(test, fake_cq_count(kevd_cq(evd)), 2U);
	KUNIT_EXPECT_FALSE(test, fake_cq_armed(kevd_cq(evd)));

	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &est), 0);
	kevd_cq_ungate(evd, &gate);
	for (i = 0; i < ARRAY_SIZE(of_a) + 2; i++) {
		/* B0 B1 A2 B3 A4, B's DISCONNECTED, A's ESTABLISHED */
		u32 want = i == 5 ? KEVD_CONNECTION_EVENT_DISCONNECTED :
			   i == 6 ? KEVD_CONNECTION_EVENT_ESTABLISHED :
				    KEVD_DTO_COMPLETION_EVENT;

		KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number, want);
		if (want == KEVD_DTO_COMPLETION_EVENT) {
			KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
			continue;
		}
		ep = want == KEVD_CONNECTION_EVENT_ESTABLISHED ? qa : qb;
		KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, ep);
	}
	/*
	 * and the CQ is armed again, after at most defer_arm (64) empty
	 * passes: each flush lets a queued EVD make one
	 */
	for (i = 0; i < 66 && !fake_cq_armed(kevd_cq(evd)); i++)
		kevd_test_flush_pollers(test);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(kevd_cq(evd)));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * gate_env() with the DTO and connection streams, whose CQ notifies
 * nothing (moderated beyond reach) and whose pollers are done with it.
 */
static struct kevd *muted_env(struct kunit *test, struct fake_hca **hca,
			      struct ib_qp **qa, struct ib_qp **qb)
{
	struct kevd *evd;

	evd = gate_env(test, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, hca, qa,
		       qb);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(evd), U16_MAX, 0),
			0);
	kevd_test_flush_pollers(test);
	return evd;
}

/* Polls from the hook's install on; the second one fails (-EIO). */
static void fail_second_poll(struct ib_cq *cq, void *ctx)
{
	int n = atomic_inc_return((atomic_t *)ctx);

	if (n == 2)
		fake_cq_fail_polls(cq, -EIO);
	else if (n == 3)
		fake_cq_fail_polls(cq, 0);
}

/*
 * A poll that comes back short because its last ib_poll_cq() failed is
 * no empty CQ: a connection event held behind the CQ stays held. A gate
 * (of QP A, which completes nothing) makes the poll take one completion
 * at a time: B0 comes, the next poll fails. B's DISCONNECTED must come
 * after B1, still in the CQ. Before, the short poll released it between
 * B0 and B1. Notifications are muted: only the DISCONNECTED's pass and
 * the consumer's pull poll.
 */
static void kevd_dto_failed_poll_holds_fenced(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	atomic_t *polls = kunit_kzalloc(test, sizeof(*polls), GFP_KERNEL);
	struct ib_qp *qa, *qb;
	struct kevd_gate gate;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	struct ib_cq *cq;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, polls);
	evd = muted_env(test, &hca, &qa, &qb);
	cq = kevd_cq(evd);
	kevd_cq_gate_at(evd, &gate, &qa);
	gate_add(test, cq, qb, 0);
	gate_add(test, cq, qb, 1);
	fake_cq_set_poll_hook(cq, fail_second_poll, polls);
	disc.connection.ep = qb;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_GE(test, atomic_read(polls), 2);
	for (i = 0; i < 3; i++) {
		/* no assertion: the gate on the stack must go first */
		if (gate_take(evd, &ev)) {
			KUNIT_FAIL(test, "event %d did not come", i);
			break;
		}
		if (i < 2) {
			KUNIT_EXPECT_EQ(test, ev.event_number,
					(u32)KEVD_DTO_COMPLETION_EVENT);
			KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
		} else {
			KUNIT_EXPECT_EQ(test, ev.event_number,
					(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
		}
	}
	fake_cq_set_poll_hook(cq, NULL, NULL);
	kevd_cq_ungate(evd, &gate);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* Every poll fails but the registered waiter's second and later ones. */
struct waiter_polls {
	struct kevd *evd;
	atomic_t n;
};

static void fail_but_waiter(struct ib_cq *cq, void *ctx)
{
	struct waiter_polls *w = ctx;
	bool ok = READ_ONCE(w->evd->waiter) == current &&
		  atomic_inc_return(&w->n) > 1;

	fake_cq_fail_polls(cq, ok ? 0 : -EIO);
}

/*
 * A waiter's pull whose first poll, the one that would release the
 * connection events held behind the CQ, fails, while its next poll finds
 * the CQ empty: the held DISCONNECTED goes to the waiter in that pull.
 * (Polls of pollers and of the unregistered first try fail, so nothing
 * else releases it.) Before, the pull armed the CQ and let go with the
 * event still held, and the waiter slept until the next completion (or
 * the end of its timeout: its last pull then found it), here for ever.
 */
static void kevd_dto_pull_retries_unfence(struct kunit *test)
{
	struct kevd_event disc = {
		.event_number = KEVD_CONNECTION_EVENT_DISCONNECTED,
	};
	struct waiter_polls *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	struct kevd_test_waiter *wt = kunit_kzalloc(test, sizeof(*wt),
						    GFP_KERNEL);
	struct task_struct *t;
	struct kevd_param p;
	struct ib_qp *qa, *qb;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;
	long left;

	KUNIT_ASSERT_TRUE(test, w && wt);
	init_completion(&wt->done);
	evd = muted_env(test, &hca, &qa, &qb);
	cq = kevd_cq(evd);
	w->evd = evd;
	wt->evd = evd;
	wt->timeout_us = KEVD_TIMEOUT_INFINITE;
	wt->threshold = 1;
	fake_cq_set_poll_hook(cq, fail_but_waiter, w);
	disc.connection.ep = qb;
	KUNIT_EXPECT_EQ(test, kevd_post_event(evd, &disc), 0);
	/*
	 * Not only the pass the post queued: with defer_arm, the poller
	 * keeps the EVD for more passes (failing too) after a flush's
	 * marker, and a waiter that registers meanwhile cannot pull; the
	 * poller then arms, counting the CQ empty, and nothing notifies.
	 */
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	KUNIT_EXPECT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, 0U);	/* held */
	t = kthread_run(kevd_test_waiter_fn, wt, "kevd_dto_waiter");
	if (IS_ERR(t)) {
		KUNIT_FAIL(test, "kthread_run: %ld", PTR_ERR(t));
	} else {
		/* bounded below the hung-task report */
		left = wait_for_completion_timeout(&wt->done, 20 * HZ);
		KUNIT_EXPECT_GT(test, left, 0L);
		if (!left) {	/* the old code: release it */
			kevd_set_unwaitable(evd, true);
			wait_for_completion(&wt->done);
		}
		kthread_stop(t);
		KUNIT_EXPECT_EQ(test, wt->rc, 0);
		KUNIT_EXPECT_EQ(test, wt->ev.event_number,
				(u32)KEVD_CONNECTION_EVENT_DISCONNECTED);
		KUNIT_EXPECT_GE(test, atomic_read(&w->n), 2);
	}
	fake_cq_set_poll_hook(cq, NULL, NULL);
	fake_cq_fail_polls(cq, 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * kevd_cq_flush_qp() gives up after KEVD_FLUSH_WAIT when a gate of
 * another QP holds the CQ; its caller destroys the QP anyway, and ib_core
 * frees it. The QP's completions still in the CQ are converted later:
 * they must not read the freed QP. They come, in order, with no
 * ep_context. (Not in error, on no real CQ: no markers, as for a QP that
 * could not go to error.) Once the CQ was found empty after the destroy,
 * a QP made at the same address is read again.
 */
static void kevd_dto_flush_gives_up(struct kunit *test)
{
	struct ib_qp *qa, *qb;
	struct kevd_gate gate;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	int i;

	evd = gate_env(test, KEVD_DTO_FLAG, &hca, &qa, &qb);

	/* A0 parks and holds the CQ: B1 and B2 wait behind it */
	kevd_cq_gate_at(evd, &gate, &qa);
	gate_add(test, kevd_cq(evd), qa, 0);
	gate_add(test, kevd_cq(evd), qb, 1);
	gate_add(test, kevd_cq(evd), qb, 2);
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, fake_cq_count(kevd_cq(evd)), 2U);
	kevd_cq_flush_qp(evd, qb, false);	/* gives up, with a warning */
	/* destroyed: what a reader of the freed QP would find */
	memset(qb, 0x6b, sizeof(*qb));
	kevd_cq_qp_gone(evd, qb);		/* as rdma_destroy_qp() returns */
	kevd_cq_ungate(evd, &gate);
	for (i = 0; i < 3; i++) {
		KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.event_number,
				(u32)KEVD_DTO_COMPLETION_EVENT);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
		KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context,
				    i ? NULL : (void *)qa);
	}
	/* the CQ found empty: a new QP made at B's address is read again */
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	memset(qb, 0, sizeof(*qb));
	qb->qp_context = qb;
	gate_add(test, kevd_cq(evd), qb, 3);
	KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 3ULL);
	KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, (void *)qb);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct flusher_polls - polls of a flush's own thread.
 * @flusher: the thread; every other thread's poll fails.
 * @n: its polls; the second one fails.
 */
struct flusher_polls {
	struct task_struct *flusher;
	atomic_t n;
};

static void fail_but_flusher(struct ib_cq *cq, void *ctx)
{
	struct flusher_polls *f = ctx;
	bool fail = current != f->flusher || atomic_inc_return(&f->n) == 2;

	fake_cq_fail_polls(cq, fail ? -EIO : 0);
}

KEVD_TEST_BOOL_PARAM(flush_failed, "completion_first", "marker_first");

/*
 * A flush without markers ends when a poll finds the CQ empty; a poll
 * that came back short because its last ib_poll_cq() failed is no empty
 * CQ. A gate (of QP A, which completes nothing) makes the poll take one
 * completion at a time: B0 (or, @marker_first, the first of another
 * QP's markers, which the poll takes out: it returns nothing) comes, the
 * next poll fails, B's completions are still in the CQ. The flush must
 * take them too before B is destroyed (only the flush's polls work: no
 * pass takes them meanwhile). Before, the short poll ended the flush, and
 * they were converted later by reading the destroyed QP. Notifications
 * are muted.
 */
static void kevd_dto_flush_failed_poll(struct kunit *test)
{
	struct flusher_polls *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	bool marker_first = *(const bool *)test->param_value;
	struct ib_qp *qa, *qb, *qc = NULL;
	struct kevd_gate gate;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	struct ib_cq *cq;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, f);
	f->flusher = current;
	evd = muted_env(test, &hca, &qa, &qb);
	cq = kevd_cq(evd);
	if (marker_first) {	/* a hold's two markers, flushed */
		qc = fake_qp_create(hca, cq, 8);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qc);
		kevd_cq_drain_hold(evd, qc);
		KUNIT_ASSERT_EQ(test, fake_qp_flush(qc), 2);
	}
	kevd_cq_gate_at(evd, &gate, &qa);
	gate_add(test, cq, qb, 0);
	gate_add(test, cq, qb, 1);
	fake_cq_set_poll_hook(cq, fail_but_flusher, f);
	kevd_cq_flush_qp(evd, qb, false);
	KUNIT_EXPECT_EQ(test, fake_cq_count(cq), 0U);
	KUNIT_EXPECT_GE(test, atomic_read(&f->n), 2);
	fake_cq_set_poll_hook(cq, NULL, NULL);
	fake_cq_fail_polls(cq, 0);
	/* destroyed: what a reader of the freed QP would find */
	memset(qb, 0x6b, sizeof(*qb));
	kevd_cq_qp_gone(evd, qb);
	kevd_cq_ungate(evd, &gate);
	for (i = 0; i < 2; i++) {
		KUNIT_ASSERT_EQ(test, gate_take(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, (u64)i);
		KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, (void *)qb);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, hold_count(evd), 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	if (qc)
		fake_qp_destroy(qc);
	fake_hca_destroy(hca);
}

/*
 * After IB_EVENT_CQ_ERR the CQ gives nothing more (api.rst): a failed poll
 * counts as an empty CQ, for a flush too. B0 stays in the CQ, whose polls
 * fail; the flush of B is done (no orphan is left to convert what will
 * never come). Before, a poll that failed outright ended no drain: the
 * flush waited KEVD_FLUSH_WAIT and left an orphan.
 */
static void kevd_dto_flush_cq_in_error(struct kunit *test)
{
	struct ib_qp *qa, *qb;
	struct fake_hca *hca;
	struct kevd *evd;
	struct ib_cq *cq;
	u32 drains;

	evd = muted_env(test, &hca, &qa, &qb);
	cq = kevd_cq(evd);
	gate_add(test, cq, qb, 0);
	fake_cq_fail_polls(cq, -EIO);
	fake_cq_overrun(cq);
	kevd_cq_flush_qp(evd, qb, false);
	drains = READ_ONCE(evd->ndrains);
	KUNIT_EXPECT_EQ(test, drains, 0U);
	KUNIT_EXPECT_EQ(test, fake_cq_count(cq), 1U);
	fake_cq_fail_polls(cq, 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct gone_rec - a SINGLE_INSTANCE upcall that holds its first event.
 * @entered: the first upcall runs.
 * @release: the test let it go on.
 * @ctx: the ep_context of each event, in order (written by the upcall).
 * @n: events seen.
 */
struct gone_rec {
	struct completion entered, release;
	void *ctx[2];
	atomic_t n;
};

static void gone_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct gone_rec *r = ctx;
	int i = atomic_read(&r->n);

	if (i < ARRAY_SIZE(r->ctx))
		r->ctx[i] = ev->dto.ep_context;
	atomic_inc(&r->n);
	if (!i) {
		complete(&r->entered);
		wait_for_completion_timeout(&r->release, 60 * HZ);
	}
}

/*
 * The same, with the completions already polled: the poller delivers two
 * completions of B straight from the CQ, and the upcall of the first
 * holds while B's drain gives up and B is destroyed. The second is
 * converted after that: it must not read B.
 */
static void kevd_dto_flush_gives_up_in_batch(struct kunit *test)
{
	struct ib_wc wcs[2] = {
		{ .wr_id = 0, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV },
		{ .wr_id = 1, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV },
	};
	struct gone_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct kevd_upcall up = { gone_upcall, r };
	struct ib_qp *qa, *qb;
	struct fake_hca *hca;
	struct kevd *evd;
	bool ok;

	KUNIT_ASSERT_NOT_NULL(test, r);
	init_completion(&r->entered);
	init_completion(&r->release);
	evd = gate_env(test, KEVD_DTO_FLAG, &hca, &qa, &qb);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	wcs[0].qp = qb;
	wcs[1].qp = qb;
	/* one burst: one poll takes both */
	KUNIT_ASSERT_EQ(test, fake_cq_add_burst(kevd_cq(evd), wcs, 2), 2);
	ok = wait_for_completion_timeout(&r->entered, 60 * HZ);
	KUNIT_EXPECT_TRUE(test, ok);
	kevd_cq_flush_qp(evd, qb, false);	/* gives up, with a warning */
	memset(qb, 0x6b, sizeof(*qb));		/* destroyed */
	kevd_cq_qp_gone(evd, qb);
	complete(&r->release);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 2));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_PTR_EQ(test, r->ctx[0], (void *)qb);
	KUNIT_EXPECT_PTR_EQ(test, r->ctx[1], NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 2);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/**
 * struct gone_late - upcalls that hold the first two events.
 * @entered: the upcall of event i runs (i < 2).
 * @release: the upcall of event i may return.
 * @ctx: the ep_context of each event, in order.
 * @n: events seen.
 */
struct gone_late {
	struct completion entered[2], release[2];
	void *ctx[3];
	atomic_t n;
};

static void gone_late_upcall(void *ctx, const struct kevd_event *ev,
			     bool more)
{
	struct gone_late *r = ctx;
	int i = atomic_read(&r->n);

	if (i < ARRAY_SIZE(r->ctx))
		r->ctx[i] = ev->dto.ep_context;
	atomic_inc(&r->n);
	if (i < ARRAY_SIZE(r->entered)) {
		complete(&r->entered[i]);
		wait_for_completion_timeout(&r->release[i], 60 * HZ);
	}
}

/* kevd_cq_flush_qp() of @qp in a thread of its own */
struct gone_flush {
	struct kevd *evd;
	struct ib_qp *qp;
	struct completion done;
};

static int gone_flush_fn(void *data)
{
	struct gone_flush *g = data;

	kevd_cq_flush_qp(g->evd, g->qp, false);	/* gives up, with a warning */
	complete(&g->done);
	return 0;
}

/*
 * B's drain registers while an upcall of A's completion holds the
 * poller; B's two completions come in the next poll, which finds the CQ
 * empty after them (the drain has seen them), and the upcall of the
 * first holds again until the drain gave up and B is destroyed. Seen is
 * not converted: the second must not read B.
 */
static void kevd_dto_flush_gives_up_seen(struct kunit *test)
{
	struct ib_wc wcs[3] = {
		{ .wr_id = 0, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV },
		{ .wr_id = 1, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV },
		{ .wr_id = 2, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV },
	};
	struct gone_late *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct gone_flush *g = kunit_kzalloc(test, sizeof(*g), GFP_KERNEL);
	struct kevd_upcall up = { gone_late_upcall, r };
	struct task_struct *t;
	struct ib_qp *qa, *qb;
	struct fake_hca *hca;
	unsigned long end;
	struct kevd *evd;
	int i;

	KUNIT_ASSERT_TRUE(test, r && g);
	for (i = 0; i < ARRAY_SIZE(r->entered); i++) {
		init_completion(&r->entered[i]);
		init_completion(&r->release[i]);
	}
	evd = gate_env(test, KEVD_DTO_FLAG, &hca, &qa, &qb);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd,
						 KEVD_UPCALL_SINGLE_INSTANCE,
						 &up, KEVD_UPCALL_INVOC_ANY), 0);
	wcs[0].qp = qa;
	wcs[1].qp = qb;
	wcs[2].qp = qb;
	KUNIT_ASSERT_EQ(test, fake_cq_add_burst(kevd_cq(evd), wcs, 1), 1);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&r->entered[0],
							    60 * HZ));
	/* one burst: the next poll takes both, and finds the CQ empty */
	KUNIT_ASSERT_EQ(test, fake_cq_add_burst(kevd_cq(evd), wcs + 1, 2), 2);
	g->evd = evd;
	g->qp = qb;
	init_completion(&g->done);
	t = kthread_run(gone_flush_fn, g, "kevd_test_flush");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	end = jiffies + 60 * HZ;
	while (!READ_ONCE(evd->ndrains) && time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(evd->ndrains), 1U);
	complete(&r->release[0]);
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&r->entered[1],
							    60 * HZ));
	KUNIT_EXPECT_TRUE(test, wait_for_completion_timeout(&g->done,
							    60 * HZ));
	memset(qb, 0x6b, sizeof(*qb));		/* destroyed */
	kevd_cq_qp_gone(evd, qb);
	complete(&r->release[1]);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&r->n, 3));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_PTR_EQ(test, r->ctx[0], (void *)qa);
	KUNIT_EXPECT_PTR_EQ(test, r->ctx[1], (void *)qb);
	KUNIT_EXPECT_PTR_EQ(test, r->ctx[2], NULL);
	KUNIT_EXPECT_EQ(test, atomic_read(&r->n), 3);
	/* the orphan ends: the arm check's poll began after the QP went */
	end = jiffies + 60 * HZ;
	while (READ_ONCE(evd->ndrains) && time_before(jiffies, end))
		schedule_timeout_uninterruptible(1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(evd->ndrains), 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* @qp: not in error, on no CQ (the fake HCA has no QPs): no markers */
struct flush_in_upcall {
	struct kevd *e;
	struct ib_qp qp;
	struct completion done;
	u32 count;
};

static void flush_in_upcall_fn(void *ctx, const struct kevd_event *ev,
			       bool more)
{
	struct flush_in_upcall *f = ctx;

	/* a completion (and its notification), then the flush */
	fake_cq_add_seq(kevd_cq(f->e));
	kevd_cq_flush_qp(f->e, &f->qp, false);
	f->count = kevd_ring_count(&f->e->ring);
	complete(&f->done);
}

/*
 * kevd_cq_flush_qp() from an upcall of another EVD (a CM destroy in a
 * connection upcall): the EVD whose CQ it flushes may be queued on the
 * very poller that runs the upcall (UML's one poller), which cannot make
 * its pass meanwhile. The flush takes the EVD and polls the CQ itself,
 * here until it is empty (no marker was posted).
 */
static void kevd_dto_flush_from_upcall(struct kunit *test)
{
	struct kevd_upcall up = { flush_in_upcall_fn, NULL };
	struct flush_in_upcall *f;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd *conn;

	f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, f);
	init_completion(&f->done);
	up.ctx = f;
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&attr);
	attr.qlen = 16;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cpu = 0;
	f->e = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, f->e);
	conn = kevd_test_create(test, 4, KEVD_SOFTWARE_FLAG,
				KEVD_UPCALL_SINGLE_INSTANCE, &up, 0);

	KUNIT_ASSERT_EQ(test, kevd_post_se(conn, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&f->done,
							  KEVD_TEST_WAIT), 0);
	/* polled into the ring before the flush returned */
	KUNIT_EXPECT_EQ(test, f->count, 1U);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(f->e), 0);
	fake_hca_destroy(hca);
}

/* QP and device async events routed into an async EVD. */
static void kevd_dto_post_ib_event(struct kunit *test)
{
	struct ib_qp qp = { .qp_context = &qp };
	struct ib_event ibe = { .element.qp = &qp };
	struct kevd_event ev;
	struct kevd *aevd, *sw;

	aevd = kevd_test_create(test, 8, KEVD_ASYNC_FLAG, KEVD_UPCALL_DISABLE,
				NULL, 0);
	sw = kevd_test_create(test, 8, KEVD_SOFTWARE_FLAG, KEVD_UPCALL_DISABLE,
			      NULL, 0);
	ibe.event = IB_EVENT_QP_FATAL;
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(aevd, &ibe), 0);
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(sw, &ibe), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(aevd, NULL), -EINVAL);
	ibe.event = IB_EVENT_QP_ACCESS_ERR;
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(aevd, &ibe), 0);
	ibe.event = IB_EVENT_COMM_EST;		/* not an error */
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(aevd, &ibe), -EINVAL);
	ibe.event = IB_EVENT_DEVICE_FATAL;
	ibe.device = (struct ib_device *)&qp;	/* only compared */
	KUNIT_EXPECT_EQ(test, kevd_post_ib_event(aevd, &ibe), 0);

	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_ASYNC_ERROR_EP_BROKEN);
	KUNIT_EXPECT_PTR_EQ(test, ev.async.handle, (void *)&qp);
	KUNIT_EXPECT_EQ(test, ev.async.reason, (u32)IB_EVENT_QP_FATAL);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.async.reason, (u32)IB_EVENT_QP_ACCESS_ERR);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(aevd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_ASYNC_ERROR_IA_CATASTROPHIC);
	KUNIT_EXPECT_PTR_EQ(test, ev.async.handle, (void *)&qp);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(aevd, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(sw), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(aevd), 0);
}

/* --- the pull path ---------------------------------------------------- */

/**
 * struct pull_waiter - a consumer thread taking completions in batches.
 * @evd: its EVD (upcalls disabled).
 * @n: completions to take.
 * @taken: taken so far (cookie order expected: 0, 1, ...).
 * @order_errors: cookies out of order.
 * @rc: the first error of kevd_wait_batch(), or 0.
 * @done: completed when it stops.
 */
struct pull_waiter {
	struct kevd *evd;
	u32 n;
	u32 taken;
	u32 order_errors;
	int rc;
	struct completion done;
};

static int pull_waiter_fn(void *data)
{
	struct pull_waiter *w = data;
	struct kevd_event evs[4];
	u32 nmore;
	int r, i;

	while (w->taken < w->n) {
		r = kevd_wait_batch(w->evd, 30 * USEC_PER_SEC, 1, evs,
				    ARRAY_SIZE(evs), &nmore);
		if (r < 0) {
			w->rc = r;
			break;
		}
		for (i = 0; i < r; i++, w->taken++)
			if (evs[i].dto.cookie != w->taken)
				w->order_errors++;
	}
	complete(&w->done);
	return 0;
}

/*
 * A waiter with upcalls disabled pulls its completions itself: the
 * completion handler wakes it instead of a poller, on all four notify
 * behaviours; every completion arrives once, in order.
 */
static void kevd_dto_wait_pulls(struct kunit *test)
{
	const enum fake_hca_mode *m = test->param_value;
	struct task_struct *task;
	struct pull_waiter *w;
	struct kevd_param p;
	struct dto_env *e;
	int i, j;

	e = dto_env_new(test, *m, 64, 256, KEVD_UPCALL_DISABLE, NULL);
	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	w->evd = e->evd;
	w->n = 200;
	init_completion(&w->done);
	task = kthread_run(pull_waiter_fn, w, "kevd_test_pull");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(e->evd));
	for (i = 0; i < 20; i++) {
		for (j = 0; j < 10; j++)
			KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
		if (!(i & 3))
			fake_cq_fire(e->cq);	/* and a spurious one */
	}
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, w->taken, 200U);
	KUNIT_EXPECT_EQ(test, w->order_errors, 0U);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	/* its first pull came before it slept: no poller was needed */
	KUNIT_EXPECT_GE(test, p.stats.pulls, 1ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], 200ULL);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], 200ULL);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(e->cq));
	dto_env_free(test, e);
}

/*
 * Dequeues that find the ring short pull from the CQ while pollers drain
 * it too: every completion once, in CQ order, none left behind.
 */
static void kevd_dto_dequeue_pulls(struct kunit *test)
{
	struct kevd_event *evs;
	struct kevd_param p;
	struct dto_env *e;
	unsigned long end;
	u32 taken = 0;
	int i, n;

	evs = kunit_kcalloc(test, 8, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	e = dto_env_new(test, FAKE_HCA_STRICT_IGNORE, 64, 256,
			KEVD_UPCALL_DISABLE, NULL);
	for (i = 0; i < 100; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	end = jiffies + KEVD_TEST_WAIT;
	while (taken < 100 && time_before(jiffies, end)) {
		n = kevd_dequeue_batch(e->evd, evs, 8);
		if (n == -EAGAIN) {	/* a poller owned it just then */
			cond_resched();
			continue;
		}
		KUNIT_ASSERT_GT(test, n, 0);
		for (i = 0; i < n; i++, taken++)
			KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, (u64)taken);
	}
	KUNIT_EXPECT_EQ(test, taken, 100U);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(e->evd, evs, 8), -EAGAIN);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], 100ULL);
	dto_env_free(test, e);
}

/*
 * An EVD of @qlen with the DTO stream and @other_flags, upcalls disabled
 * (@up ready for later), on the poller of CPU 0, its CQ's notifications
 * held back (moderation) so that only the test's calls move completions.
 */
static struct kevd *pull_into_evd(struct kunit *test, struct fake_hca *hca,
				  u32 qlen, u32 other_flags,
				  struct kevd_upcall *up)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = 256;
	attr.flags = KEVD_DTO_FLAG | other_flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	if (up)
		attr.upcall = *up;
	attr.cpu = 0;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(evd), U16_MAX, 0),
			0);
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	return evd;
}

/* @n completions at @evs, cookies from *@next on. */
static void pull_into_expect(struct kunit *test, struct kevd *evd,
			     const struct kevd_event *evs, int n, u64 *next)
{
	int i;

	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_EQ(test, evs[i].event_number,
				(u32)KEVD_DTO_COMPLETION_EVENT);
		KUNIT_EXPECT_EQ(test, evs[i].dto.cookie, (*next)++);
		KUNIT_EXPECT_PTR_EQ(test, evs[i].evd, evd);
	}
}

/*
 * A batch call that finds the ring short takes the CQ's completions
 * straight into its buffer (kevd_pull_into()): none passes through the
 * ring, the ring's older events come first, and the counters see each
 * once. A one-event dequeue on an empty ring still fills the ring for the
 * calls after it.
 */
static void kevd_dto_pull_into(struct kunit *test)
{
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct kevd_param p;
	struct kevd *evd;
	u64 next = 0;
	u32 nmore;

	evs = kunit_kcalloc(test, 64, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, evs);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = pull_into_evd(test, hca, 256, KEVD_SOFTWARE_FLAG, NULL);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)1UL), 0);
	KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)2UL), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 150), 150);

	/* the ring's two, then 62 straight from the CQ */
	KUNIT_ASSERT_EQ(test, kevd_dequeue_batch(evd, evs, 64), 64);
	KUNIT_EXPECT_EQ(test, evs[0].event_number, (u32)KEVD_SOFTWARE_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, evs[0].software.pointer, (void *)1UL);
	KUNIT_EXPECT_PTR_EQ(test, evs[1].software.pointer, (void *)2UL);
	pull_into_expect(test, evd, evs + 2, 62, &next);
	/* a wait for any number: 64 more, as a dequeue takes them */
	KUNIT_ASSERT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 64, &nmore), 64);
	pull_into_expect(test, evd, evs, 64, &next);
	KUNIT_EXPECT_EQ(test, evd->ring.pstats.posted[KEVD_STREAM_DTO], 0ULL);
	KUNIT_EXPECT_EQ(test, READ_ONCE(evd->postats.direct), 126ULL);

	/* one event: the pull drains the other 23 into the ring */
	KUNIT_ASSERT_EQ(test, kevd_dequeue(evd, evs), 0);
	pull_into_expect(test, evd, evs, 1, &next);
	KUNIT_EXPECT_EQ(test, kevd_ring_count(&evd->ring), 23U);
	KUNIT_EXPECT_EQ(test, evd->ring.pstats.posted[KEVD_STREAM_DTO], 24ULL);
	KUNIT_ASSERT_EQ(test, kevd_dequeue_batch(evd, evs, 64), 23);
	pull_into_expect(test, evd, evs, 23, &next);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 64), -EAGAIN);

	KUNIT_ASSERT_EQ(test, kevd_query(evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.stats.posted[KEVD_STREAM_DTO], 150ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_DTO], 150ULL);
	KUNIT_EXPECT_EQ(test, p.stats.delivered[KEVD_STREAM_SOFTWARE], 2ULL);
	KUNIT_EXPECT_EQ(test, p.count, 0U);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

struct est_hook {
	struct kevd *evd;
	struct kevd_gate *gate;
	struct ib_qp *qp;
	bool fired;
};

/*
 * What the CM does while a pull polls: ESTABLISHED queued, the gate
 * lifted, and the endpoint's first receive completes, all inside the
 * pull's poll (fake_cq_set_poll_hook(): at the start of poll_cq, with
 * the CQ's lock not held).
 */
static void est_hook_fn(struct ib_cq *cq, void *ctx)
{
	struct kevd_event est = {
		.event_number = KEVD_CONNECTION_EVENT_ESTABLISHED,
	};
	struct ib_wc wc = {
		.wr_id = 0, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
		.byte_len = 8,
	};
	struct est_hook *h = ctx;

	if (h->fired)
		return;
	h->fired = true;
	est.connection.ep = h->qp;
	WARN_ON(kevd_post_event(h->evd, &est));
	kevd_cq_ungate(h->evd, h->gate);
	wc.qp = h->qp;
	WARN_ON(fake_cq_add(cq, &wc));
}

/*
 * A batch call's pull straight into its buffer found the ring empty; an
 * endpoint's ESTABLISHED is queued and its gate lifted while the pull
 * polls, which then returns the endpoint's first completion. That
 * completion must come after its ESTABLISHED, as everywhere else, not
 * ahead of it in the caller's buffer.
 */
static void kevd_dto_pull_into_established(struct kunit *test)
{
	struct est_hook *h = kunit_kzalloc(test, sizeof(*h), GFP_KERNEL);
	struct ib_qp *qp = kunit_kzalloc(test, sizeof(*qp), GFP_KERNEL);
	struct kevd_gate gate;
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct kevd *evd;
	int n;

	evs = kunit_kcalloc(test, 64, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, h && qp && evs);
	qp->qp_context = qp;
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = pull_into_evd(test, hca, 64, KEVD_CONNECTION_FLAG, NULL);

	kevd_cq_gate_at(evd, &gate, &qp);
	*h = (struct est_hook){ .evd = evd, .gate = &gate, .qp = qp };
	fake_cq_set_poll_hook(kevd_cq(evd), est_hook_fn, h);
	n = kevd_dequeue_batch(evd, evs, 64);
	fake_cq_set_poll_hook(kevd_cq(evd), NULL, NULL);
	KUNIT_ASSERT_TRUE(test, h->fired);
	if (n == 1) {	/* ESTABLISHED alone: the completion follows */
		KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs + 1, 63), 1);
		n = 2;
	}
	KUNIT_ASSERT_EQ(test, n, 2);
	KUNIT_EXPECT_EQ(test, evs[0].event_number,
			(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
	KUNIT_EXPECT_EQ(test, evs[1].event_number,
			(u32)KEVD_DTO_COMPLETION_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, evs[1].dto.ep_context, (void *)qp);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 64), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* Queue length @qlen, a CQ of 256. */
static struct kevd *hand_back_evd(struct kunit *test, struct fake_hca *hca,
				  u32 qlen)
{
	struct kevd *evd = pull_into_evd(test, hca, qlen, 0, NULL);

	/* every completion notifies an armed CQ, as by default */
	KUNIT_ASSERT_EQ(test, rdma_set_cq_moderation(kevd_cq(evd), 0, 0), 0);
	return evd;
}

/* A completion's pass arms the CQ of @evd, as an idle pass does; frees it. */
static void hand_back_not(struct kunit *test, struct kevd *evd)
{
	struct ib_cq *cq = kevd_cq(evd);
	struct kevd_event ev;

	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	KUNIT_EXPECT_FALSE(test, READ_ONCE(evd->pull_unarmed));
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * A poller's pass that finds work on an EVD whose consumer pulls gives it
 * back with the CQ unarmed (evd/pass.c, kevd_pass_hand_back()): the
 * consumer's next call takes the event, pulls the next completion itself
 * (no notification came for it) and arms the CQ once it finds it empty.
 * An EVD no pull has owned is armed by its poller, as before, and so is
 * one whose CQ is smaller than its queue (a paused consumer's backlog
 * would then fill the CQ).
 */
static void kevd_dto_pass_hands_back(struct kunit *test)
{
	struct fake_hca *hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	struct fake_cq_stats st;
	struct kevd_event ev;
	struct kevd *evd;
	struct ib_cq *cq;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = hand_back_evd(test, hca, 256);
	cq = kevd_cq(evd);
	/* the consumer pulls, finds the CQ empty and arms it */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	/* nobody waits: the notification goes to a poller */
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	KUNIT_ASSERT_TRUE(test, dto_wait_let_go(evd));
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(cq));
	KUNIT_EXPECT_FALSE(test, fake_cq_armed(cq));
	KUNIT_EXPECT_TRUE(test, READ_ONCE(evd->pull_unarmed));
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(cq), 0);
	fake_cq_stats(cq, &st);
	KUNIT_EXPECT_EQ(test, st.notifications, 1ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 0ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 1ULL);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	KUNIT_EXPECT_TRUE(test, fake_cq_armed(cq));
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);

	/* no pull has owned this one */
	hand_back_not(test, hand_back_evd(test, hca, 256));
	/* a queue of 512 on a CQ of 256 */
	evd = hand_back_evd(test, hca, 512);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
	hand_back_not(test, evd);
	fake_hca_destroy(hca);
}

struct held_up {
	struct completion entered;
	struct completion release;
	atomic_t calls;
};

/* Blocks on software event 0, the first of the first MANY batch. */
static void held_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct held_up *h = ctx;

	atomic_inc(&h->calls);
	if (ev && ev->software.pointer)
		return;
	complete(&h->entered);
	wait_for_completion(&h->release);
}

/* Until only the blocked batch runs and no poller owns @evd. */
static bool held_settled(struct kevd *evd)
{
	unsigned long end = jiffies + KEVD_TEST_WAIT;

	while (atomic_read(&evd->upcalls_running) != 1 ||
	       (READ_ONCE(evd->poll_state) & BIT(KEVD_POLL_SCHED))) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/*
 * Events a stopped MANY batch gives back are older than the CQ's
 * completions. Upcalls are disabled while the first batch's upcall
 * blocks (the second batch, on the next poller, has ended and let go, so
 * a pull may own the EVD): a batch call then takes nothing, not even
 * straight from the CQ, and once the batch gave its events back they
 * come first, then the completions in order.
 */
static void kevd_dto_pull_into_held(struct kunit *test)
{
	struct held_up *h = kunit_kzalloc(test, sizeof(*h), GFP_KERNEL);
	struct kevd_upcall up = { held_upcall, h };
	unsigned long end;
	struct kevd_event *evs;
	struct fake_hca *hca;
	struct kevd *evd;
	u32 nmore, got = 0;
	u64 next = 0;
	int i, n;

	if (kevd_nr_pollers() < 2)
		kunit_skip(test, "one poller: a MANY batch is not handed on");
	evs = kunit_kcalloc(test, 64, sizeof(*evs), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, h && evs);
	init_completion(&h->entered);
	init_completion(&h->release);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	evd = pull_into_evd(test, hca, 256, KEVD_SOFTWARE_FLAG, &up);
	for (i = 0; i < 2 * KEVD_MANY_BATCH; i++)
		KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)i), 0);
	KUNIT_ASSERT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_MANY, NULL,
						 KEVD_UPCALL_INVOC_ANY), 0);
	if (!wait_for_completion_timeout(&h->entered, KEVD_TEST_WAIT) ||
	    !held_settled(evd)) {
		complete(&h->release);
		KUNIT_FAIL(test, "the first batch did not block alone");
		goto out;
	}
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_DISABLE,
						 NULL, KEVD_UPCALL_INVOC_ANY), 0);
	/* no assertion until the upcall is released: it would stay blocked */
	KUNIT_EXPECT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 8), 8);
	KUNIT_EXPECT_EQ(test, kevd_dequeue_batch(evd, evs, 64), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_wait_batch(evd, 0, 1, evs, 64, &nmore),
			-ETIMEDOUT);
	complete(&h->release);

	/* its 15 events back, then the 8 completions */
	end = jiffies + KEVD_TEST_WAIT;
	while (got < KEVD_MANY_BATCH - 1 + 8 && time_before(jiffies, end)) {
		n = kevd_dequeue_batch(evd, evs, 64);
		if (n == -EAGAIN) {	/* the batch is still giving back */
			cond_resched();
			continue;
		}
		KUNIT_ASSERT_GT(test, n, 0);
		for (i = 0; i < n && got < KEVD_MANY_BATCH - 1; i++, got++)
			KUNIT_EXPECT_PTR_EQ(test, evs[i].software.pointer,
					    (void *)(uintptr_t)(got + 1));
		pull_into_expect(test, evd, evs + i, n - i, &next);
		got += n - i;
	}
	KUNIT_EXPECT_EQ(test, got, KEVD_MANY_BATCH - 1 + 8U);
	KUNIT_EXPECT_EQ(test, atomic_read(&h->calls), KEVD_MANY_BATCH + 1);
out:
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/* --- the tracepoints --------------------------------------------------- */

#define TRACE_DIR	"/sys/kernel/tracing"
#define TRACE_COPY	"/dev/kevd-test-trace"
#define TRACE_ON	"echo > " TRACE_DIR "/trace && echo 1 > " TRACE_DIR "/events/kevd/enable"
#define TRACE_OFF	"echo 0 > " TRACE_DIR "/events/kevd/enable && " \
			"cat " TRACE_DIR "/trace > " TRACE_COPY

/* Does the trace hold "<event>: evd=<id><rest>"? */
static bool trace_has(const char *trace, const char *event, u32 id,
		      const char *rest)
{
	char want[96];

	snprintf(want, sizeof(want), "%s: evd=%u%s", event, id, rest);
	return strstr(trace, want);
}

static int trace_waiter_fn(void *data)
{
	struct pull_waiter *w = data;
	struct kevd_event ev;
	u32 nmore;

	w->rc = kevd_wait(w->evd, 30 * USEC_PER_SEC, 1, &ev, &nmore);
	complete(&w->done);
	return 0;
}

/*
 * Every kevd tracepoint fires, through tracefs, with the fields of the
 * EVD it names: create, schedule, pass begin and end, arm, upcall batch
 * begin and end, wait begin and end, pull, overflow, resize, free. Their
 * format files name no enum constant (TRACE_DEFINE_ENUM()): before, the
 * pass end's print format did, which trace-cmd and perf cannot resolve.
 */
static void kevd_dto_tracepoints(struct kunit *test)
{
	struct kevd_upcall up = { dto_upcall, NULL };
	struct kevd *sw, *conn;
	struct kevd_event ev = { .event_number = KEVD_CONNECTION_EVENT_BROKEN };
	struct pull_waiter *w;
	struct task_struct *t;
	struct dto_env *e;
	u32 dto_id, sw_id, conn_id;
	char *trace;
	int i;

	if (kevd_test_sh("test -w " TRACE_DIR "/events/kevd/enable"))
		kunit_skip(test, "no kevd events under " TRACE_DIR);
	KUNIT_ASSERT_EQ(test, kevd_test_sh(TRACE_ON), 0);

	e = dto_env_new(test, FAKE_HCA_STRICT_REPORT, 64, 64,
			KEVD_UPCALL_DISABLE, NULL);
	dto_id = e->evd->id;
	w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	w->evd = e->evd;
	init_completion(&w->done);
	t = kthread_run(trace_waiter_fn, w, "kevd_test_trace");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	KUNIT_ASSERT_TRUE(test, kevd_test_waiting(e->evd));
	KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&w->done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_EXPECT_EQ(test, w->rc, 0);
	KUNIT_EXPECT_EQ(test, kevd_resize(e->evd, 32), 0);

	up.ctx = &e->rec;
	sw = kevd_test_create(test, 8, KEVD_SOFTWARE_FLAG,
			      KEVD_UPCALL_SINGLE_INSTANCE, &up,
			      KEVD_UPCALL_INVOC_ANY);
	sw_id = sw->id;
	KUNIT_ASSERT_EQ(test, kevd_post_se(sw, NULL), 0);
	kevd_test_flush_pollers(test);
	conn = kevd_test_create(test, 1, KEVD_CONNECTION_FLAG,
				KEVD_UPCALL_DISABLE, NULL, 0);
	conn_id = conn->id;
	for (i = 0; i < 20; i++)	/* beyond the ring and its headroom */
		kevd_post_event(conn, &ev);

	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(sw, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(sw), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	dto_env_free(test, e);
	KUNIT_ASSERT_EQ(test, kevd_test_sh(TRACE_OFF), 0);
	trace = kevd_test_read_file(TRACE_COPY, 4 << 20);
	kevd_test_sh("rm -f " TRACE_COPY);
	KUNIT_ASSERT_NOT_NULL(test, trace);
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_create", dto_id,
					  " flags=0x20 qlen=64 policy=0"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_wait_begin", dto_id,
					  " threshold=1 n=1"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_pull", dto_id, " "));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_arm", dto_id, " "));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_wait_end", dto_id,
					  " ret=1 "));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_resize", dto_id,
					  " qlen=32 ret=0"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_free", dto_id,
					  " discarded=0"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_schedule", sw_id, " "));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_pass_begin", sw_id,
					  " budget="));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_pass_end", sw_id, " "));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_upcall_batch_begin",
					  sw_id, " policy=1 n=1"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_upcall_batch_end",
					  sw_id, " policy=1 n=1"));
	KUNIT_EXPECT_TRUE(test, trace_has(trace, "kevd_overflow", conn_id,
					  " stream=3"));
	kvfree(trace);
	/*
	 * trace-cmd and perf read the formats: no enum name left unresolved
	 * (grep: 1 is no match, 2 an error), the pass end's names there
	 */
	KUNIT_EXPECT_EQ(test, kevd_test_sh("grep -q KEVD_ " TRACE_DIR
					   "/events/kevd/*/format; [ $? -eq 1 ]"),
			0);
	KUNIT_EXPECT_EQ(test, kevd_test_sh("grep -q '\"again\"' " TRACE_DIR
					   "/events/kevd/kevd_pass_end/format"),
			0);
}

/*
 * A provider whose ib_req_notify_cq() fails leaves the CQ unarmed: no
 * notification comes, so the owner polls the CQ on every pass until an
 * arm succeeds. Every completion arrives, in order, before and after the
 * arms work again. (Before, the error was ignored and the EVD went idle
 * with its CQ unarmed: the completions after it stayed in the CQ.)
 */
static void kevd_dto_arm_fails(struct kunit *test)
{
	struct kevd_param p;
	struct dto_env *e;
	u64 arms;
	int i;

	e = dto_env_new(test, FAKE_HCA_STRICT_REPORT, 64, 64,
			KEVD_UPCALL_SINGLE_INSTANCE, NULL);
	fake_cq_fail_arms(e->cq, -EIO);
	for (i = 0; i < 20; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&e->rec.delivered, 20));
	for (i = 0; i < 20; i++)	/* no notification: found by polling */
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&e->rec.delivered, 40));
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	arms = p.stats.arms;
	fake_cq_fail_arms(e->cq, 0);
	for (i = 0; i < 20; i++)	/* armed again: notified as usual */
		KUNIT_ASSERT_EQ(test, fake_cq_add_seq(e->cq), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&e->rec.delivered, 60));
	kevd_test_flush_pollers(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.delivered), 60);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.order_errors), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&e->rec.bad), 0);
	KUNIT_ASSERT_EQ(test, kevd_query(e->evd, &p), 0);
	KUNIT_EXPECT_GT(test, p.stats.arms, arms);
	KUNIT_EXPECT_TRUE(test, fake_cq_empty(e->cq));
	dto_env_free(test, e);
}

static struct kunit_case kevd_dto_cases[] = {
	KUNIT_CASE(kevd_dto_status_map),
	KUNIT_CASE(kevd_dto_opcode_map),
	KUNIT_CASE(kevd_dto_wc_to_event),
	KUNIT_CASE(kevd_dto_race_visible),
	KUNIT_CASE_PARAM(kevd_dto_race_closed, dto_case_gen_params),
	KUNIT_CASE_PARAM(kevd_dto_empty_and_spurious, dto_mode_gen_params),
	KUNIT_CASE_SLOW(kevd_dto_mixed_streams),
	KUNIT_CASE_PARAM(kevd_dto_direct_after_policy_change,
			 dto_mode_gen_params),
	KUNIT_CASE(kevd_dto_backpressure),
	KUNIT_CASE_PARAM(kevd_dto_wait_pulls, dto_mode_gen_params),
	KUNIT_CASE(kevd_dto_dequeue_pulls),
	KUNIT_CASE(kevd_dto_pull_into),
	KUNIT_CASE(kevd_dto_pull_into_held),
	KUNIT_CASE(kevd_dto_pull_into_established),
	KUNIT_CASE(kevd_dto_pass_hands_back),
	KUNIT_CASE(kevd_dto_tracepoints),
	KUNIT_CASE(kevd_dto_arm_fails),
	KUNIT_CASE(kevd_dto_cq_overrun),
	KUNIT_CASE(kevd_dto_free_with_qp),
	KUNIT_CASE(kevd_dto_post_ib_event),
	KUNIT_CASE(kevd_dto_gate_holds_qp),
	KUNIT_CASE(kevd_dto_failed_poll_holds_fenced),
	KUNIT_CASE(kevd_dto_pull_retries_unfence),
	KUNIT_CASE(kevd_dto_hold_arms_any),
	KUNIT_CASE(kevd_dto_hold_orders_flushes),
	KUNIT_CASE(kevd_dto_hold_expires),
	KUNIT_CASE(kevd_dto_hold_post_refused),
	KUNIT_CASE(kevd_dto_fence_without_defer),
	KUNIT_CASE(kevd_dto_fence_late_completions),
	KUNIT_CASE(kevd_dto_flush_from_upcall),
	KUNIT_CASE(kevd_dto_flush_gives_up),
	KUNIT_CASE_PARAM(kevd_dto_flush_failed_poll, flush_failed_gen_params),
	KUNIT_CASE(kevd_dto_flush_cq_in_error),
	KUNIT_CASE(kevd_dto_flush_gives_up_in_batch),
	KUNIT_CASE(kevd_dto_flush_gives_up_seen),
	KUNIT_CASE_PARAM(kevd_dto_teardown_while_firing, dto_mode_gen_params),
	KUNIT_CASE_PARAM_ATTR(kevd_dto_stress, dto_stress_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	{}
};

static struct kunit_suite kevd_dto_suite = {
	.name = "kevd_dto",
	.test_cases = kevd_dto_cases,
};

kunit_test_suite(kevd_dto_suite);
