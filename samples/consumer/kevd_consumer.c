// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * kevd_consumer: a consumer module built outside kevd's tree, against
 * the installed API only (make install: the header and Module.symvers
 * under /usr/share/kevd; see this directory's Makefile). At load it
 * creates an EVD with the software stream, posts three events, takes them
 * in one kevd_dequeue_batch(), checks their order and frees the EVD.
 */
#include <linux/module.h>
#include <kevd/kevd.h>

static int __init kevd_consumer_init(void)
{
	struct kevd_event evs[4];
	struct kevd_attr attr;
	struct kevd *evd;
	unsigned long i;
	int n, ret = 0;

	kevd_attr_init(&attr);
	attr.flags = KEVD_SOFTWARE_FLAG;
	attr.upcall_policy = KEVD_UPCALL_DISABLE;
	evd = kevd_create(NULL, &attr);
	if (IS_ERR(evd))
		return PTR_ERR(evd);
	for (i = 1; i <= 3 && !ret; i++)
		ret = kevd_post_se(evd, (void *)i);
	n = ret ? ret : kevd_dequeue_batch(evd, evs, ARRAY_SIZE(evs));
	for (i = 0; n == 3 && i < 3; i++)
		if (evs[i].software.pointer != (void *)(i + 1))
			n = -EPROTO;
	if (n != 3)
		ret = n < 0 ? n : -EPROTO;
	kevd_free(evd);
	pr_info("kevd-consumer: %s (%d)\n", ret ? "failed" : "ok", ret);
	return ret;
}

static void __exit kevd_consumer_exit(void)
{
}

module_init(kevd_consumer_init);
module_exit(kevd_consumer_exit);

MODULE_DESCRIPTION("kevd: a consumer built against the installed API");
MODULE_LICENSE("Dual BSD/GPL");
