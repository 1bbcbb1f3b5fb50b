/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd's tracepoints (TRACE_SYSTEM kevd), after
 * include/trace/events/rdma_core.h: the state changes of an EVD, its
 * passes and its CQ. Each names the EVD by its debugfs id. They cost a
 * static branch when disabled. Documentation/kevd/tracing.rst shows how
 * to use them with perf and trace-cmd.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kevd

#if !defined(_KEVD_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KEVD_TRACE_H

#include <linux/tracepoint.h>
#include "kevd_internal.h"

TRACE_EVENT(kevd_create,
	    TP_PROTO(const struct kevd *evd),
	    TP_ARGS(evd),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, flags)
			     __field(u32, qlen)
			     __field(int, policy)
			     __field(int, comp_vector)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->flags = evd->flags;
			   __entry->qlen = kevd_ring_qlen(&evd->ring);
			   __entry->policy = evd->policy;
			   __entry->comp_vector = evd->cq ? (int)evd->comp_vector : -1;),
	    TP_printk("evd=%u flags=0x%x qlen=%u policy=%d comp_vector=%d",
		      __entry->id,
		      __entry->flags,
		      __entry->qlen,
		      __entry->policy,
		      __entry->comp_vector)
);

TRACE_EVENT(kevd_free,
	    TP_PROTO(const struct kevd *evd),
	    TP_ARGS(evd),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u64, discarded)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->discarded = evd->discarded;),
	    TP_printk("evd=%u discarded=%llu",
		      __entry->id,
		      __entry->discarded)
);

TRACE_EVENT(kevd_schedule,
	    TP_PROTO(const struct kevd *evd, bool queued),
	    TP_ARGS(evd, queued),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(bool, queued)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->queued = queued;),
	    TP_printk("evd=%u queued=%d",
		      __entry->id,
		      __entry->queued)
);

TRACE_EVENT(kevd_pass_begin,
	    TP_PROTO(const struct kevd *evd, u32 budget),
	    TP_ARGS(evd, budget),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, budget)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->budget = budget;),
	    TP_printk("evd=%u budget=%u",
		      __entry->id,
		      __entry->budget)
);

/* user space reads the print format: export the values of the names */
TRACE_DEFINE_ENUM(KEVD_PASS_IDLE);
TRACE_DEFINE_ENUM(KEVD_PASS_AGAIN);

TRACE_EVENT(kevd_pass_end,
	    TP_PROTO(const struct kevd *evd, u32 drained, u32 work, int ret),
	    TP_ARGS(evd, drained, work, ret),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, drained)
			     __field(u32, work)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->drained = drained;
			   __entry->work = work;
			   __entry->ret = ret;),
	    TP_printk("evd=%u drained=%u work=%u next=%s",
		      __entry->id,
		      __entry->drained,
		      __entry->work,
		      __print_symbolic(__entry->ret,
				       { KEVD_PASS_IDLE, "idle" },
				       { KEVD_PASS_AGAIN, "again" }))
);

TRACE_EVENT(kevd_arm,
	    TP_PROTO(const struct kevd *evd, int ret, bool again),
	    TP_ARGS(evd, ret, again),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(int, ret)
			     __field(bool, again)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->ret = ret;
			   __entry->again = again;),
	    TP_printk("evd=%u req_notify=%d repoll=%d",
		      __entry->id,
		      __entry->ret,
		      __entry->again)
);

DECLARE_EVENT_CLASS(kevd_batch_class,
		    TP_PROTO(const struct kevd *evd, int policy, u32 n),
		    TP_ARGS(evd, policy, n),
		    TP_STRUCT__entry(__field(u32, id)
				     __field(int, policy)
				     __field(u32, n)),
		    TP_fast_assign(__entry->id = evd->id;
				   __entry->policy = policy;
				   __entry->n = n;),
		    TP_printk("evd=%u policy=%d n=%u",
			      __entry->id,
			      __entry->policy,
			      __entry->n)
);

DEFINE_EVENT(kevd_batch_class, kevd_upcall_batch_begin,
	     TP_PROTO(const struct kevd *evd, int policy, u32 n),
	     TP_ARGS(evd, policy, n));

DEFINE_EVENT(kevd_batch_class, kevd_upcall_batch_end,
	     TP_PROTO(const struct kevd *evd, int policy, u32 n),
	     TP_ARGS(evd, policy, n));

TRACE_EVENT(kevd_overflow,
	    TP_PROTO(const struct kevd *evd, int stream),
	    TP_ARGS(evd, stream),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(int, stream)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->stream = stream;),
	    TP_printk("evd=%u stream=%d",
		      __entry->id,
		      __entry->stream)
);

TRACE_EVENT(kevd_resize,
	    TP_PROTO(const struct kevd *evd, u32 qlen, int ret),
	    TP_ARGS(evd, qlen, ret),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, qlen)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->qlen = qlen;
			   __entry->ret = ret;),
	    TP_printk("evd=%u qlen=%u ret=%d",
		      __entry->id,
		      __entry->qlen,
		      __entry->ret)
);

TRACE_EVENT(kevd_wait_begin,
	    TP_PROTO(const struct kevd *evd, u32 threshold, u32 n),
	    TP_ARGS(evd, threshold, n),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, threshold)
			     __field(u32, n)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->threshold = threshold;
			   __entry->n = n;),
	    TP_printk("evd=%u threshold=%u n=%u",
		      __entry->id,
		      __entry->threshold,
		      __entry->n)
);

TRACE_EVENT(kevd_wait_end,
	    TP_PROTO(const struct kevd *evd, int ret, u32 nmore),
	    TP_ARGS(evd, ret, nmore),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(int, ret)
			     __field(u32, nmore)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->ret = ret;
			   __entry->nmore = nmore;),
	    TP_printk("evd=%u ret=%d nmore=%u",
		      __entry->id,
		      __entry->ret,
		      __entry->nmore)
);

TRACE_EVENT(kevd_pull,
	    TP_PROTO(const struct kevd *evd, u32 moved, bool again),
	    TP_ARGS(evd, moved, again),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u32, moved)
			     __field(bool, again)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->moved = moved;
			   __entry->again = again;),
	    TP_printk("evd=%u moved=%u to_poller=%d",
		      __entry->id,
		      __entry->moved,
		      __entry->again)
);

TRACE_EVENT(kevd_moderate,
	    TP_PROTO(const struct kevd *evd, u16 comps, u16 usec),
	    TP_ARGS(evd, comps, usec),
	    TP_STRUCT__entry(__field(u32, id)
			     __field(u16, comps)
			     __field(u16, usec)),
	    TP_fast_assign(__entry->id = evd->id;
			   __entry->comps = comps;
			   __entry->usec = usec;),
	    TP_printk("evd=%u comps=%u usec=%u",
		      __entry->id,
		      __entry->comps,
		      __entry->usec)
);

#endif /* _KEVD_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE kevd_trace
#include <trace/define_trace.h>
