// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The global list of EVDs, the statistics totals and debugfs:
 *   /sys/kernel/debug/kevd/stats  totals over every EVD, live and freed
 *   /sys/kernel/debug/kevd/evds   one line per live EVD (a seq_file
 *                                 iterator: the lock is held per buffer)
 *
 * Locking: kevd_list_lock (a mutex) guards the list, kevd_freed and the
 * id counter. The counters of an EVD are written by their owners without
 * atomics (evd/ring.c, evd/poller.c) and read here as snapshots.
 */
#include <linux/debugfs.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include "kevd_internal.h"

/*
 * A counter written by its owner without atomics, read here as a
 * snapshot: the race is intended and harmless (each read sees a value the
 * counter had).
 */
#define kevd_snap(x)	data_race(READ_ONCE(x))

static LIST_HEAD(kevd_list);
static DEFINE_MUTEX(kevd_list_lock);
static struct kevd_stats kevd_freed;
static unsigned int kevd_next_id;
static struct dentry *kevd_debugfs;

static void kevd_stats_add(struct kevd_stats *sum, const struct kevd_stats *st)
{
	int i;

	for (i = 0; i < KEVD_NR_STREAMS; i++) {
		sum->posted[i] += st->posted[i];
		sum->delivered[i] += st->delivered[i];
	}
	sum->upcalls += st->upcalls;
	sum->notifications += st->notifications;
	sum->empty_notifications += st->empty_notifications;
	sum->arms += st->arms;
	sum->repolls += st->repolls;
	sum->backpressure_stalls += st->backpressure_stalls;
	sum->pulls += st->pulls;
	sum->moderations += st->moderations;
	sum->overflows += st->overflows;
	sum->drops += st->drops;
	sum->max_batch = max(sum->max_batch, st->max_batch);
	sum->discarded += st->discarded;
}

/**
 * kevd_read_stats() - a snapshot of an EVD's counters.
 * @evd: the EVD.
 * @st: where to put them.
 *
 * Context: any. Counters are read without their owners' locks: each
 * value is one that was current at some point during the call. Delivered
 * is read before posted, and an event is counted as posted before it can
 * be taken (evd/ring.c): no stream shows more delivered than posted.
 */
void kevd_read_stats(struct kevd *evd, struct kevd_stats *st)
{
	u64 direct;
	int i;

	for (i = 0; i < KEVD_NR_STREAMS; i++)
		st->delivered[i] = kevd_snap(evd->ring.cstats.delivered[i]);
	/* pairs with the release of the ring's prod after posted counts */
	smp_rmb();
	for (i = 0; i < KEVD_NR_STREAMS; i++)
		st->posted[i] = kevd_snap(evd->ring.pstats.posted[i]);
	/* Delivered straight from the CQ: never in the ring, both at once. */
	direct = kevd_snap(evd->postats.direct);
	st->posted[KEVD_STREAM_DTO] += direct;
	st->delivered[KEVD_STREAM_DTO] += direct;
	st->overflows = kevd_snap(evd->ring.pstats.overflows);
	st->drops = kevd_snap(evd->ring.pstats.drops);
	st->max_batch = max(kevd_snap(evd->ring.pstats.max_batch),
			    kevd_snap(evd->postats.max_direct));
	st->upcalls = kevd_snap(evd->postats.upcalls) +
		      atomic64_read(&evd->handed_upcalls);
	st->empty_notifications =
		kevd_snap(evd->postats.empty_notifications);
	st->arms = kevd_snap(evd->postats.arms);
	st->repolls = kevd_snap(evd->postats.repolls);
	st->backpressure_stalls =
		kevd_snap(evd->postats.backpressure_stalls);
	st->pulls = kevd_snap(evd->postats.pulls);
	st->moderations = kevd_snap(evd->moderations);
	st->notifications = atomic64_read(&evd->notifications);
	st->discarded = kevd_snap(evd->discarded);
}

/**
 * kevd_register() - put a new EVD on the global list.
 * @evd: the EVD.
 *
 * Context: process context.
 */
void kevd_register(struct kevd *evd)
{
	mutex_lock(&kevd_list_lock);
	evd->id = kevd_next_id++;
	list_add_tail(&evd->list, &kevd_list);
	mutex_unlock(&kevd_list_lock);
}

/**
 * kevd_nr_evds() - the number of live EVDs.
 *
 * Not public: for kevd's own tests (a failed create registers nothing).
 *
 * Context: process context; takes kevd_list_lock.
 * Return: the EVDs created and not yet freed.
 */
unsigned int kevd_nr_evds(void)
{
	unsigned int n;

	mutex_lock(&kevd_list_lock);
	n = list_count_nodes(&kevd_list);
	mutex_unlock(&kevd_list_lock);
	return n;
}
EXPORT_SYMBOL_GPL(kevd_nr_evds);	/* not public: for kevd's own tests */

/**
 * kevd_get_owned() - the newest open EVD that @mod created.
 * @mod: the module, or NULL for EVDs that no module owns.
 *
 * Newest first: an EVD created later may use an older one as its async
 * EVD, so freeing in this order frees both.
 *
 * Context: process context; takes kevd_list_lock.
 * Return: the EVD with a reference held (kevd_put() it), or NULL.
 */
struct kevd *kevd_get_owned(struct module *mod)
{
	struct kevd *evd, *found = NULL;

	mutex_lock(&kevd_list_lock);
	list_for_each_entry_reverse(evd, &kevd_list, list) {
		/* one being freed is its freer's (kevd_free() refuses it) */
		if (READ_ONCE(evd->owner) == mod &&
		    (READ_ONCE(evd->state) & KEVD_STATE_OPEN)) {
			kevd_get(evd);
			found = evd;
			break;
		}
	}
	mutex_unlock(&kevd_list_lock);
	return found;
}

/**
 * kevd_unregister() - take a quiesced EVD off the list; keep its counts.
 * @evd: the EVD.
 *
 * Context: process context.
 */
void kevd_unregister(struct kevd *evd)
{
	struct kevd_stats st = {};

	kevd_read_stats(evd, &st);
	mutex_lock(&kevd_list_lock);
	list_del(&evd->list);
	kevd_stats_add(&kevd_freed, &st);
	mutex_unlock(&kevd_list_lock);
}

/**
 * kevd_vector_least_used() - the completion vector fewest CQs use.
 * @dev: a device.
 * @nvec: its number of vectors, > 1.
 *
 * Counts the vectors of the live EVDs' CQs on @dev (kevd_cq_pick_vector()).
 * Creates that race may pick the same one: a spread, not a guarantee.
 *
 * Context: process context; takes kevd_list_lock.
 * Return: the lowest-numbered vector with the fewest CQs.
 */
u32 kevd_vector_least_used(struct ib_device *dev, u32 nvec)
{
	u32 *use = kcalloc(nvec, sizeof(*use), GFP_KERNEL);
	struct kevd *evd;
	u32 i, best = 0;

	if (!use)
		return 0;
	mutex_lock(&kevd_list_lock);
	list_for_each_entry(evd, &kevd_list, list)
		if (evd->dev == dev && evd->comp_vector < nvec)
			use[evd->comp_vector]++;
	mutex_unlock(&kevd_list_lock);
	for (i = 1; i < nvec; i++)
		if (use[i] < use[best])
			best = i;
	kfree(use);
	return best;
}

/**
 * kevd_total_stats() - counters summed over every EVD, live and freed.
 * @stats: where to put them; NULL does nothing.
 *
 * Context: process context; sleeps.
 */
void kevd_total_stats(struct kevd_stats *stats)
{
	struct kevd_stats st;
	struct kevd *evd;

	if (!stats)
		return;
	mutex_lock(&kevd_list_lock);
	*stats = kevd_freed;
	list_for_each_entry(evd, &kevd_list, list) {
		memset(&st, 0, sizeof(st));
		kevd_read_stats(evd, &st);
		kevd_stats_add(stats, &st);
	}
	mutex_unlock(&kevd_list_lock);
}
EXPORT_SYMBOL_GPL(kevd_total_stats);

static const char * const kevd_stream_names[KEVD_NR_STREAMS] = {
	"dto", "rmr_bind", "cr", "connection", "async", "software",
};

static void kevd_show_stats(struct seq_file *m, const struct kevd_stats *st)
{
	int i;

	for (i = 0; i < KEVD_NR_STREAMS; i++)
		seq_printf(m, " posted_%s=%llu delivered_%s=%llu",
			   kevd_stream_names[i], st->posted[i],
			   kevd_stream_names[i], st->delivered[i]);
	seq_printf(m, " upcalls=%llu notifications=%llu empty_notifications=%llu arms=%llu repolls=%llu backpressure_stalls=%llu overflows=%llu drops=%llu max_batch=%llu discarded=%llu pulls=%llu moderations=%llu\n",
		   st->upcalls, st->notifications, st->empty_notifications,
		   st->arms, st->repolls, st->backpressure_stalls,
		   st->overflows, st->drops, st->max_batch, st->discarded,
		   st->pulls, st->moderations);
}

static int kevd_stats_show(struct seq_file *m, void *unused)
{
	struct kevd_stats st;

	kevd_total_stats(&st);
	seq_puts(m, "total");
	kevd_show_stats(m, &st);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kevd_stats);

/*
 * The evds file, one line per EVD, through a seq_file iterator: each
 * buffer's worth of lines (a page, about ten EVDs) is formatted under
 * kevd_list_lock, which is dropped between them, so creates and frees
 * wait for ten lines, not for the whole list. An EVD created or freed
 * between two buffers may shift the rest by a line (seen twice, or
 * missed once), as in /proc/net files.
 */
static void *kevd_evds_start(struct seq_file *m, loff_t *pos)
{
	mutex_lock(&kevd_list_lock);
	return seq_list_start(&kevd_list, *pos);
}

static void *kevd_evds_next(struct seq_file *m, void *v, loff_t *pos)
{
	return seq_list_next(v, &kevd_list, pos);
}

static void kevd_evds_stop(struct seq_file *m, void *v)
{
	mutex_unlock(&kevd_list_lock);
}

static int kevd_evds_show(struct seq_file *m, void *v)
{
	struct kevd *evd = list_entry(v, struct kevd, list);
	struct kevd_stats st = { };

	lockdep_assert_held(&kevd_list_lock);
	kevd_read_stats(evd, &st);
	seq_printf(m, "evd%u qlen=%u count=%u policy=%d flags=0x%x state=0x%x",
		   evd->id, kevd_ring_qlen(&evd->ring),
		   kevd_ring_count(&evd->ring), kevd_snap(evd->policy),
		   evd->flags, kevd_snap(evd->state));
	kevd_show_stats(m, &st);
	return 0;
}

static const struct seq_operations kevd_evds_sops = {
	.start	= kevd_evds_start,
	.next	= kevd_evds_next,
	.stop	= kevd_evds_stop,
	.show	= kevd_evds_show,
};
DEFINE_SEQ_ATTRIBUTE(kevd_evds);

/**
 * kevd_debugfs_init() - create /sys/kernel/debug/kevd.
 */
void kevd_debugfs_init(void)
{
	kevd_debugfs = debugfs_create_dir("kevd", NULL);
	debugfs_create_file("stats", 0444, kevd_debugfs, NULL,
			    &kevd_stats_fops);
	debugfs_create_file("evds", 0444, kevd_debugfs, NULL,
			    &kevd_evds_fops);
}

/**
 * kevd_debugfs_exit() - remove it.
 */
void kevd_debugfs_exit(void)
{
	debugfs_remove_recursive(kevd_debugfs);
}
