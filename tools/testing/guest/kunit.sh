# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The KUnit suites (kunit_tests/) and their second pass. Sourced by
# guest-init.sh.

# KUnit suites: each test module runs its suites when it loads. The SMP
# kernel runs them with defer_arm's default (what users get), UML with
# arming at once (defer_arm=0, the extreme). A second pass on each kernel
# runs the suites that depend on one parameter under its other extreme
# (kunit_pass); parse_console.py counts them as <suite>@<pass>.
kunit_suites() {
	defer=
	[ "$stage" = / ] || defer=defer_arm=0
	$MP kevd default_policy=disable poll_budget=64 $defer ||
		echo "KEVD-HARNESS: error: modprobe kevd failed"
	$MP kevd_test || echo "KEVD-HARNESS: error: modprobe kevd_test failed"
	unload_all
	if [ "$stage" = / ]; then
		# overlap and hand-off tests with a single poller
		kunit_pass nr_pollers=1 kevd_concurrency nr_pollers=1
	else
		# the arm window with the longest deferral, slow tests left out
		kunit_pass defer_arm=64 kevd_dto defer_arm=64
	fi
}

# kunit_pass <pass name> <suite glob> <kevd parameters...>: load kevd with
# the parameters and run the fast tests of the suites the glob names. The
# filter stays set: this is the boot's last KUnit load. (printf: a charp
# parameter written through sysfs keeps a trailing newline.)
kunit_pass() {
	name=$1 glob=$2
	shift 2
	kp=/sys/module/kunit/parameters
	printf %s "$glob" >$kp/filter_glob && printf %s "speed>slow" >$kp/filter ||
		echo "KEVD-HARNESS: error: cannot set KUnit's filter"
	echo "KEVD-HARNESS: pass $name"
	$MP kevd default_policy=disable poll_budget=64 "$@" ||
		echo "KEVD-HARNESS: error: modprobe kevd $* failed"
	$MP kevd_test || echo "KEVD-HARNESS: error: modprobe kevd_test failed"
	unload_all
	echo "KEVD-HARNESS: pass"
}

# kevd_mode=suites:kunitglob (development): only the KUnit tests that
# kevd_kunit_glob (<suite>.<test>, kevd-test's KEVD_KUNIT_GLOB) names,
# with the SMP kernel's defaults; several globs, comma-separated, run
# one after the other (KUnit takes one). (No attribute filter with a
# test glob: 6.12's KUnit faults on the two together.)
kunitglob_suite() {
	kp=/sys/module/kunit/parameters
	for g in $(echo "${kevd_kunit_glob:-*}" | tr , ' '); do
		printf %s "$g" >$kp/filter_glob ||
			echo "KEVD-HARNESS: error: cannot set KUnit's filter"
		$MP kevd default_policy=disable poll_budget=64 ||
			echo "KEVD-HARNESS: error: modprobe kevd failed"
		$MP kevd_test ||
			echo "KEVD-HARNESS: error: modprobe kevd_test failed"
		unload_all
	done
}
