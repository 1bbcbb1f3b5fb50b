// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench's engine: the consumer function every mode calls, the
 * producer, and a run of a mode (struct bench_ops) from start to the raw
 * line it prints. See bench.h.
 */
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include "bench.h"

/* ------------------------------------------------------------------ */
/* The consumer function, the same for every mode                      */

void bench_finish(struct bench_run *r)
{
	if (!atomic_xchg(&r->finished, 1)) {
		r->t_end = ktime_get_ns();
		complete(&r->done);
	}
}

void bench_consume(struct bench_run *r, u64 seq)
{
	u32 n;

	if (unlikely(seq >= r->max_events)) {
		atomic_inc(&r->bad);
		return;
	}
	if (test_and_set_bit(seq, r->seen))
		atomic_inc(&r->dups);
	if (r->lat && !(seq & (BIT(r->lat_shift) - 1))) {
		u32 k = seq >> r->lat_shift;

		r->lat[k] = min_t(u64, ktime_get_ns() - r->ts[k], U32_MAX);
	}
	n = atomic_inc_return(&r->delivered);
	if (!(n & r->room_mask))
		WRITE_ONCE(r->room_db, n);
	if (n == READ_ONCE(r->target))
		bench_finish(r);
	else if (unlikely(READ_ONCE(r->prod_waits)) &&
		 n == READ_ONCE(r->wake_at))
		wake_up(&r->prod_wq);
}

/* kevd's event: a DTO completion with success, or a bad event */
void bench_consume_event(struct bench_run *r, const struct kevd_event *ev)
{
	if (unlikely(ev->event_number != KEVD_DTO_COMPLETION_EVENT ||
		     ev->dto.status != KEVD_DTO_SUCCESS)) {
		atomic_inc(&r->bad);
		return;
	}
	bench_consume(r, ev->dto.cookie);
}

/* Poll up to a batch, convert, consume; the floor's and the drain's step. */
u32 bench_floor_poll(struct bench_run *r, struct ib_cq *cq, struct ib_wc *wcs)
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

/* ------------------------------------------------------------------ */
/* The producer                                                        */

/* Completion @seq: its cookie, and its timestamp when latency is taken. */
static void bench_fill_wc(struct bench_run *r, struct ib_wc *wc, u32 seq)
{
	if (r->ops && r->ops->ib_cqe)
		wc->wr_cqe = &r->cqe;
	else
		wc->wr_id = seq;
	wc->byte_len = seq;
	if (r->lat && !(seq & (BIT(r->lat_shift) - 1)))
		r->ts[seq >> r->lat_shift] = ktime_get_ns();
}

/*
 * Add the CQE of sequence number @seq to @cq, as the consumer function
 * expects it (wr_cqe for the ib_core modes, else wr_id; seq in byte_len),
 * stamping it in latency runs. @wc is the caller's, initialised once.
 */
int bench_add(struct bench_run *r, struct ib_cq *cq, struct ib_wc *wc, u32 seq)
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
 * Two CPUs, events in flight at the limit: spin BENCH_ROOM_SPINS times
 * longer than a pause before the next look at the consumer's doorbell
 * (bench_cq_full()). Every look pulls the doorbell's cache line, which
 * the consumer writes again soon: looked at after each short pause, it
 * cost a consumer held back by its room a cache miss per look, which a
 * faster consumer that is rarely held back (ib_core's wq) did not pay.
 * An HCA does not read its consumer's memory to find room. The room is
 * the CQ's depth, so a producer a few microseconds late to see some still
 * has most of it full.
 */
#define BENCH_ROOM_SPINS	16

static bool bench_wait_room_spin(struct bench_run *r, u64 now)
{
	int i;

	if (!bs->shared)
		for (i = 1; i < BENCH_ROOM_SPINS; i++)
			bench_spin();
	return bench_pause(r, now, now);
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

/*
 * Is there room for event @i? With one CQ, the room is what the consumer
 * has taken: its doorbell r->room_db (bench_consume()), which lags its
 * count by at most r->room_mask and sits on a line of its own, so that
 * the producer's looks do not take the line the consumer writes for
 * every event, as a doorbell record spares an HCA the consumer's memory.
 */
static bool bench_cq_full(struct bench_run *r, struct ib_cq *cq, u32 i,
			  u32 *seen_delivered)
{
	if (r->per_cq_room)
		return fake_cq_count(cq) >= r->room;
	if (i - *seen_delivered < r->room)
		return false;
	*seen_delivered = READ_ONCE(r->room_db);
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

	/*
	 * Before the first event: the consumer rings the doorbell every
	 * 1/32 of the room or so (at most 32 events), so a full room always
	 * sees the doorbell move before it drains (room > burst + mask).
	 */
	r->room_mask = rounddown_pow_of_two(clamp_val(r->room / 32, 1, 32)) - 1;
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
		if ((!r->rate || r->loaded) && r->ncqs == 1 && !r->rdma)
			n = min(bench_prod_burst, r->max_events - i);
		/* Room for the burst: its last CQE counts. */
		if (bench_cq_full(r, cq, i + n - 1, &seen_delivered)) {
			if (bs->shared && !r->per_cq_room)
				go = bench_wait_room(r, i);
			else
				go = bench_wait_room_spin(r, now);
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

struct task_struct *bench_thread(int (*fn)(void *), void *data, int cpu,
				 const char *name)
{
	struct task_struct *t;

	t = kthread_create(fn, data, "%s", name);
	if (IS_ERR(t))
		return t;
	kthread_bind(t, cpu);
	get_task_struct(t);
	return t;
}

/* A mode's consumer thread on the consumer CPU, in r->consumer. */
int bench_consumer_thread(struct bench_run *r, int (*fn)(void *),
			  const char *name)
{
	struct task_struct *t = bench_thread(fn, r, bs->ccpu, name);

	if (IS_ERR(t))
		return PTR_ERR(t);
	r->consumer = t;
	return 0;
}

/*
 * Stop a thread and return its CPU time: exact (sum_exec_runtime) when
 * the busy time is exact (nohz idle accounting), else its tick-sampled
 * utime + stime, so that it is sampled by the same ticks as kcpustat.
 */
u64 bench_stop_thread(struct task_struct *t)
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

static int cmp_u32(const void *a, const void *b)
{
	u32 x = *(const u32 *)a, y = *(const u32 *)b;

	return x < y ? -1 : x > y;
}

void bench_run_init(struct bench_run *r, const struct bench_ops *ops,
		    u32 rate, u32 max_events, u32 ms)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->rate = rate;
	r->max_events = min(max_events, bs->cap);
	r->limit_ns = (u64)ms * NSEC_PER_MSEC;
	r->room = bench_depth;
	r->seen = bs->seen;
	r->ts = bs->ts;
	if (rate && rate <= BENCH_LAT_MAX_RATE)
		r->lat = bs->lat;
	r->target = U32_MAX;
	init_completion(&r->done);
	init_waitqueue_head(&r->prod_wq);
	bitmap_zero(r->seen, r->max_events);
}

/*
 * Run the producer against r->cqs[0 .. ncqs) and wait for delivery; the
 * consumer thread, if any, is started first. @s: the raw times.
 */
int bench_go(struct bench_run *r, struct bench_sample *s)
{
	struct bench_snap a, b;
	struct task_struct *prod;
	unsigned long tmo;
	u64 prod_rt;
	int ret = 0;

	prod = bench_thread(bench_producer, r, bs->pcpu, "kevd_bench_prod");
	if (IS_ERR(prod))
		return PTR_ERR(prod);
	bench_snap(&a);
	if (r->consumer)
		wake_up_process(r->consumer);
	wake_up_process(prod);
	tmo = msecs_to_jiffies(r->limit_ns / NSEC_PER_MSEC + 60000);
	if (!wait_for_completion_timeout(&r->done, tmo)) {
		pr_err("kevd-bench: %s: timeout: produced %u delivered %u\n",
		       r->ops ? r->ops->name : "scale",
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
	s->wall_ns = r->t_end - r->t_start;
	s->busy_ns = bench_busy_ns(&a, &b);
	s->prod_ns = prod_rt;
	return 0;
}

static void bench_latency(struct bench_run *r, struct bench_sample *s)
{
	/* the stamped events: seq 0, 1 << lat_shift, ... below produced */
	u32 n = (s->produced + BIT(r->lat_shift) - 1) >> r->lat_shift;

	if (!r->lat || !n)
		return;
	sort(r->lat, n, sizeof(u32), cmp_u32, NULL);
	s->p50_ns = r->lat[n / 2];
	s->p99_ns = r->lat[min(n - 1, (u32)div_u64((u64)n * 99, 100))];
	s->has_lat = true;
}

bool bench_check(struct bench_run *r, struct bench_sample *s)
{
	s->ok = s->produced && s->delivered == s->produced &&
		!atomic_read(&r->dups) && !atomic_read(&r->bad) &&
		bitmap_full(r->seen, s->produced);
	return s->ok;
}

/* Notifications and arms the fake HCA counted, then the mode's own. */
static void bench_counters(struct bench_run *r, struct bench_sample *s)
{
	struct fake_cq_stats st;
	u32 i;

	s->counted = !r->rdma || r->ops->rdma_counted;
	for (i = 0; i < r->ncqs && !r->rdma; i++) {
		fake_cq_stats(r->cqs[i], &st);
		s->notif += st.notifications;
		s->arms += st.arms;
	}
	if (r->ops->counters)
		r->ops->counters(r, s);
}

/* Stop a run's consumer thread, waking it if it waits in kevd_wait(). */
void bench_stop_consumer(struct bench_run *r)
{
	WRITE_ONCE(r->stop, true);
	if (!r->consumer)
		return;
	if (r->evd)
		kevd_set_unwaitable(r->evd, true);
	bench_stop_thread(r->consumer);
	r->consumer = NULL;
}

/*
 * Run the producer against the one CQ r->cq, stop the consumer, and take
 * the sample's counters and latency; -EIO if an event was lost, repeated
 * or bad.
 */
int bench_go_one(struct bench_run *r, struct bench_sample *s)
{
	int ret;

	r->cqs = &r->cq;
	r->ncqs = 1;
	ret = bench_go(r, s);
	bench_stop_consumer(r);
	if (ret)
		return ret;
	bench_counters(r, s);
	bench_latency(r, s);
	return bench_check(r, s) ? 0 : -EIO;
}

/* Make a mode's CQ and consumer on @dev; undone by bench_mode_cleanup(). */
int bench_mode_init(struct bench_run *r, struct ib_device *dev)
{
	int ret = r->ops->init(r, dev);

	if (!ret && !r->rdma && r->cq)
		fake_cq_set_irq_cpu(r->cq, bs->ccpu);
	return ret;
}

/* Stop the consumer thread, free what bench_mode_init() made. */
void bench_mode_cleanup(struct bench_run *r)
{
	bench_stop_consumer(r);
	r->ops->cleanup(r);
}

static int __bench_one(const struct bench_ops *ops, u32 rate, bool loaded,
		       u32 max_events, u32 ms, struct bench_sample *s)
{
	struct bench_run *r;
	int ret;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	bench_run_init(r, ops, rate, max_events, ms);
	if (loaded) {
		r->loaded = true;
		r->lat = bs->lat;
		r->lat_shift = BENCH_LOADED_LAT_SHIFT;
	}
	ret = bench_mode_init(r, bs->ibdev);
	if (!ret)
		ret = bench_go_one(r, s);
	bench_mode_cleanup(r);
	kfree(r);
	return ret;
}

/* One run of a single-CQ mode on the fake HCA. */
int bench_one(const struct bench_ops *ops, u32 rate, u32 max_events, u32 ms,
	      struct bench_sample *s)
{
	return __bench_one(ops, rate, false, max_events, ms, s);
}

/*
 * A run under load: the producer of the saturated run (bursts of
 * prod_burst), paced at @rate, with the latency of one event in
 * 1 << BENCH_LOADED_LAT_SHIFT whatever the rate.
 */
int bench_one_loaded(const struct bench_ops *ops, u32 rate, u32 max_events,
		     u32 ms, struct bench_sample *s)
{
	return __bench_one(ops, rate, true, max_events, ms, s);
}

/* A value of a raw line, or "na" when it is not known. */
static const char *bench_na(char *buf, size_t len, u64 v, bool known)
{
	if (known)
		snprintf(buf, len, "%llu", v);
	else
		strscpy(buf, "na", len);
	return buf;
}

/*
 * The raw line of one run, of @kind "run" (saturated or at a fixed rate)
 * or "loaded" (bench_one_loaded()); @dev: rdma_dev's runs. The host
 * reads it.
 */
void bench_print_raw(const char *kind, const char *dev,
		     const struct bench_ops *ops, u32 rate, u32 rep,
		     const struct bench_sample *s)
{
	char n[24], a[24], p5[24], p9[24];

	pr_info("kevd-bench-raw %s %s%s%smode=%s rate=%u rep=%u events=%u delivered=%u wall_ns=%llu busy_ns=%llu prod_ns=%llu notif=%s arms=%s upcalls=%llu p50_ns=%s p99_ns=%s\n",
		kind, dev ? "dev=" : "", dev ?: "", dev ? " " : "", ops->name,
		rate, rep, s->produced, s->delivered, s->wall_ns, s->busy_ns,
		s->prod_ns, bench_na(n, sizeof(n), s->notif, s->counted),
		bench_na(a, sizeof(a), s->arms, s->counted), s->upcalls,
		bench_na(p5, sizeof(p5), s->p50_ns, s->has_lat),
		bench_na(p9, sizeof(p9), s->p99_ns, s->has_lat));
}

void bench_print_run(const char *dev, const struct bench_ops *ops, u32 rate,
		     u32 rep, const struct bench_sample *s)
{
	bench_print_raw("run", dev, ops, rate, rep, s);
}
