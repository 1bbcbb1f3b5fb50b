// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_test.ko: kevd's KUnit suites (api_test.c, concurrency_test.c,
 * dto_test.c) and the helpers they share.
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/rcupdate.h>
#include <linux/string.h>
#include <linux/umh.h>
#include "kevd_test.h"
#include "fake_hca.h"

/**
 * kevd_test_create_on() - create a software-stream EVD freed after the test.
 * @test: the test.
 * @qlen: queue length.
 * @flags: stream flags.
 * @policy: upcall policy.
 * @upcall: upcall object, or NULL.
 * @flag: upcall flag.
 * @cpu: the CPU whose poller serves it.
 *
 * Return: the EVD; the test fails (and stops) if creation fails.
 */
struct kevd *kevd_test_create_on(struct kunit *test, u32 qlen, u32 flags,
				 int policy, const struct kevd_upcall *upcall,
				 int flag, int cpu)
{
	struct kevd_attr attr;
	struct kevd *evd;

	kevd_attr_init(&attr);
	attr.qlen = qlen;
	attr.flags = flags;
	attr.upcall_policy = policy;
	if (upcall)
		attr.upcall = *upcall;
	attr.upcall_flag = flag;
	attr.cpu = cpu;
	evd = kevd_create(NULL, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/**
 * kevd_test_dto_conn_evd() - an EVD for DTOs and connection events.
 * @test: the test.
 * @hca: set to the strict fake HCA its CQ is on (the caller destroys it
 *	after the EVD).
 *
 * Queue length 64, CQ depth 256, upcalls disabled.
 *
 * Return: the EVD.
 */
struct kevd *kevd_test_dto_conn_evd(struct kunit *test, struct fake_hca **hca)
{
	struct kevd_attr attr;
	struct kevd *evd;

	*hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, *hca);
	kevd_attr_init(&attr);
	attr.qlen = 64;
	attr.cq_depth = 256;
	attr.flags = KEVD_DTO_FLAG | KEVD_CONNECTION_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(fake_hca_ibdev(*hca), &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evd);
	return evd;
}

/* kevd_test_create_on() on CPU 0's poller. */
struct kevd *kevd_test_create(struct kunit *test, u32 qlen, u32 flags,
			      int policy, const struct kevd_upcall *upcall,
			      int flag)
{
	return kevd_test_create_on(test, qlen, flags, policy, upcall, flag, 0);
}

struct kevd_flush {
	struct completion done;
	struct task_struct *poller;
};

static void kevd_flush_upcall(void *ctx, const struct kevd_event *ev,
			      bool more)
{
	struct kevd_flush *f = ctx;

	f->poller = current;
	complete(&f->done);
}

/* A marker homed on poller @home: the poller thread that served it. */
static struct task_struct *kevd_flush_marker(struct kunit *test, int home)
{
	struct kevd_flush f = { .done = COMPLETION_INITIALIZER_ONSTACK(f.done) };
	struct kevd_upcall up = { kevd_flush_upcall, &f };
	struct kevd *marker;

	marker = kevd_test_create_on(test, 4, KEVD_SOFTWARE_FLAG,
				     KEVD_UPCALL_SINGLE_INSTANCE, &up,
				     KEVD_UPCALL_INVOC_NEW, home);
	KUNIT_ASSERT_EQ(test, kevd_post_se(marker, NULL), 0);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&f.done,
							  KEVD_TEST_WAIT), 0);
	KUNIT_ASSERT_EQ(test, kevd_free(marker), 0);
	return f.poller;
}

/**
 * kevd_test_flush_pollers() - wait until every pass queued on any poller
 * before the call has run.
 * @test: the test.
 *
 * A marker EVD is queued behind what its poller already holds (run lists
 * are FIFO), so when it is served, they were. A marker goes to its home
 * poller unless that one is inside an upcall; then to another. So markers
 * are posted, home after home, until every poller thread has served one
 * (bounded: a poller stuck in an upcall fails the test).
 */
void kevd_test_flush_pollers(struct kunit *test)
{
	unsigned int n = kevd_nr_pollers(), seen = 0, i, home = 0;
	unsigned long end = jiffies + KEVD_TEST_WAIT;
	struct task_struct **pollers, *t;

	pollers = kunit_kcalloc(test, n, sizeof(*pollers), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, pollers);
	while (seen < n) {
		KUNIT_ASSERT_FALSE_MSG(test, time_after(jiffies, end),
				       "flush: %u of %u pollers served a marker",
				       seen, n);
		t = kevd_flush_marker(test, home++ % n);
		for (i = 0; i < seen && pollers[i] != t; i++)
			;
		if (i == seen)
			pollers[seen++] = t;
	}
	kunit_kfree(test, pollers);
}

/**
 * kevd_test_wait_count() - wait (bounded) until @v reaches @target.
 * @v: a counter workers increment.
 * @target: the value.
 *
 * Return: true if reached; false when the bound ran out (a failure).
 */
bool kevd_test_wait_count(atomic_t *v, int target)
{
	return kevd_test_wait_count_for(v, target, KEVD_TEST_WAIT);
}

/**
 * kevd_test_wait_count_for() - kevd_test_wait_count() with another bound.
 * @v: a counter workers increment.
 * @target: the value.
 * @bound: jiffies to wait at most.
 *
 * Return: true if reached; false when the bound ran out (a failure).
 */
bool kevd_test_wait_count_for(atomic_t *v, int target, unsigned long bound)
{
	unsigned long end = jiffies + bound;

	while (atomic_read(v) < target) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/**
 * kevd_rec_init() - an empty recorder.
 * @r: the recorder.
 */
void kevd_rec_init(struct kevd_rec *r)
{
	memset(r, 0, sizeof(*r));
	init_completion(&r->done);
	r->done_at = -1;
}

/**
 * kevd_rec_new() - an empty recorder freed with the test.
 * @test: the test.
 *
 * Return: the recorder; the test stops if it cannot be allocated.
 */
struct kevd_rec *kevd_rec_new(struct kunit *test)
{
	struct kevd_rec *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, r);
	kevd_rec_init(r);
	return r;
}

/**
 * kevd_rec_upcall() - the recording upcall.
 * @ctx: a struct kevd_rec.
 * @ev: the event, NULL for a doorbell.
 * @more: more_events.
 *
 * Software events must carry pointers 0, 1, 2, ... in order.
 */
void kevd_rec_upcall(void *ctx, const struct kevd_event *ev, bool more)
{
	struct kevd_rec *r = ctx;
	int in = atomic_inc_return(&r->inside);
	int max = atomic_read(&r->max_inside);
	int calls;

	while (in > max && !atomic_try_cmpxchg(&r->max_inside, &max, in))
		;
	if (!ev) {
		atomic_inc(&r->doorbells);
	} else if (ev->event_number == KEVD_SOFTWARE_EVENT) {
		if ((u64)(uintptr_t)ev->software.pointer != r->next)
			atomic_inc(&r->errors);
		r->next = (u64)(uintptr_t)ev->software.pointer + 1;
		if (!more)
			atomic_inc(&r->last_more_false);
	}
	if (r->action == KEVD_REC_TEARDOWN_INSIDE)
		r->rc = kevd_modify_upcall(r->evd, KEVD_UPCALL_TEARDOWN,
					   NULL, KEVD_UPCALL_INVOC_NEW);
	else if (r->action == KEVD_REC_FREE_INSIDE)
		r->rc = kevd_free(r->evd);
	r->action = KEVD_REC_NONE;
	atomic_dec(&r->inside);
	calls = atomic_inc_return(&r->calls);
	if (calls == r->done_at)
		complete(&r->done);
}

MODULE_DESCRIPTION("kevd KUnit tests");
MODULE_LICENSE("Dual BSD/GPL");

/**
 * kevd_test_sh() - run a shell command in user space and wait for it.
 * @cmd: the command, for /bin/sh -c.
 *
 * For files the kernel cannot read or write itself (seq_file and tracefs
 * files have no read_iter/write_iter): the shell copies them to a regular
 * file, which kevd_test_read_file() reads.
 *
 * Return: the command's exit status (0 for success) or a negative errno.
 */
int kevd_test_sh(const char *cmd)
{
	char **envp = (char *[]){ "HOME=/",
				  "PATH=/sbin:/bin:/usr/sbin:/usr/bin", NULL };
	char **argv = (char *[]){ "/bin/sh", "-c", (char *)cmd, NULL };

	return call_usermodehelper(argv[0], argv, envp, UMH_WAIT_PROC);
}

/**
 * kevd_test_read_file() - a regular file's text, NUL-terminated.
 * @path: the file (tmpfs or devtmpfs).
 * @max: read at most this many bytes.
 *
 * Return: a kvmalloc()ed buffer (kvfree() it), or NULL.
 */
char *kevd_test_read_file(const char *path, size_t max)
{
	char *buf = kvzalloc(max + 1, GFP_KERNEL);
	struct file *f;
	loff_t pos = 0;
	size_t have = 0;
	ssize_t n;

	if (!buf)
		return NULL;
	f = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(f)) {
		kvfree(buf);
		return NULL;
	}
	while (have < max &&
	       (n = kernel_read(f, buf + have, max - have, &pos)) > 0)
		have += n;
	filp_close(f, NULL);
	return buf;
}

/**
 * kevd_test_module_refs() - a module's reference count, from sysfs.
 * @name: the module.
 *
 * After the RCU callbacks queued so far (kevd frees EVDs in them).
 *
 * Return: /sys/module/@name/refcnt, or -errno.
 */
int kevd_test_module_refs(const char *name)
{
	char path[64];
	char *text;
	int refs, ret;

	rcu_barrier();
	snprintf(path, sizeof(path), "/sys/module/%s/refcnt", name);
	text = kevd_test_read_file(path, 32);
	if (!text)
		return -ENOENT;
	ret = kstrtoint(strim(text), 10, &refs);
	kvfree(text);
	return ret ?: refs;
}
EXPORT_SYMBOL_GPL(kevd_test_module_refs);

/**
 * kevd_test_part_next() - the next part of a stress split in parts.
 * @prev: the part before (NULL: the first).
 * @storage: the parts, as many per element of @array.
 * @n: their number.
 * @array: the suite's parameter array.
 * @count: its elements.
 * @size: the size of one.
 *
 * KEVD_TEST_PARTS_PARAM()'s generator; the parts of an element follow
 * each other.
 *
 * Return: the part, or NULL after the last.
 */
const struct kevd_test_part *
kevd_test_part_next(const struct kevd_test_part *prev,
		    struct kevd_test_part *storage, size_t n,
		    const void *array, size_t count, size_t size)
{
	unsigned int nparts = n / count;
	size_t i = prev ? prev - storage + 1 : 0;

	if (i >= n)
		return NULL;
	storage[i].param = (const char *)array + i / nparts * size;
	storage[i].part = i % nparts + 1;
	storage[i].parts = nparts;
	return &storage[i];
}

/**
 * kevd_test_part_desc() - append "_part<N>" to a case's name.
 * @p: the part.
 * @desc: the name, KUNIT_PARAM_DESC_SIZE bytes.
 */
void kevd_test_part_desc(const struct kevd_test_part *p, char *desc)
{
	size_t len = strnlen(desc, KUNIT_PARAM_DESC_SIZE - 1);

	snprintf(desc + len, KUNIT_PARAM_DESC_SIZE - len, "_part%u", p->part);
}

/**
 * kevd_test_waiting() - wait (bounded) until a thread waits in kevd_wait().
 * @evd: the EVD.
 *
 * Return: true once kevd_query() shows KEVD_STATE_WAITED (or fails);
 * false if the bound ran out.
 */
bool kevd_test_waiting(struct kevd *evd)
{
	unsigned long end = jiffies + KEVD_TEST_WAIT;
	struct kevd_param p;

	while (!kevd_query(evd, &p) && !(p.state & KEVD_STATE_WAITED)) {
		if (time_after(jiffies, end))
			return false;
		schedule_timeout_uninterruptible(1);
	}
	return true;
}

/**
 * kevd_test_waiter_fn() - a thread in one kevd_wait().
 * @data: its struct kevd_test_waiter.
 *
 * Return: 0, once stopped.
 */
int kevd_test_waiter_fn(void *data)
{
	struct kevd_test_waiter *w = data;
	u32 nmore;

	allow_signal(SIGUSR1);
	w->rc = kevd_wait(w->evd, w->timeout_us, w->threshold, &w->ev, &nmore);
	complete(&w->done);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}
