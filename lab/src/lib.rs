//! kernel-lab: cross-builds hand-written MD5 and Poly1305 kernels (HotSpot intrinsic contracts)
//! for riscv64 (with and without Zbb), aarch64 and x86_64, runs them under Unicorn, qemu-user
//! and natively through a guest-side driver, and checks every result against published vectors
//! and a portable reference.
//!
//! One module per concern (docs/ARCHITECTURE.md has the data flow and a line per module):
//! [`arch`] (per-architecture facts, one row each), [`variant`] (what is built), [`toolchain`]
//! (building it; [`build_confine`] keeps the build tools from the host), [`image`] (the ELF), [`abi`] (calling conventions as data), [`protocol`] (the
//! driver protocol, defined once), [`batch`] (batch layout), [`backend`] (what executes),
//! [`reference`](mod@reference) (the oracle), [`vectors`] (known answers), [`cases`] (vector -> calls, results
//! -> findings), [`finding`] (the finding vocabulary), [`diagnose`] (causes named in findings),
//! [`disasm`] and [`isa`] (disassembly, ISA legality), [`fuzz`] (differential fuzzing),
//! [`filter`] (name filters of the command line), [`run`] (orchestration; [`run::compare`]
//! puts every case to [`vote`] across backends), [`report`] and [`reporters`] (the report; JSON
//! and JUnit output),
//! [`replay`] (replay command lines), [`exit`] (exit statuses), [`progress`] (events for long
//! work), [`pool`] (worker threads), [`interrupt`] (SIGINT/SIGTERM), [`bench`](mod@bench) (`lab bench`)
//! [`doctor`] (is the set-up complete) and [`user_kernel`] (a user's own kernel: manifest, prebuilt
//! objects, declared ISA).

/// `Display` and clap's `ValueEnum` for a closed set of named values (`Arch`, `Kernel`,
/// `BackendKind`): both come from the type's `ALL` and `name()`, so the command line, the
/// reports and the replay lines spell a value the same way.
macro_rules! named_values {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &<$t>::ALL
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(clap::builder::PossibleValue::new(self.name()))
            }
        }
    };
}

pub mod abi;
pub mod align;
pub mod arch;
pub mod backend;
pub mod batch;
pub mod bench;
pub mod build_confine;
pub mod bundled;
pub mod cache_seal;
pub mod cases;
pub mod contract;
pub mod diagnose;
pub mod disasm;
pub mod doctor;
pub mod domain;
pub mod exit;
pub mod filter;
pub mod finding;
pub mod fnv;
pub mod fuzz;
pub mod hidden_syscall;
pub mod hotspot;
pub mod image;
pub mod input_file;
pub mod int_args;
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
pub mod sandbox;
pub mod source_lines;
pub mod tool_run;
pub mod toolchain;
/// `abi-upper-bits` warnings once per object and argument across its dispatch paths.
pub mod upper_bits_report;
pub mod user_kernel;
pub mod variant;
pub mod vectors;
pub mod vocab;
pub mod vote;
