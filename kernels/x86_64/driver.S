/*
 * kernel-lab guest driver, x86_64 (SysV x86-64 psABI).
 *
 * One image serves three backends (kernels/README.md):
 *   - Unicorn enters lab_batch directly with lab_batch_return pushed as the return address,
 *     the callee-saved registers zero and the private words the request loop keeps written as
 *     a process guest holds them (issue 28);
 *   - qemu-x86_64 and native execution enter _start, which maps the host's shared arena over
 *     lab_arena, then answers request tokens (fd 4) with reply tokens (fd 5); a fault goes
 *     through lab_fault_handler, which sends a fault reply and resumes the request loop.
 *
 * Every protocol value (offsets, sizes, fds, tokens, exit codes, the poison step, the saved
 * registers) comes from lab_protocol.h, generated from lab/src/protocol.rs.
 *
 * System calls appear only in _start's I/O code and in the fault handler (and its
 * SA_RESTORER stub), all between lab_syscalls_begin and lab_syscalls_end; lab_batch runs under
 * Unicorn, where a syscall is an error.  On a Linux host _start asks for SIGSYS on any system
 * call from outside that range (syscall user dispatch, Linux 5.11; qemu-user says EINVAL).
 */
#include "lab_protocol.h"

        .intel_syntax noprefix

/* Linux x86_64 system call numbers and constants (arch/x86/entry/syscalls/syscall_64.tbl) */
#define SYS_read        0
#define SYS_write       1
#define SYS_mmap        9
#define SYS_mprotect    10
#define SYS_getppid     110
#define SYS_rt_sigaction 13
#define SYS_rt_sigreturn 15
#define SYS_rt_sigprocmask 14
#define SYS_clone       56
#define SYS_wait4       61
#define SYS_sigaltstack 131
#define SYS_prctl       157
#define SYS_exit_group  231
#define SYS_close       3
#define SYS_seccomp     317
#define PR_SET_NO_NEW_PRIVS 38
#define PR_SET_PDEATHSIG 1
#define SIGKILL         9
#define SIGCHLD         17
#define SIG_BLOCK       0
#define SIG_UNBLOCK     1
#define SIGUSR1_BIT     (1 << (10 - 1))  /* SIGUSR1 in a kernel sigset_t */
#define SECCOMP_SET_MODE_FILTER 1
#define EBADF           9
#define BPF_MAXINSNS    4096            /* the kernel's limit on a filter's length */
#define BPF_BUF         (8 + 2 * BPF_MAXINSNS * 8)  /* a length word and two filters */
#define PROT_READ       1
#define PROT_RW         3
#define MAP_SHARED      0x01
#define MAP_FIXED       0x10
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#define EINTR           4
#define SA_SIGINFO      0x00000004
#define SA_ONSTACK      0x08000000
#define SA_RESTORER     0x04000000      /* x86_64 kernels (and qemu-user) refuse to deliver
                                           a signal without a restorer */

/* siginfo_t.si_addr (after si_signo, si_errno, si_code and padding) */
#define SI_ADDR         16
#define SI_SYSCALL      24              /* SIGSYS: the int si_syscall after si_call_addr */
/* ucontext_t: uc_mcontext at 40 (after uc_flags, uc_link, uc_stack), gregs[REG_RIP = 16]
 * at 40 + 16*8 = 168.  Verified under qemu-x86_64 and natively. */
#define UC_GREGS        40              /* uc_mcontext.gregs[0] = REG_R8 */
#define UC_RIP          168
#define UC_RSP          (UC_RIP - 8)    /* gregs[REG_RSP] */
#define UC_EFL          (UC_RIP + 8)    /* gregs[REG_EFL] */
#define UC_RDI          (UC_GREGS + 8 * 8)  /* gregs[REG_RDI] */

/* lab_batch's frame: the integer callee-saved registers, padded so rsp is 16-aligned
 * (entry rsp = 8 mod 16). */
#define FRAME           (8 * (LAB_NSAVED_GPRS | 1))

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
        sub     rsp, FRAME
        .set    lab_k, 0
        .irp    reg, LAB_SAVED_GPRS
        mov     [rsp + 8 * lab_k], \reg
        .set    lab_k, lab_k + 1
        .endr
        .if     FRAME > 8 * LAB_NSAVED_GPRS
        mov     qword ptr [rsp + 8 * LAB_NSAVED_GPRS], 0  /* the pad: else what the loop's
                                                   last call left there (issue 28) */
        .endif
        cld

        lea     r12, [rip + lab_arena]
        mov     r13, [r12 + LAB_H_START]
        mov     [r12 + LAB_H_DONE], r13 /* nothing run yet in this entry */

.Lbatch_next:                           /* r12 = lab_arena, r13 = index of the next call */
        cmp     r13, [r12 + LAB_H_NCALLS]
        jae     .Lbatch_end
        mov     [r12 + LAB_H_CURRENT], r13
        imul    r14, r13, LAB_ENTRY_SIZE
        add     r14, [r12 + LAB_H_TABLE]        /* r14 = &entry[index] */
        mov     [rip + lab_drv_index], r13
        mov     [rip + lab_drv_entry], r14

        /* copy_len bytes from copy_src to copy_dst (memmove semantics) */
        mov     rcx, [r14 + LAB_E_COPY_LEN]
        test    rcx, rcx
        jz      .Lbatch_nocopy
        mov     rsi, [r14 + LAB_E_COPY_SRC]
        mov     rdi, [r14 + LAB_E_COPY_DST]
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
        mov     qword ptr [r14 + LAB_E_STATUS], 0
        mov     [rip + lab_drv_sp], rsp         /* lab_batch's frame, reloaded after the call */
        mov     rsp, [r14 + LAB_E_STACK]        /* the kernel runs on the guarded stack */
        mov     [r14 + LAB_E_SP_BEFORE], rsp    /* rsp before `call` pushes */

        mov     r11, r14
        mov     rax, [r11 + LAB_E_FN]
        mov     rdi, [r11 + LAB_E_ARG0]         /* SysV integer argument registers, in order */
        mov     rsi, [r11 + LAB_E_ARG1]
        mov     rdx, [r11 + LAB_E_ARG2]
        mov     rcx, [r11 + LAB_E_ARG3]
        mov     r10, [r11 + LAB_E_SEED]
        /* FP control poison (lab/src/abi.rs): MXCSR from bits 0-31, the x87 CW from 32-47 */
        mov     dword ptr [rip + lab_drv_fpctl], (LAB_FPCTL_POISON & 0xffffffff)
        mov     dword ptr [rip + lab_drv_fpctl + 4], (LAB_FPCTL_POISON >> 32)
        ldmxcsr [rip + lab_drv_fpctl]
        fldcw   [rip + lab_drv_fpctl + 4]
        movabs  r9, LAB_POISON_STEP
        .irp    reg, LAB_SAVED_GPRS             /* poison, in ABI order */
        add     r10, r9
        mov     \reg, r10
        .endr
        xor     r8d, r8d                        /* else what _start or Unicorn left: a tell */
        call    rax                             /* rsp is 16-aligned here, DF clear */

        /* Only rsp, rax, the callee-saved registers and RFLAGS matter now; nothing below
         * changes RFLAGS before pushfq, nor the callee-saved registers before they are stored. */
        mov     [rip + lab_drv_ret], rax
        mov     [rip + lab_drv_sp_after], rsp
        mov     rsp, [rip + lab_drv_sp]         /* a broken rsp must not break the driver */
        pushfq
        pop     rax
        mov     qword ptr [rsp - 8], 0          /* no RFLAGS below the frame for the next call */
        cld
        mov     rdx, [rip + lab_drv_entry]
        mov     [rdx + LAB_E_FLAGS], rax
        mov     qword ptr [rdx + LAB_E_FPCTL], 0
        stmxcsr [rdx + LAB_E_FPCTL]             /* MXCSR in bits 0-31 */
        fnstcw  [rdx + LAB_E_FPCTL + 4]         /* the x87 control word in bits 32-47 */
        mov     dword ptr [rip + lab_drv_fpctl], (LAB_FPCTL_DEFAULT & 0xffffffff)
        mov     dword ptr [rip + lab_drv_fpctl + 4], (LAB_FPCTL_DEFAULT >> 32)
        ldmxcsr [rip + lab_drv_fpctl]
        fldcw   [rip + lab_drv_fpctl + 4]
        .set    lab_k, 0
        .irp    reg, LAB_SAVED_GPRS
        mov     [rdx + LAB_E_SAVED + 8 * lab_k], \reg
        .set    lab_k, lab_k + 1
        .endr
        mov     rax, [rip + lab_drv_ret]
        mov     [rdx + LAB_E_RET], rax
        mov     rax, [rip + lab_drv_sp_after]
        mov     [rdx + LAB_E_SP_AFTER], rax
        mov     qword ptr [rdx + LAB_E_STATUS], 1
        xor     eax, eax                        /* the next call must not find this one's */
        mov     [rip + lab_drv_ret], rax        /* (a native batch child's first call finds */
        mov     [rip + lab_drv_sp_after], rax   /* zeros: its parent never ran lab_batch) */

        lea     r12, [rip + lab_arena]
        mov     r13, [rip + lab_drv_index]
        add     r13, 1
        mov     [r12 + LAB_H_DONE], r13
        jmp     .Lbatch_next

.Lbatch_end:
        .set    lab_k, 0
        .irp    reg, LAB_SAVED_GPRS
        mov     \reg, [rsp + 8 * lab_k]
        .set    lab_k, lab_k + 1
        .endr
        add     rsp, FRAME
        ret
        .size   lab_batch, . - lab_batch

/* Part of the image contract (kernels/README.md); the Unicorn backend returns to
 * lab_batch_return instead.  Never executed; ud2 makes an accidental execution a loud SIGILL. */
        .globl  lab_unicorn_halt
        .type   lab_unicorn_halt, @function
lab_unicorn_halt:
        ud2
        .size   lab_unicorn_halt, . - lab_unicorn_halt

        .globl  lab_syscalls_begin
lab_syscalls_begin:
/* ------------------------------------------------------------------------------------------
 * _start: the qemu-user / native entry (kernels/README.md, "_start I/O loop").
 *   map the shared arena (fd LAB_FD_ARENA) over lab_arena; then for each request token
 *   (magic, seq, sum_off, sum_len) on fd LAB_FD_REQUEST: protect (unless the table is in
 *   force already), lab_batch, and send the reply token (magic, seq, kind = done, checksum, 0, 0, 0, 0) on fd LAB_FD_REPLY.
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
        mov     qword ptr [rdi + 16], LAB_ALTSTACK_SIZE  /* ss_size */
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
        .irp    sig, LAB_SIGNALS
        mov     edi, \sig
        lea     rsi, [rip + lab_sigact]
        xor     edx, edx
        mov     r10d, 8                         /* sizeof(kernel sigset_t) */
        mov     eax, SYS_rt_sigaction
        syscall
        .endr
        /* lab_ss and lab_sigact were only the calls' arguments: zero, as Unicorn has them */
        lea     rdi, [rip + lab_ss]
        mov     ecx, (24 + 32) / 8                   /* lab_ss, lab_sigact */
        xor     eax, eax
        rep     stosq

        /* mmap(lab_arena, size, RW, MAP_SHARED | MAP_FIXED, LAB_FD_ARENA, 0): the host's view */
        lea     rdi, [rip + lab_arena]
        mov     esi, LAB_ARENA_SIZE
        mov     edx, PROT_RW
        mov     r10d, MAP_SHARED | MAP_FIXED
        mov     r8d, LAB_FD_ARENA
        xor     r9d, r9d
        mov     eax, SYS_mmap
        syscall
        lea     rdi, [rip + lab_arena]
        cmp     rax, rdi
        jne     .Lexit_mmap

        call    .Ldispatch_on

        call    lab_seccomp_install             /* last set-up step: the allow-list */

.Lio_loop:
        mov     [rip + lab_loop_sp], rsp        /* where the fault handler resumes the loop */
        lea     rsi, [rip + lab_io_req]
        mov     edx, LAB_REQUEST_SIZE
        call    .Lread_full
        test    rax, rax
        jz      .Lexit_ok                       /* EOF between tokens: done */
        cmp     rax, LAB_REQUEST_SIZE
        jne     .Lexit_truncated
        lea     rsi, [rip + lab_io_req]
        movabs  rax, LAB_REQUEST_MAGIC
        cmp     rax, [rsi + LAB_RQ_MAGIC]
        jne     .Lexit_protocol
        mov     rax, [rip + lab_io_seq]
        cmp     rax, [rsi + LAB_RQ_SEQ]
        jne     .Lexit_protocol
        mov     rax, [rsi + LAB_RQ_SUM_OFF]     /* the checksum range must lie in the arena */
        mov     rcx, [rsi + LAB_RQ_SUM_LEN]
        mov     rdx, rax
        or      rdx, rcx
        test    edx, 7
        jnz     .Lexit_protocol
        mov     edx, LAB_ARENA_SIZE
        cmp     rax, rdx
        ja      .Lexit_protocol
        sub     rdx, rax
        cmp     rcx, rdx
        ja      .Lexit_protocol
        mov     [rip + lab_io_sum_off], rax
        mov     [rip + lab_io_sum_len], rcx

        call    .Lprotect
        cmp     qword ptr [rip + lab_fprog2], 0
        je      .Lbatch_here
        call    .Lbatch_child                   /* returns in the parent once the child replied */
        add     qword ptr [rip + lab_io_seq], 1
        jmp     .Lio_loop
.Lbatch_here:
        call    .Lbatch_clean
        call    lab_batch                       /* rsp = lab_stack_top here, 16-aligned */
/* lab_batch's return address, at lab_stack_top - 8, in every process (a batch child comes here
 * too) and under Unicorn, which stops here: the same top word of the driver's stack. */
        .globl  lab_batch_return
lab_batch_return:
        call    .Lcheck_handlers                /* edi = a signal whose handler is not ours, rsi = it */
        lea     rax, [rip + lab_io_rep]
        mov     [rax + LAB_RP_SIGNO], rdi
        mov     [rax + LAB_RP_SI_ADDR], rsi
        mov     ecx, LAB_KIND_DONE
        mov     edx, LAB_KIND_HANDLER
        test    edi, edi
        cmovnz  ecx, edx
        mov     [rax + LAB_RP_KIND], rcx
        call    .Lchecksum
        lea     rsi, [rip + lab_io_rep]
        mov     [rsi + LAB_RP_SUM], rax
        call    .Lsend_reply
        cmp     byte ptr [rip + lab_in_child], 0
        jne     .Lchild_replied                 /* a batch child ends after its reply */
        add     qword ptr [rip + lab_io_seq], 1
        jmp     .Lio_loop

/* The fault handler resumes the loop here, off the altstack, with rdi = the lowest altstack
 * address it may have used: the signal's frame (the kernel's registers) and the handler's own
 * words lie between it and the altstack's top, and would stay there for the next batch to read.
 * Only that part is cleared (the whole 64 KiB cost 11 us of CPU per fault under qemu-user). */
.Lfault_resume:
        lea     rcx, [rip + lab_altstack]
        cmp     rdi, rcx
        cmovb   rdi, rcx
        lea     rcx, [rip + lab_altstack + LAB_ALTSTACK_SIZE]
        cmp     rdi, rcx
        cmova   rdi, rcx
        and     rdi, -8
        sub     rcx, rdi
        shr     rcx, 3
        xor     eax, eax
        rep     stosq
        jmp     .Lio_loop

.Lexit_ok:
        mov     edi, LAB_EXIT_OK
        jmp     .Lexit
.Lexit_truncated:
        mov     edi, LAB_EXIT_TRUNCATED
        jmp     .Lexit
.Lexit_protocol:
        mov     edi, LAB_EXIT_PROTOCOL
        jmp     .Lexit
.Lexit_io:
        mov     edi, LAB_EXIT_IO
        jmp     .Lexit
.Lexit_mprotect:
        mov     edi, LAB_EXIT_MPROTECT
        jmp     .Lexit
.Lexit_seccomp:
        mov     edi, LAB_EXIT_SECCOMP
        jmp     .Lexit
.Lexit_mmap:
        mov     edi, LAB_EXIT_MMAP
        jmp     .Lexit
.Lexit_child:
        mov     edi, LAB_EXIT_CHILD
.Lexit:
        mov     eax, SYS_exit_group
        syscall
        ud2

/* .Lbatch_child: runs the batch in a child process (native guests with a batch filter): the
 * protections are laid by this process (.Lprotect) and inherited through fork; the child
 * installs the batch filter (no mprotect, mmap, sigaction...: confine.rs, batch_filter), runs
 * lab_batch and sends the reply, so kernel code never runs where a protection can change.  The
 * parent waits: a child that exits LAB_EXIT_REPLIED replied (done or fault); a child that
 * exits with another code (the kernel's exit_group) ends the parent with that code, one
 * killed by a signal with LAB_EXIT_CHILD, closing the reply stream.  Entered with rsp = 8 mod 16.
 * Clobbers every caller-saved register. */
.Lbatch_child:
        mov     edi, SIGCHLD                    /* clone(SIGCHLD, 0, 0, 0, 0): a plain fork */
        xor     esi, esi
        xor     edx, edx
        xor     r10d, r10d
        xor     r8d, r8d
        mov     eax, SYS_clone
        syscall
        test    rax, rax
        js      .Lexit_child
        jz      .Lin_child
        mov     [rip + lab_child_pid], rax
.Lwait_child:
        mov     rdi, [rip + lab_child_pid]
        lea     rsi, [rip + lab_wstatus]
        xor     edx, edx
        xor     r10d, r10d
        mov     eax, SYS_wait4
        syscall
        cmp     rax, -EINTR
        je      .Lwait_child
        test    rax, rax
        js      .Lexit_child
        mov     edi, [rip + lab_wstatus]
        cmp     edi, LAB_EXIT_REPLIED << 8      /* WIFEXITED with that code */
        je      .Lchild_ok
        test    edi, 0x7f
        jnz     .Lexit_child                    /* killed by a signal */
        shr     edi, 8                          /* exited itself: the guest ends with its code */
        jmp     .Lexit
.Lchild_ok:
        ret
.Lin_child:
        mov     byte ptr [rip + lab_in_child], 1
        mov     edi, SIG_UNBLOCK                /* the host's poke reaches the child only */
        lea     rsi, [rip + lab_usr1_set]
        xor     edx, edx
        mov     r10d, 8
        mov     eax, SYS_rt_sigprocmask
        syscall
        mov     edi, PR_SET_PDEATHSIG           /* never outlive the guest (cleared by fork) */
        mov     esi, SIGKILL
        xor     edx, edx
        xor     r10d, r10d
        xor     r8d, r8d
        mov     eax, SYS_prctl
        syscall
        call    .Ldispatch_on                   /* not inherited through fork */
        mov     edi, SECCOMP_SET_MODE_FILTER
        xor     esi, esi
        lea     rdx, [rip + lab_fprog2]
        mov     eax, SYS_seccomp
        syscall
        test    rax, rax
        jnz     .Lexit_seccomp
        /* The filters and the parent's words: the kernel must find what a qemu-user guest
         * holds there (zeros); lab_in_child stays (issue 28, docs/threat-model.md). */
        lea     rdi, [rip + lab_fprog]
        mov     ecx, (16 + 16 + 8 + 8 + 8) / 8       /* lab_fprog .. lab_wstatus */
        xor     eax, eax
        rep     stosq
        lea     rdi, [rip + lab_bpf]
        mov     ecx, BPF_BUF / 8
        rep     stosq
        /* The loop's own call of lab_batch, at the loop's depth (the child never returns to
         * the loop): the driver's stack as a qemu-user guest and Unicorn have it.  Its handler
         * check is skipped (an allow-list is installed); after the reply it ends here. */
        lea     rsp, [rip + lab_stack_top]
        jmp     .Lbatch_here
.Lchild_replied:
        mov     edi, LAB_EXIT_REPLIED
        mov     eax, SYS_exit_group
        syscall
        ud2

/* .Lbatch_clean: what lab_batch and the kernel find of the driver is the same on every
 * backend (issue 28): zero the request and reply words (the reply is written after the batch,
 * lab_io_sum holds the request's range) and .Lcheck_handlers' result, and every callee-saved
 * register (lab_batch saves them in its frame; after a fault they are the kernel's), as
 * Unicorn has them.  Clobbers rax, rcx, rdi and the callee-saved registers. */
.Lbatch_clean:
        lea     rdi, [rip + lab_io_req]
        mov     ecx, (LAB_REQUEST_SIZE + LAB_REPLY_SIZE + 24 + 32 + 32) / 8  /* .. lab_oldact */
        xor     eax, eax
        rep     stosq
        .irp    reg, LAB_SAVED_GPRS
        xor     \reg, \reg
        .endr
        ret

/* .Ldispatch_on: prctl(PR_SET_SYSCALL_USER_DISPATCH, ON, begin, len, NULL): SIGSYS for a
 * system call from anywhere but this I/O code.  EINVAL under qemu-user: ignored.
 * Clobbers rax, rcx, rdx, rsi, rdi, r8, r10, r11. */
.Ldispatch_on:
        mov     edi, PR_SET_SYSCALL_USER_DISPATCH
        mov     esi, PR_SYS_DISPATCH_ON
        lea     rdx, [rip + lab_syscalls_begin]
        lea     r10, [rip + lab_syscalls_end]
        sub     r10, rdx
        xor     r8d, r8d
        mov     eax, SYS_prctl
        syscall
        ret

/* .Lread_full(rsi = buf, rdx = count) -> rax = bytes read from LAB_FD_REQUEST (< count only
 * at EOF).  Retries on EINTR; any other error exits.  Clobbers rcx, rdi, r8, r9, r11. */
.Lread_full:
        mov     r8, rsi
        mov     r9, rdx
        xor     ecx, ecx
.Lread_more:
        cmp     rcx, r9
        jae     .Lread_ret
        push    rcx
        mov     edi, LAB_FD_REQUEST
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

/* .Lsend_reply: fills magic and seq of lab_io_rep (kind, sum and the fault words are the
 * caller's) and writes all of it to LAB_FD_REPLY, retrying on EINTR, or exits.  Shared with
 * the fault handler.  Clobbers rax, rcx, rdx, rsi, rdi, r8, r9, r11. */
.Lsend_reply:
        lea     r8, [rip + lab_io_rep]
        movabs  rax, LAB_REPLY_MAGIC
        mov     [r8 + LAB_RP_MAGIC], rax
        mov     rax, [rip + lab_io_seq]
        mov     [r8 + LAB_RP_SEQ], rax
        mov     r9d, LAB_REPLY_SIZE
        xor     ecx, ecx
.Lwrite_more:
        cmp     rcx, r9
        jae     .Lwrite_ret
        push    rcx
        mov     edi, LAB_FD_REPLY
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

/* .Lchecksum -> rax = FNV-1a over the u64 words of lab_arena[sum_off, sum_off + sum_len)
 * (lab_protocol.h: h = (h ^ w) * prime).  Clobbers rcx, rsi, r8. */
.Lchecksum:
        lea     rsi, [rip + lab_arena]
        add     rsi, [rip + lab_io_sum_off]
        mov     rcx, [rip + lab_io_sum_len]
        shr     rcx, 3
        movabs  rax, LAB_FNV_OFFSET
        movabs  r8, LAB_FNV_PRIME
.Lchecksum_word:
        test    rcx, rcx
        jz      .Lchecksum_ret
        xor     rax, [rsi]
        imul    rax, r8
        add     rsi, 8
        sub     rcx, 1
        jmp     .Lchecksum_word
.Lchecksum_ret:
        ret

/* .Lsum_upto(rax = current): a fault reply's checksum range ends with entry `current` of the
 * call table (the calls after it did not run in this entry): lab_io_sum_len shrinks to end
 * there (rounded down to 8 bytes) when that is shorter.  The host computes the same from the
 * reply's `current` and the header's `table`, so a kernel that faults on every call costs a
 * checksum of the entries it ran, not of the whole table.  Clobbers rax, rcx. */
.Lsum_upto:
        add     rax, 1
        imul    rax, rax, LAB_ENTRY_SIZE
        add     rax, [rip + lab_arena + LAB_H_TABLE]
        lea     rcx, [rip + lab_arena]
        sub     rax, rcx                        /* offset of the end of entry `current` */
        sub     rax, [rip + lab_io_sum_off]
        and     rax, -8
        cmp     rax, [rip + lab_io_sum_len]
        jae     1f                              /* not shorter (or before sum_off): unchanged */
        mov     [rip + lab_io_sum_len], rax
1:      ret

/* .Lprotect: put the batch's protection table in force.  lab_prot_id holds the id of the
 * table in force (LAB_H_PROT_ID of the request that put it there; 0 = none known).  When it
 * is the request's LAB_H_PROT_BASE, the host's delta entries (LAB_H_DELTA_TABLE,
 * LAB_H_DELTA_COUNT: addr, len, prot, computed from the two tables) are applied, one mprotect
 * each: none for a resumed entry of the same batch (the fault handler leaves the pages as they
 * are), few for a batch laid out like the last one.  Otherwise the whole table: all of
 * lab_arena readable and writable again (one mprotect); then one mprotect (read-only) per span
 * of adjacent entries that are read-only or guards and hold a read-only one (the read-only
 * buffers and the guards between them); then one mprotect per run of adjacent entries with the
 * same prot, but for read-only runs (done): the guards inside the spans cost one call each,
 * their read-only pages none.  The id is cleared before the first change and set after the
 * last, so a poke (SIGUSR1) in between leaves it clear.  Then one getppid, the marker that
 * ends the driver's protection changes for the host's witness under qemu-user
 * (lab/src/backend/process/witness.rs): any later one is kernel code's.  Exit on failure.
 * Clobbers rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11. */
.Lprotect:
        lea     r10, [rip + lab_prot_id]
        mov     rax, [r10]                      /* the id in force */
        mov     qword ptr [r10], 0              /* none until this table is */
        test    rax, rax
        jz      .Lprotect_apply
        cmp     rax, [rip + lab_arena + LAB_H_PROT_BASE]
        jne     .Lprotect_apply
        mov     r8, [rip + lab_arena + LAB_H_DELTA_TABLE]
        mov     r9, [rip + lab_arena + LAB_H_DELTA_COUNT]
.Lprotect_delta:                                /* r8 = next delta entry, r9 = entries left */
        test    r9, r9
        jz      .Lprotect_done
        mov     rdi, [r8]
        mov     rsi, [r8 + 8]
        mov     rdx, [r8 + 16]
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        add     r8, LAB_PROT_ENTRY_SIZE
        sub     r9, 1
        jmp     .Lprotect_delta
.Lprotect_apply:
        mov     r8, [rip + lab_arena + LAB_H_PROT_TABLE]
        mov     r9, [rip + lab_arena + LAB_H_PROT_COUNT]
        call    .Lunprotect                     /* keeps r8, r9, r10 */
.Lprotect_ro:                                   /* r8 = next entry, r9 = entries left */
        test    r9, r9
        jz      .Lprotect_ro_done
        mov     r11, [r8 + 16]                  /* r11 != 0: the span holds a read-only entry */
        cmp     r11, PROT_READ
        ja      .Lprotect_ro_skip               /* neither read-only nor a guard */
        mov     rdi, [r8]
        mov     rsi, [r8 + 8]
.Lprotect_ro_grow:                              /* extend the span over adjacent R / guard entries */
        add     r8, LAB_PROT_ENTRY_SIZE
        sub     r9, 1
        jz      .Lprotect_ro_call
        lea     rax, [rdi + rsi]
        cmp     rax, [r8]
        jne     .Lprotect_ro_call
        mov     rax, [r8 + 16]
        cmp     rax, PROT_READ
        ja      .Lprotect_ro_call
        or      r11, rax
        add     rsi, [r8 + 8]
        jmp     .Lprotect_ro_grow
.Lprotect_ro_call:
        test    r11, r11
        jz      .Lprotect_ro                    /* guards only: the next pass */
        mov     edx, PROT_READ
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        jmp     .Lprotect_ro
.Lprotect_ro_skip:
        add     r8, LAB_PROT_ENTRY_SIZE
        sub     r9, 1
        jmp     .Lprotect_ro
.Lprotect_ro_done:
        mov     r8, [rip + lab_arena + LAB_H_PROT_TABLE]
        mov     r9, [rip + lab_arena + LAB_H_PROT_COUNT]
.Lprotect_run:                                  /* r8 = next entry, r9 = entries left */
        test    r9, r9
        jz      .Lprotect_done
        mov     rdi, [r8]
        mov     rsi, [r8 + 8]
        mov     rdx, [r8 + 16]
.Lprotect_grow:                                 /* merge the next entry if it continues the run */
        add     r8, LAB_PROT_ENTRY_SIZE
        sub     r9, 1
        jz      .Lprotect_call
        lea     rax, [rdi + rsi]
        cmp     rax, [r8]
        jne     .Lprotect_call
        cmp     rdx, [r8 + 16]
        jne     .Lprotect_call
        add     rsi, [r8 + 8]
        jmp     .Lprotect_grow
.Lprotect_call:
        cmp     rdx, PROT_READ
        je      .Lprotect_run                   /* read-only: in force since the span pass */
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        jmp     .Lprotect_run
.Lprotect_done:
        mov     rax, [rip + lab_arena + LAB_H_PROT_ID]
        mov     [r10], rax                      /* in force */
        mov     eax, SYS_getppid                /* the marker: the table is in force */
        syscall
        ret

/* .Lunprotect: all of lab_arena readable and writable (.Lprotect, before a new table).
 * Exit on failure.  Clobbers rax, rcx, rdx, rsi, rdi, r11. */
.Lunprotect:
        lea     rdi, [rip + lab_arena]
        mov     esi, LAB_ARENA_SIZE
        mov     edx, PROT_RW
        mov     eax, SYS_mprotect
        syscall
        test    rax, rax
        jnz     .Lexit_mprotect
        ret

/* .Lcheck_handlers -> edi = the first of LAB_SIGNALS whose handler (rt_sigaction(sig, NULL,
 * &old)) is not lab_fault_handler, rsi = that handler; edi = 0 when all are ours.  Under
 * qemu-user the host cannot see the guest's handlers (qemu emulates sigaction): the driver asks
 * for them.  Only where no allow-list is installed (qemu-user; natively the allow-list refuses
 * rt_sigaction, kernel code runs in a batch child that cannot change a handler, and the host
 * reads SigCgt).  Clobbers rax, rcx, rdx, rsi, rdi, r10, r11. */
.Lcheck_handlers:
        xor     edi, edi
        xor     esi, esi
        cmp     word ptr [rip + lab_fprog], 0
        jne     .Lcheck_handlers_ret
        cmp     byte ptr [rip + lab_in_child], 0    /* a batch child zeroed its lab_fprog */
        jne     .Lcheck_handlers_ret
        .irp    sig, LAB_SIGNALS
        mov     edi, \sig
        xor     esi, esi
        lea     rdx, [rip + lab_oldact]
        mov     r10d, 8                         /* sizeof(kernel sigset_t) */
        mov     eax, SYS_rt_sigaction
        syscall
        lea     rax, [rip + lab_fault_handler]
        mov     rsi, [rip + lab_oldact]         /* the handler in force */
        mov     edi, \sig
        cmp     rsi, rax
        jne     .Lcheck_handlers_ret
        .endr
        xor     edi, edi
        xor     esi, esi
.Lcheck_handlers_ret:
        ret

/* lab_seccomp_install: reads the host's filters (lab/src/backend/process/confine.rs,
 * filter_pipe) from LAB_FD_SECCOMP to EOF: a u64 byte length n, the allow-list (n bytes of
 * struct sock_filter), then the batch filter (the rest; may be empty).  Installs the allow-list
 * with prctl(PR_SET_NO_NEW_PRIVS) + seccomp(SECCOMP_SET_MODE_FILTER) and keeps the batch filter
 * in lab_fprog2 for .Lbatch_child, blocking SIGUSR1 here (the host's poke is for the child).
 * No such fd (qemu-user) or nothing in it: no filter.  A filter that was given but cannot be
 * installed exits LAB_EXIT_SECCOMP: the guest never runs unconfined by mistake.
 * Clobbers rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11. */
lab_seccomp_install:
        xor     r8d, r8d                        /* bytes read so far */
.Lbpf_more:
        mov     edx, BPF_BUF
        sub     rdx, r8
        jz      .Lexit_seccomp                  /* longer than the buffer */
        mov     edi, LAB_FD_SECCOMP
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
        mov     edi, LAB_FD_SECCOMP
        mov     eax, SYS_close
        syscall
        test    r8, r8
        jz      .Lbpf_ret
        test    r8, 7
        jnz     .Lexit_seccomp                  /* not whole instructions */
        sub     r8, 8
        jb      .Lexit_seccomp
        mov     r9, [rip + lab_bpf]             /* the allow-list's bytes */
        test    r9, 7
        jnz     .Lexit_seccomp
        cmp     r9, r8
        ja      .Lexit_seccomp
        sub     r8, r9                          /* the batch filter's bytes */
        lea     rdx, [rip + lab_fprog2]
        lea     rax, [rip + lab_bpf + 8]
        add     rax, r9
        mov     [rdx + 8], rax
        shr     r8, 3
        mov     word ptr [rdx], r8w
        lea     rdx, [rip + lab_fprog]          /* struct sock_fprog { u16 len; filter * } */
        lea     rax, [rip + lab_bpf + 8]
        mov     [rdx + 8], rax
        shr     r9, 3
        mov     word ptr [rdx], r9w
        test    r8, r8
        jz      .Lbpf_install
        mov     qword ptr [rip + lab_usr1_set], SIGUSR1_BIT
        mov     edi, SIG_BLOCK
        lea     rsi, [rip + lab_usr1_set]
        xor     edx, edx
        mov     r10d, 8
        mov     eax, SYS_rt_sigprocmask
        syscall
        test    rax, rax
        jnz     .Lexit_seccomp
.Lbpf_install:
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
 * lab_fault_handler(int signo, siginfo_t *si, ucontext_t *uc), SA_SIGINFO, on the altstack,
 * every other signal blocked.  Sends the reply (magic, seq, kind = fault, checksum, signo,
 * si_addr, pc, current, the general-purpose registers), then returns through lab_sigreturn
 * into the request loop (the saved context's rip and rsp replaced, DF cleared), so a fault
 * costs no new guest process.
 * It may use any register, but returns on its own rsp.
 * ---------------------------------------------------------------------------------------- */
        .type   lab_fault_handler, @function
        .p2align 4
lab_fault_handler:
        cld
        mov     rbx, rsp
        and     rsp, -16
        mov     r13, rdi
        mov     r14, rsi
        mov     r15, rdx
        lea     r12, [rip + lab_io_rep]
        mov     rax, [rip + lab_arena + LAB_H_CURRENT]
        mov     [r12 + LAB_RP_CURRENT], rax
        /* A handler of kernel code is reported by the entry that installed it, this one, even
         * when it ends in a fault (else the next batch of this guest would carry the finding). */
        call    .Lcheck_handlers
        test    edi, edi
        jnz     .Lfault_foreign_handler
        mov     rax, [r12 + LAB_RP_CURRENT]
        call    .Lsum_upto
        call    .Lchecksum                      /* the call table is never protected */
        mov     [r12 + LAB_RP_SUM], rax
        mov     qword ptr [r12 + LAB_RP_KIND], LAB_KIND_FAULT
        movsxd  rax, r13d
        mov     [r12 + LAB_RP_SIGNO], rax
        mov     rax, [r14 + SI_ADDR]
        cmp     r13d, 31                        /* SIGSYS: the call's number instead */
        jne     1f
        movsxd  rax, dword ptr [r14 + SI_SYSCALL]
1:      mov     [r12 + LAB_RP_SI_ADDR], rax
        mov     rax, [r15 + UC_RIP]
        mov     [r12 + LAB_RP_PC], rax          /* pc of the faulting instruction */
        xor     ecx, ecx                        /* gregs[0 .. LAB_RP_NREGS] (REG_R8 .. REG_RSP): */
2:      mov     rax, [r15 + UC_GREGS + 8 * rcx] /* the host computes the address of a fault */
        mov     [r12 + LAB_RP_REGS + 8 * rcx], rax  /* whose signal has none (#GP) from them */
        add     ecx, 1
        cmp     ecx, LAB_RP_NREGS
        jb      2b
.Lfault_send:
        call    .Lsend_reply
        cmp     byte ptr [rip + lab_in_child], 0
        jne     .Lchild_replied                 /* the parent resumes the request loop */
        add     qword ptr [rip + lab_io_seq], 1
        lea     rax, [rip + .Lfault_resume]
        mov     [r15 + UC_RIP], rax
        mov     rax, [rip + lab_loop_sp]
        mov     [r15 + UC_RSP], rax
        lea     rax, [rbx - 256]                /* below the frame and all the handler used */
        mov     [r15 + UC_RDI], rax
        and     qword ptr [r15 + UC_EFL], ~0x400    /* DF clear, as the loop expects */
        mov     rsp, rbx
        ret
/* edi = the signal whose handler is not ours, rsi = that handler: a KIND_HANDLER reply (as
 * after lab_batch; the checksum covers the whole call table) in place of the fault's. */
.Lfault_foreign_handler:
        mov     [r12 + LAB_RP_SIGNO], rdi
        mov     [r12 + LAB_RP_SI_ADDR], rsi
        mov     qword ptr [r12 + LAB_RP_KIND], LAB_KIND_HANDLER
        call    .Lchecksum
        mov     [r12 + LAB_RP_SUM], rax
        jmp     .Lfault_send
        .size   lab_fault_handler, . - lab_fault_handler

/* SA_RESTORER: rt_sigreturn, where the fault handler returns to. */
        .type   lab_sigreturn, @function
lab_sigreturn:
        mov     eax, SYS_rt_sigreturn
        syscall
        ud2
        .size   lab_sigreturn, . - lab_sigreturn
        .globl  lab_syscalls_end
lab_syscalls_end:

/* ------------------------------------------------------------------------------------------
 * .bss: private words, stacks, and lab_arena LAST (its end is the end of the image).
 * _start, .Lbatch_clean and .Lin_child clear runs of these words by their sizes: keep the order.
 * ---------------------------------------------------------------------------------------- */
        .bss
        .p2align 4
lab_drv_sp:             .zero 8         /* lab_batch's rsp at the call */
lab_drv_index:          .zero 8         /* index of the call in flight */
lab_drv_entry:          .zero 8         /* its entry address */
lab_drv_ret:            .zero 8         /* rax after the return */
lab_drv_sp_after:       .zero 8         /* rsp after the return */
lab_drv_fpctl:          .zero 8         /* MXCSR and x87 CW to load (LAB_FPCTL_*) */
lab_io_seq:             .zero 8         /* sequence number of the next request */
lab_loop_sp:            .zero 8         /* rsp at the top of the request loop */
lab_io_sum:                             /* checksum range of the current request: off, len */
lab_io_sum_off:         .zero 8
lab_io_sum_len:         .zero 8
lab_io_req:             .zero LAB_REQUEST_SIZE
lab_io_rep:             .zero LAB_REPLY_SIZE
lab_ss:                 .zero 24        /* stack_t */
lab_sigact:             .zero 32        /* struct kernel_sigaction */
lab_oldact:             .zero 32        /* .Lcheck_handlers: struct kernel_sigaction */
lab_fprog:              .zero 16        /* struct sock_fprog for lab_seccomp_install */
lab_fprog2:             .zero 16        /* the batch filter's; len 0 = no batch child */
lab_usr1_set:           .zero 8         /* sigset_t {SIGUSR1} */
lab_child_pid:          .zero 8         /* the batch child being waited for */
lab_wstatus:            .zero 8         /* its wait status */
lab_in_child:           .zero 8         /* 1 in a batch child: a fault reply ends it */
lab_bpf:                .zero BPF_BUF

        .p2align 4
lab_altstack:           .zero LAB_ALTSTACK_SIZE

        .p2align 4
lab_prot_id:            .zero 16                /* .Lprotect: id of the table in force, 0 = none */
        .globl  lab_stack_bottom
lab_stack_bottom:       .zero LAB_STACK_SIZE - 16
        .globl  lab_stack_top
lab_stack_top:                          /* 16-aligned: the stack's size is a multiple of 16 */

        .p2align 12
        .globl  lab_arena
        .type   lab_arena, @object
lab_arena:              .zero LAB_ARENA_SIZE
        .size   lab_arena, LAB_ARENA_SIZE
