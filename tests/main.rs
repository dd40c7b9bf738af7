//! Integration tests: every variant × backend × kernel against the bundled vectors, agreement
//! between backends, and proof that the checks fire (broken kernels, gated extensions, broken
//! vector files). Needs clang, lld and qemu-user (ci/setup.sh installs them).

mod agreement;
mod arch_rows;
mod bench;
mod bounds;
mod checks;
mod cli;
mod clobber;
mod common;
mod confine;
mod diagnoses;
mod disagreement;
mod doctor;
mod draws;
mod fuzz;
mod gating;
mod image;
mod matrix;
mod mb_semantics;
mod openssl;
mod own_kernel;
mod predict;
mod protocol;
mod reports;
mod silent_green;
mod unaligned_bounds;
mod vector_files;
mod workflow;
mod zbb;

/// mimalloc, as in the `lab` binary (lab/src/main.rs). glibc malloc keeps freed 32 MiB batch
/// payloads in its per-thread arenas once its mmap threshold has risen to their size, so the
/// suite's process grows to ~450 MB resident, and every confined guest spawn (a `fork`, as
/// `pre_exec` needs) copies and then tears down the page tables of all of it; mimalloc returns
/// them (~160 MB resident, a third of the system time).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
