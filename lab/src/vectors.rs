//! Vector files: published known answers as data with their sources (vectors/README.md).
//!
//! A malformed file or entry is an error that names the file, the entry and the field; the
//! valid entries of the same file still load and run, so nothing is dropped silently.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::variant::Kernel;

/// One known-answer vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    /// Position in the file's `vectors` array, from 0.
    pub index: usize,
    /// Name as written in the file.
    pub name: String,
    /// Where the vector was published.
    pub source: String,
    /// Inputs and the expected answer.
    pub body: Body,
}

/// The kernel-specific part of a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// MD5 of `msg` is `digest`.
    Md5 {
        /// The message.
        msg: Vec<u8>,
        /// Expected digest (RFC 1321 §3.5 byte order).
        digest: [u8; 16],
    },
    /// The Poly1305 tag of `msg` under the one-time `key` (r || s, r unclamped) is `tag`.
    Poly1305 {
        /// r || s as published (RFC 8439 §2.5).
        key: [u8; 32],
        /// The message.
        msg: Vec<u8>,
        /// Expected tag.
        tag: [u8; 16],
    },
}

impl Vector {
    /// Message length in bytes.
    pub fn msg_len(&self) -> usize {
        match &self.body {
            Body::Md5 { msg, .. } | Body::Poly1305 { msg, .. } => msg.len(),
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
    let err = |problem: String| VectorError { file: path.into(), entry: None, field: None, problem };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return (None, vec![err(format!("cannot read: {e}"))]),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return (None, vec![err(format!("not valid JSON: {e}"))]),
    };
    let Some(top) = doc.as_object() else {
        return (None, vec![err("the top level must be an object with `kernel`, `set` and `vectors`".into())]);
    };
    let field_err = |field: &str, problem: String| VectorError {
        file: path.into(),
        entry: None,
        field: Some(field.into()),
        problem,
    };
    let kernel = match top.get("kernel").and_then(Value::as_str) {
        Some(k) => match Kernel::from_name(k) {
            Some(k) => k,
            None => return (None, vec![field_err("kernel", format!("unknown kernel {k:?} (md5, poly1305)"))]),
        },
        None => return (None, vec![field_err("kernel", "missing or not a string".into())]),
    };
    let set = top
        .get("set")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| path.file_stem().unwrap_or_default().to_string_lossy().into_owned());
    let Some(entries) = top.get("vectors").and_then(Value::as_array) else {
        return (None, vec![field_err("vectors", "missing or not an array".into())]);
    };
    let mut vectors = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match parse_entry(kernel, i, entry) {
            Ok(v) => vectors.push(v),
            Err((name, field, problem)) => {
                errors.push(VectorError { file: path.into(), entry: Some((i, name)), field, problem });
            }
        }
    }
    (Some(VectorSet { file: path.into(), kernel, set, vectors }), errors)
}

type EntryError = (Option<String>, Option<String>, String);

fn parse_entry(kernel: Kernel, index: usize, entry: &Value) -> Result<Vector, EntryError> {
    let Some(obj) = entry.as_object() else {
        return Err((None, None, "an entry must be an object".into()));
    };
    let name = obj.get("name").and_then(Value::as_str).map(str::to_owned);
    let fail = |field: &str, problem: String| (name.clone(), Some(field.to_owned()), problem);
    let text = |field: &str| -> Result<String, EntryError> {
        obj.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| fail(field, "missing or not a string".into()))
    };
    let name_s = text("name")?;
    let source = text("source")?;
    let hex_field = |field: &str, len: Option<usize>| -> Result<Vec<u8>, EntryError> {
        let s = text(field)?;
        let bytes = hex::decode(&s).map_err(|e| fail(field, format!("invalid hex: {e}")))?;
        match len {
            Some(n) if bytes.len() != n => Err(fail(field, format!("must be {n} bytes, found {}", bytes.len()))),
            _ => Ok(bytes),
        }
    };
    check_known_fields(obj, kernel).map_err(|f| fail(&f, "unknown field".into()))?;
    let body = match kernel {
        Kernel::Md5 => Body::Md5 {
            msg: hex_field("msg_hex", None)?,
            digest: hex_field("digest_hex", Some(16))?.try_into().expect("checked length"),
        },
        Kernel::Poly1305 => Body::Poly1305 {
            key: hex_field("key_hex", Some(32))?.try_into().expect("checked length"),
            msg: hex_field("msg_hex", None)?,
            tag: hex_field("tag_hex", Some(16))?.try_into().expect("checked length"),
        },
    };
    Ok(Vector { index, name: name_s, source, body })
}

/// Rejects misspelt fields (`digest` for `digest_hex`) instead of ignoring them.
fn check_known_fields(obj: &Map<String, Value>, kernel: Kernel) -> Result<(), String> {
    let known: &[&str] = match kernel {
        Kernel::Md5 => &["name", "source", "msg_hex", "digest_hex", "comment"],
        Kernel::Poly1305 => &["name", "source", "key_hex", "msg_hex", "tag_hex", "comment"],
    };
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(k.clone()),
        None => Ok(()),
    }
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
        assert_eq!(
            set.vectors[0].body,
            Body::Md5 {
                msg: b"abc".to_vec(),
                digest: hex::decode("900150983cd24fb0d6963f7d28e17f72").unwrap().try_into().unwrap()
            }
        );
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
}
