/* SPDX-License-Identifier: MIT */
/* Private to profile/: byte layout of the recording file (docs/recording-format.md). */
#ifndef HVPROF_RECFILE_INTERNAL_H
#define HVPROF_RECFILE_INTERNAL_H

#include <endian.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <hvprof/profile.h>

/* "HVPROF", NUL, 0x01: the last byte changes only if the header layout itself ever must. */
#define RECFILE_MAGIC "HVPROF\0\1"
#define RECFILE_MAGIC_LEN 8

#define RECFILE_REC_HDR 8  /* u32 type, u32 size */
#define RECFILE_REC_CRC 4  /* version 1 only: u32 CRC32 of type, size and payload */
#define RECFILE_REC_MIN (RECFILE_REC_HDR + RECFILE_REC_CRC) /* smallest version-1 record */

/* Version 2: records in blocks, "BLCK", u32 size, u32 records, u32 CRC32 (the format document). */
#define RECFILE_BLOCK_TAG 0x4b434c42u /* "BLCK" as a little-endian u32 */
#define RECFILE_BLOCK_HDR 16

/* Fixed payload sizes (bytes) before the variable-length parts; see the format document. */
#define RECFILE_META_FIXED 8        /* u32 key_len, u32 value_len */
#define RECFILE_SAMPLE_FIXED 72
#define RECFILE_THREAD_FIXED 44
#define RECFILE_PROCESS_FIXED 40    /* then exe_len bytes */
#define RECFILE_USER_STACK_FIXED 32
#define RECFILE_COUNTER_FIXED 12    /* u64 value, u32 name_len */
#define RECFILE_END_FIXED 8
#define RECFILE_MAPPING_FIXED 84    /* then path_len bytes */
#define RECFILE_USER_REGS_FIXED 176 /* then stack_len bytes */
#define RECFILE_EVENT_FIXED 16      /* u64 time_ns, u32 kind, i32 value */
#define RECFILE_BUILD_ID_MAX 20
#define RECFILE_EXE_MAX 255         /* bytes of PROCESS exe (hvp_process.exe is 256 with NUL) */

/*
 * Little-endian encoders and decoders. Each goes through a local pointer and one fixed-size
 * memcpy of the value in file byte order: a store through (*p)[i] may alias *p itself (uint8_t
 * is a character type), so a byte loop reloads *p on every byte (about 16 instructions per
 * u64); this form is one load or store.
 */
static inline void put_u8(uint8_t **p, uint8_t v)
{
	*(*p)++ = v;
}

static inline void put_u16(uint8_t **p, uint16_t v)
{
	uint8_t *d = *p;

	v = htole16(v);
	memcpy(d, &v, sizeof(v));
	*p = d + sizeof(v);
}

static inline void put_u32(uint8_t **p, uint32_t v)
{
	uint8_t *d = *p;

	v = htole32(v);
	memcpy(d, &v, sizeof(v));
	*p = d + sizeof(v);
}

static inline void put_u64(uint8_t **p, uint64_t v)
{
	uint8_t *d = *p;

	v = htole64(v);
	memcpy(d, &v, sizeof(v));
	*p = d + sizeof(v);
}

static inline void put_bytes(uint8_t **p, const void *src, size_t len)
{
	if (len) /* src may be NULL for 0 bytes (a USER_REGS without stack); memcpy may not */
		memcpy(*p, src, len);
	*p += len;
}

/* Stack bytes of a USER_REGS record from which the writer copies them with put_bytes_nt()
 * (fewer: put_bytes()). */
#define RECFILE_STREAM_COPY_MIN 4096

/*
 * put_bytes for a large payload (the stack of a USER_REGS record of RECFILE_STREAM_COPY_MIN
 * bytes or more, up to HVP_USER_STACK_MAX, in one piece or several) going into a thread's
 * append ring: non-temporal stores (SSE2 MOVNTDQ, Intel SDM vol. 1, 10.4.6.2).
 * The ring's next lines were last touched a whole ring ago, by the writer thread on another
 * core, so a plain copy first reads each line in; the writer thread reads them from memory
 * either way. Measured on a profiled guest, the two copies alternated per record in one run
 * (PVM host, --call-graph dwarf): 6-8 KiB stacks took 830-890 TSC ticks against 1 600-1 980
 * for memcpy; ~2 KiB ones 650 against 510, hence the threshold. Ends with SFENCE:
 * non-temporal stores are weakly ordered, and the ring's release store of its head
 * (recfile_stream_commit) must not become visible before them.
 */
static inline void put_bytes_nt(uint8_t **p, const void *src, size_t len)
{
#ifdef __SSE2__
	const uint8_t *s = src;
	uint8_t *d = *p;
	size_t head, n;

	if (len < 16) {
		put_bytes(p, src, len);
		return;
	}
	/* a plain copy up to 16-byte alignment of the destination, MOVNTDQ's */
	head = (size_t)(-(uintptr_t)d & 15);
	memcpy(d, s, head);
	d += head;
	s += head;
	n = (len - head) & ~(size_t)15;
	for (size_t i = 0; i < n; i += 16)
		_mm_stream_si128((__m128i *)(void *)(d + i),
				 _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
	_mm_sfence();
	memcpy(d + n, s + n, len - head - n);
	*p += len;
#else
	put_bytes(p, src, len);
#endif
}

static inline uint8_t get_u8(const uint8_t **p)
{
	return *(*p)++;
}

static inline uint16_t get_u16(const uint8_t **p)
{
	const uint8_t *s = *p;
	uint16_t v;

	memcpy(&v, s, sizeof(v));
	*p = s + sizeof(v);
	return le16toh(v);
}

static inline uint32_t get_u32(const uint8_t **p)
{
	const uint8_t *s = *p;
	uint32_t v;

	memcpy(&v, s, sizeof(v));
	*p = s + sizeof(v);
	return le32toh(v);
}

static inline uint64_t get_u64(const uint8_t **p)
{
	const uint8_t *s = *p;
	uint64_t v;

	memcpy(&v, s, sizeof(v));
	*p = s + sizeof(v);
	return le64toh(v);
}

_Static_assert(HVP_USER_REGS_AFTER_SAMPLE == RECFILE_SAMPLE &&
			       HVP_USER_REGS_AFTER_USER_STACK == RECFILE_USER_STACK,
	       "hvp_user_regs.follows holds record types");
_Static_assert(RECFILE_USER_REGS_FIXED == 40 + 8 * HVP_USER_NREGS, "USER_REGS layout");
_Static_assert(RECFILE_BUFFER >= 2 * RECFILE_REC_HDR + RECFILE_SAMPLE_FIXED +
			   16 * HVP_MAX_CALLCHAIN + RECFILE_USER_REGS_FIXED + HVP_USER_STACK_MAX,
	       "the writer's buffer holds a SAMPLE and its largest USER_REGS at once");
_Static_assert(RECFILE_WRITER_MAX_RECORD == RECFILE_REC_HDR + RECFILE_USER_REGS_FIXED +
						     HVP_USER_STACK_MAX,
	       "largest record the writer produces");

/*
 * The writer's lock-free append (recfile_stream.c), for the encoders of recfile_write.c: reserve
 * @bytes (whole records, frames included) in the calling thread's buffer, encode them at
 * slot->p, then commit. Nothing may fail between the two: every reserved byte is committed.
 */
struct recfile_slot {
	uint8_t *p;         /* where the caller writes its @bytes */
	void *ring;         /* the calling thread's buffer */
	uint64_t head;      /* its head after the commit */
	uint64_t end_pos;   /* stream position after these records */
	uint64_t tail_seen; /* the ring's tail when the room was found */
	uint32_t records;
};

/* Most bytes of one reserve: half a thread's buffer less the entry's 16-byte header. */
#define RECFILE_STREAM_MAX_BYTES 131056

/*
 * Return 0; -EINVAL (@bytes 0 or above RECFILE_STREAM_MAX_BYTES: more could need more than the
 * whole buffer wherever its head is, and the wait for room would never end); -ENOMEM (no buffer
 * for this thread); the sticky write error. Thread-safe; blocks while the calling thread's
 * buffer is full.
 */
int recfile_stream_reserve(struct recfile_writer *w, size_t bytes, uint32_t records,
			   struct recfile_slot *slot);
void recfile_stream_commit(struct recfile_writer *w, struct recfile_slot *slot);

#endif /* HVPROF_RECFILE_INTERNAL_H */
