/* lab_protocol.h: GENERATED from lab/src/protocol.rs by the lab at every image build.
 * Do not edit; kernels/include/lab_protocol.h is a copy for readers (a test keeps it equal). */
#ifndef LAB_PROTOCOL_H
#define LAB_PROTOCOL_H

/* lab_arena header: byte offsets of u64 words */
#define LAB_H_NCALLS           0x0000  /* host: number of call entries in the table */
#define LAB_H_START            0x0008  /* host: index of the first call to run (resume after a fault) */
#define LAB_H_TABLE            0x0010  /* host: absolute guest address of call entry 0 */
#define LAB_H_RESP_LEN         0x0018  /* host: bytes from the start of `lab_arena` the host reads back (results) */
#define LAB_H_CURRENT          0x0020  /* driver: index of the call in flight (stored before each call) */
#define LAB_H_DONE             0x0028  /* driver: number of calls completed (`ncalls` at a normal end) */
#define LAB_H_PROT_TABLE       0x0030  /* host: absolute guest address of the protection table */
#define LAB_H_PROT_COUNT       0x0038  /* host: number of protection-table entries */
#define LAB_H_PROT_ID          0x0040  /* host: id of the protection table (0 = none; Unicorn stamps it as the host does) */
#define LAB_H_PROT_BASE        0x0048  /* host: id of the table the delta turns into this one (0 = apply the whole table) */
#define LAB_H_DELTA_TABLE      0x0050  /* host: absolute guest address of the delta entries */
#define LAB_H_DELTA_COUNT      0x0058  /* host: number of delta entries */
#define LAB_HEADER_SIZE    96

/* call entry: byte offsets of u64 words; saved[] follows the fixed words */
#define LAB_E_FN                  0  /* kernel address */
#define LAB_E_ARG0                8  /* argument register a0 / x0 / rdi (full 64-bit word) */
#define LAB_E_ARG1               16  /* argument register a1 / x1 / rsi */
#define LAB_E_ARG2               24  /* argument register a2 / x2 / rdx */
#define LAB_E_ARG3               32  /* argument register a3 / x3 / rcx */
#define LAB_E_COPY_SRC           40  /* before the call, copy `copy_len` bytes from here to `copy_dst` (memmove) */
#define LAB_E_COPY_DST           48  /* copy destination (a call starts from a snapshot) */
#define LAB_E_COPY_LEN           56  /* copy length in bytes, 0 = no copy */
#define LAB_E_SEED               64  /* poison seed (below) */
#define LAB_E_RET                72  /* a0 / x0 / rax after the call */
#define LAB_E_SP_BEFORE          80  /* stack pointer just before the call (x86_64: before `call` pushes) */
#define LAB_E_SP_AFTER           88  /* stack pointer right after the return */
#define LAB_E_FLAGS              96  /* x86_64: RFLAGS after the return (DF is bit 10); others 0 */
#define LAB_E_STATUS            104  /* 1 when the call returned */
#define LAB_E_STACK             112  /* stack pointer for the call: top of the guarded kernel stack (16-aligned) */
#define LAB_E_FPCTL             120  /* FP control registers after the return (ABI table's layout) */
#define LAB_E_SAVED             128  /* saved[i] at LAB_E_SAVED + 8 * i, ABI order */
#define LAB_PROT_ENTRY_SIZE      24  /* protection table: addr, len, prot */

#define LAB_POISON_STEP    0x9e3779b97f4a7c15  /* saved[i] = seed + (i + 1) * step */
#define LAB_ARENA_SIZE     0x2000000
#define LAB_STACK_SIZE     0x100000
#define LAB_ALTSTACK_SIZE  0x10000

/* qemu/native I/O: file descriptors and framed tokens (u64 words) */
#define LAB_FD_ARENA       3
#define LAB_FD_REQUEST     4
#define LAB_FD_REPLY       5
#define LAB_FD_SECCOMP     9
#define LAB_REQUEST_MAGIC  0x313051455242414c  /* "LABREQ01" */
#define LAB_REPLY_MAGIC    0x313050455242414c  /* "LABREP01" */
#define LAB_REQUEST_SIZE   32
#define LAB_REPLY_SIZE     192
#define LAB_RQ_MAGIC        0
#define LAB_RQ_SEQ          8
#define LAB_RQ_SUM_OFF      16
#define LAB_RQ_SUM_LEN      24
#define LAB_RP_MAGIC        0
#define LAB_RP_SEQ          8
#define LAB_RP_KIND         16
#define LAB_RP_SUM          24
#define LAB_RP_SIGNO        32
#define LAB_RP_SI_ADDR      40
#define LAB_RP_PC           48
#define LAB_RP_CURRENT      56
#define LAB_RP_REGS         64
#define LAB_RP_NREGS       16
#define LAB_KIND_DONE      0
#define LAB_KIND_FAULT     1
#define LAB_KIND_HANDLER   2
#define LAB_FNV_OFFSET     0xcbf29ce484222325  /* checksum: FNV-1a over u64 words */
#define LAB_FNV_PRIME      0x00000100000001b3

/* exit statuses of _start */
#define LAB_EXIT_OK         0  /* the request stream ended between tokens */
#define LAB_EXIT_TRUNCATED  2  /* the request stream ended inside a token */
#define LAB_EXIT_FAULT      3  /* the fault handler sent its reply */
#define LAB_EXIT_PROTOCOL   4  /* a request with a wrong magic, sequence number or checksum range */
#define LAB_EXIT_IO         5  /* reading or writing a token failed (EINTR is retried) */
#define LAB_EXIT_MPROTECT   6  /* `mprotect` failed */
#define LAB_EXIT_MMAP       7  /* mapping the shared arena (fd 3) over `lab_arena` failed */
#define LAB_EXIT_SECCOMP    8  /* the seccomp allow-list (fd 9) could not be read or installed */
#define LAB_EXIT_REPLIED    9  /* a batch child sent its reply (the child's status, not the guest's) */
#define LAB_EXIT_CHILD      10  /* the batch's child process was killed by a signal before it replied */

/* signals handled by _start (one fault reply each); use with .irp */
#define LAB_SIGNALS        4, 5, 7, 8, 10, 11, 31  /* SIGILL SIGTRAP SIGBUS SIGFPE SIGUSR1 SIGSEGV SIGSYS */

/* callee-saved registers in ABI order (lab/src/abi.rs): integer ones, then FP ones */
#if defined(__riscv)
#define LAB_NSAVED         26  /* RISC-V ELF psABI, Register Convention (LP64D) */
#define LAB_NSAVED_GPRS    14
#define LAB_SAVED_GPRS     s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, gp, tp
#define LAB_SAVED_FPRS     fs0, fs1, fs2, fs3, fs4, fs5, fs6, fs7, fs8, fs9, fs10, fs11
#define LAB_FPCTL_POISON   0x0000000000000060  /* fcsr (fflags in bits 0-4, frm in bits 5-7) */
#define LAB_FPCTL_DEFAULT  0x0000000000000000
#elif defined(__aarch64__)
#define LAB_NSAVED         19  /* AAPCS64 §6.1.1, §6.1.2 */
#define LAB_NSAVED_GPRS    11
#define LAB_SAVED_GPRS     x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29
#define LAB_SAVED_FPRS     d8, d9, d10, d11, d12, d13, d14, d15
#define LAB_FPCTL_POISON   0x0000000001400000  /* FPCR */
#define LAB_FPCTL_DEFAULT  0x0000000000000000
#elif defined(__x86_64__)
#define LAB_NSAVED         6  /* System V AMD64 psABI §3.2.1 (Figure 3.4) */
#define LAB_NSAVED_GPRS    6
#define LAB_SAVED_GPRS     rbx, rbp, r12, r13, r14, r15
#define LAB_FPCTL_POISON   0x00000e7f0000bf80  /* MXCSR in bits 0-31, the x87 control word in bits 32-47 */
#define LAB_FPCTL_DEFAULT  0x0000037f00001f80
#endif
#define LAB_ENTRY_SIZE     (LAB_E_SAVED + 8 * LAB_NSAVED)

#endif /* LAB_PROTOCOL_H */
