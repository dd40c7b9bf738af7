//! `lab doctor`: prints [`kernel_lab::doctor`] checks.

use std::io::Write as _;

use kernel_lab::doctor::{self, State};
use kernel_lab::paths;

pub(crate) fn doctor_cmd() -> i32 {
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
        0 => format!("{ok}lab doctor: all well{ok:#}"),
        1 => format!("{bad}lab doctor: the set-up works but a kernel gave a wrong answer (see `lab run`){bad:#}"),
        _ => format!("{bad}lab doctor: the set-up is incomplete{bad:#}"),
    };
    let _ = writeln!(out, "\n{verdict}");
    d.exit_code()
}
