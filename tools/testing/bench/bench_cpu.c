// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench's CPU time: busy time of the CPUs and of threads, and the
 * fixed patterns that measure a cost where a run cannot (one CPU):
 * backlogs of each mode and the floor's fill and drain cycles. See
 * bench.h.
 */
#include <linux/bitmap.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include <linux/tick.h>
#include "bench.h"

/* ------------------------------------------------------------------ */
/* CPU time                                                            */

void bench_snap(struct bench_snap *s)
{
	static const int busy_fields[] = {
		CPUTIME_USER, CPUTIME_NICE, CPUTIME_SYSTEM, CPUTIME_SOFTIRQ,
		CPUTIME_IRQ, CPUTIME_STEAL, CPUTIME_GUEST, CPUTIME_GUEST_NICE,
	};
	int cpu, i;

	memset(s, 0, sizeof(*s));
	s->wall = ktime_get_ns();
	for_each_online_cpu(cpu) {
		s->ncpu++;
		if (bs->nohz) {
			s->idle += get_cpu_idle_time_us(cpu, NULL) * NSEC_PER_USEC;
			continue;
		}
		for (i = 0; i < ARRAY_SIZE(busy_fields); i++)
			s->busy += READ_ONCE(kcpustat_cpu(cpu).cpustat[busy_fields[i]]);
	}
}

/* CPU busy time (all online CPUs) between two snapshots. */
u64 bench_busy_ns(const struct bench_snap *a, const struct bench_snap *b)
{
	u64 all, idle;

	if (!bs->nohz)
		return b->busy - a->busy;
	all = (b->wall - a->wall) * b->ncpu;
	idle = b->idle - a->idle;
	return all > idle ? all - idle : 0;
}

/*
 * A short busy wait for the spinning threads (producer, floor). Not
 * cpu_relax(): under QEMU TCG (the SMP test kernel) every PAUSE makes the
 * vCPU leave translated code and take QEMU's big lock, and two vCPUs
 * spinning on it slow each other and the IPIs down by orders of magnitude.
 */
void bench_spin(void)
{
	int i;

	for (i = 0; i < 64; i++)
		barrier();
}

/* This thread's CPU time so far, as bench_stop_thread() counts it. */
u64 bench_self_time(void)
{
	if (bs->nohz)
		return READ_ONCE(current->se.sum_exec_runtime);
	return READ_ONCE(current->utime) + READ_ONCE(current->stime);
}

/*
 * Sleep until kthread_stop(). A thread whose CPU time is read must not
 * return at once: its runtime is brought up to date when it sleeps, while
 * kthread_stop() of a thread that exits by itself may return before the
 * exit path's last update.
 */
void bench_park(void)
{
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
}

/*
 * One CPU (UML): the CPU cost per event of a mode, from backlogs. With the
 * producer on the consumer's CPU, a saturated run's cost depends on how
 * the scheduler interleaves the two (the same code varies 4x in events/s
 * from run to run), so the saturated cost is taken with a fixed pattern:
 * add depth CQEs with preemption off (on UP the notification of an armed
 * CQ is taken inline, as an interrupt), then sleep while the consumer
 * delivers them. Raw line: the busy time of the deliveries and the fill
 * time (for the 2006 style, whose handler runs inside the fill, the host
 * adds the fill time beyond the producer's calibrated cost; the other
 * modes run one notification handler there per backlog, which is left
 * out rather than measured as the difference of two noisy fill times of
 * about 10 ns per event each).
 */
int bench_burst(const struct bench_ops *ops, u32 n, u32 rep)
{
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV };
	struct fake_cq_stats st = {};
	struct bench_snap a, b;
	struct bench_sample s = {};
	struct bench_run *r;
	u64 busy = 0, fill = 0, t0;
	u32 i = 0, end;
	int ret;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, ops, 0, n, 0);
	ret = bench_mode_init(r, bs->ibdev);
	if (ret)
		goto out;
	r->cqs = &r->cq;
	r->ncqs = 1;
	if (r->consumer)
		wake_up_process(r->consumer);
	while (!ret && i < r->max_events) {
		end = min(i + bench_depth, r->max_events);
		reinit_completion(&r->done);
		atomic_set(&r->finished, 0);
		WRITE_ONCE(r->target, end);
		preempt_disable();
		t0 = ktime_get_ns();
		for (; i < end && !ret; i++)
			ret = bench_add(r, r->cq, &wc, i);
		fill += ktime_get_ns() - t0;
		bench_snap(&a);
		preempt_enable();
		if (!ret && (u32)atomic_read(&r->delivered) != end &&
		    !wait_for_completion_timeout(&r->done, 60 * HZ))
			ret = -ETIMEDOUT;
		bench_snap(&b);
		busy += bench_busy_ns(&a, &b);
	}
	bench_stop_consumer(r);
	s.produced = i;
	s.delivered = atomic_read(&r->delivered);
	if (!ret && !bench_check(r, &s))
		ret = -EIO;
	fake_cq_stats(r->cq, &st);
	if (!ret)
		pr_info("kevd-bench-raw backlog mode=%s rep=%u events=%u backlog=%u busy_ns=%llu fill_ns=%llu in_fill=%d notif=%llu\n",
			ops->name, rep, i, bench_depth, busy, fill,
			ops->in_fill, st.notifications);
out:
	bench_mode_cleanup(r);
	kfree(r);
	return ret;
}

/*
 * The floor's CPU cost and the producer's: on the consumer CPU, fill the
 * CQ with up to depth CQEs, then drain them, and again, so that CQ and
 * consumer data stay as hot as in a saturated run. Each phase is timed
 * with ktime around it (one thread, nothing else runs on the CPU), which
 * is exact where task time has the resolution of a jiffy (UML).
 */
static int bench_drain_thread(void *data)
{
	struct bench_run *r = data;
	struct ib_cq *cq = r->cqs[0];
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV };
	struct ib_wc *wcs;
	u32 i = 0, end;
	u64 t0, t1;

	wcs = kcalloc(BENCH_BATCH, sizeof(*wcs), GFP_KERNEL);
	while (wcs && i < r->max_events) {
		end = min(i + bench_depth, r->max_events);
		t0 = ktime_get_ns();
		for (; i < end; i++) {
			if (bench_add(r, cq, &wc, i)) {
				atomic_inc(&r->bad);
				goto out;
			}
		}
		t1 = ktime_get_ns();
		r->fill_ns += t1 - t0;
		while (bench_floor_poll(r, cq, wcs))
			;
		r->drain_ns += ktime_get_ns() - t1;
	}
out:
	kfree(wcs);
	bench_finish(r);
	bench_park();
	return 0;
}

/*
 * Fill and drain cycles of @n CQEs on the consumer CPU: the time spent
 * adding them (*@fill_ns) and draining them (*@drain_ns).
 */
int bench_drain(u32 n, u64 *fill_ns, u64 *drain_ns, struct bench_sample *s)
{
	struct ib_cq_init_attr attr = { .cqe = bench_depth };
	struct task_struct *t;
	struct bench_run *r;
	struct ib_cq *cq;
	int ret = 0;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, &bench_floor_ops, 0, n, 0);
	n = r->max_events;
	cq = ib_create_cq(bs->ibdev, bench_nop_handler, NULL, r, &attr);
	if (IS_ERR(cq)) {
		ret = PTR_ERR(cq);
		goto out;
	}
	r->cqs = &cq;
	r->ncqs = 1;
	t = bench_thread(bench_drain_thread, r, bs->ccpu, "kevd_bench_drain");
	if (IS_ERR(t)) {
		ret = PTR_ERR(t);
		goto out_cq;
	}
	wake_up_process(t);
	if (!wait_for_completion_timeout(&r->done, 60 * HZ))
		ret = -ETIMEDOUT;
	bench_stop_thread(t);
	if (!ret && (atomic_read(&r->delivered) != n || atomic_read(&r->bad)))
		ret = -EIO;
	if (s) {
		s->produced = n;
		s->delivered = atomic_read(&r->delivered);
	}
	*fill_ns = r->fill_ns;
	*drain_ns = r->drain_ns;
out_cq:
	ib_destroy_cq(cq);
out:
	kfree(r);
	return ret;
}
