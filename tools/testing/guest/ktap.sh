# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh
#
# KTAP from the shell, for the guest's shell-level suites: one suite per
# document, as parse_console.py reads them. Sourced by guest-init.sh.

# --- a KTAP suite written from the shell ---------------------------------
ktap_n=0
ktap_fail=0
ktap_begin() { # name count
	echo "KTAP version 1"
	echo "1..1"
	echo "    KTAP version 1"
	echo "    # Subtest: $1"
	echo "    1..$2"
	ktap_suite=$1
	ktap_n=0
	ktap_fail=0
}
ktap_result() { # ok|not-ok|skip name [diag]
	ktap_n=$((ktap_n + 1))
	if [ "$1" = ok ]; then
		echo "    ok $ktap_n $2"
	elif [ "$1" = skip ]; then
		echo "    ok $ktap_n $2 # SKIP $3"
	else
		# every line of the reason names the test (parse_console.py)
		[ -n "$3" ] && printf '%s\n' "$3" | sed "s|^|    # $2: |"
		echo "    not ok $ktap_n $2"
		ktap_fail=1
	fi
}
ktap_end() {
	if [ $ktap_fail = 0 ]; then echo "ok 1 $ktap_suite"; else echo "not ok 1 $ktap_suite"; fi
}
