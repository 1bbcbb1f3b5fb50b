// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Module parameters. Every parameter has a setter that validates: a bad
 * value at load time fails the load with -EINVAL and a pr_err() naming
 * the parameter and the values it accepts; at run time (the 0644 ones,
 * through sysfs) the write fails the same way and the old value stays.
 *
 * Documentation/kevd/parameters.rst is the admin guide.
 */
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/string.h>
#include "kevd_internal.h"

/**
 * struct kevd_uint_param - an unsigned parameter with a range.
 * @var: the value.
 * @min: smallest accepted value.
 * @max: largest accepted value.
 * @hint: what the value means, for the error message.
 */
struct kevd_uint_param {
	unsigned int *var;
	unsigned int min;
	unsigned int max;
	const char *hint;
};

/*
 * How much of a rejected value to quote: up to its first newline (sysfs
 * writes end with one), at most 64 characters, so that the message is one
 * line whatever was written; the messages quote it with %*pE, control
 * characters escaped.
 */
static int kevd_quote_len(const char *val)
{
	return val ? min_t(size_t, strcspn(val, "\n"), 64) : 0;
}

/*
 * No value of ours is longer than KEVD_PARAM_MAX_LEN characters (and a
 * newline). A longer one is refused whole: sysfs hands a store only the
 * first PAGE_SIZE bytes of a write, and "0000...0017" cut there would
 * read as 0.
 */
#define KEVD_PARAM_MAX_LEN	32

static bool kevd_param_too_long(const struct kernel_param *kp,
				const char *val)
{
	size_t len = val ? strnlen(val, KEVD_PARAM_MAX_LEN + 2) : 0;

	if (len && val[len - 1] == '\n')
		len--;
	if (len <= KEVD_PARAM_MAX_LEN)
		return false;
	pr_err("kevd: invalid %s=%*pE...: expected at most %d characters\n",
	       kp->name, kevd_quote_len(val), val, KEVD_PARAM_MAX_LEN);
	return true;
}

static int kevd_uint_set(const char *val, const struct kernel_param *kp)
{
	const struct kevd_uint_param *p = kp->arg;
	unsigned int v;

	if (kevd_param_too_long(kp, val))
		return -EINVAL;
	/* decimal, as documented: no octal for a leading 0, no 0x */
	if (!val || kstrtouint(val, 10, &v) || v < p->min || v > p->max) {
		pr_err("kevd: invalid %s=%*pE: expected an integer from %u to %u (%s)\n",
		       kp->name, kevd_quote_len(val), val ?: "", p->min,
		       p->max, p->hint);
		return -EINVAL;
	}
	WRITE_ONCE(*p->var, v);
	return 0;
}

static int kevd_uint_get(char *buf, const struct kernel_param *kp)
{
	const struct kevd_uint_param *p = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(*p->var));
}

static const struct kernel_param_ops kevd_uint_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,	/* a missing value gets our message */
	.set = kevd_uint_set,
	.get = kevd_uint_get,
};

/**
 * struct kevd_enum_param - a parameter that takes one of a few names.
 * @var: the value.
 * @names: accepted names, NULL-terminated.
 * @values: the value of each name.
 * @accepted: the accepted names, for the error message.
 */
struct kevd_enum_param {
	int *var;
	const char * const *names;
	const int *values;
	const char *accepted;
};

static int kevd_enum_set(const char *val, const struct kernel_param *kp)
{
	const struct kevd_enum_param *p = kp->arg;
	int i;

	if (kevd_param_too_long(kp, val))
		return -EINVAL;
	i = val ? __sysfs_match_string(p->names, -1, val) : -EINVAL;
	if (i < 0) {
		pr_err("kevd: invalid %s=%*pE: expected one of %s\n",
		       kp->name, kevd_quote_len(val), val ?: "", p->accepted);
		return -EINVAL;
	}
	WRITE_ONCE(*p->var, p->values[i]);
	return 0;
}

static int kevd_enum_get(char *buf, const struct kernel_param *kp)
{
	const struct kevd_enum_param *p = kp->arg;
	int v = READ_ONCE(*p->var);
	int i;

	for (i = 0; p->names[i]; i++)
		if (p->values[i] == v)
			return sysfs_emit(buf, "%s\n", p->names[i]);
	return sysfs_emit(buf, "%d\n", v);
}

static const struct kernel_param_ops kevd_enum_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = kevd_enum_set,
	.get = kevd_enum_get,
};

unsigned int kevd_param_budget = 64;
static struct kevd_uint_param kevd_budget_param = {
	&kevd_param_budget, 1, 65536, "events per EVD per poller pass",
};

module_param_cb(poll_budget, &kevd_uint_ops, &kevd_budget_param, 0644);
MODULE_PARM_DESC(poll_budget,
		 "Work per EVD per poller pass before it moves on: completions moved plus events delivered (1..65536, default 64)");

unsigned int kevd_param_defer_arm = 1;
static struct kevd_uint_param kevd_defer_param = {
	&kevd_param_defer_arm, 0, 64,
	"empty passes before an EVD's CQ is armed again",
};

module_param_cb(defer_arm, &kevd_uint_ops, &kevd_defer_param, 0644);
MODULE_PARM_DESC(defer_arm,
		 "Empty poller passes an EVD that had work stays queued before its CQ is armed again (0..64, default 1; 0: at once)");

unsigned int kevd_param_cq_dim;
static struct kevd_uint_param kevd_cq_dim_param = {
	&kevd_param_cq_dim, 0, 1,
	"adaptive CQ moderation: 0 off, 1 on where the provider has modify_cq",
};

module_param_cb(cq_dim, &kevd_uint_ops, &kevd_cq_dim_param, 0644);
MODULE_PARM_DESC(cq_dim,
		 "Adaptive moderation (lib/dim, ib_core's RDMA profiles) of the CQs of EVDs created from now on, where the provider has modify_cq (0..1, default 0: off)");

unsigned int kevd_param_qlen = 256;
static struct kevd_uint_param kevd_qlen_param = {
	&kevd_param_qlen, 1, KEVD_MAX_QLEN, "default EVD queue length",
};

module_param_cb(default_qlen, &kevd_uint_ops, &kevd_qlen_param, 0644);
MODULE_PARM_DESC(default_qlen,
		 "Queue length kevd_attr_init() proposes (1..1048576, default 256)");

unsigned int kevd_param_nr_pollers;
static struct kevd_uint_param kevd_pollers_param = {
	&kevd_param_nr_pollers, 0, 1024, "poller threads; 0: one per online CPU",
};

module_param_cb(nr_pollers, &kevd_uint_ops, &kevd_pollers_param, 0444);
MODULE_PARM_DESC(nr_pollers,
		 "Poller threads (0..1024, default 0: one per online CPU)");

static const char * const kevd_policy_names[] = {
	"disable", "single", "notify", "many", NULL,
};

static const int kevd_policy_values[] = {
	KEVD_UPCALL_DISABLE, KEVD_UPCALL_SINGLE_INSTANCE, KEVD_UPCALL_NOTIFY,
	KEVD_UPCALL_MANY,
};

int kevd_param_policy = KEVD_UPCALL_DISABLE;
static struct kevd_enum_param kevd_policy_param = {
	&kevd_param_policy, kevd_policy_names, kevd_policy_values,
	"disable, single, notify, many",
};

module_param_cb(default_policy, &kevd_enum_ops, &kevd_policy_param, 0644);
MODULE_PARM_DESC(default_policy,
		 "Upcall policy kevd_attr_init() proposes: disable, single, notify, many (default disable)");

static const char * const kevd_check_names[] = {
	"auto", "report", "poll", NULL,
};

static const int kevd_check_values[] = {
	KEVD_CHECK_AUTO, KEVD_CHECK_REPORT, KEVD_CHECK_POLL,
};

int kevd_param_notify_check = KEVD_CHECK_AUTO;
static struct kevd_enum_param kevd_check_param = {
	&kevd_param_notify_check, kevd_check_names, kevd_check_values,
	"auto, report, poll",
};

module_param_cb(notify_check, &kevd_enum_ops, &kevd_check_param, 0644);
MODULE_PARM_DESC(notify_check,
		 "Check after arming a CQ: auto (safe everywhere, default), report (trust IB_CQ_REPORT_MISSED_EVENTS only), poll (always poll one)");
