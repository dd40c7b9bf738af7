//! Vector files: known answers and generated cases as data, each entry with its source
//! (vectors/README.md documents the format).
//!
//! Six kinds of entry, told apart by a tag field (see `vectors/entries.rs`):
//! * MD5 digest: a message, optionally fed in uneven `updates`, and its digest;
//! * MD5 call (`stub`): one `md5_implCompress`/`md5_implCompressMB` call from a given state,
//!   checked against the portable reference and, when given, the file's expected state and ofs;
//! * Poly1305 tag: key, message and tag;
//! * Poly1305 call (`acc`): `poly1305_processBlocks` calls from a given accumulator, checked
//!   against the reference mod 2^130-5, the limb bounds and, when given, the file's `expect_acc`;
//! * chains (`chain`): `md5_iterate` (MD5 of the previous digest, N times) and
//!   `poly1305_mac_of_macs` (a tag over the tags of 256 keys and messages), each step through
//!   the kernel, the last value checked against the file.
//!
//! Files are read strictly: only regular files up to [`MAX_FILE_BYTES`], unknown fields,
//! duplicate keys, duplicate names and out-of-range numbers are errors that name the file, the
//! entry and the field; the file's valid entries still load and run. Messages are literal
//! (`msg_hex`) or generated (`msg`) and are read a range at a time ([`Message`]).

mod cost;
mod entries;
mod message;
mod strict;

use std::fmt;
use std::path::{Path, PathBuf};

use num_bigint::BigUint;
use serde::Deserialize;
use serde_json::{Map, Value};

pub use cost::{enforce as enforce_costs, CostLimits, EntryCost, CALL_BYTES, CHUNK};
pub use entries::{FieldError, MAX_CALL_INPUT, MAX_CHAIN_SEED, MAX_CHAIN_STEPS, MAX_OFFSET};
pub use message::{random_bytes, Message, MAX_MSG_LEN};

use crate::reference::md5::State;
use crate::reference::poly1305::Limbs26;
use crate::variant::Kernel;

/// Largest vector file the lab reads: 64 MiB (the bundled files are under 1 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

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
        msg: Message,
        /// Expected digest (RFC 1321 §3.5 byte order).
        digest: [u8; 16],
        /// Update piece sizes, summing to `msg.len()`.
        updates: Vec<usize>,
    },
    /// One MD5 stub call, checked against the reference (and the file's expectations).
    Md5Call(Md5Call),
    /// The Poly1305 tag of `msg` under the one-time `key` (r || s, r unclamped) is `tag`.
    Poly1305Tag {
        /// r || s as published (RFC 8439 §2.5).
        key: [u8; 32],
        /// The message.
        msg: Message,
        /// Expected tag.
        tag: [u8; 16],
    },
    /// `poly1305_processBlocks` calls from a given accumulator, checked against the reference.
    Poly1305Call(Poly1305Call),
    /// MD5 iterated on its own digest (`chain: md5_iterate`).
    Md5Chain(Md5Chain),
    /// A Poly1305 tag over the tags of `count` keys and messages (`chain: poly1305_mac_of_macs`).
    Poly1305MacOfMacs(Poly1305MacOfMacs),
}

/// Which MD5 stub a call entry calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Stub {
    /// `md5_implCompress(buf, state)`: one block.
    Compress,
    /// `md5_implCompressMB(buf, state, ofs, limit)`.
    CompressMb,
}

/// Published results an MD5 call entry must produce, beside the reference's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Md5Expect {
    /// `expect_state_hex`: the state words after the call.
    pub state: Option<State>,
    /// `expect_ofs`: the `int` `implCompressMB` returns.
    pub ofs: Option<i32>,
}

/// One MD5 stub call: the state before, the input at `buf`, and (MB) `ofs`/`limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Md5Call {
    /// Which stub.
    pub stub: Md5Stub,
    /// The state words before the call.
    pub state: State,
    /// The bytes at `buf`; at least the blocks the call processes (at most [`MAX_CALL_INPUT`]).
    pub input: Message,
    /// `ofs` argument (MB only).
    pub ofs: i32,
    /// `limit` argument (MB only).
    pub limit: i32,
    /// Expected results from the file, if any.
    pub expect: Md5Expect,
}

/// Published results a Poly1305 call entry must produce, beside the reference's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Poly1305Expect {
    /// `expect_acc`: the accumulator's value after the last call (compared mod 2^130 - 5).
    pub acc: Option<BigUint>,
}

/// A chain of `poly1305_processBlocks` calls over one input, the accumulator passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poly1305Call {
    /// The accumulator before the first call (within the contract bounds).
    pub acc: Limbs26,
    /// r, clamped.
    pub r: Limbs26,
    /// The input bytes.
    pub input: Message,
    /// The `length` argument of each call, in order; calls start where the previous one's
    /// whole blocks ended. Their whole blocks fit in `input`, each at most [`MAX_CALL_INPUT`].
    pub lengths: Vec<i64>,
    /// Expected result from the file, if any.
    pub expect: Poly1305Expect,
}

/// `md5_iterate`: x0 = `seed`, x(i+1) = MD5(x(i)) through the kernel (DigestBase-driven), and
/// x(`steps`) must be `digest` (NIST CAVP Monte Carlo style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Md5Chain {
    /// The first message.
    pub seed: Message,
    /// How many digests (1..=[`MAX_CHAIN_STEPS`]).
    pub steps: usize,
    /// The last digest.
    pub digest: [u8; 16],
}

/// `poly1305_mac_of_macs`, the power-on self-test of poly1305-donna (used by BoringSSL,
/// OpenSSL and Linux): for i in 0..count, the tag of i bytes of value i under the key of 32
/// bytes of value i; then the tag of those tags, concatenated, under `key` must be `tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poly1305MacOfMacs {
    /// Inner tags (1..=256).
    pub count: usize,
    /// The outer key (r || s).
    pub key: [u8; 32],
    /// The outer tag.
    pub tag: [u8; 16],
}

impl Vector {
    /// Length in bytes of the message or input, for reports.
    pub fn msg_len(&self) -> usize {
        match &self.body {
            Body::Md5Digest { msg, .. } | Body::Poly1305Tag { msg, .. } => msg.len(),
            Body::Md5Call(c) => c.input.len(),
            Body::Poly1305Call(c) => c.input.len(),
            Body::Md5Chain(c) => c.seed.len(),
            Body::Poly1305MacOfMacs(m) => m.count * 16,
        }
    }

    /// The kernel the entry tests.
    pub fn kernel(&self) -> Kernel {
        match &self.body {
            Body::Md5Digest { .. } | Body::Md5Call(_) | Body::Md5Chain(_) => Kernel::Md5,
            Body::Poly1305Tag { .. } | Body::Poly1305Call(_) | Body::Poly1305MacOfMacs(_) => Kernel::Poly1305,
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

/// The top level of a vector file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    kernel: String,
    set: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    vectors: Vec<Value>,
}

/// Loads one vector file. Returns the set (with every valid entry) and every problem found.
/// The set is `None` only when the file as a whole is unusable.
pub fn load_file(path: &Path) -> (Option<VectorSet>, Vec<VectorError>) {
    let err = |field: Option<String>, problem: String| VectorError { file: path.into(), entry: None, field, problem };
    let text = match crate::input_file::read_regular(path, MAX_FILE_BYTES, "a vector file") {
        Ok(t) => t,
        Err(e) => return (None, vec![err(None, e)]),
    };
    let parsed = match strict::parse(&text) {
        Ok(p) => p,
        Err(e) => return (None, vec![err(None, format!("not valid JSON: {e}"))]),
    };
    // Duplicate keys: at the top level they spoil the file, inside an entry only that entry.
    let mut entry_dups: Vec<(usize, String)> = Vec::new();
    for d in &parsed.duplicates {
        match d.as_slice() {
            [strict::Step::Key(v), strict::Step::Index(i), rest @ ..] if v == "vectors" && !rest.is_empty() => {
                entry_dups.push((*i, strict::field_name(rest)));
            }
            _ => {
                let problem = "duplicate key (JSON keeps only one of them; say it once)".to_owned();
                return (None, vec![err(Some(strict::field_name(d)), problem)]);
            }
        }
    }
    if !parsed.value.is_object() {
        let problem = "the top level must be an object with `kernel`, `set` and `vectors`".to_owned();
        return (None, vec![err(None, problem)]);
    }
    let doc: FileDoc = match entries::typed(&parsed.value, "the top level of a vector file") {
        Ok(d) => d,
        Err(e) => return (None, vec![err(e.field, e.problem)]),
    };
    let Some(kernel) = Kernel::from_name(&doc.kernel) else {
        return (None, vec![err(Some("kernel".into()), format!("unknown kernel {:?} (md5, poly1305)", doc.kernel))]);
    };
    let set = match doc.set {
        Some(s) if s.trim().is_empty() => return (None, vec![err(Some("set".into()), "must not be empty".into())]),
        Some(s) => s,
        None => path.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
    };
    let (vectors, errors) = load_entries(path, kernel, &doc.vectors, &entry_dups);
    (Some(VectorSet { file: path.into(), kernel, set, vectors }), errors)
}

/// Checks every entry; returns the valid ones and an error for each other one.
fn load_entries(
    path: &Path,
    kernel: Kernel,
    entries: &[Value],
    dups: &[(usize, String)],
) -> (Vec<Vector>, Vec<VectorError>) {
    let mut vectors: Vec<Vector> = Vec::new();
    let mut errors = Vec::new();
    let mut names: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let name = entry.get("name").and_then(Value::as_str).map(str::to_owned);
        let result = match dups.iter().find(|(i, _)| *i == index) {
            Some((_, field)) => Err(entries::bad(field, "duplicate key (JSON keeps only one of them; say it once)")),
            None => entries::parse_entry(kernel, index, entry),
        }
        .and_then(|p| match names.get(&p.name) {
            Some(first) => {
                Err(entries::bad("name", format!("entry {first} has the same name (names must be unique in a file)")))
            }
            None => Ok(p),
        });
        match result {
            Ok(p) => {
                names.insert(p.name.clone(), index);
                vectors.push(Vector { index, name: p.name, source: p.source, offsets: p.offsets, body: p.body });
            }
            Err(FieldError { field, problem }) => {
                errors.push(VectorError { file: path.into(), entry: Some((index, name)), field, problem });
            }
        }
    }
    (vectors, errors)
}

/// Whole 16-byte blocks a `length` argument asks for (none for a negative length).
pub fn whole_blocks(length: i64) -> usize {
    if length < 16 {
        0
    } else {
        (length / 16) as usize
    }
}

/// The `msg` object (or `msg_hex`) of a message, for writing files.
fn message_json(m: &Message, into: &mut Map<String, Value>) {
    let spec = match m {
        Message::Bytes(b) => {
            into.insert("msg_hex".into(), hex::encode(b).into());
            return;
        }
        Message::Counter { len } => serde_json::json!({"pattern": "counter", "len": len}),
        Message::Repeat { byte, len } => {
            serde_json::json!({"pattern": "repeat", "byte_hex": hex::encode([*byte]), "len": len})
        }
        Message::Random { seed, len } => serde_json::json!({"pattern": "random", "seed": seed, "len": len}),
    };
    into.insert("msg".into(), spec);
}

/// The JSON entry for `v` in the file format above (the inverse of the parser): used to write
/// fuzz failures as replayable vectors.
pub fn entry_json(v: &Vector) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), v.name.clone().into());
    m.insert("source".into(), v.source.clone().into());
    m.insert("offsets".into(), v.offsets.clone().into());
    let hexv = |b: &[u8]| Value::from(hex::encode(b));
    match &v.body {
        Body::Md5Digest { msg, digest, updates } => {
            message_json(msg, &mut m);
            m.insert("digest_hex".into(), hexv(digest));
            if !updates.is_empty() {
                m.insert("updates".into(), updates.clone().into());
            }
        }
        Body::Md5Call(c) => {
            let stub = if c.stub == Md5Stub::Compress { "md5_implCompress" } else { "md5_implCompressMB" };
            m.insert("stub".into(), stub.into());
            m.insert("state_hex".into(), hexv(&crate::reference::md5::state_to_bytes(&c.state)));
            message_json(&c.input, &mut m);
            if c.stub == Md5Stub::CompressMb {
                m.insert("ofs".into(), c.ofs.into());
                m.insert("limit".into(), c.limit.into());
            }
            if let Some(s) = &c.expect.state {
                m.insert("expect_state_hex".into(), hexv(&crate::reference::md5::state_to_bytes(s)));
            }
            if let Some(o) = c.expect.ofs {
                m.insert("expect_ofs".into(), o.into());
            }
        }
        Body::Poly1305Tag { key, msg, tag } => {
            m.insert("key_hex".into(), hexv(key));
            message_json(msg, &mut m);
            m.insert("tag_hex".into(), hexv(tag));
        }
        Body::Poly1305Call(c) => {
            m.insert("acc".into(), c.acc.0.to_vec().into());
            let r = c.r.value().to_bytes_le();
            let mut r16 = [0u8; 16];
            r16[..r.len().min(16)].copy_from_slice(&r[..r.len().min(16)]);
            m.insert("r_hex".into(), hexv(&r16));
            message_json(&c.input, &mut m);
            m.insert("lengths".into(), c.lengths.clone().into());
            if let Some(a) = &c.expect.acc {
                m.insert("expect_acc".into(), a.to_str_radix(16).into());
            }
        }
        Body::Md5Chain(c) => {
            m.insert("chain".into(), "md5_iterate".into());
            message_json(&c.seed, &mut m);
            m.insert("steps".into(), c.steps.into());
            m.insert("digest_hex".into(), hexv(&c.digest));
        }
        Body::Poly1305MacOfMacs(c) => {
            m.insert("chain".into(), "poly1305_mac_of_macs".into());
            m.insert("count".into(), c.count.into());
            m.insert("key_hex".into(), hexv(&c.key));
            m.insert("tag_hex".into(), hexv(&c.tag));
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

/// Every `*.json` file under `dir`, at any depth, sorted (`lab run --vectors DIR`).
///
/// # Errors
/// A folder that cannot be read.
pub fn json_files_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
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

    /// The error texts of loading `content`, and how many entries loaded.
    fn errors_of(content: &str) -> (usize, Vec<String>) {
        let (_d, p) = write(content);
        let (set, errs) = load_file(&p);
        (set.map_or(0, |s| s.vectors.len()), errs.iter().map(|e| e.to_string()).collect())
    }

    const ABC: &str =
        r#""name":"abc","source":"RFC 1321 A.5","msg_hex":"616263","digest_hex":"900150983cd24fb0d6963f7d28e17f72""#;

    #[test]
    fn valid_md5_entry_parses() {
        let (_d, p) = write(&format!(r#"{{"kernel":"md5","set":"s","vectors":[{{{ABC}}}]}}"#));
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        let set = set.unwrap();
        assert_eq!(set.vectors.len(), 1);
        let digest = hex::decode("900150983cd24fb0d6963f7d28e17f72").unwrap().try_into().unwrap();
        assert_eq!(set.vectors[0].body, Body::Md5Digest { msg: b"abc".to_vec().into(), digest, updates: vec![] });
        assert_eq!(set.vectors[0].offsets, vec![0]);
    }

    #[test]
    fn broken_hex_names_file_entry_and_field_and_keeps_the_rest() {
        let (n, errs) = errors_of(
            r#"{"kernel":"md5","vectors":[
            {"name":"good","source":"x","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"},
            {"name":"bad","source":"x","msg_hex":"6g","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}]}"#,
        );
        assert_eq!((n, errs.len()), (1, 1));
        let msg = &errs[0];
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
        let (_, errs) = errors_of(
            r#"{"kernel":"poly1305","vectors":[{"name":"k","source":"x","key_hex":"00","msg_hex":"","tag_hex":"00000000000000000000000000000000"},
            {"name":"t","source":"x","key_hex":"0000000000000000000000000000000000000000000000000000000000000000","msg_hex":"","tag_hex":"00000000000000000000000000000000","tga":1}]}"#,
        );
        assert_eq!(errs.len(), 2);
        assert!(errs[0].contains("field `key_hex`: must be 32 bytes, found 1"), "{}", errs[0]);
        assert!(
            errs[1].contains("field `tga`: not a field of a Poly1305 tag entry: unknown field `tga`"),
            "{}",
            errs[1]
        );
        let (_d2, p2) = write("{ not json");
        let (set, errs) = load_file(&p2);
        assert!(set.is_none());
        assert!(errs[0].problem.starts_with("not valid JSON"), "{}", errs[0]);
    }

    /// Every mistake of issue 13 item 4 is an error naming its field; nothing is ignored.
    #[test]
    fn silently_accepted_mistakes_are_errors_naming_the_field() {
        let key = "00".repeat(32);
        let tag = "00".repeat(16);
        let state = "0123456789abcdeffedcba9876543210";
        let cases: Vec<(&str, String, &str, &str)> = vec![
            ("poly1305", format!(r#"{{"name":"a","source":"x","key_hex":"{key}","msg_hex":"","tag_hex":"{tag}","lengths":[16]}}"#), "lengths", "not a field of a Poly1305 tag entry"),
            ("poly1305", format!(r#"{{"name":"a","source":"x","key_hex":"{key}","msg_hex":"","tag_hex":"{tag}","updates":[0]}}"#), "updates", "unknown field `updates`"),
            ("md5", r#"{"name":"a","source":"x","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e","key_hex":"zz"}"#.into(), "key_hex", "not a field of an MD5 digest entry"),
            ("md5", format!(r#"{{"name":"a","source":"x","stub":"md5_implCompress","state_hex":"{state}","msg_hex":"{}","ofs":0,"limit":0}}"#, "00".repeat(64)), "ofs", "md5_implCompress takes no ofs/limit"),
            ("md5", r#"{"name":"a","source":"x","msg":{"pattern":"counter","len":3,"lne":4},"digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "msg.lne", "unknown field `lne`"),
            ("md5", r#"{"name":"a","source":"x","msg_hex":"","offsets":{"from":0,"to":3,"step":2},"digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "offsets.step", "unknown field `step`"),
            ("md5", r#"{"name":"a","source":"x","msg_hex":"","offset":1,"offsets":[2],"digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "offsets", "not both"),
            ("md5", r#"{"name":"a","source":"x","msg_hex":"zz","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "msg_hex", "duplicate key"),
            ("md5", r#"{"name":"","source":"x","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "name", "must not be empty"),
            ("md5", r#"{"name":"a","source":" ","msg_hex":"","digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "source", "must not be empty"),
            ("md5", r#"{"name":"a","source":"x","msg":{"pattern":"counter","len":3,"seed":4},"digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "msg.seed", "only the random pattern"),
            ("md5", r#"{"name":"a","source":"x","msg_hex":"","offsets":[1,1],"digest_hex":"d41d8cd98f00b204e9800998ecf8427e"}"#.into(), "offsets", "listed twice"),
        ];
        for (kernel, entry, field, words) in cases {
            let (n, errs) = errors_of(&format!(r#"{{"kernel":"{kernel}","vectors":[{entry}]}}"#));
            assert_eq!(n, 0, "{entry} must not load");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(errs[0].contains(&format!("field `{field}`")) && errs[0].contains(words), "{entry}: {}", errs[0]);
        }
    }

    #[test]
    fn top_level_mistakes_and_duplicate_names_are_errors() {
        for (doc, want) in [
            (format!(r#"{{"kernel":"md5","set":5,"vectors":[{{{ABC}}}]}}"#), "field `set`: invalid type: integer `5`"),
            (
                format!(r#"{{"kernel":"md5","descripton":"d","vectors":[{{{ABC}}}]}}"#),
                "field `descripton`: not a field of the top level",
            ),
            (format!(r#"{{"kernel":"md5","kernel":"md5","vectors":[{{{ABC}}}]}}"#), "field `kernel`: duplicate key"),
            (format!(r#"{{"kernel":"md5","set":"","vectors":[{{{ABC}}}]}}"#), "field `set`: must not be empty"),
            ("[]".into(), "the top level must be an object"),
        ] {
            let (n, errs) = errors_of(&doc);
            assert_eq!(n, 0, "{doc}");
            assert!(errs.len() == 1 && errs[0].contains(want), "{doc}: {errs:?}");
        }
        let (n, errs) = errors_of(&format!(r#"{{"kernel":"md5","vectors":[{{{ABC}}},{{{ABC}}}]}}"#));
        assert_eq!(n, 1);
        assert!(errs[0].contains("entry 1 (\"abc\"): field `name`: entry 0 has the same name"), "{errs:?}");
    }

    #[test]
    fn out_of_range_numbers_are_errors_naming_the_field() {
        let state = "0123456789abcdeffedcba9876543210";
        let mb = |ofs: i64, limit: i64| {
            format!(
                r#"{{"kernel":"md5","vectors":[{{"name":"a","source":"x","stub":"md5_implCompressMB","state_hex":"{state}","msg":{{"pattern":"counter","len":64}},"ofs":{ofs},"limit":{limit}}}]}}"#
            )
        };
        let (_, e) = errors_of(&mb(2147483600, 2147483647));
        assert!(e[0].contains("field `limit`") && e[0].contains("overflows int"), "{e:?}");
        let (_, e) = errors_of(&mb(2147483600, 0));
        assert!(e[0].contains("field `ofs`") && e[0].contains("overflows int"), "{e:?}");
        let (_, e) = errors_of(&mb(0, 2147483648));
        assert!(e[0].contains("field `limit`: invalid value: integer `2147483648`, expected i32"), "{e:?}");
        let (_, e) = errors_of(&mb(0, 1 << 30));
        assert!(e[0].contains("field `limit`") && e[0].contains("more than one call may take"), "{e:?}");
        let poly = r#"{"kernel":"poly1305","vectors":[{"name":"a","source":"x","acc":[0,0,0,0,0],"r_hex":"00000000000000000000000000000000","msg":{"pattern":"counter","len":64},"lengths":[9223372036854775792,9223372036854775792,48]}]}"#;
        let (_, e) = errors_of(poly);
        assert!(e[0].contains("field `lengths[0]`") && e[0].contains("more than one call may take"), "{e:?}");
        let (_, e) = errors_of(&poly.replace("9223372036854775792,9223372036854775792,48", ""));
        assert!(e[0].contains("field `lengths`: empty"), "{e:?}");
        let (_, e) = errors_of(
            r#"{"kernel":"md5","vectors":[{"name":"a","source":"x","msg":{"pattern":"counter","len":4294967296},"digest_hex":"00000000000000000000000000000000"}]}"#,
        );
        assert!(e[0].contains("field `msg.len`: 4294967296 is above 2147483647"), "{e:?}");
        let (_, e) = errors_of(
            r#"{"kernel":"md5","vectors":[{"name":"a","source":"x","msg_hex":"00","updates":[18446744073709551615,2],"digest_hex":"00000000000000000000000000000000"}]}"#,
        );
        assert!(e[0].contains("field `updates[1]`: the pieces' sum overflows"), "{e:?}");
    }

    #[test]
    fn only_regular_files_are_read() {
        let (_, e) = errors_of("");
        assert!(e[0].contains("not valid JSON"), "{e:?}");
        let (set, e) = load_file(Path::new("/dev/zero"));
        assert!(set.is_none() && e[0].to_string().contains("not a regular file"), "{e:?}");
        let dir = tempfile::tempdir().unwrap();
        let (_, e) = load_file(dir.path());
        assert!(e[0].to_string().contains("not a regular file"), "{e:?}");
        let fifo = dir.path().join("fifo.json");
        let fifo_mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, fifo_mode, 0).expect("mkfifo");
        let (_, e) = load_file(&fifo);
        assert!(e[0].to_string().contains("not a regular file"), "{e:?}");
    }

    #[test]
    fn generated_messages_offsets_and_call_entries() {
        let (_d, p) = write(
            r#"{"kernel":"md5","vectors":[
            {"name":"c","source":"x","msg":{"pattern":"counter","len":300},"offsets":{"from":0,"to":3},"digest_hex":"00000000000000000000000000000000","updates":[1,299]},
            {"name":"mb","source":"x","stub":"md5_implCompressMB","state_hex":"0123456789abcdeffedcba9876543210","msg":{"pattern":"repeat","byte_hex":"61","len":192},"ofs":10,"limit":75,"expect_ofs":138},
            {"name":"short","source":"x","stub":"md5_implCompressMB","state_hex":"0123456789abcdeffedcba9876543210","msg_hex":"00","ofs":0,"limit":0},
            {"name":"sum","source":"x","msg_hex":"0000","digest_hex":"00000000000000000000000000000000","updates":[1]}]}"#,
        );
        let (set, errs) = load_file(&p);
        let set = set.unwrap();
        assert_eq!(set.vectors.len(), 2, "{errs:?}");
        assert_eq!(set.vectors[0].offsets, vec![0, 1, 2, 3]);
        let Body::Md5Digest { msg, updates, .. } = &set.vectors[0].body else { panic!() };
        assert_eq!((msg.len(), msg.read(257, 1), updates.clone()), (300, vec![1], vec![1, 299]));
        let Body::Md5Call(c) = &set.vectors[1].body else { panic!() };
        assert_eq!(
            (c.stub, c.ofs, c.limit, c.input.len(), c.expect.ofs),
            (Md5Stub::CompressMb, 10, 75, 192, Some(138))
        );
        assert!(errs[0]
            .to_string()
            .contains("entry 2 (\"short\"): field `msg_hex`: 1 bytes, but the call processes 1 blocks"));
        assert!(errs[1].to_string().contains("field `updates`: pieces sum to 1, the message has 2 bytes"));
    }

    #[test]
    fn poly1305_call_entries_check_bounds_and_clamp() {
        let (_d, p) = write(
            r#"{"kernel":"poly1305","vectors":[
            {"name":"ok","source":"x","acc":[67108863,67108863,67108863,67108863,134217727],"r_hex":"ffffff0ffcffff0ffcffff0ffcffff0f","msg":{"pattern":"repeat","byte_hex":"ff","len":33},"lengths":[16,17],"expect_acc":"2c88c77849d64ae9147ddeb88e69c83fc"},
            {"name":"limb","source":"x","acc":[0,0,0,0,134217728],"r_hex":"00000000000000000000000000000000","msg_hex":""},
            {"name":"clamp","source":"x","acc":[0,0,0,0,0],"r_hex":"ffffffffffffffffffffffffffffffff","msg_hex":""}]}"#,
        );
        let (set, errs) = load_file(&p);
        let v = &set.unwrap().vectors;
        assert_eq!(v.len(), 1);
        let Body::Poly1305Call(c) = &v[0].body else { panic!() };
        assert_eq!(c.lengths, vec![16, 17]);
        assert_eq!(c.expect.acc, BigUint::parse_bytes(b"2c88c77849d64ae9147ddeb88e69c83fc", 16));
        assert!(errs[0].to_string().contains("field `acc`: limb 4 = 0x8000000 is outside the contract"), "{}", errs[0]);
        assert!(errs[1].to_string().contains("field `r_hex`: r is not clamped"), "{}", errs[1]);
    }

    #[test]
    fn chain_entries_parse_and_check_their_counts() {
        let (n, errs) = errors_of(
            r#"{"kernel":"md5","vectors":[
            {"name":"c","source":"x","chain":"md5_iterate","msg_hex":"","steps":100,"digest_hex":"00000000000000000000000000000000"},
            {"name":"d","source":"x","chain":"md5_iterate","msg_hex":"","steps":0,"digest_hex":"00000000000000000000000000000000"},
            {"name":"e","source":"x","chain":"mac_of_macs","count":3}]}"#,
        );
        assert_eq!(n, 1, "{errs:?}");
        assert!(errs[0].contains("field `steps`: 0 is outside 1..=100000"), "{errs:?}");
        assert!(errs[1].contains("field `chain`") && errs[1].contains("md5_iterate"), "{errs:?}");
        let key = "00".repeat(32);
        let (n, errs) = errors_of(&format!(
            r#"{{"kernel":"poly1305","vectors":[{{"name":"m","source":"x","chain":"poly1305_mac_of_macs","count":257,"key_hex":"{key}","tag_hex":"{}"}}]}}"#,
            "00".repeat(16)
        ));
        assert_eq!(n, 0);
        assert!(errs[0].contains("field `count`: 257 is outside 1..=256"), "{errs:?}");
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
                input: vec![7; 128].into(),
                ofs: -5,
                limit: 70,
                expect: Md5Expect { state: Some([5, 6, 7, 8]), ofs: Some(123) },
            }),
        };
        let p = dir.path().join("m.json");
        write_file(&p, Kernel::Md5, "x", "d", std::slice::from_ref(&md5)).unwrap();
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(set.unwrap().vectors, vec![md5]);
        let r = crate::reference::poly1305::clamp_r(&[0xff; 16]);
        let poly = Vector {
            index: 0,
            name: "p".into(),
            source: "s".into(),
            offsets: vec![3, 4],
            body: Body::Poly1305Call(Poly1305Call {
                acc: Limbs26([1, 2, 3, 4, 5]),
                r,
                input: Message::Random { seed: 9, len: 40 },
                lengths: vec![16, 3, 24],
                expect: Poly1305Expect { acc: Some(BigUint::from(77u8)) },
            }),
        };
        let p = dir.path().join("p.json");
        write_file(&p, Kernel::Poly1305, "x", "d", std::slice::from_ref(&poly)).unwrap();
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(set.unwrap().vectors, vec![poly]);
    }

    #[test]
    fn costs_over_the_limits_refuse_the_entry_by_name() {
        let (_d, p) = write(
            r#"{"kernel":"md5","vectors":[
            {"name":"small","source":"x","msg_hex":"","digest_hex":"00000000000000000000000000000000"},
            {"name":"huge","source":"x","msg":{"pattern":"counter","len":67108864},"offsets":{"from":0,"to":4095},"digest_hex":"00000000000000000000000000000000"}]}"#,
        );
        let (set, errs) = load_file(&p);
        assert!(errs.is_empty());
        let mut sets = vec![set.unwrap()];
        let huge = sets[0].vectors[1].cost();
        assert_eq!(huge.cases, 4098);
        let errs = cost::enforce(&mut sets, CostLimits::default());
        assert_eq!(sets[0].vectors.len(), 1);
        assert!(errs[0].to_string().contains("entry 1 (\"huge\"): would cost"), "{}", errs[0]);
        assert!(errs[0].to_string().contains("--max-entry-bytes"), "{}", errs[0]);
        let errs = cost::enforce(&mut sets, CostLimits { max_entry_bytes: u64::MAX, max_run_bytes: 10 });
        assert!(errs[0].to_string().contains("entry 0 (\"small\")") && errs[0].to_string().contains("--max-run-bytes"));
    }
}
