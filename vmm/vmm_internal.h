/* SPDX-License-Identifier: MIT */
/* Private definitions of the vmm layer: the VM, its vCPUs, RAM and devices. */
#ifndef HVPROF_VMM_INTERNAL_H
#define HVPROF_VMM_INTERNAL_H

#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hvprof/gmem.h>
#include <hvprof/vmm.h>

/* ---------------------------------------------------------------- guest physical layout */
/*
 * GPA map (all below 4 GiB unless RAM is larger):
 *   0x0000_0500  GDT for the 64-bit entry       0x0000_7000  boot_params (zero page)
 *   0x0000_9000  boot page tables (PML4, PDPT, 4 PDs: identity map of 4 GiB, 2 MiB pages)
 *   0x0002_0000  kernel command line            0x0003_0000  setup_data (RNG seed)
 *   0x0009_fc00  MP floating pointer + table (reserved in e820 up to 1 MiB)
 *   kernel at its PT_LOAD physical addresses (ELF) or 1 MiB / pref_address (bzImage)
 *   initrd at the top of low RAM
 *   0xd000_0000  hvprof exit register (MMIO, docs/guest-interface.md)
 *   0xd000_1000  virtio-mmio disks, 4 KiB each: vda at 0xd000_1000 on IRQ 5, vdb at
 *                0xd000_2000 on IRQ 6, then IRQs 9, 10, 11, 12, 14, 15 (devices/disks.c;
 *                the serial ports have IRQ 4 (COM1) and 3 (COM2))
 *   0xc000_0000..4 GiB: no RAM (MMIO hole: exit register, IOAPIC, LAPIC); RAM above 3 GiB
 *   continues at 4 GiB.
 */
#define VMM_GDT_GPA 0x500ULL
#define VMM_ZERO_PAGE_GPA 0x7000ULL
#define VMM_PML4_GPA 0x9000ULL
#define VMM_CMDLINE_GPA 0x20000ULL
#define VMM_CMDLINE_MAX 2048
#define VMM_SETUP_DATA_GPA 0x30000ULL
#define VMM_MPTABLE_GPA 0x9fc00ULL
#define VMM_EBDA_START 0x9fc00ULL
#define VMM_HIMEM_START 0x100000ULL
#define VMM_MMIO_HOLE_START 0xc0000000ULL
#define VMM_4G 0x100000000ULL
#define VMM_EXIT_REG_GPA 0xd0000000ULL
#define VMM_EXIT_MAGIC 0x48560000u /* "HV" in the upper half of the written value */
#define VMM_VIRTIO_GPA 0xd0001000ULL /* the first virtio-mmio window (devices/virtio.h) */
#define VMM_TSS_GPA 0xfffbd000ULL

/* ---------------------------------------------------------------- guest RAM (memory.c) */

struct vmm_ram_slot {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

struct vmm_ram {
	uint8_t *hva;   /* one host mapping for all of RAM */
	uint64_t size;  /* bytes of RAM */
	unsigned int n_slots;
	struct vmm_ram_slot slots[2]; /* below the hole, above 4 GiB */
};

int ram_create(struct vmm_ram *ram, uint64_t size) __must_check;
void ram_destroy(struct vmm_ram *ram);
/* HVA for [gpa, gpa+len) if it lies inside one RAM slot, else NULL. */
void *ram_gpa_to_hva(const struct vmm_ram *ram, uint64_t gpa, uint64_t len);
/* gmem_read_fn over a struct vmm_ram. */
int ram_read(void *ctx, uint64_t gpa, void *dst, size_t len);
/* gmem_map_fn over struct vmm_ram (@ctx): ram_gpa_to_hva, read-only. */
const void *ram_map(void *ctx, uint64_t gpa, size_t len);
int ram_write(const struct vmm_ram *ram, uint64_t gpa, const void *src, size_t len) __must_check;

/* ---------------------------------------------------------------- boot (boot.c, mptable.c) */

struct boot_info {
	uint64_t entry_gpa;    /* 64-bit entry point */
	uint64_t kernel_start; /* lowest GPA the kernel occupies */
	uint64_t kernel_end;   /* one past the highest */
	bool is_bzimage;
	bool slide_known;      /* the kernel's virtual KASLR slide is known before it runs */
	bool slide_applied;    /* hvprof relocated the kernel itself (bzImage decompressed here) */
	uint64_t slide;        /* bytes; valid when slide_known */
	size_t n_relocs;       /* relocations applied (0 when none) */
};

/*
 * Load @kernel_path into RAM (ELF vmlinux or bzImage), place cmdline, initrd, boot_params,
 * e820 map, setup_data RNG seed, and the boot GDT and page tables.
 */
int boot_load(struct vmm_ram *ram, const struct vmm_config *cfg, struct boot_info *bi) __must_check;

/* Parse a bzImage's setup header (Linux boot protocol, Documentation/x86/boot.rst) from @buf. */
struct bzimage_info {
	uint16_t version;
	uint8_t setup_sects;
	uint32_t payload_off;  /* file offset of the protected-mode kernel */
	uint64_t pref_address;
	uint32_t init_size;
	uint32_t kernel_alignment; /* physical alignment the kernel needs (and KASLR's slot size) */
	uint16_t xloadflags;
};
int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage_info *out) __must_check;

/* Write the MP floating pointer and configuration table for @cpus CPUs (MP spec 1.4). */
int mptable_write(struct vmm_ram *ram, uint64_t gpa, unsigned int cpus) __must_check;

/* ---------------------------------------------------------------- 8250 UART (serial.c) */

#define SERIAL_RX_CAP 4096 /* bytes the host may queue for the guest to receive */
#define SERIAL_TX_CAP 4096 /* transmitted bytes that may wait for the host (tx_hold) */

struct serial8250 {
	uint8_t ier, iir_fifo, lcr, mcr, lsr, msr, scr, dll, dlm, fcr;
	bool thri_pending;
	unsigned int irq;      /* the ISA IRQ it raises, passed to set_irq */
	int out_fd;            /* where transmitted bytes go (-1: discarded) */
	/* received bytes not yet read by the guest: a ring of rx_len bytes from rx_head */
	uint8_t rx_buf[SERIAL_RX_CAP];
	size_t rx_head, rx_len;
	/* tx_hold (COM2): what out_fd does not take at once waits in a ring of tx_len bytes from
	 * tx_head, with THRE clear, so the guest's driver stops sending until serial_tx_flush
	 * drains it (backpressure: no byte is lost; Linux's 8250 sends at most a FIFO's worth,
	 * 16 bytes, per THRE interrupt) */
	bool tx_hold;
	uint8_t tx_buf[SERIAL_TX_CAP];
	size_t tx_head, tx_len;
	atomic_ulong tx_bytes;   /* bytes the guest sent out (the silent-guest hint reads it) */
	atomic_ulong tx_dropped; /* ... of which a write to out_fd did not take (EAGAIN, error) */
	atomic_ulong rx_bytes;   /* received bytes the guest read from RBR */
	atomic_ulong rx_flushed; /* received bytes the guest discarded (FCR.CLEAR_RCVR) */
	/* called with the new level of the IRQ line whenever it may have changed (with @lock
	 * held: calls are ordered) */
	void (*set_irq)(void *ctx, unsigned int irq, int level);
	void *irq_ctx;
	pthread_mutex_t lock;
};

/* Hold transmitted bytes the host cannot take yet (COM2): at most this many wait. */
void serial_set_tx_hold(struct serial8250 *s);
/* Write what waits to out_fd; when all went, THRE is set again and the THRE interrupt raised.
 * Any thread. Return: the bytes still waiting. */
size_t serial_tx_flush(struct serial8250 *s);

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4
#define SERIAL_COM2_BASE 0x2f8 /* the command channel (vmm_config.cmd_channel) */
#define SERIAL_COM2_IRQ 3

void serial_init(struct serial8250 *s, unsigned int irq, int out_fd,
		 void (*set_irq)(void *ctx, unsigned int irq, int level), void *ctx);
/* One port access at @off (0..7) from the base: @is_write, @data (1 byte). Any thread. */
void serial_io(struct serial8250 *s, unsigned int off, bool is_write, uint8_t *data);
/* Queue up to @len bytes for the guest to receive, and update the IRQ line. Any thread.
 * Return: the bytes taken (fewer than @len when the buffer fills; SERIAL_RX_CAP at most). */
size_t serial_rx_push(struct serial8250 *s, const uint8_t *buf, size_t len);
/* vmm_create's check of vmm_config.cmd_out_fd: 0 (a warning if blocking); -EBADF not writable. */
int serial_cmd_fd_check(int fd) __must_check;
/* Add COM2's counters (cmd_*) to @c. */
void serial_add_counters(const struct vmm *vm, struct vmm_counters *c);

/* ---------------------------------------------------------------- vCPUs */

struct vmm;
struct virtio_blk;

/* What RFLAGS.RF does at a breakpoint on this host (debug.c), probed at the first vmm_bp_step. */
enum vmm_rf {
	VMM_RF_UNKNOWN = 0, /* not tried yet */
	VMM_RF_WORKS = 1,   /* RF stepped over every hit so far (VMX/SVM) */
	VMM_RF_IGNORED = 2, /* RF is ignored (PVM): riders complete the instruction */
};

struct vmm_vcpu {
	struct vmm *vm;
	unsigned int index;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	/* @thread may be signalled: set after pthread_create, cleared before pthread_join, both
	 * under vm->kick_lock, which vmm_kick_vcpu holds around its pthread_kill */
	atomic_bool thread_started;
	/* a kick not yet seen: set by every kick before its signal, so a kick sent before the
	 * thread existed (or was marked started) ends its next KVM_RUN at once (immediate_exit) */
	atomic_bool kick_pending;
	pid_t tid;
	bool debug_armed;
	unsigned int bp_mask_applied; /* slots armed in KVM_SET_GUEST_DEBUG */
	unsigned int bp_gen_applied;  /* vm->bp_gen when applied */
	uint64_t rf_probe_pc;    /* a breakpoint hit resumed with RF set, to see if RF works */
	uint64_t rf_probe_rsp;
	struct vmm_counters c;  /* this vCPU's counters, summed at the end */
	/* register access without KVM_CAP_SYNC_REGS: copies and dirty flags */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	bool regs_valid, sregs_valid, regs_dirty, sregs_dirty;
	bool sync_filled; /* run->s.regs holds the state of the last exit (a KVM_RUN returned) */
	bool regs_ioctl;  /* this exit's register changes need KVM_SET_REGS (vmm_vcpu_regs_dirty) */
	/* PVM: the guest's MSR_STAR, MSR_LSTAR and MSR_SYSCALL_MASK as last read (pvm.c); read
	 * again only when a SYSCALL lands elsewhere than this LSTAR (a guest that rewrote STAR or
	 * SFMASK alone would be completed with the old ones: Linux writes the three together) */
	uint64_t sc_star, sc_lstar, sc_sfmask;
	bool sc_msrs_valid;
	/* the last exits, for post-mortems of guest failures (with sync regs only) */
	struct {
		uint32_t reason;
		uint16_t cs;
		uint64_t rip, rsp, rcx;
	} trail[256];
	unsigned int trail_next;
};

/* ---------------------------------------------------------------- the PVM SYSCALL fix-up */

struct pvm_fixup {
	bool enabled;           /* a rider will give the #PF entry (vmm_pvm_fixup_enable) */
	uint8_t step_len;       /* bytes to skip at the #PF entry for an ordinary fault (nop/cld) */
	bool step_is_cld;
};

#define VMM_BP_PVM 0 /* the fix-up's breakpoint slot */

/* ---------------------------------------------------------------- the VM */

struct vmm {
	struct vmm_config cfg;
	char *cmdline;
	int kvm_fd;
	int vm_fd;
	struct vmm_ram ram;
	struct gmem gmem;
	struct boot_info boot;
	unsigned int n_vcpus;
	struct vmm_vcpu *vcpus;
	struct kvm_cpuid2 *cpuid;
	struct serial8250 com1;
	struct serial8250 com2; /* the command channel: dispatched only with cfg.cmd_channel */
	struct virtio_blk **disks; /* vda, vdb, ... (devices/disks.c) */
	unsigned int n_disks;
	unsigned int maxphyaddr;
	bool sync_regs;
	bool sregs2;
	struct pvm_fixup pvm;
	bool is_pvm;
	bool unconfined;        /* no seccomp filter on the vCPU threads (vmm_set_confined) */
	char strategy[256];
	struct vmm_hooks hooks;
	/* hardware breakpoints (debug.c): VM-wide addresses and armed slots */
	_Atomic uint64_t bp_addr[VMM_BP_SLOTS];
	atomic_uint bp_armed;   /* bit per slot */
	atomic_uint bp_gen;     /* bumped at every address change */
	unsigned int bp_used;   /* slots handed out (bit per slot) */
	atomic_int rf;          /* enum vmm_rf */
	atomic_uint_fast64_t t_start_ns; /* 0 until vmm_run starts; read by other threads */
	atomic_bool running;

	/* the outcome: first writer wins */
	pthread_mutex_t end_lock;
	pthread_mutex_t kick_lock; /* vCPU threads' start/join against kicks (vmm_kick_vcpu) */
	atomic_int stop_reason;  /* 0 while running */
	int exit_status;
	char end_message[256];
};

void vmm_kick_all(struct vmm *vm);
/* Write vm->strategy from what is in use (at create, and when a rider enables the fix-up). */
void vmm_strategy_update(struct vmm *vm);
/* Interrupt vCPU @i's KVM_RUN (a kick: never a sample). */
void vmm_kick_vcpu(struct vmm *vm, unsigned int i);

/* cpu.c */
int cpu_setup_cpuid(struct vmm *vm) __must_check;
int vcpu_init_regs(struct vmm *vm, struct vmm_vcpu *vcpu) __must_check;
/* Write vcpu->regs/sregs back if dirty (KVM_SET_SREGS2 when available). */
int vcpu_put_dirty(struct vmm_vcpu *vcpu) __must_check;
/* Read @len bytes at @gva through the vCPU's own page tables (post-mortems, the PVM frame). */
int vcpu_read_gva(struct vmm_vcpu *vcpu, const struct kvm_sregs *sregs, uint64_t gva, void *dst,
		  size_t len) __must_check;

/* exit.c: handle the exit in vcpu->run; returns 0 to continue, 1 to stop, -errno on error.
 * @overflow: the sampling counter's signal interrupted this KVM_RUN. */
int exit_handle(struct vmm_vcpu *vcpu, bool overflow) __must_check;
/* io/mmio dispatch, pure over a kvm_run (unit-testable) */
int exit_io(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run) __must_check;
int exit_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run) __must_check;
/* devices/exit_reg.c: an access to the exit register (1: the guest ended the run). */
int exit_reg_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run) __must_check;

/* One turn of a vCPU's loop: breakpoints and registers applied, KVM_RUN, the exit handled.
 * Return: 0 to go on, 1 to stop (the run's end was recorded with vmm_end). */
int vcpu_loop_once(struct vmm_vcpu *vcpu, const sigset_t *block) __must_check;

/* signals of the vCPU threads (vmm.c) */
extern int vmm_sig_overflow;
extern int vmm_sig_kick;

/* debug.c: the breakpoint slots */
/* Apply the debug registers this vCPU should have now. */
int vcpu_debug_update(struct vmm_vcpu *vcpu) __must_check;
/* Disarm every breakpoint of @vcpu (end of run). */
void vcpu_debug_disarm(struct vmm_vcpu *vcpu);
/* KVM_EXIT_DEBUG: the PVM fix-up's slot, else the rider's hook. */
int debug_exit(struct vmm_vcpu *vcpu) __must_check;
/* Any other exit while an RF probe is pending: RF worked if the guest moved on. */
void rf_probe_check(struct vmm_vcpu *vcpu);

/* pvm.c */
int pvm_fixup_hit(struct vmm_vcpu *vcpu) __must_check;

#endif /* HVPROF_VMM_INTERNAL_H */
