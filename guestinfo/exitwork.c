// SPDX-License-Identifier: MIT
// The exit-work loop of the generic entry code (kernel/entry/common.c, 5.8+; 6.1:
// exit_to_user_mode_loop, inlined into exit_to_user_mode_prepare): the slow path a thread takes
// on its way back to user mode only when one of its thread-info work flags is set. hvprof's
// guest-visible marks set TIF_NOTIFY_RESUME on the marked thread and trap the loop's head,
// trap the instruction of the loop that clears TIF_NOTIFY_RESUME (resume_user_mode_work's first
// statement, inlined): only threads with the flag reach it, and pt_regs still holds the user
// registers of the kernel entry there. Found here with capstone in the kernel image: the last
// backward jump of the function whose target is `sti` (local_irq_enable_exit_to_user, the loop's
// first statement) is the loop; inside it, the clear of bit 1 (`lock and byte [task], 0xfd`, or
// btr 1), with its operand decoded so a VMM can complete the instruction itself.
#define pr_fmt(fmt) "exitwork: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/kimage.h>
#include <hvprof/log.h>

#define EW_MAX_BYTES 2048 /* bytes of the function decoded at most */
#define EW_TIF_NOTIFY_RESUME 1 /* arch/x86/include/asm/thread_info.h */

/* The function that holds the loop, and where the next symbol starts (its end). */
static int ew_function(const struct symtab *st, uint64_t *start, const char **fname)
{
	static const char *const names[] = { "exit_to_user_mode_loop",
					     "exit_to_user_mode_prepare" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (symtab_find(st, names[i], start) == 0) {
			*fname = names[i];
			return 0;
		}
	return -ENOENT;
}

/* The x86 encoding number of a 64-bit GPR, + 1 (0: not one). */
static int ew_gpr(x86_reg r)
{
	static const x86_reg gprs[16] = { X86_REG_RAX, X86_REG_RCX, X86_REG_RDX, X86_REG_RBX,
					  X86_REG_RSP, X86_REG_RBP, X86_REG_RSI, X86_REG_RDI,
					  X86_REG_R8,  X86_REG_R9,  X86_REG_R10, X86_REG_R11,
					  X86_REG_R12, X86_REG_R13, X86_REG_R14, X86_REG_R15 };

	for (int i = 0; i < 16; i++)
		if (gprs[i] == r)
			return i + 1;
	return 0;
}

/* Does @insn clear bit EW_TIF_NOTIFY_RESUME of a memory operand? */
static bool ew_clears_notify(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	int64_t imm;

	if (x->op_count != 2 || x->operands[0].type != X86_OP_MEM ||
	    x->operands[1].type != X86_OP_IMM)
		return false;
	imm = x->operands[1].imm;
	if (insn->id == X86_INS_AND)
		return (imm & (1 << EW_TIF_NOTIFY_RESUME)) == 0 &&
		       ((imm & 0xff) | (1 << EW_TIF_NOTIFY_RESUME)) == 0xff;
	if (insn->id == X86_INS_BTR)
		return imm == EW_TIF_NOTIFY_RESUME;
	return false;
}

int gi_exit_work_find(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		      struct gi_exit_work *out)
{
	uint8_t code[EW_MAX_BYTES];
	uint64_t start, head = 0, back_end = 0, end;
	const char *fname, *name;
	const uint8_t *p;
	size_t avail;
	uint64_t addr, off;
	cs_insn *insn;
	csh cs;
	int err;

	if (!st || !read || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	err = ew_function(st, &start, &fname);
	if (err)
		return err;
	avail = sizeof(code);
	while (avail >= 64 && read(ctx, start, code, avail) != 0)
		avail /= 2;
	if (avail < 64)
		return -EFAULT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	/* Pass 1: the function's extent (up to the next symbol) and its last backward jump to
	 * an sti. */
	p = code;
	addr = start;
	end = start;
	while (cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;

		if (insn->address != start && symtab_lookup(st, insn->address, &name, &off) == 0 &&
		    off == 0 && strcmp(name, fname) != 0)
			break; /* the next function */
		end = insn->address + insn->size;
		if (cs_insn_group(cs, insn, X86_GRP_JUMP) && x->op_count == 1 &&
		    x->operands[0].type == X86_OP_IMM) {
			uint64_t t = (uint64_t)x->operands[0].imm;

			if (t >= start && t < insn->address &&
			    code[t - start] == 0xfb /* sti */) {
				head = t;
				back_end = insn->address + insn->size;
			}
		}
	}
	err = -ENOENT;
	if (head) {
		/* Pass 2: TIF_NOTIFY_RESUME is cleared inside [head, back_end). */
		p = code + (head - start);
		avail = back_end - head;
		addr = head;
		while (cs_disasm_iter(cs, &p, &avail, &addr, insn))
			if (ew_clears_notify(insn)) {
				const cs_x86_op *m = &insn->detail->x86.operands[0];

				out->clear = insn->address;
				out->clear_end = insn->address + insn->size;
				/* what a VMM must do to complete it (PVM ignores RFLAGS.RF): an
				 * AND of [base + disp] with the immediate */
				if (insn->size <= sizeof(out->clear_bytes))
					memcpy(out->clear_bytes, insn->bytes, insn->size);
				if (insn->id == X86_INS_AND && m->mem.index == X86_REG_INVALID &&
				    m->mem.segment == X86_REG_INVALID && ew_gpr(m->mem.base) &&
				    (m->size == 1 || m->size == 8)) {
					out->clear_base = ew_gpr(m->mem.base);
					out->clear_disp = m->mem.disp;
					out->clear_size = m->size;
					out->clear_imm = (uint64_t)insn->detail->x86.operands[1].imm;
				}
				err = 0;
				break;
			}
	}
	cs_free(insn, 1);
	cs_close(&cs);
	if (err) {
		pr_debug(LOG_BTF, "%s: no exit-work loop that clears TIF_NOTIFY_RESUME", fname);
		return err;
	}
	out->func_start = start;
	out->func_end = end;
	out->head = head;
	out->loop_end = back_end;
	out->notify_bit = EW_TIF_NOTIFY_RESUME;
	return 0;
}

int gi_syscall_tail_find(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t *start,
			 uint64_t *end)
{
	uint8_t code[1024];
	uint64_t a, b, addr, after = 0;
	const uint8_t *p;
	size_t avail;
	cs_insn *insn;
	csh cs;

	if (!st || !read || !start || !end)
		return -EINVAL;
	if (symtab_find(st, "entry_SYSCALL_64", &a) || symtab_find(st, "syscall_return_via_sysret", &b) ||
	    b <= a || b - a > sizeof(code))
		return -ENOENT;
	if (read(ctx, a, code, b - a) != 0)
		return -EFAULT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	p = code;
	avail = b - a;
	addr = a;
	while (cs_disasm_iter(cs, &p, &avail, &addr, insn))
		if (insn->id == X86_INS_CALL)
			after = insn->address + insn->size;
	cs_free(insn, 1);
	cs_close(&cs);
	if (!after)
		return -ENOENT;
	*start = after;
	*end = b;
	return 0;
}

int gi_tail_after_call(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *func,
		       const char *callee, uint64_t *start, uint64_t *end)
{
	uint8_t code[EW_MAX_BYTES];
	uint64_t a, target, addr, after = 0, last = 0, off;
	const char *name;
	const uint8_t *p;
	size_t avail;
	cs_insn *insn;
	csh cs;

	if (!st || !read || !func || !callee || !start || !end)
		return -EINVAL;
	if (symtab_find(st, func, &a) || symtab_find(st, callee, &target))
		return -ENOENT;
	avail = sizeof(code);
	while (avail >= 64 && read(ctx, a, code, avail) != 0)
		avail /= 2;
	if (avail < 64)
		return -EFAULT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	p = code;
	addr = a;
	while (cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;

		if (insn->address != a && symtab_lookup(st, insn->address, &name, &off) == 0 &&
		    off == 0 && strcmp(name, func) != 0)
			break;
		last = insn->address + insn->size;
		if ((insn->id == X86_INS_CALL || insn->id == X86_INS_JMP) && x->op_count == 1 &&
		    x->operands[0].type == X86_OP_IMM && (uint64_t)x->operands[0].imm == target)
			after = insn->address; /* the call itself: a caller frame returning after it
						* is inside @callee (whose frame a leaf without
						* one hides from the frame-pointer walk) */
	}
	cs_free(insn, 1);
	cs_close(&cs);
	if (!after)
		return -ENOENT;
	*start = after;
	*end = last;
	return 0;
}
