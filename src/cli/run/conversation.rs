//! The conversation loop: messages read, commands dispatched, turns run and streamed.

use super::*;

impl Conversation<'_> {
    /// Reads messages until EOF, running one turn each; applies config edits between turns.
    pub(super) async fn talk(
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
        // A running command's output, as it arrives (a terminal shows its last line live).
        let (otx, mut outputs) = mpsc::unbounded_channel::<String>();
        let _output_listener = self.root.on::<cordis_tool_shell::CommandOutput>(move |e| {
            let _ = otx.send(e.text.clone());
        });
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
            if let Some(arg) = super::expand::parse(&message).filter(|_| !fenced) {
                if !interactive {
                    writeln!(io.out, "> {}", safe_lines(message.trim()))?;
                }
                self.expand(arg, io).await?;
                io.out.flush()?;
                io.err.flush()?;
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
                        .serving(crate::session::prompts::expand(&root, &message), io)
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
                    if !self.command(command, io).await? {
                        break;
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
                .serving(super::super::mentions::attach(&root, &message), io)
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
            self.turn(message, &mut events, (&mut progress, &mut outputs), io)
                .await?;
            if interactive && !self.args.quiet {
                self.footer(from, started, io)?;
            }
            io.out.flush()?;
            io.err.flush()?;
        }
        Ok(())
    }

    /// Runs a slash command typed at the prompt; `false` when it ends the run (`/quit`).
    async fn command(
        &mut self,
        command: commands::Line<'_>,
        io: &mut Io<'_>,
    ) -> anyhow::Result<bool> {
        match command {
            commands::Line::Preset(rest) => self.switch_preset(rest, io).await?,
            commands::Line::Help => {
                write!(io.err, "{}", commands::help())?;
                let prompts = crate::session::prompts::prompt_commands(&self.root);
                if !prompts.is_empty() {
                    writeln!(
                        io.err,
                        "cordis: skills and MCP prompts (sent as your message):"
                    )?;
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
            commands::Line::Compact(focus) => self.compact(focus, io).await?,
            commands::Line::Permissions(rest) => self.permissions(rest, io)?,
            commands::Line::Clear => {
                let id = crate::session::id::new_id();
                self.switch_session(SessionChoice::New(id), io).await?;
            }
            commands::Line::Resume("") => self.pick_session(io).await?,
            commands::Line::Resume(id) => {
                let choice = SessionChoice::Resume(id.to_owned());
                self.switch_session(choice, io).await?;
            }
            commands::Line::Init => self.init(io).await?,
            commands::Line::Quit => return Ok(false),
            commands::Line::Unknown(word) => writeln!(
                io.err,
                "cordis: unknown command {}; /help lists them (start the line with // to send it to the model)",
                safe(word)
            )?,
            commands::Line::Message(_) => {}
        }
        Ok(true)
    }

    /// `/compact [FOCUS]`: the model summarizes the conversation (Ctrl-C cancels it, leaving
    /// the conversation as it was); says what came of it.
    async fn compact(&mut self, focus: &str, io: &mut Io<'_>) -> anyhow::Result<()> {
        writeln!(
            io.err,
            "cordis: compacting the conversation: the model writes a summary (Ctrl-C cancels)"
        )?;
        io.err.flush()?;
        let agent = self.agent.clone();
        let work = commands::compact_text(&agent, focus);
        tokio::pin!(work);
        let said = loop {
            tokio::select! {
                biased;
                said = &mut work => break said,
                stop = self.signals.next() => {
                    if stop == Stop::Terminate {
                        self.exiting = true;
                    }
                    agent.cancel(Some("cancelled by the user".to_owned()));
                }
            }
        };
        writeln!(io.err, "cordis: {}", safe(&said))?;
        Ok(())
    }

    /// Waits at the prompt for the next message, applying config edits meanwhile; `None` ends
    /// the run (end of input, Ctrl-C or Ctrl-D at the prompt, SIGTERM or SIGHUP).
    pub(super) async fn read_message(
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
                    Some(
                        Event::Escape
                        | Event::Answer { .. }
                        | Event::Entered { .. }
                        | Event::Picked { .. }
                        | Event::HandedBack { .. },
                    ) => {}
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
                        other => super::super::print_watch_note(&other, io)?,
                    }
                }
            }
        }
    }

    /// Something typed while a turn runs: a line is the next message, never an answer; Esc
    /// cancels the turn.
    pub(super) fn typed_in_turn(&mut self, event: Event, io: &mut Io<'_>) -> std::io::Result<()> {
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
            | Event::Picked { .. }
            | Event::HandedBack { .. }
            | Event::PromptSkipped => Ok(()),
        }
    }

    /// Keeps a message typed while the agent worked for after the turn (at most
    /// [`MAX_TYPED_AHEAD`] of them; the rest are refused on screen).
    pub(super) fn queue_typed_ahead(
        &mut self,
        typed: Typed,
        io: &mut Io<'_>,
    ) -> std::io::Result<()> {
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
    pub(super) fn on_signal(&mut self, stop: Stop, io: &mut Io<'_>) -> std::io::Result<()> {
        let again = self
            .interrupted_at
            .is_some_and(|t| t.elapsed() < DOUBLE_INTERRUPT);
        let reason = match stop {
            Stop::Escape => "cancelled by the user (Esc)",
            Stop::Interrupt if !again => "cancelled by the user (Ctrl-C)",
            Stop::Interrupt => "cancelled by the user (Ctrl-C twice: exiting)",
            Stop::Terminate => "cordis was asked to exit",
        };
        // Cancelled before anything is written: a closed terminal (SIGHUP) cannot write.
        self.agent.cancel(Some(reason.to_owned()));
        let said = match stop {
            Stop::Escape => "cancelling the turn (Esc)",
            Stop::Interrupt if !again => {
                self.interrupted_at = Some(Instant::now());
                "cancelling the turn (Ctrl-C again to exit)"
            }
            Stop::Interrupt => {
                self.exiting = true;
                "exiting"
            }
            Stop::Terminate => {
                self.exiting = true;
                "exiting (asked to by a signal)"
            }
        };
        writeln!(io.err, "\ncordis: {said}")?;
        io.err.flush()
    }

    /// Runs one turn, streaming its events; counts it when it does not complete.
    pub(super) async fn turn(
        &mut self,
        message: String,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        (progress, outputs): (
            &mut mpsc::UnboundedReceiver<String>,
            &mut mpsc::UnboundedReceiver<String>,
        ),
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        // Shown only where the line can be redrawn: the terminal's line editor is the input.
        let at_terminal = matches!(self.input, Input::Terminal(_));
        let mut live = super::live::LiveOutput::new(self.transcript.style().color);
        let mut clock = tokio::time::interval(Duration::from_secs(1));
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
                // The first failure to write (a terminal closed under the run: EIO) cancels
                // the turn, which is still driven to its end so the log closes it.
                let mut lost: Option<anyhow::Error> = None;
                let ended = loop {
                    let step: anyhow::Result<()> = tokio::select! {
                        biased;
                        Some(e) = events.recv() => {
                            if e.agent == current.id() && lost.is_none() {
                                let presenters = self.root.get::<Presenters>();
                                let ended = e.event.kind == cordis_session::kinds::TOOL_RESULT;
                                live.clear(ended, io.err)
                                    .and_then(|()| {
                                        self.transcript
                                            .event(&e.event, presenters.as_deref(), io.out, io.err)
                                    })
                                    .and_then(|()| expand_hint(at_terminal, &current, &e.event, io))
                                    .map_err(Into::into)
                            } else {
                                Ok(())
                            }
                        }
                        Some(text) = outputs.recv() => {
                            if at_terminal && lost.is_none() {
                                live.output(&text, io.err).map_err(Into::into)
                            } else {
                                Ok(())
                            }
                        }
                        _ = clock.tick(), if live.active() => live.draw(io.err).map_err(Into::into),
                        Some(line) = progress.recv() => {
                            live.clear(false, io.err)
                                .and_then(|()| writeln!(io.err, "{line}"))
                                .and_then(|()| io.err.flush())
                                .map_err(Into::into)
                        }
                        question = next_question(&mut self.asked, &mut self.elicited) => {
                            self.answer_question(question, io).await.map_err(Into::into)
                        }
                        stop = self.signals.next() => self.on_signal(stop, io).map_err(Into::into),
                        // Typed while the turn runs: the next message, not an answer (piped
                        // input waits until the turn ends: see `input`).
                        Some(event) = self.input.next(), if self.interactive && lost.is_none() => {
                            self.typed_in_turn(event, io).map_err(Into::into)
                        }
                        r = &mut turn => break r,
                    };
                    if let Err(e) = step
                        && lost.is_none()
                    {
                        current.cancel(Some(
                            "cordis can no longer write to its terminal".to_owned(),
                        ));
                        self.exiting = true;
                        lost = Some(e);
                    }
                };
                if lost.is_none() {
                    live.clear(true, io.err)?;
                }
                if let Some(e) = lost {
                    return Err(e);
                }
                ended
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
                    expand_hint(at_terminal, &current, &e.event, io)?;
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
            // A cancelled turn is the person's choice, not a failure.
            Ok(TurnEndReason::Completed | TurnEndReason::Aborted { .. }) => {}
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

/// Under a result whose card left lines out, at a terminal: `/expand N` shows them.
fn expand_hint(
    at_terminal: bool,
    agent: &Agent,
    event: &cordis_session::SessionEvent,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    if !at_terminal || event.kind != cordis_session::kinds::TOOL_RESULT {
        return Ok(());
    }
    match super::expand::hint(agent, event) {
        Some(hint) => writeln!(io.out, "{hint}"),
        None => Ok(()),
    }
}
