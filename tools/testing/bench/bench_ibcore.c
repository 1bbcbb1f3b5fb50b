// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench's modes without kevd: ib_core's poll contexts (wq,
 * unbound-wq, softirq), the 2006 kDAPL style (kdapl-2006) and a poll loop
 * (floor). See bench.h.
 */
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include "bench.h"

/* ------------------------------------------------------------------ */
/* ib_core poll contexts: each completion goes to wr_cqe->done         */

static void bench_ib_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		atomic_inc(&((struct bench_run *)cq->cq_context)->bad);
		return;
	}
	bench_consume(cq->cq_context, wc->byte_len);
}

static int bench_ib_init(struct bench_run *r, struct ib_device *dev,
			 enum ib_poll_context ctx)
{
	struct ib_cq *cq = ib_alloc_cq(dev, r, r->room, 0, ctx);

	if (IS_ERR(cq))
		return PTR_ERR(cq);
	r->cq = cq;
	r->cqe.done = bench_ib_done;
	return 0;
}

static int bench_wq_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_ib_init(r, dev, IB_POLL_WORKQUEUE);
}

static int bench_unbound_wq_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_ib_init(r, dev, IB_POLL_UNBOUND_WORKQUEUE);
}

static int bench_softirq_init(struct bench_run *r, struct ib_device *dev)
{
	return bench_ib_init(r, dev, IB_POLL_SOFTIRQ);
}

static void bench_ib_cleanup(struct bench_run *r)
{
	if (r->cq)
		ib_free_cq(r->cq);
	r->cq = NULL;
}

/* One consumer call per event; kdapl-2006's too. */
static void bench_ib_counters(struct bench_run *r, struct bench_sample *s)
{
	s->upcalls = s->delivered;
}

const struct bench_ops bench_wq_ops = {
	.name		= "wq",
	.init		= bench_wq_init,
	.cleanup	= bench_ib_cleanup,
	.counters	= bench_ib_counters,
	.ib_cqe		= true,
};

const struct bench_ops bench_unbound_wq_ops = {
	.name		= "unbound-wq",
	.init		= bench_unbound_wq_init,
	.cleanup	= bench_ib_cleanup,
	.counters	= bench_ib_counters,
	.ib_cqe		= true,
};

const struct bench_ops bench_softirq_ops = {
	.name		= "softirq",
	.init		= bench_softirq_init,
	.cleanup	= bench_ib_cleanup,
	.counters	= bench_ib_counters,
	.ib_cqe		= true,
};

/* ------------------------------------------------------------------ */
/* The 2006 kDAPL style: arm, poll one, call the consumer, repeat      */

static void bench_2006_handler(struct ib_cq *cq, void *ctx)
{
	struct kevd_event ev;
	struct ib_wc wc;

	for (;;) {
		ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
		if (ib_poll_cq(cq, 1, &wc) != 1)
			break;
		kevd_wc_to_event(&wc, &ev);
		bench_consume_event(ctx, &ev);
	}
}

static int bench_create_cq(struct bench_run *r, struct ib_device *dev,
			   ib_comp_handler handler)
{
	struct ib_cq_init_attr attr = { .cqe = r->room };
	struct ib_cq *cq = ib_create_cq(dev, handler, NULL, r, &attr);

	if (IS_ERR(cq))
		return PTR_ERR(cq);
	r->cq = cq;
	return 0;
}

static int bench_2006_init(struct bench_run *r, struct ib_device *dev)
{
	int ret = bench_create_cq(r, dev, bench_2006_handler);

	if (!ret)
		ib_req_notify_cq(r->cq, IB_CQ_NEXT_COMP);
	return ret;
}

static void bench_destroy_cq(struct bench_run *r)
{
	if (r->cq)
		ib_destroy_cq(r->cq);
	r->cq = NULL;
}

const struct bench_ops bench_kdapl2006_ops = {
	.name		= "kdapl-2006",
	.init		= bench_2006_init,
	.cleanup	= bench_destroy_cq,
	.counters	= bench_ib_counters,
	.in_fill	= true,
};

/* ------------------------------------------------------------------ */
/* The floor: poll in batches, convert, consume                        */

void bench_nop_handler(struct ib_cq *cq, void *ctx)
{
}

int bench_floor_thread(void *data)
{
	struct bench_run *r = data;
	struct ib_wc *wcs;
	struct ib_cq *cq;
	u32 k = 0;

	/* Round robin over the run's CQs; idle after a pass found nothing. */
	wcs = kcalloc(BENCH_BATCH, sizeof(*wcs), GFP_KERNEL);
	while (wcs && !READ_ONCE(r->stop) && !kthread_should_stop()) {
		cq = r->cqs[k];
		if (++k == r->ncqs)
			k = 0;
		if ((r->rdma || !fake_cq_empty(cq)) &&
		    bench_floor_poll(r, cq, wcs))
			continue;
		if (k)
			continue;
		if (bs->shared)
			usleep_range(10, 20);
		else
			bench_spin();
	}
	kfree(wcs);
	bench_park();
	return 0;
}

static int bench_floor_init(struct bench_run *r, struct ib_device *dev)
{
	int ret = bench_create_cq(r, dev, bench_nop_handler);

	return ret ?: bench_consumer_thread(r, bench_floor_thread,
					    "kevd_bench_floor");
}

/* Nothing notifies and nothing is armed: its zeros count, on rdma_dev too. */
const struct bench_ops bench_floor_ops = {
	.name		= "floor",
	.init		= bench_floor_init,
	.cleanup	= bench_destroy_cq,
	.rdma_counted	= true,
};
