// kernel-lab guest-side driver for aarch64 (AAPCS64, Linux).
//
// One freestanding static image serves every backend (see ../README.md):
//   * Unicorn maps the image, writes a batch into lab_arena and runs lab_batch with
//     x30 = lab_batch_return, the callee-saved registers zero and the private words the request
//     loop keeps written as a process guest holds them (issue 28); lab_batch makes no system
//     call.
//   * qemu-user runs _start, which maps the host's shared arena over lab_arena, then answers
//     request tokens (fd 4) with reply tokens (fd 5).
//
// Every protocol value (offsets, sizes, fds, tokens, exit codes, the poison step, the saved
// registers) comes from lab_protocol.h, generated from lab/src/protocol.rs.
//
// Only _start, the I/O helpers it calls and the fault handler make system calls, all between
// lab_syscalls_begin and lab_syscalls_end; on a Linux host _start asks for SIGSYS on any system
// call from outside that range (syscall user dispatch; qemu-user says EINVAL, ignored).
// Linux aarch64 syscall numbers (include/uapi/asm-generic/unistd.h): x8 = number,
// x0..x5 = arguments, svc #0, result in x0.
#include "lab_protocol.h"

#define SYS_read          63
#define SYS_write         64
#define SYS_exit_group    94
#define SYS_sigaltstack   132
#define SYS_rt_sigaction  134
#define SYS_prctl         167
#define SYS_mmap          222
#define SYS_mprotect      226
#define SYS_getppid       173
#define PROT_READ         1
#define PROT_RW           3
#define MAP_SHARED        0x01
#define MAP_FIXED         0x10
#define EINTR             4
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1

#define SA_SIGINFO  0x00000004
#define SA_ONSTACK  0x08000000

// Offset of the saved PC in the ucontext_t the kernel hands to an SA_SIGINFO handler:
// uc_flags(8) uc_link(8) uc_stack(24) uc_sigmask(8 + 120 pad) -> uc_mcontext at 176,
// struct sigcontext { u64 fault_address; u64 regs[31]; u64 sp; u64 pc; u64 pstate; }
// -> pc at 176 + 8 + 31*8 + 8 = 440 (arch/arm64/include/uapi/asm/{ucontext,sigcontext}.h).
// Verified under qemu-aarch64 7.2: the reported pc equals the faulting instruction.
#define UC_PC         440
#define UC_SP         (UC_PC - 8)
#define UC_X8         (UC_PC - 32 * 8 + 8 * 8)  // regs[8]: regs[0..31], sp, then pc
#define UC_X0         (UC_PC - 32 * 8)
#define SI_ADDR       16                    // siginfo_t: signo, errno, code (3 ints + pad), si_addr

// lab_batch's frame: x29, x30, then the saved registers in ABI order, padded to 16 bytes.
#define F_SAVED       16
#define FRAME         ((F_SAVED + 8 * LAB_NSAVED + 15) & ~15)

// Load the absolute address of a symbol (static image: adrp + :lo12:, +-4 GiB PC-relative).
.macro LOADADDR reg, sym
    adrp    \reg, \sym
    add     \reg, \reg, :lo12:\sym
.endm

// Load a 64-bit constant (no literal pool: the static scan disassembles all of .text).
.macro MOV64 reg, val
    movz    \reg, #((\val) & 0xffff)
    movk    \reg, #(((\val) >> 16) & 0xffff), lsl #16
    movk    \reg, #(((\val) >> 32) & 0xffff), lsl #32
    movk    \reg, #(((\val) >> 48) & 0xffff), lsl #48
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
    stp     x29, x30, [sp, #-FRAME]!
    mov     x29, sp
    .set    lab_k, 0
    .irp    reg, LAB_SAVED_GPRS, LAB_SAVED_FPRS
    str     \reg, [sp, #(F_SAVED + 8 * lab_k)]
    .set    lab_k, lab_k + 1
    .endr
    .if     FRAME > F_SAVED + 8 * LAB_NSAVED
    str     xzr, [sp, #(F_SAVED + 8 * LAB_NSAVED)]  // the pad: else what _start left (issue 28)
    .endif

    LOADADDR x9, lab_arena
    ldr     x10, [x9, #LAB_H_START]             // x10 = index of the next call
    str     x10, [x9, #LAB_H_DONE]              // calls before `start` ran in an earlier run

.Lcall_loop:
    // x9 = lab_arena, x10 = index
    ldr     x11, [x9, #LAB_H_NCALLS]
    cmp     x10, x11
    b.hs    .Lbatch_done
    str     x10, [x9, #LAB_H_CURRENT]           // the fault handler reports this
    ldr     x12, [x9, #LAB_H_TABLE]
    mov     x13, #LAB_ENTRY_SIZE
    madd    x12, x10, x13, x12                  // x12 = &table[index]
    str     xzr, [x12, #LAB_E_STATUS]

    LOADADDR x14, lab_drv_state
    mov     x15, sp
    stp     x12, x15, [x14]                     // entry pointer, our sp
    str     x10, [x14, #16]                     // index

    // Optional snapshot copy, memmove semantics.
    ldr     x13, [x12, #LAB_E_COPY_SRC]
    ldr     x14, [x12, #LAB_E_COPY_DST]
    ldr     x15, [x12, #LAB_E_COPY_LEN]
    sub     x16, x14, x13
    cmp     x16, x15
    b.lo    4f                                  // dst - src < len (unsigned): copy backwards
1:  cmp     x15, #8                             // forward, 8 bytes at a time, then bytes
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
4:  add     x13, x13, x15                       // backward, last byte first
    add     x14, x14, x15
5:  cbz     x15, 3f
    ldrb    w16, [x13, #-1]!
    strb    w16, [x14, #-1]!
    sub     x15, x15, #1
    b       5b
3:
    // Arguments as full 64-bit words, kernel address, poison seed.
    ldr     x0, [x12, #LAB_E_ARG0]
    ldr     x1, [x12, #LAB_E_ARG1]
    ldr     x2, [x12, #LAB_E_ARG2]
    ldr     x3, [x12, #LAB_E_ARG3]
    ldr     x16, [x12, #LAB_E_FN]               // x16 = IP0, free to use (AAPCS64 §6.1.1)
    ldr     x9,  [x12, #LAB_E_SEED]
    MOV64   x17, LAB_POISON_STEP
    // Poison register i (ABI order) with seed + (i+1)*step.
    .irp    reg, LAB_SAVED_GPRS
    add     x9, x9, x17
    mov     \reg, x9
    .endr
    .irp    reg, LAB_SAVED_FPRS
    add     x9, x9, x17
    fmov    \reg, x9
    .endr
    MOV64   x9, LAB_FPCTL_POISON                // FPCR poison (lab/src/abi.rs)
    msr     fpcr, x9
    ldr     x9, [x12, #LAB_E_STACK]             // the kernel runs on the guarded stack
    mov     sp, x9                              // (16-byte aligned)
    str     x9, [x12, #LAB_E_SP_BEFORE]
    mov     x4, xzr                             // else what _start (x8: its last system call)
    mov     x5, xzr                             // or Unicorn left: a kernel could tell them
    mov     x6, xzr                             // apart
    mov     x7, xzr
    mov     x8, xzr
    mov     x18, xzr
    blr     x16

    // Back from the kernel: record before touching any callee-saved register.
    mov     x9, sp
    LOADADDR x10, lab_drv_state
    ldr     x11, [x10]                          // entry pointer
    str     x0,  [x11, #LAB_E_RET]
    str     x9,  [x11, #LAB_E_SP_AFTER]
    .set    lab_k, 0
    .irp    reg, LAB_SAVED_GPRS, LAB_SAVED_FPRS
    str     \reg, [x11, #(LAB_E_SAVED + 8 * lab_k)]
    .set    lab_k, lab_k + 1
    .endr
    str     xzr, [x11, #LAB_E_FLAGS]            // no flags word on aarch64
    mrs     x12, fpcr
    str     x12, [x11, #LAB_E_FPCTL]
    MOV64   x12, LAB_FPCTL_DEFAULT
    msr     fpcr, x12
    mov     x12, #1
    str     x12, [x11, #LAB_E_STATUS]
    ldr     x12, [x10, #8]
    mov     sp, x12                             // our own sp, whatever the kernel did
    ldr     x10, [x10, #16]
    add     x10, x10, #1
    LOADADDR x9, lab_arena
    str     x10, [x9, #LAB_H_DONE]
    b       .Lcall_loop

.Lbatch_done:
    .set    lab_k, 0
    .irp    reg, LAB_SAVED_GPRS, LAB_SAVED_FPRS
    ldr     \reg, [sp, #(F_SAVED + 8 * lab_k)]
    .set    lab_k, lab_k + 1
    .endr
    ldp     x29, x30, [sp], #FRAME
    ret
    .size   lab_batch, . - lab_batch

// Part of the image contract (kernels/README.md); Unicorn returns to lab_batch_return instead.
    .globl  lab_unicorn_halt
    .type   lab_unicorn_halt, %function
lab_unicorn_halt:
    brk     #0
    .size   lab_unicorn_halt, . - lab_unicorn_halt

    .globl  lab_syscalls_begin
lab_syscalls_begin:
// x0 = read_all(x1 = buf, x2 = count): reads from LAB_FD_REQUEST until count bytes or EOF;
// returns bytes read. Retries on EINTR; any other error exits with LAB_EXIT_IO.
    .type   read_all, %function
read_all:
    mov     x3, x1
    mov     x4, x2
    mov     x5, #0                              // bytes so far
1:  cmp     x5, x4
    b.hs    2f
    mov     x0, #LAB_FD_REQUEST
    add     x1, x3, x5
    sub     x2, x4, x5
    mov     x8, #SYS_read
    svc     #0
    cmn     x0, #EINTR                          // -EINTR: retry
    b.eq    1b
    tbnz    x0, #63, .Lexit_io
    cbz     x0, 2f                              // EOF
    add     x5, x5, x0
    b       1b
2:  mov     x0, x5
    ret
    .size   read_all, . - read_all

// send_reply: fills magic and seq of lab_io_rep (kind, sum and the fault words are the
// caller's) and writes it to LAB_FD_REPLY, retrying on EINTR, or exits with LAB_EXIT_IO.
// Uses x0-x5, x8.
    .type   send_reply, %function
send_reply:
    LOADADDR x3, lab_io_rep
    MOV64   x0, LAB_REPLY_MAGIC
    LOADADDR x1, lab_io_seq
    ldr     x1, [x1]
    stp     x0, x1, [x3, #LAB_RP_MAGIC]
    mov     x4, #LAB_REPLY_SIZE
1:  cbz     x4, 2f
    mov     x0, #LAB_FD_REPLY
    mov     x1, x3
    mov     x2, x4
    mov     x8, #SYS_write
    svc     #0
    cmn     x0, #EINTR
    b.eq    1b
    cmp     x0, #0
    b.le    .Lexit_io
    add     x3, x3, x0
    sub     x4, x4, x0
    b       1b
2:  ret
    .size   send_reply, . - send_reply

// x0 = checksum(): FNV-1a over the u64 words of lab_arena[sum_off, sum_off + sum_len).
// Uses x0-x5.
    .type   checksum, %function
checksum:
    LOADADDR x1, lab_io_sum
    ldp     x2, x3, [x1]                        // sum_off, sum_len
    LOADADDR x1, lab_arena
    add     x1, x1, x2
    lsr     x3, x3, #3
    MOV64   x0, LAB_FNV_OFFSET
    MOV64   x4, LAB_FNV_PRIME
1:  cbz     x3, 2f
    ldr     x5, [x1], #8
    eor     x0, x0, x5
    mul     x0, x0, x4
    sub     x3, x3, #1
    b       1b
2:  ret
    .size   checksum, . - checksum

// sum_upto(x0 = current): a fault reply's checksum range ends with entry `current` of the call
// table (the calls after it did not run in this entry): sum_len shrinks to end there (rounded
// down to 8 bytes) when that is shorter. The host computes the same from the reply's `current`
// and the header's `table`, so a kernel that faults on every call costs a checksum of the
// entries it ran, not of the whole table. Leaf helper; it uses x0-x3.
    .type   sum_upto, %function
sum_upto:
    add     x0, x0, #1
    mov     x1, #LAB_ENTRY_SIZE
    mul     x0, x0, x1
    LOADADDR x1, lab_arena
    ldr     x2, [x1, #LAB_H_TABLE]
    add     x0, x0, x2
    sub     x0, x0, x1                          // offset of the end of entry `current`
    LOADADDR x1, lab_io_sum
    ldp     x2, x3, [x1]                        // sum_off, sum_len
    sub     x0, x0, x2
    and     x0, x0, #-8
    cmp     x0, x3
    b.hs    1f                                  // not shorter (or before sum_off): unchanged
    str     x0, [x1, #8]
1:  ret
    .size   sum_upto, . - sum_upto

// protect: put the batch's protection table in force. lab_prot_id holds the id of the table in
// force (LAB_H_PROT_ID of the request that put it there; 0 = none known). When it is the
// request's LAB_H_PROT_BASE, the host's delta entries (LAB_H_DELTA_TABLE, LAB_H_DELTA_COUNT:
// addr, len, prot, computed from the two tables) are applied, one mprotect each: none for a
// resumed entry of the same batch (the fault handler leaves the pages as they are), few for a
// batch laid out like the last one. Otherwise the whole table: all of lab_arena readable and
// writable again (one mprotect); then one mprotect (read-only) per span of adjacent entries
// that are read-only or guards and hold a read-only one (the read-only buffers and the guards
// between them); then one mprotect per run of adjacent entries with the same prot, but for
// read-only runs (done): the guards inside the spans cost one call each, their read-only pages
// none. The id is cleared before the first change and set after the last, so a poke (SIGUSR1)
// in between leaves it clear. Then one getppid, the marker that ends the driver's protection
// changes for the host's witness under qemu-user (lab/src/backend/process/witness.rs): any
// later one is kernel code's. Exits with LAB_EXIT_MPROTECT if mprotect fails.
// Leaf helper; it uses x0-x2, x8-x15.
    .type   protect, %function
protect:
    LOADADDR x9, lab_arena
    ldr     x10, [x9, #LAB_H_PROT_TABLE]        // x10 = table
    ldr     x11, [x9, #LAB_H_PROT_COUNT]        // x11 = entries
    LOADADDR x12, lab_prot_id
    ldr     x13, [x12]                          // x13 = id in force
    str     xzr, [x12]                          // none until this table is
    cbz     x13, 3f
    ldr     x14, [x9, #LAB_H_PROT_BASE]
    cmp     x13, x14
    b.ne    3f
    ldr     x13, [x9, #LAB_H_DELTA_TABLE]       // the delta: x13 = next entry, x14 = entries left
    ldr     x14, [x9, #LAB_H_DELTA_COUNT]
15: cbz     x14, 2f
    ldp     x0, x1, [x13]
    ldr     x2, [x13, #16]
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lexit_mprotect
    add     x13, x13, #LAB_PROT_ENTRY_SIZE
    sub     x14, x14, #1
    b       15b
3:  LOADADDR x0, lab_arena                      // all of the arena readable and writable
    mov     x1, #LAB_ARENA_SIZE
    mov     x2, #PROT_RW
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lexit_mprotect
    mov     x13, x10                            // x13 = next entry, x14 = entries left
    mov     x14, x11
10: cbz     x14, 14f
    ldr     x2, [x13, #16]                      // x2 != 0: the span holds a read-only entry
    cmp     x2, #PROT_READ
    b.hi    13f                                 // neither read-only nor a guard
    ldp     x0, x1, [x13]
11: add     x13, x13, #LAB_PROT_ENTRY_SIZE      // extend the span over adjacent R / guard entries
    sub     x14, x14, #1
    cbz     x14, 12f
    add     x15, x0, x1
    ldr     x8, [x13]
    cmp     x15, x8
    b.ne    12f
    ldr     x8, [x13, #16]
    cmp     x8, #PROT_READ
    b.hi    12f
    orr     x2, x2, x8
    ldr     x8, [x13, #8]
    add     x1, x1, x8
    b       11b
12: cbz     x2, 10b                             // guards only: the next pass
    mov     x2, #PROT_READ
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lexit_mprotect
    b       10b
13: add     x13, x13, #LAB_PROT_ENTRY_SIZE
    sub     x14, x14, #1
    b       10b
14: mov     x13, x10
    mov     x14, x11
4:  cbz     x14, 2f
    ldp     x0, x1, [x13]
    ldr     x2, [x13, #16]
5:  add     x13, x13, #LAB_PROT_ENTRY_SIZE      // merge the next entry if it continues the run
    sub     x14, x14, #1
    cbz     x14, 6f
    add     x15, x0, x1
    ldr     x8, [x13]
    cmp     x15, x8
    b.ne    6f
    ldr     x8, [x13, #16]
    cmp     x2, x8
    b.ne    6f
    ldr     x8, [x13, #8]
    add     x1, x1, x8
    b       5b
6:  cmp     x2, #PROT_READ
    b.eq    4b                                  // read-only: in force since the span pass
    mov     x8, #SYS_mprotect
    svc     #0
    cbnz    x0, .Lexit_mprotect
    b       4b
2:  ldr     x13, [x9, #LAB_H_PROT_ID]       // in force
    str     x13, [x12]
    mov     x8, #SYS_getppid                    // the marker: the table is in force
    svc     #0
    ret
    .size   protect, . - protect

// check_handlers -> x0 = the first of LAB_SIGNALS whose handler (rt_sigaction(sig, NULL, &old))
// is not lab_fault_handler, x1 = that handler; x0 = 0 when all are ours.  Under qemu-user the
// host cannot see the guest's handlers (qemu emulates sigaction): the driver asks for them.
// Uses x0-x3, x8-x10.
    .type   check_handlers, %function
check_handlers:
    .irp    sig, LAB_SIGNALS
    mov     x0, #\sig
    mov     x1, #0
    LOADADDR x2, lab_oldact
    mov     x3, #8                              // sizeof(kernel sigset_t)
    mov     x8, #SYS_rt_sigaction
    svc     #0
    LOADADDR x9, lab_oldact
    ldr     x1, [x9]                            // the handler in force
    LOADADDR x10, lab_fault_handler
    mov     x0, #\sig
    cmp     x1, x10
    b.ne    1f
    .endr
    mov     x0, #0
    mov     x1, #0
1:  ret
    .size   check_handlers, . - check_handlers

// batch_clean: what lab_batch and the kernel find of the driver is the same on every backend
// (issue 28): zero check_handlers' result and the request and reply words (the reply is
// written after the batch, lab_io_sum holds the request's range), and every callee-saved
// register (lab_batch saves them in its frame; after a fault they are the kernel's), as Unicorn
// has them. Clobbers x0, x1 and the callee-saved registers.
    .type   batch_clean, %function
batch_clean:
    LOADADDR x0, lab_oldact
    mov     x1, #(32 + LAB_REQUEST_SIZE + LAB_REPLY_SIZE)  // lab_oldact, lab_io_req, lab_io_rep
1:  stp     xzr, xzr, [x0], #16
    subs    x1, x1, #16
    b.ne    1b
    .irp    reg, LAB_SAVED_GPRS
    mov     \reg, xzr
    .endr
    .irp    reg, LAB_SAVED_FPRS
    fmov    \reg, xzr
    .endr
    ret
    .size   batch_clean, . - batch_clean

// The qemu/native entry (README "_start I/O loop"). Never returns.
    .globl  _start
    .type   _start, %function
_start:
    LOADADDR x0, lab_stack_top
    mov     sp, x0

    // sigaltstack(&(stack_t){ altstack, 0, LAB_ALTSTACK_SIZE }, NULL)
    sub     sp, sp, #32
    LOADADDR x1, lab_altstack
    mov     x2, #LAB_ALTSTACK_SIZE
    str     x1, [sp]                            // ss_sp
    str     xzr, [sp, #8]                       // ss_flags (+ pad)
    str     x2, [sp, #16]                       // ss_size
    mov     x0, sp
    mov     x1, #0
    mov     x8, #SYS_sigaltstack
    svc     #0

    // struct sigaction (arm64 kernel layout): handler, flags, restorer, mask (one u64).
    LOADADDR x1, lab_fault_handler
    movz    x2, #(SA_SIGINFO & 0xffff)
    movk    x2, #(SA_ONSTACK >> 16), lsl #16
    stp     x1, x2, [sp]
    mov     x3, #-1                             // block every other signal in the handler
    stp     xzr, x3, [sp, #16]                  // no restorer (never returns), mask
    .irp    sig, LAB_SIGNALS
    mov     x0, #\sig
    mov     x1, sp
    mov     x2, #0
    mov     x3, #8                              // sizeof(kernel sigset_t)
    mov     x8, #SYS_rt_sigaction
    svc     #0
    .endr
    stp     xzr, xzr, [sp]                      // only the calls' arguments: zero, as Unicorn
    stp     xzr, xzr, [sp, #16]                 // has the driver's stack (issue 28)
    add     sp, sp, #32

    // mmap(lab_arena, size, RW, MAP_SHARED | MAP_FIXED, LAB_FD_ARENA, 0): the host's view
    LOADADDR x0, lab_arena
    mov     x1, #LAB_ARENA_SIZE
    mov     x2, #PROT_RW
    mov     x3, #(MAP_SHARED | MAP_FIXED)
    mov     x4, #LAB_FD_ARENA
    mov     x5, #0
    mov     x8, #SYS_mmap
    svc     #0
    LOADADDR x1, lab_arena
    cmp     x0, x1
    b.ne    .Lexit_mmap

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

.Lio_resume:                                    // where the fault handler returns to
    LOADADDR x19, lab_io_req
.Lio_loop:
    mov     x9, sp
    LOADADDR x10, lab_loop_sp
    str     x9, [x10]
    mov     x1, x19
    mov     x2, #LAB_REQUEST_SIZE
    bl      read_all
    cbz     x0, .Lexit_ok                       // EOF between tokens
    cmp     x0, #LAB_REQUEST_SIZE
    b.ne    .Lexit_truncated
    ldr     x0, [x19, #LAB_RQ_MAGIC]
    MOV64   x1, LAB_REQUEST_MAGIC
    cmp     x0, x1
    b.ne    .Lexit_protocol
    ldr     x0, [x19, #LAB_RQ_SEQ]
    LOADADDR x1, lab_io_seq
    ldr     x1, [x1]
    cmp     x0, x1
    b.ne    .Lexit_protocol
    ldr     x0, [x19, #LAB_RQ_SUM_OFF]          // the checksum range must lie in the arena
    ldr     x1, [x19, #LAB_RQ_SUM_LEN]
    orr     x2, x0, x1
    tst     x2, #7
    b.ne    .Lexit_protocol
    mov     x2, #LAB_ARENA_SIZE
    cmp     x0, x2
    b.hi    .Lexit_protocol
    sub     x2, x2, x0
    cmp     x1, x2
    b.hi    .Lexit_protocol
    LOADADDR x2, lab_io_sum
    stp     x0, x1, [x2]

    bl      protect
    bl      batch_clean
    bl      lab_batch                           // sp = lab_stack_top here
// lab_batch's return address (x30 at its entry) in a process and under Unicorn, which stops
// here: the same saved x30 in lab_batch's frame.
    .globl  lab_batch_return
lab_batch_return:
    bl      check_handlers                      // x0 = a signal whose handler is not ours, x1 = it
    LOADADDR x9, lab_io_rep
    stp     x0, x1, [x9, #LAB_RP_SIGNO]         // signo, si_addr
    mov     x2, #LAB_KIND_DONE
    mov     x3, #LAB_KIND_HANDLER
    cmp     x0, #0
    csel    x2, x2, x3, eq
    str     x2, [x9, #LAB_RP_KIND]
    bl      checksum
    LOADADDR x1, lab_io_rep
    str     x0, [x1, #LAB_RP_SUM]
    bl      send_reply
    LOADADDR x1, lab_io_seq
    ldr     x0, [x1]
    add     x0, x0, #1
    str     x0, [x1]
    b       .Lio_resume                         // x19 was cleared before lab_batch

// The fault handler resumes the loop here, off the altstack, with x0 = the lowest altstack
// address it may have used: the signal's frame (the kernel's registers) and the handler's own
// words lie between it and the altstack's top, and would stay there for the next batch to read.
// Only that part is cleared.
.Lfault_resume:
    LOADADDR x1, lab_altstack
    mov     x2, #LAB_ALTSTACK_SIZE
    add     x2, x1, x2
    cmp     x0, x1
    csel    x0, x1, x0, lo
    cmp     x0, x2
    csel    x0, x2, x0, hi
    and     x0, x0, #-16
1:  cmp     x0, x2
    b.hs    2f
    stp     xzr, xzr, [x0], #16
    b       1b
2:  b       .Lio_resume

.Lexit_ok:
    mov     x0, #LAB_EXIT_OK
    b       .Lexit
.Lexit_truncated:
    mov     x0, #LAB_EXIT_TRUNCATED
    b       .Lexit
.Lexit_protocol:
    mov     x0, #LAB_EXIT_PROTOCOL
    b       .Lexit
.Lexit_io:
    mov     x0, #LAB_EXIT_IO
    b       .Lexit
.Lexit_mprotect:
    mov     x0, #LAB_EXIT_MPROTECT
    b       .Lexit
.Lexit_mmap:
    mov     x0, #LAB_EXIT_MMAP
.Lexit:
    mov     x8, #SYS_exit_group
    svc     #0
    .size   _start, . - _start

// void lab_fault_handler(int signo, siginfo_t *si, ucontext_t *uc), on lab_altstack, every
// other signal blocked. Sends the reply (magic, seq, kind = fault, checksum, signo, si_addr,
// pc, current), then returns through rt_sigreturn into the request loop (the saved context's
// pc and sp replaced), so a fault costs no new guest process; the host resumes at current + 1.
    .type   lab_fault_handler, %function
lab_fault_handler:
    mov     x25, x30
    mov     x22, x0
    mov     x23, x1
    mov     x24, x2
    LOADADDR x19, lab_io_rep
    LOADADDR x21, lab_arena
    ldr     x0, [x21, #LAB_H_CURRENT]
    str     x0, [x19, #LAB_RP_CURRENT]
    // A handler of kernel code is reported by the entry that installed it, this one, even when
    // it ends in a fault (else the next batch of this guest would carry the finding).
    bl      check_handlers
    cbnz    x0, .Lfault_foreign_handler
    ldr     x0, [x19, #LAB_RP_CURRENT]
    bl      sum_upto
    bl      checksum                            // the call table is never protected
    mov     x9, #LAB_KIND_FAULT
    stp     x9, x0, [x19, #LAB_RP_KIND]         // kind, sum
    sxtw    x9, w22                             // signo is an int
    ldr     x10, [x23, #SI_ADDR]
    cmp     w9, #31                             // SIGSYS (qemu-user forwards a refused host call):
    b.ne    1f
    ldr     x10, [x24, #UC_X8]                  // the guest's system-call number instead
1:  stp     x9, x10, [x19, #LAB_RP_SIGNO]       // signo, si_addr
    ldr     x9, [x24, #UC_PC]
    str     x9, [x19, #LAB_RP_PC]               // pc (current is stored above)
.Lfault_send:
    bl      send_reply
    LOADADDR x9, lab_io_seq
    ldr     x10, [x9]
    add     x10, x10, #1
    str     x10, [x9]
    LOADADDR x9, .Lfault_resume
    str     x9, [x24, #UC_PC]
    LOADADDR x9, lab_loop_sp
    ldr     x9, [x9]
    str     x9, [x24, #UC_SP]
    mov     x9, sp                              // below the frame; the handler uses no stack
    sub     x9, x9, #256
    str     x9, [x24, #UC_X0]
    mov     x30, x25
    ret
// x0 = the signal whose handler is not ours, x1 = that handler: a KIND_HANDLER reply (as after
// lab_batch; the checksum covers the whole call table) in place of the fault's.
.Lfault_foreign_handler:
    stp     x0, x1, [x19, #LAB_RP_SIGNO]        // signo, si_addr
    bl      checksum
    mov     x9, #LAB_KIND_HANDLER
    stp     x9, x0, [x19, #LAB_RP_KIND]         // kind, sum
    b       .Lfault_send
    .size   lab_fault_handler, . - lab_fault_handler
    .globl  lab_syscalls_end
lab_syscalls_end:

// lab_arena must be the last object of the image (its end = end of the last mapped page):
// driver.o is linked last and lab_arena is the last thing in its .bss.
    .bss
    .balign 16
lab_drv_state:                                  // entry pointer, lab_batch's sp, index
    .zero   32
lab_io_seq:                                     // sequence number of the next request
    .zero   8
lab_loop_sp:                                    // sp at the top of the request loop
    .zero   8
    .balign 16
lab_io_sum:                                     // checksum range of the current request
    .zero   16
// batch_clean zeroes lab_oldact, lab_io_req and lab_io_rep as one run: keep them together.
lab_oldact:                                     // check_handlers: struct kernel_sigaction
    .zero   32
lab_io_req:
    .zero   LAB_REQUEST_SIZE
lab_io_rep:
    .zero   LAB_REPLY_SIZE
    .balign 16
lab_altstack:
    .zero   LAB_ALTSTACK_SIZE
    .balign 16
lab_prot_id:                                    // protect: id of the table in force, 0 = none
    .zero   16
lab_stack:
    .zero   LAB_STACK_SIZE - 16
    .globl  lab_stack_top
    .type   lab_stack_top, %object
lab_stack_top:
    .balign 4096
    .globl  lab_arena
    .type   lab_arena, %object
lab_arena:
    .zero   LAB_ARENA_SIZE
    .size   lab_arena, LAB_ARENA_SIZE
