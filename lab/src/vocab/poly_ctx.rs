//! OpenSSL's scalar Poly1305 context layout, as data: each architecture row holds one
//! (`openssl_poly1305`); building, reading and emitting a context is
//! `crate::reference::openssl`'s business (docs/contracts.md has the table).

/// How an architecture's `poly1305_emit` reduces h before adding the nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitReduction {
    /// g = h + 5; if g reaches 2^130 (bits above 129 of g2 set) take g: exact for h < 2·p.
    /// x86_64 and armv8 (`poly1305_emit`).
    Compare,
    /// First folds h2's bits above 1 back (h2 = (h2 & 3) + 5·(h2 >> 2) into h0), then as
    /// [`EmitReduction::Compare`]: riscv64, whose `poly1305_blocks` leaves h2 unreduced.
    FoldThenCompare,
}

/// One architecture's scalar context: where `r` lives and what else `poly1305_blocks` reads.
/// Each architecture's row (`lab/src/arch/<arch>.rs`, `openssl_poly1305`) holds its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolyCtx {
    /// Bytes the lab lays out (the scalar code's whole view of the context).
    pub bytes: usize,
    /// Offset of r0 (r1 follows).
    pub r_at: usize,
    /// Offset of the precomputed s1 = r1 + (r1 >> 2), when `poly1305_init` stores it.
    pub s1_at: Option<usize>,
    /// `poly1305_emit`'s reduction.
    pub emit: EmitReduction,
    /// Where the layout is read from.
    pub source: &'static str,
}

/// h as three 64-bit words.
pub type H64 = [u64; 3];
