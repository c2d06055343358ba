//! `cordis run`: the stdio app. Boot a config, then talk to its agent over stdin/stdout.
//!
//! Input: at a terminal, a line editor (see `terminal`); otherwise one message per line (blank
//! lines are skipped). Either way a line that is exactly `"""` starts a
//! multi-line message that the next `"""` line ends. EOF ends the run: exit 0, or 1 when stdin
//! is not a terminal and a turn failed (so a script sees it).
//!
//! Output: piped input is echoed as `> line`; the assistant's text streams to stdout as it
//! arrives; each tool call is one readable line with its result summed up under it (see
//! `transcript`); failures, the session id and reload summaries go to stderr, so stdout is the
//! transcript alone.

mod conversation;
mod expand;
pub mod headless;
mod init;
mod live;
mod pick;
mod questions;
mod session_commands;
mod trust;

use crate::session::open::{OpenError, joined_preset};
use cordis_agent_loop::{Agent, AgentEvent, AgentLoop, AgentOptions, TurnError};
use cordis_agent_presets::AgentPresets;
use cordis_approvals::{Answer, ApprovalRequest};
use cordis_host::Builtins;
use cordis_host::loader::BootReport;
use cordis_host::reload::{LiveConfig, summary_line};
use cordis_host::watch::{ConfigWatcher, WatchNote};
use cordis_presenter::{Presenters, render_card};
use cordis_runtime::Context;
use cordis_session::{SessionStore, TurnEndReason};
use tokio::sync::mpsc;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordis_mcp::{ElicitationAnswer, ElicitationRequest};

use super::approve::{Asked, answer_of, approver_for};
use super::form::{Elicited, Filling, Step, terminal_elicitor};
use super::input::{Typed, kept_notice, spawn_reader};
use super::render::{safe, safe_lines};
use super::signals::{Signals, Stop};
use super::terminal::{Entered, Event, Terminal};
use super::transcript::{Style, Transcript};
use super::{
    ColorChoice, EXIT_CONFIG, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, Io, RunArgs, choose_seed,
};
use crate::session::commands;
use cordis_runtime::shell_word;

/// The question's text: the call's card (title and body) from its presenter.
fn question(root: &Context, request: &ApprovalRequest, style: Style) -> String {
    let name = &request.call.name;
    let shown = match root.get::<Presenters>() {
        Some(presenters) => {
            let p = presenters.present_approval(name, &request.call.arguments);
            let mut text = format!("{}\n", safe(&p.title));
            // A diff in its colours: shown here, once (the result then sums it up).
            for line in render_card(&p.card).lines() {
                text.push_str(&style.diff_line(&safe(line)));
                text.push('\n');
            }
            if let Some(more) = p.text.as_deref().filter(|t| !t.is_empty()) {
                text.push_str(&safe_lines(more));
                text.push('\n');
            }
            text
        }
        None => format!("{name} {}\n", safe(&request.call.arguments.to_string())),
    };
    let always = always_text(&request.grants);
    format!(
        "cordis: {} wants to run:\n{shown}cordis: allow {}? [y]es once, {always}, [N]o (or type why not) ",
        safe(name),
        safe(name)
    )
}

/// What `a` answers, from the grants it would make.
fn always_text(grants: &[cordis_approvals::Grant]) -> String {
    match cordis_approvals::Always::of(grants) {
        None => "[a] once too (this command cannot be granted for later)".to_owned(),
        Some(always) if !always.commands => "[a]lways this session".to_owned(),
        Some(always) => format!(
            "[a]lways {} this session{}",
            always.describe(|c| safe(c).into_owned()),
            always.suffix()
        ),
    }
}

/// The transcript's style: `--color`, with `auto` meaning a terminal and no NO_COLOR.
fn style_for(args: &RunArgs, io: &Io<'_>) -> Style {
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stdout()) && !super::no_color(io.env)
        }
    };
    Style::for_stdout(color)
}

/// A progress report of an MCP call as the terminal shows it while the call runs:
/// `  … mcp__fx__build: 3/10 compiling` (the tool's public name, the count, the message).
fn progress_line(p: &cordis_mcp::McpProgress) -> String {
    let count = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else {
            format!("{v:.1}")
        }
    };
    let done = match p.total {
        Some(total) => format!("{}/{}", count(p.progress), count(total)),
        None => count(p.progress),
    };
    let tool = cordis_mcp::public_name(&p.server, &p.tool);
    match p.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => format!("  … {}: {done} {}", safe(&tool), safe(message)),
        None => format!("  … {}: {done}", safe(&tool)),
    }
}

/// Which session the run talks on.
enum SessionChoice {
    New(String),
    Resume(String),
    /// `--fork PARENT[@SEQ]`: the new session `id`, forked once the store is booted.
    Fork {
        parent: String,
        at: Option<u64>,
        id: String,
    },
    /// The fork made; its session is held open until the agent joins it.
    Forked {
        id: String,
        _held: cordis_session::Session,
    },
    /// `--continue`: the most recently written session, found once the store is booted.
    Latest,
    /// `--resume` without an id: a picker at a terminal, else the recent sessions listed.
    List,
}

impl SessionChoice {
    fn id(&self) -> &str {
        match self {
            SessionChoice::New(id)
            | SessionChoice::Resume(id)
            | SessionChoice::Fork { id, .. }
            | SessionChoice::Forked { id, .. } => id,
            SessionChoice::Latest | SessionChoice::List => "",
        }
    }
}

/// `--continue` and a bare `--resume`, once the composition (and its session store) is up:
/// this project's newest session to resume (a new session when the project has none yet), or
/// the listing (`Err` with the exit code).
async fn resolve_choice(
    root: &Context,
    args: &RunArgs,
    choice: SessionChoice,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<SessionChoice, u8>> {
    match choice {
        SessionChoice::Latest => {
            let store = match super::sessions::store_of(root, &args.config.file) {
                Ok(store) => store,
                Err(why) => {
                    writeln!(io.err, "cordis: {why}")?;
                    return Ok(Err(EXIT_CONFIG));
                }
            };
            let project = crate::session::open::project_dir().unwrap_or_default();
            match crate::session::open::newest_of_project(&store, &project).await {
                Ok(Some(id)) => Ok(Ok(SessionChoice::Resume(id))),
                Ok(None) => {
                    if !args.quiet {
                        writeln!(
                            io.err,
                            "cordis: no session of {} yet (--continue resumes the newest session started in this directory); starting one",
                            safe(&project)
                        )?;
                    }
                    Ok(Ok(SessionChoice::New(crate::session::id::new_id())))
                }
                Err(e) => {
                    writeln!(io.err, "cordis: cannot list the sessions: {e}")?;
                    Ok(Err(EXIT_CONFIG))
                }
            }
        }
        SessionChoice::List if pick::at_terminal() && args.prompt.is_none() => {
            let color = style_for(args, io).color;
            match pick::pick_at_start(root, args, color, io).await? {
                Ok(Some(id)) => Ok(Ok(SessionChoice::Resume(id))),
                Ok(None) => {
                    writeln!(
                        io.err,
                        "cordis: no session chosen; `{program} run{}` starts a new one",
                        file_hint(args),
                        program = crate::cli::program::name()
                    )?;
                    Ok(Err(EXIT_OK))
                }
                Err(code) => Ok(Err(code)),
            }
        }
        SessionChoice::List => {
            let recent =
                match super::sessions::recent(root, &args.config.file, RECENT_SESSIONS).await {
                    Ok(recent) => recent,
                    Err(why) => {
                        writeln!(io.err, "cordis: {why}")?;
                        return Ok(Err(EXIT_CONFIG));
                    }
                };
            if recent.is_empty() {
                writeln!(
                    io.err,
                    "cordis: no session to continue yet; `{program} run{}` starts one",
                    file_hint(args),
                    program = crate::cli::program::name()
                )?;
            } else {
                write!(io.out, "{}", super::sessions::lines(&recent))?;
                writeln!(
                    io.err,
                    "cordis: continue one with: {program} run --resume ID{} (the newest of this directory: --continue)",
                    file_hint(args),
                    program = crate::cli::program::name()
                )?;
            }
            Ok(Err(EXIT_CONFIG))
        }
        SessionChoice::Fork { parent, at, id } => fork(root, &parent, at, id, io).await,
        other => Ok(Ok(other)),
    }
}

/// `--fork ID[@SEQ]` as its parent and seq.
fn fork_spec(spec: &str) -> Result<(String, Option<u64>), String> {
    match spec.split_once('@') {
        None => Ok((spec.to_owned(), None)),
        Some((parent, seq)) => match seq.parse::<u64>() {
            Ok(seq) => Ok((parent.to_owned(), Some(seq))),
            Err(_) => Err(format!(
                "--fork {}: SEQ must be an event number ({program} history ID shows them)",
                safe(spec),
                program = crate::cli::program::name()
            )),
        },
    }
}

/// Forks `parent` (through `at`) into the new session `id` of this directory, and says so.
async fn fork(
    root: &Context,
    parent: &str,
    at: Option<u64>,
    id: String,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<SessionChoice, u8>> {
    let Ok(agents) = crate::session::open::agent_loop(root) else {
        // No agent loop: the caller says so once the choice is checked.
        return Ok(Ok(SessionChoice::New(id)));
    };
    let cwd = crate::session::open::project_dir();
    match agents.sessions().fork(parent, at, &id, cwd).await {
        Ok(session) => {
            let copied = session.header().forked_at.unwrap_or(0);
            writeln!(
                io.err,
                "cordis: forked session {} through seq {} into new session {id}",
                safe(parent),
                copied.saturating_sub(1)
            )?;
            Ok(Ok(SessionChoice::Forked { id, _held: session }))
        }
        Err(e) => {
            writeln!(io.err, "cordis: {}", safe(&e.to_string()))?;
            Ok(Err(EXIT_CONFIG))
        }
    }
}

/// ` FILE` when the run's config is not the default one, for the commands cordis prints.
fn file_hint(args: &RunArgs) -> String {
    if args.config.file == std::path::Path::new("cordis.yml") {
        String::new()
    } else {
        format!(" {}", shell_word(&args.config.file.display().to_string()))
    }
}

/// Creates (or re-creates after a reload) the run's agent on its session (a new one records
/// this directory as its project), joined to `preset` (`None`: the roster's default) when the
/// config has an `agent-presets` roster.
async fn make_agent(
    root: &Context,
    args: &RunArgs,
    session_id: &str,
    preset: Option<&str>,
) -> Result<(Agent, std::sync::Arc<SessionStore>), NoAgent> {
    let agents =
        crate::session::open::agent_loop(root).map_err(|e| NoAgent::Other(e.to_string()))?;
    if let Some(existing) = agents.agent(&args.agent) {
        return Ok((existing, agents.sessions().clone()));
    }
    let model = args
        .model
        .clone()
        .or_else(|| agents.llm().default_model().map(str::to_owned))
        .unwrap_or_else(|| "default".to_owned());
    let mut options = AgentOptions::new(args.agent.clone(), model);
    options.session_id = Some(session_id.to_owned());
    options.cwd = crate::session::open::project_dir();
    match crate::session::open::join_agent(root, options, preset).await {
        Ok(agent) => Ok((agent, agents.sessions().clone())),
        Err(e @ OpenError::Locked { .. }) => Err(NoAgent::Locked(e)),
        Err(OpenError::NoRoster) => Err(NoAgent::Other(
            "--preset needs an `agent-presets` entry in the config (see the bundled cordis.yml)"
                .into(),
        )),
        Err(other) => Err(NoAgent::Other(other.to_string())),
    }
}

/// Why [`make_agent`] made no agent.
enum NoAgent {
    /// The session is open in another process (exit [`EXIT_LOCKED`]).
    Locked(OpenError),
    /// Anything else (exit [`EXIT_CONFIG`]).
    Other(String),
}

impl std::fmt::Display for NoAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAgent::Locked(why) => write!(
                f,
                "{why}; end it there first, or start a new session (without --resume)"
            ),
            NoAgent::Other(why) => write!(f, "{why}"),
        }
    }
}

fn print_boot_problems(report: &BootReport, io: &mut Io<'_>) -> std::io::Result<()> {
    for e in &report.entries {
        if e.status.is_as_configured() {
            continue;
        }
        let why = e.error.clone().unwrap_or_else(|| {
            if e.waiting_for.is_empty() {
                String::new()
            } else {
                format!("waiting for {}", e.waiting_for.join(", "))
            }
        });
        writeln!(
            io.err,
            "cordis: entry {} ({}) is {}: {}",
            safe(&e.id),
            safe(&e.name),
            e.status,
            safe(&why)
        )?;
    }
    if let Some(error) = &report.assembly_error {
        writeln!(
            io.err,
            "cordis: assembling the request failed: {}",
            safe(error)
        )?;
    }
    Ok(())
}

pub(crate) fn run(args: &RunArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    trust::settle(args, io, builtins)?;
    let seed = choose_seed(args.seed, io)?;
    let forked = match args.fork.as_deref().map(fork_spec) {
        Some(Ok((parent, at))) => Some(SessionChoice::Fork {
            parent,
            at,
            id: args
                .session
                .clone()
                .unwrap_or_else(crate::session::id::new_id),
        }),
        Some(Err(why)) => {
            writeln!(io.err, "cordis: {why}")?;
            return Ok(EXIT_CONFIG);
        }
        None => None,
    };
    let choice = match (forked, &args.resume, &args.session) {
        (Some(fork), _, _) => fork,
        (None, Some(_), Some(_)) => {
            writeln!(
                io.err,
                "cordis: give either --resume or --session, not both"
            )?;
            return Ok(EXIT_CONFIG);
        }
        (None, Some(id), None) if id.is_empty() => SessionChoice::List,
        (None, Some(id), None) => SessionChoice::Resume(id.clone()),
        (None, None, Some(id)) => SessionChoice::New(id.clone()),
        (None, None, None) if args.continue_last => SessionChoice::Latest,
        (None, None, None) => SessionChoice::New(crate::session::id::new_id()),
    };
    let rt = cordis_host::shutdown::current_thread()?;
    let result = match &args.prompt {
        Some(prompt) if prompt.trim().is_empty() => {
            writeln!(io.err, "cordis: --prompt is empty; give the task to run")?;
            Ok(EXIT_CONFIG)
        }
        Some(prompt) => rt.block_on(headless::run(args, prompt, choice, seed, io, builtins)),
        None => rt.block_on(run_session(args, choice, seed, io, builtins)),
    };
    cordis_host::shutdown::end(rt);
    result
}

/// Boots, opens the session, talks until EOF, then saves and disposes.
async fn run_session(
    args: &RunArgs,
    choice: SessionChoice,
    seed: u64,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<u8> {
    let config = &args.config;
    let mut watcher = if args.watch {
        Some(ConfigWatcher::new(&config.file)?)
    } else {
        None
    };
    let schedule = cordis_runtime::Schedule::new(args.policy(), seed);
    // A person at a terminal fills in MCP servers' forms and opens their pages; a piped run
    // declares neither at each server's handshake (it declines them).
    let person = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let modes = cordis_mcp::ElicitationModes {
        forms: person,
        pages: person,
    };
    let (live, report) = super::boot_live_with(config, schedule, io, builtins, Some(modes)).await?;
    let root = live.root().clone();
    print_boot_problems(&report, io)?;
    let (choice, agent, store) = match open_agent(&root, &report, args, choice, io).await? {
        Ok(opened) => opened,
        Err(code) => return Ok(code),
    };
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let editor = interactive && std::io::IsTerminal::is_terminal(&std::io::stdout());
    choose_permissions(args, &agent, io)?;
    announce(args, &root, &agent, &store, &choice, editor, io).await?;
    let approving = approver_for(args.yes, &args.approve, interactive);
    // The root's service is seen by every scope, reloads included; it goes with the root.
    let _approver = approving.service.map(|a| root.provide(a));
    // A person can fill in an MCP server's form; a piped run declines it (no one to ask).
    let (elicited, listening, _elicitor) = if interactive {
        let (elicitor, elicited, listening) = terminal_elicitor();
        let service = root.provide(cordis_mcp::Elicitation(Arc::new(elicitor)));
        (Some(elicited), Some(listening), Some(service))
    } else {
        (None, None, None)
    };
    let input = if editor {
        let terminal = Terminal::start()?;
        terminal.remember(user_messages(&agent));
        Input::Terminal(terminal)
    } else {
        Input::Lines(spawn_reader(interactive))
    };
    let mut conversation = Conversation {
        args,
        root: root.clone(),
        live,
        agent,
        transcript: Transcript::new(style_for(args, io)),
        failed_turns: 0,
        input,
        typed_ahead: VecDeque::new(),
        asked: approving.asked,
        elicited,
        listening,
        interactive,
        signals: Signals::install()?,
        interrupted_at: None,
        exiting: false,
    };
    // Whatever ended the talk (a terminal that can no longer be written to, too), the session
    // is flushed and the composition disposed before the error is told.
    let talked = conversation.talk(watcher.as_mut(), io).await;
    let finished = finish(conversation, io).await;
    talked?;
    finished
}

/// Settles the session choice and opens the run's agent on it. `Ok(Err(code))`: the run ends
/// with that exit code, the problem printed and the root disposed.
async fn open_agent(
    root: &Context,
    report: &BootReport,
    args: &RunArgs,
    choice: SessionChoice,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<(SessionChoice, Agent, Arc<SessionStore>), u8>> {
    let choice = match resolve_choice(root, args, choice, io).await? {
        Ok(choice) => choice,
        Err(code) => {
            root.dispose();
            return Ok(Err(code));
        }
    };
    if let Err(code) = check_session_choice(root, &choice, io)? {
        root.dispose();
        return Ok(Err(code));
    }
    if root.get::<AgentLoop>().is_none()
        && let Some(entry) = report
            .entries
            .iter()
            .find(|e| e.name == "agent-loop" && !e.status.is_as_configured())
    {
        // The file has the entries; something above kept them from starting.
        writeln!(
            io.err,
            "cordis: no agent to talk to: entry {} (agent-loop) is {}; fix the problems above",
            safe(&entry.id),
            entry.status
        )?;
        root.dispose();
        return Ok(Err(EXIT_CONFIG));
    }
    let preset = match session_preset(root, args, &choice, io).await? {
        Ok(preset) => preset,
        Err(code) => {
            root.dispose();
            return Ok(Err(code));
        }
    };
    let (agent, store) = match make_agent(root, args, choice.id(), preset.as_deref()).await {
        Ok(a) => a,
        Err(NoAgent::Locked(why)) => {
            root.dispose();
            writeln!(io.err, "cordis: {why}")?;
            return Ok(Err(EXIT_LOCKED));
        }
        Err(NoAgent::Other(message)) => {
            root.dispose();
            writeln!(io.err, "cordis: error: {message}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    Ok(Ok((choice, agent, store)))
}

/// Tells the person which session this is and how to talk to it (unless `--quiet`), and
/// which tools run commands outside the sandbox.
async fn announce(
    args: &RunArgs,
    root: &Context,
    agent: &Agent,
    store: &SessionStore,
    choice: &SessionChoice,
    editor: bool,
    io: &mut Io<'_>,
) -> anyhow::Result<()> {
    let shown = store
        .path_of(agent.session().id())
        .map_or_else(|| "in memory".to_owned(), |p| p.display().to_string());
    let verb = match choice {
        SessionChoice::Resume(_) => "resuming",
        SessionChoice::Forked { .. } => "forked",
        _ => "new",
    };
    let joined = joined_preset(root, agent)
        .map(|p| format!("; preset {}", safe(&p)))
        .into_iter()
        .chain(
            agent
                .permissions()
                .map(|p| format!("; permissions {}", p.mode)),
        )
        .collect::<String>();
    let keys = if editor {
        "Enter sends, \"\"\" starts a multi-line message, Esc or Ctrl-C cancels a turn, Ctrl-D exits, /help lists commands"
    } else {
        "one message per line, \"\"\" for multi-line, EOF to end"
    };
    if !args.quiet {
        writeln!(
            io.err,
            "cordis: {verb} session {} ({shown}); adapter {}{joined}; {keys}",
            agent.session().id(),
            root.get::<AgentLoop>().map_or_else(String::new, |l| l
                .llm()
                .adapter()
                .name()
                .to_owned()),
        )?;
    }
    if matches!(
        choice,
        SessionChoice::Resume(_) | SessionChoice::Forked { .. }
    ) && !args.quiet
    {
        show_recent(root, agent.session().id(), style_for(args, io), io).await?;
    }
    if args.watch && !args.quiet {
        writeln!(
            io.err,
            "cordis: watching {} for changes (applied between turns)",
            args.config.file.display()
        )?;
    }
    io.err.flush()?;

    if !args.quiet {
        for name in unsandboxed(root, agent) {
            writeln!(
                io.err,
                "cordis: note: {} runs commands outside the sandbox (its entry chose `sandbox: full-access` or `network: true`)",
                safe(&name)
            )?;
        }
    }
    Ok(())
}

/// After the talk: saves the session, disposes the root, says how to continue, and picks the
/// exit code.
async fn finish(conversation: Conversation<'_>, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let Conversation {
        args,
        live,
        agent,
        failed_turns,
        interactive,
        ..
    } = conversation;
    let id = agent.session().id().to_owned();
    agent.session().flush().await.ok();
    live.root().dispose();
    if failed_turns > 0 {
        writeln!(
            io.err,
            "cordis: {failed_turns} turn{} failed",
            if failed_turns == 1 { "" } else { "s" }
        )?;
    }
    writeln!(
        io.err,
        "cordis: session {id} saved; continue it with: {program} run --resume {id}{}",
        file_hint(args),
        program = crate::cli::program::name()
    )?;
    io.err.flush()?;
    // A script (stdin not a terminal) learns from the exit code that a turn failed; a person
    // at the terminal has read each failure already.
    Ok(if failed_turns > 0 && !interactive {
        EXIT_FAILURE
    } else {
        EXIT_OK
    })
}

/// The preset the run's agent joins: `--preset` for a new session (`None`: the roster's
/// default); for a resumed one, the preset its log records (the last `agent-preset/selected`,
/// else the header), which `--preset` may only repeat.
async fn session_preset(
    root: &Context,
    args: &RunArgs,
    choice: &SessionChoice,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<Option<String>, u8>> {
    let (SessionChoice::Resume(id) | SessionChoice::Forked { id, .. }) = choice else {
        return Ok(Ok(args.preset.clone()));
    };
    if root.get::<AgentPresets>().is_none() {
        return Ok(Ok(args.preset.clone()));
    }
    let recorded = recorded_preset(root, id).await;
    match (&args.preset, &recorded) {
        (Some(asked), Some(logged)) if asked != logged => {
            writeln!(
                io.err,
                "cordis: session {id} runs preset {}; --preset {} only chooses the preset of a new session",
                safe(logged),
                safe(asked)
            )?;
            Ok(Err(EXIT_CONFIG))
        }
        _ => Ok(Ok(recorded.or_else(|| args.preset.clone()))),
    }
}

/// A new session must not exist yet; a resumed one must.
fn check_session_choice(
    root: &Context,
    choice: &SessionChoice,
    io: &mut Io<'_>,
) -> std::io::Result<Result<(), u8>> {
    let Some(agents) = root.get::<AgentLoop>() else {
        return Ok(Ok(()));
    };
    if let Err(e) = cordis_session::check_id(choice.id()) {
        writeln!(io.err, "cordis: {}", safe(&e.to_string()))?;
        return Ok(Err(EXIT_CONFIG));
    }
    let store = agents.sessions();
    let exists = store.path_of(choice.id()).is_some_and(|p| p.exists());
    match choice {
        SessionChoice::New(id) if exists => {
            writeln!(
                io.err,
                "cordis: session {id} exists; continue it with --resume {id}"
            )?;
            Ok(Err(EXIT_CONFIG))
        }
        SessionChoice::Resume(id) if !exists => {
            let where_ = store.path_of(id).map_or_else(
                || "the sessions store is in memory (remove `memory: true` from the sessions entry)".to_owned(),
                |p| format!("no file {}", p.display()),
            );
            writeln!(io.err, "cordis: cannot resume session {id}: {where_}")?;
            Ok(Err(EXIT_CONFIG))
        }
        _ => Ok(Ok(())),
    }
}

/// The state of one `cordis run` conversation.
struct Conversation<'a> {
    args: &'a RunArgs,
    root: Context,
    live: LiveConfig,
    agent: Agent,
    transcript: Transcript,
    failed_turns: u64,
    /// What the user types: messages, and answers to approval questions.
    input: Input,
    /// Messages typed while a turn ran, before a question: the next messages, in order.
    typed_ahead: VecDeque<Typed>,
    /// Approval questions from the terminal approver (interactive runs only).
    asked: Option<mpsc::UnboundedReceiver<Asked>>,
    /// MCP servers' forms (interactive runs only).
    elicited: Option<mpsc::UnboundedReceiver<Elicited>>,
    /// Set while forms can be asked (a turn runs, or the run waits on a server).
    listening: Option<Arc<Mutex<bool>>>,
    /// stdin is a terminal (a person types).
    interactive: bool,
    /// Ctrl-C, SIGTERM, SIGHUP.
    signals: Signals,
    /// When Ctrl-C last cancelled a turn: another within [`DOUBLE_INTERRUPT`] ends the run.
    interrupted_at: Option<Instant>,
    /// The run ends once the current turn has.
    exiting: bool,
}

/// What came back for a question shown (see `Conversation::await_reply`).
enum Reply {
    /// The terminal's answer to it ([`Event::Answer`] or [`Event::Entered`]).
    Terminal(Event),
    /// A line read after it (line mode).
    Line(String),
    /// Ctrl-C or a signal: the turn is being cancelled.
    Interrupted,
    /// The input ended.
    Eof,
}

/// Something the run asks the person at the terminal while it waits on a turn or a server.
enum Question {
    /// A call's approval.
    Approval(Asked),
    /// An MCP server's form.
    Form(Elicited),
}

/// The next question, approvals first (pending forever in a run that asks none).
///
/// # Cancel safety
/// Cancel safe.
async fn next_question(
    asked: &mut Option<mpsc::UnboundedReceiver<Asked>>,
    elicited: &mut Option<mpsc::UnboundedReceiver<Elicited>>,
) -> Question {
    tokio::select! {
        biased;
        asked = recv_or_pending(asked) => Question::Approval(asked),
        form = recv_or_pending(elicited) => Question::Form(form),
    }
}

/// The next item of `rx`; pending forever without one, or once it is closed.
///
/// # Cancel safety
/// Cancel safe.
async fn recv_or_pending<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> T {
    match rx.as_mut() {
        Some(rx) => match rx.recv().await {
            Some(item) => item,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// At most this many messages typed while a turn runs wait for it to end.
const MAX_TYPED_AHEAD: usize = 32;

/// Two Ctrl-C within this end the run (the first cancels the turn).
const DOUBLE_INTERRUPT: Duration = Duration::from_secs(2);

/// Where the user's input comes from: the terminal's line editor and keys, or lines (piped
/// stdin, or a terminal whose output is redirected).
enum Input {
    Terminal(Terminal),
    Lines(super::input::Lines),
}

impl Input {
    /// The next thing typed (a line, in line mode, is an [`Event::Line`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    async fn next(&mut self) -> Option<Event> {
        match self {
            Input::Terminal(terminal) => terminal.next().await,
            Input::Lines(lines) => lines.recv().await.map(Event::Line),
        }
    }
}

/// The messages the user sent on the agent's session, oldest first (for arrow-up).
fn user_messages(agent: &Agent) -> Vec<String> {
    agent.session().with_events(|events| {
        events
            .iter()
            .filter_map(|e| e.data_as::<cordis_session::UserMessageData>().ok())
            .map(|m| m.content)
            .collect()
    })
}

/// The command tools the agent sees whose effects are not confined to the workspace.
fn unsandboxed(root: &Context, agent: &Agent) -> Vec<String> {
    let Some(registry) = root.get::<cordis_tools::ToolRegistry>() else {
        return Vec::new();
    };
    let scope = Some(agent.scope_key());
    registry
        .schemas(scope)
        .into_iter()
        .filter(|s| registry.effect(&s.name, scope) == Some((cordis_tools::Effect::Execute, false)))
        .map(|s| s.name)
        .collect()
}

/// Applies `--permissions` to a session the run opened (logged in it).
fn choose_permissions(args: &RunArgs, agent: &Agent, io: &mut Io<'_>) -> std::io::Result<()> {
    if let Some(mode) = args.permissions
        && let Err(e) = agent.set_permission_mode(mode)
    {
        writeln!(io.err, "cordis: --permissions {mode}: {e}")?;
    }
    Ok(())
}

/// The preset session `id`'s log records (`None` when it records none or cannot be read: then
/// opening it tells why).
async fn recorded_preset(root: &Context, id: &str) -> Option<String> {
    let agents = root.get::<AgentLoop>()?;
    agents.sessions().source(id).await.ok()?.preset()
}

/// How many sessions a bare `--resume` and `/resume` list.
const RECENT_SESSIONS: usize = 10;

/// How many of its last turns a resumed session shows.
const RECENT_TURNS: usize = 2;

/// The messages read to find them (a turn of many steps has as many assistant messages).
const RECENT_MESSAGES: usize = 64;

/// The last turns of session `id` (its messages and the tool calls between them), as its
/// transcript shows them (the live run's lines, in `style`), on stderr: where a resumed
/// conversation left off.
async fn show_recent(
    root: &Context,
    id: &str,
    style: Style,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    let history = cordis_history::History::of(root);
    let Ok(page) = history.history(id, None, Some(RECENT_MESSAGES)).await else {
        return Ok(());
    };
    let presenters = root.get::<Presenters>();
    let transcript = crate::session::transcript::TranscriptPage::of(&page, presenters.as_deref());
    let (items, older) = transcript.last_turns(RECENT_TURNS);
    if items.is_empty() {
        return Ok(());
    }
    let older = if older {
        format!(
            " (earlier turns: {} history {id})",
            crate::cli::program::name()
        )
    } else {
        String::new()
    };
    writeln!(io.err, "cordis: where session {id} left off{older}:")?;
    super::transcript::write_items(items, style, io.err)?;
    writeln!(io.err, "cordis: (end of the earlier turns)")?;
    Ok(())
}
