//! Command-line options (clap) mapped onto library calls. Arguments as typed ([`RunArgs`]) are
//! resolved into a [`RunConfig`] in one place; [`OutputArgs`] renders any report.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::doctor::{self, State};
use kernel_lab::paths;
use kernel_lab::report::Report;
use kernel_lab::reporters::{self, Format};
use kernel_lab::run::{self, RunConfig};
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::{Arch, Kernel, Variant, VARIANTS};
use kernel_lab::vectors;

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
    #[command(flatten)]
    out: OutputArgs,
}

impl RunArgs {
    /// Resolves the typed arguments into a run configuration.
    fn resolve(&self) -> Result<RunConfig, String> {
        let archs: Vec<Arch> = self.arch.iter().filter_map(|a| Arch::from_name(a)).collect();
        let variants: Vec<&'static Variant> = VARIANTS
            .iter()
            .filter(|v| archs.is_empty() || archs.contains(&v.arch))
            .filter(|v| !(self.zbb && !v.zbb) && !(self.no_zbb && v.zbb))
            .collect();
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

fn list_cmd() -> i32 {
    println!("{:<12} {:<8} {:<34} {:<46} backends", "variant", "arch", "ISA", "qemu -cpu");
    for v in &VARIANTS {
        println!("{:<12} {:<8} {:<34} {:<46}", v.name, v.arch.name(), v.isa, v.qemu_cpu);
        for b in BackendKind::ALL {
            match b.supports(v) {
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
        Command::List => list_cmd(),
        Command::Doctor => doctor_cmd(),
    }
}
