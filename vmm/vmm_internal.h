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
#include <hvprof/guestinfo.h>
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

struct serial8250 {
	uint8_t ier, iir_fifo, lcr, mcr, lsr, msr, scr, dll, dlm, fcr;
	bool thri_pending;
	int out_fd;
	/* called with the new level of the IRQ line whenever it may have changed */
	void (*set_irq)(void *ctx, int level);
	void *irq_ctx;
	pthread_mutex_t lock;
};

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4

void serial_init(struct serial8250 *s, int out_fd, void (*set_irq)(void *, int), void *ctx);
/* One port access at @off (0..7) from the base: @is_write, @data (1 byte). */
void serial_io(struct serial8250 *s, unsigned int off, bool is_write, uint8_t *data);

/* ---------------------------------------------------------------- vCPUs */

struct vmm;

struct vcpu {
	struct vmm *vm;
	unsigned int index;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	bool thread_started;
	pid_t tid;
	int perf_fd;
	uint64_t percpu_base;   /* per-CPU base (kernel GS) seen on this vCPU, 0 until known */
	uint64_t kaslr_poll_ns; /* last MSR_LSTAR look from an I/O exit (kaslr_poll) */
	bool debug_armed;
	uint64_t dr7_applied;    /* DR7 as last given to KVM_SET_GUEST_DEBUG */
	uint64_t rf_probe_pc;    /* a trap hit resumed with RF set, to see if RF works */
	uint64_t rf_probe_rsp;
	struct vmm_counters c;  /* this vCPU's counters, summed at the end */
	/* register access without KVM_CAP_SYNC_REGS: copies and dirty flags */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	bool regs_valid, sregs_valid, regs_dirty, sregs_dirty;
	struct hvp_sample sample; /* scratch for building a sample */
	struct hvp_user_stack ustack; /* scratch for a USER_STACK record */
	struct pgwalk_cache tcache;   /* this vCPU's translations, invalidated at each sample */
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
	bool enabled;
	uint64_t pf_entry_kva;  /* breakpoint address: #PF entry */
	uint64_t lstar;         /* MSR_LSTAR as the guest set it (read at each hit; cached) */
	uint64_t star;
	uint64_t sfmask;
	uint8_t step_len;       /* bytes to skip at pf_entry_kva for an ordinary fault (nop/cld) */
	bool step_is_cld;
};

/* ---------------------------------------------------------------- marks (marks.c) */

/*
 * A mark: a guest thread sampled in the kernel whose user stack is still to be walked, keyed by
 * the thread (task GVA + pid), never by vCPU: the thread may return to user on another vCPU.
 * All samples of one stay in the kernel share its cookie.
 */
#define MARKS_MAX 512

struct mark {
	uint64_t task;
	int32_t pid;
	uint32_t vcpu;
	uint64_t cookie;
	struct gi_paging pg; /* translation of the thread's process at the sample */
	uint64_t entry_ip; /* user registers saved at kernel entry (pt_regs), the fallback */
	uint64_t entry_sp;
	uint64_t entry_bp;
	bool entry_known;  /* false: marked in the kernel entry code, before pt_regs was complete */
	uint64_t t_ns;     /* host time of the first sample */
	bool used;
	/* the walk from the entry registers made when the mark was taken: the answer when the
	 * return shows other registers (execve replaced the address space, a signal frame was
	 * set up, or the entry ended unseen) */
	uint8_t entry_stop;
	uint16_t n_entry;
	uint64_t entry_ips[HVP_MAX_CALLCHAIN];
};

struct marks {
	pthread_mutex_t lock;
	struct mark slot[MARKS_MAX];
	unsigned int n_used;
	unsigned int scan_next; /* round-robin position of the timeout scan */
	atomic_uint pending;    /* == n_used, readable without the lock */
	uint64_t next_cookie;
};

/* The user registers a walk starts from. */
struct user_regs {
	uint64_t ip, sp, bp;
};

/* ---------------------------------------------------------------- return-to-user traps (trap.c) */

enum trap_step {
	TRAP_STEP_UNKNOWN = 0, /* not probed yet: the first hit tries RFLAGS.RF */
	TRAP_STEP_RF = 1,      /* RF stepped over every hit so far (VMX/SVM) */
	TRAP_STEP_COMPLETE = 2,/* RF is ignored (PVM): hvprof completes sysretq/iretq itself */
};

/* Kernel entry code where pt_regs may still hold the previous entry's user registers. */
struct entry_window {
	uint64_t text_start, text_end;     /* __entry_text_start.. __entry_text_end */
	uint64_t exit1_start, exit1_end;   /* syscall_return_via_sysret..entry_SYSRETQ_end */
	uint64_t exit2_start, exit2_end;   /* swapgs_restore_regs_and_return_to_usermode..iretq */
};

struct traps {
	bool available;       /* exit sites found and breakpoints usable */
	bool verified;        /* the sites' bytes were checked in guest memory */
	uint64_t sysret_kva;  /* sysretq on the syscall exit path */
	uint64_t iret_kva;    /* iretq of native_irq_return_iret */
	uint64_t star;        /* MSR_STAR, read at the first sysretq completion */
	atomic_int step;      /* enum trap_step */
};

/* ---------------------------------------------------------------- the VM */

struct vmm {
	struct vmm_config cfg;
	char *cmdline;
	void *initrd_copy;
	int kvm_fd;
	int vm_fd;
	struct vmm_ram ram;
	struct gmem gmem;
	struct boot_info boot;
	unsigned int n_vcpus;
	struct vcpu *vcpus;
	struct kvm_cpuid2 *cpuid;
	struct serial8250 com1;
	struct gi *gi;
	unsigned int maxphyaddr;
	enum vmm_counter_kind counter;
	bool sync_regs;
	bool sregs2;
	struct pvm_fixup pvm;
	bool is_pvm;
	char strategy[256];
	enum vmm_callchain_mode callchain;
	uint64_t mark_timeout_ns;
	struct marks marks;
	struct traps traps;
	struct entry_window entry_window;
	/* KASLR (kaslr.c): trap/entry-window addresses include the slide once sites_ready */
	atomic_bool sites_ready;
	atomic_int kaslr_check;    /* enum vmm_kaslr_check */
	uint64_t kaslr_detected;   /* written before kaslr_check leaves PENDING */
	int kaslr_idt;             /* the IDT's #PF gate: 1 agrees, -1 not, 0 unknown (ditto) */
	atomic_int pti;            /* enum vmm_pti (pti.c) */
	uint64_t t_start_ns;

	/* the outcome: first writer wins */
	pthread_mutex_t end_lock;
	atomic_int stop_reason;  /* 0 while running */
	int exit_status;
	char end_message[256];
	atomic_uint_fast64_t first_user_ns;

	/* identity caches (thread/process records are emitted once per change) */
	pthread_mutex_t ident_lock;
	struct ident_cache *ident;
};

uint64_t vmm_now_ns(void);

/* pti.c: the guest's page-table isolation, decided once (enum vmm_pti in vm->pti). */
#define VMM_PTI_USER_BIT (1ull << 12) /* CR3 of the user half of Linux's PGD pair */
void pti_probe(struct vcpu *vcpu, const struct kvm_sregs *sregs);

/*
 * The translation state of a vCPU, from its segment/control registers. Under page-table
 * isolation each half of the address space goes through its half of the PGD pair (pti.c):
 * kernel addresses through the kernel's, user addresses through the user's (where user code
 * is executable), whichever of the two the vCPU is on.
 */
static inline struct gi_paging vcpu_paging(const struct vmm *vm, const struct kvm_sregs *sregs)
{
	struct gi_paging pg = { .cr0 = sregs->cr0, .cr3 = sregs->cr3, .cr4 = sregs->cr4,
				.efer = sregs->efer, .maxphyaddr = vm->maxphyaddr };

	if (atomic_load_explicit(&vm->pti, memory_order_relaxed) == VMM_PTI_ON) {
		if (sregs->cr3 & VMM_PTI_USER_BIT)
			pg.kernel_cr3 = sregs->cr3 & ~VMM_PTI_USER_BIT;
		else
			pg.user_cr3 = sregs->cr3 | VMM_PTI_USER_BIT;
	}
	return pg;
}
/* Record the end of the run (first caller wins) and kick every vCPU out of KVM_RUN. */
void vmm_end(struct vmm *vm, int reason, int exit_status, const char *fmt, ...) __printf(4, 5);
void vmm_kick_all(struct vmm *vm);

/* cpu.c */
int cpu_setup_cpuid(struct vmm *vm) __must_check;
int vcpu_init_regs(struct vmm *vm, struct vcpu *vcpu) __must_check;
/* Registers to read (sync-regs copies when available). */
int vcpu_get_regs(struct vcpu *vcpu, struct kvm_regs **regs, struct kvm_sregs **sregs) __must_check;
/* Registers to modify: ioctl copies; call vcpu_mark_regs_dirty() after changing them. */
int vcpu_get_regs_rw(struct vcpu *vcpu, struct kvm_regs **regs, struct kvm_sregs **sregs) __must_check;
void vcpu_mark_regs_dirty(struct vcpu *vcpu, bool regs, bool sregs);
/* Write vcpu->sregs back (KVM_SET_SREGS2 when available: no interrupt re-injection). */
int vcpu_put_sregs(struct vcpu *vcpu) __must_check;

/* exit.c: handle the exit in vcpu->run; returns 0 to continue, 1 to stop, -errno on error. */
int exit_handle(struct vcpu *vcpu) __must_check;
/* io/mmio dispatch, pure over a kvm_run (unit-testable) */
int exit_io(struct vmm *vm, struct vcpu *vcpu, struct kvm_run *run) __must_check;
int exit_mmio(struct vmm *vm, struct vcpu *vcpu, struct kvm_run *run) __must_check;

/* sampler.c */
int sampler_probe(struct vmm *vm) __must_check;
int sampler_open_vcpu(struct vmm *vm, struct vcpu *vcpu) __must_check;
void sampler_close_vcpu(struct vcpu *vcpu);
int sampler_install_signals(void) __must_check;
extern int vmm_sig_sample;
extern int vmm_sig_kick;

/* sample.c */
void sample_take(struct vcpu *vcpu);

/* kaslr.c: the KASLR slide. kaslr_setup: before the vCPUs start (slide known: rebase the
 * trap sites now). kaslr_check: from a kernel-mode sample until decided (find or confirm the
 * slide from MSR_LSTAR). kaslr_poll: the same from any exit (reads the registers itself).
 * kaslr_sites_rebase: move the trap and entry-window addresses by the slide, then publish. */
void kaslr_setup(struct vmm *vm);
void kaslr_check(struct vcpu *vcpu, const struct kvm_sregs *sregs);
void kaslr_poll(struct vcpu *vcpu);
void kaslr_sites_rebase(struct vmm *vm, uint64_t slide);
int ident_cache_create(struct vmm *vm) __must_check;
void ident_cache_destroy(struct vmm *vm);

/* marks.c */
void marks_init(struct marks *m);
void marks_destroy(struct marks *m);
/*
 * A kernel-mode sample of a user thread: join its mark or create one. Return: the cookie
 * (> 0), or 0 when the table is full (the caller walks eagerly).
 */
uint64_t marks_take(struct vcpu *vcpu, uint64_t task, int32_t pid, const struct gi_paging *pg,
		    const struct user_regs *entry, bool entry_known, bool *is_new);
/* The thread @task/@pid is about to return to user with @ur: resolve its mark, if any. */
void marks_resolve_at_return(struct vcpu *vcpu, uint64_t task, int32_t pid,
			     const struct gi_paging *pg, const struct user_regs *ur);
/* Resolve marks older than the timeout (at most a few per call) from their entry registers. */
void marks_expire(struct vcpu *vcpu, uint64_t now_ns);
/* At the end of the run: resolve every pending mark from its entry registers. */
void marks_flush(struct vmm *vm, struct vcpu *vcpu);

/* trap.c */
int traps_setup(struct vmm *vm) __must_check;
/* Apply the debug registers this vCPU should have now (PVM fix-up, exit-site traps). */
int vcpu_debug_update(struct vcpu *vcpu) __must_check;
/* Disarm every breakpoint of @vcpu (end of run). */
void vcpu_debug_disarm(struct vcpu *vcpu);
/* KVM_EXIT_DEBUG: dispatch to the PVM fix-up or a trap. */
int debug_exit(struct vcpu *vcpu) __must_check;
/* Any other exit while an RF probe is pending: RF worked if the guest moved on. */
void trap_rf_probe_check(struct vcpu *vcpu);
/* Read a user walk start from pt_regs of @task (registers saved at kernel entry). */
int user_regs_at_entry(struct vmm *vm, const struct gi_paging *pg, uint64_t task,
		       struct user_regs *ur) __must_check;
/* Walk @ur's user stack and emit a USER_STACK record for @cookie. */
void emit_user_stack(struct vcpu *vcpu, uint64_t cookie, int32_t pid, const struct gi_paging *pg,
		     const struct user_regs *ur);

/* pvm.c */
int pvm_fixup_setup(struct vmm *vm) __must_check;
int pvm_fixup_hit(struct vcpu *vcpu) __must_check;

#endif /* HVPROF_VMM_INTERNAL_H */
