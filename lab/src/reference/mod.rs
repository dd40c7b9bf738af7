//! Portable references for the kernel contracts: the oracle every kernel result is compared
//! with. Always built, no assembly, no dependencies (RustCrypto's "soft" backends are the model).

pub mod md5;
pub mod openssl;
pub mod poly1305;
