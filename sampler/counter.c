// SPDX-License-Identifier: MIT
// The sampling counter of each vCPU: a perf event on the vCPU thread whose every overflow is
// signalled to that thread (F_SETOWN_EX/F_OWNER_TID, F_SETSIG, O_ASYNC), which makes KVM_RUN
// return with KVM_EXIT_INTR. Hardware cycles counting guest time only (exclude_host) where the
// host has a PMU; the thread's CPU clock otherwise (perf_event_open(2)).
#define pr_fmt(fmt) "sampler: counter: " fmt
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

static int perf_open(struct perf_event_attr *attr, pid_t tid)
{
	return (int)syscall(SYS_perf_event_open, attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void counter_attr(struct perf_event_attr *attr, enum sampler_counter_kind kind,
			 unsigned int hz)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->disabled = 1;
	attr->wakeup_events = 1;
	/* each overflow also writes its count into the ring buffer, when one is mapped (period) */
	attr->sample_type = PERF_SAMPLE_READ;
	if (kind == SAMPLER_COUNTER_CYCLES) {
		attr->type = PERF_TYPE_HARDWARE;
		attr->config = PERF_COUNT_HW_CPU_CYCLES;
		attr->exclude_host = 1; /* count only while the guest runs */
		attr->freq = 1;
		attr->sample_freq = hz;
	} else {
		attr->type = PERF_TYPE_SOFTWARE;
		attr->config = PERF_COUNT_SW_CPU_CLOCK;
		attr->sample_period = 1000000000ull / (hz ? hz : 1); /* ns of thread CPU time */
	}
}

int counter_probe(struct sampler *s)
{
	struct perf_event_attr attr;
	enum sampler_counter_kind kinds[2] = { SAMPLER_COUNTER_CYCLES, SAMPLER_COUNTER_CPU_CLOCK };
	int fd;

	if (!s->cfg.sample_hz) {
		s->counter = SAMPLER_COUNTER_NONE;
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		if (s->cfg.force_counter && s->cfg.force_counter != kinds[i])
			continue;
		counter_attr(&attr, kinds[i], s->cfg.sample_hz);
		fd = perf_open(&attr, 0);
		if (fd >= 0) {
			close(fd);
			s->counter = kinds[i];
			return 0;
		}
		pr_info("counter %s not available: %s", sampler_counter_name(kinds[i]),
			hvp_strerror(-errno));
	}
	pr_err("no sampling counter can be opened (perf_event_open; check "
	       "/proc/sys/kernel/perf_event_paranoid)");
	return -ENOTSUP;
}

/*
 * The counter's ring buffer: its first page (struct perf_event_mmap_page) and
 * COUNTER_RING_PAGES of records, where the kernel writes the count at each overflow
 * (PERF_SAMPLE_READ), so that a sample reads it from memory instead of calling read(2). Mapped
 * writable: the reader's data_tail frees space (perf_event_open(2), "MMAP layout"). Without it
 * (mmap refused: perf_event_mlock_kb), every sample reads the counter.
 */
#define COUNTER_RING_PAGES 2

static void counter_map_ring(struct svcpu *sv)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len;
	void *p;

	sv->ring = NULL;
	sv->ring_len = 0;
	if (page <= 0)
		return;
	len = (size_t)page * (1 + COUNTER_RING_PAGES);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sv->perf_fd, 0);
	if (p == MAP_FAILED) {
		pr_info("vCPU %u: the counter's ring buffer cannot be mapped (%s): each sample "
			"reads the counter", sv->index, hvp_strerror(-errno));
		return;
	}
	sv->ring = p;
	sv->ring_len = len;
	sv->ring_data_size = (uint64_t)page * COUNTER_RING_PAGES;
	sv->ring_page = (uint64_t)page;
}

/* Forget the records written so far (they are older than what the caller reads next). */
static void counter_ring_skip(struct svcpu *sv)
{
	struct perf_event_mmap_page *pc = sv->ring;
	uint64_t head;

	if (!pc)
		return;
	head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&pc->data_tail, head, __ATOMIC_RELEASE);
}

/*
 * The count at the newest overflow, from the ring: true when a record newer than the period's
 * baseline is there (the overflow of this sample). Else (no new record: the signal of an
 * overflow whose record an earlier sample consumed; records lost) the caller reads the counter.
 */
static bool counter_ring_count(struct svcpu *sv, uint64_t *count)
{
	struct perf_event_mmap_page *pc = sv->ring;
	struct period_ring_scan r;
	uint64_t head, tail;

	if (!pc)
		return false;
	head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
	tail = pc->data_tail; /* written by this thread only */
	r = period_ring_scan((const uint8_t *)pc + sv->ring_page, sv->ring_data_size, tail, head);
	__atomic_store_n(&pc->data_tail, head, __ATOMIC_RELEASE);
	if (!r.found || r.lost || (sv->period_base.known && r.count <= sv->period_base.count))
		return false;
	*count = r.count;
	return true;
}

int counter_open_vcpu(struct sampler *s, struct svcpu *sv)
{
	struct perf_event_attr attr;
	pid_t tid = (pid_t)vmm_vcpu_tid(sv->v);
	struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = tid };
	int fd, err;

	sv->perf_fd = -1;
	if (s->counter == SAMPLER_COUNTER_NONE)
		return 0;
	counter_attr(&attr, s->counter, s->cfg.sample_hz);
	fd = perf_open(&attr, tid);
	if (fd < 0) {
		err = -errno;
		pr_err("vCPU %u: perf_event_open(%s): %s", sv->index,
		       sampler_counter_name(s->counter), hvp_strerror(err));
		return err;
	}
	if (fcntl(fd, F_SETOWN_EX, &owner) < 0 || fcntl(fd, F_SETSIG, vmm_overflow_signal()) < 0 ||
	    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0) {
		err = -errno;
		pr_err("vCPU %u: cannot route counter overflows to the vCPU thread: %s",
		       sv->index, hvp_strerror(err));
		close(fd);
		return err;
	}
	sv->perf_fd = fd; /* disabled until counter_enable_vcpu (record --from) */
	counter_map_ring(sv);
	sv->counting = false;
	sv->hz_applied = s->cfg.sample_hz;
	return 0;
}

/* The counter's count: read(2) of a perf fd without read_format gives one u64 (perf_event_open(2),
 * "Reading results"); the vCPU threads' seccomp filter allows read (vmm/seccomp.c). */
static bool counter_read(const struct svcpu *sv, uint64_t *count)
{
	return sv->perf_fd >= 0 && read(sv->perf_fd, count, sizeof(*count)) == sizeof(*count);
}

struct period_result counter_period(struct svcpu *sv)
{
	struct period_result r;
	uint64_t nominal, max, count = 0;
	bool ok;

	period_bounds(sv->s->counter, sv->hz_applied, &nominal, &max);
	if (sv->perf_fd < 0)
		return (struct period_result){ .period = nominal };
	ok = counter_ring_count(sv, &count);
	if (!ok) {
		ok = counter_read(sv, &count);
		sv->c.period_reads++;
	}
	r = period_next(&sv->period_base, ok, count, nominal, max);
	sv->c.overflows_merged += r.merged;
	sv->c.period_fallbacks += r.fallback;
	return r;
}

int counter_enable_vcpu(struct svcpu *sv)
{
	uint64_t count = 0;
	bool ok;
	int err;

	if (sv->perf_fd < 0 || sv->counting)
		return 0;
	/* The first sample after this enable counts from here, not from the last sample of an
	 * earlier window: the counter is disabled, so its count is still. */
	ok = counter_read(sv, &count);
	period_restart(&sv->period_base, ok, count);
	counter_ring_skip(sv); /* an earlier window's overflows: counted before this baseline */
	if (ioctl(sv->perf_fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		err = -errno;
		pr_err("vCPU %u: PERF_EVENT_IOC_ENABLE: %s", sv->index, hvp_strerror(err));
		return err;
	}
	sv->counting = true;
	return 0;
}

int counter_disable_vcpu(struct svcpu *sv)
{
	int err;

	if (sv->perf_fd < 0 || !sv->counting)
		return 0;
	if (ioctl(sv->perf_fd, PERF_EVENT_IOC_DISABLE, 0) < 0) {
		err = -errno;
		pr_err("vCPU %u: PERF_EVENT_IOC_DISABLE: %s", sv->index, hvp_strerror(err));
		return err;
	}
	sv->counting = false;
	return 0;
}

/* PERF_EVENT_IOC_PERIOD sets sample_freq of a frequency event (cycles) and sample_period of
 * the others (cpu-clock: ns of thread CPU time), as counter_attr does (perf_event_open(2)). */
int counter_set_rate(struct svcpu *sv, unsigned int hz)
{
	struct sampler *s = sv->s;
	uint64_t value;
	int err;

	if (sv->perf_fd < 0 || !hz)
		return 0;
	value = s->counter == SAMPLER_COUNTER_CYCLES ? hz : 1000000000ull / hz;
	if (ioctl(sv->perf_fd, PERF_EVENT_IOC_PERIOD, &value) < 0) {
		err = -errno;
		pr_err("vCPU %u: PERF_EVENT_IOC_PERIOD %llu: %s", sv->index,
		       (unsigned long long)value, hvp_strerror(err));
		return err;
	}
	sv->hz_applied = hz;
	return 0;
}

void counter_close_vcpu(struct svcpu *sv)
{
	if (sv->ring) {
		munmap(sv->ring, sv->ring_len);
		sv->ring = NULL;
	}
	if (sv->perf_fd >= 0) {
		ioctl(sv->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
		close(sv->perf_fd);
		sv->perf_fd = -1;
	}
	sv->counting = false;
}
