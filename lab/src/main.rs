//! The `lab` command: a thin layer of options over the `kernel_lab` library.
//!
//! Exit status: [`kernel_lab::exit::ExitCode`] (0 nothing failed; 1 a case failed; 2 usage,
//! input or set-up error; 130/143 interrupted by SIGINT/SIGTERM).

mod bars;
mod cli;

fn main() {
    std::process::exit(cli::main().code());
}
