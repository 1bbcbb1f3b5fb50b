// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A pass: the EVD's poll method, which the poller that owns the EVD calls
 * (evd/poller.c schedules; this decides what a pass does). Within the
 * budget it moves completions out of the CQ (straight to the upcall, or
 * into the ring), queues fenced connection events once the CQ is empty,
 * and delivers upcalls as the policy says; when the EVD goes idle it arms
 * the CQ with the extended notify (dto/arm.c), and when it found work for
 * a consumer that pulls it gives the EVD back unarmed (kevd_pass_hand_back()).
 *
 * Context: the owning poller thread only (kevd_assert_owner()); upcalls
 * run from here and may sleep. No lock is held across a pass.
 */
#include "kevd_internal.h"
#include "kevd_trace.h"

/*
 * defer_arm (as NAPI's napi_defer_hard_irqs): an EVD whose pass found
 * work stays queued, and is armed only after that many passes without
 * any. Under a trickle spread over many EVDs, polls then replace
 * notifications; an idle EVD costs that many empty polls, then sleeps
 * armed as usual. The EVD stays owned throughout, so nothing is missed.
 */
static bool kevd_pass_defer_arm(struct kevd *evd, u32 work)
{
	u32 defer = READ_ONCE(kevd_param_defer_arm);

	kevd_assert_owner(evd);
	if (!defer || !evd->cq)
		return false;
	if (work) {
		evd->empty_passes = 0;
		return true;
	}
	if (evd->empty_passes < defer) {
		evd->empty_passes++;
		return true;
	}
	return false;
}

/*
 * A pass that found work on an EVD whose consumer pulls (dto/pull.c:
 * upcalls disabled, and a pull owned the EVD before: postats.pulls)
 * gives it back to that consumer: it lets go with the CQ unarmed, as the
 * consumer's own pull that found the work would (kevd_pull_unarmed_ok():
 * not while a thread is registered in kevd_wait(), which may sleep on the
 * CQ). A poller that kept it instead (defer_arm, a used budget) would
 * keep polling on the consumer's CPU (the home poller is on it) while the
 * consumer, runnable there, waits for it, and the consumer's pulls would
 * fail to own the EVD. The consumer's next call takes the events and
 * pulls the rest. Only where the CQ alone holds a queue's worth: a
 * consumer that pauses then leaves its backlog in the CQ, not the ring.
 */
static bool kevd_pass_hand_back(struct kevd *evd, u32 work)
{
	if (!work || !evd->postats.pulls ||
	    kevd_upcalls_enabled(READ_ONCE(evd->policy)) ||
	    READ_ONCE(evd->cq->cqe) < kevd_ring_qlen(&evd->ring) ||
	    !kevd_pull_unarmed_ok(evd, false))
		return false;
	evd->empty_passes = 0;
	return true;
}

/*
 * The pass's delivery found nothing more: connection events held behind
 * the CQ that the unfence at its start could not queue (the ring was full
 * then) go now, the pass having emptied the CQ since. What this moves
 * into the ring, and the events it queues, the pass delivers: true if it
 * moved or queued anything. One load when nothing is held.
 */
static bool kevd_pass_unfence(struct kevd *evd, struct kevd_scratch *s,
			      u32 budget, u32 *work, u32 *drained)
{
	u32 held = READ_ONCE(evd->ring.nfenced), got;

	if (likely(!held) || *work >= budget)
		return false;
	got = kevd_cq_unfence(evd, s->wcs, budget - *work);
	*drained += got;
	*work += got;
	return got || READ_ONCE(evd->ring.nfenced) != held;
}

/*
 * Move completions and deliver, within @budget. Returns the work done,
 * or U32_MAX when the EVD was handed to another poller (MANY).
 */
static u32 kevd_pass_work(struct kevd_poller *p, struct kevd *evd,
			  struct kevd_scratch *s, struct kevd_direct *d,
			  u32 budget, u32 *drained)
{
	u32 work = 0, got, done, want;
	bool handed_off = false;
	int direct;

	if (unlikely(READ_ONCE(evd->ring.nfenced))) {
		work = kevd_cq_unfence(evd, s->wcs, budget);
		*drained = work;
	}
	while (work < budget) {
		got = 0;
		if (evd->cq) {
			want = min(budget - work, (u32)KEVD_BATCH);
			direct = kevd_deliver_direct(evd, p, d, s->wcs, want);
			if (direct >= 0) {
				/* the ring was empty: so was the CQ, or go on */
				*drained += direct;
				work += direct;
				if (!direct &&
				    !kevd_pass_unfence(evd, s, budget, &work,
						       drained))
					break;
				continue;
			}
			/* No session across a MANY hand-off. */
			kevd_direct_end(evd, d);
			got = kevd_cq_drain(evd, s->wcs, want);
		}
		*drained += got;
		done = kevd_deliver(evd, p, s->evs, budget - work, &handed_off);
		if (handed_off)
			return U32_MAX;
		work += got + done;
		if (!got && !done &&
		    !kevd_pass_unfence(evd, s, budget, &work, drained))
			break;
	}
	return work;
}

/**
 * kevd_pass() - one pass over an EVD: the poll method of the pollers.
 * @p: the poller; it owns @evd.
 * @evd: the EVD.
 * @s: the poller's buffers.
 *
 * Context: the owning poller thread; calls upcalls, which may sleep.
 * Return: %KEVD_PASS_IDLE when the EVD is armed (or needs nothing, or
 * goes back unarmed to a consumer that pulls),
 * %KEVD_PASS_AGAIN when it needs another pass (budget used, arm deferred,
 * or the arm check found a completion), %KEVD_PASS_GONE when it was
 * handed to another poller.
 */
enum kevd_pass_ret kevd_pass(struct kevd_poller *p, struct kevd *evd,
			     struct kevd_scratch *s)
{
	u32 budget = READ_ONCE(kevd_param_budget), drained = 0, work;
	struct kevd_direct d = { };
	bool notified, again;

	kevd_assert_owner(evd);
	trace_kevd_pass_begin(evd, budget);
	/* a pull's unarmed let-go ends here: this pass arms, or passes again */
	kevd_pull_unmark(evd);
	notified = test_and_clear_bit(KEVD_POLL_NOTIFIED, &evd->poll_state);
	work = kevd_pass_work(p, evd, s, &d, budget, &drained);
	if (work == U32_MAX)
		return KEVD_PASS_GONE;	/* handed off: no pass_end */
	if (notified && !drained)
		evd->postats.empty_notifications++;
	kevd_dim_sample(evd, drained);
	/*
	 * The session holds no event now: a policy change during the arm
	 * check must not hold the consumer back (what the check polls goes
	 * to the ring).
	 */
	kevd_direct_end(evd, &d);
	again = !kevd_pass_hand_back(evd, work) &&
		(work >= budget || kevd_pass_defer_arm(evd, work) ||
		 kevd_cq_arm_check(evd, s->wcs));
	trace_kevd_pass_end(evd, drained, work,
			    again ? KEVD_PASS_AGAIN : KEVD_PASS_IDLE);
	return again ? KEVD_PASS_AGAIN : KEVD_PASS_IDLE;
}
