//! Command-line options (clap) mapped onto library calls. Arguments as typed ([`RunArgs`]) are
//! resolved into a [`RunConfig`](kernel_lab::run::RunConfig) in one place; [`OutputArgs`](options::OutputArgs) renders any report.

mod bench;
mod capture;
mod doctor;
mod fuzz;
mod list;
mod options;
mod out;
mod run;

use clap::{Parser, Subcommand};
use kernel_lab::exit::ExitCode;

use bench::{bench_cmd, BenchArgs};
use capture::{capture_cmd, CaptureArgs};
use doctor::{doctor_cmd, DoctorArgs};
use fuzz::{fuzz_cmd, FuzzArgs};
use list::{list_cmd, ListArgs};
use run::{run_cmd, RunArgs};

#[derive(Parser)]
#[command(
    name = "lab",
    version,
    about = "Cross-architecture emulation test lab for MD5 and Poly1305 kernels",
    after_help = "Examples:\n  lab doctor                  # is everything installed?\n  lab run                     # every kernel on every variant and backend\n  lab run --format junit --output lab.xml\n\nExit status: 0 nothing failed, 1 a case failed, 2 usage, input or set-up error,\n130/143 interrupted by SIGINT/SIGTERM."
)]
struct Cli {
    /// Parse and resolve the arguments (variants, vector files, shard...) without running
    /// anything: exit 0 when the command line is valid, 2 with clap's message otherwise.
    /// tests/workflow.rs runs every `lab` command of the CI workflow with it.
    #[arg(long, global = true, hide = true)]
    check_args: bool,
    /// Cache folder for built images and the bundled kernels and vectors (default:
    /// $KERNEL_LAB_CACHE, else $XDG_CACHE_HOME/kernel-lab, else ~/.cache/kernel-lab).
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the kernels and check them against every vector on every backend.
    #[command(
        after_help = "Examples:\n  lab run\n  lab run --arch riscv64 --no-zbb\n  lab run --kernel md5 --backend qemu --vectors my-vectors.json\n  lab run --seed 7 --format junit --output lab-junit.xml\n  lab run --format sarif --output lab.sarif    # for code scanning\n  lab run --format junit --output lab.xml --also-report sarif=lab.sarif   # one run, two reports\n  lab run --format json | jq '.totals'\n  lab run --set rfc1321 --case 'MD5(\"abc\")'   # substrings; =NAME exact; * and ? glob\n\nA full run: about 380,000 cases; JUnit: about 450 test cases (--junit-cases rows, the\ndefault) or one per case (--junit-cases all, tens of MB)."
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
        after_help = "Examples:\n  lab bench\n  lab bench --format json > bench.json\n  lab bench --arch riscv64 --no-native --no-throughput"
    )]
    Bench(BenchArgs),
    /// List variants and backends, and which backend can run which variant.
    #[command(after_help = "Examples:\n  lab list\n  lab list --format json")]
    List(ListArgs),
    /// Check the set-up: tools, the Unicorn engine, every variant on every backend.
    ///
    /// Checks clang, ld.lld and each qemu-user binary, the Unicorn engine linked into the lab,
    /// that the toolchain builds for every variant (a tiny probe, from scratch), and that every
    /// variant's image builds and runs a tiny batch on every backend that can run it. Exit 0
    /// only if all is well.
    #[command(
        after_help = "Examples:\n  lab doctor\n  lab doctor --format json\n\nExit status: 0 all well, 1 a kernel gave a wrong answer, 2 something is missing or broken\n(each missing program is named with the Debian package that brings it)."
    )]
    Doctor(DoctorArgs),
    /// Capture HotSpot's intrinsic stubs from a JVM as an object and a kernel-lab.toml.
    ///
    /// Runs JAVA with your flags and -XX:+PrintStubCode, reads each stub's exact bytes from the
    /// live JVM, refuses a truncated stub or one that reads memory outside itself, and writes
    /// <variant>.o and kernel-lab.toml to --out. The variant name carries the JDK version and
    /// the flags.
    // The doc comment is also the --help text, where <NAME> and [[NAME]] are literal.
    #[allow(rustdoc::invalid_html_tags)]
    #[command(
        after_help = "Examples:\n  lab capture --out /tmp/hs                       # java on PATH\n  lab capture --java /opt/jdk-21/bin/java --jvm-flag=-XX:UseAVX=0 --out /tmp/hs21\n  lab capture --from-log stubs.log --out /tmp/hs  # a saved -XX:+PrintStubCode log\n  lab run --manifest /tmp/hs/kernel-lab.toml\n\nOr in one step: lab run --hotspot java [--jvm-flag=-XX:...]\n\nExit status: 0 captured, 2 the JVM failed or a stub was refused."
    )]
    Capture(CaptureArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::Error } else { ExitCode::Passed };
        }
    };
    if let Some(dir) = &cli.cache_dir {
        // Read by kernel_lab::paths::cache_dir; set before any other thread starts.
        std::env::set_var("KERNEL_LAB_CACHE", dir);
    }
    if cli.check_args {
        return check_args(&cli.command);
    }
    match &cli.command {
        Command::Run(a) => run_cmd(a),
        Command::Fuzz(a) => fuzz_cmd(a),
        Command::Bench(a) => bench_cmd(a),
        Command::List(a) => list_cmd(a),
        Command::Doctor(a) => doctor_cmd(a),
        Command::Capture(a) => capture_cmd(a),
    }
}

/// `--check-args`: resolves the command's options as the command itself would, runs nothing.
fn check_args(command: &Command) -> ExitCode {
    let resolved = match command {
        Command::Run(a) => a.check(),
        Command::Fuzz(a) => a.check(),
        Command::Bench(a) => a.check(),
        Command::Capture(a) => a.check(),
        Command::List(_) | Command::Doctor(_) => Ok(()),
    };
    match resolved {
        Ok(()) => ExitCode::Passed,
        Err(e) => {
            out::eprintln(&format!("lab: {e}"));
            ExitCode::Error
        }
    }
}
