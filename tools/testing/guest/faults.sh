# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The kevd_removal and kevd_lifecycle suites (both kernels) and
# kevd_kmemleak (the kernel with kmemleak, UML:
# tools/testing/configs/fault.config). Sourced by guest-init.sh.

# Last in the boot, after every other suite has loaded and unloaded its
# modules: a kmemleak scan must find nothing unreferenced. kmemleak
# reports an object only once it is 5 s old, so the suites before this
# one (the KUnit suites, with kevd_fault's fail-nth walks, the benchmark
# smoke and the end-to-end suite) are all covered; the report goes to the
# console.
kmemleak_suite() {
	kl=/sys/kernel/debug/kmemleak
	[ -e $kl ] || return 0
	ktap_begin kevd_kmemleak 1
	echo scan >$kl
	leaks=$(grep -c '^unreferenced object' $kl)
	if [ "$leaks" = 0 ]; then
		ktap_result ok no_unreferenced_objects
	else
		sed 's/^/# /' $kl | head -n 200
		ktap_result not-ok no_unreferenced_objects "$leaks unreferenced objects"
	fi
	ktap_end
}

# Objects in use in each kmalloc cache, as "name count" lines in file $1;
# fails without /proc/slabinfo. Each cache is shrunk first: that flushes
# its per-CPU slabs, whose free objects /proc/slabinfo otherwise counts
# as in use (up to a whole slab, 512 objects of kmalloc-8), and frees its
# empty slabs, so two snapshots differ by what was allocated and kept.
kmalloc_snapshot() {
	[ -r /proc/slabinfo ] || return 1
	for s in /sys/kernel/slab/kmalloc-*/shrink; do
		[ -w "$s" ] && echo 1 >"$s"
	done
	awk '/^kmalloc-/ { print $1, $2 }' /proc/slabinfo >"$1"
}

# The growth from snapshot $1 to snapshot $2: the total, then each cache
# that grew, as name+objects.
kmalloc_growth() {
	awk 'NR == FNR { was[$1] = $2; next }
	     { d = $2 - was[$1]; t += d; if (d > 0) g = g " " $1 "+" d }
	     END { print t + 0 g }' "$1" "$2"
}

# The module lifecycle (before kevd_kmemleak, which then covers it):
# kevd_cycles (default 100 on UML, 10 on SMP) times, load kevd with one of four parameter
# sets, kevd_lifecycle (EVDs on every stream: software, the CM streams
# with an async EVD, DTO on the fake HCA and on rxe0), unload all. Then a
# consumer that leaves three EVDs open at its unload: kevd must report
# each, by name and owner, free them, and unload itself.
lifecycle_suite() {
	# 100 cycles where kmemleak then scans (UML); 10 on the KCSAN kernel,
	# which checks the races of load and unload and the leak report
	cycles=10
	[ -e /sys/kernel/debug/kmemleak ] && cycles=100
	cycles=${kevd_cycles:-$cycles}
	lc_log=$TMP/kevd-lifecycle.log
	: >"$lc_log"
	ktap_begin kevd_lifecycle 4
	rdma_devices >/dev/null 2>&1
	ok=0 i=0 bad=
	before=
	while [ $i -lt "$cycles" ]; do
		case $((i % 4)) in
		0) p="default_policy=disable nr_pollers=1" ;;
		1) p="default_policy=single poll_budget=1 defer_arm=0" ;;
		2) p="default_policy=notify default_qlen=4096 notify_check=poll" ;;
		*) p="default_policy=many nr_pollers=2 defer_arm=64" ;;
		esac
		# shellcheck disable=SC2086 # $p: several parameters
		if $MP kevd $p >>"$lc_log" 2>&1 &&
		   $MP kevd_lifecycle device=rxe0 >>"$lc_log" 2>&1 &&
		   rmmod kevd_lifecycle && rmmod kevd_fake_hca && rmmod kevd; then
			ok=$((ok + 1))
		else
			bad="cycle $i ($p): $(tail -n 2 "$lc_log" | tr '\n' ' ')"
			rmmod kevd_lifecycle 2>/dev/null
			unload_all
		fi
		# the first cycles warm the caches; count from the tenth
		[ $i = 9 ] && kmalloc_snapshot "$TMP/kmalloc.10" && before=1
		i=$((i + 1))
	done
	after=
	[ -n "$before" ] && kmalloc_snapshot "$TMP/kmalloc.$cycles" &&
		after=$(kmalloc_growth "$TMP/kmalloc.10" "$TMP/kmalloc.$cycles")
	if [ $ok = "$cycles" ]; then
		ktap_result ok "load_use_unload_${cycles}_cycles"
	else
		ktap_result not-ok "load_use_unload_${cycles}_cycles" "$ok of $cycles; $bad"
	fi
	if dmesg | grep -q 'kevd: kevd_lifecycle left'; then
		ktap_result not-ok no_evd_left_by_a_clean_consumer "$(dmesg | grep 'kevd: kevd_lifecycle left' | head -n 1)"
	else
		ktap_result ok no_evd_left_by_a_clean_consumer
	fi
	# a leak of one object per cycle would show as $cycles - 10 more
	if [ -z "$after" ] || [ "$cycles" -lt 50 ]; then
		ktap_result skip kmalloc_objects_flat "needs /proc/slabinfo and 50 cycles (UML)"
	elif [ "${after%% *}" -lt $((cycles - 10)) ]; then
		echo "# kmalloc objects from cycle 10 to cycle $cycles: $after"
		ktap_result ok kmalloc_objects_flat
	else
		ktap_result not-ok kmalloc_objects_flat "from cycle 10 to cycle $cycles: $after"
	fi
	# a consumer that leaves EVDs open
	$MP kevd >>"$lc_log" 2>&1 && $MP kevd_lifecycle leak=1 >>"$lc_log" 2>&1 &&
		rmmod kevd_lifecycle
	reported=$(dmesg | grep -c 'kevd: kevd_lifecycle left evd[0-9]* open .*: freed')
	dmesg | grep 'kevd: kevd_lifecycle left' | sed 's/^/# /'
	if [ "$reported" = 3 ] && ! grep -q . /sys/kernel/debug/kevd/evds &&
	   rmmod kevd_fake_hca && rmmod kevd; then
		ktap_result ok evds_left_open_reported_and_freed
	else
		ktap_result not-ok evds_left_open_reported_and_freed "$reported of 3 reported"
		unload_all
	fi
	ktap_end
}

# Wait (bounded: 120 s) until the kernel log has a line with TEXT, or
# until process PID has exited.
wait_log() { # text pid
	n=0
	while ! dmesg | grep -q "$1"; do
		# it may have printed TEXT since the look, then exited
		kill -0 "$2" 2>/dev/null || { dmesg | grep -q "$1"; return; }
		n=$((n + 1))
		[ $n -gt 1200 ] && return 1
		sleep 0.1
	done
}

# One removal: load MODULE with PARAMS in the background, wait for MARK
# in the kernel log, delete DEV, wait for the load to end. The load's
# line with RESULT goes to $line (and to $rm_log as cycle $i). Success
# (0): the load got to MARK, ended with status 0, its line matches OK
# (grep) and DEV is back; otherwise the modules are unloaded and DEV
# added again if it is gone, and $bad says what happened (with the
# samples' last error lines: CI shows only the failure's reason).
removal_cycle() { # dev mark result ok module params...
	dev_=$1 mark_=$2 result_=$3 ok_=$4
	shift 4
	dmesg -c >/dev/null
	$MP "$@" >>"$rm_log" 2>&1 &
	pid=$!
	waited=0
	wait_log "$mark_" $pid && waited=1
	rdma link delete "$dev_"
	wait $pid
	rc=$?
	line=$(dmesg | grep "$result_")
	echo "$dev_ cycle $i${what_:+ ($what_)}: $line" >>"$rm_log"
	rmmod "$1" 2>/dev/null
	rmmod kevd_rc 2>/dev/null
	if [ $waited = 1 ] && [ $rc = 0 ] && echo "$line" | grep -q "$ok_" &&
	   rdma_readd "$dev_"; then
		return 0
	fi
	# the cycle's last errors of the samples' and their modes' results
	# but the clean ones (dmesg -c at its start)
	why_=$(dmesg | grep -e 'kevd_rc: ' -e 'kevd_pingpong: ' \
		-e 'kevd-e2e device=' -e 'kevd-e2e-cm: ' \
		-e 'kevd-e2e-cm-removal: ' -e 'kevd: ' |
		grep -v 'kevd-e2e device=.* lost=0 dup=0 bad=0 misordered=0 .* rc=0$' |
		tail -n 3 | sed 's/^\[[^]]*\] *//' | tr '\n' ';')
	bad="cycle $i (${what_:+$what_, }after '$mark_', waited=$waited, rc=$rc): ${line:-no line '$result_'}${why_:+; $why_}"
	rdma link show "$dev_" >/dev/null 2>&1 || rdma_readd "$dev_"
	return 1
}

# Device removal under traffic: kevd_removal_cycles times (default 20) per
# soft device, kevd_pingpong runs its modes until the device is deleted
# ("rdma link delete"), then the device is added again. Every operation
# in flight must come back as a completion (flushed or failed), nothing
# lost, duplicated or corrupted, the load must end (no hang) and
# kevd_pingpong unload; one cycle in four deletes the device as soon as
# the run has started (during the connection setup), the others once
# traffic flows, each in one delivery mode (modes=, in turn), so that the
# removal meets every mode's paths. Then kevd_removal_cm_cycles times
# (default 5) per device, a consumer without an ib_client: kevd_connect
# holds a connection with receives posted until the device goes; it must
# learn it from DEVICE_REMOVAL (IA_CATASTROPHIC on its async EVD), get
# every receive back flushed (8 on each side, and 8 that a request left
# pending had posted on the QP it made on kevd_cr_id(): that request
# outlives the removal, and the consumer's reject ends it) and tear down,
# so that the removal ends. Restrack, lockdep and KASAN/KCSAN reports fail
# the boot.
removal_cm() { # device cycles
	ok=0 i=0 bad='' cat=0
	while [ $i -lt "$2" ]; do
		i=$((i + 1))
		if removal_cycle "$1" "kevd-e2e-cm-removal device=$1 running" \
		   "kevd-e2e-cm-removal device=$1 catastrophic=" \
		   "catastrophic=[1-9][0-9]* flushed=24 ok rc=0\$" \
		   kevd_connect devices="$(cm_devs "$1")" until_removed=120; then
			ok=$((ok + 1))
			c=${line#* catastrophic=}
			cat=$((cat + ${c%% *}))
		fi
	done
	echo "# $1: $ok of $2 removals seen through DEVICE_REMOVAL ($cat IA_CATASTROPHIC events)"
	if [ $ok = "$2" ]; then
		ktap_result ok "${1}_removal_through_the_cm_${2}_times"
	else
		ktap_result not-ok "${1}_removal_through_the_cm_${2}_times" "$ok of $2; $bad"
	fi
}

removal_suite() {
	rm_log=$TMP/kevd-removal.log
	: >"$rm_log"
	cycles=${kevd_removal_cycles:-20}
	devs="siw0 rxe0"
	rm_modes="dequeue wait single notify many seed"
	ktap_begin kevd_removal 4
	rdma_devices >/dev/null 2>&1
	$MP kevd default_policy=disable
	for dev in $devs; do
		ok=0 i=0 bad='' flushed=0 errors=0 ops=0 j=0
		while [ $i -lt "$cycles" ]; do
			i=$((i + 1))
			mark=started what_=
			if [ $((i % 4)) != 1 ]; then
				set -- $rm_modes
				shift $((j % $#))
				mark=running what_="modes=$1" j=$((j + 1))
			fi
			# shellcheck disable=SC2086 # what_: one word or none
			if removal_cycle $dev "kevd-e2e-removal device=$dev $mark" \
			   "kevd-e2e-removal device=$dev rounds=" \
			   ' lost=0 dup=0 bad=0 misordered=0 rc=0 ok$' \
			   kevd_pingpong device=$dev until_removed=120 \
			   iterations=400 depth=16 $what_; then
				ok=$((ok + 1))
				f=${line#* flushed=}
				e=${line#* errors=}
				o=${line#* ops=}
				flushed=$((flushed + ${f%% *}))
				errors=$((errors + ${e%% *}))
				ops=$((ops + ${o%% *}))
			fi
		done
		echo "# $dev: $ok of $cycles removals: $ops operations, $flushed flushed, $errors failed in flight"
		if [ $ok = "$cycles" ]; then
			ktap_result ok "${dev}_removed_under_traffic_${cycles}_times"
		else
			ktap_result not-ok "${dev}_removed_under_traffic_${cycles}_times" "$ok of $cycles; $bad"
		fi
		what_=
		removal_cm "$dev" "${kevd_removal_cm_cycles:-5}"
	done
	# the soak's KUnit loop uses kevd meanwhile (guest/soak.sh)
	[ -n "${kevd_soak:-}" ] || rmmod kevd
	ktap_end
	sed 's/^/# /' "$rm_log"
}
