/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the consumer suite uses beyond include/kevd/kevd.h and the fake
 * HCA: kevd.ko's export for its own tests, and the helpers of kevd_test.ko
 * that need no internal header (kunit_tests/kevd_test_main.c).
 */
#ifndef _KEVD_TEST_EXPORT_H
#define _KEVD_TEST_EXPORT_H

#include <linux/atomic.h>

/* The number of poller threads (evd/poller.c). */
unsigned int kevd_nr_pollers(void);
unsigned int kevd_nr_evds(void);
/* Stop the pool, start it with @nr pollers (evd/poller.c; no EVD may exist). */
int kevd_pollers_restart(unsigned int nr, unsigned int *old);

/* Wait until *@v >= @target (60 s bound); false if the bound ran out. */
bool kevd_test_wait_count(atomic_t *v, int target);
bool kevd_test_wait_count_for(atomic_t *v, int target, unsigned long bound);

/* Run a shell command in user space and wait: its exit status, or -errno. */
int kevd_test_sh(const char *cmd);

struct kevd;
/* Wait until a thread waits in kevd_wait() on @evd (60 s bound). */
bool kevd_test_waiting(struct kevd *evd);

struct kunit;
struct kevd_upcall;
/*
 * A software-stream EVD homed on the poller of CPU @cpu, with the upcall
 * policy and object given (kevd_test_create() is the same on CPU 0).
 */
struct kevd *kevd_test_create_on(struct kunit *test, u32 qlen, u32 flags,
				 int policy, const struct kevd_upcall *upcall,
				 int flag, int cpu);

#endif /* _KEVD_TEST_EXPORT_H */
