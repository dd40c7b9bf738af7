//! qemu-user and native backends: the image's `_start` as a long-lived child process
//! (kernels/README.md, "`_start` I/O loop").
//!
//! The arena is shared memory: the host creates a memfd the size of `lab_arena`, maps it, and
//! hands it to the child as fd 3; `_start` maps it `MAP_SHARED | MAP_FIXED` over `lab_arena`.
//! Batches never travel through a pipe: the host writes the payload into the mapping and sends
//! a small framed request token on fd 4; the guest answers with a reply token on fd 5
//! ([`crate::protocol::token`]: magic, sequence number, checksum of the call table, and the
//! fault words). Any surprise - a wrong magic, sequence number or checksum, a short token, the
//! stream closing, or any byte on the guest's stdout - kills the guest and fails only the calls
//! of that entry; the next entry starts a fresh guest, so nothing is judged on another batch's
//! data.
//!
//! A qemu-user process costs about 20 ms to start (docs/DESIGN.md), so it is started once and
//! restarted only after the guest dies. A batch past its time budget is poked with SIGUSR1: the
//! guest's fault handler reports the PC and the call in flight like any fault, and the lab
//! resumes at the next call. Only a guest that does not answer the poke within [`POKE_GRACE`]
//! is killed without a PC.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::recycled::Recycler;
use super::{Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::abi::Abi;
use crate::align;
use crate::batch::Batch;
use crate::image::{Arena, Image};
use crate::protocol::{self, header, token};
use crate::sandbox::Support;
use crate::toolchain;
use confine::Guest as Confined;
use prot_delta::InForce;

mod claims;
pub mod confine;
pub(crate) mod exchange;
mod guest;
mod host_check;
pub(crate) mod prot_delta;
mod recover;
mod shared_arena;
mod traced;
mod vma_query;
mod witness;
pub use witness::{gaps as witness_gaps, probe as witness_probe};

use exchange::*;
use guest::*;
use shared_arena::*;

/// How long a poked guest has to send its fault reply before it is killed.
pub const POKE_GRACE: Duration = Duration::from_secs(2);

/// Why no reply came when the guest closed its end (it died).
const CLOSED: &str = "the reply stream closed";

/// How [`ProcessBackend::reap`] describes a guest the kernel killed with SIGSYS (ExitStatus's
/// Display). Only the lab's seccomp filter does that: a trapped call made while the guest had
/// every signal blocked (qemu-user blocks them around its `fork`).
const SIGSYS_DEATH: &str = "signal: 31 (SIGSYS)";
const REFUSED_BLOCKED: &str = "refused by the lab's seccomp filter while the guest blocked every signal (qemu-user \
     does around fork), so the guest could not report the call: it was killed by SIGSYS";

/// The detail of a fault named from the reply's registers ([`ProcessBackend::misaligned`]).
const NO_ADDRESS: &str = "the signal carried no address (si_addr 0, as for every #GP); the lab computed the operand's \
     address from the registers of the fault reply";

/// A running guest: its request and reply pipes, its stdout (checked
/// for stray bytes after every reply) and a reader thread for its stderr.
struct Guest {
    child: Child,
    requests: File,
    replies: File,
    stdout: ChildStdout,
    stderr: Receiver<String>,
    /// Sequence number of the next request.
    seq: u64,
    /// The host's tracer of a qemu-user guest (witness.rs).
    witness: Option<witness::Witness>,
}

/// qemu-user or native execution of the image.
pub struct ProcessBackend {
    kind: BackendKind,
    program: PathBuf,
    args: Vec<String>,
    limits: Limits,
    guest: Option<Guest>,
    arena: Arena,
    shared: Option<SharedArena>,
    /// Bytes of one call entry (fixed words and `saved[]`).
    entry_bytes: usize,
    /// Bytes of the architecture's system-call instruction (`ecall`, `svc #0`: 4; `syscall`: 2).
    syscall_len: u64,
    /// The guest's architecture (names the system calls it attempts).
    arch: crate::variant::Arch,
    /// The image (Landlock rules).
    image: PathBuf,
    /// Confinement the kernel offers (backend/process/confine.rs).
    support: Support,
    /// Guard pages of the batch last written ([`guard_ranges`]) and the payload they belong
    /// to (address and length, to notice a resume of another batch).
    guards: (Vec<(usize, usize)>, (usize, usize)),
    /// Checksum range and value of the last verified reply, for [`Backend::response`].
    last_sum: ((u64, u64), u64),
    /// The response ranges the host reads of the batch last written ([`Batch::response_ranges`]:
    /// header, call table, writable buffers), keyed like `guards`; empty key: every byte
    /// outside the guard pages (a raw [`Backend::execute`]).
    reads: (Vec<(usize, usize)>, (usize, usize)),
    /// The payload's data ranges ([`Batch::data_ranges`], sorted) of the batch last handed to
    /// [`Backend::execute_batch`], keyed like `guards`: the rest of its payload is zeros.
    writes: (Vec<(usize, usize)>, (usize, usize)),
    /// Response allocations handed back by [`Backend::recycle`], reused zeroed.
    recycler: Recycler,
    /// The protection table last sent to the guest, for the delta to the next
    /// ([`stamp`](Self::stamp)), and the delta entries' allocation.
    in_force: (InForce, Vec<crate::batch::Protection>),
    /// The kernels' aligned-only instructions whose operand address a fault reply's registers
    /// give ([`align::hook_sites`]; empty where the driver sends no registers), to name a fault
    /// whose signal carries no address ([`misaligned`](Self::misaligned)).
    aligned: Vec<crate::disasm::Insn>,
    /// What the host checks after the batch last handed to [`Backend::execute_batch`]
    /// (host_check.rs), and scratch buffers for the checks.
    plan: host_check::Plan,
    scratch: Vec<u8>,
    scratch_guards: Vec<(usize, usize)>,
    /// The image's executable segments (guest address, file bytes): the code the guest must
    /// still hold after every batch.
    code: Vec<(u64, Vec<u8>)>,
    /// qemu's exec log of the kernel range being counted (traced.rs), and that range.
    trace: Option<(std::sync::Arc<crate::backend::exec_trace::ExecTrace>, (u64, u64))>,
    /// The calls the entry in flight was sent (claims.rs checks its reply against them).
    sent: claims::Sent,
    /// Why a reply of the batch in flight was forged (claims.rs), once one was: every call of
    /// the batch fails with it ([`Backend::verify`]).
    forged: Option<String>,
    /// What the driver reported of a signal handler it did not install ([`token::KIND_HANDLER`]),
    /// for the batch in flight: every call of it fails with it ([`Backend::verify`]).
    foreign_handler: Option<String>,
    /// What the witness (witness.rs) saw during the batch in flight: the sentence and the guest
    /// addresses concerned; every call pointing there (or every call) fails with it.
    witnessed: Vec<(String, u64, u64)>,
    /// Guest address ranges `[start, end)` of the image's segments (the witness watches them).
    span: Vec<(u64, u64)>,
}

impl ProcessBackend {
    /// `qemu-<arch> -cpu <cpu> <image>`, after a probe that qemu accepts the CPU model.
    ///
    /// # Errors
    /// The qemu binary is missing ([`BackendError::Tool`], naming `qemu-user`), it refuses
    /// the variant's `-cpu` string ([`BackendError::Process`], with qemu's words), or the image
    /// has no `lab_arena`.
    pub fn qemu(image: &Image, cpu: &str, limits: Limits) -> Result<Self, BackendError> {
        let program = toolchain::find(toolchain::qemu_tool(image.arch))?;
        probe_qemu(&program, cpu, &image.path)
            .map_err(|reason| BackendError::Process { program: program.display().to_string(), reason })?;
        let args = vec!["-cpu".into(), cpu.into(), image.path.display().to_string()];
        Self::new(BackendKind::Qemu, program, args, image, limits)
    }

    /// The image executed directly (x86_64 host, x86_64 image).
    ///
    /// # Errors
    /// The image has no `lab_arena`.
    pub fn native(image: &Image, limits: Limits) -> Result<Self, BackendError> {
        Self::new(BackendKind::Native, image.path.clone(), Vec::new(), image, limits)
    }

    fn new(
        kind: BackendKind,
        program: PathBuf,
        args: Vec<String>,
        image: &Image,
        limits: Limits,
    ) -> Result<Self, BackendError> {
        let abi = Abi::of(image.arch);
        Ok(ProcessBackend {
            kind,
            program,
            args,
            limits,
            guest: None,
            arena: image.arena()?,
            shared: None,
            entry_bytes: (protocol::entry::FIXED_WORDS + abi.saved.len()) * 8,
            syscall_len: syscall_len(image.arch),
            arch: image.arch,
            image: image.path.clone(),
            support: Support::probe(),
            guards: (Vec::new(), (0, 0)),
            last_sum: ((0, 0), 0),
            reads: (Vec::new(), (0, 0)),
            writes: (Vec::new(), (0, 0)),
            recycler: Recycler::default(),
            in_force: (InForce::default(), Vec::new()),
            aligned: aligned_only_sites(image),
            plan: host_check::Plan::default(),
            scratch: Vec::new(),
            scratch_guards: Vec::new(),
            code: image.segments.iter().filter(|s| s.perms.exec).map(|s| (s.vaddr, s.data.clone())).collect(),
            trace: None,
            sent: claims::Sent::default(),
            forged: None,
            foreign_handler: None,
            witnessed: Vec::new(),
            span: image.segments.iter().map(|s| (s.vaddr, s.vaddr + s.memsz)).collect(),
        })
    }

    fn error(&self, reason: String) -> BackendError {
        BackendError::Process { program: self.program.display().to_string(), reason }
    }
}

/// How the guest answered one request (one run of the calls a batch's header names).
enum Answer {
    /// The guest answered with a reply that passed every check (or hung: empty `resp`).
    Run(RawRun),
    /// A protocol surprise ([`FaultKind::Protocol`]) or a guest that died without a reply
    /// ([`FaultKind::Crash`]); the guest is gone. `detail` adds how it ended.
    Surprise { kind: FaultKind, detail: String },
}

impl Backend for ProcessBackend {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    /// [`execute`](Backend::execute), reading back only the bytes the host's checks read
    /// ([`Batch::response_ranges`]): the rest of the response is zeros.
    fn execute_batch(&mut self, batch: &Batch) -> Result<RawRun, BackendError> {
        let key = (batch.payload.as_ptr() as usize, batch.payload.len());
        // Into the lists' own allocations: a batch of thousands of buffers would otherwise take
        // fresh memory for them each time.
        self.reads.0.clear();
        self.reads.0.extend(batch.response_ranges().map(|r| (r.start, r.end)));
        self.reads.1 = key;
        self.writes.0.clear();
        self.writes.0.extend(batch.data_ranges().filter(|r| !r.is_empty()).map(|r| (r.start, r.end)));
        self.writes.0.sort_unstable();
        self.writes.1 = key;
        self.plan = host_check::Plan::of(batch);
        self.forged = None;
        self.foreign_handler = None;
        self.witnessed.clear();
        self.execute(&batch.payload, batch.resp_len)
    }

    fn verify(&mut self, batch: &Batch) -> Vec<Fault> {
        self.host_verify(batch)
    }

    fn recycle(&mut self, resp: Vec<u8>) {
        self.recycler.give_back(resp);
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        self.forget_lent();
        let key = (payload.as_ptr() as usize, payload.len());
        // What `execute_batch` noted of this payload holds for this call alone, even one that
        // fails: a later raw payload at the same address is written and read back whole.
        let (read_key, write_key) = (std::mem::take(&mut self.reads.1), std::mem::take(&mut self.writes.1));
        if payload.len() as u64 > self.arena.size || resp_len > payload.len() {
            return Err(self.error(format!("a payload of {} bytes does not fit lab_arena", payload.len())));
        }
        if self.shared.is_none() {
            let size = self.arena.size.max(protocol::ARENA_SIZE) as usize;
            self.shared = Some(SharedArena::new(size).map_err(|e| self.error(e))?);
        }
        // A raw payload, not a batch's ([`Backend::execute_batch`]), is read back whole.
        self.reads.1 = if read_key == key { key } else { (0, 0) };
        guard_ranges(&mut self.guards.0, payload, self.arena.addr);
        self.guards.1 = key;
        let data = (write_key == key).then_some(self.writes.0.as_slice());
        self.shared.as_mut().expect("arena created").write_sparse(payload, &self.guards.0, data);
        self.plan.lay_poison(self.shared.as_mut().expect("arena created"), &self.guards.0);
        self.stamp(payload);
        self.sent = claims::Sent::of(payload, self.arena.addr);
        let sum = table_range(payload, self.arena.addr, self.entry_bytes);
        let mut answer = self.exchange(resp_len, sum, true)?;
        for _ in 0..KILL_RETRIES {
            if !answer.killed_from_outside() {
                break;
            }
            // Not the kernel's doing: run the batch again, whole, on a fresh guest.
            self.shared.as_mut().expect("arena created").write(payload);
            self.relay_poison();
            self.stamp(payload);
            answer = self.exchange(resp_len, sum, true)?;
        }
        match answer {
            Answer::Run(run) if run.resp.is_empty() => Ok(self.hung(payload, resp_len, run)),
            Answer::Run(run) => Ok(run),
            Answer::Surprise { kind, detail } => self.step(payload, resp_len, sum, (kind, detail)),
        }
    }

    /// The shared arena holds what the faulted entry left (`resp`, and inputs the guest could
    /// not write): only the header and protection table are written again, not the whole batch,
    /// and the guest keeps the protections in force (the table is the same). A fault returns
    /// only the header: a kernel that faults on every call costs no copy of the response per
    /// call ([`response`](Backend::response) reads it once).
    fn resume(&mut self, batch: &crate::batch::Batch, resp: &[u8], start: usize) -> Result<RawRun, BackendError> {
        self.forget_lent();
        let Some(shared) = self.shared.as_mut() else {
            return self.execute(&batch.resume_payload(resp, start), batch.resp_len);
        };
        rewrite_head(shared, &batch.payload, self.arena.addr, start);
        self.stamp(&batch.payload);
        self.sent = claims::Sent { start: start as u64, ..claims::Sent::of(&batch.payload, self.arena.addr) };
        self.note_batch(batch);
        let sum = from_entry(table_range(&batch.payload, self.arena.addr, self.entry_bytes), start, self.entry_bytes);
        match self.exchange(batch.resp_len, sum, false)? {
            Answer::Run(run) if run.resp.is_empty() => {
                let before = self.replay(batch, start)?;
                Ok(self.hung(&batch.resume_payload(&before, start), batch.resp_len, run))
            }
            Answer::Run(run) => Ok(run),
            answer @ Answer::Surprise { .. } if answer.killed_from_outside() => {
                // Not the kernel's doing: the rest of the batch again, as a fresh entry.
                let before = self.replay(batch, start)?;
                self.execute(&batch.resume_payload(&before, start), batch.resp_len)
            }
            Answer::Surprise { kind, detail } => {
                let before = self.replay(batch, start)?;
                self.step(&batch.resume_payload(&before, start), batch.resp_len, sum, (kind, detail))
            }
        }
    }

    /// The whole response after a resumed entry that ended in a fault, checked against the
    /// checksum of its reply.
    fn response(&mut self, resp_len: usize) -> Result<Vec<u8>, BackendError> {
        self.forget_lent();
        if self.shared.is_none() {
            return Ok(vec![0; resp_len]);
        }
        let resp = self.read_response(resp_len);
        let ((off, len), want) = self.last_sum;
        let got = protocol::checksum(resp.get(off as usize..(off + len) as usize).unwrap_or_default());
        if got != want {
            self.forget_lent();
            return Err(self
                .error(format!("the call table changed after its reply (checksum {got:#018x}, reply {want:#018x})")));
        }
        Ok(resp)
    }
}

impl Drop for ProcessBackend {
    fn drop(&mut self) {
        let _ = self.reap();
    }
}

/// How often a batch runs again after its guest was killed from outside
/// ([`Answer::killed_from_outside`]) before its calls are stepped one at a time.
const KILL_RETRIES: usize = 2;

impl Answer {
    /// Whether the guest died of SIGKILL ([`killed_from_outside`]): a crash, or a protocol
    /// surprise (a broken pipe) whose guest ended so.
    fn killed_from_outside(&self) -> bool {
        match self {
            Answer::Run(_) => false,
            Answer::Surprise { kind: FaultKind::Crash(how), .. } => killed_from_outside(how),
            Answer::Surprise { detail, .. } => {
                detail.split_once("guest ended: ").is_some_and(|(_, how)| killed_from_outside(how))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn guest_stderr_is_bounded_and_its_control_characters_escaped() {
        let mut noisy: Vec<u8> = b"\x1b[2Jboom\n".to_vec();
        noisy.extend(std::iter::repeat_n(b'x', 10_000));
        let text = super::bounded_stderr(&mut noisy.as_slice());
        assert!(text.starts_with("\\u{1b}[2Jboom\n"), "{}", &text[..20]);
        let tail = 10_000 + 9 - super::STDERR_KEPT;
        assert!(text.ends_with(&format!("x ... and {tail} more bytes")), "{}", &text[text.len() - 40..]);
    }

    use super::*;
    use crate::variant::Variant;

    /// Starts the guest of `variant` under qemu, sends `bytes` on its request pipe, closes it
    /// and returns the exit code.
    fn exit_after(variant: &str, bytes: &[u8]) -> Option<i32> {
        let v = Variant::by_name(variant).expect("variant");
        let path = crate::toolchain::build_image(&crate::toolchain::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        let mut b = ProcessBackend::qemu(&image, v.qemu_cpu, Limits::default()).expect("qemu");
        b.shared = Some(SharedArena::new(protocol::ARENA_SIZE as usize).expect("memfd"));
        let mut g = b.spawn().expect("spawn");
        g.requests.write_all(bytes).expect("write");
        drop(g.requests);
        wait_guest(&mut g.child, g.witness.as_mut()).expect("wait").code()
    }

    fn request(words: [u64; token::REQUEST_WORDS]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The three drivers end the same way on the same input (lab_protocol.h exit codes).
    #[test]
    fn every_driver_exits_with_the_same_status_on_a_broken_request_stream() {
        let m = token::REQUEST_MAGIC;
        let cases: [(&str, Vec<u8>, protocol::Exit); 6] = [
            ("EOF before any token", Vec::new(), protocol::exit::OK),
            ("a short token", vec![1; 10], protocol::exit::TRUNCATED),
            ("a wrong magic", request([m ^ 1, 0, 0, 0]), protocol::exit::PROTOCOL),
            ("a wrong sequence number", request([m, 1, 0, 0]), protocol::exit::PROTOCOL),
            ("a checksum range past the arena", request([m, 0, 0, protocol::ARENA_SIZE + 8]), protocol::exit::PROTOCOL),
            ("an unaligned checksum range", request([m, 0, 4, 8]), protocol::exit::PROTOCOL),
        ];
        for arch in ["riscv64", "aarch64", "x86_64"] {
            for (what, bytes, want) in &cases {
                assert_eq!(exit_after(arch, bytes), Some(want.code), "{arch}: {what}");
            }
        }
    }

    /// A batch for `image`: a null call (faults), `md5_implCompress` over `short` bytes flush
    /// against a guard page (over-reads into it when under 64) with its state in the last 16
    /// bytes of a writable buffer of `state_len` bytes, a null call, then one whole block.
    fn guard_batch(image: &Image, short: usize, state_len: usize) -> crate::batch::Batch {
        use crate::batch::{Arg, BatchBuilder};
        let md5 = image.require("md5_implCompress").expect("md5_implCompress").addr;
        let mut b = BatchBuilder::new(Abi::of(image.arch));
        let cut = b.buffer("cut", &vec![7; short], false, crate::batch::Placement::End);
        let s1 = b.output(&vec![0; state_len]);
        let (whole, s2) = (b.input(&[7; 64], 0), b.output(&[0; 16]));
        let null = [Arg::Imm(0); 4];
        b.call(0, null, 1);
        b.call(md5, [Arg::Ptr(cut, 0), Arg::Ptr(s1, state_len - 16), Arg::Imm(0), Arg::Imm(0)], 2);
        b.call(0, null, 3);
        b.call(md5, [Arg::Ptr(whole, 0), Arg::Ptr(s2, 0), Arg::Imm(0), Arg::Imm(0)], 4);
        b.layout(image.arena().expect("arena")).expect("layout")
    }

    /// Guard pages stay in force across resumed entries (the driver keeps the table it applied
    /// and the fault handler leaves it), follow a new layout, and come back for an old one.
    #[test]
    fn guards_hold_after_faults_and_follow_each_layout() {
        for name in ["riscv64", "aarch64", "x86_64"] {
            guards_hold_on(Variant::by_name(name).expect("variant"));
        }
    }

    fn guards_hold_on(v: &'static Variant) {
        let path = crate::toolchain::build_image(&crate::toolchain::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        let mut backends = vec![ProcessBackend::qemu(&image, v.qemu_cpu, Limits::default()).expect("qemu")];
        if crate::variant::Arch::host() == Some(v.arch) {
            backends.push(ProcessBackend::native(&image, Limits::default()).expect("native"));
        }
        for mut b in backends {
            // 40 bytes: md5 reads 24 past the end. 4128 bytes: two pages, and the block md5
            // reads crosses into the second, the guard page of the 40-byte layout; the state of
            // 4112 bytes is written on the page the guard after a 16-byte state held.
            for (short, state_len) in [(40, 16), (4128, 4112), (40, 16), (40, 16)] {
                let batch = guard_batch(&image, short, state_len);
                let run = super::super::run_batch(&mut b, &batch).expect("run");
                let calls: Vec<Option<usize>> = run.faults.iter().map(|f| f.call).collect();
                let want = if short < 64 { vec![Some(0), Some(1), Some(2)] } else { vec![Some(0), Some(2)] };
                assert_eq!(calls, want, "{v} {:?}, {short} bytes: {:?}", b.kind, run.faults);
                if short < 64 {
                    let f = &run.faults[1];
                    assert!(matches!(f.kind, FaultKind::Memory { .. }), "{v} {:?}: {f:?}", b.kind);
                }
                assert!(batch.record(&run.resp, 3).completed, "{v} {:?}: the last call returns", b.kind);
                assert_eq!(batch.record(&run.resp, 1).completed, short >= 64, "{v} {:?}", b.kind);
            }
        }
    }

    /// The native guest's mappings after a batch are its protection table, page for page:
    /// read-only buffers with guards between them (applied a span at a time), writable buffers
    /// and packed ones readable and writable. Batches laid out alike take the delta from the
    /// table in force, others (and a restarted guest) the whole table; the sequence takes both
    /// ways, back and forth, and checks the way it took.
    #[test]
    fn the_guest_maps_the_protection_table_page_for_page() {
        use crate::batch::{BatchBuilder, Placement};
        let Some((mut b, image)) = native_x86_64() else { return }; // native runs only on an x86_64 host
        let arena = image.arena().expect("arena");
        // (buffer groups, long inputs every `long`-th group, restart the guest first): a grid of
        // 40 groups, the same less two, a layout with long inputs, the first again, ...
        let rounds = [
            (40, 0, false),
            (38, 0, false),
            (6, 2, false),
            (40, 0, false),
            (38, 0, false),
            (39, 0, true),
            (41, 3, false),
            (41, 3, false),
        ];
        let (mut last_id, mut ways) = (0, Vec::new());
        for (round, &(groups, long, restart)) in rounds.iter().enumerate() {
            if restart {
                let _ = b.reap();
            }
            let mut bb = BatchBuilder::new(Abi::of(image.arch));
            for i in 0..groups {
                let len = if long > 0 && i % long == 0 { 5000 + 4096 * (i % 3) } else { 100 };
                bb.buffer("input", &vec![1; len], false, Placement::End);
                bb.output(&[2; 16]);
                bb.buffer("packed", &[3; 9], i % 2 == 0, Placement::Packed(5));
            }
            bb.call(0, [crate::batch::Arg::Imm(0); 4], 1);
            let batch = bb.layout(arena).expect("layout");
            super::super::run_batch(&mut b, &batch).expect("run");
            let head = b.shared.as_ref().expect("arena").read(header::WORDS * 8);
            let word = |w: protocol::Word| header_word(&head, w);
            let (id, base, count) = (word(header::PROT_ID), word(header::PROT_BASE), word(header::DELTA_COUNT));
            let took = (id, base, count);
            match round {
                0 => assert_eq!((base, count), (0, 0), "nothing in force: the whole table"),
                // Two groups fewer: the grid moves by four pages, only its ends change.
                1 | 4 => assert!(base == last_id && (1..=6).contains(&count), "round {round}: {took:?}"),
                // The same table again: nothing to change.
                7 => assert_eq!((id, base, count), (last_id, last_id, 0)),
                _ => assert!(id > last_id, "round {round}: {took:?}"),
            }
            ways.push(base != 0);
            last_id = id;
            assert_guest_maps(&b, arena, &batch, &format!("round {round}"));
        }
        assert!(ways.contains(&true) && ways[1..].contains(&false), "both ways: {ways:?}");
    }

    /// A native backend for the x86_64 image, and the image; `None` on another host.
    fn native_x86_64() -> Option<(ProcessBackend, Image)> {
        let v = Variant::by_name("x86_64").expect("variant");
        if crate::variant::Arch::host() != Some(v.arch) {
            return None;
        }
        let path = crate::toolchain::build_image(&crate::toolchain::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        Some((ProcessBackend::native(&image, Limits::default()).expect("native"), image))
    }

    /// The pages of the native guest's arena, from its `/proc/<pid>/maps`, are those of
    /// `batch`'s protection table ("--" guard, "r-" read-only, "rw" not listed).
    fn assert_guest_maps(b: &ProcessBackend, arena: Arena, batch: &crate::batch::Batch, what: &str) {
        use crate::batch::PAGE;
        let pid = b.guest.as_ref().expect("guest").child.id();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
        let mut ranges: Vec<(u64, u64, String)> = maps
            .lines()
            .filter_map(|l| {
                let (range, rest) = l.split_once(' ')?;
                let (lo, hi) = range.split_once('-')?;
                let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
                Some((lo, hi, rest.get(..2)?.to_string()))
            })
            .collect();
        ranges.sort_by_key(|r| r.0);
        let table = batch.protections();
        let (mut r, mut t) = (0, 0);
        for page in (arena.addr..arena.addr + arena.size).step_by(PAGE as usize) {
            while ranges.get(r).is_some_and(|m| m.1 <= page) {
                r += 1;
            }
            while table.get(t).is_some_and(|p| p.addr + p.len <= page) {
                t += 1;
            }
            let want = match table.get(t).filter(|p| p.contains(page)).map(|p| p.prot) {
                None => "rw",
                Some(0) => "--",
                Some(1) => "r-",
                Some(other) => panic!("prot {other}"),
            };
            let have = ranges.get(r).filter(|m| m.0 <= page).map(|m| m.2.as_str());
            assert_eq!(have, Some(want), "{what}: page {page:#x}");
        }
    }

    /// Random layouts (every placement, empty and read-only buffers, small changes of the last
    /// layout, guests restarted now and then) on one native guest: after every batch its pages
    /// are the table's, whichever way (delta or whole table) the batch took.
    #[test]
    fn random_layouts_leave_the_guest_pages_as_their_tables_say() {
        use crate::batch::{BatchBuilder, Placement};
        use rand::{RngExt, SeedableRng};
        let Some((mut b, image)) = native_x86_64() else { return }; // native runs only on an x86_64 host
        let arena = image.arena().expect("arena");
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(24);
        let buffer = |rng: &mut rand::rngs::ChaCha8Rng| {
            let len = if rng.random_ratio(1, 5) { 0 } else { rng.random_range(1..20_000) };
            (len, rng.random_bool(0.5), rng.random_range(0..5u8), rng.random_range(0..64usize))
        };
        let (mut spec, mut ways) = (Vec::new(), [0; 2]);
        for round in 0..60 {
            if rng.random_ratio(1, 15) {
                let _ = b.reap();
            }
            if spec.is_empty() || rng.random_ratio(1, 3) {
                spec = (0..rng.random_range(1..30)).map(|_| buffer(&mut rng)).collect();
            } else {
                match rng.random_range(0..3) {
                    0 => drop(spec.pop()),
                    1 => spec.push(buffer(&mut rng)),
                    _ => {
                        let i = rng.random_range(0..spec.len());
                        spec[i].0 = rng.random_range(0..12_000);
                    }
                }
            }
            let mut bb = BatchBuilder::new(Abi::of(image.arch));
            for &(len, writable, place, m) in &spec {
                let placement = [
                    Placement::End,
                    Placement::Start,
                    Placement::Misaligned(m),
                    Placement::Offset(m),
                    Placement::Packed(m),
                ][usize::from(place)];
                bb.buffer("buf", &vec![1; len], writable, placement);
            }
            bb.call(0, [crate::batch::Arg::Imm(0); 4], 1);
            let batch = bb.layout(arena).expect("layout");
            super::super::run_batch(&mut b, &batch).expect("run");
            let base = header_word(&b.shared.as_ref().expect("arena").read(header::WORDS * 8), header::PROT_BASE);
            ways[usize::from(base != 0)] += 1;
            assert_guest_maps(&b, arena, &batch, &format!("round {round}, {spec:?}"));
        }
        assert!(ways[0] > 0 && ways[1] > 0, "whole tables and deltas: {ways:?}");
    }

    #[test]
    fn sparse_copies_skip_only_the_given_ranges() {
        assert_eq!(kept(10, &[(2, 4), (6, 7)]).collect::<Vec<_>>(), vec![(0, 2), (4, 6), (7, 10)]);
        assert_eq!(kept(10, &[(0, 3), (8, 20)]).collect::<Vec<_>>(), vec![(3, 8)]);
        assert_eq!(kept(4, &[]).collect::<Vec<_>>(), vec![(0, 4)]);
        let mut a = SharedArena::new(8192).expect("memfd");
        a.write(&[9; 16]);
        a.write_sparse(&[1; 16], &[(4, 8)], None);
        assert_eq!(a.read(16), [[1; 4], [9; 4], [1; 4], [1; 4]].concat(), "skipped bytes are not written");
        assert_eq!(a.read_sparse(16, &[(4, 8)]), [[1; 4], [0; 4], [1; 4], [1; 4]].concat(), "and read as zeros");
    }

    /// With the payload's data ranges known, the arena ends up as the payload outside the
    /// skipped ranges all the same (zeros written where the payload is zero), whatever it held.
    #[test]
    fn a_sparse_write_with_data_ranges_leaves_the_payload() {
        let mut payload = vec![0u8; 64];
        let data = [(0, 3), (10, 20), (21, 22), (40, 64)];
        for &(lo, hi) in &data {
            payload[lo..hi].iter_mut().enumerate().for_each(|(i, b)| *b = 1 + i as u8);
        }
        for skip in [vec![], vec![(4, 12)], vec![(0, 11), (30, 45)], vec![(0, 64)]] {
            let mut a = SharedArena::new(8192).expect("memfd");
            a.write(&[0xee; 80]);
            a.write_sparse(&payload, &skip, Some(&data));
            let got = a.read(80);
            for (i, &b) in got.iter().enumerate() {
                let skipped = skip.iter().any(|&(lo, hi)| (lo..hi).contains(&i));
                let want = if skipped || i >= 64 { 0xee } else { payload[i] };
                assert_eq!(b, want, "byte {i} with skip {skip:?}");
            }
        }
    }

    #[test]
    fn a_fault_reply_checksums_the_entries_up_to_the_one_in_flight() {
        let (arena, table, entry) = (0x10000u64, 0x10100u64, 176usize);
        let sum = (0x100, 10 * 176);
        assert_eq!(fault_range(sum, table, arena, 0, entry), (0x100, 176));
        assert_eq!(fault_range(sum, table, arena, 3, entry), (0x100, 4 * 176));
        assert_eq!(fault_range(sum, table, arena, 9, entry), sum, "the last entry: the whole range");
        assert_eq!(fault_range(sum, table, arena, u64::MAX - 1, entry), sum, "a wild `current`: unchanged");
        let resumed = from_entry(sum, 4, entry);
        assert_eq!(resumed, (0x100 + 4 * 176, 6 * 176));
        assert_eq!(fault_range(resumed, table, arena, 4, entry), (0x100 + 4 * 176, 176));
        assert_eq!(fault_range(resumed, table, arena, 2, entry), resumed, "before the range: unchanged");
        assert_eq!(from_entry(sum, 99, entry), (0x100 + 10 * 176, 0));
    }

    #[test]
    fn the_shared_arena_round_trips_bytes() {
        let mut a = SharedArena::new(8192).expect("memfd");
        a.write(&[1, 2, 3]);
        assert_eq!(a.read(4), vec![1, 2, 3, 0]);
        assert_eq!(a.read(8200).len(), 8200, "reads past the end are zero-filled, not a panic");
    }

    #[test]
    fn the_checksum_range_stays_inside_the_payload() {
        let arena = 0x10000;
        let mut p = vec![0u8; 4096];
        p[header::TABLE.offset()..][..8].copy_from_slice(&(0x10000u64 + 256).to_le_bytes());
        p[header::NCALLS.offset()..][..8].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (256, 3 * 176));
        p[header::NCALLS.offset()..][..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (256, 4096 - 256));
        p[header::TABLE.offset()..][..8].copy_from_slice(&5u64.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (0, 0));
    }
}
