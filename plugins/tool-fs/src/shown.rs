//! What an approval card carries of a change to a file: both whole texts when both fit the
//! bounds below, else only the lines that differ with three lines of context around them (real
//! line numbers), and when even those are over the bounds, their first lines; the card's text
//! says what was left out. A card is rendered by every front end (a terminal prints it, the page
//! diffs it, an editor gets it in one message), so what it carries is bounded here, once.

use cordis_presenter::Card;

/// The most lines of each side (before, after) an approval card carries (the page diffs at most
/// 2000 lines a side).
pub const MAX_SHOWN_LINES: usize = 1000;

/// The most bytes of each side (before, after) an approval card carries.
pub const MAX_SHOWN_BYTES: usize = 64 * 1024;

/// Unchanged lines shown around a change (as a unified diff shows them).
const CONTEXT: usize = 3;

/// A change as a card shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// The diff card (`old_text` `None`: a new file).
    pub card: Card,
    /// What the card leaves out, when it leaves anything out.
    pub note: Option<String>,
    /// The first line that differs (1-based).
    pub first_changed: u64,
}

fn fits(lines: &[&str]) -> bool {
    lines.len() <= MAX_SHOWN_LINES
        && lines.iter().map(|l| l.len()).sum::<usize>() <= MAX_SHOWN_BYTES
}

/// The first lines of `lines` within the bounds (a first line over the byte bound cut at a
/// character boundary), and how many whole lines that is.
fn head(lines: &[&str]) -> (String, usize) {
    let mut out = String::new();
    let mut taken = 0;
    for line in lines.iter().take(MAX_SHOWN_LINES) {
        if out.len() + line.len() > MAX_SHOWN_BYTES {
            if taken == 0 {
                let mut cut = MAX_SHOWN_BYTES;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.push_str(&line[..cut]);
                out.push('\n');
            }
            break;
        }
        out.push_str(line);
        taken += 1;
    }
    (out, taken)
}

/// The card of a change of `path` from `before` (`None`: no file) to `after`.
pub(crate) fn change(path: &str, before: Option<&str>, after: &str) -> Shown {
    let old: Vec<&str> = before.unwrap_or_default().split_inclusive('\n').collect();
    let new: Vec<&str> = after.split_inclusive('\n').collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let first_changed = prefix as u64 + 1;
    if fits(&old) && fits(&new) {
        return Shown {
            card: Card::Diff {
                path: path.to_owned(),
                old_text: before.map(str::to_owned),
                new_text: after.to_owned(),
                first_line: None,
            },
            note: None,
            first_changed,
        };
    }
    let room = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let start = prefix.saturating_sub(CONTEXT);
    let hidden_tail = suffix - suffix.min(CONTEXT);
    let old_part = &old[start..old.len() - hidden_tail];
    let new_part = &new[start..new.len() - hidden_tail];
    let (old_text, old_taken) = head(old_part);
    let (new_text, new_taken) = head(new_part);
    let bounds =
        format!("a card shows at most {MAX_SHOWN_LINES} lines and {MAX_SHOWN_BYTES} bytes a side");
    let note = if before.is_none() {
        format!(
            "the new file is {} lines ({} bytes); shown: its first {new_taken} lines ({bounds})",
            new.len(),
            after.len()
        )
    } else if old_taken == old_part.len() && new_taken == new_part.len() {
        format!(
            "shown: only where the file changes, lines {}–{} of {} before and {}–{} of {} after (the rest is unchanged)",
            start + 1,
            start + old_part.len(),
            old.len(),
            start + 1,
            start + new_part.len(),
            new.len()
        )
    } else {
        format!(
            "the change is too large to show whole: it spans lines {}–{} of {} before and {}–{} of {} after; shown: its first {old_taken} and {new_taken} lines ({bounds})",
            start + 1,
            start + old_part.len(),
            old.len(),
            start + 1,
            start + new_part.len(),
            new.len()
        )
    };
    Shown {
        card: Card::Diff {
            path: path.to_owned(),
            old_text: before.map(|_| old_text),
            new_text,
            first_line: Some(start as u64 + 1),
        },
        note: Some(note),
        first_changed,
    }
}

#[cfg(test)]
mod tests {
    use cordis_presenter::render_card;

    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn small_texts_are_carried_whole_and_a_new_file_stays_a_new_file() {
        let s = change("a.txt", Some("a\nb\n"), "a\nB\n");
        assert_eq!(
            render_card(&s.card),
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
        );
        assert_eq!((s.note, s.first_changed), (None, 2));
        let s = change("n.txt", None, "x\n");
        assert!(render_card(&s.card).starts_with("--- /dev/null\n"));
    }

    #[test]
    fn a_small_change_in_a_large_file_is_shown_where_it_is_with_its_line_numbers() {
        let before = numbered(5000);
        let after = before.replace("line 2500\n", "line two thousand five hundred\n");
        let s = change("big.txt", Some(&before), &after);
        assert_eq!(
            render_card(&s.card),
            "--- a/big.txt\n+++ b/big.txt\n@@ -2497,7 +2497,7 @@\n line 2497\n line 2498\n line 2499\n-line 2500\n+line two thousand five hundred\n line 2501\n line 2502\n line 2503\n"
        );
        assert_eq!(s.first_changed, 2500);
        let note = s.note.unwrap();
        assert!(note.contains("lines 2497–2503 of 5000 before"), "{note}");
    }

    #[test]
    fn a_change_over_the_bounds_is_cut_to_them_and_says_so() {
        // Every line differs: 50 000 lines (about 600 kB) a side.
        let before = numbered(50_000);
        let after = before.replace("line", "LINE");
        let s = change("all.txt", Some(&before), &after);
        let Card::Diff {
            old_text, new_text, ..
        } = &s.card
        else {
            panic!("{:?}", s.card)
        };
        let old_text = old_text.as_deref().unwrap();
        assert_eq!(old_text.lines().count(), MAX_SHOWN_LINES);
        assert_eq!(new_text.lines().count(), MAX_SHOWN_LINES);
        assert!(old_text.len() <= MAX_SHOWN_BYTES && new_text.len() <= MAX_SHOWN_BYTES);
        let note = s.note.unwrap();
        assert!(note.contains("too large to show whole"), "{note}");
        assert!(note.contains("1000 lines and 65536 bytes a side"), "{note}");
        // One line of 1 MB: cut to the byte bound.
        let line = "é".repeat(500_000);
        let s = change("min.js", Some("x\n"), &line);
        let Card::Diff { new_text, .. } = &s.card else {
            panic!()
        };
        assert!(new_text.len() <= MAX_SHOWN_BYTES + 1, "{}", new_text.len());
        // A new file over the bounds: still a new file, its first lines.
        let s = change("new.txt", None, &before);
        let Card::Diff {
            old_text, new_text, ..
        } = &s.card
        else {
            panic!()
        };
        assert_eq!(
            (old_text, new_text.lines().count()),
            (&None, MAX_SHOWN_LINES)
        );
        assert!(s.note.unwrap().starts_with("the new file is 50000 lines"));
    }
}
