#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# Model-check the extended notify with spin: kevd's protocol must hold on
# strict and lenient HCAs, for pollers and for a consumer that pulls, and
# the same check must find the 2006 lost wake-up when the check step is
# removed on a strict HCA, the one a leaving waiter would cause if it
# did not hand its pending notification to a poller, and the one a busy
# puller's unarmed let-go would cause without its handshake with a waiter
# that registers meanwhile, and the one a waiter's own unarmed let-go
# would cause if it then slept, and the one a poller's unarmed hand-back
# would cause without that handshake.
#   check.sh WORKDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
fail=0

# verify NAME EXPECT DEFINES...   EXPECT: holds | violated
verify() {
	local name=$1 expect=$2 dir errors
	shift 2
	dir=$work/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$here/notify.pml" "$dir/"
	(cd "$dir" && spin -a "$@" notify.pml >spin.log 2>&1 &&
	 gcc -O2 -DSAFETY -DNOREDUCE -o pan pan.c >>spin.log 2>&1 &&
	 ./pan -m100000 >pan.log 2>&1)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.log" | head -n 1)
	if [ -z "$errors" ]; then
		echo "spin: $name: no verdict"; cat "$dir/spin.log" "$dir/pan.log"
		fail=1
		return
	fi
	if { [ "$expect" = holds ] && [ "$errors" = 0 ]; } ||
	   { [ "$expect" = violated ] && [ "$errors" != 0 ] &&
	     grep -q 'assertion violated' "$dir/pan.log"; }; then
		echo "spin: $name: $expect as expected ($(grep -o '[0-9]* states, stored' "$dir/pan.log" | head -n 1))"
	else
		echo "spin: $name: expected '$expect', pan found $errors errors"
		cat "$dir/pan.log"
		fail=1
	fi
}

verify kevd-strict holds -DCHECK
verify kevd-lenient holds -DCHECK -DLENIENT
verify plain-lenient holds -DLENIENT
verify plain-strict violated
verify pull-strict holds -DCHECK -DPULL
verify pull-lenient holds -DCHECK -DLENIENT -DPULL
verify pull-nocheck-strict violated -DPULL
verify pull-noleave violated -DCHECK -DPULL -DNOLEAVE
verify busy-strict holds -DCHECK -DPULL -DBUSY
verify busy-lenient holds -DCHECK -DLENIENT -DPULL -DBUSY
verify busy-nohandshake violated -DCHECK -DPULL -DBUSY -DNOHANDSHAKE
verify busy-selfsleep violated -DCHECK -DPULL -DBUSY -DSELFSLEEP
verify busy-pollnocheck violated -DCHECK -DPULL -DBUSY -DPOLLNOCHECK
exit $fail
