/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * kevd's extended notify (arm, check, re-arm) with the NAPI-style
 * SCHED/MISSED ownership of dto/arm.c and evd/poller.c.
 *
 * Processes: the HCA adds N completions (and may fire one spurious
 * notification); the completion handler schedules the EVD; the poller
 * owns a scheduled EVD, drains the CQ, arms, checks, and lets go.
 *
 *   -DLENIENT  arming fires at once when CQEs are present (Mellanox);
 *              without it, strict IBTA: only CQEs added after the arm fire.
 *   -DCHECK    the check step after arming (kevd); without it the plain
 *              drain-then-arm of 2006.
 *   -DPULL     a consumer waits with upcalls disabled (dto/pull.c): it
 *              takes the EVD when nobody owns it, drains, arms, checks,
 *              lets go and sleeps until a notification is pending and
 *              nobody owns the EVD; the handler wakes it instead of
 *              scheduling a poller, or marks the owner MISSED. It may
 *              leave at any moment (a timeout), handing a pending
 *              notification to a poller...
 *   -DNOLEAVE  ...unless this is set: then it must fail.
 *   -DBUSY     with -DPULL: a second consumer dequeues. Its pull that
 *              found work lets go without arming (pull_unarmed), unless
 *              it sees a registered waiter after setting the mark; a
 *              notification during a pull (MISSED) makes the pull pass
 *              again itself, twice at most. The waiter registers late,
 *              and if its own pull finds the EVD owned while the mark is
 *              up it schedules the EVD. It never leaves: the property is
 *              that it never sleeps while completions sit in the CQ.
 *   -DNOHANDSHAKE  ...without the mark and the waiter check: must fail.
 *              The waiter's own pull that finds work lets go unarmed
 *              too, and it returns with the events and waits again (a
 *              pull that meets its threshold)...
 *   -DSELFSLEEP  ...if it slept instead (a threshold the pull did not
 *              meet), with the CQ unarmed: must fail.
 *              With -DBUSY the poller's pass that found work gives the
 *              EVD back unarmed too (the consumers pull), after the same
 *              mark and waiter check as the dequeuer's...
 *   -DPOLLNOCHECK  ...without the waiter check: must fail.
 *
 * Property (no lost wake-up): whenever the whole system is quiescent
 * (nothing can move: spin's timeout), the CQ is empty and every
 * completion reached the event ring.
 */
#ifndef N
#define N 3
#endif

bit armed = 0;		/* the CQ is armed (kevd_cq_create arms it) */
byte cq = 0;		/* CQEs in the CQ */
byte ring = 0;		/* completions moved into the event ring */
bit sched = 0;		/* KEVD_POLL_SCHED */
bit missed = 0;		/* KEVD_POLL_MISSED */
chan irq = [N + 2] of { bit };	/* notifications on their way to the handler */
chan runq = [1] of { bit };	/* the poller's run list */
bit pending = 0;	/* KEVD_POLL_NOTIFIED: a notification not yet served */
#if defined(PULL) && !defined(BUSY)
bit waiting = 1;	/* evd->waiter: a consumer in kevd_wait() */
#else
bit waiting = 0;
#endif
bit mark = 0;		/* evd->pull_unarmed */
bit asleep = 0;		/* the BUSY waiter sleeps */

/* drain the CQ, arm it, check: the pass of a poller and of a pull */
inline pass(again)
{
	again = 1;
	do
	:: again ->
		/* drain (kevd_cq_drain) */
		atomic { ring = ring + cq; cq = 0 }
		/* arm: ib_req_notify_cq */
		atomic {
			armed = 1;
#ifdef LENIENT
			if
			:: cq > 0 -> armed = 0; irq!1
			:: else -> skip
			fi
#endif
		}
		again = 0;
#ifdef CHECK
		/* check: REPORT_MISSED_EVENTS > 0, or poll one */
		if
		:: cq > 0 -> again = 1
		:: else -> skip
		fi
#endif
		if
		:: again -> skip
		:: else -> break
		fi
	od
}

inline fire()
{
	if
	:: armed -> armed = 0; irq!1
	:: else -> skip
	fi
}

/* kevd_schedule(): take ownership and queue, or mark missed. */
inline schedule()
{
	atomic {
		if
		:: sched -> missed = 1
		:: else -> sched = 1; runq!1
		fi
	}
}

active proctype hca()
{
	byte i = 0;
	bit spurious = 0;

	armed = 1;
	do
	:: i < N -> atomic { cq++; fire() }; i++
	:: spurious == 0 -> spurious = 1; irq!1	/* an empty or spurious one */
	:: i == N -> break
	od
}

active proctype handler()
{
end:	do
	:: irq?1 ->
		/* kevd_comp_handler(), under evd->lock */
		atomic {
			pending = 1;
			if
			:: waiting && sched -> missed = 1	/* the owner repasses */
			:: waiting && !sched -> skip	/* wake the waiter */
			:: !waiting -> schedule()
			fi
		}
	od
}

active proctype poller()
{
	bit again;
#ifdef BUSY
	bit found;
#endif

end:	do
	:: runq?1 ->
		again = 1;
		do
		:: again ->
			pending = 0;	/* test_and_clear_bit(NOTIFIED) */
#ifdef BUSY
			/*
			 * The consumers pull: a pass that found work gives
			 * the EVD back unarmed (kevd_pass_hand_back()),
			 * unless it sees a registered waiter after setting
			 * the mark, as their own pulls do.
			 */
			mark = 0;
			atomic { found = cq > 0; ring = ring + cq; cq = 0 }
			if
			:: found ->
				mark = 1;	/* kevd_pull_unarmed_ok(), smp_mb() */
#ifndef POLLNOCHECK
				if
				:: waiting -> mark = 0; pass(again)
				:: else -> again = 0
				fi
#else
				again = 0
#endif
			:: else -> pass(again)
			fi;
#else
			pass(again);
#endif
			/* let go, unless scheduled meanwhile */
			atomic {
				if
				:: missed -> missed = 0; again = 1
				:: else -> sched = 0
				fi
			}
		:: else -> break
		od
	od
}

#ifdef PULL
active proctype waiter()
{
	bit again;
#ifdef BUSY
	bit found;

	waiting = 1;	/* kevd_wait_begin(), then smp_mb() */
end_busy:
	do
	:: atomic { !sched -> sched = 1; pending = 0; mark = 0 }
		/*
		 * Its pull drains; if that met its threshold it lets go
		 * unarmed (kevd_pull_waiter_returns(): mark up, no arm) and
		 * returns with the events, else it arms as a pass does.
		 */
		atomic { found = cq > 0; ring = ring + cq; cq = 0 }
		if
		:: found -> mark = 1
		:: else -> pass(again)
		fi;
		atomic {
			if
			:: missed -> missed = 0; runq!1
			:: else -> sched = 0
			fi
		}
#ifndef SELFSLEEP
		if
		:: found ->
			/* kevd_wait_end(), kevd_pull_leave(); it waits again */
			atomic {
				waiting = 0;
				if
				:: pending && !sched -> schedule()
				:: else -> skip
				fi
			}
			waiting = 1
		:: else ->
#endif
			atomic { asleep = 1 };
end_bsleep:
			atomic { pending && !sched -> asleep = 0 }
#ifndef SELFSLEEP
		fi
#endif
	:: atomic {
		sched ->	/* kevd_pull() finds it owned */
#ifndef NOHANDSHAKE
		if
		:: mark -> schedule()	/* another's pull lets go unarmed */
		:: else -> skip
		fi;
#endif
		asleep = 1
	   }
end_bsleep2:
		atomic { pending && !sched -> asleep = 0 }
	od;
#endif
end:	do
	:: atomic { !sched -> sched = 1; pending = 0 }	/* kevd_poll_try_own */
		pass(again);
		/* kevd_poll_release(): MISSED hands it to a poller */
		atomic {
			if
			:: missed -> missed = 0; runq!1
			:: else -> sched = 0
			fi
		}
		/* sleep until a notification is pending and nobody owns it */
end_sleep:
		atomic { pending && !sched }
	:: break	/* it leaves (timeout, enough events): kevd_wait_end() */
	od;
	atomic {
		waiting = 0;
#ifndef NOLEAVE
		/* kevd_pull_leave() */
		if
		:: pending && !sched -> schedule()
		:: else -> skip
		fi
#endif
	}
}
#endif

#ifdef BUSY
/* A consumer that dequeues (kevd_dequeue(): dto/pull.c), and may stop. */
active proctype dequeuer()
{
	bit again, found;
	byte passes;

end:	do
	:: atomic { !sched -> sched = 1 }
		found = 0;
		passes = 0;
		do
		:: pending = 0;
			mark = 0;
			atomic { found = found || cq > 0; ring = ring + cq; cq = 0 }
			if
			:: found ->
#ifdef NOHANDSHAKE
				skip
#else
				mark = 1;	/* kevd_pull_unarmed_ok(), smp_mb() */
				if
				:: waiting -> mark = 0; pass(again)
				:: else -> skip
				fi
#endif
			:: else -> pass(again)
			fi;
			/* kevd_pull_missed(), then kevd_poll_release() */
			atomic {
				if
				:: missed && passes < 2 -> missed = 0; passes++
				:: missed && passes >= 2 -> missed = 0; runq!1; break
				:: !missed -> sched = 0; break
				fi
			}
		od
	:: break	/* it stops calling */
	od
}

active proctype monitor()
{
	/* the waiter never sleeps on completions nobody will signal */
	timeout -> assert(!asleep || cq == 0)
}
#else
active proctype monitor()
{
	timeout -> assert(cq == 0 && ring == N)
}
#endif
