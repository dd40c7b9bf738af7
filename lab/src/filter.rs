//! Name filters of the command line (`--set`, `--case`, `--variant`, `--kernel`), as cargo and
//! cargo-nextest match test names: a plain pattern matches any name that contains it, `=NAME`
//! matches that name only, and a pattern with `*` or `?` is a glob over the whole name
//! (`RFC1321*`). A pattern that matches nothing is reported with the nearest names
//! ([`no_match`]).

use crate::cases::plan::case_names;
use crate::vectors::{Vector, VectorSet};

/// Which sets and cases run, and whether the run stops at the first failure.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Patterns of the vector sets to run (empty: every set), matched as this module
    /// says: substrings, `=NAME` exactly, `*`/`?` as globs.
    pub sets: Vec<String>,
    /// Patterns of the vectors or cases to run (empty: all), matched as `sets` are. A vector
    /// runs whole (every case of it) when its name or one of its case names matches; each
    /// case's random draws depend only on the seed, set, vector index and case (never the
    /// variant, the backend, the filter or other cases), so the narrowed run repeats the full
    /// run's cases.
    pub cases: Vec<String>,
    /// After the first row with a failed case, the remaining rows are skipped with the reason.
    pub fail_fast: bool,
}

/// How a filter pattern matches a name ([`Pattern::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Any name containing the text.
    Substring(String),
    /// Exactly this name (written `=NAME`).
    Exact(String),
    /// A glob over the whole name: `*` any run of characters, `?` any one character.
    Glob(String),
}

/// How the help texts describe the pattern forms.
pub const FORMS: &str = "a name matches when it contains the pattern; `=NAME` matches exactly, `*` and `?` glob";

/// Names [`no_match`] lists at most.
const NEAREST_SHOWN: usize = 5;
/// How many more edits than the nearest name another name may need to be listed beside it.
const NEAREST_SLACK: usize = 2;

impl Pattern {
    /// The pattern the command line wrote: `=NAME` is exact, text with `*` or `?` a glob, any
    /// other text a substring.
    pub fn parse(text: &str) -> Pattern {
        if let Some(exact) = text.strip_prefix('=') {
            Pattern::Exact(exact.to_string())
        } else if text.contains(['*', '?']) {
            Pattern::Glob(text.to_string())
        } else {
            Pattern::Substring(text.to_string())
        }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Substring(s) => name.contains(s.as_str()),
            Pattern::Exact(s) => name == s,
            Pattern::Glob(g) => glob_matches(g, name),
        }
    }

    /// The text compared with names to find the nearest: the pattern without its `=` or its
    /// wildcards.
    fn core(&self) -> String {
        match self {
            Pattern::Substring(s) | Pattern::Exact(s) => s.clone(),
            Pattern::Glob(g) => g.chars().filter(|c| !matches!(c, '*' | '?')).collect(),
        }
    }
}

/// Whether any of `patterns` (command-line texts, [`Pattern::parse`]) matches `name`.
pub fn any_matches(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| Pattern::parse(p).matches(name))
}

/// Whether the glob `glob` (`*` any run of characters, `?` one character) matches all of
/// `name`. Backtracks to the last `*` only, so it takes time linear in the lengths times the
/// stars, never exponential.
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some('*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

/// How far `name` is from what `pattern` asks: the edit distance from the pattern's text to the
/// closest stretch of `name` as long as it (a substring pattern asks for a stretch), or to the
/// whole name when that is closer.
fn distance(core: &[char], name: &str) -> usize {
    let name: Vec<char> = name.chars().collect();
    let text = |c: &[char]| c.iter().collect::<String>();
    let core_text = text(core);
    let whole = strsim::levenshtein(&core_text, &text(&name));
    if core.is_empty() || name.len() <= core.len() {
        return whole;
    }
    let stretch = name.windows(core.len()).map(|w| strsim::levenshtein(&core_text, &text(w))).min().unwrap_or(whole);
    whole.min(stretch)
}

/// The names of `names` nearest to `pattern`: at most `NEAREST_SHOWN`, nearest first, each
/// once, and none more than `NEAREST_SLACK` edits farther than the nearest.
pub fn nearest<'a>(pattern: &Pattern, names: &[&'a str]) -> Vec<&'a str> {
    let core: Vec<char> = pattern.core().chars().collect();
    let mut scored: Vec<(usize, &str)> = names.iter().map(|&n| (distance(&core, n), n)).collect();
    scored.sort_unstable();
    scored.dedup_by_key(|(_, n)| *n);
    let best = scored.first().map_or(0, |&(d, _)| d);
    scored.into_iter().take_while(|&(d, _)| d <= best + NEAREST_SLACK).take(NEAREST_SHOWN).map(|(_, n)| n).collect()
}

/// The error for filter `option` (`--case`) whose `pattern` matches none of `names` (`what`
/// says what they are: "vector or case"): names the filter and lists the nearest names.
pub fn no_match(option: &str, what: &str, pattern: &str, names: &[&str]) -> String {
    let near = nearest(&Pattern::parse(pattern), names);
    let listed = if near.is_empty() {
        format!("there is no {what} to match")
    } else {
        let quoted: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
        format!("nearest: {}", quoted.join(", "))
    };
    format!("{option} `{pattern}`: no {what} matches ({listed}); {FORMS}")
}

/// Whether `error` is a [`no_match`] error of a `--set` or `--case` filter.
pub fn is_miss(error: &str) -> bool {
    (error.starts_with("--set `") || error.starts_with("--case `")) && error.contains(" matches (")
}

/// The patterns of `patterns` that match none of `names`, each as a [`no_match`] error.
pub fn misses(option: &str, what: &str, patterns: &[String], names: &[&str]) -> Vec<String> {
    patterns
        .iter()
        .filter(|p| !names.iter().any(|n| Pattern::parse(p).matches(n)))
        .map(|p| no_match(option, what, p, names))
        .collect()
}

/// The vector sets and vectors `filter` (`--set`, `--case`) selects out of `sets`, and one
/// [`no_match`] error per pattern that selects nothing. A vector is kept whole (every case of it)
/// when a `--case` pattern matches its name or one of its case names.
pub fn select(filter: &Filter, sets: Vec<VectorSet>) -> (Vec<VectorSet>, Vec<String>) {
    let errors = check(filter, &sets);
    let mut sets: Vec<VectorSet> = sets.into_iter().filter(|s| set_selected(filter, s)).collect();
    if !filter.cases.is_empty() {
        let patterns: Vec<Pattern> = filter.cases.iter().map(|c| Pattern::parse(c)).collect();
        for s in &mut sets {
            s.vectors.retain(|v| patterns.iter().any(|p| vector_matches(p, v)));
        }
        sets.retain(|s| !s.vectors.is_empty());
    }
    (sets, errors)
}

/// One [`no_match`] error per `--set` pattern that matches no set of `sets` and per `--case`
/// pattern that matches no vector or case of the sets `--set` selects; empty when every
/// pattern selects something. Lets a command refuse a mistyped filter before anything runs.
pub fn check(filter: &Filter, sets: &[VectorSet]) -> Vec<String> {
    let mut set_names: Vec<&str> = sets.iter().map(|s| s.set.as_str()).collect();
    set_names.sort_unstable();
    set_names.dedup();
    let mut errors = misses("--set", "vector set", &filter.sets, &set_names);
    let selected: Vec<&VectorSet> = sets.iter().filter(|s| set_selected(filter, s)).collect();
    for text in &filter.cases {
        let pattern = Pattern::parse(text);
        if !selected.iter().flat_map(|s| &s.vectors).any(|v| vector_matches(&pattern, v)) {
            let mut names: Vec<&str> = selected.iter().flat_map(|s| &s.vectors).map(|v| v.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            errors.push(no_match("--case", "vector or case", text, &names));
        }
    }
    errors
}

/// Whether `--set` keeps `set` (no `--set`: every set).
fn set_selected(filter: &Filter, set: &VectorSet) -> bool {
    filter.sets.is_empty() || any_matches(&filter.sets, &set.set)
}

/// Whether `pattern` matches the vector's name or one of its case names.
fn vector_matches(pattern: &Pattern, v: &Vector) -> bool {
    pattern.matches(&v.name) || case_names(v).iter().any(|c| pattern.matches(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_matches_substrings_equals_sign_exactly_and_wildcards_as_globs() {
        let abc = "RFC1321 A.5 #3: MD5(\"abc\")";
        assert!(Pattern::parse("MD5(\"abc\")").matches(abc));
        assert!(!Pattern::parse("MD5(\"abd\")").matches(abc));
        assert!(!Pattern::parse("=MD5(\"abc\")").matches(abc));
        assert!(Pattern::parse(&format!("={abc}")).matches(abc));
        assert!(Pattern::parse("RFC1321*").matches(abc));
        assert!(!Pattern::parse("RFC1321").matches("rfc1321"), "matching is case-sensitive");
        assert!(!Pattern::parse("A.5*").matches(abc), "a glob spans the whole name");
        assert!(Pattern::parse("*#?: MD5*").matches(abc));
        assert!(!Pattern::parse("*#??: MD5*").matches(abc));
    }

    #[test]
    fn globs_backtrack_over_stars() {
        assert!(glob_matches("*a*b*c", "xxaxbxbxxc"));
        assert!(glob_matches("a*", "a"));
        assert!(glob_matches("**", ""));
        assert!(!glob_matches("a*b", "ab c"));
        assert!(!glob_matches("?", ""));
        assert!(glob_matches("?é", "aé"), "characters, not bytes");
        // A pathological pattern stays fast (no exponential backtracking).
        let long = "a".repeat(5000);
        assert!(!glob_matches(&format!("{}b", "*a".repeat(50)), &long));
    }

    #[test]
    fn a_pattern_that_matches_nothing_names_the_filter_and_the_nearest_names() {
        let names = ["rfc1321", "openssl", "openssl-misaligned", "jtreg", "chains"];
        let msg = no_match("--set", "vector set", "rfc1312", &names);
        assert!(msg.starts_with("--set `rfc1312`: no vector set matches (nearest: `rfc1321`); "), "{msg}");
        let near = nearest(&Pattern::parse("=opensll"), &names);
        assert_eq!(near, ["openssl", "openssl-misaligned"], "names far from the nearest are left out");
        // A substring pattern is compared with the closest stretch of each name.
        let cases = ["RFC1321 A.5 #3: MD5(\"abc\")", "RFC1321 A.5 #4: MD5(\"message digest\")", "jtreg 1"];
        assert_eq!(nearest(&Pattern::parse("MD5(\"abd\")"), &cases)[0], cases[0]);
        assert!(no_match("--case", "vector or case", "x", &[]).contains("there is no vector or case to match"));
        assert!(is_miss(&msg) && !is_miss("--set x: cannot read"));
    }

    #[test]
    fn misses_lists_only_the_patterns_that_match_nothing() {
        let names = ["riscv64", "riscv64+zbb", "aarch64"];
        let patterns = vec!["zbb".to_string(), "=riscv".to_string(), "arm*".to_string()];
        let errors = misses("--variant", "variant", &patterns, &names);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("--variant `=riscv`: no variant matches (nearest: `riscv64`"), "{errors:?}");
        assert!(errors[1].starts_with("--variant `arm*`: no variant matches"), "{errors:?}");
        assert!(any_matches(&patterns, "riscv64+zbb") && !any_matches(&patterns, "aarch64"));
    }
}
