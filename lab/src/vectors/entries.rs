//! The entry kinds of a vector file as serde types, one struct per kind, each with
//! `deny_unknown_fields`: a field of another kind or a misspelt one is an error naming it.
//! The kind is told by its tag field: `chain` (chained procedure), `stub` (MD5 call), `acc`
//! (Poly1305 call), none (MD5 digest or Poly1305 tag, by the file's kernel). After serde, the
//! values are checked (hex lengths, ranges, sums, with checked arithmetic) into a [`Body`].

use serde::Deserialize;
use serde_json::Value;

use super::message::{Message, MAX_MSG_LEN};
use super::{Body, Md5Call, Md5Chain, Md5Expect, Md5Stub, Poly1305Call, Poly1305Expect, Poly1305MacOfMacs};
use crate::reference::md5;
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::Kernel;

/// Largest input one kernel call of a call entry may take: 16 MiB (the input of one call must
/// sit whole in `lab_arena`, 32 MiB). Longer digests and tags are split over calls instead.
pub const MAX_CALL_INPUT: u64 = 16 << 20;
/// Largest input offset past a 64-byte boundary an entry may ask for (within one page).
pub const MAX_OFFSET: u64 = 4095;
/// Most steps of an `md5_iterate` chain (each step is one batch).
pub const MAX_CHAIN_STEPS: u64 = 100_000;
/// Largest first message of an `md5_iterate` chain.
pub const MAX_CHAIN_SEED: u64 = 1 << 20;

/// A problem inside one entry: the field (if any) and what is wrong.
#[derive(Debug)]
pub struct FieldError {
    /// The field (`msg.len`, `lengths[2]`), when the problem is in one.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

pub(super) fn bad(field: &str, problem: impl Into<String>) -> FieldError {
    FieldError { field: Some(field.into()), problem: problem.into() }
}

/// Deserializes `value` as `T`, naming the field of a serde error; `what` names the entry kind
/// in unknown-field errors.
pub(super) fn typed<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        let field = if path == "." { None } else { Some(path) };
        let problem =
            if inner.starts_with("unknown field") { format!("not a field of {what}: {inner}") } else { inner };
        FieldError { field, problem }
    })
}

/// A generated message (`msg`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MsgSpec {
    pattern: Pattern,
    len: u64,
    byte_hex: Option<String>,
    seed: Option<u64>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Pattern {
    Counter,
    Repeat,
    Random,
}

/// `offsets` as a range.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetRange {
    from: u64,
    to: u64,
}

/// The fields every entry kind has; each kind's struct repeats them (serde cannot combine
/// `flatten` with `deny_unknown_fields`).
struct Common {
    name: String,
    source: String,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
}

macro_rules! common {
    ($e:expr) => {
        Common {
            name: $e.name,
            source: $e.source,
            offset: $e.offset,
            offsets: $e.offsets,
            msg_hex: $e.msg_hex,
            msg: $e.msg,
        }
    };
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Md5DigestEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
    digest_hex: String,
    updates: Option<Vec<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Md5CallEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
    stub: String,
    state_hex: String,
    ofs: Option<i32>,
    limit: Option<i32>,
    expect_state_hex: Option<String>,
    expect_ofs: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Poly1305TagEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
    key_hex: String,
    tag_hex: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Poly1305CallEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
    acc: Vec<u64>,
    r_hex: String,
    lengths: Option<Vec<i64>>,
    expect_acc: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Md5ChainEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    msg_hex: Option<String>,
    msg: Option<Value>,
    #[allow(dead_code)]
    chain: String,
    steps: u64,
    digest_hex: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MacOfMacsEntry {
    name: String,
    source: String,
    #[allow(dead_code)]
    comment: Option<String>,
    offset: Option<u64>,
    offsets: Option<Value>,
    #[allow(dead_code)]
    chain: String,
    count: u64,
    key_hex: String,
    tag_hex: String,
}

/// Name, source, offsets and message of a checked entry.
pub(super) struct Parts {
    pub name: String,
    pub source: String,
    pub offsets: Vec<usize>,
    pub body: Body,
}

/// Checks one entry of a `kernel` file (`index` sets the default offset).
pub(super) fn parse_entry(kernel: Kernel, index: usize, entry: &Value) -> Result<Parts, FieldError> {
    let obj = entry.as_object().ok_or(FieldError { field: None, problem: "an entry must be an object".into() })?;
    let default_offset = index % 16;
    let has = |f: &str| obj.contains_key(f);
    if let Some(chain) = obj.get("chain") {
        return match (kernel, chain.as_str()) {
            (Kernel::Md5, Some("md5_iterate")) => {
                md5_chain(typed(entry, "an md5_iterate chain entry")?, default_offset)
            }
            (Kernel::Poly1305, Some("poly1305_mac_of_macs")) => {
                mac_of_macs(typed(entry, "a poly1305_mac_of_macs chain entry")?, default_offset)
            }
            (Kernel::Md5, _) => Err(bad("chain", format!("{chain} is not a chain of an md5 file (md5_iterate)"))),
            (Kernel::Poly1305, _) => {
                Err(bad("chain", format!("{chain} is not a chain of a poly1305 file (poly1305_mac_of_macs)")))
            }
        };
    }
    match kernel {
        Kernel::Md5 if has("stub") => md5_call(typed(entry, "an MD5 call entry (`stub`)")?, default_offset),
        Kernel::Md5 => md5_digest(typed(entry, "an MD5 digest entry")?, default_offset),
        Kernel::Poly1305 if has("acc") => poly1305_call(typed(entry, "a Poly1305 call entry (`acc`)")?, default_offset),
        Kernel::Poly1305 => poly1305_tag(typed(entry, "a Poly1305 tag entry")?, default_offset),
    }
}

/// Name, source and offsets of any kind, checked.
fn head(c: &Common, default_offset: usize) -> Result<(String, String, Vec<usize>), FieldError> {
    for (f, v) in [("name", &c.name), ("source", &c.source)] {
        if v.trim().is_empty() {
            return Err(bad(f, "must not be empty"));
        }
    }
    Ok((c.name.clone(), c.source.clone(), offsets(c.offset, c.offsets.as_ref(), default_offset)?))
}

/// `offset` (one) or `offsets` (`[a, b, ...]` or `{"from": a, "to": b}` inclusive), each
/// 0..=4095 and none twice.
fn offsets(one: Option<u64>, many: Option<&Value>, default: usize) -> Result<Vec<usize>, FieldError> {
    let list: Vec<u64> = match (one, many) {
        (Some(_), Some(_)) => return Err(bad("offsets", "give `offset` or `offsets`, not both")),
        (Some(o), None) => vec![o],
        (None, None) => return Ok(vec![default]),
        (None, Some(v @ Value::Object(_))) => {
            let r: OffsetRange = typed(v, "an offset range").map_err(|e| nest("offsets", e))?;
            if r.from > r.to {
                return Err(bad("offsets", format!("from {} is above to {}", r.from, r.to)));
            }
            if r.to > MAX_OFFSET {
                return Err(bad("offsets.to", format!("{} is outside 0..={MAX_OFFSET}", r.to)));
            }
            (r.from..=r.to).collect()
        }
        (None, Some(v)) => typed::<Vec<u64>>(v, "offsets").map_err(|e| nest("offsets", e))?,
    };
    let field = if one.is_some() { "offset" } else { "offsets" };
    let mut seen = std::collections::BTreeSet::new();
    for &o in &list {
        if o > MAX_OFFSET {
            return Err(bad(field, format!("{o} is outside 0..={MAX_OFFSET}")));
        }
        if !seen.insert(o) {
            return Err(bad(field, format!("{o} is listed twice (case names must be unique)")));
        }
    }
    Ok(list.into_iter().map(|o| o as usize).collect())
}

/// Prefixes the field of an error from a nested value (`offsets` + `[2]` = `offsets[2]`).
fn nest(outer: &str, e: FieldError) -> FieldError {
    let field = match e.field {
        Some(f) if f.starts_with('[') => format!("{outer}{f}"),
        Some(f) => format!("{outer}.{f}"),
        None => outer.to_owned(),
    };
    FieldError { field: Some(field), problem: e.problem }
}

fn hex_field(field: &str, text: &str, len: Option<usize>) -> Result<Vec<u8>, FieldError> {
    let bytes = hex::decode(text).map_err(|e| bad(field, format!("invalid hex: {e}")))?;
    match len {
        Some(n) if bytes.len() != n => Err(bad(field, format!("must be {n} bytes, found {}", bytes.len()))),
        _ => Ok(bytes),
    }
}

fn hex_array<const N: usize>(field: &str, text: &str) -> Result<[u8; N], FieldError> {
    let v = hex_field(field, text, Some(N))?;
    v.try_into().map_err(|_| bad(field, format!("must be {N} bytes")))
}

/// The message: `msg_hex`, or a generated `msg` pattern.
fn message(c: &Common) -> Result<Message, FieldError> {
    match (&c.msg_hex, &c.msg) {
        (Some(h), None) => Ok(Message::Bytes(hex_field("msg_hex", h, None)?)),
        (None, Some(m)) => generated(m),
        (Some(_), Some(_)) => Err(bad("msg", "give either `msg_hex` or `msg`, not both")),
        (None, None) => Err(bad("msg_hex", "missing (or give a generated `msg`)")),
    }
}

fn generated(v: &Value) -> Result<Message, FieldError> {
    let m: MsgSpec = typed(v, "a generated message").map_err(|e| nest("msg", e))?;
    if m.len > MAX_MSG_LEN {
        return Err(bad("msg.len", format!("{} is above {MAX_MSG_LEN} (the largest Java byte[])", m.len)));
    }
    let len = m.len as usize;
    let only = |f: &str, set: bool, p: &str| {
        if set {
            Err(bad(&format!("msg.{f}"), format!("only the {p} pattern takes `{f}`")))
        } else {
            Ok(())
        }
    };
    match m.pattern {
        Pattern::Counter => {
            only("byte_hex", m.byte_hex.is_some(), "repeat")?;
            only("seed", m.seed.is_some(), "random")?;
            Ok(Message::Counter { len })
        }
        Pattern::Repeat => {
            only("seed", m.seed.is_some(), "random")?;
            let b = m.byte_hex.as_deref().ok_or_else(|| bad("msg.byte_hex", "missing (the repeated byte)"))?;
            Ok(Message::Repeat { byte: hex_array::<1>("msg.byte_hex", b)?[0], len })
        }
        Pattern::Random => {
            only("byte_hex", m.byte_hex.is_some(), "repeat")?;
            let seed = m.seed.ok_or_else(|| bad("msg.seed", "missing"))?;
            Ok(Message::Random { seed, len })
        }
    }
}

fn md5_digest(e: Md5DigestEntry, off: usize) -> Result<Parts, FieldError> {
    let digest = hex_array("digest_hex", &e.digest_hex)?;
    let updates = e.updates.unwrap_or_default();
    let c = common!(e);
    let (name, source, offsets) = head(&c, off)?;
    let msg = message(&c)?;
    let mut sum: u64 = 0;
    for (i, &u) in updates.iter().enumerate() {
        sum = sum.checked_add(u).ok_or_else(|| bad(&format!("updates[{i}]"), "the pieces' sum overflows"))?;
    }
    if !updates.is_empty() && sum != msg.len() as u64 {
        return Err(bad("updates", format!("pieces sum to {sum}, the message has {} bytes", msg.len())));
    }
    let updates = updates.into_iter().map(|u| u as usize).collect();
    Ok(Parts { name, source, offsets, body: Body::Md5Digest { msg, digest, updates } })
}

fn md5_call(e: Md5CallEntry, off: usize) -> Result<Parts, FieldError> {
    let stub = match e.stub.as_str() {
        "md5_implCompress" => Md5Stub::Compress,
        "md5_implCompressMB" => Md5Stub::CompressMb,
        other => return Err(bad("stub", format!("{other:?} is not md5_implCompress or md5_implCompressMB"))),
    };
    let state = md5::state_from_bytes(&hex_array::<16>("state_hex", &e.state_hex)?);
    let expect_state = e.expect_state_hex.as_deref().map(|h| hex_array::<16>("expect_state_hex", h)).transpose()?;
    let (ofs, limit) = match stub {
        Md5Stub::Compress => {
            for (f, set) in
                [("ofs", e.ofs.is_some()), ("limit", e.limit.is_some()), ("expect_ofs", e.expect_ofs.is_some())]
            {
                if set {
                    return Err(bad(f, "md5_implCompress takes no ofs/limit (only md5_implCompressMB does)"));
                }
            }
            (0, 0)
        }
        Md5Stub::CompressMb => (
            e.ofs.ok_or_else(|| bad("ofs", "missing (md5_implCompressMB needs ofs and limit)"))?,
            e.limit.ok_or_else(|| bad("limit", "missing (md5_implCompressMB needs ofs and limit)"))?,
        ),
    };
    let blocks = match stub {
        Md5Stub::Compress => 1,
        Md5Stub::CompressMb => mb_call_blocks(ofs, limit)?,
    };
    let expect = Md5Expect { state: expect_state.map(|b| md5::state_from_bytes(&b)), ofs: e.expect_ofs };
    let c = common!(e);
    let (name, source, offsets) = head(&c, off)?;
    let input = message(&c)?;
    let need = blocks * 64;
    if (input.len() as u64) < need {
        let f = if c.msg.is_some() { "msg" } else { "msg_hex" };
        return Err(bad(f, format!("{} bytes, but the call processes {blocks} blocks ({need} bytes)", input.len())));
    }
    let call = Md5Call { stub, state, input, ofs, limit, expect };
    Ok(Parts { name, source, offsets, body: Body::Md5Call(call) })
}

/// Blocks `implCompressMB(ofs, limit)` processes, refusing what no Java caller can pass: an
/// `ofs` that would overflow `int` on its way past `limit`, or more input than one call holds.
fn mb_call_blocks(ofs: i32, limit: i32) -> Result<u64, FieldError> {
    let blocks = md5::mb_blocks(ofs, limit) as u64;
    let end = i64::from(ofs) + 64 * blocks as i64;
    if end > i64::from(i32::MAX) {
        let f = if limit < ofs { "ofs" } else { "limit" };
        return Err(bad(
            f,
            format!(
                "ofs {ofs} + {blocks} blocks of 64 = {end} overflows int: the loop would wrap (a Java \
                 caller's limit is at most 2^31 - 65)"
            ),
        ));
    }
    if blocks * 64 > MAX_CALL_INPUT {
        return Err(bad(
            "limit",
            format!(
                "the call processes {blocks} blocks ({} bytes), more than one call may take ({MAX_CALL_INPUT})",
                blocks * 64
            ),
        ));
    }
    Ok(blocks)
}

fn poly1305_tag(e: Poly1305TagEntry, off: usize) -> Result<Parts, FieldError> {
    let key = hex_array("key_hex", &e.key_hex)?;
    let tag = hex_array("tag_hex", &e.tag_hex)?;
    let c = common!(e);
    let (name, source, offsets) = head(&c, off)?;
    let msg = message(&c)?;
    Ok(Parts { name, source, offsets, body: Body::Poly1305Tag { key, msg, tag } })
}

fn limbs(field: &str, v: &[u64]) -> Result<Limbs26, FieldError> {
    let l: [u64; 5] = v.try_into().map_err(|_| bad(field, format!("must have 5 limbs, found {}", v.len())))?;
    let acc = Limbs26(l);
    if let Some((i, l)) = acc.first_out_of_bounds() {
        return Err(bad(field, format!("limb {i} = {l:#x} is outside the contract (limbs 0-3 < 2^26, limb 4 < 2^27)")));
    }
    Ok(acc)
}

fn poly1305_call(e: Poly1305CallEntry, off: usize) -> Result<Parts, FieldError> {
    let acc = limbs("acc", &e.acc)?;
    let r_bytes: [u8; 16] = hex_array("r_hex", &e.r_hex)?;
    if u128::from_le_bytes(r_bytes) & !poly1305::CLAMP != 0 {
        return Err(bad("r_hex", "r is not clamped (RFC 8439 §2.5.1: r &= 0x0ffffffc0ffffffc0ffffffc0fffffff)"));
    }
    let expect = Poly1305Expect { acc: e.expect_acc.as_ref().map(expect_acc).transpose()? };
    let lengths_given = e.lengths.clone();
    let c = common!(e);
    let (name, source, offsets) = head(&c, off)?;
    let input = message(&c)?;
    let lengths = match lengths_given {
        Some(l) => l,
        None => vec![i64::try_from(input.len()).map_err(|_| bad("msg", "too long"))?],
    };
    if lengths.is_empty() {
        return Err(bad(
            "lengths",
            "empty: the entry would make no call (leave `lengths` out for one call over the message)",
        ));
    }
    let mut total: u64 = 0;
    for (i, &l) in lengths.iter().enumerate() {
        let bytes = super::whole_blocks(l) as u64 * 16;
        if bytes > MAX_CALL_INPUT {
            return Err(bad(
                &format!("lengths[{i}]"),
                format!("{l} asks for {bytes} bytes of whole blocks, more than one call may take ({MAX_CALL_INPUT})"),
            ));
        }
        total = total.checked_add(bytes).ok_or_else(|| bad(&format!("lengths[{i}]"), "the calls' sum overflows"))?;
    }
    if total > input.len() as u64 {
        return Err(bad(
            "lengths",
            format!("the calls take {} blocks, the message has {} bytes", total / 16, input.len()),
        ));
    }
    let call = Poly1305Call { acc, r: poly1305::clamp_r(&r_bytes), input, lengths, expect };
    Ok(Parts { name, source, offsets, body: Body::Poly1305Call(call) })
}

/// `expect_acc`: five limbs (any limb form; compared mod 2^130 - 5), or the value as a hex
/// number, most significant digit first, the way RFC 8439 §2.5.2 prints `Acc`.
fn expect_acc(v: &Value) -> Result<num_bigint::BigUint, FieldError> {
    let value = match v {
        Value::String(s) => num_bigint::BigUint::parse_bytes(s.as_bytes(), 16)
            .ok_or_else(|| bad("expect_acc", format!("{s:?} is not a hex number")))?,
        _ => limbs("expect_acc", &typed::<Vec<u64>>(v, "expect_acc").map_err(|e| nest("expect_acc", e))?)?.value(),
    };
    if value.bits() > 131 {
        return Err(bad("expect_acc", "is above 2^131 (no accumulator within the limb bounds is)"));
    }
    Ok(value)
}

fn md5_chain(e: Md5ChainEntry, off: usize) -> Result<Parts, FieldError> {
    let digest = hex_array("digest_hex", &e.digest_hex)?;
    if e.steps == 0 || e.steps > MAX_CHAIN_STEPS {
        return Err(bad("steps", format!("{} is outside 1..={MAX_CHAIN_STEPS}", e.steps)));
    }
    let steps = e.steps as usize;
    let c = common!(e);
    let (name, source, offsets) = head(&c, off)?;
    let seed = message(&c)?;
    if seed.len() as u64 > MAX_CHAIN_SEED {
        return Err(bad("msg", format!("the first message may be at most {MAX_CHAIN_SEED} bytes")));
    }
    Ok(Parts { name, source, offsets, body: Body::Md5Chain(Md5Chain { seed, steps, digest }) })
}

fn mac_of_macs(e: MacOfMacsEntry, off: usize) -> Result<Parts, FieldError> {
    let key = hex_array("key_hex", &e.key_hex)?;
    let tag = hex_array("tag_hex", &e.tag_hex)?;
    if e.count == 0 || e.count > 256 {
        return Err(bad("count", format!("{} is outside 1..=256 (inner keys and messages are bytes i)", e.count)));
    }
    let c = Common { name: e.name, source: e.source, offset: e.offset, offsets: e.offsets, msg_hex: None, msg: None };
    let (name, source, offsets) = head(&c, off)?;
    let body = Body::Poly1305MacOfMacs(Poly1305MacOfMacs { count: e.count as usize, key, tag });
    Ok(Parts { name, source, offsets, body })
}
