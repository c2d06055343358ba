//! Output for CI systems: JUnit XML, GitHub Actions annotations, and the shard reports that
//! `cordis stress merge` combines into one verdict.
//!
//! # Determinism
//! A merged report lists shards, gaps and divergences sorted (by shard index, seed index), so
//! the same shard files give the same verdict whatever order they are named in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One JUnit test case: a stress shard, passed or failed.
#[derive(Debug, Clone)]
pub struct JunitCase {
    /// The case name (which shard, which seeds).
    pub name: String,
    /// Seconds it took.
    pub seconds: f64,
    /// Why it failed (the first line is the message; the rest, e.g. replay commands, the body).
    pub failure: Option<String>,
}

/// `text` escaped for XML attributes and text.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry most control characters at all, even escaped.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => {
                out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// A JUnit XML document with one suite (`suite`) of `cases`.
pub fn junit_xml(suite: &str, cases: &[JunitCase]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let seconds: f64 = cases.iter().map(|c| c.seconds).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites tests=\"{}\" failures=\"{failures}\" time=\"{seconds:.3}\">\n",
        cases.len()
    ));
    out.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{seconds:.3}\">\n",
        xml(suite),
        cases.len()
    ));
    for case in cases {
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(suite),
            xml(&case.name),
            case.seconds
        ));
        match &case.failure {
            None => out.push_str("/>\n"),
            Some(failure) => {
                let message = failure.lines().next().unwrap_or_default();
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml(message),
                    xml(failure)
                ));
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// A GitHub Actions `::error` workflow command pointing at `file:line`.
pub fn github_error(file: &str, line: Option<usize>, title: &str, message: &str) -> String {
    // Properties escape `%`, CR, LF, `:` and `,`; the message only `%`, CR and LF.
    let property = |s: &str| {
        s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
            .replace(':', "%3A")
            .replace(',', "%2C")
    };
    let data = |s: &str| {
        s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
    };
    let at = line.map_or_else(String::new, |l| format!(",line={l}"));
    format!(
        "::error file={}{at},title={}::{}",
        property(file),
        property(title),
        data(message)
    )
}

/// Parses a duration such as `90s`, `10m`, `1h30m`, `500ms`, `7d` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err("an empty duration; write e.g. 90s, 10m or 1h30m".to_owned());
    }
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "\"{text}\" is not a duration; write e.g. 90s, 10m or 1h30m"
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("\"{text}\": the number is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => {
                return Err(format!(
                    "\"{text}\": unknown unit \"{unit}\" (use ms, s, m, h or d)"
                ));
            }
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

/// What one `cordis stress` shard did, as `--report FILE` writes it and `stress merge` reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardReport {
    /// The report format's version.
    pub version: u32,
    /// The config file, as given.
    pub file: String,
    /// The schedule policy.
    pub schedule: String,
    /// The first seed: seed index `k` is `start + k`.
    pub start: u64,
    /// The planned number of seed indices (`--seeds`), `None` for a budget-only run.
    pub seeds: Option<u64>,
    /// This shard's index.
    pub shard_index: u64,
    /// How many shards.
    pub shard_count: u64,
    /// Every index `k < covered_below` with `k % shard_count == shard_index` ran.
    pub covered_below: u64,
    /// How many seeds ran.
    pub runs: u64,
    /// The digest every run agreed on.
    pub digest: Option<String>,
    /// The first divergence or leak, as printed (kind, seeds, replay commands).
    pub failure: Option<serde_json::Value>,
    /// Seconds the shard took.
    pub seconds: f64,
}

/// The current [`ShardReport::version`].
pub const SHARD_REPORT_VERSION: u32 = 1;

/// Seed indices of one shard that no report covered: `first, first + step, …, last`.
///
/// A gap is one arithmetic range per shard index, so a merge holds at most one gap per shard
/// whatever the planned seed count (a 10^12-seed plan costs what a 10-seed plan does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The shard whose indices these are.
    pub shard: u64,
    /// The first uncovered index.
    pub first: u64,
    /// The last uncovered index (`first + step * (len - 1)`).
    pub last: u64,
    /// The shard count: the distance between the shard's indices.
    pub step: u64,
}

impl Gap {
    /// How many seed indices the gap holds (at least one: an empty range is no gap).
    pub fn count(&self) -> u64 {
        (self.last - self.first) / self.step + 1
    }
}

/// The indices `k < below` with `k % count == index`: how many a shard runs to reach `below`.
pub fn shard_indices_below(below: u64, index: u64, count: u64) -> u64 {
    below.saturating_sub(index).div_ceil(count.max(1))
}

/// The combined verdict of several shard reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// Seed indices covered (every shard's covered set, together).
    pub covered: u64,
    /// The planned range `0..seeds`.
    pub planned: u64,
    /// How many shards the run was cut into.
    pub shard_count: u64,
    /// Per shard index a report names: every index of that shard below this ran.
    pub reached: BTreeMap<u64, u64>,
    /// Distinct digests, each with the shards that reported it.
    pub digests: BTreeMap<String, Vec<u64>>,
    /// Failures reported by shards, by shard index.
    pub failures: Vec<(u64, serde_json::Value)>,
}

impl Merged {
    /// Whether the shards together prove agreement over the whole plan.
    pub fn passed(&self) -> bool {
        self.gap_count() == 0 && self.failures.is_empty() && self.digests.len() <= 1
    }

    /// The shards that hold at least one index of the plan.
    fn useful_shards(&self) -> u64 {
        self.shard_count.min(self.planned)
    }

    /// How many shards left indices uncovered (each is one [`Gap`]), without listing them.
    pub fn gap_count(&self) -> u64 {
        let complete = self
            .reached
            .iter()
            .filter(|&(&shard, &below)| {
                shard < self.useful_shards()
                    && shard_indices_below(below, shard, self.shard_count)
                        == shard_indices_below(self.planned, shard, self.shard_count)
            })
            .count() as u64;
        self.useful_shards() - complete
    }

    /// The uncovered indices, one range per shard, by shard index.
    ///
    /// Lazy: shards no report names are gaps, and there may be very many of them; every shard
    /// before the 21st gap is either named by a report or a gap, so taking a few costs what the
    /// reports cost.
    pub fn gaps(&self) -> impl Iterator<Item = Gap> + '_ {
        let count = self.shard_count;
        (0..self.useful_shards()).filter_map(move |shard| {
            let reached = self.reached.get(&shard).copied().unwrap_or(0);
            let all = shard_indices_below(self.planned, shard, count);
            let ran = shard_indices_below(reached, shard, count);
            (ran < all).then(|| Gap {
                shard,
                first: shard + ran * count,
                last: shard + (all - 1) * count,
                step: count,
            })
        })
    }
}

/// Why shard reports cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// No reports.
    #[error("no shard reports to merge")]
    Empty,
    /// Two reports describe different runs.
    #[error(
        "{path} is a shard of another run ({what} differs: {theirs} vs {ours}); merge shards of one run only"
    )]
    Mismatch {
        /// The odd report.
        path: String,
        /// Which field differs.
        what: &'static str,
        /// Its value there.
        theirs: String,
        /// The first report's value.
        ours: String,
    },
    /// A report names no planned seed count.
    #[error(
        "{0} has no planned seed count (a --time-budget run without --seeds): merge needs --seeds to know the range"
    )]
    NoPlan(String),
    /// A report is a shard of another count than `--expect` says.
    #[error("{path} is a shard report of {count} shards, but --expect says {expected}")]
    Expect {
        /// The report.
        path: String,
        /// Its shard count.
        count: u64,
        /// The expected count.
        expected: u64,
    },
    /// Two reports of one shard.
    #[error("shard {shard} has two reports, {first} and {second}; merge one report per shard")]
    Duplicate {
        /// The shard index.
        shard: u64,
        /// One report.
        first: String,
        /// The other.
        second: String,
    },
    /// A report contradicts itself (a hand-edited or truncated file).
    #[error(
        "{path} is not a consistent shard report: {why}; write it again with {program} stress --report FILE",
        program = crate::cli::program::name()
    )]
    Inconsistent {
        /// The report.
        path: String,
        /// What does not add up.
        why: String,
    },
}

/// Refuses a report whose fields cannot all be true of one shard of a `planned`-index plan.
fn check_consistent(path: &Path, r: &ShardReport, planned: u64) -> Result<(), MergeError> {
    let why = if r.shard_count == 0 {
        Some("\"shardCount\" is 0 (a run has at least one shard)".to_owned())
    } else if r.shard_index >= r.shard_count {
        Some(format!(
            "\"shardIndex\" {} is not below \"shardCount\" {}",
            r.shard_index, r.shard_count
        ))
    } else if r.covered_below > planned {
        Some(format!(
            "\"coveredBelow\" {} is past the planned {planned} seeds",
            r.covered_below
        ))
    } else if r.digest.is_none() && r.runs > 0 && r.failure.is_none() {
        // Seeds that ran and agreed agreed on a digest; without it nothing shows this shard
        // agrees with the others.
        Some(format!(
            "\"digest\" is null, yet it ran {} seed{} without a failure",
            r.runs,
            if r.runs == 1 { "" } else { "s" }
        ))
    } else {
        let ran = shard_indices_below(r.covered_below, r.shard_index, r.shard_count);
        (r.runs != ran).then(|| {
            format!(
                "it claims the indices below {} ({ran} of shard {}/{}) but \"runs\" is {}",
                r.covered_below, r.shard_index, r.shard_count, r.runs
            )
        })
    };
    match why {
        Some(why) => Err(MergeError::Inconsistent {
            path: path.display().to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// Merges shard reports of one run (same file, schedule, start, seeds and shard count).
pub fn merge(reports: &[(PathBuf, ShardReport)]) -> Result<Merged, MergeError> {
    let (first_path, first) = reports.first().ok_or(MergeError::Empty)?;
    let planned = first
        .seeds
        .ok_or_else(|| MergeError::NoPlan(first_path.display().to_string()))?;
    for (path, r) in reports {
        let mismatch = |what: &'static str, theirs: String, ours: String| MergeError::Mismatch {
            path: path.display().to_string(),
            what,
            theirs,
            ours,
        };
        if r.file != first.file {
            return Err(mismatch("file", r.file.clone(), first.file.clone()));
        }
        if r.schedule != first.schedule {
            return Err(mismatch(
                "schedule",
                r.schedule.clone(),
                first.schedule.clone(),
            ));
        }
        if r.start != first.start {
            return Err(mismatch(
                "start",
                r.start.to_string(),
                first.start.to_string(),
            ));
        }
        if r.seeds != first.seeds {
            return Err(mismatch(
                "seeds",
                format!("{:?}", r.seeds),
                format!("{:?}", first.seeds),
            ));
        }
        if r.shard_count != first.shard_count {
            return Err(mismatch(
                "shard count",
                r.shard_count.to_string(),
                first.shard_count.to_string(),
            ));
        }
    }
    for (path, r) in reports {
        check_consistent(path, r, planned)?;
    }
    let count = first.shard_count;
    // The highest index each shard covered below, per shard index (a repeated shard counts
    // for the most it covered).
    let mut below: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, r) in reports {
        let e = below.entry(r.shard_index).or_insert(0);
        *e = (*e).max(r.covered_below);
    }
    let covered = below
        .iter()
        .map(|(&shard, &reached)| shard_indices_below(reached, shard, count))
        .sum();
    let mut digests: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut sorted: Vec<&ShardReport> = reports.iter().map(|(_, r)| r).collect();
    sorted.sort_by_key(|r| r.shard_index);
    for r in sorted {
        if let Some(d) = &r.digest {
            digests.entry(d.clone()).or_default().push(r.shard_index);
        }
        if let Some(f) = &r.failure {
            failures.push((r.shard_index, f.clone()));
        }
    }
    Ok(Merged {
        covered,
        planned,
        shard_count: count,
        reached: below,
        digests,
        failures,
    })
}

/// One CI engine's variables for a job's place among the parallel copies of one job.
struct Engine {
    /// The engine, as people name it.
    name: &'static str,
    /// The job's index.
    index: &'static str,
    /// The number of parallel jobs, if the engine sets one.
    count: Option<&'static str>,
    /// Whether the index starts at 1.
    one_based: bool,
}

/// The engines `--shard auto` reads, in the order their variables are named in errors.
const ENGINES: [Engine; 4] = [
    Engine {
        name: "a Kubernetes Indexed Job",
        index: "JOB_COMPLETION_INDEX",
        count: None,
        one_based: false,
    },
    Engine {
        name: "GitLab",
        index: "CI_NODE_INDEX",
        count: Some("CI_NODE_TOTAL"),
        one_based: true,
    },
    Engine {
        name: "Buildkite",
        index: "BUILDKITE_PARALLEL_JOB",
        count: Some("BUILDKITE_PARALLEL_JOB_COUNT"),
        one_based: false,
    },
    Engine {
        name: "CircleCI",
        index: "CIRCLE_NODE_INDEX",
        count: Some("CIRCLE_NODE_TOTAL"),
        one_based: false,
    },
];

/// A shard index and count read from a CI engine's environment (`--shard auto`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoShard {
    /// The shard index, from 0.
    pub index: u64,
    /// The shard count.
    pub count: u64,
    /// Where they came from, for the log: `GitLab (CI_NODE_INDEX=3, CI_NODE_TOTAL=4)`.
    pub from: String,
}

/// Why `--shard auto` cannot tell this job's shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoShardError {
    /// No engine's variables are set.
    #[error(
        "--shard auto: no CI engine says which parallel job this is (looked for JOB_COMPLETION_INDEX, CI_NODE_INDEX/CI_NODE_TOTAL, BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT, CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL); pass --shard I/N (GitHub Actions sets no variable for a matrix job's index: write --shard ${{{{ strategy.job-index }}}}/${{{{ strategy.job-total }}}})"
    )]
    Unset,
    /// A variable is set to something that is not a shard index or count.
    #[error("--shard auto: {var}={value:?} {why}")]
    Bad {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// Only the index is known.
    #[error(
        "--shard auto: {0} gives this job's index but not how many jobs there are; pass --shard-count N (for a Kubernetes Indexed Job, its completions)"
    )]
    NoCount(String),
    /// Two sources disagree.
    #[error(
        "--shard auto: the CI variables disagree: {0} but {1}; unset the stray ones or pass --shard I/N"
    )]
    Contradiction(String, String),
}

/// The shard `--shard auto` runs: the index and count from the CI engine's variables (read
/// through `env`), the count also from `--shard-count` (`count_given`). Refuses to guess when no
/// engine's variables are set, and refuses sources that disagree.
///
/// # Errors
/// [`AutoShardError`]: nothing set, a malformed value, no count, or a contradiction.
pub fn auto_shard(
    env: &dyn Fn(&str) -> Option<String>,
    count_given: Option<u64>,
) -> Result<AutoShard, AutoShardError> {
    let number = |var: &'static str, value: &str| -> Result<u64, AutoShardError> {
        value
            .trim()
            .parse::<u64>()
            .map_err(|_| AutoShardError::Bad {
                var,
                value: value.to_owned(),
                why: "is not a whole number".to_owned(),
            })
    };
    // (what it says, index, count) per source that is set.
    let mut indices: Vec<(String, u64)> = Vec::new();
    let mut counts: Vec<(String, u64)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for engine in &ENGINES {
        let index = env(engine.index).filter(|v| !v.trim().is_empty());
        let count = engine
            .count
            .and_then(|var| Some((var, env(var).filter(|v| !v.trim().is_empty())?)));
        let (index_value, count) = match (index, count) {
            (None, None) => continue,
            // An engine that says "one job" without an index (CircleCI and GitLab set the
            // total for every job) is shard 0 of 1; more jobs without an index is a mistake.
            (None, Some((var, value))) => {
                let n = number(var, &value)?;
                if n != 1 {
                    return Err(AutoShardError::Bad {
                        var,
                        value,
                        why: format!("is set but {} is not", engine.index),
                    });
                }
                let said = format!("{} ({var}={n})", engine.name);
                indices.push((said.clone(), 0));
                counts.push((said.clone(), 1));
                names.push(said);
                continue;
            }
            (Some(index), count) => (index, count),
        };
        let raw = number(engine.index, &index_value)?;
        let index = if engine.one_based {
            raw.checked_sub(1).ok_or_else(|| AutoShardError::Bad {
                var: engine.index,
                value: index_value.clone(),
                why: "is 0, but it counts from 1".to_owned(),
            })?
        } else {
            raw
        };
        let mut said = format!("{} ({}={raw}", engine.name, engine.index);
        let count = match count {
            Some((var, value)) => {
                let n = number(var, &value)?;
                said.push_str(&format!(", {var}={n}"));
                Some(n)
            }
            None => None,
        };
        said.push(')');
        indices.push((said.clone(), index));
        if let Some(n) = count {
            counts.push((said.clone(), n));
        }
        names.push(said);
    }
    if let Some(n) = count_given {
        counts.push((format!("--shard-count {n}"), n));
    }
    let agreed = |values: &[(String, u64)], what: &str| -> Result<Option<u64>, AutoShardError> {
        let Some((first, value)) = values.first() else {
            return Ok(None);
        };
        match values.iter().find(|(_, v)| v != value) {
            Some((other, v)) => Err(AutoShardError::Contradiction(
                format!("{first} says {what} {value}"),
                format!("{other} says {what} {v}"),
            )),
            None => Ok(Some(*value)),
        }
    };
    let index = agreed(&indices, "shard index")?.ok_or(AutoShardError::Unset)?;
    let count = agreed(&counts, "shard count")?
        .ok_or_else(|| AutoShardError::NoCount(names.join(" and ")))?;
    if count == 0 || index >= count {
        return Err(AutoShardError::Contradiction(
            format!("{} gives shard index {index}", names.join(" and ")),
            format!("the shard count is {count}"),
        ));
    }
    let mut from = names.join(", ");
    if let Some(n) = count_given {
        from.push_str(&format!(" with --shard-count {n}"));
    }
    Ok(AutoShard { index, count, from })
}

/// What `stress merge --expect N` finds wrong with the reports' shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Shard indices below N that no report names, the first few.
    pub missing: Vec<u64>,
    /// How many are missing in all.
    pub missing_count: u64,
}

/// Checks the reports of a merge against the expected shard count `n`: every report is a shard
/// of `n`, no shard has two reports; returns the shards no report names.
///
/// # Errors
/// [`MergeError::Expect`] when a report is a shard of another count, [`MergeError::Duplicate`]
/// when two reports name one shard.
pub fn expect_shards(reports: &[(PathBuf, ShardReport)], n: u64) -> Result<Expected, MergeError> {
    let mut seen: BTreeMap<u64, &Path> = BTreeMap::new();
    for (path, r) in reports {
        if r.shard_count != n {
            return Err(MergeError::Expect {
                path: path.display().to_string(),
                count: r.shard_count,
                expected: n,
            });
        }
        if let Some(other) = seen.insert(r.shard_index, path) {
            return Err(MergeError::Duplicate {
                shard: r.shard_index,
                first: other.display().to_string(),
                second: path.display().to_string(),
            });
        }
    }
    let missing_count = n - seen.len() as u64;
    let missing = (0..n).filter(|i| !seen.contains_key(i)).take(20).collect();
    Ok(Expected {
        missing,
        missing_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(index: u64, count: u64, below: u64, digest: &str) -> (PathBuf, ShardReport) {
        (
            PathBuf::from(format!("shard-{index}.json")),
            ShardReport {
                version: SHARD_REPORT_VERSION,
                file: "cordis.yml".into(),
                schedule: "random".into(),
                start: 0,
                seeds: Some(100),
                shard_index: index,
                shard_count: count,
                covered_below: below,
                runs: shard_indices_below(below, index, count),
                digest: Some(digest.into()),
                failure: None,
                seconds: 0.0,
            },
        )
    }

    #[test]
    fn four_shards_cover_exactly_the_unsharded_range() {
        let all: Vec<_> = (0..4).map(|i| shard(i, 4, 100, "d")).collect();
        let merged = merge(&all).unwrap();
        assert_eq!(merged.gap_count(), 0);
        assert_eq!((merged.covered, merged.planned), (100, 100));
        assert!(merged.passed(), "{merged:?}");
    }

    #[test]
    fn a_missing_shard_is_a_gap_of_its_indices() {
        let three: Vec<_> = [0, 1, 3]
            .iter()
            .map(|&i| shard(i, 4, 100 - (3 - i) % 4, "d"))
            .collect();
        let merged = merge(&three).unwrap();
        assert_eq!(merged.covered, 75);
        let gaps: Vec<Gap> = merged.gaps().collect();
        assert_eq!(
            gaps,
            [Gap {
                shard: 2,
                first: 2,
                last: 98,
                step: 4
            }]
        );
        assert_eq!((gaps[0].count(), merged.gap_count()), (25, 1));
        assert!(!merged.passed());
    }

    #[test]
    fn a_budget_cut_shard_leaves_a_tail_gap_and_different_digests_fail() {
        let mut all: Vec<_> = (0..2).map(|i| shard(i, 2, 100, "d")).collect();
        all[1].1.covered_below = 51;
        all[1].1.runs = 25;
        all[1].1.digest = Some("e".into());
        let merged = merge(&all).unwrap();
        assert_eq!(merged.covered, 75);
        let gaps: Vec<Gap> = merged.gaps().collect();
        assert_eq!((gaps[0].first, gaps[0].last, gaps[0].count()), (51, 99, 25));
        assert_eq!(merged.digests.len(), 2);
        assert!(!merged.passed());
    }

    #[test]
    fn a_trillion_seed_plan_merges_in_constant_memory() {
        // The old merge walked every index and kept one gap per missing index.
        let mut r = shard(0, 3, 0, "d");
        r.1.seeds = Some(1_000_000_000_000);
        r.1.covered_below = 3_000_001;
        r.1.runs = 1_000_001;
        let merged = merge(&[r]).unwrap();
        assert_eq!(merged.covered, 1_000_001);
        let gaps: Vec<Gap> = merged.gaps().collect();
        assert_eq!(gaps.len(), 3);
        assert_eq!(
            gaps.iter().map(Gap::count).sum::<u64>(),
            1_000_000_000_000 - 1_000_001
        );
        assert_eq!((gaps[0].first, gaps[0].last), (3_000_003, 999_999_999_999));
        assert_eq!((gaps[1].first, gaps[2].first), (1, 2));
    }

    #[test]
    fn a_huge_shard_count_lists_gaps_lazily() {
        let mut r = shard(0, 1_000_000_000_000, 0, "d");
        r.1.seeds = Some(u64::MAX);
        r.1.covered_below = 1;
        r.1.runs = 1;
        let merged = merge(&[r]).unwrap();
        // Shard 0 ran its first index of ~18 million; the other shards ran none.
        assert_eq!(merged.gap_count(), 1_000_000_000_000);
        let first: Vec<(u64, u64)> = merged.gaps().take(2).map(|g| (g.shard, g.first)).collect();
        assert_eq!(first, [(0, 1_000_000_000_000), (1, 1)]);
    }

    #[test]
    fn inconsistent_reports_are_refused_with_what_does_not_add_up() {
        type Break = fn(&mut ShardReport);
        let cases: [(Break, &str); 5] = [
            (
                |r| r.runs = 0,
                "claims the indices below 100 (50 of shard 0/2) but \"runs\" is 0",
            ),
            (|r| r.shard_count = 0, "\"shardCount\" is 0"),
            (
                |r| r.shard_index = 2,
                "\"shardIndex\" 2 is not below \"shardCount\" 2",
            ),
            (
                |r| r.covered_below = 101,
                "\"coveredBelow\" 101 is past the planned 100 seeds",
            ),
            (
                |r| r.digest = None,
                "\"digest\" is null, yet it ran 50 seeds without a failure",
            ),
        ];
        for (break_it, why) in cases {
            let mut r = shard(0, 2, 100, "d");
            r.1.runs = 50;
            break_it(&mut r.1);
            let err = merge(&[r]).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
            assert!(err.starts_with("shard-"), "{err}");
        }
    }

    #[test]
    fn a_null_digest_is_accepted_only_from_a_shard_that_ran_nothing_or_failed() {
        let mut empty = shard(3, 4, 3, "d");
        empty.1.seeds = Some(3);
        empty.1.digest = None;
        let mut rest: Vec<_> = (0..3).map(|i| shard(i, 4, 3, "d")).collect();
        for r in &mut rest {
            r.1.seeds = Some(3);
        }
        rest.push(empty);
        assert!(merge(&rest).unwrap().passed());
        let mut failed = shard(0, 1, 100, "d");
        failed.1.digest = None;
        failed.1.failure = Some(serde_json::json!({"kind": "leak"}));
        assert!(!merge(&[failed]).unwrap().passed());
    }

    #[test]
    fn shards_of_different_runs_are_refused() {
        let mut all: Vec<_> = (0..2).map(|i| shard(i, 2, 100, "d")).collect();
        all[1].1.schedule = "pct".into();
        assert!(matches!(
            merge(&all),
            Err(MergeError::Mismatch {
                what: "schedule",
                ..
            })
        ));
    }

    #[test]
    fn durations_and_escapes() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Ok(Duration::from_secs(12)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(
            github_error("a,b.yml", Some(3), "t:x", "50%\nnext"),
            "::error file=a%2Cb.yml,line=3,title=t%3Ax::50%25%0Anext"
        );
        let x = junit_xml(
            "s",
            &[JunitCase {
                name: "<a>".into(),
                seconds: 1.0,
                failure: Some("bad \"x\"\nreplay".into()),
            }],
        );
        assert!(x.contains("name=\"&lt;a&gt;\""), "{x}");
        assert!(x.contains("failure message=\"bad &quot;x&quot;\""), "{x}");
    }
}
