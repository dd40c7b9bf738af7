//! The `lab` command: a thin layer of options over the `kernel_lab` library.
//!
//! Exit status: 0 nothing failed; 1 a case failed; 2 usage, input or set-up error.

mod bars;
mod cli;

fn main() {
    std::process::exit(cli::main());
}
