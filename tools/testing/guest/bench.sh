# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The benchmark (tools/testing/bench/bench_*.c): the kevd_bench_smoke
# suite of make check, and the full run of kevd_mode=bench. Sourced by
# guest-init.sh.

# --- the benchmark (tools/testing/bench/bench_*.c) ----------------------
bench_cq_modes="kevd-single kevd-single-wc kevd-wait kevd-dequeue kevd-wait-batch
		kevd-dequeue-batch wq unbound-wq softirq kdapl-2006 floor"
bench_modes="$bench_cq_modes burst-16 scale-16 floor-drain"
for m in $bench_cq_modes; do bench_modes="$bench_modes rdma-$m"; done
bench_modes="$bench_modes rdma-pingpong-wait rdma-pingpong-batch rdma-pingpong-upcall"

# make check: kevd_bench smoke=1, one KTAP test per kevd-bench-smoke line;
# the rdma- lines are the same modes over siw0.
bench_smoke_suite() {
	nb=0
	for m in $bench_modes; do nb=$((nb + 1)); done
	rdma_devices
	$MP kevd_bench smoke=1 kernel=smoke rdma_dev=siw0
	brc=$?
	[ -d /sys/module/kevd_bench ] && rmmod kevd_bench
	unload_all
	ktap_begin kevd_bench_smoke $((nb + 1))
	if [ $brc = 0 ]; then ktap_result ok load_smoke
	else ktap_result not-ok load_smoke "modprobe kevd_bench smoke=1: rc=$brc"; fi
	for m in $bench_modes; do
		line=$(dmesg | grep "kevd-bench-smoke mode=$m " | tail -n 1)
		line=${line#*kevd-bench-smoke }
		if echo "$line" | grep -q ' ok$'; then
			ktap_result ok "$m"
		else
			ktap_result not-ok "$m" "${line:-no kevd-bench-smoke line}"
		fi
	done
	ktap_end
}

# kevd_mode=bench[:param=value:...]: the full benchmark.
bench_run() {
	# UML boots on the host's / (kevd_stage is a host path), QEMU on /.
	if [ "$stage" = / ]; then bk=smp; else bk=uml; fi
	bargs=$(echo "${kevd_mode#bench}" | tr ':' ' ')
	# The real-provider runs go over siw0, or the rdma_dev= in bargs,
	# at its address (given here: colons do not pass through bargs).
	dev=siw0
	for a in $bargs; do
		case $a in rdma_dev=*) dev=${a#rdma_dev=} ;; esac
	done
	rdma="rdma_dev=$dev rdma_addr=$(rdma_addr_of "$dev")"
	[ -n "$dev" ] || rdma=
	rdma_devices || rdma=
	if [ -n "${kevd_params:-}" ]; then
		echo "kevd-bench-harness: modprobe kevd $kevd_params"
		# shellcheck disable=SC2046
		$MP kevd $(echo "$kevd_params" | tr , ' ') || return 1
	fi
	echo "kevd-bench-harness: modprobe kevd_bench kernel=$bk $rdma$bargs"
	# shellcheck disable=SC2086
	$MP kevd_bench kernel=$bk $rdma $bargs || return 1
	rmmod kevd_bench
	unload_all
}

# perf script's samples (a "[cpu]" line, then one "addr symbol" line per
# frame, innermost first) folded into "kind<TAB>pct<TAB>cpu<TAB>function"
# lines: "self" where the sample hit, "incl" for every module function
# on the stack. A module address is named from the sorted kallsyms lines
# in $1 (perf saw the modules load after it started and has no map of
# them), compared as 16-digit strings: awk's numbers cannot hold 64
# bits. cpu-clock samples in an interrupt, so the time of a section run
# with interrupts off lands on the unlock that ends it: such a sample
# counts for the function that called the lock primitive, marked
# "<primitive>".
profile_fold() { # ksyms
	awk -v ks="$1" '
	BEGIN {
		while ((getline l < ks) > 0) {
			split(l, f, " ")
			n++
			a[n] = f[1]
			s[n] = f[3] " " f[4]
		}
	}
	function name(x,   lo, hi, mid) {
		while (length(x) < 16)
			x = "0" x
		if (n == 0 || x < a[1])
			return "0x" x
		lo = 1
		hi = n
		while (lo < hi) {
			mid = int((lo + hi + 1) / 2)
			if (a[mid] <= x)
				lo = mid
			else
				hi = mid - 1
		}
		return s[lo]
	}
	function lockish(f) {
		return f ~ /^(_raw_|__raw_|do_raw_|queued_spin|native_queued)/
	}
	function sample(   i, label, seen) {
		if (!nf)
			return
		total[cpu]++
		all++
		label = fr[1]
		if (lockish(label)) {
			for (i = 2; i <= nf && lockish(fr[i]); i++)
				;
			if (i <= nf)
				label = fr[i] " <" fr[1] ">"
		}
		self[cpu "	" label]++
		for (i = 1; i <= nf; i++)
			if (fr[i] ~ /\]$/ && !((cpu, fr[i]) in seen)) {
				seen[cpu, fr[i]] = 1
				incl[cpu "	" fr[i]]++
			}
		nf = 0
	}
	/^\[[0-9]+\]/ {
		sample()
		cpu = substr($1, 2, length($1) - 2)
		next
	}
	NF >= 2 {
		f = $2
		if (f == "[unknown]")
			f = name($1)
		fr[++nf] = f
	}
	END {
		sample()
		for (c in total)
			printf "cpu	%.2f	%s	all\n", 100 * total[c] / all, c
		for (k in self)
			printf "self	%.2f	%s\n", 100 * self[k] / all, k
		for (k in incl)
			printf "incl	%.2f	%s\n", 100 * incl[k] / all, k
	}'
}

# kevd_mode=profile:<mode>,<mode>...[:param=value:...] (kevd-test
# profile, not part of check): each mode's saturated runs alone under
# perf (the initramfs carries it), system-wide, sampled on cpu-clock
# with call chains; the report, by CPU and function, goes to the console as
# "kevd-profile mode=<mode>: ..." lines.
profile_run() {
	spec=${kevd_mode#profile:}
	modes=$(echo "${spec%%:*}" | tr , ' ')
	bargs=
	case $spec in *:*) bargs=$(echo "${spec#*:}" | tr ':' ' ') ;; esac
	command -v perf >/dev/null || { echo "kevd-profile: no perf"; return 1; }
	rc=0
	for m in $modes; do
		data=$TMP/perf-$m.data
		# shellcheck disable=SC2086
		perf record -a -g -e cpu-clock -F 4000 -o "$data" -- \
			$MP kevd_bench kernel=smp saturated_only=1 only="$m" \
			$bargs >"$TMP/perf-$m.log" 2>&1
		prc=$?
		sed "s/^/kevd-profile mode=$m: perf: /" "$TMP/perf-$m.log"
		if [ $prc != 0 ] || [ ! -d /sys/module/kevd_bench ]; then
			echo "kevd-profile mode=$m: perf record: rc=$prc"
			rc=1
			unload_all
			continue
		fi
		dmesg | grep "kevd-bench-raw run .*mode=$m " |
			sed "s/^[^k]*/kevd-profile mode=$m: /"
		grep ' [tT] .*\[' /proc/kallsyms | sort >"$TMP/ksyms"
		perf script -i "$data" -F cpu,ip,sym 2>/dev/null |
			profile_fold "$TMP/ksyms" | sort -t '	' -k1,1 -k2,2rn |
			awk -F '	' -v m="$m" '$2 >= 0.3 {
				printf "kevd-profile mode=%s: %s %6.2f%% cpu %s %s\n", m, $1, $2, $3, $4 }'
		rm -f "$data"
		rmmod kevd_bench
		unload_all
	done
	return $rc
}

# kevd_mode=trace:<mode>,<mode>...[:param=value:...] (kevd-test trace,
# not part of check; the smp-trace kernel): each mode's kevd_bench runs
# (one repetition: saturated, at 10,000/s, then under load) with the
# scheduler's switches and wake-ups, the notification IPIs and kevd's
# tracepoints recorded through tracefs (a ring of 16 MiB per CPU, which
# keeps the end of the module's run). The console gets the bench's lines
# and TRACE_LINES lines from the middle of the run under load, as
# "kevd-trace mode=<mode>: ..." lines.
TRACE_LINES=1500

trace_run() {
	spec=${kevd_mode#trace:}
	modes=$(echo "${spec%%:*}" | tr , ' ')
	bargs=
	case $spec in *:*) bargs=$(echo "${spec#*:}" | tr ':' ' ') ;; esac
	tr=/sys/kernel/tracing
	[ -d $tr/events ] || mount -t tracefs nodev $tr 2>/dev/null
	[ -d $tr/events ] || { echo "kevd-trace: no tracefs"; return 1; }
	$MP kevd || return 1	# its events exist once it is loaded
	rc=0
	for m in $modes; do
		echo 0 >$tr/tracing_on
		echo 16384 >$tr/buffer_size_kb
		echo >$tr/trace
		echo 'sched:sched_switch sched:sched_wakeup kevd:*
irq_vectors:call_function_single_entry printk:console' >$tr/set_event ||
			{ echo "kevd-trace: cannot enable the events"; return 1; }
		echo 1 >$tr/tracing_on
		# shellcheck disable=SC2086
		$MP kevd_bench kernel=smp only="$m" reps=1 events=200000 \
			run_ms=100 rates=10000 prod_burst=16 $bargs \
			>"$TMP/trace-$m.log" 2>&1 || rc=1
		echo 0 >$tr/tracing_on
		sed "s/^/kevd-trace mode=$m: modprobe: /" "$TMP/trace-$m.log"
		dmesg | grep "kevd-bench-raw .*mode=$m " |
			sed "s/^[^k]*/kevd-trace mode=$m: /"
		# the run under load: after the fixed rate's line, before its own
		awk '/kevd-bench-raw loaded/ { exit } go { print }
		     /kevd-bench-raw run .*rate=10000 / { go = 1 }' \
			$tr/trace >"$TMP/trace-$m.txt"
		n=$(wc -l <"$TMP/trace-$m.txt")
		echo "kevd-trace mode=$m: lines=$n (of the run under load)"
		tail -n +$((n / 2)) "$TMP/trace-$m.txt" | head -n $TRACE_LINES |
			sed "s/^/kevd-trace mode=$m: /"
		rm -f "$TMP/trace-$m.txt"
		rmmod kevd_bench 2>/dev/null
	done
	echo >$tr/set_event
	unload_all
	return $rc
}
