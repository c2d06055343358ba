//! `cordis run`: the stdio app. Boot a config, then talk to its agent over stdin/stdout.
//!
//! Input: one message per line (blank lines are skipped); a line that is exactly `"""` starts a
//! multi-line message that the next `"""` line ends. EOF ends the run (exit 0).
//!
//! Output: piped input is echoed as `> line`; the assistant's text streams to stdout as it
//! arrives; each tool call and its result
//! are one compact line each (`[call NAME ARGS]`, `[result NAME] CONTENT` or
//! `[error NAME CODE] MESSAGE`); failures, the session id and reload summaries go to stderr, so
//! stdout is the transcript alone.

use std::io::Write;

use cordis_agent_loop::{Agent, AgentEvent, AgentLoop, AgentOptions, TurnError};
use cordis_runtime::Context;
use cordis_session::{SessionEvent, SessionStore, TurnEndReason, kinds};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{EXIT_CONFIG, EXIT_OK, Io, RunArgs, choose_seed};
use cordis_host::Builtins;
use cordis_host::loader::{BootReport, EntryStatus};
use cordis_host::reload::summary_line;
use cordis_host::watch::ConfigWatcher;

/// The multi-line delimiter.
pub const FENCE: &str = "\"\"\"";

/// Reads messages from stdin on a thread: lines, or `"""`-fenced blocks.
fn spawn_reader(prompt: bool) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut block: Option<Vec<String>> = None;
        let mut line = String::new();
        loop {
            if prompt && block.is_none() {
                eprint!("> ");
            }
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_end_matches(['\n', '\r']);
            match &mut block {
                Some(lines) if text.trim() == FENCE => {
                    let message = lines.join("\n");
                    block = None;
                    if !message.trim().is_empty() && tx.send(message).is_err() {
                        break;
                    }
                }
                Some(lines) => lines.push(text.to_owned()),
                None if text.trim() == FENCE => block = Some(Vec::new()),
                None if text.trim().is_empty() => {}
                None => {
                    if tx.send(text.to_owned()).is_err() {
                        break;
                    }
                }
            }
        }
        // An unterminated block is still a message.
        if let Some(lines) = block {
            let message = lines.join("\n");
            if !message.trim().is_empty() {
                let _ = tx.send(message);
            }
        }
    });
    rx
}

/// A new session id: `YYYYMMDD-HHMMSS-NNN` (UTC, milliseconds).
fn new_session_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

fn clip(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', "\\n");
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else {
        one_line
    }
}

/// Writes the transcript of one agent's events.
struct Transcript {
    at_line_start: bool,
}

impl Transcript {
    fn newline(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.at_line_start {
            writeln!(out)?;
            self.at_line_start = true;
        }
        Ok(())
    }

    fn event(
        &mut self,
        e: &SessionEvent,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<()> {
        let d = &e.data;
        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
        match e.kind.as_str() {
            kinds::ASSISTANT_CHUNK
                if d.pointer("/chunk/type").and_then(Value::as_str) == Some("text") =>
            {
                let delta = d
                    .pointer("/chunk/delta")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !delta.is_empty() {
                    write!(out, "{delta}")?;
                    self.at_line_start = delta.ends_with('\n');
                    out.flush()?;
                }
            }
            kinds::TOOL_CALL => {
                self.newline(out)?;
                writeln!(out, "[call {} {}]", s("name"), clip(s("arguments"), 160))?;
            }
            kinds::TOOL_RESULT => {
                self.newline(out)?;
                let content = match d.get("content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                if d.get("isError").and_then(Value::as_bool) == Some(true) {
                    writeln!(
                        out,
                        "[error {} {}] {}",
                        s("name"),
                        s("code"),
                        clip(&content, 200)
                    )?;
                } else {
                    writeln!(out, "[result {}] {}", s("name"), clip(&content, 200))?;
                }
            }
            kinds::TURN_END => {
                self.newline(out)?;
                out.flush()?;
                let reason: Option<TurnEndReason> = d
                    .get("reason")
                    .and_then(|r| serde_json::from_value(r.clone()).ok());
                let turn = d.get("turn").and_then(Value::as_u64).unwrap_or(0);
                match reason {
                    Some(TurnEndReason::Completed) | None => {}
                    Some(TurnEndReason::Error { step, message }) => {
                        writeln!(
                            err,
                            "cordis: error: turn {turn} failed at step {step}: {message}"
                        )?;
                    }
                    Some(TurnEndReason::MaxSteps { steps }) => {
                        writeln!(
                            err,
                            "cordis: turn {turn} stopped after {steps} steps (maxSteps)"
                        )?;
                    }
                    Some(other) => {
                        writeln!(
                            err,
                            "cordis: turn {turn} ended: {}",
                            serde_json::to_string(&other).unwrap_or_default()
                        )?;
                    }
                }
                err.flush()?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Which session the run talks on.
enum SessionChoice {
    New(String),
    Resume(String),
}

/// Creates (or re-creates after a reload) the run's agent on its session.
async fn make_agent(
    root: &Context,
    args: &RunArgs,
    session_id: &str,
) -> Result<(Agent, std::sync::Arc<SessionStore>), String> {
    let Some(agents) = root.get::<AgentLoop>() else {
        return Err(
            "the configuration provides no `agent-loop` service: add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)"
                .into(),
        );
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
    let agent = agents
        .create_agent(options)
        .await
        .map_err(|e| e.to_string())?;
    Ok((agent, agents.sessions().clone()))
}

fn print_boot_problems(report: &BootReport, io: &mut Io<'_>) -> std::io::Result<()> {
    for e in &report.entries {
        if matches!(e.status, EntryStatus::Active | EntryStatus::Disabled) {
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
            "cordis: entry {} ({}) is {}: {why}",
            e.id, e.name, e.status
        )?;
    }
    if let Some(error) = &report.assembly_error {
        writeln!(io.err, "cordis: assembling the request failed: {error}")?;
    }
    Ok(())
}

pub(crate) fn run(args: &RunArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let seed = match choose_seed(args.seed, io)? {
        Ok(seed) => seed,
        Err(code) => return Ok(code),
    };
    let choice = match (&args.resume, &args.session) {
        (Some(_), Some(_)) => {
            writeln!(
                io.err,
                "cordis: give either --resume or --session, not both"
            )?;
            return Ok(EXIT_CONFIG);
        }
        (Some(id), None) => SessionChoice::Resume(id.clone()),
        (None, Some(id)) => SessionChoice::New(id.clone()),
        (None, None) => SessionChoice::New(new_session_id()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let load = args.load_args();
    rt.block_on(async {
        let path = &load.file;
        let file = path.display().to_string();
        let mut watcher = if args.watch {
            Some(ConfigWatcher::new(path)?)
        } else {
            None
        };
        let lookup = super::env_snapshot();
        let (mut live, report) = match super::boot_live(&load, seed, &lookup, io, builtins).await? {
            Ok(booted) => booted,
            Err(code) => return Ok(code),
        };
        let root = live.root().clone();
        print_boot_problems(&report, io)?;

        // The session: a new one must not exist, a resumed one must.
        let session_id = match &choice {
            SessionChoice::New(id) | SessionChoice::Resume(id) => id.clone(),
        };
        if let Some(agents) = root.get::<AgentLoop>() {
            let store = agents.sessions();
            let exists = store.path_of(&session_id).is_some_and(|p| p.exists());
            match &choice {
                SessionChoice::New(id) if exists => {
                    writeln!(io.err, "cordis: session {id} exists; continue it with --resume {id}")?;
                    root.dispose();
                    return Ok(EXIT_CONFIG);
                }
                SessionChoice::Resume(id) if !exists => {
                    let where_ = store.path_of(id).map_or_else(
                        || "the sessions store is in memory (set `root` on the sessions entry)".to_owned(),
                        |p| format!("no file {}", p.display()),
                    );
                    writeln!(io.err, "cordis: cannot resume session {id}: {where_}")?;
                    root.dispose();
                    return Ok(EXIT_CONFIG);
                }
                _ => {}
            }
        }
        let (mut agent, store) = match make_agent(&root, args, &session_id).await {
            Ok(a) => a,
            Err(message) => {
                writeln!(io.err, "cordis: error: {message}")?;
                root.dispose();
                return Ok(EXIT_CONFIG);
            }
        };
        let shown = store
            .path_of(agent.session().id())
            .map_or_else(|| "in memory".to_owned(), |p| p.display().to_string());
        let verb = if matches!(choice, SessionChoice::Resume(_)) { "resuming" } else { "new" };
        writeln!(
            io.err,
            "cordis: {verb} session {} ({shown}); adapter {}; one message per line, \"\"\" for multi-line, EOF to end",
            agent.session().id(),
            root.get::<AgentLoop>().map_or_else(String::new, |l| l.llm().adapter().name().to_owned()),
        )?;
        if args.watch {
            writeln!(io.err, "cordis: watching {file} for changes (applied between turns)")?;
        }
        io.err.flush()?;

        // Every event of the run's agent, in log order.
        let (etx, mut erx) = mpsc::unbounded_channel::<AgentEvent>();
        let _listener = root.on::<AgentEvent>(move |e| {
            let _ = etx.send(e.clone());
        });
        let prompt = std::io::IsTerminal::is_terminal(&std::io::stdin());
        let mut input = spawn_reader(prompt);
        let mut transcript = Transcript { at_line_start: true };
        let mut failed_turns = 0u64;

        loop {
            let message = tokio::select! {
                m = input.recv() => m,
                Some(()) = async {
                    match watcher.as_mut() {
                        Some(w) => w.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    let source = match super::read_config(path).await {
                        Ok(s) => s,
                        Err(e) => {
                            writeln!(io.err, "cordis: cannot read {file}: {e}; still running the last good configuration")?;
                            continue;
                        }
                    };
                    match live.reload(&source, &lookup).await {
                        Ok(summary) => writeln!(io.err, "cordis: {}", summary_line(&summary))?,
                        Err(errors) => super::print_rejected_reload(&errors, io)?,
                    }
                    io.err.flush()?;
                    continue;
                }
            };
            let Some(message) = message else { break };
            if !prompt {
                // Piped input is not on the screen: echo it so the transcript reads as a dialogue.
                for line in message.lines() {
                    writeln!(io.out, "> {line}")?;
                }
            }
            let mut attempt = 0;
            let ended = loop {
                attempt += 1;
                let ended = {
                    let current = agent.clone();
                    let turn = current.run_turn(message.clone());
                    tokio::pin!(turn);
                    loop {
                        tokio::select! {
                            biased;
                            Some(e) = erx.recv() => {
                                if e.agent == current.id() {
                                    transcript.event(&e.event, io.out, io.err)?;
                                }
                            }
                            r = &mut turn => break r,
                        }
                    }
                };
                while let Ok(e) = erx.try_recv() {
                    if e.agent == agent.id() {
                        transcript.event(&e.event, io.out, io.err)?;
                    }
                }
                // A reload that restarted the loop disposed the agent: make it again on the
                // same session (its next header is logged as `resume`) and retry once.
                if matches!(ended, Err(TurnError::Disposed(_))) && attempt == 1 {
                    match make_agent(&root, args, &session_id).await {
                        Ok((a, _)) => {
                            agent = a;
                            continue;
                        }
                        Err(message) => {
                            writeln!(io.err, "cordis: error: {message}")?;
                        }
                    }
                }
                break ended;
            };
            match ended {
                Ok(TurnEndReason::Completed) => {}
                Ok(_) => failed_turns += 1,
                Err(e) => {
                    failed_turns += 1;
                    writeln!(io.err, "cordis: error: {e}")?;
                }
            }
            io.out.flush()?;
            io.err.flush()?;
        }
        let id = agent.session().id().to_owned();
        agent.session().flush().await.ok();
        live.root().dispose();
        if failed_turns > 0 {
            writeln!(io.err, "cordis: {failed_turns} turn(s) failed")?;
        }
        writeln!(io.err, "cordis: session {id} saved; continue it with: cordis run --resume {id}")?;
        io.err.flush()?;
        Ok(EXIT_OK)
    })
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
