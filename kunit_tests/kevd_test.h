/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Helpers shared by kevd's KUnit suites. Assertions are made only from
 * the test thread; worker threads and upcalls count into atomics that the
 * test thread checks afterwards.
 */
#ifndef _KEVD_TEST_H
#define _KEVD_TEST_H

#include <kunit/test.h>
#include <linux/completion.h>
#include <kevd/kevd.h>
#include "kevd_internal.h"
#include "kevd_test_export.h"

/* Wait bounds: a wait that runs out is a failure, never a result. */
#define KEVD_TEST_WAIT	msecs_to_jiffies(60000)
#define KEVD_STRESS_WAIT	msecs_to_jiffies(600000)

struct kevd *kevd_test_create(struct kunit *test, u32 qlen, u32 flags,
			      int policy, const struct kevd_upcall *upcall,
			      int flag);
char *kevd_test_read_file(const char *path, size_t max);

/* An upcall that records what it saw. */
struct kevd_rec {
	atomic_t calls;
	atomic_t doorbells;
	atomic_t inside;
	atomic_t max_inside;
	atomic_t errors;
	atomic_t last_more_false;
	u64 next;		/* software pointers expected in order */
	int rc;			/* result of a call made inside the upcall */
	struct kevd *evd;
	int action;
	struct completion done;
	int done_at;
};

enum {
	KEVD_REC_NONE,
	KEVD_REC_TEARDOWN_INSIDE,
	KEVD_REC_FREE_INSIDE,
};

void kevd_rec_init(struct kevd_rec *r);
struct kevd_rec *kevd_rec_new(struct kunit *test);
void kevd_rec_upcall(void *ctx, const struct kevd_event *ev, bool more);

#endif /* _KEVD_TEST_H */
