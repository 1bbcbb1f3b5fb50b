/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd_rc: a connected pair of RC QPs on one RDMA device, for kevd's
 * samples and benchmark (module kevd_rc), through kevd's CM binding
 * (Documentation/kevd/cm.rst) on any transport: rdma_cm from @addr to
 * @addr, an IPv6 address of the device's netdev (rdma_cm refuses lo and
 * 127/8 elsewhere). Side 1 listens and accepts the request of side 0.
 *
 * The caller fills @dev, @pd, @init (CQs, capabilities, qp_context), @addr
 * and @port. kevd_rc keeps its own CR and connection EVDs: it waits there
 * for the request, both ESTABLISHED and both DISCONNECTED, and checks
 * that each names its side.
 *
 * Context: process context; every call may sleep. One pair is used by
 * one thread at a time; only rdma_cm's handler runs beside it.
 */
#ifndef _KEVD_RC_H
#define _KEVD_RC_H

#include <linux/gfp.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <kevd/kevd.h>

/**
 * struct kevd_rc - a loopback RC QP pair.
 * @dev: the device (caller).
 * @pd: the protection domain of both QPs (caller).
 * @init: the QPs' attributes, side 0 and side 1 (caller).
 * @addr: IPv6 address of the device's netdev, for rdma_cm (caller).
 * @port: TCP port of the listener (caller).
 * @iwarp: the device is iWARP (set by kevd_rc_connect()).
 * @qp: the QPs (set by kevd_rc_connect()).
 * @cm: the CM ids of the two sides.
 * @listen: the listening CM id.
 * @cr_evd: the listener's connection requests.
 * @conn_evd: both sides' connection events.
 * @err: an error of the connect that side 0's handler met, or 0.
 */
struct kevd_rc {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_qp_init_attr init[2];
	const char *addr;
	u16 port;

	bool iwarp;
	struct ib_qp *qp[2];

	struct rdma_cm_id *cm[2];
	struct rdma_cm_id *listen;
	struct kevd *cr_evd;
	struct kevd *conn_evd;
	int err;
};

/**
 * kevd_rc_buf_alloc() - zeroed pages of their own for a buffer the
 * provider reads and writes.
 * @size: bytes; free with free_pages_exact(buf, @size).
 *
 * Not kmalloc(): rxe and siw copy through kmap_local_page() of the
 * buffer's pages, and without a vmemmap (SPARSEMEM alone, as the SMP
 * test kernel) that reads the page's flags for its section, while SLUB
 * changes the flags of a slab page as its other objects come and go:
 * KCSAN reported that race in rxe_mr_copy() under traffic. The flags of
 * pages a buffer has to itself do not change under it.
 *
 * Return: the buffer, or NULL.
 */
static inline void *kevd_rc_buf_alloc(size_t size)
{
	return alloc_pages_exact(size, GFP_KERNEL | __GFP_ZERO);
}

int kevd_rc_connect(struct kevd_rc *rc);
void kevd_rc_disconnect(struct kevd_rc *rc);
int kevd_rc_wait_disconnected(struct kevd_rc *rc, unsigned long timeout);
void kevd_rc_destroy(struct kevd_rc *rc);

#endif /* _KEVD_RC_H */
