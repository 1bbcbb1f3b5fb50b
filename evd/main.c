// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd module init and exit: the poller pool and debugfs.
 */
#include <linux/module.h>
#include "kevd_internal.h"
#define CREATE_TRACE_POINTS
#include "kevd_trace.h"

static int __init kevd_init(void)
{
	int ret;

	ret = kevd_pollers_start(kevd_pass);
	if (ret) {
		pr_err("kevd: cannot start the poller threads: %d\n", ret);
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
	kevd_debugfs_exit();
	kevd_pollers_stop();
}

module_init(kevd_init);
module_exit(kevd_exit);

MODULE_DESCRIPTION("kevd: kDAPL-style event dispatcher for kernel RDMA consumers");
MODULE_AUTHOR("The kevd developers");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_VERSION(KEVD_VERSION);
