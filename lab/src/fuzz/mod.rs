//! Differential fuzzing: proptest strategies per contract, cases run in batches through the
//! guest-side driver, every call compared with the portable reference (the comparison is
//! [`crate::cases::verdict::check`], the same as for vectors), failures shrunk with proptest's value trees and
//! written as vector files that `lab run --vectors FILE` replays.
//!
//! The strategies are shared by `lab fuzz` and `cargo test`.

mod campaign;
mod config;
mod cross_check;
mod failure_file;
mod random_bytes;
mod report;
mod shrink;
mod strategies;

use campaign::*;
pub use campaign::{campaign, shard_cases, NotRun, PIECE_BATCHES};
pub use config::*;
use cross_check::*;
use failure_file::*;
pub use report::{out_of_domain, to_report};
pub use shrink::*;
pub use strategies::*;
