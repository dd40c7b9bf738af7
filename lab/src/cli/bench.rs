//! `lab bench`: options mapped onto [`kernel_lab::bench`].

use clap::Args;

use kernel_lab::bench::{self, BenchConfig};

use super::options::Select;

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
    /// Report format: the human tables or JSON (the same `--format` as `lab run` and `lab fuzz`;
    /// a bench report has no JUnit form).
    #[arg(long, default_value = "human", value_parser = ["human", "json"])]
    format: String,
    /// Old spelling of `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
    /// Seed for operands.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

impl BenchArgs {
    /// `--check-args`: the selection names at least one variant.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.select.variants().map(drop)
    }
}

pub(crate) fn bench_cmd(a: &BenchArgs) -> i32 {
    let variants = match a.select.variants_or_usage_error("bench") {
        Ok(v) => v,
        Err(status) => return status,
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
    };
    let report = bench::bench(&cfg);
    let text = if a.json || a.format == "json" { report.to_json() + "\n" } else { report.to_human() };
    super::out::print(&text);
    report.exit_code()
}
