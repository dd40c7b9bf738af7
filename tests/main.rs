//! Integration tests: every variant × backend × kernel against the bundled vectors, agreement
//! between backends, and proof that the checks fire (broken kernels, gated extensions, broken
//! vector files). Needs clang, lld and qemu-user (ci/setup.sh installs them).

mod agreement;
mod bench;
mod checks;
mod cli;
mod common;
mod doctor;
mod fuzz;
mod gating;
mod image;
mod layout;
mod matrix;
mod reports;
mod workflow;
mod zbb;
