# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# kevd_mode=run (make run): kevd at work on the soft RDMA devices.
# Sourced by guest-init.sh.

demo() {
	echo "kevd-run: modprobe kevd default_policy=single poll_budget=32 notify_check=poll"
	$MP kevd default_policy=single poll_budget=32 notify_check=poll || return 1
	for p in $params_dir/*; do
		echo "kevd-run: parameter $(basename "$p")=$(cat "$p")"
	done
	$MP kevd_demo || return 1
	rdma_devices || return 1
	echo "kevd-run: modprobe kevd_pingpong iterations=${kevd_iters:-5000} depth=32 rounds=3"
	$MP kevd_pingpong iterations=${kevd_iters:-5000} depth=32 rounds=3 || return 1
	echo "kevd-run: modprobe kevd_connect (request, reject, accept, traffic, disconnect)"
	$MP kevd_connect || return 1
	echo "kevd-run: totals: $(cat /sys/kernel/debug/kevd/stats)"
	unload_all
}
