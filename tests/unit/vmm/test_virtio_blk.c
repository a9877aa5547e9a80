// SPDX-License-Identifier: MIT
// Unit tests of virtio-blk over virtio-mmio without /dev/kvm: a driver written here sets the
// device up through its registers (4.2.3.1), puts requests on a queue in a byte array (guest
// RAM) and checks data, status, used ring and the interrupt line, against temporary disk files:
// reads, writes, the snapshot overlay, read-only disks, requests past the end, GET_ID, flush,
// a chain with no status byte (DEVICE_NEEDS_RESET), and disk_open's refusals (missing file,
// directory, empty, qcow2, a lock held by another open).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "vmm_internal.h"
#include "devices/virtio.h"

#define RAM_BYTES (1u << 20)
#define QSIZE 16
#define DESC_GPA 0x1000u
#define AVAIL_GPA 0x2000u
#define USED_GPA 0x3000u
#define HDR_GPA 0x8000u
#define STATUS_GPA 0x8100u
#define DATA_GPA 0x10000u
#define DISK_SECTORS 64

#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define T_GET_ID 8
#define S_OK 0
#define S_IOERR 1
#define S_UNSUPP 2

static uint8_t ram_bytes[RAM_BYTES];
static struct vmm_ram ram;
static uint16_t avail_idx;
static int irq_level = -1;
static char tmpdir[] = "/tmp/hvprof-vblk-XXXXXX";

static void set_irq(void *ctx, unsigned int irq, int level)
{
	(void)ctx;
	(void)irq;
	irq_level = level;
}

static uint32_t rd(struct virtio_mmio *m, uint32_t off)
{
	uint8_t d[8] = { 0 };
	uint32_t v;

	virtio_mmio_access(m, off, false, d, 4);
	memcpy(&v, d, 4);
	return v;
}

static bool wr(struct virtio_mmio *m, uint32_t off, uint32_t v)
{
	return virtio_mmio_access(m, off, true, (uint8_t *)&v, 4);
}

/* A disk image of DISK_SECTORS sectors, each filled with its number's low byte. */
static char *make_disk(const char *name, size_t sectors)
{
	static char path[256];
	uint8_t sec[DISK_SECTOR];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return NULL;
	for (size_t s = 0; s < sectors; s++) {
		memset(sec, (int)(s & 0xff), sizeof(sec));
		if (write(fd, sec, sizeof(sec)) != (ssize_t)sizeof(sec)) {
			close(fd);
			return NULL;
		}
	}
	close(fd);
	return path;
}

static uint8_t file_byte(const char *path, uint64_t off)
{
	uint8_t b = 0xee;
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		if (pread(fd, &b, 1, (off_t)off) != 1)
			b = 0xee;
		close(fd);
	}
	return b;
}

/* The driver's initialization (3.1.1) with @features accepted; returns the Status it reads
 * back after FEATURES_OK. */
static uint32_t driver_init(struct virtio_mmio *m, uint64_t features)
{
	wr(m, 0x070, 0);
	wr(m, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	wr(m, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(m, 0x024, 0);
	wr(m, 0x020, (uint32_t)features);
	wr(m, 0x024, 1);
	wr(m, 0x020, (uint32_t)(features >> 32));
	wr(m, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	return rd(m, 0x070);
}

static void queue_setup(struct virtio_mmio *m)
{
	wr(m, 0x030, 0);
	wr(m, 0x038, QSIZE);
	wr(m, 0x080, DESC_GPA);
	wr(m, 0x084, 0);
	wr(m, 0x090, AVAIL_GPA);
	wr(m, 0x094, 0);
	wr(m, 0x0a0, USED_GPA);
	wr(m, 0x0a4, 0);
	wr(m, 0x044, 1);
	wr(m, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
			     VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

static void put_desc(unsigned int i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = ram_bytes + DESC_GPA + 16 * i;

	memcpy(p, &addr, 8);
	memcpy(p + 8, &len, 4);
	memcpy(p + 12, &flags, 2);
	memcpy(p + 14, &next, 2);
}

/* One request: header, @len bytes of data at DATA_GPA (device-writable for reads and GET_ID),
 * status. Notifies, and returns the status byte (0xff: not written). */
static int request(struct virtio_blk *b, uint32_t type, uint64_t sector, uint32_t len)
{
	uint32_t hdr[4] = { type, 0, (uint32_t)sector, (uint32_t)(sector >> 32) };
	bool to_guest = type == T_IN || type == T_GET_ID;
	uint16_t head = (uint16_t)((avail_idx * 3) % QSIZE);
	uint16_t d1 = (uint16_t)((head + 1) % QSIZE), d2 = (uint16_t)((head + 2) % QSIZE);

	memcpy(ram_bytes + HDR_GPA, hdr, 16);
	ram_bytes[STATUS_GPA] = 0xff;
	put_desc(head, HDR_GPA, 16, VIRTQ_DESC_F_NEXT, len ? d1 : d2);
	put_desc(d1, DATA_GPA, len, VIRTQ_DESC_F_NEXT | (to_guest ? VIRTQ_DESC_F_WRITE : 0), d2);
	put_desc(d2, STATUS_GPA, 1, VIRTQ_DESC_F_WRITE, 0);
	memcpy(ram_bytes + AVAIL_GPA + 4 + 2 * (avail_idx % QSIZE), &head, 2);
	avail_idx++;
	memcpy(ram_bytes + AVAIL_GPA + 2, &avail_idx, 2);
	wr(&b->mmio, 0x050, 0);
	return ram_bytes[STATUS_GPA];
}

/* A device over a fresh disk, set up as Linux's driver does. */
static struct virtio_blk *device(const char *name, bool ro, bool snapshot, char **path)
{
	struct vmm_disk cfg = { .readonly = ro, .snapshot = snapshot };
	struct virtio_blk *b = NULL;

	memset(ram_bytes, 0, sizeof(ram_bytes));
	ram = (struct vmm_ram){ .hva = ram_bytes, .size = RAM_BYTES, .n_slots = 1 };
	ram.slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = RAM_BYTES, .hva = ram_bytes };
	avail_idx = 0;
	irq_level = -1;
	*path = make_disk(name, DISK_SECTORS);
	cfg.path = *path;
	if (!*path || virtio_blk_create(&cfg, "hvprof-vda", &ram, 5, set_irq, NULL, &b) != 0)
		return NULL;
	driver_init(&b->mmio, (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_INDIRECT_DESC));
	queue_setup(&b->mmio);
	return b;
}

static int test_registers(void)
{
	struct vmm_disk cfg = { 0 };
	struct virtio_blk *b;
	char *path = make_disk("regs.img", DISK_SECTORS);
	uint8_t d[8];
	uint64_t cap = 0;

	ASSERT_TRUE(path);
	cfg.path = path;
	ASSERT_EQ_INT(virtio_blk_create(&cfg, "id", &ram, 5, set_irq, NULL, &b), 0);
	ASSERT_EQ_U64(rd(&b->mmio, 0x000), 0x74726976);
	ASSERT_EQ_INT(rd(&b->mmio, 0x004), 2);
	ASSERT_EQ_INT(rd(&b->mmio, 0x008), VIRTIO_ID_BLOCK);
	wr(&b->mmio, 0x014, 1);
	ASSERT_TRUE(rd(&b->mmio, 0x010) & 1); /* VERSION_1 is bit 32 */
	/* registers take aligned 32-bit accesses only; config space takes any width */
	ASSERT_TRUE(!virtio_mmio_access(&b->mmio, 0x070, false, d, 2));
	ASSERT_TRUE(!virtio_mmio_access(&b->mmio, 0x072, false, d, 4));
	ASSERT_TRUE(!wr(&b->mmio, 0x000, 1)); /* MagicValue is read-only */
	ASSERT_TRUE(!virtio_mmio_access(&b->mmio, 0xffe, false, d, 4)); /* past the window */
	ASSERT_TRUE(virtio_mmio_access(&b->mmio, 0x100, false, d, 8));
	memcpy(&cap, d, 8);
	ASSERT_EQ_U64(cap, DISK_SECTORS);
	ASSERT_TRUE(virtio_mmio_access(&b->mmio, 0x100 + 20, false, d, 1));
	ASSERT_EQ_INT(d[0], 0); /* blk_size 512 = 0x200: low byte 0 */
	ASSERT_TRUE(virtio_mmio_access(&b->mmio, 0x100 + 21, false, d, 1));
	ASSERT_EQ_INT(d[0], 2);
	/* a driver that does not accept VERSION_1 (a legacy one) never gets FEATURES_OK */
	ASSERT_TRUE(!(driver_init(&b->mmio, 0) & VIRTIO_STATUS_FEATURES_OK));
	/* nor one that accepts what is not offered (bit 40) */
	ASSERT_TRUE(!(driver_init(&b->mmio, (1ull << VIRTIO_F_VERSION_1) | (1ull << 40)) &
		      VIRTIO_STATUS_FEATURES_OK));
	ASSERT_TRUE(driver_init(&b->mmio, 1ull << VIRTIO_F_VERSION_1) & VIRTIO_STATUS_FEATURES_OK);
	/* a queue outside RAM at QueueReady breaks the device */
	wr(&b->mmio, 0x038, QSIZE);
	wr(&b->mmio, 0x080, 0xfff00000);
	wr(&b->mmio, 0x044, 1);
	ASSERT_EQ_INT(rd(&b->mmio, 0x044), 0);
	ASSERT_TRUE(rd(&b->mmio, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	wr(&b->mmio, 0x070, 0); /* reset clears it */
	ASSERT_EQ_INT(rd(&b->mmio, 0x070), 0);
	virtio_blk_destroy(b);
	return TEST_OK;
}

static int test_read_write(void)
{
	char *path;
	struct virtio_blk *b = device("rw.img", false, false, &path);
	uint32_t id, len;

	ASSERT_TRUE(b);
	ASSERT_EQ_INT(request(b, T_IN, 3, 1024), S_OK);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA], 3);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 1023], 4);
	memcpy(&id, ram_bytes + USED_GPA + 4, 4);
	memcpy(&len, ram_bytes + USED_GPA + 8, 4);
	ASSERT_EQ_INT(id, 0);
	ASSERT_EQ_INT(len, 1025); /* data + status */
	ASSERT_EQ_INT(irq_level, 1);
	ASSERT_EQ_INT(rd(&b->mmio, 0x060), VIRTIO_MMIO_INT_VRING);
	wr(&b->mmio, 0x064, VIRTIO_MMIO_INT_VRING);
	ASSERT_EQ_INT(irq_level, 0);
	memset(ram_bytes + DATA_GPA, 0xab, 512);
	ASSERT_EQ_INT(request(b, T_OUT, 10, 512), S_OK);
	ASSERT_EQ_INT(file_byte(path, 10 * 512 + 7), 0xab);
	ASSERT_EQ_INT(request(b, T_FLUSH, 0, 0), S_OK);
	ASSERT_EQ_U64(b->stats.reads, 1);
	ASSERT_EQ_U64(b->stats.writes, 1);
	ASSERT_EQ_U64(b->stats.read_bytes, 1024);
	ASSERT_EQ_U64(b->stats.flushes, 1);
	ASSERT_EQ_U64(b->stats.errors, 0);
	virtio_blk_destroy(b);
	return TEST_OK;
}

static int test_errors(void)
{
	char *path;
	struct virtio_blk *b = device("err.img", false, false, &path);

	ASSERT_TRUE(b);
	ASSERT_EQ_INT(request(b, T_IN, DISK_SECTORS - 1, 1024), S_IOERR); /* past the end */
	ASSERT_EQ_INT(request(b, T_OUT, DISK_SECTORS, 512), S_IOERR);
	ASSERT_EQ_INT(request(b, T_IN, 0xffffffffffffffffull, 512), S_IOERR); /* would wrap */
	ASSERT_EQ_INT(request(b, T_IN, 0, 100), S_IOERR);                     /* not sectors */
	ASSERT_EQ_INT(request(b, 77, 0, 512), S_UNSUPP);
	ASSERT_EQ_INT(request(b, T_IN, DISK_SECTORS - 2, 1024), S_OK); /* the last two */
	ASSERT_EQ_U64(b->stats.errors, 5);
	ASSERT_EQ_INT(request(b, T_GET_ID, 0, 20), S_OK);
	ASSERT_TRUE(!memcmp(ram_bytes + DATA_GPA, "hvprof-vda\0", 11));
	/* a chain without a writable byte for the status: the device breaks, and says so */
	put_desc(0, HDR_GPA, 16, 0, 0);
	memcpy(ram_bytes + AVAIL_GPA + 4 + 2 * (avail_idx % QSIZE), &(uint16_t){ 0 }, 2);
	avail_idx++;
	memcpy(ram_bytes + AVAIL_GPA + 2, &avail_idx, 2);
	wr(&b->mmio, 0x050, 0);
	ASSERT_TRUE(rd(&b->mmio, 0x070) & VIRTIO_STATUS_NEEDS_RESET);
	ASSERT_TRUE(rd(&b->mmio, 0x060) & VIRTIO_MMIO_INT_CONFIG);
	ASSERT_EQ_U64(b->stats.broken, 1);
	/* further notifications are ignored until a reset */
	ASSERT_EQ_INT(request(b, T_IN, 0, 512), 0xff);
	virtio_blk_destroy(b);
	return TEST_OK;
}

static int test_readonly(void)
{
	char *path;
	struct virtio_blk *b = device("ro.img", true, false, &path);

	ASSERT_TRUE(b);
	wr(&b->mmio, 0x014, 0);
	ASSERT_TRUE(rd(&b->mmio, 0x010) & (1u << 5)); /* VIRTIO_BLK_F_RO offered */
	memset(ram_bytes + DATA_GPA, 0xcd, 512);
	ASSERT_EQ_INT(request(b, T_OUT, 1, 512), S_IOERR);
	ASSERT_EQ_INT(file_byte(path, 512), 1);
	ASSERT_EQ_INT(request(b, T_IN, 1, 512), S_OK);
	ASSERT_EQ_INT(request(b, T_FLUSH, 0, 0), S_OK);
	ASSERT_EQ_U64(b->stats.errors, 1);
	virtio_blk_destroy(b);
	return TEST_OK;
}

static int test_snapshot(void)
{
	char *path;
	struct virtio_blk *b = device("snap.img", false, true, &path);

	ASSERT_TRUE(b);
	/* sectors 5 and 7 written: a read of 4..8 mixes image and overlay runs */
	memset(ram_bytes + DATA_GPA, 0x55, 512);
	ASSERT_EQ_INT(request(b, T_OUT, 5, 512), S_OK);
	memset(ram_bytes + DATA_GPA, 0x77, 512);
	ASSERT_EQ_INT(request(b, T_OUT, 7, 512), S_OK);
	ASSERT_EQ_INT(file_byte(path, 5 * 512), 5); /* the image is untouched */
	ASSERT_EQ_INT(file_byte(path, 7 * 512), 7);
	memset(ram_bytes + DATA_GPA, 0, 5 * 512);
	ASSERT_EQ_INT(request(b, T_IN, 4, 5 * 512), S_OK);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 0 * 512], 4);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 1 * 512 + 100], 0x55);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 2 * 512 + 511], 6);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 3 * 512], 0x77);
	ASSERT_EQ_INT(ram_bytes[DATA_GPA + 4 * 512], 8);
	ASSERT_EQ_INT(request(b, T_FLUSH, 0, 0), S_OK);
	virtio_blk_destroy(b);
	ASSERT_EQ_INT(file_byte(path, 5 * 512), 5);
	return TEST_OK;
}

struct open_row {
	const char *name;
	const char *path;
	int want;
};

static int test_disk_open_refusals(void)
{
	char p_missing[300], p_empty[300], p_qcow[300], p_tiny[300];
	const struct open_row rows[] = {
		{ "missing file", p_missing, -ENOENT },
		{ "directory", tmpdir, -EISDIR },
		{ "empty file", p_empty, -ENODATA },
		{ "smaller than a sector", p_tiny, -ENODATA },
		{ "qcow2 image", p_qcow, -ENOTSUP },
		{ "not a file or block device", "/dev/null", -EINVAL },
	};
	int fd;

	snprintf(p_missing, sizeof(p_missing), "%s/missing.img", tmpdir);
	snprintf(p_empty, sizeof(p_empty), "%s/empty.img", tmpdir);
	snprintf(p_tiny, sizeof(p_tiny), "%s/tiny.img", tmpdir);
	snprintf(p_qcow, sizeof(p_qcow), "%s/x.qcow2", tmpdir);
	close(open(p_empty, O_CREAT | O_WRONLY | O_TRUNC, 0644));
	fd = open(p_tiny, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ASSERT_EQ_INT(write(fd, "x", 1), 1);
	close(fd);
	fd = open(p_qcow, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ASSERT_EQ_INT(write(fd, "QFI\xfb\0\0\0\3", 8), 8);
	ASSERT_EQ_INT(ftruncate(fd, 1 << 16), 0);
	close(fd);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct vmm_disk cfg = { .path = rows[i].path, .readonly = true };
		int err = vmm_disk_probe(&cfg);

		if (err != rows[i].want) {
			fprintf(stderr, "disk '%s': got %d, want %d\n", rows[i].name, err,
				rows[i].want);
			return TEST_FAIL;
		}
	}
	return TEST_OK;
}

/* Locks: a read-write disk excludes every other open; snapshot and ro ones share. */
static int test_disk_locks(void)
{
	char *path = make_disk("lock.img", 4);
	struct vmm_disk rw = { .path = path }, snap = { .path = path, .snapshot = true };
	struct vmm_disk ro = { .path = path, .readonly = true };
	struct disk a, b;

	ASSERT_TRUE(path);
	ASSERT_EQ_INT(disk_open(&a, &rw), 0);
	ASSERT_EQ_INT(disk_open(&b, &snap), -EBUSY);
	ASSERT_EQ_INT(disk_open(&b, &rw), -EBUSY);
	disk_close(&a);
	ASSERT_EQ_INT(disk_open(&a, &snap), 0);
	ASSERT_EQ_INT(disk_open(&b, &ro), 0);
	disk_close(&b);
	ASSERT_EQ_INT(disk_open(&b, &rw), -EBUSY);
	disk_close(&a);
	ASSERT_EQ_INT(disk_open(&b, &rw), 0);
	disk_close(&b);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "virtio-mmio registers, feature negotiation, a queue outside RAM", test_registers },
	{ "read, write, flush; used ring and interrupt line", test_read_write },
	{ "errors: past the end, not whole sectors, unknown type; no status byte breaks it",
	  test_errors },
	{ "read-only disk refuses writes", test_readonly },
	{ "snapshot: writes in the overlay, image untouched, mixed reads", test_snapshot },
	{ "disk_open refuses missing, directory, empty, qcow2, /dev/null", test_disk_open_refusals },
	{ "disk locks: exclusive read-write, shared snapshot/ro", test_disk_locks },
};

int main(void)
{
	int rc;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	ram = (struct vmm_ram){ .hva = ram_bytes, .size = RAM_BYTES, .n_slots = 1 };
	ram.slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = RAM_BYTES, .hva = ram_bytes };
	rc = test_run_all(tests, ARRAY_SIZE(tests));
	if (rc == 0) { /* a failed run keeps its files for the post-mortem */
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	return rc;
}
