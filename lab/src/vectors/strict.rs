//! JSON parsed with its duplicate keys kept in sight. `serde_json` keeps the last of two equal
//! keys silently (RFC 8259 §4 leaves it open), so `"msg_hex": "zz", "msg_hex": "616263"` would
//! pass; the lab records every duplicate with its path and refuses the entry that holds it.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A key of an object.
    Key(String),
    /// An index into an array.
    Index(usize),
}

/// A parsed document and the paths of every key that occurs twice in its object.
#[derive(Debug)]
pub struct Parsed {
    /// The value (for a duplicate key, the last occurrence, as `serde_json` would keep).
    pub value: Value,
    /// Path of each duplicated key, the key itself last.
    pub duplicates: Vec<Vec<Step>>,
}

/// Parses `text`, recording duplicate keys instead of dropping them.
///
/// # Errors
/// Invalid JSON (with line and column), as `serde_json` reports it.
pub fn parse(text: &str) -> Result<Parsed, serde_json::Error> {
    let dups = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Seed { path: Vec::new(), dups: &dups }.deserialize(&mut de)?;
    de.end()?;
    Ok(Parsed { value, duplicates: dups.into_inner() })
}

/// Renders a path relative to some start as a field name: `msg.len`, `offsets[2]`.
pub fn field_name(path: &[Step]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Step::Key(k) if s.is_empty() => s.push_str(k),
            Step::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

struct Seed<'a> {
    path: Vec<Step>,
    dups: &'a RefCell<Vec<Vec<Step>>>,
}

impl Seed<'_> {
    fn child(&self, step: Step) -> Seed<'_> {
        let mut path = self.path.clone();
        path.push(step);
        Seed { path, dups: self.dups }
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self.child(Step::Index(out.len())))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(Step::Key(key.clone())))?;
            if out.insert(key.clone(), value).is_some() {
                let mut path = self.path.clone();
                path.push(Step::Key(key));
                self.dups.borrow_mut().push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_at_every_depth_with_their_paths() {
        let p = parse(r#"{"a":1,"v":[{"x":"zz","x":"61"},{"m":{"len":1,"len":2}}],"a":2}"#).unwrap();
        let names: Vec<String> = p.duplicates.iter().map(|d| field_name(d)).collect();
        assert_eq!(names, vec!["v[0].x", "v[1].m.len", "a"]);
        assert_eq!(p.value["v"][0]["x"], "61", "the last one is kept, as serde_json does");
        assert!(parse(r#"{"a":1} x"#).is_err(), "trailing characters");
        assert!(parse(r#"{"a":"#).is_err());
    }
}
