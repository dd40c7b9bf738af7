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

/// `mi_option_purge_delay` (mimalloc.h, `mi_option_e`; the same value in mimalloc v2 and v3):
/// milliseconds before freed memory is returned to the OS, -1 for never. libmimalloc-sys
/// names no constant for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    // Never purge: a batch frees megabytes that the next batch allocates again, and purged
    // memory comes back as fresh pages the kernel zeroes (2 MiB at a time with transparent
    // huge pages): `lab fuzz --arch riscv64 --no-zbb --kernel md5 --cases 4096`, sys time
    // 0.21 s -> 0.04 s of 0.74 s. The lab's memory stays bounded by its largest batch.
    // SAFETY: sets a mimalloc option before the lab starts threads; mimalloc reads it at each purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    std::process::exit(cli::main().code());
}
