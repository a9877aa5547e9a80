// SPDX-License-Identifier: MIT
// The VM's disks: one virtio-blk device over virtio-mmio per configured disk (vda, vdb, ...),
// declared to the guest on its command line (Linux's virtio_mmio.device=SIZE@BASE:IRQ, from
// CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES: no PCI, no ACPI, no device tree), its interrupt line on
// the in-kernel PIC/IOAPIC (KVM_IRQ_LINE), its MMIO window dispatched from exit_mmio.
#define pr_fmt(fmt) "vmm: disks: " fmt
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "../vmm_internal.h"
#include "virtio.h"

/* ISA IRQs nobody else uses: 4 is the serial port, 0/1/2/8 timer, keyboard, cascade, RTC;
 * 3 and 7 are left alone (COM2, and the PIC's spurious IRQ). */
static const unsigned int disk_irqs[VMM_MAX_DISKS] = { 5, 6, 9, 10, 11, 12, 14, 15 };

static void disk_set_irq(void *ctx, unsigned int irq, int level)
{
	struct vmm *vm = ctx;
	struct kvm_irq_level l = { .irq = irq, .level = (uint32_t)level };

	ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
}

int vmm_disk_probe(const struct vmm_disk *d)
{
	struct disk k;
	int err;

	if (!d || !d->path)
		return -EINVAL;
	err = disk_open(&k, d);
	if (!err)
		disk_close(&k);
	return err;
}

/* The command line with @words inserted before any " -- " (what follows it is init's). */
static int cmdline_insert(struct vmm *vm, const char *words)
{
	const char *cur = vm->cmdline ? vm->cmdline : "";
	const char *dash = strstr(cur, " -- ");
	size_t head = dash ? (size_t)(dash - cur) : strlen(cur);
	char *s;

	if (!dash && strlen(cur) >= 3 && !strcmp(cur + strlen(cur) - 3, " --"))
		head = strlen(cur) - 3;
	if (asprintf(&s, "%.*s%s%s", (int)head, cur, words, cur + head) < 0)
		return -ENOMEM;
	free(vm->cmdline);
	vm->cmdline = s;
	vm->cfg.cmdline = s;
	return 0;
}

int disks_create(struct vmm *vm)
{
	char words[VMM_MAX_DISKS * 48] = "", id[VIRTIO_BLK_ID_BYTES + 1];
	size_t n = vm->cfg.n_disks, used = 0;
	int err;

	if (n == 0)
		return 0;
	if (n > VMM_MAX_DISKS || !vm->cfg.disks) {
		pr_err("%zu disks: hvprof attaches at most %d", n, VMM_MAX_DISKS);
		return -EINVAL;
	}
	vm->disks = calloc(n, sizeof(*vm->disks));
	if (!vm->disks)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t gpa = VMM_VIRTIO_GPA + i * VIRTIO_MMIO_SIZE;

		snprintf(id, sizeof(id), "hvprof-vd%c", (char)('a' + i));
		err = virtio_blk_create(&vm->cfg.disks[i], id, &vm->ram, disk_irqs[i],
					disk_set_irq, vm, &vm->disks[i]);
		if (err)
			return err; /* disks_destroy frees what was made */
		vm->n_disks = (unsigned int)i + 1;
		used += (size_t)snprintf(words + used, sizeof(words) - used,
					 " virtio_mmio.device=4K@0x%llx:%u",
					 (unsigned long long)gpa, disk_irqs[i]);
	}
	return cmdline_insert(vm, words);
}

void disks_destroy(struct vmm *vm)
{
	for (unsigned int i = 0; i < vm->n_disks; i++)
		virtio_blk_destroy(vm->disks[i]);
	free(vm->disks);
	vm->disks = NULL;
	vm->n_disks = 0;
}

int disks_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run)
{
	uint64_t rel = run->mmio.phys_addr - VMM_VIRTIO_GPA;
	uint64_t i = rel / VIRTIO_MMIO_SIZE;
	uint32_t len = run->mmio.len <= sizeof(run->mmio.data) ? run->mmio.len : 0;

	/* SAFETY: the caller checked phys_addr in [VMM_VIRTIO_GPA, + n_disks windows). */
	if (i >= vm->n_disks ||
	    !virtio_mmio_access(&vm->disks[i]->mmio, rel % VIRTIO_MMIO_SIZE, run->mmio.is_write,
				run->mmio.data, len))
		vcpu->c.mmio_unhandled++;
	return 0;
}

void disks_add_counters(const struct vmm *vm, struct vmm_counters *c)
{
	for (unsigned int i = 0; i < vm->n_disks; i++) {
		struct virtio_blk *b = vm->disks[i];

		pthread_mutex_lock(&b->mmio.lock);
		c->disk_reads += b->stats.reads;
		c->disk_writes += b->stats.writes;
		c->disk_flushes += b->stats.flushes;
		c->disk_read_bytes += b->stats.read_bytes;
		c->disk_write_bytes += b->stats.write_bytes;
		c->disk_errors += b->stats.errors;
		c->disk_broken += b->stats.broken;
		pthread_mutex_unlock(&b->mmio.lock);
	}
}
