//! Cases: what the lab asks of a kernel and how it judges the answer. A vector becomes cases
//! ([`plan`]: calls laid into a batch, with the reference's expectations), long cases are cut
//! into segments ([`procedure`]), and a finished batch is read back into findings ([`verdict`]);
//! [`openssl`] plans the same cases through OpenSSL's block functions ([`openssl_checks`]: what they must leave), [`boringssl`]
//! through BoringSSL's MD5 block function. The
//! reference's answers are computed once per run and shared by every cell ([`answers`]).
//! The backends in between only execute; they never see an expectation.

pub mod answers;
pub mod boringssl;
pub mod dispatch;
pub mod openssl;
pub mod openssl_checks;
pub mod plan;
pub mod procedure;
pub mod verdict;
