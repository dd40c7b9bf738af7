/*
 * kernel-lab guest-side driver for riscv64 (RV64GC, LP64D), per kernels/README.md.
 *
 *   lab_batch         runs calls start..ncalls of the table in lab_arena (psABI function)
 *   _start            qemu-user entry: read batches from stdin, answer on stdout
 *   lab_fault         SIGILL/SIGSEGV/SIGBUS/SIGFPE/SIGTRAP/SIGSYS/SIGUSR1 handler: report, exit(3)
 *   lab_unicorn_halt  return address Unicorn uses for lab_batch (never executed)
 *   lab_stack_top     top of a 1 MiB stack in .bss
 *   lab_arena         32 MiB in .bss, 4096-aligned, last object of the image
 *
 * System calls appear only in _start, its I/O helpers and the fault handler, all between
 * lab_syscalls_begin and lab_syscalls_end: lab_batch and the kernels also run under Unicorn, where
 * an ecall is an error, and on a Linux host _start asks for SIGSYS on any system call from
 * outside that range (syscall user dispatch; qemu-user does not implement it and says EINVAL).
 *
 * Linux riscv64 facts used here (asm-generic syscall numbers, include/uapi/asm-generic/unistd.h):
 *   read 63, write 64, exit_group 94, sigaltstack 132, rt_sigaction 134, prctl 167, mprotect 226.
 * struct sigaction (kernel view, no sa_restorer on riscv): handler @0, flags @8, mask @16.
 * stack_t: ss_sp @0, ss_flags @8, ss_size @16.
 * siginfo_t: si_signo @0, si_addr @16.
 * ucontext (arch/riscv/include/uapi/asm/ucontext.h): uc_flags 8, uc_link 8, uc_stack 24,
 *   uc_sigmask 8, __unused 120 -> 168, then uc_mcontext (struct sigcontext, 16-aligned because
 *   its FP state is) at 176; sigcontext starts with sc_regs.pc. So the PC is at 176, verified
 *   under qemu-riscv64 7.2 with a faulting kernel (the reported pc equals the address of the
 *   faulting instruction).
 */
	.option norelax		/* ld.lld 14 implements no RISC-V relaxation */

#define ARENA_SIZE	(32 << 20)
#define STACK_SIZE	(1 << 20)
#define SIGSTK_SIZE	(64 << 10)

/* lab_arena header (u64 words) */
#define H_NCALLS	0x00
#define H_START		0x08
#define H_TABLE		0x10
#define H_RESP_LEN	0x18
#define H_CURRENT	0x20
#define H_DONE		0x28
#define H_PROT_TABLE	0x30	/* address of (addr, len, prot) triples, applied with mprotect */
#define H_PROT_COUNT	0x38

/* call entry: (16 + NSAVED) u64 words, NSAVED = 26 (s0-s11, gp, tp, fs0-fs11) */
#define NSAVED		26
#define ENTRY_SIZE	((16 + NSAVED) * 8)
#define E_FN		0
#define E_ARG0		8
#define E_ARG1		16
#define E_ARG2		24
#define E_ARG3		32
#define E_COPY_SRC	40
#define E_COPY_DST	48
#define E_COPY_LEN	56
#define E_SEED		64
#define E_RET		72
#define E_SP_BEFORE	80
#define E_SP_AFTER	88
#define E_FLAGS		96
#define E_STATUS	104
#define E_STACK		112	/* sp for the call: the top of the guarded kernel stack */
#define E_SAVED		128
#define E_SAVED_FP	(E_SAVED + 14 * 8)	/* fs0 is saved[14] */

#define POISON_K	0x9E3779B97F4A7C15	/* golden-ratio step, kernels/README.md "Poison" */

#define SYS_read	63
#define SYS_write	64
#define SYS_exit_group	94
#define SYS_sigaltstack	132
#define SYS_rt_sigaction 134
#define SYS_prctl	167
#define SYS_mprotect	226
#define PROT_RW		3
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#define SA_SIGINFO	0x00000004
#define SA_ONSTACK	0x08000000
#define UC_PC		176	/* offsetof(ucontext, uc_mcontext.sc_regs.pc), see above */
#define UC_A7		(UC_PC + 17 * 8)	/* sc_regs.a7 (x17): the system-call number */
#define SI_ADDR		16	/* offsetof(siginfo_t, si_addr) */

/* lab_batch frame: ra, s0-s11, gp, tp, fs0-fs11 = 27 words, padded to 16 bytes */
#define F_RA		0
#define F_S(i)		(8 + 8 * (i))
#define F_GP		104
#define F_TP		112
#define F_FS(i)		(120 + 8 * (i))
#define FRAME		224

	.text

/*
 * void lab_batch(void)
 * An ordinary psABI function: it saves and restores s0-s11, fs0-fs11, and also gp and tp
 * (the driver poisons those too, so it must give the caller's values back).
 * Nothing survives a kernel call in registers: after each call the entry is found again from
 * the arena header (table + current * ENTRY_SIZE) and sp is reloaded from lab_saved_sp.
 */
	.globl	lab_batch
	.type	lab_batch, @function
	.p2align 2
lab_batch:
	addi	sp, sp, -FRAME
	sd	ra, F_RA(sp)
	sd	s0, F_S(0)(sp)
	sd	s1, F_S(1)(sp)
	sd	s2, F_S(2)(sp)
	sd	s3, F_S(3)(sp)
	sd	s4, F_S(4)(sp)
	sd	s5, F_S(5)(sp)
	sd	s6, F_S(6)(sp)
	sd	s7, F_S(7)(sp)
	sd	s8, F_S(8)(sp)
	sd	s9, F_S(9)(sp)
	sd	s10, F_S(10)(sp)
	sd	s11, F_S(11)(sp)
	sd	gp, F_GP(sp)
	sd	tp, F_TP(sp)
	fsd	fs0, F_FS(0)(sp)
	fsd	fs1, F_FS(1)(sp)
	fsd	fs2, F_FS(2)(sp)
	fsd	fs3, F_FS(3)(sp)
	fsd	fs4, F_FS(4)(sp)
	fsd	fs5, F_FS(5)(sp)
	fsd	fs6, F_FS(6)(sp)
	fsd	fs7, F_FS(7)(sp)
	fsd	fs8, F_FS(8)(sp)
	fsd	fs9, F_FS(9)(sp)
	fsd	fs10, F_FS(10)(sp)
	fsd	fs11, F_FS(11)(sp)
	lla	t0, lab_saved_sp
	sd	sp, 0(t0)

	lla	t0, lab_arena
	ld	t1, H_START(t0)
	sd	t1, H_DONE(t0)		/* nothing of this batch completed yet */

	/* t0 = lab_arena, t1 = index of the next call */
.Lnext_call:
	ld	t2, H_NCALLS(t0)
	bgeu	t1, t2, .Lbatch_done
	sd	t1, H_CURRENT(t0)	/* the fault handler reports this */
	ld	t3, H_TABLE(t0)
	li	t4, ENTRY_SIZE
	mul	t4, t1, t4
	add	t3, t3, t4		/* t3 = &table[current] */
	sd	zero, E_STATUS(t3)

	/* optional snapshot copy: copy_len bytes from copy_src to copy_dst */
	ld	a0, E_COPY_SRC(t3)
	ld	a1, E_COPY_DST(t3)
	ld	a2, E_COPY_LEN(t3)
	beqz	a2, .Lcopied
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
.Lcopied:

	ld	t0, E_FN(t3)
	ld	a0, E_ARG0(t3)
	ld	a1, E_ARG1(t3)
	ld	a2, E_ARG2(t3)
	ld	a3, E_ARG3(t3)

	/* poison: saved[i] = seed + (i+1)*K, in ABI order s0-s11, gp, tp, fs0-fs11 */
	ld	t1, E_SEED(t3)
	li	t2, POISON_K
	add	s0, t1, t2
	add	s1, s0, t2
	add	s2, s1, t2
	add	s3, s2, t2
	add	s4, s3, t2
	add	s5, s4, t2
	add	s6, s5, t2
	add	s7, s6, t2
	add	s8, s7, t2
	add	s9, s8, t2
	add	s10, s9, t2
	add	s11, s10, t2
	add	gp, s11, t2
	add	tp, gp, t2
	add	t1, tp, t2
	fmv.d.x	fs0, t1
	add	t1, t1, t2
	fmv.d.x	fs1, t1
	add	t1, t1, t2
	fmv.d.x	fs2, t1
	add	t1, t1, t2
	fmv.d.x	fs3, t1
	add	t1, t1, t2
	fmv.d.x	fs4, t1
	add	t1, t1, t2
	fmv.d.x	fs5, t1
	add	t1, t1, t2
	fmv.d.x	fs6, t1
	add	t1, t1, t2
	fmv.d.x	fs7, t1
	add	t1, t1, t2
	fmv.d.x	fs8, t1
	add	t1, t1, t2
	fmv.d.x	fs9, t1
	add	t1, t1, t2
	fmv.d.x	fs10, t1
	add	t1, t1, t2
	fmv.d.x	fs11, t1

	ld	sp, E_STACK(t3)		/* the kernel runs on the guarded stack (16-aligned) */
	sd	sp, E_SP_BEFORE(t3)
	jalr	ra, 0(t0)

	/* after the call: only a0 and sp are of interest; find the entry again */
	lla	t0, lab_arena
	ld	t1, H_CURRENT(t0)
	ld	t3, H_TABLE(t0)
	li	t4, ENTRY_SIZE
	mul	t4, t1, t4
	add	t3, t3, t4
	sd	a0, E_RET(t3)
	sd	sp, E_SP_AFTER(t3)
	sd	zero, E_FLAGS(t3)
	sd	s0, E_SAVED + 0 * 8(t3)
	sd	s1, E_SAVED + 1 * 8(t3)
	sd	s2, E_SAVED + 2 * 8(t3)
	sd	s3, E_SAVED + 3 * 8(t3)
	sd	s4, E_SAVED + 4 * 8(t3)
	sd	s5, E_SAVED + 5 * 8(t3)
	sd	s6, E_SAVED + 6 * 8(t3)
	sd	s7, E_SAVED + 7 * 8(t3)
	sd	s8, E_SAVED + 8 * 8(t3)
	sd	s9, E_SAVED + 9 * 8(t3)
	sd	s10, E_SAVED + 10 * 8(t3)
	sd	s11, E_SAVED + 11 * 8(t3)
	sd	gp, E_SAVED + 12 * 8(t3)
	sd	tp, E_SAVED + 13 * 8(t3)
	fmv.x.d	t4, fs0
	sd	t4, E_SAVED_FP + 0 * 8(t3)
	fmv.x.d	t4, fs1
	sd	t4, E_SAVED_FP + 1 * 8(t3)
	fmv.x.d	t4, fs2
	sd	t4, E_SAVED_FP + 2 * 8(t3)
	fmv.x.d	t4, fs3
	sd	t4, E_SAVED_FP + 3 * 8(t3)
	fmv.x.d	t4, fs4
	sd	t4, E_SAVED_FP + 4 * 8(t3)
	fmv.x.d	t4, fs5
	sd	t4, E_SAVED_FP + 5 * 8(t3)
	fmv.x.d	t4, fs6
	sd	t4, E_SAVED_FP + 6 * 8(t3)
	fmv.x.d	t4, fs7
	sd	t4, E_SAVED_FP + 7 * 8(t3)
	fmv.x.d	t4, fs8
	sd	t4, E_SAVED_FP + 8 * 8(t3)
	fmv.x.d	t4, fs9
	sd	t4, E_SAVED_FP + 9 * 8(t3)
	fmv.x.d	t4, fs10
	sd	t4, E_SAVED_FP + 10 * 8(t3)
	fmv.x.d	t4, fs11
	sd	t4, E_SAVED_FP + 11 * 8(t3)
	li	t4, 1
	sd	t4, E_STATUS(t3)
	addi	t1, t1, 1
	sd	t1, H_DONE(t0)
	lla	t4, lab_saved_sp	/* the driver's own sp, whatever the kernel did to it */
	ld	sp, 0(t4)
	j	.Lnext_call

.Lbatch_done:
	ld	ra, F_RA(sp)
	ld	s0, F_S(0)(sp)
	ld	s1, F_S(1)(sp)
	ld	s2, F_S(2)(sp)
	ld	s3, F_S(3)(sp)
	ld	s4, F_S(4)(sp)
	ld	s5, F_S(5)(sp)
	ld	s6, F_S(6)(sp)
	ld	s7, F_S(7)(sp)
	ld	s8, F_S(8)(sp)
	ld	s9, F_S(9)(sp)
	ld	s10, F_S(10)(sp)
	ld	s11, F_S(11)(sp)
	ld	gp, F_GP(sp)
	ld	tp, F_TP(sp)
	fld	fs0, F_FS(0)(sp)
	fld	fs1, F_FS(1)(sp)
	fld	fs2, F_FS(2)(sp)
	fld	fs3, F_FS(3)(sp)
	fld	fs4, F_FS(4)(sp)
	fld	fs5, F_FS(5)(sp)
	fld	fs6, F_FS(6)(sp)
	fld	fs7, F_FS(7)(sp)
	fld	fs8, F_FS(8)(sp)
	fld	fs9, F_FS(9)(sp)
	fld	fs10, F_FS(10)(sp)
	fld	fs11, F_FS(11)(sp)
	addi	sp, sp, FRAME
	ret
	.size	lab_batch, . - lab_batch

/* Unicorn runs lab_batch with ra = lab_unicorn_halt and stops there; never executed. */
	.globl	lab_unicorn_halt
	.type	lab_unicorn_halt, @function
	.p2align 2
lab_unicorn_halt:
	.4byte	0			/* all-zero word: an illegal instruction if ever reached */
	.size	lab_unicorn_halt, . - lab_unicorn_halt

	.globl	lab_syscalls_begin
lab_syscalls_begin:
/*
 * read_full(a0 = buf, a1 = len) -> a0 = bytes read (< len only at EOF or on an error).
 * write_full(a0 = buf, a1 = len): exit_group(4) if stdout fails.
 * Leaf helpers for _start and lab_fault; they use only a0-a2, a7, t0-t2.
 */
	.type	read_full, @function
	.p2align 2
read_full:
	mv	t0, a0
	mv	t1, a1
	li	t2, 0
1:	beq	t2, t1, 2f
	li	a0, 0			/* stdin */
	add	a1, t0, t2
	sub	a2, t1, t2
	li	a7, SYS_read
	ecall
	blez	a0, 2f			/* 0 = EOF, < 0 = error */
	add	t2, t2, a0
	j	1b
2:	mv	a0, t2
	ret
	.size	read_full, . - read_full

	.type	write_full, @function
	.p2align 2
write_full:
	mv	t0, a0
	mv	t1, a1
	li	t2, 0
1:	beq	t2, t1, 2f
	li	a0, 1			/* stdout */
	add	a1, t0, t2
	sub	a2, t1, t2
	li	a7, SYS_write
	ecall
	blez	a0, 3f
	add	t2, t2, a0
	j	1b
2:	ret
3:	li	a0, 4
	li	a7, SYS_exit_group
	ecall
	.size	write_full, . - write_full

/*
 * protect: apply the batch's protection table (header words 6, 7) with mprotect.
 * unprotect: make all of lab_arena readable and writable again (before the next read and
 * before any write of lab_arena to stdout). Both exit_group(6) if mprotect fails.
 * Leaf helpers; they use only a0-a2, a7, t0-t2.
 */
	.type	protect, @function
	.p2align 2
protect:
	lla	t0, lab_arena
	ld	t1, H_PROT_TABLE(t0)
	ld	t2, H_PROT_COUNT(t0)
1:	beqz	t2, 2f
	ld	a0, 0(t1)
	ld	a1, 8(t1)
	ld	a2, 16(t1)
	li	a7, SYS_mprotect
	ecall
	bnez	a0, 3f
	addi	t1, t1, 24
	addi	t2, t2, -1
	j	1b
2:	ret
3:	li	a0, 6
	li	a7, SYS_exit_group
	ecall
	.size	protect, . - protect

	.type	unprotect, @function
	.p2align 2
unprotect:
	lla	a0, lab_arena
	li	a1, ARENA_SIZE
	li	a2, PROT_RW
	li	a7, SYS_mprotect
	ecall
	bnez	a0, 3b
	ret
	.size	unprotect, . - unprotect

/*
 * _start: install the fault handler on an alternate stack, then loop:
 * read u64 len (EOF -> exit_group(0)); read len bytes into lab_arena; lab_batch;
 * write u64 tag = 0, u64 resp_len, lab_arena[0..resp_len].
 */
	.globl	_start
	.type	_start, @function
	.p2align 2
_start:
	lla	sp, lab_stack_top
	addi	sp, sp, -32

	/* sigaltstack({ss_sp = lab_sigstack, ss_flags = 0, ss_size = SIGSTK_SIZE}, NULL) */
	lla	t0, lab_sigstack
	sd	t0, 0(sp)
	sd	zero, 8(sp)
	li	t0, SIGSTK_SIZE
	sd	t0, 16(sp)
	mv	a0, sp
	li	a1, 0
	li	a7, SYS_sigaltstack
	ecall

	/* rt_sigaction(sig, {lab_fault, SA_SIGINFO | SA_ONSTACK, mask 0}, NULL, 8) */
	lla	t0, lab_fault
	sd	t0, 0(sp)
	li	t0, SA_SIGINFO | SA_ONSTACK
	sd	t0, 8(sp)
	sd	zero, 16(sp)
	/* SIGILL SIGTRAP SIGBUS SIGFPE SIGUSR1 (the host's "hang" poke) SIGSEGV SIGSYS */
	.irp	sig, 4, 5, 7, 8, 10, 11, 31
	li	a0, \sig
	mv	a1, sp
	li	a2, 0
	li	a3, 8
	li	a7, SYS_rt_sigaction
	ecall
	.endr

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

.Lio_loop:
	mv	a0, sp
	li	a1, 8
	call	read_full
	beqz	a0, .Lexit_ok		/* clean EOF between batches */
	li	t0, 8
	bne	a0, t0, .Lexit_proto
	ld	s0, 0(sp)		/* len */
	li	t0, ARENA_SIZE
	bgtu	s0, t0, .Lexit_proto
	lla	a0, lab_arena
	mv	a1, s0
	call	read_full
	bne	a0, s0, .Lexit_proto

	call	protect
	call	lab_batch
	call	unprotect

	lla	t0, lab_arena
	ld	s0, H_RESP_LEN(t0)
	li	t1, ARENA_SIZE
	bleu	s0, t1, 1f
	mv	s0, t1			/* never send past the arena */
1:	sd	zero, 0(sp)		/* tag = 0 */
	sd	s0, 8(sp)
	mv	a0, sp
	li	a1, 16
	call	write_full
	lla	a0, lab_arena
	mv	a1, s0
	call	write_full
	j	.Lio_loop

.Lexit_ok:
	li	a0, 0
	li	a7, SYS_exit_group
	ecall
.Lexit_proto:				/* short read or oversized batch */
	li	a0, 2
	li	a7, SYS_exit_group
	ecall
	.size	_start, . - _start

/*
 * lab_fault(a0 = signo, a1 = siginfo_t *, a2 = ucontext *), on lab_sigstack.
 * Writes u64 tag = 1, len = 32 + resp_len, signo, si_addr, pc, current, then
 * lab_arena[0..resp_len] (results of the calls completed before the fault), exit_group(3).
 * It never returns, so it may clobber any register (the kernel's poisoned ones included).
 */
	.type	lab_fault, @function
	.p2align 2
lab_fault:
	andi	sp, sp, -16
	addi	sp, sp, -48
	mv	s1, a0
	mv	s2, a1
	mv	s3, a2
	call	unprotect		/* guard pages must not stop the write below */
	mv	a0, s1
	mv	a1, s2
	mv	a2, s3
	lla	t0, lab_arena
	ld	s0, H_RESP_LEN(t0)
	li	t1, ARENA_SIZE
	bleu	s0, t1, 1f
	mv	s0, t1
1:	li	t1, 1
	sd	t1, 0(sp)		/* tag */
	addi	t1, s0, 32
	sd	t1, 8(sp)		/* len */
	sd	a0, 16(sp)		/* signo */
	ld	t1, SI_ADDR(a1)
	li	t2, 31			/* SIGSYS (qemu-user forwards a refused host call): */
	bne	a0, t2, 2f
	ld	t1, UC_A7(a2)		/* the guest's system-call number instead */
2:	sd	t1, 24(sp)		/* si_addr */
	ld	t1, UC_PC(a2)
	sd	t1, 32(sp)		/* pc */
	ld	t1, H_CURRENT(t0)
	sd	t1, 40(sp)		/* current */
	mv	a0, sp
	li	a1, 48
	call	write_full
	lla	a0, lab_arena
	mv	a1, s0
	call	write_full
	li	a0, 3
	li	a7, SYS_exit_group
	ecall
	.size	lab_fault, . - lab_fault
	.globl	lab_syscalls_end
lab_syscalls_end:

/*
 * .bss: driver-private words, the signal stack, the 1 MiB stack, and lab_arena last, so the
 * arena's end is the end of the image's last mapped page (driver.o is linked last).
 */
	.bss
	.p2align 4
lab_saved_sp:
	.zero	16
	.p2align 4
lab_sigstack:
	.zero	SIGSTK_SIZE
	.p2align 4
lab_stack:
	.zero	STACK_SIZE
	.globl	lab_stack_top
lab_stack_top:
	.p2align 12
	.globl	lab_arena
	.type	lab_arena, @object
lab_arena:
	.zero	ARENA_SIZE
	.size	lab_arena, ARENA_SIZE
