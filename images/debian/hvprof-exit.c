// SPDX-License-Identifier: MIT
// hvprof-exit STATUS: report STATUS (0..255) to hvprof's exit register and reboot; the Debian
// image's stand-in for busybox `devmem 0xd0000000 32 $((0x48560000 | STATUS)); reboot -f`
// (docs/guest-interface.md). Writes the register through /dev/mem: CONFIG_DEVMEM is on in the test
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

int main(int argc, char **argv)
{
	unsigned long status = 1;
	char *end = NULL;
	volatile uint32_t *reg;
	void *page;
	int fd;

	if (argc > 1) {
		status = strtoul(argv[1], &end, 10);
		if (!*argv[1] || *end)
			status = 1;
	}
	if (status > 255)
		status = 255;
	sync(); /* a writable disk keeps what the run wrote */
	fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "hvprof-exit: open /dev/mem: %s\n", strerror(errno));
	} else {
		page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, EXIT_REG_GPA);
		if (page == MAP_FAILED) {
			fprintf(stderr, "hvprof-exit: mmap /dev/mem at 0x%lx: %s\n", EXIT_REG_GPA,
				strerror(errno));
		} else {
			reg = page;
			*reg = EXIT_MAGIC | (uint32_t)status; /* hvprof stops the guest here */
		}
		close(fd);
	}
	/* Not under hvprof, or the register is unreachable: end the guest as `reboot -f` would. */
	reboot(RB_AUTOBOOT);
	fprintf(stderr, "hvprof-exit: reboot: %s\n", strerror(errno));
	return 1;
}
