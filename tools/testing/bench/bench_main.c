// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_bench: parameters, the sequence of runs and the smoke test. Every
 * run prints one raw line ("kevd-bench-raw ..."), each section ends with
 * "kevd-bench-raw end=<section>"; tools/testing/bench/kevd-bench-report.py
 * turns them into the medians, tables and CSV. See bench.h.
 */
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/tick.h>
#include <linux/vmalloc.h>
#include "bench.h"

char *bench_kernel = "unknown";
module_param_named(kernel, bench_kernel, charp, 0444);
MODULE_PARM_DESC(kernel, "label of the kernel in the output (smp, uml)");

bool bench_smoke_mode;
module_param_named(smoke, bench_smoke_mode, bool, 0444);
MODULE_PARM_DESC(smoke, "a short functional run: counts only, no timings");

static uint smoke_events = 4000;
module_param(smoke_events, uint, 0444);
MODULE_PARM_DESC(smoke_events, "events per mode in smoke mode");

static uint events = 400000;
module_param(events, uint, 0444);
MODULE_PARM_DESC(events, "at most this many events per run");

uint bench_run_ms = 400;
module_param_named(run_ms, bench_run_ms, uint, 0444);
MODULE_PARM_DESC(run_ms, "the producer stops after this many ms");

uint bench_reps = 5;
module_param_named(reps, bench_reps, uint, 0444);
MODULE_PARM_DESC(reps, "repetitions of each run (the host takes medians)");

uint bench_depth = 1024;
module_param_named(depth, bench_depth, uint, 0444);
MODULE_PARM_DESC(depth, "CQ depth and EVD queue length; events in flight");

static uint rates[BENCH_MAX_RATES] = { 10000, 100000, 1000000 };
static int nr_rates = 3;
module_param_array(rates, uint, &nr_rates, 0444);
MODULE_PARM_DESC(rates, "fixed producer rates (events/s); the first gives the latency");

static uint load_pct = 50;
module_param(load_pct, uint, 0444);
MODULE_PARM_DESC(load_pct, "the latency run under load: this percentage of each mode's saturated rate in the same repetition (1..99; 0: none)");

static uint scale[BENCH_MAX_SCALES] = { 1, 16, 256, 4096 };
static int nr_scale = 4;
module_param_array(scale, uint, &nr_scale, 0444);
MODULE_PARM_DESC(scale, "numbers of EVDs sharing the pollers");

uint bench_scale_qlen = 128;
module_param_named(scale_qlen, bench_scale_qlen, uint, 0444);
MODULE_PARM_DESC(scale_qlen, "queue length (and CQ depth) of the scale test's EVDs");

static bool text_map;
module_param(text_map, bool, 0444);
MODULE_PARM_DESC(text_map, "print the physical pages of the modules' code (for a host-side profile of UML)");

static bool saturated_only;
module_param(saturated_only, bool, 0444);
MODULE_PARM_DESC(saturated_only, "only the saturated runs of the modes (for a profile): no calibration, fixed rates, load, backlogs or scale");

static char *only = "";
module_param(only, charp, 0444);
MODULE_PARM_DESC(only, "run only these modes (comma-separated names; scale for the scale test); empty: all");

char *bench_rdma_dev = "";
module_param_named(rdma_dev, bench_rdma_dev, charp, 0444);
MODULE_PARM_DESC(rdma_dev, "a real RDMA device (siw0) for runs over a loopback RC connection; empty: none");

char *bench_rdma_addr = "fe80::2";
module_param_named(rdma_addr, bench_rdma_addr, charp, 0444);
MODULE_PARM_DESC(rdma_addr, "IPv6 address of rdma_dev's netdev, for rdma_cm (iWARP)");

ushort bench_rdma_port = 18600;
module_param_named(rdma_port, bench_rdma_port, ushort, 0444);
MODULE_PARM_DESC(rdma_port, "TCP port of the loopback connection (iWARP)");

uint bench_rdma_depth = 128;
module_param_named(rdma_depth, bench_rdma_depth, uint, 0444);
MODULE_PARM_DESC(rdma_depth, "work requests in flight on rdma_dev (send queue and CQ depth)");

uint bench_rdma_events = 50000;
module_param_named(rdma_events, bench_rdma_events, uint, 0444);
MODULE_PARM_DESC(rdma_events, "at most this many events per run on rdma_dev");

uint bench_rdma_rate = 200;
module_param_named(rdma_rate, bench_rdma_rate, uint, 0444);
MODULE_PARM_DESC(rdma_rate, "fixed rate of the latency run on rdma_dev (events/s)");

uint bench_rdma_lat_ms = 2000;
module_param_named(rdma_lat_ms, bench_rdma_lat_ms, uint, 0444);
MODULE_PARM_DESC(rdma_lat_ms, "length of the latency run on rdma_dev (ms)");

uint bench_rdma_smoke_events = 200;
module_param_named(rdma_smoke_events, bench_rdma_smoke_events, uint, 0444);
MODULE_PARM_DESC(rdma_smoke_events, "events per mode on rdma_dev in smoke mode");

uint bench_prod_burst = 1;
module_param_named(prod_burst, bench_prod_burst, uint, 0444);
MODULE_PARM_DESC(prod_burst, "CQEs the producer adds per call in saturated runs on one fake CQ (1..64: an HCA writing several CQEs before its interrupt)");

static uint drain_events = 524288;
module_param(drain_events, uint, 0444);
MODULE_PARM_DESC(drain_events, "CQEs of the floor's pre-filled drain (its CPU cost)");

const struct bench_ops *const bench_modes[] = {
	&bench_kevd_single_ops,
	&bench_kevd_single_wc_ops,
	&bench_kevd_wait_ops,
	&bench_kevd_dequeue_ops,
	&bench_kevd_wait_batch_ops,
	&bench_kevd_dequeue_batch_ops,
	&bench_wq_ops,
	&bench_unbound_wq_ops,
	&bench_softirq_ops,
	&bench_kdapl2006_ops,
	&bench_floor_ops,
	NULL,
};

struct bench_state *bs;

/* Is @name in the only= list (or is the list empty)? */
bool bench_selected(const char *name)
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

/*
 * Fill and drain cycles on the consumer CPU (bench_drain()): the floor's
 * CPU cost and the producer's, which the host subtracts from the busy
 * time on a shared CPU.
 */
static int bench_drain_rep(const char *with, u32 rep)
{
	u64 fill, drain;
	int ret;

	ret = bench_drain(drain_events, &fill, &drain, NULL);
	if (!ret)
		pr_info("kevd-bench-raw drain with=%s rep=%u events=%u fill_ns=%llu drain_ns=%llu\n",
			with, rep, drain_events, fill, drain);
	return ret;
}

/*
 * One CPU: the saturated CPU cost of every mode from backlogs
 * (bench_burst()); it replaces the subtraction estimate of the saturated
 * runs. The floor keeps its tight-loop cost (bench_drain()), measured
 * again here: every round drains once and runs one backlog per mode, so
 * that the host's slow and fast phases fall on the floor and the modes
 * alike. The floor's own backlog line is printed for comparison.
 */
static int bench_all_bursts(void)
{
	const struct bench_ops *ops;
	int rep, ret;

	for (rep = 0; rep < bench_reps; rep++) {
		ret = bench_drain_rep("backlogs", rep);
		if (ret)
			return ret;
		for_each_bench_mode(ops) {
			if (!bench_selected(ops->name))
				continue;
			ret = bench_burst(ops, events, rep);
			if (ret) {
				pr_err("kevd-bench: %s backlog: error %d\n",
				       ops->name, ret);
				return ret;
			}
		}
	}
	return 0;
}

/* load_pct of the saturated rate of run @s, in events/s. */
static u32 bench_load_rate(const struct bench_sample *s)
{
	u64 sat = div64_u64((u64)s->produced * NSEC_PER_SEC,
			    max_t(u64, s->wall_ns, 1));

	return (u32)min_t(u64, div_u64(sat * load_pct, 100), U32_MAX);
}

/*
 * The latency under load: a run paced at @rate (load_pct of the mode's
 * saturated rate in this repetition) with the saturated run's bursts.
 */
static int bench_loaded(const struct bench_ops *ops, u32 rate, u32 rep)
{
	struct bench_sample s;
	int ret;

	if (!load_pct || !rate)
		return 0;
	ret = bench_one_loaded(ops, rate, events, bench_run_ms, &s);
	if (ret) {
		pr_err("kevd-bench: %s under load (%u/s): error %d\n",
		       ops->name, rate, ret);
		return ret;
	}
	bench_print_raw("loaded", NULL, ops, rate, rep, &s);
	return 0;
}

static int bench_all(void)
{
	const struct bench_ops *ops;
	struct bench_sample s;
	u32 rate, loaded = 0;
	int ri, rep, ret;

	pr_info("kevd-bench: kernel=%s cpus=%u consumer_cpu=%d producer_cpu=%d cpu_time=%s events<=%u run_ms=%u reps=%u depth=%u prod_burst=%u\n",
		bench_kernel, num_online_cpus(), bs->ccpu, bs->pcpu,
		bs->nohz ? "nohz-idle" : "tick-kcpustat", events, bench_run_ms,
		bench_reps, bench_depth, bench_prod_burst);
	pr_info("kevd-bench-raw config kernel=%s shared=%d nohz=%d reps=%u events=%u depth=%u load_pct=%u\n",
		bench_kernel, bs->shared, bs->nohz, bench_reps, events,
		bench_depth, load_pct);

	for (rep = 0; rep < bench_reps && !saturated_only; rep++) {
		ret = bench_drain_rep("calibration", rep);
		if (ret)
			return ret;
	}
	pr_info("kevd-bench-raw end=calib\n");

	/*
	 * Repetitions outermost, as in the scale test: the host's slow and
	 * fast phases fall on every mode alike, so that ratios between modes
	 * hold within the run.
	 */
	for (rep = 0; rep < bench_reps; rep++) {
		for_each_bench_mode(ops) {
			if (!bench_selected(ops->name))
				continue;
			for (ri = 0; ri <= (saturated_only ? 0 : nr_rates); ri++) {
				rate = ri ? rates[ri - 1] : 0;
				ret = bench_one(ops, rate, events, bench_run_ms,
						&s);
				if (ret) {
					pr_err("kevd-bench: %s rate %u: error %d\n",
					       ops->name, rate, ret);
					return ret;
				}
				bench_print_run(NULL, ops, rate, rep, &s);
				if (!ri)
					loaded = bench_load_rate(&s);
			}
			ret = saturated_only ? 0 :
			      bench_loaded(ops, loaded, rep);
			if (ret)
				return ret;
		}
	}
	if (saturated_only) {
		pr_info("kevd-bench: done\n");
		return 0;
	}
	if (bs->shared && bs->nohz) {
		ret = bench_all_bursts();
		if (ret)
			return ret;
	}
	pr_info("kevd-bench-raw end=modes\n");

	if (bench_selected("scale")) {
		ret = bench_scale_all(scale, nr_scale, false, bench_reps,
				      events, bench_run_ms);
		ret = ret ?: bench_scale_all(scale, nr_scale, true, bench_reps,
					     events, bench_run_ms);
		if (ret) {
			pr_err("kevd-bench: scale: error %d\n", ret);
			return ret;
		}
		pr_info("kevd-bench-raw end=scale\n");
	}
	if (*bench_rdma_dev) {
		ret = bench_rdma_create();
		if (!ret) {
			ret = bench_rdma_all();
			if (!ret && bench_selected("pingpong"))
				ret = bench_rdma_pingpong();
			bench_rdma_destroy();
		}
		if (ret)
			return ret;
	}
	pr_info("kevd-bench: done\n");
	return 0;
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

static int bench_smoke(void)
{
	const struct bench_ops *ops;
	struct bench_sample s;
	u64 fill, drain;
	int ret, fails = 0;
	uint burst;

	for_each_bench_mode(ops) {
		memset(&s, 0, sizeof(s));
		ret = bench_one(ops, 0, smoke_events, 60000, &s);
		fails += bench_smoke_result(ops->name, NULL, ret, &s,
					    smoke_events);
	}
	/* The producer's bursts (prod_burst), under kevd-single. */
	burst = bench_prod_burst;
	bench_prod_burst = 16;
	memset(&s, 0, sizeof(s));
	ret = bench_one(&bench_kevd_single_ops, 0, smoke_events, 60000, &s);
	bench_prod_burst = burst;
	fails += bench_smoke_result("burst-16", NULL, ret, &s, smoke_events);
	/* 16 EVDs: the counts of the run itself */
	ret = bench_scale_smoke(16, smoke_events, &s);
	fails += bench_smoke_result("scale-16", NULL, ret, &s, smoke_events);
	memset(&s, 0, sizeof(s));
	ret = bench_drain(smoke_events, &fill, &drain, &s);
	fails += bench_smoke_result("floor-drain", NULL, ret, &s, smoke_events);
	if (*bench_rdma_dev)
		fails += bench_rdma_smoke(bench_smoke_result);
	return fails ? -EIO : 0;
}

/*
 * Where the code of kevd, the fake HCA and this module lies in physical
 * memory, page by page around one function of each. UML's memory is a
 * file that the host process maps, so a profile taken on the host
 * (perf record -a) sees module code at offsets of that file, which are
 * physical addresses; with the anchors' offsets in the .ko files these
 * lines turn them back into module offsets (uml-profile.py).
 */
static void bench_print_text_map(void)
{
	const unsigned long anchors[] = {
		(unsigned long)__kevd_create, (unsigned long)fake_hca_create,
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

	if (!bench_reps || bench_reps > BENCH_MAX_REPS || !bench_depth ||
	    !events || !bench_scale_qlen || nr_scale < 1 || !drain_events ||
	    !bench_rdma_depth || !bench_rdma_events || !bench_rdma_rate ||
	    !bench_rdma_smoke_events || !bench_prod_burst ||
	    bench_prod_burst > BENCH_BATCH || load_pct > 99) {
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
		       max(bench_rdma_events, bench_rdma_smoke_events));
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
	ret = bench_smoke_mode ? bench_smoke() : bench_all();
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
