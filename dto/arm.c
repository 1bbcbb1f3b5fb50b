// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The extended notify: arm, check, re-arm.
 *
 * IBTA arms a CQ for completions added after ib_req_notify_cq(). A
 * completion that lands between the poller's last poll and the arm raises
 * no notification on a strict provider (rxe, siw), while others
 * (Mellanox) signal it anyway, and IB_CQ_REPORT_MISSED_EVENTS is honoured
 * by some drivers and ignored (always 0) by others. So, when an EVD goes
 * idle, its owning poller:
 *
 *   1. arms: ib_req_notify_cq(NEXT_COMP or SOLICITED | REPORT_MISSED_EVENTS);
 *   2. checks: a positive return means "poll again"; otherwise (auto and
 *      poll modes) it polls one completion into a reserved ring slot, so a
 *      completion found is kept, never lost;
 *   3. if the check found anything, the EVD goes back on the run list:
 *      the next pass drains, and arms again when idle.
 *
 * Any completion added after step 1 raises a notification (IBTA), which
 * schedules the EVD (KEVD_POLL_MISSED if the pass is still running). Any
 * completion added before step 1 is in the CQ at step 2 and is found by
 * the poll. Hence no completion waits in the CQ unnoticed, on any of the
 * four behaviours; Documentation/kevd/notify.rst has the argument and the
 * Promela model in tools/testing/spin/ checks it.
 *
 * The software stream needs no check here: its producers schedule the EVD
 * after publishing (KEVD_POLL_MISSED covers a running pass).
 *
 * The pass (evd/pass.c) calls this when the EVD is idle; it sits next to
 * the CQ and calls only the CQ's drain.
 *
 * Context: the owner only (a poller's pass, or a consumer's pull).
 */
#include "kevd_internal.h"
#include "kevd_trace.h"

/**
 * kevd_cq_arm_check() - arm the CQ of an idle EVD and check for misses.
 * @evd: the EVD; the caller owns it.
 * @wcs: room for one work completion.
 *
 * A CQ whose drain stopped at a full ring is not armed: the consumer's
 * next dequeue pulls the rest, or reschedules the EVD (evd/evd.c,
 * kevd_consumer_done()). Nor is one held by a parked
 * completion (kevd_cq_gate_at()). An arm that fails (the provider's error)
 * leaves the CQ unarmed, so no notification would come: the EVD then
 * needs another pass, and its CQ is polled on every pass until an arm
 * succeeds (warned once per failure streak). Nothing is lost; the cost is
 * a poller that keeps passing over it. When the last poll failed
 * (kevd_cq_poll()) the CQ counts as empty: it is armed without asking for
 * missed events and not checked, and the next notification brings what
 * it holds, rather than a pass that polls a CQ in error without end.
 *
 * Context: the owner of @evd: a poller's pass or a consumer's pull
 * (kevd_assert_owner()).
 * Return: true if the EVD needs another pass.
 */
bool kevd_cq_arm_check(struct kevd *evd, struct ib_wc *wcs)
{
	enum ib_cq_notify_flags how;
	bool poll_failed;
	int mode, ret;

	kevd_assert_owner(evd);
	/* a parked completion holds the CQ: kevd_cq_ungate() reschedules */
	if (!evd->cq || READ_ONCE(evd->cq_stalled) || evd->has_parked)
		return false;
	/* flushes are not solicited: a hold waits for them (drain.c) */
	how = evd->solicited_only && !READ_ONCE(evd->nholds) ?
	      IB_CQ_SOLICITED : IB_CQ_NEXT_COMP;
	/* after a failed poll the CQ counts as empty: no report, no check */
	poll_failed = evd->poll_failed;
	evd->poll_failed = false;
	if (likely(!poll_failed))
		how |= IB_CQ_REPORT_MISSED_EVENTS;
	ret = ib_req_notify_cq(evd->cq, how);
	evd->postats.arms++;
	if (unlikely(ret < 0)) {
		if (!evd->arm_failed)
			pr_warn_ratelimited("kevd: EVD %u: ib_req_notify_cq() failed (%d): its CQ is polled on every pass until an arm succeeds\n",
					    evd->id, ret);
		evd->arm_failed = true;
		trace_kevd_arm(evd, ret, true);
		return true;
	}
	evd->arm_failed = false;
	mode = unlikely(poll_failed) ? KEVD_CHECK_REPORT :
				       READ_ONCE(kevd_param_notify_check);
	if (ret > 0 && mode != KEVD_CHECK_POLL) {
		evd->postats.repolls++;
		trace_kevd_arm(evd, ret, true);
		return true;
	}
	if (mode != KEVD_CHECK_REPORT && kevd_cq_drain(evd, wcs, 1)) {
		evd->postats.repolls++;
		trace_kevd_arm(evd, ret, true);
		return true;
	}
	trace_kevd_arm(evd, ret, false);
	return false;
}
