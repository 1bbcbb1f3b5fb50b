// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_fault: kevd under failure.
 *
 * The fail-nth walks fail each allocation of a call in turn: the 1st,
 * then the 2nd, ... until the call runs out of failure points and
 * succeeds. This is /proc/<pid>/task/<tid>/fail-nth, set on the test
 * thread itself (current->fail_nth, the field that file writes): every
 * failslab and fail_page_alloc point the thread reaches counts, kevd's,
 * ib_core's, the provider's and kmemleak's own. Each failed call must
 * return -ENOMEM and leave nothing behind (no EVD registered, the
 * objects it names still freeable); a call that absorbs a failure (an
 * optional allocation, or a sanitizer's) must still work. Each walk
 * prints how many points it walked, so a new allocation shows up. The
 * walks need CONFIG_FAULT_INJECTION with failslab (the UML test kernel,
 * tools/testing/configs/fault.config) and skip elsewhere; kmemleak then
 * scans after the suites (guest/kunit.sh).
 *
 * The provider failures come from the fake HCA and run on every kernel:
 * create_cq, resize_cq and poll_cq that fail (a failed arm is
 * kevd_dto_arm_fails).
 */
#include <linux/sched.h>
#include <rdma/rdma_cm.h>
#include "kevd_test.h"
#include "fake_hca.h"

/* A walk that has not ended after this many points is a failure. */
#define FAULT_MAX_POINTS	2000

struct fault_walk {
	unsigned int points;	/* failure points the call reached */
	unsigned int failed;	/* calls that failed (-ENOMEM) */
	unsigned int absorbed;	/* a point failed, the call succeeded */
	unsigned int bad;	/* a wrong errno, or a failure with no point */
	int bad_err;
};

#ifdef CONFIG_FAULT_INJECTION
static void fault_nth(unsigned int n)
{
	WRITE_ONCE(current->fail_nth, n);
}

/* Stop injecting; true if the n-th point was reached (and failed). */
static bool fault_hit(void)
{
	bool hit = !READ_ONCE(current->fail_nth);

	WRITE_ONCE(current->fail_nth, 0);
	return hit;
}

static bool fault_walk_possible(struct kunit *test)
{
	return true;
}
#else
static void fault_nth(unsigned int n)
{
}

static bool fault_hit(void)
{
	return false;
}

static bool fault_walk_possible(struct kunit *test)
{
	kunit_skip(test, "needs CONFIG_FAULT_INJECTION (the UML test kernel)");
	return false;
}
#endif

/*
 * Account one call of a walk. Returns true when the walk is over: the
 * call succeeded without reaching the n-th point.
 */
static bool fault_walk_step(struct fault_walk *w, unsigned int n, int err,
			    bool hit)
{
	if (!err) {
		if (!hit) {
			w->points = n - 1;
			return true;
		}
		w->absorbed++;
		return false;
	}
	if (hit && err == -ENOMEM) {
		w->failed++;
	} else {
		w->bad++;
		w->bad_err = err;
	}
	return false;
}

/*
 * @must_fail: one failed point fails the call (not so for an allocation
 * larger than a page: kvmalloc() falls back to vmalloc()).
 */
static void fault_walk_check(struct kunit *test, const struct fault_walk *w,
			     unsigned int n, const char *call, bool must_fail)
{
	kunit_info(test, "fail-nth: %s: %u failure points walked, %u failed the call (-ENOMEM), %u absorbed\n",
		   call, w->points, w->failed, w->absorbed);
	KUNIT_EXPECT_LT_MSG(test, n, FAULT_MAX_POINTS, "%s: the walk did not end", call);
	KUNIT_EXPECT_EQ_MSG(test, w->bad, 0,
			    "%s: failed with %d, not -ENOMEM, or without an injected failure",
			    call, w->bad_err);
	if (must_fail)
		KUNIT_EXPECT_GT_MSG(test, w->failed, 0, "%s: no point failed the call", call);
}

/* Software events only: a post and a dequeue. */
static void fault_evd_works(struct kunit *test, struct kevd *evd)
{
	struct kevd_event ev;
	static int token;

	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, &token), 0);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer, (void *)&token);
}

/* What kevd_create() is walked with: the stream combinations. */
struct fault_create_case {
	const char *name;
	u32 flags;
	bool device;		/* on the fake HCA (a DTO stream: a CQ) */
	u32 cq_depth;
	bool solicited_only;
	bool async_chain;	/* with an async EVD */
	u32 qlen;
};

static const struct fault_create_case fault_create_cases[] = {
	{ "software", KEVD_SOFTWARE_FLAG, false, 0, false, false, 16 },
	{ "cm_streams", KEVD_CR_FLAG | KEVD_CONNECTION_FLAG |
	  KEVD_RMR_BIND_FLAG | KEVD_ASYNC_FLAG | KEVD_SOFTWARE_FLAG,
	  false, 0, false, false, 16 },
	{ "dto_cq", KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG, true, 0, false,
	  false, 16 },
	{ "default_with_cq", KEVD_DEFAULT_FLAG | KEVD_SOFTWARE_FLAG, true,
	  64, true, true, 16 },
	/* a ring larger than a page: kvmalloc's vmalloc fallback too */
	{ "dto_cq_large", KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG, true, 0, false,
	  false, 4096 },
};

static void fault_create_desc(const struct fault_create_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(fault_create, fault_create_cases, fault_create_desc);

/* The walk of kevd_create() for one case; @name names it in the output. */
static void fault_walk_create_one(struct kunit *test,
				  const struct fault_create_case *c,
				  const char *name)
{
	struct fake_hca *hca = NULL;
	struct kevd *async = NULL, *evd;
	struct fault_walk w = { };
	struct kevd_attr attr;
	unsigned int n, before;
	bool hit;
	int err;

	if (c->device) {
		hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	}
	if (c->async_chain)
		async = kevd_test_create(test, 8, KEVD_ASYNC_FLAG,
					 KEVD_UPCALL_DISABLE, NULL,
					 KEVD_UPCALL_INVOC_ANY);
	kevd_attr_init(&attr);
	attr.qlen = c->qlen;
	attr.flags = c->flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cq_depth = c->cq_depth;
	attr.solicited_only = c->solicited_only;
	attr.async_evd = async;
	before = kevd_nr_evds();
	for (n = 1; n < FAULT_MAX_POINTS; n++) {
		fault_nth(n);
		evd = kevd_create(hca ? fake_hca_ibdev(hca) : NULL, &attr);
		hit = fault_hit();
		err = IS_ERR(evd) ? PTR_ERR(evd) : 0;
		if (!err) {
			if (c->flags & KEVD_SOFTWARE_FLAG)
				fault_evd_works(test, evd);
			KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
		}
		KUNIT_EXPECT_EQ(test, kevd_nr_evds(), before);
		if (fault_walk_step(&w, n, err, hit))
			break;
	}
	fault_walk_check(test, &w, n, name, true);
	/* the async EVD is not held by a failed create */
	if (async)
		KUNIT_EXPECT_EQ(test, kevd_free(async), 0);
	if (hca)
		fake_hca_destroy(hca);
}

static void kevd_fault_walk_create(struct kunit *test)
{
	const struct fault_create_case *c = test->param_value;

	if (!fault_walk_possible(test))
		return;
	fault_walk_create_one(test, c, c->name);
}

/*
 * Every combination of the six streams (63: an EVD has at least one), a
 * DTO stream on the fake HCA (with its CQ), the others without a device.
 */
static void kevd_fault_walk_create_streams(struct kunit *test)
{
	static const struct { u32 flag; const char *name; } streams[] = {
		{ KEVD_SOFTWARE_FLAG, "sw" }, { KEVD_CR_FLAG, "cr" },
		{ KEVD_DTO_FLAG, "dto" }, { KEVD_CONNECTION_FLAG, "conn" },
		{ KEVD_RMR_BIND_FLAG, "rmr" }, { KEVD_ASYNC_FLAG, "async" },
	};
	struct fault_create_case c = { .qlen = 16 };
	char name[48];
	u32 mask;
	int i, len;

	if (!fault_walk_possible(test))
		return;
	for (mask = 1; mask < BIT(ARRAY_SIZE(streams)); mask++) {
		c.flags = 0;
		len = scnprintf(name, sizeof(name), "create");
		for (i = 0; i < ARRAY_SIZE(streams); i++) {
			if (!(mask & BIT(i)))
				continue;
			c.flags |= streams[i].flag;
			len += scnprintf(name + len, sizeof(name) - len, "%c%s",
					 len == 6 ? ' ' : '+', streams[i].name);
		}
		c.device = c.flags & KEVD_DTO_FLAG;
		fault_walk_create_one(test, &c, name);
	}
}

/* A strict fake HCA, and DISABLE attributes for a DTO EVD on it. */
static struct fake_hca *fault_dto_setup(struct kunit *test,
					struct kevd_attr *attr, u32 qlen,
					u32 flags)
{
	struct fake_hca *hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(attr);
	attr->qlen = qlen;
	attr->flags = flags;
	attr->upcall_policy = KEVD_UPCALL_DISABLE;
	return hca;
}

/*
 * kevd_resize() under fail-nth, on a DTO EVD whose CQ follows the queue
 * length (the CQ is resized too) and which holds events: a failed resize
 * keeps the queue length and every event, in order. To 64 and to 4096
 * (larger than a page: vmalloc()).
 */
static const u32 fault_resize_qlens[] = { 64, 4096 };

static void fault_resize_desc(const u32 *qlen, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "to_%u", *qlen);
}

KUNIT_ARRAY_PARAM(fault_resize, fault_resize_qlens, fault_resize_desc);

static void kevd_fault_walk_resize(struct kunit *test)
{
	const u32 to = *(const u32 *)test->param_value;
	char call[32];
	struct kevd_event ev;
	struct fault_walk w = { };
	struct kevd_param param;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd *evd;
	unsigned int n;
	u32 qlen, i;
	bool hit;
	int err;

	if (!fault_walk_possible(test))
		return;
	hca = fault_dto_setup(test, &attr, 16, KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	for (n = 1; n < FAULT_MAX_POINTS; n++) {
		evd = kevd_create(fake_hca_ibdev(hca), &attr);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
		for (i = 0; i < 5; i++)
			KUNIT_ASSERT_EQ(test, kevd_post_se(evd, (void *)(uintptr_t)(i + 1)), 0);
		KUNIT_ASSERT_EQ(test, kevd_query(evd, &param), 0);
		qlen = param.qlen;

		fault_nth(n);
		err = kevd_resize(evd, to);
		hit = fault_hit();

		KUNIT_EXPECT_EQ(test, kevd_query(evd, &param), 0);
		if (err)
			KUNIT_EXPECT_EQ(test, param.qlen, qlen);
		else
			KUNIT_EXPECT_GE(test, param.qlen, to);
		KUNIT_EXPECT_EQ(test, param.count, 5);
		for (i = 0; i < 5; i++) {
			KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
			KUNIT_EXPECT_PTR_EQ(test, ev.software.pointer,
					    (void *)(uintptr_t)(i + 1));
		}
		KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
		KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
		if (fault_walk_step(&w, n, err, hit))
			break;
	}
	snprintf(call, sizeof(call), "kevd_resize to %u", to);
	/*
	 * Not must_fail: the ring and the fake CQ come from kvcalloc(), and
	 * whether a failed point fails the call or kvmalloc()'s vmalloc()
	 * fallback absorbs it depends on the allocator's state (a run with
	 * only this suite loaded saw 5 points, all absorbed, for 64).
	 */
	fault_walk_check(test, &w, n, call, false);
	fake_hca_destroy(hca);
}

/* A software event through a SINGLE_INSTANCE upcall: the pool serves. */
static void fault_pool_serves(struct kunit *test)
{
	struct kevd_rec *rec = kevd_rec_new(test);
	struct kevd_upcall up = { kevd_rec_upcall, rec };
	struct kevd *evd;

	evd = kevd_test_create(test, 8, KEVD_SOFTWARE_FLAG,
			       KEVD_UPCALL_SINGLE_INSTANCE, &up,
			       KEVD_UPCALL_INVOC_ANY);
	KUNIT_EXPECT_EQ(test, kevd_post_se(evd, (void *)1), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&rec->calls, 1));
	KUNIT_EXPECT_EQ(test, kevd_modify_upcall(evd, KEVD_UPCALL_TEARDOWN,
						 NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
}

/*
 * kevd's module init, the part that allocates: the poller pool (its
 * array, a kthread_create() per poller, the CPU hotplug state), walked
 * with each nr_pollers: one per CPU (0), 1, 2 and 64 (an array larger
 * than a page). A failed start returns -ENOMEM and leaves no poller; a
 * successful one serves an upcall. The pool is then started again as it
 * was. (A walk of the whole finit_module() from user space fails the
 * module loader's allocations too; failures in the registration of
 * kevd's trace events make the kernel's tracing code WARN, in
 * event_define_fields() and event_file_put(), which is not kevd's code.)
 */
static void kevd_fault_walk_pollers(struct kunit *test)
{
	static const unsigned int sets[] = { 0, 1, 2, 64 };
	unsigned int orig = 0, old, n, i, want;
	struct fault_walk w;
	char call[40];
	bool hit, first = true;
	int err;

	if (!fault_walk_possible(test))
		return;
	if (kevd_nr_evds())
		kunit_skip(test, "EVDs exist: the pool cannot restart");
	for (i = 0; i < ARRAY_SIZE(sets); i++) {
		want = sets[i] ?: num_online_cpus();
		memset(&w, 0, sizeof(w));
		for (n = 1; n < FAULT_MAX_POINTS; n++) {
			fault_nth(n);
			err = kevd_pollers_restart(sets[i], &old);
			hit = fault_hit();
			if (first) {
				orig = old;
				first = false;
			}
			KUNIT_EXPECT_EQ(test, kevd_nr_pollers(), err ? 0 : want);
			if (!err)
				fault_pool_serves(test);
			if (fault_walk_step(&w, n, err, hit))
				break;
		}
		snprintf(call, sizeof(call), "module init, nr_pollers=%u",
			 sets[i]);
		/*
		 * Not must_fail: with one poller (UML) the walk reaches 7
		 * points and every failure is absorbed; with two, 5 of 10
		 * fail the call. Why no point of the one poller's
		 * kthread_create() fails it is not understood yet.
		 */
		fault_walk_check(test, &w, n, call, false);
	}
	KUNIT_ASSERT_EQ(test, kevd_pollers_restart(orig, &old), 0);
	KUNIT_EXPECT_EQ(test, kevd_nr_pollers(), orig ?: num_online_cpus());
}

static int fault_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	return 0;
}

/*
 * kevd_cm_bind() under fail-nth: a failed bind leaves the id unbound
 * (destroyed by its owner) and does not hold the EVD.
 */
static void kevd_fault_walk_cm_bind(struct kunit *test)
{
	struct kevd_cm_attr cattr = { };
	struct fault_walk w = { };
	struct rdma_cm_id *id;
	struct kevd *conn;
	unsigned int n;
	bool hit;
	int err;

	if (!fault_walk_possible(test))
		return;
	conn = kevd_test_create(test, 8, KEVD_CONNECTION_FLAG,
				KEVD_UPCALL_DISABLE, NULL,
				KEVD_UPCALL_INVOC_ANY);
	cattr.conn_evd = conn;
	for (n = 1; n < FAULT_MAX_POINTS; n++) {
		id = rdma_create_id(&init_net, fault_cm_handler, NULL,
				    RDMA_PS_TCP, IB_QPT_RC);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, id);

		fault_nth(n);
		err = kevd_cm_bind(id, &cattr);
		hit = fault_hit();

		if (err) {
			/* not bound: the EVD is free to go, the id is ours */
			KUNIT_EXPECT_PTR_EQ(test, id->context, NULL);
			rdma_destroy_id(id);
		} else {
			KUNIT_EXPECT_EQ(test, kevd_free(conn), -EBUSY);
			kevd_cm_destroy_id(id);
		}
		if (fault_walk_step(&w, n, err, hit))
			break;
	}
	fault_walk_check(test, &w, n, "kevd_cm_bind", true);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
}

/* One event, as a DAT consumer waits for it (the test's bound). */
static int fault_wait(struct kevd *evd, struct kevd_event *ev)
{
	u32 nmore;

	return kevd_wait(evd, jiffies_to_usecs(KEVD_TEST_WAIT), 1, ev, &nmore);
}

/* The provider's create_cq fails: its errno, and no EVD. */
static void kevd_fault_create_cq_fails(struct kunit *test)
{
	static const int errs[] = { -ENOMEM, -EIO, -EINVAL };
	struct fake_hca *hca;
	struct kevd_attr attr;
	unsigned int before;
	struct kevd *evd;
	int i;

	hca = fault_dto_setup(test, &attr, 16, KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG);
	before = kevd_nr_evds();
	for (i = 0; i < ARRAY_SIZE(errs); i++) {
		fake_hca_fail_create_cq(hca, errs[i]);
		evd = kevd_create(fake_hca_ibdev(hca), &attr);
		KUNIT_EXPECT_TRUE(test, IS_ERR(evd));
		if (IS_ERR(evd))
			KUNIT_EXPECT_EQ(test, PTR_ERR(evd), errs[i]);
		KUNIT_EXPECT_EQ(test, kevd_nr_evds(), before);
	}
	fake_hca_fail_create_cq(hca, 0);
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	fault_evd_works(test, evd);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

/*
 * The provider's resize_cq fails: kevd_resize() returns its errno, the
 * queue length stays, and the completions already queued, and those in
 * the CQ, all arrive in order.
 */
static void kevd_fault_resize_cq_fails(struct kunit *test)
{
	struct kevd_param param;
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd *evd;
	u32 qlen, i;

	hca = fault_dto_setup(test, &attr, 16, KEVD_DTO_FLAG);
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	for (i = 0; i < 6; i++)
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(evd), i), 0);
	/* three taken, three left (in the CQ or the ring) */
	for (i = 0; i < 3; i++) {
		KUNIT_ASSERT_EQ(test, fault_wait(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, i);
	}
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &param), 0);
	qlen = param.qlen;

	fake_hca_fail_resize_cq(hca, -ENOMEM);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 512), -ENOMEM);
	fake_hca_fail_resize_cq(hca, -EIO);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 512), -EIO);
	KUNIT_ASSERT_EQ(test, kevd_query(evd, &param), 0);
	KUNIT_EXPECT_EQ(test, param.qlen, qlen);
	KUNIT_EXPECT_FALSE(test, param.state & KEVD_STATE_OVERFLOWED);
	for (i = 3; i < 6; i++) {
		KUNIT_ASSERT_EQ(test, fault_wait(evd, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);

	fake_hca_fail_resize_cq(hca, 0);
	KUNIT_EXPECT_EQ(test, kevd_resize(evd, 512), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_hca_destroy(hca);
}

struct fault_poll_rec {
	atomic_t delivered;
	atomic_t misordered;
	u64 next;
};

static void fault_poll_upcall(void *ctx, const struct kevd_event *ev,
			      bool more)
{
	struct fault_poll_rec *r = ctx;

	if (ev->dto.cookie != r->next)
		atomic_inc(&r->misordered);
	r->next = ev->dto.cookie + 1;
	atomic_inc(&r->delivered);
}

/*
 * The provider's poll_cq fails (a CQ in error), for a poller and for a
 * consumer that pulls: as ib_core does, a failed poll is an empty CQ for
 * that pass. A poller does not spin on it (a second flush of the pool
 * sees no new poll), a pull says -EAGAIN, and once polls work again
 * every completion arrives, once, in order.
 */
static void kevd_fault_poll_cq_fails(struct kunit *test)
{
	struct fault_poll_rec rec = { };
	struct kevd_upcall up = { fault_poll_upcall, &rec };
	struct fake_cq_stats st1, st2;
	struct kevd *evd, *pull;
	struct kevd_event ev;
	struct fake_hca *hca;
	struct kevd_attr attr;
	u32 i, nmore;

	hca = fault_dto_setup(test, &attr, 64, KEVD_DTO_FLAG);
	attr.upcall_policy = KEVD_UPCALL_SINGLE_INSTANCE;
	attr.upcall = up;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.upcall.func = NULL;
	pull = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pull);

	fake_cq_fail_polls(kevd_cq(evd), -EIO);
	fake_cq_fail_polls(kevd_cq(pull), -EIO);
	for (i = 0; i < 8; i++) {
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(evd), i), 0);
		KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(pull), i), 0);
	}
	/* the pull path: nothing, and no error beyond "empty" */
	KUNIT_EXPECT_EQ(test, kevd_dequeue(pull, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_wait(pull, 1000, 1, &ev, &nmore), -ETIMEDOUT);
	/* the poller: it tried, and is not stuck on the CQ */
	kevd_test_flush_pollers(test);
	fake_cq_stats(kevd_cq(evd), &st1);
	KUNIT_EXPECT_GT(test, st1.polls, 0);
	kevd_test_flush_pollers(test);
	fake_cq_stats(kevd_cq(evd), &st2);
	KUNIT_EXPECT_EQ(test, st2.polls, st1.polls);
	KUNIT_EXPECT_EQ(test, atomic_read(&rec.delivered), 0);

	/* polls work again: the next notification brings everything */
	fake_cq_fail_polls(kevd_cq(evd), 0);
	fake_cq_fail_polls(kevd_cq(pull), 0);
	KUNIT_ASSERT_EQ(test, fake_cq_add_cookie(kevd_cq(evd), 8), 0);
	KUNIT_EXPECT_TRUE(test, kevd_test_wait_count(&rec.delivered, 9));
	KUNIT_EXPECT_EQ(test, atomic_read(&rec.misordered), 0);
	for (i = 0; i < 8; i++) {
		KUNIT_ASSERT_EQ(test, fault_wait(pull, &ev), 0);
		KUNIT_EXPECT_EQ(test, ev.dto.cookie, i);
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(pull, &ev), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(pull), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&rec.delivered), 9);
	fake_hca_destroy(hca);
}

/*
 * failslab and fail_page_alloc skip GFP_KERNEL allocations (and order-0
 * pages) by default, and print a stack for every failure: the walks want
 * every allocation and a quiet console. Set for the suite, then restored.
 */
#define FAULT_DIR "/sys/kernel/debug/"
static const char * const fault_setup[] = {
	"echo N > " FAULT_DIR "failslab/ignore-gfp-wait",
	"echo 0 > " FAULT_DIR "failslab/verbose",
	"echo N > " FAULT_DIR "fail_page_alloc/ignore-gfp-wait",
	"echo 0 > " FAULT_DIR "fail_page_alloc/min-order",
	"echo 0 > " FAULT_DIR "fail_page_alloc/verbose",
};

static const char * const fault_restore[] = {
	"echo Y > " FAULT_DIR "failslab/ignore-gfp-wait",
	"echo 2 > " FAULT_DIR "failslab/verbose",
	"echo Y > " FAULT_DIR "fail_page_alloc/ignore-gfp-wait",
	"echo 1 > " FAULT_DIR "fail_page_alloc/min-order",
	"echo 2 > " FAULT_DIR "fail_page_alloc/verbose",
};

static int kevd_fault_suite_init(struct kunit_suite *suite)
{
	int i;

	if (!IS_ENABLED(CONFIG_FAULT_INJECTION))
		return 0;
	for (i = 0; i < ARRAY_SIZE(fault_setup); i++)
		if (kevd_test_sh(fault_setup[i]))
			return -EIO;
	return 0;
}

static void kevd_fault_suite_exit(struct kunit_suite *suite)
{
	int i;

	if (!IS_ENABLED(CONFIG_FAULT_INJECTION))
		return;
	for (i = 0; i < ARRAY_SIZE(fault_restore); i++)
		kevd_test_sh(fault_restore[i]);
}

/* Every poll of another thread than @ctx fails: the pollers take nothing. */
static void fault_polls_of(struct ib_cq *cq, void *ctx)
{
	fake_cq_fail_polls(cq, current == ctx ? 0 : -EIO);
}

/*
 * kevd_cq_flush_qp() (the QP goes next) under fail-nth from its first
 * allocation: it still drains. A completion of the QP waits in the CQ
 * (the pollers' polls fail: only the test's thread takes it); once the
 * flush returned, the QP is gone (its context says so here), and the
 * completion is in the queue, taken with the QP's context. Before, with
 * no memory for its drain record the flush did not drain (a hold of the
 * QP, had there been one, would have become an orphan and covered it),
 * and the completion was converted later by reading the destroyed QP.
 */
static void kevd_fault_flush_qp_drains(struct kunit *test)
{
	struct ib_wc wc = {
		.wr_id = 1, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
		.byte_len = 8,
	};
	struct fake_hca *hca;
	struct kevd_attr attr;
	struct kevd_event ev;
	struct ib_qp *qp;
	struct kevd *evd;
	static int gone;
	bool hit;

	if (!fault_walk_possible(test))
		return;
	hca = fault_dto_setup(test, &attr, 64,
			      KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG);
	evd = kevd_create(fake_hca_ibdev(hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	fake_cq_set_poll_hook(kevd_cq(evd), fault_polls_of, current);
	qp = fake_qp_create(hca, kevd_cq(evd), 4);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qp);
	qp->qp_context = qp;
	wc.qp = qp;
	KUNIT_ASSERT_EQ(test, fake_cq_add(kevd_cq(evd), &wc), 0);
	fault_nth(1);
	kevd_cq_flush_qp(evd, qp, false);
	hit = fault_hit();
	KUNIT_EXPECT_TRUE(test, hit);
	qp->qp_context = &gone;		/* destroyed */
	kevd_cq_qp_gone(evd, qp);
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 1ULL);
	KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, (void *)qp);
	fake_cq_set_poll_hook(kevd_cq(evd), NULL, NULL);
	fake_cq_fail_polls(kevd_cq(evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_qp_destroy(qp);
	fake_hca_destroy(hca);
}

static struct kunit_case kevd_fault_cases[] = {
	KUNIT_CASE_PARAM(kevd_fault_walk_create, fault_create_gen_params),
	KUNIT_CASE(kevd_fault_walk_create_streams),
	KUNIT_CASE_PARAM(kevd_fault_walk_resize, fault_resize_gen_params),
	KUNIT_CASE(kevd_fault_walk_cm_bind),
	KUNIT_CASE(kevd_fault_walk_pollers),
	KUNIT_CASE(kevd_fault_create_cq_fails),
	KUNIT_CASE(kevd_fault_resize_cq_fails),
	KUNIT_CASE(kevd_fault_poll_cq_fails),
	KUNIT_CASE(kevd_fault_flush_qp_drains),
	{}
};

static struct kunit_suite kevd_fault_suite = {
	.name = "kevd_fault",
	.suite_init = kevd_fault_suite_init,
	.suite_exit = kevd_fault_suite_exit,
	.test_cases = kevd_fault_cases,
};

kunit_test_suite(kevd_fault_suite);
