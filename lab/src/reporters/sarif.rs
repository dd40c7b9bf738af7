//! The SARIF 2.1.0 report (OASIS), for GitHub and GitLab code scanning: one run whose
//! `tool.driver.rules` list every finding class ([`Class::name`] is the rule id), and one
//! `result` per image finding and per failed or emulator-blamed case (a kernel failure or an
//! image finding is an `error`; a disagreement between backends or an emulator fault, not the
//! kernel's, a `warning`; a knock-on finding a `note`). A result's location is the kernel
//! source line of the fault's or instruction's pc when the image's DWARF maps it
//! ([`crate::source_lines`]); a case without a pc points at its kernel's contract symbol. Where no
//! line is known, the location is the image and the symbol+offset as a logical location. Paths
//! under the working folder are relative to `%SRCROOT%` (the working folder), so code scanning
//! annotates the lines of a pull request; others are absolute `file://` URIs. Each result's
//! `properties.replay` is the command that reproduces it; the invocation keeps the seed and the
//! exit status. Results beyond [`RESULTS_LISTED`] are counted, not listed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::finding::Class;
use crate::replay::Replay;
use crate::report::{CaseFailure, Report, Row};
use crate::source_lines::SourceLine;

/// The `$schema` of the log: the OASIS SARIF 2.1.0 JSON schema.
pub const SCHEMA_URI: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
/// Results listed at most (GitHub code scanning keeps 5,000 per run); the rest are counted in
/// a tool notification and `run.properties.results_left_out`.
pub const RESULTS_LISTED: usize = 5000;
/// Findings of one case written into its result's message.
const FINDINGS_LISTED: usize = 6;
/// The base id of relative artifact URIs: the working folder of the run.
const SRCROOT: &str = "%SRCROOT%";

/// A result before its location is resolved: where in which image, and what to say.
struct Pending {
    variant: &'static str,
    class: Class,
    message: String,
    /// The pc the finding names (fault, scanned instruction), if any.
    pc: Option<u64>,
    /// Its place as the lab printed it (`md5_implCompress+0x5`), if any.
    place: Option<String>,
    /// A contract symbol to point at when there is no pc.
    symbol: Option<&'static str>,
    properties: Value,
}

/// Writes the SARIF log of `report` (from `lab <command>`) to `out`.
///
/// # Errors
/// Only the serializer's (an I/O error of `out`).
pub(super) fn render_into(report: &Report, command: &str, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, &log(report, command))
}

/// The whole log: `$schema`, `version` and one run.
fn log(report: &Report, command: &str) -> Value {
    let root = std::env::current_dir().ok();
    let mut pending = pending(report, command);
    let left_out = pending.len().saturating_sub(RESULTS_LISTED);
    pending.truncate(RESULTS_LISTED);
    let results = resolve(report, pending, root.as_deref());
    let mut run = json!({
        "tool": { "driver": driver() },
        "invocations": [invocation(report, command, left_out)],
        "results": results,
        "properties": { "results_left_out": left_out },
    });
    if let Some(root) = &root {
        run["originalUriBaseIds"] = json!({ SRCROOT: { "uri": dir_uri(root) } });
    }
    json!({ "$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run] })
}

/// The lab as a SARIF tool: its name, version and one rule per finding class.
fn driver() -> Value {
    let rules: Vec<Value> = Class::ALL
        .iter()
        .map(|&c| {
            json!({
                "id": c.name(),
                "name": c.name(),
                "shortDescription": { "text": c.summary() },
                "defaultConfiguration": { "level": level(c) },
            })
        })
        .collect();
    json!({
        "name": "kernel-lab",
        "version": env!("CARGO_PKG_VERSION"),
        "semanticVersion": env!("CARGO_PKG_VERSION"),
        "rules": rules,
    })
}

/// `error` for the kernel's failures and image findings, `warning` for what is not the kernel's
/// (backends disagree, emulator fault), `note` for a knock-on finding.
fn level(class: Class) -> &'static str {
    match class {
        Class::Disagreement | Class::EmulatorFault => "warning",
        Class::KnockOn => "note",
        _ => "error",
    }
}

/// The run's invocation: exit status, whether it ran to the end, its seed and command, and
/// set-up problems, vector-file errors, an interruption and results left out as notifications.
fn invocation(report: &Report, command: &str, left_out: usize) -> Value {
    let status = report.status();
    let mut notes: Vec<Value> = report
        .setup_errors
        .iter()
        .cloned()
        .chain(report.vector_errors.iter().map(|e| format!("vector file {}: {e}", e.file.display())))
        .map(|text| json!({ "level": "error", "message": { "text": text } }))
        .collect();
    if let Some(sig) = report.interrupted {
        let text = format!("the run was interrupted by {}", crate::interrupt::name(sig));
        notes.push(json!({ "level": "error", "message": { "text": text } }));
    }
    if left_out > 0 {
        let text = format!("{left_out} more results left out (--format json lists every case)");
        notes.push(json!({ "level": "warning", "message": { "text": text } }));
    }
    json!({
        "executionSuccessful": matches!(status, crate::exit::ExitCode::Passed | crate::exit::ExitCode::Failed),
        "exitCode": status.code(),
        "exitCodeDescription": status.name(),
        "toolExecutionNotifications": notes,
        "properties": { "command": command, "seed": report.seed.to_string() },
    })
}

/// Every result to write, image findings first, then the rows' failed and disagreed cases in
/// report order.
fn pending(report: &Report, command: &str) -> Vec<Pending> {
    let replay = report.replay.clone().unwrap_or(Replay { root: None, seed: report.seed, options: Vec::new() });
    let mut out: Vec<Pending> = report
        .image_findings
        .iter()
        .map(|f| {
            let (pc, place) = image_place(&f.finding.text).unzip();
            Pending {
                variant: f.variant,
                class: f.finding.class,
                message: format!("{}: {}", f.variant, f.finding.text),
                pc,
                place,
                symbol: None,
                properties: json!({ "variant": f.variant, "replay": replay.variant(f.variant) }),
            }
        })
        .collect();
    for row in &report.rows {
        out.extend(row.failed().iter().chain(&row.disagreed()).map(|c| case_result(row, c, &replay, command)));
    }
    out
}

/// The result of one failed or disagreed case: the class of its first finding, a message
/// naming variant, backend, kernel, set and case before its findings, the pc of the first
/// finding that names one, and the replay line.
fn case_result(row: &Row, case: &CaseFailure, replay: &Replay, command: &str) -> Pending {
    let class = case.findings.first().map_or(Class::NotRun, |f| f.class);
    let (pc, place) = case.findings.iter().find_map(|f| fault_place(&f.text)).unzip();
    let line = if command == "fuzz" {
        // The shrunk case's own `lab run` line (fuzz.rs writes it into the last finding), which
        // carries the kernels folder; the target's campaign otherwise.
        let written = case.findings.iter().rev().find_map(|f| f.text.split_once("; replay: ")).map(|(_, l)| l);
        written.map_or_else(|| replay.fuzz_target(row.variant, row.backend, row.kernel), str::to_string)
    } else {
        replay.narrowed_at(row.variant, row.backend, row.vector_length, row.kernel, Some(&row.set), Some(case.name))
    };
    let symbol = crate::contract::contracts(row.family, row.kernel).next().map(|c| c.symbol);
    Pending {
        variant: row.variant,
        class,
        message: case_message(row, case),
        pc,
        place,
        symbol,
        properties: json!({
            "variant": row.variant,
            "backend": row.backend.name(),
            "vector_length": row.vector_length.map(|vl| json!({ "name": vl.spec.name, "bits": vl.bits })),
            "kernel": row.kernel.name(),
            "set": row.set,
            "case": case.name,
            "replay": line,
        }),
    }
}

/// `x86_64 on unicorn, poly1305 kernel, set rfc8439, case "…": <first finding>`, then the
/// other findings one a line with their class.
fn case_message(row: &Row, case: &CaseFailure) -> String {
    let family = row.contract_note().map(|n| format!(" ({n})")).unwrap_or_default();
    let head = format!(
        "{} on {}, {} kernel{family}, set {}, case {}",
        row.variant,
        row.backend_label(),
        row.kernel,
        row.set,
        case.name
    );
    let mut text = match case.findings.first() {
        Some(f) => format!("{head}: {}", f.text),
        None => format!("{head}: failed"),
    };
    for f in case.findings.iter().skip(1).take(FINDINGS_LISTED - 1) {
        text.push_str(&format!("\n[{}] {}", f.class.name(), f.text));
    }
    if case.findings.len() > FINDINGS_LISTED {
        text.push_str(&format!("\n... and {} more findings", case.findings.len() - FINDINGS_LISTED));
    }
    text
}

/// The pc and place of a fault finding: `… at md5_implCompress+0x5 (pc 0x201965)…`
/// ([`crate::cases::verdict::describe_fault`]).
fn fault_place(text: &str) -> Option<(u64, String)> {
    let open = text.find(" (pc 0x")?;
    let pc = hex_until_paren(&text[open + " (pc 0x".len()..])?;
    Some((pc, place_before(&text[..open])))
}

/// The pc and place of an image finding: `` `insn` at md5_implCompress+0x5 (0x201965): why ``
/// (the ISA, system-call and stack-alignment scans), or a fault's form.
fn image_place(text: &str) -> Option<(u64, String)> {
    if let Some(found) = fault_place(text) {
        return Some(found);
    }
    let at = text.find(" at ")?;
    let open = at + text[at..].find(" (0x")?;
    let pc = hex_until_paren(&text[open + " (0x".len()..])?;
    Some((pc, place_before(&text[..open])))
}

/// The hex digits of `s` up to a `)`.
fn hex_until_paren(s: &str) -> Option<u64> {
    u64::from_str_radix(&s[..s.find(')')?], 16).ok()
}

/// What follows the last ` at ` of `s` (the symbol+offset), or `s` when it has none.
fn place_before(s: &str) -> String {
    s.rfind(" at ").map_or(s, |i| &s[i + " at ".len()..]).to_string()
}

/// Turns pending results into SARIF results, reading each image's line table once.
fn resolve(report: &Report, pending: Vec<Pending>, root: Option<&Path>) -> Vec<Value> {
    let lines = source_lines(report, &pending);
    let rule_index = |c: Class| Class::ALL.iter().position(|&k| k == c).unwrap_or(0);
    pending
        .into_iter()
        .map(|p| {
            let image = report.images.iter().find(|(v, _)| *v == p.variant).map(|(_, path)| path.as_path());
            let found = lines.get(p.variant);
            json!({
                "ruleId": p.class.name(),
                "ruleIndex": rule_index(p.class),
                "level": level(p.class),
                "message": { "text": p.message },
                "locations": location(&p, image, found, report.kernels_dir.as_deref(), root).into_iter().collect::<Vec<_>>(),
                "properties": p.properties,
            })
        })
        .collect()
}

/// What one image says about the results' pcs and contract symbols.
struct ImageLines {
    /// The source line of each address its line table covers.
    by_pc: HashMap<u64, SourceLine>,
    /// The address of each contract symbol asked for.
    symbols: HashMap<String, u64>,
}

/// [`ImageLines`] by variant.
type Lines = HashMap<&'static str, ImageLines>;

/// Reads the image of each variant that has a pending result once: the addresses of the
/// contract symbols the results point at, and the source lines of those and of the pcs.
fn source_lines(report: &Report, pending: &[Pending]) -> Lines {
    let mut out = Lines::new();
    for (variant, path) in &report.images {
        let mine = pending.iter().filter(|p| p.variant == *variant);
        let names: Vec<&str> = mine.clone().filter_map(|p| p.symbol).collect();
        if mine.clone().next().is_none() {
            continue;
        }
        let symbols = crate::source_lines::symbols(path, &names);
        let pcs: Vec<u64> = mine.filter_map(|p| p.pc).chain(symbols.values().copied()).collect();
        out.insert(variant, ImageLines { by_pc: crate::source_lines::lookup(path, &pcs), symbols });
    }
    out
}

/// The result's location: the source line of its pc (or of its contract symbol), else the
/// image; with the symbol+offset as a logical location. `None` when nothing is known.
fn location(
    p: &Pending,
    image: Option<&Path>,
    lines: Option<&ImageLines>,
    kernels_dir: Option<&Path>,
    root: Option<&Path>,
) -> Option<Value> {
    let symbol_pc = p.symbol.and_then(|s| lines?.symbols.get(s).copied());
    let pc = p.pc.or(if p.place.is_none() { symbol_pc } else { None });
    let line = pc.and_then(|pc| lines?.by_pc.get(&pc));
    let name = p.place.clone().or_else(|| p.symbol.map(str::to_string));
    let physical = match (line, image) {
        (Some(l), _) => {
            let file = source_file(&l.file, kernels_dir);
            Some(json!({ "artifactLocation": artifact(&file, root), "region": { "startLine": l.line } }))
        }
        (None, Some(image)) => Some(image_location(image, pc, root)),
        (None, None) => None,
    };
    let mut loc = json!({});
    if let Some(physical) = physical {
        loc["physicalLocation"] = physical;
    }
    if let Some(name) = name {
        loc["logicalLocations"] = json!([{ "fullyQualifiedName": name, "kind": "function" }]);
    }
    (loc != json!({})).then_some(loc)
}

/// The source file a line table names, as a file of the run's kernels folder: an image from
/// the cache may have been built from another copy of the same sources (the build key hashes
/// their names and contents, not their folder), so `ARCH/NAME` of the run's `kernels_dir` is
/// preferred when it exists; any other file (the lab's driver, a user's kernel) as named.
fn source_file(dwarf: &Path, kernels_dir: Option<&Path>) -> PathBuf {
    let here = || {
        let arch = dwarf.parent()?.file_name()?;
        let candidate = kernels_dir?.join(arch).join(dwarf.file_name()?);
        candidate.is_file().then_some(candidate)
    };
    here().unwrap_or_else(|| dwarf.to_path_buf())
}

/// The image file, with the address when there is one.
fn image_location(image: &Path, pc: Option<u64>, root: Option<&Path>) -> Value {
    let mut v = json!({ "artifactLocation": artifact(image, root) });
    if let Some(pc) = pc {
        v["address"] = json!({ "absoluteAddress": pc });
    }
    v
}

/// An artifact location: relative to `%SRCROOT%` when `path` lies under the working folder
/// `root`, an absolute `file://` URI otherwise.
fn artifact(path: &Path, root: Option<&Path>) -> Value {
    let abs: PathBuf = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match root.and_then(|r| abs.strip_prefix(r).ok()) {
        Some(rel) => json!({ "uri": encode(&rel.to_string_lossy()), "uriBaseId": SRCROOT }),
        None => json!({ "uri": format!("file://{}", encode(&abs.to_string_lossy())) }),
    }
}

/// `dir` as a `file://` URI ending in `/` (a base id's URI must).
fn dir_uri(dir: &Path) -> String {
    let s = encode(&dir.to_string_lossy());
    if s.ends_with('/') {
        format!("file://{s}")
    } else {
        format!("file://{s}/")
    }
}

/// `path` percent-encoded for a URI: unreserved characters and `/` stay, every other byte is
/// `%XX`.
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_read_from_fault_and_scan_sentences() {
        let fault = "update: read of 1 byte at 0x5000, 1 byte past the end of input at md5_implCompress+0x5 (pc 0x201965): `movzx eax, byte ptr [rdi + rsi]`";
        assert_eq!(fault_place(fault), Some((0x201965, "md5_implCompress+0x5".to_string())));
        let scan = "`vpxor xmm0, xmm0, xmm0` at poly1305_processBlocks+0x4 (0x2011a4): needs avx";
        assert_eq!(image_place(scan), Some((0x2011a4, "poly1305_processBlocks+0x4".to_string())));
        assert_eq!(fault_place("state expected 1, got 2"), None);
        assert_eq!(image_place("odd (pc 0xzz) text at (0x"), None);
    }

    #[test]
    fn uris_are_relative_to_srcroot_under_the_working_folder() {
        let root = Path::new("/w/repo");
        assert_eq!(
            artifact(Path::new("/w/repo/kernels/x86_64/md5.S"), Some(root)),
            json!({ "uri": "kernels/x86_64/md5.S", "uriBaseId": SRCROOT })
        );
        assert_eq!(artifact(Path::new("/tmp/my k/a.S"), Some(root)), json!({ "uri": "file:///tmp/my%20k/a.S" }));
        assert_eq!(dir_uri(root), "file:///w/repo/");
    }

    /// A cached image built from another copy of the kernels names that copy; the run's own
    /// kernels folder wins when it holds the file.
    #[test]
    fn a_line_names_the_file_of_the_runs_kernels_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("x86_64")).unwrap();
        std::fs::write(dir.path().join("x86_64/md5.S"), "ret\n").unwrap();
        let elsewhere = Path::new("/gone/kernels/x86_64/md5.S");
        assert_eq!(source_file(elsewhere, Some(dir.path())), dir.path().join("x86_64/md5.S"));
        let other = Path::new("/gone/kernels/x86_64/poly1305.S");
        assert_eq!(source_file(other, Some(dir.path())), other);
        assert_eq!(source_file(elsewhere, None), elsewhere);
    }

    #[test]
    fn every_class_is_a_rule_once() {
        let d = driver();
        let ids: Vec<&str> = d["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, Class::ALL.map(Class::name));
        assert_eq!(level(Class::EmulatorFault), "warning");
        assert_eq!(level(Class::KnockOn), "note");
        assert_eq!(level(Class::Isa), "error");
    }
}
