/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * A fake HCA for kevd's tests and benchmark: an ib_device made with
 * ib_alloc_device() (never registered) whose CQs are software queues that
 * any context may feed: process, hrtimer (hard IRQ), a kthread on another
 * CPU. Its QPs (fake_qp_create()) take posts and flush them when the test
 * says, for what kevd posts itself (the markers of a drain).
 */
#ifndef _KEVD_FAKE_HCA_H
#define _KEVD_FAKE_HCA_H

#include <rdma/ib_verbs.h>

/**
 * enum fake_hca_mode - how the fake CQ notifies.
 * @FAKE_HCA_LENIENT_REPORT: arming fires at once if CQEs are present
 *	(Mellanox-style) and honours IB_CQ_REPORT_MISSED_EVENTS.
 * @FAKE_HCA_LENIENT_IGNORE: fires for present CQEs; always returns 0.
 * @FAKE_HCA_STRICT_REPORT: fires only for CQEs added after the arm
 *	(strict IBTA, as rxe and siw); honours REPORT_MISSED_EVENTS.
 * @FAKE_HCA_STRICT_IGNORE: strict, and always returns 0.
 * @FAKE_HCA_NR_MODES: number of modes.
 */
enum fake_hca_mode {
	FAKE_HCA_LENIENT_REPORT,
	FAKE_HCA_LENIENT_IGNORE,
	FAKE_HCA_STRICT_REPORT,
	FAKE_HCA_STRICT_IGNORE,
	FAKE_HCA_NR_MODES,
};

/**
 * struct fake_cq_stats - what a fake CQ counted.
 * @arms: req_notify_cq calls.
 * @notifications: completion handler calls (spurious ones included).
 * @polls: poll_cq calls.
 * @polled: CQEs returned by poll_cq.
 * @added: CQEs added.
 * @overruns: CQEs dropped because the CQ was full.
 * @injected: CQEs added by the arm-window injection hook.
 * @modifies: modify_cq calls (moderation: held back for up to a count
 *	of completions or a period; see fake_cq_moderation()).
 */
struct fake_cq_stats {
	u64 arms;
	u64 notifications;
	u64 polls;
	u64 polled;
	u64 added;
	u64 overruns;
	u64 injected;
	u64 modifies;
};

/*
 * Called inside req_notify_cq just before the CQ is armed, without the
 * fake CQ's lock: whatever it adds lands in the 2006 window.
 */
typedef void (*fake_cq_arm_hook)(struct ib_cq *cq, void *ctx);

/*
 * Called at the start of every poll_cq (or at its end, after
 * fake_cq_set_poll_hook_after()), without the fake CQ's lock.
 */
typedef void (*fake_cq_poll_hook)(struct ib_cq *cq, void *ctx);

/* Called at the start of every resize_cq, without a lock; it may sleep. */
typedef void (*fake_cq_resize_hook)(struct ib_cq *cq, void *ctx);

struct fake_hca;

/* The default attrs.max_cqe of a fake device. */
#define FAKE_MAX_CQE	BIT(22)

struct fake_hca *fake_hca_create(enum fake_hca_mode mode);
void fake_hca_destroy(struct fake_hca *hca);
void fake_hca_set_no_resize(struct fake_hca *hca, bool no_resize);
void fake_hca_set_max_cqe(struct fake_hca *hca, int max_cqe);
void fake_hca_fail_create_cq(struct fake_hca *hca, int err);
void fake_hca_fail_resize_cq(struct fake_hca *hca, int err);
struct ib_device *fake_hca_ibdev(struct fake_hca *hca);
const char *fake_hca_mode_name(enum fake_hca_mode mode);

int fake_cq_add(struct ib_cq *cq, const struct ib_wc *wc);
int fake_cq_add_burst(struct ib_cq *cq, const struct ib_wc *wcs, u32 n);
int fake_cq_add_cookie(struct ib_cq *cq, u64 wr_id);
int fake_cq_add_seq(struct ib_cq *cq);
int fake_cq_add_seq_burst(struct ib_cq *cq, u32 n);
int fake_cq_start_firing(struct ib_cq *cq);
void fake_cq_set_arm_hook(struct ib_cq *cq, fake_cq_arm_hook hook, void *ctx);
void fake_cq_set_poll_hook(struct ib_cq *cq, fake_cq_poll_hook hook,
			   void *ctx);
void fake_cq_set_poll_hook_after(struct ib_cq *cq, bool after);
void fake_cq_set_resize_hook(struct ib_cq *cq, fake_cq_resize_hook hook,
			     void *ctx);
void fake_cq_fire(struct ib_cq *cq);
void fake_cq_fail_arms(struct ib_cq *cq, int err);
void fake_cq_fail_polls(struct ib_cq *cq, int err);
void fake_cq_set_irq_cpu(struct ib_cq *cq, int cpu);
void fake_cq_overrun(struct ib_cq *cq);
u32 fake_cq_count(struct ib_cq *cq);
bool fake_cq_empty(struct ib_cq *cq);
bool fake_cq_armed(struct ib_cq *cq);
int fake_cq_comp_vector(struct ib_cq *cq);
void fake_cq_stats(struct ib_cq *cq, struct fake_cq_stats *st);
void fake_cq_moderation(struct ib_cq *cq, u16 *count, u16 *period);
void fake_hca_set_no_modify(struct fake_hca *hca);

struct ib_qp *fake_qp_create(struct fake_hca *hca, struct ib_cq *cq,
			     u32 max_wr);
void fake_qp_destroy(struct ib_qp *qp);
void fake_qp_fail_posts(struct ib_qp *qp, int err);
u32 fake_qp_posts(struct ib_qp *qp);
u32 fake_qp_to_error(struct ib_qp *qp);
int fake_qp_flush(struct ib_qp *qp);
void fake_qp_flush_on_error(struct ib_qp *qp);
void fake_qp_use_srq(struct ib_qp *qp);
void fake_qp_set_state(struct ib_qp *qp, enum ib_qp_state state);
int fake_qp_srq_take(struct ib_qp *qp, u64 wr_id);
int fake_qp_last_wqe(struct fake_hca *hca, struct ib_qp *qp, int destroyed);
bool fake_qp_srq_waited(struct fake_hca *hca, struct ib_qp *qp,
			int destroyed);
int fake_hca_qps_destroyed(struct fake_hca *hca);

#endif /* _KEVD_FAKE_HCA_H */
