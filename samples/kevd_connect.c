// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_connect: a kDAPL consumer's connection lifecycle through kevd's CM
 * binding (Documentation/kevd/cm.rst), on each device named in "devices"
 * ("<ibdev>@<IPv6 address of its netdev>", comma-separated).
 *
 * Per device, over rdma_cm on a loopback address, with a CR EVD for the
 * listener, and one EVD per side carrying both its DTO and connection
 * streams (as the DAT default does):
 *   1. a request carrying private data is rejected with private data: the
 *      requester sees PEER_REJECTED and the rejecter's bytes (on iWARP,
 *      up to three times: siw may lose the reject, kc_reject_lost()),
 *      after the 8 receives it posted before it connected, flushed;
 *   2. a request is accepted: both sides see ESTABLISHED, the requester
 *      with the accepter's private data; 8 sends arrive as 8 receives;
 *   3. the accepter posts 64 receives, moves its QP to error and waits
 *      until its EVD is full (the flushes wait in the CQ); one side (the
 *      accepter, then the requester, in turn over the cycles) disconnects:
 *      the accepter's DISCONNECTED comes after all 64 flushes (kevd holds
 *      it behind the CQ), and both sides see DISCONNECTED. In the second
 *      and third cycle (and every other pair on) the disconnect comes
 *      right after the receives are posted: the provider flushes them as
 *      the QP goes to error during the disconnect, and the DISCONNECTED
 *      must still come after all 64 (kevd holds it behind markers).
 *      In the first two cycles, and one in ten after, the same at once
 *      on an accepter EVD that arms its CQ for solicited completions
 *      only (flushes are not solicited), with a thread waiting;
 *   4. memory registration without a global rkey: the accepter registers
 *      a buffer with a fast registration (REG_MR: an LMR_FMR event); the
 *      requester writes into it and reads it back; a SEND with invalidate
 *      ends it (RECEIVE_WITH_INVALIDATE); registered again under a new
 *      key, invalidated locally (LMR_INVALIDATE), registered again; a
 *      write past its end fails: REMOTE_ACCESS on IB and RoCE, and on
 *      iWARP (siw) a TERMINATE that breaks the connection, so the READ
 *      behind the write is flushed;
 *   5. the requester's id is destroyed while its handler makes its QP:
 *      the handler (ROUTE_RESOLVED) holds until the destroying thread is
 *      blocked on it, then makes the QP and connects; kevd_cm_destroy_id()
 *      must destroy that QP too, or the QP leaks and its EVD cannot be
 *      freed;
 *   6. the requester's ROUTE_RESOLVED handler makes its QP, posts
 *      receives on it and gives the id up by returning
 *      non-zero, as an rdma_cm consumer does: kevd must drain the QP
 *      (the receives come back flushed) and destroy it once the handler
 *      has returned, or the QP leaks and its EVD cannot be freed;
 *   7. an endpoint is destroyed while connected, its receive queue full
 *      (four times what its EVD holds, or more): kevd_cm_destroy_id()
 *      takes their flushes into the EVD, which grows, before the QP goes;
 *   8. a request to a port nobody listens on: whatever the transport
 *      reports (NON_PEER_REJECTED on IB and RoCE; on iWARP the connect is
 *      refused, as an event or by rdma_connect() itself) is printed;
 *   9. requests no consumer decided on: one to a listener bound without a
 *      CR EVD, and one pending when its listener (the one of steps 1 to
 *      6) is destroyed. kevd refuses them, and the requester must see
 *      NON_PEER_REJECTED, not a consumer's reject.
 * Private data is checked byte for byte.
 *
 * One line per device:
 *   kevd-e2e-cm device=siw0 cycles=1 cr=3 established=4 peer_rejected=1
 *     disconnected=2 flushed=72 after_disconnect=0 sends=8 recvs=8
 *     mr_steps=5 outside_mr=<DTO status> destroyed_in_handler=1
 *     ended_in_handler=1
 *     destroyed_connected=<flushes: the receives its queue took>
 *     no_listener=<event or errno> refused=2 ok
 * The load fails (-EIO) if any step fails.
 *
 * With until_removed=<seconds>, per device it only establishes one
 * connection, exchanges the sends, posts KC_HELD receives on each side,
 * leaves a second request pending with a QP made on kevd_cr_id() and
 * KC_HELD receives posted on it (the removal must leave it pending, the
 * consumer's to end: its reject then flushes those receives to the EVD
 * and destroys that QP) and prints
 * "kevd-e2e-cm-removal device=<dev> running"; then it waits on the async
 * EVD for the device's removal: rdma_cm's DEVICE_REMOVAL,
 * which kevd posts there as IA_CATASTROPHIC. It tears down in the
 * documented order (QPs to error, every receive back flushed, ids and
 * QPs destroyed, EVDs freed, PD, device reference) and prints
 *   kevd-e2e-cm-removal device=<dev> catastrophic=N flushed=N ok rc=0
 * A consumer without an ib_client learns of the removal this way only.
 *
 * Context: everything runs in the loading thread, which takes the events
 * with kevd_wait(); the consumer handler below runs in rdma_cm's thread
 * and only drives the active side's connect.
 */
#include <linux/completion.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <kevd/kevd.h>
#include "kevd_compat.h"
#include "kevd_rc.h"		/* kevd_rc_buf_alloc() only */

static char *devices = "siw0@fe80::2,rxe0@fe80::3";
module_param(devices, charp, 0444);
MODULE_PARM_DESC(devices, "Devices and addresses, <ibdev>@<IPv6>,... (default siw0@fe80::2,rxe0@fe80::3)");
static unsigned int cycles = 1;
module_param(cycles, uint, 0444);
MODULE_PARM_DESC(cycles, "Accepted connections per device, each with traffic, flushes and a disconnect (default 1)");
static unsigned int until_removed;
module_param(until_removed, uint, 0444);
MODULE_PARM_DESC(until_removed, "Hold a connection until the device is removed (DEVICE_REMOVAL), at most this many seconds, up to 4000 (default 0: off)");
static unsigned short port = 18600;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "TCP port of the listener (the next two must be free)");

#define KC_WAIT_US	(30 * USEC_PER_SEC)
#define KC_WAIT		usecs_to_jiffies(KC_WAIT_US)
#define KC_QLEN		16
#define KC_MSGS		8
#define KC_FLUSH	64
#define KC_MSG		64
#define KC_REQ_LEN	32
#define KC_REJ_LEN	20
#define KC_ACC_LEN	24
#define KC_HELD		8	/* receives each side holds (until_removed) */
#define KC_GONE		(3 * KC_FLUSH)	/* at most, of a destroyed endpoint */

/*
 * kc_destroy_round(): the handler's ROUTE_RESOLVED holds on @go.
 * kc_end_in_handler_round(): with @give_up, it gives the id up instead.
 */
struct kc_hold {
	struct completion at_route, go;
	struct kc_dev *give_up;
	struct kc_dev *prepost;
};

/*
 * The active side's connect, driven by the consumer's handler. With
 * @hold, its ROUTE_RESOLVED completes @hold->at_route and waits for
 * @hold->go before it makes the QP.
 */
struct kc_active {
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_qp_init_attr qp_attr;
	u8 req[KC_REQ_LEN];
	int err;
	struct completion failed;
	struct kc_hold *hold;
	bool destroying, qp_made, gave_up;
};

struct kc_dev {
	const char *name;
	struct ib_device *dev;
	struct ib_pd *pd;
	struct sockaddr_in6 sin;
	struct kevd *cr_evd, *a_evd, *p_evd, *async;
	struct rdma_cm_id *lid;
	void *buf;
	u64 dma;
	int cr, established, peer_rejected, disconnected, flushed, after;
	int sends, recvs, mr_steps, destroyed, destroyed_connected, refused;
	int ended;
	u32 outside_status;
	void *mr_buf;
	char no_listener[32];
};

static void kc_pattern(u8 *p, u32 len, u8 seed)
{
	u32 i;

	for (i = 0; i < len; i++)
		p[i] = seed ^ (i * 13);
}

static bool kc_pattern_ok(const void *p, u32 size, u32 len, u8 seed)
{
	u8 want[KEVD_CM_MAX_PRIVATE_DATA];

	if (!p || size < len)
		return false;
	kc_pattern(want, len, seed);
	return !memcmp(p, want, len);
}

static int kc_post(struct kc_dev *d, struct ib_qp *qp, bool send, u64 cookie,
		   u32 slot);

/* kc_end_in_handler_round(): the cookie of the first receive. */
#define KC_GIVE_UP_COOKIE	600
/* kc_reject_once(): the requester's receives, posted before it connects */
#define KC_PREPOST_COOKIE	700

/*
 * The handler of kc_end_in_handler_round(), on ROUTE_RESOLVED after it
 * made the QP (@ret: how that went): receives posted, and the id given
 * up, by a non-zero return. It does not connect: a siw listener closed
 * with the connection still in its accept queue makes lockdep report
 * TCP's own locks (inet_child_forget() under the listener's slock).
 */
static int kc_give_up(struct kc_active *a, struct rdma_cm_id *id, int ret)
{
	int i;

	for (i = 0; i < KC_HELD && !ret; i++)
		ret = kc_post(a->hold->give_up, id->qp, false,
			      KC_GIVE_UP_COOKIE + i, i);
	a->err = ret;
	a->gave_up = true;
	complete(&a->failed);
	return -ECONNABORTED;
}

static int kc_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kc_active *a = kevd_cm_context(id);
	struct rdma_conn_param param = {
		.private_data = a ? a->req : NULL,
		.private_data_len = KC_REQ_LEN,
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	int i, ret = 0;

	if (!a)			/* the listener: kevd maps all it needs */
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, 2000);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (a->hold && a->hold->give_up) {
			ret = rdma_create_qp(id, a->pd, &a->qp_attr);
			a->qp_made = !ret;
			return kc_give_up(a, id, ret);
		}
		if (a->hold && !a->hold->prepost) {
			complete(&a->hold->at_route);
			/* kc_destroy_round() completes it on every path */
			wait_for_completion_timeout(&a->hold->go, 2 * KC_WAIT);
		}
		ret = rdma_create_qp(id, a->pd, &a->qp_attr);
		a->qp_made = !ret;
		/* receives posted before the connect, as DAT consumers do */
		for (i = 0; a->hold && a->hold->prepost && i < KC_MSGS && !ret;
		     i++)
			ret = kc_post(a->hold->prepost, id->qp, false,
				      KC_PREPOST_COOKIE + i, i);
		if (!ret)
			ret = rdma_connect_locked(id, &param);
		break;
	default:
		break;
	}
	if (ret) {
		a->err = ret;
		complete(&a->failed);
	}
	return 0;
}

/* Take one event; DTO events of @skip_dto are passed over. */
static int kc_wait(struct kevd *evd, struct kevd_event *ev, bool skip_dto)
{
	u32 nmore;
	int ret;

	do {
		ret = kevd_wait(evd, KC_WAIT_US, 1, ev, &nmore);
	} while (!ret && skip_dto &&
		 ev->event_number == KEVD_DTO_COMPLETION_EVENT);
	return ret;
}

/*
 * Take the first event of a new connection. It comes up with ESTABLISHED
 * (or is refused), never DISCONNECTED: one before ESTABLISHED is the last
 * connection's (siw's TERMINATE in the memory-window round broke it),
 * held behind that connection's flushes until after kc_connection_end()
 * looked (as kc_no_listener() passes it over). On the requester's EVD and
 * on the accepter's alike.
 */
static int kc_wait_up(struct kevd *evd, struct kevd_event *ev, bool skip_dto)
{
	int ret;

	do {
		ret = kc_wait(evd, ev, skip_dto);
	} while (!ret &&
		 ev->event_number == KEVD_CONNECTION_EVENT_DISCONNECTED);
	return ret;
}

static int kc_expect(struct kc_dev *d, struct kevd *evd, u32 number,
		     struct kevd_event *ev, const char *what)
{
	int ret;

	if (number == KEVD_CONNECTION_EVENT_ESTABLISHED)
		ret = kc_wait_up(evd, ev, true);
	else
		ret = kc_wait(evd, ev, true);
	if (!ret && ev->event_number == number)
		return 0;
	pr_err("kevd-e2e-cm: %s: %s: got %d, event %#x\n", d->name, what, ret,
	       ret ? 0 : ev->event_number);
	return -EIO;
}

static struct kevd *__kc_evd(struct kc_dev *d, u32 flags, struct kevd *async,
			     bool solicited_only)
{
	struct kevd_attr attr;

	kevd_attr_init(&attr);
	attr.qlen = KC_QLEN;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.cq_depth = 4 * KC_FLUSH;
	attr.async_evd = async;
	attr.solicited_only = solicited_only;
	return kevd_create(flags & KEVD_DTO_FLAG ? d->dev : NULL, &attr);
}

static struct kevd *kc_evd(struct kc_dev *d, u32 flags, struct kevd *async)
{
	return __kc_evd(d, flags, async, false);
}

static int kc_connect(struct kc_dev *d, struct kc_active *a,
		      struct kevd *evd, u16 to_port, u8 seed,
		      struct kc_hold *hold)
{
	struct kevd_cm_attr attr = {
		.conn_evd = evd, .ep = a,
		.async_evd = until_removed ? d->async : NULL,
	};
	struct sockaddr_in6 dst = d->sin, src = d->sin;
	int ret;

	memset(a, 0, sizeof(*a));
	init_completion(&a->failed);
	a->hold = hold;
	a->pd = d->pd;
	a->qp_attr.send_cq = kevd_cq(evd);
	a->qp_attr.recv_cq = kevd_cq(evd);
	a->qp_attr.cap.max_send_wr = KC_FLUSH;
	a->qp_attr.cap.max_recv_wr = KC_FLUSH;
	a->qp_attr.cap.max_send_sge = 1;
	a->qp_attr.cap.max_recv_sge = 1;
	a->qp_attr.sq_sig_type = IB_SIGNAL_ALL_WR;
	a->qp_attr.qp_type = IB_QPT_RC;
	kc_pattern(a->req, KC_REQ_LEN, seed);
	a->id = rdma_create_id(&init_net, kc_handler, a, RDMA_PS_TCP,
			       IB_QPT_RC);
	if (IS_ERR(a->id)) {
		ret = PTR_ERR(a->id);
		a->id = NULL;
		return ret;
	}
	ret = kevd_cm_bind(a->id, &attr);
	if (ret) {
		rdma_destroy_id(a->id);
		a->id = NULL;
		return ret;
	}
	src.sin6_port = 0;
	dst.sin6_port = htons(to_port);
	ret = rdma_resolve_addr(a->id, (struct sockaddr *)&src,
				(struct sockaddr *)&dst, 2000);
	return ret;
}

static void kc_active_end(struct kc_active *a)
{
	if (a->id)
		kevd_cm_destroy_id(a->id);
	a->id = NULL;
}

/* A CR on the listener, checked; returns its handle or NULL. */
static void *kc_request(struct kc_dev *d, u8 seed)
{
	struct kevd_event ev;

	if (kc_expect(d, d->cr_evd, KEVD_CONNECTION_REQUEST_EVENT, &ev,
		      "connection request"))
		return NULL;
	d->cr++;
	if (ev.cr.sp != d || ev.cr.conn_qual != port ||
	    !kc_pattern_ok(ev.cr.private_data, ev.cr.private_data_size,
			   KC_REQ_LEN, seed)) {
		pr_err("kevd-e2e-cm: %s: bad request: qual %llu size %u\n",
		       d->name, ev.cr.conn_qual, ev.cr.private_data_size);
		kevd_cr_reject(ev.cr.cr, NULL, 0);
		return NULL;
	}
	return ev.cr.cr;
}

/*
 * Did siw lose the reject? Its rejecter sends the MPA reply and closes
 * the socket at once; when the FIN is taken with the reply's segment,
 * the requester's socket is no longer ESTABLISHED as its data-ready
 * callback runs, siw drops the reply, and the peer's close reports a
 * reset without the reply's private data: NON_PEER_REJECTED, the
 * transport's loss and not kevd's.
 */
static bool kc_reject_lost(struct kc_dev *d, const struct kevd_event *ev)
{
	return rdma_protocol_iwarp(d->dev, 1) &&
	       ev->event_number == KEVD_CONNECTION_EVENT_NON_PEER_REJECTED &&
	       !ev->connection.private_data_size;
}

/*
 * The requester's receives, posted before it connected, come back
 * flushed, in order, before the event that ends the connect: return it.
 */
static int kc_flushed_before(struct kc_dev *d, struct kevd_event *ev)
{
	int ret, i = 0;

	while (!(ret = kc_wait(d->a_evd, ev, false)) &&
	       ev->event_number == KEVD_DTO_COMPLETION_EVENT) {
		if (ev->dto.cookie != KC_PREPOST_COOKIE + i ||
		    ev->dto.status != KEVD_DTO_ERR_FLUSHED)
			break;
		i++;
	}
	if (ret || i == KC_MSGS)
		return ret;
	pr_err("kevd-e2e-cm: %s: rejected: %d flushes of %d, then event %#x (cookie %llu)\n",
	       d->name, i, KC_MSGS, ev->event_number, ev->dto.cookie);
	return -EIO;
}

/*
 * One reject; -EAGAIN if the transport lost it (kc_reject_lost()). The
 * requester posted receives before it connected: they come back flushed
 * before the reject (DAT flushes a disconnected endpoint's DTOs).
 */
static int kc_reject_once(struct kc_dev *d)
{
	struct kc_hold hold = { .prepost = d };
	struct kc_active a;
	struct kevd_event ev;
	u8 rej[KC_REJ_LEN];
	void *cr;
	int ret;

	ret = kc_connect(d, &a, d->a_evd, port, 1, &hold);
	cr = ret ? NULL : kc_request(d, 1);
	if (!cr) {
		kc_active_end(&a);
		return ret ?: -EIO;
	}
	kc_pattern(rej, sizeof(rej), 2);
	ret = kevd_cr_reject(cr, rej, sizeof(rej));
	if (!ret && kevd_cr_reject(cr, NULL, 0) != -EINVAL)
		ret = -EIO;		/* a handle works once */
	if (!ret)
		ret = kc_flushed_before(d, &ev);
	if (!ret && kc_reject_lost(d, &ev)) {
		pr_info("kevd-e2e-cm: %s: the transport lost the reject (a reset without its private data): again\n",
			d->name);
		ret = -EAGAIN;
	} else if (!ret &&
		   (ev.event_number != KEVD_CONNECTION_EVENT_PEER_REJECTED ||
		    ev.connection.ep != &a ||
		    !kc_pattern_ok(ev.connection.private_data,
				   ev.connection.private_data_size,
				   KC_REJ_LEN, 2))) {
		pr_err("kevd-e2e-cm: %s: peer rejected: got event %#x, private data %u bytes\n",
		       d->name, ev.event_number,
		       ev.connection.private_data_size);
		ret = -EIO;
	}
	if (!ret)
		d->peer_rejected++;
	kc_active_end(&a);
	return ret;
}

/* The reject round: a transport may lose the reject twice, not three times. */
static int kc_reject_round(struct kc_dev *d)
{
	int i, ret = -EAGAIN;

	for (i = 0; i < 3 && ret == -EAGAIN; i++)
		ret = kc_reject_once(d);
	return ret == -EAGAIN ? -EIO : ret;
}

static int kc_post(struct kc_dev *d, struct ib_qp *qp, bool send, u64 cookie,
		   u32 slot)
{
	struct ib_sge sge = {
		.addr = d->dma + (u64)slot * KC_MSG,
		.length = KC_MSG,
		.lkey = d->pd->local_dma_lkey,
	};
	struct ib_send_wr swr = {
		.wr_id = cookie, .sg_list = &sge, .num_sge = 1,
		.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
	};
	struct ib_recv_wr rwr = {
		.wr_id = cookie, .sg_list = &sge, .num_sge = 1,
	};

	return send ? ib_post_send(qp, &swr, NULL) :
		      ib_post_recv(qp, &rwr, NULL);
}

/* @n completions in posting order from @cookie, with @status. */
static int kc_completions(struct kc_dev *d, struct kevd *evd, u64 cookie,
			  u32 n, u32 status, int *count)
{
	struct kevd_event ev;
	u32 i;

	for (i = 0; i < n; i++) {
		if (kc_wait(evd, &ev, false) ||
		    ev.event_number != KEVD_DTO_COMPLETION_EVENT ||
		    ev.dto.cookie != cookie + i || ev.dto.status != status) {
			pr_err("kevd-e2e-cm: %s: completion %llu: event %#x cookie %llu status %u\n",
			       d->name, cookie + i, ev.event_number,
			       ev.dto.cookie, ev.dto.status);
			return -EIO;
		}
		(*count)++;
	}
	return 0;
}

/* The requester's sends, to the receives posted before the accept. */
static int kc_send(struct kc_dev *d, struct ib_qp *aqp)
{
	int i, ret = 0;

	for (i = 0; i < KC_MSGS && !ret; i++)
		ret = kc_post(d, aqp, true, 200 + i, i);
	return ret;
}

/* Their completions, on both sides (kc_establish() sent them). */
static int kc_traffic(struct kc_dev *d)
{
	int ret;

	ret = kc_completions(d, d->a_evd, 200, KC_MSGS, KEVD_DTO_SUCCESS,
			     &d->sends);
	if (!ret)
		ret = kc_completions(d, d->p_evd, 100, KC_MSGS,
				     KEVD_DTO_SUCCESS, &d->recvs);
	return ret;
}

/*
 * The accepter's receives flushed, then one side disconnects:
 * DISCONNECTED after every flush. In the first round, and every other
 * pair of rounds after it, the flushes are held in its CQ behind a full
 * EVD first (the QP to error and a wait); in the others the disconnect
 * comes at once: the provider adds the flushes in its own time, after
 * the disconnect began.
 */
static int kc_flush_then_disconnect(struct kc_dev *d, struct kc_active *a,
				    struct rdma_cm_id *pid)
{
	bool at_once = (d->disconnected / 2 + 1) / 2 % 2;
	struct ib_qp *pqp = pid->qp;
	struct ib_qp_attr qattr = { .qp_state = IB_QPS_ERR };
	struct kevd_param p;
	struct kevd_event ev;
	u32 nmore;
	int i, ret = 0;

	for (i = 0; i < KC_FLUSH && !ret; i++)
		ret = kc_post(d, pqp, false, 1000 + i, i % (2 * KC_MSGS));
	if (!ret && !at_once)
		ret = ib_modify_qp(pqp, &qattr, IB_QP_STATE);
	if (!ret && !at_once)
		ret = kevd_query(d->p_evd, &p);
	/* the EVD fills up: the other flushes wait in the CQ */
	if (!ret && !at_once)
		ret = kevd_wait(d->p_evd, KC_WAIT_US, p.qlen, &ev, &nmore);
	if (ret)
		return ret;
	i = !at_once && ev.event_number == KEVD_DTO_COMPLETION_EVENT;
	/* from either side, in turn */
	rdma_disconnect(d->cr % 2 ? a->id : pid);
	for (;;) {
		if (kc_wait(d->p_evd, &ev, false))
			return -EIO;
		if (ev.event_number == KEVD_CONNECTION_EVENT_DISCONNECTED)
			break;
		if (ev.event_number == KEVD_DTO_COMPLETION_EVENT &&
		    ev.dto.status == KEVD_DTO_ERR_FLUSHED)
			i++;
	}
	d->disconnected++;
	d->flushed += i;
	/* anything of the accepter's endpoint queued after its DISCONNECTED */
	while (!kevd_dequeue(d->p_evd, &ev))
		d->after++;
	ret = kc_expect(d, d->a_evd, KEVD_CONNECTION_EVENT_DISCONNECTED, &ev,
			"requester disconnected");
	if (!ret)
		d->disconnected++;
	if (!ret && (i != KC_FLUSH || d->after)) {
		pr_err("kevd-e2e-cm: %s: %s disconnect: %d flushes of %d before DISCONNECTED, %d events after\n",
		       d->name, at_once ? "immediate" : "held", i, KC_FLUSH,
		       d->after);
		ret = -EIO;
	}
	return ret;
}

/* The accepter's QP on the request's id, with its receives posted. */
static int kc_prepost(struct kc_dev *d, void *cr,
		      struct ib_qp_init_attr *qp_attr)
{
	struct rdma_cm_id *id = kevd_cr_id(cr);
	int i, ret;

	if (!id)
		return -EINVAL;
	ret = rdma_create_qp(id, d->pd, qp_attr);
	for (i = 0; i < KC_MSGS && !ret; i++)
		ret = kc_post(d, id->qp, false, 100 + i, KC_MSGS + i);
	return ret;
}

/*
 * A request accepted: both sides ESTABLISHED; *@pid is the accepted id.
 * With @prepost, the accepter creates its QP on the request's id itself
 * and posts its receives before it accepts, as a DAT consumer does.
 */
static int kc_establish(struct kc_dev *d, struct kc_active *a,
			struct rdma_cm_id **pid, bool prepost)
{
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct kevd_cm_attr attr = {
		.conn_evd = d->p_evd, .ep = d,
		.async_evd = until_removed ? d->async : NULL,
	};
	struct ib_qp_init_attr qp_attr;
	struct kevd_event ev;
	u8 acc[KC_ACC_LEN];
	int est = 0, ret;
	void *cr;

	ret = kc_connect(d, a, d->a_evd, port, 3, NULL);
	cr = ret ? NULL : kc_request(d, 3);
	if (!cr)
		return ret ?: -EIO;
	qp_attr = a->qp_attr;
	qp_attr.send_cq = kevd_cq(d->p_evd);
	qp_attr.recv_cq = kevd_cq(d->p_evd);
	kc_pattern(acc, sizeof(acc), 4);
	param.private_data = acc;
	param.private_data_len = sizeof(acc);
	if (prepost) {
		ret = kc_prepost(d, cr, &qp_attr);
		/* a second QP for it is refused, and the request stays */
		if (!ret && kevd_cr_accept(cr, &attr, d->pd, &qp_attr, &param,
					   pid) != -EINVAL)
			ret = -EIO;
	}
	if (ret)
		kevd_cr_reject(cr, NULL, 0);
	else if (prepost)
		ret = kevd_cr_accept(cr, &attr, NULL, NULL, &param, pid);
	else
		ret = kevd_cr_accept(cr, &attr, d->pd, &qp_attr, &param, pid);
	if (!ret)
		ret = kc_expect(d, d->a_evd, KEVD_CONNECTION_EVENT_ESTABLISHED,
				&ev, "requester established");
	if (!ret && ev.connection.ep == a &&
	    kc_pattern_ok(ev.connection.private_data,
			  ev.connection.private_data_size, KC_ACC_LEN, 4))
		est++;
	/*
	 * The requester sends at once, so its sends may reach the accepter
	 * before rdma_cm there reports ESTABLISHED (the RTU); kevd still
	 * delivers the accepter's ESTABLISHED before any of its receives.
	 */
	if (!ret && prepost)
		ret = kc_send(d, a->id->qp);
	if (!ret)
		ret = kc_wait_up(d->p_evd, &ev, false);
	if (!ret && ev.event_number == KEVD_CONNECTION_EVENT_ESTABLISHED &&
	    ev.connection.ep == d)
		est++;
	else if (!ret)
		pr_err("kevd-e2e-cm: %s: accepter: event %#x before ESTABLISHED\n",
		       d->name, ev.event_number);
	d->established += est;
	return ret ?: (est == 2 ? 0 : -EIO);
}

static void kc_connection_end(struct kc_dev *d, struct kc_active *a,
			      struct rdma_cm_id *pid)
{
	struct kevd_event ev;

	if (pid)
		kevd_cm_destroy_id(pid);
	kc_active_end(a);
	/* what is left of the connection (flushes, a late DISCONNECTED) */
	while (!kevd_dequeue(d->a_evd, &ev))
		;
	while (!kevd_dequeue(d->p_evd, &ev))
		;
}

/*
 * The accepter's connection EVD arms its CQ for solicited completions
 * only, and flushes are not solicited: the requester disconnects right
 * after the accepter posted its receives, and a thread waits. The
 * DISCONNECTED must still come, after all the flushes: while kevd holds
 * it for flushes still to come, it must arm for any completion.
 */
static int kc_solicited_round(struct kc_dev *d)
{
	struct kevd *p_evd = d->p_evd, *evd;
	struct rdma_cm_id *pid = NULL;
	struct kevd_event ev;
	struct kc_active a;
	int i, n = 0, ret, err;

	evd = __kc_evd(d, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, d->async, true);
	if (IS_ERR(evd))
		return PTR_ERR(evd);
	d->p_evd = evd;
	ret = kc_establish(d, &a, &pid, false);
	for (i = 0; i < KC_FLUSH && !ret; i++)
		ret = kc_post(d, pid->qp, false, 1000 + i, i % (2 * KC_MSGS));
	if (!ret)
		ret = rdma_disconnect(a.id);
	while (!ret && !(ret = kc_wait(evd, &ev, false)) &&
	       ev.event_number == KEVD_DTO_COMPLETION_EVENT)
		n += ev.dto.status == KEVD_DTO_ERR_FLUSHED;
	if (!ret && ev.event_number == KEVD_CONNECTION_EVENT_DISCONNECTED &&
	    n == KC_FLUSH) {
		d->flushed += n;
	} else {
		pr_err("kevd-e2e-cm: %s: solicited-only EVD: %d flushes of %d, then %s %#x (%d)\n",
		       d->name, n, KC_FLUSH, ret ? "no event" : "event",
		       ret ? 0 : ev.event_number, ret);
		ret = -EIO;
	}
	kc_connection_end(d, &a, pid);
	d->p_evd = p_evd;
	err = kevd_free(evd);
	return ret ?: err;
}

static int kc_accept_round(struct kc_dev *d)
{
	struct rdma_cm_id *pid = NULL;
	struct kc_active a;
	int ret;

	ret = kc_establish(d, &a, &pid, true);
	if (!ret)
		ret = kc_traffic(d);
	if (!ret)
		ret = kc_flush_then_disconnect(d, &a, pid);
	kc_connection_end(d, &a, pid);
	return ret;
}

/*
 * An endpoint destroyed while connected, with its receive queue full, four
 * or more times what its EVD holds (a DAT ep_free without a disconnect):
 * kevd moves the QP to error and takes its flushes into the EVD before
 * the QP goes (a marker behind them, as ib_drain_qp() does), or they
 * would be converted after the QP is freed (siw flushes as it destroys a
 * QP) or dropped (rxe). The EVD grows to hold them: all of them are
 * there, in order, when kevd_cm_destroy_id() returns.
 */
static int kc_destroy_connected_round(struct kc_dev *d)
{
	struct rdma_cm_id *pid = NULL;
	struct kevd_event ev;
	struct kc_active a;
	int i = 0, n = 0, ret;

	ret = kc_establish(d, &a, &pid, true);
	if (!ret)
		ret = kc_traffic(d);
	/*
	 * Until the receive queue is full (rxe's takes more than asked):
	 * the drain's receive marker then waits for a flush to free a slot.
	 */
	while (!ret && i < KC_GONE &&
	       !kc_post(d, pid->qp, false, 5000 + i, i % (2 * KC_MSGS)))
		i++;
	if (!ret && i < KC_FLUSH) {
		pr_err("kevd-e2e-cm: %s: destroyed connected: %d receives posted\n",
		       d->name, i);
		ret = -EIO;
	}
	if (pid)
		kevd_cm_destroy_id(pid);
	while (!ret && !kevd_dequeue(d->p_evd, &ev)) {
		if (ev.event_number != KEVD_DTO_COMPLETION_EVENT ||
		    ev.dto.cookie != 5000 + n ||
		    ev.dto.status != KEVD_DTO_ERR_FLUSHED) {
			pr_err("kevd-e2e-cm: %s: destroyed connected: event %#x cookie %llu status %u after %d flushes\n",
			       d->name, ev.event_number, ev.dto.cookie,
			       ev.dto.status, n);
			ret = -EIO;
		}
		n++;
	}
	kc_connection_end(d, &a, NULL);
	d->destroyed_connected = n;
	if (!ret && n != i) {
		pr_err("kevd-e2e-cm: %s: destroyed connected: %d flushes of %d\n",
		       d->name, n, i);
		ret = -EIO;
	}
	return ret;
}

/* --- the device goes away (until_removed) -------------------------------- */

/* @n receives flushed on @evd, from @cookie on, in order. */
static int kc_flushed(struct kc_dev *d, struct kevd *evd, u64 cookie, u32 n)
{
	struct kevd_event ev;
	u32 i = 0;
	int ret;

	while (i < n) {
		ret = kc_wait(evd, &ev, false);
		if (ret)
			return ret;
		if (ev.event_number != KEVD_DTO_COMPLETION_EVENT)
			continue;	/* a connection event, if any comes */
		if (ev.dto.cookie != cookie + i ||
		    ev.dto.status != KEVD_DTO_ERR_FLUSHED) {
			pr_err("kevd-e2e-cm: %s: receive %llu: cookie %llu status %u\n",
			       d->name, cookie + i, ev.dto.cookie, ev.dto.status);
			return -EIO;
		}
		i++;
		d->flushed++;
	}
	return 0;
}

/*
 * A request to the listener left pending, with the QP its accepter made
 * on kevd_cr_id() completing into @evd and KC_HELD receives posted on it
 * (*@cr: its handle; @b: the requester, whose QP completes into the
 * requester's EVD).
 */
static noinline_for_stack int kc_pend(struct kc_dev *d, struct kc_active *b,
				      struct kevd *evd, void **cr)
{
	struct ib_qp_init_attr qp_attr;
	struct rdma_cm_id *id;
	int i, ret;

	ret = kc_connect(d, b, d->a_evd, port, 7, NULL);
	*cr = ret ? NULL : kc_request(d, 7);
	if (!*cr)
		return ret ?: -EIO;
	id = kevd_cr_id(*cr);
	if (!id)
		return -EINVAL;
	qp_attr = b->qp_attr;
	qp_attr.send_cq = kevd_cq(evd);
	qp_attr.recv_cq = kevd_cq(evd);
	ret = rdma_create_qp(id, d->pd, &qp_attr);
	/* receives posted before the accept, as a DAT endpoint has them */
	for (i = 0; i < KC_HELD && !ret; i++)
		ret = kc_post(d, id->qp, false, 500 + i, i);
	return ret;
}

/*
 * The pending request and its requester end here. With @removed, the
 * device went while the consumer had the request's id (kevd_cr_id()):
 * the request must still be pending, the consumer's to end (kevd must
 * not have destroyed the id under it). Its reject flushes the receives
 * posted on its QP to @evd and destroys the QP: @evd is free at once.
 */
static noinline_for_stack int kc_pend_end(struct kc_dev *d,
					  struct kc_active *b,
					  struct kevd *evd, void *cr,
					  bool removed)
{
	int ret = 0, err;

	if (removed && cr && !kevd_cr_id(cr)) {
		pr_err("kevd-e2e-cm-removal: %s: the removal ended a request whose id the consumer has\n",
		       d->name);
		ret = -EIO;
	}
	if (cr && kevd_cr_id(cr)) {
		err = kevd_cr_reject(cr, NULL, 0);
		/* its QP's receives come back flushed */
		if (removed && !ret)
			ret = err ?: kc_flushed(d, evd, 500, KC_HELD);
	}
	kc_active_end(b);
	if (IS_ERR_OR_NULL(evd))
		return ret;
	err = kevd_free(evd);
	if (err)
		pr_err("kevd-e2e-cm-removal: %s: the pending request's EVD: %d\n",
		       d->name, err);
	return ret ?: err;
}

/*
 * One connection held, KC_HELD receives posted on each side, and a
 * request left pending with its QP (kc_pend()), until the device goes:
 * each bound id's DEVICE_REMOVAL comes to the async EVD as
 * IA_CATASTROPHIC (rdma_cm then waits until the ids are destroyed, ib_core
 * until the device reference is dropped). Then the documented order from
 * this thread: both QPs to error, every receive back flushed, the ids and
 * their QPs destroyed, the pending request checked (kc_pend_end());
 * kc_teardown() does the rest.
 */
static int kc_hold_until_removed(struct kc_dev *d, int *catastrophic)
{
	struct ib_qp_attr qattr = { .qp_state = IB_QPS_ERR };
	struct rdma_cm_id *pid = NULL;
	struct kc_active a, *b;
	struct kevd *r_evd = NULL;
	struct kevd_event ev;
	void *cr = NULL;
	u32 nmore;
	int i, ret, err;

	b = kzalloc(sizeof(*b), GFP_KERNEL);	/* the stack holds one */
	if (!b)
		return -ENOMEM;
	ret = kc_establish(d, &a, &pid, true);
	if (!ret)
		ret = kc_traffic(d);
	for (i = 0; i < KC_HELD && !ret; i++) {
		ret = kc_post(d, a.id->qp, false, 300 + i, 2 * KC_MSGS + i);
		ret = ret ?: kc_post(d, pid->qp, false, 400 + i,
				     3 * KC_MSGS + i);
	}
	if (!ret) {
		r_evd = kc_evd(d, KEVD_DTO_FLAG, d->async);
		ret = IS_ERR(r_evd) ? PTR_ERR(r_evd) :
				      kc_pend(d, b, r_evd, &cr);
	}
	if (!ret) {
		pr_info("kevd-e2e-cm-removal device=%s running\n", d->name);
		ret = kevd_wait(d->async, min(until_removed, 4000U) * USEC_PER_SEC,
				1, &ev, &nmore);
	}
	if (!ret && ev.event_number != KEVD_ASYNC_ERROR_IA_CATASTROPHIC)
		ret = -EPROTO;
	if (!ret) {
		(*catastrophic)++;
		ib_modify_qp(a.id->qp, &qattr, IB_QP_STATE);
		ib_modify_qp(pid->qp, &qattr, IB_QP_STATE);
		ret = kc_flushed(d, d->a_evd, 300, KC_HELD);
		ret = ret ?: kc_flushed(d, d->p_evd, 400, KC_HELD);
	}
	kc_connection_end(d, &a, pid);
	err = kc_pend_end(d, b, r_evd, cr, !ret);
	kfree(b);
	return ret ?: err;
}

/* --- memory registration without a global rkey -------------------------- */

#define KC_MR_LEN	1024

/* One signaled work request of @qp and its completion on @evd. */
static int kc_wr(struct kc_dev *d, struct ib_qp *qp, struct kevd *evd,
		 const struct ib_send_wr *wr, u32 op, u32 *status)
{
	struct kevd_event ev;
	int ret;

	ret = ib_post_send(qp, wr, NULL);
	if (ret)
		return ret;
	/* a connection event first: the peer broke the connection (iWARP) */
	do {
		ret = kc_wait(evd, &ev, false);
	} while (!ret && ev.event_number != KEVD_DTO_COMPLETION_EVENT);
	if (ret)
		return ret;
	*status = ev.dto.status;
	if (ev.event_number != KEVD_DTO_COMPLETION_EVENT ||
	    ev.dto.cookie != wr->wr_id ||
	    (ev.dto.status == KEVD_DTO_SUCCESS && ev.dto.operation != op)) {
		pr_err("kevd-e2e-cm: %s: wr %llu: event %#x cookie %llu op %u\n",
		       d->name, wr->wr_id, ev.event_number, ev.dto.cookie,
		       ev.dto.operation);
		return -EIO;
	}
	return 0;
}

/* The accepter registers @mr over its buffer (access: remote read/write). */
static int kc_reg_mr(struct kc_dev *d, struct ib_qp *pqp, struct ib_mr *mr,
		     u64 cookie)
{
	struct ib_reg_wr reg = {
		.wr.opcode = IB_WR_REG_MR,
		.wr.wr_id = cookie,
		.wr.send_flags = IB_SEND_SIGNALED,
		.mr = mr,
		.key = mr->rkey,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ,
	};
	u32 status;
	int ret;

	ret = kc_wr(d, pqp, d->p_evd, &reg.wr, KEVD_DTO_LMR_FMR, &status);
	return ret ?: (status == KEVD_DTO_SUCCESS ? 0 : -EIO);
}

/* A new key for @mr (it was invalidated), registered again. */
static int kc_rekey(struct kc_dev *d, struct ib_qp *pqp, struct ib_mr *mr,
		    u64 cookie)
{
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	return kc_reg_mr(d, pqp, mr, cookie);
}

/* An RDMA WRITE or READ of 64 bytes at @offset into the accepter's MR. */
static int kc_rdma(struct kc_dev *d, struct ib_qp *aqp, struct ib_mr *mr,
		   bool write, u32 offset, u32 slot, u64 cookie, u32 *status)
{
	struct ib_sge sge = {
		.addr = d->dma + (u64)slot * KC_MSG,
		.length = KC_MSG,
		.lkey = d->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr.wr_id = cookie,
		.wr.sg_list = &sge,
		.wr.num_sge = 1,
		.wr.opcode = write ? IB_WR_RDMA_WRITE : IB_WR_RDMA_READ,
		.wr.send_flags = IB_SEND_SIGNALED,
		.remote_addr = mr->iova + offset,
		.rkey = mr->rkey,
	};

	return kc_wr(d, aqp, d->a_evd, &wr.wr,
		     write ? KEVD_DTO_RDMA_WRITE : KEVD_DTO_RDMA_READ, status);
}

/*
 * The requester writes into the accepter's registered buffer and reads it
 * back; a SEND with invalidate ends the registration (the accepter sees
 * RECEIVE_WITH_INVALIDATE); registered again under a new key, a write past
 * its end must fail.
 */
static int kc_mr_steps(struct kc_dev *d, struct ib_qp *aqp, struct ib_qp *pqp,
		       struct ib_mr *mr)
{
	struct ib_send_wr inv = {
		.wr_id = 403, .opcode = IB_WR_SEND_WITH_INV,
		.send_flags = IB_SEND_SIGNALED, .ex.invalidate_rkey = mr->rkey,
	};
	u8 *a_buf = d->buf;
	struct kevd_event ev;
	u32 status;
	int ret;

	ret = kc_reg_mr(d, pqp, mr, 400);
	kc_pattern(a_buf, KC_MSG, 6);
	memset(a_buf + KC_MSG, 0, KC_MSG);
	if (!ret)
		ret = kc_rdma(d, aqp, mr, true, 128, 0, 401, &status);
	if (!ret && status == KEVD_DTO_SUCCESS)
		ret = kc_rdma(d, aqp, mr, false, 128, 1, 402, &status);
	if (!ret && (status != KEVD_DTO_SUCCESS ||
		     !kc_pattern_ok(a_buf + KC_MSG, KC_MSG, KC_MSG, 6)))
		ret = -EIO;
	if (!ret)
		ret = kc_post(d, pqp, false, 404, 2);
	if (!ret)
		ret = kc_wr(d, aqp, d->a_evd, &inv, KEVD_DTO_SEND, &status);
	if (!ret)
		ret = kc_wait(d->p_evd, &ev, false);
	if (!ret && (ev.dto.cookie != 404 || ev.dto.status ||
		     ev.dto.operation != KEVD_DTO_RECEIVE_WITH_INVALIDATE))
		ret = -EIO;
	if (!ret)
		ret = kc_rekey(d, pqp, mr, 405);
	/* a local invalidate, then a new key again */
	if (!ret) {
		inv.wr_id = 406;
		inv.opcode = IB_WR_LOCAL_INV;
		inv.ex.invalidate_rkey = mr->rkey;
		ret = kc_wr(d, pqp, d->p_evd, &inv, KEVD_DTO_LMR_INVALIDATE,
			    &status);
	}
	if (!ret && status != KEVD_DTO_SUCCESS)
		ret = -EIO;
	if (!ret)
		ret = kc_rekey(d, pqp, mr, 407);
	if (!ret)
		d->mr_steps = 5;
	/* a write 64 bytes past the end */
	if (!ret)
		ret = kc_rdma(d, aqp, mr, true, KC_MR_LEN, 0, 408, &status);
	/* iWARP completes a WRITE once sent: a READ behind it sees the error */
	if (!ret && status == KEVD_DTO_SUCCESS) {
		ret = kc_rdma(d, aqp, mr, false, 0, 1, 409, &status);
		/*
		 * unless the peer's TERMINATE broke the connection before the
		 * READ was posted: siw then refuses the post
		 */
		if (ret == -ENOTCONN && rdma_protocol_iwarp(d->dev, 1)) {
			ret = 0;
			status = KEVD_DTO_ERR_FLUSHED;
		}
	}
	/*
	 * IB and RoCE report REMOTE_ACCESS. siw, iWARP, reports it with a
	 * TERMINATE that breaks the connection: the READ behind is flushed.
	 */
	if (!ret) {
		d->outside_status = status;
		if (rdma_protocol_iwarp(d->dev, 1) ?
		    status == KEVD_DTO_SUCCESS :
		    status != KEVD_DTO_ERR_REMOTE_ACCESS)
			ret = -EIO;
	}
	return ret;
}

static int kc_mr_round(struct kc_dev *d)
{
	struct rdma_cm_id *pid = NULL;
	struct scatterlist sg;
	struct ib_mr *mr = NULL;
	struct kc_active a;
	bool mapped;
	int ret, n;

	ret = kc_establish(d, &a, &pid, false);
	if (!ret) {
		mr = ib_alloc_mr(d->pd, IB_MR_TYPE_MEM_REG, 1);
		if (IS_ERR(mr)) {
			ret = PTR_ERR(mr);
			mr = NULL;
		}
	}
	sg_init_one(&sg, d->mr_buf, KC_MR_LEN);
	mapped = !ret && ib_dma_map_sg(d->dev, &sg, 1, DMA_BIDIRECTIONAL) == 1;
	if (!ret && !mapped)
		ret = -EIO;
	if (!ret) {
		n = ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE);
		ret = n == 1 ? 0 : -EIO;
	}
	if (!ret)
		ret = kc_mr_steps(d, a.id->qp, pid->qp, mr);
	kc_connection_end(d, &a, pid);
	if (mapped)
		ib_dma_unmap_sg(d->dev, &sg, 1, DMA_BIDIRECTIONAL);
	if (mr)
		ib_dereg_mr(mr);
	return ret;
}

/* The destroying thread of kc_destroy_round(). */
static int kc_destroyer(void *arg)
{
	struct kc_active *a = arg;

	WRITE_ONCE(a->destroying, true);
	kevd_cm_destroy_id(a->id);
	return 0;
}

/* Until @t, past its start, sleeps uninterruptibly; false if it does not. */
static bool kc_blocked(struct kc_active *a, struct task_struct *t)
{
	unsigned long end = jiffies + KC_WAIT;

	while (!READ_ONCE(a->destroying) ||
	       READ_ONCE(t->__state) != TASK_UNINTERRUPTIBLE) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/*
 * The requester's id destroyed by another thread while the consumer's
 * ROUTE_RESOLVED handler runs: the handler holds until that thread is
 * blocked on it (rdma_cm's handler mutex), then makes its QP and
 * connects (to a port nobody listens on). kevd_cm_destroy_id() must
 * destroy that QP with the id: else the QP leaks, and the EVD whose CQ
 * it completes into cannot be freed.
 */
static int kc_destroy_round(struct kc_dev *d)
{
	struct task_struct *t;
	struct kc_hold hold = { };
	struct kc_active a;
	struct kevd *evd;
	int ret, err;

	evd = kc_evd(d, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, d->async);
	if (IS_ERR(evd))
		return PTR_ERR(evd);
	init_completion(&hold.at_route);
	init_completion(&hold.go);
	ret = kc_connect(d, &a, evd, port + 1, 6, &hold);
	if (!ret && !wait_for_completion_timeout(&hold.at_route, KC_WAIT))
		ret = -ETIMEDOUT;
	if (ret) {
		complete(&hold.go);
		kc_active_end(&a);
		kevd_free(evd);
		return ret;
	}
	t = kthread_create(kc_destroyer, &a, "kevd_connect_destroy");
	if (IS_ERR(t)) {
		complete(&hold.go);
		kc_active_end(&a);
		kevd_free(evd);
		return PTR_ERR(t);
	}
	get_task_struct(t);
	wake_up_process(t);
	if (!kc_blocked(&a, t)) {
		pr_err("kevd-e2e-cm: %s: the destroying thread did not block\n",
		       d->name);
		ret = -EIO;
	}
	complete(&hold.go);
	kthread_stop(t);
	put_task_struct(t);
	if (!READ_ONCE(a.destroying))	/* stopped before it began */
		kc_active_end(&a);
	if (!ret && !a.qp_made) {
		pr_err("kevd-e2e-cm: %s: no QP made in the handler: %d\n",
		       d->name, a.err);
		ret = -EIO;
	}
	err = kevd_free(evd);
	ret = ret ?: err;
	if (!ret)
		d->destroyed++;
	else
		pr_err("kevd-e2e-cm: %s: destroyed in its handler: %d\n",
		       d->name, ret);
	return ret;
}

/*
 * The requester's ROUTE_RESOLVED handler makes its QP, posts KC_HELD
 * receives and returns non-zero (kc_give_up()): rdma_cm destroys the
 * id, and kevd ends the binding before, as kevd_cm_destroy_id() would.
 * The receives must come back flushed, in order, and the QP must be
 * gone: the EVD its CQ belongs to can be freed once the binding has let
 * it go.
 */
static int kc_end_in_handler_round(struct kc_dev *d)
{
	struct kc_hold hold = { .give_up = d };
	struct kc_active a = { };
	struct kevd *evd;
	unsigned long end;
	int ret, err;

	evd = kc_evd(d, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, d->async);
	if (IS_ERR(evd))
		return PTR_ERR(evd);
	ret = kc_connect(d, &a, evd, port, 9, &hold);
	if (ret) {
		kc_active_end(&a);
		kevd_free(evd);
		return ret;
	}
	if (!wait_for_completion_timeout(&a.failed, KC_WAIT)) {
		/* the id is still the binding's, the handler may still run */
		pr_err("kevd-e2e-cm: %s: no ROUTE_RESOLVED to give up on\n",
		       d->name);
		kc_active_end(&a);
		kevd_free(evd);
		return -ETIMEDOUT;
	}
	if (a.gave_up)
		a.id = NULL;		/* rdma_cm destroys it */
	else
		kc_active_end(&a);	/* resolving failed: a.err */
	if (!a.gave_up || !a.qp_made || a.err) {
		pr_err("kevd-e2e-cm: %s: giving up: QP %d, receives %d\n",
		       d->name, a.qp_made, a.err);
		ret = -EIO;
	}
	ret = ret ?: kc_flushed(d, evd, KC_GIVE_UP_COOKIE, KC_HELD);
	/* the binding lets the EVD go after the QP, as the handler returns */
	end = jiffies + KC_WAIT;
	for (;;) {
		err = kevd_free(evd);
		if (err != -EBUSY || !time_before(jiffies, end))
			break;
		schedule_timeout_uninterruptible(1);
	}
	if (err)
		pr_err("kevd-e2e-cm: %s: the EVD of an id given up: %d\n",
		       d->name, err);
	ret = ret ?: err;
	if (!ret)
		d->ended++;
	return ret;
}

/* A request to a port nobody listens on: record what the transport says. */
static void kc_no_listener(struct kc_dev *d)
{
	struct kevd_event ev;
	struct kc_active a;
	u32 nmore;
	int i, ret, err;

	err = kc_connect(d, &a, d->a_evd, port + 1, 5, NULL);
	ret = err ?: -ETIMEDOUT;
	/* an event, or the connect failing in the handler: look for both */
	for (i = 0; !err && i < 300 && !completion_done(&a.failed); i++) {
		ret = kevd_wait(d->a_evd, 100 * USEC_PER_MSEC, 1, &ev, &nmore);
		if (ret == -ETIMEDOUT)
			continue;
		/* not the answer: what the last connection left behind */
		if (!ret && (ev.event_number == KEVD_DTO_COMPLETION_EVENT ||
			     ev.event_number ==
			     KEVD_CONNECTION_EVENT_DISCONNECTED)) {
			ret = -ETIMEDOUT;
			continue;
		}
		break;
	}
	if (!ret)
		snprintf(d->no_listener, sizeof(d->no_listener), "%#x",
			 ev.event_number);
	else if (completion_done(&a.failed))
		snprintf(d->no_listener, sizeof(d->no_listener), "connect:%d",
			 a.err);
	else
		snprintf(d->no_listener, sizeof(d->no_listener), "wait:%d",
			 ret);
	kc_active_end(&a);
}

/* A listener on @at, bound with @attr, in *@lid. */
static int kc_listen_at(struct kc_dev *d, struct rdma_cm_id **lid, u16 at,
			const struct kevd_cm_attr *attr)
{
	struct sockaddr_in6 sin = d->sin;
	int ret;

	*lid = rdma_create_id(&init_net, kc_handler, NULL, RDMA_PS_TCP,
			      IB_QPT_RC);
	if (IS_ERR(*lid)) {
		ret = PTR_ERR(*lid);
		*lid = NULL;
		return ret;
	}
	ret = kevd_cm_bind(*lid, attr);
	if (ret) {
		rdma_destroy_id(*lid);
		*lid = NULL;
		return ret;
	}
	sin.sin6_port = htons(at);
	ret = rdma_bind_addr(*lid, (struct sockaddr *)&sin);
	return ret ?: rdma_listen(*lid, 4);
}

static int kc_listen(struct kc_dev *d)
{
	struct kevd_cm_attr attr = {
		.cr_evd = d->cr_evd, .async_evd = d->async, .sp = d,
	};

	return kc_listen_at(d, &d->lid, port, &attr);
}

/*
 * The requester of @a refused by kevd, not by a consumer:
 * NON_PEER_REJECTED (what earlier connections left behind passed over).
 */
static int kc_refused(struct kc_dev *d, struct kc_active *a, const char *what)
{
	struct kevd_event ev;
	int ret;

	do {
		ret = kc_wait(d->a_evd, &ev, true);
	} while (!ret && (ev.event_number == KEVD_CONNECTION_EVENT_DISCONNECTED ||
			  ev.connection.ep != a));
	if (!ret && ev.event_number == KEVD_CONNECTION_EVENT_NON_PEER_REJECTED) {
		d->refused++;
		return 0;
	}
	pr_err("kevd-e2e-cm: %s: %s: got %d, event %#x\n", d->name, what, ret,
	       ret ? 0 : ev.event_number);
	return -EIO;
}

/*
 * Step 8: a listener without a CR EVD refuses a request; destroying the
 * listener refuses the request pending on it. The listener of steps 1 to
 * 6 goes here.
 */
static int kc_refused_round(struct kc_dev *d)
{
	struct kevd_cm_attr no_cr = { .conn_evd = d->p_evd, .sp = d };
	struct rdma_cm_id *lid = NULL;
	struct kc_active a;
	void *cr;
	int ret;

	ret = kc_listen_at(d, &lid, port + 2, &no_cr);
	if (!ret) {
		ret = kc_connect(d, &a, d->a_evd, port + 2, 8, NULL);
		ret = ret ?: kc_refused(d, &a, "no CR EVD");
		kc_active_end(&a);
	}
	if (lid)
		kevd_cm_destroy_id(lid);
	if (ret)
		return ret;
	ret = kc_connect(d, &a, d->a_evd, port, 9, NULL);
	cr = ret ? NULL : kc_request(d, 9);
	if (cr) {
		kevd_cm_destroy_id(d->lid);
		d->lid = NULL;
		ret = kc_refused(d, &a, "listener destroyed");
		if (!ret && kevd_cr_reject(cr, NULL, 0) != -EINVAL)
			ret = -EIO;	/* its handle went with it */
	}
	kc_active_end(&a);
	return ret ?: (cr ? 0 : -EIO);
}

static int kc_setup(struct kc_dev *d, char *addr)
{
	struct net_device *ndev;

	d->sin.sin6_family = AF_INET6;
	if (!in6_pton(addr, -1, d->sin.sin6_addr.s6_addr, -1, NULL))
		return -EINVAL;
	d->dev = ib_device_get_by_name(d->name, RDMA_DRIVER_UNKNOWN);
	if (!d->dev)
		return -ENODEV;
	ndev = ib_device_get_netdev(d->dev, 1);
	if (!ndev)
		return -ENODEV;
	d->sin.sin6_scope_id = ndev->ifindex;
	dev_put(ndev);
	d->pd = ib_alloc_pd(d->dev, 0);
	if (IS_ERR(d->pd)) {
		int ret = PTR_ERR(d->pd);

		d->pd = NULL;
		return ret;
	}
	d->buf = kevd_rc_buf_alloc(4 * KC_MSGS * KC_MSG);
	d->mr_buf = kevd_rc_buf_alloc(PAGE_SIZE);	/* one page */
	if (!d->buf || !d->mr_buf)
		return -ENOMEM;
	d->dma = ib_dma_map_single(d->dev, d->buf, 4 * KC_MSGS * KC_MSG,
				   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(d->dev, d->dma)) {
		d->dma = 0;
		return -EIO;
	}
	d->async = kc_evd(d, KEVD_ASYNC_FLAG, NULL);
	d->cr_evd = kc_evd(d, KEVD_CR_FLAG, d->async);
	d->a_evd = kc_evd(d, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, d->async);
	d->p_evd = kc_evd(d, KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG, d->async);
	if (IS_ERR(d->async) || IS_ERR(d->cr_evd) || IS_ERR(d->a_evd) ||
	    IS_ERR(d->p_evd))
		return -ENOMEM;
	return kc_listen(d);
}

static void kc_free_evd(struct kevd **evd)
{
	if (!IS_ERR_OR_NULL(*evd))
		kevd_free(*evd);
	*evd = NULL;
}

static void kc_teardown(struct kc_dev *d)
{
	if (d->lid)
		kevd_cm_destroy_id(d->lid);
	kc_free_evd(&d->p_evd);
	kc_free_evd(&d->a_evd);
	kc_free_evd(&d->cr_evd);
	kc_free_evd(&d->async);
	if (d->dma)
		ib_dma_unmap_single(d->dev, d->dma, 4 * KC_MSGS * KC_MSG,
				    DMA_BIDIRECTIONAL);
	if (d->buf)
		free_pages_exact(d->buf, 4 * KC_MSGS * KC_MSG);
	if (d->mr_buf)
		free_pages_exact(d->mr_buf, PAGE_SIZE);
	if (d->pd)
		ib_dealloc_pd(d->pd);
	if (d->dev)
		ib_device_put(d->dev);
}

/* until_removed: the held connection, the teardown, the line. */
static int kc_run_until_removed(struct kc_dev *d, int ret)
{
	struct kevd_event ev;
	int catastrophic = 0;

	if (!ret)
		ret = kc_hold_until_removed(d, &catastrophic);
	if (d->lid)
		kevd_cm_destroy_id(d->lid);
	d->lid = NULL;
	/* the other ids' IA_CATASTROPHIC (the listener's, the other side's) */
	while (!IS_ERR_OR_NULL(d->async) && !kevd_dequeue(d->async, &ev))
		if (ev.event_number == KEVD_ASYNC_ERROR_IA_CATASTROPHIC)
			catastrophic++;
	pr_info("kevd-e2e-cm-removal device=%s catastrophic=%d flushed=%d %s rc=%d\n",
		d->name, catastrophic, d->flushed, ret ? "failed" : "ok", ret);
	kc_teardown(d);
	kfree(d);
	return ret;
}

static int kc_run(char *spec)
{
	struct kc_dev *d;
	char *at = strchr(spec, '@');
	unsigned int i = 0;
	int ret;

	if (!at) {
		pr_err("kevd_connect: devices: '%s' is not <ibdev>@<IPv6 address>\n",
		       spec);
		return -EINVAL;
	}
	*at = '\0';
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	d->name = spec;
	strscpy(d->no_listener, "none", sizeof(d->no_listener));
	ret = kc_setup(d, at + 1);
	if (until_removed)
		return kc_run_until_removed(d, ret);
	if (!ret)
		ret = kc_reject_round(d);
	for (i = 0; i < cycles && !ret; i++) {
		ret = kc_accept_round(d);
		/* on the first two rounds, then one in ten */
		if (!ret && (i < 2 || i % 10 == 5))
			ret = kc_solicited_round(d);
	}
	if (!ret)
		ret = kc_mr_round(d);
	if (!ret)
		ret = kc_destroy_round(d);
	if (!ret)
		ret = kc_end_in_handler_round(d);
	if (!ret)
		ret = kc_destroy_connected_round(d);
	if (!ret)
		kc_no_listener(d);
	if (!ret)
		ret = kc_refused_round(d);
	pr_info("kevd-e2e-cm device=%s cycles=%u cr=%d established=%d peer_rejected=%d disconnected=%d flushed=%d after_disconnect=%d sends=%d recvs=%d mr_steps=%d outside_mr=%u destroyed_in_handler=%d ended_in_handler=%d destroyed_connected=%d no_listener=%s refused=%d %s rc=%d\n",
		d->name, i, d->cr, d->established, d->peer_rejected,
		d->disconnected, d->flushed, d->after, d->sends, d->recvs,
		d->mr_steps, d->outside_status, d->destroyed, d->ended,
		d->destroyed_connected, d->no_listener, d->refused,
		ret ? "failed" : "ok", ret);
	kc_teardown(d);
	kfree(d);
	return ret;
}

static int __init kc_init(void)
{
	char *list, *spec, *p;
	int ret = 0, rc;

	list = kstrdup(devices, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	p = list;
	while ((spec = strsep(&p, ",")) != NULL) {
		if (!*spec)
			continue;
		rc = kc_run(spec);
		ret = ret ?: rc;
	}
	kfree(list);
	return ret ? -EIO : 0;
}

static void __exit kc_exit(void)
{
}

module_init(kc_init);
module_exit(kc_exit);
MODULE_DESCRIPTION("kevd sample: a connection lifecycle through the CM binding");
MODULE_LICENSE("Dual BSD/GPL");
