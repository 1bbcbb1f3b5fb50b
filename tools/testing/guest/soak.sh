# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=sh disable=SC2154 # set by guest-init.sh
#
# The soak (make soak, kevd-test soak; kevd_mode=soak:<minutes>). Two
# loops run side by side until the deadline, each finishing the run it
# is in:
#   - KUnit (kevd_test): kevd_consumer_random, the randomized
#     model-checked API stress, with a new seed each run (api_stress),
#     then kevd_dto_stress, every notify behaviour of the fake HCA with
#     arm-window injection and spurious notifications (dto_stress);
#   - the soft devices: kevd_connect's connect/disconnect cycles on siw0
#     and rxe0 (connect), then device removals under kevd_pingpong
#     traffic (removal, guest/faults.sh).
# Then one line per part and one KTAP test per part (suite kevd_soak):
#   kevd-soak part=<part> runs=N operations=N events=N lost=N dup=N failed=N
# operations: API calls (api_stress), completions (dto_stress), connect
# cycles (connect), device removals (removal); events: events seen, and
# for removal the operations that completed or were flushed or failed.
# dto_stress also prints the completions per notify behaviour. For
# connect, lost and duplicated events are not told apart: kevd_connect
# fails a run (failed=) whose event counts are not exact. The reports
# (BUG, WARNING, lockdep, KASAN, KCSAN) are counted by the host from the
# console (parse_console.py).

# "key=value" of LINE, or 0.
soak_field() { # line key
	v=$(printf '%s\n' "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p" | head -n 1)
	echo "${v:-0}"
}

# One kevd_test load that runs the tests GLOB (<suite>.<test>) names,
# slow ones too; the suite's KTAP log (KUnit's debugfs: the kernel log is
# the device loop's, which clears it) on stdout.
soak_kunit() { # glob kevd_test-parameters...
	glob=$1
	shift
	kp=/sys/module/kunit/parameters
	printf %s "$glob" >$kp/filter_glob
	printf %s "" >$kp/filter
	$MP kevd_test "$@" >/dev/null 2>&1
	cat "/sys/kernel/debug/kunit/${glob%%.*}/results"
	rmmod kevd_test 2>/dev/null
}

# The KUnit loop; its totals go to $TMP/kevd-soak.kunit.
soak_kunit_loop() { # deadline dto-events
	ar=0 aops=0 aev=0 alost=0 adup=0 afail=0
	dr=0 dev=0 dlost=0 ddup=0 dfail=0
	: >"$TMP/kevd-soak.dto"
	while [ "$(date +%s)" -lt "$1" ]; do
		seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
		log=$TMP/kevd-soak.kunit.log
		soak_kunit 'kevd_consumer.kevd_consumer_random' \
			consumer_seed="$seed" >"$log" 2>&1
		ar=$((ar + 1))
		# every case of the run (kinds and parts): their sums
		aops=$((aops + $(sed -n 's/.*kevd_consumer_random: seed.*, \([0-9]*\) operations.*/\1/p' "$log" |
			awk '{ n += $1 } END { print n + 0 }')))
		read -r p s d <<-EOF
		$(sed -n 's/.*kevd_consumer_random: \([0-9]*\) events posted, \([0-9]*\) seen, \([0-9]*\) duplicated.*/\1 \2 \3/p' "$log" |
			awk '{ p += $1; s += $2; d += $3 } END { print p + 0, s + 0, d + 0 }')
		EOF
		aev=$((aev + ${s:-0}))
		[ "${p:-0}" -gt "${s:-0}" ] && alost=$((alost + p - s))
		adup=$((adup + ${d:-0}))
		if grep -q 'not ok [0-9]* kevd_consumer_random' "$log" ||
		   ! grep -q 'ok [0-9]* kevd_consumer_random' "$log"; then
			afail=$((afail + 1))
		fi
		[ "$(date +%s)" -lt "$1" ] || break

		soak_kunit 'kevd_dto.kevd_dto_stress' dto_stress_events="$2" \
			>"$log" 2>&1
		dr=$((dr + 1))
		grep 'kevd_dto_stress: [a-z_]*/[a-z_]*: [0-9]* CQEs' "$log" |
			sed 's/.*kevd_dto_stress: //' >>"$TMP/kevd-soak.dto"
		if grep -q 'not ok [0-9]* kevd_dto_stress' "$log" ||
		   ! grep -q 'ok [0-9]* kevd_dto_stress' "$log"; then
			dfail=$((dfail + 1))
		fi
	done
	while read -r l; do
		n=$(printf '%s\n' "$l" | sed -n 's/^[a-z_]*\/[a-z_]*: \([0-9]*\) CQEs.*/\1/p')
		got=$(printf '%s\n' "$l" | sed -n 's/.*, \([0-9]*\) delivered.*/\1/p')
		dd=$(printf '%s\n' "$l" | sed -n 's/.*, \([0-9]*\) duplicated.*/\1/p')
		dev=$((dev + ${n:-0}))
		[ "${n:-0}" -gt "${got:-0}" ] && dlost=$((dlost + n - got))
		ddup=$((ddup + ${dd:-0}))
	done <"$TMP/kevd-soak.dto"
	echo "api_stress $ar $aops $aev $alost $adup $afail" >"$TMP/kevd-soak.kunit"
	echo "dto_stress $dr $dev $dev $dlost $ddup $dfail" >>"$TMP/kevd-soak.kunit"
}

# The device loop: connect cycles, then removals (5 per device), until
# the deadline.
soak_device_loop() { # deadline
	cr=0 cops=0 cev=0 cfail=0
	: >"$TMP/kevd-soak.connect.log"
	rr=0 rops=0 rev=0 rlost=0 rdup=0 rfail=0
	while [ "$(date +%s)" -lt "$1" ]; do
		dmesg -c >/dev/null 2>&1 || true
		# (removal_suite sets $devs: no shared name here)
		out=$($MP kevd_connect devices="$(cm_devs siw0 rxe0)" cycles=50 2>&1; echo "rc=$?")
		rmmod kevd_connect 2>/dev/null
		cr=$((cr + 1))
		dmesg >"$TMP/kevd-soak.connect"
		echo "run $cr: $out" >>"$TMP/kevd-soak.connect.log"
		grep 'kevd-e2e-cm ' "$TMP/kevd-soak.connect" >>"$TMP/kevd-soak.connect.log"
		for dev in siw0 rxe0; do
			l=$(grep "kevd-e2e-cm device=$dev " "$TMP/kevd-soak.connect" | tail -n 1)
			cops=$((cops + $(soak_field "$l" cycles)))
			for k in cr established peer_rejected disconnected flushed sends recvs; do
				cev=$((cev + $(soak_field "$l" $k)))
			done
			printf '%s\n' "$l" | grep -q ' ok rc=0$' || cfail=$((cfail + 1))
		done
		case $out in *rc=0) ;; *) cfail=$((cfail + 1)) ;; esac
		[ "$(date +%s)" -lt "$1" ] || break

		kevd_removal_cycles=5 removal_suite >"$TMP/kevd-soak.removal" 2>&1
		rr=$((rr + 1))
		rops=$((rops + $(grep -c 'kevd-e2e-removal device=.* rounds=' "$TMP/kevd-removal.log")))
		rev=$((rev + $(grep 'kevd-e2e-removal device=.* rounds=' "$TMP/kevd-removal.log" |
			sed -n 's/.* ops=\([0-9]*\) flushed=\([0-9]*\) errors=\([0-9]*\).*/\1 \2 \3/p' |
			awk '{ n += $1 + $2 + $3 } END { print n + 0 }')))
		rfail=$((rfail + $(grep -c '^not ok' "$TMP/kevd-soak.removal")))
		rlost=$((rlost + $(grep 'kevd-e2e-removal device=.* rounds=' "$TMP/kevd-removal.log" |
			sed -n 's/.* lost=\([0-9]*\).*/\1/p' | awk '{ n += $1 } END { print n + 0 }')))
		rdup=$((rdup + $(grep 'kevd-e2e-removal device=.* rounds=' "$TMP/kevd-removal.log" |
			sed -n 's/.* dup=\([0-9]*\).*/\1/p' | awk '{ n += $1 } END { print n + 0 }')))
		dmesg -c >/dev/null 2>&1 || true
	done
	[ $cfail = 0 ] || sed 's/^/# /' "$TMP/kevd-soak.connect.log"
	echo "connect $cr $cops $cev - - $cfail" >"$TMP/kevd-soak.dev"
	echo "removal $rr $rops $rev $rlost $rdup $rfail" >>"$TMP/kevd-soak.dev"
}

soak_suite() { # minutes
	deadline=$(($(date +%s) + $1 * 60))
	# 10^6 completions per notify behaviour and run, shared by six
	# consumers; the total is printed
	rdma_devices >/dev/null 2>&1
	$MP kevd default_policy=disable poll_budget=64
	# shellcheck disable=SC2034 # read by removal_suite (guest/faults.sh)
	kevd_soak=1
	soak_kunit_loop "$deadline" 1000000 &
	kl=$!
	soak_device_loop "$deadline"
	wait $kl
	ktap_begin kevd_soak 4
	cat "$TMP/kevd-soak.kunit" "$TMP/kevd-soak.dev" |
	while read -r part runs ops ev lost dup failed; do
		echo "kevd-soak part=$part runs=$runs operations=$ops events=$ev lost=$lost dup=$dup failed=$failed"
		if [ "$runs" -gt 0 ] && [ "$failed" = 0 ] &&
		   { [ "$lost" = 0 ] || [ "$lost" = - ]; } &&
		   { [ "$dup" = 0 ] || [ "$dup" = - ]; }; then
			ktap_result ok "$part"
		else
			ktap_result not-ok "$part" "runs=$runs lost=$lost dup=$dup failed=$failed"
		fi
	done
	# completions per notify behaviour (the fake HCA's four modes)
	for m in lenient_report lenient_ignore strict_report strict_ignore; do
		n=$(grep "^$m/" "$TMP/kevd-soak.dto" |
			sed -n 's/^[a-z_]*\/[a-z_]*: \([0-9]*\) CQEs.*/\1/p' |
			awk '{ n += $1 } END { print n + 0 }')
		echo "kevd-soak dto_stress mode=$m completions=$n"
	done
	ktap_end
	unload_all
}
