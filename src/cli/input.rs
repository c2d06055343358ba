//! What `cordis run` reads: one message per line, or a `"""`-fenced block, from stdin on a
//! thread of its own (stdin has no async reader that can be cancelled, and a blocked read must
//! never hold up the runtime or the process's exit).
//!
//! Each line carries the moment it was read, so an approval question can tell the answer
//! typed after it from lines typed ahead while the model was working (those are messages).
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

/// Reads messages from stdin on a thread: lines, or `"""`-fenced blocks.
pub(crate) fn spawn_reader() -> mpsc::UnboundedReceiver<Typed> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut block: Option<Vec<String>> = None;
        let mut line = String::new();
        let send = |text: String, fenced: bool| {
            tx.send(Typed {
                text,
                at: Instant::now(),
                fenced,
            })
            .is_ok()
        };
        loop {
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
    });
    rx
}
