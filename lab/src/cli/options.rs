//! Options shared by several commands: the variant/kernel/backend selection and the report output.

use std::path::{Path, PathBuf};

use clap::Args;

use kernel_lab::backend::BackendKind;
use kernel_lab::exit::ExitCode;
use kernel_lab::filter;
use kernel_lab::paths;
use kernel_lab::report::Report;
use kernel_lab::reporters::{self, Format, JunitCases, ReportError};
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::user_kernel::{self, manifest, UserKernel};
use kernel_lab::variant::{Arch, Kernel, Variant, VARIANTS};

#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Report format: the human table, JSON (docs/report-schema.md), JUnit XML or SARIF 2.1.0
    /// (code scanning).
    #[arg(long, value_enum, default_value = "human")]
    pub(crate) format: Format,
    /// Write the report to FILE (the human table still goes to stdout).
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// JUnit test cases: `rows` = one per row of the report (variant × backend × kernel ×
    /// vector set, or fuzz target), failures listed inside; `all` = one per case.
    #[arg(long, value_enum, default_value = "rows")]
    pub(crate) junit_cases: JunitCases,
    /// Also write the same run's report in another format (repeat): `sarif=lab.sarif`,
    /// `junit=lab.xml`, `json=lab.json`, `human=lab.txt`. One run feeds code scanning, the test
    /// summary and a log without running the cases again.
    #[arg(long = "also-report", value_name = "FORMAT=FILE", value_parser = parse_also_report)]
    pub(crate) also_report: Vec<AlsoReport>,
}

/// One `--also-report FORMAT=FILE`.
#[derive(Debug, Clone)]
pub(crate) struct AlsoReport {
    format: Format,
    path: PathBuf,
}

/// Parses `FORMAT=FILE`; the error names what is wrong and the formats there are.
fn parse_also_report(text: &str) -> Result<AlsoReport, String> {
    let names = || Format::ALL.map(Format::name).join(", ");
    let (format, path) =
        text.split_once('=').ok_or_else(|| format!("`{text}` is not FORMAT=FILE (formats: {})", names()))?;
    let format = Format::ALL
        .into_iter()
        .find(|f| f.name() == format)
        .ok_or_else(|| format!("`{format}` is not a report format (formats: {})", names()))?;
    if path.is_empty() {
        return Err(format!("`{text}` names no file"));
    }
    Ok(AlsoReport { format, path: PathBuf::from(path) })
}

impl OutputArgs {
    /// Before a run: removes a report an earlier run left at `--output` (a run that dies
    /// leaves no stale verdict) and handles SIGINT/SIGTERM from now on (lab/src/interrupt.rs).
    /// Err carries the exit status ([`ExitCode::Error`]) after printing why.
    pub(crate) fn start(&self, command: &str) -> Result<(), ExitCode> {
        let stale = self.output.iter().chain(self.also_report.iter().map(|a| &a.path));
        let removed = stale.into_iter().try_for_each(|p| reporters::remove_stale(p));
        let installed = kernel_lab::interrupt::install().map_err(|e| format!("cannot handle SIGINT/SIGTERM: {e}"));
        removed.map_err(|e| e.to_string()).and(installed).map_err(|e| {
            eprintln!("lab {command}: {e}");
            ExitCode::Error
        })
    }

    /// Whether the structured report goes to stdout (so human text must go to stderr).
    pub(crate) fn structured_on_stdout(&self) -> bool {
        self.output.is_none() && self.format != Format::Human
    }

    /// Writes only the structured report (JSON or JUnit) to `--output` or stdout; for commands
    /// that print their own human text. Returns the report's [`ExitCode`], or
    /// [`ExitCode::Error`] when the report cannot be written.
    pub fn emit_structured(&self, report: &Report, command: &str) -> ExitCode {
        let format = self.format;
        let result = match &self.output {
            Some(path) => reporters::write_with(report, format, command, self.junit_cases, path).map(|()| {
                super::out::eprintln(&format!("lab {command}: {} report written to {}", format.name(), path.display()));
            }),
            None if format == Format::Human => Ok(()),
            None => print_report(report, format, command, self.junit_cases),
        };
        if let Err(e) = &result {
            super::out::eprintln(&format!("lab {command}: cannot write the report: {e}"));
        }
        let extras = self.write_also(report, command);
        report.status().or_error_if(result.is_err() || !extras)
    }

    /// Writes every `--also-report`; false when one could not be written (each failure is
    /// printed, the others are still written).
    fn write_also(&self, report: &Report, command: &str) -> bool {
        let mut all = true;
        for also in &self.also_report {
            match reporters::write_with(report, also.format, command, self.junit_cases, &also.path) {
                Ok(()) => super::out::eprintln(&format!(
                    "lab {command}: {} report written to {}",
                    also.format.name(),
                    also.path.display()
                )),
                Err(e) => {
                    super::out::eprintln(&format!("lab {command}: cannot write the report: {e}"));
                    all = false;
                }
            }
        }
        all
    }

    /// Prints or writes `report` of `command` (`"run"`, `"fuzz"`) as asked and returns the exit
    /// status: the report's ([`Report::status`]), or [`ExitCode::Error`] when the report cannot
    /// be written. Vector file errors are not repeated in the human table: the command prints
    /// them on stderr first.
    pub fn emit(&self, report: &Report, command: &str) -> ExitCode {
        let format = self.format;
        match &self.output {
            Some(path) => {
                super::out::print(&report.to_human_styled_errors_elsewhere(true));
                if let Err(e) = reporters::write_with(report, format, command, self.junit_cases, path) {
                    super::out::eprintln(&format!("lab {command}: cannot write the report: {e}"));
                    return report.status().or_error_if(true);
                }
                super::out::eprintln(&format!("lab {command}: {} report written to {}", format.name(), path.display()));
            }
            None if format == Format::Human => {
                super::out::print(&report.to_human_styled_errors_elsewhere(true));
            }
            None => {
                if let Err(e) = print_report(report, format, command, self.junit_cases) {
                    super::out::eprintln(&format!("lab {command}: {e}"));
                    return report.status().or_error_if(true);
                }
            }
        }
        let extras = self.write_also(report, command);
        report.status().or_error_if(!extras)
    }
}

/// Writes `report` to stdout as it renders (the JSON report is streamed). A closed stdout drops
/// the rest quietly, as [`super::out::print`] does; a serializer failure is an error.
fn print_report(report: &Report, format: Format, command: &str, cases: JunitCases) -> Result<(), ReportError> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(anstream::stdout());
    let written = reporters::render_into(report, format, command, cases, &mut out);
    let written = written
        .and_then(|()| out.flush().map_err(|source| ReportError::Io { path: std::path::PathBuf::new(), source }));
    match written.map_err(|e| e.into_io(std::path::Path::new("stdout"))) {
        Err(ReportError::Io { .. }) => Ok(()),
        other => other,
    }
}

/// `--format` of the commands that print either text or JSON (`lab list`, `lab doctor`,
/// `lab bench`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TextOrJson {
    /// Human-readable text.
    Human,
    /// One JSON document.
    Json,
}

/// Which variants, kernels and backends a command covers.
#[derive(Args)]
pub(crate) struct Select {
    /// Architectures to run: repeat the option or give a comma list (default: all).
    #[arg(long = "arch", value_delimiter = ',', value_enum)]
    pub(crate) arch: Vec<Arch>,
    /// Only the scalar variant built with Zbb (riscv64+zbb); the vector rows (riscv64+zbb+v) by
    /// name with --variant.
    #[arg(long, conflicts_with = "no_zbb")]
    pub(crate) zbb: bool,
    /// Only the scalar variants built without Zbb; the vector rows (riscv64+v) by name with
    /// --variant.
    #[arg(long)]
    pub(crate) no_zbb: bool,
    /// Kernels to check, md5 and poly1305: repeat the option or give a comma list (default:
    /// all). A name matches when it contains the pattern; `=NAME` matches exactly, `*` and `?`
    /// glob.
    #[arg(long = "kernel", value_name = "NAME", value_delimiter = ',')]
    pub(crate) kernel: Vec<String>,
    /// Backends to use: repeat the option or give a comma list (default: every backend that can
    /// run a variant).
    #[arg(long = "backend", value_delimiter = ',', value_enum)]
    pub(crate) backend: Vec<BackendKind>,
    /// Folder with <arch>/ kernel sources (*.S), objects (*.o) and archives (*.a) using the
    /// contract names (default: the repository's kernels/); the lab's own driver is always
    /// linked. A kernel-lab.toml in it is read as --manifest.
    // The doc comment is also the --help text, where <NAME> and [[NAME]] are literal.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, value_name = "DIR")]
    pub(crate) kernels_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) own: OwnKernel,
}

/// Bring your own kernel (README "Bring your own kernel"): a manifest, or one-off objects.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct OwnKernel {
    /// Kernel manifest (kernel-lab.toml): run its [[variant]]s instead of the lab's kernels.
    // The doc comment is also the --help text, where <NAME> and [[NAME]] are literal.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "FILE", conflicts_with_all = ["object", "kernels_dir"])]
    pub(crate) manifest: Option<PathBuf>,
    /// Your prebuilt relocatable ELF object or static archive (repeat for more), linked with
    /// the lab's driver; its arch comes from the file unless --arch names it.
    #[arg(long = "object", value_name = "FILE", conflicts_with = "kernels_dir")]
    pub(crate) object: Vec<PathBuf>,
    /// Your symbol for a contract symbol (repeat), e.g. md5_implCompressMB=my_md5_mb. Kernels
    /// with no mapped symbol are skipped; without --symbol the contract names are used.
    #[arg(long = "symbol", value_name = "CONTRACT=SYMBOL", requires = "object")]
    pub(crate) symbol: Vec<String>,
    /// The ISA your --object code may use: rv64gc_zbb_zbkb, armv8-a+crypto, x86-64-v3+adx
    /// (default: the arch's base ISA). Drives the ISA scan and qemu's -cpu.
    #[arg(long, value_name = "ISA", requires = "object")]
    pub(crate) isa: Option<String>,
    /// Capture HotSpot's stubs from this `java` (e.g. `java`, /opt/jdk-21/bin/java) and run
    /// them as a variant named after the JDK and the flags (README "HotSpot developers").
    #[arg(long, value_name = "JAVA", conflicts_with_all = ["manifest", "object", "kernels_dir"])]
    pub(crate) hotspot: Option<PathBuf>,
    /// A flag for the --hotspot JVM (repeat), e.g. --jvm-flag=-XX:UseAVX=0.
    #[arg(long = "jvm-flag", value_name = "FLAG", allow_hyphen_values = true, requires = "hotspot")]
    pub(crate) jvm_flag: Vec<String>,
    /// Only the variants of these names (repeat or comma list): the lab's (`lab list`) or a
    /// manifest's. A name matches when it contains the pattern; `=NAME` matches exactly, `*`
    /// and `?` glob.
    #[arg(long = "variant", value_name = "NAME", value_delimiter = ',')]
    pub(crate) variant: Vec<String>,
    /// What a kernel reading the unspecified upper 32 bits of an `int`/`unsigned int`
    /// argument is: `fail` (garbage there in every call: each case fails) or `warn` (clean
    /// there in every call, one probe case per image with garbage: one warning per argument).
    /// Default: per contract family from its real callers (HotSpot fail, OpenSSL warn), or the
    /// manifest's `abi_upper_bits`.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub(crate) abi_upper_bits: Option<kernel_lab::abi::UpperBits>,
    /// The accumulators a HotSpot-family `poly1305_processBlocks` is handed and must return:
    /// `lab` (the lab's contract: limb 4 < 2^27) or `jdk` (what the JDK's IntegerPolynomial1305
    /// leaves: limb 4 <= 2^26 + 13; HotSpot's captured stubs). Default: the manifest's
    /// `poly1305_acc`, else `lab`. docs/contracts.md, "The JDK call domain"
    #[arg(long, value_enum, value_name = "RANGE")]
    pub(crate) poly1305_acc: Option<kernel_lab::domain::AccRange>,
}

/// Each kernel as one variant per dispatch path: the OpenSSL paths its objects choose from
/// through a capability word ([`user_kernel::capability::expand`]), or the paths Linux's
/// Poly1305 glue chooses from ([`user_kernel::glue_paths::expand`]).
fn expand_paths(kernels: Vec<UserKernel>) -> Result<Vec<UserKernel>, String> {
    let mut out = Vec::new();
    for k in kernels {
        for v in user_kernel::capability::expand(k)? {
            out.extend(user_kernel::glue_paths::expand(v)?);
        }
    }
    Ok(out)
}

impl Select {
    /// The variants `--arch`/`--zbb`/`--no-zbb`/`--variant` name (all when none is given),
    /// after [`check`](Self::check).
    ///
    /// # Errors
    /// An input path or a `--kernel` pattern [`check`](Self::check) refuses, a `--variant`
    /// pattern that matches no variant (naming the nearest), or no variant left.
    pub(crate) fn variants(&self) -> Result<Vec<&'static Variant>, String> {
        self.check()?;
        let archs = &self.arch;
        let pool: Vec<&'static Variant> = match self.user_kernels(archs)? {
            Some(kernels) => kernels.into_iter().map(UserKernel::into_variant).collect(),
            None => VARIANTS.iter().collect(),
        };
        let known: Vec<&str> = pool.iter().map(|v| v.name).collect();
        if let Some(e) = filter::misses("--variant", "variant", &self.own.variant, &known).into_iter().next() {
            return Err(e);
        }
        let variants: Vec<&'static Variant> = pool
            .into_iter()
            .filter(|v| archs.is_empty() || archs.contains(&v.arch))
            .filter(|v| (!self.zbb || v.zbb) && (!self.no_zbb || !v.zbb))
            .filter(|v| self.own.variant.is_empty() || filter::any_matches(&self.own.variant, v.name))
            // `--zbb`/`--no-zbb` choose a scalar build: a lab vector row only by --variant.
            .filter(|v| {
                let vector_row = v.custom.is_none() && v.vector_length().is_some();
                !vector_row || !(self.zbb || self.no_zbb) || !self.own.variant.is_empty()
            })
            .collect();
        if variants.is_empty() {
            return Err("no variant matches these --arch/--zbb/--no-zbb/--variant options (see `lab list`)".into());
        }
        let upper_bits = |k: &user_kernel::UserKernel| k.abi_upper_bits;
        let upper_bits = one_setting(&variants, self.own.abi_upper_bits, upper_bits, "abi_upper_bits", |p| p.name())?;
        kernel_lab::abi::set_upper_bits(upper_bits);
        let acc = one_setting(&variants, self.own.poly1305_acc, |k| k.poly1305_acc, "poly1305_acc", |r| r.name())?;
        kernel_lab::domain::set_acc_range(acc.unwrap_or_default());
        Ok(variants)
    }

    /// Whether the kernels are HotSpot stubs the lab captured (`--hotspot`, or a manifest
    /// `lab capture` wrote).
    pub(crate) fn hotspot_capture(&self) -> bool {
        let written_by_capture =
            |p: PathBuf| std::fs::read_to_string(p).is_ok_and(|t| t.starts_with(kernel_lab::hotspot::MANIFEST_NOTE));
        self.own.hotspot.is_some() || self.manifest().is_some_and(written_by_capture)
    }

    /// The manifest (--manifest, or kernel-lab.toml in --kernels-dir), if one is used.
    fn manifest(&self) -> Option<PathBuf> {
        let in_dir = self.kernels_dir.as_ref().map(|d| d.join(manifest::FILE_NAME)).filter(|p| p.is_file());
        self.own.manifest.clone().or(in_dir)
    }

    /// The user's kernels: a manifest's variants, or the one-off `--object` kernel; `None`
    /// for the lab's own variants.
    fn user_kernels(&self, archs: &[Arch]) -> Result<Option<Vec<UserKernel>>, String> {
        if let Some(path) = self.manifest() {
            let kernels = manifest::load(&path).map_err(|e| e.to_string())?;
            return expand_paths(kernels).map(Some);
        }
        if let Some(java) = &self.own.hotspot {
            return super::capture::hotspot_kernel(java, &self.own.jvm_flag).map(|k| Some(vec![k]));
        }
        if self.own.object.is_empty() {
            return Ok(None);
        }
        let arch = match archs {
            [] => None,
            [one] => Some(*one),
            _ => return Err("--object builds one architecture: give at most one --arch".into()),
        };
        let k = user_kernel::from_options(&self.own.object, &self.own.symbol, self.own.isa.as_deref(), arch)?;
        expand_paths(vec![k]).map(Some)
    }

    /// Adds the options that choose the kernels (--manifest, --object, --symbol, --isa) to a
    /// replay line; the narrowed line names the variant itself.
    pub(crate) fn replay_options(&self, r: &mut kernel_lab::replay::Replay) {
        if let Some(m) = &self.own.manifest {
            r.path("--manifest", m);
        }
        if let Some(java) = &self.own.hotspot {
            r.value("--hotspot", java.to_string_lossy());
        }
        for f in &self.own.jvm_flag {
            r.value("--jvm-flag", f.clone());
        }
        for o in &self.own.object {
            r.path("--object", o);
        }
        for s in &self.own.symbol {
            r.value("--symbol", s.clone());
        }
        if let Some(isa) = &self.own.isa {
            r.value("--isa", isa.clone());
        }
        if let Some(p) = self.own.abi_upper_bits {
            r.value("--abi-upper-bits", p.name().to_owned());
        }
        if let Some(a) = self.own.poly1305_acc {
            r.value("--poly1305-acc", a.name().to_owned());
        }
    }

    /// [`variants`](Self::variants) for command `cmd`, printing the error ([`ExitCode::Error`]).
    pub(crate) fn variants_or_usage_error(&self, cmd: &str) -> Result<Vec<&'static Variant>, ExitCode> {
        self.variants().map_err(|e| {
            super::out::eprintln(&format!("lab {cmd}: {e}"));
            ExitCode::Error
        })
    }

    /// Every input path of the selection exists and has the right kind (`--kernels-dir` a
    /// folder, `--manifest` and `--object` files), and every `--kernel` pattern matches a
    /// kernel: checked before anything runs.
    ///
    /// # Errors
    /// The first problem, naming the option and the path or pattern.
    pub(crate) fn check(&self) -> Result<(), String> {
        if let Some(dir) = &self.kernels_dir {
            check_input("--kernels-dir", dir, Expect::Dir)?;
        }
        if let Some(m) = &self.own.manifest {
            check_input("--manifest", m, Expect::File)?;
        }
        for o in &self.own.object {
            check_input("--object", o, Expect::File)?;
        }
        let names: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
        filter::misses("--kernel", "kernel", &self.kernel, &names).into_iter().next().map_or(Ok(()), Err)
    }

    /// The kernels `--kernel` selects, in report order (all when none is given).
    pub(crate) fn kernels(&self) -> Vec<Kernel> {
        let chosen = |k: &Kernel| self.kernel.is_empty() || filter::any_matches(&self.kernel, k.name());
        Kernel::ALL.into_iter().filter(chosen).collect()
    }

    pub(crate) fn backends(&self) -> Vec<BackendKind> {
        if self.backend.is_empty() {
            BackendKind::ALL.to_vec()
        } else {
            self.backend.clone()
        }
    }

    pub(crate) fn build(&self) -> BuildConfig {
        BuildConfig {
            kernels_dir: self.kernels_dir.clone().unwrap_or_else(paths::kernels_dir),
            cache_dir: paths::cache_dir(),
        }
    }
}

/// What an input path must be ([`check_input`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A readable file.
    File,
    /// A readable folder.
    Dir,
    /// Either.
    FileOrDir,
}

/// Checks, before anything runs, that `path` given to `option` exists, is what `expect` says
/// and can be read.
///
/// # Errors
/// `--vectors x.json: no such file or folder`, `--kernels-dir k: not a folder`, or the error
/// opening it, naming the option and the path.
pub(crate) fn check_input(option: &str, path: &Path, expect: Expect) -> Result<(), String> {
    let fail = |why: String| format!("{option} {}: {why}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fail("no such file or folder".into()),
        _ => fail(e.to_string()),
    })?;
    match (expect, meta.is_dir()) {
        (Expect::File, true) => return Err(fail("a folder, not a file".into())),
        (Expect::Dir, false) => return Err(fail("not a folder".into())),
        _ => {}
    }
    // Only folders and regular files are opened: opening a FIFO would wait for a writer (the
    // loaders refuse what is not a regular file, naming it).
    let opened = if meta.is_dir() {
        std::fs::read_dir(path).map(drop)
    } else if meta.is_file() {
        std::fs::File::open(path).map(drop)
    } else {
        Ok(())
    };
    opened.map_err(|e| fail(format!("cannot read it: {e}")))
}

/// A setting that is one per run (`key` of the manifest, `--key` on the command line): the
/// option when given, else what the selected manifest variants choose alike, else `None`
/// (the default). Variants that choose differently are refused, naming each one's choice.
fn one_setting<T: Copy + PartialEq>(
    variants: &[&'static Variant],
    option: Option<T>,
    get: impl Fn(&user_kernel::UserKernel) -> Option<T>,
    key: &str,
    name: impl Fn(T) -> &'static str,
) -> Result<Option<T>, String> {
    if option.is_some() {
        return Ok(option);
    }
    let of = |v: &Variant| user_kernel::of(v).and_then(&get);
    let chosen: Vec<T> = variants.iter().filter_map(|v| of(v)).collect();
    match chosen.as_slice() {
        [] => Ok(None),
        [p, rest @ ..] if rest.iter().all(|q| q == p) && chosen.len() == variants.len() => Ok(Some(*p)),
        _ => Err(format!(
            "the manifest's variants choose different {key} ({}); it is one setting of a run: \
             give it to every variant alike, narrow with --variant, or pass --{}",
            variants
                .iter()
                .map(|v| format!("{}: {}", v.name, of(v).map_or("(the default)", &name)))
                .collect::<Vec<_>>()
                .join(", "),
            key.replace('_', "-"),
        )),
    }
}
