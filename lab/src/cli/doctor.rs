//! `lab doctor`: prints [`kernel_lab::doctor`] checks.

use std::io::Write as _;

use clap::Args;
use kernel_lab::doctor::{self, Diagnosis, State};
use kernel_lab::exit::ExitCode;
use kernel_lab::paths;

use super::options::TextOrJson;

#[derive(Args)]
pub(crate) struct DoctorArgs {
    /// Output format: the human lines, or JSON (`checks`: what, state, detail, package).
    #[arg(long, value_enum, default_value = "human")]
    format: TextOrJson,
}

pub(crate) fn doctor_cmd(args: &DoctorArgs) -> ExitCode {
    let d = doctor::diagnose(&paths::kernels_dir(), &paths::vectors_dir());
    if args.format == TextOrJson::Json {
        super::out::print(&(doctor_json(&d) + "\n"));
        return d.exit_code();
    }
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
            State::Warning(s) => (anstyle::AnsiColor::Yellow.on_default(), "WARN", s.clone()),
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
        ExitCode::Passed => format!("{ok}lab doctor: all well{ok:#}"),
        ExitCode::Failed => {
            format!("{bad}lab doctor: the set-up works but a kernel gave a wrong answer (see `lab run`){bad:#}")
        }
        ExitCode::Error | ExitCode::Interrupted(_) => format!("{bad}lab doctor: the set-up is incomplete{bad:#}"),
    };
    let _ = writeln!(out, "\n{verdict}");
    d.exit_code()
}

/// The diagnosis as JSON: every check with its state, and the packages to install.
fn doctor_json(d: &Diagnosis) -> String {
    let checks: Vec<serde_json::Value> = d
        .checks
        .iter()
        .map(|c| {
            let (state, detail, package) = match &c.state {
                State::Ok(s) => ("ok", s.clone(), None),
                State::Missing { program, package } => ("missing", format!("`{program}` not on PATH"), Some(*package)),
                State::Failed(s) => ("broken", s.clone(), None),
                State::WrongAnswer(s) => ("wrong", s.clone(), None),
                State::NotApplicable(s) => ("n/a", s.clone(), None),
                State::Warning(s) => ("warning", s.clone(), None),
            };
            serde_json::json!({ "what": c.what, "state": state, "detail": detail, "package": package })
        })
        .collect();
    let body = serde_json::json!({
        "checks": checks,
        "missing_packages": d.missing_packages(),
        "exit_code": d.exit_code().code(),
    });
    // Serialized from the envelope itself: a `Value` map would sort the envelope's keys away
    // from the front.
    serde_json::to_string(&kernel_lab::vocab::envelope::Envelope::new("doctor", body)).unwrap_or_default()
}
