//! Race-stress from a plugin author's own `#[test]`: boot a composition that holds your Rust
//! plugins beside the built-ins once per seed, optionally hold a scripted conversation with its
//! agent, and prove that every seed ends the same.
//!
//! This is `cordis stress` (and `cordis stress --exercise`) as a library, for plugins the
//! `cordis` binary does not link. Choose the CLI for compositions of built-in and dylib
//! plugins, this module for plugins compiled into your own crate.
//!
//! # Examples
//! ```no_run
//! use cordis::runtime::Policy;
//!
//! # #[derive(Clone, Copy)] struct MyPlugin;
//! # impl cordis::runtime::Plugin for MyPlugin {
//! #     type Config = ();
//! #     fn name(&self) -> &str { "my-plugin" }
//! #     async fn apply(&self, _: cordis::runtime::Context, _: &()) -> Result<(), cordis::runtime::BoxError> { Ok(()) }
//! # }
//! // In a #[test]: panics with both seeds, the first difference and the replay command.
//! cordis::testing::stress("cordis.yml")
//!     .plugin(MyPlugin)
//!     .seeds(1_000)
//!     .schedule(Policy::Pct { depth: 3 })
//!     .exercise("script.yml")
//!     .run();
//! ```
//!
//! # What is compared
//! Without a script, each seed's boot outcome (entry statuses and errors, the assembly, the
//! request-header digest); with one, [`ExerciseOutcome::comparable`] (the boot outcome, each
//! turn's end and the session log scrubbed of [`crate::exercise::SCRUBBED_KEYS`]). Every seed
//! is compared with the first by canonical bytes, and disposal must leave nothing live.
//!
//! # Environment
//! - `CORDIS_STRESS_SEEDS=N` replaces the seed budget (a larger one in a nightly CI job).
//! - `CORDIS_SEED=S` runs seed `S` only (`S1,S2` runs exactly those, in that order): the replay
//!   command a divergence prints sets it to the two diverging seeds.
//!
//! # Determinism
//! Each run uses one current-thread runtime, on which a seed replays exactly.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cordis_host::assembly::{HeaderBytes, header_bytes};
use cordis_host::digest::canonical_bytes;
use cordis_host::loader::boot;
use cordis_host::{Builtins, LoadPlan, PlanOptions, load_plan};
use cordis_runtime::{Context, ErasedPlugin, LiveCounts, Policy, Schedule};
use serde_json::Value;

use crate::exercise::{ExerciseError, ExerciseOutcome, ExerciseScript, exercise, exercise_plan};

/// The environment variable that replaces the seed budget.
pub const SEEDS_ENV: &str = "CORDIS_STRESS_SEEDS";
/// The environment variable that runs only the seeds it lists.
pub const SEED_ENV: &str = "CORDIS_SEED";

/// How the environment is read (the process environment unless a test says otherwise).
type EnvLookup = Box<dyn Fn(&str) -> Option<String>>;

/// A stress run being set up; start one with [`stress`], end it with [`Stress::run`] or
/// [`Stress::try_run`].
pub struct Stress {
    config: PathBuf,
    builtins: Builtins,
    seeds: u64,
    start: u64,
    policy: Policy,
    script: Option<PathBuf>,
    only: Option<Vec<u64>>,
    env: EnvLookup,
}

impl std::fmt::Debug for Stress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stress")
            .field("config", &self.config)
            .field("builtins", &self.builtins)
            .field("seeds", &self.seeds)
            .field("start", &self.start)
            .field("policy", &self.policy)
            .field("script", &self.script)
            .field("only", &self.only)
            .finish_non_exhaustive()
    }
}

/// A stress run of the composition in `config` (a path relative to the current directory,
/// which under `cargo test` is the package's root), with the standard plugin table, 100 seeds
/// from 0, the `random` schedule and no exercise.
pub fn stress(config: impl AsRef<Path>) -> Stress {
    Stress {
        config: config.as_ref().to_owned(),
        builtins: crate::builtins::standard(),
        seeds: 100,
        start: 0,
        policy: Policy::Random,
        script: None,
        only: None,
        env: Box::new(|name| std::env::var(name).ok()),
    }
}

/// Every seed agreed.
#[derive(Debug, Clone)]
pub struct StressSummary {
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// The schedule policy.
    pub policy: Policy,
    /// The request-header digest every seed produced.
    pub digest: String,
    /// The outcome every seed produced (see the module doc, "What is compared").
    pub outcome: Value,
}

/// Two seeds that ended differently.
#[derive(Debug, Clone)]
pub struct Divergence {
    /// The schedule policy.
    pub policy: Policy,
    /// The first seed run, and the first that differed from it.
    pub seeds: [u64; 2],
    /// Each seed's outcome, in the order of `seeds`.
    pub outcomes: [Value; 2],
    /// The readable difference: the first differing session event, or the boot diff.
    pub diff: String,
    /// The command that runs exactly these two seeds again.
    pub replay: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b] = self.seeds;
        writeln!(f, "seeds {a} and {b} diverge (schedule {}):", self.policy)?;
        f.write_str(&self.diff)?;
        write!(f, "replay:\n  {}", self.replay)
    }
}

/// Why a stress run did not pass.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// The composition file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The composition is not valid (every diagnostic, with file:line).
    #[error("{file} is not a valid composition:\n{errors}")]
    Config {
        /// The file.
        file: String,
        /// The diagnostics, one per line.
        errors: String,
    },
    /// The exercise script could not be read, or the composition cannot be exercised.
    #[error(transparent)]
    Script(#[from] ExerciseError),
    /// An environment override is not a number.
    #[error("{name}=\"{value}\" is not {expected}")]
    Env {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// The tokio runtime could not be built.
    #[error("cannot build a tokio runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// One seed's exercise could not run.
    #[error("seed {seed}: {source}\nreplay:\n  {replay}")]
    Exercise {
        /// The seed.
        seed: u64,
        /// Why.
        source: ExerciseError,
        /// The command that runs this seed again.
        replay: String,
    },
    /// Disposing one seed's root left resources live.
    #[error("seed {seed}: disposing the root left live resources {live:?}\nreplay:\n  {replay}")]
    Leak {
        /// The seed.
        seed: u64,
        /// What was left.
        live: LiveCounts,
        /// The command that runs this seed again.
        replay: String,
    },
    /// Two seeds ended differently.
    #[error("{0}")]
    Diverged(Box<Divergence>),
}

impl StressError {
    /// The divergence, if that is what this is.
    pub fn divergence(&self) -> Option<&Divergence> {
        match self {
            StressError::Diverged(d) => Some(d),
            _ => None,
        }
    }
}

impl Stress {
    /// Registers one of your plugins beside the built-ins (replacing a built-in of its name).
    pub fn plugin(mut self, plugin: impl ErasedPlugin) -> Self {
        self.builtins.insert(plugin);
        self
    }

    /// Uses `table` instead of the standard plugin table.
    pub fn builtins(mut self, table: Builtins) -> Self {
        self.builtins = table;
        self
    }

    /// Runs `n` seeds (`CORDIS_STRESS_SEEDS` overrides it).
    pub fn seeds(mut self, n: u64) -> Self {
        self.seeds = n;
        self
    }

    /// Starts at seed `seed` instead of 0.
    pub fn start(mut self, seed: u64) -> Self {
        self.start = seed;
        self
    }

    /// The schedule policy (default `random`).
    pub fn schedule(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Exercises each seed with the script at `path` (see [`crate::exercise`]) after booting.
    pub fn exercise(mut self, path: impl AsRef<Path>) -> Self {
        self.script = Some(path.as_ref().to_owned());
        self
    }

    /// Runs exactly `seeds`, in order, whatever the budget (what `CORDIS_SEED` does).
    pub fn only_seeds(mut self, seeds: impl IntoIterator<Item = u64>) -> Self {
        self.only = Some(seeds.into_iter().collect());
        self
    }

    /// Reads the overrides (`CORDIS_STRESS_SEEDS`, `CORDIS_SEED`) and the composition's
    /// `${{ env.NAME }}` values through `lookup` instead of the process environment.
    pub fn env(mut self, lookup: impl Fn(&str) -> Option<String> + 'static) -> Self {
        self.env = Box::new(lookup);
        self
    }

    /// Runs every seed and panics on the first failure.
    ///
    /// # Panics
    /// On a divergence, with the two seeds, the diff and the replay command; on a leak, an
    /// exercise that cannot run, or a bad composition, with the reason.
    pub fn run(self) -> StressSummary {
        match self.try_run() {
            Ok(summary) => summary,
            Err(e) => panic!("cordis::testing: {e}"),
        }
    }

    /// Runs every seed, stopping at the first failure.
    ///
    /// # Errors
    /// A [`StressError::Diverged`] when two seeds end differently; the other variants when the
    /// run could not be made or a seed leaked.
    pub fn try_run(self) -> Result<StressSummary, StressError> {
        let seeds = self.seed_list()?;
        let plan = self.plan()?;
        let (plan, script) = match &self.script {
            None => (plan, None),
            Some(path) => {
                let script = ExerciseScript::load(path)?;
                (exercise_plan(&plan, &script)?, Some(script))
            }
        };
        let verbose = self.only.is_some() || (self.env)(SEED_ENV).is_some();
        let runtime = cordis_host::shutdown::current_thread().map_err(StressError::Runtime)?;
        let result = self.run_seeds(&runtime, &plan, script.as_ref(), &seeds, verbose);
        cordis_host::shutdown::end(runtime);
        result
    }

    fn run_seeds(
        &self,
        runtime: &tokio::runtime::Runtime,
        plan: &LoadPlan,
        script: Option<&ExerciseScript>,
        seeds: &[u64],
        verbose: bool,
    ) -> Result<StressSummary, StressError> {
        let mut first: Option<(u64, Value, Vec<u8>, String)> = None;
        for &seed in seeds {
            let schedule = Schedule::new(self.policy, seed);
            let (outcome, digest, live) = match script {
                None => runtime.block_on(boot_once(plan, schedule)),
                Some(script) => match runtime.block_on(exercise(plan, script, schedule)) {
                    Ok(run) => outcome_of(&run),
                    Err(source) => {
                        return Err(StressError::Exercise {
                            seed,
                            source,
                            replay: self.replay(&[seed]),
                        });
                    }
                },
            };
            if verbose {
                print_outcome(seed, self.policy, &outcome);
            }
            if !live.is_zero() {
                return Err(StressError::Leak {
                    seed,
                    live,
                    replay: self.replay(&[seed]),
                });
            }
            let bytes = canonical_bytes(&outcome);
            match &first {
                None => first = Some((seed, outcome, bytes, digest)),
                Some((a, first_outcome, first_bytes, _)) if *first_bytes != bytes => {
                    let mut diff = explain(first_outcome, *a, &outcome, seed);
                    if script.is_none() {
                        // The outcome names tools but holds only the header's digest; replay
                        // both seeds for the header itself, to show what in it differs.
                        let header =
                            |s| runtime.block_on(header_of(plan, Schedule::new(self.policy, s)));
                        let (x, y) = (header(*a), header(seed));
                        if x != y {
                            diff.push_str("  request header:\n");
                            diff.push_str(&leaf_diff(&x, *a, &y, seed).replace("\n  ", "\n    "));
                        }
                    }
                    return Err(StressError::Diverged(Box::new(Divergence {
                        policy: self.policy,
                        seeds: [*a, seed],
                        diff,
                        outcomes: [first_outcome.clone(), outcome],
                        replay: self.replay(&[*a, seed]),
                    })));
                }
                Some(_) => {}
            }
        }
        let (_, outcome, _, digest) = first.unwrap_or_default();
        Ok(StressSummary {
            seeds: seeds.to_vec(),
            policy: self.policy,
            digest,
            outcome,
        })
    }

    /// The seeds to run: `only_seeds`, else `CORDIS_SEED`, else the budget
    /// (`CORDIS_STRESS_SEEDS` or [`Stress::seeds`]) from the start seed.
    fn seed_list(&self) -> Result<Vec<u64>, StressError> {
        if let Some(only) = &self.only {
            return Ok(only.clone());
        }
        if let Some(text) = (self.env)(SEED_ENV) {
            return text
                .split(',')
                .map(|s| s.trim().parse::<u64>())
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|_| StressError::Env {
                    name: SEED_ENV,
                    value: text.clone(),
                    expected: "a seed or seeds separated by commas (unsigned 64-bit numbers)",
                });
        }
        let budget = match (self.env)(SEEDS_ENV) {
            None => self.seeds,
            Some(text) => text.trim().parse::<u64>().map_err(|_| StressError::Env {
                name: SEEDS_ENV,
                value: text.clone(),
                expected: "a number of seeds",
            })?,
        };
        Ok((0..budget).map(|k| self.start.wrapping_add(k)).collect())
    }

    fn plan(&self) -> Result<LoadPlan, StressError> {
        let file = self.config.display().to_string();
        let source = std::fs::read_to_string(&self.config).map_err(|source| StressError::Read {
            file: file.clone(),
            source,
        })?;
        let env = |name: &str| (self.env)(name);
        load_plan(
            &source,
            &file,
            &env,
            &self.builtins,
            &PlanOptions::default(),
        )
        .map_err(|errors| StressError::Config {
            file,
            errors: errors.to_string(),
        })
    }

    /// `CORDIS_SEED=… cargo test -p PACKAGE -- TEST --exact`, naming the running test when
    /// there is one (the test harness names each test's thread after it).
    fn replay(&self, seeds: &[u64]) -> String {
        let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
        let mut command = format!("{SEED_ENV}={} cargo test", list.join(","));
        // Not an override: cargo sets it for the test process it runs.
        if let Ok(package) = std::env::var("CARGO_PKG_NAME") {
            let _ = write!(command, " -p {package}");
        }
        if let Some(test) = std::thread::current().name().filter(|n| *n != "main") {
            let _ = write!(command, " -- {test} --exact");
        }
        command
    }
}

/// Boots `plan` under `schedule`, disposes, and returns the outcome, digest and what is left.
async fn boot_once(plan: &LoadPlan, schedule: Schedule) -> (Value, String, LiveCounts) {
    let root = Context::root_with(schedule);
    let report = boot(&root, plan).await;
    root.dispose();
    root.tasks_finished().await;
    (report.outcome(), report.digest, root.live())
}

/// The request header a boot of `plan` under `schedule` assembles, as JSON (a string for an
/// assembly that failed or found no system prompt).
async fn header_of(plan: &LoadPlan, schedule: Schedule) -> Value {
    let root = Context::root_with(schedule);
    boot(&root, plan).await;
    let header = match header_bytes(&root).await {
        HeaderBytes::Header(bytes) | HeaderBytes::NoPrompt(bytes) => {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        }
        HeaderBytes::Failed(message) => Value::String(format!("assemble failed: {message}")),
    };
    root.dispose();
    root.tasks_finished().await;
    header
}

/// A replayed seed's outcome on stderr: for an exercise the boot outcome and turn ends on one
/// line each and the session log one event per line (as `stress --print-log` prints it), so
/// two seeds' output can be diffed.
fn print_outcome(seed: u64, policy: Policy, outcome: &Value) {
    eprintln!("cordis::testing: seed {seed} (schedule {policy}):");
    match outcome["log"].as_array() {
        None => eprintln!("{outcome}"),
        Some(log) => {
            eprintln!("boot: {}", outcome["boot"]);
            eprintln!("turns: {}", outcome["turns"]);
            for event in log {
                eprintln!("{event}");
            }
        }
    }
}

fn outcome_of(run: &ExerciseOutcome) -> (Value, String, LiveCounts) {
    (run.comparable(), run.report.digest.clone(), run.live_after)
}

/// How two outcomes differ: for an exercise, any boot difference, the turn ends and the first
/// differing session event; for a boot, every differing leaf.
fn explain(a: &Value, seed_a: u64, b: &Value, seed_b: u64) -> String {
    let (Some(log_a), Some(log_b)) = (a["log"].as_array(), b["log"].as_array()) else {
        return leaf_diff(a, seed_a, b, seed_b);
    };
    let mut out = String::new();
    if a["boot"] != b["boot"] {
        out.push_str(&leaf_diff(&a["boot"], seed_a, &b["boot"], seed_b));
    }
    if a["turns"] != b["turns"] {
        let _ = writeln!(
            out,
            "  turn ends:\n    seed {seed_a}: {}\n    seed {seed_b}: {}",
            a["turns"], b["turns"]
        );
    }
    if let Some((i, x, y)) = crate::exercise::first_difference(log_a, log_b) {
        let show = |v: Option<Value>| v.map_or_else(|| "(no event)".to_owned(), |v| v.to_string());
        let _ = writeln!(out, "  first differing session event: #{i}");
        let _ = writeln!(out, "    seed {seed_a}: {}", show(x));
        let _ = writeln!(out, "    seed {seed_b}: {}", show(y));
    }
    out
}

/// Every leaf (by JSON path) whose value differs, in path order.
fn leaf_diff(a: &Value, seed_a: u64, b: &Value, seed_b: u64) -> String {
    let (mut fa, mut fb) = (Default::default(), Default::default());
    flatten(a, String::new(), &mut fa);
    flatten(b, String::new(), &mut fb);
    let mut keys: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for key in keys {
        let (x, y) = (fa.get(key), fb.get(key));
        if x != y {
            let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(absent)".to_owned());
            let _ = writeln!(
                out,
                "  {key}:\n    seed {seed_a}: {}\n    seed {seed_b}: {}",
                show(x),
                show(y)
            );
        }
    }
    out
}

fn flatten(v: &Value, path: String, out: &mut std::collections::BTreeMap<String, String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(v, format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, format!("{path}/{i}"), out);
            }
        }
        leaf => {
            out.insert(
                if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                },
                leaf.to_string(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_seed_budget_comes_from_the_builder_unless_the_environment_overrides_it() {
        let s = stress("x.yml").seeds(3).start(10).env(no_env);
        assert_eq!(s.seed_list().unwrap(), [10, 11, 12]);
        let s = stress("x.yml")
            .seeds(3)
            .env(|n| (n == SEEDS_ENV).then(|| "5".to_owned()));
        assert_eq!(s.seed_list().unwrap(), [0, 1, 2, 3, 4]);
        let s = stress("x.yml")
            .seeds(3)
            .env(|n| (n == SEED_ENV).then(|| "7, 9".to_owned()));
        assert_eq!(s.seed_list().unwrap(), [7, 9]);
        let s = stress("x.yml").env(|n| (n == SEED_ENV).then(|| "seven".to_owned()));
        let err = s.seed_list().unwrap_err().to_string();
        assert!(
            err.starts_with("CORDIS_SEED=\"seven\" is not a seed"),
            "{err}"
        );
    }

    #[test]
    fn a_boot_diff_names_each_differing_leaf_with_both_seeds() {
        let a = serde_json::json!({"entries": {"x": {"status": "active"}}, "digest": "1"});
        let b = serde_json::json!({"entries": {"x": {"status": "failed"}}, "digest": "1"});
        assert_eq!(
            explain(&a, 1, &b, 2),
            "  /entries/x/status:\n    seed 1: \"active\"\n    seed 2: \"failed\"\n"
        );
    }

    #[test]
    fn a_missing_composition_is_an_error_naming_the_file() {
        let err = stress("no/such/cordis.yml")
            .env(no_env)
            .try_run()
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read no/such/cordis.yml"),
            "{err}"
        );
    }

    #[test]
    fn the_bundled_composition_agrees_across_seeds_and_boot_only_leaves_nothing_live() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
        let summary = stress(path).seeds(20).env(no_env).run();
        assert_eq!(summary.seeds.len(), 20);
        assert!(!summary.digest.is_empty());
    }
}
