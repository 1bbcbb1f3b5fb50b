/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd_rc: a connected pair of RC QPs on one RDMA device, for kevd's
 * samples and benchmark (module kevd_rc).
 *
 *   - RoCE (rxe): ib_create_qp() and raw ib_modify_qp() to RTS with the
 *     port's GID (kernel users resolve the destination MAC themselves);
 *   - iWARP (siw): rdma_cm from @addr to @addr (an IPv6 address of the
 *     device's netdev: rdma_cm refuses lo and 127/8 elsewhere), the QPs
 *     created in the CM handler.
 *
 * The caller fills @dev, @pd, @init (CQs, capabilities, qp_context; side
 * 0 connects, side 1 accepts), @addr and @port, and may set @cm_event to
 * hear ESTABLISHED and DISCONNECTED per side (from the CM's thread).
 *
 * Context: process context; every call may sleep. One pair is used by
 * one thread at a time; only the CM handler runs beside it.
 */
#ifndef _KEVD_RC_H
#define _KEVD_RC_H

#include <linux/completion.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

/**
 * struct kevd_rc - a loopback RC QP pair.
 * @dev: the device (caller).
 * @pd: the protection domain of both QPs (caller).
 * @init: the QPs' attributes, side 0 and side 1 (caller).
 * @addr: IPv6 address for rdma_cm on iWARP (caller).
 * @port: TCP port for rdma_cm on iWARP (caller).
 * @cm_event: called with RDMA_CM_EVENT_ESTABLISHED or _DISCONNECTED and
 *	the side, or NULL (caller).
 * @iwarp: the device is iWARP (set by kevd_rc_connect()).
 * @qp: the QPs (set by kevd_rc_connect()).
 * @cm: the CM ids of the two sides (iWARP).
 * @listen: the listening CM id (iWARP).
 * @done: completed when both sides are established or disconnected, or
 *	on a CM error.
 * @established: sides established.
 * @disconnected: sides disconnected.
 * @err: the CM error, or 0.
 */
struct kevd_rc {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_qp_init_attr init[2];
	const char *addr;
	u16 port;
	void (*cm_event)(struct kevd_rc *rc, int side,
			 enum rdma_cm_event_type event);

	bool iwarp;
	struct ib_qp *qp[2];

	struct rdma_cm_id *cm[2];
	struct rdma_cm_id *listen;
	struct completion done;
	atomic_t established;
	atomic_t disconnected;
	int err;
};

int kevd_rc_connect(struct kevd_rc *rc);
void kevd_rc_disconnect(struct kevd_rc *rc);
int kevd_rc_wait_disconnected(struct kevd_rc *rc, unsigned long timeout);
void kevd_rc_destroy(struct kevd_rc *rc);

#endif /* _KEVD_RC_H */
