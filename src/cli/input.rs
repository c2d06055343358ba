//! What `cordis run` reads: one message per line, or a `"""`-fenced block, from stdin on a
//! thread of its own (stdin has no async reader that can be cancelled, and a blocked read must
//! never hold up the runtime or the process's exit).
//!
//! Each line carries the moment it was read, so an approval question can tell the answer
//! typed after it from lines typed ahead while the model was working (those are messages).
//! Piped input is read only as the run takes it (backpressure): a script's every line reaches
//! the agent, however many it pipes.
//! Blank lines are passed on too: at a question, Enter means no; between turns they are
//! skipped.

use std::time::Instant;

use tokio::sync::mpsc;

/// The multi-line delimiter.
pub(crate) const FENCE: &str = "\"\"\"";

/// A message (or an answer) as typed, and when its line was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Typed {
    /// The text: one line, or a fenced block's lines joined; may be empty (a blank line).
    pub text: String,
    /// When the (last) line was read.
    pub at: Instant,
    /// A `"""`-fenced block: always a message, never a `/` command.
    pub fenced: bool,
}

/// What the screen says of a line typed while the agent worked (it is the next message).
pub(crate) fn kept_notice(text: &str) -> String {
    format!(
        "\ncordis: {:?} was typed while the agent worked: kept as your next message",
        super::render::safe(text)
    )
}

/// How many piped messages are read ahead of the agent: the reading thread waits (and so
/// does whatever writes the pipe) until the run takes one. A person's lines are all read as
/// typed (their reading time tells an answer from a line typed ahead).
pub(crate) const PIPED_READ_AHEAD: usize = 1;

/// The messages read from stdin, in order.
pub(crate) enum Lines {
    /// A person types: every line is read at once, stamped with when it was read.
    Typed(mpsc::UnboundedReceiver<Typed>),
    /// Piped: read when the run is ready for them, at most [`PIPED_READ_AHEAD`] ahead.
    Piped(mpsc::Receiver<Typed>),
}

impl Lines {
    /// The next message; `None` at the end of the input.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn recv(&mut self) -> Option<Typed> {
        match self {
            Lines::Typed(rx) => rx.recv().await,
            Lines::Piped(rx) => rx.recv().await,
        }
    }
}

/// Reads messages from stdin on a thread: lines, or `"""`-fenced blocks. With `interactive`
/// false (stdin is a pipe or a file) the thread reads only as fast as the run takes them
/// (backpressure), so no message ever has to be dropped.
pub(crate) fn spawn_reader(interactive: bool) -> Lines {
    if interactive {
        let (tx, rx) = mpsc::unbounded_channel();
        spawn_reading(move |typed| tx.send(typed).is_ok());
        Lines::Typed(rx)
    } else {
        let (tx, rx) = mpsc::channel(PIPED_READ_AHEAD);
        spawn_reading(move |typed| tx.blocking_send(typed).is_ok());
        Lines::Piped(rx)
    }
}

/// Reads stdin on a thread, handing each message to `send` (which returns false when no one
/// takes them any more).
fn spawn_reading(send: impl FnMut(Typed) -> bool + Send + 'static) {
    std::thread::spawn(move || read_messages(std::io::stdin().lock(), send));
}

/// Reads `input` to its end, handing each message (a line, or a fenced block's lines joined)
/// to `send`; stops early when `send` returns false.
fn read_messages(mut input: impl std::io::BufRead, mut send: impl FnMut(Typed) -> bool) {
    let mut block: Option<Vec<String>> = None;
    let mut line = String::new();
    let mut send = |text: String, fenced: bool| {
        send(Typed {
            text,
            at: Instant::now(),
            fenced,
        })
    };
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = line.trim_end_matches(['\n', '\r']);
        match &mut block {
            Some(lines) if text.trim() == FENCE => {
                let message = lines.join("\n");
                block = None;
                if !message.trim().is_empty() && !send(message, true) {
                    break;
                }
            }
            Some(lines) => lines.push(text.to_owned()),
            None if text.trim() == FENCE => block = Some(Vec::new()),
            None => {
                if !send(text.to_owned(), false) {
                    break;
                }
            }
        }
    }
    // An unterminated block is still a message.
    if let Some(lines) = block {
        let message = lines.join("\n");
        if !message.trim().is_empty() {
            let _ = send(message, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piped_messages_wait_for_the_run_to_take_them_and_none_is_lost() {
        let text: String = (1..=200).map(|i| format!("line {i}\n")).collect();
        let (tx, mut rx) = mpsc::channel(PIPED_READ_AHEAD);
        let reader = std::thread::spawn(move || {
            read_messages(std::io::Cursor::new(text), move |typed| {
                tx.blocking_send(typed).is_ok()
            });
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut got = Vec::new();
        while let Some(typed) = runtime.block_on(rx.recv()) {
            got.push(typed.text);
        }
        reader.join().unwrap();
        let want: Vec<String> = (1..=200).map(|i| format!("line {i}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_fenced_block_is_one_message_and_an_unterminated_one_still_counts() {
        let mut got = Vec::new();
        read_messages(
            std::io::Cursor::new("a\n\"\"\"\nb\n/c\n\"\"\"\n\"\"\"\nd\n"),
            |typed| {
                got.push((typed.text, typed.fenced));
                true
            },
        );
        let want = [("a", false), ("b\n/c", true), ("d", true)].map(|(t, f)| (t.to_owned(), f));
        assert_eq!(got, want);
    }
}
