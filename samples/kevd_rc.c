// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_rc: a connected pair of RC QPs on one RDMA device (see kevd_rc.h),
 * shared by kevd_pingpong and kevd_bench; a consumer of kevd's CM binding.
 *
 * Locking: none of its own. rdma_cm's handler (kevd_rc_handler(), for
 * side 0's connect) writes only @err; the caller reads it after its wait
 * for an event ran out.
 */
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include "kevd_compat.h"
#include "kevd_rc.h"

#define KEVD_RC_WAIT_US	(30 * USEC_PER_SEC)

static const struct rdma_conn_param kevd_rc_param = {
	.responder_resources = 1,
	.initiator_depth = 1,
	.retry_count = 7,
	.rnr_retry_count = 7,
};

static int kevd_rc_fail(struct kevd_rc *rc, const char *what, int ret)
{
	pr_err("kevd_rc: %s: %s: %d\n", dev_name(&rc->dev->dev), what, ret);
	return ret;
}

/* Side 0's connect, and nothing for the listener (kevd maps the rest). */
static int kevd_rc_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kevd_rc *rc = kevd_cm_context(id);
	struct rdma_conn_param param = kevd_rc_param;
	int ret = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, 2000);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rdma_create_qp(id, rc->pd, &rc->init[0]);
		if (!ret)
			ret = rdma_connect_locked(id, &param);
		break;
	default:
		break;
	}
	if (ret)
		WRITE_ONCE(rc->err, ret);
	return 0;
}

/* The next event of @evd, which must be @number for side @side's QP. */
static int kevd_rc_expect(struct kevd_rc *rc, struct kevd *evd, u32 number,
			  int side, struct kevd_event *ev)
{
	u32 nmore;
	int ret;

	ret = kevd_wait(evd, KEVD_RC_WAIT_US, 1, ev, &nmore);
	if (ret)
		return kevd_rc_fail(rc, "no CM event", READ_ONCE(rc->err) ?: ret);
	if (ev->event_number != number ||
	    (side >= 0 && ev->connection.ep != &rc->qp[side])) {
		pr_err("kevd_rc: %s: CM event %#x, want %#x\n",
		       dev_name(&rc->dev->dev), ev->event_number, number);
		return -EPROTO;
	}
	return 0;
}

static struct kevd *kevd_rc_evd(u32 flags)
{
	struct kevd_attr attr;

	kevd_attr_init(&attr);
	attr.qlen = 8;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	return kevd_create(NULL, &attr);
}

static struct rdma_cm_id *kevd_rc_id(struct kevd_rc *rc,
				     const struct kevd_cm_attr *attr)
{
	struct rdma_cm_id *id;
	int ret;

	id = rdma_create_id(&init_net, kevd_rc_handler, rc, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return id;
	ret = kevd_cm_bind(id, attr);
	if (ret) {
		rdma_destroy_id(id);
		return ERR_PTR(ret);
	}
	return id;
}

static int kevd_rc_addr(struct kevd_rc *rc, struct sockaddr_in6 *sin)
{
	struct net_device *ndev;

	memset(sin, 0, sizeof(*sin));
	sin->sin6_family = AF_INET6;
	sin->sin6_port = htons(rc->port);
	if (!rc->addr || !in6_pton(rc->addr, -1, sin->sin6_addr.s6_addr, -1,
				   NULL))
		return kevd_rc_fail(rc, "bad address", -EINVAL);
	ndev = ib_device_get_netdev(rc->dev, 1);
	if (!ndev)
		return kevd_rc_fail(rc, "no netdev", -ENODEV);
	sin->sin6_scope_id = ndev->ifindex;
	dev_put(ndev);
	return 0;
}

/* Side 1 listens; side 0 connects (its handler); side 1 accepts. */
static int kevd_rc_cm_connect(struct kevd_rc *rc)
{
	struct kevd_cm_attr lattr = { .cr_evd = rc->cr_evd };
	struct kevd_cm_attr attr = { .conn_evd = rc->conn_evd };
	struct rdma_conn_param param = kevd_rc_param;
	struct sockaddr_in6 sin, src;
	struct kevd_event ev;
	int ret;

	ret = kevd_rc_addr(rc, &sin);
	if (ret)
		return ret;
	rc->listen = kevd_rc_id(rc, &lattr);
	if (IS_ERR(rc->listen)) {
		ret = PTR_ERR(rc->listen);
		rc->listen = NULL;
		return ret;
	}
	ret = rdma_bind_addr(rc->listen, (struct sockaddr *)&sin);
	if (ret)
		return kevd_rc_fail(rc, "rdma_bind_addr", ret);
	ret = rdma_listen(rc->listen, 1);
	if (ret)
		return kevd_rc_fail(rc, "rdma_listen", ret);

	attr.ep = &rc->qp[0];
	rc->cm[0] = kevd_rc_id(rc, &attr);
	if (IS_ERR(rc->cm[0])) {
		ret = PTR_ERR(rc->cm[0]);
		rc->cm[0] = NULL;
		return ret;
	}
	src = sin;
	src.sin6_port = 0;
	ret = rdma_resolve_addr(rc->cm[0], (struct sockaddr *)&src,
				(struct sockaddr *)&sin, 2000);
	if (ret)
		return kevd_rc_fail(rc, "rdma_resolve_addr", ret);

	ret = kevd_rc_expect(rc, rc->cr_evd, KEVD_CONNECTION_REQUEST_EVENT,
			     -1, &ev);
	if (ret)
		return ret;
	attr.ep = &rc->qp[1];
	ret = kevd_cr_accept(ev.cr.cr, &attr, rc->pd, &rc->init[1], &param,
			     &rc->cm[1]);
	if (ret)
		return kevd_rc_fail(rc, "kevd_cr_accept", ret);
	rc->qp[0] = rc->cm[0]->qp;
	rc->qp[1] = rc->cm[1]->qp;
	/* both sides, in whichever order rdma_cm reports them */
	ret = kevd_rc_expect(rc, rc->conn_evd,
			     KEVD_CONNECTION_EVENT_ESTABLISHED, -1, &ev);
	if (!ret)
		ret = kevd_rc_expect(rc, rc->conn_evd,
				     KEVD_CONNECTION_EVENT_ESTABLISHED, -1,
				     &ev);
	return ret;
}

/**
 * kevd_rc_connect() - create the two QPs and connect them.
 * @rc: the pair; the caller's fields set, the others zero.
 *
 * On failure, kevd_rc_destroy() releases what was made.
 *
 * Context: process context; sleeps.
 * Return: 0, or a negative errno.
 */
int kevd_rc_connect(struct kevd_rc *rc)
{
	might_sleep();
	rc->err = 0;
	rc->iwarp = rdma_protocol_iwarp(rc->dev, 1);
	rc->cr_evd = kevd_rc_evd(KEVD_CR_FLAG);
	rc->conn_evd = kevd_rc_evd(KEVD_CONNECTION_FLAG);
	if (IS_ERR(rc->cr_evd) || IS_ERR(rc->conn_evd))
		return -ENOMEM;
	return kevd_rc_cm_connect(rc);
}
EXPORT_SYMBOL_GPL(kevd_rc_connect);

/**
 * kevd_rc_disconnect() - close the connection and move both QPs to error.
 * @rc: a connected pair.
 *
 * Each side then reports DISCONNECTED (kevd_rc_wait_disconnected()).
 * Outstanding work requests are flushed to their CQs.
 *
 * Context: process context; may sleep.
 */
void kevd_rc_disconnect(struct kevd_rc *rc)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int i;

	if (rc->cm[0] && rc->cm[1])
		rdma_disconnect(rc->cm[0]);
	for (i = 0; i < 2; i++)
		if (rc->qp[i])
			ib_modify_qp(rc->qp[i], &attr, IB_QP_STATE);
}
EXPORT_SYMBOL_GPL(kevd_rc_disconnect);

/**
 * kevd_rc_wait_disconnected() - wait for both sides' DISCONNECTED.
 * @rc: a pair after kevd_rc_disconnect().
 * @timeout: in jiffies, for each side.
 *
 * Context: process context; sleeps.
 * Return: 0, -ETIMEDOUT, or -EPROTO for another event.
 */
int kevd_rc_wait_disconnected(struct kevd_rc *rc, unsigned long timeout)
{
	struct kevd_event ev;
	u32 nmore, seen = 0;
	int i, ret;

	for (i = 0; i < 2; i++) {
		ret = kevd_wait(rc->conn_evd, jiffies_to_usecs(timeout), 1, &ev,
				&nmore);
		if (ret)
			return ret;
		if (ev.event_number != KEVD_CONNECTION_EVENT_DISCONNECTED)
			return -EPROTO;
		seen |= ev.connection.ep == &rc->qp[0] ? 1 : 2;
	}
	return seen == 3 ? 0 : -EPROTO;
}
EXPORT_SYMBOL_GPL(kevd_rc_wait_disconnected);

/**
 * kevd_rc_destroy() - destroy the QPs, the CM ids and the EVDs.
 * @rc: the pair, connected or not, or after a failed kevd_rc_connect().
 *
 * Context: process context; sleeps.
 */
void kevd_rc_destroy(struct kevd_rc *rc)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (rc->cm[i])
			kevd_cm_destroy_id(rc->cm[i]);	/* and its QP */
		rc->cm[i] = NULL;
		rc->qp[i] = NULL;
	}
	if (rc->listen)
		kevd_cm_destroy_id(rc->listen);
	rc->listen = NULL;
	if (!IS_ERR_OR_NULL(rc->cr_evd))
		kevd_free(rc->cr_evd);
	if (!IS_ERR_OR_NULL(rc->conn_evd))
		kevd_free(rc->conn_evd);
	rc->cr_evd = NULL;
	rc->conn_evd = NULL;
}
EXPORT_SYMBOL_GPL(kevd_rc_destroy);

MODULE_DESCRIPTION("kevd samples: a loopback pair of connected RC QPs");
MODULE_LICENSE("Dual BSD/GPL");
