# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
# shellcheck shell=bash disable=SC2034 # STAGE, DIMG: read by kevd-test
#
# kevd on the kernels Debian 12 ships, as a user gets them: the default
# 6.1 (linux-headers-amd64 of bookworm) and 6.12. Sourced by kevd-test;
# run by static_checks, in the background beside the test kernels' boots.
#
#   static_distro   kevd.ko, then the samples and the fake HCA, W=1
#   static_install  make install into a staging root, the out-of-tree
#                   consumer against the installed files alone
#   static_dkms     dkms add, build and install, in a mount namespace
#   distro_boot     Debian's own kernel images, unmodified, under QEMU:
#                   the installed kevd.ko loads with kmod's modprobe, the
#                   demo, the consumer and kevd_pingpong on rxe run
#                   (guest/distro.sh, suite kevd_distro)

# The newest installed headers of each supported series, 6.12 first.
distro_kdirs() {
	ls -d /usr/src/linux-headers-6.12*-amd64 2>/dev/null | sort -V | tail -n 1
	ls -d /usr/src/linux-headers-6.1.0-*-amd64 2>/dev/null | sort -V | tail -n 1
}

# The release of a headers dir as modules_install and vermagic see it
# (Debian's 6.1 headers have 6.1.192 in include/config/kernel.release).
kdir_release() {
	sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$1/include/generated/utsrelease.h"
}

# kevd.ko, then the samples and the fake HCA, with W=1 against the headers
# of the kernels Debian 12 ships (its default 6.1 and 6.12): real distro
# configs with CONFIG_KUNIT off.
static_distro() {
	local kdir name dst log ok
	for kdir in $(distro_kdirs); do
		name=$(basename "$kdir")
		dst=$KEVD_BUILD/distro/$name/src
		log=$KEVD_BUILD/distro/$name/build.log
		mkdir -p "$KEVD_BUILD/distro/$name"
		stage_sources "$dst"
		# kevd.ko alone (the product), then the samples and the fake HCA
		ok=1
		make -C "$kdir" M="$dst" W=1 -j"$KEVD_JOBS" modules >"$log" 2>&1 || ok=0
		[ -f "$dst/kevd.ko" ] && ! nm "$dst/kevd.ko" | grep -qi kunit || ok=0
		make -C "$kdir" M="$dst" W=1 KEVD_MODULES=samples,tests \
			-j"$KEVD_JOBS" modules >>"$log" 2>&1 || ok=0
		[ -f "$dst/samples/kevd_pingpong.ko" ] &&
			[ -f "$dst/kevd_fake_hca.ko" ] || ok=0
		grep -qE 'warning:|error:|ERROR:' "$log" && ok=0
		if [ $ok = 1 ]; then
			record host kevd_static "distro_build_$name" pass
		else
			grep -E 'warning:|error:|ERROR:' "$log" | head -n 20 >&2
			record host kevd_static "distro_build_$name" fail
		fi
	done
	[ -n "$(ls -d /usr/src/linux-headers-6.1.0-*-amd64 2>/dev/null)" ] ||
		record host kevd_static distro_build_6.1 fail
}

# make install into a staging root ($KEVD_BUILD/install/<release>/root)
# against each distribution's headers: kevd.ko under updates/ with depmod
# run for KDIR's release, the header and Module.symvers under
# usr/share/kevd, modinfo's version; then the out-of-tree consumer
# (samples/consumer) builds against those files alone. distro_boot loads
# what this installed.
static_install() {
	local kdir rel dir root log ok
	for kdir in $(distro_kdirs); do
		rel=$(kdir_release "$kdir")
		dir=$KEVD_BUILD/install/$rel
		root=$dir/root
		log=$dir/install.log
		ok=1
		rm -rf "$dir"
		stage_sources "$dir/src"
		cp -r "$KEVD_TOP/samples/consumer" "$dir/consumer"
		{
			make -C "$dir/src" KDIR="$kdir" INSTALL_MOD_PATH="$root" install &&
			make -C "$dir/consumer" KDIR="$kdir" KEVD_SHARE="$root/usr/share/kevd" W=1
		} >"$log" 2>&1 || ok=0
		grep -q 'updates/kevd.ko' "$root/lib/modules/$rel/modules.dep" 2>/dev/null || ok=0
		[ -f "$root/usr/share/kevd/include/kevd/kevd.h" ] || ok=0
		grep -q 'kevd_create' "$root/usr/share/kevd/$rel/Module.symvers" 2>/dev/null || ok=0
		[ "$(modinfo -F version "$dir/src/kevd.ko" 2>/dev/null)" = "$(cat "$KEVD_TOP/VERSION")" ] || ok=0
		[ "$(modinfo -F depends "$dir/consumer/kevd_consumer.ko" 2>/dev/null)" = kevd ] || ok=0
		grep -E '(warning|error):|undefined' "$log" |
			grep -v 'depmod: WARNING: could not open' | grep -q . && ok=0
		if [ $ok = 1 ]; then
			record host kevd_static "install_and_consumer_$rel" pass
		else
			tail -n 20 "$log" >&2
			record host kevd_static "install_and_consumer_$rel" fail
		fi
	done
}

# dkms add, build and install for each distribution release, as a user
# runs them, but in a mount namespace of its own: a framework.conf of ours
# over /etc/dkms/framework.conf (source and dkms trees, the MOK key) and a
# directory of ours over /lib/modules, so dkms's install and depmod touch
# nothing of the host's. The module dkms installs must be the product,
# with the version of VERSION, built from the same sources as make
# install's (modinfo's srcversion).
static_dkms() {
	local kdir rel dir ver log ok ko
	ver=$(cat "$KEVD_TOP/VERSION")
	grep -qx "PACKAGE_VERSION=\"$ver\"" "$KEVD_TOP/dkms.conf" &&
		record host kevd_static dkms_conf_version pass ||
		record host kevd_static dkms_conf_version fail
	for kdir in $(distro_kdirs); do
		rel=$(kdir_release "$kdir")
		dir=$KEVD_BUILD/dkms/$rel
		log=$dir/dkms.log
		ok=1
		rm -rf "$dir"
		mkdir -p "$dir/src" "$dir/tree" "$dir/modules/$rel"
		stage_sources "$dir/kevd-$ver"
		cp "$KEVD_TOP/dkms.conf" "$dir/kevd-$ver/"
		ln -s "$kdir" "$dir/modules/$rel/build"
		cat >"$dir/framework.conf" <<-EOF
		source_tree="$dir/src"
		dkms_tree="$dir/tree"
		mok_signing_key="$dir/mok.key"
		mok_certificate="$dir/mok.pub"
		EOF
		unshare -m --propagation private sh -ec '
			mount --bind "$1/framework.conf" /etc/dkms/framework.conf
			mount --bind "$1/modules" /lib/modules
			dkms add "$1/kevd-$2"
			dkms build -m kevd -v "$2" -k "$3"
			dkms install -m kevd -v "$2" -k "$3"
			dkms status -m kevd -v "$2" -k "$3"
		' dkms "$dir" "$ver" "$rel" >"$log" 2>&1 || ok=0
		ko=$dir/modules/$rel/updates/dkms/kevd.ko
		grep -q 'updates/dkms/kevd.ko' "$dir/modules/$rel/modules.dep" 2>/dev/null || ok=0
		grep -q "kevd/$ver, $rel, x86_64: installed" "$log" || ok=0
		[ "$(modinfo -F version "$ko" 2>/dev/null)" = "$ver" ] || ok=0
		modinfo -F vermagic "$ko" 2>/dev/null | grep -q "^$rel " || ok=0
		[ -n "$(modinfo -F srcversion "$ko" 2>/dev/null)" ] &&
		[ "$(modinfo -F srcversion "$ko")" = \
		  "$(modinfo -F srcversion "$KEVD_BUILD/install/$rel/src/kevd.ko" 2>/dev/null)" ] || ok=0
		if [ $ok = 1 ]; then
			record host kevd_static "dkms_add_build_install_$rel" pass
		else
			tail -n 20 "$log" >&2
			record host kevd_static "dkms_add_build_install_$rel" fail
		fi
	done
}

# Debian's own image of release $1, unmodified, once per package version
# (that of the installed headers): $KEVD_CACHE/debian/<release>-<version>/
# root, with depmod run over its modules. Sets DIMG.
ensure_distro_image() {
	local rel=$1 ver dir
	ver=$(dpkg-query -W -f='${Version}' "linux-headers-$rel" 2>/dev/null) || return 1
	dir=$KEVD_CACHE/debian/$rel-$ver
	if [ ! -f "$dir/.complete" ]; then
		log "downloading Debian's linux-image-$rel $ver"
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		chmod 777 "$dir/deb"	# apt's _apt user writes there
		(
			cd "$dir/deb" &&
			{ apt-get download -qq "linux-image-$rel=$ver" ||
			  { apt-get update -qq && apt-get download -qq "linux-image-$rel=$ver"; }; } &&
			dpkg-deb -x ./*.deb "$dir/root" &&
			depmod -b "$dir/root" "$rel"
		) >&2 || return 1
		rm -rf "$dir/deb"
		touch "$dir/.complete"
	fi
	DIMG=$dir/root
}

# The guest's lib/modules/<release>: what make install put there (kevd.ko
# under updates/), the samples and the consumer under extra/, and of the
# image's modules only those they and the soft RDMA device need, with
# their dependencies. Sets STAGE.
distro_stage() {
	local rel=$1 src=$2 stage mods m f
	stage=$KEVD_BUILD/debian-$rel/stage
	rm -rf "$stage"
	mkdir -p "$stage/lib/modules/$rel/extra"
	cp -a "$KEVD_BUILD/install/$rel/root/lib/modules/$rel/updates" \
		"$stage/lib/modules/$rel/" || return 1
	cp "$src/samples/kevd_demo.ko" "$src/samples/kevd_pingpong.ko" \
		"$src/samples/kevd_rc.ko" "$KEVD_BUILD/install/$rel/consumer/kevd_consumer.ko" \
		"$stage/lib/modules/$rel/extra/" || return 1
	cp "$DIMG/lib/modules/$rel"/modules.builtin* "$DIMG/lib/modules/$rel/modules.order" \
		"$stage/lib/modules/$rel/"
	# rxe's ICRC needs a crc32 shash: the kernel asks modprobe for
	# crypto-crc32 when rxe0 is added (the generic one runs on any CPU)
	mods="rdma_rxe dummy crc32_generic"
	for f in "$stage/lib/modules/$rel"/*/*.ko; do
		mods="$mods $(modinfo -F depends "$f" | tr , ' ')"
	done
	for m in $mods; do
		case $m in kevd|kevd_rc) continue ;; esac
		modprobe -d "$DIMG" -S "$rel" --show-depends "$m" 2>/dev/null |
			sed -n 's/^insmod \([^ ]*\).*/\1/p'
	done | sort -u | while read -r f; do
		f=${f#"$DIMG"}
		mkdir -p "$stage${f%/*}"
		cp "$DIMG$f" "$stage$f"
	done
	depmod -b "$stage" "$rel" || return 1
	STAGE=$stage
}

# Boot Debian's image of each supported release with the harness's
# initramfs (kevd_mode=distro, one after the other: about 12 s each) and
# parse its console.
distro_boot() {
	local kdir rel t log rc
	for kdir in $(distro_kdirs); do
		rel=$(kdir_release "$kdir")
		t=debian-$rel
		log=$KEVD_BUILD/$t/console.log
		mkdir -p "$KEVD_BUILD/$t"
		if ! ensure_distro_image "$rel" ||
		   ! distro_stage "$rel" "$KEVD_BUILD/distro/$(basename "$kdir")/src"; then
			record "$t" kevd_distro boot fail
			continue
		fi
		build_initramfs "$t"
		# One TCG thread for two vCPUs: with thread=multi, Debian's
		# 6.12 image took an "Oops: int3" in enqueue_timer during early
		# boot (once in 14 boots; a text_poke_bp() of its static keys seen
		# by the other vCPU mid-patch, we think); 16 of 16 passed single.
		timeout -k 10 "$SMP_TIMEOUT" qemu-system-x86_64 \
			-accel tcg,thread=single -smp 2 -m 1024 -cpu max \
			-kernel "$DIMG/boot/vmlinuz-$rel" \
			-initrd "$KEVD_BUILD/$t/initramfs.gz" \
			-display none -monitor none -serial stdio -no-reboot \
			-append "console=ttyS0 panic=-1 kevd_mode=distro kevd_stage=/" \
			</dev/null >"$log" 2>&1
		rc=$?
		python3 "$KEVD_TESTING/parse_console.py" --target "$t" \
			--console "$log" --exit-code "$rc" --expect kevd_distro \
			--out "$RESULTS/results.tsv" >&2
	done
}
