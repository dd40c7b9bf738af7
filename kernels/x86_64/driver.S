/*
 * kernel-lab guest driver, x86_64 (SysV x86-64 psABI).
 *
 * One image serves three backends (kernels/README.md):
 *   - Unicorn enters lab_batch directly with lab_unicorn_halt pushed as the return address;
 *   - qemu-x86_64 and native execution enter _start, which reads batches from stdin, runs
 *     lab_batch, and writes the results to stdout; a fault ends the process through
 *     lab_fault_handler, which reports it on stdout.
 *
 * System calls appear only in _start's I/O code and in the fault handler (and its
 * SA_RESTORER stub), all between lab_syscalls_begin and lab_syscalls_end; lab_batch runs under
 * Unicorn, where a syscall is an error.  On a Linux host _start asks for SIGSYS on any system
 * call from outside that range (syscall user dispatch, Linux 5.11; qemu-user says EINVAL).
 */
        .intel_syntax noprefix

/* ---- protocol constants (kernels/README.md, "Driver protocol") ---- */

/* lab_arena header, u64 words */
#define H_NCALLS        0x00
#define H_START         0x08
#define H_TABLE         0x10
#define H_RESP_LEN      0x18
#define H_CURRENT       0x20
#define H_DONE          0x28
#define H_PROT_TABLE    0x30    /* address of (addr, len, prot) triples, applied with mprotect */
#define H_PROT_COUNT    0x38

/* Callee-saved registers of the SysV x86-64 psABI (§3.2.1, Figure 3.4), in ABI order:
 * rbx, rbp, r12, r13, r14, r15. */
#define NSAVED          6
#define ENTRY_SIZE      ((16 + NSAVED) * 8)

/* call entry, u64 words */
#define E_FN            (0 * 8)
#define E_ARG0          (1 * 8)
#define E_ARG1          (2 * 8)
#define E_ARG2          (3 * 8)
#define E_ARG3          (4 * 8)
#define E_COPY_SRC      (5 * 8)
#define E_COPY_DST      (6 * 8)
#define E_COPY_LEN      (7 * 8)
#define E_SEED          (8 * 8)
#define E_RET           (9 * 8)
#define E_SP_BEFORE     (10 * 8)
#define E_SP_AFTER      (11 * 8)
#define E_FLAGS         (12 * 8)
#define E_STATUS        (13 * 8)
#define E_STACK         (14 * 8)        /* rsp for the call: the top of the guarded kernel stack */
#define E_SAVED         (16 * 8)

/* poison increment: t = seed; for each reg { t += K; reg = t } */
#define POISON_K        0x9E3779B97F4A7C15

#define ARENA_SIZE      (32 * 1024 * 1024)
#define STACK_SIZE      (1024 * 1024)
#define ALTSTACK_SIZE   (64 * 1024)

/* Linux x86_64 system call numbers and constants */
#define SYS_read        0
#define SYS_write       1
#define SYS_mprotect    10
#define SYS_prctl       157
#define PROT_RW         3
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#define SYS_rt_sigaction 13
#define SYS_rt_sigreturn 15
#define SYS_sigaltstack 131
#define SYS_exit_group  231
#define SYS_close       3
#define SYS_seccomp     317
#define PR_SET_NO_NEW_PRIVS 38
#define SECCOMP_SET_MODE_FILTER 1
#define EINTR           4
#define EBADF           9
#define SA_SIGINFO      0x00000004
#define SA_ONSTACK      0x08000000
#define SA_RESTORER     0x04000000      /* x86_64 kernels (and qemu-user) refuse to deliver
                                           a signal without a restorer */
#define SIGILL          4
#define SIGTRAP         5
#define SIGBUS          7
#define SIGFPE          8
#define SIGUSR1         10      /* the host's poke when a batch runs past its time budget */
#define SIGSEGV         11
#define SIGSYS          31

/* siginfo_t.si_addr (after si_signo, si_errno, si_code and padding); for SIGSYS the same
 * place holds si_call_addr, followed by the int si_syscall */
#define SI_ADDR         16
#define SI_SYSCALL      24
/* ucontext_t: uc_mcontext at 40 (after uc_flags, uc_link, uc_stack), gregs[REG_RIP = 16]
 * at 40 + 16*8 = 168.  Verified under qemu-x86_64 and natively. */
#define UC_RIP          168

/* exit codes of _start */
#define EXIT_OK         0
#define EXIT_TRUNCATED  2       /* EOF inside a frame */
#define EXIT_FAULT      3       /* the fault handler reported a fault */
#define EXIT_TOO_LONG   4       /* a batch longer than lab_arena */
#define EXIT_IO         5       /* read/write failed */
#define EXIT_MPROTECT   6       /* applying the protection table failed */
#define EXIT_SECCOMP    7       /* the host's seccomp allow-list could not be installed */

/* The native guest's seccomp allow-list arrives on this fd (lab/src/backend/confine.rs,
 * SECCOMP_FD) as struct sock_filter[], at most BPF_MAXINSNS (4096) instructions. */
#define LAB_SECCOMP_FD  9
#define BPF_MAX_BYTES   (4096 * 8)

        .text

/* ------------------------------------------------------------------------------------------
 * void lab_batch(void)
 *
 * Runs calls start..ncalls-1 of the table in lab_arena.  An ordinary psABI function: it saves
 * and restores its own callee-saved registers.  Between calls all of its state lives in
 * private .bss words (lab_drv_*), never in registers, because every callee-saved register is
 * poisoned before a call and the kernel may clobber every other one.
 * ---------------------------------------------------------------------------------------- */
        .globl  lab_batch
        .type   lab_batch, @function
        .p2align 4
lab_batch:
        push    rbx
        push    rbp
        push    r12
        push    r13
        push    r14
        push    r15
        sub     rsp, 8                  /* entry rsp = 8 mod 16; 6 pushes + 8 -> 16-aligned */
        cld

        lea     r12, [rip + lab_arena]
        mov     r13, [r12 + H_START]
        mov     [r12 + H_DONE], r13     /* nothing run yet in this entry */

.Lbatch_next:                           /* r12 = lab_arena, r13 = index of the next call */
        cmp     r13, [r12 + H_NCALLS]
        jae     .Lbatch_end
        mov     [r12 + H_CURRENT], r13
        imul    r14, r13, ENTRY_SIZE
        add     r14, [r12 + H_TABLE]    /* r14 = &entry[index] */
        mov     [rip + lab_drv_index], r13
        mov     [rip + lab_drv_entry], r14

        /* copy_len bytes from copy_src to copy_dst (memmove semantics) */
        mov     rcx, [r14 + E_COPY_LEN]
        test    rcx, rcx
        jz      .Lbatch_nocopy
        mov     rsi, [r14 + E_COPY_SRC]
        mov     rdi, [r14 + E_COPY_DST]
        mov     rax, rdi
        sub     rax, rsi
        cmp     rax, rcx                /* dst - src < len (unsigned): dst overlaps src's tail */
        jae     .Lbatch_fwd
        lea     rsi, [rsi + rcx - 1]
        lea     rdi, [rdi + rcx - 1]
        std
        rep     movsb
        cld
        jmp     .Lbatch_nocopy
.Lbatch_fwd:
        rep     movsb
.Lbatch_nocopy:
        mov     qword ptr [r14 + E_STATUS], 0
        mov     [rip + lab_drv_sp], rsp         /* lab_batch's frame, reloaded after the call */
        mov     rsp, [r14 + E_STACK]            /* the kernel runs on the guarded stack */
        mov     [r14 + E_SP_BEFORE], rsp        /* rsp before `call` pushes */

        mov     r11, r14
        mov     rax, [r11 + E_FN]
        mov     rdi, [r11 + E_ARG0]             /* SysV integer argument registers, in order */
        mov     rsi, [r11 + E_ARG1]
        mov     rdx, [r11 + E_ARG2]
        mov     rcx, [r11 + E_ARG3]
        mov     r10, [r11 + E_SEED]
        movabs  r9, POISON_K
        add     r10, r9                         /* poison, in ABI order */
        mov     rbx, r10
        add     r10, r9
        mov     rbp, r10
        add     r10, r9
        mov     r12, r10
        add     r10, r9
        mov     r13, r10
        add     r10, r9
        mov     r14, r10
        add     r10, r9
        mov     r15, r10
        call    rax                             /* rsp is 16-aligned here, DF clear */

        /* Only rsp, rax, the callee-saved registers and RFLAGS matter now; nothing below
         * changes RFLAGS before pushfq, nor the callee-saved registers before they are stored. */
        mov     [rip + lab_drv_ret], rax
        mov     [rip + lab_drv_sp_after], rsp
        mov     rsp, [rip + lab_drv_sp]         /* a broken rsp must not break the driver */
        pushfq
        pop     rax
        cld
        mov     rdx, [rip + lab_drv_entry]
        mov     [rdx + E_FLAGS], rax
        mov     [rdx + E_SAVED + 0 * 8], rbx
        mov     [rdx + E_SAVED + 1 * 8], rbp
        mov     [rdx + E_SAVED + 2 * 8], r12
        mov     [rdx + E_SAVED + 3 * 8], r13
        mov     [rdx + E_SAVED + 4 * 8], r14
        mov     [rdx + E_SAVED + 5 * 8], r15
        mov     rax, [rip + lab_drv_ret]
        mov     [rdx + E_RET], rax
        mov     rax, [rip + lab_drv_sp_after]
        mov     [rdx + E_SP_AFTER], rax
        mov     qword ptr [rdx + E_STATUS], 1

        lea     r12, [rip + lab_arena]
        mov     r13, [rip + lab_drv_index]
        add     r13, 1
        mov     [r12 + H_DONE], r13
        jmp     .Lbatch_next

.Lbatch_end:
        add     rsp, 8
        pop     r15
        pop     r14
        pop     r13
        pop     r12
        pop     rbp
        pop     rbx
        ret
        .size   lab_batch, . - lab_batch

/* The Unicorn backend pushes this address as lab_batch's return address and stops when the
 * pc reaches it.  Never executed; ud2 makes an accidental execution a loud SIGILL. */
        .globl  lab_unicorn_halt
        .type   lab_unicorn_halt, @function
lab_unicorn_halt:
        ud2
        .size   lab_unicorn_halt, . - lab_unicorn_halt

        .globl  lab_syscalls_begin
lab_syscalls_begin:
/* ------------------------------------------------------------------------------------------
 * _start: the qemu-user / native entry.  Frames (u64 little-endian):
 *   in:  len, then len bytes copied to lab_arena
 *   out: tag = 0, resp_len, lab_arena[0..resp_len]
 * ---------------------------------------------------------------------------------------- */
        .globl  _start
        .type   _start, @function
        .p2align 4
_start:
        lea     rsp, [rip + lab_stack_top]      /* same stack as under Unicorn */
        cld

        /* sigaltstack(&ss, NULL): faults are handled even when the kernel broke rsp */
        lea     rdi, [rip + lab_ss]
        lea     rax, [rip + lab_altstack]
        mov     [rdi], rax                      /* ss_sp */
        mov     dword ptr [rdi + 8], 0          /* ss_flags */
        mov     qword ptr [rdi + 16], ALTSTACK_SIZE  /* ss_size */
        xor     esi, esi
        mov     eax, SYS_sigaltstack
        syscall

        /* struct kernel_sigaction { handler, flags, restorer, mask } */
        lea     rdi, [rip + lab_sigact]
        lea     rax, [rip + lab_fault_handler]
        mov     [rdi], rax
        mov     qword ptr [rdi + 8], SA_SIGINFO | SA_ONSTACK | SA_RESTORER
        lea     rax, [rip + lab_sigreturn]
        mov     [rdi + 16], rax
        mov     qword ptr [rdi + 24], -1        /* block every other signal in the handler */

        lea     rbx, [rip + lab_signals]
.Lsig_loop:
        movzx   edi, byte ptr [rbx]
        test    edi, edi
        jz      .Lsig_done
        lea     rsi, [rip + lab_sigact]
        xor     edx, edx
        mov     r10d, 8                         /* sizeof(kernel sigset_t) */
        mov     eax, SYS_rt_sigaction
        syscall
        add     rbx, 1
        jmp     .Lsig_loop
.Lsig_done:

        /* prctl(PR_SET_SYSCALL_USER_DISPATCH, ON, begin, len, NULL): SIGSYS for a system call
         * from anywhere but this I/O code.  EINVAL under qemu-user: ignored. */
        mov     edi, PR_SET_SYSCALL_USER_DISPATCH
        mov     esi, PR_SYS_DISPATCH_ON
        lea     rdx, [rip + lab_syscalls_begin]
        lea     r10, [rip + lab_syscalls_end]
        sub     r10, rdx
        xor     r8d, r8d
        mov     eax, SYS_prctl
        syscall

        call    lab_seccomp_install             /* last set-up step: the allow-list */

.Lio_loop:
        lea     rsi, [rip + lab_io_hdr]
        mov     edx, 8
        call    .Lread_full
        test    rax, rax
        jz      .Lexit_ok                       /* EOF between frames: done */
        cmp     rax, 8
        jne     .Lexit_truncated
        mov     rdx, [rip + lab_io_hdr]
        cmp     rdx, ARENA_SIZE
        ja      .Lexit_too_long
        mov     rbx, rdx
        lea     rsi, [rip + lab_arena]
        call    .Lread_full
        cmp     rax, rbx
        jne     .Lexit_truncated

        call    .Lprotect
        call    lab_batch                       /* rsp 16-aligned at the call */
        call    .Lunprotect

        lea     rsi, [rip + lab_io_hdr]
        mov     rbx, [rip + lab_arena + H_RESP_LEN]
        mov     eax, ARENA_SIZE
        cmp     rbx, rax
        cmova   rbx, rax                        /* never send past the arena */
        mov     qword ptr [rsi], 0              /* tag = 0: batch done */
        mov     [rsi + 8], rbx
        mov     edx, 16
        call    .Lwrite_full
        lea     rsi, [rip + lab_arena]
        mov     rdx, rbx
        call    .Lwrite_full
        jmp     .Lio_loop

.Lexit_ok:
        mov     edi, EXIT_OK
        jmp     .Lexit
.Lexit_truncated:
        mov     edi, EXIT_TRUNCATED
        jmp     .Lexit
.Lexit_too_long:
        mov     edi, EXIT_TOO_LONG
        jmp     .Lexit
.Lexit_io:
        mov     edi, EXIT_IO
        jmp     .Lexit
.Lexit_mprotect:
        mov     edi, EXIT_MPROTECT
        jmp     .Lexit
.Lexit_seccomp:
        mov     edi, EXIT_SECCOMP
.Lexit:
        mov     eax, SYS_exit_group
        syscall
        ud2

/* .Lread_full(rsi = buf, rdx = count) -> rax = bytes read (< count only at EOF).
 * Retries on EINTR; any other error exits.  Clobbers rcx, r8, r9, r11, rdi. */
.Lread_full:
        mov     r8, rsi
        mov     r9, rdx
        xor     ecx, ecx
.Lread_more:
        cmp     rcx, r9
        jae     .Lread_ret
        push    rcx
        xor     edi, edi                        /* fd 0 */
        lea     rsi, [r8 + rcx]
        mov     rdx, r9
        sub     rdx, rcx
        mov     eax, SYS_read
        syscall
        pop     rcx
        cmp     rax, -EINTR
        je      .Lread_more
        test    rax, rax
        js      .Lexit_io
        jz      .Lread_ret                      /* EOF */
        add     rcx, rax
        jmp     .Lread_more
.Lread_ret:
        mov     rax, rcx
        ret

/* .Lwrite_full(rsi = buf, rdx = count): writes all of it to fd 1 or exits.  Shared with the
 * fault handler.  Clobbers rax, rcx, rdx, rsi, rdi, r8, r9, r11. */
.Lwrite_full:
        mov     r8, rsi
        mov     r9, rdx
        xor     ecx, ecx
.Lwrite_more:
        cmp     rcx, r9
        jae     .Lwrite_ret
        push    rcx
        mov     edi, 1                          /* fd 1 */
        lea     rsi, [r8 + rcx]
        mov     rdx, r9
        sub     rdx, rcx
        mov     eax, SYS_write
        syscall
        pop     rcx
        cmp     rax, -EINTR
        je      .Lwrite_more
        test    rax, rax
        jle     .Lexit_io
        add     rcx, rax
        jmp     .Lwrite_more
.Lwrite_ret:
        ret

/* .Lprotect: apply the batch's protection table (header words 6, 7) with mprotect.
 * .Lunprotect: make all of lab_arena readable and writable again (before the next read and
 * before lab_arena is written to stdout).  Exit on failure.  Clobber rax, rcx, rdx, rsi, rdi,
 * r8, r9, r11. */
.Lprotect:
        mov     r8, [rip + lab_arena + H_PROT_TABLE]
        mov     r9, [rip + lab_arena + H_PROT_COUNT]
.Lprotect_next:
        test    r9, r9
        jz      .Lprotect_ret
        mov     rdi, [r8]
        mov     rsi, [r8 + 8]
        mov     rdx, [r8 + 16]
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        add     r8, 24
        sub     r9, 1
        jmp     .Lprotect_next
.Lprotect_ret:
        ret
.Lunprotect:
        lea     rdi, [rip + lab_arena]
        mov     esi, ARENA_SIZE
        mov     edx, PROT_RW
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        ret

/* lab_seccomp_install: reads a BPF program from LAB_SECCOMP_FD to EOF and installs it with
 * prctl(PR_SET_NO_NEW_PRIVS) + seccomp(SECCOMP_SET_MODE_FILTER).  No such fd (qemu-user) or an
 * empty program: no filter.  A filter that was given but cannot be installed exits
 * EXIT_SECCOMP: the guest never runs unconfined by mistake.  Clobbers rax, rcx, rdx, rsi, rdi,
 * r8, r10, r11. */
lab_seccomp_install:
        xor     r8d, r8d                        /* bytes read so far */
.Lbpf_more:
        mov     edx, BPF_MAX_BYTES
        sub     rdx, r8
        jz      .Lexit_seccomp                  /* longer than BPF_MAXINSNS */
        mov     edi, LAB_SECCOMP_FD
        lea     rsi, [rip + lab_bpf]
        add     rsi, r8
        mov     eax, SYS_read
        syscall
        cmp     rax, -EINTR
        je      .Lbpf_more
        cmp     rax, -EBADF
        je      .Lbpf_ret                       /* no allow-list for this guest */
        test    rax, rax
        js      .Lexit_seccomp
        jz      .Lbpf_eof
        add     r8, rax
        jmp     .Lbpf_more
.Lbpf_eof:
        mov     edi, LAB_SECCOMP_FD
        mov     eax, SYS_close
        syscall
        test    r8, r8
        jz      .Lbpf_ret
        test    r8, 7
        jnz     .Lexit_seccomp                  /* not whole instructions */
        lea     rdx, [rip + lab_fprog]          /* struct sock_fprog { u16 len; filter * } */
        shr     r8, 3
        mov     word ptr [rdx], r8w
        lea     rax, [rip + lab_bpf]
        mov     [rdx + 8], rax
        mov     edi, PR_SET_NO_NEW_PRIVS
        mov     esi, 1
        xor     edx, edx
        xor     r10d, r10d
        xor     r8d, r8d
        mov     eax, SYS_prctl
        syscall
        test    rax, rax
        jnz     .Lexit_seccomp
        mov     edi, SECCOMP_SET_MODE_FILTER
        xor     esi, esi
        lea     rdx, [rip + lab_fprog]
        mov     eax, SYS_seccomp
        syscall
        test    rax, rax
        jnz     .Lexit_seccomp
.Lbpf_ret:
        ret
        .size   _start, . - _start

/* ------------------------------------------------------------------------------------------
 * lab_fault_handler(int signo, siginfo_t *si, ucontext_t *uc), SA_SIGINFO, on the altstack.
 * Writes: tag = 1, len = 32 + resp_len, signo, si_addr, pc, current, lab_arena[0..resp_len];
 * then exit_group(3).  It never returns, so it may use any register.
 * ---------------------------------------------------------------------------------------- */
        .type   lab_fault_handler, @function
        .p2align 4
lab_fault_handler:
        cld
        and     rsp, -16
        mov     r13, rdi
        mov     r14, rsi
        mov     r15, rdx
        call    .Lunprotect                     /* guard pages must not stop the write below */
        mov     rdi, r13
        mov     rsi, r14
        mov     rdx, r15
        lea     r12, [rip + lab_fault_msg]
        mov     rbx, [rip + lab_arena + H_RESP_LEN]
        mov     eax, ARENA_SIZE
        cmp     rbx, rax
        cmova   rbx, rax
        mov     qword ptr [r12], 1              /* tag = 1: fault */
        lea     rax, [rbx + 32]
        mov     [r12 + 8], rax
        movsxd  rax, edi
        mov     [r12 + 16], rax                 /* signo */
        mov     rax, [rsi + SI_ADDR]
        cmp     edi, SIGSYS
        jne     1f
        movsxd  rax, dword ptr [rsi + SI_SYSCALL]       /* SIGSYS: the call's number instead */
1:      mov     [r12 + 24], rax                 /* si_addr */
        mov     rax, [rdx + UC_RIP]
        mov     [r12 + 32], rax                 /* pc of the faulting instruction */
        mov     rax, [rip + lab_arena + H_CURRENT]
        mov     [r12 + 40], rax                 /* current */
        mov     rsi, r12
        mov     edx, 48
        call    .Lwrite_full
        lea     rsi, [rip + lab_arena]
        mov     rdx, rbx
        call    .Lwrite_full
        mov     edi, EXIT_FAULT
        mov     eax, SYS_exit_group
        syscall
        ud2
        .size   lab_fault_handler, . - lab_fault_handler

/* SA_RESTORER: rt_sigreturn.  Required for delivery on x86_64; never reached, since the
 * handler exits. */
        .type   lab_sigreturn, @function
lab_sigreturn:
        mov     eax, SYS_rt_sigreturn
        syscall
        ud2
        .size   lab_sigreturn, . - lab_sigreturn
        .globl  lab_syscalls_end
lab_syscalls_end:

        .section .rodata
lab_signals:
        .byte   SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGTRAP, SIGSYS, SIGUSR1, 0

/* ------------------------------------------------------------------------------------------
 * .bss: private words, stacks, and lab_arena LAST (its end is the end of the image).
 * ---------------------------------------------------------------------------------------- */
        .bss
        .p2align 4
lab_drv_sp:             .zero 8         /* lab_batch's rsp at the call */
lab_drv_index:          .zero 8         /* index of the call in flight */
lab_drv_entry:          .zero 8         /* its entry address */
lab_drv_ret:            .zero 8         /* rax after the return */
lab_drv_sp_after:       .zero 8         /* rsp after the return */
lab_io_hdr:             .zero 16        /* framing words of _start */
lab_fault_msg:          .zero 48        /* tag, len, signo, si_addr, pc, current */
lab_ss:                 .zero 24        /* stack_t */
lab_sigact:             .zero 32        /* struct kernel_sigaction */
lab_fprog:              .zero 16        /* struct sock_fprog for lab_seccomp_install */
lab_bpf:                .zero BPF_MAX_BYTES

        .p2align 4
lab_altstack:           .zero ALTSTACK_SIZE

        .p2align 4
        .globl  lab_stack_bottom
lab_stack_bottom:       .zero STACK_SIZE
        .globl  lab_stack_top
lab_stack_top:                          /* 16-aligned: the stack's size is a multiple of 16 */

        .p2align 12
        .globl  lab_arena
        .type   lab_arena, @object
lab_arena:              .zero ARENA_SIZE
        .size   lab_arena, ARENA_SIZE
