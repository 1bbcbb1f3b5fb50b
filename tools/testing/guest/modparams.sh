# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The kevd_modparams suite: kevd's module parameters, at load and at run
# time. Sourced by guest-init.sh.

# One bad value: the load must fail, leave no module, and say why (in a
# message logged by this attempt: the log is cleared first).
check_bad_param() { # name=value
	name=${1%%=*}
	dmesg -c >/dev/null
	if $MP kevd "$1" >/dev/null 2>&1; then
		ktap_result not-ok "reject_$1" "load succeeded"
		unload_all
	elif kevd_loaded; then
		ktap_result not-ok "reject_$1" "module left loaded"
	elif ! dmesg | grep -q "kevd: invalid $name="; then
		ktap_result not-ok "reject_$1" "no pr_err naming $name"
	else
		ktap_result ok "reject_$1"
	fi
}

modparams_suite() {
	bad="poll_budget poll_budget=0 poll_budget=65537 poll_budget=abc poll_budget=-1
	     default_qlen=0 default_qlen=1048577 nr_pollers=1025 nr_pollers=x
	     default_policy=teardown default_policy=bogus default_policy=
	     notify_check=sometimes defer_arm=65 defer_arm=-1"
	rounds="1 2 3 4 5"
	# Under QEMU TCG with KCSAN a load takes about a second: the parsing
	# is the same code on both kernels, so the x86_64 kernel checks one
	# bad value per parameter (UML checks them all).
	if [ "$stage" = / ]; then
		bad="poll_budget=0 default_qlen=1048577 nr_pollers=x
		     default_policy=teardown notify_check=sometimes defer_arm=65"
		rounds="1 2"
	fi
	nbad=0
	for b in $bad; do nbad=$((nbad + 1)); done
	ktap_begin kevd_modparams $((nbad + 6))
	for b in $bad; do
		check_bad_param "$b"
	done

	# Good non-default values are taken and reported back.
	if $MP kevd default_policy=notify poll_budget=17 default_qlen=99 \
		nr_pollers=3 notify_check=poll defer_arm=5 &&
	   [ "$(cat $params_dir/default_policy)" = notify ] &&
	   [ "$(cat $params_dir/defer_arm)" = 5 ] &&
	   [ "$(cat $params_dir/poll_budget)" = 17 ] &&
	   [ "$(cat $params_dir/default_qlen)" = 99 ] &&
	   [ "$(cat $params_dir/nr_pollers)" = 3 ] &&
	   [ "$(cat $params_dir/notify_check)" = poll ] &&
	   [ "$(ls -d /proc/[0-9]*/ 2>/dev/null | while read -r d; do cat "$d/comm" 2>/dev/null; done | grep -c '^kevd_poll/')" = 3 ]; then
		ktap_result ok accept_non_default_values
	else
		ktap_result not-ok accept_non_default_values
	fi

	unload_all

	# Every accepted value loads: the largest of each, 1024 pollers.
	if $MP kevd nr_pollers=1024 poll_budget=65536 default_qlen=1048576 \
		defer_arm=64 &&
	   [ "$(cat $params_dir/nr_pollers)" = 1024 ] &&
	   [ "$(ls -d /proc/[0-9]*/ 2>/dev/null | while read -r d; do cat "$d/comm" 2>/dev/null; done | grep -c '^kevd_poll/')" = 1024 ]; then
		ktap_result ok accept_largest_values
	else
		ktap_result not-ok accept_largest_values
	fi
	unload_all
	$MP kevd default_policy=notify poll_budget=17 default_qlen=99 \
		nr_pollers=3 notify_check=poll defer_arm=5

	# Runtime writes are validated the same way; a bad one keeps the value.
	if kevd_loaded && ! echo 0 >$params_dir/poll_budget 2>/dev/null &&
	   [ "$(cat $params_dir/poll_budget)" = 17 ] &&
	   echo 33 >$params_dir/poll_budget &&
	   [ "$(cat $params_dir/poll_budget)" = 33 ] &&
	   ! echo never >$params_dir/notify_check 2>/dev/null &&
	   echo report >$params_dir/notify_check &&
	   [ "$(cat $params_dir/notify_check)" = report ] &&
	   ! echo 2 >$params_dir/nr_pollers 2>/dev/null; then
		ktap_result ok runtime_writes_validated
	else
		ktap_result not-ok runtime_writes_validated
	fi
	# A rejected write's message is one line, as at load time, also for a
	# very long value (quoted up to 64 characters).
	dmesg -c >/dev/null
	long=$(printf '%0300d' 7)
	echo 0 >$params_dir/poll_budget 2>/dev/null
	echo "$long" >$params_dir/notify_check 2>/dev/null
	if dmesg | grep -q 'kevd: invalid poll_budget=0: expected an integer' &&
	   dmesg | grep -q "kevd: invalid notify_check=$(printf '%064d' 0): expected one of"; then
		ktap_result ok runtime_error_one_line
	else
		ktap_result not-ok runtime_error_one_line "$(dmesg | grep -A1 'kevd: invalid' | head -n 4)"
	fi
	unload_all

	# Load and unload, repeatedly, with and without parameters.
	ok=1
	for i in $rounds; do
		$MP kevd nr_pollers=$i || ok=0
		rmmod kevd || ok=0
		$MP kevd || ok=0
		rmmod kevd || ok=0
	done
	kevd_loaded && ok=0
	if [ $ok = 1 ]; then ktap_result ok load_unload_repeated
	else ktap_result not-ok load_unload_repeated; fi

	# The product module has no KUnit dependency (and modinfo must work).
	if ! deps=$($MI -F depends kevd 2>/dev/null); then
		ktap_result not-ok kevd_ko_free_of_kunit "modinfo kevd failed"
	elif echo "$deps" | grep -q kunit; then
		ktap_result not-ok kevd_ko_free_of_kunit "depends: $deps"
	else
		ktap_result ok kevd_ko_free_of_kunit
	fi
	ktap_end
}
