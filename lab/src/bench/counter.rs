//! Which engine counts a call's instructions: Unicorn's block profile where Unicorn runs the
//! call, else qemu-user's exec log ([`crate::backend::exec_trace`]) where qemu runs it (RVV at
//! each VLEN, AVX2, SVE2 at each VL, a user's AVX path), else nothing, with the reason. Both
//! count only the kernel's code range ([`Workload::profile_range`]) and exactly: on a call
//! both can run they give the same number (tests/qemu_counts.rs).

use std::time::Duration;

use rand::RngExt;

use super::workload::Workload;
use crate::abi::Abi;
use crate::arch::VectorLength;
use crate::backend::icount::BlockProfile;
use crate::backend::{exec_trace, run_batch, BackendKind, Limits, ProcessBackend, UnicornBackend};
use crate::batch::BatchBuilder;
use crate::cases::plan::Stubs;
use crate::cases::verdict::{self, describe_fault};
use crate::image::Image;
use crate::variant::Variant;

/// How reports name the Unicorn counter.
pub const UNICORN: &str = "counted on Unicorn";

/// How reports name the qemu counter.
pub const QEMU: &str = exec_trace::COUNTER;

/// An engine set up to count the calls of one image.
pub enum Counter {
    /// A Unicorn engine (block profile, [`crate::backend::icount`]).
    Unicorn(UnicornBackend),
    /// A qemu-user backend whose guests log every instruction of the kernel range.
    Qemu {
        /// The backend (a fresh guest per counted call).
        backend: ProcessBackend,
        /// The vector length qemu runs at, for vector rows.
        vector_length: Option<VectorLength>,
    },
}

/// A wall-clock budget for one counted batch under qemu: single-stepping with a log line per
/// instruction runs at a few million instructions per second, far below qemu's usual rate.
const QEMU_BATCH_TIME: Duration = Duration::from_secs(300);

impl Counter {
    /// A fresh Unicorn engine for `image` (Zbb emulated where the variant uses it, stops before
    /// instructions Unicorn cannot execute).
    ///
    /// # Errors
    /// Engine set-up.
    pub fn unicorn(image: &Image, variant: &Variant) -> Result<Counter, String> {
        let mut uc = UnicornBackend::new(image, Limits::default()).map_err(|e| e.to_string())?;
        uc.emulate_zbb(variant.zbb).map_err(|e| e.to_string())?;
        uc.stop_at_unsupported(image, variant.extensions).map_err(|e| e.to_string())?;
        Ok(Counter::Unicorn(uc))
    }

    /// A qemu-user backend for `image` at `vector_length` (qemu's default when `None`).
    ///
    /// # Errors
    /// qemu cannot run the variant (why), is missing (naming the Debian package) or refuses
    /// the `-cpu` string.
    pub fn qemu(image: &Image, variant: &Variant, vector_length: Option<VectorLength>) -> Result<Counter, String> {
        BackendKind::Qemu.supports(variant)?;
        let cpu = match vector_length {
            Some(vl) => format!("{},{}", variant.qemu_cpu, vl.qemu_properties()),
            None => variant.qemu_cpu.to_string(),
        };
        let declared = crate::user_kernel::of(variant).and_then(|k| k.partial_loads);
        let limits = Limits { batch_time: QEMU_BATCH_TIME, ..Limits::default() };
        let limits = Limits { partial_loads: declared.unwrap_or(limits.partial_loads), ..limits };
        let backend = ProcessBackend::qemu(image, &cpu, limits).map_err(|e| e.to_string())?;
        Ok(Counter::Qemu { backend, vector_length })
    }

    /// How reports name this counter ([`UNICORN`], [`QEMU`]).
    pub fn name(&self) -> &'static str {
        match self {
            Counter::Unicorn(_) => UNICORN,
            Counter::Qemu { .. } => QEMU,
        }
    }

    /// The vector length the counted calls run at (qemu on a vector row).
    pub fn vector_length(&self) -> Option<VectorLength> {
        match self {
            Counter::Unicorn(_) => None,
            Counter::Qemu { vector_length, .. } => *vector_length,
        }
    }

    /// Profiles one call of `w`: runs it, checks its result, returns the kernel's profile (on
    /// qemu, one entry per instruction).
    ///
    /// # Errors
    /// A fault (on Unicorn also a stop before an instruction it cannot execute), a wrong
    /// result, or block sizes that changed between translation and execution.
    pub fn profile(&mut self, image: &Image, w: &Workload, rng: &mut impl RngExt) -> Result<BlockProfile, String> {
        let (start, end) = Workload::profile_range(w.kernel, image)?;
        let mut b = BatchBuilder::new(Abi::of(image.arch));
        b.page_bounds_only();
        let plan = w.plan(&mut b, &Stubs::of(image), rng);
        let batch = b.layout(image.arena().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let (run, profile) = match self {
            Counter::Unicorn(uc) => {
                uc.start_profile(start, end).map_err(|e| e.to_string())?;
                let run = run_batch(uc, &batch);
                (run, uc.take_profile().ok_or("the profile vanished")?)
            }
            Counter::Qemu { backend, .. } => {
                backend.start_exec_trace(start, end).map_err(|e| e.to_string())?;
                let run = run_batch(backend, &batch);
                (run, backend.take_exec_trace()?)
            }
        };
        let run = run.map_err(|e| e.to_string())?;
        if let Some(f) = run.faults.first() {
            return Err(describe_fault(&w.label_on(image), f, image, &batch).text);
        }
        if let Some(f) = verdict::check(&plan, &batch, &run, Abi::of(image.arch), image).first() {
            return Err(f.text.clone());
        }
        if profile.mismatches() != 0 {
            return Err(format!(
                "{}: {} translation blocks changed size; counts are not exact",
                w.label_on(image),
                profile.mismatches()
            ));
        }
        Ok(profile)
    }
}

/// Whether a count error is Unicorn stopping before an instruction it cannot execute (a user's
/// vector path): then qemu counts instead.
pub fn unicorn_stopped(error: &str) -> bool {
    error.contains(": not run past `")
}

/// The vector lengths qemu counts `variant` at: every default length of its vector extension
/// (RVV VLEN 128-1024, SVE VL), or qemu's default alone for a row without one.
pub fn vector_lengths(variant: &Variant) -> Vec<Option<VectorLength>> {
    match variant.vector_length() {
        Some(spec) => spec.defaults.iter().map(|&bits| Some(VectorLength { spec, bits })).collect(),
        None => vec![None],
    }
}

/// Instructions per call of one image's workloads, for the timed sections: counted on Unicorn
/// where it runs the call, else under qemu (its default vector length), else not counted.
/// Engines are opened on first use and kept.
pub struct CallCounts<'a> {
    image: &'a Image,
    variant: &'a Variant,
    unicorn: Option<Counter>,
    qemu: Option<Counter>,
}

impl<'a> CallCounts<'a> {
    /// Counts for `image` built for `variant`; opens nothing yet.
    pub fn new(image: &'a Image, variant: &'a Variant) -> CallCounts<'a> {
        CallCounts { image, variant, unicorn: None, qemu: None }
    }

    /// Kernel instructions of one call of `w` and the counter's name.
    ///
    /// # Errors
    /// Why neither counter counted the call (both reasons where both tried).
    pub fn instructions(&mut self, w: &Workload, rng: &mut impl RngExt) -> Result<(u64, &'static str), String> {
        let on_unicorn = match BackendKind::Unicorn.supports(self.variant) {
            Ok(()) => {
                if self.unicorn.is_none() {
                    self.unicorn = Some(Counter::unicorn(self.image, self.variant)?);
                }
                let uc = self.unicorn.as_mut().expect("opened above");
                match uc.profile(self.image, w, rng) {
                    Ok(p) => return Ok((p.instructions(), UNICORN)),
                    Err(e) if unicorn_stopped(&e) => e,
                    Err(e) => return Err(e),
                }
            }
            Err(why) => why,
        };
        let on_qemu = match &mut self.qemu {
            Some(q) => Ok(q),
            None => Counter::qemu(self.image, self.variant, None).map(|q| self.qemu.insert(q)),
        };
        match on_qemu.and_then(|q| q.profile(self.image, w, rng)) {
            Ok(p) => Ok((p.instructions(), QEMU)),
            Err(e) => Err(format!("Unicorn: {on_unicorn}; qemu: {e}")),
        }
    }
}
