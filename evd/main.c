// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd module init and exit: the poller pool and debugfs; and the EVDs
 * that a consumer module leaves open when it unloads.
 *
 * A consumer must free its EVDs before its module goes (its upcalls are
 * code of that module). When it does not, kevd reports each EVD it left,
 * by name and owner, as the module goes (MODULE_STATE_GOING: its exit has
 * run, its code is still there), and frees it. An EVD that cannot be
 * freed (QPs on its CQ, another EVD or a CM binding using it) has its
 * upcalls torn down and stays; kevd then takes a reference on itself
 * until the EVD is freed: its completion handler remains the CQ's, so
 * kevd.ko must not unload (rmmod says it is in use). An EVD created with
 * no owner holds such a reference from its creation. A CM binding left
 * bound still calls the module's rdma_cm handler, which kevd cannot tear
 * down (api.rst says so).
 */
#include <linux/module.h>
#include <linux/rcupdate.h>
#include "kevd_internal.h"
#define CREATE_TRACE_POINTS
#include "kevd_trace.h"

/* For probes in kevd's own tests (kunit_tests/api_test.c). */
EXPORT_TRACEPOINT_SYMBOL_GPL(kevd_upcall_batch_begin);

/* Free, or at least silence, the EVDs @mod left open (see the top). */
static void kevd_reap(struct module *mod, const char *who)
{
	struct kevd_param param;
	struct kevd *evd;
	int ret;

	while ((evd = kevd_get_owned(mod))) {
		kevd_query(evd, &param);
		ret = kevd_free(evd);
		if (!ret) {
			pr_err("kevd: %s left evd%u open (qlen %u, flags 0x%x, %u events queued): freed\n",
			       who, evd->id, param.qlen, param.flags, param.count);
		} else {
			pr_err("kevd: %s left evd%u open (qlen %u, flags 0x%x): still in use (%d), upcalls torn down; kevd stays loaded\n",
			       who, evd->id, param.qlen, param.flags, ret);
			/* the object is the going module's: forget it */
			kevd_teardown_forget(evd);
			/* at kevd's exit: owner NULL already, and kevd held */
			if (mod) {
				/* compared no more; kevd held until it is freed */
				WRITE_ONCE(evd->owner, NULL);
				__module_get(THIS_MODULE);
			}
		}
		kevd_put(evd);
		if (ret && !mod)
			break;	/* at kevd's exit: nothing more to do */
	}
}

/**
 * kevd_test_reap() - what kevd does for @mod's EVDs as @mod goes.
 * @mod: the owner the test gave its EVDs (compared, never dereferenced).
 *
 * Context: process context; may sleep.
 */
void kevd_test_reap(struct module *mod)
{
	kevd_reap(mod, "kevd_test");
}
EXPORT_SYMBOL_GPL(kevd_test_reap);	/* not public: for kevd's own tests */

static int kevd_module_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	struct module *mod = data;

	if (action == MODULE_STATE_GOING)
		kevd_reap(mod, mod->name);
	return NOTIFY_DONE;
}

static struct notifier_block kevd_module_nb = {
	.notifier_call = kevd_module_notify,
};

static int __init kevd_init(void)
{
	int ret;

	ret = kevd_pollers_start(kevd_pass);
	if (ret) {
		pr_err("kevd: cannot start the poller threads: %d\n", ret);
		return ret;
	}
	ret = register_module_notifier(&kevd_module_nb);
	if (ret) {
		kevd_pollers_stop();
		return ret;
	}
	kevd_debugfs_init();
	pr_info("kevd %s: %u poller threads, policy %d, budget %u, qlen %u\n",
		KEVD_VERSION, kevd_nr_pollers(), kevd_param_policy, kevd_param_budget,
		kevd_param_qlen);
	return 0;
}

static void __exit kevd_exit(void)
{
	unregister_module_notifier(&kevd_module_nb);
	kevd_cm_exit();
	/* none: an EVD no module owns holds kevd (a safety net) */
	kevd_reap(NULL, "the kernel");
	kevd_debugfs_exit();
	kevd_pollers_stop();
	rcu_barrier();	/* the EVDs' memory (kevd_put()) */
}

module_init(kevd_init);
module_exit(kevd_exit);

MODULE_DESCRIPTION("kevd: kDAPL-style event dispatcher for kernel RDMA consumers");
MODULE_AUTHOR("The kevd developers");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_VERSION(KEVD_VERSION);
