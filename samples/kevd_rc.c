// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_rc: a connected pair of RC QPs on one RDMA device (see kevd_rc.h),
 * shared by kevd_pingpong and kevd_bench.
 *
 * Locking: none of its own. The CM handler (rdma_cm's thread) writes the
 * side-1 id and QP at CONNECT_REQUEST, before it completes @done; the
 * caller reads them after waiting for @done.
 */
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <rdma/ib_cache.h>
#include "kevd_rc.h"

#define KEVD_RC_WAIT	(30 * HZ)

/* --- RoCE: raw ib_modify_qp() ----------------------------------------- */

static int kevd_rc_raw_connect(struct kevd_rc *rc)
{
	struct ib_qp_attr attr;
	union ib_gid gid;
	int ret, i;

	for (i = 0; i < 2; i++) {
		rc->qp[i] = ib_create_qp(rc->pd, &rc->init[i]);
		if (IS_ERR(rc->qp[i])) {
			ret = PTR_ERR(rc->qp[i]);
			rc->qp[i] = NULL;
			return ret;
		}
	}
	ret = rdma_query_gid(rc->dev, 1, 0, &gid);
	if (ret)
		return ret;
	for (i = 0; i < 2; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IB_QPS_INIT;
		attr.port_num = 1;
		attr.qp_access_flags = IB_ACCESS_LOCAL_WRITE |
				       IB_ACCESS_REMOTE_WRITE |
				       IB_ACCESS_REMOTE_READ;
		ret = ib_modify_qp(rc->qp[i], &attr, IB_QP_STATE |
				   IB_QP_PKEY_INDEX | IB_QP_PORT |
				   IB_QP_ACCESS_FLAGS);
		if (ret)
			return ret;
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IB_QPS_RTR;
		attr.path_mtu = IB_MTU_1024;
		attr.dest_qp_num = rc->qp[!i]->qp_num;
		attr.max_dest_rd_atomic = 1;
		attr.min_rnr_timer = 12;
		attr.ah_attr.type = rdma_ah_find_type(rc->dev, 1);
		rdma_ah_set_port_num(&attr.ah_attr, 1);
		rdma_ah_set_grh(&attr.ah_attr, &gid, 0, 0, 1, 0);
		/* Kernel users resolve the destination MAC themselves. */
		rdma_get_ll_mac((struct in6_addr *)gid.raw,
				attr.ah_attr.roce.dmac);
		ret = ib_modify_qp(rc->qp[i], &attr, IB_QP_STATE | IB_QP_AV |
				   IB_QP_PATH_MTU | IB_QP_DEST_QPN |
				   IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
				   IB_QP_MIN_RNR_TIMER);
		if (ret)
			return ret;
	}
	for (i = 0; i < 2; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IB_QPS_RTS;
		attr.timeout = 14;
		attr.retry_cnt = 7;
		attr.rnr_retry = 7;
		attr.max_rd_atomic = 1;
		ret = ib_modify_qp(rc->qp[i], &attr, IB_QP_STATE |
				   IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
				   IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
				   IB_QP_MAX_QP_RD_ATOMIC);
		if (ret)
			return ret;
	}
	return 0;
}

/* --- iWARP: rdma_cm ---------------------------------------------------- */

static void kevd_rc_count(struct kevd_rc *rc, int side,
			  enum rdma_cm_event_type event, atomic_t *sides)
{
	if (rc->cm_event)
		rc->cm_event(rc, side, event);
	if (atomic_inc_return(sides) == 2)
		complete(&rc->done);
}

static int kevd_rc_cm_handler(struct rdma_cm_id *id,
			      struct rdma_cm_event *event)
{
	struct kevd_rc *rc = id->context;
	int side = id == rc->cm[0] ? 0 : 1;
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	int ret = 0;

	switch (event->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, 2000);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (id->device != rc->dev) {
			ret = -ENODEV;
			break;
		}
		rc->cm[side] = id;
		ret = rdma_create_qp(id, rc->pd, &rc->init[side]);
		if (ret)
			break;
		rc->qp[side] = id->qp;
		if (side == 0)
			ret = rdma_connect_locked(id, &param);
		else
			ret = rdma_accept(id, &param);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		kevd_rc_count(rc, side, event->event, &rc->established);
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
		kevd_rc_count(rc, side, event->event, &rc->disconnected);
		return 0;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		return 0;
	default:
		ret = -ECONNREFUSED;
		break;
	}
	if (ret) {
		pr_err("kevd_rc: %s: rdma_cm event %d: %d\n",
		       dev_name(&rc->dev->dev), event->event, ret);
		rc->err = ret;
		complete(&rc->done);
		/* A failed request id is not ours to keep: the CM destroys it. */
		if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			rc->cm[1] = NULL;
			rc->qp[1] = NULL;
			return ret;
		}
	}
	return 0;
}

static int kevd_rc_fail(struct kevd_rc *rc, const char *what, int ret)
{
	pr_err("kevd_rc: %s: %s: %d\n", dev_name(&rc->dev->dev), what, ret);
	return ret;
}

static int kevd_rc_cm_connect(struct kevd_rc *rc)
{
	struct sockaddr_in6 sin = {
		.sin6_family = AF_INET6,
		.sin6_port = htons(rc->port),
	};
	struct sockaddr_in6 src;
	struct net_device *ndev;
	struct rdma_cm_id *id;
	int ret;

	if (!rc->addr || !in6_pton(rc->addr, -1, sin.sin6_addr.s6_addr, -1,
				   NULL))
		return kevd_rc_fail(rc, "bad address", -EINVAL);
	ndev = ib_device_get_netdev(rc->dev, 1);
	if (!ndev)
		return kevd_rc_fail(rc, "no netdev", -ENODEV);
	sin.sin6_scope_id = ndev->ifindex;
	dev_put(ndev);
	id = rdma_create_id(&init_net, kevd_rc_cm_handler, rc, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	rc->listen = id;
	ret = rdma_bind_addr(id, (struct sockaddr *)&sin);
	if (ret)
		return kevd_rc_fail(rc, "rdma_bind_addr", ret);
	ret = rdma_listen(id, 1);
	if (ret)
		return kevd_rc_fail(rc, "rdma_listen", ret);
	id = rdma_create_id(&init_net, kevd_rc_cm_handler, rc, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	rc->cm[0] = id;
	src = sin;
	src.sin6_port = 0;
	ret = rdma_bind_addr(id, (struct sockaddr *)&src);
	if (ret)
		return kevd_rc_fail(rc, "rdma_bind_addr (client)", ret);
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000);
	if (ret)
		return kevd_rc_fail(rc, "rdma_resolve_addr", ret);
	if (!wait_for_completion_timeout(&rc->done, KEVD_RC_WAIT))
		return -ETIMEDOUT;
	return rc->err;
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
	init_completion(&rc->done);
	atomic_set(&rc->established, 0);
	atomic_set(&rc->disconnected, 0);
	rc->err = 0;
	rc->iwarp = rdma_protocol_iwarp(rc->dev, 1);
	return rc->iwarp ? kevd_rc_cm_connect(rc) : kevd_rc_raw_connect(rc);
}
EXPORT_SYMBOL_GPL(kevd_rc_connect);

/**
 * kevd_rc_disconnect() - move both QPs to the error state.
 * @rc: a connected pair.
 *
 * On iWARP the connection is closed first (rdma_disconnect()); each side
 * then reports DISCONNECTED (kevd_rc_wait_disconnected()). Outstanding
 * work requests are flushed to their CQs.
 *
 * Context: process context; may sleep.
 */
void kevd_rc_disconnect(struct kevd_rc *rc)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int i;

	if (rc->iwarp && rc->cm[0] && rc->qp[0]) {
		reinit_completion(&rc->done);
		rdma_disconnect(rc->cm[0]);
	}
	for (i = 0; i < 2; i++)
		if (rc->qp[i])
			ib_modify_qp(rc->qp[i], &attr, IB_QP_STATE);
}
EXPORT_SYMBOL_GPL(kevd_rc_disconnect);

/**
 * kevd_rc_wait_disconnected() - wait for both sides' DISCONNECTED.
 * @rc: a pair after kevd_rc_disconnect().
 * @timeout: in jiffies.
 *
 * Context: process context; sleeps.
 * Return: 0 (at once on RoCE), or -ETIMEDOUT.
 */
int kevd_rc_wait_disconnected(struct kevd_rc *rc, unsigned long timeout)
{
	if (!rc->iwarp)
		return 0;
	return wait_for_completion_timeout(&rc->done, timeout) ? 0 : -ETIMEDOUT;
}
EXPORT_SYMBOL_GPL(kevd_rc_wait_disconnected);

/**
 * kevd_rc_destroy() - destroy the QPs and the CM ids.
 * @rc: the pair, connected or not, or after a failed kevd_rc_connect().
 *
 * Context: process context; sleeps.
 */
void kevd_rc_destroy(struct kevd_rc *rc)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (rc->cm[i]) {
			if (rc->qp[i])
				rdma_destroy_qp(rc->cm[i]);
			rdma_destroy_id(rc->cm[i]);
		} else if (rc->qp[i]) {
			ib_destroy_qp(rc->qp[i]);
		}
		rc->cm[i] = NULL;
		rc->qp[i] = NULL;
	}
	if (rc->listen) {
		rdma_destroy_id(rc->listen);
		rc->listen = NULL;
	}
}
EXPORT_SYMBOL_GPL(kevd_rc_destroy);

MODULE_DESCRIPTION("kevd samples: a loopback pair of connected RC QPs");
MODULE_LICENSE("Dual BSD/GPL");
