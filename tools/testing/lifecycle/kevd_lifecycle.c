// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_lifecycle: one consumer's life, for the module lifecycle suite
 * (tools/testing/guest/faults.sh). At load it creates EVDs on every
 * stream it can reach: software, the CM streams with an async EVD, DTO
 * on the fake HCA (completions added and taken), and DTO on a real
 * device when "device" names one (rxe0 in the guest); it checks each
 * event, then frees them all, unless "leak" asks it to leave EVDs open
 * for its unload (a consumer bug that kevd must report and clean up).
 * The load fails if any check fails. Includes the public header (and the
 * fake HCA's) only.
 */
#include <linux/module.h>
#include <kevd/kevd.h>
#include "fake_hca.h"

static char *device = "";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "An RDMA device for a DTO EVD too (default none)");

static bool leak;
module_param(leak, bool, 0444);
MODULE_PARM_DESC(leak, "Leave the EVDs open at unload (default N)");

#define LC_EVDS	5

static struct kevd *lc_evds[LC_EVDS];
static struct fake_hca *lc_hca;
static struct ib_device *lc_dev;

static struct kevd *lc_create(struct ib_device *dev, u32 flags,
			      struct kevd *async)
{
	struct kevd_attr attr;

	kevd_attr_init(&attr);
	attr.qlen = 32;
	attr.flags = flags;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	attr.async_evd = async;
	return kevd_create(dev, &attr);
}

/* A software event and, with a CQ, completions: each back, in order. */
static int lc_exercise(struct kevd *evd, bool fake_cq)
{
	struct kevd_event ev;
	u32 nmore, i;
	int ret;

	ret = kevd_post_se(evd, evd);
	if (!ret)
		ret = kevd_wait(evd, 10000000, 1, &ev, &nmore);
	if (!ret && (ev.event_number != KEVD_SOFTWARE_EVENT ||
		     ev.software.pointer != evd))
		ret = -EIO;
	for (i = 0; !ret && fake_cq && i < 8; i++)
		ret = fake_cq_add_cookie(kevd_cq(evd), i);
	for (i = 0; !ret && fake_cq && i < 8; i++) {
		ret = kevd_wait(evd, 10000000, 1, &ev, &nmore);
		if (!ret && ev.dto.cookie != i)
			ret = -EIO;
	}
	return ret;
}

static void lc_free_all(void)
{
	int i;

	/* newest first: the async EVD is freed after its users */
	for (i = LC_EVDS - 1; i >= 0; i--)
		if (!IS_ERR_OR_NULL(lc_evds[i]))
			WARN_ON(kevd_free(lc_evds[i]));
	memset(lc_evds, 0, sizeof(lc_evds));
}

static int __init kevd_lifecycle_init(void)
{
	int ret = 0, i;

	lc_hca = fake_hca_create(FAKE_HCA_STRICT_REPORT);
	if (IS_ERR(lc_hca))
		return PTR_ERR(lc_hca);
	if (*device) {
		lc_dev = ib_device_get_by_name(device, RDMA_DRIVER_UNKNOWN);
		if (!lc_dev) {
			pr_err("kevd-lifecycle: no device %s\n", device);
			ret = -ENODEV;
			goto out_hca;
		}
	}
	lc_evds[0] = lc_create(NULL, KEVD_SOFTWARE_FLAG | KEVD_ASYNC_FLAG, NULL);
	if (!IS_ERR(lc_evds[0]))
		lc_evds[1] = lc_create(NULL, KEVD_DEFAULT_FLAG & ~KEVD_DTO_FLAG,
				       lc_evds[0]);
	lc_evds[2] = lc_create(fake_hca_ibdev(lc_hca),
			       KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG, NULL);
	lc_evds[3] = lc_create(NULL, KEVD_SOFTWARE_FLAG, NULL);
	if (lc_dev)
		lc_evds[4] = lc_create(lc_dev, KEVD_DTO_FLAG | KEVD_SOFTWARE_FLAG,
				       NULL);
	for (i = 0; i < LC_EVDS && !ret; i++) {
		if (IS_ERR(lc_evds[i]))
			ret = PTR_ERR(lc_evds[i]);
		else if (lc_evds[i] && i != 1)
			ret = lc_exercise(lc_evds[i], i == 2);
	}
	if (ret) {
		pr_err("kevd-lifecycle: failed: %d\n", ret);
		lc_free_all();
		goto out_dev;
	}
	if (leak) {
		/* those with CQs go: the devices are put at exit */
		for (i = 2; i < LC_EVDS; i += 2)
			if (lc_evds[i])
				WARN_ON(kevd_free(lc_evds[i]));
	} else {
		lc_free_all();
	}
	pr_info("kevd-lifecycle: ok, %d EVDs, %d left open\n",
		lc_dev ? 5 : 4, leak ? 3 : 0);
	return 0;

out_dev:
	if (lc_dev)
		ib_device_put(lc_dev);
out_hca:
	fake_hca_destroy(lc_hca);
	return ret;
}

/*
 * With "leak", three EVDs without a CQ stay open (the software one, its
 * async EVD and the CM streams' one): kevd reports and frees them as this
 * module goes, after this exit.
 */
static void __exit kevd_lifecycle_exit(void)
{
	if (lc_dev)
		ib_device_put(lc_dev);
	fake_hca_destroy(lc_hca);
}

module_init(kevd_lifecycle_init);
module_exit(kevd_lifecycle_exit);

MODULE_DESCRIPTION("kevd lifecycle test consumer");
MODULE_LICENSE("Dual BSD/GPL");
