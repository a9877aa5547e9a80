#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the QEMU that scripts/nested-svm.sh prefers: Debian's own QEMU source (the version
# apt installs), system emulator for x86_64 only, with two changes in its emulated SVM. QEMU
# 7.2's VMRUN and #VMEXIT load DR7 from the VMCB as a plain assignment, so the breakpoints the
# nested guest's DR7 enables are never armed in TCG, and hvprof's guest-debug breakpoints
# (KVM_SET_GUEST_DEBUG in L1, which puts them in the VMCB's DR7) never fire in L2. The first change
# loads DR7 through QEMU's own cpu_x86_update_dr7 at both places instead, which arms the
# guest's breakpoints at VMRUN and the host's at #VMEXIT, as a MOV to DR7 does; and when the
# breakpoints armed at a VMRUN differ from the last VMRUN's, it invalidates the translated code
# of each instruction breakpoint's page (found through L2's page tables and the nested ones; all
# of it where the page is not mapped): TCG checks breakpoints when it looks a block up, and a
# chained jump into a block translated while none was armed skips that lookup (missed hits:
# marks whose return went unseen). A flush of all code at each change, as before (stamp dr7-3),
# made a guest whose breakpoints change at every mark crawl (Debian's stock kernel, the
# sysretq/iretq trap strategy: no /init in 200 s; 26 s with the page's blocks alone).
# Second, VMRUN's injection of an external interrupt (EVENTINJ, type INTR) delivers it at once
# but leaves the vector in cs->exception_index, so the next exit request of TCG's loop delivers
# it again, as an exception, wherever the guest is then, interrupts off or not (seen at the
# first instruction of its own handler, and at CPL0 on the user's stack). L2 guests oopsed or
# hung in about a third of the runs from that (docs/nested-svm.md), eager ones too; the second
# change resets it once the interrupt is delivered, as TCG's own interrupt path does.
#
#   scripts/nested-qemu.sh            # prints the path of qemu-system-x86_64 on its last line
#
# Needs Debian's source packages (a deb-src entry: added for deb.debian.org if apt has none)
# and QEMU's build dependencies (installed); ~25 min on 2 cores, once, into $cache/nested-qemu.
set -euo pipefail
cache=${HVPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvprof}
out=$cache/nested-qemu
bin=$out/build/qemu-system-x86_64
stamp=dr7-4 # the changes' version: another one rebuilds
log() { echo "nested-qemu: $*" >&2; }
# one build at a time: a second one would remove the first one's tree
mkdir -p "$cache"
exec 9>"$cache/.nested-qemu.lock"
flock 9
if [ -x "$bin" ] && [ "$(cat "$out/.hvprof-dr7" 2>/dev/null)" = "$stamp" ]; then
	echo "$bin"
	exit 0
fi
# each step's output goes to $blog; a failed step is named, with the log's end
blog=$cache/nested-qemu.log
: > "$blog"
step() {
	local what=$1
	shift
	if ! "$@" >>"$blog" 2>&1; then
		log "$what failed; the end of $blog:"
		tail -25 "$blog" >&2
		exit 1
	fi
}

if ! apt-get source --print-uris qemu >/dev/null 2>&1; then
	log "no deb-src entry: adding /etc/apt/sources.list.d/hvprof-deb-src.sources"
	. /etc/os-release
	# the suites the installed QEMU may come from (its updates and security fixes included)
	cat > /etc/apt/sources.list.d/hvprof-deb-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $VERSION_CODENAME-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	step "apt-get update" apt-get update
fi
step "installing QEMU's build dependencies" apt-get install -y ninja-build meson \
	libglib2.0-dev libpixman-1-dev libattr1-dev libcap-ng-dev libfdt-dev flex bison dpkg-dev

rm -rf "$out"
mkdir -p "$out/dl"
step "apt-get source qemu" sh -c "cd '$out/dl' && apt-get source --download-only qemu"
step "unpacking the QEMU source" dpkg-source -x "$out"/dl/qemu_*.dsc "$out/src"
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
# after the checks of the loaded state (the #ifdef that holds them ends the block: nothing but
# the check's own body may stand between)
i = s.index("if (new_dr7 & DR_RESERVED_MASK) {")
j = s.index("#endif", i) + len("#endif")
if s[i:j].count("cpu_vmexit") != 1 or s[i:j].count("}") != 1:
    sys.exit("nested-qemu: svm_helper.c's DR7 check is not laid out as in QEMU 7.2")
arm = """
    cpu_x86_update_dr7(env, new_dr7); /* hvprof: arm the guest's breakpoints */
    {
        /* hvprof: a block translated while these were not armed holds no check, and a
         * chained jump enters it without the lookup that checks: when the armed set
         * changes, invalidate the blocks of each instruction breakpoint's page (L2's
         * kernel mapping, through the nested page tables; everything if unmapped) */
        static uint64_t hvprof_armed[64][5];
        uint64_t now[5] = { env->dr[0], env->dr[1], env->dr[2], env->dr[3],
                            new_dr7 & 0xffff00ffull };
        int i = cs->cpu_index & 63;

        if (memcmp(hvprof_armed[i], now, sizeof(now))) {
            memcpy(hvprof_armed[i], now, sizeof(now));
            for (int n = 0; n < DR7_MAX_BP; n++) {
                void *host = NULL;
                target_ulong saved_error_code = env->error_code;
                tb_page_addr_t pa;
                int flags;

                if (!((new_dr7 >> (n * 2)) & 3) ||
                    ((new_dr7 >> (DR7_TYPE_SHIFT + n * 4)) & 3) != DR7_TYPE_BP_INST) {
                    continue;
                }
                flags = probe_access_flags(env, env->dr[n], MMU_INST_FETCH,
                                           cpu_mmu_index_kernel(env), true, &host, 0);
                env->error_code = saved_error_code; /* a failed probe sets it */
                if ((flags & TLB_INVALID_MASK) || !host) {
                    tb_flush(cs);
                    break;
                }
                pa = qemu_ram_addr_from_host_nofail(host) & TARGET_PAGE_MASK;
                tb_invalidate_phys_range(pa, pa + TARGET_PAGE_SIZE);
            }
        }
    }"""
s = s[:j] + arm + s[j:]
s = ext.sub(r"cpu_x86_update_dr7(env, \1); /* hvprof: the host's breakpoints again */", s)
# VMRUN's EVENTINJ of type INTR: delivered by do_interrupt_x86_hardirq; exception_index reset
inj = "do_interrupt_x86_hardirq(env, vector, 1);\n            break;"
if s.count(inj) != 1:
    sys.exit("nested-qemu: svm_helper.c's VMRUN event injection is not QEMU 7.2's")
s = s.replace(inj, "do_interrupt_x86_hardirq(env, vector, 1);\n"
              "            cs->exception_index = -1; /* hvprof: delivered, not to redeliver */\n"
              "            break;")
open(p, "w").write(s)
PY
mkdir -p "$out/build"
log "building QEMU (x86_64 system emulator, TCG) in $out/build"
step "configuring QEMU" sh -c "cd '$out/build' && ../src/configure \
	--target-list=x86_64-softmmu --disable-docs --disable-werror --enable-virtfs \
	--disable-slirp --disable-gtk --disable-sdl --disable-vnc --disable-opengl --disable-spice \
	--disable-curses --disable-capstone --disable-tools --disable-guest-agent --disable-plugins \
	--disable-xen --disable-kvm"
step "building QEMU" nice ninja -C "$out/build" qemu-system-x86_64
echo "$stamp" > "$out/.hvprof-dr7"
echo "$bin"
