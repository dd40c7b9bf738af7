//! Command-line options (clap) mapped onto library calls. Arguments as typed ([`RunArgs`]) are
//! resolved into a [`RunConfig`] in one place.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::bench::{self, BenchConfig};
use kernel_lab::paths;
use kernel_lab::run::{self, RunConfig};
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::{Arch, Kernel, Variant, VARIANTS};
use kernel_lab::vectors;

#[derive(Parser)]
#[command(name = "lab", version, about = "Cross-architecture emulation test lab for MD5 and Poly1305 kernels")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the kernels and check them against every vector on every backend.
    #[command(
        after_help = "Examples:\n  lab run\n  lab run --arch riscv64 --no-zbb\n  lab run --kernel md5 --backend qemu --vectors my-vectors.json"
    )]
    Run(RunArgs),
    /// Count instructions per block, compare native speed with OpenSSL and RustCrypto, and time
    /// the lab itself.
    #[command(
        after_help = "Examples:\n  lab bench\n  lab bench --json > bench.json\n  lab bench --arch riscv64 --no-native --no-throughput"
    )]
    Bench(BenchArgs),
    /// List variants and backends, and which backend can run which variant.
    #[command(after_help = "Example:\n  lab list")]
    List,
}

#[derive(Args)]
struct RunArgs {
    /// Architectures to run (default: all).
    #[arg(long = "arch", value_parser = ["riscv64", "aarch64", "x86_64"])]
    arch: Vec<String>,
    /// Only variants built with Zbb (riscv64+zbb).
    #[arg(long, conflicts_with = "no_zbb")]
    zbb: bool,
    /// Only variants built without Zbb.
    #[arg(long)]
    no_zbb: bool,
    /// Kernels to check (default: all).
    #[arg(long = "kernel", value_parser = ["md5", "poly1305"])]
    kernel: Vec<String>,
    /// Backends to use (default: every backend that can run a variant).
    #[arg(long = "backend", value_parser = ["unicorn", "qemu", "native"])]
    backend: Vec<String>,
    /// Extra vector files to run (JSON, see vectors/README.md).
    #[arg(long = "vectors", value_name = "FILE")]
    vectors: Vec<PathBuf>,
    /// Run only the --vectors files, not the bundled ones.
    #[arg(long)]
    no_bundled: bool,
    /// Folder with <arch>/*.S kernel sources (default: the repository's kernels/).
    #[arg(long, value_name = "DIR")]
    kernels_dir: Option<PathBuf>,
    /// Seed for register poison, argument garbage and split points (default: random, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Wall-clock budget per batch in seconds; a batch past it fails as a hang.
    #[arg(long, default_value_t = 20)]
    batch_seconds: u64,
}

#[derive(Args)]
struct BenchArgs {
    /// Architectures to measure (default: all).
    #[arg(long = "arch", value_parser = ["riscv64", "aarch64", "x86_64"])]
    arch: Vec<String>,
    /// Only variants built with Zbb (riscv64+zbb).
    #[arg(long, conflicts_with = "no_zbb")]
    zbb: bool,
    /// Only variants built without Zbb.
    #[arg(long)]
    no_zbb: bool,
    /// Kernels to measure (default: all).
    #[arg(long = "kernel", value_parser = ["md5", "poly1305"])]
    kernel: Vec<String>,
    /// Backends for the throughput section (default: all that can run a variant).
    #[arg(long = "backend", value_parser = ["unicorn", "qemu", "native"])]
    backend: Vec<String>,
    /// Samples per timing; medians are reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=101))]
    runs: u32,
    /// Skip the native comparison with OpenSSL and RustCrypto.
    #[arg(long)]
    no_native: bool,
    /// Skip the lab throughput section and the timed `lab run`.
    #[arg(long)]
    no_throughput: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Folder with <arch>/*.S kernel sources (default: the repository's kernels/).
    #[arg(long, value_name = "DIR")]
    kernels_dir: Option<PathBuf>,
    /// Seed for operands.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// The variants an `--arch`/`--zbb`/`--no-zbb` selection names (all when none is given).
fn select_variants(arch: &[String], zbb: bool, no_zbb: bool) -> Vec<&'static Variant> {
    let archs: Vec<Arch> = arch.iter().filter_map(|a| Arch::from_name(a)).collect();
    VARIANTS
        .iter()
        .filter(|v| archs.is_empty() || archs.contains(&v.arch))
        .filter(|v| (!zbb || v.zbb) && (!no_zbb || !v.zbb))
        .collect()
}

fn bench_cmd(a: &BenchArgs) -> i32 {
    let variants = select_variants(&a.arch, a.zbb, a.no_zbb);
    if variants.is_empty() {
        eprintln!("lab bench: no variant matches these --arch/--zbb/--no-zbb options (see `lab list`)");
        return 2;
    }
    let all = BenchConfig::all();
    let cfg = BenchConfig {
        variants,
        kernels: if a.kernel.is_empty() {
            all.kernels
        } else {
            a.kernel.iter().filter_map(|k| Kernel::from_name(k)).collect()
        },
        backends: if a.backend.is_empty() {
            all.backends
        } else {
            a.backend.iter().filter_map(|b| BackendKind::from_name(b)).collect()
        },
        build: BuildConfig {
            kernels_dir: a.kernels_dir.clone().unwrap_or_else(paths::kernels_dir),
            cache_dir: paths::cache_dir(),
        },
        runs: a.runs as usize,
        native: !a.no_native,
        throughput: !a.no_throughput,
        seed: a.seed,
    };
    let report = bench::bench(&cfg);
    let text = if a.json { report.to_json() + "\n" } else { report.to_human() };
    // A closed pipe (`lab bench | head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    report.exit_code()
}

impl RunArgs {
    /// Resolves the typed arguments into a run configuration.
    fn resolve(&self) -> Result<RunConfig, String> {
        let variants = select_variants(&self.arch, self.zbb, self.no_zbb);
        if variants.is_empty() {
            return Err("no variant matches these --arch/--zbb/--no-zbb options (see `lab list`)".into());
        }
        let kernels: Vec<Kernel> = if self.kernel.is_empty() {
            Kernel::ALL.to_vec()
        } else {
            self.kernel.iter().filter_map(|k| Kernel::from_name(k)).collect()
        };
        let backends = if self.backend.is_empty() {
            BackendKind::ALL.to_vec()
        } else {
            self.backend.iter().filter_map(|b| BackendKind::from_name(b)).collect()
        };
        let mut vector_files =
            if self.no_bundled { Vec::new() } else { vectors::bundled_files(&paths::vectors_dir(), &kernels) };
        vector_files.extend(self.vectors.iter().cloned());
        if vector_files.is_empty() {
            return Err("no vector files to run (drop --no-bundled or add --vectors FILE)".into());
        }
        let build = BuildConfig {
            kernels_dir: self.kernels_dir.clone().unwrap_or_else(paths::kernels_dir),
            cache_dir: paths::cache_dir(),
        };
        Ok(RunConfig {
            variants,
            backends,
            kernels,
            vector_files,
            build,
            seed: self.seed.unwrap_or_else(rand::random),
            limits: Limits { batch_time: std::time::Duration::from_secs(self.batch_seconds) },
        })
    }
}

fn run_cmd(args: &RunArgs) -> i32 {
    let cfg = match args.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lab run: {e}");
            return 2;
        }
    };
    let report = run::run(&cfg);
    print!("{}", report.to_human());
    run::exit_code(&report)
}

fn list_cmd() -> i32 {
    println!("{:<12} {:<8} {:<34} {:<46} backends", "variant", "arch", "ISA", "qemu -cpu");
    for v in &VARIANTS {
        println!("{:<12} {:<8} {:<34} {:<46}", v.name, v.arch.name(), v.isa, v.qemu_cpu);
        for b in BackendKind::ALL {
            match b.supports(v) {
                Ok(()) if b == BackendKind::Unicorn && v.zbb => {
                    println!("{:>14} {:<8} yes (Zbb emulated on the illegal-instruction trap)", "", b.name())
                }
                Ok(()) => println!("{:>14} {:<8} yes", "", b.name()),
                Err(why) => println!("{:>14} {:<8} no: {why}", "", b.name()),
            }
        }
    }
    println!("\nkernels: {}", Kernel::ALL.map(|k| format!("{} ({})", k.name(), k.symbols().join(", "))).join("; "));
    0
}

/// Parses the command line and runs it; returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match &cli.command {
        Command::Run(a) => run_cmd(a),
        Command::Bench(a) => bench_cmd(a),
        Command::List => list_cmd(),
    }
}
