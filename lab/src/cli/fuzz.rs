//! `lab fuzz`: options mapped onto a [`kernel_lab::fuzz`] campaign, its text and reports.

use std::path::PathBuf;

use clap::Args;

use kernel_lab::backend::Limits;
use kernel_lab::exit::ExitCode;
use kernel_lab::fuzz;
use kernel_lab::vectors;

use super::options::{OutputArgs, Select};

#[derive(Args)]
pub(crate) struct FuzzArgs {
    #[command(flatten)]
    select: Select,
    /// Which calls to make: `jdk` (default) only those the JDK makes, the HotSpot family's
    /// contract (0 <= ofs <= limit <= 2^31 - 65; Poly1305 lengths in whole blocks); `wide`
    /// every call the lab's contract allows, findings outside the JDK's domain reported apart
    /// (class out-of-domain, not failures); for the OpenSSL family, `wide` passes Poly1305
    /// lengths that are not a multiple of 16 as given (outside OpenSSL's contract, reported
    /// apart likewise). docs/contracts.md, "The JDK call domain".
    #[arg(long, value_enum, default_value = "jdk")]
    domain: kernel_lab::domain::Domain,
    /// A load that reaches past (or before) a buffer inside one aligned 8-byte word the buffer
    /// also touches cannot fault on any machine: `warn` lists it as a warning (one per load
    /// instruction), `fail` makes it a memory finding, as `lab run --partial-loads`. A manifest
    /// variant's `partial_loads` overrides it for that variant.
    #[arg(long, value_name = "warn|fail", default_value = "warn", value_parser = kernel_lab::backend::PartialLoads::from_name)]
    partial_loads: kernel_lab::backend::PartialLoads,
    /// Cases per variant × backend × kernel (across all shards). Default: 2000.
    #[arg(long, conflicts_with = "time", value_parser = clap::value_parser!(u64).range(1..))]
    cases: Option<u64>,
    /// Wall time for the whole campaign, split across targets (e.g. 60s, 10m).
    #[arg(long, value_parser = parse_time)]
    time: Option<humantime::Duration>,
    /// Campaign seed (default: random, printed so the run can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Run shard I of N: case k belongs to shard k mod N (e.g. 0/4).
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Cases per backend entry (1 to 65536).
    #[arg(long, default_value_t = 256, value_parser = parse_batch)]
    batch: usize,
    /// Pieces of the campaign run at once, each on its own thread (default: one per CPU). A
    /// target is cut into pieces of 8 batches; the results are the same for any N (but for
    /// times and, with --time, how many cases fit).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    /// Vector lengths in bits qemu fuzzes RVV and SVE variants at (repeat or comma list), as
    /// `lab run --vlen` (default: RVV VLEN 128, 256, 512, 1024; SVE VL 128, 256, 512): one
    /// target per length, the same cases at each; failures and replays name the length.
    #[arg(long = "vlen", value_name = "BITS", value_delimiter = ',')]
    vlen: Vec<u32>,
    /// Folder for shrunk failures (vector files).
    #[arg(long, value_name = "DIR", default_value = "fuzz-failures")]
    out: PathBuf,
    #[command(flatten)]
    report: OutputArgs,
}

/// The longest `--time` (a year): a deadline past it could overflow the clock's arithmetic.
const MAX_TIME: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// A positive duration such as `60s` or `10m`, at most [`MAX_TIME`].
fn parse_time(s: &str) -> Result<humantime::Duration, String> {
    let d: humantime::Duration = s.parse().map_err(|e| format!("{e} (e.g. 60s, 10m)"))?;
    if d.is_zero() {
        return Err("the time budget must be above zero".into());
    }
    if *d > MAX_TIME {
        return Err(format!("the time budget must be at most {}", humantime::format_duration(MAX_TIME)));
    }
    Ok(d)
}

/// A `--batch` size from 1 to 65536.
fn parse_batch(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err(format!("`{s}`: expected a number of cases from 1 to 65536")),
    }
}

pub(crate) fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected I/N, e.g. 0/4")?;
    let (i, n): (u64, u64) =
        (i.parse().map_err(|_| "I must be a number")?, n.parse().map_err(|_| "N must be a number")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

impl FuzzArgs {
    /// `--check-args`: the selection names at least one variant, and `--vlen` fits them.
    pub(crate) fn check(&self) -> Result<(), String> {
        kernel_lab::run::check_vector_lengths(&self.select.variants()?, &self.vlen)
    }
}

pub(crate) fn fuzz_cmd(args: &FuzzArgs) -> ExitCode {
    kernel_lab::domain::set_current(args.domain);
    let variants = match args.select.variants_or_usage_error("fuzz") {
        Ok(v) => v,
        Err(status) => return status,
    };
    if let Err(e) = kernel_lab::run::check_vector_lengths(&variants, &args.vlen) {
        super::out::eprintln(&format!("lab fuzz: {e}"));
        return ExitCode::Error;
    }
    if let Err(status) = args.report.start("fuzz") {
        return status;
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let budget = match args.time {
        Some(t) => fuzz::Budget::Time(t.into()),
        None => fuzz::Budget::Cases(args.cases.unwrap_or(2000)),
    };
    let cfg = fuzz::FuzzConfig {
        variants,
        backends: args.select.backends(),
        kernels: args.select.kernels(),
        build: args.select.build(),
        seed,
        budget,
        shard: args.shard.unwrap_or((0, 1)),
        batch: args.batch.max(1),
        out_dir: args.out.clone(),
        limits: Limits { partial_loads: args.partial_loads, ..Limits::default() },
        jobs: args.jobs.map_or(0, |n| n as usize),
        vector_lengths: args.vlen.clone(),
    };
    // With JSON or JUnit on stdout, the human lines go to stderr.
    let human = |text: &str| {
        if args.report.structured_on_stdout() {
            super::out::eprint(text);
        } else {
            super::out::print(text);
        }
    };
    human(&format!("lab fuzz: seed {seed} (repeat with --seed {seed}), shard {}/{}\n", cfg.shard.0, cfg.shard.1));
    let started = std::time::Instant::now();
    let mut bars = crate::bars::Bars::default();
    let results = fuzz::campaign(&cfg, &mut |e| bars.handle(e));
    human(&fuzz_text(&results, seed));
    let mut report = fuzz::to_report(&results, seed, cfg.shard, started.elapsed());
    report.kernels_dir = Some(cfg.build.kernels_dir.clone());
    // The exit status is the report's, so the JSON's `exit_code` is the process's.
    args.report.emit_structured(&report, "fuzz")
}

/// Each target's line and every failure.
pub(crate) fn fuzz_text(results: &[fuzz::TargetResult], seed: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    // As wide as the longest variant name (a user's variants may be long).
    let vw = results.iter().map(|r| r.variant.len()).max().unwrap_or(0).max(12);
    for r in results {
        let on = kernel_lab::run::backend_label(r.backend, r.vector_length);
        let head = format!("{:<vw$} {on:<8} {:<9}", r.variant, r.kernel.name());
        let contract =
            kernel_lab::contract::report_note(r.family, r.kernel).map_or(String::new(), |n| format!("  ({n})"));
        match &r.outcome {
            fuzz::Outcome::Clean => {
                let clean =
                    if r.image_findings.is_empty() { "clean" } else { "no case failed; FAILED image checks below" };
                let _ = writeln!(out, "{head} {:>8} cases {:>10.0} cases/s  {clean}{contract}", r.cases, r.rate());
                if let Some(why) = &r.not_run.reason {
                    let _ = writeln!(out, "  {} more cases not run (skipped), the first: {why}", r.not_run.count);
                }
            }
            fuzz::Outcome::Skipped(why) => {
                let _ = writeln!(out, "{head} skipped: {why}");
            }
            fuzz::Outcome::NotApplicable(why) => {
                let _ = writeln!(out, "{head} not applicable: {why}");
            }
            fuzz::Outcome::Error(e) => {
                let _ = writeln!(out, "{head} error: {e}");
            }
            fuzz::Outcome::Failed(f) => {
                let (what, why) = match fuzz::out_of_domain(r, f) {
                    Some(why) => {
                        let place = kernel_lab::domain::domain_name(r.family).to_uppercase();
                        (format!("OUTSIDE {place} (not a failure)"), format!("  - {why}\n"))
                    }
                    None => ("FAILED".to_owned(), String::new()),
                };
                let _ = write!(
                    out,
                    "{head} {:>8} cases  {what} at case {} (seed {seed}){contract}\n{why}",
                    r.cases, f.case_index
                );
                let _ = writeln!(
                    out,
                    "  shrunk from {} to {} blocks; minimal case:",
                    f.original_blocks,
                    fuzz::blocks_of(&f.case)
                );
                let json = serde_json::to_string_pretty(&vectors::entry_json(&f.case)).unwrap_or_default();
                let _ = writeln!(out, "{}", json.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"));
                for finding in &f.findings {
                    let _ = writeln!(out, "  - {finding}");
                }
                let _ = writeln!(out, "  written to {}\n  replay: {}", f.file.display(), f.replay);
            }
        }
    }
    // Image findings (static scans, missing symbols) once per variant: they fail the campaign.
    let mut shown: Vec<(&str, &kernel_lab::finding::Finding)> = Vec::new();
    for r in results {
        for f in &r.image_findings {
            if !shown.contains(&(r.variant, f)) {
                shown.push((r.variant, f));
                let _ = writeln!(out, "FAILED {} image ({}): {f}", r.variant, f.class.name());
            }
        }
    }
    // One upper-bits warning per object and argument across its path variants, as in JSON.
    let warnings = results.iter().flat_map(|r| r.warnings.iter().map(|w| w.text.clone())).collect();
    for w in kernel_lab::upper_bits_report::merge_paths(warnings) {
        let _ = writeln!(out, "\nwarning: {w}");
    }
    let count = |p: fn(&fuzz::Outcome) -> bool| results.iter().filter(|r| p(&r.outcome)).count();
    let outside = results
        .iter()
        .filter(|r| matches!(&r.outcome, fuzz::Outcome::Failed(f) if fuzz::out_of_domain(r, f).is_some()));
    let mut families = outside.map(|r| r.family);
    let place = match families.next() {
        Some(f) if families.all(|g| g == f) => kernel_lab::domain::domain_name(f),
        Some(_) => "their contracts' call domains",
        None => "the call domain",
    };
    // Cases a clean target could not run (Unicorn stops at a vector instruction) are neither
    // passed nor failed: the summary says how many, so "clean" never hides them.
    let not_run: u64 = results.iter().map(|r| r.not_run.count).sum();
    let not_run = if not_run > 0 { format!(" ({not_run} more not run, listed per target)") } else { String::new() };
    let _ = writeln!(
        out,
        "\n{} cases{not_run}: {} targets clean, {} failed, {} outside {place}, {} skipped, {} not applicable, {} errors, {} image findings (seed {seed})",
        results.iter().map(|r| r.cases).sum::<u64>(),
        count(|o| matches!(o, fuzz::Outcome::Clean)),
        results.iter().filter(|r| matches!(&r.outcome, fuzz::Outcome::Failed(f) if fuzz::out_of_domain(r, f).is_none())).count(),
        results.iter().filter(|r| matches!(&r.outcome, fuzz::Outcome::Failed(f) if fuzz::out_of_domain(r, f).is_some())).count(),
        count(|o| matches!(o, fuzz::Outcome::Skipped(_))),
        count(|o| matches!(o, fuzz::Outcome::NotApplicable(_))),
        count(|o| matches!(o, fuzz::Outcome::Error(_))),
        shown.len(),
    );
    out
}
