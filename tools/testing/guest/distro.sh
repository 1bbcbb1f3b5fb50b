# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# kevd_mode=distro: the README's "On a real machine", on Debian's own
# kernel image (tools/testing/distro.sh boots it). The initramfs holds what
# "make install" installed (kevd.ko under updates/), the samples and the
# out-of-tree consumer built against the same distribution headers, and
# the image's own ib_core, rdma_rxe and dummy. Sourced by guest-init.sh.

# One KTAP result: the command's status; its last output lines if not.
distro_ok() { # test-name command...
	name=$1
	shift
	if "$@" >"$distro_log" 2>&1; then
		ktap_result ok "$name"
	else
		ktap_result not-ok "$name" "$(tail -n 3 "$distro_log" | tr '\n' ' ')"
	fi
}

distro_installed_kevd() {
	$MI -F filename kevd | grep -q "/lib/modules/$kver/updates/kevd.ko" &&
		[ "$(cat /sys/module/kevd/version)" = "$($MI -F version kevd)" ]
}

distro_param_is() { # parameter value
	[ "$(cat "$params_dir/$1")" = "$2" ]
}

distro_demo() {
	$MP kevd_demo || return 1
	lines=$(dmesg | grep 'kevd-demo mode=')
	[ -n "$lines" ] && echo "$lines" &&
		! echo "$lines" | grep -v ' lost=0 dup=0 ' | grep -q .
}

distro_consumer() {
	$MP kevd_consumer && dmesg | grep -q 'kevd-consumer: ok (0)'
}

distro_unload() {
	for m in kevd_pingpong kevd_rc kevd_consumer kevd_demo kevd; do
		[ -d /sys/module/$m ] && { rmmod $m || return 1; }
	done
	! kevd_loaded
}

distro_suite() {
	distro_log=$TMP/kevd-distro.log
	pp_log=$TMP/kevd-distro-pingpong.log
	ktap_begin kevd_distro $((7 + pingpong_nresults))
	# as the README: the product, with policy parameters, by kmod
	distro_ok modprobe_kevd $MP kevd default_policy=single poll_budget=64
	distro_ok installed_module_loaded distro_installed_kevd
	distro_ok parameters_in_effect distro_param_is default_policy single
	distro_ok demo distro_demo
	distro_ok out_of_tree_consumer distro_consumer
	distro_ok rxe_device rxe_device
	$MP kevd_pingpong device=rxe0 iterations=400 depth=16 rounds=3
	echo "pingpong_rc=$?" >"$pp_log"
	dmesg | grep -E 'kevd-e2e(-teardown)? ' >>"$pp_log"
	pingpong_results rxe0 "$pp_log"
	distro_ok unload distro_unload
	ktap_end
	sed 's/^/# /' "$pp_log"
}
