//! Integration tests: every variant × backend × kernel against the bundled vectors, agreement
//! between backends, and proof that the checks fire (broken kernels, gated extensions, broken
//! vector files). Needs clang, lld and qemu-user (ci/setup.sh installs them).

mod agreement;
mod alignment;
mod arch_rows;
mod backend_state;
mod bench;
mod bounds;
mod build_confine;
mod checks;
mod cli;
mod clobber;
mod common;
mod confine;
mod cryptogams_rvv;
mod diagnoses;
mod disagreement;
mod doctor;
mod draws;
mod envelope;
mod fuzz;
mod fuzz_vlen;
mod gating;
mod host_verified;
mod hotspot;
mod hotspot_foreign;
mod image;
mod jdk_acc;
mod layers;
mod library_names;
mod linux_poly1305;
mod matrix;
mod mb_semantics;
mod openssl;
mod openssl_real;
mod own_kernel;
mod partial_loads;
mod predict;
mod protocol;
mod qemu_counts;
mod reports;
mod rvv_edges;
mod sarif;
mod silent_green;
mod top_limb;
mod unaligned_bounds;
mod unicorn_stops;
mod unicorn_wall_clock;
mod vector_edges;
mod vector_edges_neon_rvv;
mod vector_files;
mod vector_isa;
mod vector_levels;
mod verdicts;
mod workflow;
mod zbb;

/// mimalloc, as in the `lab` binary (lab/src/main.rs). With glibc malloc the suite's process
/// keeps freed batch payloads (32 MiB) in its arenas, and every confined guest spawn (a `fork`,
/// as `pre_exec` needs) copies and then tears down the page tables of all of it: 4.1% of the
/// suite's CPU samples in `copy_page_range`/`unmap_page_range`, 1.1% with mimalloc (suite CPU
/// 32.1 s against 29.7 s, one perf run each on a loaded machine).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
