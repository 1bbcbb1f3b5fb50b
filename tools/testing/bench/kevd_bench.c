// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench: the same completion stream, from the fake HCA, delivered to
 * one consumer function by kevd and by what a consumer would otherwise use
 * (issue 6). It runs when it loads and prints its results.
 *
 * Modes (enum bench_mode and bench_mode_name[] below):
 *   kevd-single   kevd, SINGLE_INSTANCE upcall (a poller thread calls it)
 *   kevd-wait     kevd, DISABLE; a consumer kthread calls kevd_wait() for
 *                 every event
 *   kevd-dequeue  kevd, DISABLE; the kthread waits for one event with
 *                 kevd_wait(), then takes the rest with kevd_dequeue()
 *   wq, unbound-wq, softirq
 *                 ib_alloc_cq() with IB_POLL_WORKQUEUE, _UNBOUND_WORKQUEUE,
 *                 _SOFTIRQ; each completion goes to wr_cqe->done
 *   kdapl-2006    the completion handler arms, polls one CQE, converts it
 *                 and calls the consumer, and again, until the CQ is empty
 *   floor         a kthread polls the CQ in batches of 64 and converts
 *                 each CQE; no notification, no hand-off
 *
 * With rdma_dev= (siw0; make bench sets it) every mode also runs over a
 * real provider: a loopback RC pair (samples/kevd_rc.c) whose side 0
 * posts signalled 8-byte RDMA WRITEs from the producer thread, their
 * completions on the mode's CQ; saturated and at rdma_rate (latency).
 * The provider counts nothing, so notifications and arms are kevd's own
 * counters for the kevd modes and "na" for the others.
 *
 * The producer is a kthread bound to another CPU than the consumer's (when
 * there is one). Every CQ notifies by an IPI to the consumer CPU (hard IRQ
 * context, as an MSI-X vector; fake_cq_set_irq_cpu()). The sequence number
 * of an event is in wr_id, or for the ib_core modes where wr_cqe takes it
 * in wc.byte_len (fake HCA) or next to the ib_cqe (rdma_dev);
 * in latency runs the producer stamps ts[seq] just before it adds the CQE
 * and the consumer computes the delay. The consumer function marks the
 * sequence number in a bitmap: every event must be seen exactly once.
 *
 * CPU time: the busy time of all CPUs during a run (bench_busy_ns()),
 * minus the producer's: its task time with two CPUs; on one CPU (UML) the
 * fill cost measured by bench_drain(), and the saturated cost of each
 * mode comes from backlogs (bench_burst()). tools/testing/bench/RESULTS.md
 * explains why.
 *
 * Locking: no lock of its own. A run's counters are atomics; the fields
 * the producer writes before it finishes (produced, target) are published
 * with the full barriers of atomic_xchg()/atomic_inc_return() and read by
 * the main thread after the run's completion. Results are written only by
 * the loading thread.
 */
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/tick.h>
#include <linux/vmalloc.h>
#include <rdma/ib_verbs.h>
#include <kevd/kevd.h>
#include "fake_hca.h"
#include "kevd_internal.h"
#include "../../../samples/kevd_rc.h"

#define BENCH_MAX_REPS		15
#define BENCH_MAX_RATES		6
#define BENCH_MAX_SCALES	6
/* The floor polls as many completions per call as kevd (KEVD_BATCH). */
#define BENCH_BATCH		64
#define BENCH_LAT_MAX_RATE	100000

static char *kernel = "unknown";
module_param(kernel, charp, 0444);
MODULE_PARM_DESC(kernel, "label of the kernel in the output (smp, uml)");

static bool smoke;
module_param(smoke, bool, 0444);
MODULE_PARM_DESC(smoke, "a short functional run: counts only, no timings");

static uint smoke_events = 4000;
module_param(smoke_events, uint, 0444);
MODULE_PARM_DESC(smoke_events, "events per mode in smoke mode");

static uint events = 400000;
module_param(events, uint, 0444);
MODULE_PARM_DESC(events, "at most this many events per run");

static uint run_ms = 400;
module_param(run_ms, uint, 0444);
MODULE_PARM_DESC(run_ms, "the producer stops after this many ms");

static uint reps = 5;
module_param(reps, uint, 0444);
MODULE_PARM_DESC(reps, "repetitions of each run (medians are reported)");

static uint depth = 1024;
module_param(depth, uint, 0444);
MODULE_PARM_DESC(depth, "CQ depth and EVD queue length; events in flight");

static uint rates[BENCH_MAX_RATES] = { 10000, 100000, 1000000 };
static int nr_rates = 3;
module_param_array(rates, uint, &nr_rates, 0444);
MODULE_PARM_DESC(rates, "fixed producer rates (events/s); the first gives the latency");

static uint scale[BENCH_MAX_SCALES] = { 1, 16, 256, 4096 };
static int nr_scale = 4;
module_param_array(scale, uint, &nr_scale, 0444);
MODULE_PARM_DESC(scale, "numbers of EVDs sharing the pollers");

static uint scale_qlen = 128;
module_param(scale_qlen, uint, 0444);
MODULE_PARM_DESC(scale_qlen, "queue length (and CQ depth) of the scale test's EVDs");

static bool text_map;
module_param(text_map, bool, 0444);
MODULE_PARM_DESC(text_map, "print the physical pages of the modules' code (for a host-side profile of UML)");

static char *only = "";
module_param(only, charp, 0444);
MODULE_PARM_DESC(only, "run only these modes (comma-separated names; scale for the scale test); empty: all");

static char *rdma_dev = "";
module_param(rdma_dev, charp, 0444);
MODULE_PARM_DESC(rdma_dev, "a real RDMA device (siw0) for runs over a loopback RC connection; empty: none");

static char *rdma_addr = "fe80::2";
module_param(rdma_addr, charp, 0444);
MODULE_PARM_DESC(rdma_addr, "IPv6 address of rdma_dev's netdev, for rdma_cm (iWARP)");

static ushort rdma_port = 18600;
module_param(rdma_port, ushort, 0444);
MODULE_PARM_DESC(rdma_port, "TCP port of the loopback connection (iWARP)");

static uint rdma_depth = 128;
module_param(rdma_depth, uint, 0444);
MODULE_PARM_DESC(rdma_depth, "work requests in flight on rdma_dev (send queue and CQ depth)");

static uint rdma_events = 50000;
module_param(rdma_events, uint, 0444);
MODULE_PARM_DESC(rdma_events, "at most this many events per run on rdma_dev");

static uint rdma_rate = 200;
module_param(rdma_rate, uint, 0444);
MODULE_PARM_DESC(rdma_rate, "fixed rate of the latency run on rdma_dev (events/s)");

static uint rdma_lat_ms = 2000;
module_param(rdma_lat_ms, uint, 0444);
MODULE_PARM_DESC(rdma_lat_ms, "length of the latency run on rdma_dev (ms)");

static uint rdma_smoke_events = 200;
module_param(rdma_smoke_events, uint, 0444);
MODULE_PARM_DESC(rdma_smoke_events, "events per mode on rdma_dev in smoke mode");

static uint prod_burst = 1;
module_param(prod_burst, uint, 0444);
MODULE_PARM_DESC(prod_burst, "CQEs the producer adds per call in saturated runs on one fake CQ (1..64: an HCA writing several CQEs before its interrupt)");

static uint drain_events = 524288;
module_param(drain_events, uint, 0444);
MODULE_PARM_DESC(drain_events, "CQEs of the floor's pre-filled drain (its CPU cost)");

enum bench_mode {
	BM_KEVD_SINGLE,
	BM_KEVD_WAIT,
	BM_KEVD_DEQUEUE,
	BM_WQ,
	BM_UNBOUND_WQ,
	BM_SOFTIRQ,
	BM_KDAPL2006,
	BM_FLOOR,
	BM_NR,
	/* internal: kevd-single over many EVDs */
	BM_SCALE = BM_NR,
};

static const char * const bench_mode_name[] = {
	[BM_KEVD_SINGLE] = "kevd-single",
	[BM_KEVD_WAIT] = "kevd-wait",
	[BM_KEVD_DEQUEUE] = "kevd-dequeue",
	[BM_WQ] = "wq",
	[BM_UNBOUND_WQ] = "unbound-wq",
	[BM_SOFTIRQ] = "softirq",
	[BM_KDAPL2006] = "kdapl-2006",
	[BM_FLOOR] = "floor",
};

/* Is @name in the only= list (or is the list empty)? */
static bool bench_selected(const char *name)
{
	size_t n = strlen(name);
	const char *p = only;

	if (!p || !*p)
		return true;
	while (p) {
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

/* One run: a producer, a delivery mode, a consumer function. */
struct bench_run {
	enum bench_mode mode;
	u32 rate;
	u32 max_events;
	u64 limit_ns;
	u32 room;
	bool per_cq_room;
	bool ib_cqe;
	bool rdma;		/* the CQ is fed by rdma_dev, over r->rc */
	struct kevd_rc rc;
	struct ib_cq **cqs;
	u32 ncqs;
	struct kevd *evd;
	struct ib_cqe cqe;
	struct ib_wc wcs[BENCH_BATCH];	/* the producer's bursts */
	u64 *ts;
	u32 *lat;
	unsigned long *seen;
	atomic_t delivered;
	atomic_t dups;
	atomic_t bad;
	atomic_t finished;
	wait_queue_head_t prod_wq;	/* one CPU: the producer waits for room */
	u32 wake_at;
	bool prod_waits;
	bool stop;
	u32 target;
	u32 produced;
	u64 prod_rt0;
	u64 fill_ns;		/* bench_drain(): time spent adding CQEs */
	u64 drain_ns;		/* ...and draining them */
	u64 t_start;
	u64 t_end;
	struct completion done;
};

/* The medians of a run's repetitions. */
struct bench_res {
	u64 ev_per_s;
	u64 cpu_ns_x10;		/* CPU ns per event, x10 */
	u64 notif_x1000;	/* notifications per event, x1000 */
	u64 arms_x1000;
	u64 upcalls_x1000;
	u64 p50_ns;
	u64 p99_ns;
	bool has_lat;
};

/*
 * rdma_dev: one PD and buffer; a run connects a loopback RC pair whose
 * side 0 sends to the mode's CQ. A work request is a signalled 8-byte RDMA
 * WRITE from side 0 into the buffer; wrs[] carries the sequence numbers
 * of the ib_core modes' work requests, one per send queue slot.
 */
struct bench_wr {
	struct ib_cqe cqe;
	u32 seq;
};

struct bench_rdma {
	struct ib_device *dev;
	struct ib_pd *pd;
	u8 *buf;
	u64 dma;
	struct bench_wr *wrs;
	struct ib_cq *sink;	/* side 1's CQ; nothing completes there */
	struct bench_res res[BM_NR][2];	/* saturated, rdma_rate */
};

struct bench_state {
	struct fake_hca *hca;
	struct ib_device *ibdev;
	int ccpu;		/* consumer CPU: notifications, pollers */
	int pcpu;		/* producer CPU */
	bool shared;		/* one CPU: the producer shares it */
	bool nohz;		/* precise idle time (get_cpu_idle_time_us) */
	u64 *ts;
	u32 *lat;
	unsigned long *seen;
	u32 cap;		/* size of ts, lat, seen */
	u64 produce_ns_x10;	/* producer cost per event (shared CPU) */
	struct bench_res res[BM_NR][1 + BENCH_MAX_RATES];
	u64 floor_cpu_x10;
	int failures;
	struct bench_rdma *rdma;
};

static struct bench_state *bs;

/* ------------------------------------------------------------------ */
/* CPU time                                                            */

struct bench_snap {
	u64 wall;
	u64 idle;	/* nohz: idle ns summed over the online CPUs */
	u64 busy;	/* tick accounting: non-idle ns summed */
	u32 ncpu;
};

static void bench_snap(struct bench_snap *s)
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
static u64 bench_busy_ns(const struct bench_snap *a, const struct bench_snap *b)
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
static void bench_spin(void)
{
	int i;

	for (i = 0; i < 64; i++)
		barrier();
}

/* This thread's CPU time so far, as bench_stop_thread() counts it. */
static u64 bench_self_time(void)
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
static void bench_park(void)
{
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
}

/* ------------------------------------------------------------------ */
/* The consumer function, the same for every mode                      */

static void bench_finish(struct bench_run *r)
{
	if (!atomic_xchg(&r->finished, 1)) {
		r->t_end = ktime_get_ns();
		complete(&r->done);
	}
}

static void bench_consume(struct bench_run *r, u64 seq)
{
	u32 n;

	if (unlikely(seq >= r->max_events)) {
		atomic_inc(&r->bad);
		return;
	}
	if (test_and_set_bit(seq, r->seen))
		atomic_inc(&r->dups);
	if (r->lat)
		r->lat[seq] = min_t(u64, ktime_get_ns() - r->ts[seq], U32_MAX);
	n = atomic_inc_return(&r->delivered);
	if (n == READ_ONCE(r->target))
		bench_finish(r);
	else if (unlikely(READ_ONCE(r->prod_waits)) &&
		 n == READ_ONCE(r->wake_at))
		wake_up(&r->prod_wq);
}

/* (a) kevd: a DTO completion with success, or a bad event */
static void bench_consume_event(struct bench_run *r,
				const struct kevd_event *ev)
{
	if (unlikely(ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
		     ev->dto.status != KEVD_DTO_SUCCESS)) {
		atomic_inc(&r->bad);
		return;
	}
	bench_consume(r, ev->dto.cookie);
}

static void bench_kevd_upcall(void *ctx, const struct kevd_event *ev,
			      bool more_events)
{
	bench_consume_event(ctx, ev);
}

static int bench_kevd_waiter(void *data)
{
	struct bench_run *r = data;
	struct kevd_event ev;
	u32 nmore;
	int ret;

	while (!kthread_should_stop()) {
		ret = kevd_wait(r->evd, 100000, 1, &ev, &nmore);
		if (ret == -ECANCELED)
			break;
		if (ret)
			continue;
		bench_consume_event(r, &ev);
		if (r->mode != BM_KEVD_DEQUEUE)
			continue;
		while (!kevd_dequeue(r->evd, &ev))
			bench_consume_event(r, &ev);
	}
	bench_park();
	return 0;
}

/* (b) ib_core poll contexts */
static void bench_ib_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		atomic_inc(&((struct bench_run *)cq->cq_context)->bad);
		return;
	}
	bench_consume(cq->cq_context, wc->byte_len);
}

static void bench_rdma_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct bench_wr *w = container_of(wc->wr_cqe, struct bench_wr, cqe);

	if (wc->status != IB_WC_SUCCESS) {
		atomic_inc(&((struct bench_run *)cq->cq_context)->bad);
		return;
	}
	bench_consume(cq->cq_context, w->seq);
}

/* (c) the 2006 kDAPL style: arm, poll one, call the consumer, repeat */
static void bench_2006_handler(struct ib_cq *cq, void *ctx)
{
	struct kevd_event ev;
	struct ib_wc wc;

	for (;;) {
		ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
		if (ib_poll_cq(cq, 1, &wc) != 1)
			break;
		kevd_wc_to_event(&wc, &ev);
		bench_consume_event(ctx, &ev);
	}
}

/*
 * Add the CQE of sequence number @seq to @cq, as the consumer function
 * expects it (wr_cqe for the ib_core modes, else wr_id; seq in byte_len),
 * stamping it in latency runs. @wc is the caller's, initialised once.
 */
static int bench_rdma_post(struct bench_run *r, u32 seq)
{
	struct bench_rdma *br = bs->rdma;
	struct bench_wr *w = &br->wrs[seq % r->room];
	struct ib_sge sge = {
		.addr = br->dma,
		.length = 8,
		.lkey = br->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = br->dma + L1_CACHE_BYTES,
		.rkey = br->pd->unsafe_global_rkey,
	};

	if (r->ib_cqe) {
		w->seq = seq;
		w->cqe.done = bench_rdma_done;
		wr.wr.wr_cqe = &w->cqe;
	} else {
		wr.wr.wr_id = seq;
	}
	if (r->lat)
		r->ts[seq] = ktime_get_ns();
	return ib_post_send(r->rc.qp[0], &wr.wr, NULL);
}

/* Completion @seq: its cookie, and its timestamp when latency is taken. */
static void bench_fill_wc(struct bench_run *r, struct ib_wc *wc, u32 seq)
{
	if (r->ib_cqe)
		wc->wr_cqe = &r->cqe;
	else
		wc->wr_id = seq;
	wc->byte_len = seq;
	if (r->lat)
		r->ts[seq] = ktime_get_ns();
}

static int bench_add(struct bench_run *r, struct ib_cq *cq, struct ib_wc *wc,
		     u32 seq)
{
	if (r->rdma)
		return bench_rdma_post(r, seq);
	bench_fill_wc(r, wc, seq);
	return fake_cq_add(cq, wc);
}

/*
 * Saturated runs on one fake CQ with prod_burst > 1: @n completions
 * (sequence numbers @seq on) in one call, one lock round trip and at most
 * one notification, as an HCA that writes several CQEs per interrupt.
 */
static int bench_add_burst(struct bench_run *r, struct ib_cq *cq, u32 seq,
			   u32 n)
{
	u32 j;

	for (j = 0; j < n; j++) {
		r->wcs[j] = (struct ib_wc){
			.status = IB_WC_SUCCESS,
			.opcode = IB_WC_RECV,
		};
		bench_fill_wc(r, &r->wcs[j], seq + j);
	}
	return fake_cq_add_burst(cq, r->wcs, n) == n ? 0 : -ENOSPC;
}

static void bench_nop_handler(struct ib_cq *cq, void *ctx)
{
}

/* (d) the floor: poll in batches, convert, consume */
static u32 bench_floor_poll(struct bench_run *r, struct ib_cq *cq,
			    struct ib_wc *wcs)
{
	struct kevd_event ev;
	int n, i;

	n = ib_poll_cq(cq, BENCH_BATCH, wcs);
	for (i = 0; i < n; i++) {
		kevd_wc_to_event(&wcs[i], &ev);
		bench_consume_event(r, &ev);
	}
	return n > 0 ? n : 0;
}

static int bench_floor_thread(void *data)
{
	struct bench_run *r = data;
	struct ib_wc *wcs;
	struct ib_cq *cq;
	u32 k = 0;

	/* Round robin over the run's CQs; idle after a pass found nothing. */
	wcs = kcalloc(BENCH_BATCH, sizeof(*wcs), GFP_KERNEL);
	while (wcs && !READ_ONCE(r->stop) && !kthread_should_stop()) {
		cq = r->cqs[k];
		if (++k == r->ncqs)
			k = 0;
		if ((r->rdma || !fake_cq_empty(cq)) &&
		    bench_floor_poll(r, cq, wcs))
			continue;
		if (k)
			continue;
		if (bs->shared)
			usleep_range(10, 20);
		else
			bench_spin();
	}
	kfree(wcs);
	bench_park();
	return 0;
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
		end = min(i + depth, r->max_events);
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

/* ------------------------------------------------------------------ */
/* The producer                                                        */

static bool bench_pause(struct bench_run *r, u64 now, u64 until)
{
	if (kthread_should_stop())
		return false;
	if (!bs->shared) {
		bench_spin();
		return true;
	}
	/* One CPU: let the consumer run. */
	if (until > now + 20 * NSEC_PER_USEC)
		usleep_range((until - now) / NSEC_PER_USEC,
			     (until - now) / NSEC_PER_USEC + 10);
	else
		usleep_range(10, 20);
	return true;
}

/*
 * One CPU, events in flight at the limit: sleep until the consumer has
 * taken half of them (it wakes us), rather than polling with short
 * sleeps whose cost would be charged to the consumer.
 */
static bool bench_wait_room(struct bench_run *r, u32 i)
{
	u32 at = i - r->room / 2;

	WRITE_ONCE(r->wake_at, at);
	/* Pairs with the full barrier of atomic_inc_return() in consume. */
	smp_store_mb(r->prod_waits, true);
	wait_event_interruptible_timeout(r->prod_wq,
					 (u32)atomic_read(&r->delivered) - at < S32_MAX ||
					 kthread_should_stop(), HZ / 10);
	WRITE_ONCE(r->prod_waits, false);
	return !kthread_should_stop();
}

static bool bench_cq_full(struct bench_run *r, struct ib_cq *cq, u32 i,
			  u32 *seen_delivered)
{
	if (r->per_cq_room)
		return fake_cq_count(cq) >= r->room;
	if (i - *seen_delivered < r->room)
		return false;
	*seen_delivered = atomic_read(&r->delivered);
	return i - *seen_delivered >= r->room;
}

static int bench_producer(void *data)
{
	struct bench_run *r = data;
	u64 period = r->rate ? NSEC_PER_SEC / r->rate : 0;
	struct ib_wc wc = {
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_RECV,
	};
	u32 i = 0, k = 0, seen_delivered = 0, n = 1, checked = 0;
	u64 start, now = 0;
	bool go = true;

	r->prod_rt0 = bench_self_time();
	start = ktime_get_ns();
	r->t_start = start;
	while (go && i < r->max_events) {
		struct ib_cq *cq = r->cqs[k];

		if (r->rate || !i || i - checked >= 64) {
			checked = i;
			now = ktime_get_ns();
			if (now - start >= r->limit_ns)
				break;
		}
		if (r->rate && now < start + i * period) {
			go = bench_pause(r, now, start + i * period);
			continue;
		}
		if (!r->rate && r->ncqs == 1 && !r->rdma)
			n = min(prod_burst, r->max_events - i);
		/* Room for the burst: its last CQE counts. */
		if (bench_cq_full(r, cq, i + n - 1, &seen_delivered)) {
			if (bs->shared && !r->per_cq_room)
				go = bench_wait_room(r, i);
			else
				go = bench_pause(r, now, now);
			continue;
		}
		if (n > 1 ? bench_add_burst(r, cq, i, n) :
			    bench_add(r, cq, &wc, i)) {
			atomic_inc(&r->bad);
			break;
		}
		i += n;
		if (++k == r->ncqs)
			k = 0;
	}
	r->produced = i;
	/* Pairs with the full barrier of atomic_inc_return() in consume. */
	smp_store_mb(r->target, i);
	if ((u32)atomic_read(&r->delivered) == i)
		bench_finish(r);
	bench_park();
	return 0;
}

/* ------------------------------------------------------------------ */
/* A run                                                               */

static struct task_struct *bench_thread(int (*fn)(void *), void *data,
					int cpu, const char *name)
{
	struct task_struct *t;

	t = kthread_create(fn, data, "%s", name);
	if (IS_ERR(t))
		return t;
	kthread_bind(t, cpu);
	get_task_struct(t);
	return t;
}

/*
 * Stop a thread and return its CPU time: exact (sum_exec_runtime) when
 * the busy time is exact (nohz idle accounting), else its tick-sampled
 * utime + stime, so that it is sampled by the same ticks as kcpustat.
 */
static u64 bench_stop_thread(struct task_struct *t)
{
	u64 rt;

	kthread_stop(t);
	if (bs->nohz)
		rt = READ_ONCE(t->se.sum_exec_runtime);
	else
		rt = READ_ONCE(t->utime) + READ_ONCE(t->stime);
	put_task_struct(t);
	return rt;
}

static struct kevd *bench_kevd(struct bench_run *r, struct ib_device *dev,
			       int policy, u32 qlen, int cpu)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.cq_depth = qlen;
	attr.flags = KEVD_DTO_FLAG;
	attr.upcall_policy = policy;
	attr.upcall.func = bench_kevd_upcall;
	attr.upcall.ctx = r;
	attr.upcall_flag = KEVD_UPCALL_INVOC_ANY;
	attr.cpu = cpu;
	evd = kevd_create(dev, &attr);
	if (!IS_ERR(evd) && dev == bs->ibdev)
		fake_cq_set_irq_cpu(kevd_cq(evd), bs->ccpu);
	return evd;
}

/* Make the CQ (or EVD) of a single-CQ mode and its consumer thread. */
static int bench_setup(struct bench_run *r, struct ib_cq **cqp,
		       struct task_struct **consumer)
{
	struct ib_device *dev = r->rdma ? bs->rdma->dev : bs->ibdev;
	struct ib_cq_init_attr attr = { .cqe = r->room };
	enum ib_poll_context ctx = IB_POLL_WORKQUEUE;
	struct ib_cq *cq = NULL;

	*consumer = NULL;
	switch (r->mode) {
	case BM_KEVD_SINGLE:
	case BM_KEVD_WAIT:
	case BM_KEVD_DEQUEUE:
		r->evd = bench_kevd(r, dev, r->mode == BM_KEVD_SINGLE ?
				    KEVD_UPCALL_SINGLE_INSTANCE :
				    KEVD_UPCALL_DISABLE, r->room, bs->ccpu);
		if (IS_ERR(r->evd))
			return PTR_ERR(r->evd);
		*cqp = kevd_cq(r->evd);
		if (r->mode != BM_KEVD_SINGLE)
			*consumer = bench_thread(bench_kevd_waiter, r, bs->ccpu,
						 "kevd_bench_wait");
		break;
	case BM_SOFTIRQ:
		ctx = IB_POLL_SOFTIRQ;
		fallthrough;
	case BM_UNBOUND_WQ:
		if (r->mode == BM_UNBOUND_WQ)
			ctx = IB_POLL_UNBOUND_WORKQUEUE;
		fallthrough;
	case BM_WQ:
		cq = ib_alloc_cq(dev, r, r->room, 0, ctx);
		r->ib_cqe = true;
		r->cqe.done = bench_ib_done;
		break;
	case BM_KDAPL2006:
		cq = ib_create_cq(dev, bench_2006_handler, NULL, r, &attr);
		if (!IS_ERR(cq))
			ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
		break;
	case BM_FLOOR:
	default:
		cq = ib_create_cq(dev, bench_nop_handler, NULL, r, &attr);
		if (!IS_ERR(cq) && r->mode == BM_FLOOR)
			*consumer = bench_thread(bench_floor_thread, r, bs->ccpu,
						 "kevd_bench_floor");
		break;
	}
	if (cq) {
		if (IS_ERR(cq))
			return PTR_ERR(cq);
		if (!r->rdma)
			fake_cq_set_irq_cpu(cq, bs->ccpu);
		*cqp = cq;
	}
	if (IS_ERR(*consumer)) {
		int ret = PTR_ERR(*consumer);

		*consumer = NULL;
		return ret;
	}
	return 0;
}

static void bench_teardown(struct bench_run *r, struct ib_cq *cq)
{
	int ret;

	if (r->evd) {
		ret = kevd_free(r->evd);
		if (ret)
			pr_err("kevd-bench: kevd_free: %d\n", ret);
		r->evd = NULL;
	} else if (cq && (r->mode == BM_WQ || r->mode == BM_UNBOUND_WQ ||
			  r->mode == BM_SOFTIRQ)) {
		ib_free_cq(cq);
	} else if (cq) {
		ib_destroy_cq(cq);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n values; sorts them. */
static u64 bench_median_u64(u64 *v, u32 n)
{
	sort(v, n, sizeof(u64), cmp_u64, NULL);
	return v[n / 2];
}

static int cmp_u32(const void *a, const void *b)
{
	u32 x = *(const u32 *)a, y = *(const u32 *)b;

	return x < y ? -1 : x > y;
}

static void bench_run_init(struct bench_run *r, enum bench_mode mode,
			   u32 rate, u32 max_events, u32 ms)
{
	memset(r, 0, sizeof(*r));
	r->mode = mode;
	r->rate = rate;
	r->max_events = min(max_events, bs->cap);
	r->limit_ns = (u64)ms * NSEC_PER_MSEC;
	r->room = depth;
	r->seen = bs->seen;
	r->ts = bs->ts;
	if (rate && rate <= BENCH_LAT_MAX_RATE)
		r->lat = bs->lat;
	r->target = U32_MAX;
	init_completion(&r->done);
	init_waitqueue_head(&r->prod_wq);
	bitmap_zero(r->seen, r->max_events);
}

/* One sample: the raw numbers of one run. */
struct bench_sample {
	u64 ev_per_s;
	u64 cpu_ns_x10;
	u64 notif_x1000;
	u64 arms_x1000;
	u64 upcalls_x1000;
	u64 p50_ns;
	u64 p99_ns;
	u64 prod_ns_x10;	/* producer task time per event */
	u32 produced;
	u32 delivered;
	bool ok;
};

/*
 * Run the producer against r->cqs[0 .. ncqs) and wait for delivery.
 * The consumer thread, if any, is started first.
 */
static int bench_go(struct bench_run *r, struct task_struct *consumer,
		    struct bench_sample *s)
{
	struct bench_snap a, b;
	struct task_struct *prod;
	u64 prod_rt, busy, wall;
	unsigned long tmo;
	int ret = 0;

	prod = bench_thread(bench_producer, r, bs->pcpu, "kevd_bench_prod");
	if (IS_ERR(prod))
		return PTR_ERR(prod);
	bench_snap(&a);
	if (consumer)
		wake_up_process(consumer);
	wake_up_process(prod);
	tmo = msecs_to_jiffies(r->limit_ns / NSEC_PER_MSEC + 60000);
	if (!wait_for_completion_timeout(&r->done, tmo)) {
		pr_err("kevd-bench: %s: timeout: produced %u delivered %u\n",
		       r->mode < BM_NR ? bench_mode_name[r->mode] : "scale",
		       READ_ONCE(r->produced), atomic_read(&r->delivered));
		ret = -ETIMEDOUT;
	}
	prod_rt = bench_stop_thread(prod) - r->prod_rt0;
	bench_snap(&b);
	WRITE_ONCE(r->stop, true);

	memset(s, 0, sizeof(*s));
	s->produced = r->produced;
	s->delivered = atomic_read(&r->delivered);
	if (ret)
		return ret;
	wall = max_t(u64, r->t_end - r->t_start, 1);
	s->ev_per_s = div64_u64((u64)s->produced * NSEC_PER_SEC, wall);
	busy = bench_busy_ns(&a, &b);
	if (s->produced)
		s->prod_ns_x10 = div64_u64(prod_rt * 10, s->produced);
	/* One CPU: the fake's calibrated cost; rdma_dev's is its task time. */
	if (bs->shared && !r->rdma)
		prod_rt = div64_u64(bs->produce_ns_x10 * s->produced, 10);
	busy = busy > prod_rt ? busy - prod_rt : 0;
	if (s->produced)
		s->cpu_ns_x10 = div64_u64(busy * 10, s->produced);
	return 0;
}

static void bench_latency(struct bench_run *r, struct bench_sample *s)
{
	u32 n = s->produced;

	if (!r->lat || !n)
		return;
	sort(r->lat, n, sizeof(u32), cmp_u32, NULL);
	s->p50_ns = r->lat[n / 2];
	s->p99_ns = r->lat[min(n - 1, (u32)div_u64((u64)n * 99, 100))];
}

static bool bench_check(struct bench_run *r, struct bench_sample *s)
{
	s->ok = s->produced && s->delivered == s->produced &&
		!atomic_read(&r->dups) && !atomic_read(&r->bad) &&
		bitmap_full(r->seen, s->produced);
	return s->ok;
}

/*
 * Evidence for RESULTS.md: where kevd's poller threads ran and how often
 * they were preempted (cumulative counters; compare successive lines).
 */
static void bench_poller_diag(void)
{
	struct task_struct *g, *t;

	rcu_read_lock();
	for_each_process_thread(g, t) {
		if (strncmp(t->comm, "kevd_poll/", 10))
			continue;
		pr_info("kevd-bench-diag poller=%s cpu=%u nr_cpus_allowed=%d migrations=%llu nvcsw=%lu nivcsw=%lu\n",
			t->comm, task_cpu(t), t->nr_cpus_allowed,
			READ_ONCE(t->se.nr_migrations), READ_ONCE(t->nvcsw),
			READ_ONCE(t->nivcsw));
	}
	rcu_read_unlock();
}

static void bench_counters(struct bench_run *r, struct bench_sample *s)
{
	u64 notif = 0, arms = 0, upcalls = 0;
	struct fake_cq_stats st;
	struct kevd_param p;
	u32 i;

	for (i = 0; i < r->ncqs && !r->rdma; i++) {
		fake_cq_stats(r->cqs[i], &st);
		notif += st.notifications;
		arms += st.arms;
	}
	switch (r->mode) {
	case BM_KEVD_SINGLE:
	case BM_KEVD_WAIT:
	case BM_KEVD_DEQUEUE:
		if (!r->evd || kevd_query(r->evd, &p))
			break;
		upcalls = p.stats.upcalls;
		if (r->rdma) {
			/* A real provider counts nothing: kevd's counters. */
			notif = p.stats.notifications;
			arms = p.stats.arms;
		}
		if (r->rate || smoke || r->rdma)
			break;
		/* Evidence for RESULTS.md: kevd's own counters. */
		pr_info("kevd-bench-diag mode=%s delivered=%u notifications=%llu empty_notifications=%llu arms=%llu repolls=%llu backpressure_stalls=%llu max_batch=%llu upcalls=%llu\n",
			bench_mode_name[r->mode], s->delivered,
			p.stats.notifications, p.stats.empty_notifications,
			p.stats.arms, p.stats.repolls,
			p.stats.backpressure_stalls, p.stats.max_batch,
			p.stats.upcalls);
		if (r->mode == BM_KEVD_SINGLE)
			bench_poller_diag();
		break;
	case BM_WQ:
	case BM_UNBOUND_WQ:
	case BM_SOFTIRQ:
	case BM_KDAPL2006:
		upcalls = s->delivered;	/* one consumer call per event */
		break;
	default:
		break;
	}
	if (!s->produced)
		return;
	s->notif_x1000 = div64_u64(notif * 1000, s->produced);
	s->arms_x1000 = div64_u64(arms * 1000, s->produced);
	s->upcalls_x1000 = div64_u64(upcalls * 1000, s->produced);
}

/* Stop a run's consumer thread, waking it if it waits in kevd_wait(). */
static void bench_stop_consumer(struct bench_run *r,
				struct task_struct *consumer)
{
	WRITE_ONCE(r->stop, true);
	if (!consumer)
		return;
	if (r->evd)
		kevd_set_unwaitable(r->evd, true);
	bench_stop_thread(consumer);
}

/*
 * Run the producer against the one CQ *@cqp, stop the consumer, and take
 * the sample's counters and latency; -EIO if an event was lost, repeated
 * or bad.
 */
static int bench_go_one(struct bench_run *r, struct ib_cq **cqp,
			struct task_struct *consumer, struct bench_sample *s)
{
	int ret;

	r->cqs = cqp;
	r->ncqs = 1;
	ret = bench_go(r, consumer, s);
	bench_stop_consumer(r, consumer);
	if (ret)
		return ret;
	bench_counters(r, s);
	bench_latency(r, s);
	return bench_check(r, s) ? 0 : -EIO;
}

/* One run of a single-CQ mode. */
static int bench_one(enum bench_mode mode, u32 rate, u32 max_events, u32 ms,
		     struct bench_sample *s)
{
	struct task_struct *consumer = NULL;
	struct ib_cq *cq = NULL;
	struct bench_run *r;
	int ret;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, mode, rate, max_events, ms);
	ret = bench_setup(r, &cq, &consumer);
	if (!ret)
		ret = bench_go_one(r, &cq, consumer, s);
	bench_teardown(r, cq);
	kfree(r);
	return ret;
}

/*
 * One CPU (UML): the CPU cost per event of a mode, from backlogs. With the
 * producer on the consumer's CPU, a saturated run's cost depends on how
 * the scheduler interleaves the two (the same code varies 4x in events/s
 * from run to run), so the saturated cost is taken with a fixed pattern:
 * add depth CQEs with preemption off (on UP the notification of an armed
 * CQ is taken inline, as an interrupt), then sleep while the consumer
 * delivers them. Cost: the busy time of the delivery (for the 2006 style,
 * whose handler runs inside the fill, the fill time beyond its calibrated
 * cost).
 */
static int bench_burst(enum bench_mode mode, u32 n, u64 *cpu_x10,
		       u64 *notif_x1000)
{
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV };
	struct task_struct *consumer = NULL;
	struct fake_cq_stats st;
	struct bench_snap a, b;
	struct bench_sample s = {};
	struct ib_cq *cq = NULL;
	struct bench_run *r;
	u64 busy = 0, fill = 0, calib, t0;
	u32 i = 0, end;
	int ret;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, mode, 0, n, 0);
	ret = bench_setup(r, &cq, &consumer);
	if (ret)
		goto out;
	r->cqs = &cq;
	r->ncqs = 1;
	if (consumer)
		wake_up_process(consumer);
	while (!ret && i < r->max_events) {
		end = min(i + depth, r->max_events);
		reinit_completion(&r->done);
		atomic_set(&r->finished, 0);
		WRITE_ONCE(r->target, end);
		preempt_disable();
		t0 = ktime_get_ns();
		for (; i < end && !ret; i++)
			ret = bench_add(r, cq, &wc, i);
		fill += ktime_get_ns() - t0;
		bench_snap(&a);
		preempt_enable();
		if (!ret && (u32)atomic_read(&r->delivered) != end &&
		    !wait_for_completion_timeout(&r->done, 60 * HZ))
			ret = -ETIMEDOUT;
		bench_snap(&b);
		busy += bench_busy_ns(&a, &b);
	}
	bench_stop_consumer(r, consumer);
	s.produced = i;
	s.delivered = atomic_read(&r->delivered);
	if (!ret && !bench_check(r, &s))
		ret = -EIO;
	/*
	 * The 2006 handler does all of its work inside the fill; the other
	 * modes run one notification handler there per backlog, which is
	 * left out rather than measured as the difference of two noisy
	 * fill times of about 10 ns per event each.
	 */
	if (mode == BM_KDAPL2006) {
		calib = div64_u64(bs->produce_ns_x10 * i, 10);
		busy += fill > calib ? fill - calib : 0;
	}
	*cpu_x10 = div64_u64(busy * 10, max(i, 1u));
	fake_cq_stats(cq, &st);
	*notif_x1000 = div64_u64(st.notifications * 1000, max(i, 1u));
out:
	bench_teardown(r, cq);
	kfree(r);
	return ret;
}

/*
 * The floor's CPU per event, and the producer's (what is subtracted on a
 * shared CPU): fill and drain cycles on the consumer CPU.
 */
static int bench_drain(u32 n, u64 *floor_x10, u64 *fill_x10,
		       struct bench_sample *s)
{
	struct ib_cq_init_attr attr = { .cqe = depth };
	struct task_struct *t;
	struct bench_run *r;
	struct ib_cq *cq;
	int ret = 0;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, BM_FLOOR, 0, n, 0);
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
	*floor_x10 = div64_u64(r->drain_ns * 10, n);
	*fill_x10 = div64_u64(r->fill_ns * 10, n);
out_cq:
	ib_destroy_cq(cq);
out:
	kfree(r);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Scale: n EVDs on the default pollers, round-robin producer          */

struct bench_scale {
	u32 nevds;
	bool floor;
	u32 made;
	struct kevd **evds;
	struct ib_cq **cqs;
	struct bench_run *r;
	/* per repetition */
	u64 eps[BENCH_MAX_REPS];
	u64 notif[BENCH_MAX_REPS];
	u64 prod[BENCH_MAX_REPS];
	u64 cpu[BENCH_MAX_REPS];
	u64 vs_first[BENCH_MAX_REPS];	/* x100 */
	struct bench_sample last;	/* the last repetition's counts */
	/* medians */
	u64 ev_per_s;
	u64 notif_x1000;
	u64 prod_ns_x10;	/* the producer's task time per event */
	u64 cpu_ns_x10;		/* every CPU's busy time but the producer's */
	u64 vs_first_x100;
	size_t mem_bytes;
	size_t ring_bytes;
	u32 qlen;
};

/*
 * @n EVDs (kevd-single on the default pollers), or with @floor @n plain
 * CQs that one floor thread polls round robin: what touching @n CQs costs
 * without kevd, for comparison. Idle between its repetitions: armed, on
 * no run list.
 */
static int bench_scale_setup(struct bench_scale *sc, u32 n, bool floor)
{
	struct ib_cq_init_attr attr = { .cqe = scale_qlen };
	struct kevd_param p;
	int ret;

	memset(sc, 0, sizeof(*sc));
	sc->nevds = n;
	sc->floor = floor;
	sc->qlen = scale_qlen;
	sc->r = kzalloc(sizeof(*sc->r), GFP_KERNEL);
	sc->evds = kvcalloc(n, sizeof(*sc->evds), GFP_KERNEL);
	sc->cqs = kvcalloc(n, sizeof(*sc->cqs), GFP_KERNEL);
	if (!sc->r || !sc->evds || !sc->cqs)
		return -ENOMEM;
	for (; sc->made < n && floor; sc->made++) {
		sc->cqs[sc->made] = ib_create_cq(bs->ibdev, bench_nop_handler,
						 NULL, sc->r, &attr);
		if (IS_ERR(sc->cqs[sc->made]))
			return PTR_ERR(sc->cqs[sc->made]);
	}
	for (; sc->made < n; sc->made++) {
		sc->evds[sc->made] = bench_kevd(sc->r, bs->ibdev,
						KEVD_UPCALL_SINGLE_INSTANCE,
						scale_qlen, KEVD_ANY);
		if (IS_ERR(sc->evds[sc->made]))
			return PTR_ERR(sc->evds[sc->made]);
		sc->cqs[sc->made] = kevd_cq(sc->evds[sc->made]);
	}
	if (floor)
		return 0;
	/* Settle: what each EVD holds once created. */
	ret = kevd_query(sc->evds[n - 1], &p);
	if (ret)
		return ret;
	sc->qlen = p.qlen;
	sc->mem_bytes = p.mem_bytes;
	sc->ring_bytes = (size_t)p.qlen * sizeof(struct kevd_event);
	return 0;
}

static void bench_scale_teardown(struct bench_scale *sc)
{
	while (sc->evds && sc->made--) {
		int err = 0;

		if (sc->floor)
			ib_destroy_cq(sc->cqs[sc->made]);
		else
			err = kevd_free(sc->evds[sc->made]);
		if (err)
			pr_err("kevd-bench: kevd_free: %d\n", err);
	}
	kvfree(sc->cqs);
	kvfree(sc->evds);
	kfree(sc->r);
	sc->cqs = NULL;
	sc->evds = NULL;
	sc->r = NULL;
}

static u64 bench_scale_notifications(struct bench_scale *sc)
{
	struct fake_cq_stats st;
	u64 sum = 0;
	u32 i;

	for (i = 0; i < sc->nevds; i++) {
		fake_cq_stats(sc->cqs[i], &st);
		sum += st.notifications;
	}
	return sum;
}

/* Repetition @rep of a set made by bench_scale_setup(). */
static int bench_scale_rep(struct bench_scale *sc, u32 rep, u32 max_events,
			   u32 ms)
{
	struct bench_run *r = sc->r;
	struct task_struct *consumer = NULL;
	struct bench_sample s;
	u64 n0;
	int ret;

	n0 = bench_scale_notifications(sc);
	bench_run_init(r, sc->floor ? BM_FLOOR : BM_SCALE, 0, max_events, ms);
	r->cqs = sc->cqs;
	r->ncqs = sc->nevds;
	r->per_cq_room = true;
	r->room = max(sc->qlen, 2u) - 1;
	if (sc->floor) {
		consumer = bench_thread(bench_floor_thread, r, bs->ccpu,
					"kevd_bench_floor");
		if (IS_ERR(consumer))
			return PTR_ERR(consumer);
	}
	ret = bench_go(r, consumer, &s);
	bench_stop_consumer(r, consumer);
	if (!ret && !bench_check(r, &s))
		ret = -EIO;
	sc->last = s;
	if (ret)
		return ret;
	sc->eps[rep] = s.ev_per_s;
	sc->notif[rep] = div64_u64((bench_scale_notifications(sc) - n0) * 1000,
				   max(s.produced, 1u));
	sc->prod[rep] = s.prod_ns_x10;
	sc->cpu[rep] = s.cpu_ns_x10;
	return 0;
}

/*
 * Scale: the sets of every size exist together, and each repetition runs
 * every set once, smallest first, so that the host's slow and fast phases
 * fall on all sizes alike. vs_first is the median of each repetition's
 * ratio to the first size's run just before it.
 */
static int bench_scale_all(struct bench_scale *sc, u32 nsc, bool floor,
			   u32 nreps, u32 max_events, u32 ms)
{
	u32 i, rep;
	int ret = 0;

	for (i = 0; i < nsc && !ret; i++)
		ret = bench_scale_setup(&sc[i], scale[i], floor);
	for (rep = 0; rep < nreps && !ret; rep++)
		for (i = 0; i < nsc && !ret; i++)
			ret = bench_scale_rep(&sc[i], rep, max_events, ms);
	for (i = 0; i < nsc; i++)
		bench_scale_teardown(&sc[i]);
	if (ret)
		return ret;
	for (i = 0; i < nsc; i++) {
		for (rep = 0; rep < nreps; rep++)
			sc[i].vs_first[rep] =
				div64_u64(sc[i].eps[rep] * 100 + sc[0].eps[rep] / 2,
					  max(sc[0].eps[rep], 1ull));
	}
	for (i = 0; i < nsc; i++) {
		sc[i].ev_per_s = bench_median_u64(sc[i].eps, nreps);
		sc[i].notif_x1000 = bench_median_u64(sc[i].notif, nreps);
		sc[i].prod_ns_x10 = bench_median_u64(sc[i].prod, nreps);
		sc[i].cpu_ns_x10 = bench_median_u64(sc[i].cpu, nreps);
		sc[i].vs_first_x100 = bench_median_u64(sc[i].vs_first, nreps);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

/* "x.yyy" for a value scaled by 10^digits. */
static char *bench_fix(char *buf, size_t len, u64 v, unsigned int digits)
{
	u64 div = digits == 1 ? 10 : digits == 2 ? 100 : 1000;

	snprintf(buf, len, "%llu.%0*llu", div64_u64(v, div), digits,
		 v - div64_u64(v, div) * div);
	return buf;
}

/* a / b as "x.yy"; "na" if b is 0. */
static char *bench_ratio(char *buf, size_t len, u64 a, u64 b)
{
	if (!b) {
		strscpy(buf, "na", len);
		return buf;
	}
	return bench_fix(buf, len, div64_u64(a * 100 + b / 2, b), 2);
}

static const char *bench_rate_name(char *buf, size_t len, u32 rate)
{
	if (!rate)
		strscpy(buf, "sat", len);
	else
		snprintf(buf, len, "%u", rate);
	return buf;
}

/* A result as printed: every column a string ("na" where unknown). */
struct bench_cols {
	char c[24], n[24], a[24], u[24], p5[24], p9[24], vw[24], vf[24];
	char rn[16];
};

/*
 * Format @x, its latency from @lat (NULL: none), its ratios against @wq
 * (events/s) and @floor (CPU ns x10); @counted: notifications and arms
 * are known.
 */
static void bench_format(struct bench_cols *o, const struct bench_res *x,
			 const struct bench_res *lat, u64 wq, u64 floor,
			 bool counted, u32 rate)
{
	bench_fix(o->c, sizeof(o->c), x->cpu_ns_x10, 1);
	bench_fix(o->n, sizeof(o->n), x->notif_x1000, 3);
	bench_fix(o->a, sizeof(o->a), x->arms_x1000, 3);
	bench_fix(o->u, sizeof(o->u), x->upcalls_x1000, 3);
	if (!counted) {
		strscpy(o->n, "na", sizeof(o->n));
		strscpy(o->a, "na", sizeof(o->a));
	}
	bench_ratio(o->vw, sizeof(o->vw), x->ev_per_s, wq);
	bench_ratio(o->vf, sizeof(o->vf), x->cpu_ns_x10, floor);
	if (lat && lat->has_lat) {
		bench_fix(o->p5, sizeof(o->p5), div_u64(lat->p50_ns, 100), 1);
		bench_fix(o->p9, sizeof(o->p9), div_u64(lat->p99_ns, 100), 1);
	} else {
		strscpy(o->p5, "na", sizeof(o->p5));
		strscpy(o->p9, "na", sizeof(o->p9));
	}
	bench_rate_name(o->rn, sizeof(o->rn), rate);
}

static void bench_print_mode(int m, int ri, u32 rate)
{
	const struct bench_res *x = &bs->res[m][ri];
	struct bench_cols o;

	bench_format(&o, x, ri ? x : &bs->res[m][nr_rates ? 1 : 0],
		     bs->res[BM_WQ][ri].ev_per_s, bs->floor_cpu_x10, true, rate);
	if (!ri)
		pr_info("kevd-bench mode=%s kernel=%s ev_per_s=%llu cpu_ns_per_ev=%s notif_per_ev=%s arms_per_ev=%s p50_us=%s p99_us=%s vs_wq=%s vs_floor=%s upcalls_per_ev=%s reps=%u\n",
			bench_mode_name[m], kernel, x->ev_per_s, o.c, o.n, o.a,
			o.p5, o.p9, o.vw, o.vf, o.u, reps);
	pr_info("kevd-bench-table %-12s %8s %9llu %9s %7s %7s %7s %8s %8s %6s %6s\n",
		bench_mode_name[m], o.rn, x->ev_per_s, o.c, o.n, o.a, o.u, o.p5,
		o.p9, o.vw, o.vf);
	pr_info("kevd-bench-csv,%s,%s,%s,%llu,%s,%s,%s,%s,%s,%s,%s,%s,%u\n",
		kernel, bench_mode_name[m], o.rn, x->ev_per_s, o.c, o.n, o.a,
		o.u, o.p5, o.p9, o.vw, o.vf, reps);
}

/* ------------------------------------------------------------------ */
/* Driver                                                              */

/* The median of one u64 field over the samples. */
static u64 bench_med(const struct bench_sample *s, u32 n, size_t off)
{
	u64 v[BENCH_MAX_REPS];
	u32 i;

	for (i = 0; i < n; i++)
		v[i] = *(const u64 *)((const char *)&s[i] + off);
	return bench_median_u64(v, n);
}

static void bench_median(struct bench_sample *s, u32 n, struct bench_res *x)
{
	x->ev_per_s = bench_med(s, n, offsetof(struct bench_sample, ev_per_s));
	x->cpu_ns_x10 = bench_med(s, n, offsetof(struct bench_sample, cpu_ns_x10));
	x->notif_x1000 = bench_med(s, n, offsetof(struct bench_sample, notif_x1000));
	x->arms_x1000 = bench_med(s, n, offsetof(struct bench_sample, arms_x1000));
	x->upcalls_x1000 = bench_med(s, n, offsetof(struct bench_sample, upcalls_x1000));
	x->p50_ns = bench_med(s, n, offsetof(struct bench_sample, p50_ns));
	x->p99_ns = bench_med(s, n, offsetof(struct bench_sample, p99_ns));
}

/* ------------------------------------------------------------------ */
/* rdma_dev: the same modes over a real provider (siw loopback)        */

/*
 * One run on rdma_dev: the mode's CQ (or EVD) is side 0's CQ of a fresh
 * loopback RC pair (a QP's CQs are fixed when it is made); the producer
 * posts WRITEs on side 0. Teardown: QPs to error (nothing is in flight
 * once every event was delivered), disconnected, destroyed, then the CQ.
 */
static int bench_rdma_one(enum bench_mode mode, u32 rate, u32 max_events,
			  u32 ms, struct bench_sample *s)
{
	struct bench_rdma *br = bs->rdma;
	struct task_struct *consumer = NULL;
	struct ib_qp_init_attr *init;
	struct ib_cq *cq = NULL;
	struct bench_run *r;
	int ret, i;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, mode, rate, max_events, ms);
	r->rdma = true;
	r->room = rdma_depth;
	ret = bench_setup(r, &cq, &consumer);
	if (ret)
		goto out;
	r->rc.dev = br->dev;
	r->rc.pd = br->pd;
	r->rc.addr = rdma_addr;
	r->rc.port = rdma_port;
	for (i = 0; i < 2; i++) {
		init = &r->rc.init[i];
		init->send_cq = i ? br->sink : cq;
		init->recv_cq = i ? br->sink : cq;
		init->cap.max_send_wr = r->room;
		init->cap.max_recv_wr = 1;
		init->cap.max_send_sge = 1;
		init->cap.max_recv_sge = 1;
		init->sq_sig_type = IB_SIGNAL_ALL_WR;
		init->qp_type = IB_QPT_RC;
	}
	ret = kevd_rc_connect(&r->rc);
	if (ret) {
		bench_stop_consumer(r, consumer);
		goto out_rc;
	}
	ret = bench_go_one(r, &cq, consumer, s);
	kevd_rc_disconnect(&r->rc);
	ret = kevd_rc_wait_disconnected(&r->rc, 30 * HZ) ?: ret;
out_rc:
	kevd_rc_destroy(&r->rc);
out:
	bench_teardown(r, cq);
	kfree(r);
	return ret;
}

static void bench_rdma_print(int m, int ri)
{
	struct bench_rdma *br = bs->rdma;
	const struct bench_res *x = &br->res[m][ri];
	struct bench_cols o;

	/* siw counts nothing: only kevd's own counters are known. */
	bench_format(&o, x, x, br->res[BM_WQ][ri].ev_per_s,
		     br->res[BM_FLOOR][ri].cpu_ns_x10,
		     m <= BM_KEVD_DEQUEUE || m == BM_FLOOR, ri ? rdma_rate : 0);
	pr_info("kevd-bench-rdma dev=%s kernel=%s mode=%s rate=%s ev_per_s=%llu cpu_ns_per_ev=%s notif_per_ev=%s arms_per_ev=%s upcalls_per_ev=%s p50_us=%s p99_us=%s vs_wq=%s vs_floor=%s reps=%u\n",
		rdma_dev, kernel, bench_mode_name[m], o.rn, x->ev_per_s, o.c,
		o.n, o.a, o.u, o.p5, o.p9, o.vw, o.vf, reps);
	pr_info("kevd-bench-csv-rdma,%s,%s,%s,%s,%llu,%s,%s,%s,%s,%s,%s,%s,%s,%u\n",
		rdma_dev, kernel, bench_mode_name[m], o.rn, x->ev_per_s, o.c,
		o.n, o.a, o.u, o.p5, o.p9, o.vw, o.vf, reps);
}

/* Every selected mode on rdma_dev: saturated, then at rdma_rate. */
static noinline_for_stack int bench_rdma_all(void)
{
	struct bench_rdma *br = bs->rdma;
	struct bench_sample *s;
	int m, ri, rep, ret = 0;

	s = kcalloc(BENCH_MAX_REPS, sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	pr_info("kevd-bench-rdma dev=%s kernel=%s depth=%u events<=%u run_ms=%u reps=%u rate=%u rate_ms=%u\n",
		rdma_dev, kernel, rdma_depth, rdma_events, run_ms, reps,
		rdma_rate, rdma_lat_ms);
	for (m = 0; m < BM_NR; m++) {
		if (!bench_selected(bench_mode_name[m]))
			continue;
		for (ri = 0; ri < 2; ri++) {
			for (rep = 0; rep < reps; rep++) {
				ret = bench_rdma_one(m, ri ? rdma_rate : 0,
						     rdma_events,
						     ri ? rdma_lat_ms : run_ms,
						     &s[rep]);
				if (ret) {
					pr_err("kevd-bench: %s on %s: error %d\n",
					       bench_mode_name[m], rdma_dev,
					       ret);
					goto out;
				}
			}
			bench_median(s, reps, &br->res[m][ri]);
			br->res[m][ri].has_lat = ri;
		}
	}
	pr_info("kevd-bench-csv-rdma,dev,kernel,mode,rate,ev_per_s,cpu_ns_per_ev,notif_per_ev,arms_per_ev,upcalls_per_ev,p50_us,p99_us,vs_wq,vs_floor,reps\n");
	for (m = 0; m < BM_NR; m++)
		for (ri = 0; ri < 2 && bench_selected(bench_mode_name[m]); ri++)
			bench_rdma_print(m, ri);
out:
	kfree(s);
	return ret;
}

static void bench_rdma_destroy(struct bench_rdma *br)
{
	if (!IS_ERR_OR_NULL(br->sink))
		ib_free_cq(br->sink);
	if (br->buf && br->dma)
		ib_dma_unmap_single(br->dev, br->dma, PAGE_SIZE,
				    DMA_BIDIRECTIONAL);
	kfree(br->buf);
	kfree(br->wrs);
	if (!IS_ERR_OR_NULL(br->pd))
		ib_dealloc_pd(br->pd);
	if (br->dev)
		ib_device_put(br->dev);
	kfree(br);
}

static int bench_rdma_create(void)
{
	struct bench_rdma *br;
	int ret = -ENOMEM;

	br = kzalloc(sizeof(*br), GFP_KERNEL);
	if (!br)
		return -ENOMEM;
	br->dev = ib_device_get_by_name(rdma_dev, RDMA_DRIVER_UNKNOWN);
	if (!br->dev) {
		pr_err("kevd-bench: no RDMA device %s\n", rdma_dev);
		kfree(br);
		return -ENODEV;
	}
	br->wrs = kcalloc(rdma_depth, sizeof(*br->wrs), GFP_KERNEL);
	br->buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	if (!br->wrs || !br->buf)
		goto fail;
	br->pd = ib_alloc_pd(br->dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(br->pd)) {
		ret = PTR_ERR(br->pd);
		goto fail;
	}
	br->dma = ib_dma_map_single(br->dev, br->buf, PAGE_SIZE,
				    DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(br->dev, br->dma)) {
		br->dma = 0;
		ret = -EIO;
		goto fail;
	}
	br->sink = ib_alloc_cq(br->dev, NULL, 2, 0, IB_POLL_DIRECT);
	if (IS_ERR(br->sink)) {
		ret = PTR_ERR(br->sink);
		goto fail;
	}
	bs->rdma = br;
	return 0;
fail:
	bench_rdma_destroy(br);
	return ret;
}

/*
 * One kevd-bench-smoke line (guest-init.sh makes a KTAP test of each):
 * ok when the run succeeded and delivered all @want events. Return: 1 on
 * failure, else 0.
 */
static int bench_smoke_result(const char *mode, const char *dev, int ret,
			      const struct bench_sample *s, u32 want)
{
	if (!ret && s->produced != want)
		ret = -EIO;
	pr_info("kevd-bench-smoke mode=%s%s%s events=%u delivered=%u %s\n",
		mode, dev ? " dev=" : "", dev ?: "", s->produced, s->delivered,
		ret ? "FAIL" : "ok");
	if (ret)
		pr_err("kevd-bench: smoke %s: error %d\n", mode, ret);
	return !!ret;
}

/* Every mode once on rdma_dev: counts only. Return: the failures. */
static int bench_rdma_smoke(void)
{
	struct bench_sample s;
	int m, ret, fails = 0;
	char name[32];

	ret = bench_rdma_create();
	if (ret) {
		pr_info("kevd-bench-smoke mode=rdma-device dev=%s FAIL\n",
			rdma_dev);
		return 1;
	}
	for (m = 0; m < BM_NR; m++) {
		memset(&s, 0, sizeof(s));
		ret = bench_rdma_one(m, 0, rdma_smoke_events, 60000, &s);
		snprintf(name, sizeof(name), "rdma-%s", bench_mode_name[m]);
		fails += bench_smoke_result(name, rdma_dev, ret, &s,
					    rdma_smoke_events);
	}
	bench_rdma_destroy(bs->rdma);
	bs->rdma = NULL;
	return fails;
}

static int bench_smoke(void)
{
	struct bench_scale *sc;
	struct bench_sample s;
	u64 cpu, fill;
	int m, ret, fails = 0;

	for (m = 0; m < BM_NR; m++) {
		memset(&s, 0, sizeof(s));
		ret = bench_one(m, 0, smoke_events, 60000, &s);
		fails += bench_smoke_result(bench_mode_name[m], NULL, ret, &s,
					    smoke_events);
	}
	/* The producer's bursts (prod_burst), under kevd-single. */
	m = prod_burst;
	prod_burst = 16;
	memset(&s, 0, sizeof(s));
	ret = bench_one(BM_KEVD_SINGLE, 0, smoke_events, 60000, &s);
	prod_burst = m;
	fails += bench_smoke_result("burst-16", NULL, ret, &s, smoke_events);
	/* 16 EVDs: the counts of the run itself */
	sc = kzalloc(sizeof(*sc), GFP_KERNEL);
	ret = sc ? bench_scale_setup(sc, 16, false) : -ENOMEM;
	ret = ret ?: bench_scale_rep(sc, 0, smoke_events, 60000);
	memset(&s, 0, sizeof(s));
	if (sc) {
		s = sc->last;
		bench_scale_teardown(sc);
	}
	kfree(sc);
	fails += bench_smoke_result("scale-16", NULL, ret, &s, smoke_events);
	memset(&s, 0, sizeof(s));
	ret = bench_drain(smoke_events, &cpu, &fill, &s);
	fails += bench_smoke_result("floor-drain", NULL, ret, &s, smoke_events);
	if (*rdma_dev)
		fails += bench_rdma_smoke();
	return fails ? -EIO : 0;
}

/*
 * One CPU: the saturated CPU cost of every mode from backlogs
 * (bench_burst()); it replaces the subtraction estimate of the saturated
 * runs. The floor keeps its tight-loop cost (bench_drain()), measured
 * again here: every round drains once and runs one backlog per mode, so
 * that the host's slow and fast phases fall on the floor and the modes
 * alike. The floor's own backlog line is printed for comparison.
 */
static noinline_for_stack int bench_all_bursts(void)
{
	u64 (*v)[BENCH_MAX_REPS], (*w)[BENCH_MAX_REPS];
	u64 fl[BENCH_MAX_REPS], fill, cpu;
	char buf[2][24];
	int m, rep, ret = -ENOMEM;

	v = kcalloc(BM_NR, sizeof(*v), GFP_KERNEL);
	w = kcalloc(BM_NR, sizeof(*w), GFP_KERNEL);
	if (!v || !w)
		goto out;
	for (rep = 0; rep < reps; rep++) {
		ret = bench_drain(drain_events, &fl[rep], &fill, NULL);
		if (ret)
			goto out;
		for (m = 0; m < BM_NR; m++) {
			if (!bench_selected(bench_mode_name[m]))
				continue;
			ret = bench_burst(m, events, &v[m][rep], &w[m][rep]);
			if (ret) {
				pr_err("kevd-bench: %s backlog: error %d\n",
				       bench_mode_name[m], ret);
				goto out;
			}
		}
	}
	bs->floor_cpu_x10 = bench_median_u64(fl, reps);
	bs->res[BM_FLOOR][0].cpu_ns_x10 = bs->floor_cpu_x10;
	pr_info("kevd-bench-floor-drain kernel=%s events=%u cpu_ns_per_ev=%s with=backlogs\n",
		kernel, drain_events,
		bench_fix(buf[0], sizeof(buf[0]), bs->floor_cpu_x10, 1));
	for (m = 0; m < BM_NR; m++) {
		if (!bench_selected(bench_mode_name[m]))
			continue;
		cpu = bench_median_u64(v[m], reps);
		if (m != BM_FLOOR)
			bs->res[m][0].cpu_ns_x10 = cpu;
		pr_info("kevd-bench-backlog kernel=%s mode=%s events=%u backlog=%u cpu_ns_per_ev=%s notif_per_ev=%s\n",
			kernel, bench_mode_name[m], events, depth,
			bench_fix(buf[0], sizeof(buf[0]), cpu, 1),
			bench_fix(buf[1], sizeof(buf[1]),
				  bench_median_u64(w[m], reps), 3));
	}
out:
	kfree(v);
	kfree(w);
	return ret;
}

/*
 * The floor's CPU cost and the producer's, from fill and drain cycles
 * (medians); the latter is subtracted from the busy time on a shared CPU.
 */
static noinline_for_stack int bench_calibrate(void)
{
	u64 v[BENCH_MAX_REPS], w[BENCH_MAX_REPS];
	char buf[24];
	int rep, ret;

	for (rep = 0; rep < reps; rep++) {
		ret = bench_drain(drain_events, &v[rep], &w[rep], NULL);
		if (ret)
			return ret;
	}
	bs->floor_cpu_x10 = bench_median_u64(v, reps);
	bs->produce_ns_x10 = bench_median_u64(w, reps);
	pr_info("kevd-bench-calib kernel=%s producer_cpu_ns_per_ev=%s subtracted=%s\n",
		kernel, bench_fix(buf, sizeof(buf), bs->produce_ns_x10, 1),
		bs->shared ? "calibrated" : "task-time");
	pr_info("kevd-bench-floor-drain kernel=%s events=%u cpu_ns_per_ev=%s with=calibration\n",
		kernel, drain_events,
		bench_fix(buf, sizeof(buf), bs->floor_cpu_x10, 1));
	return 0;
}

#define BENCH_SAMPLE(m, ri, rep) \
	(((m) * (1 + BENCH_MAX_RATES) + (ri)) * BENCH_MAX_REPS + (rep))

static int bench_all(void)
{
	struct bench_sample *s;
	struct bench_scale *sc, *scf;	/* kevd, floor */
	char buf[4][24];
	int m, ri, rep, ret, i;
	u32 rate;

	/* s[m][ri][rep]: every repetition runs every mode and rate once */
	s = kcalloc(BM_NR * (1 + BENCH_MAX_RATES) * BENCH_MAX_REPS, sizeof(*s),
		    GFP_KERNEL);
	sc = kcalloc(2 * BENCH_MAX_SCALES, sizeof(*sc), GFP_KERNEL);
	if (!s || !sc) {
		ret = -ENOMEM;
		goto fail;
	}
	scf = sc + BENCH_MAX_SCALES;

	pr_info("kevd-bench: kernel=%s cpus=%u consumer_cpu=%d producer_cpu=%d cpu_time=%s events<=%u run_ms=%u reps=%u depth=%u prod_burst=%u\n",
		kernel, num_online_cpus(), bs->ccpu, bs->pcpu,
		bs->nohz ? "nohz-idle" : "tick-kcpustat", events, run_ms, reps,
		depth, prod_burst);

	ret = bench_calibrate();
	if (ret)
		goto fail;

	/*
	 * Repetitions outermost, as in the scale test: the host's slow and
	 * fast phases fall on every mode alike, so that ratios between modes
	 * hold within the run.
	 */
	for (rep = 0; rep < reps; rep++) {
		for (m = 0; m < BM_NR; m++) {
			if (!bench_selected(bench_mode_name[m]))
				continue;
			for (ri = 0; ri <= nr_rates; ri++) {
				rate = ri ? rates[ri - 1] : 0;
				ret = bench_one(m, rate, events, run_ms,
						&s[BENCH_SAMPLE(m, ri, rep)]);
				if (ret) {
					pr_err("kevd-bench: %s rate %u: error %d\n",
					       bench_mode_name[m], rate, ret);
					goto fail;
				}
			}
		}
	}
	for (m = 0; m < BM_NR; m++) {
		if (!bench_selected(bench_mode_name[m]))
			continue;
		for (ri = 0; ri <= nr_rates; ri++) {
			rate = ri ? rates[ri - 1] : 0;
			bench_median(&s[BENCH_SAMPLE(m, ri, 0)], reps,
				     &bs->res[m][ri]);
			bs->res[m][ri].has_lat = rate && rate <= BENCH_LAT_MAX_RATE;
			pr_info("kevd-bench-progress mode=%s rate=%u ev_per_s=%llu\n",
				bench_mode_name[m], rate, bs->res[m][ri].ev_per_s);
		}
	}
	/* The floor's saturated CPU cost is the drain's (see RESULTS.md). */
	bs->res[BM_FLOOR][0].cpu_ns_x10 = bs->floor_cpu_x10;
	if (bs->shared && bs->nohz) {
		ret = bench_all_bursts();
		if (ret)
			goto fail;
	}

	pr_info("kevd-bench-table %-12s %8s %9s %9s %7s %7s %7s %8s %8s %6s %6s\n",
		"mode", "rate", "ev/s", "cpu_ns/ev", "notif", "arms",
		"upcalls", "p50_us", "p99_us", "vs_wq", "vs_fl");
	pr_info("kevd-bench-csv,kernel,mode,rate,ev_per_s,cpu_ns_per_ev,notif_per_ev,arms_per_ev,upcalls_per_ev,p50_us,p99_us,vs_wq,vs_floor,reps\n");
	for (m = 0; m < BM_NR; m++) {
		if (!bench_selected(bench_mode_name[m]))
			continue;
		for (ri = 0; ri <= nr_rates; ri++)
			bench_print_mode(m, ri, ri ? rates[ri - 1] : 0);
	}

	if (bench_selected("scale")) {
		ret = bench_scale_all(sc, nr_scale, false, reps, events, run_ms);
		ret = ret ?: bench_scale_all(scf, nr_scale, true, reps, events,
					     run_ms);
		if (ret) {
			pr_err("kevd-bench: scale: error %d\n", ret);
			goto fail;
		}
	}
	for (i = 0; i < nr_scale && bench_selected("scale"); i++) {
		bench_fix(buf[0], sizeof(buf[0]), sc[i].vs_first_x100, 2);
		bench_fix(buf[1], sizeof(buf[1]), sc[i].notif_x1000, 3);
		bench_fix(buf[2], sizeof(buf[2]), sc[i].prod_ns_x10, 1);
		bench_fix(buf[3], sizeof(buf[3]), sc[i].cpu_ns_x10, 1);
		pr_info("kevd-bench-scale kernel=%s evds=%u ev_per_s=%llu vs_first=%s notif_per_ev=%s qlen=%u mem_per_evd=%zu ring_bytes=%zu overhead=%zd producer_ns_per_ev=%s cpu_ns_per_ev=%s\n",
			kernel, sc[i].nevds, sc[i].ev_per_s, buf[0], buf[1],
			sc[i].qlen, sc[i].mem_bytes, sc[i].ring_bytes,
			(ssize_t)sc[i].mem_bytes - (ssize_t)sc[i].ring_bytes,
			buf[2], buf[3]);
		pr_info("kevd-bench-csv,%s,scale,%u,%llu,%s,%s,%u,%zu,%zu\n",
			kernel, sc[i].nevds, sc[i].ev_per_s, buf[0], buf[1],
			sc[i].qlen, sc[i].mem_bytes, sc[i].ring_bytes);
	}
	/* The same producer over plain CQs and one polling thread. */
	for (i = 0; i < nr_scale && bench_selected("scale"); i++) {
		bench_fix(buf[0], sizeof(buf[0]), scf[i].vs_first_x100, 2);
		bench_fix(buf[2], sizeof(buf[2]), scf[i].prod_ns_x10, 1);
		bench_fix(buf[3], sizeof(buf[3]), scf[i].cpu_ns_x10, 1);
		pr_info("kevd-bench-scale-floor kernel=%s cqs=%u ev_per_s=%llu vs_first=%s producer_ns_per_ev=%s cpu_ns_per_ev=%s\n",
			kernel, scf[i].nevds, scf[i].ev_per_s, buf[0], buf[2],
			buf[3]);
		pr_info("kevd-bench-csv,%s,scale-floor,%u,%llu,%s\n",
			kernel, scf[i].nevds, scf[i].ev_per_s, buf[0]);
	}
	if (*rdma_dev) {
		ret = bench_rdma_create();
		if (!ret) {
			ret = bench_rdma_all();
			bench_rdma_destroy(bs->rdma);
			bs->rdma = NULL;
		}
		if (ret)
			goto fail;
	}
	kfree(sc);
	kfree(s);
	pr_info("kevd-bench: done\n");
	return 0;
fail:
	kfree(sc);
	kfree(s);
	return ret ?: -EIO;
}

/*
 * Where the code of kevd, the fake HCA and this module lies in physical
 * memory, page by page around one function of each. UML's memory is a
 * file that the host process maps, so a profile taken on the host
 * (perf record -a) sees module code at offsets of that file, which are
 * physical addresses; with the anchors' offsets in the .ko files these
 * lines turn them back into module offsets.
 */
static void bench_print_text_map(void)
{
	const unsigned long anchors[] = {
		(unsigned long)kevd_create, (unsigned long)fake_hca_create,
		(unsigned long)bench_consume,
	};
	unsigned long page;
	int i, k;

	for (i = 0; i < ARRAY_SIZE(anchors); i++) {
		pr_info("kevd-bench-textmap anchor=%ps vaddr=0x%lx\n",
			(void *)anchors[i], anchors[i]);
		for (k = -8; k <= 8; k++) {
			page = (anchors[i] & PAGE_MASK) + k * PAGE_SIZE;
			if (!is_vmalloc_or_module_addr((void *)page) ||
			    !vmalloc_to_page((void *)page))
				continue;
			pr_info("kevd-bench-textmap vaddr=0x%lx phys=0x%llx\n",
				page,
				(u64)PFN_PHYS(vmalloc_to_pfn((void *)page)));
		}
	}
}

static int __init kevd_bench_init(void)
{
	int cpu, ret;

	if (!reps || reps > BENCH_MAX_REPS || !depth || !events ||
	    !scale_qlen || nr_scale < 1 || !drain_events || !rdma_depth ||
	    !rdma_events || !rdma_rate || !rdma_smoke_events ||
	    !prod_burst || prod_burst > BENCH_BATCH) {
		pr_err("kevd-bench: bad parameters\n");
		return -EINVAL;
	}
	for (ret = 0; ret < nr_scale; ret++)
		if (!scale[ret])
			return -EINVAL;
	bs = kzalloc(sizeof(*bs), GFP_KERNEL);
	if (!bs)
		return -ENOMEM;
	bs->cap = max3(max(events, smoke_events), drain_events,
		       max(rdma_events, rdma_smoke_events));
	bs->ts = kvcalloc(bs->cap, sizeof(*bs->ts), GFP_KERNEL);
	bs->lat = kvcalloc(bs->cap, sizeof(*bs->lat), GFP_KERNEL);
	bs->seen = kvcalloc(BITS_TO_LONGS(bs->cap), sizeof(long), GFP_KERNEL);
	if (!bs->ts || !bs->lat || !bs->seen) {
		ret = -ENOMEM;
		goto out;
	}
	bs->ccpu = cpumask_first(cpu_online_mask);
	bs->pcpu = bs->ccpu;
	for_each_online_cpu(cpu)
		if (cpu != bs->ccpu) {
			bs->pcpu = cpu;
			break;
		}
	bs->shared = bs->pcpu == bs->ccpu;
	bs->nohz = get_cpu_idle_time_us(bs->ccpu, NULL) != (u64)-1;
	if (text_map)
		bench_print_text_map();
	bs->hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	if (IS_ERR(bs->hca)) {
		ret = PTR_ERR(bs->hca);
		goto out;
	}
	bs->ibdev = fake_hca_ibdev(bs->hca);
	ret = smoke ? bench_smoke() : bench_all();
	fake_hca_destroy(bs->hca);
out:
	kvfree(bs->seen);
	kvfree(bs->lat);
	kvfree(bs->ts);
	kfree(bs);
	bs = NULL;
	return ret;
}

static void __exit kevd_bench_exit(void)
{
}

module_init(kevd_bench_init);
module_exit(kevd_bench_exit);

MODULE_DESCRIPTION("kevd benchmark: kevd against ib_core poll contexts, 2006 kDAPL and a poll loop");
MODULE_LICENSE("Dual BSD/GPL");
