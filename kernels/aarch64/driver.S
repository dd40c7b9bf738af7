// kernel-lab guest-side driver for aarch64 (AAPCS64, Linux).
//
// One freestanding static image serves every backend (see ../README.md):
//   * Unicorn maps the image, writes a batch into lab_arena and runs lab_batch with
//     x30 = lab_unicorn_halt; lab_batch makes no system call.
//   * qemu-user runs _start, which reads batches from stdin and writes results to stdout.
//
// Only _start, the I/O helpers it calls and the fault handler make system calls, all between
// lab_syscalls_begin and lab_syscalls_end; on a Linux host _start asks for SIGSYS on any system
// call from outside that range (syscall user dispatch; qemu-user says EINVAL, ignored).
// Linux aarch64 syscall numbers (include/uapi/asm-generic/unistd.h): x8 = number,
// x0..x5 = arguments, svc #0, result in x0.

#define SYS_read          63
#define SYS_write         64
#define SYS_exit_group    94
#define SYS_sigaltstack   132
#define SYS_rt_sigaction  134
#define SYS_prctl         167
#define SYS_mprotect      226
#define PROT_RW           3
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1

#define SIGILL   4
#define SIGTRAP  5
#define SIGBUS   7
#define SIGFPE   8
#define SIGUSR1  10                         // the host's poke when a batch runs past its budget
#define SIGSEGV  11
#define SIGSYS   31

#define SA_SIGINFO  0x00000004
#define SA_ONSTACK  0x08000000

// lab_arena header (u64 words; README "lab_arena header").
#define HDR_NCALLS    0x00
#define HDR_START     0x08
#define HDR_TABLE     0x10
#define HDR_RESP_LEN  0x18
#define HDR_CURRENT   0x20
#define HDR_DONE      0x28
#define HDR_PROT_TABLE 0x30                 // address of (addr, len, prot) triples (mprotect)
#define HDR_PROT_COUNT 0x38

// Call entry (README "Call entry"): 16 fixed words + NSAVED saved registers.
#define NSAVED        19                    // x19-x29, d8-d15 (AAPCS64 §6.1.1, §6.1.2)
#define ENTRY_SIZE    ((16 + NSAVED) * 8)   // 280 bytes
#define E_FN          (0 * 8)
#define E_ARG0        (1 * 8)
#define E_ARG2        (3 * 8)
#define E_COPY_SRC    (5 * 8)
#define E_COPY_DST    (6 * 8)
#define E_COPY_LEN    (7 * 8)
#define E_SEED        (8 * 8)
#define E_RET         (9 * 8)
#define E_SP_BEFORE   (10 * 8)
#define E_SP_AFTER    (11 * 8)
#define E_FLAGS       (12 * 8)
#define E_STATUS      (13 * 8)
#define E_STACK       (14 * 8)              // sp for the call: top of the guarded kernel stack
#define E_SAVED       (16 * 8)

#define ARENA_SIZE    (32 * 1024 * 1024)
#define STACK_SIZE    (1024 * 1024)
#define ALTSTACK_SIZE (64 * 1024)           // > SIGSTKSZ (16 KiB on arm64)

// Offset of the saved PC in the ucontext_t the kernel hands to an SA_SIGINFO handler:
// uc_flags(8) uc_link(8) uc_stack(24) uc_sigmask(8 + 120 pad) -> uc_mcontext at 176,
// struct sigcontext { u64 fault_address; u64 regs[31]; u64 sp; u64 pc; u64 pstate; }
// -> pc at 176 + 8 + 31*8 + 8 = 440 (arch/arm64/include/uapi/asm/{ucontext,sigcontext}.h).
// Verified under qemu-aarch64 7.2: the reported pc equals the faulting instruction.
#define UC_PC         440
#define UC_X8         (UC_PC - 32 * 8 + 8 * 8)  // regs[8]: regs[0..31], sp, then pc
#define SI_ADDR       16                    // siginfo_t: signo, errno, code (3 ints + pad), si_addr

// Load the absolute address of a symbol (static image: adrp + :lo12:, +-4 GiB PC-relative).
.macro LOADADDR reg, sym
    adrp    \reg, \sym
    add     \reg, \reg, :lo12:\sym
.endm

    .text

// void lab_batch(void)
// Runs calls start..ncalls-1 of the table in lab_arena. For each call: optional copy, poison
// the callee-saved registers, record sp, call, record x0, sp, the callee-saved registers and
// status = 1. An ordinary AAPCS64 function: it saves and restores its own x19-x30, d8-d15.
// Because the kernel gets poisoned x19-x29, nothing of the loop state may live in registers
// across the call: the entry pointer, our sp and the index go to lab_drv_state (.bss), and sp
// is restored from there even if the kernel returned with a wrong sp.
    .globl  lab_batch
    .type   lab_batch, %function
    .balign 4
lab_batch:
    stp     x29, x30, [sp, #-160]!
    mov     x29, sp
    stp     x19, x20, [sp, #16]
    stp     x21, x22, [sp, #32]
    stp     x23, x24, [sp, #48]
    stp     x25, x26, [sp, #64]
    stp     x27, x28, [sp, #80]
    stp     d8,  d9,  [sp, #96]
    stp     d10, d11, [sp, #112]
    stp     d12, d13, [sp, #128]
    stp     d14, d15, [sp, #144]

    LOADADDR x9, lab_arena
    ldr     x10, [x9, #HDR_START]               // x10 = index of the next call
    str     x10, [x9, #HDR_DONE]                // calls before `start` ran in an earlier run

.Lcall_loop:
    // x9 = lab_arena, x10 = index
    ldr     x11, [x9, #HDR_NCALLS]
    cmp     x10, x11
    b.hs    .Lbatch_done
    str     x10, [x9, #HDR_CURRENT]             // the fault handler reports this
    ldr     x12, [x9, #HDR_TABLE]
    mov     x13, #ENTRY_SIZE
    madd    x12, x10, x13, x12                  // x12 = &table[index]
    str     xzr, [x12, #E_STATUS]

    LOADADDR x14, lab_drv_state
    mov     x15, sp
    stp     x12, x15, [x14]                     // entry pointer, our sp
    str     x10, [x14, #16]                     // index

    // Optional snapshot copy (forward, 8 bytes at a time, then bytes).
    ldp     x13, x14, [x12, #E_COPY_SRC]
    ldr     x15, [x12, #E_COPY_LEN]
1:  cmp     x15, #8
    b.lo    2f
    ldr     x16, [x13], #8
    str     x16, [x14], #8
    sub     x15, x15, #8
    b       1b
2:  cbz     x15, 3f
    ldrb    w16, [x13], #1
    strb    w16, [x14], #1
    sub     x15, x15, #1
    b       2b
3:
    // Arguments as full 64-bit words, kernel address, poison seed.
    ldp     x0, x1, [x12, #E_ARG0]
    ldp     x2, x3, [x12, #E_ARG2]
    ldr     x16, [x12, #E_FN]                   // x16 = IP0, free to use (AAPCS64 §6.1.1)
    ldr     x9,  [x12, #E_SEED]
    movz    x17, #0x7c15                        // poison step 0x9E3779B97F4A7C15
    movk    x17, #0x7f4a, lsl #16
    movk    x17, #0x79b9, lsl #32
    movk    x17, #0x9e37, lsl #48
    // Poison register i (ABI order) with seed + (i+1)*step.
    add     x19, x9,  x17
    add     x20, x19, x17
    add     x21, x20, x17
    add     x22, x21, x17
    add     x23, x22, x17
    add     x24, x23, x17
    add     x25, x24, x17
    add     x26, x25, x17
    add     x27, x26, x17
    add     x28, x27, x17
    add     x29, x28, x17
    add     x9,  x29, x17
    fmov    d8,  x9
    add     x9,  x9,  x17
    fmov    d9,  x9
    add     x9,  x9,  x17
    fmov    d10, x9
    add     x9,  x9,  x17
    fmov    d11, x9
    add     x9,  x9,  x17
    fmov    d12, x9
    add     x9,  x9,  x17
    fmov    d13, x9
    add     x9,  x9,  x17
    fmov    d14, x9
    add     x9,  x9,  x17
    fmov    d15, x9
    ldr     x9, [x12, #E_STACK]                 // the kernel runs on the guarded stack
    mov     sp, x9                              // (16-byte aligned)
    str     x9, [x12, #E_SP_BEFORE]
    blr     x16

    // Back from the kernel: record before touching any callee-saved register.
    mov     x9, sp
    LOADADDR x10, lab_drv_state
    ldr     x11, [x10]                          // entry pointer
    str     x0,  [x11, #E_RET]
    str     x9,  [x11, #E_SP_AFTER]
    stp     x19, x20, [x11, #E_SAVED + 0*8]
    stp     x21, x22, [x11, #E_SAVED + 2*8]
    stp     x23, x24, [x11, #E_SAVED + 4*8]
    stp     x25, x26, [x11, #E_SAVED + 6*8]
    stp     x27, x28, [x11, #E_SAVED + 8*8]
    str     x29,      [x11, #E_SAVED + 10*8]
    stp     d8,  d9,  [x11, #E_SAVED + 11*8]
    stp     d10, d11, [x11, #E_SAVED + 13*8]
    stp     d12, d13, [x11, #E_SAVED + 15*8]
    stp     d14, d15, [x11, #E_SAVED + 17*8]
    str     xzr, [x11, #E_FLAGS]                // no flags word on aarch64
    mov     x12, #1
    str     x12, [x11, #E_STATUS]
    ldr     x12, [x10, #8]
    mov     sp, x12                             // our own sp, whatever the kernel did
    ldr     x10, [x10, #16]
    add     x10, x10, #1
    LOADADDR x9, lab_arena
    str     x10, [x9, #HDR_DONE]
    b       .Lcall_loop

.Lbatch_done:
    ldp     x19, x20, [sp, #16]
    ldp     x21, x22, [sp, #32]
    ldp     x23, x24, [sp, #48]
    ldp     x25, x26, [sp, #64]
    ldp     x27, x28, [sp, #80]
    ldp     d8,  d9,  [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    ldp     x29, x30, [sp], #160
    ret
    .size   lab_batch, . - lab_batch

// Unicorn uses this address as lab_batch's return address and stops when it gets here.
    .globl  lab_unicorn_halt
    .type   lab_unicorn_halt, %function
lab_unicorn_halt:
    brk     #0
    .size   lab_unicorn_halt, . - lab_unicorn_halt

    .globl  lab_syscalls_begin
lab_syscalls_begin:
// x0 = read_all(x1 = buf, x2 = count): reads until count bytes or EOF; returns bytes read.
// A read error other than EINTR ends the process with exit code 2.
    .type   read_all, %function
read_all:
    mov     x3, x1
    mov     x4, x2
    mov     x5, #0                              // bytes so far
1:  cmp     x5, x4
    b.hs    2f
    mov     x0, #0                              // stdin
    add     x1, x3, x5
    sub     x2, x4, x5
    mov     x8, #SYS_read
    svc     #0
    cmn     x0, #4                              // -EINTR: retry
    b.eq    1b
    tbnz    x0, #63, .Lio_error
    cbz     x0, 2f                              // EOF
    add     x5, x5, x0
    b       1b
2:  mov     x0, x5
    ret
    .size   read_all, . - read_all

// write_all(x1 = buf, x2 = count): writes all bytes to stdout or exits with code 2.
    .type   write_all, %function
write_all:
    mov     x3, x1
    mov     x4, x2
1:  cbz     x4, 2f
    mov     x0, #1                              // stdout
    mov     x1, x3
    mov     x2, x4
    mov     x8, #SYS_write
    svc     #0
    cmn     x0, #4
    b.eq    1b
    cmp     x0, #0
    b.le    .Lio_error
    add     x3, x3, x0
    sub     x4, x4, x0
    b       1b
2:  ret
    .size   write_all, . - write_all

.Lio_error:
    mov     x0, #2
    mov     x8, #SYS_exit_group
    svc     #0

// protect: apply the batch's protection table (header words 6, 7) with mprotect.
// unprotect: make all of lab_arena readable and writable again (before the next read and
// before lab_arena is written to stdout). Both exit with code 6 if mprotect fails.
// Leaf helpers; they use x0-x2, x8-x11.
    .type   protect, %function
protect:
    LOADADDR x9, lab_arena
    ldr     x10, [x9, #HDR_PROT_TABLE]
    ldr     x11, [x9, #HDR_PROT_COUNT]
1:  cbz     x11, 2f
    ldp     x0, x1, [x10]
    ldr     x2, [x10, #16]
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lprotect_error
    add     x10, x10, #24
    sub     x11, x11, #1
    b       1b
2:  ret
    .size   protect, . - protect

    .type   unprotect, %function
unprotect:
    LOADADDR x0, lab_arena
    mov     x1, #ARENA_SIZE
    mov     x2, #PROT_RW
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lprotect_error
    ret
    .size   unprotect, . - unprotect

.Lprotect_error:
    mov     x0, #6
    mov     x8, #SYS_exit_group
    svc     #0

// The qemu/native entry (README "_start I/O loop"). Never returns.
    .globl  _start
    .type   _start, %function
_start:
    LOADADDR x0, lab_stack_top
    mov     sp, x0

    // sigaltstack(&(stack_t){ altstack, 0, ALTSTACK_SIZE }, NULL)
    sub     sp, sp, #32
    LOADADDR x1, lab_altstack
    mov     x2, #ALTSTACK_SIZE
    str     x1, [sp]                            // ss_sp
    str     xzr, [sp, #8]                       // ss_flags (+ pad)
    str     x2, [sp, #16]                       // ss_size
    mov     x0, sp
    mov     x1, #0
    mov     x8, #SYS_sigaltstack
    svc     #0
    cbnz    x0, .Lsetup_error

    // struct sigaction (arm64 kernel layout): handler, flags, restorer, mask (one u64).
    LOADADDR x1, lab_fault_handler
    movz    x2, #(SA_SIGINFO & 0xffff)
    movk    x2, #(SA_ONSTACK >> 16), lsl #16
    stp     x1, x2, [sp]
    stp     xzr, xzr, [sp, #16]                 // no restorer (never returns), empty mask
    LOADADDR x19, lab_fault_signals
    mov     x20, #7
1:  ldrb    w0, [x19], #1
    mov     x1, sp
    mov     x2, #0
    mov     x3, #8                              // sizeof(kernel sigset_t)
    mov     x8, #SYS_rt_sigaction
    svc     #0
    cbnz    x0, .Lsetup_error
    subs    x20, x20, #1
    b.ne    1b
    add     sp, sp, #32

    // prctl(PR_SET_SYSCALL_USER_DISPATCH, ON, begin, len, NULL): SIGSYS for a system call from
    // anywhere but this I/O code. EINVAL under qemu-user: ignored.
    mov     x0, #PR_SET_SYSCALL_USER_DISPATCH
    mov     x1, #PR_SYS_DISPATCH_ON
    LOADADDR x2, lab_syscalls_begin
    LOADADDR x3, lab_syscalls_end
    sub     x3, x3, x2
    mov     x4, #0
    mov     x8, #SYS_prctl
    svc     #0

    LOADADDR x19, lab_io                        // framing words
    LOADADDR x21, lab_arena
.Lio_loop:
    mov     x1, x19
    mov     x2, #8
    bl      read_all
    cbz     x0, .Lexit_ok                       // EOF between batches
    cmp     x0, #8
    b.ne    .Lio_error
    ldr     x20, [x19]                          // len
    mov     x0, #ARENA_SIZE
    cmp     x20, x0
    b.hi    .Lio_error
    mov     x1, x21
    mov     x2, x20
    bl      read_all
    cmp     x0, x20
    b.ne    .Lio_error

    bl      protect
    bl      lab_batch
    bl      unprotect

    ldr     x20, [x21, #HDR_RESP_LEN]
    mov     x0, #ARENA_SIZE                     // never send more than the arena
    cmp     x20, x0
    csel    x20, x20, x0, ls
    stp     xzr, x20, [x19]                     // tag = 0, resp_len
    mov     x1, x19
    mov     x2, #16
    bl      write_all
    mov     x1, x21
    mov     x2, x20
    bl      write_all
    b       .Lio_loop

.Lexit_ok:
    mov     x0, #0
    mov     x8, #SYS_exit_group
    svc     #0
.Lsetup_error:
    mov     x0, #4
    mov     x8, #SYS_exit_group
    svc     #0
    .size   _start, . - _start

// void lab_fault_handler(int signo, siginfo_t *si, ucontext_t *uc), on lab_altstack.
// Sends tag = 1, len = 32 + resp_len, signo, si_addr, pc, current, lab_arena[0..resp_len],
// then exit_group(3). The host restarts the process and resumes at current + 1.
    .type   lab_fault_handler, %function
lab_fault_handler:
    mov     x22, x0
    mov     x23, x1
    mov     x24, x2
    bl      unprotect                           // guard pages must not stop the write below
    mov     x0, x22
    mov     x1, x23
    mov     x2, x24
    LOADADDR x19, lab_io
    LOADADDR x21, lab_arena
    ldr     x20, [x21, #HDR_RESP_LEN]
    mov     x9, #ARENA_SIZE
    cmp     x20, x9
    csel    x20, x20, x9, ls
    mov     x9, #1
    add     x10, x20, #32
    stp     x9, x10, [x19]                      // tag = 1, len
    mov     w9, w0                              // signo is an int
    ldr     x10, [x1, #SI_ADDR]
    cmp     w9, #SIGSYS                         // SIGSYS (qemu-user forwards a refused host call):
    b.ne    1f
    ldr     x10, [x2, #UC_X8]                   // the guest's system-call number instead
1:  stp     x9, x10, [x19, #16]                 // signo, si_addr
    ldr     x9, [x2, #UC_PC]
    ldr     x10, [x21, #HDR_CURRENT]
    stp     x9, x10, [x19, #32]                 // pc, current
    mov     x1, x19
    mov     x2, #48
    bl      write_all
    mov     x1, x21
    mov     x2, x20
    bl      write_all
    mov     x0, #3
    mov     x8, #SYS_exit_group
    svc     #0
    .size   lab_fault_handler, . - lab_fault_handler
    .globl  lab_syscalls_end
lab_syscalls_end:

    .section .rodata
lab_fault_signals:
    .byte   SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGTRAP, SIGSYS, SIGUSR1

// lab_arena must be the last object of the image (its end = end of the last mapped page):
// driver.o is linked last and lab_arena is the last thing in its .bss.
    .bss
    .balign 16
lab_drv_state:                                  // entry pointer, lab_batch's sp, index
    .zero   32
lab_io:                                         // framing words for write/read
    .zero   48
    .balign 16
lab_altstack:
    .zero   ALTSTACK_SIZE
    .balign 16
lab_stack:
    .zero   STACK_SIZE
    .globl  lab_stack_top
    .type   lab_stack_top, %object
lab_stack_top:
    .balign 4096
    .globl  lab_arena
    .type   lab_arena, %object
lab_arena:
    .zero   ARENA_SIZE
    .size   lab_arena, ARENA_SIZE
