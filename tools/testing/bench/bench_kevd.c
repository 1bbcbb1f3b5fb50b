// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench's kevd modes (kevd-single, kevd-wait, kevd-dequeue) and the
 * scale test (many EVDs on the default pollers). See bench.h.
 */
#include <linux/kthread.h>
#include <linux/slab.h>
#include "bench.h"

/* ------------------------------------------------------------------ */
/* The modes                                                           */

static void bench_kevd_upcall(void *ctx, const struct kevd_event *ev,
			      bool more_events)
{
	bench_consume_event(ctx, ev);
}

/* kevd-single-wc: the raw flavour, a poll's work completions per call */
static void bench_kevd_wc_upcall(void *ctx, const struct ib_wc *wcs, u32 n)
{
	struct bench_run *r = ctx;
	u32 i;

	for (i = 0; i < n; i++) {
		if (unlikely(wcs[i].status != IB_WC_SUCCESS)) {
			atomic_inc(&r->bad);
			continue;
		}
		bench_consume(r, wcs[i].wr_id);
	}
}

/* kevd-wait: kevd_wait() for every event */
static int bench_kevd_waiter(void *data)
{
	struct bench_run *r = data;
	struct kevd_event ev;
	u32 nmore;
	int ret;

	while (!kthread_should_stop()) {
		ret = kevd_wait(r->evd, 100000, 1, &ev, &nmore);
		if (ret == -ECANCELED)
			break;
		if (!ret)
			bench_consume_event(r, &ev);
	}
	bench_park();
	return 0;
}

/* kevd-dequeue: kevd_wait() for one event, kevd_dequeue() for the rest */
static int bench_kevd_dequeuer(void *data)
{
	struct bench_run *r = data;
	struct kevd_event ev;
	u32 nmore;
	int ret;

	while (!kthread_should_stop()) {
		ret = kevd_wait(r->evd, 100000, 1, &ev, &nmore);
		if (ret == -ECANCELED)
			break;
		if (ret)
			continue;
		bench_consume_event(r, &ev);
		while (!kevd_dequeue(r->evd, &ev))
			bench_consume_event(r, &ev);
	}
	bench_park();
	return 0;
}

/* Events a batch call takes at once (one ib_poll_cq() batch). */
#define BENCH_KEVD_BATCH	64

/* kevd-wait-batch: kevd_wait_batch() for up to 64 events at a time */
static int bench_kevd_batch_waiter(void *data)
{
	struct bench_run *r = data;
	struct kevd_event *evs;
	u32 nmore;
	int ret, i;

	evs = kcalloc(BENCH_KEVD_BATCH, sizeof(*evs), GFP_KERNEL);
	while (evs && !kthread_should_stop()) {
		ret = kevd_wait_batch(r->evd, 100000, 1, evs, BENCH_KEVD_BATCH,
				      &nmore);
		if (ret == -ECANCELED)
			break;
		for (i = 0; i < ret; i++)
			bench_consume_event(r, &evs[i]);
	}
	kfree(evs);
	bench_park();
	return 0;
}

/* kevd-dequeue-batch: kevd_wait() for one, kevd_dequeue_batch() after */
static int bench_kevd_batch_dequeuer(void *data)
{
	struct bench_run *r = data;
	struct kevd_event ev, *evs;
	u32 nmore;
	int ret, i;

	evs = kcalloc(BENCH_KEVD_BATCH, sizeof(*evs), GFP_KERNEL);
	while (evs && !kthread_should_stop()) {
		ret = kevd_wait(r->evd, 100000, 1, &ev, &nmore);
		if (ret == -ECANCELED)
			break;
		if (ret)
			continue;
		bench_consume_event(r, &ev);
		while ((ret = kevd_dequeue_batch(r->evd, evs,
						 BENCH_KEVD_BATCH)) > 0)
			for (i = 0; i < ret; i++)
				bench_consume_event(r, &evs[i]);
	}
	kfree(evs);
	bench_park();
	return 0;
}

struct kevd *bench_kevd_create(struct bench_run *r, struct ib_device *dev,
			       int policy, u32 qlen, int cpu)
{
	return bench_kevd_create_wc(r, dev, policy, qlen, cpu, NULL);
}

/* bench_kevd_create() with the raw flavour @wc_func (NULL: none). */
struct kevd *bench_kevd_create_wc(struct bench_run *r, struct ib_device *dev,
				  int policy, u32 qlen, int cpu,
				  kevd_wc_upcall_func wc_func)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = qlen;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = policy;
	attr.upcall.func = bench_kevd_upcall;
	attr.upcall.wc_func = wc_func;
	attr.upcall.ctx = r;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.cpu = cpu;
	evd = kevd_create(dev, &attr);
	if (!IS_ERR(evd) && dev == bs->ibdev)
		fake_cq_set_irq_cpu(kevd_cq(evd), bs->ccpu);
	return evd;
}

static int bench_kevd_init(struct bench_run *r, struct ib_device *dev,
			   int policy)
{
	struct kevd *evd = bench_kevd_create(r, dev, policy, r->room, bs->ccpu);

	if (IS_ERR(evd))
		return PTR_ERR(evd);
	r->evd = evd;
	r->cq = kevd_cq(evd);
	return 0;
}

static int bench_single_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_kevd_init(r, dev, KEVD_UPCALL_SINGLE_INSTANCE);
}

static int bench_single_wc_init(struct bench_run *r, struct ib_device *dev)
{
	struct kevd *evd;

	evd = bench_kevd_create_wc(r, dev, KEVD_UPCALL_SINGLE_INSTANCE,
				   r->room, bs->ccpu, bench_kevd_wc_upcall);
	if (IS_ERR(evd))
		return PTR_ERR(evd);
	r->evd = evd;
	r->cq = kevd_cq(evd);
	return 0;
}

static int bench_wait_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_kevd_init(r, dev, KEVD_UPCALL_DISABLE) ?:
	       bench_consumer_thread(r, bench_kevd_waiter, "kevd_bench_wait");
}

static int bench_dequeue_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_kevd_init(r, dev, KEVD_UPCALL_DISABLE) ?:
	       bench_consumer_thread(r, bench_kevd_dequeuer, "kevd_bench_wait");
}

static int bench_wait_batch_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_kevd_init(r, dev, KEVD_UPCALL_DISABLE) ?:
	       bench_consumer_thread(r, bench_kevd_batch_waiter,
				     "kevd_bench_wait");
}

static int bench_dequeue_batch_init(struct bench_run *r,
				    struct ib_device *dev)
{
	return bench_kevd_init(r, dev, KEVD_UPCALL_DISABLE) ?:
	       bench_consumer_thread(r, bench_kevd_batch_dequeuer,
				     "kevd_bench_wait");
}

static void bench_kevd_cleanup(struct bench_run *r)
{
	int ret;

	if (!r->evd)
		return;
	ret = kevd_free(r->evd);
	if (ret)
		pr_err("kevd-bench: kevd_free: %d\n", ret);
	r->evd = NULL;
	r->cq = NULL;
}

/*
 * Evidence for RESULTS.md: where kevd's poller threads ran and how often
 * they were preempted (cumulative counters; compare successive lines).
 */
static void bench_poller_diag(void)
{
	struct task_struct *g, *t;

	rcu_read_lock();
	for_each_process_thread(g, t) {
		if (strncmp(t->comm, "kevd_poll/", 10))
			continue;
		pr_info("kevd-bench-diag poller=%s cpu=%u nr_cpus_allowed=%d migrations=%llu nvcsw=%lu nivcsw=%lu\n",
			t->comm, task_cpu(t), t->nr_cpus_allowed,
			READ_ONCE(t->se.nr_migrations), READ_ONCE(t->nvcsw),
			READ_ONCE(t->nivcsw));
	}
	rcu_read_unlock();
}

/*
 * kevd_query(): upcalls, and on rdma_dev kevd's notifications and arms.
 * Return: true when it printed the saturated run's kevd-bench-diag line.
 */
static bool bench_kevd_diag(struct bench_run *r, struct bench_sample *s)
{
	struct kevd_param p;

	if (!r->evd || kevd_query(r->evd, &p))
		return false;
	s->upcalls = p.stats.upcalls;
	if (r->rdma) {
		/* A real provider counts nothing: kevd's counters. */
		s->notif = p.stats.notifications;
		s->arms = p.stats.arms;
	}
	if (r->rate || bench_smoke_mode || r->rdma)
		return false;
	/* Evidence for RESULTS.md: kevd's own counters. */
	pr_info("kevd-bench-diag mode=%s delivered=%u notifications=%llu empty_notifications=%llu arms=%llu repolls=%llu backpressure_stalls=%llu max_batch=%llu upcalls=%llu\n",
		r->ops->name, s->delivered, p.stats.notifications,
		p.stats.empty_notifications, p.stats.arms, p.stats.repolls,
		p.stats.backpressure_stalls, p.stats.max_batch,
		p.stats.upcalls);
	return true;
}

static void bench_kevd_counters(struct bench_run *r, struct bench_sample *s)
{
	bench_kevd_diag(r, s);
}

/* kevd-single: where its poller ran, too. */
static void bench_single_counters(struct bench_run *r, struct bench_sample *s)
{
	if (bench_kevd_diag(r, s))
		bench_poller_diag();
}

const struct bench_ops bench_kevd_single_ops = {
	.name		= "kevd-single",
	.init		= bench_single_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_single_counters,
	.rdma_counted	= true,
};

const struct bench_ops bench_kevd_single_wc_ops = {
	.name		= "kevd-single-wc",
	.init		= bench_single_wc_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_kevd_counters,
	.rdma_counted	= true,
};

const struct bench_ops bench_kevd_wait_ops = {
	.name		= "kevd-wait",
	.init		= bench_wait_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_kevd_counters,
	.rdma_counted	= true,
};

const struct bench_ops bench_kevd_dequeue_ops = {
	.name		= "kevd-dequeue",
	.init		= bench_dequeue_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_kevd_counters,
	.rdma_counted	= true,
};

const struct bench_ops bench_kevd_wait_batch_ops = {
	.name		= "kevd-wait-batch",
	.init		= bench_wait_batch_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_kevd_counters,
	.rdma_counted	= true,
};

const struct bench_ops bench_kevd_dequeue_batch_ops = {
	.name		= "kevd-dequeue-batch",
	.init		= bench_dequeue_batch_init,
	.cleanup	= bench_kevd_cleanup,
	.counters	= bench_kevd_counters,
	.rdma_counted	= true,
};

/* ------------------------------------------------------------------ */
/* Scale: n EVDs on the default pollers, round-robin producer          */

struct bench_scale {
	u32 nevds;
	bool floor;
	u32 made;
	struct kevd **evds;
	struct ib_cq **cqs;
	struct bench_run *r;
	struct bench_sample last;	/* the last repetition's counts */
	u32 qlen;
};

/*
 * @n EVDs (kevd-single on the default pollers), or with @floor @n plain
 * CQs that one floor thread polls round robin: what touching @n CQs costs
 * without kevd, for comparison. Idle between its repetitions: armed, on
 * no run list. Raw line: what each EVD holds once created.
 */
static int bench_scale_setup(struct bench_scale *sc, u32 n, bool floor)
{
	struct ib_cq_init_attr attr = { .cqe = bench_scale_qlen };
	struct kevd_param p;
	int ret;

	memset(sc, 0, sizeof(*sc));
	sc->nevds = n;
	sc->floor = floor;
	sc->qlen = bench_scale_qlen;
	sc->r = kzalloc(sizeof(*sc->r), GFP_KERNEL);
	sc->evds = kvcalloc(n, sizeof(*sc->evds), GFP_KERNEL);
	sc->cqs = kvcalloc(n, sizeof(*sc->cqs), GFP_KERNEL);
	if (!sc->r || !sc->evds || !sc->cqs)
		return -ENOMEM;
	for (; sc->made < n && floor; sc->made++) {
		sc->cqs[sc->made] = ib_create_cq(bs->ibdev, bench_nop_handler,
						 NULL, sc->r, &attr);
		if (IS_ERR(sc->cqs[sc->made]))
			return PTR_ERR(sc->cqs[sc->made]);
	}
	for (; sc->made < n; sc->made++) {
		sc->evds[sc->made] = bench_kevd_create(sc->r, bs->ibdev,
						       KEVD_UPCALL_SINGLE_INSTANCE,
						       bench_scale_qlen, KEVD_ANY);
		if (IS_ERR(sc->evds[sc->made]))
			return PTR_ERR(sc->evds[sc->made]);
		sc->cqs[sc->made] = kevd_cq(sc->evds[sc->made]);
	}
	if (floor)
		return 0;
	ret = kevd_query(sc->evds[n - 1], &p);
	if (ret)
		return ret;
	sc->qlen = p.qlen;
	if (!bench_smoke_mode)
		pr_info("kevd-bench-raw scale-set kind=kevd n=%u qlen=%u mem_bytes=%zu ring_bytes=%zu\n",
			n, p.qlen, p.mem_bytes,
			(size_t)p.qlen * sizeof(struct kevd_event));
	return 0;
}

static void bench_scale_teardown(struct bench_scale *sc)
{
	while (sc->evds && sc->made--) {
		int err = 0;

		if (sc->floor)
			ib_destroy_cq(sc->cqs[sc->made]);
		else
			err = kevd_free(sc->evds[sc->made]);
		if (err)
			pr_err("kevd-bench: kevd_free: %d\n", err);
	}
	kvfree(sc->cqs);
	kvfree(sc->evds);
	kfree(sc->r);
	sc->cqs = NULL;
	sc->evds = NULL;
	sc->r = NULL;
}

static u64 bench_scale_notifications(struct bench_scale *sc)
{
	struct fake_cq_stats st;
	u64 sum = 0;
	u32 i;

	for (i = 0; i < sc->nevds; i++) {
		fake_cq_stats(sc->cqs[i], &st);
		sum += st.notifications;
	}
	return sum;
}

/* Repetition @rep of a set made by bench_scale_setup(); its raw line. */
static int bench_scale_rep(struct bench_scale *sc, u32 rep, u32 max_events,
			   u32 ms)
{
	struct bench_run *r = sc->r;
	struct bench_sample *s = &sc->last;
	u64 n0;
	int ret;

	n0 = bench_scale_notifications(sc);
	bench_run_init(r, sc->floor ? &bench_floor_ops : NULL, 0, max_events,
		       ms);
	r->cqs = sc->cqs;
	r->ncqs = sc->nevds;
	r->per_cq_room = true;
	r->room = max(sc->qlen, 2u) - 1;
	if (sc->floor) {
		ret = bench_consumer_thread(r, bench_floor_thread,
					    "kevd_bench_floor");
		if (ret)
			return ret;
	}
	ret = bench_go(r, s);
	bench_stop_consumer(r);
	if (!ret && !bench_check(r, s))
		ret = -EIO;
	if (ret || bench_smoke_mode)
		return ret;
	pr_info("kevd-bench-raw scale kind=%s n=%u rep=%u events=%u wall_ns=%llu busy_ns=%llu prod_ns=%llu notif=%llu\n",
		sc->floor ? "floor" : "kevd", sc->nevds, rep, s->produced,
		s->wall_ns, s->busy_ns, s->prod_ns,
		bench_scale_notifications(sc) - n0);
	return 0;
}

/*
 * Scale: the sets of every size exist together, and each repetition runs
 * every set once, smallest first, so that the host's slow and fast phases
 * fall on all sizes alike (the host compares each repetition's rate to
 * the first size's run just before it).
 */
int bench_scale_all(const uint *sizes, u32 nsc, bool floor, u32 nreps,
		    u32 max_events, u32 ms)
{
	struct bench_scale *sc;
	u32 i, rep;
	int ret = 0;

	sc = kcalloc(nsc, sizeof(*sc), GFP_KERNEL);
	if (!sc)
		return -ENOMEM;
	for (i = 0; i < nsc && !ret; i++)
		ret = bench_scale_setup(&sc[i], sizes[i], floor);
	for (rep = 0; rep < nreps && !ret; rep++)
		for (i = 0; i < nsc && !ret; i++)
			ret = bench_scale_rep(&sc[i], rep, max_events, ms);
	for (i = 0; i < nsc; i++)
		bench_scale_teardown(&sc[i]);
	kfree(sc);
	return ret;
}

/* Smoke: @n EVDs once; @s: the counts of the run. */
int bench_scale_smoke(u32 n, u32 max_events, struct bench_sample *s)
{
	struct bench_scale *sc;
	int ret;

	sc = kzalloc(sizeof(*sc), GFP_KERNEL);
	ret = sc ? bench_scale_setup(sc, n, false) : -ENOMEM;
	ret = ret ?: bench_scale_rep(sc, 0, max_events, 60000);
	memset(s, 0, sizeof(*s));
	if (sc) {
		*s = sc->last;
		bench_scale_teardown(sc);
	}
	kfree(sc);
	return ret;
}
