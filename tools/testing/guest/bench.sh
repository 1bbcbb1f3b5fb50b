# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The benchmark (tools/testing/bench/bench_*.c): the kevd_bench_smoke
# suite of make check, and the full run of kevd_mode=bench. Sourced by
# guest-init.sh.

# --- the benchmark (tools/testing/bench/bench_*.c) ----------------------
bench_cq_modes="kevd-single kevd-wait kevd-dequeue kevd-wait-batch
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
