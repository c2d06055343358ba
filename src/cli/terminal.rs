//! The keyboard of `cordis run` at a terminal, owned by one thread: a line editor at the prompt
//! (history, arrow keys, `"""` blocks, bracketed paste, Tab for slash commands), keys read one
//! by one while a turn runs (Esc cancels it; lines typed meanwhile are kept as the next
//! messages), one keypress for an approval question, and one edited line per field of an MCP
//! server's form.
//!
//! One thread reads the terminal so that the order of what it read is the order things
//! happened in: a question is written by the same thread that reads its answer, after it has
//! taken everything typed before it, so a key pressed ahead can never answer it.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use cordis_approvals::Answer;
use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, Termios};
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Config, Editor, Helper};
use tokio::sync::mpsc;

use super::input::{FENCE, Typed, kept_notice};
use crate::session::commands::COMMANDS;

pub(crate) mod picker;

/// The prompt the line editor shows.
pub(crate) const PROMPT: &str = "> ";

/// At most this many bytes of one line typed while a turn runs are kept.
const MAX_AHEAD_LINE: usize = 64 * 1024;

/// How long after Esc the rest of an escape sequence (an arrow key) may take to arrive.
const ESCAPE_SEQUENCE: Duration = Duration::from_millis(40);

/// How long after a one-key answer the rest of the word (`es` of `yes`) may take to arrive.
const ANSWER_REST: Duration = Duration::from_millis(400);

/// How often the reading thread looks for a request while waiting for keys.
const TICK: Duration = Duration::from_millis(20);

/// What the terminal reports.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A message (or `/command`) entered at the prompt.
    Line(Typed),
    /// A line typed while a turn ran: kept as a later message (already announced on screen).
    Ahead(Typed),
    /// Esc while a turn ran: cancel it.
    Escape,
    /// Ctrl-C where the terminal has no signal for it: at the prompt, or at a question's reason.
    Interrupted,
    /// Ctrl-D at the prompt (or the terminal went away).
    Eof,
    /// The answer to question `id` (see [`Terminal::ask`]).
    Answer { id: u64, answer: Answer },
    /// The prompt was not shown: lines typed just before it came in as [`Event::Ahead`], and
    /// the first of them is the message.
    PromptSkipped,
    /// The line entered for question `id` (see [`Terminal::read_line`]).
    Entered { id: u64, line: Entered },
    /// The row chosen in picker `id` (see [`Terminal::pick`]); `None`: left with Esc.
    Picked { id: u64, choice: Option<usize> },
    /// Command `id` that had the terminal (see [`Terminal::hand_over`]) has ended.
    HandedBack { id: u64 },
}

/// What was entered at a question's line (a form's field).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entered {
    /// The line, without its newline.
    Text(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line, or the terminal went away.
    Eof,
}

/// What the run asks of the terminal.
enum Request {
    /// Read a message at the prompt.
    Prompt,
    /// Show question `id`, then read its answer.
    Ask { id: u64, text: String },
    /// Write `text`, then read one line with the line editor after `prompt`: question `id`.
    Line {
        id: u64,
        text: String,
        prompt: String,
    },
    /// The question is moot (the turn was cancelled).
    Cancel,
    /// Recall these messages with arrow-up (a resumed session's, oldest first).
    Remember(Vec<String>),
    /// Show a picker over `rows` under `title`: picker `id`.
    Pick {
        id: u64,
        title: String,
        rows: Vec<String>,
        color: bool,
    },
    /// Give the terminal to `command` (a pager) until it exits: command `id`.
    HandOver {
        id: u64,
        command: std::process::Command,
    },
}

/// The terminal's reading thread, and the mode the terminal was in before it (put back on drop).
pub(crate) struct Terminal {
    requests: std_mpsc::Sender<Request>,
    /// The id the next question gets.
    next_question: u64,
    events: mpsc::UnboundedReceiver<Event>,
    original: Option<Termios>,
}

/// Ctrl-C on a line with text clears it; on an empty line it interrupts (rustyline's own).
struct ClearOrInterrupt;

impl rustyline::ConditionalEventHandler for ClearOrInterrupt {
    fn handle(
        &self,
        _: &rustyline::Event,
        _: rustyline::RepeatCount,
        _: bool,
        ctx: &rustyline::EventContext<'_>,
    ) -> Option<rustyline::Cmd> {
        (!ctx.line().is_empty()).then_some(rustyline::Cmd::Kill(rustyline::Movement::WholeBuffer))
    }
}

impl Terminal {
    /// Starts reading the terminal on stdin.
    ///
    /// # Errors
    /// The line editor cannot be set up.
    pub(crate) fn start() -> std::io::Result<Terminal> {
        let original = rustix::termios::tcgetattr(std::io::stdin()).ok();
        let config = Config::builder()
            .auto_add_history(false)
            .bracketed_paste(true)
            .max_history_size(1000)
            .map_err(std::io::Error::other)?
            .build();
        let mut editor: Editor<Messages, DefaultHistory> =
            Editor::with_config(config).map_err(std::io::Error::other)?;
        editor.set_helper(Some(Messages));
        // Ctrl-C clears what is typed; on an empty line it is what it always was (it ends the
        // run at the prompt, answers no to a question).
        editor.bind_sequence(
            rustyline::KeyEvent::ctrl('C'),
            rustyline::EventHandler::Conditional(Box::new(ClearOrInterrupt)),
        );
        let (requests, rx) = std_mpsc::channel();
        let (tx, events) = mpsc::unbounded_channel();
        // Set once, here: the line editor puts back the mode it found each time it returns, and
        // dropping the terminal puts back the original, with no thread left to undo it.
        if let Some(keys) = original.clone().map(keys_mode) {
            rustix::termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &keys)?;
        }
        std::thread::Builder::new()
            .name("cordis-terminal".into())
            .spawn(move || {
                Reader {
                    editor,
                    requests: rx,
                    events: tx,
                    partial: Vec::new(),
                    end_ahead: false,
                    later: None,
                }
                .run();
            })?;
        Ok(Terminal {
            requests,
            next_question: 0,
            events,
            original,
        })
    }

    /// Asks for the next message at the prompt; it arrives as [`Event::Line`].
    pub(crate) fn prompt(&self) {
        let _ = self.requests.send(Request::Prompt);
    }

    /// Shows `question` and reads its answer, which arrives as [`Event::Answer`] with the id
    /// returned here (so an answer to a question that was dropped never answers a later one).
    pub(crate) fn ask(&mut self, question: String) -> u64 {
        let id = self.next_question;
        self.next_question += 1;
        let _ = self.requests.send(Request::Ask { id, text: question });
        id
    }

    /// Writes `text` (nothing typed before it counts as the answer), then reads one line after
    /// `prompt`; it arrives as [`Event::Entered`] with the id returned here.
    pub(crate) fn read_line(&mut self, text: String, prompt: String) -> u64 {
        let id = self.next_question;
        self.next_question += 1;
        let _ = self.requests.send(Request::Line { id, text, prompt });
        id
    }

    /// Drops the question asked last (its turn was cancelled).
    pub(crate) fn cancel(&self) {
        let _ = self.requests.send(Request::Cancel);
    }

    /// Lets arrow-up recall `messages` (oldest first).
    pub(crate) fn remember(&self, messages: Vec<String>) {
        let _ = self.requests.send(Request::Remember(messages));
    }

    /// Shows a picker over `rows` under `title`; the choice arrives as [`Event::Picked`] with
    /// the id returned here.
    pub(crate) fn pick(&mut self, title: String, rows: Vec<String>, color: bool) -> u64 {
        let id = self.next_question;
        self.next_question += 1;
        let _ = self.requests.send(Request::Pick {
            id,
            title,
            rows,
            color,
        });
        id
    }

    /// Runs `command` with the terminal in the mode it had before the run (a pager reads its
    /// keys); [`Event::HandedBack`] with the id returned here says it has exited.
    pub(crate) fn hand_over(&mut self, command: std::process::Command) -> u64 {
        let id = self.next_question;
        self.next_question += 1;
        let _ = self.requests.send(Request::HandOver { id, command });
        id
    }

    /// The next thing the terminal reports (`None` once its thread has ended).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // The reading thread may be blocked inside the line editor (in raw mode) when the run
        // ends on a signal: the terminal gets its mode back all the same.
        if let Some(original) = &self.original {
            let _ = rustix::termios::tcsetattr(std::io::stdin(), OptionalActions::Now, original);
        }
    }
}

/// The mode for reading keys while a turn runs: no line buffering and no echo, but Ctrl-C is
/// still the terminal's SIGINT (the run's signal handling owns it).
fn keys_mode(mut termios: Termios) -> Termios {
    termios
        .local_modes
        .remove(LocalModes::ICANON | LocalModes::ECHO);
    termios.local_modes.insert(LocalModes::ISIG);
    termios.special_codes[SpecialCodeIndex::VMIN] = 1;
    termios.special_codes[SpecialCodeIndex::VTIME] = 0;
    termios
}

/// Runs `command` on the terminal in its usual mode (line buffering and echo back, as before
/// the run), then puts the run's key mode back.
fn hand_over(mut command: std::process::Command) {
    let stdin = std::io::stdin();
    let run_mode = rustix::termios::tcgetattr(&stdin).ok();
    if let Some(mut usual) = run_mode.clone() {
        usual
            .local_modes
            .insert(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
        let _ = rustix::termios::tcsetattr(&stdin, OptionalActions::Now, &usual);
    }
    if let Err(e) = command.status() {
        let _ = writeln!(
            std::io::stderr(),
            "cordis: cannot run {}: {e}",
            command.get_program().to_string_lossy()
        );
    }
    if let Some(run_mode) = &run_mode {
        let _ = rustix::termios::tcsetattr(&stdin, OptionalActions::Now, run_mode);
    }
}

/// Waits at most `timeout` for stdin to be readable.
fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
}

/// One byte from stdin (`None`: end of input or an error).
fn read_byte(fd: BorrowedFd<'_>) -> Option<u8> {
    let mut byte = [0u8; 1];
    match rustix::io::read(fd, &mut byte) {
        Ok(1) => Some(byte[0]),
        _ => None,
    }
}

/// What the line editor knows of messages: a `"""` block goes on until its closing fence, and
/// Tab completes slash commands.
struct Messages;

impl Validator for Messages {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if fence_open(ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for Messages {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let typed = &line[..pos];
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Ok((0, Vec::new()));
        }
        let names = COMMANDS
            .iter()
            .map(|c| c.usage.split_whitespace().next().unwrap_or(c.usage))
            .filter(|name| name.starts_with(typed))
            .map(str::to_owned)
            .collect();
        Ok((0, names))
    }
}

impl Hinter for Messages {
    type Hint = String;
}

impl Highlighter for Messages {}

impl Helper for Messages {}

/// Whether `input` opens a `"""` block it does not close.
fn fence_open(input: &str) -> bool {
    let mut lines = input.lines();
    if lines.next().map(str::trim) != Some(FENCE) {
        return false;
    }
    !lines.any(|line| line.trim() == FENCE)
}

/// What the line editor returned, as a message: a `"""` block's lines, or the line.
fn typed_of(entered: &str) -> Typed {
    let mut lines = entered.lines();
    let fenced = lines.next().map(str::trim) == Some(FENCE);
    let text = if fenced {
        lines
            .take_while(|line| line.trim() != FENCE)
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        entered.to_owned()
    };
    Typed {
        text,
        at: Instant::now(),
        fenced,
    }
}

/// The reading thread's state.
struct Reader {
    editor: Editor<Messages, DefaultHistory>,
    requests: std_mpsc::Receiver<Request>,
    events: mpsc::UnboundedSender<Event>,
    /// What was typed on the current line while a turn ran (put in the editor at the prompt).
    partial: Vec<u8>,
    /// Ctrl-D was typed on an empty line while a turn ran: the next prompt ends the input, as
    /// a Ctrl-D typed ahead does in a terminal's own line mode.
    end_ahead: bool,
    /// A request that came while a question waited for its key: served next, never dropped.
    later: Option<Request>,
}

impl Reader {
    fn run(mut self) {
        loop {
            let next = match self.later.take() {
                Some(request) => Ok(request),
                None => self.requests.recv_timeout(TICK),
            };
            match next {
                Ok(Request::Prompt) => {
                    let lines = self.take_typed();
                    if lines == 0 && std::mem::take(&mut self.end_ahead) {
                        if self.events.send(Event::Eof).is_err() {
                            return;
                        }
                    } else if lines > 0 {
                        if self.events.send(Event::PromptSkipped).is_err() {
                            return;
                        }
                    } else if !self.prompt() {
                        return;
                    }
                }
                Ok(Request::Ask { id, text }) => {
                    // Everything typed before the question is shown is a message, not its
                    // answer.
                    let _ = self.take_typed();
                    let mut err = std::io::stderr();
                    let _ = err.write_all(text.as_bytes());
                    let _ = err.flush();
                    if !self.answer(id) {
                        return;
                    }
                }
                Ok(Request::Line { id, text, prompt }) => {
                    let _ = self.take_typed();
                    let mut err = std::io::stderr();
                    let _ = err.write_all(text.as_bytes());
                    let _ = err.flush();
                    if !self.line(id, &prompt) {
                        return;
                    }
                }
                Ok(Request::Cancel) => {}
                Ok(Request::Remember(messages)) => {
                    for message in messages {
                        let _ = self.editor.add_history_entry(message);
                    }
                }
                Ok(Request::Pick {
                    id,
                    title,
                    rows,
                    color,
                }) => {
                    let _ = self.take_typed();
                    let choice = picker::pick(&title, rows, color).ok().flatten();
                    if self.events.send(Event::Picked { id, choice }).is_err() {
                        return;
                    }
                }
                Ok(Request::HandOver { id, command }) => {
                    let _ = self.take_typed();
                    hand_over(command);
                    if self.events.send(Event::HandedBack { id }).is_err() {
                        return;
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    if self.events.is_closed() {
                        return;
                    }
                    let _ = self.take_typed();
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Takes what has been typed so far; how many lines that finished.
    fn take_typed(&mut self) -> usize {
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let mut lines = 0;
        while readable(fd, Duration::ZERO) {
            let Some(byte) = read_byte(fd) else {
                return lines;
            };
            if self.typed_during_turn(byte, fd) {
                lines += 1;
            }
        }
        lines
    }

    /// One key typed while a turn ran; `true` when it finished a line (kept as a message).
    fn typed_during_turn(&mut self, byte: u8, fd: BorrowedFd<'_>) -> bool {
        match byte {
            0x1b => {
                if readable(fd, ESCAPE_SEQUENCE) {
                    skip_escape_sequence(fd);
                } else {
                    let _ = self.events.send(Event::Escape);
                }
            }
            b'\r' | b'\n' => {
                let line = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
                if line.trim().is_empty() {
                    return false;
                }
                let mut err = std::io::stderr();
                let _ = writeln!(err, "{}", kept_notice(&line));
                let _ = err.flush();
                let _ = self.events.send(Event::Ahead(Typed {
                    text: line,
                    at: Instant::now(),
                    fenced: false,
                }));
                return true;
            }
            0x7f | 0x08 => {
                let text = String::from_utf8_lossy(&self.partial).into_owned();
                let mut chars = text.chars();
                chars.next_back();
                self.partial = chars.as_str().as_bytes().to_vec();
            }
            // Ctrl-U clears the line.
            0x15 => self.partial.clear(),
            // Ctrl-C that reached us as a key (typed as the line editor handed over, before
            // the terminal's signal took it again) is still Ctrl-C.
            0x03 => {
                let _ = self.events.send(Event::Interrupted);
            }
            0x04 if self.partial.is_empty() => self.end_ahead = true,
            // Other control keys mean nothing while a turn runs.
            b if b < 0x20 => {}
            b if self.partial.len() < MAX_AHEAD_LINE => self.partial.push(b),
            _ => {}
        }
        false
    }

    /// Reads one message with the line editor, starting from what was typed during the turn;
    /// `false` once the terminal is gone.
    fn prompt(&mut self) -> bool {
        let ahead = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
        let event = match self.editor.readline_with_initial(PROMPT, (&ahead, "")) {
            Ok(entered) => {
                if !entered.trim().is_empty() {
                    let _ = self.editor.add_history_entry(entered.as_str());
                }
                Event::Line(typed_of(&entered))
            }
            Err(ReadlineError::Interrupted) => Event::Interrupted,
            Err(ReadlineError::Eof) => Event::Eof,
            Err(_) => {
                let _ = self.events.send(Event::Eof);
                return false;
            }
        };
        self.events.send(event).is_ok()
    }

    /// Reads the answer to the question just shown: one key (`y`, `a`, `n`, Enter, Esc), or a
    /// reason for saying no. `false` once the terminal is gone.
    fn answer(&mut self, id: u64) -> bool {
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let byte = loop {
            match self.requests.try_recv() {
                Ok(Request::Cancel) => return true,
                Ok(Request::Remember(messages)) => {
                    for message in messages {
                        let _ = self.editor.add_history_entry(message);
                    }
                }
                // The run moved on (a prompt, another question): this question is moot.
                Ok(request) => {
                    self.later = Some(request);
                    return true;
                }
                Err(std_mpsc::TryRecvError::Empty) => {}
                Err(std_mpsc::TryRecvError::Disconnected) => return false,
            }
            if readable(fd, TICK) {
                match read_byte(fd) {
                    Some(byte) => break byte,
                    None => {
                        let _ = self.events.send(Event::Eof);
                        return false;
                    }
                }
            }
        };
        let no = || Answer::Deny(Some("the user said no".to_owned()));
        let (answer, shown) = match byte {
            b'y' | b'Y' => (Answer::Allow, "yes"),
            b'a' | b'A' => (Answer::AllowAlways, "always"),
            b'n' | b'N' | b'\r' | b'\n' => (no(), "no"),
            0x1b => {
                if readable(fd, ESCAPE_SEQUENCE) {
                    skip_escape_sequence(fd);
                }
                (no(), "no")
            }
            b'e' | b'E' => return self.reason(id, String::new()),
            b if b >= 0x20 && b != 0x7f => return self.reason(id, char::from(b).to_string()),
            _ => (no(), "no"),
        };
        let mut err = std::io::stderr();
        let _ = writeln!(err, "{shown}");
        let _ = err.flush();
        let sent = self.events.send(Event::Answer { id, answer }).is_ok();
        if matches!(byte.to_ascii_lowercase(), b'y' | b'a' | b'n') {
            self.rest_of_answer(&shown[1..], fd);
        }
        sent
    }

    /// After a one-key answer, the rest of its word and an Enter typed right after it (`yes`,
    /// Enter): part of the answer, not the next message. The first other key ends this, and is
    /// kept as typed.
    fn rest_of_answer(&mut self, rest: &str, fd: BorrowedFd<'_>) {
        let mut rest = rest.bytes();
        while readable(fd, ANSWER_REST) {
            let Some(byte) = read_byte(fd) else { return };
            match rest.next() {
                _ if matches!(byte, b'\r' | b'\n') => return,
                Some(expected) if byte.eq_ignore_ascii_case(&expected) => {}
                _ => {
                    let _ = self.typed_during_turn(byte, fd);
                    return;
                }
            }
        }
    }

    /// One line for question `id` (a form's field), not kept in the history; `false` once the
    /// terminal is gone.
    fn line(&mut self, id: u64, prompt: &str) -> bool {
        let (line, gone) = match self.editor.readline(prompt) {
            Ok(text) => (Entered::Text(text), false),
            Err(ReadlineError::Interrupted) => (Entered::Interrupted, false),
            Err(ReadlineError::Eof) => (Entered::Eof, false),
            Err(_) => (Entered::Eof, true),
        };
        let sent = self.events.send(Event::Entered { id, line }).is_ok();
        if gone {
            let _ = self.events.send(Event::Eof);
        }
        sent && !gone
    }

    /// "No, and here is why": a line for the model, starting with `typed`.
    fn reason(&mut self, id: u64, typed: String) -> bool {
        let mut err = std::io::stderr();
        let _ = writeln!(err);
        let answer = match self.editor.readline_with_initial("why not? ", (&typed, "")) {
            Ok(why) if !why.trim().is_empty() => {
                Answer::Deny(Some(format!("the user said no: {}", why.trim())))
            }
            Ok(_) => Answer::Deny(Some("the user said no".to_owned())),
            Err(error) => {
                let answer = Answer::Deny(Some("the user said no".to_owned()));
                let _ = self.events.send(Event::Answer { id, answer });
                return match error {
                    ReadlineError::Interrupted => self.events.send(Event::Interrupted).is_ok(),
                    _ => {
                        let _ = self.events.send(Event::Eof);
                        false
                    }
                };
            }
        };
        self.events.send(Event::Answer { id, answer }).is_ok()
    }
}

/// Skips the rest of an escape sequence whose Esc was read (`[` or `O`, parameters, a final
/// byte), so an arrow key typed during a turn is neither text nor a cancel.
fn skip_escape_sequence(fd: BorrowedFd<'_>) {
    let Some(first) = read_byte(fd) else { return };
    if first != b'[' && first != b'O' {
        return;
    }
    for _ in 0..64 {
        if !readable(fd, ESCAPE_SEQUENCE) {
            return;
        }
        match read_byte(fd) {
            Some(b) if (0x40..=0x7e).contains(&b) => return,
            Some(_) => {}
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_keeps_the_editor_open_until_it_closes() {
        assert!(!fence_open("hello"));
        assert!(fence_open("\"\"\""));
        assert!(fence_open("\"\"\"\nline one"));
        assert!(!fence_open("\"\"\"\nline one\n\"\"\""));
        assert!(!fence_open("say \"\"\" here"));
    }

    #[test]
    fn an_entered_block_is_a_fenced_message() {
        let block = typed_of("\"\"\"\n/not a command\nsecond\n\"\"\"");
        assert_eq!(block.text, "/not a command\nsecond");
        assert!(block.fenced);
        let line = typed_of("/help");
        assert_eq!(line.text, "/help");
        assert!(!line.fenced);
    }

    #[test]
    fn tab_completes_slash_commands_only() {
        let history = DefaultHistory::new();
        let ctx = rustyline::Context::new(&history);
        let (_, names) = Messages.complete("/pr", 3, &ctx).unwrap();
        assert_eq!(names, ["/preset"]);
        let (_, none) = Messages.complete("pr", 2, &ctx).unwrap();
        assert!(none.is_empty());
        let (_, all) = Messages.complete("/", 1, &ctx).unwrap();
        assert_eq!(all.len(), COMMANDS.len());
    }
}
