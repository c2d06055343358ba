//! `cordis run -p PROMPT`: one task, no questions, then exit; for scripts and CI. Nothing is
//! read from stdin; calls that would ask are denied (the model is told why) unless `--yes` or
//! `--approve TOOL`. stdout holds what `--output-format` says: the answer as a piped run prints
//! it (`text`), one JSON object at the end (`json`), or every logged event as it happens, one
//! JSON object a line, then that object (`stream-json`).

use super::*;

use cordis_session::{SessionEvent, ToolApprovalData, TurnEndData};
use serde_json::{Value, json};

/// What a headless run prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// The answer and the calls, as a piped run prints them.
    #[default]
    Text,
    /// One JSON object when the task ends: sessionId, status, endReason, answer, usage,
    /// denied.
    Json,
    /// Every event of the session's log as it is written, one JSON object a line, then the
    /// result object with `"type": "result"`.
    StreamJson,
}

/// The exit code of a task stopped by its step limit (`maxSteps`, or `--max-turns`).
pub const EXIT_TURN_LIMIT: u8 = 5;

/// Runs `prompt` as one turn of the session `choice` names, prints it as `args` says, and
/// returns the exit code: 0 done, 1 failed or cancelled, 2 configuration, 3 the session is
/// open elsewhere, 5 the step limit.
pub(super) async fn run(
    args: &RunArgs,
    prompt: &str,
    choice: SessionChoice,
    seed: u64,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<u8> {
    let schedule = cordis_runtime::Schedule::new(args.policy(), seed);
    let (live, report) = boot(args, schedule, io, builtins).await?;
    let root = live.root().clone();
    print_boot_problems(&report, io)?;
    let (_choice, agent, _store) = match open_agent(&root, &report, args, choice, io).await? {
        Ok(opened) => opened,
        Err(code) => return Ok(code),
    };
    choose_permissions(args, &agent, io)?;
    let approving = approver_for(args.yes, &args.approve, false);
    let _approver = approving.service.map(|a| root.provide(a));
    let from = agent.session().len();
    let ended = stream_turn(args, &root, &agent, prompt, io).await?;
    agent.session().flush().await.ok();
    let result = result_of(&agent, from, &ended);
    match args.output_format {
        OutputFormat::Text => {}
        OutputFormat::Json => writeln!(io.out, "{result}")?,
        OutputFormat::StreamJson => {
            let mut line = result.clone();
            line["type"] = json!("result");
            writeln!(io.out, "{line}")?;
        }
    }
    io.out.flush()?;
    let id = agent.session().id().to_owned();
    root.dispose();
    if args.output_format == OutputFormat::Text && !args.quiet {
        writeln!(
            io.err,
            "cordis: session {id} saved; continue it with: {program} run --resume {id}{}",
            file_hint(args),
            program = crate::cli::program::name()
        )?;
    }
    Ok(match &ended {
        Ok(TurnEndReason::Completed) => EXIT_OK,
        Ok(TurnEndReason::MaxSteps { .. }) => EXIT_TURN_LIMIT,
        Ok(_) | Err(_) => EXIT_FAILURE,
    })
}

/// Boots the config; with `--max-turns N`, its `agent-loop` entry's `maxSteps` is N (the
/// file is not changed).
async fn boot(
    args: &RunArgs,
    schedule: cordis_runtime::Schedule,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<(LiveConfig, BootReport)> {
    let Some(turns) = args.max_turns else {
        return super::super::boot_live(&args.config, schedule, io, builtins).await;
    };
    let file = args.config.file.display().to_string();
    let Ok(source) = super::super::read_config(&args.config.file).await else {
        // Says why, as every run does.
        return super::super::boot_live(&args.config, schedule, io, builtins).await;
    };
    let Some(limited) = with_max_steps(&source, turns) else {
        writeln!(
            io.err,
            "cordis: --max-turns needs an `agent-loop` entry in {file} itself (an included one cannot be limited); set its maxSteps instead"
        )?;
        return Err(super::super::Exit(EXIT_CONFIG).into());
    };
    let options = super::super::plan_options(&args.config, io);
    let builtins = &crate::builtins::for_config(builtins, &args.config.file, &options, io.env);
    let root = cordis_runtime::Context::root_with(schedule);
    match LiveConfig::boot(root, &limited, &file, io.env, builtins.clone(), options).await {
        Ok(booted) => Ok(booted),
        Err(errors) => {
            super::super::print_config_errors(&errors, &file, io)?;
            Err(super::super::Exit(EXIT_CONFIG).into())
        }
    }
}

/// `source` with every `agent-loop` entry's `config.maxSteps` set to `steps`; `None` when it
/// is not a list of entries with one.
fn with_max_steps(source: &str, steps: u64) -> Option<String> {
    use serde_yaml_ng::Value as Yaml;
    let mut entries: Yaml = serde_yaml_ng::from_str(source).ok()?;
    let mut found = false;
    for entry in entries.as_sequence_mut()? {
        let Some(entry) = entry.as_mapping_mut() else {
            continue;
        };
        if entry.get("name").and_then(Yaml::as_str) != Some("agent-loop") {
            continue;
        }
        let config = entry
            .entry(Yaml::from("config"))
            .or_insert_with(|| Yaml::Mapping(serde_yaml_ng::Mapping::new()));
        if config.is_null() {
            *config = Yaml::Mapping(serde_yaml_ng::Mapping::new());
        }
        config
            .as_mapping_mut()?
            .insert(Yaml::from("maxSteps"), Yaml::from(steps));
        found = true;
    }
    found
        .then(|| serde_yaml_ng::to_string(&entries).ok())
        .flatten()
}

/// Runs the turn, printing its events as they are logged (`text`: the transcript; `stream-json`:
/// the events); Ctrl-C or a termination signal cancels it.
async fn stream_turn(
    args: &RunArgs,
    root: &Context,
    agent: &Agent,
    prompt: &str,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<TurnEndReason, TurnError>> {
    let (etx, mut events) = mpsc::unbounded_channel::<AgentEvent>();
    let _listener = root.on::<AgentEvent>(move |e| {
        let _ = etx.send(e.clone());
    });
    let mut signals = Signals::install()?;
    let mut transcript = Transcript::new(style_for(args, io));
    let presenters = root.get::<Presenters>();
    let mut show = |e: &SessionEvent, io: &mut Io<'_>| -> std::io::Result<()> {
        match args.output_format {
            OutputFormat::Text => transcript.event(e, presenters.as_deref(), io.out, io.err),
            OutputFormat::StreamJson => {
                writeln!(io.out, "{}", serde_json::to_string(e).unwrap_or_default())?;
                io.out.flush()
            }
            OutputFormat::Json => Ok(()),
        }
    };
    let turn = agent.run_turn(prompt.to_owned());
    tokio::pin!(turn);
    let ended = loop {
        tokio::select! {
            biased;
            Some(e) = events.recv() => {
                if e.agent == agent.id() {
                    show(&e.event, io)?;
                }
            }
            stop = signals.next() => {
                let why = match stop {
                    Stop::Terminate => "cordis was asked to exit",
                    Stop::Interrupt | Stop::Escape => "cancelled by the user (Ctrl-C)",
                };
                agent.cancel(Some(why.to_owned()));
            }
            r = &mut turn => break r,
        }
    };
    while let Ok(e) = events.try_recv() {
        if e.agent == agent.id() {
            show(&e.event, io)?;
        }
    }
    if let Err(e) = &ended {
        writeln!(io.err, "cordis: error: {e}")?;
    }
    Ok(ended)
}

/// The task's usage: `answers`, `inputTokens`, `outputTokens`, and when known
/// `cachedInputTokens`, `costUsd`.
fn usage_json(usage: &crate::session::usage::UsageSummary) -> Value {
    let mut out = json!({
        "answers": usage.answers,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
    });
    if usage.cache_reported {
        out["cachedInputTokens"] = json!(usage.cached_input_tokens);
    }
    if let Some(cost) = usage.cost_usd {
        out["costUsd"] = json!(cost);
    }
    out
}

/// The task's result: `sessionId`, `status` (`completed`, `failed`, `cancelled`,
/// `turn-limit`), `endReason` (the turn's `turn/end` reason as logged), `answer` (the model's
/// last text), `usage` (see [`usage_json`]: this turn's), `denied` (each
/// call that did not run: `tool`, `by`, `reason`), and `error` when the turn did not start.
pub(super) fn result_of(
    agent: &Agent,
    from: usize,
    ended: &Result<TurnEndReason, TurnError>,
) -> Value {
    let usage = crate::session::usage::UsageSummary::of_agent(agent, from);
    let (answer, denied, end) = agent.session().with_events(|events| {
        let events = events.get(from..).unwrap_or_default();
        let answer = events
            .iter()
            .filter_map(|e| e.data_as::<cordis_session::AssistantMessageData>().ok())
            .map(|m| m.content)
            .rfind(|c| !c.trim().is_empty());
        let denied: Vec<Value> = events
            .iter()
            .filter_map(|e| e.data_as::<ToolApprovalData>().ok())
            .filter(|a| !a.allowed)
            .map(|a| json!({"tool": a.name, "by": a.by, "reason": a.reason}))
            .collect();
        let end = events
            .iter()
            .rev()
            .find_map(|e| e.data_as::<TurnEndData>().ok())
            .map(|end| end.reason);
        (answer, denied, end)
    });
    let status = match ended {
        Ok(TurnEndReason::Completed) => "completed",
        Ok(TurnEndReason::Aborted { .. }) => "cancelled",
        Ok(TurnEndReason::MaxSteps { .. }) => "turn-limit",
        Ok(_) | Err(_) => "failed",
    };
    let mut result = json!({
        "sessionId": agent.session().id(),
        "status": status,
        "endReason": end,
        "answer": answer,
        "usage": usage_json(&usage),
        "denied": denied,
    });
    if let Err(e) = ended {
        result["error"] = json!(e.to_string());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_turns_sets_the_agent_loops_max_steps_and_nothing_else() {
        let source = "- {id: llm, name: llm, config: {maxSteps: 9}}\n- {id: a, name: agent-loop, config: {maxSteps: 16}}\n- {id: b, name: agent-loop}\n";
        let limited: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&with_max_steps(source, 2).unwrap()).unwrap();
        assert_eq!(
            limited[0]["config"]["maxSteps"],
            serde_yaml_ng::Value::from(9)
        );
        assert_eq!(
            limited[1]["config"]["maxSteps"],
            serde_yaml_ng::Value::from(2)
        );
        assert_eq!(
            limited[2]["config"]["maxSteps"],
            serde_yaml_ng::Value::from(2)
        );
        assert_eq!(with_max_steps("- {id: llm, name: llm}\n", 2), None);
    }
}
