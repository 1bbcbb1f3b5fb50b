// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Adaptive moderation of an EVD's CQ (module parameter cq_dim): lib/dim's
 * RDMA algorithm and ib_core's profiles, as ib_core runs them for a CQ of
 * a device with use_cq_dim. Each pass over the CQ is one sample (its
 * completions); when rdma_dim() picks another profile, a work item asks
 * the provider for it (rdma_set_cq_moderation(), the kernel's
 * ib_modify_cq): fewer notifications under load, at most the profile's
 * period of added latency.
 *
 * Context and locking:
 *   - kevd_dim_sample() runs in the EVD's owner (a poller pass or a
 *     consumer's pull, kevd_assert_owner()), once per pass: owners come
 *     one at a time, so struct dim has one writer.
 *   - rdma_dim() schedules dim.work when it picks a profile and then
 *     leaves the profile alone until the owner sees the work done
 *     (kd->applied, release/acquire): the work reads the profile and
 *     writes nothing the owner reads but kd->applied and its counters.
 *     rdma_set_cq_moderation() runs in the work because providers sleep
 *     in it (mlx5 sends a firmware command) and a pull must not.
 *   - kevd_dim_stop() runs in kevd_cq_destroy(), once the EVD is dead and
 *     no owner can sample again: cancel_work_sync(), then the CQ goes.
 *     The state itself is freed with the EVD (kevd_dim_free()).
 */
#include <linux/dim.h>
#include "kevd_internal.h"
#include "kevd_trace.h"

/* ib_core's profiles (drivers/infiniband/core/cq.c): usec, comps. */
static const struct dim_cq_moder kevd_dim_prof[RDMA_DIM_PARAMS_NUM_PROFILES] = {
	{ .usec = 1,  .comps = 1 },
	{ .usec = 1,  .comps = 4 },
	{ .usec = 2,  .comps = 4 },
	{ .usec = 2,  .comps = 8 },
	{ .usec = 4,  .comps = 8 },
	{ .usec = 16, .comps = 8 },
	{ .usec = 16, .comps = 16 },
	{ .usec = 32, .comps = 16 },
	{ .usec = 32, .comps = 32 },
};

/**
 * struct kevd_dim - the moderation state of one CQ.
 * @dim: lib/dim's state; its work applies a profile, its priv is the EVD.
 * @applied: the work applied the profile rdma_dim() picked (the owner
 *	measures again).
 *
 * The work counts the profiles it applied in evd->moderations.
 */
struct kevd_dim {
	struct dim dim;
	bool applied;
};

static void kevd_dim_work(struct work_struct *w)
{
	struct dim *dim = container_of(w, struct dim, work);
	struct kevd_dim *kd = container_of(dim, struct kevd_dim, dim);
	const struct dim_cq_moder *m = &kevd_dim_prof[dim->profile_ix];
	struct kevd *evd = dim->priv;

	if (!rdma_set_cq_moderation(evd->cq, m->comps, m->usec))
		WRITE_ONCE(evd->moderations, evd->moderations + 1);
	trace_kevd_moderate(evd, m->comps, m->usec);
	smp_store_release(&kd->applied, true);	/* after the profile read */
}

/**
 * kevd_dim_create() - moderation for a new EVD's CQ, if asked for.
 * @evd: the EVD (not yet visible to anyone).
 * @dev: the device its CQ will be on.
 *
 * Only with cq_dim=1 and a provider that has modify_cq; else the EVD has
 * none and nothing changes.
 *
 * Context: process context; may sleep.
 * Return: 0 or -ENOMEM.
 */
int kevd_dim_create(struct kevd *evd, struct ib_device *dev)
{
	struct kevd_dim *kd;

	if (!READ_ONCE(kevd_param_cq_dim) || !dev->ops.modify_cq)
		return 0;
	kd = kzalloc(sizeof(*kd), GFP_KERNEL);
	if (!kd)
		return -ENOMEM;
	kd->dim.state = DIM_START_MEASURE;
	kd->dim.tune_state = DIM_GOING_RIGHT;
	kd->dim.profile_ix = RDMA_DIM_START_PROFILE;
	INIT_WORK(&kd->dim.work, kevd_dim_work);
	kd->dim.priv = evd;
	evd->dim = kd;
	return 0;
}

/**
 * kevd_dim_stop() - no more profile changes: the EVD is dead.
 * @evd: the EVD; no owner can sample any more, its CQ still exists.
 *
 * Context: process context; may sleep (waits for the work).
 */
void kevd_dim_stop(struct kevd *evd)
{
	if (evd->dim)
		cancel_work_sync(&evd->dim->dim.work);
}

/**
 * kevd_dim_free() - free the moderation state with the EVD.
 * @evd: the EVD; stopped (kevd_dim_stop()) or never visible.
 *
 * Context: any (the EVD's last reference goes).
 */
void kevd_dim_free(struct kevd *evd)
{
	kfree(evd->dim);
	evd->dim = NULL;
}

/* Is the work done with the profile rdma_dim() picked? */
static bool kevd_dim_applied(struct kevd_dim *kd)
{
	/* acquire: pairs with the release in kevd_dim_work() */
	return smp_load_acquire(&kd->applied);
}

/**
 * __kevd_dim_sample() - one pass over the CQ, for the moderation.
 * @evd: the EVD; the caller owns it, and it has moderation.
 * @completions: completions the pass took from the CQ.
 *
 * A sample is a pass that took completions: what ib_core counts as an
 * interrupt's poll. Empty passes (defer_arm, spurious notifications)
 * would count as events without completions and push the moderation
 * down for nothing.
 *
 * Context: the owner (a poller pass or a pull); does not sleep.
 */
void __kevd_dim_sample(struct kevd *evd, u32 completions)
{
	struct kevd_dim *kd = evd->dim;

	kevd_assert_owner(evd);
	if (kd->dim.state == DIM_APPLY_NEW_PROFILE && kevd_dim_applied(kd)) {
		WRITE_ONCE(kd->applied, false);
		kd->dim.state = DIM_START_MEASURE;
	}
	rdma_dim(&kd->dim, completions);
}
