// SPDX-License-Identifier: MIT
// Recording writer, the stream: per-thread append buffers with no lock, merged in call order by
// the writer's own thread into CRC-checked blocks (docs/recording-format.md, version 2).
//
// Each thread that writes gets a ring of STREAM_RING_BYTES (single producer: that thread;
// single consumer: the writer thread). A record (or a pair that must stay adjacent) is one
// entry: a 16-byte entry header, then the record bytes as they go to the file. Its place in the
// file is its *stream position*, taken with one atomic add on the writer's byte counter after
// the space is reserved and before the bytes are encoded, so the file order is the order in
// which calls took their positions, as the mutex of version 1 ordered them. The writer thread
// copies entries out in position order (the next position is at the front of one ring; if none
// holds it yet, its thread is encoding it and the writer waits for it), seals blocks with one
// zlib crc32 each and writes them. The vCPU threads pay the encoding and one atomic add per
// record; the CRC and write(2) are paid by the writer thread, which runs every 10 ms by itself
// (waking it is a futex call: a thread does that only when its ring is half full).
//
// All the state is in struct recfile_writer (STYLE: no hidden global or thread-local state): a
// thread finds its ring in the writer's table keyed by pthread_self(), read without a lock.
#define pr_fmt(fmt) "recfile: " fmt

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include <hvprof/file.h>
#include <hvprof/hugemem.h>
#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "recfile_internal.h"

#define STREAM_RING_BYTES (256 * 1024) /* per writing thread; a power of two */
#define STREAM_ENTRY_HDR 16            /* u64 position (STREAM_PAD: skip), u32 bytes, u32 records */
#define STREAM_PAD UINT64_MAX
#define STREAM_PERIOD_NS 10000000L     /* the writer thread writes at least this often (10 ms) */
#define STREAM_KICK_BYTES (STREAM_RING_BYTES / 2) /* and when a ring holds more than this */
#define STREAM_BLOCK_BYTES RECFILE_BUFFER
#define STREAM_MAX_BYTES RECFILE_STREAM_MAX_BYTES /* most bytes of one entry */
#define STREAM_SLOT_BITS 8
#define STREAM_SLOTS (1u << STREAM_SLOT_BITS) /* the thread -> ring table */
#define STREAM_SLOTS_USED (STREAM_SLOTS * 3 / 4) /* more threads: found in the list instead */
/* The writer waiting for a place whose thread is descheduled (drain): look again at once this
 * many times, then yield this many times, then sleep 20 us, doubling up to 1 ms. */
#define STREAM_SPINS 64
#define STREAM_YIELDS 8
#define STREAM_NAP_MIN_NS 20000L
#define STREAM_NAP_MAX_NS 1000000L

_Static_assert((STREAM_RING_BYTES & (STREAM_RING_BYTES - 1)) == 0, "ring size is a power of 2");
/* The largest entry: a SAMPLE with full callchains and a USER_REGS with the most stack. */
#define STREAM_MAX_ENTRY                                                                    \
	(STREAM_ENTRY_HDR + 2 * RECFILE_REC_HDR + RECFILE_SAMPLE_FIXED + 16 * HVP_MAX_CALLCHAIN + \
	 RECFILE_USER_REGS_FIXED + HVP_USER_STACK_MAX)
_Static_assert(STREAM_RING_BYTES >= 2 * STREAM_MAX_ENTRY + 16,
	       "a ring holds the largest entry wherever its head is (padding to the end first)");
/*
 * recfile_stream_reserve() refuses more than STREAM_MAX_BYTES: an entry of at most half the ring
 * (its header and its rounding included), padded to the end first when it would wrap, needs less
 * than the whole ring wherever the head is, so the wait for room always ends.
 */
_Static_assert(STREAM_ENTRY_HDR + STREAM_MAX_BYTES == STREAM_RING_BYTES / 2 &&
		       STREAM_MAX_BYTES % 16 == 0,
	       "an entry is at most half the ring, its header and rounding included");
_Static_assert(STREAM_MAX_BYTES <= RECFILE_BUFFER, "an entry fits an empty block");
_Static_assert(STREAM_MAX_ENTRY <= STREAM_MAX_BYTES + STREAM_ENTRY_HDR,
	       "the encoders' largest entry is accepted");

/*
 * Fields written by different threads sit on different cache lines (64 bytes on x86-64). Both
 * structs are allocated with posix_memalign() for it (calloc only aligns to 16: stream_alloc()).
 */
struct stream_ring {
	struct stream_ring *next;
	uintptr_t owner;                   /* the writing thread's pthread_self() */
	uint8_t *buf;
	alignas(64) _Atomic uint64_t head; /* bytes published by the owner (monotonic) */
	_Atomic uint64_t records;          /* written by the owner only */
	alignas(64) _Atomic uint64_t tail; /* bytes consumed by the writer thread (monotonic) */
};

/* A thread's ring, found by the thread's pthread_self(): set under lock, read without. */
struct stream_slot {
	_Atomic uintptr_t owner; /* 0: free; stored (release) after @ring */
	struct stream_ring *ring;
};

struct recfile_writer {
	/* Read by every append; written rarely. */
	int fd;
	_Atomic int err;              /* sticky: first write(2) failure, as -errno */
	struct stream_ring *_Atomic rings; /* pushed under lock, read without */
	_Atomic unsigned int n_slots; /* slots in use: written under lock */
	struct stream_slot slots[STREAM_SLOTS]; /* open addressing, linear probing */
	/* One atomic add per append. */
	alignas(64) _Atomic uint64_t next_pos; /* stream bytes reserved so far */
	/* Written by the writer thread. */
	alignas(64) _Atomic uint64_t done_pos; /* stream bytes written (or dropped after an error) */
	_Atomic int kicked;           /* the writer thread was woken and has not started yet */
	_Atomic int space_waiters;    /* threads waiting for room in their ring */
	alignas(64) pthread_mutex_t lock;         /* rings push, flush_pos, stop; with the two conds */
	pthread_cond_t wake;          /* the writer thread waits here */
	pthread_cond_t progress;      /* flushes and threads waiting for room wait here */
	uint64_t flush_pos;           /* under lock: a flush wants everything before this */
	bool stop;
	pthread_t thread;
	/* Writer thread only. */
	uint64_t offset;              /* file offset of the next block (messages) */
	uint32_t block_records;
	size_t block_used;            /* bytes in block, its header included */
	uint8_t block[RECFILE_BLOCK_HDR + STREAM_BLOCK_BYTES];
};

/* Zeroed memory of @size bytes aligned for @align (a power of two, at least sizeof(void *)). */
static void *stream_alloc(size_t align, size_t size)
{
	void *p;

	if (posix_memalign(&p, align, size)) /* returns the error; errno is not set */
		return NULL;
	return memset(p, 0, size);
}

/* Write the block being built (if it holds any record) and start the next. Writer thread. */
static void block_emit(struct recfile_writer *w)
{
	uint8_t *p = w->block;
	uLong crc;
	int err;

	if (!w->block_records)
		return;
	put_u32(&p, RECFILE_BLOCK_TAG);
	put_u32(&p, (uint32_t)w->block_used);
	put_u32(&p, w->block_records);
	crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, w->block, 12);
	crc = crc32(crc, w->block + RECFILE_BLOCK_HDR, (uInt)(w->block_used - RECFILE_BLOCK_HDR));
	put_u32(&p, (uint32_t)crc);
	if (!atomic_load(&w->err)) {
		err = hvp_write_all(w->fd, w->block, w->block_used);
		if (err) {
			pr_err("write of a %zu-byte block at offset %llu to fd %d failed: %s; the "
			       "recording stops here",
			       w->block_used, (unsigned long long)w->offset, w->fd, hvp_strerror(err));
			atomic_store(&w->err, err);
		}
	}
	w->offset += w->block_used;
	w->block_used = RECFILE_BLOCK_HDR;
	w->block_records = 0;
}

/*
 * Let threads waiting for room in their ring look again. Writer thread, after moving tails; once
 * per block, not per entry, so that a thread that outruns the disk is woken once per write.
 */
static void wake_space_waiters(struct recfile_writer *w)
{
	atomic_thread_fence(memory_order_seq_cst); /* tail stores before the waiters load */
	if (atomic_load(&w->space_waiters)) {
		pthread_mutex_lock(&w->lock);
		pthread_cond_broadcast(&w->progress);
		pthread_mutex_unlock(&w->lock);
	}
}

/*
 * The ring whose front entry has stream position @pos, its pad entries skipped, or NULL when
 * none has it published yet. Writer thread.
 */
static struct stream_ring *find_front(struct recfile_writer *w, uint64_t pos)
{
	for (struct stream_ring *r = atomic_load_explicit(&w->rings, memory_order_acquire); r;
	     r = r->next) {
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);

		while (tail < head) {
			const uint8_t *e = r->buf + (tail & (STREAM_RING_BYTES - 1));
			uint64_t epos = get_u64(&e);

			if (epos != STREAM_PAD) {
				if (epos == pos)
					return r;
				break;
			}
			tail += STREAM_ENTRY_HDR + get_u32(&e);
			atomic_store_explicit(&r->tail, tail, memory_order_release);
		}
	}
	return NULL;
}

/*
 * The writer thread's wait, the @spins-th in a row, for a place whose thread is between its
 * atomic add and its commit. That is a few hundred ns unless the thread was descheduled there,
 * when it can take a whole time slice or more (on a 2-core host, the very vCPU thread we wait
 * for may need our CPU): so look again at once a few times, then yield, then sleep, 20 us
 * doubling up to 1 ms (a few % of a CPU while a place is held, against a whole CPU when it
 * yielded in a loop; the writer is never needed sooner than that: it runs every 10 ms). No
 * signal from the commit: that would cost a seq_cst fence in every record, for a rare case.
 */
static void wait_publish(unsigned int spins)
{
	struct timespec ts = { 0 };
	unsigned int naps;

	if (spins <= STREAM_SPINS)
		return;
	if (spins <= STREAM_SPINS + STREAM_YIELDS) {
		sched_yield();
		return;
	}
	naps = spins - STREAM_SPINS - STREAM_YIELDS - 1;
	ts.tv_nsec = naps < 6 ? STREAM_NAP_MIN_NS << naps : STREAM_NAP_MAX_NS;
	if (ts.tv_nsec > STREAM_NAP_MAX_NS)
		ts.tv_nsec = STREAM_NAP_MAX_NS;
	nanosleep(&ts, NULL);
}

/* Move every record before stream position @target into blocks and write them. Writer thread. */
static void drain(struct recfile_writer *w, uint64_t target)
{
	uint64_t done = atomic_load_explicit(&w->done_pos, memory_order_relaxed);
	unsigned int spins = 0;

	while (done < target) {
		struct stream_ring *r = find_front(w, done);
		const uint8_t *e;
		uint64_t tail;
		uint32_t bytes, records;

		if (!r) {
			/* The thread that took position @done is encoding it: nothing can stop it. */
			wait_publish(++spins);
			continue;
		}
		spins = 0;
		tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		e = r->buf + (tail & (STREAM_RING_BYTES - 1)) + 8;
		bytes = get_u32(&e);
		records = get_u32(&e);
		if (w->block_used + bytes > sizeof(w->block)) {
			block_emit(w);
			wake_space_waiters(w);
		}
		/* SAFETY: bytes <= STREAM_MAX_BYTES <= RECFILE_BUFFER (recfile_stream_reserve
		 * refuses more), the room of an empty block; block_emit() above emptied it when the
		 * entry did not fit. */
		memcpy(w->block + w->block_used, e, bytes);
		w->block_used += bytes;
		w->block_records += records;
		tail += (STREAM_ENTRY_HDR + bytes + 15) & ~(uint64_t)15;
		atomic_store_explicit(&r->tail, tail, memory_order_release);
		done += bytes;
		atomic_store_explicit(&w->done_pos, done, memory_order_release);
	}
	block_emit(w);
	wake_space_waiters(w);
}

static void *stream_thread(void *arg)
{
	struct recfile_writer *w = arg;
	bool stop;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		uint64_t done = atomic_load(&w->done_pos);
		/* Records to write: drain() returns only once it wrote every place taken before
		 * it started, so without this a kick or a thread waiting for room would send the
		 * writer round again and again with nothing to do, until that thread runs. */
		bool pending = atomic_load(&w->next_pos) > done;

		if (!w->stop && w->flush_pos <= done &&
		    !(pending && (atomic_load(&w->kicked) || atomic_load(&w->space_waiters)))) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += STREAM_PERIOD_NS;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&w->wake, &w->lock, &ts);
		}
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		atomic_store(&w->kicked, 0);
		drain(w, atomic_load(&w->next_pos));
		pthread_mutex_lock(&w->lock);
		pthread_cond_broadcast(&w->progress);
		if (stop) /* close() set it after its flush: no thread appends any more */
			break;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void wake_writer(struct recfile_writer *w)
{
	pthread_mutex_lock(&w->lock);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

/* The slot where @owner's probe starts. */
static unsigned int slot_hash(uintptr_t owner)
{
	/* Fibonacci hashing: pthread_t values are addresses a stack size apart (low bits equal). */
	return (unsigned int)(((uint64_t)owner * 0x9e3779b97f4a7c15ull) >> (64 - STREAM_SLOT_BITS));
}

/*
 * @owner's ring, or NULL if it has none yet. Any thread, no lock: a slot's owner is stored
 * (release) after its ring, and rings are pushed (release) after their fields are set.
 */
static struct stream_ring *ring_find(struct recfile_writer *w, uintptr_t owner)
{
	unsigned int h = slot_hash(owner);

	/* STREAM_SLOTS_USED < STREAM_SLOTS: a probe ends at a free slot */
	for (;; h = (h + 1) & (STREAM_SLOTS - 1)) {
		uintptr_t o = atomic_load_explicit(&w->slots[h].owner, memory_order_acquire);

		if (o == owner)
			return w->slots[h].ring;
		if (!o)
			break;
	}
	if (atomic_load_explicit(&w->n_slots, memory_order_relaxed) < STREAM_SLOTS_USED)
		return NULL; /* the table had room when @owner (the caller) added its ring */
	/* more than STREAM_SLOTS_USED threads: those beyond are in the list only */
	for (struct stream_ring *r = atomic_load_explicit(&w->rings, memory_order_acquire); r;
	     r = r->next)
		if (r->owner == owner)
			return r;
	return NULL;
}

/*
 * The calling thread's ring of @w, made at its first record. NULL: out of memory. The ring
 * is found by pthread_self() (a register read; gettid() is a system call in glibc): a thread
 * that ends leaves its ring to a later thread given the same pthread_t, which is fine, as it
 * is then the only one writing to it.
 */
static struct stream_ring *thread_ring(struct recfile_writer *w)
{
	uintptr_t self = (uintptr_t)pthread_self();
	struct stream_ring *r = ring_find(w, self);
	unsigned int h, used;

	if (r) /* the calling thread's own ring: only it adds it, below */
		return r;
	r = stream_alloc(alignof(struct stream_ring), sizeof(*r));
	if (!r)
		return NULL;
	/* written at every sample: on a huge page (hugemem.h) */
	r->buf = hvp_huge_alloc(STREAM_RING_BYTES);
	if (!r->buf) {
		free(r);
		return NULL;
	}
	r->owner = self;
	pthread_mutex_lock(&w->lock);
	r->next = atomic_load(&w->rings);
	atomic_store_explicit(&w->rings, r, memory_order_release);
	used = atomic_load_explicit(&w->n_slots, memory_order_relaxed);
	if (used < STREAM_SLOTS_USED) {
		h = slot_hash(self);
		while (atomic_load_explicit(&w->slots[h].owner, memory_order_relaxed))
			h = (h + 1) & (STREAM_SLOTS - 1);
		w->slots[h].ring = r;
		atomic_store_explicit(&w->slots[h].owner, self, memory_order_release);
		atomic_store_explicit(&w->n_slots, used + 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

/* Wait until @r's tail reaches @want (the writer thread frees room). Return 0 or the error. */
static int wait_space(struct recfile_writer *w, struct stream_ring *r, uint64_t want)
{
	int err;

	atomic_fetch_add(&w->space_waiters, 1);
	atomic_thread_fence(memory_order_seq_cst); /* the waiters store before the tail load */
	pthread_mutex_lock(&w->lock);
	pthread_cond_signal(&w->wake);
	while (atomic_load(&r->tail) < want && !atomic_load(&w->err))
		pthread_cond_wait(&w->progress, &w->lock);
	pthread_mutex_unlock(&w->lock);
	atomic_fetch_sub(&w->space_waiters, 1);
	err = atomic_load(&w->err);
	return atomic_load(&r->tail) >= want ? 0 : err;
}

int recfile_stream_reserve(struct recfile_writer *w, size_t bytes, uint32_t records,
			   struct recfile_slot *slot)
{
	struct stream_ring *r = thread_ring(w);
	uint64_t head, total, to_end, need, pos;
	uint8_t *e;
	int err;

	if (!r)
		return -ENOMEM;
	err = atomic_load_explicit(&w->err, memory_order_relaxed);
	if (err)
		return err;
	/* The encoders bound their entries below STREAM_MAX_ENTRY (recfile_internal.h); more
	 * than STREAM_MAX_BYTES could need more than the whole ring, and wait for room forever. */
	if (!bytes || bytes > STREAM_MAX_BYTES)
		return -EINVAL;
	total = (STREAM_ENTRY_HDR + bytes + 15) & ~(uint64_t)15;
	head = atomic_load_explicit(&r->head, memory_order_relaxed);
	to_end = STREAM_RING_BYTES - (head & (STREAM_RING_BYTES - 1));
	need = total <= to_end ? total : to_end + total;
	slot->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (head + need - slot->tail_seen > STREAM_RING_BYTES) {
		err = wait_space(w, r, head + need - STREAM_RING_BYTES);
		if (err)
			return err;
		slot->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
	}
	if (total > to_end) { /* the entry would wrap: pad to the end of the ring */
		e = r->buf + (head & (STREAM_RING_BYTES - 1));
		put_u64(&e, STREAM_PAD);
		put_u32(&e, (uint32_t)(to_end - STREAM_ENTRY_HDR));
		head += to_end;
		atomic_store_explicit(&r->head, head, memory_order_release);
	}
	pos = atomic_fetch_add_explicit(&w->next_pos, bytes, memory_order_relaxed);
	e = r->buf + (head & (STREAM_RING_BYTES - 1));
	put_u64(&e, pos);
	put_u32(&e, (uint32_t)bytes);
	put_u32(&e, records);
	slot->p = e;
	slot->ring = r;
	slot->head = head + total;
	slot->end_pos = pos + bytes;
	slot->records = records;
	return 0;
}

void recfile_stream_commit(struct recfile_writer *w, struct recfile_slot *slot)
{
	struct stream_ring *r = slot->ring;

	atomic_store_explicit(&r->records,
			      atomic_load_explicit(&r->records, memory_order_relaxed) + slot->records,
			      memory_order_relaxed);
	atomic_store_explicit(&r->head, slot->head, memory_order_release);
	/*
	 * The writer thread comes every STREAM_PERIOD_NS by itself, which is enough for the rates of
	 * sampling (1 kHz of 8 KiB stacks is 90 KiB per 10 ms); waking it costs a futex call, so a
	 * thread does that only when its ring is half full, once until the writer starts again.
	 */
	if (slot->head - slot->tail_seen > STREAM_KICK_BYTES &&
	    !atomic_load_explicit(&w->kicked, memory_order_relaxed)) {
		atomic_store(&w->kicked, 1);
		wake_writer(w);
	}
}

int recfile_writer_open(int fd, struct recfile_writer **out)
{
	struct recfile_writer *w;
	uint8_t hdr[RECFILE_HEADER_SIZE], *p = hdr;
	pthread_condattr_t ca;
	sigset_t all, old;
	int err;

	if (fd < 0 || !out)
		return -EINVAL;
	w = stream_alloc(alignof(struct recfile_writer), sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->block_used = RECFILE_BLOCK_HDR;
	put_bytes(&p, RECFILE_MAGIC, RECFILE_MAGIC_LEN);
	put_u32(&p, RECFILE_VERSION);
	put_u32(&p, RECFILE_HEADER_SIZE);
	err = hvp_write_all(fd, hdr, sizeof(hdr));
	if (err) {
		pr_err("write of the file header to fd %d failed: %s", fd, hvp_strerror(err));
		goto err_free;
	}
	w->offset = sizeof(hdr);

	/* pthread functions return the errno value itself */
	err = -pthread_mutex_init(&w->lock, NULL);
	if (err)
		goto err_free;
	err = -pthread_condattr_init(&ca);
	if (err)
		goto err_destroy_lock;
	err = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	err = err ?: -pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (err)
		goto err_destroy_lock;
	err = -pthread_cond_init(&w->progress, NULL);
	if (err)
		goto err_destroy_wake;
	/* The thread starts with every signal blocked: SIGINT and the vCPU kicks go elsewhere. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&w->thread, NULL, stream_thread, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		pr_err("no thread for the writer of fd %d: %s", fd, hvp_strerror(err));
		goto err_destroy_progress;
	}
	*out = w;
	return 0;

err_destroy_progress:
	pthread_cond_destroy(&w->progress);
err_destroy_wake:
	pthread_cond_destroy(&w->wake);
err_destroy_lock:
	pthread_mutex_destroy(&w->lock);
err_free:
	free(w);
	return err;
}

int recfile_writer_flush(struct recfile_writer *w)
{
	uint64_t target;

	if (!w)
		return -EINVAL;
	target = atomic_load(&w->next_pos);
	pthread_mutex_lock(&w->lock);
	if (w->flush_pos < target)
		w->flush_pos = target;
	pthread_cond_signal(&w->wake);
	while (atomic_load(&w->done_pos) < target)
		pthread_cond_wait(&w->progress, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return atomic_load(&w->err);
}

uint64_t recfile_writer_records(struct recfile_writer *w)
{
	uint64_t n = 0;

	if (!w)
		return 0;
	for (struct stream_ring *r = atomic_load(&w->rings); r; r = r->next)
		n += atomic_load_explicit(&r->records, memory_order_relaxed);
	return n;
}

int recfile_writer_close(struct recfile_writer *w)
{
	struct stream_ring *r, *next;
	int err;

	if (!w)
		return 0;
	err = recfile_writer_flush(w);
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	err = err ?: atomic_load(&w->err);
	for (r = atomic_load(&w->rings); r; r = next) {
		next = r->next;
		hvp_huge_free(r->buf, STREAM_RING_BYTES);
		free(r);
	}
	pthread_cond_destroy(&w->progress);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return err;
}
