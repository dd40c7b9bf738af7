//! The layers of `lab/src` point only down: docs/ARCHITECTURE.md's layer table (between
//! `<!-- layers:begin -->` and `<!-- layers:end -->`) assigns every source file a layer, and no
//! file may name (`crate::...`) a module of a higher layer. Test modules and comments are not
//! read: a test may reach up, a doc link may point anywhere. Every Rust file of the
//! repository also stays under 800 lines and opens with a `//!` saying what it owns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/lab/src");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ARCHITECTURE.md");

/// The layer table: (layer name, path prefixes under lab/src), bottom layer first.
fn layers() -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(DOC).expect("docs/ARCHITECTURE.md");
    let table = doc
        .split("<!-- layers:begin -->")
        .nth(1)
        .and_then(|t| t.split("<!-- layers:end -->").next())
        .expect("the layer table markers in docs/ARCHITECTURE.md");
    table
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| layer"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let paths = cells[2].split('`').skip(1).step_by(2).map(String::from).collect();
            (cells[1].to_string(), paths)
        })
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `lab/src`-relative path of `p` (`run/set.rs`).
fn rel(p: &Path) -> String {
    p.strip_prefix(SRC).expect("under lab/src").to_string_lossy().replace('\\', "/")
}

/// The layer of a file: the longest matching prefix (`backend/fault.rs` before `backend/`).
fn layer_of(file: &str, layers: &[(String, Vec<String>)]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, (_, prefixes)) in layers.iter().enumerate() {
        for q in prefixes {
            let hit = file == q || (q.ends_with('/') && file.starts_with(q.as_str()));
            if hit && best.is_none_or(|(_, len)| q.len() > len) {
                best = Some((i, q.len()));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// The code of a file without its `#[cfg(test)] mod tests` and its comment lines.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    body.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The files a `crate::a::b::c` path names: the longest module prefix that is a file.
fn target(path: &[&str], files: &BTreeMap<String, ()>) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let m = path[..n].join("/");
        [format!("{m}.rs"), format!("{m}/mod.rs")].into_iter().find(|f| files.contains_key(f))
    })
}

/// Every `crate::` path in `code`, split into segments (`crate::{a, b::c}` gives `a` and `b::c`).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                out.push(segments(item.trim()));
            }
        } else {
            out.push(segments(rest));
        }
    }
    out
}

fn segments(s: &str) -> Vec<String> {
    let path: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    path.split("::").filter(|x| !x.is_empty()).map(String::from).collect()
}

#[test]
fn every_source_file_has_a_layer_and_imports_only_its_own_or_lower_layers() {
    let layers = layers();
    assert!(layers.len() >= 5, "the layer table lists {} layers", layers.len());
    let mut paths = Vec::new();
    sources(Path::new(SRC), &mut paths);
    let files: BTreeMap<String, ()> = paths.iter().map(|p| (rel(p), ())).collect();
    let mut problems = Vec::new();
    for p in &paths {
        let file = rel(p);
        let Some(mine) = layer_of(&file, &layers) else {
            problems.push(format!("{file} is in no layer of docs/ARCHITECTURE.md"));
            continue;
        };
        let text = std::fs::read_to_string(p).expect("source file");
        for path in crate_paths(&code(&text)) {
            let segs: Vec<&str> = path.iter().map(String::as_str).collect();
            let Some(t) = target(&segs, &files) else { continue };
            if let Some(theirs) = layer_of(&t, &layers).filter(|&l| l > mine) {
                problems.push(format!(
                    "{file} ({}) names crate::{} in {t} ({}), a higher layer",
                    layers[mine].0,
                    path.join("::"),
                    layers[theirs].0
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself sees an upward import: a row file naming the CLI is caught.
#[test]
fn an_upward_import_is_seen() {
    let layers = layers();
    let files: BTreeMap<String, ()> =
        ["arch/mod.rs", "cli/mod.rs", "vocab/abi.rs"].into_iter().map(|f| (f.to_string(), ())).collect();
    let code = code("//! doc naming crate::cli is fine\nuse crate::{vocab::abi::Abi, cli::Command};\n");
    let named: Vec<String> = crate_paths(&code)
        .iter()
        .filter_map(|p| target(&p.iter().map(String::as_str).collect::<Vec<_>>(), &files))
        .collect();
    assert_eq!(named, ["vocab/abi.rs", "cli/mod.rs"]);
    let arch = layer_of("arch/mod.rs", &layers).expect("arch/ has a layer");
    let cli = layer_of("cli/mod.rs", &layers).expect("cli/ has a layer");
    assert!(cli > arch, "the CLI sits above the architecture rows");
}

/// Longest a Rust source file may be (STYLE.md: files under 800 lines).
const MAX_LINES: usize = 800;

/// Every Rust file (lab/src, tests, benches, examples, build.rs) is under [`MAX_LINES`] lines
/// and starts with a `//!` line.
#[test]
fn every_rust_file_is_short_and_opens_with_what_it_owns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("build.rs")];
    for dir in ["lab/src", "tests", "benches", "examples"] {
        if root.join(dir).is_dir() {
            sources(&root.join(dir), &mut paths);
        }
    }
    assert!(paths.len() > 100, "only {} Rust files found", paths.len());
    let mut problems = Vec::new();
    for p in &paths {
        let text = std::fs::read_to_string(p).expect("source file");
        let name = p.strip_prefix(root).unwrap_or(p).display();
        let lines = text.lines().count();
        if lines >= MAX_LINES {
            problems.push(format!("{name}: {lines} lines, the limit is {MAX_LINES}"));
        }
        if !text.starts_with("//!") {
            problems.push(format!("{name}: does not open with a `//!` line"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
