//! The slash commands that act on the session: switch, list, permissions, usage, presets, reloads.

use super::*;

impl Conversation<'_> {
    /// The line after a turn at a terminal: how long it took, the tokens its model calls
    /// reported (the log's events from `from` on) with the cached share, the context used of
    /// the window and the cost, when known.
    pub(super) fn footer(
        &self,
        from: usize,
        started: Instant,
        io: &mut Io<'_>,
    ) -> std::io::Result<()> {
        let usage = crate::session::usage::UsageSummary::of_agent(&self.agent, from);
        let mut tokens = String::new();
        if usage.answers > 0 {
            let cached = match usage.hit_ratio() {
                Some(ratio) => format!(" ({} cached, {ratio})", usage.cached_input_tokens),
                None => String::new(),
            };
            tokens = format!(
                " · {} tokens in{cached}, {} out",
                usage.input_tokens, usage.output_tokens
            );
            if let Some(context) = usage.context_text() {
                tokens.push_str(&format!(" · context {context}"));
            }
            if let Some(cost) = usage.cost_text() {
                tokens.push_str(&format!(" · {cost}"));
            }
        }
        writeln!(
            io.err,
            "cordis: {:.1} s{tokens}",
            started.elapsed().as_secs_f64()
        )
    }

    /// `/clear` (a new session) and `/resume ID`: the run goes on with another session of the
    /// same composition; the current one is saved first, and stays current if the other cannot
    /// be opened.
    pub(super) async fn switch_session(
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
            show_recent(&self.root, &id, self.transcript.style(), io).await?;
        }
        io.err.flush()?;
        Ok(())
    }

    /// `/resume` without an id: the recent sessions of this composition.
    pub(super) async fn list_sessions(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        match super::super::sessions::recent(&self.root, &self.args.config.file, RECENT_SESSIONS)
            .await
        {
            Ok(recent) => {
                write!(io.err, "{}", super::super::sessions::lines(&recent))?;
                writeln!(io.err, "cordis: /resume ID continues one of them")?;
            }
            Err(why) => writeln!(io.err, "cordis: {why}")?,
        }
        Ok(())
    }

    /// `/permissions [MODE | revoke N]`: the session's mode, grants and the command rules; or
    /// a new mode; or one grant revoked (both logged in the session).
    pub(super) fn permissions(&self, rest: &str, io: &mut Io<'_>) -> std::io::Result<()> {
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
    pub(super) fn usage(&self, io: &mut Io<'_>) -> std::io::Result<()> {
        writeln!(io.err, "cordis: {}", commands::usage_text(&self.agent))
    }

    /// `/preset [ID]`: without an id, names the preset the session runs and the others; with
    /// one, switches a blank session to it (the roster refuses once the session has a turn).
    /// Lines are read between turns, so a switch never lands mid-turn.
    pub(super) async fn switch_preset(&mut self, id: &str, io: &mut Io<'_>) -> anyhow::Result<()> {
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
    pub(super) async fn reload(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        let path = &self.args.config.file;
        let source = match super::super::read_config(path).await {
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
            Err(errors) => super::super::print_rejected_reload(&errors, io)?,
        }
        io.err.flush()?;
        Ok(())
    }

    /// A reload that restarted the `agent-presets` entry unwound every standing scope: the
    /// agent (which the reload kept) is joined to none, and could not assemble. Join it again
    /// to the preset its session runs, mounted afresh.
    pub(super) async fn rejoin_after_reload(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
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
}
