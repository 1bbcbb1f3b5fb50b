# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# uDAPL as a peer (kevd-test udapl, not part of check): Debian's dtest,
# server and client in this guest, over rxe0 with rdma-core's user-space
# rxe provider; the socket-CM provider exchanges the connection data over
# TCP on 127.0.0.1. Sourced by guest-init.sh; the initramfs carries
# dtest, the providers and /etc/dat.conf (kevd-test's udapl_initramfs).

udapl_prov=ofa-v2-rxe0-scm

# One dtest run: the server in the background, the client once the
# server listens on dtest's info port (15828; under TCG the server takes
# 20 s or more to get there). Every line of both goes to the console as
# "kevd-udapl: <name> server|client: ...".
udapl_pair() { # name dtest-options...
	name=$1
	shift
	out=$TMP/udapl-$name
	dtest -P $udapl_prov -s "$@" >"$out.server" 2>&1 &
	srv=$!
	i=0
	while ! busybox netstat -ltn 2>/dev/null | grep -q ':15828 '; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 $srv 2>/dev/null; then
			sed "s/^/kevd-udapl: $name server: /" "$out.server"
			echo "kevd-udapl: $name server never listened"
			kill $srv 2>/dev/null
			return 1
		fi
		sleep 1		# a poll for the port, not a synchronisation
	done
	dtest -P $udapl_prov -h 127.0.0.1 "$@" >"$out.client" 2>&1
	crc=$?
	wait $srv
	src=$?
	sed "s/^/kevd-udapl: $name server: /" "$out.server"
	sed "s/^/kevd-udapl: $name client: /" "$out.client"
	echo "kevd-udapl: $name rc client=$crc server=$src"
	[ $crc = 0 ] && [ $src = 0 ]
}

udapl_run() {
	rxe_device || return 1
	# dtest's client resolves the server's address with getaddrinfo()
	# and no hints: glibc's AI_ADDRCONFIG does not count 127.0.0.1 but
	# counts the IPv6 link-local addresses, and hands back
	# ::ffff:127.0.0.1, which the provider's IPv4 socket refuses. A
	# second loopback address makes IPv4 count; it stays in the guest.
	$IP addr add 127.0.0.2/8 dev lo || return 1
	export DAT_OVERRIDE=/etc/dat.conf DAPL_SCM_NETDEV=lo
	rc=0
	# events taken with dat_evd_wait(), then with dat_evd_dequeue()
	udapl_pair wait -b 64 -B 200 || rc=1
	udapl_pair poll -p -b 64 -B 200 || rc=1
	return $rc
}
