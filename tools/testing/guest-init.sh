#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# init of the kevd test kernels (UML with the host's / as hostfs root, or
# the QEMU initramfs). The kernel command line passes:
#   kevd_mode=check|run|bench|distro|soak:<min>|suites:<list>|udapl|profile:<modes>
#                                                   what to do
#   kevd_stage=DIR         root of lib/modules/<release>/ (UML: the host
#                          path of the staging dir; QEMU: /)
#   kevd_tmp=DIR           where to mount a scratch tmpfs (default /tmp)
# Everything it reports goes to the console, which the harness parses:
# KTAP for the shell-level suites, between the KEVD-HARNESS markers.
# This script sets up the guest and dispatches on kevd_mode; the suites
# and modes are in guest/: ktap.sh (the KTAP emitter), lib.sh (modules,
# soft RDMA devices), modparams.sh, kunit.sh, bench.sh (the smoke suite
# and the full benchmark), e2e.sh, demo.sh (kevd_mode=run), distro.sh
# (kevd_mode=distro: Debian's own kernel image), faults.sh (device
# removal, the module lifecycle, kmemleak), soak.sh (kevd_mode=soak:<min>,
# make soak); kevd_mode=suites:<a>,<b> runs only those (development).

# shellcheck disable=SC2034 # IP, params_dir: used by guest/*.sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
# A writable scratch dir. Under UML the root is the host's / read-only,
# and the clone (with the staged modules) may itself live under /tmp:
# the harness passes a dir of its own to mount over (kevd_tmp).
TMP=${kevd_tmp:-/tmp}
mount -t tmpfs tmpfs "$TMP" 2>/dev/null

stage=${kevd_stage:-/}
# kmod's modprobe, by path: busybox's sh prefers its own applet, which
# retries a failed load with init_module (every bad load would run twice).
MP=modprobe
MI=modinfo
for d in /sbin /usr/sbin; do
	case $(readlink -f $d/modprobe 2>/dev/null) in
	*/kmod) MP=$d/modprobe; MI=$d/modinfo; break ;;
	esac
done
if [ "$stage" != / ]; then
	MP="$MP -d $stage"
	MI="$MI -b $stage"
fi
kver=$(uname -r)
# iproute2's ip: busybox's sh may prefer its own ip applet, which lacks
# "link add type dummy" and "nodad".
IP=ip
for c in /usr/sbin/ip /usr/bin/ip /sbin/ip /bin/ip; do
	[ -x "$c" ] && [ ! -L "$c" ] && { IP=$c; break; }
done
params_dir=/sys/module/kevd/parameters

# The suites and modes live in guest/ (beside this script under UML,
# /guest in the initramfs), one file each, sourced: they share this
# shell's state (the soft RDMA devices are set up once per boot).
guest_dir=${0%/*}/guest
for f in ktap lib modparams kunit bench e2e demo distro faults soak udapl; do
	if [ -r "$guest_dir/$f.sh" ]; then
		# shellcheck source=/dev/null
		. "$guest_dir/$f.sh"
	else
		echo "KEVD-HARNESS: error: $guest_dir/$f.sh missing"
	fi
done

echo "KEVD-HARNESS: begin kernel=$kver mode=${kevd_mode:-check}"
case ${kevd_mode:-check} in
check)
	modparams_suite
	kunit_suites
	bench_smoke_suite
	e2e_suite iterations=400 depth=16 rounds=3
	removal_suite
	badinput_suite
	lifecycle_suite
	kmemleak_suite
	;;
bench|bench:*)
	if bench_run; then echo "KEVD-HARNESS: bench ok"; else echo "KEVD-HARNESS: bench failed"; fi
	;;
distro)
	distro_suite
	;;
suites:*)
	# development: only these suites, e.g. kevd_mode=suites:e2e,removal
	for f in $(echo "${kevd_mode#suites:}" | tr , ' '); do
		"${f}_suite"
	done
	;;
soak:*)
	soak_suite "${kevd_mode#soak:}"
	;;
profile:*)
	if profile_run; then echo "KEVD-HARNESS: profile ok"; else echo "KEVD-HARNESS: profile failed"; fi
	;;
trace:*)
	if trace_run; then echo "KEVD-HARNESS: trace ok"; else echo "KEVD-HARNESS: trace failed"; fi
	;;
udapl)
	if udapl_run; then echo "KEVD-HARNESS: udapl ok"; else echo "KEVD-HARNESS: udapl failed"; fi
	;;
run)
	if demo; then echo "KEVD-HARNESS: run ok"; else echo "KEVD-HARNESS: run failed"; fi
	;;
esac
echo "KEVD-HARNESS: end"
sync
busybox poweroff -f 2>/dev/null || poweroff -f 2>/dev/null || reboot -f
