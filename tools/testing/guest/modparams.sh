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
	     notify_check=sometimes defer_arm=65 defer_arm=-1 cq_dim=2 cq_dim=on
	     poll_budget=0x40"
	rounds="1 2 3 4 5"
	# Under QEMU TCG with KCSAN a load takes about a second: the parsing
	# is the same code on both kernels, so the x86_64 kernel checks one
	# bad value per parameter (UML checks them all).
	if [ "$stage" = / ]; then
		bad="poll_budget=0 default_qlen=1048577 nr_pollers=x
		     default_policy=teardown notify_check=sometimes defer_arm=65
		     cq_dim=2 poll_budget=0x40"
		rounds="1 2"
	fi
	nbad=0
	for b in $bad; do nbad=$((nbad + 1)); done
	ktap_begin kevd_modparams $((nbad + 7))
	for b in $bad; do
		check_bad_param "$b"
	done

	# Good non-default values are taken and reported back; decimal, a
	# leading zero included (not octal: 099 is 99).
	if $MP kevd default_policy=notify poll_budget=17 default_qlen=099 \
		nr_pollers=3 notify_check=poll defer_arm=5 cq_dim=1 &&
	   [ "$(cat $params_dir/default_policy)" = notify ] &&
	   [ "$(cat $params_dir/cq_dim)" = 1 ] &&
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

	# Each poller is bound to one CPU, and only kevd moves it: user space
	# cannot (kthread_bind(): sched_setaffinity() fails).
	np=0 moved=0 wide=
	for d in /proc/[0-9]*; do
		case $(cat "$d/comm" 2>/dev/null) in
		kevd_poll/*) ;;
		*) continue ;;
		esac
		np=$((np + 1))
		taskset -p 1 "${d#/proc/}" >/dev/null 2>&1 && moved=$((moved + 1))
		a=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$d/status")
		case $a in
		''|*[!0-9]*) wide="$wide '$a'" ;;
		esac
	done
	if [ $np = 3 ] && [ $moved = 0 ] && [ -z "$wide" ]; then
		ktap_result ok pollers_bound_not_movable
	else
		ktap_result not-ok pollers_bound_not_movable "$np pollers, $moved moved by taskset, allowed CPUs:$wide"
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
	# very long value (refused for its length, quoted up to 64 characters).
	dmesg -c >/dev/null
	long=$(printf '%0300d' 7)
	echo 0 >$params_dir/poll_budget 2>/dev/null
	echo "$long" >$params_dir/notify_check 2>/dev/null
	if dmesg | grep -q 'kevd: invalid poll_budget=0: expected an integer' &&
	   dmesg | grep -q "kevd: invalid notify_check=$(printf '%064d' 0)\.\.\.: expected at most 32 characters\$"; then
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

# One writer of garbage: passes over every parameter and every debugfs
# file of kevd, at least three and until process PID has exited, each
# value a write that must fail; prints one line per write that
# succeeded. Values: not numbers, out of range, signs, spaces, control
# characters, names that are almost right, and 5000 characters whose
# first 4096 (all that a sysfs store sees of one write) are zeros, a
# number in range.
garbage_writer() { # pid
	long=$(printf '%05000d' 9)
	r=0
	while [ $r -lt 3 ] || kill -0 "$1" 2>/dev/null; do
		r=$((r + 1))
		for f in $params_dir/* /sys/kernel/debug/kevd/*; do
			for v in abc -1 ' 5' '5 5' 1e3 4294967296 \
				 99999999999999999999999 "$long" single_ SINGLE \
				 'disable disable' "$(printf 'a\033[2J\001b')" ''; do
				case $f in
				*/poll_budget|*/defer_arm|*/default_qlen)
					[ "$v" = SINGLE ] && continue ;;
				esac
				if printf '%s\n' "$v" 2>/dev/null >"$f"; then
					echo "accepted: $f=$(printf %s "$v" | head -c 40)"
				fi
			done
		done
	done
}

# The values of kevd's parameters, one "name=value" per line.
param_values() {
	for f in $params_dir/*; do echo "${f##*/}=$(cat "$f")"; done
}

# Bad input from user space during traffic: two writers of garbage to
# every parameter and debugfs file of kevd while kevd_pingpong runs on
# rxe0 (and a third writer sets poll_budget, a good value, over and
# over). Every bad write fails, no parameter changes, the traffic loses
# nothing, and a rejected value's message is one line, its control
# characters escaped.
badinput_suite() {
	bi_log=$TMP/kevd-badinput.log
	: >"$bi_log"
	ktap_begin kevd_badinput 5
	rdma_devices >/dev/null 2>&1
	$MP kevd default_policy=single poll_budget=17 notify_check=poll \
		defer_arm=3 default_qlen=99
	before=$(param_values)
	dmesg -c >/dev/null
	$MP kevd_pingpong device=rxe0 iterations=2000 depth=16 rounds=1 \
		>>"$bi_log" 2>&1 &
	pp=$!
	garbage_writer $pp >"$TMP/kevd-garbage.1" 2>&1 &
	w1=$!
	garbage_writer $pp >"$TMP/kevd-garbage.2" 2>&1 &
	w2=$!
	good=0 goodfail=0
	while kill -0 $w1 2>/dev/null || kill -0 $w2 2>/dev/null; do
		if echo 17 >$params_dir/poll_budget; then
			good=$((good + 1))
		else
			goodfail=$((goodfail + 1))
		fi
	done
	wait $w1
	wait $w2
	wait $pp
	pp_rc=$?
	after=$(param_values)
	accepted=$(cat "$TMP/kevd-garbage.1" "$TMP/kevd-garbage.2")
	if [ -z "$accepted" ]; then
		ktap_result ok every_bad_write_fails
	else
		ktap_result not-ok every_bad_write_fails "$(echo "$accepted" | head -n 3 | tr '\n' ' ')"
	fi
	if [ "$before" = "$after" ] && [ "$good" -gt 0 ] && [ $goodfail = 0 ]; then
		ktap_result ok parameters_unchanged
	else
		ktap_result not-ok parameters_unchanged "before: $(echo $before) after: $(echo $after); $goodfail good writes failed"
	fi
	dmesg | grep -E 'kevd-e2e(-teardown)? ' >>"$bi_log"
	if [ $pp_rc = 0 ] && grep -q 'kevd-e2e-teardown device=rxe0 .* ok$' "$bi_log" &&
	   ! grep 'kevd-e2e device=rxe0 ' "$bi_log" | grep -v ' lost=0 dup=0 bad=0 misordered=0 .* rc=0$' | grep -q .; then
		ktap_result ok traffic_unharmed
	else
		ktap_result not-ok traffic_unharmed "kevd_pingpong rc=$pp_rc"
	fi
	rmmod kevd_pingpong 2>/dev/null
	rmmod kevd_rc 2>/dev/null
	# every rejected write said why, on one line, naming the parameter
	n=$(dmesg | grep -c 'kevd: invalid [a-z_]*=')
	if [ "$n" -gt 0 ] && ! dmesg | grep 'kevd: invalid' | grep -v -q 'kevd: invalid [a-z_]*=.*: expected '; then
		ktap_result ok rejections_explained
	else
		ktap_result not-ok rejections_explained "$n messages; $(dmesg | grep 'kevd: invalid' | grep -v ': expected ' | head -n 2)"
	fi
	# a control character is quoted escaped, not written to the log as is
	dmesg -c >/dev/null
	printf 'a\033[2J\001b\n' >$params_dir/notify_check 2>/dev/null
	# (busybox dmesg: syslog(2), raw, as a console prints it; /dev/kmsg
	# and util-linux dmesg escape by themselves)
	line=$( (busybox dmesg 2>/dev/null || dmesg) | grep 'kevd: invalid notify_check=')
	if [ -n "$line" ] && ! printf '%s' "$line" | od -An -c | grep -q '033\|001'; then
		ktap_result ok control_characters_escaped
	else
		ktap_result not-ok control_characters_escaped "$(printf '%s' "$line" | od -c | head -n 2 | tr '\n' ' ')"
	fi
	unload_all
	ktap_end
	sed 's/^/# /' "$bi_log"
}
