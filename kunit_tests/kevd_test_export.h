/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the consumer suite uses beyond include/kevd/kevd.h and the fake
 * HCA: kevd.ko's export for its own tests, and the helpers of kevd_test.ko
 * that need no internal header (kunit_tests/kevd_test_main.c). The other
 * suites use them too (kevd_test.h).
 */
#ifndef _KEVD_TEST_EXPORT_H
#define _KEVD_TEST_EXPORT_H

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/string.h>
#include <kevd/kevd.h>

/* The number of poller threads (evd/poller.c). */
unsigned int kevd_nr_pollers(void);
unsigned int kevd_nr_evds(void);
/* Stop the pool, start it with @nr pollers (evd/poller.c; no EVD may exist). */
int kevd_pollers_restart(unsigned int nr, unsigned int *old);
struct module;
/* Reap @mod's EVDs as if @mod went (evd/main.c; @mod is only compared). */
void kevd_test_reap(struct module *mod);

/* Wait until *@v >= @target (60 s bound); false if the bound ran out. */
bool kevd_test_wait_count(atomic_t *v, int target);
bool kevd_test_wait_count_for(atomic_t *v, int target, unsigned long bound);

/* Run a shell command in user space and wait: its exit status, or -errno. */
int kevd_test_sh(const char *cmd);
/* A module's reference count (sysfs), after pending RCU callbacks. */
int kevd_test_module_refs(const char *name);

/*
 * A parameter of two cases, false and true, named @off and @on:
 * @name##_gen_params for KUNIT_CASE_PARAM().
 */
#define KEVD_TEST_BOOL_PARAM(name, off, on)				\
	static const bool name##_values[] = { false, true };		\
	static void name##_desc(const bool *v, char *desc)		\
	{								\
		strscpy(desc, *v ? (on) : (off), KUNIT_PARAM_DESC_SIZE);	\
	}								\
	KUNIT_ARRAY_PARAM(name, name##_values, name##_desc)

struct kevd;
/* Wait until a thread waits in kevd_wait() on @evd (60 s bound). */
bool kevd_test_waiting(struct kevd *evd);

/**
 * struct kevd_test_waiter - a thread in one kevd_wait() (kevd_test_waiter_fn()).
 * @evd: the EVD it waits on.
 * @timeout_us: its timeout.
 * @threshold: its threshold.
 * @ev: the event it took.
 * @done: completed when kevd_wait() returned.
 * @rc: what kevd_wait() returned.
 */
struct kevd_test_waiter {
	struct kevd *evd;
	u32 timeout_us;
	u32 threshold;
	struct kevd_event ev;
	struct completion done;
	int rc;
};

/*
 * The thread function of a struct kevd_test_waiter (init_completion()
 * first): SIGUSR1 may interrupt its wait; it then stays until
 * kthread_stop().
 */
int kevd_test_waiter_fn(void *data);

struct kunit;
struct kevd_upcall;
/* Wait until every pass queued on any poller before the call has run. */
void kevd_test_flush_pollers(struct kunit *test);
/*
 * A software-stream EVD homed on the poller of CPU @cpu, with the upcall
 * policy and object given (kevd_test_create() is the same on CPU 0).
 */
struct kevd *kevd_test_create_on(struct kunit *test, u32 qlen, u32 flags,
				 int policy, const struct kevd_upcall *upcall,
				 int flag, int cpu);

struct fake_hca;
/* DTO and connection streams on a new strict fake HCA (*@hca). */
struct kevd *kevd_test_dto_conn_evd(struct kunit *test, struct fake_hca **hca);

/*
 * A long stress runs as parts: a few cases per parameter, each doing its
 * share of the work. KUnit waits for a case uninterruptibly, so modprobe
 * kevd_test sleeps in D state meanwhile, and the test kernels' hung-task
 * detector reports a task asleep so for over 60 s (it failed a CI run on
 * a case that took 36 s here). Keep every case under 15 s on the SMP test
 * kernel.
 */

/**
 * struct kevd_test_part - the parameter of one part of a stress.
 * @param: the element of the suite's parameter array.
 * @part: which part, 1 to @parts.
 * @parts: how many parts share the work.
 */
struct kevd_test_part {
	const void *param;
	unsigned int part;
	unsigned int parts;
};

const struct kevd_test_part *
kevd_test_part_next(const struct kevd_test_part *prev,
		    struct kevd_test_part *storage, size_t n,
		    const void *array, size_t count, size_t size);
void kevd_test_part_desc(const struct kevd_test_part *p, char *desc);

/*
 * As KUNIT_ARRAY_PARAM(), but each element of @array gives @nparts
 * cases, named "<desc>_part<N>"; the case reads a
 * const struct kevd_test_part * from test->param_value.
 */
#define KEVD_TEST_PARTS_PARAM(name, array, get_desc, nparts)		\
	static struct kevd_test_part name##_parts[(nparts) *		\
		(sizeof(array) / sizeof((array)[0]))];			\
	static const void *name##_gen_params(const void *prev,		\
					     char *desc)		\
	{								\
		const struct kevd_test_part *p;				\
									\
		p = kevd_test_part_next(prev, name##_parts,		\
					ARRAY_SIZE(name##_parts), array,\
					sizeof(array) /			\
					sizeof((array)[0]),		\
					sizeof((array)[0]));		\
		if (p) {						\
			get_desc((const typeof((array)[0]) *)p->param,	\
				 desc);					\
			kevd_test_part_desc(p, desc);			\
		}							\
		return p;						\
	}

#endif /* _KEVD_TEST_EXPORT_H */
