// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench on rdma_dev: every mode over a real provider (siw loopback).
 * See bench.h.
 *
 * One PD and buffer; a run connects a loopback RC pair whose side 0 sends
 * to the mode's CQ. A work request is a signalled 8-byte RDMA WRITE from
 * side 0 into the buffer; wrs[] carries the sequence numbers of the
 * ib_core modes' work requests, one per send queue slot. The WRITE's
 * target is the buffer's second cache line, in an MR registered for
 * remote writes (FRWR: IB_WR_REG_MR on side 1 of the first connected
 * pair, its completion on the sink CQ); the MR belongs to the PD and
 * stays valid for the pairs that follow.
 */
#include <linux/delay.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include "bench.h"

struct bench_wr {
	struct ib_cqe cqe;
	u32 seq;
};

struct bench_rdma {
	struct ib_device *dev;
	struct ib_pd *pd;
	u8 *buf;
	u64 dma;
	struct ib_mr *mr;	/* the buffer, for remote writes */
	bool mr_valid;		/* registered (bench_rdma_reg_mr()) */
	struct bench_wr *wrs;
	struct ib_cq *sink;	/* side 1's CQ: only the REG_MR completes there */
};

static void bench_rdma_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct bench_wr *w = container_of(wc->wr_cqe, struct bench_wr, cqe);

	if (wc->status != IB_WC_SUCCESS) {
		atomic_inc(&((struct bench_run *)cq->cq_context)->bad);
		return;
	}
	bench_consume(cq->cq_context, w->seq);
}

/* Post the WRITE of sequence number @seq, stamped in latency runs. */
int bench_rdma_post(struct bench_run *r, u32 seq)
{
	struct bench_rdma *br = bs->rdma;
	struct bench_wr *w = &br->wrs[seq % r->room];
	struct ib_sge sge = {
		.addr = br->dma,
		.length = 8,
		.lkey = br->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = br->mr->iova + L1_CACHE_BYTES,
		.rkey = br->mr->rkey,
	};

	if (r->ops->ib_cqe) {
		w->seq = seq;
		w->cqe.done = bench_rdma_done;
		wr.wr.wr_cqe = &w->cqe;
	} else {
		wr.wr.wr_id = seq;
	}
	if (r->lat)
		r->ts[seq] = ktime_get_ns();
	return ib_post_send(r->rc.qp[0], &wr.wr, NULL);
}

/*
 * Register br->mr (mapped by bench_rdma_create()) through @qp, side 1 of
 * a connected pair, whose CQ is the sink: post IB_WR_REG_MR and poll the
 * sink for its completion.
 */
static int bench_rdma_reg_mr(struct bench_rdma *br, struct ib_qp *qp)
{
	struct ib_reg_wr wr = {
		.wr = {
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.mr = br->mr,
		.key = br->mr->rkey,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE,
	};
	struct ib_wc wc;
	int i, ret;

	ret = ib_post_send(qp, &wr.wr, NULL);
	if (ret)
		return ret;
	for (i = 0; i < 5000; i++) {
		if (ib_poll_cq(br->sink, 1, &wc) == 1) {
			if (wc.status != IB_WC_SUCCESS) {
				pr_err("kevd-bench: REG_MR on %s: status %d\n",
				       bench_rdma_dev, wc.status);
				return -EIO;
			}
			br->mr_valid = true;
			return 0;
		}
		usleep_range(1000, 2000);
	}
	return -ETIMEDOUT;
}

/*
 * One run on rdma_dev: the mode's CQ (or EVD) is side 0's CQ of a fresh
 * loopback RC pair (a QP's CQs are fixed when it is made); the producer
 * posts WRITEs on side 0. Teardown: QPs to error (nothing is in flight
 * once every event was delivered), disconnected, destroyed, then the CQ.
 */
static int bench_rdma_one(const struct bench_ops *ops, u32 rate,
			  u32 max_events, u32 ms, struct bench_sample *s)
{
	struct bench_rdma *br = bs->rdma;
	struct ib_qp_init_attr *init;
	struct bench_run *r;
	int ret, i;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, ops, rate, max_events, ms);
	r->rdma = true;
	r->room = bench_rdma_depth;
	ret = ops->init(r, br->dev);
	if (ret)
		goto out;
	r->rc.dev = br->dev;
	r->rc.pd = br->pd;
	r->rc.addr = bench_rdma_addr;
	r->rc.port = bench_rdma_port;
	for (i = 0; i < 2; i++) {
		init = &r->rc.init[i];
		init->send_cq = i ? br->sink : r->cq;
		init->recv_cq = i ? br->sink : r->cq;
		init->cap.max_send_wr = r->room;
		init->cap.max_recv_wr = 1;
		init->cap.max_send_sge = 1;
		init->cap.max_recv_sge = 1;
		init->sq_sig_type = IB_SIGNAL_ALL_WR;
		init->qp_type = IB_QPT_RC;
	}
	ret = kevd_rc_connect(&r->rc);
	if (ret) {
		bench_stop_consumer(r);
		goto out_rc;
	}
	if (!br->mr_valid)
		ret = bench_rdma_reg_mr(br, r->rc.qp[1]);
	if (!ret)
		ret = bench_go_one(r, s);
	kevd_rc_disconnect(&r->rc);
	ret = kevd_rc_wait_disconnected(&r->rc, 30 * HZ) ?: ret;
out_rc:
	kevd_rc_destroy(&r->rc);
out:
	bench_stop_consumer(r);
	ops->cleanup(r);
	kfree(r);
	return ret;
}

/* Every selected mode on rdma_dev: saturated, then at rdma_rate. */
int bench_rdma_all(void)
{
	const struct bench_ops *ops;
	struct bench_sample *s;
	int ri, rep, ret = 0;
	u32 rate;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	pr_info("kevd-bench-rdma dev=%s kernel=%s depth=%u events<=%u run_ms=%u reps=%u rate=%u rate_ms=%u\n",
		bench_rdma_dev, bench_kernel, bench_rdma_depth,
		bench_rdma_events, bench_run_ms, bench_reps, bench_rdma_rate,
		bench_rdma_lat_ms);
	for_each_bench_mode(ops) {
		if (!bench_selected(ops->name))
			continue;
		for (ri = 0; ri < 2; ri++) {
			rate = ri ? bench_rdma_rate : 0;
			for (rep = 0; rep < bench_reps; rep++) {
				ret = bench_rdma_one(ops, rate,
						     bench_rdma_events,
						     ri ? bench_rdma_lat_ms :
							  bench_run_ms, s);
				if (ret) {
					pr_err("kevd-bench: %s on %s: error %d\n",
					       ops->name, bench_rdma_dev, ret);
					goto out;
				}
				bench_print_run(bench_rdma_dev, ops, rate, rep,
						s);
			}
		}
	}
	pr_info("kevd-bench-raw end=rdma\n");
out:
	kfree(s);
	return ret;
}

/* The ping-pong (bench_pingpong.c) on rdma_dev, in bench_rdma_create()'s PD. */
int bench_rdma_pingpong(void)
{
	return bench_pingpong_all(bs->rdma->dev, bs->rdma->pd);
}

void bench_rdma_destroy(void)
{
	struct bench_rdma *br = bs->rdma;

	if (!br)
		return;
	if (!IS_ERR_OR_NULL(br->sink))
		ib_free_cq(br->sink);
	if (br->buf && br->dma)
		ib_dma_unmap_single(br->dev, br->dma, PAGE_SIZE,
				    DMA_BIDIRECTIONAL);
	if (!IS_ERR_OR_NULL(br->mr))
		ib_dereg_mr(br->mr);
	if (br->buf)
		free_pages_exact(br->buf, PAGE_SIZE);
	kfree(br->wrs);
	if (!IS_ERR_OR_NULL(br->pd))
		ib_dealloc_pd(br->pd);
	if (br->dev)
		ib_device_put(br->dev);
	kfree(br);
	bs->rdma = NULL;
}

/* An MR of one page for the buffer: allocated and mapped, not yet valid. */
static int bench_rdma_map_mr(struct bench_rdma *br)
{
	struct scatterlist sg;

	br->mr = ib_alloc_mr(br->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(br->mr))
		return PTR_ERR(br->mr);
	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = br->dma;
	sg_dma_len(&sg) = PAGE_SIZE;
	if (ib_map_mr_sg(br->mr, &sg, 1, NULL, PAGE_SIZE) != 1)
		return -EIO;
	return 0;
}

int bench_rdma_create(void)
{
	struct bench_rdma *br;
	int ret = -ENOMEM;

	br = kzalloc(sizeof(*br), GFP_KERNEL);
	if (!br)
		return -ENOMEM;
	br->dev = ib_device_get_by_name(bench_rdma_dev, RDMA_DRIVER_UNKNOWN);
	if (!br->dev) {
		pr_err("kevd-bench: no RDMA device %s\n", bench_rdma_dev);
		kfree(br);
		return -ENODEV;
	}
	bs->rdma = br;
	br->wrs = kcalloc(bench_rdma_depth, sizeof(*br->wrs), GFP_KERNEL);
	br->buf = kevd_rc_buf_alloc(PAGE_SIZE);
	if (!br->wrs || !br->buf)
		goto fail;
	br->pd = ib_alloc_pd(br->dev, 0);
	if (IS_ERR(br->pd)) {
		ret = PTR_ERR(br->pd);
		goto fail;
	}
	br->dma = ib_dma_map_single(br->dev, br->buf, PAGE_SIZE,
				    DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(br->dev, br->dma)) {
		br->dma = 0;
		ret = -EIO;
		goto fail;
	}
	ret = bench_rdma_map_mr(br);
	if (ret)
		goto fail;
	br->sink = ib_alloc_cq(br->dev, NULL, 2, 0, IB_POLL_DIRECT);
	if (IS_ERR(br->sink)) {
		ret = PTR_ERR(br->sink);
		goto fail;
	}
	return 0;
fail:
	bench_rdma_destroy();
	return ret;
}

/* Every mode once on rdma_dev: counts only. Return: the failures. */
int bench_rdma_smoke(int (*result)(const char *mode, const char *dev,
				   int ret, const struct bench_sample *s,
				   u32 want))
{
	const struct bench_ops *ops;
	struct bench_sample s;
	int ret, fails = 0;
	char name[32];

	ret = bench_rdma_create();
	if (ret) {
		pr_info("kevd-bench-smoke mode=rdma-device dev=%s FAIL\n",
			bench_rdma_dev);
		return 1;
	}
	for_each_bench_mode(ops) {
		memset(&s, 0, sizeof(s));
		ret = bench_rdma_one(ops, 0, bench_rdma_smoke_events, 60000,
				     &s);
		snprintf(name, sizeof(name), "rdma-%s", ops->name);
		fails += result(name, bench_rdma_dev, ret, &s,
				bench_rdma_smoke_events);
	}
	fails += bench_pingpong_smoke(bs->rdma->dev, bs->rdma->pd, result);
	bench_rdma_destroy();
	return fails;
}
