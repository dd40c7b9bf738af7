//! `lab bench`: options mapped onto [`kernel_lab::bench`].

use std::path::PathBuf;

use clap::Args;

use kernel_lab::bench::baseline::{self, Baseline};
use kernel_lab::bench::{self, BenchConfig, BenchReport};
use kernel_lab::exit::ExitCode;

use super::options::{Select, TextOrJson};

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Variants and kernels to measure; backends for the throughput section.
    #[command(flatten)]
    select: Select,
    /// Samples per timing; medians are reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=101))]
    runs: u32,
    /// Skip the native comparison with OpenSSL and RustCrypto.
    #[arg(long)]
    no_native: bool,
    /// Skip the lab throughput section and the timed `lab run`.
    #[arg(long)]
    no_throughput: bool,
    /// Skip the llvm-mca-19 cycle predictions.
    #[arg(long)]
    no_predict: bool,
    /// llvm-mca CPU models to predict on (repeat or comma-separate; each applies to the
    /// architectures that know it). Default: sifive-u74, spacemit-x60, sifive-p670; cortex-a55,
    /// cortex-a72, neoverse-n1; the host's x86 model, skylake, znver3.
    #[arg(long = "cpu", value_name = "MODEL", value_delimiter = ',')]
    cpu: Vec<String>,
    /// Compare with a saved baseline (instructions and predicted cycles per block); exit 1 when
    /// a figure costs more than --max-regression.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Write this run's instructions and predicted cycles per block as a baseline file.
    #[arg(long, value_name = "FILE")]
    save_baseline: Option<PathBuf>,
    /// Largest cost increase the baseline gate accepts, percent (`2%` or `2`).
    #[arg(long, value_name = "PCT", default_value = "2%", value_parser = parse_percent)]
    max_regression: f64,
    /// Draw instructions and predicted cycles per block per variant as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Report format: the human tables or JSON (the same `--format` as `lab run` and `lab fuzz`;
    /// a bench report has no JUnit form).
    #[arg(long, value_enum, default_value = "human")]
    format: TextOrJson,
    /// Old spelling of `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
    /// Seed for operands.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Instruction counts (per variant) and llvm-mca runs done at once, each on its own thread
    /// (default: one per CPU); the report is the same for any N. The native comparison and the
    /// throughput section are timed and always run alone.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
}

/// `2%` or `2` -> 2.0; negative, NaN and unparsable values are usage errors.
fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().trim_end_matches('%').trim().parse().map_err(|_| format!("`{s}` is not a percentage"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: the allowed regression must be a percentage >= 0"))
    }
}

/// Writes the files the options ask for; false when one cannot be written.
fn write_outputs(a: &BenchArgs, report: &BenchReport) -> bool {
    let mut written = true;
    if let Some(path) = &a.save_baseline {
        match Baseline::of(report).save(path) {
            Ok(()) => eprintln!("lab bench: baseline written to {}", path.display()),
            Err(e) => {
                eprintln!("lab bench: cannot write the baseline: {e}");
                written = false;
            }
        }
    }
    if let Some(path) = &a.plot {
        match bench::plot::draw(report, path) {
            Ok(()) => eprintln!("lab bench: plot written to {}", path.display()),
            Err(e) => {
                eprintln!("lab bench: cannot draw the plot: {e}");
                written = false;
            }
        }
    }
    written
}

/// The OpenSSL timing child (`native::CHILD_ENV` set by the parent `lab bench`): prints its
/// JSON rows and exits.
fn openssl_child(runs: usize) -> ExitCode {
    match bench::native::child_main(runs) {
        Ok(json) => {
            println!("{json}");
            ExitCode::Passed
        }
        Err(e) => {
            eprintln!("lab bench (OpenSSL child): {e}");
            ExitCode::Failed
        }
    }
}

impl BenchArgs {
    /// `--check-args`: the selection names at least one variant.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.select.variants().map(drop)
    }
}

pub(crate) fn bench_cmd(a: &BenchArgs) -> ExitCode {
    if let Some(runs) = bench::native::child_request() {
        return openssl_child(runs);
    }
    let mut variants = match a.select.variants_or_usage_error("bench") {
        Ok(v) => v,
        Err(status) => return status,
    };
    // Captured HotSpot stubs are counted next to the lab's own kernel of their architecture.
    if a.select.hotspot_capture() {
        let archs: Vec<_> = variants.iter().map(|v| v.arch).collect();
        let own = kernel_lab::variant::VARIANTS.iter().filter(|v| archs.contains(&v.arch) && !v.zbb);
        variants.extend(own.filter(|o| !variants.iter().any(|v| v.name == o.name)).collect::<Vec<_>>());
    }
    // Read the baseline first: a bad file is a usage error before minutes of measuring.
    let base = match a.baseline.as_deref().map(Baseline::load).transpose() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("lab bench: --baseline {e}");
            return ExitCode::Error;
        }
    };
    let cfg = BenchConfig {
        variants,
        kernels: a.select.kernels(),
        backends: a.select.backends(),
        build: a.select.build(),
        runs: a.runs as usize,
        native: !a.no_native,
        throughput: !a.no_throughput,
        seed: a.seed,
        predict: !a.no_predict,
        cpus: a.cpu.iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect(),
        jobs: a.jobs.map_or(0, |n| n as usize),
    };
    let mut bars = crate::bars::Bars::default();
    let mut report = bench::bench_with_progress(&cfg, &mut |e| bars.handle(e));
    if let (Some(base), Some(path)) = (&base, &a.baseline) {
        let now = Baseline::of(&report);
        report.gate = Some(baseline::compare(base, &path.display().to_string(), &now, a.max_regression));
    }
    let text = if a.json || a.format == TextOrJson::Json { report.to_json() + "\n" } else { report.to_human() };
    super::out::print(&text);
    report.exit_code().or_error_if(!write_outputs(a, &report))
}
