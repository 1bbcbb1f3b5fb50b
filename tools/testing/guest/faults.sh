# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The kevd_kmemleak suite, on kernels with kmemleak (the UML kernel:
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
