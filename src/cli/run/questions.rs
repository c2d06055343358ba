//! What the run asks the person at the terminal while a turn runs: approvals and MCP servers' forms.

use super::*;

impl Conversation<'_> {
    /// Asks the person at the terminal about one call. What was typed before the question was
    /// shown is kept as the next messages, never taken as its answer.
    pub(super) async fn ask(
        &mut self,
        request: &ApprovalRequest,
        io: &mut Io<'_>,
    ) -> std::io::Result<Answer> {
        let text = question(&self.root, request, self.transcript.style());
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
        let answer = match self.await_reply(question, shown, &text, io).await? {
            Reply::Terminal(Event::Answer { answer, .. }) => answer,
            Reply::Line(text) => answer_of(&text),
            Reply::Interrupted | Reply::Terminal(_) => cancelled(),
            Reply::Eof => Answer::Deny(Some("the input ended before an answer".to_owned())),
        };
        if matches!(answer, Answer::Allow | Answer::AllowAlways) {
            self.transcript.shown_when_asked(&request.call.call_id);
        }
        Ok(answer)
    }

    /// Waits for the reply to a question shown: the terminal's answer to question `question`,
    /// or (with lines) a line read after `shown`. A line typed before it is kept as the next
    /// message and the question (`again`) written anew; Ctrl-C or a signal is acted on (the
    /// turn is cancelled) and reads as [`Reply::Interrupted`].
    pub(super) async fn await_reply(
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
                Some(
                    Event::Escape
                    | Event::PromptSkipped
                    | Event::Picked { .. }
                    | Event::HandedBack { .. },
                ) => {}
                Some(Event::Eof) | None => return Ok(Reply::Eof),
            }
        }
    }

    /// Lets forms be asked (`true`) or not; when no longer, a form that came too late to be
    /// asked is declined, saying so.
    pub(super) fn listen(&mut self, on: bool) {
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
    pub(super) async fn serving<T>(
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
    pub(super) async fn answer_question(
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
    pub(super) async fn fill(
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
    pub(super) async fn read_field(
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
}
