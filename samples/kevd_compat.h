/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the samples need from ib_core that differs between the kernels
 * kevd supports: Debian 12's default 6.1 and 6.12. kevd.ko itself needs
 * none of it.
 */
#ifndef _KEVD_SAMPLES_COMPAT_H
#define _KEVD_SAMPLES_COMPAT_H

#include <linux/netdevice.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

/* Kbuild defines it when ib_verbs.h declares ib_device_get_netdev(). */
#ifndef KEVD_HAVE_IB_DEVICE_GET_NETDEV
/*
 * 6.1 does not export ib_device_get_netdev(): ask the driver (iWARP
 * devices such as siw have no GID table), else take the netdev of the
 * port's first GID (RoCE devices such as rxe). A reference is held on
 * the result, as ib_device_get_netdev() does.
 */
static inline struct net_device *kevd_compat_get_netdev(struct ib_device *dev,
							u32 port)
{
	const struct ib_gid_attr *attr;
	struct net_device *ndev = NULL;

	if (dev->ops.get_netdev)
		return dev->ops.get_netdev(dev, port);
	attr = rdma_get_gid_attr(dev, port, 0);
	if (IS_ERR(attr))
		return NULL;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (IS_ERR(ndev))
		ndev = NULL;
	else
		dev_hold(ndev);
	rcu_read_unlock();
	rdma_put_gid_attr(attr);
	return ndev;
}

#define ib_device_get_netdev kevd_compat_get_netdev
#endif

#endif /* _KEVD_SAMPLES_COMPAT_H */
