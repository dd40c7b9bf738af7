//! What an OpenSSL-contract call must leave behind and how the lab judges it: the parts of a
//! context a call must keep, h (mod 2^130-5, reduced enough for the architecture's
//! `poly1305_emit`), what `poly1305_init` leaves, and the tag of a case. `crate::cases::openssl`
//! plans the calls that carry these expectations.

use crate::batch::{Batch, BufId};
use crate::finding::{Class, Finding};
use crate::reference::openssl::{self, PolyCtx, H64};
use crate::reference::poly1305::{ClampedR, Fixed130, Limbs26};
use crate::variant::Arch;

/// What one OpenSSL-contract call must leave behind, beyond the HotSpot expectations it shares.
#[derive(Debug, Clone)]
pub(crate) enum OsslExpect {
    /// Bytes `at..` of `buf` are exactly `bytes` (the parts of a context the call must not write).
    Kept { buf: BufId, at: usize, bytes: Vec<u8>, what: &'static str },
    /// The whole context is what it was before the call (`len` had no whole block).
    Unchanged { ctx: BufId, before: BufId },
    /// h of the context is congruent to `want` (fully reduced) mod 2^130-5, and the
    /// architecture's `poly1305_emit` reduces it exactly; `file`: `want` is the vector file's
    /// `expect_acc`.
    PolyH { ctx: BufId, arch: Arch, want: H64, file: bool },
    /// `inner`, judged only while the context `ctx` is in the scalar base 2^64 form of `arch`
    /// (a vector path's base 2^26 state is judged by `poly1305_emit`'s tag alone).
    WhileScalar { ctx: BufId, arch: Arch, inner: Box<OsslExpect> },
    /// What `poly1305_init(ctx, key, func)` leaves: `func` = `want` (the path the lab's probe
    /// found, when init returned non-zero there), and a scalar context with h = 0 and the
    /// clamped `r` where the architecture's layout puts them.
    /// `layout`: whether the path keeps the scalar layout (its h words and r are checked).
    Init { ctx: BufId, func: BufId, arch: Arch, r: u128, want: Option<[u64; 2]>, names: [String; 2], layout: bool },
    /// A buffer judged elsewhere (a tag, by the case's final check; a context whose layout
    /// is the path's own, by the tags `emit` makes of it): here for the cross-backend digest.
    Output { buf: BufId },
    /// `poly1305_emit(ctx, mac, 0)` after a `blocks` call on a path with a layout of its own:
    /// the low 128 bits of h mod 2^130-5 (`want`), which judges h through the image's own emit.
    /// `mac` holds the zero nonce in bytes 0-15 and the tag in 16-31.
    EmitOfH { mac: BufId, want: [u8; 16] },
}

impl OsslExpect {
    /// The buffer whose bytes the check reads (for [`crate::cases::verdict::outputs_digest`]).
    pub(crate) fn buffer(&self) -> BufId {
        match self {
            OsslExpect::Kept { buf, .. } => *buf,
            OsslExpect::Unchanged { ctx, .. } | OsslExpect::PolyH { ctx, .. } => *ctx,
            OsslExpect::WhileScalar { inner, .. } => inner.buffer(),
            OsslExpect::Init { func, .. } => *func,
            OsslExpect::Output { buf } => *buf,
            OsslExpect::EmitOfH { mac, .. } => *mac,
        }
    }

    /// The finding, if the call broke this expectation.
    pub(crate) fn finding(&self, label: &str, batch: &Batch, resp: &[u8]) -> Option<Finding> {
        match self {
            OsslExpect::WhileScalar { ctx, arch, inner } => {
                PolyCtx::of(*arch).is_scalar(batch.buffer(resp, *ctx)).then(|| inner.finding(label, batch, resp))?
            }
            OsslExpect::Init { ctx, func, arch, r, want, names, layout } => {
                let ctx = layout.then(|| batch.buffer(resp, *ctx));
                init_finding(label, ctx, batch.buffer(resp, *func), *arch, *r, want, names)
            }
            OsslExpect::Output { .. } => None,
            OsslExpect::EmitOfH { mac, want } => {
                let got = batch.buffer(resp, *mac).get(16..).unwrap_or_default();
                (got != want).then(|| {
                    Finding::new(
                        Class::Value,
                        format!(
                            "{label}: h mod 2^130-5 (its low 128 bits, read through emit with s = 0) expected {}, got {}",
                            hex::encode(want),
                            hex::encode(got)
                        ),
                    )
                })
            }
            OsslExpect::Kept { buf, at, bytes, what } => {
                let got = batch.buffer(resp, *buf).get(*at..).unwrap_or_default();
                let first = got.iter().zip(bytes).position(|(g, w)| g != w)?;
                Some(Finding::new(
                    Class::Memory,
                    format!(
                        "{label}: wrote {what}: byte {} of the context is {:#04x}, must stay {:#04x}",
                        at + first,
                        got[first],
                        bytes[first]
                    ),
                ))
            }
            OsslExpect::Unchanged { ctx, before } => {
                let (b, g) = (batch.buffer(resp, *before), batch.buffer(resp, *ctx));
                (b != g).then(|| {
                    Finding::new(
                        Class::Value,
                        format!(
                            "{label}: ctx must be untouched when len has no whole block: h was {}, now {}",
                            hex_h(PolyCtx::h(b)),
                            hex_h(PolyCtx::h(g))
                        ),
                    )
                })
            }
            OsslExpect::PolyH { ctx, arch, want, file } => {
                let h = PolyCtx::h(batch.buffer(resp, *ctx));
                let got = openssl::reduced(h);
                let src = if *file { " (expect_acc in the file)" } else { "" };
                if got != *want {
                    Some(Finding::new(
                        Class::Value,
                        format!(
                            "{label}: h mod 2^130-5 expected {}{src}, got {} (h {})",
                            hex_value(*want),
                            hex_value(got),
                            hex_h(h)
                        ),
                    ))
                } else if !PolyCtx::of(*arch).emit_exact(h) {
                    Some(Finding::new(
                        Class::Bounds,
                        format!(
                            "{label}: h {} is not reduced enough for {arch}'s poly1305_emit ({})",
                            hex_h(h),
                            PolyCtx::of(*arch).source
                        ),
                    ))
                } else {
                    None
                }
            }
        }
    }
}

/// The last check of an OpenSSL-contract case.
#[derive(Debug, Clone)]
pub(crate) enum OsslFinal {
    /// `poly1305_emit(ctx, mac, nonce)` of the architecture on the kernel's h gives `tag`.
    Emit { ctx: BufId, arch: Arch, nonce: [u8; 16], tag: [u8; 16], what: String },
    /// The image's own `poly1305_emit` wrote `tag` into `mac`.
    Mac { mac: BufId, tag: [u8; 16], what: String },
}

impl OsslFinal {
    /// The finding, if the case's result is wrong.
    pub(crate) fn finding(&self, batch: &Batch, resp: &[u8]) -> Option<Finding> {
        let (got, tag, what) = match self {
            OsslFinal::Emit { ctx, arch, nonce, tag, what } => {
                (PolyCtx::of(*arch).emit(PolyCtx::h(batch.buffer(resp, *ctx)), nonce), tag, what)
            }
            OsslFinal::Mac { mac, tag, what } => (batch.buffer(resp, *mac).try_into().unwrap_or_default(), tag, what),
        };
        (got != *tag).then(|| {
            Finding::new(Class::Value, format!("{what}expected {}, got {}", hex::encode(tag), hex::encode(got)))
        })
    }

    /// The tag of a carried buffer (for a MAC of MACs' outer message): `poly1305_emit`'s
    /// output itself (16 bytes, [`OsslFinal::Mac`]), or the architecture's emit of a scalar
    /// context's h.
    pub(crate) fn tag_of(arch: Arch, ctx: &[u8], nonce: &[u8; 16]) -> [u8; 16] {
        match <[u8; 16]>::try_from(ctx) {
            Ok(mac) => mac,
            Err(_) => PolyCtx::of(arch).emit(PolyCtx::h(ctx), nonce),
        }
    }
}

/// The finding of a `poly1305_init` call, if its `func` or its scalar words are wrong.
fn init_finding(
    label: &str,
    ctx: Option<&[u8]>,
    func: &[u8],
    arch: Arch,
    r: u128,
    want: &Option<[u64; 2]>,
    names: &[String; 2],
) -> Option<Finding> {
    let word =
        |i: usize| func.get(8 * i..8 * i + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    if let Some(w) = want {
        if [word(0), word(1)] != *w {
            return Some(Finding::new(
                Class::Value,
                format!(
                    "{label}: func = [{:#x}, {:#x}], but the same image's init chose [{:#x} {}, {:#x} {}] on Unicorn \
                     (the path must depend only on the capability word)",
                    word(0),
                    word(1),
                    w[0],
                    names[0],
                    w[1],
                    names[1]
                ),
            ));
        }
    }
    let ctx = ctx?;
    let layout = PolyCtx::of(arch);
    let (h, r_got) = (PolyCtx::h(ctx), ctx.get(layout.r_at..layout.r_at + 16).map(|b| b.to_vec()));
    let r_want = r.to_le_bytes().to_vec();
    let scalar = layout.is_scalar(ctx);
    (!scalar || h != [0; 3] || r_got.as_ref() != Some(&r_want)).then(|| {
        Finding::new(
            Class::Value,
            format!(
                "{label}: the context is not {arch}'s scalar layout with h = 0 and the clamped r ({}): h {}, r {}",
                layout.source,
                hex_h(h),
                r_got.map_or_else(|| "missing".into(), hex::encode)
            ),
        )
    })
}

fn hex_h(h: H64) -> String {
    format!("[{:016x} {:016x} {:016x}]", h[0], h[1], h[2])
}

/// h0 + h1·2^64 + h2·2^128 in hex without leading zeros (`0x1f`).
fn hex_value(h: H64) -> String {
    match h {
        [l, 0, 0] => format!("{l:#x}"),
        [l, m, 0] => format!("{m:#x}{l:016x}"),
        [l, m, t] => format!("{t:#x}{m:016x}{l:016x}"),
    }
}

/// r of 26-bit limbs as the 128-bit clamped key (big integers only for limbs outside the
/// contract, which the lab never plans).
pub(crate) fn r128(r: &Limbs26) -> u128 {
    ClampedR::from_limbs(r).map_or_else(
        || {
            let w = openssl::words(&r.value());
            u128::from(w[0]) | (u128::from(w[1]) << 64)
        },
        |c| c.value(),
    )
}

/// The 26-bit limbs of `acc` as h of a base 2^64 context, reduced mod p.
pub(crate) fn h_of(acc: &Limbs26) -> H64 {
    Fixed130::from_limbs(acc).map_or_else(|| openssl::words(&acc.reduced()), |f| f.reduced().words())
}

/// h (any words) as 26-bit limbs of its value mod p.
pub(crate) fn limbs_of(h: H64) -> Limbs26 {
    Fixed130::from_words(h).reduced().to_limbs()
}
