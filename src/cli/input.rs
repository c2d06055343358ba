//! What `cordis run` reads: one message per line, or a `"""`-fenced block, from stdin on a
//! thread of its own (stdin has no async reader that can be cancelled, and a blocked read must
//! never hold up the runtime or the process's exit).

use tokio::sync::mpsc;

/// The multi-line delimiter.
pub(crate) const FENCE: &str = "\"\"\"";

/// Reads messages from stdin on a thread: lines, or `"""`-fenced blocks.
pub(crate) fn spawn_reader(prompt: bool) -> mpsc::UnboundedReceiver<String> {
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
