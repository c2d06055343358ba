//! A running command's output at the terminal while it runs: one status line under its call,
//! redrawn in place (`  … 3 s · the output's last line`), cleared before anything else is
//! written, so the transcript keeps only the result's card.

use std::io::Write;
use std::time::Instant;

use super::super::render::safe;

/// The status line of the commands running now.
#[derive(Debug)]
pub(super) struct LiveOutput {
    /// When the first output of the current command came, and its last non-empty line.
    running: Option<(Instant, String)>,
    /// The status line is on the screen (the cursor at its end).
    shown: bool,
    /// Dimmed (colours are on).
    color: bool,
}

/// How much of an output line the status line shows.
const SHOWN_CHARS: usize = 100;

impl LiveOutput {
    /// No command running yet; dimmed when `color`.
    pub(super) fn new(color: bool) -> LiveOutput {
        LiveOutput {
            running: None,
            shown: false,
            color,
        }
    }

    /// Takes a piece of a running command's output and redraws the status line.
    pub(super) fn output(&mut self, text: &str, err: &mut dyn Write) -> std::io::Result<()> {
        let last = text
            .lines()
            .rev()
            .map(str::trim_end)
            .find(|l| !l.is_empty())
            .map(|l| safe(l).chars().take(SHOWN_CHARS).collect::<String>());
        let running = self
            .running
            .get_or_insert_with(|| (Instant::now(), String::new()));
        if let Some(last) = last {
            running.1 = last;
        }
        self.draw(err)
    }

    /// Redraws the status line (the elapsed time moves on); nothing when no command runs.
    pub(super) fn draw(&mut self, err: &mut dyn Write) -> std::io::Result<()> {
        let Some((since, last)) = &self.running else {
            return Ok(());
        };
        let secs = since.elapsed().as_secs();
        let line = format!("  … {secs} s · {last}");
        if self.color {
            write!(err, "\r\x1b[K\x1b[2m{line}\x1b[0m")?;
        } else {
            write!(err, "\r\x1b[K{line}")?;
        }
        self.shown = true;
        err.flush()
    }

    /// Whether a command is running (the clock needs redrawing).
    pub(super) fn active(&self) -> bool {
        self.running.is_some()
    }

    /// Clears the status line before other output; `ended`: the command is over (its result
    /// comes next).
    pub(super) fn clear(&mut self, ended: bool, err: &mut dyn Write) -> std::io::Result<()> {
        if ended {
            self.running = None;
        }
        if std::mem::take(&mut self.shown) {
            write!(err, "\r\x1b[K")?;
            err.flush()?;
        }
        Ok(())
    }
}
