//! Command-line options (clap) mapped onto library calls. Arguments as typed ([`RunArgs`]) are
//! resolved into a [`RunConfig`] in one place; [`OutputArgs`] renders any report.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::batch::Placement;
use kernel_lab::bench::{self, BenchConfig};
use kernel_lab::doctor::{self, State};
use kernel_lab::report::Report;
use kernel_lab::reporters::{self, Format};
use kernel_lab::run::{self, RunConfig};
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::{Arch, Kernel, Variant, VARIANTS};
use kernel_lab::vectors;
use kernel_lab::{fuzz, paths};

use crate::bars::Bars;

#[derive(Parser)]
#[command(
    name = "lab",
    version,
    about = "Cross-architecture emulation test lab for MD5 and Poly1305 kernels",
    after_help = "Examples:\n  lab doctor                  # is everything installed?\n  lab run                     # every kernel on every variant and backend\n  lab run --format junit --output lab.xml\n\nExit status: 0 nothing failed, 1 a case failed, 2 usage, input or set-up error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the kernels and check them against every vector on every backend.
    #[command(
        after_help = "Examples:\n  lab run\n  lab run --arch riscv64 --no-zbb\n  lab run --kernel md5 --backend qemu --vectors my-vectors.json\n  lab run --seed 7 --format junit --output lab-junit.xml\n  lab run --format json | jq '.totals'"
    )]
    Run(RunArgs),
    /// Differential fuzzing against the portable reference; shrinks and saves failures.
    #[command(
        after_help = "Examples:\n  lab fuzz --cases 2000\n  lab fuzz --arch riscv64 --zbb --kernel md5 --time 60s --seed 42\n  lab fuzz --time 10m --shard 0/4      # this runner's quarter of a campaign\n\nA failure is shrunk, printed with its seed, and written to --out as a vector file:\n  lab run --no-bundled --vectors fuzz-failures/<file>.json"
    )]
    Fuzz(FuzzArgs),
    /// Count instructions per block, compare native speed with OpenSSL and RustCrypto, and time
    /// the lab itself.
    #[command(
        after_help = "Examples:\n  lab bench\n  lab bench --json > bench.json\n  lab bench --arch riscv64 --no-native --no-throughput"
    )]
    Bench(BenchArgs),
    /// List variants and backends, and which backend can run which variant.
    #[command(after_help = "Example:\n  lab list")]
    List,
    /// Check the set-up: tools, the Unicorn engine, every variant on every backend.
    ///
    /// Checks clang, ld.lld and each qemu-user binary, the Unicorn engine linked into the lab,
    /// and that every variant builds from scratch and runs a tiny batch on every backend that
    /// can run it. Exit 0 only if all is well.
    #[command(
        after_help = "Example:\n  lab doctor\n\nExit status: 0 all well, 1 a kernel gave a wrong answer, 2 something is missing or broken\n(each missing program is named with the Debian package that brings it)."
    )]
    Doctor,
}

/// Report format and destination, shared by every command that produces a [`Report`]
/// (`#[command(flatten)]` it into the command's arguments).
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Report format: the human table, JSON (docs/report-schema.md) or JUnit XML.
    #[arg(long, default_value = "human", value_parser = clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::name)))]
    format: String,
    /// Write the report to FILE (the human table still goes to stdout).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl OutputArgs {
    /// Prints or writes `report` of `command` (`"run"`, `"fuzz"`) as asked and returns the exit
    /// status: the report's ([`run::exit_code`]), or 2 when the report cannot be written.
    /// Whether the structured report goes to stdout (so human text must go to stderr).
    fn structured_on_stdout(&self) -> bool {
        self.output.is_none() && self.format != Format::Human.name()
    }

    /// Writes only the structured report (JSON or JUnit) to `--output` or stdout; for commands
    /// that print their own human text. Returns 0, or 2 when it cannot be written.
    pub fn emit_structured(&self, report: &Report, command: &str) -> i32 {
        let format = Format::from_name(&self.format).unwrap_or(Format::Human);
        let result = match &self.output {
            Some(path) => reporters::write(report, format, command, path).map(|()| {
                eprintln!("lab {command}: {} report written to {}", format.name(), path.display());
            }),
            None if format == Format::Human => Ok(()),
            None => reporters::render(report, format, command).map(|text| print!("{text}")),
        };
        match result {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("lab {command}: cannot write the report: {e}");
                2
            }
        }
    }

    pub fn emit(&self, report: &Report, command: &str) -> i32 {
        let format = Format::from_name(&self.format).unwrap_or(Format::Human);
        let mut stdout = anstream::stdout();
        match &self.output {
            Some(path) => {
                let _ = write!(stdout, "{}", report.to_human_styled(true));
                if let Err(e) = reporters::write(report, format, command, path) {
                    eprintln!("lab {command}: cannot write the report: {e}");
                    return 2;
                }
                eprintln!("lab {command}: {} report written to {}", format.name(), path.display());
            }
            None if format == Format::Human => {
                let _ = write!(stdout, "{}", report.to_human_styled(true));
            }
            None => match reporters::render(report, format, command) {
                Ok(text) => {
                    let _ = write!(stdout, "{text}");
                }
                Err(e) => {
                    eprintln!("lab {command}: {e}");
                    return 2;
                }
            },
        }
        run::exit_code(report)
    }
}

/// Which variants, kernels and backends a command covers.
#[derive(Args)]
struct Select {
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
    /// Folder with <arch>/*.S kernel sources (default: the repository's kernels/).
    #[arg(long, value_name = "DIR")]
    kernels_dir: Option<PathBuf>,
}

#[derive(Args)]
struct BenchArgs {
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
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
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
    let variants = match a.select.variants() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("lab bench: {e}");
            return 2;
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
    };
    let report = bench::bench(&cfg);
    let text = if a.json { report.to_json() + "\n" } else { report.to_human() };
    // A closed pipe (`lab bench | head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    report.exit_code()
}

impl Select {
    fn variants(&self) -> Result<Vec<&'static Variant>, String> {
        let variants = select_variants(&self.arch, self.zbb, self.no_zbb);
        if variants.is_empty() {
            return Err("no variant matches these --arch/--zbb/--no-zbb options (see `lab list`)".into());
        }
        Ok(variants)
    }

    fn kernels(&self) -> Vec<Kernel> {
        if self.kernel.is_empty() {
            Kernel::ALL.to_vec()
        } else {
            self.kernel.iter().filter_map(|k| Kernel::from_name(k)).collect()
        }
    }

    fn backends(&self) -> Vec<BackendKind> {
        if self.backend.is_empty() {
            BackendKind::ALL.to_vec()
        } else {
            self.backend.iter().filter_map(|b| BackendKind::from_name(b)).collect()
        }
    }

    fn build(&self) -> BuildConfig {
        BuildConfig {
            kernels_dir: self.kernels_dir.clone().unwrap_or_else(paths::kernels_dir),
            cache_dir: paths::cache_dir(),
        }
    }
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    select: Select,
    /// Extra vector files to run (JSON, see vectors/README.md).
    #[arg(long = "vectors", value_name = "FILE")]
    vectors: Vec<PathBuf>,
    /// Run only the --vectors files, not the bundled ones.
    #[arg(long)]
    no_bundled: bool,
    /// Seed for register poison, argument garbage and split points (default: random, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Wall-clock budget per batch in seconds on qemu-user and native; a batch past it fails
    /// as a hang.
    #[arg(long, default_value_t = 20)]
    batch_seconds: u64,
    /// Which end of their pages the guarded cases' inputs touch a guard page with: `end` catches
    /// over-reads, `start` under-reads (every vector also runs packed at its offsets).
    #[arg(long, value_parser = ["end", "start"], default_value = "end")]
    flush: String,
    /// Guest instructions one call may execute on Unicorn before it fails as a hang.
    #[arg(long, default_value_t = Limits::default().call_instructions)]
    call_instructions: u64,
    #[command(flatten)]
    out: OutputArgs,
}

impl RunArgs {
    /// Resolves the typed arguments into a run configuration.
    fn resolve(&self) -> Result<RunConfig, String> {
        let kernels = self.select.kernels();
        let mut vector_files =
            if self.no_bundled { Vec::new() } else { vectors::bundled_files(&paths::vectors_dir(), &kernels) };
        vector_files.extend(self.vectors.iter().cloned());
        if vector_files.is_empty() {
            return Err("no vector files to run (drop --no-bundled or add --vectors FILE)".into());
        }
        Ok(RunConfig {
            variants: self.select.variants()?,
            backends: self.select.backends(),
            kernels,
            vector_files,
            build: self.select.build(),
            seed: self.seed.unwrap_or_else(rand::random),
            limits: Limits {
                batch_time: std::time::Duration::from_secs(self.batch_seconds),
                call_instructions: self.call_instructions,
            },
            flush: if self.flush == "start" { Placement::Start } else { Placement::End },
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
    let mut bars = Bars::default();
    let report = run::run_with_progress(&cfg, &mut |e| bars.handle(e));
    args.out.emit(&report, "run")
}

fn doctor_cmd() -> i32 {
    let d = doctor::diagnose(&paths::kernels_dir(), &paths::vectors_dir());
    let mut out = anstream::stdout();
    let (ok, bad, na) = (
        anstyle::AnsiColor::Green.on_default(),
        anstyle::AnsiColor::Red.on_default().bold(),
        anstyle::Style::new().dimmed(),
    );
    for c in &d.checks {
        let (style, tag, detail) = match &c.state {
            State::Ok(s) => (ok, "ok", s.clone()),
            State::Missing { program, package } => {
                (bad, "MISSING", format!("`{program}` not on PATH: install the Debian package `{package}`"))
            }
            State::Failed(s) => (bad, "BROKEN", s.clone()),
            State::WrongAnswer(s) => (bad, "WRONG", s.clone()),
            State::NotApplicable(s) => (na, "n/a", s.clone()),
        };
        let _ = writeln!(out, "{style}{tag:<8}{style:#} {:<24} {detail}", c.what);
    }
    let missing = d.missing_packages();
    if !missing.is_empty() {
        let list = missing.join(" ");
        let _ = writeln!(
            out,
            "\nmissing Debian packages: {list}\ninstall them: sudo apt-get install {list}   (or ./ci/setup.sh)"
        );
    }
    let verdict = match d.exit_code() {
        0 => format!("{ok}lab doctor: all well{ok:#}"),
        1 => format!("{bad}lab doctor: the set-up works but a kernel gave a wrong answer (see `lab run`){bad:#}"),
        _ => format!("{bad}lab doctor: the set-up is incomplete{bad:#}"),
    };
    let _ = writeln!(out, "\n{verdict}");
    d.exit_code()
}

#[derive(Args)]
struct FuzzArgs {
    #[command(flatten)]
    select: Select,
    /// Cases per variant × backend × kernel (across all shards). Default: 2000.
    #[arg(long, conflicts_with = "time")]
    cases: Option<u64>,
    /// Wall time for the whole campaign, split across targets (e.g. 60s, 10m).
    #[arg(long)]
    time: Option<humantime::Duration>,
    /// Campaign seed (default: random, printed so the run can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Run shard I of N: case k belongs to shard k mod N (e.g. 0/4).
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Cases per backend entry.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Folder for shrunk failures (vector files).
    #[arg(long, value_name = "DIR", default_value = "fuzz-failures")]
    out: PathBuf,
    #[command(flatten)]
    report: OutputArgs,
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected I/N, e.g. 0/4")?;
    let (i, n): (u64, u64) =
        (i.parse().map_err(|_| "I must be a number")?, n.parse().map_err(|_| "N must be a number")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

fn fuzz_cmd(args: &FuzzArgs) -> i32 {
    let variants = match args.select.variants() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("lab fuzz: {e}");
            return 2;
        }
    };
    let seed = args.seed.unwrap_or_else(rand::random);
    let budget = match args.time {
        Some(t) => fuzz::Budget::Time(t.into()),
        None => fuzz::Budget::Cases(args.cases.unwrap_or(2000)),
    };
    let cfg = fuzz::FuzzConfig {
        variants,
        backends: args.select.backends(),
        kernels: args.select.kernels(),
        build: args.select.build(),
        seed,
        budget,
        shard: args.shard.unwrap_or((0, 1)),
        batch: args.batch.max(1),
        out_dir: args.out.clone(),
        limits: Limits::default(),
    };
    // With JSON or JUnit on stdout, the human lines go to stderr.
    let human = |text: &str| {
        if args.report.structured_on_stdout() {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    human(&format!("lab fuzz: seed {seed} (repeat with --seed {seed}), shard {}/{}\n", cfg.shard.0, cfg.shard.1));
    let started = std::time::Instant::now();
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(indicatif::ProgressStyle::with_template("{spinner} {msg}").expect("template"));
    let results = fuzz::campaign(&cfg, &mut |p| {
        let of = p.total.map(|t| format!("/{t}")).unwrap_or_default();
        bar.set_message(format!("{}: {}{of} cases, {:.0} cases/s", p.target, p.cases, p.rate));
        bar.tick();
    });
    bar.finish_and_clear();
    let (text, status) = fuzz_text(&results, seed);
    human(&text);
    let report = fuzz::to_report(&results, seed, cfg.shard, started.elapsed());
    status.max(args.report.emit_structured(&report, "fuzz"))
}

/// Each target's line and every failure, and the exit status.
fn fuzz_text(results: &[fuzz::TargetResult], seed: u64) -> (String, i32) {
    use std::fmt::Write as _;
    let mut status = 0;
    let mut out = String::new();
    for r in results {
        let head = format!("{:<12} {:<8} {:<9}", r.variant, r.backend.name(), r.kernel.name());
        match &r.outcome {
            fuzz::Outcome::Clean => {
                let _ = writeln!(out, "{head} {:>8} cases {:>10.0} cases/s  clean", r.cases, r.rate());
            }
            fuzz::Outcome::Skipped(why) => {
                let _ = writeln!(out, "{head} skipped: {why}");
            }
            fuzz::Outcome::Error(e) => {
                let _ = writeln!(out, "{head} error: {e}");
                status = status.max(2);
            }
            fuzz::Outcome::Failed(f) => {
                status = status.max(1);
                let _ = writeln!(out, "{head} {:>8} cases  FAILED at case {} (seed {seed})", r.cases, f.case_index);
                let _ = writeln!(
                    out,
                    "  shrunk from {} to {} blocks; minimal case:",
                    f.original_blocks,
                    fuzz::blocks_of(&f.case)
                );
                let json = serde_json::to_string_pretty(&vectors::entry_json(&f.case)).unwrap_or_default();
                let _ = writeln!(out, "{}", json.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"));
                for finding in &f.findings {
                    let _ = writeln!(out, "  - {finding}");
                }
                let _ = writeln!(
                    out,
                    "  written to {}; replay: lab run --no-bundled --vectors {} --arch {} --backend {}",
                    f.file.display(),
                    f.file.display(),
                    r.variant.split('+').next().unwrap_or(r.variant),
                    r.backend
                );
            }
        }
    }
    (out, status)
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
        Command::Fuzz(a) => fuzz_cmd(a),
        Command::Bench(a) => bench_cmd(a),
        Command::List => list_cmd(),
        Command::Doctor => doctor_cmd(),
    }
}
