# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The kevd_e2e suite: kevd_pingpong and kevd_connect over siw and rxe.
# Sourced by guest-init.sh.

# kevd_pingpong's summary lines of one device in LOG: one KTAP result per
# mode (nothing lost, duplicated, corrupted or misordered) and one for the
# teardown with operations in flight. The count: pingpong_nresults.
pingpong_nresults=7
pingpong_results() { # device log
	for mode in dequeue wait single notify many seed; do
		# every line counts (a load that ran twice prints two)
		line=$(grep "kevd-e2e device=$1 mode=$mode " "$2" 2>/dev/null)
		if [ -n "$line" ] &&
		   ! echo "$line" | grep -v ' lost=0 dup=0 bad=0 misordered=0 .* rc=0$' | grep -q .; then
			ktap_result ok "${1}_$mode"
		else
			ktap_result not-ok "${1}_$mode" "${line:-no summary line}"
		fi
	done
	line=$(grep "kevd-e2e-teardown device=$1 " "$2" 2>/dev/null)
	if [ -n "$line" ] && ! echo "$line" | grep -v ' ok$' | grep -q .; then
		ktap_result ok "${1}_teardown_in_flight"
	else
		ktap_result not-ok "${1}_teardown_in_flight" "${line:-no teardown line}"
	fi
}

# kevd_pingpong on each device of kevd_e2e_devs (comma-separated; default
# siw0,rxe0) and every mode; one KTAP test per summary line. The CQ check
# after arming differs per kernel, so that each notify_check mode runs on
# live siw and rxe CQs: report on SMP, poll on UML (the bench smoke runs
# auto, the default).
e2e_suite() { # pingpong parameters...
	e2e_log=$TMP/kevd-e2e.log
	e2e_devs=$(echo "${kevd_e2e_devs:-siw0,rxe0}" | tr , ' ')
	check=poll cm_cycles=${kevd_cm_cycles:-2}
	[ "$stage" = / ] && check=report cm_cycles=${kevd_cm_cycles:-1000}
	devs_ok=1
	rdma_devices || devs_ok=0
	if [ $devs_ok = 1 ]; then
		$MP kevd default_policy=disable poll_budget=64 notify_check=$check
		used=$(cat $params_dir/notify_check)
		$MP kevd_pingpong device="${kevd_e2e_devs:-siw0,rxe0}" "$@"
		echo "pingpong_rc=$? notify_check=$used" >$e2e_log
		dmesg | grep -E 'kevd-e2e(-teardown)? ' >>$e2e_log
		rmmod kevd_pingpong 2>/dev/null
		rmmod kevd_rc 2>/dev/null
		$MP kevd_connect devices="$(cm_devs $e2e_devs)" cycles=$cm_cycles
		echo "connect_rc=$?" >>$e2e_log
		dmesg | grep -E 'kevd-e2e-cm ' >>$e2e_log
		rmmod kevd_connect 2>/dev/null
		rmmod kevd
	fi
	ndev=0
	for dev in $e2e_devs; do ndev=$((ndev + 1)); done
	ktap_begin kevd_e2e $((ndev * (pingpong_nresults + 1) + 2))
	if [ $devs_ok = 1 ]; then ktap_result ok soft_rdma_devices
	else ktap_result not-ok soft_rdma_devices "rdma link add failed"; fi
	if [ "${used:-}" = $check ]; then ktap_result ok notify_check_$check
	else ktap_result not-ok notify_check_$check "kevd ran with '${used:-}'"; fi
	for dev in $e2e_devs; do
		pingpong_results "$dev" $e2e_log
		line=$(grep "kevd-e2e-cm device=$dev " $e2e_log 2>/dev/null)
		if [ -n "$line" ] && ! echo "$line" | grep -v ' ok rc=0$' | grep -q .; then
			ktap_result ok "${dev}_connection_lifecycle"
		else
			ktap_result not-ok "${dev}_connection_lifecycle" "${line:-no kevd-e2e-cm line}"
		fi
	done
	ktap_end
	[ -f $e2e_log ] && sed 's/^/# /' $e2e_log
}
