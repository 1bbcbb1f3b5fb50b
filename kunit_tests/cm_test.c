// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_cm: the CM binding as a consumer uses it, through the public header
 * and rdma_cm. The ids are real rdma_cm ids without a device; the test
 * plays rdma_cm and calls the id's event handler with the events a
 * transport would raise. The expected mapping is written from
 * Documentation/kevd/cm.rst, not from cm/cm.c.
 */
#include <kunit/test.h>
#include <linux/in.h>
#include <linux/string.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include <kevd/kevd.h>
#include "fake_hca.h"
#include "kevd_test_export.h"

/* The consumer's own handler: hears what kevd does not map. */
struct cm_chain {
	int calls;
	enum rdma_cm_event_type last;
	int ret;
};

static int cm_chain_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct cm_chain *c = kevd_cm_context(id);

	c->calls++;
	c->last = ev->event;
	return c->ret;
}

static struct rdma_cm_id *cm_id(struct kunit *test, struct cm_chain *c)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(&init_net, cm_chain_handler, c, RDMA_PS_TCP,
			    IB_QPT_RC);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, id);
	return id;
}

static struct kevd *cm_evd(struct kunit *test, u32 qlen, u32 flags,
			   struct kevd *async_evd)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = async_evd;
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/* Raise @type on @id as rdma_cm would, with @len bytes of @pdata. */
static int cm_fire(struct rdma_cm_id *id, enum rdma_cm_event_type type,
		   int status, const void *pdata, u8 len)
{
	struct rdma_cm_event ev = {
		.event = type,
		.status = status,
		.param.conn.private_data = pdata,
		.param.conn.private_data_len = len,
	};

	return id->event_handler(id, &ev);
}

static void cm_pattern(u8 *buf, u32 len, u8 seed)
{
	u32 i;

	for (i = 0; i < len; i++)
		buf[i] = seed + i * 7;
}

static bool cm_pattern_ok(const void *p, u32 len, u8 seed)
{
	const u8 *buf = p;
	u32 i;

	for (i = 0; i < len; i++)
		if (buf[i] != (u8)(seed + i * 7))
			return false;
	return true;
}

/* --- the table of Documentation/kevd/cm.rst --------------------------------- */

enum cm_to { CM_CONN, CM_ASYNC, CM_CHAIN, CM_NOWHERE };

static const struct cm_map_case {
	enum rdma_cm_event_type type;
	int status;
	enum cm_to to;
	u32 number;
	bool pdata;
} cm_map_cases[] = {
	{ RDMA_CM_EVENT_ADDR_RESOLVED, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_ROUTE_RESOLVED, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_ROUTE_ERROR, -ENETUNREACH, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_CONNECT_RESPONSE, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_ROUTE_ERROR, -ETIMEDOUT, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_UNREACHABLE, -EHOSTUNREACH, CM_CONN,
	  KEVD_CONNECTION_EVENT_UNREACHABLE },
	{ RDMA_CM_EVENT_REJECTED, IB_CM_REJ_CONSUMER_DEFINED, CM_CONN,
	  KEVD_CONNECTION_EVENT_PEER_REJECTED, true },
	{ RDMA_CM_EVENT_REJECTED, IB_CM_REJ_INVALID_SERVICE_ID, CM_CONN,
	  KEVD_CONNECTION_EVENT_NON_PEER_REJECTED },
	{ RDMA_CM_EVENT_ESTABLISHED, 0, CM_CONN,
	  KEVD_CONNECTION_EVENT_ESTABLISHED, true },
	{ RDMA_CM_EVENT_DISCONNECTED, 0, CM_CONN,
	  KEVD_CONNECTION_EVENT_DISCONNECTED },
	{ RDMA_CM_EVENT_DEVICE_REMOVAL, 0, CM_ASYNC,
	  KEVD_ASYNC_ERROR_IA_CATASTROPHIC },
	{ RDMA_CM_EVENT_MULTICAST_JOIN, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_MULTICAST_ERROR, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_ADDR_CHANGE, 0, CM_CHAIN },
	{ RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, CM_NOWHERE },
};

/* Every event the running kernel names has a row (CONNECT_REQUEST: below). */
static void kevd_cm_every_event_has_a_row(struct kunit *test)
{
	const char *unknown = rdma_event_msg(-1);
	int type, i, named = 0;
	bool found;

	for (type = 0; type < 64; type++) {
		if (!strcmp(rdma_event_msg(type), unknown))
			continue;
		named++;
		found = type == RDMA_CM_EVENT_CONNECT_REQUEST;
		for (i = 0; i < ARRAY_SIZE(cm_map_cases); i++)
			found |= cm_map_cases[i].type == type;
		KUNIT_EXPECT_TRUE_MSG(test, found, "no row for %s",
				      rdma_event_msg(type));
	}
	KUNIT_EXPECT_GE(test, named, 16);
}

static void cm_expect_none(struct kunit *test, struct kevd *evd)
{
	struct kevd_event ev;

	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), -EAGAIN);
}

/* The connection event @mc maps to; returns its private data. */
static const void *cm_expect_conn(struct kunit *test, struct kevd *conn,
				  const struct cm_map_case *mc, void *ep,
				  u8 len, u8 seed)
{
	const struct kevd_connection_event *ce;
	struct kevd_event ev;

	KUNIT_ASSERT_EQ(test, kevd_dequeue(conn, &ev), 0);
	ce = &ev.connection;
	KUNIT_EXPECT_EQ(test, ev.event_number, mc->number);
	KUNIT_EXPECT_PTR_EQ(test, ce->ep, ep);
	KUNIT_EXPECT_EQ(test, ce->private_data_size, mc->pdata ? (u32)len : 0);
	KUNIT_EXPECT_EQ(test, !!ce->private_data, mc->pdata);
	if (mc->pdata && ce->private_data)
		KUNIT_EXPECT_TRUE(test, cm_pattern_ok(ce->private_data, len,
						      seed));
	return ce->private_data;
}

/*
 * Each event of an endpoint's id, through the binding: posted where the
 * table says with the endpoint's handle, passed to the consumer's
 * handler, or consumed. Private data arrives intact after the CM's
 * buffer is gone (overwritten here), and stays until the id is destroyed.
 */
static void kevd_cm_event_map(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	const void *kept[ARRAY_SIZE(cm_map_cases)] = { };
	struct kevd_cm_attr attr = { };
	struct kevd *conn, *async;
	struct rdma_cm_id *id;
	u8 *pdata = kunit_kzalloc(test, KEVD_CM_MAX_PRIVATE_DATA, GFP_KERNEL);
	struct kevd_event ev;
	int i, calls;

	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_NOT_NULL(test, pdata);
	async = cm_evd(test, 16, KEVD_ASYNC_FLAG, NULL);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	id = cm_id(test, c);
	attr.conn_evd = conn;
	attr.async_evd = async;
	attr.ep = c;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	KUNIT_EXPECT_PTR_EQ(test, kevd_cm_context(id), (void *)c);

	for (i = 0; i < ARRAY_SIZE(cm_map_cases); i++) {
		const struct cm_map_case *mc = &cm_map_cases[i];
		u8 len = 40 + i;

		kunit_info(test, "%s status %d", rdma_event_msg(mc->type),
			   mc->status);
		cm_pattern(pdata, len, i);
		calls = c->calls;
		KUNIT_EXPECT_EQ(test, cm_fire(id, mc->type, mc->status, pdata,
					      len), 0);
		memset(pdata, 0, KEVD_CM_MAX_PRIVATE_DATA);
		KUNIT_EXPECT_EQ(test, c->calls, calls + (mc->to == CM_CHAIN));
		if (mc->to == CM_CHAIN)
			KUNIT_EXPECT_EQ(test, c->last, mc->type);
		if (mc->to == CM_ASYNC) {
			KUNIT_ASSERT_EQ(test, kevd_dequeue(async, &ev), 0);
			KUNIT_EXPECT_EQ(test, ev.event_number, mc->number);
			KUNIT_EXPECT_EQ(test, ev.async.reason, (u32)mc->type);
		}
		if (mc->to == CM_CONN)
			kept[i] = cm_expect_conn(test, conn, mc, c, len, i);
		cm_expect_none(test, conn);
		cm_expect_none(test, async);
	}
	/* the copies live until the id is destroyed */
	for (i = 0; i < ARRAY_SIZE(cm_map_cases); i++)
		if (kept[i])
			KUNIT_EXPECT_TRUE(test, cm_pattern_ok(kept[i], 40 + i, i));

	KUNIT_EXPECT_EQ(test, kevd_free(conn), -EBUSY);
	KUNIT_EXPECT_EQ(test, kevd_free(async), -EBUSY);
	kevd_cm_destroy_id(id);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(async), 0);
}

/* A CONNECT_REQUEST to listener @lid: the new id rdma_cm would make. */
static struct rdma_cm_id *cm_request(struct kunit *test, struct rdma_cm_id *lid,
				     u16 port, const void *pdata, u8 len,
				     int *ret)
{
	struct rdma_cm_id *id;
	struct sockaddr_in *sin;

	id = rdma_create_id(&init_net, lid->event_handler, lid->context,
			    RDMA_PS_TCP, IB_QPT_RC);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, id);
	sin = (struct sockaddr_in *)&id->route.addr.src_addr;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	*ret = cm_fire(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, pdata, len);
	return id;
}

/*
 * Accept with a PD of the fake HCA: the ids here have no device, so
 * kevd refuses the PD as of another device, before it takes the request
 * (rdma_create_qp() would refuse it after); the tests look at the checks.
 */
static int cm_accept(struct kunit *test, void *cr,
		     const struct kevd_cm_attr *attr)
{
	struct ib_pd *pd = kunit_kzalloc(test, sizeof(*pd), GFP_KERNEL);
	struct rdma_conn_param param = { };
	struct ib_qp_init_attr qp_attr = { };
	struct rdma_cm_id *id = NULL;
	struct fake_hca *hca;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, pd);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	pd->device = fake_hca_ibdev(hca);
	ret = kevd_cr_accept(cr, attr, pd, &qp_attr, &param, &id);
	fake_hca_destroy(hca);
	return ret;
}

/* Accept with the QP the consumer made on kevd_cr_id() (none here). */
static int cm_accept_own_qp(void *cr, const struct kevd_cm_attr *attr)
{
	struct rdma_conn_param param = { };
	struct rdma_cm_id *id = NULL;

	return kevd_cr_accept(cr, attr, NULL, NULL, &param, &id);
}

/*
 * A listener's request: a CR event with the service point, the port and
 * the requester's private data (kevd's copy); then a handle that works
 * exactly once, bad arguments that leave the request pending (a PD of
 * another device among them: before, the accept took the request, its
 * rdma_create_qp() failed and the request was rejected), and EVDs that
 * cannot be freed under a binding.
 */
static void kevd_cm_request_and_reject(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	u8 pdata[IB_CM_REJ_PRIVATE_DATA_SIZE + 1];
	struct kevd_cm_attr attr = { }, bad = { };
	struct rdma_cm_id *lid, *req;
	struct kevd *cr_evd, *conn;
	struct kevd_event ev;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	cr_evd = cm_evd(test, 16, KEVD_CR_FLAG, NULL);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	lid = cm_id(test, c);
	attr.cr_evd = cr_evd;
	attr.sp = test;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(lid, &attr), 0);

	cm_pattern(pdata, 56, 3);
	req = cm_request(test, lid, 7471, pdata, 56, &ret);
	KUNIT_EXPECT_EQ(test, ret, 0);
	memset(pdata, 0, sizeof(pdata));
	KUNIT_EXPECT_PTR_EQ(test, kevd_cm_context(req), (void *)c);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(cr_evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_REQUEST_EVENT);
	KUNIT_EXPECT_PTR_EQ(test, ev.cr.sp, (void *)test);
	KUNIT_EXPECT_EQ(test, ev.cr.conn_qual, 7471ULL);
	KUNIT_EXPECT_EQ(test, ev.cr.private_data_size, 56U);
	KUNIT_ASSERT_NOT_NULL(test, ev.cr.private_data);
	KUNIT_EXPECT_TRUE(test, cm_pattern_ok(ev.cr.private_data, 56, 3));
	KUNIT_EXPECT_NOT_NULL(test, ev.cr.cr);

	KUNIT_EXPECT_PTR_EQ(test, kevd_cr_id(ev.cr.cr), req);
	/* no QP made on kevd_cr_id(), and no PD: refused, still pending */
	attr.conn_evd = conn;
	KUNIT_EXPECT_EQ(test, cm_accept_own_qp(ev.cr.cr, &attr), -EINVAL);
	attr.conn_evd = NULL;
	/* bad arguments: the request stays pending */
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, pdata,
					     sizeof(pdata)), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 4), -EINVAL);
	KUNIT_EXPECT_EQ(test, cm_accept(test, ev.cr.cr, &bad), -EINVAL);
	bad.conn_evd = cr_evd;		/* no connection stream */
	KUNIT_EXPECT_EQ(test, cm_accept(test, ev.cr.cr, &bad), -EINVAL);
	/* a PD of another device (the request's id has none) */
	attr.conn_evd = conn;
	KUNIT_EXPECT_EQ(test, cm_accept(test, ev.cr.cr, &attr), -EINVAL);
	attr.conn_evd = NULL;
	KUNIT_EXPECT_PTR_EQ(test, kevd_cr_id(ev.cr.cr), req);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), -EBUSY);

	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, pdata, 8), 0);
	KUNIT_EXPECT_NULL(test, kevd_cr_id(ev.cr.cr));
	/* once only, whatever comes next */
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0), -EINVAL);
	attr.conn_evd = conn;
	KUNIT_EXPECT_EQ(test, cm_accept(test, ev.cr.cr, &attr), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(NULL, NULL, 0), -EINVAL);

	kevd_cm_destroy_id(lid);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
}

/*
 * Requests nobody took when the listener goes are rejected with it, and
 * their handles go stale; a listener without a CR EVD, or whose CR EVD is
 * full, refuses requests (rdma_cm destroys the new id) and the full one
 * says so with an overflow.
 */
static void kevd_cm_requests_end(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct kevd *cr_evd, *conn, *async;
	struct rdma_cm_id *lid, *req;
	struct kevd_event ev;
	struct kevd_param p;
	u32 n = 0;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	async = cm_evd(test, 16, KEVD_ASYNC_FLAG, NULL);
	cr_evd = cm_evd(test, 1, KEVD_CR_FLAG, async);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);

	/* no CR EVD: refused */
	lid = cm_id(test, c);
	attr.conn_evd = conn;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(lid, &attr), 0);
	req = cm_request(test, lid, 1, NULL, 0, &ret);
	KUNIT_EXPECT_NE(test, ret, 0);
	rdma_destroy_id(req);		/* what rdma_cm does on non-zero */
	kevd_cm_destroy_id(lid);

	/* a CR EVD that fills up: queue length and headroom, then refused */
	lid = cm_id(test, c);
	attr.conn_evd = NULL;
	attr.cr_evd = cr_evd;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(lid, &attr), 0);
	do {
		req = cm_request(test, lid, 2, NULL, 0, &ret);
	} while (!ret && ++n < 64);
	KUNIT_EXPECT_LT(test, n, 64U);
	if (ret)
		rdma_destroy_id(req);	/* what rdma_cm does on non-zero */
	KUNIT_ASSERT_EQ(test, kevd_query(cr_evd, &p), 0);
	KUNIT_EXPECT_EQ(test, p.count, n);
	KUNIT_EXPECT_GT(test, n, p.qlen);	/* the headroom was used */
	KUNIT_EXPECT_EQ(test, p.stats.drops, 1ULL);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(async, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_ASYNC_ERROR_EVD_OVERFLOW);

	/* the listener goes: every pending request with it */
	kevd_cm_destroy_id(lid);
	attr.conn_evd = conn;
	while (!kevd_dequeue(cr_evd, &ev)) {
		KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0),
				-EINVAL);
		KUNIT_EXPECT_EQ(test, cm_accept(test, ev.cr.cr, &attr), -EINVAL);
	}
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(async), 0);
}

/* A listener on @cr_evd with consumer handler @c: @lid, bound. */
static struct rdma_cm_id *cm_listener(struct kunit *test, struct cm_chain *c,
				      struct kevd *cr_evd)
{
	struct kevd_cm_attr attr = { .cr_evd = cr_evd };
	struct rdma_cm_id *lid = cm_id(test, c);

	KUNIT_ASSERT_EQ(test, kevd_cm_bind(lid, &attr), 0);
	return lid;
}

/* A request to @lid that kevd took, its CR event taken from @cr_evd. */
static struct rdma_cm_id *cm_pending(struct kunit *test, struct rdma_cm_id *lid,
				     struct kevd *cr_evd, u16 port,
				     struct kevd_event *ev)
{
	struct rdma_cm_id *req;
	int ret;

	req = cm_request(test, lid, port, NULL, 0, &ret);
	KUNIT_ASSERT_EQ(test, ret, 0);
	KUNIT_ASSERT_EQ(test, kevd_dequeue(cr_evd, ev), 0);
	KUNIT_EXPECT_EQ(test, ev->event_number, KEVD_CONNECTION_REQUEST_EVENT);
	return req;
}

/*
 * A request nobody has accepted is kevd's: what happens to it before the
 * accept (the requester gives up: on IB a REJ, or a connect error) does
 * not reach the consumer's handler, which does not know the id and whose
 * non-zero return would make rdma_cm destroy it under kevd's handle. The
 * request stays pending, and its handle still works. DEVICE_REMOVAL ends
 * a pending request, and its handle with it.
 */
static void kevd_cm_request_events_stay_kevds(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct rdma_cm_id *lid, *req;
	struct kevd *cr_evd;
	struct kevd_event ev;

	KUNIT_ASSERT_NOT_NULL(test, c);
	cr_evd = cm_evd(test, 16, KEVD_CR_FLAG, NULL);
	lid = cm_listener(test, c, cr_evd);
	c->ret = -ENOENT;	/* a handler that refuses what it does not know */
	req = cm_pending(test, lid, cr_evd, 9, &ev);

	KUNIT_ASSERT_EQ(test, cm_fire(req, RDMA_CM_EVENT_REJECTED,
				      IB_CM_REJ_TIMEOUT, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, cm_fire(req, RDMA_CM_EVENT_CONNECT_ERROR,
				      -ECONNRESET, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	KUNIT_EXPECT_PTR_EQ(test, kevd_cr_id(ev.cr.cr), req);
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0), 0);

	/* DEVICE_REMOVAL ends a pending request: rdma_cm destroys its id */
	req = cm_pending(test, lid, cr_evd, 10, &ev);
	KUNIT_EXPECT_NE(test, cm_fire(req, RDMA_CM_EVENT_DEVICE_REMOVAL, 0,
				      NULL, 0), 0);
	rdma_destroy_id(req);		/* what rdma_cm does on non-zero */
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	KUNIT_EXPECT_NULL(test, kevd_cr_id(ev.cr.cr));
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0), -EINVAL);
	kevd_cm_destroy_id(lid);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);
}

/*
 * Once kevd_cr_id() gave the consumer a request's id (to make its QP and
 * post receives before it accepts), the request is the consumer's to
 * end: a DEVICE_REMOVAL must not end it, which would destroy the id the
 * consumer is using. It stays pending (rdma_cm's removal waits for the
 * consumer), and its handle still works.
 */
static void kevd_cm_lent_request_stays(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct rdma_cm_id *lid, *req;
	struct kevd *cr_evd;
	struct kevd_event ev;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	cr_evd = cm_evd(test, 16, KEVD_CR_FLAG, NULL);
	lid = cm_listener(test, c, cr_evd);
	req = cm_pending(test, lid, cr_evd, 12, &ev);
	KUNIT_ASSERT_PTR_EQ(test, kevd_cr_id(ev.cr.cr), req);

	rdma_lock_handler(req);		/* as rdma_cm runs a handler */
	ret = cm_fire(req, RDMA_CM_EVENT_DEVICE_REMOVAL, 0, NULL, 0);
	rdma_unlock_handler(req);
	KUNIT_EXPECT_EQ(test, ret, 0);
	if (ret) {
		rdma_destroy_id(req);	/* what rdma_cm does on non-zero */
	} else {
		KUNIT_EXPECT_PTR_EQ(test, kevd_cr_id(ev.cr.cr), req);
		KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0), 0);
	}
	KUNIT_EXPECT_NULL(test, kevd_cr_id(ev.cr.cr));
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	kevd_cm_destroy_id(lid);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);
}

/*
 * A request kevd ends itself leaves its CR event where it was: in the
 * cr_evd, or in the consumer's hands. The event's private data stays
 * valid until the EVD is freed: the consumer cannot know when a device
 * goes. DEVICE_REMOVAL of a pending request, and its listener's
 * kevd_cm_destroy_id(), with the events still queued.
 */
static void kevd_cm_request_data_outlives_its_end(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct rdma_cm_id *lid, *req;
	struct kevd_event ev[2];
	struct kevd *cr_evd;
	u8 pdata[56];
	int i, ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	cr_evd = cm_evd(test, 16, KEVD_CR_FLAG, NULL);
	lid = cm_listener(test, c, cr_evd);
	cm_pattern(pdata, sizeof(pdata), 5);
	req = cm_request(test, lid, 13, pdata, sizeof(pdata), &ret);
	KUNIT_ASSERT_EQ(test, ret, 0);
	KUNIT_EXPECT_NE(test, cm_fire(req, RDMA_CM_EVENT_DEVICE_REMOVAL, 0,
				      NULL, 0), 0);
	rdma_destroy_id(req);		/* what rdma_cm does on non-zero */
	cm_pattern(pdata, sizeof(pdata), 6);
	req = cm_request(test, lid, 14, pdata, sizeof(pdata), &ret);
	KUNIT_ASSERT_EQ(test, ret, 0);
	kevd_cm_destroy_id(lid);	/* rejects the request, destroys it */
	memset(pdata, 0, sizeof(pdata));

	for (i = 0; i < ARRAY_SIZE(ev); i++) {
		KUNIT_ASSERT_EQ(test, kevd_dequeue(cr_evd, &ev[i]), 0);
		KUNIT_EXPECT_EQ(test, ev[i].cr.conn_qual, 13ULL + i);
		KUNIT_EXPECT_EQ(test, ev[i].cr.private_data_size, 56U);
		KUNIT_ASSERT_NOT_NULL(test, ev[i].cr.private_data);
		KUNIT_EXPECT_TRUE(test, cm_pattern_ok(ev[i].cr.private_data,
						      56, 5 + i));
		KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev[i].cr.cr, NULL, 0),
				-EINVAL);
	}
	/* still valid after the calls on the stale handles */
	KUNIT_EXPECT_TRUE(test, cm_pattern_ok(ev[0].cr.private_data, 56, 5));
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);	/* frees them */
}

/*
 * A listener whose consumer handler returns non-zero (rdma_cm then
 * destroys the listener) ends its pending requests as
 * kevd_cm_destroy_id() does: their handles go stale at once. The handler
 * runs under the listener's handler mutex, as rdma_cm calls it; ending a
 * request takes the request's, so kevd must do it after the handler has
 * returned (before, lockdep reported recursive locking). That the work
 * item then destroys the ids is not seen from here: kevd_kmemleak and
 * the module's unload would find them left.
 */
static void kevd_cm_listener_refuses_an_event(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct rdma_cm_id *lid;
	struct kevd *cr_evd;
	struct kevd_event ev;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	cr_evd = cm_evd(test, 16, KEVD_CR_FLAG, NULL);
	lid = cm_listener(test, c, cr_evd);
	cm_pending(test, lid, cr_evd, 11, &ev);

	c->ret = -ENOENT;
	rdma_lock_handler(lid);		/* as rdma_cm runs a handler */
	ret = cm_fire(lid, RDMA_CM_EVENT_ADDR_CHANGE, 0, NULL, 0);
	rdma_unlock_handler(lid);
	KUNIT_EXPECT_EQ(test, ret, -ENOENT);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	rdma_destroy_id(lid);		/* what rdma_cm does on non-zero */
	KUNIT_EXPECT_NULL(test, kevd_cr_id(ev.cr.cr));
	KUNIT_EXPECT_EQ(test, kevd_cr_reject(ev.cr.cr, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_free(cr_evd), 0);
}

/*
 * Binding needs a connected-mode id, a CR or connection EVD, and EVDs
 * with their streams; an id binds once. A consumer handler that returns
 * non-zero (rdma_cm then destroys the id) ends the binding: its EVDs are
 * free.
 */
static void kevd_cm_bind_checks(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *id, *ud;
	struct kevd *conn, *sw;

	KUNIT_ASSERT_NOT_NULL(test, c);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	sw = cm_evd(test, 16, KEVD_SOFTWARE_FLAG, NULL);
	id = cm_id(test, c);
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(NULL, &attr), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, &attr), -EINVAL);
	ud = rdma_create_id(&init_net, cm_chain_handler, c, RDMA_PS_UDP,
			    IB_QPT_UD);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ud);
	attr.conn_evd = conn;
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(ud, &attr), -EINVAL);
	/* not bound: only destroyed, the consumer's context left alone */
	kevd_cm_destroy_id(ud);
	KUNIT_EXPECT_EQ(test, c->calls, 0);
	KUNIT_EXPECT_PTR_EQ(test, kevd_cm_context(NULL), NULL);
	attr.conn_evd = sw;
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, &attr), -EINVAL);
	attr.conn_evd = conn;
	attr.async_evd = sw;
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, &attr), -EINVAL);
	attr.async_evd = NULL;
	attr.cr_evd = conn;
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, &attr), -EINVAL);
	/* nothing was held by the failed binds */
	KUNIT_EXPECT_EQ(test, kevd_free(sw), 0);
	attr.cr_evd = NULL;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	KUNIT_EXPECT_EQ(test, kevd_cm_bind(id, &attr), -EINVAL);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), -EBUSY);

	c->ret = -ENOENT;
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0,
				      NULL, 0), -ENOENT);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	rdma_destroy_id(id);		/* what rdma_cm does on non-zero */
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
}

/*
 * The next event of @evd is @ep's ESTABLISHED, with @len bytes of private
 * data in the pattern of @seed, after the binding that copied them ended:
 * the allocator is churned first with blocks of the copy's size (with its
 * list node), so that a copy freed too early is overwritten.
 */
static void cm_expect_kept_data(struct kunit *test, struct kevd *evd,
				void *ep, u32 len, u8 seed)
{
	struct kevd_event ev;
	void *churn[32];
	int i;

	for (i = 0; i < ARRAY_SIZE(churn); i++) {
		churn[i] = kmalloc(len + 2 * sizeof(void *), GFP_KERNEL);
		if (churn[i])
			memset(churn[i], 0xa5, len + 2 * sizeof(void *));
	}
	KUNIT_EXPECT_EQ(test, kevd_dequeue(evd, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number,
			KEVD_CONNECTION_EVENT_ESTABLISHED);
	KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, ep);
	KUNIT_EXPECT_EQ(test, ev.connection.private_data_size, len);
	KUNIT_EXPECT_TRUE(test, ev.connection.private_data &&
			  cm_pattern_ok(ev.connection.private_data, len, seed));
	for (i = 0; i < ARRAY_SIZE(churn); i++)
		kfree(churn[i]);
}

/*
 * A consumer handler that returns non-zero ends the binding, and rdma_cm
 * destroys the id; the connection events already queued stay the
 * consumer's, private data included, until their EVD is freed. The
 * blocks allocated and written over after the id is gone would reuse a
 * copy that was freed with the binding.
 */
static void kevd_cm_refusal_keeps_data(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	u8 *pdata = kunit_kzalloc(test, KEVD_CM_MAX_PRIVATE_DATA, GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	const u32 len = 60;
	struct rdma_cm_id *id;
	struct kevd *conn;
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_NOT_NULL(test, pdata);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	id = cm_id(test, c);
	attr.conn_evd = conn;
	attr.ep = c;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	cm_pattern(pdata, len, 5);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ESTABLISHED, 0, pdata,
				      len), 0);
	memset(pdata, 0, KEVD_CM_MAX_PRIVATE_DATA);

	c->ret = -ENETRESET;
	rdma_lock_handler(id);		/* as rdma_cm runs a handler */
	ret = cm_fire(id, RDMA_CM_EVENT_ADDR_CHANGE, 0, NULL, 0);
	rdma_unlock_handler(id);
	KUNIT_EXPECT_EQ(test, ret, -ENETRESET);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	rdma_destroy_id(id);		/* what rdma_cm does on non-zero */
	cm_expect_kept_data(test, conn, c, len, 5);
	cm_expect_none(test, conn);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
}

/* An active side's consumer: its ROUTE_RESOLVED handler "makes" its QP. */
struct cm_active {
	struct ib_qp *qp;
};

static int cm_active_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct cm_active *a = kevd_cm_context(id);

	/* as rdma_create_qp() and rdma_connect() would */
	if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED)
		id->qp = a->qp;
	return 0;
}

static struct rdma_cm_id *cm_active_id(struct kunit *test,
				       struct cm_active *a)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(&init_net, cm_active_handler, a, RDMA_PS_TCP,
			    IB_QPT_RC);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, id);
	return id;
}

/* A successful receive of @qp into @cq. */
static void cm_recv(struct kunit *test, struct ib_cq *cq, struct ib_qp *qp,
		    u64 cookie)
{
	struct ib_wc wc = {
		.wr_id = cookie, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
		.byte_len = 8, .qp = qp,
	};

	KUNIT_EXPECT_EQ(test, fake_cq_add(cq, &wc), 0);
}

/*
 * No completion of an endpoint before its ESTABLISHED, even while another
 * endpoint's DISCONNECTED is held behind the CQ (cm.rst). Endpoint A
 * connects on the EVD that its QP completes into; the CQ holds B0 B1 A2
 * B3 A4 (B: another endpoint's QP); B's DISCONNECTED is held behind the
 * CQ (A2 is parked: A's gate is up), then A's ESTABLISHED comes. A2 must
 * not enter before it: A's ESTABLISHED goes ahead of B's held event (the
 * endpoints' own order before the stream's), then the CQ, then B's
 * DISCONNECTED, which still follows every completion the CQ held. Before,
 * A's gate lifted as ESTABLISHED was posted: A2 and A4 entered ahead of
 * it.
 */
static void kevd_cm_established_before_own_completions(struct kunit *test)
{
	struct cm_active *a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	struct cm_chain *cb = kunit_kzalloc(test, sizeof(*cb), GFP_KERNEL);
	static const struct {
		u32 number;
		bool of_a;
		int cookie;
	} want[] = {
		{ KEVD_DTO_COMPLETION_EVENT, false, 0 },
		{ KEVD_DTO_COMPLETION_EVENT, false, 1 },
		{ KEVD_CONNECTION_EVENT_ESTABLISHED, true, -1 },
		{ KEVD_DTO_COMPLETION_EVENT, true, 2 },
		{ KEVD_DTO_COMPLETION_EVENT, false, 3 },
		{ KEVD_DTO_COMPLETION_EVENT, true, 4 },
		{ KEVD_CONNECTION_EVENT_DISCONNECTED, false, -1 },
	};
	static const bool of_a[] = { false, false, true, false, true };
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *ida, *idb;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct ib_qp *qb;
	struct kevd *evd;
	struct ib_cq *cq;
	u32 nmore;
	int i, ret;

	KUNIT_ASSERT_TRUE(test, a && cb);
	evd = kevd_test_dto_conn_evd(test, &hca);
	cq = kevd_cq(evd);
	a->qp = fake_qp_create(hca, cq, 16);
	qb = fake_qp_create(hca, cq, 16);
	KUNIT_ASSERT_FALSE(test, IS_ERR(a->qp) || IS_ERR(qb));

	ida = cm_active_id(test, a);
	idb = cm_id(test, cb);
	attr.conn_evd = evd;
	attr.ep = a;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(ida, &attr), 0);
	attr.ep = cb;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(idb, &attr), 0);

	/* A connects: its QP completes into the EVD's CQ from now on */
	KUNIT_EXPECT_EQ(test, cm_fire(ida, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_PTR_EQ(test, ida->qp, a->qp);
	for (i = 0; i < ARRAY_SIZE(of_a); i++)
		cm_recv(test, cq, of_a[i] ? a->qp : qb, i);
	KUNIT_EXPECT_EQ(test, cm_fire(idb, RDMA_CM_EVENT_DISCONNECTED, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(ida, RDMA_CM_EVENT_ESTABLISHED, 0,
				      NULL, 0), 0);

	for (i = 0; i < ARRAY_SIZE(want); i++) {
		void *ep = want[i].of_a ? (void *)a : (void *)cb;
		void *qp = want[i].of_a ? (void *)a->qp : (void *)qb;

		ret = kevd_wait(evd, 5 * USEC_PER_SEC, 1, &ev, &nmore);
		if (ret) {
			KUNIT_FAIL(test, "event %d did not come: %d", i, ret);
			break;
		}
		KUNIT_EXPECT_EQ_MSG(test, ev.event_number, want[i].number,
				    "event %d", i);
		if (want[i].number != KEVD_DTO_COMPLETION_EVENT) {
			KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, ep);
			continue;
		}
		KUNIT_EXPECT_EQ_MSG(test, ev.dto.cookie, (u64)want[i].cookie,
				    "event %d", i);
		KUNIT_EXPECT_PTR_EQ(test, ev.dto.ep_context, qp);
	}
	cm_expect_none(test, evd);

	ida->qp = NULL;		/* the fake QP is the test's to destroy */
	kevd_cm_destroy_id(ida);
	kevd_cm_destroy_id(idb);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_qp_destroy(a->qp);
	fake_qp_destroy(qb);
	fake_hca_destroy(hca);
}

/*
 * An active endpoint's QP is gated from before the consumer's
 * ROUTE_RESOLVED handler runs, keyed on its id. On iWARP the provider
 * moves the QP to RTS on the peer's MPA reply in its own context (siw's
 * siw_proc_mpareply()), so a receive can complete while that handler
 * still runs (@in_handler); and a consumer may make its QP and connect
 * later, from its own thread. Either way the receive waits for
 * ESTABLISHED: a wait for it meanwhile times out. Before, the gate went
 * up when the handler had returned, on the QP made by then: the receive
 * came first in both cases.
 */
struct cm_early {
	struct ib_qp *qp;
	struct kevd *evd;
	bool in_handler;
	int added;
	int early;
};

/* How long a receive that must wait for ESTABLISHED is looked for. */
#define CM_EARLY_US	(300 * USEC_PER_MSEC)

/* As siw and the peer would: the QP completes a receive at once. */
static int cm_early_recv(struct cm_early *e, struct rdma_cm_id *id)
{
	struct ib_wc wc = {
		.wr_id = 7, .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
		.byte_len = 8, .qp = e->qp,
	};
	struct kevd_event ev;
	u32 nmore;

	id->qp = e->qp;		/* as rdma_create_qp() and rdma_connect() */
	e->added = fake_cq_add(kevd_cq(e->evd), &wc);
	return kevd_wait(e->evd, CM_EARLY_US, 1, &ev, &nmore);
}

static int cm_early_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct cm_early *e = kevd_cm_context(id);

	if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && e->in_handler)
		e->early = cm_early_recv(e, id);
	return 0;
}

static void kevd_cm_established_before_early_receive(struct kunit *test)
{
	struct cm_early *e = kunit_kzalloc(test, sizeof(*e), GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *id;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	u32 nmore;
	int pass;

	KUNIT_ASSERT_NOT_NULL(test, e);
	for (pass = 0; pass < 2; pass++) {
		evd = kevd_test_dto_conn_evd(test, &hca);
		e->evd = evd;
		e->qp = fake_qp_create(hca, kevd_cq(evd), 16);
		KUNIT_ASSERT_FALSE(test, IS_ERR(e->qp));
		e->in_handler = !pass;
		id = rdma_create_id(&init_net, cm_early_handler, e,
				    RDMA_PS_TCP, IB_QPT_RC);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, id);
		attr.conn_evd = evd;
		attr.ep = e;
		KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);

		KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ROUTE_RESOLVED,
					      0, NULL, 0), 0);
		if (!e->in_handler)
			e->early = cm_early_recv(e, id);
		KUNIT_EXPECT_EQ(test, e->added, 0);
		KUNIT_EXPECT_EQ_MSG(test, e->early, -ETIMEDOUT,
				    "the receive came before ESTABLISHED (%s)",
				    e->in_handler ? "in the handler" : "after it");
		KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ESTABLISHED,
					      0, NULL, 0), 0);
		if (!kevd_wait(evd, 5 * USEC_PER_SEC, 1, &ev, &nmore)) {
			KUNIT_EXPECT_EQ(test, ev.event_number,
					(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);
			KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)e);
		} else {
			KUNIT_FAIL(test, "ESTABLISHED did not come");
		}
		if (!kevd_wait(evd, 5 * USEC_PER_SEC, 1, &ev, &nmore)) {
			KUNIT_EXPECT_EQ(test, ev.event_number,
					(u32)KEVD_DTO_COMPLETION_EVENT);
			KUNIT_EXPECT_EQ(test, ev.dto.cookie, 7ULL);
		} else {
			KUNIT_FAIL(test, "the receive did not come");
		}
		cm_expect_none(test, evd);

		id->qp = NULL;		/* the fake QP is the test's */
		kevd_cm_destroy_id(id);
		KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
		fake_qp_destroy(e->qp);
		fake_hca_destroy(hca);
	}
}

/*
 * A gate holds only the QP of a connect that gets an ESTABLISHED on this
 * EVD: an id that connects without a QP of its own (CONNECT_RESPONSE, no
 * ESTABLISHED ever) and an id whose QP completes into another EVD's CQ
 * leave the EVD's polls batched. Before, the gate that went up before
 * ROUTE_RESOLVED stayed: the QP-less one held even completions without
 * a QP, and the other made every poll take one completion.
 */
static void kevd_cm_gate_only_own_connect(struct kunit *test)
{
	struct cm_active *a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	struct fake_cq_stats before, after;
	struct kevd_cm_attr attr = { };
	struct fake_hca *hca, *hca2;
	struct kevd *evd, *other;
	struct rdma_cm_id *id;
	struct kevd_event ev;
	u32 nmore;
	int pass;

	KUNIT_ASSERT_NOT_NULL(test, a);
	other = kevd_test_dto_conn_evd(test, &hca2);
	for (pass = 0; pass < 2; pass++) {
		evd = kevd_test_dto_conn_evd(test, &hca);
		a->qp = pass ? fake_qp_create(hca2, kevd_cq(other), 16) : NULL;
		KUNIT_ASSERT_FALSE(test, IS_ERR(a->qp));
		id = cm_active_id(test, a);
		attr.conn_evd = evd;
		attr.ep = a;
		KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
		KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ROUTE_RESOLVED,
					      0, NULL, 0), 0);
		if (!pass)
			KUNIT_EXPECT_EQ(test,
					cm_fire(id, RDMA_CM_EVENT_CONNECT_RESPONSE,
						0, NULL, 0), 0);

		fake_cq_stats(kevd_cq(evd), &before);
		KUNIT_EXPECT_EQ(test, fake_cq_add_seq_burst(kevd_cq(evd), 32),
				32);
		KUNIT_EXPECT_EQ_MSG(test, kevd_wait(evd, 5 * USEC_PER_SEC, 32,
						    &ev, &nmore), 0,
				    "pass %d", pass);
		fake_cq_stats(kevd_cq(evd), &after);
		KUNIT_EXPECT_EQ(test, after.polled - before.polled, 32ULL);
		/* batched: not one poll per completion */
		KUNIT_EXPECT_LT_MSG(test, after.polls - before.polls, 16ULL,
				    "pass %d", pass);

		id->qp = NULL;		/* the fake QP is the test's */
		kevd_cm_destroy_id(id);
		KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
		if (pass)
			fake_qp_destroy(a->qp);
		fake_hca_destroy(hca);
	}
	KUNIT_EXPECT_EQ(test, kevd_free(other), 0);
	fake_hca_destroy(hca2);
}

/* The next event of @evd, within the test's bound; false if none came. */
static bool cm_next(struct kunit *test, struct kevd *evd,
		    struct kevd_event *ev)
{
	u32 nmore;
	int ret;

	ret = kevd_wait(evd, 5 * USEC_PER_SEC, 1, ev, &nmore);
	if (ret)
		KUNIT_FAIL(test, "no event came: %d", ret);
	return !ret;
}

/*
 * An error event on an established connection (rdma_cm's UNREACHABLE,
 * on RoCE when the peer's neighbour entry changes) is BROKEN, as the DAT
 * mapping has it ("or BROKEN once established"), and ends the connection
 * as DISCONNECTED does: the QP goes to error and its flushes come first.
 * Error events before and after the DISCONNECTED that follows when the
 * id is disconnected, and that DISCONNECTED, are no second end: a
 * completion added after them comes next. Before, the endpoint got a
 * connect's error (then TIMED_OUT), with its QP left as it was, and then
 * a DISCONNECTED.
 */
static void kevd_cm_broken_once_established(struct kunit *test)
{
	struct cm_active *a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	struct ib_recv_wr wr = { .wr_id = 5 };
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *id;
	struct fake_hca *hca;
	struct kevd_event ev;
	struct kevd *evd;
	struct ib_cq *cq;
	u32 to_error;

	KUNIT_ASSERT_NOT_NULL(test, a);
	evd = kevd_test_dto_conn_evd(test, &hca);
	cq = kevd_cq(evd);
	a->qp = fake_qp_create(hca, cq, 16);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, a->qp);
	fake_qp_flush_on_error(a->qp);
	KUNIT_EXPECT_EQ(test, ib_post_recv(a->qp, &wr, NULL), 0);
	id = cm_active_id(test, a);
	attr.conn_evd = evd;
	attr.ep = a;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_ESTABLISHED, 0,
				      NULL, 0), 0);
	if (!cm_next(test, evd, &ev))
		goto out;
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_ESTABLISHED);

	to_error = fake_qp_to_error(a->qp);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_UNREACHABLE,
				      -ETIMEDOUT, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, fake_qp_to_error(a->qp), to_error + 1);
	/* the flush first, then the end */
	if (!cm_next(test, evd, &ev))
		goto out;
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 5ULL);
	KUNIT_EXPECT_EQ(test, ev.dto.status, (u32)KEVD_DTO_ERR_FLUSHED);
	if (!cm_next(test, evd, &ev))
		goto out;
	KUNIT_EXPECT_EQ(test, ev.event_number,
			(u32)KEVD_CONNECTION_EVENT_BROKEN);
	KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)a);

	/* no second end: what the CQ gets after it comes next */
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_UNREACHABLE,
				      -ETIMEDOUT, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_DISCONNECTED, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_UNREACHABLE,
				      -ETIMEDOUT, NULL, 0), 0);
	cm_recv(test, cq, a->qp, 99);
	if (!cm_next(test, evd, &ev))
		goto out;
	KUNIT_EXPECT_EQ(test, ev.event_number, (u32)KEVD_DTO_COMPLETION_EVENT);
	KUNIT_EXPECT_EQ(test, ev.dto.cookie, 99ULL);
	cm_expect_none(test, evd);
out:
	id->qp = NULL;		/* the fake QP is the test's to destroy */
	kevd_cm_destroy_id(id);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_qp_destroy(a->qp);
	fake_hca_destroy(hca);
}

/* @type (@status) on @id, and the connection event it is, or none. */
static void cm_fire_expect(struct kunit *test, struct rdma_cm_id *id,
			   struct kevd *conn, enum rdma_cm_event_type type,
			   int status, u32 number)
{
	struct kevd_event ev;

	KUNIT_EXPECT_EQ(test, cm_fire(id, type, status, NULL, 0), 0);
	if (!number) {
		cm_expect_none(test, conn);
		return;
	}
	KUNIT_ASSERT_EQ(test, kevd_dequeue(conn, &ev), 0);
	KUNIT_EXPECT_EQ(test, ev.event_number, number);
}

/*
 * An endpoint's connection ends once. A reject ends a connect for good
 * (the id does not connect again): an UNREACHABLE after it (rdma_cm
 * raises one on a RoCE neighbour change in any state) posts nothing. A
 * reject of an established connection (ib_cm passes a REJ on to it) is
 * BROKEN, and the DISCONNECTED and the reject after it post nothing.
 * Before, the first got an error (then TIMED_OUT) after its
 * NON_PEER_REJECTED, and the second NON_PEER_REJECTED after ESTABLISHED,
 * then DISCONNECTED.
 */
static void kevd_cm_rejected_ends_once(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *id, *id2;
	struct kevd *conn;

	KUNIT_ASSERT_NOT_NULL(test, c);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	attr.conn_evd = conn;
	attr.ep = c;
	id = cm_id(test, c);
	id2 = cm_id(test, c);
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id2, &attr), 0);

	cm_fire_expect(test, id, conn, RDMA_CM_EVENT_REJECTED,
		       IB_CM_REJ_INVALID_SERVICE_ID,
		       KEVD_CONNECTION_EVENT_NON_PEER_REJECTED);
	cm_fire_expect(test, id, conn, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
		       0);

	cm_fire_expect(test, id2, conn, RDMA_CM_EVENT_ESTABLISHED, 0,
		       KEVD_CONNECTION_EVENT_ESTABLISHED);
	cm_fire_expect(test, id2, conn, RDMA_CM_EVENT_REJECTED,
		       IB_CM_REJ_CONSUMER_DEFINED,
		       KEVD_CONNECTION_EVENT_BROKEN);
	cm_fire_expect(test, id2, conn, RDMA_CM_EVENT_DISCONNECTED, 0, 0);
	cm_fire_expect(test, id2, conn, RDMA_CM_EVENT_REJECTED,
		       IB_CM_REJ_CONSUMER_DEFINED, 0);

	kevd_cm_destroy_id(id);
	kevd_cm_destroy_id(id2);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
}

/*
 * A's ESTABLISHED, with private data, is held behind C's DISCONNECTED,
 * which waits for the CQ: B, still connecting, has a completion parked
 * there. The consumer destroys A before it saw the ESTABLISHED; the
 * destroy lets it in (its completions would follow it), so it reaches
 * the consumer after the destroy, and its private data must still be
 * there.
 */
static void kevd_cm_held_established_keeps_data(struct kunit *test)
{
	struct cm_active *a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	struct cm_active *b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	struct cm_chain *cc = kunit_kzalloc(test, sizeof(*cc), GFP_KERNEL);
	u8 *pdata = kunit_kzalloc(test, KEVD_CM_MAX_PRIVATE_DATA, GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *ida, *idb, *idc;
	struct fake_hca *hca;
	const u32 len = 60;
	struct kevd *evd;
	struct ib_cq *cq;

	KUNIT_ASSERT_TRUE(test, a && b && cc && pdata);
	evd = kevd_test_dto_conn_evd(test, &hca);
	cq = kevd_cq(evd);
	a->qp = fake_qp_create(hca, cq, 16);
	b->qp = fake_qp_create(hca, cq, 16);
	KUNIT_ASSERT_FALSE(test, IS_ERR(a->qp) || IS_ERR(b->qp));

	ida = cm_active_id(test, a);
	idb = cm_active_id(test, b);
	idc = cm_id(test, cc);
	attr.conn_evd = evd;
	attr.ep = a;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(ida, &attr), 0);
	attr.ep = b;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(idb, &attr), 0);
	attr.ep = cc;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(idc, &attr), 0);

	/* B's gate parks its completion: the CQ is never seen empty */
	KUNIT_EXPECT_EQ(test, cm_fire(idb, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				      NULL, 0), 0);
	cm_recv(test, cq, b->qp, 1);
	KUNIT_EXPECT_EQ(test, cm_fire(idc, RDMA_CM_EVENT_DISCONNECTED, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(ida, RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
				      NULL, 0), 0);
	cm_pattern(pdata, len, 7);
	KUNIT_EXPECT_EQ(test, cm_fire(ida, RDMA_CM_EVENT_ESTABLISHED, 0, pdata,
				      len), 0);
	memset(pdata, 0, KEVD_CM_MAX_PRIVATE_DATA);

	ida->qp = NULL;		/* the fake QP is the test's to destroy */
	kevd_cm_destroy_id(ida);
	cm_expect_kept_data(test, evd, a, len, 7);

	idb->qp = NULL;
	kevd_cm_destroy_id(idb);
	kevd_cm_destroy_id(idc);
	KUNIT_EXPECT_EQ(test, kevd_free(evd), 0);
	fake_qp_destroy(a->qp);
	fake_qp_destroy(b->qp);
	fake_hca_destroy(hca);
}

/*
 * DEVICE_REMOVAL with an async EVD full even in its headroom: rdma_cm's
 * removal waits for the consumer to destroy the id, so the event must
 * reach the consumer, through its handler, rather than be dropped.
 */
static void kevd_cm_removal_never_dropped(struct kunit *test)
{
	struct cm_chain *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct kevd_event fill = {
		.event_number = KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR,
	};
	struct kevd_cm_attr attr = { };
	struct kevd *conn, *async;
	struct rdma_cm_id *id;
	struct kevd_event ev;
	int i, ret = 0;

	KUNIT_ASSERT_NOT_NULL(test, c);
	async = cm_evd(test, 1, KEVD_ASYNC_FLAG, NULL);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	/* a bound on the headroom: it is a few batches at most */
	for (i = 0; i < 1024 && !ret; i++)
		ret = kevd_post_event(async, &fill);
	KUNIT_ASSERT_EQ(test, ret, -EOVERFLOW);
	id = cm_id(test, c);
	attr.conn_evd = conn;
	attr.async_evd = async;
	attr.ep = c;
	KUNIT_ASSERT_EQ(test, kevd_cm_bind(id, &attr), 0);
	KUNIT_EXPECT_EQ(test, cm_fire(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0,
				      NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, c->calls, 1);
	KUNIT_EXPECT_EQ(test, c->last, RDMA_CM_EVENT_DEVICE_REMOVAL);
	kevd_cm_destroy_id(id);
	while (kevd_dequeue(async, &ev) == 0)
		KUNIT_EXPECT_EQ(test, ev.event_number,
				KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(async), 0);
}

/*
 * The classic DAT layout: the endpoint's DTOs complete into an EVD of
 * their own, not into the connection EVD. A reject or a disconnect still
 * moves the QP to error, so that the receives posted before the connect
 * come back flushed (cm.rst), on iWARP too, where rdma_cm does not.
 */
static void kevd_cm_end_flushes_other_evd(struct kunit *test)
{
	static const enum rdma_cm_event_type ends[] = {
		RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_DISCONNECTED,
	};
	struct cm_active *a = kunit_kcalloc(test, ARRAY_SIZE(ends), sizeof(*a),
					    GFP_KERNEL);
	struct kevd_cm_attr attr = { };
	struct rdma_cm_id *id[ARRAY_SIZE(ends)];
	struct kevd *conn, *dto;
	struct kevd_attr eattr;
	struct fake_hca *hca;
	struct kevd_event ev;
	int i;

	KUNIT_ASSERT_NOT_NULL(test, a);
	hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, hca);
	kevd_attr_init(&eattr);
	eattr.qlen = 16;
	eattr.flags = KEVD_DTO_FLAG;
	eattr.upcall_policy = KEVD_UPCALL_DISABLE;
	dto = kevd_create(fake_hca_ibdev(hca), &eattr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dto);
	conn = cm_evd(test, 16, KEVD_CONNECTION_FLAG, NULL);
	attr.conn_evd = conn;
	for (i = 0; i < ARRAY_SIZE(ends); i++) {
		a[i].qp = fake_qp_create(hca, kevd_cq(dto), 16);
		KUNIT_ASSERT_FALSE(test, IS_ERR(a[i].qp));
		id[i] = cm_active_id(test, &a[i]);
		attr.ep = &a[i];
		KUNIT_ASSERT_EQ(test, kevd_cm_bind(id[i], &attr), 0);
		KUNIT_EXPECT_EQ(test, cm_fire(id[i],
					      RDMA_CM_EVENT_ROUTE_RESOLVED, 0,
					      NULL, 0), 0);
		KUNIT_EXPECT_EQ(test, fake_qp_to_error(a[i].qp), 0U);
		KUNIT_EXPECT_EQ(test, cm_fire(id[i], ends[i],
					      IB_CM_REJ_CONSUMER_DEFINED, NULL,
					      0), 0);
		KUNIT_EXPECT_EQ_MSG(test, fake_qp_to_error(a[i].qp), 1U,
				    "after %s", rdma_event_msg(ends[i]));
		KUNIT_EXPECT_EQ(test, kevd_dequeue(conn, &ev), 0);
		KUNIT_EXPECT_PTR_EQ(test, ev.connection.ep, (void *)&a[i]);
	}
	cm_expect_none(test, conn);
	for (i = 0; i < ARRAY_SIZE(ends); i++) {
		id[i]->qp = NULL;	/* the fake QP is the test's */
		kevd_cm_destroy_id(id[i]);
		fake_qp_destroy(a[i].qp);
	}
	KUNIT_EXPECT_EQ(test, kevd_free(conn), 0);
	KUNIT_EXPECT_EQ(test, kevd_free(dto), 0);
	fake_hca_destroy(hca);
}

static struct kunit_case kevd_cm_cases[] = {
	KUNIT_CASE(kevd_cm_every_event_has_a_row),
	KUNIT_CASE(kevd_cm_event_map),
	KUNIT_CASE(kevd_cm_request_and_reject),
	KUNIT_CASE(kevd_cm_requests_end),
	KUNIT_CASE(kevd_cm_request_events_stay_kevds),
	KUNIT_CASE(kevd_cm_lent_request_stays),
	KUNIT_CASE(kevd_cm_request_data_outlives_its_end),
	KUNIT_CASE(kevd_cm_listener_refuses_an_event),
	KUNIT_CASE(kevd_cm_bind_checks),
	KUNIT_CASE(kevd_cm_refusal_keeps_data),
	KUNIT_CASE(kevd_cm_established_before_own_completions),
	KUNIT_CASE(kevd_cm_established_before_early_receive),
	KUNIT_CASE(kevd_cm_gate_only_own_connect),
	KUNIT_CASE(kevd_cm_broken_once_established),
	KUNIT_CASE(kevd_cm_rejected_ends_once),
	KUNIT_CASE(kevd_cm_held_established_keeps_data),
	KUNIT_CASE(kevd_cm_removal_never_dropped),
	KUNIT_CASE(kevd_cm_end_flushes_other_evd),
	{}
};

static struct kunit_suite kevd_cm_suite = {
	.name = "kevd_cm",
	.test_cases = kevd_cm_cases,
};

kunit_test_suite(kevd_cm_suite);
