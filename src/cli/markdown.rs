//! The model's answers rendered at a terminal, as they stream: line by line (a line is drawn
//! once it is complete), headings without their `#`, list items with a bullet, block quotes
//! with a bar, fenced code in a frame, inline code, emphasis and links styled, and every line
//! wrapped at word boundaries to the terminal's width. Plain output (piped, `NO_COLOR`,
//! `--color never`) never comes here: the answer is then printed as the model wrote it.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::render::safe;

mod highlight;

/// Renders one answer's lines; the state a fence carries from line to line.
#[derive(Debug, Default)]
pub(crate) struct Markdown {
    /// Inside a fenced code block: its fence (the backticks or tildes that close it).
    fence: Option<String>,
    /// The fenced code's language, when the highlighter knows it, and what its last line left
    /// open.
    code: Option<(highlight::Lang, highlight::Carry)>,
    /// The terminal's width in columns.
    width: usize,
}

/// Paints `text` with the ANSI attribute `code`.
fn paint(code: &str, text: &str) -> String {
    format!("\x1b[{code}m{text}\x1b[0m")
}

impl Markdown {
    /// A renderer for a terminal `width` columns wide (at least 20 are used).
    pub(crate) fn new(width: usize) -> Markdown {
        Markdown {
            fence: None,
            code: None,
            width: width.max(20),
        }
    }

    /// The terminal lines of one complete line of the answer (without its newline).
    pub(crate) fn line(&mut self, raw: &str) -> Vec<String> {
        let line = safe(raw);
        let trimmed = line.trim_start();
        if let Some(fence) = &self.fence {
            // A closing fence: the opening one's marks (or more), nothing after them.
            let marks = fence_marks(trimmed);
            if marks.starts_with(fence.as_str()) && marks == trimmed.trim_end() {
                self.fence = None;
                self.code = None;
                return vec![paint("2", "╰─")];
            }
            let code = match &mut self.code {
                Some((lang, carry)) => highlight::line(*lang, carry, &line),
                None => paint("36", &line),
            };
            return vec![format!("{} {code}", paint("2", "│"))];
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let fence = fence_marks(trimmed).to_owned();
            let lang = trimmed[fence.len()..].trim();
            self.fence = Some(fence);
            self.code = highlight::lang_of(lang).map(|l| (l, highlight::Carry::default()));
            return vec![paint("2", format!("╭─ {lang}").trim_end())];
        }
        let indent = line.len() - trimmed.len();
        let pad = " ".repeat(indent);
        if let Some((level, title)) = heading(trimmed) {
            let code = if level == 1 { "1;4" } else { "1" };
            return wrap(&paint(code, &inline(title)), self.width, "", "");
        }
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or_else(|| (trimmed == ">").then_some(""))
        {
            let bar = format!("{pad}{} ", paint("2", "│"));
            return wrap(&paint("3", &inline(rest)), self.width, &bar, &bar);
        }
        if let Some(rest) = ["- ", "* ", "+ "]
            .iter()
            .find_map(|b| trimmed.strip_prefix(b))
        {
            let (mark, rest) = match rest.strip_prefix("[ ] ").map(|r| ("☐", r)).or_else(|| {
                rest.strip_prefix("[x] ")
                    .or_else(|| rest.strip_prefix("[X] "))
                    .map(|r| ("☑", r))
            }) {
                Some((mark, rest)) => (mark, rest),
                None => ("•", rest),
            };
            let first = format!("{pad}{mark} ");
            let next = format!("{pad}  ");
            return wrap(&inline(rest), self.width, &first, &next);
        }
        if let Some((number, rest)) = numbered(trimmed) {
            let first = format!("{pad}{number}. ");
            let next = " ".repeat(first.chars().count());
            return wrap(&inline(rest), self.width, &first, &next);
        }
        if is_rule(trimmed) {
            return vec![paint("2", &"─".repeat(self.width.min(60)))];
        }
        if trimmed.starts_with('|') {
            // A table row as written; its separator row a line.
            if trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) {
                return vec![paint(
                    "2",
                    &format!("{pad}{}", "─".repeat(trimmed.chars().count())),
                )];
            }
            return vec![format!("{pad}{}", inline(trimmed))];
        }
        wrap(&inline(trimmed), self.width, &pad, &pad)
    }

    /// What an answer that ended inside a fence still owes: the frame's end.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        self.code = None;
        match self.fence.take() {
            Some(_) => vec![paint("2", "╰─")],
            None => Vec::new(),
        }
    }
}

/// The run of backticks or tildes a line starts with.
fn fence_marks(line: &str) -> &str {
    let end = line
        .find(|c: char| c != '`' && c != '~')
        .unwrap_or(line.len());
    &line[..end]
}

/// `# Title` → (1, "Title"), up to six `#`.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    (rest.is_empty() || rest.starts_with(' '))
        .then(|| (level, rest.trim().trim_end_matches('#').trim_end()))
}

/// `12. item` → ("12", "item").
fn numbered(line: &str) -> Option<(&str, &str)> {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let rest = line[digits..]
        .strip_prefix(". ")
        .or_else(|| line[digits..].strip_prefix(") "))?;
    Some((&line[..digits], rest))
}

/// `---`, `***`, `___` (three or more, spaces allowed).
fn is_rule(line: &str) -> bool {
    let marks: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3
        && (marks.chars().all(|c| c == '-')
            || marks.chars().all(|c| c == '*')
            || marks.chars().all(|c| c == '_'))
}

/// A line's inline markdown styled: `code`, **strong**, *emphasis*, ~~strike~~, [links](url).
fn inline(text: &str) -> String {
    let mut out = String::new();
    let mut links: Vec<String> = Vec::new();
    let options = pulldown_cmark::Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Text(t) => out.push_str(&t),
            Event::Code(c) => out.push_str(&paint("36", &c)),
            Event::Start(Tag::Strong) => out.push_str("\x1b[1m"),
            Event::Start(Tag::Emphasis) => out.push_str("\x1b[3m"),
            Event::Start(Tag::Strikethrough) => out.push_str("\x1b[9m"),
            Event::Start(Tag::Link { dest_url, .. }) => {
                links.push(dest_url.to_string());
                out.push_str("\x1b[4m");
            }
            Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough) => {
                out.push_str("\x1b[0m");
            }
            Event::End(TagEnd::Link) => {
                out.push_str("\x1b[0m");
                if let Some(url) = links.pop() {
                    out.push_str(&paint("2", &format!(" ({url})")));
                }
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::Html(h) | Event::InlineHtml(h) => out.push_str(&h),
            _ => {}
        }
    }
    out
}

/// Visible columns of `s` (ANSI sequences take none).
fn width_of(s: &str) -> usize {
    let mut n = 0;
    let mut escape = false;
    for c in s.chars() {
        match (escape, c) {
            (false, '\x1b') => escape = true,
            (true, 'm') => escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// `text` wrapped at spaces to `width` columns, the first line after `first`, the rest after
/// `next` (a word longer than a line stays whole).
fn wrap(text: &str, width: usize, first: &str, next: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = first.to_owned();
    let mut used = width_of(first);
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let w = width_of(word);
        if !empty && used + 1 + w > width {
            lines.push(std::mem::replace(&mut current, next.to_owned()));
            used = width_of(next);
            empty = true;
        }
        if !empty {
            current.push(' ');
            used += 1;
        }
        current.push_str(word);
        used += w;
        empty = false;
    }
    lines.push(current);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a terminal shows: the lines without their colours.
    fn shown(lines: &[String]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                let mut out = String::new();
                let mut escape = false;
                for c in l.chars() {
                    match (escape, c) {
                        (false, '\x1b') => escape = true,
                        (true, 'm') => escape = false,
                        (true, _) => {}
                        (false, c) => out.push(c),
                    }
                }
                out
            })
            .collect()
    }

    fn render(text: &str, width: usize) -> Vec<String> {
        let mut md = Markdown::new(width);
        let mut out: Vec<String> = text.lines().flat_map(|l| md.line(l)).collect();
        out.extend(md.finish());
        shown(&out)
    }

    #[test]
    fn headings_lists_quotes_and_code_are_drawn_without_their_marks() {
        let text = "# Title\n\nSome **bold** and `code` and a [link](https://x.dev).\n\n- one\n- [x] done\n2. two\n> said\n```rust\nfn main() {}\n```\n---";
        assert_eq!(
            render(text, 80),
            [
                "Title",
                "",
                "Some bold and code and a link (https://x.dev).",
                "",
                "• one",
                "☑ done",
                "2. two",
                "│ said",
                "╭─ rust",
                "│ fn main() {}",
                "╰─",
                &"─".repeat(60),
            ]
        );
    }

    #[test]
    fn long_lines_wrap_at_words_and_list_items_keep_their_indent() {
        let text = "- alpha beta gamma delta epsilon zeta eta theta";
        assert_eq!(
            render(text, 22),
            ["• alpha beta gamma", "  delta epsilon zeta", "  eta theta"]
        );
    }

    #[test]
    fn a_fence_left_open_is_closed_and_code_is_not_parsed() {
        assert_eq!(
            render("```\n# not a heading\n- not a list", 40),
            ["╭─", "│ # not a heading", "│ - not a list", "╰─"]
        );
    }
}
