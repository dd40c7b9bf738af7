//! kernel-lab: cross-builds hand-written MD5 and Poly1305 kernels (HotSpot intrinsic contracts)
//! for riscv64 (with and without Zbb), aarch64 and x86_64, runs them under Unicorn, qemu-user
//! and natively through a guest-side driver, and checks every result against published vectors
//! and a portable reference.
//!
//! One module per concern: [`variant`] (what is built), [`toolchain`] (building it), [`image`]
//! (the ELF), [`abi`] (calling conventions as data), [`protocol`] (the driver protocol, defined once), [`batch`] (batch layout),
//! [`backend`] (what executes), [`reference`] (the oracle), [`vectors`] (known answers),
//! [`cases`] (vector -> calls -> findings), [`finding`] (the finding vocabulary), [`diagnose`] (causes named in findings), [`disasm`] and [`isa`] (disassembly, ISA legality), [`fuzz`]
//! (differential fuzzing), [`report`] and [`run`] (orchestration), [`progress`] (events for long
//! work), [`pool`] (worker threads), [`reporters`] (JSON and JUnit output) and [`doctor`] (is the set-up complete).

pub mod abi;
pub mod arch;
pub mod backend;
pub mod batch;
pub mod bench;
pub mod bundled;
pub mod cases;
pub mod contract;
pub mod diagnose;
pub mod disasm;
pub mod doctor;
pub mod exit;
pub mod finding;
pub mod fnv;
pub mod fuzz;
pub mod image;
pub mod interrupt;
pub mod isa;
pub mod paths;
pub mod pool;
pub mod progress;
pub mod protocol;
pub mod reference;
pub mod replay;
pub mod report;
pub mod reporters;
pub mod run;
pub mod toolchain;
pub mod variant;
pub mod vectors;
