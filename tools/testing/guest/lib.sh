# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# What the guest's suites and modes share. Sourced by guest-init.sh, which
# sets MP and MI (kmod's modprobe and modinfo, -d/-b the staged modules),
# IP (iproute2's ip), stage, TMP and params_dir first.

kevd_loaded() { [ -d /sys/module/kevd ]; }

unload_all() {
	for m in kevd_test kevd_bench kevd_pingpong kevd_connect kevd_rc kevd_demo \
		 kevd_fake_hca kevd; do
		[ -d /sys/module/$m ] && rmmod $m
	done
	return 0
}

# Soft RDMA devices: siw and rxe, each over a dummy netdev. Once per boot:
# the benchmark smoke and the e2e suite share them.
rdma_devices() {
	[ -n "${rdma_up:-}" ] && return 0
	$MP siw || return 1
	rxe_device || return 1
	# rdma_cm does not run over lo (nor with 127/8 on another netdev):
	# siw gets its own dummy netdev with an IPv6 link-local address that
	# never leaves the guest.
	$IP link add dummy1 type dummy && $IP link set dummy1 up || return 1
	$IP -6 addr add fe80::2/64 dev dummy1 nodad || return 1
	rdma link add siw0 type siw netdev dummy1 || return 1
	rdma_up=1
	rdma link show
}

# rxe0 on dummy0, fe80::3: kevd_pingpong and kevd_connect reach it there
# with rdma_cm (their default addresses).
rxe_device() {
	$MP rdma_rxe && $MP dummy numdummies=0 || return 1
	$IP link set lo up
	$IP link add dummy0 type dummy && $IP link set dummy0 up || return 1
	$IP -6 addr add fe80::3/64 dev dummy0 nodad || return 1
	rdma link add rxe0 type rxe netdev dummy0
}

# Add a soft device again after "rdma link delete", on the same netdev.
rdma_readd() { # device
	case $1 in
	siw0) rdma link add siw0 type siw netdev dummy1 ;;
	rxe0) rdma link add rxe0 type rxe netdev dummy0 ;;
	*) return 1 ;;
	esac
}

# A soft device's rdma_cm address (rdma_devices, rxe_device), or nothing.
rdma_addr_of() { # device
	case $1 in
	siw0) echo fe80::2 ;;
	rxe0) echo fe80::3 ;;
	esac
}

# kevd_connect's device list: the soft devices and their rdma_cm addresses.
cm_devs() { # devices...
	list=
	for dev in "$@"; do
		a=$(rdma_addr_of "$dev")
		[ -n "$a" ] && list="${list:+$list,}$dev@$a"
	done
	echo "$list"
}
