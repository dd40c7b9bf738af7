//! The driver protocol, defined once (kernels/README.md, "Driver protocol"): the `lab_arena`
//! header and call-entry words, the protection table, the poison step, the sizes of the
//! driver's areas, the file descriptors and framed tokens of the qemu/native I/O loop, the exit
//! codes of `_start`, the signals it handles, and the per-architecture callee-saved register
//! lists (from [`crate::abi`]).
//!
//! Everything else is derived from here: [`c_header`] renders `lab_protocol.h`, which
//! `lab/src/toolchain.rs` writes next to every build and every `driver.S` `#include`s (a copy
//! for readers is `kernels/include/lab_protocol.h`, kept equal by a test); [`readme_tables`]
//! renders the tables of kernels/README.md (also kept equal by a test); `lab/src/batch/`,
//! the Unicorn and process backends use the constants below.
//!
//! This module holds protocol constants only; where buffers, guards and the kernel stack go in
//! the arena is layout, in `lab/src/batch/`.

use std::fmt::Write as _;

use crate::abi::Abi;
use crate::arch::Arch;

/// Who writes a word of the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The host lays it out before the batch.
    Host,
    /// The driver fills it in while running the batch.
    Driver,
    /// Nobody (reserved).
    Nobody,
}

impl Writer {
    fn name(self) -> &'static str {
        match self {
            Writer::Host => "host",
            Writer::Driver => "driver",
            Writer::Nobody => "",
        }
    }
}

/// One u64 word of the arena header or of a call entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    /// Field name, lower case (`resp_len`); the C macro is `LAB_H_RESP_LEN` / `LAB_E_RESP_LEN`.
    pub name: &'static str,
    /// Word index from the start of the header or entry.
    pub index: usize,
    /// Who writes it.
    pub writer: Writer,
    /// What it means, one line.
    pub doc: &'static str,
}

impl Word {
    /// Byte offset of the word (index × 8).
    pub const fn offset(&self) -> usize {
        self.index * 8
    }
}

const fn w(name: &'static str, index: usize, writer: Writer, doc: &'static str) -> Word {
    Word { name, index, writer, doc }
}

/// The `lab_arena` header: u64 words at the start of `lab_arena`.
pub mod header {
    use super::{w, Word, Writer::*};
    /// Number of call entries in the table.
    pub const NCALLS: Word = w("ncalls", 0, Host, "number of call entries in the table");
    /// Index of the first call to run (resume after a fault).
    pub const START: Word = w("start", 1, Host, "index of the first call to run (resume after a fault)");
    /// Absolute guest address of call entry 0.
    pub const TABLE: Word = w("table", 2, Host, "absolute guest address of call entry 0");
    /// Bytes from the start of `lab_arena` that hold results (header, table, writable buffers).
    pub const RESP_LEN: Word =
        w("resp_len", 3, Host, "bytes from the start of `lab_arena` the host reads back (results)");
    /// Index of the call in flight (stored before each call).
    pub const CURRENT: Word = w("current", 4, Driver, "index of the call in flight (stored before each call)");
    /// Number of calls completed (`ncalls` at a normal end).
    pub const DONE: Word = w("done", 5, Driver, "number of calls completed (`ncalls` at a normal end)");
    /// Absolute guest address of the protection table.
    pub const PROT_TABLE: Word = w("prot_table", 6, Host, "absolute guest address of the protection table");
    /// Number of protection-table entries.
    pub const PROT_COUNT: Word = w("prot_count", 7, Host, "number of protection-table entries");
    /// Nonzero id of the protection table, which the qemu/native host gives every table it
    /// sends to a guest (0: the guest keeps no id and applies the whole table every time). The
    /// Unicorn backend writes the same words (and delta entries), which its engine does not
    /// read, so that a kernel reads the same header there.
    pub const PROT_ID: Word =
        w("prot_id", 8, Host, "id of the protection table (0 = none; Unicorn stamps it as the host does)");
    /// Id of the table the delta entries turn into this one; the delta applies only when that
    /// table is in force, else the whole table is applied.
    pub const PROT_BASE: Word =
        w("prot_base", 9, Host, "id of the table the delta turns into this one (0 = apply the whole table)");
    /// Absolute guest address of the delta entries (the same three words as the table's).
    pub const DELTA_TABLE: Word = w("delta_table", 10, Host, "absolute guest address of the delta entries");
    /// Number of delta entries.
    pub const DELTA_COUNT: Word = w("delta_count", 11, Host, "number of delta entries");
    /// Every header word, in order.
    pub const ALL: [Word; 12] = [
        NCALLS,
        START,
        TABLE,
        RESP_LEN,
        CURRENT,
        DONE,
        PROT_TABLE,
        PROT_COUNT,
        PROT_ID,
        PROT_BASE,
        DELTA_TABLE,
        DELTA_COUNT,
    ];
    /// Words in the header.
    pub const WORDS: usize = ALL.len();
}

/// A call entry: [`entry::FIXED_WORDS`] fixed u64 words, then `saved[NSAVED]`.
pub mod entry {
    use super::{w, Word, Writer::*};
    /// Kernel address.
    pub const FN: Word = w("fn", 0, Host, "kernel address");
    /// First integer argument register (a0 / x0 / rdi), a full 64-bit word.
    pub const ARG0: Word = w("arg0", 1, Host, "argument register a0 / x0 / rdi (full 64-bit word)");
    /// Second integer argument register (a1 / x1 / rsi).
    pub const ARG1: Word = w("arg1", 2, Host, "argument register a1 / x1 / rsi");
    /// Third integer argument register (a2 / x2 / rdx).
    pub const ARG2: Word = w("arg2", 3, Host, "argument register a2 / x2 / rdx");
    /// Fourth integer argument register (a3 / x3 / rcx).
    pub const ARG3: Word = w("arg3", 4, Host, "argument register a3 / x3 / rcx");
    /// Copy source: before the call, `copy_len` bytes go from `copy_src` to `copy_dst`.
    pub const COPY_SRC: Word =
        w("copy_src", 5, Host, "before the call, copy `copy_len` bytes from here to `copy_dst` (memmove)");
    /// Copy destination.
    pub const COPY_DST: Word = w("copy_dst", 6, Host, "copy destination (a call starts from a snapshot)");
    /// Copy length in bytes, 0 = no copy.
    pub const COPY_LEN: Word = w("copy_len", 7, Host, "copy length in bytes, 0 = no copy");
    /// Poison seed.
    pub const SEED: Word = w("seed", 8, Host, "poison seed (below)");
    /// a0 / x0 / rax after the call.
    pub const RET: Word = w("ret", 9, Driver, "a0 / x0 / rax after the call");
    /// Stack pointer just before the call instruction.
    pub const SP_BEFORE: Word =
        w("sp_before", 10, Driver, "stack pointer just before the call (x86_64: before `call` pushes)");
    /// Stack pointer right after the return.
    pub const SP_AFTER: Word = w("sp_after", 11, Driver, "stack pointer right after the return");
    /// x86_64 RFLAGS after the return; 0 elsewhere.
    pub const FLAGS: Word = w("flags", 12, Driver, "x86_64: RFLAGS after the return (DF is bit 10); others 0");
    /// 1 when the call returned.
    pub const STATUS: Word = w("status", 13, Driver, "1 when the call returned");
    /// Stack pointer for the call: the top of the guarded kernel stack.
    pub const STACK: Word =
        w("stack", 14, Host, "stack pointer for the call: top of the guarded kernel stack (16-aligned)");
    /// The FP control registers after the return, as the arch's ABI table lays them out
    /// (`Abi::control`: x86_64 MXCSR | x87 control word << 32; aarch64 FPCR; riscv64 fcsr).
    pub const FPCTL: Word = w("fpctl", 15, Driver, "FP control registers after the return (ABI table's layout)");
    /// Every fixed word, in order.
    pub const ALL: [Word; 16] = [
        FN, ARG0, ARG1, ARG2, ARG3, COPY_SRC, COPY_DST, COPY_LEN, SEED, RET, SP_BEFORE, SP_AFTER, FLAGS, STATUS, STACK,
        FPCTL,
    ];
    /// Fixed words before `saved[]`.
    pub const FIXED_WORDS: usize = ALL.len();
}

/// Symbol the lab links between the kernels and the driver (`lab/src/toolchain.rs`): a
/// page-aligned, empty `.bss` section, so the driver's data starts on a page of its own and
/// everything writable below it belongs to the kernels.
pub const KERNEL_DATA_END: &str = "lab_kernel_data_end";

/// Symbol the lab links right after the kernels' `.text` and before the driver's
/// (`lab/src/toolchain.rs`): the kernels' code is the executable segment up to it
/// (`Image::kernel_code`), whatever symbols and helpers it holds.
pub const KERNEL_TEXT_END: &str = "lab_kernel_text_end";

/// Prefix of the lab's entry aliases: a user's kernel mapped with `--symbol CONTRACT=MINE` is
/// linked with `--defsym lab_entry_CONTRACT=MINE` (`lab/src/toolchain.rs`) and called through
/// it (`Image::entry`), so the objects' own `CONTRACT` symbol, if any, is left alone.
pub const ENTRY_PREFIX: &str = "lab_entry_";

/// Words per protection-table entry: `addr`, `len`, `prot` (Linux `PROT_*` bits).
pub const PROT_ENTRY_WORDS: usize = 3;
/// Step between poison values ([`crate::vocab::abi::POISON_STEP`]).
pub use crate::vocab::abi::POISON_STEP;
/// Guest page size: the arena and its guard pages are laid out in it (4 KiB on every Linux
/// target the lab runs).
pub const PAGE: u64 = 4096;

/// Bytes of `lab_arena` (32 MiB, 4096-aligned, the last object of the image).
pub const ARENA_SIZE: u64 = 32 << 20;
/// Bytes of the driver's own stack (`lab_stack_top`).
pub const DRIVER_STACK_SIZE: u64 = 1 << 20;
/// Bytes of the signal stack the fault handler runs on.
pub const ALTSTACK_SIZE: u64 = 64 << 10;

/// File descriptors the host hands to a qemu/native guest (the token stream is kept off fds
/// 0-2, so a kernel's stray write to stdout does not even touch it).
pub mod fd {
    /// A memfd holding the arena; `_start` maps it `MAP_SHARED | MAP_FIXED` over `lab_arena`.
    pub const ARENA: u64 = 3;
    /// Request tokens, host to guest.
    pub const REQUEST: u64 = 4;
    /// Reply tokens, guest to host.
    pub const REPLY: u64 = 5;
    /// Native guests only: the seccomp filters (a u64 byte length, the allow-list the x86_64
    /// driver installs after its set-up, then the batch filter its batch child installs; raw
    /// `struct sock_filter`s read to EOF; lab/src/backend/process/confine.rs).
    pub const SECCOMP: u64 = 9;
}

/// The framed tokens of the qemu/native I/O loop: fixed-size groups of u64 little-endian words.
/// Batch data never travels through the token pipes: it is in the shared arena.
pub mod token {
    /// First word of a request: ASCII "LABREQ01" read as a little-endian u64.
    pub const REQUEST_MAGIC: u64 = u64::from_le_bytes(*b"LABREQ01");
    /// First word of a reply: ASCII "LABREP01".
    pub const REPLY_MAGIC: u64 = u64::from_le_bytes(*b"LABREP01");
    /// Request words: `magic, seq, sum_off, sum_len`.
    pub const REQUEST_WORDS: usize = 4;
    /// Reply words: `magic, seq, kind, sum, signo, si_addr, pc, current`, then [`NREGS`]
    /// register words.
    pub const REPLY_WORDS: usize = REGS + NREGS;
    /// Word indices of a request.
    pub const MAGIC: usize = 0;
    /// Sequence number: 0 for the first request a process gets, then +1 for each; a reply
    /// repeats the number of the request it answers.
    pub const SEQ: usize = 1;
    /// Request: offset in `lab_arena` of the result words to checksum (the call table), bytes,
    /// a multiple of 8.
    pub const SUM_OFF: usize = 2;
    /// Request: their length in bytes, a multiple of 8.
    pub const SUM_LEN: usize = 3;
    /// Reply: [`KIND_DONE`], [`KIND_FAULT`] or [`KIND_HANDLER`].
    pub const KIND: usize = 2;
    /// Reply: [`checksum`](super::checksum) of the result words named by the request.
    pub const SUM: usize = 3;
    /// Reply, fault: the signal number.
    pub const SIGNO: usize = 4;
    /// Reply, fault: `si_addr`.
    pub const SI_ADDR: usize = 5;
    /// Reply, fault: the pc of the interrupted instruction.
    pub const PC: usize = 6;
    /// Reply, fault: the call in flight (`current` when the signal came).
    pub const CURRENT: usize = 7;
    /// Reply, fault: the first of [`NREGS`] words of the interrupted context's registers, so
    /// the host can compute the address of a fault whose signal carries none (an x86 `#GP`
    /// from a misaligned `movdqa`: `si_addr` 0). x86_64: `gregs[0..16]` of the `ucontext_t`
    /// (`REG_R8` .. `REG_RSP`, the arch row's `AlignSpec::fault_regs`); the other drivers leave
    /// them 0 (their alignment faults carry the address).
    pub const REGS: usize = 8;
    /// Register words in a reply.
    pub const NREGS: usize = 16;
    /// Reply kind: `lab_batch` returned.
    pub const KIND_DONE: u64 = 0;
    /// Reply kind: the fault handler ran; the process exits next.
    pub const KIND_FAULT: u64 = 1;
    /// Reply kind: `lab_batch` returned or the fault handler ran, and the driver found a
    /// handler of one of [`SIGNALS`](super::SIGNALS) that is not its own
    /// (`rt_sigaction(sig, NULL, &old)`, qemu-user, where the host cannot see the guest's
    /// handlers): [`SIGNO`] is the signal, [`SI_ADDR`] the handler, [`CURRENT`] the call in
    /// flight when a fault sent it. Kernel code installed it; the checksum covers the whole
    /// requested range.
    pub const KIND_HANDLER: u64 = 2;
}

/// FNV-1a offset basis and prime (64-bit) for [`checksum`] ([`crate::fnv`]).
pub use crate::fnv::{OFFSET as FNV_OFFSET, PRIME as FNV_PRIME};

/// FNV-1a over u64 little-endian words (not bytes): `h = FNV_OFFSET; for w { h = (h ^ w) *
/// FNV_PRIME }`. The guest computes it over the call table after a batch, the host over what
/// it reads back. Trailing bytes of a length that is not a multiple of 8 are ignored.
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes
        .chunks_exact(8)
        .fold(FNV_OFFSET, |h, c| (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(FNV_PRIME))
}

/// An exit status of `_start` (the same on every architecture).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Macro suffix (`LAB_EXIT_TRUNCATED`).
    pub name: &'static str,
    /// The status.
    pub code: i32,
    /// What it means.
    pub doc: &'static str,
}

/// Exit statuses of `_start`.
pub mod exit {
    use super::Exit;
    /// The request stream ended between tokens.
    pub const OK: Exit = Exit { name: "OK", code: 0, doc: "the request stream ended between tokens" };
    /// The request stream ended inside a token.
    pub const TRUNCATED: Exit = Exit { name: "TRUNCATED", code: 2, doc: "the request stream ended inside a token" };
    /// The fault handler sent its reply.
    pub const FAULT: Exit = Exit { name: "FAULT", code: 3, doc: "the fault handler sent its reply" };
    /// A request with a wrong magic, sequence number or checksum range.
    pub const PROTOCOL: Exit =
        Exit { name: "PROTOCOL", code: 4, doc: "a request with a wrong magic, sequence number or checksum range" };
    /// A read or write of a token failed (other than EINTR, which is retried).
    pub const IO: Exit = Exit { name: "IO", code: 5, doc: "reading or writing a token failed (EINTR is retried)" };
    /// `mprotect` failed (applying or lifting the protection table).
    pub const MPROTECT: Exit = Exit { name: "MPROTECT", code: 6, doc: "`mprotect` failed" };
    /// Mapping the shared arena (fd 3) over `lab_arena` failed.
    pub const MMAP: Exit =
        Exit { name: "MMAP", code: 7, doc: "mapping the shared arena (fd 3) over `lab_arena` failed" };
    /// The host's seccomp allow-list (fd 9) could not be read or installed.
    pub const SECCOMP: Exit =
        Exit { name: "SECCOMP", code: 8, doc: "the seccomp allow-list (fd 9) could not be read or installed" };
    /// A native batch child (x86_64 driver, `.Lbatch_child`) sent its reply, done or fault;
    /// the status of the child, which the parent waits for, never of the guest.
    pub const REPLIED: Exit =
        Exit { name: "REPLIED", code: 9, doc: "a batch child sent its reply (the child's status, not the guest's)" };
    /// A native batch child was killed by a signal before it replied: the guest ends too,
    /// closing the reply stream. (A child that exits itself ends the guest with its code.)
    pub const CHILD: Exit =
        Exit { name: "CHILD", code: 10, doc: "the batch's child process was killed by a signal before it replied" };
    /// Every status, in order.
    pub const ALL: [Exit; 10] = [OK, TRUNCATED, FAULT, PROTOCOL, IO, MPROTECT, MMAP, SECCOMP, REPLIED, CHILD];

    /// The meaning of status `code`, if it is one of `_start`'s.
    pub fn describe(code: i32) -> Option<&'static str> {
        ALL.iter().find(|e| e.code == code).map(|e| e.doc)
    }
}

/// Signals `_start` handles (Linux numbers, the same on riscv64, aarch64 and x86_64): each one
/// ends the process with a fault reply. SIGUSR1 is the host's poke when a batch runs past its
/// time budget. Every other signal is blocked while the handler runs.
pub const SIGNALS: [(&str, u64); 7] =
    [("SIGILL", 4), ("SIGTRAP", 5), ("SIGBUS", 7), ("SIGFPE", 8), ("SIGUSR1", 10), ("SIGSEGV", 11), ("SIGSYS", 31)];

/// Everything the header is rendered from, so a test can render a changed protocol.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Header words.
    pub header: Vec<Word>,
    /// Fixed entry words.
    pub entry: Vec<Word>,
    /// The poison step.
    pub poison_step: u64,
}

impl Spec {
    /// The protocol as this build defines it.
    pub fn current() -> Spec {
        Spec { header: header::ALL.to_vec(), entry: entry::ALL.to_vec(), poison_step: POISON_STEP }
    }
}

/// The C preprocessor guard and assembler condition for each architecture.
fn arch_guard(abi: &Abi) -> &'static str {
    abi.arch.spec().c_guard
}

/// Renders `lab_protocol.h` for `spec`: `#define`s only, for the drivers' `.S` files.
pub fn c_header(spec: &Spec) -> String {
    let mut h = String::new();
    let mut line = |s: String| {
        h.push_str(&s);
        h.push('\n');
    };
    line("/* lab_protocol.h: GENERATED from lab/src/protocol.rs by the lab at every image build.".into());
    line(" * Do not edit; kernels/include/lab_protocol.h is a copy for readers (a test keeps it equal). */".into());
    line("#ifndef LAB_PROTOCOL_H".into());
    line("#define LAB_PROTOCOL_H".into());
    line(String::new());
    line("/* lab_arena header: byte offsets of u64 words */".into());
    for f in &spec.header {
        line(format!(
            "#define LAB_H_{:<16} {:#06x}  /* {}: {} */",
            f.name.to_uppercase(),
            f.offset(),
            f.writer.name(),
            f.doc
        ));
    }
    line(format!("#define LAB_HEADER_SIZE    {}", spec.header.len() * 8));
    line(String::new());
    line("/* call entry: byte offsets of u64 words; saved[] follows the fixed words */".into());
    for f in &spec.entry {
        line(format!("#define LAB_E_{:<16} {:>4}  /* {} */", f.name.to_uppercase(), f.offset(), f.doc));
    }
    line(format!(
        "#define LAB_E_SAVED            {:>4}  /* saved[i] at LAB_E_SAVED + 8 * i, ABI order */",
        spec.entry.len() * 8
    ));
    line(format!(
        "#define LAB_PROT_ENTRY_SIZE    {:>4}  /* protection table: addr, len, prot */",
        PROT_ENTRY_WORDS * 8
    ));
    line(String::new());
    line(format!("#define LAB_POISON_STEP    {:#018x}  /* saved[i] = seed + (i + 1) * step */", spec.poison_step));
    line(format!("#define LAB_ARENA_SIZE     {:#x}", ARENA_SIZE));
    line(format!("#define LAB_STACK_SIZE     {:#x}", DRIVER_STACK_SIZE));
    line(format!("#define LAB_ALTSTACK_SIZE  {:#x}", ALTSTACK_SIZE));
    line(String::new());
    line("/* qemu/native I/O: file descriptors and framed tokens (u64 words) */".into());
    line(format!("#define LAB_FD_ARENA       {}", fd::ARENA));
    line(format!("#define LAB_FD_REQUEST     {}", fd::REQUEST));
    line(format!("#define LAB_FD_REPLY       {}", fd::REPLY));
    line(format!("#define LAB_FD_SECCOMP     {}", fd::SECCOMP));
    line(format!("#define LAB_REQUEST_MAGIC  {:#018x}  /* \"LABREQ01\" */", token::REQUEST_MAGIC));
    line(format!("#define LAB_REPLY_MAGIC    {:#018x}  /* \"LABREP01\" */", token::REPLY_MAGIC));
    line(format!("#define LAB_REQUEST_SIZE   {}", token::REQUEST_WORDS * 8));
    line(format!("#define LAB_REPLY_SIZE     {}", token::REPLY_WORDS * 8));
    for (name, i) in
        [("MAGIC", token::MAGIC), ("SEQ", token::SEQ), ("SUM_OFF", token::SUM_OFF), ("SUM_LEN", token::SUM_LEN)]
    {
        line(format!("#define LAB_RQ_{name:<12} {}", i * 8));
    }
    for (name, i) in [
        ("MAGIC", token::MAGIC),
        ("SEQ", token::SEQ),
        ("KIND", token::KIND),
        ("SUM", token::SUM),
        ("SIGNO", token::SIGNO),
        ("SI_ADDR", token::SI_ADDR),
        ("PC", token::PC),
        ("CURRENT", token::CURRENT),
        ("REGS", token::REGS),
    ] {
        line(format!("#define LAB_RP_{name:<12} {}", i * 8));
    }
    line(format!("#define LAB_RP_NREGS       {}", token::NREGS));
    line(format!("#define LAB_KIND_DONE      {}", token::KIND_DONE));
    line(format!("#define LAB_KIND_FAULT     {}", token::KIND_FAULT));
    line(format!("#define LAB_KIND_HANDLER   {}", token::KIND_HANDLER));
    line(format!("#define LAB_FNV_OFFSET     {FNV_OFFSET:#018x}  /* checksum: FNV-1a over u64 words */"));
    line(format!("#define LAB_FNV_PRIME      {FNV_PRIME:#018x}"));
    line(String::new());
    line("/* exit statuses of _start */".into());
    for e in exit::ALL {
        line(format!("#define LAB_EXIT_{:<10} {}  /* {} */", e.name, e.code, e.doc));
    }
    line(String::new());
    line("/* signals handled by _start (one fault reply each); use with .irp */".into());
    let sigs: Vec<String> = SIGNALS.iter().map(|(_, n)| n.to_string()).collect();
    line(format!("#define LAB_SIGNALS        {}  /* {} */", sigs.join(", "), SIGNALS.map(|(n, _)| n).join(" ")));
    line(String::new());
    line("/* callee-saved registers in ABI order (lab/src/abi.rs): integer ones, then FP ones */".into());
    for (k, abi) in Arch::ALL.map(|a| a.spec().abi).into_iter().enumerate() {
        line(format!("#{} {}", if k == 0 { "if" } else { "elif" }, arch_guard(abi)));
        let (gprs, fprs) = abi.saved.split_at(abi.saved_gprs);
        line(format!("#define LAB_NSAVED         {}  /* {} */", abi.saved.len(), abi.source));
        line(format!("#define LAB_NSAVED_GPRS    {}", gprs.len()));
        line(format!("#define LAB_SAVED_GPRS     {}", gprs.join(", ")));
        if !fprs.is_empty() {
            line(format!("#define LAB_SAVED_FPRS     {}", fprs.join(", ")));
        }
        if let Some(c) = abi.control {
            line(format!("#define LAB_FPCTL_POISON   {:#018x}  /* {} */", c.poison, c.layout));
            line(format!("#define LAB_FPCTL_DEFAULT  {:#018x}", c.default));
        }
    }
    line("#endif".into());
    line("#define LAB_ENTRY_SIZE     (LAB_E_SAVED + 8 * LAB_NSAVED)".into());
    line(String::new());
    line("#endif /* LAB_PROTOCOL_H */".into());
    h
}

/// The header and call-entry tables of kernels/README.md, rendered from the current protocol.
pub fn readme_tables() -> String {
    let mut s = String::from("`lab_arena` header (u64 words at the start of `lab_arena`):\n\n");
    s.push_str("| offset | field | written by | meaning |\n|---|---|---|---|\n");
    for f in header::ALL {
        let _ = writeln!(s, "| {:#04x} | `{}` | {} | {} |", f.offset(), f.name, f.writer.name(), f.doc);
    }
    s.push_str("\nCall entry (u64 words; entry size = `(16 + NSAVED) * 8` bytes):\n\n");
    s.push_str("| word | offset | field | written by | meaning |\n|---|---|---|---|---|\n");
    for f in entry::ALL {
        let _ = writeln!(s, "| {} | {} | `{}` | {} | {} |", f.index, f.offset(), f.name, f.writer.name(), f.doc);
    }
    let _ = writeln!(
        s,
        "| {}.. | {}.. | `saved[NSAVED]` | driver | every callee-saved register after the return, in ABI order |",
        entry::FIXED_WORDS,
        entry::FIXED_WORDS * 8
    );
    s.push_str("\nCallee-saved registers (`saved[]`, ABI order; `lab/src/abi.rs`):\n\n");
    s.push_str("| arch | NSAVED | order | source |\n|---|---|---|---|\n");
    for abi in Arch::ALL.map(|a| a.spec().abi) {
        let _ = writeln!(s, "| {} | {} | {} | {} |", abi.arch, abi.saved.len(), abi.saved.join(", "), abi.source);
    }
    s.push_str("\nExit statuses of `_start` (every architecture):\n\n| status | meaning |\n|---|---|\n");
    for e in exit::ALL {
        let _ = writeln!(s, "| {} | {} |", e.code, e.doc);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{AARCH64, RISCV64, X86_64};

    #[test]
    fn words_are_numbered_in_order_without_gaps() {
        for (i, f) in header::ALL.iter().enumerate() {
            assert_eq!(f.index, i, "header {}", f.name);
        }
        for (i, f) in entry::ALL.iter().enumerate() {
            assert_eq!(f.index, i, "entry {}", f.name);
        }
    }

    #[test]
    fn checksum_is_fnv1a_over_words() {
        assert_eq!(checksum(&[]), FNV_OFFSET);
        let one = (FNV_OFFSET ^ 0x0807_0605_0403_0201).wrapping_mul(FNV_PRIME);
        assert_eq!(checksum(&[1, 2, 3, 4, 5, 6, 7, 8]), one);
        assert_ne!(checksum(&[0; 16]), checksum(&[0; 8]), "length matters");
    }

    #[test]
    fn changing_an_offset_in_the_source_changes_the_header() {
        let spec = Spec::current();
        let before = c_header(&spec);
        assert!(before.contains("#define LAB_H_START            0x0008"), "{before}");
        let mut moved = spec.clone();
        moved.header.swap(1, 3);
        moved.header[1].index = 1;
        moved.header[3].index = 3;
        let after = c_header(&moved);
        assert!(after.contains("#define LAB_H_START            0x0018"), "{after}");
        assert!(after.contains("#define LAB_H_RESP_LEN         0x0008"), "{after}");
        let mut stepped = spec;
        stepped.poison_step = 3;
        assert!(c_header(&stepped).contains("#define LAB_POISON_STEP    0x0000000000000003"));
    }

    #[test]
    fn the_fp_registers_follow_the_integer_ones_in_every_saved_list() {
        for (abi, fp) in [(&RISCV64, "fs"), (&AARCH64, "d"), (&X86_64, "-")] {
            let (gprs, fprs) = abi.saved.split_at(abi.saved_gprs);
            assert!(gprs.iter().all(|r| !r.starts_with(fp)), "{}: {gprs:?}", abi.arch);
            assert!(fprs.iter().all(|r| r.starts_with(fp)), "{}: {fprs:?}", abi.arch);
        }
    }

    #[test]
    fn every_arch_section_lists_its_saved_registers() {
        let h = c_header(&Spec::current());
        assert!(h.contains("#define LAB_SAVED_GPRS     rbx, rbp, r12, r13, r14, r15"), "{h}");
        assert!(h.contains("#define LAB_SAVED_FPRS     d8, d9, d10, d11, d12, d13, d14, d15"), "{h}");
        assert!(h.contains("#define LAB_SAVED_GPRS     s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, gp, tp"));
    }
}
