//! Text output that never panics. `println!` panics when stdout is a closed pipe
//! (`lab list | head -1` gets EPIPE, since Rust ignores SIGPIPE); here a closed pipe or a
//! closed stream drops the rest of the text quietly: the reader has what it wanted, and the exit
//! status stays the command's own verdict.

use std::io::Write as _;

/// Writes `text` to stdout (ANSI styles stripped when it is not a terminal or `NO_COLOR` is set).
pub(crate) fn print(text: &str) {
    let mut out = anstream::stdout();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes `text` and a newline to stderr.
pub(crate) fn eprintln(text: &str) {
    let mut err = anstream::stderr();
    let _ = writeln!(err, "{text}");
}

/// Writes `text` to stderr.
pub(crate) fn eprint(text: &str) {
    let _ = anstream::stderr().write_all(text.as_bytes());
}
