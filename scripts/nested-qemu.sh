#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the QEMU that scripts/nested-svm.sh prefers: Debian's own QEMU source (the version
# apt installs), system emulator for x86_64 only, with one change in its emulated SVM. QEMU
# 7.2's VMRUN and #VMEXIT load DR7 from the VMCB as a plain assignment, so the breakpoints the
# nested guest's DR7 enables are never armed in TCG, and hvprof's guest-debug breakpoints
# (KVM_SET_GUEST_DEBUG in L1, which puts them in the VMCB's DR7) never fire in L2. The change
# loads DR7 through QEMU's own cpu_x86_update_dr7 at both places instead, which arms the
# guest's breakpoints at VMRUN and the host's at #VMEXIT, as a MOV to DR7 does; and when the
# breakpoints armed at a VMRUN differ from the last VMRUN's, it flushes the translated code: a
# block translated while none was armed holds no check, and a chained jump enters it without
# the lookup that would check (missed hits: marks whose return went unseen).
#
#   scripts/nested-qemu.sh            # prints the path of qemu-system-x86_64 on its last line
#
# Needs Debian's source packages (a deb-src entry: added for deb.debian.org if apt has none)
# and QEMU's build dependencies (installed); ~25 min on 2 cores, once, into $cache/nested-qemu.
set -euo pipefail
cache=${HVPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvprof}
out=$cache/nested-qemu
bin=$out/build/qemu-system-x86_64
stamp=dr7-2 # the change's version: another one rebuilds
if [ -x "$bin" ] && [ "$(cat "$out/.hvprof-dr7" 2>/dev/null)" = "$stamp" ]; then
	echo "$bin"
	exit 0
fi
log() { echo "nested-qemu: $*" >&2; }

if ! apt-get source --print-uris qemu >/dev/null 2>&1; then
	log "no deb-src entry: adding /etc/apt/sources.list.d/hvprof-deb-src.sources"
	. /etc/os-release
	cat > /etc/apt/sources.list.d/hvprof-deb-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	apt-get update >/dev/null
fi
apt-get install -y ninja-build meson libglib2.0-dev libpixman-1-dev libattr1-dev \
	libcap-ng-dev libfdt-dev flex bison dpkg-dev >/dev/null

rm -rf "$out"
mkdir -p "$out/dl"
(cd "$out/dl" && apt-get source --download-only qemu >/dev/null 2>&1)
dpkg-source -x "$out"/dl/qemu_*.dsc "$out/src" >/dev/null
rm -rf "$out/dl"
f=$out/src/target/i386/tcg/sysemu/svm_helper.c
[ -f "$f" ] || { log "no $f in this QEMU source: the change is for QEMU 7.2"; exit 1; }
python3 - "$f" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
# VMRUN: DR7 from the guest's VMCB, checked for reserved bits (as before), then loaded through
# cpu_x86_update_dr7; #VMEXIT: the host's DR7 from the host save area, likewise.
run = re.compile(r"env->dr\[7\] = (x86_ldq_phys\(cs,\s*env->vm_vmcb \+ offsetof\(struct vmcb, save\.dr7\)\));")
ext = re.compile(r"env->dr\[7\] = (x86_ldq_phys\(cs,\s*env->vm_hsave \+ offsetof\(struct vmcb, save\.dr7\)\));")
chk = "if (env->dr[7] & DR_RESERVED_MASK) {"
if len(run.findall(s)) != 1 or len(ext.findall(s)) != 1 or s.count(chk) != 1:
    sys.exit("nested-qemu: svm_helper.c is not the QEMU 7.2 this change knows")
s = run.sub(r"uint64_t new_dr7 = \1;", s)
s = s.replace(chk, "if (new_dr7 & DR_RESERVED_MASK) {")
# after the checks of the loaded state (the #ifdef that holds them ends the block)
i = s.index("if (new_dr7 & DR_RESERVED_MASK) {")
j = s.index("#endif", i) + len("#endif")
arm = """
    cpu_x86_update_dr7(env, new_dr7); /* hvprof: arm the guest's breakpoints */
    {
        /* hvprof: a block translated while these were not armed holds no check, and a
         * chained jump enters it without one: flush when the armed set changes */
        static uint64_t hvprof_armed[64][5];
        uint64_t now[5] = { env->dr[0], env->dr[1], env->dr[2], env->dr[3],
                            new_dr7 & 0xffff00ffull };
        int i = cs->cpu_index & 63;

        if (memcmp(hvprof_armed[i], now, sizeof(now))) {
            memcpy(hvprof_armed[i], now, sizeof(now));
            if (new_dr7 & 0xff) {
                tb_flush(cs);
            }
        }
    }"""
s = s[:j] + arm + s[j:]
s = ext.sub(r"cpu_x86_update_dr7(env, \1); /* hvprof: the host's breakpoints again */", s)
open(p, "w").write(s)
PY
mkdir -p "$out/build"
log "building QEMU (x86_64 system emulator, TCG) in $out/build"
(cd "$out/build" && ../src/configure --target-list=x86_64-softmmu --disable-docs \
	--disable-werror --enable-virtfs --disable-slirp --disable-gtk --disable-sdl --disable-vnc \
	--disable-opengl --disable-spice --disable-curses --disable-capstone --disable-tools \
	--disable-guest-agent --disable-plugins --disable-xen --disable-kvm >/dev/null)
nice ninja -C "$out/build" qemu-system-x86_64 >/dev/null
echo "$stamp" > "$out/.hvprof-dr7"
echo "$bin"
