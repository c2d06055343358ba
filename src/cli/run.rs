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

use cordis_agent_loop::{Agent, AgentEvent, AgentLoop, AgentOptions, CreateAgentError, TurnError};
use cordis_agent_presets::{AgentPresets, JoinError};
use cordis_approvals::{Answer, ApprovalRequest};
use cordis_host::Builtins;
use cordis_host::loader::BootReport;
use cordis_host::reload::{LiveConfig, summary_line};
use cordis_host::watch::{ConfigWatcher, WatchNote};
use cordis_presenter::{Presenters, render_card};
use cordis_runtime::Context;
use cordis_session::{SessionError, SessionStore, TurnEndReason};
use tokio::sync::mpsc;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordis_mcp::{ElicitationAnswer, ElicitationRequest};

use super::approve::{Asked, answer_of, approver_for};
use super::commands;
use super::form::{Elicited, Filling, Step, terminal_elicitor};
use super::input::{Typed, kept_notice, spawn_reader};
use super::render::{safe, safe_lines};
use super::signals::{Signals, Stop};
use super::terminal::{Entered, Event, Terminal};
use super::transcript::{Style, Transcript};
use super::{
    ColorChoice, EXIT_CONFIG, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, Io, RunArgs, choose_seed,
};
use cordis_runtime::shell_word;

/// The question's text: the call's card (title and body) from its presenter.
fn question(root: &Context, request: &ApprovalRequest) -> String {
    let name = &request.call.name;
    let shown = match root.get::<Presenters>() {
        Some(presenters) => {
            let p = presenters.present_approval(name, &request.call.arguments);
            let mut text = format!("{}\n", safe(&p.title));
            let card = render_card(&p.card);
            if !card.is_empty() {
                text.push_str(&safe_lines(&card));
                if !card.ends_with('\n') {
                    text.push('\n');
                }
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
    Style { color }
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

/// A new session id: `YYYYMMDD-HHMMSS-NNN` (UTC, milliseconds).
fn new_session_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let (y, m, d, hh, mm, ss) = super::sessions::civil(ms);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}-{:03}", ms % 1000)
}

/// Which session the run talks on.
enum SessionChoice {
    New(String),
    Resume(String),
    /// `--continue`: the most recently written session, found once the store is booted.
    Latest,
    /// `--resume` without an id: list the recent sessions and stop.
    List,
}

impl SessionChoice {
    fn id(&self) -> &str {
        match self {
            SessionChoice::New(id) | SessionChoice::Resume(id) => id,
            SessionChoice::Latest | SessionChoice::List => "",
        }
    }
}

/// `--continue` and a bare `--resume`, once the composition (and its session store) is up:
/// the newest session to resume, or the listing (`Err` with the exit code).
async fn resolve_choice(
    root: &Context,
    args: &RunArgs,
    choice: SessionChoice,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<SessionChoice, u8>> {
    if !matches!(choice, SessionChoice::Latest | SessionChoice::List) {
        return Ok(Ok(choice));
    }
    let limit = if matches!(choice, SessionChoice::Latest) {
        1
    } else {
        RECENT_SESSIONS
    };
    let recent = match super::sessions::recent(root, &args.config.file, limit).await {
        Ok(recent) => recent,
        Err(why) => {
            writeln!(io.err, "cordis: {why}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    match (choice, recent.first()) {
        (_, None) => {
            writeln!(
                io.err,
                "cordis: no session to continue yet; `cordis run{}` starts one",
                file_hint(args)
            )?;
            Ok(Err(EXIT_CONFIG))
        }
        (SessionChoice::Latest, Some(newest)) => Ok(Ok(SessionChoice::Resume(newest.id.clone()))),
        (_, Some(_)) => {
            write!(io.out, "{}", super::sessions::lines(&recent))?;
            writeln!(
                io.err,
                "cordis: continue one with: cordis run --resume ID{} (the newest: --continue)",
                file_hint(args)
            )?;
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

/// Creates (or re-creates after a reload) the run's agent on its session, joined to `preset`
/// (`None`: the roster's default) when the config has an `agent-presets` roster.
async fn make_agent(
    root: &Context,
    args: &RunArgs,
    session_id: &str,
    preset: Option<&str>,
) -> Result<(Agent, std::sync::Arc<SessionStore>), NoAgent> {
    let Some(agents) = root.get::<AgentLoop>() else {
        return Err(NoAgent::Other(
            "the configuration provides no `agent-loop` service: add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)"
                .into(),
        ));
    };
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
    let agent = match root.get::<AgentPresets>() {
        Some(roster) => match roster.create_agent(&agents, options, preset).await {
            Ok((agent, _)) => agent,
            Err(JoinError::Create(e)) => return Err(no_agent(&e)),
            // A preset that did not mount: the roster's message says which and why.
            Err(other) => return Err(NoAgent::Other(other.to_string())),
        },
        None if preset.is_some() => {
            return Err(NoAgent::Other(
                "--preset needs an `agent-presets` entry in the config (see the bundled cordis.yml)"
                    .into(),
            ));
        }
        None => agents
            .create_agent(options)
            .await
            .map_err(|e| no_agent(&e))?,
    };
    Ok((agent, agents.sessions().clone()))
}

/// How a failed agent creation is told.
fn no_agent(e: &CreateAgentError) -> NoAgent {
    match e {
        CreateAgentError::Session {
            source: SessionError::SessionLocked { id, pid },
            ..
        } => {
            let holder =
                pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"));
            NoAgent::Locked(format!(
                "session {id} is open in {holder}; end it there first, or start a new session (without --resume)"
            ))
        }
        other => NoAgent::Other(other.to_string()),
    }
}

/// Why [`make_agent`] made no agent.
enum NoAgent {
    /// The session is open in another process (exit [`EXIT_LOCKED`]).
    Locked(String),
    /// Anything else (exit [`EXIT_CONFIG`]).
    Other(String),
}

impl std::fmt::Display for NoAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAgent::Locked(why) | NoAgent::Other(why) => f.write_str(why),
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
    let seed = choose_seed(args.seed, io)?;
    let choice = match (&args.resume, &args.session) {
        (Some(_), Some(_)) => {
            writeln!(
                io.err,
                "cordis: give either --resume or --session, not both"
            )?;
            return Ok(EXIT_CONFIG);
        }
        (Some(id), None) if id.is_empty() => SessionChoice::List,
        (Some(id), None) => SessionChoice::Resume(id.clone()),
        (None, Some(id)) => SessionChoice::New(id.clone()),
        (None, None) if args.continue_last => SessionChoice::Latest,
        (None, None) => SessionChoice::New(new_session_id()),
    };
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(run_session(args, choice, seed, io, builtins));
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
    let (live, report) = super::boot_live(config, schedule, io, builtins).await?;
    let root = live.root().clone();
    print_boot_problems(&report, io)?;
    let choice = match resolve_choice(&root, args, choice, io).await? {
        Ok(choice) => choice,
        Err(code) => {
            root.dispose();
            return Ok(code);
        }
    };
    let choice = &choice;
    if let Err(code) = check_session_choice(&root, choice, io)? {
        root.dispose();
        return Ok(code);
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
        return Ok(EXIT_CONFIG);
    }
    let preset = match session_preset(&root, args, choice, io).await? {
        Ok(preset) => preset,
        Err(code) => {
            root.dispose();
            return Ok(code);
        }
    };
    let (agent, store) = match make_agent(&root, args, choice.id(), preset.as_deref()).await {
        Ok(a) => a,
        Err(NoAgent::Locked(why)) => {
            root.dispose();
            writeln!(io.err, "cordis: {why}")?;
            return Ok(EXIT_LOCKED);
        }
        Err(NoAgent::Other(message)) => {
            root.dispose();
            writeln!(io.err, "cordis: error: {message}")?;
            return Ok(EXIT_CONFIG);
        }
    };
    let shown = store
        .path_of(agent.session().id())
        .map_or_else(|| "in memory".to_owned(), |p| p.display().to_string());
    let verb = if matches!(choice, SessionChoice::Resume(_)) {
        "resuming"
    } else {
        "new"
    };
    choose_permissions(args, &agent, io)?;
    let joined = joined_preset(&root, &agent)
        .map(|p| format!("; preset {}", safe(&p)))
        .into_iter()
        .chain(
            agent
                .permissions()
                .map(|p| format!("; permissions {}", p.mode)),
        )
        .collect::<String>();
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let editor = interactive && std::io::IsTerminal::is_terminal(&std::io::stdout());
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
    if matches!(choice, SessionChoice::Resume(_)) && !args.quiet {
        show_recent(&root, agent.session().id(), io).await?;
    }
    if args.watch && !args.quiet {
        writeln!(
            io.err,
            "cordis: watching {} for changes (applied between turns)",
            config.file.display()
        )?;
    }
    io.err.flush()?;

    if !args.quiet {
        for name in unsandboxed(&root, &agent) {
            writeln!(
                io.err,
                "cordis: note: {} runs commands outside the sandbox (its entry chose `sandbox: full-access` or `network: true`)",
                safe(&name)
            )?;
        }
    }
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
    conversation.talk(watcher.as_mut(), io).await?;

    let Conversation {
        live,
        agent,
        failed_turns,
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
        "cordis: session {id} saved; continue it with: cordis run --resume {id}{}",
        file_hint(args)
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
    let SessionChoice::Resume(id) = choice else {
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

/// The model answers that reported usage in the agent's log from event `from` on, and their
/// input and output tokens.
pub(crate) fn usage_since(agent: &Agent, from: usize) -> (u64, u64, u64) {
    agent.session().with_events(|events| {
        events
            .iter()
            .skip(from)
            .filter_map(|e| e.data_as::<cordis_session::AssistantMessageData>().ok())
            .filter_map(|m| m.usage)
            .fold((0u64, 0u64, 0u64), |(n, i, o), u| {
                (n + 1, i + u.input_tokens, o + u.output_tokens)
            })
    })
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

/// The preset the agent's scope is joined to now: its live chain, not the log's record
/// (`None` without a roster).
fn joined_preset(root: &Context, agent: &Agent) -> Option<String> {
    root.get::<AgentPresets>()
        .and_then(|roster| roster.composed_preset(agent.scope_key()))
        .map(|s| s.preset)
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

/// The last turns of session `id` (its messages and the tool calls between them), from the
/// history service, on stderr: where a resumed conversation left off.
async fn show_recent(root: &Context, id: &str, io: &mut Io<'_>) -> std::io::Result<()> {
    let history = cordis_history::History::of(root);
    let Ok(page) = history.history(id, None, Some(RECENT_MESSAGES)).await else {
        return Ok(());
    };
    let starts: Vec<usize> = page
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.event.kind == cordis_session::kinds::USER_MESSAGE)
        .map(|(i, _)| i)
        .collect();
    let Some(&from) = starts.get(starts.len().saturating_sub(RECENT_TURNS)) else {
        return Ok(());
    };
    let older = if page.has_more || starts.len() > RECENT_TURNS {
        format!(" (earlier turns: cordis history {id})")
    } else {
        String::new()
    };
    writeln!(io.err, "cordis: where session {id} left off{older}:")?;
    for entry in &page.events[from..] {
        super::history::print_entry(entry, io.err)?;
    }
    writeln!(io.err, "cordis: (end of the earlier turns)")?;
    Ok(())
}

impl Conversation<'_> {
    /// Reads messages until EOF, running one turn each; applies config edits between turns.
    async fn talk(
        &mut self,
        mut watcher: Option<&mut ConfigWatcher>,
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        let interactive = self.interactive;
        // Every event of the run's agent, in log order.
        let (etx, mut events) = mpsc::unbounded_channel::<AgentEvent>();
        let _listener = self.root.on::<AgentEvent>(move |e| {
            let _ = etx.send(e.clone());
        });
        // MCP servers' progress on long calls, and pages they say are done, shown while the
        // call runs (not logged).
        let (ptx, mut progress) = mpsc::unbounded_channel::<String>();
        let page_tx = ptx.clone();
        let _progress_listener = self.root.on::<cordis_mcp::McpProgress>(move |e| {
            let _ = ptx.send(progress_line(e));
        });
        let _page_listener = self.root.on::<cordis_mcp::McpPageDone>(move |e| {
            let _ = page_tx.send(format!(
                "cordis: {} says the page is done ({})",
                safe(&e.server),
                safe(&e.id)
            ));
        });
        loop {
            if self.exiting {
                break;
            }
            let typed = match self.typed_ahead.pop_front() {
                Some(message) => {
                    if interactive {
                        writeln!(io.err, "> {}", safe_lines(&message.text))?;
                    }
                    message
                }
                None => match self.read_message(&mut watcher, io).await? {
                    Some(message) => message,
                    None => break,
                },
            };
            let Typed {
                text: message,
                fenced,
                ..
            } = typed;
            if message.trim().is_empty() {
                continue;
            }
            let line = if fenced {
                commands::Line::Message(&message)
            } else {
                commands::parse(&message)
            };
            // A prompt of an MCP server, run as a command: its rendering is the message.
            let expanded = match line {
                commands::Line::Unknown(_) => {
                    let root = self.root.clone();
                    match self
                        .serving(super::prompts::expand(&root, &message), io)
                        .await?
                    {
                        Some(expanded) => expanded,
                        None => continue,
                    }
                }
                _ => None,
            };
            let message = match (line, expanded) {
                (_, Some(Ok(text))) => {
                    if !interactive {
                        writeln!(io.out, "> {}", safe_lines(message.trim()))?;
                    }
                    text
                }
                (_, Some(Err(why))) => {
                    writeln!(io.err, "cordis: {}", safe(&why))?;
                    io.err.flush()?;
                    continue;
                }
                (commands::Line::Message(text), None) => text.to_owned(),
                (command, None) => {
                    if !interactive {
                        writeln!(io.out, "> {}", safe_lines(message.trim()))?;
                    }
                    match command {
                        commands::Line::Preset(rest) => self.switch_preset(rest, io).await?,
                        commands::Line::Help => {
                            write!(io.err, "{}", commands::help())?;
                            let prompts = super::prompts::prompt_commands(&self.root);
                            if !prompts.is_empty() {
                                writeln!(io.err, "cordis: MCP prompts (sent as your message):")?;
                                for p in prompts {
                                    let usage = match &p.input {
                                        Some(input) => format!("/{} {input}", p.name),
                                        None => format!("/{}", p.name),
                                    };
                                    writeln!(io.err, "  {}  {}", safe(&usage), safe(&p.what))?;
                                }
                            }
                        }
                        commands::Line::Usage => self.usage(io)?,
                        commands::Line::Permissions(rest) => self.permissions(rest, io)?,
                        commands::Line::Clear => {
                            let id = new_session_id();
                            self.switch_session(SessionChoice::New(id), io).await?;
                        }
                        commands::Line::Resume("") => self.list_sessions(io).await?,
                        commands::Line::Resume(id) => {
                            let choice = SessionChoice::Resume(id.to_owned());
                            self.switch_session(choice, io).await?;
                        }
                        commands::Line::Quit => break,
                        commands::Line::Unknown(word) => writeln!(
                            io.err,
                            "cordis: unknown command {}; /help lists them (start the line with // to send it to the model)",
                            safe(word)
                        )?,
                        commands::Line::Message(_) => {}
                    }
                    io.err.flush()?;
                    continue;
                }
            };
            if !interactive {
                // Piped input is not on the screen: echo it so the transcript reads as a dialogue.
                for line in message.lines() {
                    writeln!(io.out, "> {}", safe_lines(line))?;
                }
            }
            // `@server:uri` attaches that MCP resource to the message.
            let root = self.root.clone();
            let Some(attached) = self
                .serving(super::mentions::attach(&root, &message), io)
                .await?
            else {
                continue;
            };
            let message = match attached {
                Ok(message) => message,
                Err(why) => {
                    writeln!(io.err, "cordis: {}; nothing was sent", safe(&why))?;
                    io.err.flush()?;
                    continue;
                }
            };
            let (started, from) = (Instant::now(), self.agent.session().len());
            self.turn(message, &mut events, &mut progress, io).await?;
            if interactive && !self.args.quiet {
                self.footer(from, started, io)?;
            }
            io.out.flush()?;
            io.err.flush()?;
        }
        Ok(())
    }

    /// Waits at the prompt for the next message, applying config edits meanwhile; `None` ends
    /// the run (end of input, Ctrl-C or Ctrl-D at the prompt, SIGTERM or SIGHUP).
    async fn read_message(
        &mut self,
        watcher: &mut Option<&mut ConfigWatcher>,
        io: &mut Io<'_>,
    ) -> anyhow::Result<Option<Typed>> {
        let interactive = self.interactive;
        match &self.input {
            Input::Terminal(terminal) => terminal.prompt(),
            Input::Lines(_) if interactive => {
                // The prompt shows when the run waits for a message, not before the reply to
                // the last one.
                write!(io.err, "> ")?;
                io.err.flush()?;
            }
            Input::Lines(_) => {}
        }
        loop {
            tokio::select! {
                event = self.input.next() => match event {
                    Some(Event::Line(typed)) => return Ok(Some(typed)),
                    // Lines finished just before the prompt: the first is this message.
                    Some(Event::Ahead(typed)) => self.queue_typed_ahead(typed, io)?,
                    Some(Event::PromptSkipped) => match self.typed_ahead.pop_front() {
                        Some(typed) => {
                            writeln!(io.err, "> {}", safe_lines(&typed.text))?;
                            return Ok(Some(typed));
                        }
                        None => {
                            if let Input::Terminal(terminal) = &self.input {
                                terminal.prompt();
                            }
                        }
                    },
                    Some(Event::Escape | Event::Answer { .. } | Event::Entered { .. }) => {}
                    Some(Event::Interrupted | Event::Eof) | None => {
                        if matches!(self.input, Input::Terminal(_)) {
                            writeln!(io.err)?;
                        }
                        return Ok(None);
                    }
                },
                stop = self.signals.next() => {
                    // Between turns, Ctrl-C or a termination ends the run cleanly.
                    if interactive {
                        writeln!(io.err)?;
                    }
                    let _ = stop;
                    return Ok(None);
                }
                Some(note) = async {
                    match watcher.as_deref_mut() {
                        Some(w) => w.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if matches!(self.input, Input::Terminal(_)) {
                        writeln!(io.err)?;
                    }
                    match note {
                        WatchNote::Changed => self.reload(io).await?,
                        other => super::print_watch_note(&other, io)?,
                    }
                }
            }
        }
    }

    /// Something typed while a turn runs: a line is the next message, never an answer; Esc
    /// cancels the turn.
    fn typed_in_turn(&mut self, event: Event, io: &mut Io<'_>) -> std::io::Result<()> {
        match event {
            Event::Line(typed) if !typed.text.trim().is_empty() => {
                // Piped lines are all "typed ahead": only a person needs telling.
                if self.interactive {
                    writeln!(io.err, "{}", kept_notice(&typed.text))?;
                }
                self.queue_typed_ahead(typed, io)
            }
            Event::Ahead(typed) => self.queue_typed_ahead(typed, io),
            Event::Escape => self.on_signal(Stop::Escape, io),
            Event::Interrupted => self.on_signal(Stop::Interrupt, io),
            Event::Line(_)
            | Event::Eof
            | Event::Answer { .. }
            | Event::Entered { .. }
            | Event::PromptSkipped => Ok(()),
        }
    }

    /// Keeps a message typed while the agent worked for after the turn (at most
    /// [`MAX_TYPED_AHEAD`] of them; the rest are refused on screen).
    fn queue_typed_ahead(&mut self, typed: Typed, io: &mut Io<'_>) -> std::io::Result<()> {
        if self.typed_ahead.len() >= MAX_TYPED_AHEAD {
            writeln!(
                io.err,
                "cordis: {MAX_TYPED_AHEAD} messages are waiting already; {:?} is dropped, type it again after this turn",
                safe(&typed.text)
            )?;
            return io.err.flush();
        }
        self.typed_ahead.push_back(typed);
        Ok(())
    }

    /// Acts on a signal during a turn: the first Ctrl-C cancels it, a second one soon after (or
    /// SIGTERM/SIGHUP) cancels it and ends the run once it has ended.
    fn on_signal(&mut self, stop: Stop, io: &mut Io<'_>) -> std::io::Result<()> {
        let again = self
            .interrupted_at
            .is_some_and(|t| t.elapsed() < DOUBLE_INTERRUPT);
        let reason = match stop {
            Stop::Escape => {
                writeln!(io.err, "\ncordis: cancelling the turn (Esc)")?;
                "cancelled by the user (Esc)"
            }
            Stop::Interrupt if !again => {
                self.interrupted_at = Some(Instant::now());
                writeln!(
                    io.err,
                    "\ncordis: cancelling the turn (Ctrl-C again to exit)"
                )?;
                "cancelled by the user (Ctrl-C)"
            }
            Stop::Interrupt => {
                self.exiting = true;
                writeln!(io.err, "\ncordis: exiting")?;
                "cancelled by the user (Ctrl-C twice: exiting)"
            }
            Stop::Terminate => {
                self.exiting = true;
                writeln!(io.err, "\ncordis: exiting (asked to by a signal)")?;
                "cordis was asked to exit"
            }
        };
        self.agent.cancel(Some(reason.to_owned()));
        io.err.flush()
    }

    /// Asks the person at the terminal about one call. What was typed before the question was
    /// shown is kept as the next messages, never taken as its answer.
    async fn ask(&mut self, request: &ApprovalRequest, io: &mut Io<'_>) -> std::io::Result<Answer> {
        let text = question(&self.root, request);
        // At a terminal, its reading thread shows the question, after taking what was typed
        // before; with lines, a line counts when it was read after the question was written.
        let (question, shown) = match &mut self.input {
            Input::Terminal(terminal) => (Some(terminal.ask(text.clone())), None),
            Input::Lines(_) => {
                write!(io.err, "{text}")?;
                io.err.flush()?;
                (None, Some(Instant::now()))
            }
        };
        let cancelled = || Answer::Deny(Some("the user cancelled the turn".to_owned()));
        Ok(match self.await_reply(question, shown, &text, io).await? {
            Reply::Terminal(Event::Answer { answer, .. }) => answer,
            Reply::Line(text) => answer_of(&text),
            Reply::Interrupted | Reply::Terminal(_) => cancelled(),
            Reply::Eof => Answer::Deny(Some("the input ended before an answer".to_owned())),
        })
    }

    /// Waits for the reply to a question shown: the terminal's answer to question `question`,
    /// or (with lines) a line read after `shown`. A line typed before it is kept as the next
    /// message and the question (`again`) written anew; Ctrl-C or a signal is acted on (the
    /// turn is cancelled) and reads as [`Reply::Interrupted`].
    async fn await_reply(
        &mut self,
        question: Option<u64>,
        shown: Option<Instant>,
        again: &str,
        io: &mut Io<'_>,
    ) -> std::io::Result<Reply> {
        loop {
            let event = tokio::select! {
                event = self.input.next() => event,
                stop = self.signals.next() => {
                    if let Input::Terminal(terminal) = &self.input {
                        terminal.cancel();
                    }
                    writeln!(io.err)?;
                    self.on_signal(stop, io)?;
                    return Ok(Reply::Interrupted);
                }
            };
            match event {
                Some(event @ (Event::Answer { id, .. } | Event::Entered { id, .. }))
                    if Some(id) == question =>
                {
                    return Ok(Reply::Terminal(event));
                }
                // The answer to a question dropped earlier (its turn was cancelled meanwhile).
                Some(Event::Answer { .. } | Event::Entered { .. }) => {}
                Some(Event::Line(typed)) if shown.is_some_and(|at| typed.at >= at) => {
                    return Ok(Reply::Line(typed.text));
                }
                Some(Event::Line(typed)) => {
                    if !typed.text.trim().is_empty() {
                        writeln!(io.err, "{}", kept_notice(&typed.text))?;
                        self.queue_typed_ahead(typed, io)?;
                        write!(io.err, "{again}")?;
                        io.err.flush()?;
                    }
                }
                Some(Event::Ahead(typed)) => self.queue_typed_ahead(typed, io)?,
                Some(Event::Interrupted) => {
                    // A Ctrl-C read before the question showed: the question is moot.
                    if let Input::Terminal(terminal) = &self.input {
                        terminal.cancel();
                    }
                    self.on_signal(Stop::Interrupt, io)?;
                    return Ok(Reply::Interrupted);
                }
                Some(Event::Escape | Event::PromptSkipped) => {}
                Some(Event::Eof) | None => return Ok(Reply::Eof),
            }
        }
    }

    /// Lets forms be asked (`true`) or not; when no longer, a form that came too late to be
    /// asked is declined, saying so.
    fn listen(&mut self, on: bool) {
        let Some(listening) = &self.listening else {
            return;
        };
        // Under the lock the elicitor hands forms over with: none is left queued after it.
        let mut listening = cordis_runtime::lock(listening);
        *listening = on;
        if !on && let Some(forms) = self.elicited.as_mut() {
            while let Ok(form) = forms.try_recv() {
                let why = "the turn ended before it could be asked".to_owned();
                let _ = form.reply.send(ElicitationAnswer::NotAsked(why));
            }
        }
    }

    /// Awaits `work` (a call to a server between turns: a prompt, a resource) while answering
    /// the approval questions and forms it brings (a server may sample or ask meanwhile);
    /// `None` when Ctrl-C or a signal stopped the wait (the work is dropped, nothing is sent).
    async fn serving<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        io: &mut Io<'_>,
    ) -> anyhow::Result<Option<T>> {
        self.listen(true);
        tokio::pin!(work);
        let out = loop {
            tokio::select! {
                biased;
                stop = self.signals.next() => {
                    if stop == Stop::Terminate {
                        self.exiting = true;
                    }
                    writeln!(io.err, "\ncordis: stopped waiting for the server; nothing was sent")?;
                    io.err.flush()?;
                    break None;
                }
                question = next_question(&mut self.asked, &mut self.elicited) => {
                    self.answer_question(question, io).await?;
                }
                out = &mut work => break Some(out),
            }
        };
        self.listen(false);
        Ok(out)
    }

    /// Asks the person at the terminal `question` and sends the answer back.
    async fn answer_question(
        &mut self,
        question: Question,
        io: &mut Io<'_>,
    ) -> std::io::Result<()> {
        match question {
            Question::Approval(asked) => {
                let answer = self.ask(&asked.request, io).await?;
                let _ = asked.reply.send(answer);
            }
            Question::Form(form) => {
                let answer = self.fill(&form.request, io).await?;
                let _ = form.reply.send(answer);
            }
        }
        Ok(())
    }

    /// Asks the person at the terminal to fill in a server's form, field by field, or
    /// whether they will open its page (see `form`). What was typed before it was shown is
    /// kept as the next messages.
    async fn fill(
        &mut self,
        request: &ElicitationRequest,
        io: &mut Io<'_>,
    ) -> std::io::Result<ElicitationAnswer> {
        let mut form = match Filling::new(request) {
            Ok(form) => form,
            Err(why) => return Ok(ElicitationAnswer::NotAsked(why)),
        };
        let mut text = form.intro();
        let answer = loop {
            let line = self.read_field(text, form.prompt(), io).await?;
            text = String::new();
            match line {
                Entered::Text(line) => match form.enter(&line) {
                    Step::Next => {}
                    Step::Again(why) => text = format!("  ✗ {}\n", safe(&why)),
                    Step::Done(answer) => break answer,
                },
                Entered::Interrupted => break ElicitationAnswer::Cancel,
                Entered::Eof => break ElicitationAnswer::Decline,
            }
        };
        writeln!(io.err, "{}", form.outcome(&answer))?;
        io.err.flush()?;
        Ok(answer)
    }

    /// Shows `text` and reads one line after `prompt`, for a form's field. A signal or Ctrl-C
    /// is acted on (the turn is cancelled) and reads as [`Entered::Interrupted`].
    async fn read_field(
        &mut self,
        text: String,
        prompt: String,
        io: &mut Io<'_>,
    ) -> std::io::Result<Entered> {
        let (question, shown) = match &mut self.input {
            Input::Terminal(terminal) => (Some(terminal.read_line(text, prompt.clone())), None),
            Input::Lines(_) => {
                write!(io.err, "{text}{prompt}")?;
                io.err.flush()?;
                (None, Some(Instant::now()))
            }
        };
        Ok(
            match self.await_reply(question, shown, &prompt, io).await? {
                Reply::Terminal(Event::Entered { line, .. }) => {
                    if line == Entered::Interrupted {
                        self.on_signal(Stop::Interrupt, io)?;
                    }
                    line
                }
                Reply::Line(text) => Entered::Text(text),
                Reply::Interrupted | Reply::Terminal(_) => Entered::Interrupted,
                Reply::Eof => Entered::Eof,
            },
        )
    }

    /// The line after a turn at a terminal: how long it took and the tokens its model calls
    /// reported (the log's events from `from` on).
    fn footer(&self, from: usize, started: Instant, io: &mut Io<'_>) -> std::io::Result<()> {
        let (calls, input, output) = usage_since(&self.agent, from);
        let tokens = if calls == 0 {
            String::new()
        } else {
            format!(" · {input} tokens in, {output} out")
        };
        writeln!(
            io.err,
            "cordis: {:.1} s{tokens}",
            started.elapsed().as_secs_f64()
        )
    }

    /// `/clear` (a new session) and `/resume ID`: the run goes on with another session of the
    /// same composition; the current one is saved first, and stays current if the other cannot
    /// be opened.
    async fn switch_session(
        &mut self,
        choice: SessionChoice,
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        let old_id = self.agent.session().id().to_owned();
        if choice.id() == old_id {
            writeln!(io.err, "cordis: this run is on session {old_id} already")?;
            return Ok(());
        }
        if check_session_choice(&self.root, &choice, io)?.is_err() {
            return Ok(());
        }
        let current_preset = joined_preset(&self.root, &self.agent);
        let preset = match &choice {
            SessionChoice::Resume(id) => recorded_preset(&self.root, id).await,
            _ => current_preset.clone(),
        };
        self.agent.session().flush().await.ok();
        self.agent.dispose();
        match make_agent(&self.root, self.args, choice.id(), preset.as_deref()).await {
            Ok((agent, _)) => self.agent = agent,
            Err(why) => {
                writeln!(io.err, "cordis: {why}; staying on session {old_id}")?;
                match make_agent(&self.root, self.args, &old_id, current_preset.as_deref()).await {
                    Ok((agent, _)) => self.agent = agent,
                    Err(again) => {
                        writeln!(
                            io.err,
                            "cordis: cannot reopen session {old_id} either: {again}; ending the run"
                        )?;
                        self.exiting = true;
                    }
                }
                return Ok(());
            }
        }
        choose_permissions(self.args, &self.agent, io)?;
        if let Input::Terminal(terminal) = &self.input {
            terminal.remember(user_messages(&self.agent));
        }
        let id = self.agent.session().id().to_owned();
        let verb = if matches!(choice, SessionChoice::Resume(_)) {
            "resuming"
        } else {
            "new"
        };
        let preset = joined_preset(&self.root, &self.agent)
            .map(|p| format!(", preset {}", safe(&p)))
            .unwrap_or_default();
        writeln!(
            io.err,
            "cordis: {verb} session {id}{preset} (session {old_id} is saved: /resume {old_id})"
        )?;
        if matches!(choice, SessionChoice::Resume(_)) {
            show_recent(&self.root, &id, io).await?;
        }
        io.err.flush()?;
        Ok(())
    }

    /// `/resume` without an id: the recent sessions of this composition.
    async fn list_sessions(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        match super::sessions::recent(&self.root, &self.args.config.file, RECENT_SESSIONS).await {
            Ok(recent) => {
                write!(io.err, "{}", super::sessions::lines(&recent))?;
                writeln!(io.err, "cordis: /resume ID continues one of them")?;
            }
            Err(why) => writeln!(io.err, "cordis: {why}")?,
        }
        Ok(())
    }

    /// `/permissions [MODE | revoke N]`: the session's mode, grants and the command rules; or
    /// a new mode; or one grant revoked (both logged in the session).
    fn permissions(&self, rest: &str, io: &mut Io<'_>) -> std::io::Result<()> {
        match commands::permissions(&self.agent, &self.root, rest) {
            Ok(lines) => {
                for line in lines {
                    if line.starts_with("  ") {
                        writeln!(io.err, "{line}")?;
                    } else {
                        writeln!(io.err, "cordis: {line}")?;
                    }
                }
                Ok(())
            }
            Err(why) => writeln!(io.err, "cordis: {why}"),
        }
    }

    /// `/usage`: the tokens the model reported in this session, from its log.
    fn usage(&self, io: &mut Io<'_>) -> std::io::Result<()> {
        writeln!(io.err, "cordis: {}", commands::usage_text(&self.agent))
    }

    /// `/preset [ID]`: without an id, names the preset the session runs and the others; with
    /// one, switches a blank session to it (the roster refuses once the session has a turn).
    /// Lines are read between turns, so a switch never lands mid-turn.
    async fn switch_preset(&mut self, id: &str, io: &mut Io<'_>) -> anyhow::Result<()> {
        let Some(roster) = self.root.get::<AgentPresets>() else {
            writeln!(
                io.err,
                "cordis: /preset needs an `agent-presets` entry in the config (see the bundled cordis.yml)"
            )?;
            return Ok(());
        };
        if id.is_empty() {
            let current = joined_preset(&self.root, &self.agent).unwrap_or_default();
            let ids: Vec<String> = roster
                .list_async()
                .await
                .into_iter()
                .map(|p| match p.broken {
                    Some(_) => format!("{} (broken)", p.id),
                    None => p.id,
                })
                .collect();
            writeln!(
                io.err,
                "cordis: preset {}; available: {}; /preset ID switches before the first message",
                safe(&current),
                safe(&ids.join(", "))
            )?;
            return Ok(());
        }
        match roster.switch(&self.agent, id).await {
            Ok(standing) => writeln!(
                io.err,
                "cordis: session {} now runs preset {}",
                self.agent.session().id(),
                safe(&standing.preset)
            )?,
            Err(e) => writeln!(io.err, "cordis: {}", safe_lines(&e.to_string()))?,
        }
        io.err.flush()?;
        Ok(())
    }

    /// Re-reads the config file and applies it; an invalid edit keeps the last good one.
    async fn reload(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        let path = &self.args.config.file;
        let source = match super::read_config(path).await {
            Ok(s) => s,
            Err(e) => {
                writeln!(
                    io.err,
                    "cordis: cannot read {}: {e}; still running the last good configuration",
                    path.display()
                )?;
                return Ok(());
            }
        };
        match self.live.reload(&source, io.env).await {
            Ok(summary) => {
                writeln!(io.err, "cordis: {}", summary_line(&summary))?;
                self.rejoin_after_reload(io).await?;
            }
            Err(errors) => super::print_rejected_reload(&errors, io)?,
        }
        io.err.flush()?;
        Ok(())
    }

    /// A reload that restarted the `agent-presets` entry unwound every standing scope: the
    /// agent (which the reload kept) is joined to none, and could not assemble. Join it again
    /// to the preset its session runs, mounted afresh.
    async fn rejoin_after_reload(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        let Some(roster) = self.root.get::<AgentPresets>() else {
            return Ok(());
        };
        // A reload that restarted the loop disposed the agent itself: the next turn makes it
        // again, joined to its session's preset, so there is nothing to rejoin (saying the
        // agent is joined to no preset would be a false alarm).
        if self.agent.context().is_none() {
            return Ok(());
        }
        if roster.composed_preset(self.agent.scope_key()).is_some() {
            return Ok(());
        }
        let preset = self.agent.session().preset();
        let joined = match roster.standing_key_for(preset.as_deref()).await {
            Ok(standing) => self
                .agent
                .rejoin(standing.key)
                .map(|()| standing.preset)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match joined {
            Ok(preset) => writeln!(io.err, "cordis: rejoined preset {}", safe(&preset))?,
            Err(why) => writeln!(
                io.err,
                "cordis: the agent is joined to no preset after the reload: {}",
                safe_lines(&why)
            )?,
        }
        Ok(())
    }

    /// Runs one turn, streaming its events; counts it when it does not complete.
    async fn turn(
        &mut self,
        message: String,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        progress: &mut mpsc::UnboundedReceiver<String>,
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        // A Ctrl-C of an earlier turn does not make this turn's first one a second.
        self.interrupted_at = None;
        self.listen(true);
        let mut attempt = 0;
        let ended = loop {
            attempt += 1;
            let current = self.agent.clone();
            let ended = {
                let turn = current.run_turn(message.clone());
                tokio::pin!(turn);
                loop {
                    tokio::select! {
                        biased;
                        Some(e) = events.recv() => {
                            if e.agent == current.id() {
                                let presenters = self.root.get::<Presenters>();
                                self.transcript.event(&e.event, presenters.as_deref(), io.out, io.err)?;
                            }
                        }
                        Some(line) = progress.recv() => {
                            writeln!(io.err, "{line}")?;
                            io.err.flush()?;
                        }
                        question = next_question(&mut self.asked, &mut self.elicited) => {
                            self.answer_question(question, io).await?;
                        }
                        stop = self.signals.next() => self.on_signal(stop, io)?,
                        // Typed while the turn runs: the next message, not an answer (piped
                        // input waits until the turn ends: see `input`).
                        Some(event) = self.input.next(), if self.interactive => {
                            self.typed_in_turn(event, io)?
                        }
                        r = &mut turn => break r,
                    }
                }
            };
            // Reports that arrived as the call ended.
            while let Ok(line) = progress.try_recv() {
                writeln!(io.err, "{line}")?;
            }
            while let Ok(e) = events.try_recv() {
                if e.agent == current.id() {
                    let presenters = self.root.get::<Presenters>();
                    self.transcript
                        .event(&e.event, presenters.as_deref(), io.out, io.err)?;
                }
            }
            // A reload that restarted the loop disposed the agent: make it again on the same
            // session (its next header is logged as `resume`) and retry once.
            if matches!(ended, Err(TurnError::Disposed(_))) && attempt == 1 {
                let preset = current.session().preset();
                match make_agent(
                    &self.root,
                    self.args,
                    current.session().id(),
                    preset.as_deref(),
                )
                .await
                {
                    Ok((a, _)) => {
                        self.agent = a;
                        continue;
                    }
                    Err(message) => writeln!(io.err, "cordis: error: {message}")?,
                }
            }
            break ended;
        };
        self.listen(false);
        match ended {
            Ok(TurnEndReason::Completed) => {}
            // The transcript has printed why, from the turn's `turn/end` event.
            Ok(_) => self.failed_turns += 1,
            Err(e) => {
                self.failed_turns += 1;
                writeln!(io.err, "cordis: error: {e}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_sortable_timestamps() {
        let id = new_session_id();
        assert_eq!(id.len(), "20250101-120000-000".len(), "{id}");
        assert!(id.starts_with("20"), "{id}");
        assert!(id.chars().all(|c| c.is_ascii_digit() || c == '-'));
    }
}
