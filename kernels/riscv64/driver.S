/*
 * kernel-lab guest-side driver for riscv64 (RV64GC, LP64D), per kernels/README.md.
 *
 *   lab_batch         runs calls start..ncalls of the table in lab_arena (psABI function)
 *   _start            qemu-user entry: map the shared arena, answer request tokens
 *   lab_fault         SIGILL/SIGSEGV/SIGBUS/SIGFPE/SIGTRAP/SIGSYS/SIGUSR1 handler: reply, then
 *                     back to the request loop
 *   lab_unicorn_halt  part of the image contract, never executed (Unicorn has lab_batch return
 *                     to lab_batch_return, as the request loop's call does)
 *   lab_stack_top     top of the driver's stack in .bss
 *   lab_arena         in .bss, 4096-aligned, last object of the image
 *
 * Every protocol value (offsets, sizes, fds, tokens, exit codes, the poison step, the saved
 * registers) comes from lab_protocol.h, generated from lab/src/protocol.rs.
 *
 * System calls appear only in _start, its I/O helpers and the fault handler, all between
 * lab_syscalls_begin and lab_syscalls_end: lab_batch and the kernels also run under Unicorn, where
 * an ecall is an error, and on a Linux host _start asks for SIGSYS on any system call from
 * outside that range (syscall user dispatch; qemu-user does not implement it and says EINVAL).
 *
 * Linux riscv64 facts used here (asm-generic syscall numbers, include/uapi/asm-generic/unistd.h):
 *   read 63, write 64, exit_group 94, sigaltstack 132, rt_sigaction 134, prctl 167,
 *   mprotect 226, mmap 222.
 * struct sigaction (kernel view, no sa_restorer on riscv): handler @0, flags @8, mask @16.
 * stack_t: ss_sp @0, ss_flags @8, ss_size @16.
 * siginfo_t: si_signo @0, si_addr @16.
 * ucontext (arch/riscv/include/uapi/asm/ucontext.h): uc_flags 8, uc_link 8, uc_stack 24,
 *   uc_sigmask 8, __unused 120 -> 168, then uc_mcontext (struct sigcontext, 16-aligned because
 *   its FP state is) at 176; sigcontext starts with sc_regs.pc. So the PC is at 176, verified
 *   under qemu-riscv64 7.2 with a faulting kernel (the reported pc equals the address of the
 *   faulting instruction).
 */
#include "lab_protocol.h"

	.option norelax		/* ld.lld 14 implements no RISC-V relaxation */

#define SYS_read	63
#define SYS_write	64
#define SYS_exit_group	94
#define SYS_sigaltstack	132
#define SYS_rt_sigaction 134
#define SYS_prctl	167
#define SYS_mmap	222
#define SYS_mprotect	226
#define SYS_getppid	173
#define PROT_READ	1
#define PROT_RW		3
#define MAP_SHARED	0x01
#define MAP_FIXED	0x10
#define EINTR		4
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#define SA_SIGINFO	0x00000004
#define SA_ONSTACK	0x08000000
#define UC_PC		176	/* offsetof(ucontext, uc_mcontext.sc_regs.pc), see above */
#define UC_A7		(UC_PC + 17 * 8)	/* sc_regs.a7 (x17): the system-call number */
#define UC_A0		(UC_PC + 10 * 8)	/* sc_regs.a0 (x10) */
#define UC_SP		(UC_PC + 2 * 8)		/* sc_regs.sp (x2) */
#define SI_ADDR		16	/* offsetof(siginfo_t, si_addr) */


/* lab_batch frame: ra, then the saved registers in ABI order, padded to 16 bytes */
#define F_SAVED		8
#define FRAME		((8 + 8 * LAB_NSAVED + 15) & ~15)

	.text

/*
 * void lab_batch(void)
 * An ordinary psABI function: it saves and restores s0-s11, fs0-fs11, and also gp and tp
 * (the driver poisons those too, so it must give the caller's values back).
 * Nothing survives a kernel call in registers: after each call the entry is found again from
 * the arena header (table + current * entry size) and sp is reloaded from lab_saved_sp.
 */
	.globl	lab_batch
	.type	lab_batch, @function
	.p2align 2
lab_batch:
	addi	sp, sp, -FRAME
	sd	ra, 0(sp)
	.set	lab_k, 0
	.irp	reg, LAB_SAVED_GPRS
	sd	\reg, (F_SAVED + 8 * lab_k)(sp)
	.set	lab_k, lab_k + 1
	.endr
	.irp	reg, LAB_SAVED_FPRS
	fsd	\reg, (F_SAVED + 8 * lab_k)(sp)
	.set	lab_k, lab_k + 1
	.endr
	.if	FRAME > F_SAVED + 8 * LAB_NSAVED
	sd	zero, (F_SAVED + 8 * LAB_NSAVED)(sp)	/* the pad, as on every backend (issue 28) */
	.endif
	lla	t0, lab_saved_sp
	sd	sp, 0(t0)

	lla	t0, lab_arena
	ld	t1, LAB_H_START(t0)
	sd	t1, LAB_H_DONE(t0)	/* nothing of this batch completed yet */

	/* t0 = lab_arena, t1 = index of the next call */
.Lnext_call:
	ld	t2, LAB_H_NCALLS(t0)
	bgeu	t1, t2, .Lbatch_done
	sd	t1, LAB_H_CURRENT(t0)	/* the fault handler reports this */
	ld	t3, LAB_H_TABLE(t0)
	li	t4, LAB_ENTRY_SIZE
	mul	t4, t1, t4
	add	t3, t3, t4		/* t3 = &table[current] */
	sd	zero, LAB_E_STATUS(t3)

	/* optional snapshot copy, memmove semantics: copy_len bytes from copy_src to copy_dst */
	ld	a0, LAB_E_COPY_SRC(t3)
	ld	a1, LAB_E_COPY_DST(t3)
	ld	a2, LAB_E_COPY_LEN(t3)
	beqz	a2, .Lcopied
	sub	a3, a1, a0
	bltu	a3, a2, .Lcopy_back	/* dst - src < len (unsigned): dst overlaps src's tail */
	or	a3, a0, a1
	or	a3, a3, a2
	andi	a3, a3, 7
	bnez	a3, .Lcopy_bytes
.Lcopy_dwords:				/* src, dst and len all multiples of 8 */
	ld	a4, 0(a0)
	sd	a4, 0(a1)
	addi	a0, a0, 8
	addi	a1, a1, 8
	addi	a2, a2, -8
	bnez	a2, .Lcopy_dwords
	j	.Lcopied
.Lcopy_bytes:
	lbu	a4, 0(a0)
	sb	a4, 0(a1)
	addi	a0, a0, 1
	addi	a1, a1, 1
	addi	a2, a2, -1
	bnez	a2, .Lcopy_bytes
	j	.Lcopied
.Lcopy_back:				/* last byte first */
	add	a0, a0, a2
	add	a1, a1, a2
1:	addi	a0, a0, -1
	addi	a1, a1, -1
	lbu	a4, 0(a0)
	sb	a4, 0(a1)
	addi	a2, a2, -1
	bnez	a2, 1b
.Lcopied:

	ld	t0, LAB_E_FN(t3)
	ld	a0, LAB_E_ARG0(t3)
	ld	a1, LAB_E_ARG1(t3)
	ld	a2, LAB_E_ARG2(t3)
	ld	a3, LAB_E_ARG3(t3)

	/* poison: saved[i] = seed + (i+1) * step, in ABI order */
	ld	t1, LAB_E_SEED(t3)
	li	t2, LAB_POISON_STEP
	.irp	reg, LAB_SAVED_GPRS
	add	t1, t1, t2
	mv	\reg, t1
	.endr
	.irp	reg, LAB_SAVED_FPRS
	add	t1, t1, t2
	fmv.d.x	\reg, t1
	.endr
#ifdef __riscv_vector
	/*
	 * RISC-V psABI "Vector Register Convention": vl and vtype are not preserved across calls,
	 * vxrm and vxsat are unspecified at entry. Enter with vtype.vill set (vtype bit XLEN-1: a
	 * vector instruction before the kernel's own vsetvli traps) and vxrm in 1..3 from the
	 * poison (never round-to-nearest-up, 0), vxsat set. Unicorn, which has no vector unit,
	 * jumps from lab_vector_entry to lab_vector_entry_end (lab/src/isa.rs VECTOR_ENTRY).
	 */
lab_vector_entry:
	li	t2, 1
	slli	t2, t2, 63
	vsetvl	zero, t2, t2
	srli	t2, t1, 17
	andi	t2, t2, 3
	seqz	t4, t2
	or	t2, t2, t4
	csrw	vxrm, t2
	csrwi	vxsat, 1
lab_vector_entry_end:
#endif

	li	t1, LAB_FPCTL_POISON	/* fcsr poison: frm (lab/src/abi.rs) */
	fscsr	t1
	ld	sp, LAB_E_STACK(t3)	/* the kernel runs on the guarded stack (16-aligned) */
	sd	sp, LAB_E_SP_BEFORE(t3)
	li	a4, 0			/* else what _start (a7: its last system call) or */
	li	a5, 0			/* Unicorn left: a kernel could tell them apart */
	li	a6, 0
	li	a7, 0
	li	t5, 0
	li	t6, 0
	jalr	ra, 0(t0)

	/* after the call: only a0, sp and the saved registers are of interest; find the entry */
	lla	t0, lab_arena
	ld	t1, LAB_H_CURRENT(t0)
	ld	t3, LAB_H_TABLE(t0)
	li	t4, LAB_ENTRY_SIZE
	mul	t4, t1, t4
	add	t3, t3, t4
	sd	a0, LAB_E_RET(t3)
	sd	sp, LAB_E_SP_AFTER(t3)
	sd	zero, LAB_E_FLAGS(t3)
	frcsr	t4
	sd	t4, LAB_E_FPCTL(t3)
	li	t4, LAB_FPCTL_DEFAULT
	fscsr	t4
	.set	lab_k, 0
	.irp	reg, LAB_SAVED_GPRS
	sd	\reg, (LAB_E_SAVED + 8 * lab_k)(t3)
	.set	lab_k, lab_k + 1
	.endr
	.irp	reg, LAB_SAVED_FPRS
	fmv.x.d	t4, \reg
	sd	t4, (LAB_E_SAVED + 8 * lab_k)(t3)
	.set	lab_k, lab_k + 1
	.endr
	li	t4, 1
	sd	t4, LAB_E_STATUS(t3)
	addi	t1, t1, 1
	sd	t1, LAB_H_DONE(t0)
	lla	t4, lab_saved_sp	/* the driver's own sp, whatever the kernel did to it */
	ld	sp, 0(t4)
	j	.Lnext_call

.Lbatch_done:
	ld	ra, 0(sp)
	.set	lab_k, 0
	.irp	reg, LAB_SAVED_GPRS
	ld	\reg, (F_SAVED + 8 * lab_k)(sp)
	.set	lab_k, lab_k + 1
	.endr
	.irp	reg, LAB_SAVED_FPRS
	fld	\reg, (F_SAVED + 8 * lab_k)(sp)
	.set	lab_k, lab_k + 1
	.endr
	addi	sp, sp, FRAME
	ret
	.size	lab_batch, . - lab_batch

/* Part of the image contract (kernels/README.md); Unicorn returns to lab_batch_return. */
	.globl	lab_unicorn_halt
	.type	lab_unicorn_halt, @function
	.p2align 2
lab_unicorn_halt:
	.4byte	0			/* all-zero word: an illegal instruction if ever reached */
	.size	lab_unicorn_halt, . - lab_unicorn_halt

	.globl	lab_syscalls_begin
lab_syscalls_begin:
/*
 * read_full(a0 = buf, a1 = len) -> a0 = bytes read from LAB_FD_REQUEST (< len only at EOF).
 * Retries on EINTR; any other error exits with LAB_EXIT_IO.
 * send_reply: fills magic and seq of lab_io_rep (kind, sum and the fault words are the
 * caller's) and writes it to LAB_FD_REPLY, retrying on EINTR, or exits with LAB_EXIT_IO.
 * checksum -> a0 = FNV-1a over the u64 words of lab_arena[sum_off, sum_off + sum_len).
 * Leaf helpers for _start and lab_fault; they use only a0-a2, a7, t0-t3.
 */
	.type	read_full, @function
	.p2align 2
read_full:
	mv	t0, a0
	mv	t1, a1
	li	t2, 0
1:	beq	t2, t1, 2f
	li	a0, LAB_FD_REQUEST
	add	a1, t0, t2
	sub	a2, t1, t2
	li	a7, SYS_read
	ecall
	li	t3, -EINTR
	beq	a0, t3, 1b
	bltz	a0, .Lexit_io
	beqz	a0, 2f			/* EOF */
	add	t2, t2, a0
	j	1b
2:	mv	a0, t2
	ret
	.size	read_full, . - read_full

	.type	send_reply, @function
	.p2align 2
send_reply:
	lla	t0, lab_io_rep
	li	t1, LAB_REPLY_MAGIC
	sd	t1, LAB_RP_MAGIC(t0)
	lla	t1, lab_io_seq
	ld	t1, 0(t1)
	sd	t1, LAB_RP_SEQ(t0)
	li	t1, LAB_REPLY_SIZE
	li	t2, 0
1:	beq	t2, t1, 2f
	li	a0, LAB_FD_REPLY
	add	a1, t0, t2
	sub	a2, t1, t2
	li	a7, SYS_write
	ecall
	li	t3, -EINTR
	beq	a0, t3, 1b
	blez	a0, .Lexit_io
	add	t2, t2, a0
	j	1b
2:	ret
	.size	send_reply, . - send_reply

	.type	checksum, @function
	.p2align 2
checksum:
	lla	t0, lab_io_sum
	ld	t1, 0(t0)		/* sum_off */
	ld	t2, 8(t0)		/* sum_len */
	lla	t0, lab_arena
	add	t0, t0, t1
	srli	t2, t2, 3
	li	a0, LAB_FNV_OFFSET
	li	t3, LAB_FNV_PRIME
1:	beqz	t2, 2f
	ld	t1, 0(t0)
	xor	a0, a0, t1
	mul	a0, a0, t3
	addi	t0, t0, 8
	addi	t2, t2, -1
	j	1b
2:	ret
	.size	checksum, . - checksum

/*
 * sum_upto(a0 = current): a fault reply's checksum range ends with entry `current` of the call
 * table (the calls after it did not run in this entry): sum_len shrinks to end there (rounded
 * down to 8 bytes) when that is shorter. The host computes the same from the reply's `current`
 * and the header's `table`, so a kernel that faults on every call costs a checksum of the
 * entries it ran, not of the whole table. Leaf helper; it uses only a0, t0-t2.
 */
	.type	sum_upto, @function
	.p2align 2
sum_upto:
	addi	a0, a0, 1
	li	t0, LAB_ENTRY_SIZE
	mul	a0, a0, t0
	lla	t0, lab_arena
	ld	t1, LAB_H_TABLE(t0)
	add	a0, a0, t1
	sub	a0, a0, t0		/* offset of the end of entry `current` */
	lla	t0, lab_io_sum
	ld	t1, 0(t0)		/* sum_off */
	sub	a0, a0, t1
	andi	a0, a0, -8
	ld	t2, 8(t0)		/* sum_len */
	bgeu	a0, t2, 1f		/* not shorter (or before sum_off): unchanged */
	sd	a0, 8(t0)
1:	ret
	.size	sum_upto, . - sum_upto

/*
 * protect: put the batch's protection table in force. lab_prot_id holds the id of the table in
 * force (LAB_H_PROT_ID of the request that put it there; 0 = none known). When it is the
 * request's LAB_H_PROT_BASE, the host's delta entries (LAB_H_DELTA_TABLE, LAB_H_DELTA_COUNT:
 * addr, len, prot, computed from the two tables) are applied, one mprotect each: none for a
 * resumed entry of the same batch (the fault handler leaves the pages as they are), few for a
 * batch laid out like the last one. Otherwise the whole table: all of lab_arena readable and
 * writable again (one mprotect); then one mprotect (read-only) per span of adjacent entries
 * that are read-only or guards and hold a read-only one (the read-only buffers and the guards
 * between them); then one mprotect per run of adjacent entries with the same prot, but for
 * read-only runs (done): the guards inside the spans cost one call each, their read-only
 * pages none. The id is cleared before the first change and set after the last, so a poke
 * (SIGUSR1) in between leaves it clear. Then one getppid, the marker that ends the driver's
 * protection changes for the host's witness under qemu-user (lab/src/backend/process/
 * witness.rs): any later one is kernel code's. Exits with LAB_EXIT_MPROTECT if mprotect fails.
 * Leaf helper; it uses only a0-a2, a7, t0-t6.
 */
	.type	protect, @function
	.p2align 2
protect:
	lla	t0, lab_arena
	ld	t1, LAB_H_PROT_TABLE(t0)	/* t1 = table */
	ld	t2, LAB_H_PROT_COUNT(t0)	/* t2 = entries */
	lla	t3, lab_prot_id
	ld	t4, 0(t3)		/* t4 = id in force */
	sd	zero, 0(t3)		/* none until this table is */
	beqz	t4, 3f
	ld	t5, LAB_H_PROT_BASE(t0)
	bne	t4, t5, 3f
	ld	t4, LAB_H_DELTA_TABLE(t0)	/* the delta: t4 = next entry, t5 = entries left */
	ld	t5, LAB_H_DELTA_COUNT(t0)
15:	beqz	t5, 2f
	ld	a0, 0(t4)
	ld	a1, 8(t4)
	ld	a2, 16(t4)
	li	a7, SYS_mprotect
	ecall
	bnez	a0, .Lexit_mprotect
	addi	t4, t4, LAB_PROT_ENTRY_SIZE
	addi	t5, t5, -1
	j	15b
3:	lla	a0, lab_arena		/* all of the arena readable and writable */
	li	a1, LAB_ARENA_SIZE
	li	a2, PROT_RW
	li	a7, SYS_mprotect
	ecall
	bnez	a0, .Lexit_mprotect
	mv	t4, t1			/* t4 = next entry, t5 = entries left */
	mv	t5, t2
10:	beqz	t5, 14f
	ld	a2, 16(t4)		/* a2 != 0: the span holds a read-only entry */
	li	t6, PROT_READ
	bgtu	a2, t6, 13f		/* neither read-only nor a guard */
	ld	a0, 0(t4)
	ld	a1, 8(t4)
11:	addi	t4, t4, LAB_PROT_ENTRY_SIZE	/* extend the span over adjacent R / guard entries */
	addi	t5, t5, -1
	beqz	t5, 12f
	add	t6, a0, a1
	ld	a7, 0(t4)
	bne	t6, a7, 12f
	ld	a7, 16(t4)
	li	t6, PROT_READ
	bgtu	a7, t6, 12f
	or	a2, a2, a7
	ld	a7, 8(t4)
	add	a1, a1, a7
	j	11b
12:	beqz	a2, 10b			/* guards only: the next pass */
	li	a2, PROT_READ
	li	a7, SYS_mprotect
	ecall
	bnez	a0, .Lexit_mprotect
	j	10b
13:	addi	t4, t4, LAB_PROT_ENTRY_SIZE
	addi	t5, t5, -1
	j	10b
14:	mv	t4, t1
	mv	t5, t2
4:	beqz	t5, 2f
	ld	a0, 0(t4)
	ld	a1, 8(t4)
	ld	a2, 16(t4)
5:	addi	t4, t4, LAB_PROT_ENTRY_SIZE	/* merge the next entry if it continues the run */
	addi	t5, t5, -1
	beqz	t5, 6f
	add	t6, a0, a1
	ld	a7, 0(t4)
	bne	t6, a7, 6f
	ld	a7, 16(t4)
	bne	a2, a7, 6f
	ld	a7, 8(t4)
	add	a1, a1, a7
	j	5b
6:	li	a7, PROT_READ
	beq	a2, a7, 4b		/* read-only: in force since the span pass */
	li	a7, SYS_mprotect
	ecall
	bnez	a0, .Lexit_mprotect
	j	4b
2:	ld	t4, LAB_H_PROT_ID(t0)	/* in force */
	sd	t4, 0(t3)
	li	a7, SYS_getppid		/* the marker: the table is in force */
	ecall
	ret
	.size	protect, . - protect

	.type	check_handlers, @function
	.p2align 2
/* check_handlers -> a0 = the first of LAB_SIGNALS whose handler (rt_sigaction(sig, NULL, &old))
 * is not lab_fault, a1 = that handler; a0 = 0 when all are ours.  Under qemu-user the host
 * cannot see the guest's handlers (qemu emulates sigaction): the driver asks for them. */
check_handlers:
	.irp	sig, LAB_SIGNALS
	li	a0, \sig
	li	a1, 0
	lla	a2, lab_oldact
	li	a3, 8
	li	a7, SYS_rt_sigaction
	ecall
	ld	a1, lab_oldact
	lla	t0, lab_fault
	li	a0, \sig
	bne	a1, t0, 1f
	.endr
	li	a0, 0
	li	a1, 0
1:	ret
	.size	check_handlers, . - check_handlers

/*
 * batch_clean: what lab_batch and the kernel find of the driver is the same on every backend
 * (issue 28): zero check_handlers' result and the request and reply words (the reply is written
 * after the batch, lab_io_sum holds the request's range), and every callee-saved register
 * (lab_batch saves them in its frame; after a fault they are the kernel's), as Unicorn has
 * them. Clobbers t0, t1 and the callee-saved registers.
 */
	.type	batch_clean, @function
	.p2align 2
batch_clean:
	lla	t0, lab_oldact
	li	t1, 32 + LAB_REQUEST_SIZE + LAB_REPLY_SIZE	/* lab_oldact, lab_io_req, lab_io_rep */
	add	t1, t1, t0
1:	sd	zero, 0(t0)
	addi	t0, t0, 8
	bltu	t0, t1, 1b
	.irp	reg, LAB_SAVED_GPRS
	li	\reg, 0
	.endr
	.irp	reg, LAB_SAVED_FPRS
	fmv.d.x	\reg, zero
	.endr
	ret
	.size	batch_clean, . - batch_clean

/*
 * _start (kernels/README.md, "_start I/O loop"): install the fault handler on an alternate
 * stack, map the shared arena (fd LAB_FD_ARENA) over lab_arena, then for each request token
 * (magic, seq, sum_off, sum_len) on LAB_FD_REQUEST: protect (unless the table is in force
 * already), lab_batch, and send the reply token (magic, seq, kind = done, checksum) on LAB_FD_REPLY.
 */
	.globl	_start
	.type	_start, @function
	.p2align 2
_start:
	lla	sp, lab_stack_top
	addi	sp, sp, -32

	/* sigaltstack({ss_sp = lab_sigstack, ss_flags = 0, ss_size}, NULL) */
	lla	t0, lab_sigstack
	sd	t0, 0(sp)
	sd	zero, 8(sp)
	li	t0, LAB_ALTSTACK_SIZE
	sd	t0, 16(sp)
	mv	a0, sp
	li	a1, 0
	li	a7, SYS_sigaltstack
	ecall

	/* rt_sigaction(sig, {lab_fault, SA_SIGINFO | SA_ONSTACK, mask: all}, NULL, 8) */
	lla	t0, lab_fault
	sd	t0, 0(sp)
	li	t0, SA_SIGINFO | SA_ONSTACK
	sd	t0, 8(sp)
	li	t0, -1			/* block every other signal in the handler */
	sd	t0, 16(sp)
	.irp	sig, LAB_SIGNALS
	li	a0, \sig
	mv	a1, sp
	li	a2, 0
	li	a3, 8
	li	a7, SYS_rt_sigaction
	ecall
	.endr

	/* mmap(lab_arena, size, RW, MAP_SHARED | MAP_FIXED, LAB_FD_ARENA, 0): the host's view */
	lla	a0, lab_arena
	li	a1, LAB_ARENA_SIZE
	li	a2, PROT_RW
	li	a3, MAP_SHARED | MAP_FIXED
	li	a4, LAB_FD_ARENA
	li	a5, 0
	li	a7, SYS_mmap
	ecall
	lla	t0, lab_arena
	bne	a0, t0, .Lexit_mmap

	/* prctl(PR_SET_SYSCALL_USER_DISPATCH, ON, begin, len, NULL): SIGSYS for a system call
	 * from anywhere but the driver's own I/O code. EINVAL under qemu-user: ignored. */
	li	a0, PR_SET_SYSCALL_USER_DISPATCH
	li	a1, PR_SYS_DISPATCH_ON
	lla	a2, lab_syscalls_begin
	lla	a3, lab_syscalls_end
	sub	a3, a3, a2
	li	a4, 0
	li	a7, SYS_prctl
	ecall
	addi	sp, sp, 32		/* the loop runs at lab_stack_top, where Unicorn enters lab_batch */

.Lio_loop:
	lla	t0, lab_loop_sp		/* where lab_fault resumes the loop */
	sd	sp, 0(t0)
	lla	a0, lab_io_req
	li	a1, LAB_REQUEST_SIZE
	call	read_full
	beqz	a0, .Lexit_ok		/* clean EOF between tokens */
	li	t0, LAB_REQUEST_SIZE
	bne	a0, t0, .Lexit_truncated
	lla	s1, lab_io_req
	ld	t0, LAB_RQ_MAGIC(s1)
	li	t1, LAB_REQUEST_MAGIC
	bne	t0, t1, .Lexit_protocol
	ld	t0, LAB_RQ_SEQ(s1)
	lla	t1, lab_io_seq
	ld	t1, 0(t1)
	bne	t0, t1, .Lexit_protocol
	ld	t0, LAB_RQ_SUM_OFF(s1)	/* the checksum range must lie in the arena */
	ld	t1, LAB_RQ_SUM_LEN(s1)
	or	t2, t0, t1
	andi	t2, t2, 7
	bnez	t2, .Lexit_protocol
	li	t2, LAB_ARENA_SIZE
	bgtu	t0, t2, .Lexit_protocol
	sub	t2, t2, t0
	bgtu	t1, t2, .Lexit_protocol
	lla	t2, lab_io_sum
	sd	t0, 0(t2)
	sd	t1, 8(t2)

	call	protect
	call	batch_clean
	call	lab_batch
/* lab_batch's return address (ra at its entry) in a process and under Unicorn, which stops
 * here: the same saved ra in lab_batch's frame. */
	.globl	lab_batch_return
lab_batch_return:
	call	check_handlers		/* a0 = a signal whose handler is not lab_fault, a1 = it */
	lla	t0, lab_io_rep
	sd	a0, LAB_RP_SIGNO(t0)
	sd	a1, LAB_RP_SI_ADDR(t0)
	li	t1, LAB_KIND_DONE
	beqz	a0, 1f
	li	t1, LAB_KIND_HANDLER
1:	sd	t1, LAB_RP_KIND(t0)
	call	checksum
	lla	t0, lab_io_rep
	sd	a0, LAB_RP_SUM(t0)
	call	send_reply
	lla	t0, lab_io_seq
	ld	t1, 0(t0)
	addi	t1, t1, 1
	sd	t1, 0(t0)
	j	.Lio_loop

/* The fault handler resumes the loop here, off the signal stack, with a0 = the lowest address of
 * it the handler may have used: the signal's frame (the kernel's registers) and the handler's
 * own words lie between it and the stack's top, and would stay there for the next batch to
 * read. Only that part is cleared. */
.Lfault_resume:
	lla	t0, lab_sigstack
	li	t1, LAB_ALTSTACK_SIZE
	add	t1, t1, t0
	bgeu	a0, t0, 1f
	mv	a0, t0
1:	bleu	a0, t1, 2f
	mv	a0, t1
2:	andi	a0, a0, -8
3:	bgeu	a0, t1, 4f
	sd	zero, 0(a0)
	addi	a0, a0, 8
	j	3b
4:	j	.Lio_loop

.Lexit_ok:
	li	a0, LAB_EXIT_OK
	j	.Lexit
.Lexit_truncated:
	li	a0, LAB_EXIT_TRUNCATED
	j	.Lexit
.Lexit_protocol:
	li	a0, LAB_EXIT_PROTOCOL
	j	.Lexit
.Lexit_io:
	li	a0, LAB_EXIT_IO
	j	.Lexit
.Lexit_mprotect:
	li	a0, LAB_EXIT_MPROTECT
	j	.Lexit
.Lexit_mmap:
	li	a0, LAB_EXIT_MMAP
.Lexit:
	li	a7, SYS_exit_group
	ecall
	.size	_start, . - _start

/*
 * lab_fault(a0 = signo, a1 = siginfo_t *, a2 = ucontext *), on lab_sigstack, every other
 * signal blocked. Sends the reply (magic, seq, kind = fault, checksum, signo, si_addr, pc,
 * current), then returns through rt_sigreturn into the request loop (the saved context's pc
 * and sp are replaced), so a fault costs no new guest process. It may clobber any register
 * (the loop reloads what it needs), but returns on its own sp with its own ra.
 */
	.type	lab_fault, @function
	.p2align 2
lab_fault:
	mv	s5, sp
	mv	s6, ra
	andi	sp, sp, -16
	mv	s1, a0
	mv	s2, a1
	mv	s3, a2
	lla	s4, lab_io_rep
	lla	t0, lab_arena
	ld	a0, LAB_H_CURRENT(t0)
	sd	a0, LAB_RP_CURRENT(s4)
	/* A handler of kernel code is reported by the entry that installed it, this one, even
	 * when it ends in a fault (else the next batch of this guest would carry the finding). */
	call	check_handlers
	bnez	a0, .Lfault_foreign_handler
	ld	a0, LAB_RP_CURRENT(s4)
	call	sum_upto
	call	checksum		/* the call table is never protected */
	sd	a0, LAB_RP_SUM(s4)
	li	t1, LAB_KIND_FAULT
	sd	t1, LAB_RP_KIND(s4)
	sext.w	t1, s1			/* signo is an int */
	sd	t1, LAB_RP_SIGNO(s4)
	ld	t1, SI_ADDR(s2)
	li	t2, 31			/* SIGSYS (qemu-user forwards a refused host call): */
	bne	s1, t2, 2f
	ld	t1, UC_A7(s3)		/* the guest's system-call number instead */
2:	sd	t1, LAB_RP_SI_ADDR(s4)
	ld	t1, UC_PC(s3)
	sd	t1, LAB_RP_PC(s4)
.Lfault_send:
	call	send_reply
	lla	t0, lab_io_seq
	ld	t1, 0(t0)
	addi	t1, t1, 1
	sd	t1, 0(t0)
	lla	t1, .Lfault_resume
	sd	t1, UC_PC(s3)
	lla	t1, lab_loop_sp
	ld	t1, 0(t1)
	sd	t1, UC_SP(s3)
	addi	t1, s5, -256		/* below the frame and all the handler used */
	sd	t1, UC_A0(s3)
	mv	sp, s5
	mv	ra, s6
	ret
/* a0 = the signal whose handler is not ours, a1 = that handler: a KIND_HANDLER reply (as after
 * lab_batch; the checksum covers the whole call table) in place of the fault's. */
.Lfault_foreign_handler:
	sd	a0, LAB_RP_SIGNO(s4)
	sd	a1, LAB_RP_SI_ADDR(s4)
	li	t1, LAB_KIND_HANDLER
	sd	t1, LAB_RP_KIND(s4)
	call	checksum
	sd	a0, LAB_RP_SUM(s4)
	j	.Lfault_send
	.size	lab_fault, . - lab_fault
	.globl	lab_syscalls_end
lab_syscalls_end:

/*
 * .bss: driver-private words, the signal stack, the driver's stack, and lab_arena last, so the
 * arena's end is the end of the image's last mapped page (driver.o is linked last).
 */
	.bss
	.p2align 4
lab_saved_sp:
	.zero	16
lab_loop_sp:				/* sp at the top of the request loop */
	.zero	8
lab_io_seq:				/* sequence number of the next request */
	.zero	8
lab_io_sum:				/* checksum range of the current request: off, len */
	.zero	16
#ifdef __riscv_vector
lab_vector_entry_vill:			/* says: each call is entered with vtype.vill set (VILL_SYMBOL) */
	.zero	8
#endif
	.p2align 3
/* batch_clean zeroes lab_oldact, lab_io_req and lab_io_rep as one run: keep them together. */
lab_oldact:				/* check_handlers: struct kernel_sigaction */
	.zero	32
lab_io_req:
	.zero	LAB_REQUEST_SIZE
lab_io_rep:
	.zero	LAB_REPLY_SIZE
	.p2align 4
lab_sigstack:
	.zero	LAB_ALTSTACK_SIZE
	.p2align 4
lab_prot_id:				/* protect: id of the table in force, 0 = none */
	.zero	16
lab_stack:
	.zero	LAB_STACK_SIZE - 16
	.globl	lab_stack_top
lab_stack_top:
	.p2align 12
	.globl	lab_arena
	.type	lab_arena, @object
lab_arena:
	.zero	LAB_ARENA_SIZE
	.size	lab_arena, LAB_ARENA_SIZE
