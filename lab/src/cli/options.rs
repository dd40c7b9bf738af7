//! Options shared by several commands: the variant/kernel/backend selection and the report output.

use std::path::PathBuf;

use clap::Args;

use kernel_lab::backend::BackendKind;
use kernel_lab::exit::ExitCode;
use kernel_lab::paths;
use kernel_lab::report::Report;
use kernel_lab::reporters::{self, Format, JunitCases};
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::{Arch, Kernel, Variant, VARIANTS};

#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Report format: the human table, JSON (docs/report-schema.md) or JUnit XML.
    #[arg(long, default_value = "human", value_parser = clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::name)))]
    pub(crate) format: String,
    /// Write the report to FILE (the human table still goes to stdout).
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// JUnit test cases: `rows` = one per variant × backend × kernel × vector set, failures
    /// listed inside (a full run: ~150 cases, kilobytes); `all` = one per case (~160,000).
    #[arg(long, default_value = "rows", value_parser = ["rows", "all"])]
    pub(crate) junit_cases: String,
}

impl OutputArgs {
    /// Before a run: removes a report an earlier run left at `--output` (a run that dies
    /// leaves no stale verdict) and handles SIGINT/SIGTERM from now on (lab/src/interrupt.rs).
    /// Err carries the exit status ([`ExitCode::Error`]) after printing why.
    pub(crate) fn start(&self, command: &str) -> Result<(), ExitCode> {
        let removed = self.output.as_deref().map_or(Ok(()), reporters::remove_stale);
        let installed = kernel_lab::interrupt::install().map_err(|e| format!("cannot handle SIGINT/SIGTERM: {e}"));
        removed.map_err(|e| e.to_string()).and(installed).map_err(|e| {
            eprintln!("lab {command}: {e}");
            ExitCode::Error
        })
    }

    fn junit_cases(&self) -> JunitCases {
        JunitCases::from_name(&self.junit_cases).unwrap_or_default()
    }

    /// Whether the structured report goes to stdout (so human text must go to stderr).
    pub(crate) fn structured_on_stdout(&self) -> bool {
        self.output.is_none() && self.format != Format::Human.name()
    }

    /// Writes only the structured report (JSON or JUnit) to `--output` or stdout; for commands
    /// that print their own human text. Returns the report's [`ExitCode`], or
    /// [`ExitCode::Error`] when the report cannot be written.
    pub fn emit_structured(&self, report: &Report, command: &str) -> ExitCode {
        let format = Format::from_name(&self.format).unwrap_or(Format::Human);
        let result = match &self.output {
            Some(path) => reporters::write_with(report, format, command, self.junit_cases(), path).map(|()| {
                super::out::eprintln(&format!("lab {command}: {} report written to {}", format.name(), path.display()));
            }),
            None if format == Format::Human => Ok(()),
            None => {
                reporters::render_with(report, format, command, self.junit_cases()).map(|text| super::out::print(&text))
            }
        };
        if let Err(e) = &result {
            super::out::eprintln(&format!("lab {command}: cannot write the report: {e}"));
        }
        report.status().or_error_if(result.is_err())
    }

    /// Prints or writes `report` of `command` (`"run"`, `"fuzz"`) as asked and returns the exit
    /// status: the report's ([`Report::status`]), or [`ExitCode::Error`] when the report cannot
    /// be written. Vector file errors are not repeated in the human table: the command prints
    /// them on stderr first.
    pub fn emit(&self, report: &Report, command: &str) -> ExitCode {
        let format = Format::from_name(&self.format).unwrap_or(Format::Human);
        match &self.output {
            Some(path) => {
                super::out::print(&report.to_human_styled_errors_elsewhere(true));
                if let Err(e) = reporters::write_with(report, format, command, self.junit_cases(), path) {
                    super::out::eprintln(&format!("lab {command}: cannot write the report: {e}"));
                    return report.status().or_error_if(true);
                }
                super::out::eprintln(&format!("lab {command}: {} report written to {}", format.name(), path.display()));
            }
            None if format == Format::Human => {
                super::out::print(&report.to_human_styled_errors_elsewhere(true));
            }
            None => match reporters::render_with(report, format, command, self.junit_cases()) {
                Ok(text) => super::out::print(&text),
                Err(e) => {
                    super::out::eprintln(&format!("lab {command}: {e}"));
                    return report.status().or_error_if(true);
                }
            },
        }
        report.status()
    }
}

/// Which variants, kernels and backends a command covers.
#[derive(Args)]
pub(crate) struct Select {
    /// Architectures to run: repeat the option or give a comma list (default: all).
    #[arg(long = "arch", value_delimiter = ',', value_parser = ["riscv64", "aarch64", "x86_64"])]
    pub(crate) arch: Vec<String>,
    /// Only variants built with Zbb (riscv64+zbb).
    #[arg(long, conflicts_with = "no_zbb")]
    pub(crate) zbb: bool,
    /// Only variants built without Zbb.
    #[arg(long)]
    pub(crate) no_zbb: bool,
    /// Kernels to check: repeat the option or give a comma list (default: all).
    #[arg(long = "kernel", value_delimiter = ',', value_parser = ["md5", "poly1305"])]
    pub(crate) kernel: Vec<String>,
    /// Backends to use: repeat the option or give a comma list (default: every backend that can
    /// run a variant).
    #[arg(long = "backend", value_delimiter = ',', value_parser = ["unicorn", "qemu", "native"])]
    pub(crate) backend: Vec<String>,
    /// Folder with <arch>/*.S kernel sources (default: the repository's kernels/).
    #[arg(long, value_name = "DIR")]
    pub(crate) kernels_dir: Option<PathBuf>,
}

impl Select {
    /// The variants `--arch`/`--zbb`/`--no-zbb` name (all when none is given).
    ///
    /// # Errors
    /// When no variant matches.
    pub(crate) fn variants(&self) -> Result<Vec<&'static Variant>, String> {
        let archs: Vec<Arch> = self.arch.iter().filter_map(|a| Arch::from_name(a)).collect();
        let variants: Vec<&'static Variant> = VARIANTS
            .iter()
            .filter(|v| archs.is_empty() || archs.contains(&v.arch))
            .filter(|v| (!self.zbb || v.zbb) && (!self.no_zbb || !v.zbb))
            .collect();
        if variants.is_empty() {
            return Err("no variant matches these --arch/--zbb/--no-zbb options (see `lab list`)".into());
        }
        Ok(variants)
    }

    /// [`variants`](Self::variants) for command `cmd`, printing the error ([`ExitCode::Error`]).
    pub(crate) fn variants_or_usage_error(&self, cmd: &str) -> Result<Vec<&'static Variant>, ExitCode> {
        self.variants().map_err(|e| {
            super::out::eprintln(&format!("lab {cmd}: {e}"));
            ExitCode::Error
        })
    }

    pub(crate) fn kernels(&self) -> Vec<Kernel> {
        if self.kernel.is_empty() {
            Kernel::ALL.to_vec()
        } else {
            self.kernel.iter().filter_map(|k| Kernel::from_name(k)).collect()
        }
    }

    pub(crate) fn backends(&self) -> Vec<BackendKind> {
        if self.backend.is_empty() {
            BackendKind::ALL.to_vec()
        } else {
            self.backend.iter().filter_map(|b| BackendKind::from_name(b)).collect()
        }
    }

    pub(crate) fn build(&self) -> BuildConfig {
        BuildConfig {
            kernels_dir: self.kernels_dir.clone().unwrap_or_else(paths::kernels_dir),
            cache_dir: paths::cache_dir(),
        }
    }
}
