# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# Shared helpers of the kevd test harness. Sourced by tools/testing/kevd-test.
#
# Layout of the cache (outside the clone, reused across clones and runs):
#   $KEVD_CACHE/src/<version>/            extracted linux-source-6.12
#   $KEVD_CACHE/<target>-<key>/obj/       kernel build (O=)
#   $KEVD_CACHE/<target>-<key>/modroot/   modules_install of that kernel
#   $KEVD_CACHE/<target>-<key>/.complete  written last; without it the dir is
#                                         a partial or failed build: removed.
# <key> hashes the source package version and the config fragments, so a
# kernel is rebuilt only when one of those changes.

KEVD_TOP=${KEVD_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
KEVD_TESTING=$KEVD_TOP/tools/testing
KEVD_CACHE=${KEVD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kevd}
KEVD_BUILD=${KEVD_BUILD:-$KEVD_TOP/.build}
KEVD_JOBS=${KEVD_JOBS:-$(($(nproc) + 1))}
KSRC_TARBALL=/usr/src/linux-source-6.12.tar.xz

log() { printf '[kevd-test] %s\n' "$*" >&2; }
die() { printf '[kevd-test] error: %s\n' "$*" >&2; exit 1; }

# Debian packages the harness needs; installed with apt-get when missing.
KEVD_DEPS="linux-source-6.12 build-essential flex bison bc libelf-dev libssl-dev
	cpio python3 sparse spin kmod busybox-static rsync iproute2 perl patch
	qemu-system-x86 dkms"

ensure_deps() {
	local missing="" p
	for p in $KEVD_DEPS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	log "installing Debian packages:$missing"
	[ "$(id -u)" = 0 ] || die "need root to apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >&2 ||
		die "apt-get install$missing failed"
}

# One line on the host: CPU model, vector features and the user xstate size
# (tools/testing/host-xstate.c), which decides UML's FP save and restore: a
# host-specific failure of the UML kernel shows its cause in the first lines.
preflight() {
	local model feats probe=$KEVD_BUILD/host-xstate x
	model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
	feats=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
		grep -xE 'avx|avx2|avx512f|amx_tile|pku' | xargs)
	mkdir -p "$KEVD_BUILD"
	if gcc -O2 -o "$probe" "$KEVD_TESTING/host-xstate.c" 2>/dev/null; then
		x=$("$probe")
	else
		x="xstate=unknown (host-xstate.c did not build)"
	fi
	log "host: ${model:-unknown CPU}, $(nproc) CPUs, ${feats:-no AVX}, $x"
}

# The headers of the kernels kevd supports on Debian 12: its default
# (linux-headers-amd64, 6.1) and 6.12.
ensure_distro_headers() {
	local p missing=()
	for p in linux-headers-6.12-amd64 linux-headers-amd64; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	log "installing ${missing[*]} (distro compile checks)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${missing[@]}" >&2 ||
		{ apt-get update -qq >&2 &&
		  apt-get install -y -qq "${missing[@]}" >&2; } ||
		die "apt-get install ${missing[*]} failed"
}

ksrc_version() {
	dpkg-query -W -f='${Version}' linux-source-6.12
}

# Fixes carried for the test kernels, applied in name order:
#   patches/*.patch      every kernel (data races KCSAN found in siw and rxe
#                        under kevd's traffic; use after free that KASAN
#                        found in ib_mad at a device's removal and in siw's
#                        connect)
#   patches/um/*.patch   ARCH=um only (the UML kernels' own defects)
#   patches/x86_64/*.patch  ARCH=x86_64 only (races KCSAN found in the
#                        kernel's own code, which only that kernel runs)
# A kernel's source tree and cache key cover only the patches it gets, so a
# UML fix does not rebuild the x86_64 kernel.
# ksrc_patches [ARCH]: without ARCH, the common patches only.
ksrc_patches() {
	ls "$KEVD_TESTING"/patches/*.patch 2>/dev/null | sort
	[ -n "${1:-}" ] && ls "$KEVD_TESTING/patches/$1"/*.patch 2>/dev/null | sort
	return 0
}

# The source tree's identity: the package version and the patches.
ksrc_id() {
	local ver patches
	ver=$(ksrc_version) || return 1
	patches=$(ksrc_patches "${1:-}")
	if [ -n "$patches" ]; then
		# shellcheck disable=SC2086
		echo "$ver-p$(cat $patches | sha256sum | cut -c1-12)"
	else
		echo "$ver"
	fi
}

# ensure_ksrc [ARCH]: extract (and patch) the kernel source once per
# ksrc_id; sets KSRC. Without ARCH, the tree with the common patches (the
# static checks' scripts).
ensure_ksrc() {
	local id dir p
	id=$(ksrc_id "${1:-}") || die "linux-source-6.12 is not installed"
	dir=$KEVD_CACHE/src/$id
	if [ ! -f "$dir/.complete" ]; then
		log "extracting linux-source-6.12 ($id)"
		rm -rf "$dir"
		mkdir -p "$dir"
		tar -C "$dir" --strip-components=1 -xf "$KSRC_TARBALL" ||
			die "cannot extract $KSRC_TARBALL"
		for p in $(ksrc_patches "${1:-}"); do
			patch -p1 -s -d "$dir" <"$p" ||
				die "$(basename "$p") does not apply"
		done
		touch "$dir/.complete"
	fi
	KSRC=$dir
}

# Targets: uml and smp (make check), uml-nodebug and smp-nodebug (the
# benchmark's references, one CPU and two: the test kernels without
# their debug options), smp-trace (smp-nodebug with tracepoints, for
# kevd-test trace).
kernel_arch() {
	case $1 in
	uml|uml-nodebug) echo um ;;
	smp|smp-nodebug|smp-trace) echo x86_64 ;;
	*) die "unknown target '$1' (uml, smp, uml-nodebug, smp-nodebug or smp-trace)" ;;
	esac
}

# The config fragments of a target, in the order they are merged.
kernel_frags() {
	local c=$KEVD_TESTING/configs
	case $1 in
	uml) echo "$c/common.config $c/uml.config $c/fault.config" ;;
	smp) echo "$c/common.config $c/smp.config" ;;
	smp-nodebug) echo "$c/common.config $c/smp.config $c/nodebug.config $c/smp-nodebug.config" ;;
	uml-nodebug) echo "$c/common.config $c/uml.config $c/nodebug.config" ;;
	smp-trace) echo "$c/common.config $c/smp.config $c/nodebug.config $c/smp-nodebug.config $c/trace.config" ;;
	esac
}

kernel_key() {
	local t=$1
	{
		ksrc_id "$(kernel_arch "$t")"
		# shellcheck disable=SC2046
		cat $(kernel_frags "$t")
		echo "base=$(kernel_base_config "$t")"
	} | sha256sum | cut -c1-16
}

kernel_base_config() {
	echo tinyconfig
}

kernel_dir() {
	echo "$KEVD_CACHE/$1-$(kernel_key "$1")"
}

# Every symbol the fragments set must have survived olddefconfig with the
# value of the last fragment that sets it: a silently dropped option (a
# missing dependency) would give a kernel that tests less.
verify_config() {
	local cfg=$1 frag line sym bad=0
	local -A want=()
	shift
	for frag in "$@"; do
		while IFS= read -r line; do
			case $line in
			CONFIG_*=*) want[${line%%=*}]=${line#*=} ;;
			esac
		done <"$frag"
	done
	for sym in "${!want[@]}"; do
		if [ "${want[$sym]}" = n ]; then
			grep -q "^$sym=" "$cfg" && { log "$sym is set"; bad=1; }
		else
			grep -qx "$sym=${want[$sym]}" "$cfg" ||
				{ log "$sym=${want[$sym]} not in .config"; bad=1; }
		fi
	done
	return $bad
}

# Build (or reuse) the kernel of target $1. Sets KOBJ, KMODROOT, KREL.
ensure_kernel() {
	local t=$1 arch dir frags
	arch=$(kernel_arch "$t")
	ensure_ksrc "$arch"
	dir=$(kernel_dir "$t")
	if [ ! -f "$dir/.complete" ]; then
		rm -rf "$dir"
		mkdir -p "$dir/obj"
		frags=$(kernel_frags "$t")
		log "building the $t kernel in $dir (about 15 min on 2 cores)"
		(
			set -e
			cd "$KSRC"
			make -s ARCH="$arch" O="$dir/obj" "$(kernel_base_config "$t")"
			# shellcheck disable=SC2086
			scripts/kconfig/merge_config.sh -m -O "$dir/obj" \
				"$dir/obj/.config" $frags >/dev/null
			make -s ARCH="$arch" O="$dir/obj" olddefconfig
			# set -e does not act inside "( ... ) || ...": check.
			# shellcheck disable=SC2086
			verify_config "$dir/obj/.config" $frags || exit 1
			make -s ARCH="$arch" O="$dir/obj" -j"$KEVD_JOBS"
			make -s ARCH="$arch" O="$dir/obj" \
				INSTALL_MOD_PATH="$dir/modroot" modules_install
		) >"$dir/build.log" 2>&1 || {
			tail -n 40 "$dir/build.log" >&2
			die "$t kernel build failed (log: $dir/build.log)"
		}
		touch "$dir/.complete"
		log "$t kernel ready"
	fi
	KOBJ=$dir/obj
	KMODROOT=$dir/modroot
	KREL=$(cat "$KOBJ/include/config/kernel.release")
	KARCH=$arch
}
