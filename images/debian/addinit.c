// SPDX-License-Identifier: MIT
// /init of the small initramfs that hvprof gives a disk-rooted image when --add puts host files
// into the guest (docs/guest-interface.md, "Disk-rooted images"). hvprof unpacks the added files
// under /hvprof/upper of this initramfs; this program mounts the root disk (root=, rootfstype= of
// the kernel command line) read-only as the lower layer of an overlayfs whose upper layer is
// /hvprof/upper, moves the overlay to / and executes the image's init (init=) there. The disk is
// only read, so the image is never modified, and no file is copied.
//
// No libc: raw x86-64 system calls and a few KiB of code, because the guest kernel unpacks the
// initramfs at ~5 s per MiB on PVM hosts (a static glibc program would cost ~4 s, busybox ~10 s).
// Build: gcc -Os -static -nostdlib -fno-pie -no-pie -fno-stack-protector -fno-builtin addinit.c
#include <stddef.h>

#define SYS_read 0
#define SYS_write 1
#define SYS_open 2
#define SYS_close 3
#define SYS_exit 60
#define SYS_chdir 80
#define SYS_chroot 161
#define SYS_mount 165
#define SYS_umount2 166
#define SYS_execve 59

#define MS_RDONLY 1UL
#define MS_MOVE 8192UL
#define MNT_DETACH 2L

#define LOWER "/hvprof/lower"
#define NEWROOT "/hvprof/root"
#define OVERLAY_OPTS "lowerdir=" LOWER ",upperdir=/hvprof/upper,workdir=/hvprof/work"

__asm__(".text\n"
	".global _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov (%rsp), %rdi\n"          /* argc */
	"	lea 8(%rsp), %rsi\n"         /* argv */
	"	lea 16(%rsp,%rdi,8), %rdx\n" /* envp: after argv's NULL */
	"	and $-16, %rsp\n"
	"	call addinit_main\n"
	"	mov %eax, %edi\n"
	"	mov $60, %eax\n"
	"	syscall\n");

static long sys5(long nr, long a, long b, long c, long d, long e)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}

static size_t str_len(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

static void say(const char *s)
{
	sys5(SYS_write, 2, (long)s, (long)str_len(s), 0, 0);
}

/* "hvprof-addinit: WHAT WHERE failed (errno N)", then exit: the kernel panics (panic=-1 resets). */
static int fail(const char *what, const char *where, long ret)
{
	char num[24];
	int i = (int)sizeof(num) - 1;
	unsigned long e = (unsigned long)-ret;

	num[i] = '\0';
	do {
		num[--i] = (char)('0' + e % 10);
		e /= 10;
	} while (e && i > 0);
	say("hvprof-addinit: ");
	say(what);
	say(" ");
	say(where);
	say(" failed (errno ");
	say(num + i);
	say(")\n");
	return 1;
}

static int has_prefix(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return 0;
	return 1;
}

static char cmdline[4096];

/*
 * Split the kernel command line in place into words (double quotes group, as the kernel's
 * next_arg() does) and pick root=, rootfstype= and init=.
 */
static void parse_cmdline(const char **root, const char **fstype, const char **init)
{
	char *p = cmdline;

	while (*p) {
		char *word, *out;
		int quoted = 0;

		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		if (!*p)
			break;
		word = out = p;
		/* SAFETY: p and out stay inside cmdline, which read() left NUL-terminated */
		while (*p && (quoted || (*p != ' ' && *p != '\n' && *p != '\t'))) {
			if (*p == '"')
				quoted = !quoted;
			else
				*out++ = *p;
			p++;
		}
		if (*p)
			p++;
		*out = '\0';
		if (has_prefix(word, "root="))
			*root = word + 5;
		else if (has_prefix(word, "rootfstype="))
			*fstype = word + 11;
		else if (has_prefix(word, "init="))
			*init = word + 5;
	}
}

int addinit_main(int argc, char **argv, char **envp)
{
	const char *root = "/dev/vda", *fstype = "ext4", *init = "/sbin/init";
	char *init_argv[2];
	long fd, n, ret;

	(void)argc;
	(void)argv;
	ret = sys5(SYS_mount, (long)"proc", (long)"/proc", (long)"proc", 0, 0);
	if (ret < 0)
		return fail("mount", "/proc", ret);
	fd = sys5(SYS_open, (long)"/proc/cmdline", 0, 0, 0, 0);
	if (fd < 0)
		return fail("open", "/proc/cmdline", fd);
	n = sys5(SYS_read, fd, (long)cmdline, sizeof(cmdline) - 1, 0, 0);
	sys5(SYS_close, fd, 0, 0, 0, 0);
	if (n < 0)
		return fail("read", "/proc/cmdline", n);
	cmdline[n] = '\0';
	sys5(SYS_umount2, (long)"/proc", 0, 0, 0, 0);
	parse_cmdline(&root, &fstype, &init);
	if (!has_prefix(root, "/dev/"))
		return fail("root= must name a /dev/ node: mount", root, -22);

	ret = sys5(SYS_mount, (long)"devtmpfs", (long)"/dev", (long)"devtmpfs", 0, 0);
	if (ret < 0)
		return fail("mount", "/dev", ret);
	ret = sys5(SYS_mount, (long)root, (long)LOWER, (long)fstype, MS_RDONLY, 0);
	if (ret < 0)
		return fail("mount (read-only)", root, ret);
	ret = sys5(SYS_mount, (long)"overlay", (long)NEWROOT, (long)"overlay", 0, (long)OVERLAY_OPTS);
	if (ret < 0)
		return fail("mount overlay", OVERLAY_OPTS, ret);
	/* The image's init finds /dev mounted, as when the kernel mounts the disk itself. */
	ret = sys5(SYS_mount, (long)"/dev", (long)NEWROOT "/dev", 0, MS_MOVE, 0);
	if (ret < 0)
		sys5(SYS_umount2, (long)"/dev", MNT_DETACH, 0, 0, 0);

	ret = sys5(SYS_chdir, (long)NEWROOT, 0, 0, 0, 0);
	if (ret < 0)
		return fail("chdir", NEWROOT, ret);
	ret = sys5(SYS_mount, (long)".", (long)"/", 0, MS_MOVE, 0);
	if (ret < 0)
		return fail("move the overlay to", "/", ret);
	ret = sys5(SYS_chroot, (long)".", 0, 0, 0, 0);
	if (ret < 0)
		return fail("chroot", NEWROOT, ret);
	sys5(SYS_chdir, (long)"/", 0, 0, 0, 0);
	init_argv[0] = (char *)init;
	init_argv[1] = NULL;
	ret = sys5(SYS_execve, (long)init, (long)init_argv, (long)envp, 0, 0);
	return fail("execve", init, ret);
}
