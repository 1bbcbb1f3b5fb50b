/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What kevd.ko exports for its own tests beyond include/kevd/kevd.h. The
 * consumer suite uses the public header, the fake HCA and this only.
 */
#ifndef _KEVD_TEST_EXPORT_H
#define _KEVD_TEST_EXPORT_H

/* The number of poller threads (evd/poller.c). */
unsigned int kevd_nr_pollers(void);

#endif /* _KEVD_TEST_EXPORT_H */
