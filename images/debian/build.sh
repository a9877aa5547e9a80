# SPDX-License-Identifier: MIT
# The recipe of hvprof's Debian image, sourced by `images/build-image.sh debian` once its options
# are parsed ($here: images/, $cache, $print_dir, $force): a Debian 12 userland from Debian's
# packages (mmdebstrap, with the apt sources this machine is configured with) plus the project's
# workloads built as Debian builds packages, on an ext4 raw disk image made with `mke2fs -d` (no
# loop mount), booted with the default image's test kernel. The image directory is printed last.

debian=$here/debian
die() { echo "build-image: debian: $*" >&2; exit 1; }
log() { echo "build-image: debian: $*" >&2; }

command -v mmdebstrap >/dev/null || die "mmdebstrap missing: apt-get install mmdebstrap"
command -v mke2fs >/dev/null || die "mke2fs missing: apt-get install e2fsprogs"
command -v dpkg-buildflags >/dev/null || die "dpkg-buildflags missing: apt-get install dpkg-dev"
command -v cpio >/dev/null || die "cpio missing: apt-get install cpio"
if [ "$(id -u)" = 0 ]; then
	mode=root
else
	# Without root: mmdebstrap in a user namespace writes a tarball with root-owned files, and
	# fakeroot lets mke2fs see that ownership in the extracted tree.
	mode=unshare
	command -v newuidmap >/dev/null && grep -q "^$(id -un):" /etc/subuid ||
		die "without root, mmdebstrap needs user namespaces: apt-get install uidmap and an" \
			"/etc/subuid entry for $(id -un) (or run this as root)"
	command -v fakeroot >/dev/null || die "fakeroot missing: apt-get install fakeroot"
fi

# The packages: the Essential set (coreutils, perl-base, gzip, dash, bash, util-linux...), then
# python3, xz-utils and mount; no apt, no documentation, manual pages or translations.
packages=python3,xz-utils,mount
dpkg_opts=(path-exclude=/usr/share/doc/* path-exclude=/usr/share/man/* path-exclude=/usr/share/info/*
	path-exclude=/usr/share/locale/* path-exclude=/usr/share/lintian/*)

# The apt sources this machine uses (apt's own configuration: sources.list and sources.list.d).
eval "$(apt-config shell source_list Dir::Etc::sourcelist/f source_parts Dir::Etc::sourceparts/d)"
sources=()
[ -s "$source_list" ] && sources+=("$source_list")
for f in "${source_parts%/}"/*.list "${source_parts%/}"/*.sources; do
	[ -s "$f" ] && sources+=("$f")
done
[ "${#sources[@]}" -gt 0 ] || die "no apt sources configured (apt-config: $source_list, $source_parts)"

# The test kernel: the default image's (built first when missing).
log "the test kernel comes from the default image"
default=$("$here/build-image.sh" default --cache "$cache" --print-dir | tail -n 1)
[ -f "$default/manifest" ] || die "no default image at '$default'"
mget() { sed -n "s/^$1=//p" "$default/manifest" | head -n 1; }

# Distribution build flags, as dpkg-buildpackage gives them (PIE and -O2 without frame pointers
# are Debian's gcc defaults); the file-prefix map names the source directory and stays out of the
# key.
cflags=$(cd "$here/workloads" && dpkg-buildflags --get CFLAGS)
cppflags=$(dpkg-buildflags --get CPPFLAGS)
ldflags=$(dpkg-buildflags --get LDFLAGS)
multiarch=$(gcc -print-multiarch)
gcc_ver=$(gcc -dumpfullversion)
mmdebstrap_ver=$(mmdebstrap --version | awk '{print $2}')

sha() { sha256sum | cut -c1-16; }
img_key=$( {
	echo "$(mget sha256.vmlinux) $(mget sha256.vmlinux.btf) $mode"
	echo "$packages ${dpkg_opts[*]} $mmdebstrap_ver $gcc_ver $multiarch"
	echo "$cflags $cppflags $ldflags" | sed 's/-ffile-prefix-map=[^ ]*//'
	cat "${sources[@]}" "$debian"/* "$here"/guest/*.c "$here"/workloads/*.c "$here"/workloads/distro/*
} | sha)
img=$cache/images/debian-$img_key

# One build at a time (the CLI builds on first use; CI may too): wait for the other one.
mkdir -p "$cache/images"
exec 8>"$cache/images/.debian.lock"
flock 8
if [ "$force" = 0 ] && [ -f "$img/manifest" ]; then
	ln -sfn "$(basename "$img")" "$cache/images/debian"
	[ "$print_dir" = 1 ] && echo "$img" || echo "build-image: debian: up to date: $img"
	exit 0
fi
t0=$(date +%s)
rm -rf "$img.tmp"
mkdir -p "$img.tmp"/{stage,work,debug,addinit}
tmp=$img.tmp

# --- the project's workloads, built as a Debian package builds them, stripped as dh_strip does
# (debug info kept on the host, by build-id: $img/debug/.build-id/xx/yyyy.debug)
log "building the workloads (dpkg-buildflags: $cflags)"
stage=$tmp/stage
mkdir -p "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/lib/$multiarch"
# shellcheck disable=SC2086  # the flags are lists of words
(
	cd "$here/workloads/distro"
	gcc $cflags $cppflags -fPIC -shared -Wl,-soname,libhvdistro.so.1 $ldflags \
		-o "$tmp/work/libhvdistro.so.1" libhvdistro.c
	ln -sfn libhvdistro.so.1 "$tmp/work/libhvdistro.so"
	gcc $cflags $cppflags $ldflags -o "$tmp/work/hvprof-distro" hvprof-distro.c \
		-L"$tmp/work" -lhvdistro
	cd "$here/workloads"
	for w in *.c; do
		gcc $cflags $cppflags $ldflags -o "$tmp/work/${w%.c}" "$w" -lpthread
	done
)
# The init's exit-register helper is static: nothing it needs can be missing at that point.
# shellcheck disable=SC2086
gcc $cflags $cppflags -static $ldflags -o "$tmp/work/hvprof-exit" "$debian/hvprof-exit.c"
# shellcheck disable=SC2086  # the command server of `run --control` (hvprof exec), static too
gcc $cflags $cppflags -static $ldflags -o "$tmp/work/hvprof-execd" "$here/guest/hvprof-execd.c"
for f in "$tmp"/work/*; do
	[ -L "$f" ] && continue
	name=$(basename "$f")
	id=$(readelf -n "$f" | sed -n 's/.*Build ID: //p')
	[ -n "$id" ] || die "$name has no build-id"
	mkdir -p "$tmp/debug/.build-id/${id:0:2}"
	objcopy --only-keep-debug "$f" "$tmp/debug/.build-id/${id:0:2}/${id:2}.debug"
	case "$name" in
	*.so*) strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
		install -m 0644 "$f" "$stage/usr/lib/$multiarch/$name" ;;
	hvprof-exit|hvprof-execd) strip --remove-section=.comment --remove-section=.note "$f"
		install -m 0755 "$f" "$stage/usr/sbin/$name" ;;
	*) strip --remove-section=.comment --remove-section=.note "$f"
		install -m 0755 "$f" "$stage/usr/bin/$name" ;;
	esac
done
install -m 0755 "$debian/hvprof-init" "$stage/usr/sbin/hvprof-init"
tar --owner=0 --group=0 --numeric-owner -C "$stage" -cf "$tmp/stage.tar" usr

# --- the userland
log "mmdebstrap bookworm ($mode mode; Essential + $packages) from ${sources[*]}"
root=$tmp/root
opts=(--mode="$mode" --variant=essential --include="$packages"
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
	--customize-hook="tar-in $tmp/stage.tar /" # (special hooks split words: no quotes)
	--customize-hook='chroot "$1" ldconfig'
	--customize-hook='echo hvprof-debian > "$1/etc/hostname"'
	--customize-hook='rm -f "$1"/var/log/*.log "$1"/var/cache/ldconfig/aux-cache')
for o in "${dpkg_opts[@]}"; do opts+=(--dpkgopt="$o"); done
# Progress: mmdebstrap's own I:/W:/E: lines; everything it says goes to mmdebstrap.log.
mmdebstrap_logged() {
	if ! mmdebstrap "$@" 2>&1 >/dev/null | tee "$tmp/mmdebstrap.log" |
		{ grep --line-buffered -E '^(I|W|E): ' || true; } | sed -u 's/^/  mmdebstrap: /' >&2; then
		tail -n 30 "$tmp/mmdebstrap.log" >&2
		die "mmdebstrap failed (whole log: $tmp/mmdebstrap.log)"
	fi
}
if [ "$mode" = root ]; then
	mmdebstrap_logged "${opts[@]}" bookworm "$root" "${sources[@]}"
else
	mmdebstrap_logged "${opts[@]}" bookworm "$tmp/root.tar" "${sources[@]}"
	mkdir "$root"
	fakeroot -s "$tmp/fakeroot.state" tar -C "$root" -xpf "$tmp/root.tar"
	rm "$tmp/root.tar"
fi
versions=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package}=${Version}\n')
echo "$versions" > "$tmp/packages.txt"

# --- the ext4 disk: the content plus a quarter and 64 MiB of headroom, no loop mount, no root.
content_kib=$(du -sk "$root" | cut -f1)
size_mib=$(( (content_kib * 5 / 4 / 1024 + 64 + 3) / 4 * 4 ))
h=$(echo "$img_key" | sha256sum)
uuid=${h:0:8}-${h:8:4}-4${h:13:3}-8${h:17:3}-${h:20:12} # the same inputs, the same file system
log "mke2fs -t ext4 -d: $(( content_kib / 1024 )) MiB of files on a $size_mib MiB disk"
mkfs=(mke2fs -q -F -t ext4 -d "$root" -L hvprof-debian -U "$uuid" -m 0
	-E "root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0,hash_seed=$uuid"
	"$tmp/rootfs.ext4" "${size_mib}M")
: > "$tmp/rootfs.ext4"
if [ "$mode" = root ]; then
	"${mkfs[@]}"
else
	fakeroot -i "$tmp/fakeroot.state" "${mkfs[@]}"
fi
debian_ver=$(cat "$root/etc/debian_version")
python_ver=$(echo "$versions" | sed -n 's/^python3=//p')
if [ "$mode" = root ]; then rm -rf "$root"; else fakeroot -i "$tmp/fakeroot.state" rm -rf "$root"; fi

# --- the initramfs used only with --add: its /init mounts the disk under an overlayfs whose upper
# layer holds the added files (addinit.c; docs/guest-interface.md)
gcc -Os -static -nostdlib -fno-pie -no-pie -fno-stack-protector -fno-builtin \
	-fno-asynchronous-unwind-tables -Wl,--build-id=none,-z,noseparate-code,-z,norelro -s \
	-o "$tmp/addinit/init" "$debian/addinit.c"
mkdir -p "$tmp/addinit"/{dev,proc,hvprof/lower,hvprof/root,hvprof/upper,hvprof/work}
(cd "$tmp/addinit" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) \
	> "$tmp/add-initramfs.cpio"
rm -rf "$tmp/addinit" "$tmp/stage" "$tmp/stage.tar" "$tmp/work" "$tmp/fakeroot.state" \
	"$tmp/mmdebstrap.log"

# --- the kernel: the default image's files, linked where the file system allows
for f in vmlinux bzImage vmlinux.btf System.map config; do
	ln "$default/$f" "$tmp/$f" 2>/dev/null || cp "$default/$f" "$tmp/$f"
done

{
	echo "# hvprof image manifest (docs/guest-interface.md): key=value, one per line"
	echo "format=1"
	echo "name=debian"
	echo "kernel=vmlinux"
	echo "bzimage=bzImage"
	echo "btf=vmlinux.btf"
	echo "system_map=System.map"
	echo "disk=rootfs.ext4"
	echo "root=/dev/vda"
	echo "add_initrd=add-initramfs.cpio"
	echo "add_dir=/hvprof/upper"
	echo "build_id_dir=debug"
	echo "cmdline=$(mget cmdline) root=/dev/vda rootfstype=ext4 rw init=/usr/sbin/hvprof-init"
	echo "default_run=/usr/bin/hvprof-distro"
	echo "kernel_version=$(mget kernel_version)"
	echo "linux_source_version=$(mget linux_source_version)"
	echo "debian_version=$debian_ver"
	echo "python3_version=$python_ver"
	echo "mmdebstrap_version=$mmdebstrap_ver"
	echo "gcc_version=$gcc_ver"
	echo "packages=packages.txt"
	echo "inputs_sha256=$img_key"
	for f in vmlinux bzImage vmlinux.btf System.map rootfs.ext4 add-initramfs.cpio packages.txt; do
		echo "sha256.$f=$(sha256sum "$tmp/$f" | cut -d' ' -f1)"
	done
} > "$tmp/manifest"
chmod a-w "$tmp/rootfs.ext4"
rm -rf "$img"
mv "$tmp" "$img"
ln -sfn "$(basename "$img")" "$cache/images/debian"
log "image ready in $(( $(date +%s) - t0 )) s: $img" \
	"(disk $size_mib MiB, $(( $(du -k "$img/rootfs.ext4" | cut -f1) / 1024 )) MiB allocated)"
[ "$print_dir" = 1 ] && echo "$img" || echo "build-image: debian: built $img"
