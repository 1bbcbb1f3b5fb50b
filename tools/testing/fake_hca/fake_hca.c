// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The fake HCA (see fake_hca.h).
 *
 * Locking: fcq->lock (irqsave) guards the queue, the armed state, the
 * moderation and the counters. The completion and event handlers are called without it, as
 * real drivers do, so a handler may add CQEs or arm again.
 */
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/swait.h>
#include <linux/wait_bit.h>
#include "fake_hca.h"

struct fake_hca {
	struct ib_device ibdev;
	enum fake_hca_mode mode;
	bool no_resize;		/* resize_cq fails, as siw's (none) */
	int create_error;	/* create_cq fails with it (0: works) */
	int resize_error;	/* resize_cq fails with it (0: works) */
	struct mutex qp_lock;	/* destroy_qp against the SRQ calls' looks */
	atomic_t qps_destroyed;	/* destroy_qp calls (ib_destroy_qp()) */
};

struct fake_cq {
	struct ib_cq ibcq;
	spinlock_t lock;	/* queue, armed state, counters */
	struct ib_wc *q;
	u32 mask;
	u32 head;
	u32 tail;
	enum ib_cq_notify_flags armed;
	fake_cq_arm_hook hook;
	void *hook_ctx;
	atomic_t hooks_running;	/* arm hooks called and not returned */
	fake_cq_poll_hook poll_hook;	/* published after its argument */
	void *poll_hook_ctx;
	atomic_t poll_hooks_running;	/* polls inside the poll hook */
	bool poll_hook_after;		/* at the end of the poll, not the start */
	fake_cq_resize_hook resize_hook;	/* set while nothing resizes */
	void *resize_hook_ctx;
	struct task_struct *firer;
	struct fake_cq_stats st;
	int irq_cpu;		/* -1: notify inline (the default) */
	call_single_data_t csd;	/* the "MSI-X" IPI to irq_cpu */
	atomic_t irq_pending;	/* the IPI is queued, the handler not begun */
	atomic_t irq_inflight;	/* IPIs queued and not finished */
	int comp_vector;	/* as create_cq received it */
	int arm_error;		/* req_notify_cq fails with it (0: works) */
	int poll_error;		/* poll_cq fails with it (0: works) */
	u16 mod_count;		/* modify_cq: completions per notification */
	u16 mod_period;		/* ...or this many µs after the first one */
	u32 mod_pending;	/* completions held back since the arm */
	struct hrtimer mod_timer;	/* the period */
};

/*
 * A QP for the tests of what kevd posts itself (the markers of a drain):
 * query_qp, post_send and post_recv, and modify_qp, which counts the moves
 * to error (the QP is in error from the start). What is posted waits
 * until the test flushes it (fake_qp_flush()), as a provider flushes a QP
 * in error in its own time; or, after fake_qp_flush_on_error(), a move to
 * error flushes it, and so does every post after it. destroy_qp takes
 * ib_destroy_qp() through ib_core's own path.
 */
#define FAKE_QP_MAX_WR	16

struct fake_wq {
	u64 wr_id[FAKE_QP_MAX_WR];
	u32 n;
};

struct fake_qp {
	struct ib_qp ibqp;
	spinlock_t lock;	/* the queues, post_error, posts */
	u32 max_wr;
	struct fake_wq sq;
	struct fake_wq rq;
	int post_error;		/* posts fail with it (0: they work) */
	u32 posts;		/* post calls, failed ones too */
	u32 to_error;		/* modify_qp calls to IB_QPS_ERR */
	bool flush_on_error;	/* fake_qp_flush_on_error() */
	bool in_error;		/* ...and moved to error since */
	bool srq_held;		/* fake_qp_use_srq(): rq until last WQE */
	enum ib_qp_state state;	/* what the query says: ERR unless set */
	struct ib_srq srq;	/* what ibqp.srq points to, then */
};

/* ib_destroy_qp() frees the ib_qp: that frees the fake QP around it */
static_assert(offsetof(struct fake_qp, ibqp) == 0);

static struct fake_qp *to_fqp(struct ib_qp *qp)
{
	return container_of(qp, struct fake_qp, ibqp);
}

static struct fake_cq *to_fcq(struct ib_cq *cq)
{
	return container_of(cq, struct fake_cq, ibcq);
}

static struct fake_hca *to_hca(struct ib_device *dev)
{
	return container_of(dev, struct fake_hca, ibdev);
}

static bool fake_lenient(struct fake_hca *hca)
{
	return hca->mode == FAKE_HCA_LENIENT_REPORT ||
	       hca->mode == FAKE_HCA_LENIENT_IGNORE;
}

static bool fake_reports(struct fake_hca *hca)
{
	return hca->mode == FAKE_HCA_LENIENT_REPORT ||
	       hca->mode == FAKE_HCA_STRICT_REPORT;
}

static void fake_notify_now(struct fake_cq *fcq)
{
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->st.notifications++;
	spin_unlock_irqrestore(&fcq->lock, flags);
	fcq->ibcq.comp_handler(&fcq->ibcq, fcq->ibcq.cq_context);
}

static void fake_irq_fn(void *data)
{
	struct fake_cq *fcq = data;

	atomic_set(&fcq->irq_pending, 0);
	fake_notify_now(fcq);
	atomic_dec(&fcq->irq_inflight);
}

/*
 * A notification of an armed CQ: inline, or, once fake_cq_set_irq_cpu()
 * chose a CPU, as an interrupt on that CPU (an IPI: hard IRQ context on
 * SMP, IRQs off on UP), as an HCA's MSI-X vector would. irq_pending keeps
 * the csd from being queued twice; the handler clears it before it runs,
 * so a notification that comes while it runs queues the IPI again.
 */
static void fake_notify(struct fake_cq *fcq)
{
	int cpu = READ_ONCE(fcq->irq_cpu);

	if (cpu < 0) {
		fake_notify_now(fcq);
		return;
	}
	if (atomic_xchg(&fcq->irq_pending, 1))
		return;
	atomic_inc(&fcq->irq_inflight);
	if (smp_call_function_single_async(cpu, &fcq->csd)) {
		atomic_set(&fcq->irq_pending, 0);
		atomic_dec(&fcq->irq_inflight);
		fake_notify_now(fcq);
	}
}

/*
 * The moderation period ran out (hard IRQ): notify for the completions
 * held back, if the CQ is still armed for them.
 */
static enum hrtimer_restart fake_mod_timer_fn(struct hrtimer *t)
{
	struct fake_cq *fcq = container_of(t, struct fake_cq, mod_timer);
	unsigned long flags;
	bool fire = false;

	spin_lock_irqsave(&fcq->lock, flags);
	if (fcq->armed && fcq->mod_pending) {
		fcq->armed = 0;
		fcq->mod_pending = 0;
		fire = true;
	}
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (fire)
		fake_notify(fcq);
	return HRTIMER_NORESTART;
}

/*
 * As an HCA's CQ moderation: an armed CQ notifies once @cq_count
 * completions it was armed for have come, or @cq_period µs after the
 * first of them, whichever is first. 0 and 1 for the count (with no
 * period) notify for each, as without moderation.
 */
static int fake_modify_cq(struct ib_cq *ibcq, u16 cq_count, u16 cq_period)
{
	struct fake_cq *fcq = to_fcq(ibcq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->mod_count = cq_count;
	fcq->mod_period = cq_period;
	fcq->st.modifies++;
	spin_unlock_irqrestore(&fcq->lock, flags);
	return 0;
}

/*
 * 6.12 passes the uverbs attributes, 6.1 the udata (Kbuild detects
 * which); unused either way.
 */
#ifdef KEVD_CREATE_CQ_TAKES_ATTRS
#define FAKE_CREATE_CQ_ARG	struct uverbs_attr_bundle *attrs
#else
#define FAKE_CREATE_CQ_ARG	struct ib_udata *udata
#endif

static int fake_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			  FAKE_CREATE_CQ_ARG)
{
	struct fake_cq *fcq = to_fcq(ibcq);
	u32 size;

	if (READ_ONCE(to_hca(ibcq->device)->create_error))
		return READ_ONCE(to_hca(ibcq->device)->create_error);
	if (!attr->cqe || attr->cqe > ibcq->device->attrs.max_cqe)
		return -EINVAL;
	size = roundup_pow_of_two(attr->cqe);
	fcq->q = kvcalloc(size, sizeof(*fcq->q), GFP_KERNEL);
	if (!fcq->q)
		return -ENOMEM;
	spin_lock_init(&fcq->lock);
	fcq->irq_cpu = -1;
	INIT_CSD(&fcq->csd, fake_irq_fn, fcq);
	hrtimer_init(&fcq->mod_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	fcq->mod_timer.function = fake_mod_timer_fn;
	fcq->mask = size - 1;
	fcq->comp_vector = attr->comp_vector;
	ibcq->cqe = size;
	return 0;
}

static int fake_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct fake_cq *fcq = to_fcq(ibcq);

	/* As a driver quiesces its interrupt before the CQ goes away. */
	if (fcq->firer)
		kthread_stop(fcq->firer);
	hrtimer_cancel(&fcq->mod_timer);
	/* As a driver synchronises its vector: no IPI in flight. */
	while (atomic_read(&fcq->irq_inflight))
		cpu_relax();
	kvfree(fcq->q);
	return 0;
}

/* Keeps every queued CQE; refuses to shrink below what is queued. */
static int fake_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct fake_cq *fcq = to_fcq(ibcq);
	struct ib_wc *q, *old;
	unsigned long flags;
	u32 size, i;

	if (fcq->resize_hook)
		fcq->resize_hook(ibcq, fcq->resize_hook_ctx);
	if (to_hca(ibcq->device)->no_resize)
		return -EOPNOTSUPP;
	if (READ_ONCE(to_hca(ibcq->device)->resize_error))
		return READ_ONCE(to_hca(ibcq->device)->resize_error);
	if (cqe <= 0 || cqe > ibcq->device->attrs.max_cqe)
		return -EINVAL;
	size = roundup_pow_of_two(cqe);
	q = kvcalloc(size, sizeof(*q), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	spin_lock_irqsave(&fcq->lock, flags);
	if (fcq->tail - fcq->head > size) {
		spin_unlock_irqrestore(&fcq->lock, flags);
		kvfree(q);
		return -EBUSY;
	}
	for (i = fcq->head; i != fcq->tail; i++)
		q[i & (size - 1)] = fcq->q[i & fcq->mask];
	old = fcq->q;
	fcq->q = q;
	fcq->mask = size - 1;
	WRITE_ONCE(ibcq->cqe, size);
	spin_unlock_irqrestore(&fcq->lock, flags);
	kvfree(old);
	return 0;
}

/* A hook counted in @running returned: wake a clear waiting for it. */
static void fake_hook_done(atomic_t *running)
{
	if (atomic_dec_and_test(running))
		wake_up_var(running);
}

/* A clear waits until no hook counted in @running runs. */
static void fake_hooks_wait(atomic_t *running)
{
	might_sleep();
	wait_var_event(running, !atomic_read(running));
}

/*
 * The poll hook, counted as running before the hook is read again: a
 * clear either sees the count or makes that read NULL (full barriers on
 * both sides), and waits until the count is 0.
 */
static void fake_cq_run_poll_hook(struct fake_cq *fcq)
{
	fake_cq_poll_hook hook;

	atomic_inc(&fcq->poll_hooks_running);
	smp_mb__after_atomic();	/* pairs with fake_cq_set_poll_hook()'s */
	hook = smp_load_acquire(&fcq->poll_hook);	/* then its argument */
	if (hook)
		hook(&fcq->ibcq, fcq->poll_hook_ctx);
	fake_hook_done(&fcq->poll_hooks_running);
}

static int fake_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct fake_cq *fcq = to_fcq(ibcq);
	unsigned long flags;
	int n = 0;

	u32 head;

	if (unlikely(READ_ONCE(fcq->poll_hook)) &&
	    !READ_ONCE(fcq->poll_hook_after))
		fake_cq_run_poll_hook(fcq);
	spin_lock_irqsave(&fcq->lock, flags);
	fcq->st.polls++;
	if (fcq->poll_error) {		/* fake_cq_fail_polls(): nothing taken */
		n = fcq->poll_error;
		spin_unlock_irqrestore(&fcq->lock, flags);
		return n;
	}
	head = fcq->head;
	while (n < num && head != fcq->tail)
		wc[n++] = fcq->q[head++ & fcq->mask];
	WRITE_ONCE(fcq->head, head);	/* fake_cq_count() reads it unlocked */
	fcq->st.polled += n;
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (unlikely(READ_ONCE(fcq->poll_hook)) &&
	    READ_ONCE(fcq->poll_hook_after))
		fake_cq_run_poll_hook(fcq);
	return n;
}

static int fake_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags how)
{
	struct fake_hca *hca = to_hca(ibcq->device);
	struct fake_cq *fcq = to_fcq(ibcq);
	fake_cq_arm_hook hook;
	unsigned long flags;
	bool fire = false;
	void *hook_ctx;
	int ret = 0;

	/*
	 * Hook and argument together, counted as running under the lock: a
	 * clear may come in between, and waits for the hook to return.
	 */
	spin_lock_irqsave(&fcq->lock, flags);
	hook = fcq->hook;
	hook_ctx = fcq->hook_ctx;
	if (hook)
		atomic_inc(&fcq->hooks_running);
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (hook) {
		hook(ibcq, hook_ctx);
		fake_hook_done(&fcq->hooks_running);
	}

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->st.arms++;
	if (fcq->arm_error) {		/* fake_cq_fail_arms(): not armed */
		ret = fcq->arm_error;
		spin_unlock_irqrestore(&fcq->lock, flags);
		return ret;
	}
	fcq->armed = how & IB_CQ_SOLICITED_MASK;
	fcq->mod_pending = 0;
	if (fcq->head != fcq->tail) {
		if (fake_lenient(hca)) {
			fcq->armed = 0;
			fire = true;
		}
		if (fake_reports(hca) && (how & IB_CQ_REPORT_MISSED_EVENTS))
			ret = 1;
	}
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (fire)
		fake_notify(fcq);
	return ret;
}

static int fake_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			 int mask, struct ib_qp_init_attr *init)
{
	struct fake_qp *fqp = to_fqp(ibqp);

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = READ_ONCE(fqp->state);
	attr->cap.max_send_wr = fqp->max_wr;
	attr->cap.max_recv_wr = ibqp->srq ? 0 : fqp->max_wr;
	init->cap = attr->cap;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->qp_type = ibqp->qp_type;
	return 0;
}

static int fake_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			  int mask, struct ib_udata *udata)
{
	struct fake_qp *fqp = to_fqp(ibqp);
	unsigned long flags;
	bool flush;

	if (mask != IB_QP_STATE || attr->qp_state != IB_QPS_ERR)
		return -EOPNOTSUPP;
	spin_lock_irqsave(&fqp->lock, flags);
	fqp->to_error++;
	WRITE_ONCE(fqp->state, IB_QPS_ERR);
	flush = fqp->flush_on_error;
	fqp->in_error = flush;
	spin_unlock_irqrestore(&fqp->lock, flags);
	if (flush)
		fake_qp_flush(ibqp);
	return 0;
}

/* A QP in error (fake_qp_flush_on_error()) flushes what is posted to it. */
static void fake_qp_flush_posted(struct fake_qp *fqp)
{
	if (READ_ONCE(fqp->in_error))
		fake_qp_flush(&fqp->ibqp);
}

/*
 * ib_core frees the QP as this returns (ib_destroy_qp_user()), and drops
 * the CQ references that fake_qp_create() never took: take them first.
 */
static int fake_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct fake_hca *hca = container_of(ibqp->device, struct fake_hca,
					    ibdev);

	mutex_lock(&hca->qp_lock);
	atomic_inc(&hca->qps_destroyed);
	mutex_unlock(&hca->qp_lock);
	atomic_inc(&ibqp->send_cq->usecnt);
	atomic_inc(&ibqp->recv_cq->usecnt);
	return 0;
}

/* One WR onto @wq; a full queue refuses it (-ENOMEM, as rxe and siw). */
static int fake_post(struct fake_qp *fqp, struct fake_wq *wq, u64 wr_id)
{
	lockdep_assert_held(&fqp->lock);
	if (fqp->post_error)
		return fqp->post_error;
	if (wq->n == fqp->max_wr)
		return -ENOMEM;
	wq->wr_id[wq->n++] = wr_id;
	return 0;
}

static int fake_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			  const struct ib_send_wr **bad)
{
	struct fake_qp *fqp = to_fqp(ibqp);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&fqp->lock, flags);
	fqp->posts++;
	for (; wr; wr = wr->next) {
		ret = fake_post(fqp, &fqp->sq, wr->wr_id);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	spin_unlock_irqrestore(&fqp->lock, flags);
	if (!ret)
		fake_qp_flush_posted(fqp);
	return ret;
}

static int fake_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad)
{
	struct fake_qp *fqp = to_fqp(ibqp);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&fqp->lock, flags);
	fqp->posts++;
	if (ibqp->srq) {	/* its receives come from the SRQ (rxe, siw) */
		*bad = wr;
		ret = -EINVAL;
	}
	for (; wr && !ret; wr = wr->next) {
		ret = fake_post(fqp, &fqp->rq, wr->wr_id);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	spin_unlock_irqrestore(&fqp->lock, flags);
	if (!ret)
		fake_qp_flush_posted(fqp);
	return ret;
}

static const struct ib_device_ops fake_hca_ops = {
	.owner = THIS_MODULE,
	.uverbs_abi_ver = 1,
	.create_cq = fake_create_cq,
	.destroy_cq = fake_destroy_cq,
	.poll_cq = fake_poll_cq,
	.req_notify_cq = fake_req_notify_cq,
	.resize_cq = fake_resize_cq,
	.modify_cq = fake_modify_cq,
	.query_qp = fake_query_qp,
	.modify_qp = fake_modify_qp,
	.destroy_qp = fake_destroy_qp,
	.post_send = fake_post_send,
	.post_recv = fake_post_recv,
	INIT_RDMA_OBJ_SIZE(ib_cq, fake_cq, ibcq),
};

/**
 * fake_hca_set_no_resize() - make resize_cq fail with -EOPNOTSUPP.
 * @hca: the device.
 * @no_resize: true: as a provider without resize_cq (siw).
 */
void fake_hca_set_no_resize(struct fake_hca *hca, bool no_resize)
{
	hca->no_resize = no_resize;
}
EXPORT_SYMBOL_GPL(fake_hca_set_no_resize);

/**
 * fake_hca_set_max_cqe() - the largest CQ the device creates or resizes to.
 * @hca: the device, before its first CQ.
 * @max_cqe: 1 .. FAKE_MAX_CQE (the default); above, create_cq and
 *	resize_cq fail with -EINVAL, as rxe's (32767).
 */
void fake_hca_set_max_cqe(struct fake_hca *hca, int max_cqe)
{
	hca->ibdev.attrs.max_cqe = clamp_t(int, max_cqe, 1, FAKE_MAX_CQE);
}
EXPORT_SYMBOL_GPL(fake_hca_set_max_cqe);

/**
 * fake_hca_fail_create_cq() - make create_cq fail, as a provider may.
 * @hca: the device.
 * @err: the negative errno create_cq returns; 0: it works again.
 */
void fake_hca_fail_create_cq(struct fake_hca *hca, int err)
{
	WRITE_ONCE(hca->create_error, err);
}
EXPORT_SYMBOL_GPL(fake_hca_fail_create_cq);

/**
 * fake_hca_fail_resize_cq() - make resize_cq fail, as a provider may.
 * @hca: the device.
 * @err: the negative errno resize_cq returns; 0: it works again.
 */
void fake_hca_fail_resize_cq(struct fake_hca *hca, int err)
{
	WRITE_ONCE(hca->resize_error, err);
}
EXPORT_SYMBOL_GPL(fake_hca_fail_resize_cq);

/**
 * fake_hca_create() - a fake device.
 * @mode: how its CQs notify.
 *
 * Context: process context.
 * Return: the device, or ERR_PTR(-ENOMEM).
 */
struct fake_hca *fake_hca_create(enum fake_hca_mode mode)
{
	struct fake_hca *hca;

	hca = ib_alloc_device(fake_hca, ibdev);
	if (!hca)
		return ERR_PTR(-ENOMEM);
	hca->mode = mode;
	mutex_init(&hca->qp_lock);
	hca->ibdev.num_comp_vectors = 4;	/* comp_vector must reach the CQ */
	hca->ibdev.phys_port_cnt = 1;
	hca->ibdev.attrs.max_cqe = FAKE_MAX_CQE;
	/*
	 * ib_modify_qp() reads the capabilities of the QP's port (0 here):
	 * none, zeroed. The device is never registered, which would make
	 * them; fake_hca_destroy() frees them before ib_core could.
	 */
	hca->ibdev.port_data = kcalloc(hca->ibdev.phys_port_cnt + 1,
				       sizeof(*hca->ibdev.port_data),
				       GFP_KERNEL);
	if (!hca->ibdev.port_data) {
		ib_dealloc_device(&hca->ibdev);
		return ERR_PTR(-ENOMEM);
	}
	ib_set_device_ops(&hca->ibdev, &fake_hca_ops);
	return hca;
}
EXPORT_SYMBOL_GPL(fake_hca_create);

/**
 * fake_hca_destroy() - free a fake device whose CQs are all destroyed.
 * @hca: the device.
 */
void fake_hca_destroy(struct fake_hca *hca)
{
	kfree(hca->ibdev.port_data);
	hca->ibdev.port_data = NULL;	/* not ib_core's to release */
	ib_dealloc_device(&hca->ibdev);
}
EXPORT_SYMBOL_GPL(fake_hca_destroy);

/**
 * fake_hca_ibdev() - the ib_device of a fake HCA.
 * @hca: the device.
 *
 * Return: the ib_device.
 */
struct ib_device *fake_hca_ibdev(struct fake_hca *hca)
{
	return &hca->ibdev;
}
EXPORT_SYMBOL_GPL(fake_hca_ibdev);

/**
 * fake_hca_mode_name() - a mode's name, for test and benchmark output.
 * @mode: the mode.
 *
 * Return: a static string.
 */
const char *fake_hca_mode_name(enum fake_hca_mode mode)
{
	static const char * const names[] = {
		"lenient_report", "lenient_ignore",
		"strict_report", "strict_ignore",
	};

	return mode < FAKE_HCA_NR_MODES ? names[mode] : "unknown";
}
EXPORT_SYMBOL_GPL(fake_hca_mode_name);

/*
 * What the verbs leave undefined, a real HCA leaves stale: byte_len of a
 * successful completion that is neither a receive, an RDMA READ nor an
 * atomic, and of any failed one; imm_data but of a receive with
 * IB_WC_WITH_IMM (mlx5 sets the flag on a sender's completion too, and
 * writes no value); vendor_err of a successful one (mlx4 and mlx5 write
 * it only for errors). Fill them with garbage that changes per CQE, so a
 * consumer that sees them fails.
 */
static void fake_cq_garble(struct ib_wc *wc, u64 n)
{
	bool len_defined = false;

	switch (wc->opcode) {
	case IB_WC_RDMA_READ:
	case IB_WC_COMP_SWAP:
	case IB_WC_FETCH_ADD:
	case IB_WC_MASKED_COMP_SWAP:
	case IB_WC_MASKED_FETCH_ADD:
		len_defined = true;
		break;
	default:
		len_defined = wc->opcode & IB_WC_RECV;
		break;
	}
	if (!len_defined || wc->status != IB_WC_SUCCESS)
		wc->byte_len = 0xbad00000 | (u32)(n & 0xfffff);
	if (!(wc->opcode & IB_WC_RECV) || !(wc->wc_flags & IB_WC_WITH_IMM))
		wc->ex.imm_data = cpu_to_be32(0xfa110000 | (u32)(n & 0xffff));
	if (wc->status == IB_WC_SUCCESS)
		wc->vendor_err = 0x5e000000 | (u32)(n & 0xffff);
}

/*
 * Under fcq->lock, a completion the CQ is armed for: 1 to notify now
 * (disarmed), or 0 while moderation holds it back (fake_modify_cq()); the
 * first one held back starts the period.
 */
static int fake_cq_moderate(struct fake_cq *fcq)
{
	lockdep_assert_held(&fcq->lock);
	if (++fcq->mod_pending < max_t(u32, fcq->mod_count, 1)) {
		if (fcq->mod_pending == 1 && fcq->mod_period)
			hrtimer_start(&fcq->mod_timer,
				      ns_to_ktime(fcq->mod_period * NSEC_PER_USEC),
				      HRTIMER_MODE_REL_HARD);
		return 0;
	}
	fcq->armed = 0;
	fcq->mod_pending = 0;
	hrtimer_try_to_cancel(&fcq->mod_timer);
	return 1;
}

/*
 * Under fcq->lock: queue one completion (its wr_id replaced by its
 * position in the CQ if @seq). Returns -ENOSPC on overrun, 1 if the CQ
 * was armed for it (NEXT_COMP for any completion, SOLICITED for receives:
 * the fake treats every incoming message as solicited), else 0.
 */
static int fake_cq_push_locked(struct fake_cq *fcq, const struct ib_wc *wc,
			       bool seq)
{
	u32 slot;

	lockdep_assert_held(&fcq->lock);
	if (fcq->tail - fcq->head > fcq->mask) {
		fcq->st.overruns++;
		return -ENOSPC;
	}
	slot = fcq->tail & fcq->mask;
	fcq->q[slot] = *wc;
	if (seq)
		fcq->q[slot].wr_id = fcq->st.added;
	fake_cq_garble(&fcq->q[slot], fcq->st.added);
	WRITE_ONCE(fcq->tail, fcq->tail + 1);	/* fake_cq_count() */
	fcq->st.added++;
	if (fcq->armed == IB_CQ_NEXT_COMP ||
	    (fcq->armed == IB_CQ_SOLICITED && (wc->opcode & IB_WC_RECV)))
		return fake_cq_moderate(fcq);
	return 0;
}

/*
 * Queue @n completions as one burst (an HCA writing several CQEs before
 * its interrupt): one lock round-trip, at most one notification. @step 0
 * queues @wc @n times, 1 the array @wc[0 .. n). A full CQ drops the rest
 * and raises IB_EVENT_CQ_ERR.
 */
static int fake_cq_push(struct ib_cq *cq, const struct ib_wc *wc, u32 step,
			bool seq, u32 n)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;
	bool fire = false;
	u32 done = 0;
	int ret = 0;

	spin_lock_irqsave(&fcq->lock, flags);
	while (done < n) {
		ret = fake_cq_push_locked(fcq, wc + done * step, seq);
		if (ret < 0)
			break;
		fire |= ret;
		done++;
	}
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (fire)
		fake_notify(fcq);
	if (ret < 0) {
		fake_cq_overrun(cq);
		return done ?: -ENOSPC;
	}
	return done;
}

/**
 * fake_cq_add() - a completion arrives.
 * @cq: a fake CQ.
 * @wc: the completion.
 *
 * Fires the completion handler if the CQ is armed (SOLICITED arms fire
 * for receives only). A full CQ drops the completion and raises
 * IB_EVENT_CQ_ERR, as hardware does.
 *
 * Context: any, hard IRQ included.
 * Return: 0, or -ENOSPC on overrun.
 */
int fake_cq_add(struct ib_cq *cq, const struct ib_wc *wc)
{
	int ret = fake_cq_push(cq, wc, 0, false, 1);

	return ret < 0 ? ret : 0;
}
EXPORT_SYMBOL_GPL(fake_cq_add);

/**
 * fake_cq_add_burst() - @n completions at once, as an HCA that writes
 * several CQEs before it raises its interrupt.
 * @cq: a fake CQ.
 * @wcs: the completions, in order.
 * @n: how many.
 *
 * One lock round-trip and at most one notification for the burst.
 *
 * Context: any, hard IRQ included.
 * Return: as fake_cq_add_seq_burst().
 */
int fake_cq_add_burst(struct ib_cq *cq, const struct ib_wc *wcs, u32 n)
{
	return fake_cq_push(cq, wcs, 1, false, n);
}
EXPORT_SYMBOL_GPL(fake_cq_add_burst);

/**
 * fake_cq_add_seq() - a completion whose wr_id is its position in the CQ.
 * @cq: a fake CQ.
 *
 * The wr_id is the number of CQEs added before it (under the CQ lock), so
 * cookies are 0, 1, 2, ... in CQ order whoever adds them.
 *
 * Context: any.
 * Return: as fake_cq_add().
 */
int fake_cq_add_seq(struct ib_cq *cq)
{
	int ret = fake_cq_add_seq_burst(cq, 1);

	return ret < 0 ? ret : 0;
}
EXPORT_SYMBOL_GPL(fake_cq_add_seq);

/**
 * fake_cq_add_seq_burst() - @n completions at once, as fake_cq_add_seq().
 * @cq: a fake CQ.
 * @n: how many.
 *
 * One lock round-trip and at most one notification for the burst, as an
 * HCA that writes several CQEs before it raises its interrupt.
 *
 * Context: any.
 * Return: the number queued (less than @n if the CQ overran: the rest was
 * dropped and IB_EVENT_CQ_ERR raised), or -ENOSPC if none was.
 */
int fake_cq_add_seq_burst(struct ib_cq *cq, u32 n)
{
	struct ib_wc wc = {
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_RECV,
		.byte_len = 8,
	};

	return fake_cq_push(cq, &wc, 0, true, n);
}
EXPORT_SYMBOL_GPL(fake_cq_add_seq_burst);

static int fake_firer_fn(void *data)
{
	struct ib_cq *cq = data;
	u32 i = 0;

	while (!kthread_should_stop()) {
		if (fake_cq_count(cq) < cq->cqe / 2)
			fake_cq_add_seq(cq);
		fake_cq_fire(cq);
		if (!(++i & 15))
			schedule_timeout_interruptible(1);
	}
	return 0;
}

/**
 * fake_cq_start_firing() - a thread that adds CQEs and fires spurious
 * notifications until the CQ is destroyed (destroy_cq stops it first).
 * @cq: a fake CQ.
 *
 * Context: process context.
 * Return: 0 or a negative errno.
 */
int fake_cq_start_firing(struct ib_cq *cq)
{
	struct fake_cq *fcq = to_fcq(cq);
	struct task_struct *t;

	t = kthread_run(fake_firer_fn, cq, "fake_hca_fire");
	if (IS_ERR(t))
		return PTR_ERR(t);
	fcq->firer = t;
	return 0;
}
EXPORT_SYMBOL_GPL(fake_cq_start_firing);

/**
 * fake_cq_add_cookie() - a successful send completion with this wr_id.
 * @cq: a fake CQ.
 * @wr_id: the cookie.
 *
 * Context: any.
 * Return: as fake_cq_add().
 */
int fake_cq_add_cookie(struct ib_cq *cq, u64 wr_id)
{
	struct ib_wc wc = {
		.wr_id = wr_id,
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_SEND,
		.byte_len = 64,
	};

	return fake_cq_add(cq, &wc);
}
EXPORT_SYMBOL_GPL(fake_cq_add_cookie);

/**
 * fake_cq_set_arm_hook() - run @hook inside every arm, before arming.
 * @cq: a fake CQ.
 * @hook: the hook, or NULL.
 * @ctx: its argument.
 *
 * Clearing (@hook NULL) returns once the hooks that arms already called
 * have returned: what they added is in the CQ and counted, and their
 * argument may go away.
 *
 * Context: process context; sleeps when clearing, so not from a hook,
 * nor while a hook waits for the caller.
 */
void fake_cq_set_arm_hook(struct ib_cq *cq, fake_cq_arm_hook hook, void *ctx)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->hook = hook;
	fcq->hook_ctx = ctx;
	spin_unlock_irqrestore(&fcq->lock, flags);
	if (!hook)
		fake_hooks_wait(&fcq->hooks_running);
}
EXPORT_SYMBOL_GPL(fake_cq_set_arm_hook);

/**
 * fake_cq_set_poll_hook() - run @hook at the start of every poll_cq (or at
 *	its end, unless it failed: fake_cq_set_poll_hook_after()).
 * @cq: a fake CQ.
 * @hook: the hook, or NULL.
 * @ctx: its argument.
 *
 * Whatever the hook adds (a completion, a notification) comes while the
 * CQ's owner is polling it. Set by one thread while nothing polls the
 * CQ; cleared (@hook NULL) at any time, returning once the polls inside
 * the hook have left it: its argument may go away then.
 *
 * Context: process context; sleeps when clearing, so not from a hook,
 * nor while a hook waits for the caller.
 */
void fake_cq_set_poll_hook(struct ib_cq *cq, fake_cq_poll_hook hook,
			   void *ctx)
{
	struct fake_cq *fcq = to_fcq(cq);

	if (!hook) {
		WRITE_ONCE(fcq->poll_hook, NULL);
		smp_mb();	/* pairs with fake_cq_run_poll_hook() */
		fake_hooks_wait(&fcq->poll_hooks_running);
		return;
	}
	fcq->poll_hook_ctx = ctx;
	smp_store_release(&fcq->poll_hook, hook);	/* the argument first */
}
EXPORT_SYMBOL_GPL(fake_cq_set_poll_hook);

/**
 * fake_cq_set_poll_hook_after() - run the poll hook at the end of a poll.
 * @cq: a fake CQ.
 * @after: true: at the end of every poll_cq (what it adds comes after
 *	what the poll returned); false: at the start (the default).
 *
 * Context: any; set before the hook, while nothing polls the CQ.
 */
void fake_cq_set_poll_hook_after(struct ib_cq *cq, bool after)
{
	WRITE_ONCE(to_fcq(cq)->poll_hook_after, after);
}
EXPORT_SYMBOL_GPL(fake_cq_set_poll_hook_after);

/**
 * fake_cq_set_resize_hook() - run @hook at the start of every resize_cq.
 * @cq: a fake CQ.
 * @hook: the hook, or NULL.
 * @ctx: its argument.
 *
 * The hook may sleep: it holds a resize in progress (in kevd_resize())
 * for as long as a test needs. Set and cleared while nothing resizes @cq.
 */
void fake_cq_set_resize_hook(struct ib_cq *cq, fake_cq_resize_hook hook,
			     void *ctx)
{
	struct fake_cq *fcq = to_fcq(cq);

	fcq->resize_hook_ctx = ctx;
	fcq->resize_hook = hook;
}
EXPORT_SYMBOL_GPL(fake_cq_set_resize_hook);

/**
 * fake_cq_fail_arms() - make req_notify_cq fail, as a provider may.
 * @cq: a fake CQ.
 * @err: the negative errno it returns from now on, or 0 to arm again.
 *
 * A failed arm leaves the CQ unarmed: no completion notifies until an
 * arm succeeds.
 *
 * Context: any.
 */
void fake_cq_fail_arms(struct ib_cq *cq, int err)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->arm_error = err;
	spin_unlock_irqrestore(&fcq->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_cq_fail_arms);

/**
 * fake_cq_fail_polls() - make poll_cq fail, as a provider may (a CQ in
 * error): it returns @err and takes nothing; the CQEs stay queued.
 * @cq: the CQ.
 * @err: the negative errno; 0: polls work again.
 */
void fake_cq_fail_polls(struct ib_cq *cq, int err)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	fcq->poll_error = err;
	spin_unlock_irqrestore(&fcq->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_cq_fail_polls);

/**
 * fake_cq_fire() - a spurious notification, armed or not.
 * @cq: a fake CQ.
 *
 * Context: any.
 */
void fake_cq_fire(struct ib_cq *cq)
{
	fake_notify_now(to_fcq(cq));
}
EXPORT_SYMBOL_GPL(fake_cq_fire);

/**
 * fake_cq_overrun() - raise IB_EVENT_CQ_ERR, as a CQ overrun does.
 * @cq: a fake CQ.
 *
 * Context: any.
 */
void fake_cq_overrun(struct ib_cq *cq)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}
EXPORT_SYMBOL_GPL(fake_cq_overrun);

/**
 * fake_cq_count() - CQEs in the CQ.
 * @cq: a fake CQ.
 *
 * Without the CQ lock, so a producer that paces itself on it does not
 * contend with the poller; a snapshot.
 *
 * Context: any.
 * Return: the number of CQEs not yet polled.
 */
u32 fake_cq_count(struct ib_cq *cq)
{
	struct fake_cq *fcq = to_fcq(cq);
	u32 head = READ_ONCE(fcq->head);

	smp_rmb();	/* head before tail: never more polled than added */
	return READ_ONCE(fcq->tail) - head;
}
EXPORT_SYMBOL_GPL(fake_cq_count);

/**
 * fake_cq_empty() - a lockless look at the next CQE, as a driver reads the
 * owner bit of the next CQE in host memory before it takes its CQ lock.
 * @cq: a fake CQ.
 *
 * A poll loop that spins on it does not contend with the producer for the
 * fake CQ's lock (a real HCA writes CQEs without taking it).
 *
 * Context: any.
 * Return: true if the CQ looked empty.
 */
bool fake_cq_empty(struct ib_cq *cq)
{
	struct fake_cq *fcq = to_fcq(cq);

	return READ_ONCE(fcq->head) == READ_ONCE(fcq->tail);
}
EXPORT_SYMBOL_GPL(fake_cq_empty);

/**
 * fake_cq_armed() - is the CQ armed?
 * @cq: a fake CQ.
 *
 * Return: true if a completion added now would fire the handler.
 */
bool fake_cq_armed(struct ib_cq *cq)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;
	bool armed;

	spin_lock_irqsave(&fcq->lock, flags);
	armed = fcq->armed == IB_CQ_NEXT_COMP;
	spin_unlock_irqrestore(&fcq->lock, flags);
	return armed;
}
EXPORT_SYMBOL_GPL(fake_cq_armed);

/**
 * fake_cq_comp_vector() - the completion vector the CQ was created on.
 * @cq: a fake CQ.
 *
 * ib_create_cq() passes it to the provider without storing it in the
 * ib_cq; this is what the provider received.
 *
 * Return: the vector.
 */
int fake_cq_comp_vector(struct ib_cq *cq)
{
	return to_fcq(cq)->comp_vector;
}
EXPORT_SYMBOL_GPL(fake_cq_comp_vector);

/**
 * fake_cq_set_irq_cpu() - deliver the CQ's notifications on a CPU.
 * @cq: a fake CQ.
 * @cpu: an online CPU, or -1 to notify inline in the adding context.
 *
 * With a CPU, a notification of an armed CQ (fake_cq_add() and its
 * variants, a lenient arm) runs the completion handler in an IPI on @cpu:
 * hard IRQ context, as an HCA interrupt routed to that CPU. fake_cq_fire()
 * stays inline. At most one IPI per CQ is in flight; one that comes while
 * another is pending is merged into it, as an edge-triggered vector.
 *
 * Context: process context, before the CQ is fed.
 */
void fake_cq_set_irq_cpu(struct ib_cq *cq, int cpu)
{
	WRITE_ONCE(to_fcq(cq)->irq_cpu, cpu);
}
EXPORT_SYMBOL_GPL(fake_cq_set_irq_cpu);

/**
 * fake_cq_stats() - the CQ's counters.
 * @cq: a fake CQ.
 * @st: where to put them.
 */
void fake_cq_stats(struct ib_cq *cq, struct fake_cq_stats *st)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	*st = fcq->st;
	spin_unlock_irqrestore(&fcq->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_cq_stats);

/**
 * fake_cq_moderation() - the CQ's moderation, as modify_cq set it.
 * @cq: a fake CQ.
 * @count: completions per notification (0: none set).
 * @period: µs after the first held back (0: none).
 */
void fake_cq_moderation(struct ib_cq *cq, u16 *count, u16 *period)
{
	struct fake_cq *fcq = to_fcq(cq);
	unsigned long flags;

	spin_lock_irqsave(&fcq->lock, flags);
	*count = fcq->mod_count;
	*period = fcq->mod_period;
	spin_unlock_irqrestore(&fcq->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_cq_moderation);

/**
 * fake_hca_set_no_modify() - a provider without modify_cq (rxe, siw).
 * @hca: the device, before any CQ is created on it.
 */
void fake_hca_set_no_modify(struct fake_hca *hca)
{
	hca->ibdev.ops.modify_cq = NULL;
}
EXPORT_SYMBOL_GPL(fake_hca_set_no_modify);

MODULE_DESCRIPTION("kevd fake HCA for tests and benchmarks");
MODULE_LICENSE("Dual BSD/GPL");

/**
 * fake_qp_create() - a QP, in error, whose queues complete into @cq.
 * @hca: the device of @cq.
 * @cq: the CQ of both queues.
 * @max_wr: the room of each queue (at most FAKE_QP_MAX_WR).
 *
 * ib_query_qp(), ib_post_send(), ib_post_recv(), ib_modify_qp() to error
 * and ib_destroy_qp() work on it; its context (qp_context) is itself.
 * What is posted completes only when the test calls fake_qp_flush(), or
 * when it goes to error after fake_qp_flush_on_error().
 *
 * Context: process context.
 * Return: the QP, or ERR_PTR(-EINVAL or -ENOMEM).
 */
struct ib_qp *fake_qp_create(struct fake_hca *hca, struct ib_cq *cq,
			     u32 max_wr)
{
	struct fake_qp *fqp;

	if (!max_wr || max_wr > FAKE_QP_MAX_WR)
		return ERR_PTR(-EINVAL);
	fqp = kzalloc(sizeof(*fqp), GFP_KERNEL);
	if (!fqp)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&fqp->lock);
	fqp->max_wr = max_wr;
	fqp->state = IB_QPS_ERR;
	fqp->ibqp.device = &hca->ibdev;
	fqp->ibqp.real_qp = &fqp->ibqp;
	fqp->ibqp.send_cq = cq;
	fqp->ibqp.recv_cq = cq;
	fqp->ibqp.qp_type = IB_QPT_RC;
	fqp->ibqp.qp_num = 1;
	fqp->ibqp.qp_context = &fqp->ibqp;
	/* what ib_destroy_qp() looks at (ib_create_qp() sets them up) */
	spin_lock_init(&fqp->ibqp.mr_lock);
	INIT_LIST_HEAD(&fqp->ibqp.rdma_mrs);
	INIT_LIST_HEAD(&fqp->ibqp.sig_mrs);
#ifdef KEVD_HAVE_QP_SRQ_COMPLETION
	init_completion(&fqp->ibqp.srq_completion);
#endif
	return &fqp->ibqp;
}
EXPORT_SYMBOL_GPL(fake_qp_create);

/**
 * fake_qp_flush_on_error() - flush as a provider does once in error.
 * @qp: the QP.
 *
 * From the next move to error on (ib_modify_qp()), what is posted is
 * flushed into the CQ at once (fake_qp_flush()), and so is every post
 * after it. Posts must then come from process context.
 */
void fake_qp_flush_on_error(struct ib_qp *qp)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;

	spin_lock_irqsave(&fqp->lock, flags);
	fqp->flush_on_error = true;
	spin_unlock_irqrestore(&fqp->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_qp_flush_on_error);

/**
 * fake_qp_use_srq() - the QP's receives come from a shared receive queue.
 * @qp: a QP nothing was posted to yet.
 *
 * Its own post_recv fails (-EINVAL, as rxe's and siw's do); the test
 * gives it receives it took from the SRQ (fake_qp_srq_take()), in
 * progress. In error, they stay until fake_qp_last_wqe() flushes them
 * and raises IB_EVENT_QP_LAST_WQE_REACHED, as an HCA does once the QP
 * takes no more WQEs from the SRQ; its sends flush as before.
 */
void fake_qp_use_srq(struct ib_qp *qp)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;

	spin_lock_irqsave(&fqp->lock, flags);
	fqp->srq.device = qp->device;
	fqp->srq.srq_type = IB_SRQT_BASIC;
	/* ib_destroy_qp() drops the QP's reference */
	atomic_set(&fqp->srq.usecnt, 1);
	fqp->srq_held = true;
	qp->srq = &fqp->srq;
	spin_unlock_irqrestore(&fqp->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_qp_use_srq);

/**
 * fake_qp_set_state() - the state ib_query_qp() reports for the QP.
 * @qp: the QP.
 * @state: the state (a new fake QP reports IB_QPS_ERR), until the next
 *	move to error.
 */
void fake_qp_set_state(struct ib_qp *qp, enum ib_qp_state state)
{
	WRITE_ONCE(to_fqp(qp)->state, state);
}
EXPORT_SYMBOL_GPL(fake_qp_set_state);

/**
 * fake_qp_srq_take() - the QP took a receive from its SRQ.
 * @qp: a QP after fake_qp_use_srq().
 * @wr_id: the receive's wr_id.
 *
 * Return: 0, or -ENOMEM if it holds its room already.
 */
int fake_qp_srq_take(struct ib_qp *qp, u64 wr_id)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&fqp->lock, flags);
	ret = fake_post(fqp, &fqp->rq, wr_id);
	spin_unlock_irqrestore(&fqp->lock, flags);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_qp_srq_take);

/**
 * fake_qp_last_wqe() - the QP in error takes no more WQEs from its SRQ.
 * @hca: the QP's device.
 * @qp: a QP after fake_qp_use_srq(), moved to error.
 * @destroyed: fake_hca_qps_destroyed() while @qp existed: if @hca
 *	destroyed more QPs since, @qp may be gone, and is not looked at.
 *
 * The receives it took from the SRQ are flushed into the CQ, then the
 * affiliated event IB_EVENT_QP_LAST_WQE_REACHED goes where ib_core's
 * handler would take it: the QP's handler, and qp->srq_completion, last
 * (a thread that waits on it may destroy the QP as it wakes; its
 * destroy_qp waits until this returns).
 *
 * Context: process context; not from the CQ's handlers.
 * Return: the completions added, -ENOENT if @qp may be gone, or a
 * negative errno.
 */
int fake_qp_last_wqe(struct fake_hca *hca, struct ib_qp *qp, int destroyed)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = IB_EVENT_QP_LAST_WQE_REACHED,
	};
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;
	int ret = -ENOENT;

	mutex_lock(&hca->qp_lock);
	if (atomic_read(&hca->qps_destroyed) != destroyed)
		goto out;
	spin_lock_irqsave(&fqp->lock, flags);
	fqp->srq_held = false;
	spin_unlock_irqrestore(&fqp->lock, flags);
	ret = fake_qp_flush(qp);
	if (qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
#ifdef KEVD_HAVE_QP_SRQ_COMPLETION
	complete(&qp->srq_completion);
#endif
out:
	mutex_unlock(&hca->qp_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(fake_qp_last_wqe);

/**
 * fake_qp_srq_waited() - does a thread wait for the QP's last WQE?
 * @hca: the QP's device.
 * @qp: a QP after fake_qp_use_srq().
 * @destroyed: fake_hca_qps_destroyed() while @qp existed: if @hca
 *	destroyed more QPs since, @qp may be gone, and is not looked at.
 *
 * Return: true while a thread waits on qp->srq_completion, as
 * ib_drain_qp() does; false if @qp may be gone, or on kernels without it.
 */
bool fake_qp_srq_waited(struct fake_hca *hca, struct ib_qp *qp,
			int destroyed)
{
	bool waited = false;

	mutex_lock(&hca->qp_lock);	/* no destroy_qp meanwhile */
#ifdef KEVD_HAVE_QP_SRQ_COMPLETION
	if (atomic_read(&hca->qps_destroyed) == destroyed)
		waited = swait_active(&qp->srq_completion.wait);
#endif
	mutex_unlock(&hca->qp_lock);
	return waited;
}
EXPORT_SYMBOL_GPL(fake_qp_srq_waited);

/**
 * fake_hca_qps_destroyed() - the QPs ib_destroy_qp() destroyed on @hca.
 * @hca: the device.
 *
 * Return: the destroy_qp calls.
 */
int fake_hca_qps_destroyed(struct fake_hca *hca)
{
	return atomic_read(&hca->qps_destroyed);
}
EXPORT_SYMBOL_GPL(fake_hca_qps_destroyed);

/**
 * fake_qp_destroy() - free a fake QP.
 * @qp: the QP; nothing may post to it any more. Not one that
 *	ib_destroy_qp() (or kevd_destroy_qp()) destroyed: that freed it.
 */
void fake_qp_destroy(struct ib_qp *qp)
{
	kfree(to_fqp(qp));
}
EXPORT_SYMBOL_GPL(fake_qp_destroy);

/**
 * fake_qp_to_error() - how often the QP was moved to error.
 * @qp: the QP.
 *
 * Return: the ib_modify_qp() calls to IB_QPS_ERR it took.
 */
u32 fake_qp_to_error(struct ib_qp *qp)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;
	u32 n;

	spin_lock_irqsave(&fqp->lock, flags);
	n = fqp->to_error;
	spin_unlock_irqrestore(&fqp->lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(fake_qp_to_error);

/**
 * fake_qp_fail_posts() - make post_send and post_recv fail.
 * @qp: the QP.
 * @err: the negative errno they return; 0: they work again.
 */
void fake_qp_fail_posts(struct ib_qp *qp, int err)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;

	spin_lock_irqsave(&fqp->lock, flags);
	fqp->post_error = err;
	spin_unlock_irqrestore(&fqp->lock, flags);
}
EXPORT_SYMBOL_GPL(fake_qp_fail_posts);

/**
 * fake_qp_posts() - the post calls made on a QP.
 * @qp: the QP.
 *
 * Return: post_send and post_recv calls, failed ones too.
 */
u32 fake_qp_posts(struct ib_qp *qp)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;
	u32 n;

	spin_lock_irqsave(&fqp->lock, flags);
	n = fqp->posts;
	spin_unlock_irqrestore(&fqp->lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(fake_qp_posts);

/* Flush @wq into @cq: a flush error for each WR posted, in order. */
static u32 fake_qp_flush_wq(struct ib_qp *qp, struct fake_wq *wq,
			    enum ib_wc_opcode opcode, struct ib_wc *wcs)
{
	u32 i, n = wq->n;

	for (i = 0; i < n; i++)
		wcs[i] = (struct ib_wc){
			.wr_id = wq->wr_id[i],
			.status = IB_WC_WR_FLUSH_ERR,
			.opcode = opcode,
			.qp = qp,
		};
	wq->n = 0;
	return n;
}

/**
 * fake_qp_flush() - complete what is posted on a QP, flushed.
 * @qp: the QP.
 *
 * Its send queue's WRs, then its receive queue's, each in the order they
 * were posted, into the CQ, which notifies as its mode says.
 *
 * Context: process context; not from the CQ's handlers.
 * Return: the completions added, or a negative errno (no memory, a CQ
 * full).
 */
int fake_qp_flush(struct ib_qp *qp)
{
	struct fake_qp *fqp = to_fqp(qp);
	unsigned long flags;
	struct ib_wc *wcs;
	u32 n;
	int ret;

	wcs = kmalloc_array(2 * FAKE_QP_MAX_WR, sizeof(*wcs), GFP_KERNEL);
	if (!wcs)
		return -ENOMEM;
	spin_lock_irqsave(&fqp->lock, flags);
	n = fake_qp_flush_wq(qp, &fqp->sq, IB_WC_SEND, wcs);
	if (!fqp->srq_held)
		n += fake_qp_flush_wq(qp, &fqp->rq, IB_WC_RECV, wcs + n);
	spin_unlock_irqrestore(&fqp->lock, flags);
	ret = n ? fake_cq_add_burst(qp->send_cq, wcs, n) : 0;
	kfree(wcs);
	return ret ? ret : n;
}
EXPORT_SYMBOL_GPL(fake_qp_flush);
