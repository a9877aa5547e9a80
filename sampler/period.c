// SPDX-License-Identifier: MIT
// The period of a sample, as perf's: the counter's count since the previous sample of the same
// vCPU (read(2) on the perf fd at the sample), so that a sample standing for several overflows
// (their signals merged while one was pending: the vCPU thread was outside KVM_RUN) weighs them
// all. The baseline restarts at each enable of the counter (counter.c), so the first sample of a
// window does not carry the end of the previous one. A count that cannot be believed gives the
// nominal period, counted (period_fallbacks). Overflows merged into samples (overflows_merged)
// are counted over the window since the enable: the overflows its counted time holds beyond the
// samples taken, so that the jitter of the exits is not taken for merges.
#include <string.h>

#include "period.h"

void period_bounds(enum sampler_counter_kind kind, unsigned int hz, uint64_t *nominal,
		   uint64_t *max)
{
	*nominal = *max = 0;
	if (!hz)
		return;
	if (kind == SAMPLER_COUNTER_CPU_CLOCK) {
		*nominal = 1000000000ull / hz; /* counter.c's sample_period */
		*max = *nominal * PERIOD_MAX_FACTOR;
	} else if (kind == SAMPLER_COUNTER_CYCLES) {
		*max = 1000000000ull / hz * PERIOD_MAX_CYCLES_PER_NS * PERIOD_MAX_FACTOR;
	}
}

void period_restart(struct period_base *b, bool count_ok, uint64_t count)
{
	*b = (struct period_base){ .count = count_ok ? count : 0, .known = count_ok };
}

struct period_result period_next(struct period_base *b, bool count_ok, uint64_t count,
				 uint64_t nominal, uint64_t max)
{
	struct period_result r = { .period = nominal, .fallback = true };
	uint64_t due;

	if (!count_ok) {
		b->known = false; /* the next read restarts the baseline */
	} else {
		if (b->known && count > b->count && count - b->count <= max) {
			r.period = count - b->count;
			r.fallback = false;
		}
		b->count = count;
		b->known = true;
	}
	/* a fallback counts as one nominal period: the window's overflow count goes on */
	b->counted += r.period;
	b->accounted++;
	if (nominal) {
		due = b->counted / nominal;
		if (due > b->accounted) {
			r.merged = due - b->accounted;
			b->accounted = due;
		}
	}
	return r;
}

/* @len bytes at free-running position @pos of the ring (@size a power of two): may wrap. */
static void ring_copy(const uint8_t *data, uint64_t size, uint64_t pos, void *dst, size_t len)
{
	/* SAFETY: off < size; the first part is at most size - off bytes, the rest starts at 0
	 * and is at most len <= 16 < size bytes (callers copy a header or one u64). */
	uint64_t off = pos & (size - 1), first = size - off < len ? size - off : len;

	memcpy(dst, data + off, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

struct period_ring_scan period_ring_scan(const uint8_t *data, uint64_t size, uint64_t tail,
					 uint64_t head)
{
	struct period_ring_scan r = { 0 };
	uint64_t pos = tail;

	if (!data || size < 64 || (size & (size - 1)) || head - tail > size) {
		r.lost = head != tail;
		return r;
	}
	for (unsigned int n = 0; pos != head; n++) {
		struct {
			uint32_t type;
			uint16_t misc;
			uint16_t size;
		} hdr;
		uint64_t value;

		if (n == PERIOD_RING_MAX_RECORDS || head - pos < sizeof(hdr)) {
			r.lost = true;
			break;
		}
		ring_copy(data, size, pos, &hdr, sizeof(hdr));
		if (hdr.size < sizeof(hdr) || (hdr.size & 7) || hdr.size > head - pos) {
			r.lost = true;
			break;
		}
		if (hdr.type == PERIOD_REC_LOST) {
			r.lost = true;
		} else if (hdr.type == PERIOD_REC_SAMPLE && hdr.size >= sizeof(hdr) + 8) {
			ring_copy(data, size, pos + sizeof(hdr), &value, sizeof(value));
			r.count = value;
			r.found = true;
			r.samples++;
		}
		pos += hdr.size;
	}
	return r;
}
