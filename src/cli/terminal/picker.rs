//! A list to choose one row from at a terminal (the session picker of `cordis run --resume`
//! and `/resume`): ↑/↓ (or k/j) move, Enter chooses, Esc (or q, Ctrl-C) leaves without a
//! choice. Drawn on stderr under its title, redrawn in place as the selection moves, and
//! cleared when done, so the transcript keeps only what the run says of the choice.

use std::io::Write;
use std::os::fd::BorrowedFd;

use rustix::termios::{LocalModes, OptionalActions};

use super::{ESCAPE_SEQUENCE, read_byte, readable};

/// A key the picker knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// ↑ or `k`.
    Up,
    /// ↓ or `j`.
    Down,
    /// Enter.
    Enter,
    /// Esc, `q` or Ctrl-C.
    Cancel,
    /// Anything else (ignored).
    Other,
}

/// The list, the selected row and how many lines of it are on the screen.
#[derive(Debug)]
pub(crate) struct Picker {
    title: String,
    rows: Vec<String>,
    selected: usize,
    /// Lines drawn last time (the cursor is on the line after them).
    drawn: usize,
}

impl Picker {
    /// A picker over `rows` (the first selected) under `title`.
    pub(crate) fn new(title: impl Into<String>, rows: Vec<String>) -> Picker {
        Picker {
            title: title.into(),
            rows,
            selected: 0,
            drawn: 0,
        }
    }

    /// Takes a key: `Some(Some(i))` row `i` chosen, `Some(None)` left, `None` still choosing.
    pub(crate) fn key(&mut self, key: Key) -> Option<Option<usize>> {
        match key {
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => {
                self.selected = (self.selected + 1).min(self.rows.len().saturating_sub(1));
            }
            Key::Enter if !self.rows.is_empty() => return Some(Some(self.selected)),
            Key::Enter | Key::Cancel => return Some(None),
            Key::Other => {}
        }
        None
    }

    /// The lines of the picker as drawn `width` columns wide (the selected row marked `❯` and
    /// in reverse video when `color`).
    pub(crate) fn frame(&self, width: usize, color: bool) -> Vec<String> {
        let room = width.saturating_sub(3).max(10);
        let mut lines = vec![cut(&self.title, width.max(10))];
        for (i, row) in self.rows.iter().enumerate() {
            let row = cut(row, room);
            lines.push(match (i == self.selected, color) {
                (true, true) => format!("\x1b[7m❯ {row}\x1b[0m"),
                (true, false) => format!("❯ {row}"),
                (false, _) => format!("  {row}"),
            });
        }
        lines
    }

    /// Draws the picker over its last drawing.
    pub(crate) fn draw(
        &mut self,
        out: &mut dyn Write,
        width: usize,
        color: bool,
    ) -> std::io::Result<()> {
        self.clear(out)?;
        let lines = self.frame(width, color);
        for line in &lines {
            write!(out, "{line}\r\n")?;
        }
        self.drawn = lines.len();
        out.flush()
    }

    /// Removes the picker from the screen.
    pub(crate) fn clear(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if self.drawn > 0 {
            write!(out, "\x1b[{}A\r\x1b[J", self.drawn)?;
            self.drawn = 0;
        }
        out.flush()
    }
}

/// `text` cut to `width` characters (an ellipsis marking the cut).
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The next key on `fd` (`None`: the input ended).
pub(crate) fn read_key(fd: BorrowedFd<'_>) -> Option<Key> {
    let byte = read_byte(fd)?;
    Some(match byte {
        b'\r' | b'\n' => Key::Enter,
        b'k' => Key::Up,
        b'j' => Key::Down,
        b'q' | 0x03 | 0x04 => Key::Cancel,
        0x1b => {
            if !readable(fd, ESCAPE_SEQUENCE) {
                return Some(Key::Cancel);
            }
            match (read_byte(fd), read_byte(fd)) {
                (Some(b'[' | b'O'), Some(b'A')) => Key::Up,
                (Some(b'[' | b'O'), Some(b'B')) => Key::Down,
                _ => Key::Other,
            }
        }
        _ => Key::Other,
    })
}

/// The terminal's width in columns (80 when it says none).
pub(crate) fn width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|&c| c > 0)
        .unwrap_or(80)
}

/// Runs a picker on stdin and stderr: keys read one by one without echo, Ctrl-C a key (not a
/// signal) while it runs; the terminal's mode is put back after. Blocking: call it off the
/// async threads.
///
/// # Errors
/// Writing to stderr failed.
pub(crate) fn pick(title: &str, rows: Vec<String>, color: bool) -> std::io::Result<Option<usize>> {
    let stdin = std::io::stdin();
    let fd = std::os::fd::AsFd::as_fd(&stdin);
    let original = rustix::termios::tcgetattr(fd).ok();
    if let Some(mut keys) = original.clone() {
        keys.local_modes
            .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
        keys.special_codes[rustix::termios::SpecialCodeIndex::VMIN] = 1;
        keys.special_codes[rustix::termios::SpecialCodeIndex::VTIME] = 0;
        let _ = rustix::termios::tcsetattr(fd, OptionalActions::Now, &keys);
    }
    let mut err = std::io::stderr();
    let mut picker = Picker::new(title, rows);
    let chosen = (|| {
        picker.draw(&mut err, width(), color)?;
        loop {
            let Some(key) = read_key(fd) else {
                return Ok(None);
            };
            if let Some(chosen) = picker.key(key) {
                return Ok(chosen);
            }
            picker.draw(&mut err, width(), color)?;
        }
    })();
    let _ = picker.clear(&mut err);
    if let Some(original) = &original {
        let _ = rustix::termios::tcsetattr(fd, OptionalActions::Now, original);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker() -> Picker {
        Picker::new("pick", vec!["a".into(), "b".into(), "c".into()])
    }

    #[test]
    fn arrows_move_within_the_rows_and_enter_chooses() {
        let mut p = picker();
        assert_eq!(p.key(Key::Up), None);
        assert_eq!(p.key(Key::Down), None);
        assert_eq!(p.key(Key::Down), None);
        assert_eq!(p.key(Key::Down), None);
        assert_eq!(p.key(Key::Other), None);
        assert_eq!(p.key(Key::Enter), Some(Some(2)));
        let mut p = picker();
        p.key(Key::Down);
        assert_eq!(p.key(Key::Cancel), Some(None));
    }

    #[test]
    fn the_selected_row_is_marked_and_long_rows_are_cut() {
        let mut p = Picker::new("t", vec!["one".into(), "x".repeat(40)]);
        p.key(Key::Down);
        assert_eq!(
            p.frame(20, false),
            ["t", "  one", &format!("❯ {}…", "x".repeat(16))]
        );
        assert_eq!(
            p.frame(20, true)[2],
            format!("\x1b[7m❯ {}…\x1b[0m", "x".repeat(16))
        );
    }

    #[test]
    fn an_empty_list_is_left_on_enter() {
        let mut p = Picker::new("t", Vec::new());
        assert_eq!(p.key(Key::Enter), Some(None));
    }
}
