// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_demo: a small consumer that shows each delivery mode at work on
 * the software stream, with a producer thread posting while the consumer
 * takes events. It prints one machine-readable line per mode:
 *
 *   kevd-demo mode=single events=20000 delivered=20000 lost=0 dup=0 upcalls=...
 *
 * and fails to load (-EIO) if any event was lost or duplicated.
 */
#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <kevd/kevd.h>

static unsigned int events = 20000;
module_param(events, uint, 0444);
MODULE_PARM_DESC(events, "Events per mode (default 20000)");

struct demo {
	struct kevd *evd;
	unsigned long *seen;
	atomic_t delivered;
	atomic_t dup;
	struct completion all;
};

static void demo_take(struct demo *d, const struct kevd_event *ev)
{
	unsigned long i = (unsigned long)ev->software.pointer;

	if (i >= events || test_and_set_bit(i, d->seen))
		atomic_inc(&d->dup);
	if (atomic_inc_return(&d->delivered) == events)
		complete(&d->all);
}

static void demo_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct demo *d = ctx;
	struct kevd_event e;

	if (ev) {
		demo_take(d, ev);
		return;
	}
	/* NOTIFY: a doorbell; dequeue what is there. */
	while (!kevd_dequeue(d->evd, &e))
		demo_take(d, &e);
}

static int demo_producer(void *data)
{
	struct demo *d = data;
	unsigned long i = 0;

	while (i < events && !kthread_should_stop()) {
		if (kevd_post_se(d->evd, (void *)i))
			cond_resched();
		else
			i++;
	}
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

static const struct {
	const char *name;
	int policy;
	bool wait;
} demo_modes[] = {
	{ "dequeue", KEVD_UPCALL_DISABLE, false },
	{ "wait", KEVD_UPCALL_DISABLE, true },
	{ "single", KEVD_UPCALL_SINGLE_INSTANCE, false },
	{ "notify", KEVD_UPCALL_NOTIFY, false },
	{ "many", KEVD_UPCALL_MANY, false },
};

static int demo_run(int m)
{
	struct kevd_upcall up = { demo_upcall, NULL };
	struct task_struct *prod;
	struct kevd_attr attr;
	struct kevd_param p;
	struct kevd_event ev;
	struct demo *d;
	u32 nmore;
	int lost, ret = 0;
	u64 ns = ktime_get_ns();

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	d->seen = bitmap_zalloc(events, GFP_KERNEL);
	if (!d->seen) {
		kfree(d);
		return -ENOMEM;
	}
	init_completion(&d->all);
	up.ctx = d;
	kevd_attr_init(&attr);
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.qlen = 256;
	attr.upcall_policy = demo_modes[m].policy;
	attr.upcall = up;
	d->evd = kevd_create(NULL, &attr);
	if (IS_ERR(d->evd)) {
		ret = PTR_ERR(d->evd);
		goto out;
	}
	prod = kthread_run(demo_producer, d, "kevd_demo_prod");
	if (IS_ERR(prod)) {
		ret = PTR_ERR(prod);
		kevd_free(d->evd);
		goto out;
	}
	if (demo_modes[m].policy == KEVD_UPCALL_DISABLE) {
		while (atomic_read(&d->delivered) < events) {
			if (demo_modes[m].wait) {
				if (!kevd_wait(d->evd, 100000, 1, &ev, &nmore))
					demo_take(d, &ev);
			} else if (!kevd_dequeue(d->evd, &ev)) {
				demo_take(d, &ev);
			} else {
				cond_resched();
			}
		}
	} else {
		wait_for_completion_timeout(&d->all, 60 * HZ);
	}
	kthread_stop(prod);
	kevd_modify_upcall(d->evd, KEVD_UPCALL_TEARDOWN, NULL, 0);
	kevd_query(d->evd, &p);
	ns = ktime_get_ns() - ns;
	lost = events - bitmap_weight(d->seen, events);
	pr_info("kevd-demo mode=%s events=%u delivered=%d lost=%d dup=%d upcalls=%llu max_batch=%llu ev_per_s=%llu\n",
		demo_modes[m].name, events, atomic_read(&d->delivered), lost,
		atomic_read(&d->dup), p.stats.upcalls, p.stats.max_batch,
		div64_u64((u64)events * NSEC_PER_SEC, max_t(u64, ns, 1)));
	if (lost || atomic_read(&d->dup))
		ret = -EIO;
	kevd_free(d->evd);
out:
	bitmap_free(d->seen);
	kfree(d);
	return ret;
}

static int __init kevd_demo_init(void)
{
	int m, ret = 0;

	for (m = 0; m < ARRAY_SIZE(demo_modes); m++)
		ret = demo_run(m) ?: ret;
	return ret;
}

static void __exit kevd_demo_exit(void)
{
}

module_init(kevd_demo_init);
module_exit(kevd_demo_exit);
MODULE_DESCRIPTION("kevd demo consumer (software stream)");
MODULE_LICENSE("Dual BSD/GPL");
