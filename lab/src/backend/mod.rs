//! Backends: what executes a batch. Unicorn runs the image in-process; qemu-user and native run
//! it as a child process sharing the arena and speaking the `_start` token protocol. A run does not care
//! which: [`run_batch`] drives any [`Backend`] and resumes after a fault, so one bad call fails
//! alone and the rest of the batch still runs.

pub mod exec_trace;
pub mod fault;
pub mod icount;
pub(crate) mod process;
mod recycled;
mod unicorn;

use std::time::Duration;

pub use fault::{Access, Fault, FaultKind};
pub use process::{confine, witness_gaps, witness_probe, ProcessBackend};
pub use unicorn::{zbb, UnicornBackend};

use crate::batch::Batch;
use crate::image::Image;
use crate::toolchain::ToolchainError;
use crate::variant::{Arch, Variant};

pub use crate::vocab::backend_kind::BackendKind;

impl BackendKind {
    /// Whether this backend can run `variant`; `Err` carries the reason: the combination cannot
    /// exist on this host ([`applicable`](Self::applicable): another architecture natively),
    /// or an extension the variant's row or a user's declared ISA needs and this backend cannot
    /// provide (a skip with that reason, never counted as passed).
    pub fn supports(self, variant: &Variant) -> Result<(), String> {
        self.applicable(variant)?;
        crate::user_kernel::of(variant).and_then(|k| k.backend_lacks(self)).map_or(Ok(()), Err)
    }

    /// Whether this backend and `variant` can exist together on this host at all; `Err` carries
    /// why not: native runs only the host's architecture, and a row of the lab's own needs
    /// what this emulator (Unicorn 2.1.5: no RVV, AVX2, AVX-512, SVE; qemu 7.2: no AVX-512) or
    /// this CPU provides or never will. Reports list such a combination once as not applicable,
    /// never as skipped cases ([`crate::report::NotApplicable`]). A user's kernel that declares
    /// what a backend lacks is a skip instead ([`supports`](Self::supports)): the user asked
    /// for that backend's verdict on that object.
    pub fn applicable(self, variant: &Variant) -> Result<(), String> {
        match self {
            BackendKind::Native if Arch::host() != Some(variant.arch) => Err(format!(
                "native runs only the host's architecture ({}), not {}",
                std::env::consts::ARCH,
                variant.arch
            )),
            // The lab's own vector rows stay not applicable on Unicorn although it could run
            // their calls up to the first vector instruction: their sets' long inputs always
            // reach it, so every such row would be mostly skipped cases, and a healthy default
            // run must show 0 skipped. A user's object runs instead (`supports`).
            _ if crate::user_kernel::of(variant).is_none() => {
                variant.backend_lacks(self, &host_flags(self)).map_or(Ok(()), Err)
            }
            _ => Ok(()),
        }
    }

    /// Opens this backend for `variant` with the image already built.
    ///
    /// # Errors
    /// A missing qemu binary (naming the Debian package), or an engine that fails to set up.
    pub fn open(self, variant: &Variant, image: &Image, limits: Limits) -> Result<Box<dyn Backend>, BackendError> {
        self.open_at(variant, image, limits, None)
    }

    /// [`open`](Self::open) at a vector length: qemu's `-cpu` gets the arch row's properties
    /// for it (`vlen=256`); `None` leaves qemu's own default.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_at(
        self,
        variant: &Variant,
        image: &Image,
        limits: Limits,
        vector_length: Option<crate::arch::VectorLength>,
    ) -> Result<Box<dyn Backend>, BackendError> {
        self.supports(variant).map_err(BackendError::Unsupported)?;
        let declared = crate::user_kernel::of(variant).and_then(|k| k.partial_loads);
        let limits = Limits { partial_loads: declared.unwrap_or(limits.partial_loads), ..limits };
        Ok(match self {
            BackendKind::Unicorn => {
                // Unicorn 2.1.5 decodes no Zbb: the backend emulates it for builds that use it.
                let mut uc = UnicornBackend::new(image, limits)?;
                uc.emulate_zbb(variant.zbb)?;
                uc.stop_at_unsupported(image, variant.extensions)?;
                Box::new(uc)
            }
            BackendKind::Qemu => {
                let cpu = match vector_length {
                    Some(vl) => format!("{},{}", variant.qemu_cpu, vl.qemu_properties()),
                    None => variant.qemu_cpu.to_string(),
                };
                Box::new(ProcessBackend::qemu(image, &cpu, limits)?)
            }
            BackendKind::Native => Box::new(ProcessBackend::native(image, limits)?),
        })
    }
}

/// This host's `/proc/cpuinfo` flags (read once) when `kind` is native; none otherwise.
fn host_flags(kind: BackendKind) -> Vec<String> {
    static FLAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    match kind {
        BackendKind::Native => FLAGS.get_or_init(crate::user_kernel::isa_decl::host_cpu_flags).clone(),
        _ => Vec::new(),
    }
}

pub use crate::vocab::policy::PartialLoads;

/// A partial load ([`PartialLoads`]) a backend let run: call `call` of the batch, at `pc`,
/// `size` bytes at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialLoad {
    /// Index of the call in the batch.
    pub call: usize,
    /// Guest pc of the load.
    pub pc: u64,
    /// First byte loaded.
    pub addr: u64,
    /// Bytes loaded.
    pub size: u64,
    /// The policy was [`PartialLoads::Fail`]: the load is a finding, not a warning.
    pub fail: bool,
}

/// Budgets that turn a hang into a finding.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock budget for one batch (`--batch-seconds`): on qemu-user and native the host's
    /// timer, on Unicorn for each run of the batch's entry (the block hook looks at the clock;
    /// see `backend/unicorn`). A batch past it is a hang. Zero: no bound (timed runs).
    pub batch_time: Duration,
    /// Guest instructions one call may execute on Unicorn (counted per translation block).
    /// The largest bundled call (one million 'a' through one `implCompressMB`) needs about
    /// 11.3 M on riscv64; 64 M leaves room for 4 MiB inputs and still stops a runaway loop
    /// within a fraction of a second. `u64::MAX` turns the budget off (and its block hook).
    pub call_instructions: u64,
    /// Whether partial loads are warnings or findings (`--partial-loads`; a manifest variant's
    /// `partial_loads` overrides it for that variant).
    pub partial_loads: PartialLoads,
    /// Whether qemu-user guests run under the host's tracer (backend/process/witness.rs: the
    /// protection changes and faults of kernel code while its calls run). On by default; off
    /// only to test the host's after-batch checks alone (the tracer's finding comes first).
    pub witness: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            batch_time: Duration::from_secs(10),
            call_instructions: 64_000_000,
            partial_loads: PartialLoads::Warn,
            witness: true,
        }
    }
}

/// Errors that stop a backend from running at all (as opposed to a guest fault).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot run this variant.
    #[error("{0}")]
    Unsupported(String),
    /// A tool is missing.
    #[error(transparent)]
    Tool(#[from] ToolchainError),
    /// The image lacks what the driver protocol needs.
    #[error(transparent)]
    Image(#[from] crate::image::ImageError),
    /// Unicorn refused a set-up step.
    #[error("unicorn: {0}")]
    Unicorn(String),
    /// Talking to the guest process failed in a way that is not a guest fault.
    #[error("{program}: {reason}")]
    Process { program: String, reason: String },
}

/// The raw result of one backend entry: the response bytes and the fault that ended it, if any.
#[derive(Debug, Clone)]
pub struct RawRun {
    /// `lab_arena[0..resp_len]` as the guest left it (after [`Backend::execute_batch`], at least
    /// the batch's [`Batch::response_ranges`]; a backend may leave the other bytes zero).
    pub resp: Vec<u8>,
    /// Set when the entry ended early.
    pub fault: Option<Fault>,
}

/// Something that executes the driver: write `payload` to `lab_arena`, run `lab_batch`, return
/// `lab_arena[0..resp_len]`.
pub trait Backend {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Runs the calls of `payload` from its `start` index.
    ///
    /// # Errors
    /// Only for failures of the backend itself; guest faults come back in [`RawRun::fault`].
    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError>;

    /// [`execute`](Self::execute) of `batch`'s payload; a backend that can skip the payload's
    /// zero pages ([`Batch::data_ranges`]) overrides it.
    ///
    /// # Errors
    /// As [`execute`](Self::execute).
    fn execute_batch(&mut self, batch: &Batch) -> Result<RawRun, BackendError> {
        self.execute(&batch.payload, batch.resp_len)
    }

    /// Sets the instruction budget of each call in the next batches to the configured
    /// [`Limits::call_instructions`] plus `need` (what the batch's longest call may need: its
    /// blocks times a generous count per block), so a long input is not taken for a hang.
    /// Backends that time whole batches instead (qemu-user, native) ignore it.
    fn set_call_instructions(&mut self, need: u64) {
        let _ = need;
    }

    /// Runs `batch` again from call `start` after an entry of the same batch ended in a fault;
    /// `resp` is what that entry returned. By default a fresh [`Batch::resume_payload`].
    ///
    /// # Errors
    /// As [`execute`](Self::execute).
    fn resume(&mut self, batch: &Batch, resp: &[u8], start: usize) -> Result<RawRun, BackendError> {
        self.execute(&batch.resume_payload(resp, start), batch.resp_len)
    }

    /// The partial loads ([`PartialLoads::Warn`]) the backend let run since it was last asked,
    /// with the call of the current batch each was in; backends that cannot see them have none.
    fn take_partial_loads(&mut self) -> Vec<PartialLoad> {
        Vec::new()
    }

    /// Takes back a response this backend returned, once the caller is done with it, to reuse
    /// its allocation (`backend/recycled.rs`). By default it is dropped.
    fn recycle(&mut self, resp: Vec<u8>) {
        drop(resp);
    }

    /// What the host verifies itself once every call of `batch` has run: faults naming the
    /// calls a kernel's tampering could have served (read-only inputs, guard poison, page
    /// protections, handlers, the driver's code; [`FaultKind::HostSaw`]). Backends whose guest
    /// cannot change those (Unicorn checks every access itself) have none.
    fn verify(&mut self, batch: &Batch) -> Vec<Fault> {
        let _ = batch;
        Vec::new()
    }

    /// The whole response of the last entry, for a backend whose [`resume`](Self::resume)
    /// returned only the header with a fault (an in-process engine keeps the arena, so a kernel
    /// that faults on every call need not cost a copy of the response per call).
    ///
    /// # Errors
    /// By default always: backends that return whole responses never need it.
    fn response(&mut self, resp_len: usize) -> Result<Vec<u8>, BackendError> {
        let _ = resp_len;
        Err(BackendError::Unsupported("this backend returns whole responses".into()))
    }
}

/// A finished batch: the final response and every fault, in order.
#[derive(Debug, Clone)]
pub struct BatchRun {
    /// Final `lab_arena[0..resp_len]` (at least its [`Batch::response_ranges`], see [`RawRun::resp`]).
    pub resp: Vec<u8>,
    /// Faults with the call each one hit.
    pub faults: Vec<Fault>,
    /// Why calls after the last fault did not run, when the batch was given up.
    pub abandoned: Option<String>,
    /// Partial loads the backend let run ([`PartialLoads::Warn`]), by call.
    pub partial_loads: Vec<PartialLoad>,
}

impl BatchRun {
    /// The fault that ended call `call`, if any.
    pub fn fault_of(&self, call: usize) -> Option<&Fault> {
        self.faults.iter().find(|f| f.call == Some(call))
    }

    /// A fault that cannot be tied to a call (a crash or hang that abandoned the batch).
    pub fn batch_fault(&self) -> Option<&Fault> {
        self.faults.iter().find(|f| f.call.is_none())
    }
}

/// Faults in one batch that are always resumed from; past them the batch resumes only while it
/// has run for less than [`RESUME_TIME`].
pub const MAX_FAULTS_PER_BATCH: usize = 64;

/// Wall time a batch may spend resuming after its first [`MAX_FAULTS_PER_BATCH`] faults. Each
/// fault costs a new entry of the batch (the guest survives its faults, keeps the batch's page
/// protections and only the header is rewritten: a round trip of some 100 us on qemu-user and
/// native), so only a machine far slower than that reaches it; without it a kernel that
/// faults on thousands of calls could take minutes per batch. Calls given up for this are reported as not run
/// (skipped with this reason by `lab run`), never as failed.
pub const RESUME_TIME: Duration = Duration::from_secs(2);

/// The start of the reason a batch gives when [`RESUME_TIME`] ran out.
pub const RESUME_GIVEN_UP: &str = "not run: the batch was given up after";

/// Runs every call of `batch` on `backend`, resuming after each fault at the next call. A
/// kernel that faults on some inputs gets a verdict for every other call: the first
/// [`MAX_FAULTS_PER_BATCH`] faults always resume, later ones while the batch is younger than
/// [`RESUME_TIME`] (on Unicorn that is every fault of any real batch). Otherwise only a hang
/// (each costs the whole time budget) or a fault that names no call ends the batch early, and
/// the calls after it say why they did not run.
///
/// # Errors
/// Only backend failures; faults are collected in [`BatchRun::faults`].
pub fn run_batch(backend: &mut dyn Backend, batch: &Batch) -> Result<BatchRun, BackendError> {
    let started = std::time::Instant::now();
    let mut faults: Vec<Fault> = Vec::new();
    // The batch's own payload first, then resumed entries after each fault.
    let mut resumed: Option<(Vec<u8>, usize)> = None;
    loop {
        let run = match &resumed {
            None => backend.execute_batch(batch)?,
            Some((resp, n)) => backend.resume(batch, resp, *n)?,
        };
        let Some(fault) = run.fault else {
            let partial_loads = backend.take_partial_loads();
            faults.extend(backend.verify(batch));
            return Ok(BatchRun { resp: run.resp, faults, abandoned: None, partial_loads });
        };
        let next = fault.call.map(|c| c + 1).filter(|&n| n < batch.ncalls());
        let abandoned = match (&fault.kind, next) {
            (_, None) => fault.call.is_none().then(|| format!("the batch was given up after: {}", fault.kind)),
            // A call stopped before an instruction the backend cannot execute is no fault of
            // the kernel's and costs one entry (Unicorn, in-process): always resumed, and not
            // counted towards giving up (a vector kernel stops every long call).
            (FaultKind::NotRunPast { .. }, Some(_)) => None,
            // Every further hung call would cost the whole wall-clock budget again.
            (FaultKind::Hang(_), Some(_)) => {
                Some(format!("the batch was given up after a hang at call {}", next.unwrap_or(0) - 1))
            }
            _ if kernel_faults(&faults) + 1 >= MAX_FAULTS_PER_BATCH && started.elapsed() >= RESUME_TIME => {
                Some(format!(
                    "{RESUME_GIVEN_UP} {} faults in {:.1} s (each fault costs a new entry of the batch; RESUME_TIME)",
                    kernel_faults(&faults) + 1,
                    started.elapsed().as_secs_f64()
                ))
            }
            _ => None,
        };
        faults.push(fault);
        match (next, abandoned) {
            (Some(n), None) => resumed = Some((run.resp, n)),
            (_, abandoned) => {
                let resp = if run.resp.len() < batch.resp_len { backend.response(batch.resp_len)? } else { run.resp };
                let partial_loads = backend.take_partial_loads();
                faults.extend(backend.verify(batch));
                return Ok(BatchRun { resp, faults, abandoned, partial_loads });
            }
        }
    }
}

/// The faults of `faults` that are the kernel's: not the calls a backend stopped before an
/// instruction it cannot execute ([`FaultKind::NotRunPast`]).
fn kernel_faults(faults: &[Fault]) -> usize {
    faults.iter().filter(|f| !matches!(f.kind, FaultKind::NotRunPast { .. })).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Arg, BatchBuilder};
    use crate::image::Arena;

    /// Faults on every call below `faulty` (each entry starts at header word 1, `start`).
    struct FaultsBelow {
        faulty: usize,
        entries: usize,
    }

    impl Backend for FaultsBelow {
        fn kind(&self) -> BackendKind {
            BackendKind::Unicorn
        }

        fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
            self.entries += 1;
            let start = u64::from_le_bytes(payload[8..16].try_into().unwrap()) as usize;
            let fault = (start < self.faulty).then(|| Fault {
                kind: FaultKind::Memory { access: Some(Access::Read), addr: Some(0) },
                pc: None,
                call: Some(start),
                detail: String::new(),
            });
            Ok(RawRun { resp: payload[..resp_len].to_vec(), fault })
        }
    }

    #[test]
    fn calls_after_many_faults_are_re_run_not_given_up() {
        let mut b = BatchBuilder::new(&crate::abi::X86_64);
        for _ in 0..200 {
            b.call(0x1000, [Arg::Imm(0); 4], 0);
        }
        let batch = b.layout(Arena { addr: 0x10_0000, size: 32 << 20, kernel_data: None }).unwrap();
        let mut backend = FaultsBelow { faulty: 150, entries: 0 };
        let run = run_batch(&mut backend, &batch).unwrap();
        assert_eq!(run.faults.len(), 150);
        assert_eq!(run.abandoned, None, "150 faults give nothing up");
        assert_eq!(backend.entries, 151, "one entry per fault, then one for the 50 calls that pass");
        assert_eq!(run.fault_of(149).and_then(|f| f.call), Some(149));
        assert!(run.fault_of(150).is_none());
    }
}
