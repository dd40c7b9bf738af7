//! Check policies a user chooses per run or per manifest entry (option and manifest field share
//! the names).

/// What a **partial load** is: a naturally placed load that reaches past (or before) a buffer
/// but lies inside one aligned 8-byte word the buffer also touches (an 8-, 4-, 2- or 1-byte load
/// within `[8k, 8k + 8)`; 16-byte vector loads are not covered). Pages are a multiple of 8 bytes,
/// so such a load cannot cross into another page and cannot fault on any machine; word-at-a-time
/// kernels (cryptogams riscv64 `ld` of the last input word) rely on it. valgrind's
/// `--partial-loads-ok` is the precedent. Only Unicorn, which checks every byte of a buffer's
/// edge pages, can see one; qemu and native see an access only once it reaches a guard page,
/// which a partial load never does, so they pass it under either policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartialLoads {
    /// The load runs and the run lists it as a warning naming the instruction and the bytes
    /// (the default).
    #[default]
    Warn,
    /// The load runs and fails its case with a `partial-load` finding
    /// ([`crate::finding::Class::PartialLoad`]).
    Fail,
}

impl PartialLoads {
    /// The option and manifest value: `warn`, `fail`.
    pub fn name(self) -> &'static str {
        match self {
            PartialLoads::Warn => "warn",
            PartialLoads::Fail => "fail",
        }
    }

    /// Parses [`PartialLoads::name`].
    ///
    /// # Errors
    /// Any other word, naming the two allowed.
    pub fn from_name(s: &str) -> Result<PartialLoads, String> {
        match s {
            "warn" => Ok(PartialLoads::Warn),
            "fail" => Ok(PartialLoads::Fail),
            other => Err(format!("`{other}` is not `warn` or `fail`")),
        }
    }
}
