//! The `cordis` command line: `cordis run`, `cordis check`, `cordis stress`, `cordis permute`.
//!
//! The root package's binary calls [`main`]; tests call [`run`] with arguments and an [`Io`] that
//! captures output, so every command is testable without spawning a process.
//!
//! # Exit codes
//! `0` success; `1` an entry is not active (check), a divergence or leak (stress), or an internal
//! error; `2` a configuration or usage error.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use cordis_runtime::Policy;

use cordis_host::Builtins;
use cordis_host::plan::{LoadPlan, PlanOptions, load_plan};

mod acp;
mod approve;
mod cache;
mod call;
mod check;
pub mod ci;
mod form;
mod history;
mod input;
mod markdown;
mod mcp;
mod mentions;
mod permute;
mod plugin;
mod presets;
pub mod program;
pub(crate) mod render;
pub(crate) mod run;
mod serve;
pub(crate) mod sessions;
mod signals;
mod stress;
mod terminal;
mod transcript;
mod watch;

/// When `cordis run` colours its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Whether `NO_COLOR` asks for no colour (set and not empty, <https://no-color.org>).
pub(crate) fn no_color(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: an entry failed, seeds diverged, something leaked.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: configuration or usage error.
pub const EXIT_CONFIG: u8 = 2;
/// Exit code: `cordis run`'s session is open in another process.
pub const EXIT_LOCKED: u8 = 3;
/// Exit code: `cordis history`'s session does not exist.
pub const EXIT_NOT_FOUND: u8 = 4;

/// Run the AI agent a cordis.yml composes from plugins (`cordis run`), and prove the composition
/// loads the same in every order (`check`, `stress`, `permute`).
#[derive(Debug, Parser)]
#[command(name = "cordis", version = env!("CORDIS_VERSION"), long_about = None)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The `cordis` commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Talk to the configured agent: boot FILE, read your messages from stdin, stream answers.
    ///
    /// Input: one message per line (blank lines are skipped). For a multi-line message, put a
    /// line that is exactly """ before and after it. EOF (Ctrl-D, or the end of a piped file)
    /// ends the run with exit code 0.
    ///
    /// Output: the assistant's text streams to stdout (markdown rendered and wrapped on a
    /// terminal, plain when piped); each tool call is one line (`⏺ Read notes.txt`, `⏺ $ cargo
    /// test`) with its result summed up under it (`⎿ 12 lines`, an edit's diff, a command's
    /// exit code with the first and last lines of its output, `⎿ error CODE: MESSAGE`; `/expand`
    /// shows a call's whole output), coloured on a terminal (--color, NO_COLOR). A running
    /// command's last line and elapsed time show on stderr while it runs. Errors, the session
    /// id and reload summaries go to stderr. Keys: Esc or Ctrl-C cancels the running turn (a
    /// second Ctrl-C ends the run); at the prompt Ctrl-C clears a typed line, else ends the run;
    /// an approval question is answered by the line typed after it (y, a for always, Enter for
    /// no, or a reason); lines starting with / are commands (/help).
    ///
    /// The session log is `<root>/<ID>.jsonl` of the `sessions` entry (`.sessions/` in the
    /// bundled cordis.yml); a new run gets a fresh ID (printed on stderr), `--resume ID`
    /// continues one. The bundled cordis.yml uses the offline scripted demo adapter unless
    /// CORDIS_LLM=openai (then DEEPSEEK_API_KEY, CORDIS_BASE_URL, CORDIS_MODEL apply).
    ///
    /// Exits 0 at EOF; 1 when stdin is not a terminal and a turn failed; 2 on configuration
    /// errors (including a config without `agent-loop`); 3 when the session is open in another
    /// process (one writer per session). With --prompt: 0 done, 1 failed, cancelled or over
    /// budget, 2, 3 as above, 5 stopped by the step limit (--max-turns).
    Run(RunArgs),
    /// Boot a config once and print every entry's status, the assembly view and its digest.
    ///
    /// Exits 0 when every enabled entry is active, 1 otherwise, 2 on configuration errors.
    Check(CheckArgs),
    /// Boot a config once per seed and prove every boot ends the same (digest and statuses).
    ///
    /// Exits 0 when all seeds agree and nothing leaks, 1 on a divergence or a leak (printing
    /// both seeds, a diff and the commands that replay them), 2 on configuration errors.
    Stress(StressArgs),
    /// Boot a config once per class of load orders of its entries and prove one outcome.
    ///
    /// Every plugin entry is permuted. Entries whose footprints meet interact (a name both
    /// claim; an entry that has not said what it claims, so it may read what others registered;
    /// an optional service and its provider), and one order per class of orders that agree on
    /// every interacting pair is booted, when there are at most --max classes (else --max seeded
    /// shuffles); --all boots every order instead. Boots use the fifo schedule. The outcome is
    /// the request digest, every entry's status and reason, and the incidents. Exits 0 when
    /// every order gives one outcome with every entry where its config asked, 1 otherwise
    /// (naming what differs between two orders, with the command that replays each), 2 on
    /// configuration errors.
    Permute(PermuteArgs),
    /// Boot a config and call one tool with JSON arguments, printing its result.
    ///
    /// The call goes through the registry as a model's would (argument check against the tool's
    /// schema, guards and approvals, the handler), with the fifo schedule. Exits 0 when the tool
    /// succeeds (its result on stdout), 1 when it fails (the error on stderr), 2 on
    /// configuration or usage errors, 130 after Ctrl-C (an MCP server is told the call was
    /// cancelled before cordis exits). Example: cordis call cordis.yml todo_write '{"todos": []}'
    Call(CallArgs),
    /// Where third-party plugin libraries are copied before they load, and clearing it.
    ///
    /// Each user has a cache of their own ($CORDIS_DYLIB_CACHE, else
    /// $XDG_CACHE_HOME/cordis/dylib, else ~/.cache/cordis/dylib), created with mode 0700 and
    /// verified before every load. It is never pruned by itself: copies of changed libraries
    /// pile up until `cordis cache prune`.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// List the agent presets FILE's `agent-presets` entry finds: id, name, order, and why a
    /// broken one cannot be used.
    ///
    /// Presets are directories ROOT/ID/ holding agent.cordis.yml (and optionally preset.yml
    /// with name, description, order); roots are searched in order: the entry's `roots`, the
    /// user's ($XDG_CONFIG_HOME/cordis/agent-presets, else ~/.config/cordis/agent-presets), then
    /// the presets shipped with cordis. Exits 0, or 2 when FILE has no `agent-presets` entry.
    Presets(PresetsArgs),
    /// Serve the agent to an editor over the Agent Client Protocol on stdin/stdout.
    ///
    /// Editors that speak ACP (Zed: `agent_servers`) start `cordis acp [FILE]` and drive it with
    /// newline-delimited JSON-RPC on stdio; stdout carries only the protocol, logs go to stderr.
    /// Each session boots FILE with CORDIS_WORKSPACE set to the session's cwd (its workspace
    /// root); sessions are logged by FILE's `sessions` entry (a relative root is resolved
    /// against the directory `cordis acp` starts in) and `session/load` resumes them. Tools
    /// whose approval policy is `ask` are asked through the editor. Exits 0 when the client
    /// closes stdin, 2 on configuration errors.
    Acp(acp::AcpArgs),
    /// List the sessions of FILE's `sessions` entry, newest first; check or export one.
    ///
    /// Each line: id, when, turns, and the first message. `cordis run --resume ID` continues
    /// one, `cordis run --continue` the newest, `cordis run --fork ID` starts a new session
    /// from one. `--grep TEXT` lists only those whose messages contain TEXT; `sessions check
    /// ID` proves a session's cache-prefix contract, `sessions export ID --exercise OUT`
    /// writes it as an exercise script. Exits 0, or 2 when FILE keeps no sessions on disk.
    Sessions(sessions::SessionsArgs),
    /// Print one page of a session's history: its messages and tool cards, newest last.
    ///
    /// Boots FILE (default cordis.yml) and reads session ID from its `sessions` entry: the log
    /// on disk, never resuming the agent or taking the session's lock, so it works while
    /// `cordis run` is writing it. The page holds the last --max user and assistant messages
    /// (default 50) before --before SEQ (default: the end); `older events:` names the command
    /// for the page before. --json prints `{events: [{event, view?}], hasMore, projections?}`.
    /// Exits 0 on success, 4 when the session does not exist, 1 when its log cannot be read,
    /// 2 on configuration or usage errors.
    History(history::HistoryArgs),
    /// Serve a web view of FILE on 127.0.0.1: its entries and their states, the assembled
    /// request and its digest, its reloads (--watch), its sessions and their histories.
    ///
    /// The page also runs the agent: start a session or continue (or fork) one, send messages
    /// and slash commands, follow the answer and running commands' output live, answer
    /// approval questions and MCP servers' forms, read each session's usage. Sessions other
    /// processes write are followed live.
    ///
    /// Prints the URL to open on stdout: it carries a random token, without which the API
    /// answers 401; requests naming another host or origin are refused (403), and posts take
    /// JSON only (415). The page is shipped inside the binary and loads nothing from the
    /// network. --port 0 picks a free port. Ctrl-C stops it.
    Serve(serve::ServeArgs),
    /// Authorize cordis for an HTTP MCP server that asks for OAuth (`login`), or forget it
    /// (`logout`).
    ///
    /// An `mcp` entry whose server answers 401 stays pending with the reason "run `cordis mcp
    /// login SERVER`" until a grant is stored; tokens are renewed on their own after that.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Add a third-party plugin file (a shared library or a WebAssembly component) to a config,
    /// pinned and proven first; list, re-pin (`update`) or remove such entries.
    ///
    /// `add` copies the file into the project's plugin directory, pins its sha256 and appends
    /// its entry, writing the config only when the new composition passes `check` and the
    /// reduced permutation proof; the file's comments and layout are kept. See docs/plugins.md.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
}

/// Arguments of `cordis presets`.
#[derive(Debug, Clone, Args)]
pub struct PresetsArgs {
    /// What to load.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The subcommands of `cordis cache`.
#[derive(Debug, Clone, Subcommand)]
pub enum CacheCommand {
    /// Print the cache directory.
    Dir,
    /// Remove cached library copies (and leftover staging files); anything else in the
    /// directory is left alone. Running processes keep the copies they loaded.
    Prune {
        /// Only remove copies not modified for this long (e.g. 7d, 12h).
        #[arg(long, value_name = "DURATION", value_parser = ci::parse_duration)]
        older_than: Option<Duration>,
    },
}

/// Arguments of `cordis call`: `[FILE] TOOL [JSON]`.
#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// `[FILE] TOOL [JSON]`: the config (default cordis.yml), the tool's name, and its
    /// arguments as one JSON object (default `{}`).
    #[arg(value_name = "[FILE] TOOL [JSON]", num_args = 1..=3, required = true)]
    pub words: Vec<String>,
    /// Apply timeout in milliseconds for entries that set no `timeout` of their own.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Also allow plugin libraries from this directory (repeatable). Directories in
    /// CORDIS_PLUGIN_PATH (separated like PATH) are allowed too; the config file's directory
    /// always is.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
    /// How to schedule the boot [default: fifo].
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Allow the call if it would ask (without this, a call that would ask is denied: there is
    /// nobody to ask).
    #[arg(long)]
    pub yes: bool,
    /// Allow the call if TOOL is its tool and it would ask (repeatable).
    #[arg(long = "approve", value_name = "TOOL")]
    pub approve: Vec<String>,
}

impl CallArgs {
    /// The config, tool and arguments the words name: a last word that starts with `{` is the
    /// JSON; of the rest, one word is the tool, two are the file and the tool.
    pub fn split(&self) -> Result<(ConfigArgs, String, String), String> {
        let mut words = self.words.clone();
        let json = match words.last() {
            Some(last) if last.trim_start().starts_with('{') => words.pop(),
            _ => None,
        }
        .unwrap_or_else(|| "{}".to_owned());
        let (file, tool) = match words.as_slice() {
            [tool] => (PathBuf::from("cordis.yml"), tool.clone()),
            [file, tool] => (PathBuf::from(file), tool.clone()),
            _ => {
                return Err(format!(
                    "give [FILE] TOOL [JSON], e.g. {} call cordis.yml todo_write '{{\"todos\": []}}'",
                    program::name()
                ));
            }
        };
        let config = ConfigArgs {
            file,
            timeout_ms: self.timeout_ms,
            plugin_dirs: self.plugin_dirs.clone(),
        };
        Ok((config, tool, json))
    }
}

/// Where the config is and how its entries load: shared by every command that reads one.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// The config file.
    #[arg(default_value = "cordis.yml", value_name = "FILE")]
    pub file: PathBuf,
    /// Apply timeout in milliseconds for entries that set no `timeout` of their own.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Also allow plugin libraries from this directory (repeatable). Directories in
    /// CORDIS_PLUGIN_PATH (separated like PATH) are allowed too; the config file's directory
    /// always is.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
}

/// The schedule a boot runs under; each command has its own default policy.
#[derive(Debug, Clone, Copy, Args)]
pub struct ScheduleArgs {
    /// Schedule policy: fifo (no perturbation), random (seeded yields), pct or pct:DEPTH
    /// [default: random for check and stress, fifo for run and call].
    #[arg(long, value_name = "POLICY")]
    pub schedule: Option<Policy>,
}

impl ScheduleArgs {
    /// The policy asked for, else the command's `default`.
    pub fn policy_or(self, default: Policy) -> Policy {
        self.schedule.unwrap_or(default)
    }
}

/// Arguments of `cordis permute`.
#[derive(Debug, Clone, Args)]
pub struct PermuteArgs {
    /// What to load.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Boot one order per class of interacting orders when there are at most this many; else
    /// this many seeded shuffles.
    #[arg(long, value_name = "N", default_value_t = 40_320, value_parser = clap::value_parser!(u64).range(1..))]
    pub max: u64,
    /// Seed of the shuffles drawn when n! exceeds --max.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Worker threads, each with its own current-thread runtime [default: available cores].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Also mount agent preset ID and digest the assembly of its standing scope (the request an
    /// agent joined to it would get); its rows are not permuted.
    #[arg(long, value_name = "ID")]
    pub preset: Option<String>,
    /// Boot every order of every plugin entry (all n! up to --max, seeded shuffles beyond)
    /// instead of one per class of interacting orders: the brute-force check of the reduction.
    #[arg(long)]
    pub all: bool,
    /// Boot just this order (comma-separated entry ids, as a failure prints) and print its digest.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub order: Option<Vec<String>>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cordis check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// What to load.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to schedule the boot.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Seed of the schedule [default: $CORDIS_SEED, else taken from the clock and printed].
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Print one JSON object on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also mount agent preset ID (every row must become active) and print the assembly of a
    /// scope joined to it instead of the global one.
    #[arg(long, value_name = "ID", conflicts_with = "watch")]
    pub preset: Option<String>,
    /// Keep running and reload FILE whenever it changes: print a one-line summary per reload
    /// (added, removed, restarted, failed) and the new digest; an invalid edit is reported and
    /// the last good configuration keeps running. Stop with Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

impl CheckArgs {
    /// The policy of this check.
    pub fn policy(&self) -> Policy {
        self.schedule.policy_or(Policy::Random)
    }
}

/// Arguments of `cordis run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// What to load.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to schedule the boot.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Seed of the schedule [default: $CORDIS_SEED, else the clock].
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Continue the session ID (its log must exist); without ID, pick one at a terminal
    /// (this directory's sessions first, newest first), else list the recent sessions.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// Colour the transcript: `auto` when stdout is a terminal and NO_COLOR is unset.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorChoice,
    /// Continue the newest session started in this directory (its project), or start one when
    /// it has none; never another directory's.
    #[arg(long = "continue", conflicts_with_all = ["resume", "session"])]
    pub continue_last: bool,
    /// Start a new session whose history is session ID's through event SEQ (default: its
    /// end), cut back to the last complete turn; the fork belongs to this directory.
    #[arg(long, value_name = "ID[@SEQ]", conflicts_with_all = ["resume", "continue_last"])]
    pub fork: Option<String>,
    /// Start a new session with this ID instead of a generated one (it must not exist).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The agent preset a new session joins [default: the `agent-presets` entry's `default`];
    /// a resumed session keeps the one its log records. Type `/preset ID` before the first
    /// message to switch.
    #[arg(long, value_name = "ID")]
    pub preset: Option<String>,
    /// The agent id (an agent the config creates is used as it is).
    #[arg(long, value_name = "ID", default_value = "main")]
    pub agent: String,
    /// The model [default: the `llm` entry's `model`].
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Reload FILE whenever it changes (between turns); one summary line per reload on stderr.
    #[arg(long)]
    pub watch: bool,
    /// Allow every tool call that would ask, without asking.
    #[arg(long)]
    pub yes: bool,
    /// Trust this workspace: hooks from its own config file run (remembered for the directory;
    /// without it, such hooks are not run and the log says so).
    #[arg(long)]
    pub trust: bool,
    /// Allow calls of TOOL without asking (repeatable). Without a terminal, calls that would
    /// ask and are not named here (or by --yes) are denied and the model is told so.
    #[arg(long = "approve", value_name = "TOOL")]
    pub approve: Vec<String>,
    /// The permission mode of the sessions this run opens (recorded in each session's log):
    /// `ask` (every call that changes something asks), `auto` (calls confined to the workspace,
    /// such as sandboxed commands and the file tools, run without asking; the rest ask),
    /// `never-ask` (nothing asks: confined calls run, the rest are denied) [default: the
    /// approvals entry's `mode`, else the session's last choice].
    #[arg(long, value_name = "MODE")]
    pub permissions: Option<cordis_approvals::Mode>,
    /// Print only the conversation and errors: no session banner, no per-turn footer.
    #[arg(long, short = 'q', conflicts_with = "verbose")]
    pub quiet: bool,
    /// Headless: run PROMPT as one task and exit (for scripts and CI). Nothing is read from
    /// stdin; calls that would ask are denied unless --yes or --approve TOOL. Exit 0 done, 1
    /// failed or cancelled, 2 configuration, 3 the session is open elsewhere, 5 the step limit.
    #[arg(long, short = 'p', value_name = "PROMPT", conflicts_with = "watch")]
    pub prompt: Option<String>,
    /// With --prompt, the most model steps (requests) the task may take: it sets the
    /// `agent-loop` entry's `maxSteps` for this run. A task that needs more ends with status
    /// `turn-limit` and exit 5.
    #[arg(long, value_name = "N", requires = "prompt", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_turns: Option<u64>,
    /// With --prompt, what stdout holds: `text` (the answer, as a piped run prints it), `json`
    /// (one object at the end: sessionId, status, endReason, answer, usage, denied), or
    /// `stream-json` (every logged event as it happens, one JSON object a line, then that
    /// object with "type": "result").
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value = "text",
        requires = "prompt"
    )]
    pub output_format: run::headless::OutputFormat,
    /// Also log what cordis does (loading, model requests, tool calls) on stderr, at `info`
    /// (RUST_LOG, when set, decides instead).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

impl RunArgs {
    /// The policy of this run's boot.
    pub fn policy(&self) -> Policy {
        self.schedule.policy_or(Policy::Fifo)
    }
}

/// Arguments of `cordis stress`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct StressArgs {
    /// `merge`: combine shard reports instead of running seeds.
    #[command(subcommand)]
    pub merge: Option<StressCommand>,
    /// What to load.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to schedule each boot.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// How many seed indices to run (before sharding); with --time-budget, at most this many.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Run seeds until this much time is spent (e.g. 90s, 10m, 1h30m), then report how many
    /// ran; the seed range is cut where the budget ended.
    #[arg(long, value_name = "DURATION", value_parser = ci::parse_duration)]
    pub time_budget: Option<Duration>,
    /// The first seed; seed index k is START + k.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub start: u64,
    /// Run only seed indices k with k mod N == I (e.g. `--shard 2/8` in CI job 2 of 8).
    /// `--shard auto` takes I and N from the CI engine running this job: a Kubernetes Indexed
    /// Job (`JOB_COMPLETION_INDEX`, with `--shard-count`), GitLab (`CI_NODE_INDEX`/
    /// `CI_NODE_TOTAL`), Buildkite (`BUILDKITE_PARALLEL_JOB`/`_COUNT`) or CircleCI
    /// (`CIRCLE_NODE_INDEX`/`CIRCLE_NODE_TOTAL`); none set, or two disagreeing, is an error.
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<ShardArg>,
    /// With `--shard auto`: the shard count, for engines that give only the index (a
    /// Kubernetes Indexed Job's `completions`); where the engine gives one it must agree.
    #[arg(long, value_name = "N", requires = "shard", value_parser = clap::value_parser!(u64).range(1..))]
    pub shard_count: Option<u64>,
    /// Run seeds on N worker threads, each with its own runtime (default: the machine's
    /// available parallelism). The report, verdict and replay commands are the same for
    /// every N: outcomes are weighed in seed order, and a failure names the lowest seed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub jobs: Option<u64>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write a JUnit XML file: one test case for this shard, a failure carrying the replay
    /// commands.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write this shard's report (JSON) for `cordis stress merge`.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Also mount agent preset ID in each boot and compare the assembly of its standing scope
    /// (with --exercise, the agent joins it).
    #[arg(long, value_name = "ID")]
    pub preset: Option<String>,
    /// Exercise each boot: hold the scripted conversation in SCRIPT with the agent, dispose,
    /// and compare the whole session log (times scrubbed) besides the digest and statuses.
    /// SCRIPT is YAML: `turns: [messages]` and optional `responses: [...]` in the llm entry's
    /// scripted format (see docs/exercise.md).
    #[arg(long, value_name = "SCRIPT")]
    pub exercise: Option<PathBuf>,
    /// With --exercise: print each seed's scrubbed session log on stdout, one JSON event per
    /// line (what the replay commands use to show a divergence).
    #[arg(long, requires = "exercise")]
    pub print_log: bool,
}

/// The subcommands of `cordis stress`.
#[derive(Debug, Clone, Subcommand)]
pub enum StressCommand {
    /// Combine shard reports (`--report` files) into one verdict: seeds covered, gaps (seed
    /// indices no shard ran, e.g. a missing shard), and divergences. Exits 0 when the shards
    /// cover the whole planned range and agree, 1 otherwise, 2 when the files do not fit.
    Merge {
        /// The shard reports.
        #[arg(value_name = "REPORT", required = true)]
        reports: Vec<PathBuf>,
        /// The run had N shards: fail naming the shard indices with no report, and refuse
        /// two reports of one shard.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        expect: Option<u64>,
    },
}

impl StressArgs {
    /// The policy of every boot.
    pub fn policy(&self) -> Policy {
        self.schedule.policy_or(Policy::Random)
    }
}

/// `--shard`: a slice given as `I/N`, or `auto` (from the CI engine's environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardArg {
    /// Read the index and count from the CI engine's variables.
    Auto,
    /// The slice given.
    Fixed(Shard),
}

impl std::str::FromStr for ShardArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "auto" {
            Ok(ShardArg::Auto)
        } else {
            s.parse().map(ShardArg::Fixed)
        }
    }
}

/// A slice of the seed range: indices `k` with `k % count == index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard's index, below `count`.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("expected I/N (e.g. 0/4) or auto, found \"{s}\""))?;
        let index: u64 = i
            .trim()
            .parse()
            .map_err(|_| format!("shard index \"{i}\" is not a number"))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| format!("shard count \"{n}\" is not a number"))?;
        if count == 0 {
            return Err("the shard count must be at least 1".to_owned());
        }
        if index >= count {
            return Err(format!(
                "shard index {index} must be below the shard count {count} (indices start at 0)"
            ));
        }
        Ok(Shard { index, count })
    }
}

/// Where a command writes, and what it reads from the environment.
pub struct Io<'a> {
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Standard error.
    pub err: &'a mut dyn Write,
    /// Environment lookup (`CORDIS_SEED`, `CORDIS_PLUGIN_PATH`, `${{ env.NAME }}`): every
    /// command reads the environment through it, and nothing else.
    pub env: &'a (dyn Fn(&str) -> Option<String> + Sync),
    /// Draw a progress bar on stderr (a terminal) instead of periodic lines.
    pub progress: bool,
}

/// Runs `cordis` as a process: real arguments, stdout, stderr, environment; tracing to stderr.
pub fn main() -> ExitCode {
    main_with(&crate::builtins::standard())
}

/// Like [`main`], with a plugin table that may hold more than the host's own plugins.
pub fn main_with(builtins: &Builtins) -> ExitCode {
    // Tracing is set up once, for every command, before `run` parses the arguments: `run`'s
    // `--verbose`/`--quiet` are looked for among the raw ones (as OS strings: an argument
    // that is not UTF-8 is clap's to report, not a panic here).
    let args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .collect();
    let has = |flags: [&str; 2]| args.iter().any(|a| flags.iter().any(|f| a == f));
    let level = if args.first().is_none_or(|a| a != "run") {
        "warn"
    } else if has(["--verbose", "-v"]) {
        "info"
    } else if has(["--quiet", "-q"]) {
        "error"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && !no_color(&|k| std::env::var(k).ok()))
        .try_init();
    // Plugin panics are contained by the runtime; print each as one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string payload".to_owned());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("cordis: panic: {message}{at}");
    }));
    // Unlocked handles: each write takes the stream's lock only for that write. Holding the
    // locks for the whole command starves every other writer — the stdin reader's prompt, a
    // plugin logging from a blocking thread — and hangs the command.
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let progress = err.is_terminal();
    let env = |name: &str| std::env::var(name).ok();
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        env: &env,
        progress,
    };
    let code = run(std::env::args_os(), &mut io, builtins);
    // Session writers are detached threads: an exit that outran one would lose its last
    // lines' sync and leave its `.lock` file. Bounded, so a stuck disk cannot hold the exit.
    if !cordis_session::settle(SESSION_SETTLE) {
        let _ = writeln!(
            io.err,
            "cordis: warning: a session log was still being written at exit (its lock file may stay)"
        );
    }
    ExitCode::from(code)
}

/// How long an exiting `cordis` waits for its session writers to finish.
const SESSION_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `cordis` with `args` (the first is the program name) and returns the exit code.
pub fn run<I, T>(args: I, io: &mut Io<'_>, builtins: &Builtins) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    program::invoked_as(args.first().map(OsString::as_os_str));
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            let code = e.exit_code();
            if code == 0 {
                let _ = write!(io.out, "{text}");
                return EXIT_OK;
            }
            let _ = write!(io.err, "{text}");
            return EXIT_CONFIG;
        }
    };
    let result = match &cli.command {
        Command::Run(args) => run::run(args, io, builtins),
        Command::Check(args) => check::run(args, io, builtins),
        Command::Stress(args) => stress::run(args, io, builtins),
        Command::Permute(args) => permute::run(args, io, builtins),
        Command::Call(args) => call::run(args, io, builtins),
        Command::Cache(command) => cache::run(command, io),
        Command::Presets(args) => presets::run(args, io, builtins),
        Command::Acp(args) => acp::run(args, io, builtins),
        Command::History(args) => history::run(args, io, builtins),
        Command::Sessions(args) => sessions::run(args, io, builtins),
        Command::Serve(args) => serve::run(args, io, builtins),
        Command::Mcp(command) => mcp::run(command, io, builtins),
        Command::Plugin(command) => plugin::run(command, io, builtins),
    };
    match result {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<Exit>() {
            // Already explained where it happened.
            Some(Exit(code)) => *code,
            None => {
                let _ = writeln!(io.err, "cordis: error: {e:#}");
                EXIT_FAILURE
            }
        },
    }
}

/// Ends a command early with an exit code, after the command has printed why: the one error
/// that [`run`] turns into a code without printing anything more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// Resolution options from the command line and `CORDIS_PLUGIN_PATH`.
fn plan_options(args: &ConfigArgs, io: &Io<'_>) -> PlanOptions {
    let mut plugin_dirs = args.plugin_dirs.clone();
    if let Some(path) = (io.env)("CORDIS_PLUGIN_PATH") {
        plugin_dirs.extend(std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()));
    }
    PlanOptions {
        default_timeout: Duration::from_millis(args.timeout_ms),
        plugin_dirs,
        config_dir: None,
    }
}

/// Reads and resolves the config; on errors prints them all and exits 2.
fn load(args: &ConfigArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<LoadPlan> {
    let file = args.file.display().to_string();
    let source = match std::fs::read_to_string(&args.file) {
        Ok(s) => s,
        Err(e) => {
            writeln!(io.err, "cordis: cannot read {file}: {e}")?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    let options = plan_options(args, io);
    let builtins = &crate::builtins::for_config(builtins, &args.file, &options, io.env);
    match load_plan(&source, &file, io.env, builtins, &options) {
        Ok(plan) => Ok(plan),
        Err(errors) => {
            print_config_errors(&errors, &file, io)?;
            Err(Exit(EXIT_CONFIG).into())
        }
    }
}

/// Prints every diagnostic on stderr, escaped (a diagnostic quotes the file, and the file is
/// untrusted text); returns how many.
fn print_diagnostics(
    errors: &cordis_host::diagnostic::ConfigErrors,
    io: &mut Io<'_>,
) -> std::io::Result<usize> {
    for d in errors.diagnostics() {
        writeln!(io.err, "{}", render::safe_lines(&d.to_string()))?;
    }
    Ok(errors.diagnostics().len())
}

/// Prints every diagnostic of a file, then one line counting them.
pub(crate) fn print_config_errors(
    errors: &cordis_host::diagnostic::ConfigErrors,
    file: &str,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    let n = print_diagnostics(errors, io)?;
    writeln!(
        io.err,
        "cordis: {n} configuration error{} in {file}",
        if n == 1 { "" } else { "s" }
    )
}

/// Prints why an edited file was not applied, and that the last good configuration runs on.
pub(crate) fn print_rejected_reload(
    errors: &cordis_host::diagnostic::ConfigErrors,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    let n = print_diagnostics(errors, io)?;
    let widens = errors
        .diagnostics()
        .iter()
        .all(|d| matches!(d.problem, cordis_host::diagnostic::Problem::Widens { .. }));
    if widens {
        return writeln!(
            io.err,
            "cordis: reload refused: it would let more run without a question; still running the last configuration"
        );
    }
    writeln!(
        io.err,
        "cordis: reload rejected ({n} configuration error{}); still running the last good configuration",
        if n == 1 { "" } else { "s" }
    )
}

/// Says on stderr that watching was interrupted or works again.
pub(crate) fn print_watch_note(
    note: &cordis_host::watch::WatchNote,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    use cordis_host::watch::WatchNote;
    match note {
        WatchNote::Changed => Ok(()),
        WatchNote::Interrupted(why) => writeln!(
            io.err,
            "cordis: watching interrupted: {}",
            render::safe(why)
        ),
        WatchNote::Resumed => writeln!(io.err, "cordis: watching again"),
    }?;
    io.err.flush()
}

/// Reads the config and boots it into a live, reloadable runtime (`run`, `check --watch`);
/// on errors prints them and exits 2.
pub(crate) async fn boot_live(
    config: &ConfigArgs,
    schedule: cordis_runtime::Schedule,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<(
    cordis_host::reload::LiveConfig,
    cordis_host::loader::BootReport,
)> {
    boot_live_with(config, schedule, io, builtins, None).await
}

/// [`boot_live`] for a front end that says what it shows of MCP servers' questions
/// (`elicitation`, provided before the boot: each server's handshake declares it).
pub(crate) async fn boot_live_with(
    config: &ConfigArgs,
    schedule: cordis_runtime::Schedule,
    io: &mut Io<'_>,
    builtins: &Builtins,
    elicitation: Option<cordis_mcp::ElicitationModes>,
) -> anyhow::Result<(
    cordis_host::reload::LiveConfig,
    cordis_host::loader::BootReport,
)> {
    let file = config.file.display().to_string();
    let source = match read_config(&config.file).await {
        Ok(s) => s,
        Err(e) => {
            writeln!(io.err, "cordis: cannot read {file}: {e}")?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    let options = plan_options(config, io);
    let builtins = &crate::builtins::for_config(builtins, &config.file, &options, io.env);
    let root = cordis_runtime::Context::root_with(schedule);
    if let Some(modes) = elicitation {
        root.provide(modes)?;
    }
    let env = io.env;
    match cordis_host::reload::LiveConfig::boot(
        root,
        &source,
        &file,
        env,
        builtins.clone(),
        options,
    )
    .await
    {
        Ok(booted) => Ok(booted),
        Err(errors) => {
            print_config_errors(&errors, &file, io)?;
            Err(Exit(EXIT_CONFIG).into())
        }
    }
}

/// Reads a config file on a blocking thread, so a slow disk never stalls the runtime.
pub(crate) async fn read_config(path: &std::path::Path) -> std::io::Result<String> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// The seed: `--seed`, else `$CORDIS_SEED`, else the clock.
fn choose_seed(flag: Option<u64>, io: &mut Io<'_>) -> anyhow::Result<u64> {
    if let Some(seed) = flag {
        return Ok(seed);
    }
    if let Some(text) = (io.env)("CORDIS_SEED") {
        return match text.trim().parse::<u64>() {
            Ok(seed) => Ok(seed),
            Err(_) => {
                writeln!(
                    io.err,
                    "cordis: CORDIS_SEED=\"{}\" is not a seed (an unsigned 64-bit number)",
                    render::safe(&text)
                )?;
                Err(Exit(EXIT_CONFIG).into())
            }
        };
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_nanos();
    // Keep it short enough to type.
    Ok(u64::try_from(nanos % 1_000_000_000).unwrap_or(0))
}

/// The command that replays one seed.
pub fn replay_command(file: &std::path::Path, seed: u64, policy: Policy) -> String {
    let file = cordis_runtime::shell_word(&file.display().to_string());
    let program = program::name();
    format!("{program} check {file} --seed {seed} --schedule {policy}")
}
