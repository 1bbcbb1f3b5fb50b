/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd: a kDAPL-style event dispatcher (EVD) for kernel RDMA consumers.
 *
 * An EVD is a FIFO of events fed by up to six streams (DTO completions from
 * an ib_core CQ, RMR bind, connection requests, connection events, async
 * errors and software events). The consumer takes events with
 * kevd_dequeue() or kevd_wait(), or has them delivered to an upcall in
 * process context by kevd's poller threads, as the upcall policy says.
 *
 * Numeric values (event numbers, stream flags, DTO statuses, upcall
 * policies and flags) are those of kDAT 2.0, so a DAT consumer maps 1:1.
 * Errors are negative errno values, each standing for a DAT return code:
 * -EINVAL invalid parameter or handle (NULL, out of range, a stream the
 * EVD does not have, an EVD being freed), -EAGAIN queue empty, -ENOSPC
 * queue full (kevd_post_se()), -EOVERFLOW an event dropped for room (the
 * EVD overflowed), -EBUSY invalid state (an EVD still in use by a
 * stream, a waiter or a resize; a second waiter; a resize below what is
 * queued), -ETIMEDOUT timeout expired, -ERESTARTSYS interrupted call,
 * -ECANCELED a wait on an unwaitable EVD, -EDEADLK a call that would
 * wait for the caller's own upcall, -ENOMEM insufficient resources; a
 * provider's own error passes through (-EOPNOTSUPP from a resize whose
 * CQ cannot grow, as on siw).
 *
 * The kernel-doc of each function, at its definition in kevd's sources,
 * gives its context and its return values; Documentation/kevd/api.rst
 * describes the semantics in full.
 */
#ifndef _KEVD_KEVD_H
#define _KEVD_KEVD_H

#include <linux/types.h>
#include <linux/err.h>

struct ib_device;
struct ib_cq;
struct ib_qp;
struct ib_event;
struct ib_wc;
struct ib_pd;
struct ib_qp_init_attr;
struct rdma_cm_id;
struct rdma_conn_param;
struct kevd;

/**
 * enum kevd_event_number - DAT 2.0 event numbers.
 * @KEVD_DTO_COMPLETION_EVENT: a work request completed (DTO stream).
 * @KEVD_RMR_BIND_COMPLETION_EVENT: an RMR bind completed.
 * @KEVD_CONNECTION_REQUEST_EVENT: a connection request arrived.
 * @KEVD_CONNECTION_EVENT_ESTABLISHED: the connection is established.
 * @KEVD_CONNECTION_EVENT_PEER_REJECTED: the peer rejected the connection.
 * @KEVD_CONNECTION_EVENT_NON_PEER_REJECTED: rejected by someone else.
 * @KEVD_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: accept failed.
 * @KEVD_CONNECTION_EVENT_DISCONNECTED: the connection is closed.
 * @KEVD_CONNECTION_EVENT_BROKEN: the connection broke.
 * @KEVD_CONNECTION_EVENT_TIMED_OUT: connecting timed out (a consumer's
 *	own connect timer posts it, once it destroyed the id:
 *	kevd_cm_bind() maps rdma_cm's errors, timeouts included, to
 *	UNREACHABLE).
 * @KEVD_CONNECTION_EVENT_UNREACHABLE: the peer is unreachable.
 * @KEVD_ASYNC_ERROR_EVD_OVERFLOW: an EVD had to drop an event; the handle
 *	is the EVD that overflowed.
 * @KEVD_ASYNC_ERROR_IA_CATASTROPHIC: the device failed.
 * @KEVD_ASYNC_ERROR_EP_BROKEN: an endpoint (QP) broke.
 * @KEVD_ASYNC_ERROR_TIMED_OUT: an endpoint timed out.
 * @KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: provider internal error.
 * @KEVD_SOFTWARE_EVENT: an event posted with kevd_post_se().
 */
enum kevd_event_number {
	KEVD_DTO_COMPLETION_EVENT			= 0x00001,
	KEVD_RMR_BIND_COMPLETION_EVENT			= 0x01001,
	KEVD_CONNECTION_REQUEST_EVENT			= 0x02001,
	KEVD_CONNECTION_EVENT_ESTABLISHED		= 0x04001,
	KEVD_CONNECTION_EVENT_PEER_REJECTED		= 0x04002,
	KEVD_CONNECTION_EVENT_NON_PEER_REJECTED		= 0x04003,
	KEVD_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR	= 0x04004,
	KEVD_CONNECTION_EVENT_DISCONNECTED		= 0x04005,
	KEVD_CONNECTION_EVENT_BROKEN			= 0x04006,
	KEVD_CONNECTION_EVENT_TIMED_OUT			= 0x04007,
	KEVD_CONNECTION_EVENT_UNREACHABLE		= 0x04008,
	KEVD_ASYNC_ERROR_EVD_OVERFLOW			= 0x08001,
	KEVD_ASYNC_ERROR_IA_CATASTROPHIC		= 0x08002,
	KEVD_ASYNC_ERROR_EP_BROKEN			= 0x08003,
	KEVD_ASYNC_ERROR_TIMED_OUT			= 0x08004,
	KEVD_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR	= 0x08005,
	KEVD_SOFTWARE_EVENT				= 0x10001,
};

/* EVD stream flags (DAT_EVD_*_FLAG). */
#define KEVD_SOFTWARE_FLAG	0x001
#define KEVD_CR_FLAG		0x010
#define KEVD_DTO_FLAG		0x020
#define KEVD_CONNECTION_FLAG	0x040
#define KEVD_RMR_BIND_FLAG	0x080
#define KEVD_ASYNC_FLAG		0x100
/* The DAT default: every DAT stream, no software events. */
#define KEVD_DEFAULT_FLAG	0x1f0
#define KEVD_ALL_FLAGS		0x1f1

/**
 * enum kevd_stream - index of a stream, for the per-stream statistics.
 * @KEVD_STREAM_DTO: DTO completions.
 * @KEVD_STREAM_RMR_BIND: RMR bind completions.
 * @KEVD_STREAM_CR: connection requests.
 * @KEVD_STREAM_CONNECTION: connection events.
 * @KEVD_STREAM_ASYNC: async errors.
 * @KEVD_STREAM_SOFTWARE: software events.
 * @KEVD_NR_STREAMS: number of streams.
 */
enum kevd_stream {
	KEVD_STREAM_DTO,
	KEVD_STREAM_RMR_BIND,
	KEVD_STREAM_CR,
	KEVD_STREAM_CONNECTION,
	KEVD_STREAM_ASYNC,
	KEVD_STREAM_SOFTWARE,
	KEVD_NR_STREAMS,
};

/**
 * enum kevd_dto_status - DAT DTO completion status.
 * @KEVD_DTO_SUCCESS: success.
 * @KEVD_DTO_ERR_FLUSHED: flushed (the QP went to error).
 * @KEVD_DTO_ERR_LOCAL_LENGTH: local length error.
 * @KEVD_DTO_ERR_LOCAL_EP: local endpoint (QP operation) error.
 * @KEVD_DTO_ERR_LOCAL_PROTECTION: local protection error.
 * @KEVD_DTO_ERR_BAD_RESPONSE: bad response.
 * @KEVD_DTO_ERR_REMOTE_ACCESS: remote access error.
 * @KEVD_DTO_ERR_REMOTE_RESPONDER: remote responder (operation) error.
 * @KEVD_DTO_ERR_TRANSPORT: transport error (retries exceeded).
 * @KEVD_DTO_ERR_RECEIVER_NOT_READY: receiver not ready (RNR retries).
 * @KEVD_DTO_ERR_PARTIAL_PACKET: partial packet.
 * @KEVD_DTO_ERR_RMR_OPERATION_FAILED: RMR operation failed.
 * @KEVD_DTO_ERR_LOCAL_MM_ERROR: local memory-management error (kDAT only);
 *	also the catch-all for provider statuses DAT has no name for.
 */
enum kevd_dto_status {
	KEVD_DTO_SUCCESS			= 0,
	KEVD_DTO_ERR_FLUSHED			= 1,
	KEVD_DTO_ERR_LOCAL_LENGTH		= 2,
	KEVD_DTO_ERR_LOCAL_EP			= 3,
	KEVD_DTO_ERR_LOCAL_PROTECTION		= 4,
	KEVD_DTO_ERR_BAD_RESPONSE		= 5,
	KEVD_DTO_ERR_REMOTE_ACCESS		= 6,
	KEVD_DTO_ERR_REMOTE_RESPONDER		= 7,
	KEVD_DTO_ERR_TRANSPORT			= 8,
	KEVD_DTO_ERR_RECEIVER_NOT_READY		= 9,
	KEVD_DTO_ERR_PARTIAL_PACKET		= 10,
	KEVD_DTO_ERR_RMR_OPERATION_FAILED	= 11,
	KEVD_DTO_ERR_LOCAL_MM_ERROR		= 12,
};

/**
 * enum kevd_dto_op - the operation a DTO completion reports.
 * @KEVD_DTO_SEND: send.
 * @KEVD_DTO_RDMA_WRITE: RDMA write.
 * @KEVD_DTO_RDMA_READ: RDMA read.
 * @KEVD_DTO_RECEIVE: receive.
 * @KEVD_DTO_RECEIVE_WITH_INVALIDATE: receive of a send with invalidate.
 * @KEVD_DTO_BIND_MW: memory window bind.
 * @KEVD_DTO_LMR_FMR: fast memory registration (IB_WC_REG_MR).
 * @KEVD_DTO_LMR_INVALIDATE: local invalidate.
 * @KEVD_DTO_RDMA_WRITE_IMMED: RDMA write with immediate (sender side).
 * @KEVD_DTO_RECEIVE_IMMED: receive of an RDMA write with immediate.
 * @KEVD_DTO_CMP_AND_SWAP: atomic compare and swap.
 * @KEVD_DTO_FETCH_AND_ADD: atomic fetch and add.
 * @KEVD_DTO_UNKNOWN: an opcode kevd does not know, or a failed completion
 *	(never garbage).
 */
enum kevd_dto_op {
	KEVD_DTO_SEND,
	KEVD_DTO_RDMA_WRITE,
	KEVD_DTO_RDMA_READ,
	KEVD_DTO_RECEIVE,
	KEVD_DTO_RECEIVE_WITH_INVALIDATE,
	KEVD_DTO_BIND_MW,
	KEVD_DTO_LMR_FMR,
	KEVD_DTO_LMR_INVALIDATE,
	KEVD_DTO_RDMA_WRITE_IMMED,
	KEVD_DTO_RECEIVE_IMMED,
	KEVD_DTO_CMP_AND_SWAP,
	KEVD_DTO_FETCH_AND_ADD,
	KEVD_DTO_UNKNOWN,
};

/**
 * enum kevd_upcall_policy - DAT upcall policies (kDAT).
 * @KEVD_UPCALL_TEARDOWN: no upcalls; kevd_modify_upcall() returns only
 *	after every upcall in progress has returned.
 * @KEVD_UPCALL_DISABLE: no upcalls; the consumer dequeues or waits.
 * @KEVD_UPCALL_SINGLE_INSTANCE: upcalls, never two at once for one EVD.
 * @KEVD_UPCALL_NOTIFY: one upcall without an event as a doorbell; the
 *	consumer dequeues.
 * @KEVD_UPCALL_MANY: upcalls that may run concurrently.
 */
enum kevd_upcall_policy {
	KEVD_UPCALL_TEARDOWN		= -1,
	KEVD_UPCALL_DISABLE		= 0,
	KEVD_UPCALL_SINGLE_INSTANCE	= 1,
	KEVD_UPCALL_NOTIFY		= 2,
	KEVD_UPCALL_MANY		= 100,
};

/**
 * enum kevd_upcall_flag - when an upcall is invoked (DAT 2.0).
 * @KEVD_UPCALL_INVOC_NEW: upcalls start only on an event that arrives
 *	after enabling; they then deliver the queue in order, older events
 *	first (Documentation/kevd/api.rst: what counts as an arrival).
 * @KEVD_UPCALL_INVOC_ANY: whenever the EVD holds an event, including
 *	events already queued when upcalls are enabled.
 */
enum kevd_upcall_flag {
	KEVD_UPCALL_INVOC_NEW	= 0,
	KEVD_UPCALL_INVOC_ANY	= 1,
};

/**
 * struct kevd_dto_event - a DTO completion.
 * @ep_context: the QP's context (qp->qp_context).
 * @cookie: the work request's wr_id.
 * @status: &enum kevd_dto_status.
 * @transferred_length: bytes transferred by a receive, an RDMA READ or an
 *	atomic, else 0; defined only on success.
 * @operation: &enum kevd_dto_op.
 * @imm_data: immediate data (host order), valid if @has_imm.
 * @has_imm: a receive carries immediate data (a sender's completion has
 *	none to give).
 * @reserved: zero.
 * @vendor_err: the provider's vendor error code of a failed completion,
 *	for diagnostics; 0 for a successful one (the verbs define it only
 *	for errors).
 */
struct kevd_dto_event {
	void *ep_context;
	u64 cookie;
	u32 status;
	u32 transferred_length;
	u16 operation;
	u8 has_imm;
	u8 reserved;
	u32 imm_data;
	u32 vendor_err;
};

/**
 * struct kevd_rmr_bind_event - an RMR (memory window) bind completion.
 * @rmr: the memory window.
 * @cookie: the bind's cookie.
 * @status: &enum kevd_dto_status.
 */
struct kevd_rmr_bind_event {
	void *rmr;
	u64 cookie;
	u32 status;
};

/**
 * struct kevd_cr_event - a connection request.
 * @sp: the service point (listener) it arrived on.
 * @cr: the connection request handle (kevd_cr_accept(), kevd_cr_reject()).
 * @conn_qual: the connection qualifier: the port (the service ID on an
 *	AF_IB address).
 * @private_data: the requester's private data, or NULL. From a CM binding
 *	it is kevd's copy: valid until kevd_cr_reject() returns, or a
 *	kevd_cr_accept() that took the request and failed, or, once
 *	accepted, until kevd_cm_destroy_id() of the accepted id (until the
 *	connection EVD is freed if a handler's non-zero return ended that
 *	id). A request that kevd ends (its listener destroyed,
 *	DEVICE_REMOVAL) keeps it until this event's EVD is freed.
 * @private_data_size: its size in bytes, as the CM reported it.
 */
struct kevd_cr_event {
	void *sp;
	void *cr;
	u64 conn_qual;
	const void *private_data;
	u32 private_data_size;
};

/**
 * struct kevd_connection_event - a connection event.
 * @ep: the endpoint.
 * @private_data: private data, or NULL. From a CM binding it is kevd's
 *	copy, valid until kevd_cm_destroy_id() of the endpoint's id (until
 *	this event's EVD is freed if a handler's non-zero return ended the
 *	id, or if the event was still held behind the CQ at the destroy);
 *	posted with kevd_post_event(), it is the poster's.
 * @private_data_size: its size in bytes.
 */
struct kevd_connection_event {
	void *ep;
	const void *private_data;
	u32 private_data_size;
};

/**
 * struct kevd_async_event - an asynchronous error.
 * @handle: the object in error; for %KEVD_ASYNC_ERROR_EVD_OVERFLOW, the
 *	EVD that overflowed (a struct kevd *).
 * @reason: a provider reason (the ib_event type for routed QP events,
 *	the &enum kevd_stream that dropped an event for an overflow).
 */
struct kevd_async_event {
	void *handle;
	u32 reason;
};

/**
 * struct kevd_software_event - an event posted by kevd_post_se().
 * @pointer: the consumer's pointer.
 */
struct kevd_software_event {
	void *pointer;
};

/**
 * struct kevd_event - an event as the consumer receives it.
 * @event_number: &enum kevd_event_number.
 * @evd: the EVD it came from.
 * @dto: for %KEVD_DTO_COMPLETION_EVENT.
 * @rmr_bind: for %KEVD_RMR_BIND_COMPLETION_EVENT.
 * @cr: for %KEVD_CONNECTION_REQUEST_EVENT.
 * @connection: for the %KEVD_CONNECTION_EVENT_* numbers.
 * @async: for the %KEVD_ASYNC_ERROR_* numbers.
 * @software: for %KEVD_SOFTWARE_EVENT.
 */
struct kevd_event {
	u32 event_number;
	struct kevd *evd;
	union {
		struct kevd_dto_event dto;
		struct kevd_rmr_bind_event rmr_bind;
		struct kevd_cr_event cr;
		struct kevd_connection_event connection;
		struct kevd_async_event async;
		struct kevd_software_event software;
	};
};

/**
 * typedef kevd_upcall_func - a consumer upcall.
 * @ctx: the instance data of the upcall object.
 * @ev: the event; NULL for a %KEVD_UPCALL_NOTIFY doorbell. It is valid
 *	only until the upcall returns: copy what is needed later.
 * @more_events: true if, when the upcall was invoked, more events were
 *	queued on the EVD or taken for delivery after this one.
 *
 * Context: process context (a kevd poller thread); may sleep.
 */
typedef void (*kevd_upcall_func)(void *ctx, const struct kevd_event *ev,
				 bool more_events);

/**
 * typedef kevd_wc_upcall_func - a raw-completion upcall (beyond DAT).
 * @ctx: the instance data of the upcall object.
 * @wcs: work completions of the EVD's CQ, as ib_poll_cq() returned them,
 *	in CQ order; valid only until the upcall returns. Their wr_id is
 *	the DTO cookie.
 * @n: how many, 1 .. 64.
 *
 * For consumers that want ib_core's completions in batches, as
 * ib_alloc_cq()'s consumers get them, rather than one DAT event per
 * call: see &struct kevd_upcall.
 *
 * Context: process context (a kevd poller thread); may sleep.
 */
typedef void (*kevd_wc_upcall_func)(void *ctx, const struct ib_wc *wcs,
				    u32 n);

/**
 * struct kevd_upcall - an upcall object.
 * @func: the function; required.
 * @ctx: its instance data (for @wc_func too).
 * @wc_func: NULL, or the raw-completion flavour (an extension beyond
 *	DAT); zero-initialise the object (or kevd_attr_init() the
 *	attributes) so that a consumer without it leaves it NULL.
 *	Under %KEVD_UPCALL_SINGLE_INSTANCE, completions the poller takes
 *	straight from the CQ while the EVD holds no queued event go
 *	to it, a whole poll (up to 64) per call and not converted; a policy
 *	change inside it gives nothing back (the batch counts as delivered).
 *	Every other event (software, connection, async) and completions
 *	that went through the EVD's queue (it held events, or the policy
 *	was another) reach @func as DAT events. Under other policies it is
 *	not called. The order of the two kinds holds: a completion never
 *	overtakes an event queued before it.
 */
struct kevd_upcall {
	kevd_upcall_func func;
	void *ctx;
	kevd_wc_upcall_func wc_func;
};

/* A CPU or completion vector hint that lets kevd choose. */
#define KEVD_ANY	(-1)

/**
 * struct kevd_attr - attributes of a new EVD; kevd_attr_init() sets the
 * defaults (module parameters), then the consumer changes what it needs.
 * @qlen: minimum queue length, 1 .. 2^20; kevd_query() reports the actual
 *	one, which is never above 2^20 either. DTO completions and software
 *	events fill at most the queue length (then completions wait in the
 *	CQ, kevd_post_se() gets -ENOSPC); CR, connection, async and RMR
 *	bind events, which cannot wait, may use 8 slots of headroom above
 *	it before one is dropped (-EOVERFLOW, and an overflow event).
 * @flags: stream flags (KEVD_*_FLAG).
 * @upcall_policy: initial &enum kevd_upcall_policy (not TEARDOWN).
 * @upcall: initial upcall object; required unless the policy is DISABLE.
 * @upcall_flag: &enum kevd_upcall_flag.
 * @cpu: the CPU whose poller serves the EVD (each poller runs on its
 *	CPU while that CPU is online; a CPU without a poller, with
 *	nr_pollers below the number of CPUs, gets the poller of number @cpu
 *	modulo nr_pollers, on another CPU), or %KEVD_ANY: the CPU of the
 *	CQ's completion vector where the provider reports it, else round
 *	robin.
 * @comp_vector: completion vector of the CQ (DTO stream): 0 .. the
 *	device's num_comp_vectors - 1 (a larger one wraps, modulo that
 *	number), or %KEVD_ANY: the vector the fewest of kevd's CQs on the
 *	device use.
 * @cq_depth: CQ depth (DTO stream); 0: the queue length (the actual one,
 *	but not beyond the device's max_cqe where @qlen fits in it), and
 *	kevd_resize() grows the CQ with it.
 * @solicited_only: arm the CQ for solicited completions only. IBTA
 *	counts a completion in error as solicited, but rxe and siw do not
 *	signal one (nor a flush) on such an arm: there, a failed send or a
 *	flush comes only with the next solicited completion or the
 *	consumer's next call that polls the CQ (kevd_dequeue() or
 *	kevd_wait() on an empty ring, upcalls disabled). A teardown that
 *	waits for flushes in an upcall needs an EVD without it on those
 *	providers, or kevd_destroy_qp() (kevd_cm_destroy_id() for a bound
 *	id), which polls for them itself.
 * @async_evd: the EVD that receives this EVD's async errors (overflow),
 *	or NULL; must have %KEVD_ASYNC_FLAG.
 */
struct kevd_attr {
	u32 qlen;
	u32 flags;
	int upcall_policy;
	struct kevd_upcall upcall;
	int upcall_flag;
	int cpu;
	int comp_vector;
	u32 cq_depth;
	bool solicited_only;
	struct kevd *async_evd;
};

/**
 * enum kevd_state - state bits reported by kevd_query().
 * @KEVD_STATE_OPEN: the EVD is open.
 * @KEVD_STATE_WAITED: a thread waits in kevd_wait().
 * @KEVD_STATE_OVERFLOWED: an event was dropped; see kevd_resize().
 * @KEVD_STATE_UNWAITABLE: kevd_wait() returns at once.
 */
enum kevd_state {
	KEVD_STATE_OPEN		= 1 << 0,
	KEVD_STATE_WAITED	= 1 << 1,
	KEVD_STATE_OVERFLOWED	= 1 << 2,
	KEVD_STATE_UNWAITABLE	= 1 << 3,
};

/**
 * struct kevd_stats - counters of an EVD (or totals over all EVDs).
 * @posted: events entered into the EVD, per &enum kevd_stream.
 * @delivered: events handed to the consumer, per stream; counted as a
 *	batch takes them, before its upcalls run (an upcall that queries
 *	finds its own event counted). A query taken while events flow
 *	never shows a stream with more delivered than posted.
 * @upcalls: upcall invocations (NOTIFY doorbells included). Event
 *	upcalls count as their batch ends (unlike @delivered: one that
 *	queries may not find itself counted yet), a doorbell as it rings.
 * @notifications: CQ completion notifications received.
 * @empty_notifications: notifications after which the CQ held nothing.
 * @arms: ib_req_notify_cq() calls.
 * @repolls: arms after which the check found work (missed events).
 * @backpressure_stalls: CQ drains cut short by a full event ring.
 * @overflows: overflows: each drop, and each CQ overrun the provider
 *	reported (a completion lost). Each raised an overflow event on the
 *	async EVD, but a CQ overrun only the first time until kevd_resize(),
 *	and an async EVD's own drop none (it has nowhere to go).
 * @drops: events dropped.
 * @max_batch: largest number of events moved in one batch.
 * @discarded: events still queued when kevd_free() discarded them. For
 *	every EVD, and in the totals: posted = delivered + discarded +
 *	queued now (drops are never posted).
 * @pulls: pulls of the CQ a consumer made itself, in kevd_dequeue()
 *	or kevd_wait() with upcalls disabled (no poller involved), or in
 *	kevd_query() after such a pull left the CQ unarmed; one pull may
 *	pass over the CQ up to three times.
 * @moderations: moderation profiles applied to the CQ by the adaptive
 *	moderation of the cq_dim module parameter (rdma_set_cq_moderation()
 *	calls).
 */
struct kevd_stats {
	u64 posted[KEVD_NR_STREAMS];
	u64 delivered[KEVD_NR_STREAMS];
	u64 upcalls;
	u64 notifications;
	u64 empty_notifications;
	u64 arms;
	u64 repolls;
	u64 backpressure_stalls;
	u64 overflows;
	u64 drops;
	u64 max_batch;
	u64 discarded;
	u64 pulls;
	u64 moderations;
};

/**
 * struct kevd_param - what kevd_query() reports.
 * @qlen: actual queue length.
 * @count: events queued now (not those an upcall batch is delivering);
 *	at most @qlen and the headroom, but for events given back to a
 *	queue of the largest length (api.rst).
 * @upcall_policy: current policy.
 * @upcall_flag: current upcall flag.
 * @upcall: current upcall object.
 * @flags: stream flags.
 * @state: &enum kevd_state bits.
 * @cq: the CQ of the DTO stream, or NULL.
 * @mem_bytes: memory the EVD holds (object and ring; not the CQ).
 * @stats: the EVD's counters.
 */
struct kevd_param {
	u32 qlen;
	u32 count;
	int upcall_policy;
	int upcall_flag;
	struct kevd_upcall upcall;
	u32 flags;
	u32 state;
	struct ib_cq *cq;
	size_t mem_bytes;
	struct kevd_stats stats;
};

/* Infinite timeout of kevd_wait(), as DAT_TIMEOUT_INFINITE. */
#define KEVD_TIMEOUT_INFINITE	U32_MAX

void kevd_attr_init(struct kevd_attr *attr);
struct kevd *__kevd_create(struct ib_device *dev, const struct kevd_attr *attr,
			   struct module *owner);

/**
 * kevd_create() - create an EVD, owned by the calling module.
 * @dev: the device of the DTO stream's CQ, or NULL without that stream.
 * @attr: its attributes (kevd_attr_init(), then the consumer's changes).
 *
 * __kevd_create() with the caller's module as the owner, as ib_core's
 * ib_alloc_cq() names its caller: an EVD its module leaves open at unload
 * is reported by that name, then freed (Documentation/kevd/api.rst).
 *
 * Context: process context; may sleep.
 * Return: see __kevd_create().
 */
#define kevd_create(dev, attr)	__kevd_create(dev, attr, THIS_MODULE)
int kevd_free(struct kevd *evd);
int kevd_modify_upcall(struct kevd *evd, int policy,
		       const struct kevd_upcall *upcall, int flag);
int kevd_dequeue(struct kevd *evd, struct kevd_event *ev);
int kevd_dequeue_batch(struct kevd *evd, struct kevd_event *evs, u32 n);
int kevd_post_se(struct kevd *evd, void *pointer);
int kevd_resize(struct kevd *evd, u32 qlen);
int kevd_query(struct kevd *evd, struct kevd_param *param);
int kevd_wait(struct kevd *evd, u32 timeout_us, u32 threshold,
	      struct kevd_event *ev, u32 *nmore);
int kevd_wait_batch(struct kevd *evd, u32 timeout_us, u32 threshold,
		    struct kevd_event *evs, u32 n, u32 *nmore);
int kevd_set_unwaitable(struct kevd *evd, bool unwaitable);
int kevd_post_event(struct kevd *evd, const struct kevd_event *ev);
void kevd_total_stats(struct kevd_stats *stats);

struct ib_cq *kevd_cq(struct kevd *evd);
int kevd_post_ib_event(struct kevd *evd, const struct ib_event *event);

/* kevd's mapping of a work completion, for consumers that poll a CQ. */
void kevd_wc_to_event(const struct ib_wc *wc, struct kevd_event *ev);
u32 kevd_wc_status(int status);
u32 kevd_wc_opcode(const struct ib_wc *wc);

/* The largest private data kevd copies from a CM event (the rdma_cm's). */
#define KEVD_CM_MAX_PRIVATE_DATA	256

/**
 * struct kevd_cm_attr - where a CM binding posts an rdma_cm_id's events.
 * @cr_evd: connection requests of a listening id; needs %KEVD_CR_FLAG.
 *	Without one, requests are refused.
 * @conn_evd: connection events of a connecting or accepted id; needs
 *	%KEVD_CONNECTION_FLAG.
 * @async_evd: DEVICE_REMOVAL, as %KEVD_ASYNC_ERROR_IA_CATASTROPHIC; needs
 *	%KEVD_ASYNC_FLAG. Without one, or if it is full even in its
 *	headroom, the consumer's handler hears it.
 * @ep: the endpoint handle of the connection events (NULL: the id).
 * @sp: the service point handle of the CR events (NULL: the id).
 *
 * At least one of @cr_evd and @conn_evd. Each EVD named here cannot be
 * freed (-EBUSY) until the binding ends.
 */
struct kevd_cm_attr {
	struct kevd *cr_evd;
	struct kevd *conn_evd;
	struct kevd *async_evd;
	void *ep;
	void *sp;
};

int kevd_cm_bind(struct rdma_cm_id *id, const struct kevd_cm_attr *attr);
void *kevd_cm_context(struct rdma_cm_id *id);
void kevd_cm_destroy_id(struct rdma_cm_id *id);
int kevd_destroy_qp(struct ib_qp *qp, struct rdma_cm_id *id);
struct rdma_cm_id *kevd_cr_id(void *cr);
int kevd_cr_accept(void *cr, const struct kevd_cm_attr *attr,
		   struct ib_pd *pd, struct ib_qp_init_attr *qp_attr,
		   struct rdma_conn_param *param, struct rdma_cm_id **id);
int kevd_cr_reject(void *cr, const void *private_data, u8 private_data_len);

#endif /* _KEVD_KEVD_H */
