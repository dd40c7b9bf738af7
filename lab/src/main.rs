//! The `lab` command: a thin layer of options over the `kernel_lab` library.
//!
//! Exit status: [`kernel_lab::exit::ExitCode`] (0 nothing failed; 1 a case failed; 2 usage,
//! input or set-up error; 130/143 interrupted by SIGINT/SIGTERM).

mod bars;
mod cli;

/// mimalloc instead of glibc malloc: a run allocates and frees small buffers per case and
/// batch (malloc/free were ~8% of a Unicorn run's CPU with glibc). Measured side by side
/// (farm-bench, full `lab run --seed 1`, 5 pairs): user 0.80x, CPU 0.92x median.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cli::main().code());
}
