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
