#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build hvprof's default guest image (test kernel + busybox initramfs + workloads) into a cache
# directory, reused while its inputs are unchanged.  Only Debian packages are used:
#   linux-source-6.1, busybox-static, dwarves (pahole), gcc, cpio.
# Usage: images/build-image.sh [default|debian] [--cache DIR] [--print-dir] [--force]
# Prints the image directory on its last line. `debian`: the Debian image (images/debian/build.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
name=default
case "${1:-}" in
default|debian) name=$1; shift ;;
''|-*) ;;
*) echo "build-image: unknown image '$1' (known: default, debian)" >&2; exit 2 ;;
esac
cache=${HVPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvprof}
print_dir=0
force=0
while [ $# -gt 0 ]; do
	case "$1" in
	--cache) cache=$2; shift 2 ;;
	--print-dir) print_dir=1; shift ;;
	--force) force=1; shift ;;
	-h|--help) sed -n '2,7p' "$0"; exit 0 ;;
	*) echo "build-image: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

die() { echo "build-image: $*" >&2; exit 1; }

if [ "$name" = debian ]; then
	. "$here/debian/build.sh" # the Debian image's recipe: uses $here, $cache, $print_dir, $force
	exit 0
fi

src_tar=/usr/src/linux-source-6.1.tar.xz
[ -r "$src_tar" ] || die "$src_tar missing: apt-get install linux-source-6.1"
[ -x /bin/busybox ] && file -L /bin/busybox | grep -q 'statically linked' ||
	die "/bin/busybox is not the static busybox: apt-get install busybox-static"
command -v pahole >/dev/null || die "pahole missing: apt-get install dwarves"
command -v cpio >/dev/null || die "cpio missing: apt-get install cpio"

ksrc_ver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
bb_ver=$(dpkg-query -W -f='${Version}' busybox-static)
gcc_ver=$(gcc -dumpfullversion)

# Inputs of each stage, hashed: the kernel tree (package + patches), the kernel build (+ config),
# the whole image (+ busybox, workloads, init).
sha() { sha256sum | cut -c1-16; }
tree_key=$( { echo "$ksrc_ver"; cat "$here"/kernel/patches/*.patch; } | sha)
kern_key=$( { echo "$tree_key"; cat "$here/kernel/config.fragment"; } | sha)
img_key=$( { echo "$kern_key $bb_ver $gcc_ver"; cat "$here"/workloads/*.c "$here"/rootfs/init \
	"$here"/guest/*.c "$here/build-image.sh"; } | sha)

tree=$cache/src/linux-6.1-$tree_key
kbuild=$cache/kbuild/$kern_key
img=$cache/images/default-$img_key

# One build at a time (the CLI builds on first use; CI may too): two makes in one kernel build
# directory break each other. Wait for the other one, then look again.
mkdir -p "$cache"
exec 9>"$cache/.build-image.lock"
flock 9
if [ "$force" = 0 ] && [ -f "$img/manifest" ]; then
	[ "$print_dir" = 1 ] && echo "$img" || echo "build-image: up to date: $img"
	exit 0
fi

log() { echo "build-image: $*" >&2; }
t0=$(date +%s)

# --- kernel tree
if [ ! -f "$tree/.hvprof-ready" ]; then
	log "extracting $src_tar ($ksrc_ver) into $tree"
	rm -rf "$tree" "$tree.tmp"
	mkdir -p "$tree.tmp"
	tar -xf "$src_tar" -C "$tree.tmp" --strip-components=1
	for p in "$here"/kernel/patches/*.patch; do
		log "applying $(basename "$p")"
		patch -s -p1 -d "$tree.tmp" < "$p"
	done
	touch "$tree.tmp/.hvprof-ready"
	mv "$tree.tmp" "$tree"
fi

# --- kernel build
if [ ! -f "$kbuild/.hvprof-ready" ]; then
	mkdir -p "$kbuild"
	log "configuring the test kernel in $kbuild"
	make -s -C "$tree" O="$kbuild" tinyconfig >/dev/null
	"$tree/scripts/kconfig/merge_config.sh" -m -O "$kbuild" "$kbuild/.config" \
		"$here/kernel/config.fragment" >/dev/null
	make -s -C "$tree" O="$kbuild" olddefconfig >/dev/null
	# Every option we asked for must have survived (a dependency can silently drop one).
	bad=0
	while IFS= read -r line; do
		case "$line" in ''|'#'*) continue ;; esac
		opt=${line%%=*}; val=${line#*=}
		if [ "$val" = n ]; then
			grep -q "^$opt=" "$kbuild/.config" && { log "config: $opt is set, wanted off"; bad=1; }
		else
			grep -qx "$opt=$val" "$kbuild/.config" || { log "config: $opt is not $val"; bad=1; }
		fi
	done < "$here/kernel/config.fragment"
	[ "$bad" = 0 ] || die "the kernel configuration lost options (see above)"
	log "building vmlinux and bzImage (a few minutes)"
	make -s -C "$tree" O="$kbuild" -j"$(nproc)" vmlinux bzImage
	touch "$kbuild/.hvprof-ready"
fi

# --- the same kernel as an LZ4 bzImage: hvprof does not decompress LZ4 on the host, so the
# guest's own decompressor runs (emulated: ~15 s on PVM hosts) and chooses the KASLR slide
# itself, which hvprof must then find (docs/kaslr.md). Only the compressed wrapper changes:
# the config is switched to LZ4, bzImage remade (seconds), and switched back.
if [ ! -f "$kbuild/bzImage.lz4" ]; then
	command -v lz4 >/dev/null || die "lz4 missing: apt-get install lz4"
	log "building the LZ4 bzImage (guest-side decompression and KASLR)"
	cp "$kbuild/.config" "$kbuild/.config.hvprof"
	"$tree/scripts/config" --file "$kbuild/.config" -d KERNEL_GZIP -e KERNEL_LZ4
	make -s -C "$tree" O="$kbuild" olddefconfig
	make -s -C "$tree" O="$kbuild" -j"$(nproc)" bzImage
	cp "$kbuild/arch/x86/boot/bzImage" "$kbuild/bzImage.lz4.tmp"
	cp "$kbuild/System.map" "$kbuild/System.map.lz4"
	cp "$kbuild/.config.hvprof" "$kbuild/.config"
	make -s -C "$tree" O="$kbuild" olddefconfig
	make -s -C "$tree" O="$kbuild" -j"$(nproc)" vmlinux bzImage
	# The two bzImages must hold the same kernel: symbols at the same addresses.
	cmp -s "$kbuild/System.map" "$kbuild/System.map.lz4" ||
		die "the LZ4 bzImage's kernel differs from the vmlinux (System.map)"
	mv "$kbuild/bzImage.lz4.tmp" "$kbuild/bzImage.lz4"
fi

# --- image
rm -rf "$img.tmp"
mkdir -p "$img.tmp/rootfs"/{bin,sbin,etc,proc,sys,dev,tmp,root,mnt,usr/bin,usr/sbin}
cp "$kbuild/vmlinux" "$img.tmp/vmlinux"
cp "$kbuild/arch/x86/boot/bzImage" "$img.tmp/bzImage"
cp "$kbuild/bzImage.lz4" "$img.tmp/bzImage.lz4"
cp "$kbuild/System.map" "$img.tmp/System.map"
cp "$kbuild/.config" "$img.tmp/config"
log "encoding BTF with pahole"
pahole --btf_encode_detached="$img.tmp/vmlinux.btf" "$img.tmp/vmlinux" >/dev/null

cp /bin/busybox "$img.tmp/rootfs/bin/busybox"
for app in $(/bin/busybox --list-full); do
	[ -e "$img.tmp/rootfs/$app" ] || ln -s /bin/busybox "$img.tmp/rootfs/$app"
done
for w in "$here"/workloads/*.c; do
	name=$(basename "$w" .c)
	gcc -static -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline \
		-fno-optimize-sibling-calls -o "$img.tmp/rootfs/bin/$name" "$w" -lpthread
done
# the command server of `run --control` (hvprof exec), static like the workloads
gcc -static -O2 -g -o "$img.tmp/rootfs/bin/hvprof-execd" "$here/guest/hvprof-execd.c"
install -m 0755 "$here/rootfs/init" "$img.tmp/rootfs/init"
(cd "$img.tmp/rootfs" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) \
	> "$img.tmp/initramfs.cpio"

kver=$(make -s -C "$tree" O="$kbuild" kernelversion 2>/dev/null || echo 6.1)
{
	echo "# hvprof image manifest (docs/guest-interface.md): key=value, one per line"
	echo "format=1"
	echo "name=default"
	echo "kernel=vmlinux"
	echo "bzimage=bzImage"
	echo "bzimage_lz4=bzImage.lz4"
	echo "initrd=initramfs.cpio"
	echo "btf=vmlinux.btf"
	echo "system_map=System.map"
	echo "rootfs=rootfs"
	echo "cmdline=console=ttyS0 earlyprintk=serial,ttyS0 nolapic noxsave clearcpuid=erms,fsrm,popcnt,smap,smep,avx,avx2,pku,rdrand,rdseed,pcid,invpcid tsc=reliable mitigations=off panic=-1 quiet"
	echo "default_run=/bin/hvprof-demo"
	echo "kernel_version=$kver"
	echo "linux_source_version=$ksrc_ver"
	echo "busybox_version=$bb_ver"
	echo "gcc_version=$gcc_ver"
	echo "inputs_sha256=$img_key"
	for f in vmlinux bzImage bzImage.lz4 vmlinux.btf initramfs.cpio System.map; do
		echo "sha256.$f=$(sha256sum "$img.tmp/$f" | cut -d' ' -f1)"
	done
} > "$img.tmp/manifest"
rm -rf "$img"
mv "$img.tmp" "$img"
ln -sfn "$(basename "$img")" "$cache/images/default"
log "image ready in $(( $(date +%s) - t0 )) s: $img"
[ "$print_dir" = 1 ] && echo "$img" || echo "build-image: built $img"
