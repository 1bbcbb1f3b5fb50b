// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_pingpong: a DAPL-style consumer of kevd on real RDMA devices.
 *
 * For each device it finds through an ib_client (all, or those named in
 * the "device" parameter), it creates a PD, a DTO EVD and a connected
 * pair of RC QPs on that device (kevd_rc.c): rdma_cm on any transport,
 * through kevd's CM binding, to the device's address in "addrs" (an IPv6
 * address of its netdev: rdma_cm refuses lo and 127/8 elsewhere; the test
 * kernels use fe80::2 for siw0 and fe80::3 for rxe0 on dummy netdevs);
 * kevd_rc checks both sides' ESTABLISHED and DISCONNECTED.
 * Then, under each delivery mode (DISABLE with dequeue, DISABLE with
 * kevd_wait, SINGLE_INSTANCE, NOTIFY, MANY), it runs "iterations"
 * operations cycling through SEND/RECV, RDMA WRITE, RDMA WRITE with
 * immediate (not on iWARP, which has no immediate data) and RDMA READ, in
 * batches of depth/2, and checks that every cookie completes exactly once
 * with success and the right operation, that payloads arrive intact, and
 * (except under MANY, whose upcalls run concurrently) that the completions
 * of A's send queue and of B's receive queue arrive in posting order.
 * Events still queued after a mode's TEARDOWN are dequeued and checked.
 * On iWARP a WRITE completes once sent, so a zero-length SEND follows each
 * WRITE batch before its payload is checked (pp_fence()).
 *
 * RDMA WRITE and READ target buffers registered with fast registration
 * (REG_MR, remote access scoped to the buffer; no global rkey), invalidated
 * (LOCAL_INV) after the modes; both show up as DTO events (LMR_FMR,
 * LMR_INVALIDATE).
 *
 * Finally it tears down in the documented order with work requests in
 * flight: receives posted, QPs to error (rdma_disconnect for the CM),
 * every flushed receive arrives as a DTO event with the flushed status,
 * QPs destroyed, TEARDOWN, free; "rounds" times.
 *
 * One line per device and mode, machine-readable:
 *   kevd-e2e device=rxe0 mode=single ops=... events=... lost=0 dup=0 bad=0
 *            misordered=0 ev_per_s=... upcalls=... arms=... repolls=...
 * and per device: kevd-e2e-teardown device=... rounds=... flushed=N of=N ok
 * The load fails (-EIO) if anything was lost, duplicated, corrupted or out
 * of order.
 *
 * With until_removed=<seconds>, it runs the modes over and over, round
 * after round, until the device is removed ("rdma link delete"), one
 * device after the other. Its ib_client remove callback follows the
 * documented teardown order: it stops the traffic, moves both QPs to
 * error (the operations in flight complete as flushed, or with an error
 * status), waits until the loading thread has collected every one of
 * them and destroyed the QPs, the EVD and the PD, then returns. Lines:
 *   kevd-e2e-removal device=rxe0 running
 *   kevd-e2e-removal device=rxe0 rounds=... ops=... flushed=... errors=...
 *            lost=0 dup=0 bad=0 misordered=0 rc=0 ok
 *
 * Locking: the recorder's counters are atomics; the bitmap uses atomic
 * test_and_set_bit(). A mode's traffic runs from the loading thread; only
 * upcalls (poller threads), the CM handler and the ib_client remove
 * callback run concurrently with it. pp_devs_lock guards the device
 * slots; a pp_dev's qp_lock orders the creation and destruction of its
 * QPs against the remove callback's move to error.
 */
#include <linux/bitmap.h>
#include <linux/in6.h>
#include <linux/completion.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <kevd/kevd.h>
#include "kevd_rc.h"

static char *device = "";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "Devices to use, comma-separated (default: all)");
static unsigned int iterations = 2000;
module_param(iterations, uint, 0444);
MODULE_PARM_DESC(iterations, "Operations per device and mode (default 2000)");
static unsigned int msg_size = 256;
module_param(msg_size, uint, 0444);
MODULE_PARM_DESC(msg_size, "Message size in bytes, 8..65536 (default 256)");
static unsigned int depth = 32;
module_param(depth, uint, 0444);
MODULE_PARM_DESC(depth, "QP depth, 4..1024 (default 32); batches are depth/2");
static char *modes = "dequeue,wait,single,notify,many,seed";
module_param(modes, charp, 0444);
MODULE_PARM_DESC(modes, "Delivery modes (default dequeue,wait,single,notify,many,seed)");
static unsigned int rounds = 3;
module_param(rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "Setup/teardown rounds per device (default 3)");
static char *addrs = "siw0@fe80::2,rxe0@fe80::3";
module_param(addrs, charp, 0444);
MODULE_PARM_DESC(addrs, "<ibdev>@<IPv6 address of its netdev>,... for rdma_cm (default siw0@fe80::2,rxe0@fe80::3; rdma_cm does not run over lo)");
static unsigned int until_removed;
module_param(until_removed, uint, 0444);
MODULE_PARM_DESC(until_removed, "Run until the device is removed, at most this many seconds (default 0: off)");
static unsigned short port = 18515;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "TCP port of the rdma_cm loopback connection (iWARP)");

#define PP_MAX_DEVS	8
#define PP_WAIT		(30 * HZ)
#define PP_WAIT_US	(30 * USEC_PER_SEC)
/* The cookies of the registration work requests (not a pp_cookie()). */
#define PP_MR_COOKIE	(~0ULL - 1)

enum pp_kind {
	PP_SEND = 1, PP_RECV, PP_WRITE, PP_WRITE_IMM, PP_RECV_IMM, PP_READ,
	PP_FLUSH_RECV, PP_FENCE_SEND, PP_FENCE_RECV, PP_STANDING_RECV,
};

/*
 * seed: the 2006 kDAPL pattern. Each upcall (SINGLE_INSTANCE) disables
 * upcalls and wakes the consumer's thread, which dequeues until -EAGAIN
 * and enables again; an upcall while disabled is counted (and is bad).
 */
static const struct {
	const char *name;
	int policy;
	bool wait;
	bool seed;
} pp_modes[] = {
	{ "dequeue", KEVD_UPCALL_DISABLE, false, false },
	{ "wait", KEVD_UPCALL_DISABLE, true, false },
	{ "single", KEVD_UPCALL_SINGLE_INSTANCE, false, false },
	{ "notify", KEVD_UPCALL_NOTIFY, false, false },
	{ "many", KEVD_UPCALL_MANY, false, false },
	{ "seed", KEVD_UPCALL_SINGLE_INSTANCE, false, true },
};

struct pp_dev;

struct pp_side {
	struct pp_dev *d;
	struct ib_qp *qp;	/* d->rc.qp[side], once connected */
	u8 *buf;
	u64 dma;
	struct ib_mr *mr;	/* @buf, for the peer's WRITE and READ */
};

struct pp_rec {
	unsigned long *seen;
	unsigned long *expected;	/* cookies posted in this mode */
	u32 nbits;
	atomic_t got;
	atomic_t dup;
	atomic_t bad;
	atomic_t flushed;
	atomic_t errors;		/* failed status, device going away */
	atomic_t target;
	struct completion reached;
	bool ordered;			/* not MANY: one consumer at a time */
	s64 last[2];			/* last index: A's SQ (even), B's RQ */
	atomic_t misordered;
	atomic_t disabled;		/* seed: between DISABLE and enable */
	atomic_t disabled_upcalls;	/* seed: upcalls while disabled */
	struct completion wake;		/* seed: the upcall disabled */
};

struct pp_dev {
	struct ib_device *dev;
	struct ib_pd *pd;
	bool iwarp;
	struct kevd *evd;
	struct pp_side side[2];
	char addr[48];		/* an IPv6 address, from "addrs" */
	struct kevd_rc rc;
	struct pp_rec rec;
	bool failed;
	bool removing;		/* the remove callback has begun */
	struct mutex qp_lock;	/* side[].qp against the remove callback */
	struct completion stopped;	/* nothing of ours left on @dev */
	/* until_removed: receives on A that only a flush completes */
	int standing_posted;
	atomic_t standing_done;
	atomic_t standing_bad;
	/* the whole run, for the removal line */
	u64 ops;
	u64 flushed;
	u64 errors;
	int lost;
	int dup;
	int bad;
	int misordered;
};

/**
 * struct pp_slot - a device the client found, and its run.
 * @dev: the device; valid until the remove callback returns.
 * @gone: the remove callback ran: no run may start.
 * @running: @d is in use; the remove callback waits for @d.stopped.
 * @d: the run's state (static: the remove callback may still be in
 *     wait_for_completion() on @d.stopped once the run has ended).
 */
struct pp_slot {
	struct ib_device *dev;
	bool gone;
	bool running;
	struct pp_dev d;
};

static struct pp_slot pp_slots[PP_MAX_DEVS];
static int pp_ndevs;
static DEFINE_MUTEX(pp_devs_lock);

static int pp_add_one(struct ib_device *dev)
{
	if (*device && !strstr(device, dev_name(&dev->dev)))
		return -EOPNOTSUPP;
	mutex_lock(&pp_devs_lock);
	if (pp_ndevs < PP_MAX_DEVS)
		pp_slots[pp_ndevs++].dev = dev;
	mutex_unlock(&pp_devs_lock);
	return 0;
}

/*
 * The device goes away: stop the run on it, in the documented order. The
 * QPs go to error here, so that what is in flight comes back flushed; the
 * loading thread collects it, destroys the QPs, TEARDOWN, frees the EVD
 * and the PD, and completes @stopped. Only then may ib_core go on.
 */
static void pp_remove_one(struct ib_device *dev, void *data)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct pp_dev *d = NULL;
	int i;

	mutex_lock(&pp_devs_lock);
	for (i = 0; i < pp_ndevs; i++) {
		if (pp_slots[i].dev != dev)
			continue;
		pp_slots[i].gone = true;
		if (pp_slots[i].running)
			d = &pp_slots[i].d;
	}
	mutex_unlock(&pp_devs_lock);
	if (!d)
		return;
	WRITE_ONCE(d->removing, true);
	mutex_lock(&d->qp_lock);
	for (i = 0; i < 2; i++)
		if (d->side[i].qp)
			ib_modify_qp(d->side[i].qp, &attr, IB_QP_STATE);
	mutex_unlock(&d->qp_lock);
	wait_for_completion(&d->stopped);
}

static struct ib_client pp_client = {
	.name = "kevd_pingpong",
	.add = pp_add_one,
	.remove = pp_remove_one,
};

/* --- payloads and cookies ------------------------------------------- */

static u8 *pp_slot(struct pp_side *s, u32 k)
{
	return s->buf + (size_t)k * msg_size;
}

static void pp_fill(u8 *p, u32 idx)
{
	u32 i;

	for (i = 0; i < msg_size; i++)
		p[i] = (u8)(idx * 131 + i);
}

static bool pp_check(const u8 *p, u32 idx)
{
	u32 i;

	for (i = 0; i < msg_size; i++)
		if (p[i] != (u8)(idx * 131 + i))
			return false;
	return true;
}

static u64 pp_cookie(u32 idx, enum pp_kind kind)
{
	return ((u64)idx << 4) | kind;
}

static u32 pp_expected_op(enum pp_kind kind)
{
	switch (kind) {
	case PP_SEND:
		return KEVD_DTO_SEND;
	case PP_RECV:
		return KEVD_DTO_RECEIVE;
	case PP_WRITE:
		return KEVD_DTO_RDMA_WRITE;
	case PP_WRITE_IMM:
		return KEVD_DTO_RDMA_WRITE_IMMED;
	case PP_RECV_IMM:
		return KEVD_DTO_RECEIVE_IMMED;
	case PP_READ:
		return KEVD_DTO_RDMA_READ;
	default:
		return KEVD_DTO_UNKNOWN;
	}
}

/*
 * until_removed: a standing receive (on A, which nothing sends to) comes
 * back only when its QP goes to error, flushed; true if @ev is one.
 */
static bool pp_standing(struct pp_dev *d, const struct kevd_event *ev)
{
	if (ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
	    ev->dto.cookie >= PP_MR_COOKIE ||
	    (ev->dto.cookie & 15) != PP_STANDING_RECV)
		return false;
	if (ev->dto.status != KEVD_DTO_ERR_FLUSHED)
		atomic_inc(&d->standing_bad);
	atomic_inc(&d->standing_done);
	return true;
}

/* Every DTO event goes through here, whichever mode delivered it. */
static void pp_record(struct pp_dev *d, const struct kevd_event *ev)
{
	struct pp_rec *r = &d->rec;
	const struct kevd_dto_event *dto = &ev->dto;
	enum pp_kind kind = dto->cookie & 15;
	u32 idx = dto->cookie >> 4;
	bool ok;

	if (pp_standing(d, ev))
		return;	/* not the mode's */
	if (ev->event_number != KEVD_DTO_COMPLETION_EVENT) {
		atomic_inc(&r->bad);
		goto count;
	}
	if (kind == PP_FENCE_SEND || kind == PP_FENCE_RECV) {
		/*
		 * Not an operation of the run: no cookie to account for. One
		 * the device's removal failed counts as failed, so that the
		 * batch does not check payloads it did not fence.
		 */
		if (dto->status == KEVD_DTO_SUCCESS)
			goto count;
		if (!READ_ONCE(d->removing))
			atomic_inc(&r->bad);
		else
			atomic_inc(dto->status == KEVD_DTO_ERR_FLUSHED ?
				   &r->flushed : &r->errors);
		goto count;
	}
	if (dto->status != KEVD_DTO_SUCCESS && kind != PP_FLUSH_RECV &&
	    READ_ONCE(d->removing)) {
		/* In flight when the device went: flushed, or failed. */
		ok = true;
		atomic_inc(dto->status == KEVD_DTO_ERR_FLUSHED ? &r->flushed :
			   &r->errors);
	} else if (kind == PP_FLUSH_RECV) {
		ok = dto->status == KEVD_DTO_ERR_FLUSHED;
		if (ok)
			atomic_inc(&r->flushed);
	} else {
		/* Providers may not flag the sender's write-with-imm. */
		ok = dto->status == KEVD_DTO_SUCCESS &&
		     (dto->operation == pp_expected_op(kind) ||
		      (kind == PP_WRITE_IMM &&
		       dto->operation == KEVD_DTO_RDMA_WRITE)) &&
		     (dto->ep_context == &d->side[0] ||
		      dto->ep_context == &d->side[1]);
		if (kind == PP_RECV)
			ok = ok && dto->transferred_length == msg_size;
		if (kind == PP_RECV_IMM)
			ok = ok && dto->has_imm && dto->imm_data == idx;
	}
	if (!ok)
		atomic_inc(&r->bad);
	if (idx >= r->nbits || test_and_set_bit(idx, r->seen)) {
		atomic_inc(&r->dup);
		ok = false;
	}
	/* a work queue completes in posting order (indices increase) */
	if (r->ordered && kind != PP_FLUSH_RECV) {
		if ((s64)idx <= r->last[idx & 1]) {
			atomic_inc(&r->misordered);
			ok = false;
		}
		r->last[idx & 1] = idx;
	}
	if (!ok)
		pr_warn_ratelimited("kevd_pingpong: %s: unexpected completion: index %u kind %d status %u operation %u length %u side %d%s\n",
				    dev_name(&d->dev->dev), idx, kind,
				    dto->status, dto->operation,
				    dto->transferred_length,
				    dto->ep_context == &d->side[1],
				    READ_ONCE(d->removing) ? " (device going)" : "");
count:
	if (atomic_inc_return(&r->got) == atomic_read(&r->target))
		complete(&r->reached);
}

static void pp_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct pp_dev *d = ctx;
	struct kevd_event e;

	if (ev) {
		pp_record(d, ev);
		return;
	}
	/* NOTIFY: the doorbell; the consumer dequeues. */
	while (!kevd_dequeue(d->evd, &e))
		pp_record(d, &e);
}

/* seed: record, disable from the upcall, wake the consumer's thread. */
static void pp_seed_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct pp_dev *d = ctx;
	struct pp_rec *r = &d->rec;

	if (atomic_read(&r->disabled)) {
		atomic_inc(&r->disabled_upcalls);
		atomic_inc(&r->bad);
	}
	if (ev)
		pp_record(d, ev);
	if (kevd_modify_upcall(d->evd, KEVD_UPCALL_DISABLE, NULL,
			       KEVD_UPCALL_INVOC_ANY))
		atomic_inc(&r->bad);
	atomic_set(&r->disabled, 1);
	complete(&r->wake);
}

/* seed: the consumer's thread drains and enables again, until @target. */
static int pp_seed_collect(struct pp_dev *d, int target)
{
	unsigned long end = jiffies + PP_WAIT;
	struct pp_rec *r = &d->rec;
	struct kevd_event ev;
	int rc;

	while (atomic_read(&r->got) < target) {
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		if (!wait_for_completion_timeout(&r->wake, HZ) ||
		    !atomic_read(&r->disabled))
			continue;
		while (!kevd_dequeue(d->evd, &ev))
			pp_record(d, &ev);
		atomic_set(&r->disabled, 0);
		rc = kevd_modify_upcall(d->evd, KEVD_UPCALL_SINGLE_INSTANCE,
					NULL, KEVD_UPCALL_INVOC_ANY);
		if (rc)
			return rc;
	}
	return 0;
}

/* Wait until the recorder has seen @target events, in the mode's way. */
static int pp_collect(struct pp_dev *d, int m, int target)
{
	unsigned long end = jiffies + PP_WAIT;
	struct kevd_event ev;
	u32 nmore;
	int rc;

	if (pp_modes[m].seed)
		return pp_seed_collect(d, target);
	if (pp_modes[m].policy != KEVD_UPCALL_DISABLE) {
		if (atomic_read(&d->rec.got) >= target)
			return 0;
		return wait_for_completion_timeout(&d->rec.reached, PP_WAIT) ||
		       atomic_read(&d->rec.got) >= target ? 0 : -ETIMEDOUT;
	}
	while (atomic_read(&d->rec.got) < target) {
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		if (pp_modes[m].wait) {
			rc = kevd_wait(d->evd, 1000000, 1, &ev, &nmore);
			if (!rc)
				pp_record(d, &ev);
			else if (rc != -ETIMEDOUT)
				return rc;
		} else if (!kevd_dequeue(d->evd, &ev)) {
			pp_record(d, &ev);
		} else {
			cond_resched();
		}
	}
	return 0;
}

static void pp_expect(struct pp_dev *d, int n)
{
	reinit_completion(&d->rec.reached);
	atomic_add(n, &d->rec.target);
}

/* --- work requests -------------------------------------------------- */

static int pp_post_recv(struct pp_side *s, u32 k, u64 cookie, bool has_sge)
{
	struct ib_sge sge = {
		.addr = s->dma + (u64)k * msg_size,
		.length = msg_size,
		.lkey = s->d->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_id = cookie,
		.sg_list = has_sge ? &sge : NULL,
		.num_sge = has_sge ? 1 : 0,
	};

	return ib_post_recv(s->qp, &wr, NULL);
}

static int pp_post_send(struct pp_side *s, struct pp_side *peer, u32 k,
			u64 cookie, enum ib_wr_opcode op, u32 imm)
{
	struct ib_sge sge = {
		.addr = s->dma + (u64)k * msg_size,
		.length = msg_size,
		.lkey = s->d->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = cookie,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = peer->mr->iova + (u64)k * msg_size,
		.rkey = peer->mr->rkey,
	};

	if (op == IB_WR_RDMA_WRITE_WITH_IMM)
		wr.wr.ex.imm_data = cpu_to_be32(imm);
	return ib_post_send(s->qp, &wr.wr, NULL);
}

/*
 * A post refused while the device goes, or with -ENOTCONN (siw refuses one
 * so while the remove callback's move to error waits for the QP's lock):
 * what was posted before it still completes, flushed, and is the run's to
 * collect. Any other refusal fails the batch at once: a receive whose send
 * was refused would never complete, and waiting for it only turns @rc into
 * a timeout.
 */
static bool pp_refusal_fails(struct pp_dev *d, int rc)
{
	return rc != -ENOTCONN && !READ_ONCE(d->removing);
}

/*
 * iWARP completes an RDMA WRITE at the requester once it is sent, not once
 * it is placed: the payload may still be on its way. A SEND behind the
 * writes is delivered only after their data is placed (RDMAP ordering), so
 * its receive completion makes the check of the written data valid.
 */
static noinline_for_stack int pp_fence(struct pp_dev *d, int m)
{
	struct pp_side *a = &d->side[0], *b = &d->side[1];
	struct ib_send_wr wr = {
		.wr_id = pp_cookie(0, PP_FENCE_SEND),
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	int rc;

	rc = pp_post_recv(b, 0, pp_cookie(0, PP_FENCE_RECV), false);
	if (rc)
		return rc;
	rc = ib_post_send(a->qp, &wr, NULL);
	if (rc) {
		pr_err("kevd_pingpong: %s: fence post failed: %d\n",
		       dev_name(&d->dev->dev), rc);
		if (pp_refusal_fails(d, rc))
			return rc;
	}
	pp_expect(d, rc ? 1 : 2);
	return pp_collect(d, m, atomic_read(&d->rec.target)) ?: rc;
}

/* A work request with this cookie index is posted: it must complete. */
static void pp_want(struct pp_dev *d, u32 idx)
{
	if (d->rec.expected && idx < d->rec.nbits)
		set_bit(idx, d->rec.expected);
}

/* A work request is posted: it must complete, once. */
static int pp_posted(struct pp_dev *d, u32 idx, int rc, int *expect)
{
	if (rc)
		return rc;
	pp_want(d, idx);
	(*expect)++;
	return 0;
}

/*
 * A receive on B (index 2 * @idx + 1; a SEND's lands in slot @k, a WRITE
 * with immediate's has no SGE), then A's @op (index 2 * @idx; a WRITE with
 * immediate carries the receive's index).
 */
static int pp_recv_send(struct pp_dev *d, u32 k, u32 idx, enum pp_kind rkind,
			enum pp_kind skind, enum ib_wr_opcode op, int *expect)
{
	struct pp_side *a = &d->side[0], *b = &d->side[1];
	int rc;

	rc = pp_posted(d, 2 * idx + 1,
		       pp_post_recv(b, k, pp_cookie(2 * idx + 1, rkind),
				    op == IB_WR_SEND), expect);
	return rc ?: pp_posted(d, 2 * idx,
			       pp_post_send(a, b, k, pp_cookie(2 * idx, skind),
					    op, 2 * idx + 1), expect);
}

/* One batch of @n operations of one kind, A to B; returns 0 or -errno. */
static noinline_for_stack int pp_batch(struct pp_dev *d, int m,
				       enum pp_kind kind, u32 base, u32 n)
{
	struct pp_side *a = &d->side[0], *b = &d->side[1];
	int rc = 0, expect = 0, failed;
	u32 k;

	failed = atomic_read(&d->rec.flushed) + atomic_read(&d->rec.errors);
	for (k = 0; k < n && !rc; k++) {
		u32 idx = base + k;

		switch (kind) {
		case PP_SEND:
			pp_fill(pp_slot(a, k), idx);
			memset(pp_slot(b, k), 0, msg_size);
			rc = pp_recv_send(d, k, idx, PP_RECV, PP_SEND,
					  IB_WR_SEND, &expect);
			break;
		case PP_WRITE:
			pp_fill(pp_slot(a, k), idx);
			memset(pp_slot(b, k), 0, msg_size);
			rc = pp_posted(d, 2 * idx,
				       pp_post_send(a, b, k,
						    pp_cookie(2 * idx, PP_WRITE),
						    IB_WR_RDMA_WRITE, 0),
				       &expect);
			break;
		case PP_WRITE_IMM:
			pp_fill(pp_slot(a, k), idx);
			memset(pp_slot(b, k), 0, msg_size);
			rc = pp_recv_send(d, k, idx, PP_RECV_IMM, PP_WRITE_IMM,
					  IB_WR_RDMA_WRITE_WITH_IMM, &expect);
			break;
		case PP_READ:
			pp_fill(pp_slot(b, k), idx);
			memset(pp_slot(a, k), 0, msg_size);
			rc = pp_posted(d, 2 * idx,
				       pp_post_send(a, b, k,
						    pp_cookie(2 * idx, PP_READ),
						    IB_WR_RDMA_READ, 0),
				       &expect);
			break;
		default:
			rc = -EINVAL;
		}
	}
	pp_expect(d, expect);
	if (rc) {
		pr_err("kevd_pingpong: %s: post failed: %d\n",
		       dev_name(&d->dev->dev), rc);
		if (pp_refusal_fails(d, rc))
			return rc;
	}
	/* what was posted completes, also after a post the removal refused */
	rc = pp_collect(d, m, atomic_read(&d->rec.target)) ?: rc;
	if (!rc && kind == PP_WRITE && d->iwarp)
		rc = pp_fence(d, m);
	if (rc)
		return rc;
	/* payloads, unless the device's removal failed an operation */
	if (atomic_read(&d->rec.flushed) + atomic_read(&d->rec.errors) !=
	    failed)
		return 0;
	for (k = 0; k < n; k++) {
		u8 *dst = kind == PP_READ ? pp_slot(a, k) : pp_slot(b, k);

		if (!pp_check(dst, base + k))
			atomic_inc(&d->rec.bad);
	}
	return 0;
}

/* A late event is the mode's: checked, not left for the next mode. */
static noinline_for_stack void pp_record_late(struct pp_dev *d)
{
	struct kevd_event ev;

	while (!kevd_dequeue(d->evd, &ev))
		pp_record(d, &ev);
}

static int pp_run_mode(struct pp_dev *d, int m)
{
	static const enum pp_kind kinds[] = {
		PP_SEND, PP_WRITE, PP_WRITE_IMM, PP_READ,
	};
	struct kevd_upcall up = { pp_modes[m].seed ? pp_seed_upcall : pp_upcall,
				  d };
	u32 batch = max(depth / 2, 1U), done = 0, nkinds = 0, b = 0;
	struct kevd_param before, after;
	enum pp_kind ks[4];
	u64 ns, events;
	int rc, i, lost;

	/*
	 * iWARP has no immediate data. siw (6.12) completes an RDMA READ
	 * twice when the QP fails as the response arrives: the receive path
	 * completes it, then frees its ORQ entry (siw_rdmap_complete(),
	 * siw_check_tx_fence()), and siw_sq_flush() flushes the ORQ in
	 * between without orq_lock. Under until_removed, READ is left out
	 * there, so that a duplicate counts against kevd only.
	 */
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!(d->iwarp && kinds[i] == PP_WRITE_IMM) &&
		    !(d->iwarp && until_removed && kinds[i] == PP_READ))
			ks[nkinds++] = kinds[i];

	memset(&d->rec, 0, sizeof(d->rec));
	init_completion(&d->rec.reached);
	init_completion(&d->rec.wake);
	d->rec.ordered = pp_modes[m].policy != KEVD_UPCALL_MANY;
	d->rec.last[0] = -1;
	d->rec.last[1] = -1;
	d->rec.nbits = 2 * iterations + 2;
	d->rec.seen = bitmap_zalloc(d->rec.nbits, GFP_KERNEL);
	d->rec.expected = bitmap_zalloc(d->rec.nbits, GFP_KERNEL);
	if (!d->rec.seen || !d->rec.expected) {
		bitmap_free(d->rec.seen);
		bitmap_free(d->rec.expected);
		d->rec.seen = NULL;
		d->rec.expected = NULL;
		return -ENOMEM;
	}
	kevd_query(d->evd, &before);
	rc = kevd_modify_upcall(d->evd, pp_modes[m].policy,
				pp_modes[m].policy ? &up : NULL,
				KEVD_UPCALL_INVOC_ANY);
	ns = ktime_get_ns();
	while (!rc && done < iterations && !READ_ONCE(d->removing)) {
		u32 n = min(batch, iterations - done);

		rc = pp_batch(d, m, ks[b++ % nkinds], done, n);
		done += n;
	}
	ns = ktime_get_ns() - ns;
	kevd_modify_upcall(d->evd, KEVD_UPCALL_TEARDOWN, NULL, 0);
	kevd_modify_upcall(d->evd, KEVD_UPCALL_DISABLE, NULL, 0);
	pp_record_late(d);
	kevd_query(d->evd, &after);

	events = atomic_read(&d->rec.got);
	/* identity, not a count: every posted cookie seen, nothing else */
	lost = 0;
	for_each_set_bit(i, d->rec.expected, d->rec.nbits)
		if (!test_bit(i, d->rec.seen))
			lost++;
	for_each_set_bit(i, d->rec.seen, d->rec.nbits)
		if (!test_bit(i, d->rec.expected))
			atomic_inc(&d->rec.bad);
	if (atomic_read(&d->rec.target) != atomic_read(&d->rec.got))
		atomic_inc(&d->rec.bad);
	d->ops += done;
	d->flushed += atomic_read(&d->rec.flushed);
	d->errors += atomic_read(&d->rec.errors);
	d->lost += lost;
	d->dup += atomic_read(&d->rec.dup);
	d->bad += atomic_read(&d->rec.bad);
	d->misordered += atomic_read(&d->rec.misordered);
	pr_info("kevd-e2e device=%s mode=%s ops=%u events=%llu lost=%d dup=%d bad=%d misordered=%d ev_per_s=%llu upcalls=%llu arms=%llu repolls=%llu disabled_upcalls=%d rc=%d\n",
		dev_name(&d->dev->dev), pp_modes[m].name, done, events,
		lost, atomic_read(&d->rec.dup), atomic_read(&d->rec.bad),
		atomic_read(&d->rec.misordered),
		div64_u64(events * NSEC_PER_SEC, max_t(u64, ns, 1)),
		after.stats.upcalls - before.stats.upcalls,
		after.stats.arms - before.stats.arms,
		after.stats.repolls - before.stats.repolls,
		atomic_read(&d->rec.disabled_upcalls), rc);
	if (rc || lost || atomic_read(&d->rec.dup) ||
	    atomic_read(&d->rec.bad) || atomic_read(&d->rec.misordered))
		d->failed = true;
	bitmap_free(d->rec.seen);
	bitmap_free(d->rec.expected);
	d->rec.seen = NULL;
	d->rec.expected = NULL;
	return rc;
}

static void pp_qp_init_attr(struct pp_dev *d, struct pp_side *s,
			    struct ib_qp_init_attr *init)
{
	init->send_cq = kevd_cq(d->evd);
	init->recv_cq = kevd_cq(d->evd);
	init->qp_context = s;
	init->cap.max_send_wr = depth;
	init->cap.max_recv_wr = depth;
	init->cap.max_send_sge = 1;
	init->cap.max_recv_sge = 1;
	init->sq_sig_type = IB_SIGNAL_ALL_WR;
	init->qp_type = IB_QPT_RC;
}

/* The connection stream: rdma_cm's events go into the connection EVD. */
/* --- setup and teardown --------------------------------------------- */

/* One signaled work request on each side's QP; both completions taken. */
static int pp_both_sides(struct pp_dev *d, struct ib_send_wr *wr,
			 u32 operation)
{
	struct kevd_event ev;
	int i, rc = 0;
	u32 nmore;

	for (i = 0; i < 2 && !rc; i++) {
		wr->wr_id = PP_MR_COOKIE + i;
		if (wr->opcode == IB_WR_REG_MR) {
			container_of(wr, struct ib_reg_wr, wr)->mr =
				d->side[i].mr;
			container_of(wr, struct ib_reg_wr, wr)->key =
				d->side[i].mr->rkey;
		} else {
			wr->ex.invalidate_rkey = d->side[i].mr->rkey;
		}
		rc = ib_post_send(d->side[i].qp, wr, NULL);
	}
	for (i = 0; i < 2 && !rc; i++) {
		rc = kevd_wait(d->evd, PP_WAIT_US, 1, &ev, &nmore);
		if (!rc && pp_standing(d, &ev)) {
			i--;	/* the device is going: not ours to check */
			continue;
		}
		if (!rc && (ev.event_number != KEVD_DTO_COMPLETION_EVENT ||
			    ev.dto.cookie < PP_MR_COOKIE ||
			    ev.dto.status != KEVD_DTO_SUCCESS ||
			    ev.dto.operation != operation))
			rc = -EIO;
	}
	return rc;
}

/*
 * Each side's buffer is the target of the peer's RDMA WRITE and READ: it
 * is registered with a fast registration, remote access scoped to it (no
 * global rkey). The REG_MR completions arrive as LMR_FMR events, before
 * any mode runs.
 */
static int pp_register(struct pp_dev *d)
{
	size_t len = (size_t)depth * msg_size;
	struct ib_reg_wr reg = {
		.wr.opcode = IB_WR_REG_MR,
		.wr.send_flags = IB_SEND_SIGNALED,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ,
	};
	struct scatterlist sg;
	int i, rc;

	for (i = 0; i < 2; i++) {
		struct pp_side *s = &d->side[i];

		s->mr = ib_alloc_mr(d->pd, IB_MR_TYPE_MEM_REG,
				    DIV_ROUND_UP(offset_in_page(s->buf) + len,
						 PAGE_SIZE));
		if (IS_ERR(s->mr)) {
			rc = PTR_ERR(s->mr);
			s->mr = NULL;
			return rc;
		}
		/* @buf is mapped already (ib_dma_map_single()) */
		sg_init_one(&sg, s->buf, len);
		sg_dma_address(&sg) = s->dma;
		sg_dma_len(&sg) = len;
		if (ib_map_mr_sg(s->mr, &sg, 1, NULL, PAGE_SIZE) != 1)
			return -EIO;
	}
	return pp_both_sides(d, &reg.wr, KEVD_DTO_LMR_FMR);
}

/* After use: each side invalidates its registration (LMR_INVALIDATE). */
static int pp_invalidate(struct pp_dev *d)
{
	struct ib_send_wr inv = {
		.opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
	};

	return pp_both_sides(d, &inv, KEVD_DTO_LMR_INVALIDATE);
}

static void pp_free_side(struct pp_dev *d, struct pp_side *s)
{
	s->qp = NULL;
	if (s->mr) {
		ib_dereg_mr(s->mr);
		s->mr = NULL;
	}
	if (s->buf) {
		ib_dma_unmap_single(d->dev, s->dma, (size_t)depth * msg_size,
				    DMA_BIDIRECTIONAL);
		free_pages_exact(s->buf, (size_t)depth * msg_size);
		s->buf = NULL;
	}
}

/* The device's address in "addrs" (<ibdev>@<IPv6>,...). */
static int pp_addr(struct pp_dev *d)
{
	const char *name = dev_name(&d->dev->dev), *p = addrs, *at, *end;
	size_t len = strlen(name);

	while (p && *p) {
		end = strchrnul(p, ',');
		at = strnchr(p, end - p, '@');
		if (at && at - p == len && !strncmp(p, name, len) &&
		    end - at - 1 < sizeof(d->addr)) {
			strscpy(d->addr, at + 1, end - at);
			return 0;
		}
		p = *end ? end + 1 : end;
	}
	pr_err("kevd_pingpong: %s: no address in addrs=%s\n", name, addrs);
	return -EINVAL;
}

static int pp_setup(struct pp_dev *d)
{
	struct kevd_attr attr;
	int i, rc;

	d->iwarp = rdma_protocol_iwarp(d->dev, 1);
	d->pd = ib_alloc_pd(d->dev, 0);
	if (IS_ERR(d->pd))
		return PTR_ERR(d->pd);
	kevd_attr_init(&attr);
	attr.flags = KEVD_DTO_FLAG;
	attr.qlen = 2 * depth;
	attr.cq_depth = 4 * depth;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	d->evd = kevd_create(d->dev, &attr);
	if (IS_ERR(d->evd))
		return PTR_ERR(d->evd);
	for (i = 0; i < 2; i++) {
		struct pp_side *s = &d->side[i];

		s->d = d;
		/* pages of its own: see kevd_rc_buf_alloc() */
		s->buf = kevd_rc_buf_alloc((size_t)depth * msg_size);
		if (!s->buf)
			return -ENOMEM;
		s->dma = ib_dma_map_single(d->dev, s->buf,
					   (size_t)depth * msg_size,
					   DMA_BIDIRECTIONAL);
		if (ib_dma_mapping_error(d->dev, s->dma)) {
			free_pages_exact(s->buf, (size_t)depth * msg_size);
			s->buf = NULL;
			return -EIO;
		}
	}
	memset(&d->rc, 0, sizeof(d->rc));
	d->rc.dev = d->dev;
	d->rc.pd = d->pd;
	for (i = 0; i < 2; i++)
		pp_qp_init_attr(d, &d->side[i], &d->rc.init[i]);
	rc = pp_addr(d);
	if (rc)
		return rc;
	d->rc.addr = d->addr;
	d->rc.port = port;
	rc = kevd_rc_connect(&d->rc);
	mutex_lock(&d->qp_lock);
	for (i = 0; i < 2; i++)
		d->side[i].qp = d->rc.qp[i];
	mutex_unlock(&d->qp_lock);
	return rc ?: pp_register(d);
}

/* Drain: every standing receive back (or lost, after PP_WAIT). */
static void pp_drain(struct pp_dev *d)
{
	unsigned long end = jiffies + PP_WAIT;
	struct kevd_event ev;
	u32 nmore;
	int left;

	while (atomic_read(&d->standing_done) < d->standing_posted &&
	       time_before(jiffies, end))
		if (!kevd_wait(d->evd, USEC_PER_SEC, 1, &ev, &nmore))
			pp_standing(d, &ev);
	while (!kevd_dequeue(d->evd, &ev))
		pp_standing(d, &ev);
	left = d->standing_posted - atomic_read(&d->standing_done);
	d->flushed += atomic_read(&d->standing_done) -
		      atomic_read(&d->standing_bad);
	d->bad += atomic_read(&d->standing_bad);
	if (left > 0)
		d->lost += left;
	else if (left < 0)
		d->dup -= left;
	d->standing_posted = 0;
	atomic_set(&d->standing_done, 0);
	atomic_set(&d->standing_bad, 0);
}

/* until_removed: depth receives on A, in flight until its QP fails. */
static int pp_post_standing(struct pp_dev *d)
{
	int k, rc = 0;

	for (k = 0; k < depth && !rc; k++) {
		rc = pp_post_recv(&d->side[0], k, pp_cookie(k, PP_STANDING_RECV),
				  false);
		if (!rc)
			d->standing_posted++;
	}
	return rc;
}

/*
 * The documented order, with receives in flight: QPs to error, wait for
 * the flushes, destroy QPs, TEARDOWN, free.
 */
static int pp_teardown(struct pp_dev *d, bool check, int *flushed)
{
	int i, rc = 0, posted = 0, irc = 0;

	*flushed = 0;
	if (check && d->side[1].qp) {
		irc = pp_invalidate(d);
		/* a failed invalidate: tear down without the flush check */
		check = !irc;
	}
	if (check && d->side[1].qp) {
		memset(&d->rec, 0, sizeof(d->rec));
		init_completion(&d->rec.reached);
		d->rec.nbits = depth;
		d->rec.seen = bitmap_zalloc(depth, GFP_KERNEL);
		if (!d->rec.seen)
			return -ENOMEM;
		for (i = 0; i < depth; i++)
			if (!pp_post_recv(&d->side[1], i,
					  pp_cookie(i, PP_FLUSH_RECV), true))
				posted++;
		pp_expect(d, posted);
	}
	kevd_rc_disconnect(&d->rc);
	if (check && d->side[1].qp) {
		rc = pp_collect(d, 0, posted);
		*flushed = atomic_read(&d->rec.flushed);
		/* all depth receives in flight, every one back flushed */
		if (!rc && (posted != depth || *flushed != depth ||
			    atomic_read(&d->rec.dup) ||
			    atomic_read(&d->rec.bad)))
			rc = -EIO;
		bitmap_free(d->rec.seen);
		d->rec.seen = NULL;
	}
	if (check && !rc)
		rc = kevd_rc_wait_disconnected(&d->rc, PP_WAIT);
	/*
	 * The standing receives come back flushed (counted); anything else
	 * that completed (send-side flushes) is discarded.
	 */
	if (!IS_ERR_OR_NULL(d->evd))
		pp_drain(d);
	mutex_lock(&d->qp_lock);	/* the remove callback is done with them */
	for (i = 0; i < 2; i++)
		d->side[i].qp = NULL;
	mutex_unlock(&d->qp_lock);
	kevd_rc_destroy(&d->rc);
	for (i = 0; i < 2; i++)
		pp_free_side(d, &d->side[i]);
	if (!IS_ERR_OR_NULL(d->evd)) {
		kevd_modify_upcall(d->evd, KEVD_UPCALL_TEARDOWN, NULL, 0);
		if (kevd_free(d->evd))
			rc = rc ?: -EBUSY;
	}
	d->evd = NULL;
	if (!IS_ERR_OR_NULL(d->pd))
		ib_dealloc_pd(d->pd);
	d->pd = NULL;
	return rc ?: irc;
}

static bool pp_mode_wanted(int m)
{
	return strstr(modes, pp_modes[m].name);
}

static int pp_run_device(struct pp_dev *d)
{
	struct ib_device *dev = d->dev;
	int r, m, rc = 0, flushed = 0, total_flushed = 0;

	for (r = 0; r < rounds && !rc; r++) {
		rc = pp_setup(d);
		if (rc) {
			pr_err("kevd_pingpong: %s: setup failed: %d\n",
			       dev_name(&dev->dev), rc);
			pp_teardown(d, false, &flushed);
			break;
		}
		for (m = 0; m < ARRAY_SIZE(pp_modes) && !rc; m++)
			if (r == 0 && pp_mode_wanted(m))
				rc = pp_run_mode(d, m);
		rc = pp_teardown(d, !rc, &flushed) ?: rc;
		total_flushed += flushed;
	}
	/* every round had depth receives in flight, all flushed */
	if (!rc && total_flushed != r * (int)depth)
		rc = -EIO;
	if (rc || d->failed) {
		pr_info("kevd-e2e-teardown device=%s rounds=%d flushed=%d of=%d failed rc=%d\n",
			dev_name(&dev->dev), r, total_flushed, r * (int)depth, rc);
		rc = rc ?: -EIO;
	} else {
		pr_info("kevd-e2e-teardown device=%s rounds=%d flushed=%d of=%d ok\n",
			dev_name(&dev->dev), r, total_flushed, r * (int)depth);
	}
	return rc;
}

/*
 * until_removed: the modes, round after round, until the remove callback
 * sets @removing (or the time is up). A setup or a mode that fails
 * because the device is going is not a failure; a lost, duplicated or
 * corrupted completion is.
 */
static int pp_run_until_removed(struct pp_dev *d)
{
	unsigned long end = jiffies + until_removed * HZ;
	const char *name = dev_name(&d->dev->dev);
	int r, m, rc = 0, trc, flushed;

	pr_info("kevd-e2e-removal device=%s started\n", name);
	for (r = 0; !rc && !READ_ONCE(d->removing); r++) {
		if (time_after(jiffies, end)) {
			rc = -ETIMEDOUT;
			break;
		}
		rc = pp_setup(d) ?: pp_post_standing(d);
		if (!rc && r == 0)
			pr_info("kevd-e2e-removal device=%s running\n", name);
		for (m = 0; m < ARRAY_SIZE(pp_modes) && !rc; m++)
			if (pp_mode_wanted(m) && !READ_ONCE(d->removing))
				rc = pp_run_mode(d, m);
		trc = pp_teardown(d, !rc && !READ_ONCE(d->removing), &flushed);
		rc = rc ?: trc;
		if (READ_ONCE(d->removing))
			rc = 0;
	}
	if (d->lost || d->dup || d->bad || d->misordered)
		rc = rc ?: -EIO;
	pr_info("kevd-e2e-removal device=%s rounds=%d ops=%llu flushed=%llu errors=%llu lost=%d dup=%d bad=%d misordered=%d rc=%d %s\n",
		name, r, d->ops, d->flushed, d->errors, d->lost, d->dup,
		d->bad, d->misordered, rc, rc ? "failed" : "ok");
	return rc;
}

static int pp_nslots(void)
{
	int n;

	mutex_lock(&pp_devs_lock);
	n = pp_ndevs;
	mutex_unlock(&pp_devs_lock);
	return n;
}

/* The run on slot @i, unless its device is gone already. */
static int pp_run_slot(int i)
{
	struct pp_slot *slot = &pp_slots[i];
	struct pp_dev *d = &slot->d;
	int rc;

	mutex_lock(&pp_devs_lock);
	if (slot->gone) {
		mutex_unlock(&pp_devs_lock);
		return 0;
	}
	memset(d, 0, sizeof(*d));
	d->dev = slot->dev;
	mutex_init(&d->qp_lock);
	init_completion(&d->stopped);
	slot->running = true;
	mutex_unlock(&pp_devs_lock);

	rc = until_removed ? pp_run_until_removed(d) : pp_run_device(d);

	mutex_lock(&pp_devs_lock);
	slot->running = false;
	mutex_unlock(&pp_devs_lock);
	complete_all(&d->stopped);
	return rc;
}

static int __init kevd_pingpong_init(void)
{
	int i, rc, ret = 0;

	if (msg_size < 8 || msg_size > 65536 || depth < 4 || depth > 1024 ||
	    !iterations) {
		pr_err("kevd_pingpong: msg_size 8..65536, depth 4..1024, iterations >= 1\n");
		return -EINVAL;
	}
	rc = ib_register_client(&pp_client);
	if (rc)
		return rc;
	if (!pp_nslots()) {
		pr_err("kevd_pingpong: no RDMA device%s%s\n",
		       *device ? " named " : "", device);
		ret = -ENODEV;
	}
	for (i = 0; i < pp_nslots(); i++) {
		rc = pp_run_slot(i);
		ret = ret ?: rc;
	}
	ib_unregister_client(&pp_client);
	return ret;
}

static void __exit kevd_pingpong_exit(void)
{
}

module_init(kevd_pingpong_init);
module_exit(kevd_pingpong_exit);
MODULE_DESCRIPTION("kevd sample consumer: RC ping-pong on real RDMA devices");
MODULE_LICENSE("Dual BSD/GPL");
