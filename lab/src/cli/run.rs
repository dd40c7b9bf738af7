//! `lab run`: options resolved into a [`kernel_lab::run::RunConfig`].

use std::path::PathBuf;

use clap::Args;

use kernel_lab::backend::{Limits, PartialLoads};
use kernel_lab::batch::Placement;
use kernel_lab::exit::ExitCode;
use kernel_lab::paths;
use kernel_lab::replay::Replay;
use kernel_lab::run::{self, Filter, RunConfig};
use kernel_lab::vectors::{self, CostLimits};

use super::options::{check_input, Expect, OutputArgs, Select};
use crate::bars::Bars;

#[derive(Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    select: Select,
    /// Which calls to make: `jdk` (default) only those the JDK makes, the HotSpot family's
    /// contract (0 <= ofs <= limit <= 2^31 - 65; Poly1305 lengths in whole blocks); `wide`
    /// every call the lab's contract allows, findings outside the JDK's domain reported apart
    /// (class out-of-domain, not failures); for the OpenSSL family, `wide` passes Poly1305
    /// lengths that are not a multiple of 16 as given (outside OpenSSL's contract, reported
    /// apart likewise). docs/contracts.md, "The JDK call domain".
    #[arg(long, value_enum, default_value = "jdk")]
    domain: kernel_lab::domain::Domain,
    /// Extra vector files to run (JSON, see vectors/README.md), or folders: every *.json file
    /// under a folder, at any depth.
    #[arg(long = "vectors", value_name = "FILE|DIR")]
    vectors: Vec<PathBuf>,
    /// Run only the --vectors files, not the bundled ones.
    #[arg(long)]
    no_bundled: bool,
    /// Seed for register poison, argument garbage and split points (default: random, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Wall-clock budget per batch in seconds on qemu-user and native; a batch past it fails
    /// as a hang (1 to 86400).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    batch_seconds: u64,
    /// Which end of their pages the guarded cases' inputs touch a guard page with: `end` catches
    /// over-reads, `start` under-reads (every vector also runs packed at its offsets).
    #[arg(long, value_enum, default_value = "end")]
    flush: Flush,
    /// Guest instructions one call may execute on Unicorn before it fails as a hang; a call over
    /// a long input gets 4096 more per MD5 block and 512 more per Poly1305 block.
    #[arg(long, default_value_t = Limits::default().call_instructions, value_parser = clap::value_parser!(u64).range(1..))]
    call_instructions: u64,
    /// A load that reaches past (or before) a buffer inside one aligned 8-byte word the buffer
    /// also touches cannot fault on any machine: `warn` lists it as a warning, `fail` makes it a
    /// memory finding (valgrind's --partial-loads-ok=no). A manifest variant's `partial_loads`
    /// overrides it for that variant.
    #[arg(long, value_name = "warn|fail", default_value = "warn", value_parser = PartialLoads::from_name)]
    partial_loads: PartialLoads,
    /// Most bytes one vector entry may cost: input bytes its calls read over all its cases, plus
    /// 4096 per call (vectors/README.md, "Limits"). An entry over it is refused (exit 2).
    #[arg(long, value_name = "BYTES", default_value_t = CostLimits::default().max_entry_bytes, value_parser = clap::value_parser!(u64).range(1..))]
    max_entry_bytes: u64,
    /// Most bytes all vector entries of the run may cost together; entries past it are refused.
    #[arg(long, value_name = "BYTES", default_value_t = CostLimits::default().max_run_bytes, value_parser = clap::value_parser!(u64).range(1..))]
    max_run_bytes: u64,
    /// Run only the vector sets named (repeat or comma list), e.g. `--set rfc1321`. A name
    /// matches when it contains the pattern; `=NAME` matches exactly, `*` and `?` glob.
    #[arg(long = "set", value_name = "NAME", value_delimiter = ',')]
    sets: Vec<String>,
    /// Run only the vectors or cases named (repeat for more), e.g. `--case 'MD5("abc")'` or
    /// `--case 'RFC1321*'`, matched as --set; a vector runs with all its cases, drawn exactly
    /// as in the full run with the same seed.
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// Vector lengths in bits qemu runs RVV and SVE variants at (repeat or comma list), e.g.
    /// `--vlen 128,512` (default: RVV VLEN 128, 256, 512, 1024; SVE VL 128, 256, 512). RVV
    /// takes powers of two in 128..=1024, SVE multiples of 128 in 128..=2048.
    #[arg(long = "vlen", value_name = "BITS", value_delimiter = ',')]
    vlen: Vec<u32>,
    /// Stop after the first failed row; the rest is reported as skipped.
    #[arg(long)]
    fail_fast: bool,
    /// Variant x backend combinations run at once, each on its own thread (default: one per
    /// CPU). The report is the same for any N, but for times.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    #[command(flatten)]
    out: OutputArgs,
}

/// `--flush`: which end of their pages the guarded cases' inputs are flush against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Flush {
    /// Against the guard page after them: over-reads fault.
    End,
    /// Against the guard page before them: under-reads fault.
    Start,
}

impl Flush {
    fn placement(self) -> Placement {
        match self {
            Flush::End => Placement::End,
            Flush::Start => Placement::Start,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flush::End => "end",
            Flush::Start => "start",
        }
    }
}

impl RunArgs {
    /// Resolves the typed arguments into a run configuration.
    fn resolve(&self) -> Result<RunConfig, String> {
        // The selection first: its paths and patterns are checked before the vector files.
        let variants = self.select.variants()?;
        run::check_vector_lengths(&variants, &self.vlen)?;
        let kernels = self.select.kernels();
        let mut vector_files =
            if self.no_bundled { Vec::new() } else { vectors::bundled_files(&paths::vectors_dir(), &kernels) };
        for v in &self.vectors {
            check_input("--vectors", v, Expect::FileOrDir)?;
            if v.is_dir() {
                let files = vectors::json_files_under(v).map_err(|e| format!("--vectors {}: {e}", v.display()))?;
                if files.is_empty() {
                    return Err(format!("--vectors {}: no *.json file under this folder", v.display()));
                }
                vector_files.extend(files);
            } else {
                vector_files.push(v.clone());
            }
        }
        if vector_files.is_empty() {
            return Err("no vector files to run (drop --no-bundled or add --vectors FILE)".into());
        }
        let seed = self.seed.unwrap_or_else(rand::random);
        Ok(RunConfig {
            variants,
            backends: self.select.backends(),
            kernels,
            vector_files,
            build: self.select.build(),
            seed,
            limits: Limits {
                batch_time: std::time::Duration::from_secs(self.batch_seconds),
                call_instructions: self.call_instructions,
                partial_loads: self.partial_loads,
                witness: true,
            },
            flush: self.flush.placement(),
            vector_lengths: self.vlen.clone(),
            cost_limits: CostLimits { max_entry_bytes: self.max_entry_bytes, max_run_bytes: self.max_run_bytes },
            filter: Filter { sets: self.sets.clone(), cases: self.cases.clone(), fail_fast: self.fail_fast },
            jobs: self.jobs.map_or(0, |n| n as usize),
        })
    }

    /// Every option of this run that decides its findings, for the replay lines of the reports
    /// (the row or case narrowing is added where a line is printed). `--set`/`--case` stay out:
    /// each line names its own.
    fn replay(&self, seed: u64) -> Replay {
        let mut r = Replay::new(seed);
        if let Some(dir) = &self.select.kernels_dir {
            r.path("--kernels-dir", dir);
        }
        self.select.replay_options(&mut r);
        if self.domain != kernel_lab::domain::Domain::Jdk {
            r.value("--domain", self.domain.name());
        }
        if self.no_bundled {
            r.flag("--no-bundled");
        }
        for v in &self.vectors {
            r.path("--vectors", v);
        }
        if self.flush != Flush::End {
            r.value("--flush", self.flush.name());
        }
        let defaults = Limits::default();
        if self.batch_seconds != defaults.batch_time.as_secs() {
            r.value("--batch-seconds", self.batch_seconds.to_string());
        }
        if self.call_instructions != defaults.call_instructions {
            r.value("--call-instructions", self.call_instructions.to_string());
        }
        if self.partial_loads != defaults.partial_loads {
            r.value("--partial-loads", self.partial_loads.name());
        }
        let costs = CostLimits::default();
        if self.max_entry_bytes != costs.max_entry_bytes {
            r.value("--max-entry-bytes", self.max_entry_bytes.to_string());
        }
        if self.max_run_bytes != costs.max_run_bytes {
            r.value("--max-run-bytes", self.max_run_bytes.to_string());
        }
        r
    }
}

impl RunArgs {
    /// `--check-args`: the options resolve into a run configuration.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.resolve().map(drop)
    }
}

pub(crate) fn run_cmd(args: &RunArgs) -> ExitCode {
    kernel_lab::domain::set_current(args.domain);
    let cfg = match args.resolve() {
        Ok(c) => c,
        Err(e) => {
            super::out::eprintln(&format!("lab run: {e}"));
            return ExitCode::Error;
        }
    };
    if let Err(status) = args.out.start("run") {
        return status;
    }
    // Vector file errors first, on stderr, before anything runs.
    let loaded = run::load_sets(&cfg);
    for e in &loaded.errors {
        super::out::eprintln(&format!("vector file error: {e}"));
    }
    // A filter that selects nothing is refused before anything is built or run.
    let misses = kernel_lab::filter::check(&cfg.filter, &loaded.sets);
    for e in &misses {
        super::out::eprintln(&format!("lab run: {e}"));
    }
    if !misses.is_empty() {
        // Why a set may be missing: its file was left out by --kernel, or gave no entry.
        for n in &loaded.notes {
            super::out::eprintln(&format!("note: {n}"));
        }
        return ExitCode::Error;
    }
    let mut bars = Bars::default();
    let mut report = run::run_loaded(&cfg, loaded, &mut |e| bars.handle(e));
    report.replay = Some(args.replay(cfg.seed));
    args.out.emit(&report, "run")
}
