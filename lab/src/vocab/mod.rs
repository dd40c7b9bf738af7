//! The lab's vocabulary: small types that every layer names and that import nothing of the
//! crate but each other (architecture names, psABI tables, decoded instructions, tools). The
//! architecture rows (`crate::arch`) sit right above; behaviour that needs a row (an
//! architecture's spec, an ABI looked up by architecture, an instruction's class) is
//! implemented there or above, beside the rows. docs/ARCHITECTURE.md draws the layers.

pub mod abi;
pub mod arch;
pub mod backend_kind;
pub mod envelope;
pub mod insn;
pub mod policy;
pub mod poly_ctx;
pub mod tool;
