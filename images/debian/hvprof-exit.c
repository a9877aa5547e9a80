// SPDX-License-Identifier: MIT
// hvprof-exit STATUS: report STATUS (0..255) to hvprof's exit register and reboot; the Debian
// image's stand-in for busybox `devmem 0xd0000000 32 $((0x48560000 | STATUS)); reboot -f`
// (docs/guest-interface.md). hvprof-exit --event KIND [VALUE]: write the event 0x4845KKVV
// (docs/guest-interface.md, "Events": 1 init started, 2 workload start, 3 workload end with its
// status) and return. Writes the register through /dev/mem: CONFIG_DEVMEM is on in the test
// kernel and CONFIG_STRICT_DEVMEM off; x86's STRICT_DEVMEM would still allow this page (not RAM,
// claimed by no driver), IO_STRICT_DEVMEM would not. Built static, so it needs nothing from the
// disk once started.
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/reboot.h>
#include <unistd.h>

#define EXIT_REG_GPA 0xd0000000UL
#define EXIT_MAGIC 0x48560000U
#define EVENT_MAGIC 0x48450000U

/* A decimal 0..255 from @s, else @dflt. */
static uint32_t byte_arg(const char *s, uint32_t dflt)
{
	unsigned long v;
	char *end = NULL;

	if (!s)
		return dflt;
	v = strtoul(s, &end, 10);
	if (!*s || *end)
		return dflt;
	return v > 255 ? 255 : (uint32_t)v;
}

/* Write @value to the exit register. Return: 0; -1 (said on stderr). */
static int reg_write(uint32_t value)
{
	volatile uint32_t *reg;
	void *page;
	int fd, ret = -1;

	fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "hvprof-exit: open /dev/mem: %s\n", strerror(errno));
		return -1;
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, EXIT_REG_GPA);
	if (page == MAP_FAILED) {
		fprintf(stderr, "hvprof-exit: mmap /dev/mem at 0x%lx: %s\n", EXIT_REG_GPA,
			strerror(errno));
	} else {
		reg = page;
		*reg = value; /* an exit: hvprof stops the guest here */
		munmap(page, 4096);
		ret = 0;
	}
	close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	uint32_t status;

	if (argc > 1 && !strcmp(argv[1], "--event")) {
		uint32_t kind = byte_arg(argc > 2 ? argv[2] : NULL, 0);

		if (!kind) {
			fprintf(stderr, "hvprof-exit: --event KIND [VALUE]: KIND 1..255\n");
			return 2;
		}
		return reg_write(EVENT_MAGIC | kind << 8 | byte_arg(argc > 3 ? argv[3] : NULL, 0))
			       ? 1 : 0;
	}
	status = byte_arg(argc > 1 ? argv[1] : NULL, 1); /* not a number: 1 */
	sync(); /* a writable disk keeps what the run wrote */
	if (reg_write(EXIT_MAGIC | status)) { /* said; reboot below */ }
	/* Not under hvprof, or the register is unreachable: end the guest as `reboot -f` would. */
	reboot(RB_AUTOBOOT);
	fprintf(stderr, "hvprof-exit: reboot: %s\n", strerror(errno));
	return 1;
}
