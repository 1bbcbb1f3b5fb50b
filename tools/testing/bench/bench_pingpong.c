// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench's ping-pong on rdma_dev (only=pingpong): the message pattern
 * of uDAPL's dtest ("Message PingPong", kevd-test udapl) through kevd.
 * One loopback RC connection (kevd_rc); each side has its own EVD for
 * its send and receive completions. Side 0 sends a 64-byte message, side
 * 1 takes the receive and sends it back; pingpong_msgs round trips. As
 * dtest, each side posts its next receive before it sends, sends are
 * signalled (their completions are skipped), and the one-way latency is
 * the total time over twice the round trips. Three ways to take events:
 *
 *   wait:   a thread per side, kevd_wait() (upcalls disabled);
 *   batch:  a thread per side, kevd_wait_batch() for up to 16;
 *   upcall: SINGLE_INSTANCE upcalls answer from the poller.
 *
 * One line per run: kevd-bench-pingpong dev= mode= msgs= len= rep=
 * total_ns= latency_ns= (one way). Errors (a failed completion, a post
 * that fails, a side that does not finish) fail the run.
 */
#include <linux/kthread.h>
#include <linux/slab.h>
#include "bench.h"

#define PP_LEN		64
#define PP_BATCH	16
#define PP_WAIT_US	(10 * USEC_PER_SEC)

static uint pingpong_msgs = 100;
module_param(pingpong_msgs, uint, 0444);
MODULE_PARM_DESC(pingpong_msgs, "round trips of a ping-pong run on rdma_dev (dtest's 100)");

enum pp_mode { PP_WAIT, PP_BATCH_WAIT, PP_UPCALL, PP_NR_MODES };

static const char *const pp_mode_names[PP_NR_MODES] = {
	"wait", "batch", "upcall",
};

struct pp;

struct pp_side {
	struct pp *pp;
	int i;
	struct kevd *evd;
	u8 *buf;		/* receive at 0, send at PP_LEN */
	u64 dma;
	u32 got;		/* receives taken */
	struct task_struct *t;
	struct kevd_event evs[PP_BATCH];	/* the thread's (not on its stack) */
};

struct pp {
	struct kevd_rc rc;
	struct pp_side side[2];
	enum pp_mode mode;
	u32 n;
	atomic_t errors;
	atomic_t finished;	/* sides done with their n receives */
	struct completion done;
	u64 t0;
	u64 t1;
};

static int pp_post_recv(struct pp_side *s)
{
	struct ib_sge sge = {
		.addr = s->dma,
		.length = PP_LEN,
		.lkey = s->pp->rc.pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(s->pp->rc.qp[s->i], &wr, NULL);
}

static int pp_post_send(struct pp_side *s)
{
	struct ib_sge sge = {
		.addr = s->dma + PP_LEN,
		.length = PP_LEN,
		.lkey = s->pp->rc.pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_id = 2,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};

	return ib_post_send(s->pp->rc.qp[s->i], &wr, NULL);
}

/* A side took its last receive: the run ends when both have. */
static void pp_side_done(struct pp_side *s)
{
	if (!s->i)
		s->pp->t1 = ktime_get_ns();
	if (atomic_inc_return(&s->pp->finished) == 2)
		complete(&s->pp->done);
}

/*
 * One event of side @s: a receive is answered (side 1) or starts the
 * next round trip (side 0); a send's completion is skipped.
 */
static void pp_event(struct pp_side *s, const struct kevd_event *ev)
{
	struct pp *pp = s->pp;
	int ret = 0;

	if (ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
	    ev->dto.status != KEVD_DTO_SUCCESS) {
		atomic_inc(&pp->errors);
		return;
	}
	if (ev->dto.operation != KEVD_DTO_RECEIVE)
		return;
	if (++s->got < pp->n)
		ret = pp_post_recv(s);
	if (!ret && (s->i || s->got < pp->n))
		ret = pp_post_send(s);
	if (ret)
		atomic_inc(&pp->errors);
	if (s->got == pp->n)
		pp_side_done(s);
}

static void pp_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	pp_event(ctx, ev);
}

static int pp_thread(void *data)
{
	struct pp_side *s = data;
	struct kevd_event *evs = s->evs;
	u32 nmore;
	int n, k;

	while (s->got < s->pp->n && !atomic_read(&s->pp->errors)) {
		if (s->pp->mode == PP_WAIT) {
			n = kevd_wait(s->evd, PP_WAIT_US, 1, evs, &nmore);
			n = n ?: 1;
		} else {
			n = kevd_wait_batch(s->evd, PP_WAIT_US, 1, evs,
					    PP_BATCH, &nmore);
		}
		if (n < 0) {
			atomic_inc(&s->pp->errors);
			break;
		}
		for (k = 0; k < n; k++)
			pp_event(s, &evs[k]);
	}
	if (s->got < s->pp->n)	/* an error: let the run end */
		pp_side_done(s);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ);
	return 0;
}

static void pp_free(struct pp *pp)
{
	struct ib_device *dev = pp->rc.dev;
	struct pp_side *s;
	int i;

	for (i = 0; i < 2; i++) {
		s = &pp->side[i];
		if (s->t) {
			kthread_stop(s->t);
			put_task_struct(s->t);
		}
	}
	kevd_rc_destroy(&pp->rc);
	for (i = 0; i < 2; i++) {
		s = &pp->side[i];
		if (!IS_ERR_OR_NULL(s->evd)) {
			kevd_modify_upcall(s->evd, KEVD_UPCALL_TEARDOWN, NULL,
					   0);
			kevd_free(s->evd);
		}
		if (s->dma)
			ib_dma_unmap_single(dev, s->dma, PAGE_SIZE,
					    DMA_BIDIRECTIONAL);
		if (s->buf)
			free_pages_exact(s->buf, PAGE_SIZE);
	}
	kfree(pp);
}

static int pp_side_init(struct pp *pp, int i, struct ib_device *dev)
{
	struct pp_side *s = &pp->side[i];
	struct ib_qp_init_attr *init = &pp->rc.init[i];
	struct kevd_attr attr;

	s->pp = pp;
	s->i = i;
	s->buf = kevd_rc_buf_alloc(PAGE_SIZE);
	if (!s->buf)
		return -ENOMEM;
	s->dma = ib_dma_map_single(dev, s->buf, PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(dev, s->dma)) {
		s->dma = 0;
		return -EIO;
	}
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG;
	attr.qlen = 64;
	attr.upcall_policy = pp->mode == PP_UPCALL ?
		KEVD_UPCALL_SINGLE_INSTANCE : KEVD_UPCALL_DISABLE;
	attr.upcall.func = pp_upcall;
	attr.upcall.ctx = s;
	s->evd = kevd_create(dev, &attr);
	if (IS_ERR(s->evd))
		return PTR_ERR(s->evd);
	init->send_cq = kevd_cq(s->evd);
	init->recv_cq = kevd_cq(s->evd);
	init->cap.max_send_wr = 4;
	init->cap.max_recv_wr = 4;
	init->cap.max_send_sge = 1;
	init->cap.max_recv_sge = 1;
	init->sq_sig_type = IB_SIGNAL_ALL_WR;
	init->qp_type = IB_QPT_RC;
	return 0;
}

/*
 * One ping-pong run of @n round trips; *@total_ns: from the first send to
 * the last receive; *@got: the receives both sides took (2 * @n).
 */
static int pp_run(struct ib_device *dev, struct ib_pd *pd, enum pp_mode mode,
		  u32 n, u64 *total_ns, u32 *got)
{
	struct pp *pp;
	int ret = 0, i;

	pp = kzalloc(sizeof(*pp), GFP_KERNEL);
	if (!pp)
		return -ENOMEM;
	pp->mode = mode;
	pp->n = n;
	init_completion(&pp->done);
	pp->rc.dev = dev;
	pp->rc.pd = pd;
	pp->rc.addr = bench_rdma_addr;
	pp->rc.port = bench_rdma_port;
	for (i = 0; i < 2 && !ret; i++)
		ret = pp_side_init(pp, i, dev);
	ret = ret ?: kevd_rc_connect(&pp->rc);
	for (i = 0; i < 2 && !ret; i++)
		ret = pp_post_recv(&pp->side[i]);
	for (i = 0; i < 2 && !ret && mode != PP_UPCALL; i++) {
		pp->side[i].t = bench_thread(pp_thread, &pp->side[i],
					     i ? bs->pcpu : bs->ccpu,
					     "kevd_bench_pp");
		if (IS_ERR(pp->side[i].t)) {
			ret = PTR_ERR(pp->side[i].t);
			pp->side[i].t = NULL;
		} else {
			wake_up_process(pp->side[i].t);
		}
	}
	if (!ret) {
		pp->t0 = ktime_get_ns();
		ret = pp_post_send(&pp->side[0]);
	}
	if (!ret && !wait_for_completion_timeout(&pp->done, 60 * HZ))
		ret = -ETIMEDOUT;
	if (!ret && atomic_read(&pp->errors))
		ret = -EIO;
	*total_ns = pp->t1 - pp->t0;
	*got = pp->side[0].got + pp->side[1].got;
	if (pp->rc.qp[0]) {
		kevd_rc_disconnect(&pp->rc);
		kevd_rc_wait_disconnected(&pp->rc, 30 * HZ);
	}
	pp_free(pp);
	return ret;
}

/* bench_selected("pingpong"): every way of taking events, reps times. */
int bench_pingpong_all(struct ib_device *dev, struct ib_pd *pd)
{
	u64 total;
	int rep, m, ret;
	u32 got;

	if (!pingpong_msgs)
		return -EINVAL;
	for (rep = 0; rep < bench_reps; rep++) {
		for (m = 0; m < PP_NR_MODES; m++) {
			ret = pp_run(dev, pd, m, pingpong_msgs, &total, &got);
			if (ret) {
				pr_err("kevd-bench: ping-pong %s on %s: error %d\n",
				       pp_mode_names[m], bench_rdma_dev, ret);
				return ret;
			}
			pr_info("kevd-bench-pingpong dev=%s mode=%s msgs=%u len=%u rep=%d total_ns=%llu latency_ns=%llu\n",
				bench_rdma_dev, pp_mode_names[m], pingpong_msgs,
				PP_LEN, rep, total,
				div_u64(total, 2 * pingpong_msgs));
		}
	}
	return 0;
}

/*
 * make check's smoke: each way once, 20 round trips, through @result
 * (mode rdma-pingpong-<way>): every message must arrive. Return: the
 * failures.
 */
int bench_pingpong_smoke(struct ib_device *dev, struct ib_pd *pd,
			 int (*result)(const char *mode, const char *dev,
				       int ret, const struct bench_sample *s,
				       u32 want))
{
	struct bench_sample s;
	int m, ret, fails = 0;
	char name[32];
	u64 total;
	u32 got;

	for (m = 0; m < PP_NR_MODES; m++) {
		got = 0;
		ret = pp_run(dev, pd, m, 20, &total, &got);
		memset(&s, 0, sizeof(s));
		s.produced = 2 * 20;
		s.delivered = got;
		if (!ret && got != s.produced)
			ret = -EIO;
		snprintf(name, sizeof(name), "rdma-pingpong-%s",
			 pp_mode_names[m]);
		fails += result(name, bench_rdma_dev, ret, &s, s.produced);
	}
	return fails;
}
