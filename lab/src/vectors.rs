//! Vector files: known answers and generated cases as data, each entry with its source
//! (vectors/README.md documents the format).
//!
//! Four kinds of entry, told apart by their fields:
//! * MD5 digest (`digest_hex`): a message, optionally fed in uneven `updates`, and its digest;
//! * MD5 call (`stub`): one `md5_implCompress`/`md5_implCompressMB` call from a given state,
//!   checked against the portable reference (differential);
//! * Poly1305 tag (`tag_hex`): key, message and tag;
//! * Poly1305 call (`acc`): one or more `poly1305_processBlocks` calls from a given accumulator,
//!   checked against the reference mod 2^130-5 and against the limb bounds.
//!
//! Messages are `msg_hex` or a generated `msg` (`counter`, `repeat`, `random` patterns), so long
//! and swept messages stay small in the file. A malformed file or entry is an error that names
//! the file, the entry and the field; the file's valid entries still load and run.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::reference::md5::State;
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::Kernel;

/// One entry of a vector file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    /// Position in the file's `vectors` array, from 0.
    pub index: usize,
    /// Name as written in the file.
    pub name: String,
    /// Where the vector was published, or how its answer was computed.
    pub source: String,
    /// Byte offsets past a 64-byte boundary (0..=4095) at which the input is placed; one case
    /// per offset. Default: entry index mod 16, so a file's entries cover unaligned inputs.
    pub offsets: Vec<usize>,
    /// Inputs and the expected answer.
    pub body: Body,
}

/// The kernel-specific part of a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// MD5 of `msg` is `digest`; `updates` are the sizes of the `engineUpdate` pieces
    /// (empty: one update of the whole message), driven the way DigestBase drives the stubs.
    Md5Digest {
        /// The message.
        msg: Vec<u8>,
        /// Expected digest (RFC 1321 §3.5 byte order).
        digest: [u8; 16],
        /// Update piece sizes, summing to `msg.len()`.
        updates: Vec<usize>,
    },
    /// One MD5 stub call, checked against the reference.
    Md5Call(Md5Call),
    /// The Poly1305 tag of `msg` under the one-time `key` (r || s, r unclamped) is `tag`.
    Poly1305Tag {
        /// r || s as published (RFC 8439 §2.5).
        key: [u8; 32],
        /// The message.
        msg: Vec<u8>,
        /// Expected tag.
        tag: [u8; 16],
    },
    /// `poly1305_processBlocks` calls from a given accumulator, checked against the reference.
    Poly1305Call(Poly1305Call),
}

/// Which MD5 stub a call entry calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Stub {
    /// `md5_implCompress(buf, state)`: one block.
    Compress,
    /// `md5_implCompressMB(buf, state, ofs, limit)`.
    CompressMb,
}

/// One MD5 stub call: the state before, the input at `buf`, and (MB) `ofs`/`limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Md5Call {
    /// Which stub.
    pub stub: Md5Stub,
    /// The state words before the call.
    pub state: State,
    /// The bytes at `buf`; at least the blocks the call processes.
    pub input: Vec<u8>,
    /// `ofs` argument (MB only).
    pub ofs: i32,
    /// `limit` argument (MB only).
    pub limit: i32,
}

/// A chain of `poly1305_processBlocks` calls over one input, the accumulator passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poly1305Call {
    /// The accumulator before the first call (within the contract bounds).
    pub acc: Limbs26,
    /// r, clamped.
    pub r: Limbs26,
    /// The input bytes.
    pub input: Vec<u8>,
    /// The `length` argument of each call, in order; calls start where the previous one's
    /// whole blocks ended. Their whole blocks fit in `input`.
    pub lengths: Vec<i64>,
}

impl Vector {
    /// Length in bytes of the message or input, for reports.
    pub fn msg_len(&self) -> usize {
        match &self.body {
            Body::Md5Digest { msg, .. } | Body::Poly1305Tag { msg, .. } => msg.len(),
            Body::Md5Call(c) => c.input.len(),
            Body::Poly1305Call(c) => c.input.len(),
        }
    }

    /// The kernel the entry tests.
    pub fn kernel(&self) -> Kernel {
        match &self.body {
            Body::Md5Digest { .. } | Body::Md5Call(_) => Kernel::Md5,
            Body::Poly1305Tag { .. } | Body::Poly1305Call(_) => Kernel::Poly1305,
        }
    }
}

/// A file of vectors for one kernel.
#[derive(Debug, Clone)]
pub struct VectorSet {
    /// The file it came from.
    pub file: PathBuf,
    /// The contract the vectors test.
    pub kernel: Kernel,
    /// Short set name for reports (`rfc1321`).
    pub set: String,
    /// The entries that parsed.
    pub vectors: Vec<Vector>,
}

/// What is wrong with a vector file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorError {
    /// The file.
    pub file: PathBuf,
    /// `(index, name)` of the entry, when the problem is inside one.
    pub entry: Option<(usize, Option<String>)>,
    /// The field, when the problem is in one.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for VectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        match &self.entry {
            Some((i, Some(name))) => write!(f, ": entry {i} ({name:?})")?,
            Some((i, None)) => write!(f, ": entry {i}")?,
            None => {}
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for VectorError {}

/// Loads one vector file. Returns the set (with every valid entry) and every problem found.
/// The set is `None` only when the file as a whole is unusable.
pub fn load_file(path: &Path) -> (Option<VectorSet>, Vec<VectorError>) {
    let err = |field: Option<&str>, problem: String| VectorError {
        file: path.into(),
        entry: None,
        field: field.map(str::to_owned),
        problem,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return (None, vec![err(None, format!("cannot read: {e}"))]),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return (None, vec![err(None, format!("not valid JSON: {e}"))]),
    };
    let Some(top) = doc.as_object() else {
        return (None, vec![err(None, "the top level must be an object with `kernel`, `set` and `vectors`".into())]);
    };
    let kernel = match top.get("kernel").and_then(Value::as_str) {
        Some(k) => match Kernel::from_name(k) {
            Some(k) => k,
            None => return (None, vec![err(Some("kernel"), format!("unknown kernel {k:?} (md5, poly1305)"))]),
        },
        None => return (None, vec![err(Some("kernel"), "missing or not a string".into())]),
    };
    let set = top
        .get("set")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| path.file_stem().unwrap_or_default().to_string_lossy().into_owned());
    let Some(entries) = top.get("vectors").and_then(Value::as_array) else {
        return (None, vec![err(Some("vectors"), "missing or not an array".into())]);
    };
    let mut vectors = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let name = entry.get("name").and_then(Value::as_str).map(str::to_owned);
        match parse_entry(kernel, i, entry) {
            Ok(v) => vectors.push(v),
            Err(FieldError { field, problem }) => {
                errors.push(VectorError { file: path.into(), entry: Some((i, name)), field, problem });
            }
        }
    }
    (Some(VectorSet { file: path.into(), kernel, set, vectors }), errors)
}

/// A problem inside one entry: the field (if any) and what is wrong.
#[derive(Debug)]
struct FieldError {
    field: Option<String>,
    problem: String,
}

fn bad(field: &str, problem: impl Into<String>) -> FieldError {
    FieldError { field: Some(field.into()), problem: problem.into() }
}

/// Typed access to one entry's fields, with errors that name the field.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn has(&self, f: &str) -> bool {
        self.0.contains_key(f)
    }

    fn text(&self, f: &str) -> Result<String, FieldError> {
        self.0.get(f).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| bad(f, "missing or not a string"))
    }

    fn hex(&self, f: &str, len: Option<usize>) -> Result<Vec<u8>, FieldError> {
        let bytes = hex::decode(self.text(f)?).map_err(|e| bad(f, format!("invalid hex: {e}")))?;
        match len {
            Some(n) if bytes.len() != n => Err(bad(f, format!("must be {n} bytes, found {}", bytes.len()))),
            _ => Ok(bytes),
        }
    }

    fn int(&self, f: &str, lo: i64, hi: i64) -> Result<i64, FieldError> {
        let v = self.0.get(f).and_then(Value::as_i64).ok_or_else(|| bad(f, "missing or not an integer"))?;
        if v < lo || v > hi {
            return Err(bad(f, format!("{v} is outside {lo}..={hi}")));
        }
        Ok(v)
    }

    fn int_list(&self, f: &str, lo: i64, hi: i64) -> Result<Vec<i64>, FieldError> {
        let arr = self.0.get(f).and_then(Value::as_array).ok_or_else(|| bad(f, "must be an array of integers"))?;
        arr.iter()
            .map(|v| match v.as_i64() {
                Some(x) if (lo..=hi).contains(&x) => Ok(x),
                Some(x) => Err(bad(f, format!("{x} is outside {lo}..={hi}"))),
                None => Err(bad(f, format!("{v} is not an integer"))),
            })
            .collect()
    }

    /// The message: `msg_hex`, or a generated `msg` pattern.
    fn message(&self) -> Result<Vec<u8>, FieldError> {
        match (self.has("msg_hex"), self.0.get("msg")) {
            (true, None) => self.hex("msg_hex", None),
            (false, Some(m)) => generate(m).map_err(|p| bad("msg", p)),
            (true, Some(_)) => Err(bad("msg", "give either `msg_hex` or `msg`, not both")),
            (false, None) => Err(bad("msg_hex", "missing (or give a generated `msg`)")),
        }
    }

    /// `offset` (one) or `offsets` (`[a, b, ...]` or `{"from": a, "to": b}` inclusive).
    fn offsets(&self, default: usize) -> Result<Vec<usize>, FieldError> {
        if self.has("offset") {
            return Ok(vec![self.int("offset", 0, MAX_OFFSET)? as usize]);
        }
        match self.0.get("offsets") {
            None => Ok(vec![default]),
            Some(Value::Object(r)) => {
                let f = Fields(r);
                let from = f.int("from", 0, MAX_OFFSET).map_err(|e| rename(e, "offsets"))?;
                let (a, b) = (from, f.int("to", 0, MAX_OFFSET).map_err(|e| rename(e, "offsets"))?);
                if a > b {
                    return Err(bad("offsets", format!("from {a} is above to {b}")));
                }
                Ok((a as usize..=b as usize).collect())
            }
            Some(_) => Ok(self.int_list("offsets", 0, MAX_OFFSET)?.into_iter().map(|x| x as usize).collect()),
        }
    }
}

/// Largest input offset past a 64-byte boundary an entry may ask for (within one page).
const MAX_OFFSET: i64 = 4095;

fn rename(e: FieldError, outer: &str) -> FieldError {
    FieldError { field: Some(format!("{outer}.{}", e.field.unwrap_or_default())), problem: e.problem }
}

/// Every field an entry may have; anything else is an error (a misspelt field is not ignored).
const KNOWN_FIELDS: &[&str] = &[
    "name",
    "source",
    "comment",
    "msg_hex",
    "msg",
    "offset",
    "offsets",
    "digest_hex",
    "updates",
    "stub",
    "state_hex",
    "ofs",
    "limit",
    "key_hex",
    "tag_hex",
    "acc",
    "r_hex",
    "lengths",
];

fn parse_entry(kernel: Kernel, index: usize, entry: &Value) -> Result<Vector, FieldError> {
    let obj = entry.as_object().ok_or(FieldError { field: None, problem: "an entry must be an object".into() })?;
    if let Some(k) = obj.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(bad(k, "unknown field"));
    }
    let f = Fields(obj);
    let name = f.text("name")?;
    let source = f.text("source")?;
    let offsets = f.offsets(index % 16)?;
    let body = match kernel {
        Kernel::Md5 if f.has("stub") => Body::Md5Call(md5_call(&f)?),
        Kernel::Md5 => md5_digest(&f)?,
        Kernel::Poly1305 if f.has("acc") => Body::Poly1305Call(poly1305_call(&f)?),
        Kernel::Poly1305 => Body::Poly1305Tag {
            key: f.hex("key_hex", Some(32))?.try_into().expect("checked length"),
            msg: f.message()?,
            tag: f.hex("tag_hex", Some(16))?.try_into().expect("checked length"),
        },
    };
    Ok(Vector { index, name, source, offsets, body })
}

fn md5_digest(f: &Fields) -> Result<Body, FieldError> {
    let msg = f.message()?;
    let digest = f.hex("digest_hex", Some(16))?.try_into().expect("checked length");
    let updates: Vec<usize> = if f.has("updates") {
        f.int_list("updates", 0, i64::from(i32::MAX))?.into_iter().map(|x| x as usize).collect()
    } else {
        Vec::new()
    };
    if !updates.is_empty() && updates.iter().sum::<usize>() != msg.len() {
        return Err(bad(
            "updates",
            format!("pieces sum to {}, the message has {} bytes", updates.iter().sum::<usize>(), msg.len()),
        ));
    }
    Ok(Body::Md5Digest { msg, digest, updates })
}

fn md5_call(f: &Fields) -> Result<Md5Call, FieldError> {
    let stub = match f.text("stub")?.as_str() {
        "md5_implCompress" => Md5Stub::Compress,
        "md5_implCompressMB" => Md5Stub::CompressMb,
        other => return Err(bad("stub", format!("{other:?} is not md5_implCompress or md5_implCompressMB"))),
    };
    let state = crate::reference::md5::state_from_bytes(&f.hex("state_hex", Some(16))?);
    let input = f.message()?;
    let (ofs, limit) = match stub {
        Md5Stub::Compress => (0, 0),
        Md5Stub::CompressMb => {
            let r = i64::from(i32::MIN)..=i64::from(i32::MAX);
            (f.int("ofs", *r.start(), *r.end())? as i32, f.int("limit", *r.start(), *r.end())? as i32)
        }
    };
    let need = crate::reference::md5::mb_blocks(ofs, limit) * 64;
    if input.len() < need {
        return Err(bad(
            "msg",
            format!("{} bytes, but the call processes {} blocks ({need} bytes)", input.len(), need / 64),
        ));
    }
    Ok(Md5Call { stub, state, input, ofs, limit })
}

fn poly1305_call(f: &Fields) -> Result<Poly1305Call, FieldError> {
    let limbs = f.int_list("acc", 0, i64::from(u32::MAX))?;
    let acc = Limbs26(
        limbs.iter().map(|&x| x as u64).collect::<Vec<_>>().try_into().map_err(|_| bad("acc", "must have 5 limbs"))?,
    );
    if let Some((i, l)) = acc.first_out_of_bounds() {
        return Err(bad("acc", format!("limb {i} = {l:#x} is outside the contract (limbs 0-3 < 2^26, limb 4 < 2^27)")));
    }
    let r_bytes: [u8; 16] = f.hex("r_hex", Some(16))?.try_into().expect("checked length");
    if u128::from_le_bytes(r_bytes) & !poly1305::CLAMP != 0 {
        return Err(bad("r_hex", "r is not clamped (RFC 8439 §2.5.1: r &= 0x0ffffffc0ffffffc0ffffffc0fffffff)"));
    }
    let input = f.message()?;
    let lengths = if f.has("lengths") { f.int_list("lengths", i64::MIN, i64::MAX)? } else { vec![input.len() as i64] };
    let blocks: usize = lengths.iter().map(|&l| whole_blocks(l)).sum();
    if blocks * 16 > input.len() {
        return Err(bad("lengths", format!("the calls take {blocks} blocks, the message has {} bytes", input.len())));
    }
    Ok(Poly1305Call { acc, r: poly1305::clamp_r(&r_bytes), input, lengths })
}

/// Whole 16-byte blocks a `length` argument asks for (none for a negative length).
pub fn whole_blocks(length: i64) -> usize {
    if length < 16 {
        0
    } else {
        (length / 16) as usize
    }
}

/// Expands a generated message: `{"pattern": "counter", "len": N}` (byte i = i mod 256),
/// `{"pattern": "repeat", "byte_hex": "61", "len": N}`, or `{"pattern": "random", "seed": S,
/// "len": N}` (SHA-256(seed as u64 LE || block counter as u64 LE), blocks concatenated: easy
/// to reproduce in any language, which is how the pinned digests are computed independently).
pub fn generate(spec: &Value) -> Result<Vec<u8>, String> {
    let obj = spec.as_object().ok_or("must be an object with `pattern` and `len`")?;
    let f = Fields(obj);
    let err = |e: FieldError| format!("{}: {}", e.field.unwrap_or_default(), e.problem);
    let len = f.int("len", 0, 1 << 28).map_err(err)? as usize;
    match f.text("pattern").map_err(err)?.as_str() {
        "counter" => Ok((0..len).map(|i| i as u8).collect()),
        "repeat" => {
            let b = f.hex("byte_hex", Some(1)).map_err(err)?;
            Ok(vec![b[0]; len])
        }
        "random" => {
            let seed = f.int("seed", 0, i64::MAX).map_err(err)? as u64;
            Ok(random_bytes(seed, len))
        }
        other => Err(format!("unknown pattern {other:?} (counter, repeat, random)")),
    }
}

/// The `random` pattern: SHA-256(seed LE || counter LE) for counter = 0, 1, ..., truncated.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut counter = 0u64;
    while out.len() < len {
        let mut h = Sha256::new();
        h.update(seed.to_le_bytes());
        h.update(counter.to_le_bytes());
        out.extend_from_slice(&h.finalize());
        counter += 1;
    }
    out.truncate(len);
    out
}

/// The JSON entry for `v` in the file format above (the inverse of the parser): used to write
/// fuzz failures as replayable vectors. Messages are written as `msg_hex`.
pub fn entry_json(v: &Vector) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), v.name.clone().into());
    m.insert("source".into(), v.source.clone().into());
    m.insert("offset".into(), v.offsets.first().copied().unwrap_or(0).into());
    let hexv = |b: &[u8]| Value::from(hex::encode(b));
    match &v.body {
        Body::Md5Digest { msg, digest, updates } => {
            m.insert("msg_hex".into(), hexv(msg));
            m.insert("digest_hex".into(), hexv(digest));
            if !updates.is_empty() {
                m.insert("updates".into(), updates.clone().into());
            }
        }
        Body::Md5Call(c) => {
            let stub = if c.stub == Md5Stub::Compress { "md5_implCompress" } else { "md5_implCompressMB" };
            m.insert("stub".into(), stub.into());
            m.insert("state_hex".into(), hexv(&crate::reference::md5::state_to_bytes(&c.state)));
            m.insert("msg_hex".into(), hexv(&c.input));
            if c.stub == Md5Stub::CompressMb {
                m.insert("ofs".into(), c.ofs.into());
                m.insert("limit".into(), c.limit.into());
            }
        }
        Body::Poly1305Tag { key, msg, tag } => {
            m.insert("key_hex".into(), hexv(key));
            m.insert("msg_hex".into(), hexv(msg));
            m.insert("tag_hex".into(), hexv(tag));
        }
        Body::Poly1305Call(c) => {
            m.insert("acc".into(), c.acc.0.to_vec().into());
            let r = c.r.value().to_bytes_le();
            let mut r16 = [0u8; 16];
            r16[..r.len().min(16)].copy_from_slice(&r[..r.len().min(16)]);
            m.insert("r_hex".into(), hexv(&r16));
            m.insert("msg_hex".into(), hexv(&c.input));
            m.insert("lengths".into(), c.lengths.clone().into());
        }
    }
    Value::Object(m)
}

/// Writes a vector file for `kernel` holding `vectors`.
///
/// # Errors
/// I/O errors from writing `path`.
pub fn write_file(
    path: &Path,
    kernel: Kernel,
    set: &str,
    description: &str,
    vectors: &[Vector],
) -> std::io::Result<()> {
    let doc = serde_json::json!({
        "kernel": kernel.name(),
        "set": set,
        "description": description,
        "vectors": vectors.iter().map(entry_json).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// Every `*.json` under `dir/<kernel>/`, sorted, for the kernels asked for.
pub fn bundled_files(dir: &Path, kernels: &[Kernel]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for k in kernels {
        if let Ok(rd) = std::fs::read_dir(dir.join(k.name())) {
            files.extend(
                rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")),
            );
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.json");
        std::fs::write(&p, content).unwrap();
        (dir, p)
    }

    #[test]
    fn valid_md5_entry_parses() {
        let (_d, p) = write(
            r#"{"kernel":"md5","set":"s","vectors":[{"name":"abc","source":"RFC 1321 A.5","msg_hex":"616263","digest_hex":"900150983cd24fb0d6963f7d28e17f72"}]}"#,
        );
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        let set = set.unwrap();
        assert_eq!(set.vectors.len(), 1);
        let digest = hex::decode("900150983cd24fb0d6963f7d28e17f72").unwrap().try_into().unwrap();
        assert_eq!(set.vectors[0].body, Body::Md5Digest { msg: b"abc".to_vec(), digest, updates: vec![] });
        assert_eq!(set.vectors[0].offsets, vec![0]);
    }

    #[test]
    fn broken_hex_names_file_entry_and_field_and_keeps_the_rest() {
        let (_d, p) = write(
            r#"{"kernel":"md5","vectors":[
            {"name":"good","source":"x","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"},
            {"name":"bad","source":"x","msg_hex":"6g","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}]}"#,
        );
        let (set, errs) = load_file(&p);
        assert_eq!(set.unwrap().vectors.len(), 1);
        assert_eq!(errs.len(), 1);
        let msg = errs[0].to_string();
        assert!(
            msg.contains("v.json")
                && msg.contains("entry 1 (\"bad\")")
                && msg.contains("field `msg_hex`")
                && msg.contains("invalid hex"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_length_unknown_field_and_bad_json_are_errors() {
        let (_d, p) = write(
            r#"{"kernel":"poly1305","vectors":[{"name":"k","source":"x","key_hex":"00","msg_hex":"","tag_hex":"00000000000000000000000000000000"},
            {"name":"t","source":"x","key_hex":"0000000000000000000000000000000000000000000000000000000000000000","msg_hex":"","tag_hex":"00000000000000000000000000000000","tga":1}]}"#,
        );
        let (_, errs) = load_file(&p);
        assert_eq!(errs.len(), 2);
        assert!(errs[0].to_string().contains("field `key_hex`: must be 32 bytes, found 1"), "{}", errs[0]);
        assert!(errs[1].to_string().contains("field `tga`: unknown field"), "{}", errs[1]);
        let (_d2, p2) = write("{ not json");
        let (set, errs) = load_file(&p2);
        assert!(set.is_none());
        assert!(errs[0].problem.starts_with("not valid JSON"), "{}", errs[0]);
    }

    #[test]
    fn generated_messages_offsets_and_call_entries() {
        let (_d, p) = write(
            r#"{"kernel":"md5","vectors":[
            {"name":"c","source":"x","msg":{"pattern":"counter","len":300},"offsets":{"from":0,"to":3},"digest_hex":"00000000000000000000000000000000","updates":[1,299]},
            {"name":"mb","source":"x","stub":"md5_implCompressMB","state_hex":"0123456789abcdeffedcba9876543210","msg":{"pattern":"repeat","byte_hex":"61","len":192},"ofs":10,"limit":75},
            {"name":"short","source":"x","stub":"md5_implCompressMB","state_hex":"0123456789abcdeffedcba9876543210","msg_hex":"00","ofs":0,"limit":0},
            {"name":"sum","source":"x","msg_hex":"0000","digest_hex":"00000000000000000000000000000000","updates":[1]}]}"#,
        );
        let (set, errs) = load_file(&p);
        let set = set.unwrap();
        assert_eq!(set.vectors.len(), 2, "{errs:?}");
        assert_eq!(set.vectors[0].offsets, vec![0, 1, 2, 3]);
        let Body::Md5Digest { msg, updates, .. } = &set.vectors[0].body else { panic!() };
        assert_eq!((msg.len(), msg[257], updates.clone()), (300, 1, vec![1, 299]));
        let Body::Md5Call(c) = &set.vectors[1].body else { panic!() };
        assert_eq!((c.stub, c.ofs, c.limit, c.input.len()), (Md5Stub::CompressMb, 10, 75, 192));
        assert!(errs[0]
            .to_string()
            .contains("entry 2 (\"short\"): field `msg`: 1 bytes, but the call processes 1 blocks"));
        assert!(errs[1].to_string().contains("field `updates`: pieces sum to 1, the message has 2 bytes"));
    }

    #[test]
    fn poly1305_call_entries_check_bounds_and_clamp() {
        let (_d, p) = write(
            r#"{"kernel":"poly1305","vectors":[
            {"name":"ok","source":"x","acc":[67108863,67108863,67108863,67108863,134217727],"r_hex":"ffffff0ffcffff0ffcffff0ffcffff0f","msg":{"pattern":"repeat","byte_hex":"ff","len":33},"lengths":[16,17]},
            {"name":"limb","source":"x","acc":[0,0,0,0,134217728],"r_hex":"00000000000000000000000000000000","msg_hex":""},
            {"name":"clamp","source":"x","acc":[0,0,0,0,0],"r_hex":"ffffffffffffffffffffffffffffffff","msg_hex":""}]}"#,
        );
        let (set, errs) = load_file(&p);
        let v = &set.unwrap().vectors;
        assert_eq!(v.len(), 1);
        let Body::Poly1305Call(c) = &v[0].body else { panic!() };
        assert_eq!(c.lengths, vec![16, 17]);
        assert!(errs[0].to_string().contains("field `acc`: limb 4 = 0x8000000 is outside the contract"), "{}", errs[0]);
        assert!(errs[1].to_string().contains("field `r_hex`: r is not clamped"), "{}", errs[1]);
    }

    #[test]
    fn written_entries_parse_back_to_the_same_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let md5 = Vector {
            index: 0,
            name: "m".into(),
            source: "s".into(),
            offsets: vec![5],
            body: Body::Md5Call(Md5Call {
                stub: Md5Stub::CompressMb,
                state: [1, 2, 3, 4],
                input: vec![7; 128],
                ofs: -5,
                limit: 70,
            }),
        };
        let p = dir.path().join("m.json");
        write_file(&p, Kernel::Md5, "x", "d", std::slice::from_ref(&md5)).unwrap();
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(set.unwrap().vectors, vec![md5]);
        let r = poly1305::clamp_r(&[0xff; 16]);
        let poly = Vector {
            index: 0,
            name: "p".into(),
            source: "s".into(),
            offsets: vec![3],
            body: Body::Poly1305Call(Poly1305Call {
                acc: Limbs26([1, 2, 3, 4, 5]),
                r,
                input: vec![9; 40],
                lengths: vec![16, 3, 24],
            }),
        };
        let p = dir.path().join("p.json");
        write_file(&p, Kernel::Poly1305, "x", "d", std::slice::from_ref(&poly)).unwrap();
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(set.unwrap().vectors, vec![poly]);
    }

    #[test]
    fn random_pattern_is_sha256_counter_mode() {
        let b = random_bytes(7, 40);
        let mut h = Sha256::new();
        h.update(7u64.to_le_bytes());
        h.update(0u64.to_le_bytes());
        assert_eq!(&b[..32], &h.finalize()[..]);
        assert_eq!(b.len(), 40);
    }
}
