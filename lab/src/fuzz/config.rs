//! What a campaign runs (variants, backends, budget) and what it returns per target.

use super::Case;
use crate::contract::Family;
use crate::finding::Finding;
use crate::variant::{Kernel, Variant};

/// How long a campaign runs.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many cases per target (variant × backend × kernel), across all shards.
    Cases(u64),
    /// This much wall time for the whole campaign, split evenly across targets.
    Time(std::time::Duration),
}

/// What to fuzz.
#[derive(Debug, Clone)]
pub struct FuzzConfig {
    /// Variants, in order.
    pub variants: Vec<&'static Variant>,
    /// Backends, in order.
    pub backends: Vec<crate::backend::BackendKind>,
    /// Kernels, in order.
    pub kernels: Vec<Kernel>,
    /// Kernel sources and image cache.
    pub build: crate::toolchain::BuildConfig,
    /// Campaign seed: the same seed gives the same cases.
    pub seed: u64,
    /// Cases or time.
    pub budget: Budget,
    /// `(index, count)`: this run takes case k when `k % count == index`.
    pub shard: (u64, u64),
    /// Cases per batch (per backend entry).
    pub batch: usize,
    /// Where failing cases are written as vector files.
    pub out_dir: std::path::PathBuf,
    /// Hang budgets.
    pub limits: crate::backend::Limits,
    /// Pieces run at once, each on its own thread (0: one per CPU, [`crate::pool::default_jobs`]).
    /// The results are the same for any number (but for times).
    pub jobs: usize,
    /// Vector lengths in bits qemu fuzzes every RVV/SVE image at (`--vlen`, checked as for
    /// `lab run`: [`crate::run::check_vector_lengths`]); empty: the arch row's defaults (RVV:
    /// VLEN 128, 256, 512, 1024; SVE: VL 128, 256, 512). One target per length, same cases.
    pub vector_lengths: Vec<u32>,
}

/// A shrunk failure.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Index of the original failing case in the campaign.
    pub case_index: u64,
    /// Blocks in the original failing case.
    pub original_blocks: usize,
    /// The minimal failing case.
    pub case: Case,
    /// What it does wrong.
    pub findings: Vec<Finding>,
    /// The vector file that replays it (`lab run --vectors FILE`).
    pub file: std::path::PathBuf,
    /// The `lab run` command that replays it from the file ([`crate::replay`]).
    pub replay: String,
}

/// How one target ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every case agreed with the reference.
    Clean,
    /// A case disagreed; shrunk and written.
    Failed(Box<Failure>),
    /// The backend cannot run the variant, or the image lacks the kernel.
    Skipped(String),
    /// The backend and the variant cannot exist together on this host (native on another
    /// architecture, [`crate::backend::BackendKind::applicable`]): nothing was skipped.
    NotApplicable(String),
    /// Building, loading or running failed.
    Error(String),
}

/// One variant × backend × kernel of a campaign.
#[derive(Debug, Clone)]
pub struct TargetResult {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: crate::backend::BackendKind,
    /// Kernel.
    pub kernel: Kernel,
    /// The vector length qemu ran the target at (RVV's VLEN, SVE's VL); `None` for scalar
    /// images and the other backends.
    pub vector_length: Option<crate::arch::VectorLength>,
    /// The contract family the image runs the kernel through (reports name it when it is
    /// not HotSpot's).
    pub family: Family,
    /// Cases run (this shard's), not counting [`not_run`](Self::not_run).
    pub cases: u64,
    /// Cases the backend stopped before an instruction it cannot execute (Unicorn and vector
    /// code): neither passed nor failed.
    pub not_run: super::NotRun,
    /// Time spent running them, added up over the target's pieces (time on one core).
    pub elapsed: std::time::Duration,
    /// How it ended.
    pub outcome: Outcome,
    /// Findings about the variant's image that concern this target, as `lab run` reports them:
    /// the static ISA and system-call scan, and contract symbols of the kernel that the image
    /// lacks. Any of them fails the campaign (qemu-user runs a kernel's system calls itself,
    /// so only the static scan sees them there).
    pub image_findings: Vec<Finding>,
    /// The variant's image, when it was built (the SARIF report maps addresses through it).
    pub image: Option<std::path::PathBuf>,
    /// Warnings, as `lab run`'s: the `abi-upper-bits` probe of the image's kernel (on one
    /// target per image and kernel) and the partial loads its cases made under `warn`.
    pub warnings: Vec<Warning>,
}

/// A warning of a fuzz target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The load instruction's address, for a partial load (one warning per instruction).
    pub pc: Option<u64>,
    /// The sentence.
    pub text: String,
}

impl TargetResult {
    /// Cases per second.
    pub fn rate(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}
