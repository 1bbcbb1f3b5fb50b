/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd_bench: the same completion stream, from the fake HCA, delivered to
 * one consumer function by kevd and by what a consumer would otherwise use
 * (issue 6). It runs when it loads and prints one raw line per run
 * ("kevd-bench-raw ..."); kevd-bench-report.py, on the host, computes
 * the medians and prints the tables (tools/testing/bench/RESULTS.md).
 *
 * Modes: one struct bench_ops each (as kernel/rcu/refscale.c's
 * ref_scale_ops), listed in bench_modes[]:
 *   kevd-single   kevd, SINGLE_INSTANCE upcall (a poller thread calls it)
 *   kevd-single-wc  the same with the raw flavour (kevd_upcall.wc_func):
 *                 a poll's work completions per call, not converted
 *   kevd-wait     kevd, DISABLE; a consumer kthread calls kevd_wait() for
 *                 every event
 *   kevd-dequeue  kevd, DISABLE; the kthread waits for one event with
 *                 kevd_wait(), then takes the rest with kevd_dequeue()
 *   kevd-wait-batch, kevd-dequeue-batch
 *                 the same with the batch calls: kevd_wait_batch() for up
 *                 to 64 events, kevd_dequeue_batch() for up to 64
 *   wq, unbound-wq, softirq
 *                 ib_alloc_cq() with IB_POLL_WORKQUEUE, _UNBOUND_WORKQUEUE,
 *                 _SOFTIRQ; each completion goes to wr_cqe->done
 *   kdapl-2006    the completion handler arms, polls one CQE, converts it
 *                 and calls the consumer, and again, until the CQ is empty
 *   floor         a kthread polls the CQ in batches of 64 and converts
 *                 each CQE; no notification, no hand-off
 *
 * Files: bench_main.c (parameters, the sequence of runs, smoke),
 * bench_engine.c (producer, consumer function, a run), bench_cpu.c (CPU
 * time, backlogs, fill and drain cycles),
 * bench_kevd.c (kevd's modes, the scale test), bench_ibcore.c (ib_core's
 * poll contexts, kdapl-2006, floor), bench_rdma.c (the runs on rdma_dev).
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
 * CPU time: the busy time of all CPUs during a run (bench_busy_ns()); the
 * producer's share is subtracted on the host: its task time with two
 * CPUs; on one CPU (UML) the fill cost measured by bench_drain(), and the
 * saturated cost of each mode comes from backlogs (bench_burst()).
 *
 * Locking: no lock of its own. A run's counters are atomics; the fields
 * the producer writes before it finishes (produced, target) are published
 * with the full barriers of atomic_xchg()/atomic_inc_return() and read by
 * the main thread after the run's completion. Results are written only by
 * the loading thread.
 */
#ifndef _KEVD_BENCH_H
#define _KEVD_BENCH_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/sched.h>
#include <linux/wait.h>
#include <rdma/ib_verbs.h>
#include <kevd/kevd.h>
#include "fake_hca.h"
#include "../../../samples/kevd_rc.h"

#define BENCH_MAX_REPS		15
#define BENCH_MAX_RATES		6
#define BENCH_MAX_SCALES	6
/* The floor polls as many completions per call as kevd (KEVD_BATCH). */
#define BENCH_BATCH		64
#define BENCH_LAT_MAX_RATE	100000
/*
 * Under load, the latency of one event in 64: a clock read per event on
 * each side would cost the consumer a large share of its capacity under
 * TCG and measure the queue that builds up.
 */
#define BENCH_LOADED_LAT_SHIFT	6

/* Module parameters (bench_main.c). */
extern char *bench_kernel;
extern bool bench_smoke_mode;
extern uint bench_depth;
extern uint bench_prod_burst;
extern uint bench_reps;
extern uint bench_run_ms;
extern uint bench_scale_qlen;
extern char *bench_rdma_dev;
extern char *bench_rdma_addr;
extern ushort bench_rdma_port;
extern uint bench_rdma_depth;
extern uint bench_rdma_events;
extern uint bench_rdma_rate;
extern uint bench_rdma_lat_ms;
extern uint bench_rdma_smoke_events;

struct bench_run;

/*
 * One raw sample: what one run measured. Counters are totals of the run;
 * the host divides. @counted: notifications and arms are known.
 */
struct bench_sample {
	u32 produced;
	u32 delivered;
	u64 wall_ns;
	u64 busy_ns;		/* every CPU's busy time during the run */
	u64 prod_ns;		/* the producer thread's CPU time */
	u64 notif;
	u64 arms;
	u64 upcalls;
	u32 p50_ns;
	u32 p99_ns;
	bool counted;
	bool has_lat;
	bool ok;
};

/**
 * struct bench_ops - a delivery mode.
 * @name: its name in the output and in only=.
 * @init: make r->cq on @dev (or an EVD whose CQ it is) and, if the mode
 *	has one, its consumer thread in r->consumer (bound, not woken).
 * @cleanup: free what @init made; r->consumer was stopped.
 * @counters: add the mode's own counters to @s: consumer calls, and
 *	notifications and arms where the CQ's provider counts none.
 * @ib_cqe: completions go to wc->wr_cqe->done (ib_alloc_cq()).
 * @in_fill: the handler does the mode's work inside the producer's add
 *	(kdapl-2006): a backlog's fill time counts beyond the producer's.
 * @rdma_counted: notifications and arms are known on rdma_dev.
 */
struct bench_ops {
	const char *name;
	int (*init)(struct bench_run *r, struct ib_device *dev);
	void (*cleanup)(struct bench_run *r);
	void (*counters)(struct bench_run *r, struct bench_sample *s);
	bool ib_cqe;
	bool in_fill;
	bool rdma_counted;
};

extern const struct bench_ops bench_kevd_single_ops;
extern const struct bench_ops bench_kevd_single_wc_ops;
extern const struct bench_ops bench_kevd_wait_ops;
extern const struct bench_ops bench_kevd_dequeue_ops;
extern const struct bench_ops bench_kevd_wait_batch_ops;
extern const struct bench_ops bench_kevd_dequeue_batch_ops;
extern const struct bench_ops bench_wq_ops;
extern const struct bench_ops bench_unbound_wq_ops;
extern const struct bench_ops bench_softirq_ops;
extern const struct bench_ops bench_kdapl2006_ops;
extern const struct bench_ops bench_floor_ops;
/* Every mode, in output order; NULL-terminated. */
extern const struct bench_ops *const bench_modes[];

#define for_each_bench_mode(ops) \
	for (const struct bench_ops *const *__pp = bench_modes; \
	     ((ops) = *__pp); __pp++)

/* One run: a producer, a delivery mode, a consumer function. */
struct bench_run {
	const struct bench_ops *ops;	/* NULL: the scale test */
	u32 rate;
	bool loaded;		/* paced, with the saturated runs' bursts */
	u32 lat_shift;		/* latency of one event in 1 << lat_shift */
	u32 max_events;
	u64 limit_ns;
	u32 room;
	bool per_cq_room;
	bool rdma;		/* the CQ is fed by rdma_dev, over r->rc */
	struct ib_cq *cq;	/* the CQ of a single-CQ mode */
	struct task_struct *consumer;
	struct kevd_rc rc;
	struct ib_cq **cqs;
	u32 ncqs;
	struct kevd *evd;
	struct ib_cqe cqe;
	struct ib_wc wcs[BENCH_BATCH];	/* the producer's bursts */
	u64 *ts;
	u32 *lat;
	unsigned long *seen;
	u32 room_mask;		/* the consumer rings room_db every mask + 1 */
	/*
	 * The consumer's count, written for every event, on its own line: the
	 * producer, which reads the fields above for every burst, looks at
	 * room_db instead (bench_cq_full()).
	 */
	atomic_t delivered ____cacheline_aligned_in_smp;
	atomic_t dups;
	atomic_t bad;
	atomic_t finished;
	u32 room_db ____cacheline_aligned_in_smp;	/* delivered, lagging */
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
	struct completion done ____cacheline_aligned_in_smp;
};

struct bench_rdma;

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
	struct bench_rdma *rdma;
};

extern struct bench_state *bs;

/* bench_main.c */
bool bench_selected(const char *name);

/* bench_cpu.c */
struct bench_snap {
	u64 wall;
	u64 idle;	/* nohz: idle ns summed over the online CPUs */
	u64 busy;	/* tick accounting: non-idle ns summed */
	u32 ncpu;
};

void bench_snap(struct bench_snap *s);
u64 bench_busy_ns(const struct bench_snap *a, const struct bench_snap *b);
void bench_spin(void);
u64 bench_self_time(void);
void bench_park(void);
int bench_burst(const struct bench_ops *ops, u32 n, u32 rep);
int bench_drain(u32 n, u64 *fill_ns, u64 *drain_ns, struct bench_sample *s);

/* bench_engine.c */
void bench_finish(struct bench_run *r);
void bench_consume(struct bench_run *r, u64 seq);
void bench_consume_event(struct bench_run *r, const struct kevd_event *ev);
u32 bench_floor_poll(struct bench_run *r, struct ib_cq *cq, struct ib_wc *wcs);
int bench_consumer_thread(struct bench_run *r, int (*fn)(void *),
			  const char *name);
struct task_struct *bench_thread(int (*fn)(void *), void *data, int cpu,
				 const char *name);
void bench_run_init(struct bench_run *r, const struct bench_ops *ops,
		    u32 rate, u32 max_events, u32 ms);
int bench_go(struct bench_run *r, struct bench_sample *s);
bool bench_check(struct bench_run *r, struct bench_sample *s);
void bench_stop_consumer(struct bench_run *r);
int bench_go_one(struct bench_run *r, struct bench_sample *s);
int bench_one(const struct bench_ops *ops, u32 rate, u32 max_events, u32 ms,
	      struct bench_sample *s);
int bench_one_loaded(const struct bench_ops *ops, u32 rate, u32 max_events,
		     u32 ms, struct bench_sample *s);
int bench_add(struct bench_run *r, struct ib_cq *cq, struct ib_wc *wc, u32 seq);
u64 bench_stop_thread(struct task_struct *t);
int bench_mode_init(struct bench_run *r, struct ib_device *dev);
void bench_mode_cleanup(struct bench_run *r);
void bench_print_raw(const char *kind, const char *dev,
		     const struct bench_ops *ops, u32 rate, u32 rep,
		     const struct bench_sample *s);
void bench_print_run(const char *dev, const struct bench_ops *ops,
		     u32 rate, u32 rep, const struct bench_sample *s);

/* bench_ibcore.c */
void bench_nop_handler(struct ib_cq *cq, void *ctx);
int bench_floor_thread(void *data);

/* bench_kevd.c */
struct kevd *bench_kevd_create(struct bench_run *r, struct ib_device *dev,
			       int policy, u32 qlen, int cpu);
struct kevd *bench_kevd_create_wc(struct bench_run *r, struct ib_device *dev,
				  int policy, u32 qlen, int cpu,
				  kevd_wc_upcall_func wc_func);
int bench_scale_all(const uint *sizes, u32 nsc, bool floor, u32 nreps,
		    u32 max_events, u32 ms);
int bench_scale_smoke(u32 n, u32 max_events, struct bench_sample *s);

/* bench_rdma.c */
int bench_rdma_post(struct bench_run *r, u32 seq);
int bench_rdma_create(void);
void bench_rdma_destroy(void);
int bench_rdma_all(void);
int bench_rdma_pingpong(void);

/* bench_pingpong.c */
int bench_pingpong_all(struct ib_device *dev, struct ib_pd *pd);
int bench_pingpong_smoke(struct ib_device *dev, struct ib_pd *pd,
			 int (*result)(const char *mode, const char *dev,
				       int ret, const struct bench_sample *s,
				       u32 want));
int bench_rdma_smoke(int (*result)(const char *mode, const char *dev,
				   int ret, const struct bench_sample *s,
				   u32 want));

#endif /* _KEVD_BENCH_H */
