//! The one JSON envelope every command's JSON output shares (docs/report-schema.md
//! "Envelope"): `schema_version`, `tool`, `command`, then the command's own fields at the top
//! level (`lab run`/`lab fuzz` reports, `lab bench` and its saved baselines, `lab doctor`,
//! `lab list`). A reader checks `schema_version` and `command` first, whatever it reads.

use serde::{Deserialize, Serialize};

/// Version of every command's JSON schema; bumped when a field changes meaning or disappears
/// (a field added with a default meaning for old readers keeps it). Version 2: the envelope
/// that `lab run`'s report had since version 2, shared by every command.
pub const SCHEMA_VERSION: u32 = 2;

/// The program that wrote a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolId {
    /// Crate name, `kernel-lab`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

impl ToolId {
    /// This `lab`.
    pub fn this() -> ToolId {
        ToolId { name: env!("CARGO_PKG_NAME").to_string(), version: env!("CARGO_PKG_VERSION").to_string() }
    }
}

/// `body` with the envelope's fields in front of its own.
#[derive(Debug, Serialize)]
pub struct Envelope<'a, T: Serialize> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Which program wrote it.
    pub tool: ToolId,
    /// The subcommand: `run`, `fuzz`, `bench`, `doctor`, `list`.
    pub command: &'a str,
    /// The command's own fields, flattened into the same object.
    #[serde(flatten)]
    pub body: T,
}

impl<'a, T: Serialize> Envelope<'a, T> {
    /// Wraps `body` of `command` in this lab's envelope.
    pub fn new(command: &'a str, body: T) -> Self {
        Envelope { schema_version: SCHEMA_VERSION, tool: ToolId::this(), command, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_comes_first_and_the_body_is_flattened() {
        let doc = serde_json::to_string(&Envelope::new("list", serde_json::json!({ "variants": [1] }))).unwrap();
        let want = format!(
            r#"{{"schema_version":{SCHEMA_VERSION},"tool":{{"name":"kernel-lab","version":"{}"}},"command":"list","variants":[1]}}"#,
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(doc, want);
    }
}
