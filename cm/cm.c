// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The CM binding: the events of an rdma_cm_id, as DAT events, into EVDs.
 *
 * kevd_cm_bind() makes kevd_cm_handler() the id's event handler and a
 * struct kevd_cm its context. The consumer's own handler (the one it gave
 * rdma_create_id()) still hears every event kevd does not map, and finds
 * its context with kevd_cm_context(). Documentation/kevd/cm.rst has the
 * table of events.
 *
 * Objects:
 *   - a binding per id: one the consumer bound (a listener, or an id that
 *     connects), or a request: the id rdma_cm made for a CONNECT_REQUEST,
 *     pending until kevd_cr_accept() makes it an endpoint or
 *     kevd_cr_reject() ends it. Until it is an endpoint the request is
 *     kevd's: none of its events reaches the consumer's handler, which
 *     does not know the id;
 *   - a request's handle (the CR event's cr) is its index in kevd_crs.
 *     Whoever takes it out (accept, reject, the listener's destruction,
 *     DEVICE_REMOVAL) owns the request: a handle works at most once, and a
 *     stale one finds nothing. Once kevd_cr_id() gave the consumer the
 *     request's id (@lent), only the consumer's calls end it: a
 *     DEVICE_REMOVAL would destroy the id under it;
 *   - private data is copied into the binding (struct kevd_cm_pdata) and
 *     freed with it, after its id is destroyed. A request kevd ends
 *     itself (its listener goes, DEVICE_REMOVAL) gives the private data
 *     of its CR event, which the consumer may still read, to its
 *     listener's CR EVD (kevd_keep()) as its handle goes stale, under
 *     kevd_cm_mutex, while the listener still holds that EVD.
 *
 * Context and locking:
 *   - kevd_cm_handler() runs in rdma_cm's thread and may sleep. rdma_cm
 *     serialises it per id (its handler_mutex), and holds the listener's
 *     while a request's CONNECT_REQUEST runs;
 *   - kevd_cm_mutex guards the lists of pending requests and is held
 *     across taking a handle out of kevd_crs, so that a request is on its
 *     listener's list exactly while its handle is valid. Nothing sleeps
 *     under it and no rdma_cm call is made under it;
 *   - a listener that goes in its own handler (the consumer's returned
 *     non-zero) leaves its requests to a work item (kevd_cm_orphans):
 *     ending one takes its handler mutex, and rdma_cm holds the
 *     listener's, of the same lock class, while the handler runs. On
 *     iWARP an id that goes so leaves its QP to that work item too
 *     (kevd_cm_qps): the QP's destroy waits for iw_cm, whose connect
 *     reply waits for the handler;
 *   - kevd_cr_accept() sets the EVDs of a request under the id's handler
 *     mutex (rdma_lock_handler()), so the handler never sees them change;
 *   - an endpoint whose QP completes into its connection EVD's CQ gates
 *     the QP (kevd_cq_gate_at(), on the id's ->qp: the active side's
 *     goes up before its ROUTE_RESOLVED handler makes the QP) from
 *     before it can receive until its ESTABLISHED is queued, or the
 *     connect ends otherwise: a receive that beats ESTABLISHED (the RTU,
 *     REP processing, an iWARP provider's RTS on the MPA reply) waits
 *     for it. The gate is lifted before the id is destroyed;
 *   - lifetime: a binding lives as long as its id. kevd_cm_destroy_id()
 *     first waits for a running handler (rdma_lock_handler()) and marks
 *     the binding dying under the handler mutex: from then on the handler
 *     posts nothing and calls no consumer handler, so the QP it finds
 *     after (one the consumer's ROUTE_RESOLVED handler made) stays the
 *     id's last. It destroys that QP, then the id, then the binding. A
 *     handler that returns non-zero, after which rdma_cm destroys the id,
 *     releases the binding first (on iWARP, its QP goes after).
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include "kevd_internal.h"

/**
 * enum kevd_cm_conn - where a binding's connection is, for its ends.
 * @KEVD_CM_CONNECTING: not established (yet): an error event is the
 *	connect's, and the id may resolve and connect again.
 * @KEVD_CM_UP: ESTABLISHED came: an error event is BROKEN.
 * @KEVD_CM_DOWN: DISCONNECTED or REJECTED ended it: an id does not connect
 *	again, so no error event ends it again (rdma_cm raises UNREACHABLE
 *	on a RoCE neighbour change in any state, until the id goes).
 * @KEVD_CM_BROKEN: BROKEN ended it: nor does the DISCONNECTED after it.
 *
 * Only for a binding with a connection EVD: without one, every event goes
 * to the consumer's handler, as rdma_cm raised it.
 */
enum kevd_cm_conn {
	KEVD_CM_CONNECTING,
	KEVD_CM_UP,
	KEVD_CM_DOWN,
	KEVD_CM_BROKEN,
};

/**
 * struct kevd_cm - the binding of one rdma_cm_id.
 * @id: the id.
 * @cr_evd: where CONNECT_REQUESTs go, or NULL.
 * @conn_evd: where connection events go, or NULL.
 * @async_evd: where DEVICE_REMOVAL goes, or NULL.
 * @ep: the endpoint handle of connection events.
 * @sp: the service point handle of CR events.
 * @chain: the consumer's handler, for the events kevd does not map.
 * @chain_ctx: the consumer's context (kevd_cm_context()).
 * @pdata: private data copies, freed with the binding.
 * @requests: on a listener, its pending requests; under kevd_cm_mutex.
 * @request_node: on a pending request, its place on @requests.
 * @handle: on a pending request, its index in kevd_crs; 0 otherwise.
 * @listener_cr: on a pending request, its listener's CR EVD, which its CR
 *	event is on: the listener holds it while the request is on its list.
 * @gated: the EVD whose CQ the endpoint's QP completes into (or will),
 *	while its completions wait for its ESTABLISHED (kevd_cq_gate_at()),
 *	or NULL.
 * @gate: the gate record on @gated.
 * @request: a request not accepted: kevd's, not the consumer's. Its events
 *	go nowhere, but for DEVICE_REMOVAL, which ends it if it is still
 *	pending and not @lent. Cleared under the id's handler mutex when
 *	kevd_cr_accept() has made it an endpoint.
 * @lent: on a pending request, kevd_cr_id() gave the consumer its id;
 *	under kevd_cm_mutex.
 * @dying: kevd_cm_destroy_id() has begun: events are dropped, and the
 *	consumer's handler is not called. Set under the id's handler mutex;
 *	a wildcard listener's CONNECT_REQUEST reads it under the mutex of
 *	rdma_cm's own listen id instead, which rdma_destroy_id() waits for.
 * @conn: where its connection is (enum kevd_cm_conn); under the id's
 *	handler mutex.
 */
struct kevd_cm {
	struct rdma_cm_id *id;
	struct kevd *cr_evd;
	struct kevd *conn_evd;
	struct kevd *async_evd;
	void *ep;
	void *sp;
	rdma_cm_event_handler chain;
	void *chain_ctx;
	struct list_head pdata;
	struct list_head requests;
	struct list_head request_node;
	u32 handle;
	struct kevd *listener_cr;
	struct kevd *gated;
	struct kevd_gate gate;
	bool request;
	bool lent;
	bool dying;
	u8 conn;
};

struct kevd_cm_pdata {
	struct list_head node;
	u8 data[];
};

static DEFINE_XARRAY_ALLOC1(kevd_crs);
static u32 kevd_crs_next;
static DEFINE_MUTEX(kevd_cm_mutex);	/* the lists of pending requests */

static int kevd_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);

/* --- EVDs and private data ---------------------------------------------- */

static void kevd_cm_unhold_all(struct kevd_cm *cm)
{
	if (cm->cr_evd)
		kevd_cm_unhold(cm->cr_evd);
	if (cm->conn_evd)
		kevd_cm_unhold(cm->conn_evd);
	if (cm->async_evd)
		kevd_cm_unhold(cm->async_evd);
	cm->cr_evd = NULL;
	cm->conn_evd = NULL;
	cm->async_evd = NULL;
}

/*
 * Take the EVDs of @attr into @cm: each must be open and have its stream.
 * On failure nothing is held.
 */
static int kevd_cm_hold_all(struct kevd_cm *cm, const struct kevd_cm_attr *attr)
{
	static const u32 flag[] = {
		KEVD_CR_FLAG, KEVD_CONNECTION_FLAG, KEVD_ASYNC_FLAG,
	};
	struct kevd *want[] = { attr->cr_evd, attr->conn_evd, attr->async_evd };
	struct kevd **slot[] = { &cm->cr_evd, &cm->conn_evd, &cm->async_evd };
	int i;

	if (!attr->cr_evd && !attr->conn_evd)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		if (!want[i])
			continue;
		if (kevd_cm_hold(want[i], flag[i])) {
			kevd_cm_unhold_all(cm);
			return -EINVAL;
		}
		*slot[i] = want[i];
	}
	return 0;
}

static struct kevd_cm *kevd_cm_alloc(struct rdma_cm_id *id)
{
	struct kevd_cm *cm = kzalloc(sizeof(*cm), GFP_KERNEL);

	if (!cm)
		return NULL;
	cm->id = id;
	INIT_LIST_HEAD(&cm->pdata);
	INIT_LIST_HEAD(&cm->requests);
	INIT_LIST_HEAD(&cm->request_node);
	return cm;
}

/* Does @qp complete into the CQ of @evd? */
static bool kevd_cm_feeds(struct kevd *evd, struct ib_qp *qp)
{
	struct ib_cq *cq = kevd_cq(evd);

	return cq && (qp->send_cq == cq || qp->recv_cq == cq);
}

/* Is there a QP, and does it complete elsewhere than into @evd's CQ? */
static bool kevd_cm_qp_elsewhere(struct kevd *evd, struct ib_qp *qp)
{
	return qp && !kevd_cm_feeds(evd, qp);
}

/*
 * Hold back the completions of @cm's QP on @evd until its ESTABLISHED is
 * queued: the QP of its id, now or once the consumer makes it, if it
 * completes into @evd's CQ. Before the QP can receive: the passive side
 * before rdma_accept(), the active side before its ROUTE_RESOLVED
 * handler runs, which makes and connects it (on iWARP the provider moves
 * it to RTS on the peer's reply in its own context, so a receive may
 * complete before that handler returns), or which a consumer's thread
 * does later. Lifted by kevd_cm_ungate() before the id goes.
 */
static void kevd_cm_gate(struct kevd_cm *cm, struct kevd *evd)
{
	if (cm->gated || !evd || !kevd_cq(evd) ||
	    kevd_cm_qp_elsewhere(evd, cm->id->qp))
		return;
	kevd_cq_gate_at(evd, &cm->gate, &cm->id->qp);
	cm->gated = evd;
}

/* The endpoint's connect is settled: its completions go. */
static void kevd_cm_ungate(struct kevd_cm *cm)
{
	if (cm->gated)
		kevd_cq_ungate(cm->gated, &cm->gate);
	cm->gated = NULL;
}

static void kevd_cm_release(struct kevd_cm *cm)
{
	struct kevd_cm_pdata *pd, *tmp;

	kevd_cm_ungate(cm);
	kevd_cm_unhold_all(cm);
	list_for_each_entry_safe(pd, tmp, &cm->pdata, node)
		kfree(pd);
	kfree(cm);
}

/*
 * Copy the private data of @ev into @cm: the poster's buffer lives only
 * as long as the handler runs. Returns the copy, or NULL if there is none
 * (or no memory: the event then goes without it).
 */
static const void *kevd_cm_copy_pdata(struct kevd_cm *cm,
				      const struct rdma_cm_event *ev, u32 *size)
{
	u32 len = min_t(u32, ev->param.conn.private_data_len,
			KEVD_CM_MAX_PRIVATE_DATA);
	struct kevd_cm_pdata *pd;

	*size = 0;
	if (!ev->param.conn.private_data || !len)
		return NULL;
	pd = kmalloc(struct_size(pd, data, len), GFP_KERNEL);
	if (!pd)
		return NULL;
	memcpy(pd->data, ev->param.conn.private_data, len);
	list_add_tail(&pd->node, &cm->pdata);
	*size = len;
	return pd->data;
}

/* --- requests: handles ---------------------------------------------------- */

/*
 * The handle of pending request @req goes stale; kevd ends it (@kevds),
 * not the consumer: its CR event's private data stays with the CR EVD.
 */
static void kevd_cr_unlist(struct kevd_cm *req, bool kevds)
{
	lockdep_assert_held(&kevd_cm_mutex);
	/* kevd_keep() frees each block through its list_head */
	BUILD_BUG_ON(offsetof(struct kevd_cm_pdata, node));
	WRITE_ONCE(req->handle, 0);
	if (kevds)
		kevd_keep(req->listener_cr, &req->pdata);
	req->listener_cr = NULL;
}

/*
 * Take a pending request by its handle: it is the caller's after. @kevds:
 * kevd ends it, not a call of the consumer's on the handle; not one whose
 * id the consumer has (kevd_cr_id()).
 */
static struct kevd_cm *kevd_cr_claim(void *cr, bool kevds)
{
	struct kevd_cm *req;

	mutex_lock(&kevd_cm_mutex);
	req = xa_load(&kevd_crs, (unsigned long)cr);
	if (req && kevds && req->lent)
		req = NULL;
	if (req) {
		xa_erase(&kevd_crs, (unsigned long)cr);
		list_del_init(&req->request_node);
		kevd_cr_unlist(req, kevds);
	}
	mutex_unlock(&kevd_cm_mutex);
	return req;
}

#ifdef KEVD_HAVE_QP_SRQ_COMPLETION
/*
 * An SRQ QP still in RESET or INIT took nothing from its SRQ, and not
 * every HCA raises Last WQE Reached for it once in error.
 */
static noinline_for_stack bool kevd_qp_srq_unused(struct ib_qp *qp)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;

	if (!qp->srq || ib_query_qp(qp, &attr, IB_QP_STATE, &init))
		return false;
	return attr.qp_state == IB_QPS_RESET || attr.qp_state == IB_QPS_INIT;
}

/* Count its Last WQE Reached for kevd_cm_qp_srq_wait(). */
static void kevd_qp_srq_count(struct ib_qp *qp)
{
	complete(&qp->srq_completion);
}
#else
static bool kevd_qp_srq_unused(struct ib_qp *qp)
{
	return false;
}

static void kevd_qp_srq_count(struct ib_qp *qp)
{
}
#endif

/*
 * Before a QP kevd destroys goes: to error, if it completes into an EVD's
 * CQ. True if it is in error now. For a bound id, under the id's handler
 * mutex (rdma_cm moves it to RTR and RTS under it, and an REP then
 * fails); a QP in error only goes to reset, so from kevd_destroy_qp() a
 * racing move to RTR or RTS fails too. With @unused_srq (kevd_destroy_qp(),
 * a request's QP, which nothing connects: not a bound id's, which iWARP
 * providers move to RTS outside the handler mutex), an SRQ QP that was
 * below RTR gets its Last WQE Reached counted once it is in error.
 */
static bool kevd_qp_error(struct ib_qp *qp, bool unused_srq)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	bool unused;
	int ret;

	if (!qp || (!kevd_cq_evd(qp->send_cq) && !kevd_cq_evd(qp->recv_cq)))
		return false;
	unused = unused_srq && kevd_qp_srq_unused(qp);
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	if (ret)
		pr_debug("kevd: QP %u to error: %d\n", qp->qp_num, ret);
	else if (unused)
		kevd_qp_srq_count(qp);
	return !ret;
}

/**
 * struct kevd_cm_qp - a QP kevd ends: its completions out, then the QP.
 * @node: on kevd_cm_qps, for a QP whose id rdma_cm destroys.
 * @qp: the QP.
 * @scq: the EVD of its send CQ, or NULL (not kevd's).
 * @rcq: the EVD of its receive CQ, or NULL (not kevd's, or @scq).
 * @in_error: kevd_qp_error() moved it to error.
 *
 * @scq and @rcq are referenced: the QP keeps them from kevd_free() only
 * until it is destroyed, and they need not be a binding's EVDs.
 */
struct kevd_cm_qp {
	struct list_head node;
	struct ib_qp *qp;
	struct kevd *scq;
	struct kevd *rcq;
	bool in_error;
};

static void kevd_cm_qp_take(struct kevd_cm_qp *q, struct ib_qp *qp,
			    bool in_error)
{
	q->qp = qp;
	q->scq = kevd_cq_evd(qp->send_cq);
	q->rcq = kevd_cq_evd(qp->recv_cq);
	if (q->rcq == q->scq)
		q->rcq = NULL;
	if (q->scq)
		kevd_get(q->scq);
	if (q->rcq)
		kevd_get(q->rcq);
	q->in_error = in_error;
}

/*
 * A QP in error whose receives come from an SRQ, into a kevd CQ: those
 * it took from the SRQ are not its to flush, and no marker follows them
 * (an SRQ QP takes no receive of its own). They are in the CQ once the
 * HCA raises the affiliated Last WQE Reached event (IBTA 10.3.1, as
 * __ib_drain_srq() reads it), which ib_core counts in qp->srq_completion:
 * wait for it, within KEVD_FLUSH_WAIT, before the drain posts its markers
 * or looks for the CQ empty. The count goes back: a drain that is called
 * again (a destroy that failed) finds it, and kevd_qp_error() counts it
 * for a QP it found below RTR (a request's). siw and qedr raise no such
 * event (nor may a device in a fatal error): their SRQ QPs wait the whole
 * time, as ib_drain_qp() waits on them too. 6.1's ib_core keeps no count:
 * there the drain cannot wait for it. From an upcall of the EVD, its
 * other completions wait meanwhile (no poll while its poller waits here).
 */
#ifdef KEVD_HAVE_QP_SRQ_COMPLETION
static void kevd_cm_qp_srq_wait(struct kevd_cm_qp *q)
{
	struct ib_qp *qp = q->qp;

	if (!q->in_error || !qp->srq || !kevd_cq_evd(qp->recv_cq))
		return;
	if (wait_for_completion_timeout(&qp->srq_completion, KEVD_FLUSH_WAIT))
		complete(&qp->srq_completion);
	else
		pr_warn_ratelimited("kevd: QP %u: no Last WQE Reached event in %d s: what it took from its SRQ may come after it is destroyed\n",
				    qp->qp_num, KEVD_FLUSH_WAIT / HZ);
}
#else
static void kevd_cm_qp_srq_wait(struct kevd_cm_qp *q)
{
}
#endif

/*
 * End @q's QP: its completions first go out of kevd's CQs
 * (kevd_cq_flush_qp()), those it took from an SRQ included
 * (kevd_cm_qp_srq_wait()): no provider takes a destroyed QP's completions
 * out of the CQ, and kevd reads the QP when it converts one. Then the QP
 * goes: through its @id (rdma_destroy_qp()), or, once rdma_cm destroys
 * the id, by itself. A drain that gave up learns when the QP is gone
 * (kevd_cq_qp_gone(): the pointer is only a key then).
 */
static int kevd_cm_qp_end(struct kevd_cm_qp *q, struct rdma_cm_id *id)
{
	int ret = 0;

	kevd_cm_qp_srq_wait(q);
	if (q->scq)
		kevd_cq_flush_qp(q->scq, q->qp, q->in_error);
	if (q->rcq)
		kevd_cq_flush_qp(q->rcq, q->qp, q->in_error);
	if (id)
		rdma_destroy_qp(id);
	else
		ret = ib_destroy_qp(q->qp);
	if (ret)
		pr_warn("kevd: QP %u: ib_destroy_qp() failed (%d): it stays\n",
			q->qp->qp_num, ret);
	if (q->scq) {
		if (!ret)
			kevd_cq_qp_gone(q->scq, q->qp);
		kevd_put(q->scq);
	}
	if (q->rcq) {
		if (!ret)
			kevd_cq_qp_gone(q->rcq, q->qp);
		kevd_put(q->rcq);
	}
	return ret;
}

/*
 * The QP of @cm's id, if it has one, goes (@in_error: kevd_qp_error()
 * moved it to error), its gate lifted first, so that a completion parked
 * behind it goes too. For an id no handler of the consumer's runs on: a
 * dying binding, or a request; and, but on iWARP, one whose consumer
 * handler gave it up (kevd_cm_end_qp()).
 */
static void kevd_cm_destroy_qp(struct kevd_cm *cm, bool in_error)
{
	struct kevd_cm_qp q;

	kevd_cm_ungate(cm);	/* also without a QP: the gate reads the id */
	if (!cm->id->qp)
		return;
	kevd_cm_qp_take(&q, cm->id->qp, in_error);
	kevd_cm_qp_end(&q, cm->id);
}

/**
 * kevd_destroy_qp() - take a QP's completions out of kevd, then destroy it.
 * @qp: the QP (or NULL with @id: @id's); its send CQ, its receive CQ or
 *	both are an EVD's (kevd_cq()).
 * @id: the rdma_cm id @qp was made on with rdma_create_qp(), whose
 *	rdma_destroy_qp() then destroys it; or NULL: ib_destroy_qp().
 *
 * For ib_core's own CQs a consumer calls ib_drain_qp() and then destroys
 * the QP. ib_drain_qp() cannot work on kevd's CQs (it waits for a
 * completion callback that only a CQ from ib_alloc_cq() calls), and kevd
 * reads a QP when it converts a completion of it: a QP must not go while
 * completions of it are still in the CQ. This does both. It moves the QP
 * to the error state, posts a marker on each of its queues that complete
 * into a kevd CQ (as ib_drain_qp() does: a provider may flush the two
 * queues in either order), waits until the markers are polled and every
 * completion before them is queued on its EVD or handed to its upcalls,
 * and then destroys the QP; for a QP whose receives come from an SRQ it
 * first waits for the Last WQE Reached event (the receives the QP took
 * from the SRQ are in the CQ then: Documentation/kevd/api.rst, teardown
 * order). kevd polls the CQ itself meanwhile: no
 * notification is needed, so a solicited-only EVD gets the flushes too.
 * The markers never reach the consumer. A full EVD grows for the
 * flushes, within what the CQ held. After a few seconds (a poller held
 * in a long upcall, a completion parked behind a CM gate) it destroys
 * the QP anyway, with a warning; what the CQ still holds of it comes
 * later, with ep_context NULL.
 *
 * A queue that completes into a CQ that is not kevd's is not drained
 * here (ib_drain_sq() or ib_drain_rq() do, on a CQ from ib_alloc_cq()).
 * A QP made on an rdma_cm id must come with its id, as rdma_destroy_qp()
 * must destroy it. Not for the QP of an id bound with kevd_cm_bind() or
 * kevd_cr_accept() (kevd_cm_destroy_id() ends that one), with its id or
 * without. An rdma_cm handler that calls this waits as long as the drain;
 * on iWARP not from the id's own handler (the destroy waits for iw_cm).
 *
 * If ib_destroy_qp() fails, the QP stays, in error; call this again, not
 * ib_destroy_qp(): a drain that gave up learns from it that the QP is
 * gone. rdma_destroy_qp() reports no error.
 *
 * Context: process context; sleeps. From an upcall too.
 * Return: 0; -EINVAL for no QP, a call from interrupt context or with
 * interrupts disabled, a @qp that is not @id's, or a QP none of whose
 * CQs is kevd's; -EBUSY for a bound @id; or the error of
 * ib_destroy_qp().
 */
int kevd_destroy_qp(struct ib_qp *qp, struct rdma_cm_id *id)
{
	struct kevd_cm_qp q;

	if (id && !qp)
		qp = id->qp;
	if (!qp || kevd_atomic_caller() || (id && id->qp != qp) ||
	    (!kevd_cq_evd(qp->send_cq) && !kevd_cq_evd(qp->recv_cq)))
		return -EINVAL;
	if (id && id->event_handler == kevd_cm_handler)
		return -EBUSY;
	might_sleep();
	kevd_cm_qp_take(&q, qp, kevd_qp_error(qp, true));
	return kevd_cm_qp_end(&q, id);
}
EXPORT_SYMBOL_GPL(kevd_destroy_qp);

/*
 * Why kevd rejects a request that no consumer rejected: the requester
 * must not see PEER_REJECTED, which IB and RoCE report for
 * IB_CM_REJ_CONSUMER_DEFINED, the reason rdma_cm sends when a
 * CONNECT_REQUEST handler fails. (iWARP carries no reason: a reject
 * without private data is the peer's there only on -ECONNREFUSED.)
 */
#define KEVD_REJ_NO_LISTENER	IB_CM_REJ_INVALID_SERVICE_ID
#define KEVD_REJ_NO_ROOM	IB_CM_REJ_NO_RESOURCES

/*
 * Refuse request @id from its CONNECT_REQUEST handler, which then returns
 * @ret: rdma_cm destroys the id, and its own reject finds it sent.
 */
static int kevd_cm_refuse(struct rdma_cm_id *id, u8 reason, int ret)
{
	int err = rdma_reject(id, NULL, 0, reason);

	if (err)
		pr_debug("kevd: rdma_reject: %d\n", err);
	return ret;
}

/*
 * Reject and destroy a request the caller took, for @reason
 * (IB_CM_REJ_CONSUMER_DEFINED: the consumer's kevd_cr_reject()). Not
 * from its handler.
 */
static void kevd_cr_end(struct kevd_cm *req, u8 reason, const void *pdata,
			u8 len)
{
	bool in_error;
	int ret;

	rdma_lock_handler(req->id);
	ret = rdma_reject(req->id, pdata, len, reason);
	in_error = kevd_qp_error(req->id->qp, true);
	rdma_unlock_handler(req->id);
	if (ret)
		pr_debug("kevd: rdma_reject: %d\n", ret);
	kevd_cm_destroy_qp(req, in_error);	/* made on kevd_cr_id() */
	rdma_destroy_id(req->id);
	kevd_cm_release(req);
}

/* Move listener @cm's pending requests to @to: their handles go stale. */
static void kevd_cm_take_requests(struct kevd_cm *cm, struct list_head *to)
{
	struct kevd_cm *req, *tmp;

	lockdep_assert_held(&kevd_cm_mutex);
	list_for_each_entry_safe(req, tmp, &cm->requests, request_node) {
		xa_erase(&kevd_crs, req->handle);
		kevd_cr_unlist(req, true);
		list_move_tail(&req->request_node, to);
	}
}

static void kevd_cr_end_all(struct list_head *reqs)
{
	struct kevd_cm *req, *tmp;

	list_for_each_entry_safe(req, tmp, reqs, request_node) {
		list_del_init(&req->request_node);
		kevd_cr_end(req, KEVD_REJ_NO_LISTENER, NULL, 0);
	}
}

/* A listener goes: reject the requests nobody accepted or rejected. */
static void kevd_cm_end_requests(struct kevd_cm *cm)
{
	LIST_HEAD(mine);

	mutex_lock(&kevd_cm_mutex);
	kevd_cm_take_requests(cm, &mine);
	mutex_unlock(&kevd_cm_mutex);
	kevd_cr_end_all(&mine);
}

/*
 * What a consumer handler's non-zero return leaves, under kevd_cm_mutex:
 * the requests of a listener that went, and the QPs of ids that went
 * (struct kevd_cm_qp). A work item ends them once the handler returned.
 */
static LIST_HEAD(kevd_cm_orphans);
static LIST_HEAD(kevd_cm_qps);

static void kevd_cm_orphans_end(struct work_struct *work)
{
	struct kevd_cm_qp *q, *tmp;
	LIST_HEAD(mine);
	LIST_HEAD(qps);

	mutex_lock(&kevd_cm_mutex);
	list_splice_init(&kevd_cm_orphans, &mine);
	list_splice_init(&kevd_cm_qps, &qps);
	mutex_unlock(&kevd_cm_mutex);
	kevd_cr_end_all(&mine);
	list_for_each_entry_safe(q, tmp, &qps, node) {
		kevd_cm_qp_end(q, NULL);
		kfree(q);
	}
}

static DECLARE_WORK(kevd_cm_orphan_work, kevd_cm_orphans_end);

/*
 * kevd_cm_end_requests() from listener @cm's own handler, which rdma_cm
 * runs under the listener's handler mutex: ending a request takes its
 * handler mutex and destroys its id, so a work item ends them, after.
 */
static void kevd_cm_orphan_requests(struct kevd_cm *cm)
{
	bool any;

	mutex_lock(&kevd_cm_mutex);
	any = !list_empty(&cm->requests);
	kevd_cm_take_requests(cm, &kevd_cm_orphans);
	mutex_unlock(&kevd_cm_mutex);
	if (any)
		queue_work(system_long_wq, &kevd_cm_orphan_work);	/* sleeps */
}

/**
 * kevd_cm_exit() - end what ids that went in a handler left.
 *
 * Context: process context, at kevd's exit; sleeps.
 */
void kevd_cm_exit(void)
{
	flush_work(&kevd_cm_orphan_work);
}

/* --- the handler ---------------------------------------------------------- */

/* The connection qualifier of a request: the port it came to. */
static u64 kevd_cm_qual(struct rdma_cm_id *id)
{
	struct sockaddr *sa = (struct sockaddr *)&id->route.addr.src_addr;

	switch (sa->sa_family) {
	case AF_INET:
		return ntohs(((struct sockaddr_in *)sa)->sin_port);
	case AF_INET6:
		return ntohs(((struct sockaddr_in6 *)sa)->sin6_port);
	case AF_IB:
		return be64_to_cpu(((struct sockaddr_ib *)sa)->sib_sid);
	}
	return 0;
}

/*
 * Did the peer's consumer reject? IB and RoCE say so with the reject
 * reason. On iWARP, rdma_cm takes -ECONNREFUSED for it (cxgb4), but siw
 * reports an MPA reject as -ECONNRESET, which also stands for a broken
 * MPA exchange: there, only a reply that carries the rejecter's private
 * data counts.
 */
static bool kevd_cm_peer_rejected(struct rdma_cm_id *id,
				  const struct rdma_cm_event *ev)
{
	if (id->device && rdma_protocol_iwarp(id->device, id->port_num))
		return ev->status == -ECONNREFUSED ||
		       (ev->status == -ECONNRESET &&
			ev->param.conn.private_data_len);
	return ev->status == IB_CM_REJ_CONSUMER_DEFINED;
}

/*
 * The QP of @cm's id, whose handler returned non-zero, goes: to error now
 * (rdma_cm holds the id's handler mutex, which kevd_qp_error() wants),
 * then drained and destroyed. Here, but for iWARP: there iw_cm holds the
 * QP from a connect until the reply, or the close of the connection, or
 * the id's destruction; a provider's destroy waits for that (siw,
 * cxgb4), and the reply's work waits for this handler's mutex. So on
 * iWARP a work item ends the QP once the handler has returned (and
 * rdma_cm has destroyed the id). Without memory for that the QP stays,
 * with a warning.
 */
static void kevd_cm_end_qp(struct kevd_cm *cm, struct rdma_cm_id *id)
{
	struct kevd_cm_qp *q;
	bool in_error;

	if (!id->qp)
		return;
	in_error = kevd_qp_error(id->qp, false);
	if (!id->device || !rdma_protocol_iwarp(id->device, id->port_num)) {
		kevd_cm_destroy_qp(cm, in_error);
		return;
	}
	kevd_cm_ungate(cm);
	q = kmalloc(sizeof(*q), GFP_KERNEL);
	if (!q) {
		pr_warn("kevd: QP %u of an id its handler ended stays: no memory\n",
			id->qp->qp_num);
		return;
	}
	kevd_cm_qp_take(q, id->qp, in_error);
	mutex_lock(&kevd_cm_mutex);
	list_add_tail(&q->node, &kevd_cm_qps);
	mutex_unlock(&kevd_cm_mutex);
	queue_work(system_long_wq, &kevd_cm_orphan_work);
}

/*
 * The consumer's handler returned non-zero: rdma_cm destroys the id when
 * this handler returns, so the binding ends first, as with
 * kevd_cm_destroy_id(): the QP the id still has goes, drained (on
 * iWARP once the handler has returned), and a listener's requests are
 * rejected once the handler has returned.
 * The events already posted stay the consumer's: their private data goes
 * to the connection EVD, which frees it with its memory.
 */
static void kevd_cm_end_in_handler(struct kevd_cm *cm, struct rdma_cm_id *id)
{
	kevd_cm_end_qp(cm, id);
	kevd_cm_orphan_requests(cm);
	if (cm->conn_evd)
		kevd_keep(cm->conn_evd, &cm->pdata);
	kevd_cm_release(cm);
}

/* The consumer's handler, for an event kevd does not map. */
static int kevd_cm_chain(struct kevd_cm *cm, struct rdma_cm_id *id,
			 struct rdma_cm_event *ev)
{
	int ret;

	/* the consumer makes its QP and connects: hold it until ESTABLISHED */
	if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED)
		kevd_cm_gate(cm, cm->conn_evd);
	/* a connect without a QP on the id gets no ESTABLISHED: nothing to hold */
	else if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE)
		kevd_cm_ungate(cm);
	ret = cm->chain(id, ev);
	if (ret) {
		kevd_cm_end_in_handler(cm, id);
		return ret;
	}
	/* a QP that completes elsewhere needs no gate here */
	if (cm->gated && kevd_cm_qp_elsewhere(cm->gated, id->qp))
		kevd_cm_ungate(cm);
	return 0;
}

static int kevd_cm_request(struct kevd_cm *listener, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	struct kevd_event cr = {
		.event_number = KEVD_CONNECTION_REQUEST_EVENT,
		.cr.sp = listener->sp,
		.cr.conn_qual = kevd_cm_qual(id),
	};
	struct kevd_cm *req;
	int ret;

	if (!listener->cr_evd)	/* rdma_cm destroys it */
		return kevd_cm_refuse(id, KEVD_REJ_NO_LISTENER, -ECONNREFUSED);
	req = kevd_cm_alloc(id);
	if (!req)
		return -ENOMEM;
	req->chain = listener->chain;
	req->chain_ctx = listener->chain_ctx;
	req->request = true;
	req->listener_cr = listener->cr_evd;
	cr.cr.private_data = kevd_cm_copy_pdata(req, ev,
						&cr.cr.private_data_size);
	mutex_lock(&kevd_cm_mutex);
	ret = xa_alloc_cyclic(&kevd_crs, &req->handle, req, xa_limit_31b,
			      &kevd_crs_next, GFP_KERNEL);
	if (ret >= 0)
		list_add_tail(&req->request_node, &listener->requests);
	mutex_unlock(&kevd_cm_mutex);
	if (ret < 0) {
		kevd_cm_release(req);
		return ret;
	}
	cr.cr.cr = (void *)(unsigned long)req->handle;
	id->context = req;
	ret = kevd_post_event(listener->cr_evd, &cr);
	if (ret && kevd_cr_claim(cr.cr.cr, false)) {
		/* dropped (the overflow is raised): refuse it */
		kevd_cm_release(req);
		return kevd_cm_refuse(id, KEVD_REJ_NO_ROOM, ret);
	}
	/* From here the consumer may own it: no touching @req. */
	return 0;
}

/*
 * The connect is over (DISCONNECTED, BROKEN, REJECTED): the endpoint's QP
 * goes to error, as DAT flushes a disconnected endpoint's DTOs, whichever
 * EVD it completes into; if that is the connection EVD, the flushes the
 * provider adds in its own time reach it before the event does
 * (kevd_cq_drain_hold()). Its gate is lifted first: what it parked goes
 * ahead.
 */
static void kevd_cm_hold_flushes(struct kevd_cm *cm, struct rdma_cm_id *id)
{
	struct ib_qp *qp = id->qp;

	kevd_cm_ungate(cm);
	if (!qp || !kevd_qp_error(qp, false))
		return;
	if (cm->conn_evd && kevd_cm_feeds(cm->conn_evd, qp))
		kevd_cq_drain_hold(cm->conn_evd, qp);
}

/* Post a connection event of @cm's endpoint; with its private data. */
static int kevd_cm_connection(struct kevd_cm *cm, struct rdma_cm_id *id,
			      struct rdma_cm_event *ev, u32 number, bool pdata)
{
	struct kevd_event conn = {
		.event_number = number,
		.connection.ep = cm->ep,
	};
	struct kevd_gate *gate;

	/* any other outcome of the connect lets the completions go first */
	if (number != KEVD_CONNECTION_EVENT_ESTABLISHED)
		kevd_cm_ungate(cm);
	if (!cm->conn_evd)
		return kevd_cm_chain(cm, id, ev);
	if (pdata)
		conn.connection.private_data =
			kevd_cm_copy_pdata(cm, ev,
					   &conn.connection.private_data_size);
	/*
	 * A drop raised the overflow: never silent, the id stays. An
	 * ESTABLISHED held behind another endpoint's event keeps the gate
	 * up until it enters the ring: kevd lifts it then.
	 */
	gate = cm->gated == cm->conn_evd ? &cm->gate : NULL;
	if (kevd_post_established(cm->conn_evd, &conn, gate) <= 0)
		kevd_cm_ungate(cm);	/* queued: the completions follow it */
	return 0;
}

static int kevd_cm_removal(struct kevd_cm *cm, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	struct kevd_event cat = {
		.event_number = KEVD_ASYNC_ERROR_IA_CATASTROPHIC,
		.async.handle = id->device,
		.async.reason = RDMA_CM_EVENT_DEVICE_REMOVAL,
	};

	if (cm->request) {
		/*
		 * Still pending: rdma_cm ends it. Claimed (an accept or
		 * reject runs), or its id given to the consumer, which may be
		 * making its QP there or posting receives (kevd_cr_id()): the
		 * consumer ends it (rdma_accept() now fails), and rdma_cm's
		 * removal waits for that, as for any id of the consumer's.
		 * rdma_cm holds the id's handler mutex, which
		 * kevd_qp_error() wants.
		 */
		if (!kevd_cr_claim((void *)(unsigned long)READ_ONCE(cm->handle),
				   true))
			return 0;
		/* first: rdma_cm's own reject would be the consumer's */
		kevd_cm_refuse(id, KEVD_REJ_NO_LISTENER, 0);
		kevd_cm_destroy_qp(cm, kevd_qp_error(id->qp, true));
		kevd_cm_release(cm);
		return -ENODEV;
	}
	kevd_cm_ungate(cm);
	/*
	 * Never dropped: rdma_cm's removal waits until the consumer
	 * destroys the id, so an async EVD too full to take the event
	 * (headroom included) leaves it to the consumer's handler.
	 */
	if (!cm->async_evd || kevd_post_event(cm->async_evd, &cat))
		return kevd_cm_chain(cm, id, ev);
	return 0;
}

/*
 * An error event on an established connection (rdma_cm raises
 * UNREACHABLE for one on RoCE when the peer's neighbour entry changes;
 * the id stays connected for rdma_cm), or a reject of it (ib_cm passes a
 * REJ on to an established id): BROKEN, as the DAT mapping says (an
 * error, "or BROKEN once established"; not UNREACHABLE, a connect's). It
 * ends the connection as DISCONNECTED does: the QP goes to error and its
 * flushes come first; the DISCONNECTED that follows when the id is
 * disconnected is not posted, nor is another error event or reject. The
 * consumer disconnects (or destroys) the id, as after any end.
 */
static int kevd_cm_broken(struct kevd_cm *cm, struct rdma_cm_id *id,
			  struct rdma_cm_event *ev)
{
	cm->conn = KEVD_CM_BROKEN;
	kevd_cm_hold_flushes(cm, id);
	return kevd_cm_connection(cm, id, ev, KEVD_CONNECTION_EVENT_BROKEN,
				  false);
}

static int kevd_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kevd_cm *cm = id->context;
	bool peer;
	u32 num;

	if (READ_ONCE(cm->dying))	/* kevd_cm_destroy_id() has begun */
		return cm->id == id ? 0 :
		       kevd_cm_refuse(id, KEVD_REJ_NO_LISTENER, -ECONNREFUSED);
	if (cm->id != id) {
		/* a new id rdma_cm made for a request to listener @cm */
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			return -EINVAL;
		return kevd_cm_request(cm, id, ev);
	}
	/* a request not accepted: the consumer does not know the id */
	if (cm->request && ev->event != RDMA_CM_EVENT_DEVICE_REMOVAL)
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		cm->conn = KEVD_CM_UP;
		return kevd_cm_connection(cm, id, ev,
					  KEVD_CONNECTION_EVENT_ESTABLISHED,
					  true);
	case RDMA_CM_EVENT_DISCONNECTED:
		/*
		 * Answer the peer (an IB DREP), as uDAPL does, or its own
		 * DISCONNECTED waits for the DREQ to time out; the QP goes to
		 * error first, and its flushes come before the event. After
		 * BROKEN, the connection's end was that: no second one.
		 */
		rdma_disconnect(id);
		if (cm->conn_evd && cm->conn == KEVD_CM_BROKEN)
			return 0;
		cm->conn = KEVD_CM_DOWN;
		kevd_cm_hold_flushes(cm, id);
		return kevd_cm_connection(cm, id, ev,
					  KEVD_CONNECTION_EVENT_DISCONNECTED,
					  false);
	case RDMA_CM_EVENT_REJECTED:
		/* ib_cm passes a REJ on to an established id too */
		if (cm->conn_evd && cm->conn == KEVD_CM_BROKEN)
			return 0;
		if (cm->conn_evd && cm->conn == KEVD_CM_UP)
			return kevd_cm_broken(cm, id, ev);
		/* the id does not connect again: no error event after it */
		cm->conn = KEVD_CM_DOWN;
		peer = kevd_cm_peer_rejected(id, ev);
		num = peer ? KEVD_CONNECTION_EVENT_PEER_REJECTED :
			     KEVD_CONNECTION_EVENT_NON_PEER_REJECTED;
		kevd_cm_hold_flushes(cm, id);
		return kevd_cm_connection(cm, id, ev, num, peer);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		/* ended already; or established: it breaks (enum kevd_cm_conn) */
		if (cm->conn_evd && cm->conn >= KEVD_CM_DOWN)
			return 0;
		if (cm->conn_evd && cm->conn == KEVD_CM_UP)
			return kevd_cm_broken(cm, id, ev);
		/* whatever the status, as uDAPL's rdma_cm provider maps them */
		return kevd_cm_connection(cm, id, ev,
					  KEVD_CONNECTION_EVENT_UNREACHABLE,
					  false);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return kevd_cm_removal(cm, id, ev);
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return 0;	/* no DAT meaning: the QP may be reused */
	default:
		/* address and route resolved, a response without a QP, ... */
		return kevd_cm_chain(cm, id, ev);
	}
}

/* --- the API --------------------------------------------------------------- */

/**
 * kevd_cm_bind() - post the events of an rdma_cm_id to EVDs.
 * @id: an id straight from rdma_create_id(): before rdma_resolve_addr(),
 *	rdma_listen() or anything else that raises an event on it; of a
 *	connected QP type (RC), as DAT endpoints are. A UD id has no
 *	connection whose events kevd maps: its accept ends without
 *	ESTABLISHED, and its ESTABLISHED carries the address to send to.
 * @attr: the EVDs and handles.
 *
 * kevd's handler takes over the id. It maps the events that have a DAT
 * meaning (Documentation/kevd/cm.rst) and passes the others (address and
 * route resolved, ...) to the handler the id was created with. That
 * handler finds its context with kevd_cm_context(): the id's context is
 * kevd's. The binding ends with kevd_cm_destroy_id(), or when that
 * handler returns non-zero (rdma_cm then destroys the id): kevd then
 * ends it as kevd_cm_destroy_id() would, the id's QP included, which the
 * handler must leave to kevd.
 *
 * Context: process context.
 * Return: 0; -EINVAL for a NULL argument, a UD id, an id already bound,
 * no CR or connection EVD, or an EVD without its stream; -ENOMEM.
 */
int kevd_cm_bind(struct rdma_cm_id *id, const struct kevd_cm_attr *attr)
{
	struct kevd_cm *cm;
	int ret;

	if (!id || !attr || id->event_handler == kevd_cm_handler ||
	    id->qp_type == IB_QPT_UD)
		return -EINVAL;
	cm = kevd_cm_alloc(id);
	if (!cm)
		return -ENOMEM;
	ret = kevd_cm_hold_all(cm, attr);
	if (ret) {
		kevd_cm_release(cm);
		return ret;
	}
	cm->ep = attr->ep ?: id;
	cm->sp = attr->sp ?: id;
	cm->chain = id->event_handler;
	cm->chain_ctx = id->context;
	id->context = cm;
	id->event_handler = kevd_cm_handler;
	return 0;
}
EXPORT_SYMBOL_GPL(kevd_cm_bind);

/**
 * kevd_cm_context() - the consumer's context of a bound id.
 * @id: an id bound by kevd_cm_bind() or kevd_cr_accept().
 *
 * Context: any.
 * Return: the context the id was created with (an accepted id: that of
 * its listener), @id->context for an id kevd does not bind, or NULL for
 * a NULL @id.
 */
void *kevd_cm_context(struct rdma_cm_id *id)
{
	struct kevd_cm *cm;

	if (!id)
		return NULL;
	cm = id->context;
	return id->event_handler == kevd_cm_handler ? cm->chain_ctx : cm;
}
EXPORT_SYMBOL_GPL(kevd_cm_context);

/**
 * kevd_cm_destroy_id() - destroy a bound id and end its binding.
 * @id: an id bound by kevd_cm_bind() or kevd_cr_accept().
 *
 * Waits for a handler of the id that is running (the consumer's, say,
 * making the QP on ROUTE_RESOLVED); from then on no event of the id is
 * posted and the consumer's handler is not called. Then, if the id has a
 * QP that completes into an EVD's CQ, moves it to error and waits until
 * its completions, flushes included, are in their EVDs (at most a few
 * seconds: a full EVD holds them in the CQ), then destroys the QP
 * (rdma_destroy_qp()) and the id. The requests of
 * a listener that nobody accepted or rejected are rejected, as not the
 * peer consumer's (a DAT requester sees NON_PEER_REJECTED); their CR
 * events' private data stays until the CR EVD is freed. The private
 * data of its own events is freed, unless one of them is still held
 * behind the CQ (it reaches the consumer after the destroy): then it
 * stays until the connection EVD is freed. Its EVDs can be freed again.
 * An id kevd does not bind (its kevd_cm_bind() failed, say) is only
 * destroyed, as rdma_destroy_id() does; its context stays the consumer's.
 *
 * Context: process context; sleeps. Not from a CM event handler.
 */
void kevd_cm_destroy_id(struct rdma_cm_id *id)
{
	struct kevd_cm *cm;
	bool in_error, keep;

	if (!id)
		return;
	might_sleep();
	if (id->event_handler != kevd_cm_handler) {
		rdma_destroy_id(id);
		return;
	}
	cm = id->context;
	rdma_lock_handler(id);
	WRITE_ONCE(cm->dying, true);
	in_error = kevd_qp_error(id->qp, false);
	rdma_unlock_handler(id);
	/*
	 * An event of the endpoint still held behind the CQ now (no more
	 * come: dying) reaches the consumer during or after this destroy:
	 * the QP's end lifts its gate and drains its flushes, which lets a
	 * held ESTABLISHED, REJECTED or DISCONNECTED in. Its private data
	 * goes to the connection EVD, as on a handler's non-zero return.
	 */
	keep = cm->conn_evd && kevd_ring_fenced_ep(&cm->conn_evd->ring, cm->ep);
	/* no handler of the consumer's runs now: the QP stays as it is */
	kevd_cm_destroy_qp(cm, in_error);
	rdma_destroy_id(id);
	kevd_cm_end_requests(cm);
	if (keep)
		kevd_keep(cm->conn_evd, &cm->pdata);
	kevd_cm_release(cm);
}
EXPORT_SYMBOL_GPL(kevd_cm_destroy_id);

/* The most private data a reply (@reject: a reject) may carry on @id. */
static u32 kevd_cm_send_max(struct rdma_cm_id *id, bool reject)
{
	if (id->device && rdma_protocol_iwarp(id->device, id->port_num))
		return KEVD_CM_MAX_PRIVATE_DATA;
	return reject ? IB_CM_REJ_PRIVATE_DATA_SIZE :
			IB_CM_REP_PRIVATE_DATA_SIZE;
}

/*
 * Is @cr a pending request whose transport takes @len bytes (and, for an
 * accept, with a QP the consumer created exactly if @own_qp, and a @pd,
 * if any, of its device)?
 */
static int kevd_cr_check(void *cr, u32 len, bool reject, bool own_qp,
			 struct ib_pd *pd)
{
	struct kevd_cm *req;
	int ret = -EINVAL;

	mutex_lock(&kevd_cm_mutex);
	req = xa_load(&kevd_crs, (unsigned long)cr);
	/* a PD of another device: rdma_create_qp() would refuse it */
	if (req && len <= kevd_cm_send_max(req->id, reject) &&
	    (reject || !req->id->qp == !own_qp) &&
	    (!pd || pd->device == req->id->device))
		ret = 0;
	mutex_unlock(&kevd_cm_mutex);
	return ret;
}

/**
 * kevd_cr_id() - the rdma_cm_id of a pending connection request.
 * @cr: the handle of a CR event.
 *
 * For a consumer that creates the QP itself (rdma_create_qp() on this id)
 * to post receives before it accepts, as a DAT consumer does with its
 * endpoint; kevd_cr_accept() then takes NULL for the PD and QP
 * attributes. The id stays kevd's until the request is accepted: valid
 * until the consumer ends the request (kevd_cr_accept() failing,
 * kevd_cr_reject(), or the end of its listener); do not destroy it. From
 * this call on, kevd no longer ends the request itself: on the device's
 * removal (DEVICE_REMOVAL) it stays pending, an accept fails, and
 * rdma_cm's removal waits until the consumer has ended it, so end it
 * soon.
 *
 * Context: process context.
 * Return: the id, or NULL for a handle that is not a pending request.
 */
struct rdma_cm_id *kevd_cr_id(void *cr)
{
	struct rdma_cm_id *id = NULL;
	struct kevd_cm *req;

	mutex_lock(&kevd_cm_mutex);
	req = xa_load(&kevd_crs, (unsigned long)cr);
	if (req) {	/* the consumer's to end from now on */
		req->lent = true;
		id = req->id;
	}
	mutex_unlock(&kevd_cm_mutex);
	return id;
}
EXPORT_SYMBOL_GPL(kevd_cr_id);

/**
 * kevd_cr_accept() - accept a connection request.
 * @cr: the handle of a CR event.
 * @attr: the EVDs and endpoint handle of the new connection (a
 *	@attr->conn_evd is needed).
 * @pd: the protection domain of its QP.
 * @qp_attr: its QP (rdma_create_qp() on the request's id); NULL (and a
 *	NULL @pd) if the consumer created it on kevd_cr_id().
 * @param: rdma_accept()'s parameters, private data included.
 * @id: the accepted id, bound as by kevd_cm_bind(): the consumer
 *	disconnects it and ends it with kevd_cm_destroy_id().
 *
 * Bad arguments change nothing: the request stays pending. Once the
 * handle is taken, a failure of the QP or of rdma_accept() rejects the
 * request and returns the error.
 *
 * Context: process context; sleeps. Not from a CM event handler.
 * Return: 0; -EINVAL for a NULL argument, a handle that is not a pending
 * request (accepted, rejected, its listener destroyed, or its device
 * removed), an EVD without its stream, QP attributes for a request that
 * has its QP already (or none for one that has not), a @pd of another
 * device than the request's, or more private data than the transport
 * carries; or the error of rdma_create_qp() or rdma_accept().
 */
int kevd_cr_accept(void *cr, const struct kevd_cm_attr *attr,
		   struct ib_pd *pd, struct ib_qp_init_attr *qp_attr,
		   struct rdma_conn_param *param, struct rdma_cm_id **id)
{
	struct kevd_cm held = { }, *req;
	struct rdma_cm_id *rid;
	int ret;

	if (!attr || !attr->conn_evd || !pd != !qp_attr || !param || !id ||
	    (param->private_data_len && !param->private_data))
		return -EINVAL;
	might_sleep();
	ret = kevd_cr_check(cr, param->private_data_len, false, !qp_attr, pd);
	if (ret)
		return ret;
	ret = kevd_cm_hold_all(&held, attr);
	if (ret)
		return ret;
	req = kevd_cr_claim(cr, false);
	if (!req) {
		kevd_cm_unhold_all(&held);
		return -EINVAL;
	}
	if (qp_attr) {
		ret = rdma_create_qp(req->id, pd, qp_attr);
		if (ret)
			goto err;
	}
	rid = req->id;
	rdma_lock_handler(rid);
	req->cr_evd = held.cr_evd;
	req->conn_evd = held.conn_evd;
	req->async_evd = held.async_evd;
	req->ep = attr->ep ?: req->id;
	req->sp = attr->sp ?: req->id;
	/* before the QP can receive: nothing of it is delivered yet */
	kevd_cm_gate(req, req->conn_evd);
	ret = rdma_accept(rid, param);
	if (!ret)
		req->request = false;	/* an endpoint: its events flow */
	rdma_unlock_handler(rid);
	if (ret) {
		kevd_cr_end(req, KEVD_REJ_NO_ROOM, NULL, 0);
		return ret;
	}
	/*
	 * The consumer's now: its handler may have ended it already (a
	 * non-zero return frees @req), so @req is not read again.
	 */
	*id = rid;
	return 0;

err:
	kevd_cm_unhold_all(&held);
	kevd_cr_end(req, KEVD_REJ_NO_ROOM, NULL, 0);
	return ret;
}
EXPORT_SYMBOL_GPL(kevd_cr_accept);

/**
 * kevd_cr_reject() - reject a connection request.
 * @cr: the handle of a CR event.
 * @private_data: private data for the requester, or NULL.
 * @private_data_len: its size.
 *
 * The requester sees a consumer reject (DAT: PEER_REJECTED; a requester
 * on siw only if @private_data is given: siw reports a reject as a broken
 * MPA exchange, cm.rst). The request's id is destroyed, with its private
 * data.
 *
 * Context: process context; sleeps. Not from a CM event handler.
 * Return: 0 (also when the CM could not send the reject: the request is
 * gone either way); -EINVAL for a handle that is not a pending request,
 * or more private data than the transport carries (the request stays).
 */
int kevd_cr_reject(void *cr, const void *private_data, u8 private_data_len)
{
	struct kevd_cm *req;

	if (private_data_len && !private_data)
		return -EINVAL;
	might_sleep();
	if (kevd_cr_check(cr, private_data_len, true, false, NULL))
		return -EINVAL;
	req = kevd_cr_claim(cr, false);
	if (!req)
		return -EINVAL;
	kevd_cr_end(req, IB_CM_REJ_CONSUMER_DEFINED, private_data,
		    private_data_len);
	return 0;
}
EXPORT_SYMBOL_GPL(kevd_cr_reject);
