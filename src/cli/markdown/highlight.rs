//! Syntax colours for fenced code of the common languages (Rust, Python, JavaScript and
//! TypeScript, shell, JSON, YAML): keywords, strings, comments, numbers and keys. A small
//! line-by-line scanner of our own instead of a grammar engine (syntect and its grammars
//! would cost more to build than the rest of the renderer); a block comment or a triple-quoted
//! string carries over to the next lines. Other languages stay in one colour.

/// A language the highlighter knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Python,
    Js,
    Sh,
    Json,
    Yaml,
}

/// The language a fence's info string names (`rust`, `py`, `ts`, `bash`, …).
pub(crate) fn lang_of(info: &str) -> Option<Lang> {
    let word = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    Some(match word.as_str() {
        "rust" | "rs" => Lang::Rust,
        "python" | "py" | "python3" => Lang::Python,
        "js" | "javascript" | "jsx" | "mjs" | "ts" | "typescript" | "tsx" => Lang::Js,
        "sh" | "bash" | "shell" | "zsh" | "console" => Lang::Sh,
        "json" | "jsonc" | "json5" => Lang::Json,
        "yaml" | "yml" => Lang::Yaml,
        _ => return None,
    })
}

/// What a line leaves open for the next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Carry {
    /// Inside a `/* … */` comment.
    comment: bool,
    /// Inside a triple-quoted string (its quote).
    triple: Option<char>,
}

const KEYWORD: &str = "35";
const STRING: &str = "32";
const COMMENT: &str = "2";
const NUMBER: &str = "33";
const KEY: &str = "34";

const RUST: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while",
];
const PYTHON: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];
const JS: &[&str] = &[
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "of",
    "return",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "yield",
];
const SH: &[&str] = &[
    "case", "do", "done", "elif", "else", "esac", "export", "fi", "for", "function", "if", "in",
    "local", "return", "then", "until", "while",
];
const JSON: &[&str] = &["true", "false", "null"];
const YAML: &[&str] = &["true", "false", "null", "yes", "no", "on", "off"];

fn paint(out: &mut String, code: &str, text: &str) {
    if !text.is_empty() {
        out.push_str(&format!("\x1b[{code}m{text}\x1b[0m"));
    }
}

/// `line` of `lang` in its colours; `carry` is what the line before left open.
pub(crate) fn line(lang: Lang, carry: &mut Carry, line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let text = |from: usize, to: usize| chars[from..to].iter().collect::<String>();
    let mut out = String::new();
    let mut i = 0;
    // What the line before left open.
    if carry.comment {
        let close = find(&chars, 0, "*/");
        carry.comment = close.is_none();
        let end = close.map_or(chars.len(), |e| e + 2);
        paint(&mut out, COMMENT, &text(0, end));
        i = end;
    } else if let Some(q) = carry.triple {
        let close = find(&chars, 0, &[q, q, q].iter().collect::<String>());
        if close.is_some() {
            carry.triple = None;
        }
        let end = close.map_or(chars.len(), |e| e + 3);
        paint(&mut out, STRING, &text(0, end));
        i = end;
    }
    if lang == Lang::Yaml {
        i = yaml_key(&chars, i, &mut out);
    }
    let mut plain = i;
    while i < chars.len() {
        let c = chars[i];
        let rest_starts = |s: &str| starts(&chars, i, s);
        let comment_here = match lang {
            Lang::Rust | Lang::Js => rest_starts("//"),
            Lang::Python | Lang::Yaml => c == '#',
            Lang::Sh => c == '#' && (i == 0 || chars[i - 1].is_whitespace()),
            Lang::Json => false,
        };
        let flush = |out: &mut String, to: usize| out.push_str(&text(plain, to));
        if comment_here {
            flush(&mut out, i);
            paint(&mut out, COMMENT, &text(i, chars.len()));
            return out;
        }
        if matches!(lang, Lang::Rust | Lang::Js) && rest_starts("/*") {
            flush(&mut out, i);
            let end = find(&chars, i + 2, "*/").map(|e| e + 2);
            carry.comment = end.is_none();
            let end = end.unwrap_or(chars.len());
            paint(&mut out, COMMENT, &text(i, end));
            i = end;
            plain = i;
            continue;
        }
        if lang == Lang::Python && (rest_starts("\"\"\"") || rest_starts("'''")) {
            flush(&mut out, i);
            let close: String = [c, c, c].iter().collect();
            let end = find(&chars, i + 3, &close).map(|e| e + 3);
            carry.triple = end.is_none().then_some(c);
            let end = end.unwrap_or(chars.len());
            paint(&mut out, STRING, &text(i, end));
            i = end;
            plain = i;
            continue;
        }
        let quote = match lang {
            Lang::Rust | Lang::Json => c == '"',
            Lang::Js => matches!(c, '"' | '\'' | '`'),
            _ => matches!(c, '"' | '\''),
        };
        if quote {
            flush(&mut out, i);
            let end = string_end(&chars, i, lang != Lang::Sh || c == '"');
            let is_key = lang == Lang::Json && next_non_space(&chars, end) == Some(':');
            paint(&mut out, if is_key { KEY } else { STRING }, &text(i, end));
            i = end;
            plain = i;
            continue;
        }
        let word_start = i == 0 || !is_word(chars[i - 1]);
        if word_start && c.is_ascii_digit() {
            flush(&mut out, i);
            let end = run(&chars, i, |c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '_')
            });
            paint(&mut out, NUMBER, &text(i, end));
            i = end;
            plain = i;
            continue;
        }
        if word_start && is_word(c) {
            let end = run(&chars, i, is_word);
            let word = text(i, end);
            let keywords = match lang {
                Lang::Rust => RUST,
                Lang::Python => PYTHON,
                Lang::Js => JS,
                Lang::Sh => SH,
                Lang::Json => JSON,
                Lang::Yaml => YAML,
            };
            if keywords.contains(&word.as_str()) {
                flush(&mut out, i);
                paint(&mut out, KEYWORD, &word);
                plain = end;
            }
            i = end;
            continue;
        }
        i += 1;
    }
    out.push_str(&text(plain, chars.len()));
    out
}

/// A YAML line's key (`key:` after the indent and any `- `), coloured; where the rest starts.
fn yaml_key(chars: &[char], from: usize, out: &mut String) -> usize {
    let mut i = run(chars, from, |c| c == ' ');
    while starts(chars, i, "- ") {
        i = run(chars, i + 2, |c| c == ' ');
    }
    let end = run(chars, i, |c| is_word(c) || matches!(c, '-' | '.' | '/'));
    if end > i && chars.get(end) == Some(&':') && chars.get(end + 1).is_none_or(|c| *c == ' ') {
        out.extend(&chars[from..i]);
        paint(out, KEY, &chars[i..end].iter().collect::<String>());
        return end;
    }
    from
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where the run of chars matching `ok` from `from` ends.
fn run(chars: &[char], from: usize, ok: impl Fn(char) -> bool) -> usize {
    let mut i = from;
    while i < chars.len() && ok(chars[i]) {
        i += 1;
    }
    i
}

fn starts(chars: &[char], at: usize, s: &str) -> bool {
    s.chars()
        .enumerate()
        .all(|(k, c)| chars.get(at + k) == Some(&c))
}

/// Where `s` starts at or after `from`.
fn find(chars: &[char], from: usize, s: &str) -> Option<usize> {
    (from..chars.len()).find(|&i| starts(chars, i, s))
}

/// Just after the string that opens at `at` (its quote), or the line's end; backslashes
/// escape when `escapes`.
fn string_end(chars: &[char], at: usize, escapes: bool) -> usize {
    let quote = chars[at];
    let mut i = at + 1;
    while i < chars.len() {
        if escapes && chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return i + 1;
        }
        i += 1;
    }
    chars.len()
}

fn next_non_space(chars: &[char], from: usize) -> Option<char> {
    chars[from.min(chars.len())..]
        .iter()
        .copied()
        .find(|c| !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(lang: Lang, text: &str) -> String {
        line(lang, &mut Carry::default(), text)
    }

    #[test]
    fn keywords_strings_numbers_and_comments_are_coloured() {
        assert_eq!(
            one(Lang::Rust, "let x = \"a\\\"b\" + 42; // done"),
            "\x1b[35mlet\x1b[0m x = \x1b[32m\"a\\\"b\"\x1b[0m + \x1b[33m42\x1b[0m; \x1b[2m// done\x1b[0m"
        );
        assert_eq!(
            one(Lang::Python, "def f(): return None"),
            "\x1b[35mdef\x1b[0m f(): \x1b[35mreturn\x1b[0m \x1b[35mNone\x1b[0m"
        );
        assert_eq!(
            one(Lang::Sh, "echo a#b # note"),
            "echo a#b \x1b[2m# note\x1b[0m"
        );
        // A keyword inside a word is not one.
        assert_eq!(one(Lang::Rust, "letter x1"), "letter x1");
    }

    #[test]
    fn json_and_yaml_keys_are_told_from_values() {
        assert_eq!(
            one(Lang::Json, r#"{"a": "b", "n": true}"#),
            "{\x1b[34m\"a\"\x1b[0m: \x1b[32m\"b\"\x1b[0m, \x1b[34m\"n\"\x1b[0m: \x1b[35mtrue\x1b[0m}"
        );
        assert_eq!(
            one(Lang::Yaml, "  - name: x # c"),
            "  - \x1b[34mname\x1b[0m: x \x1b[2m# c\x1b[0m"
        );
    }

    #[test]
    fn block_comments_and_triple_quotes_carry_over_lines() {
        let mut carry = Carry::default();
        assert_eq!(line(Lang::Js, &mut carry, "x /* a"), "x \x1b[2m/* a\x1b[0m");
        assert_eq!(
            line(Lang::Js, &mut carry, "b */ if"),
            "\x1b[2mb */\x1b[0m \x1b[35mif\x1b[0m"
        );
        let mut carry = Carry::default();
        line(Lang::Python, &mut carry, "s = \"\"\"doc");
        assert_eq!(
            line(Lang::Python, &mut carry, "if\"\"\" if"),
            "\x1b[32mif\"\"\"\x1b[0m \x1b[35mif\x1b[0m"
        );
        assert_eq!(carry, Carry::default());
    }

    #[test]
    fn fence_names_choose_the_language() {
        assert_eq!(lang_of("ts"), Some(Lang::Js));
        assert_eq!(lang_of("Bash"), Some(Lang::Sh));
        assert_eq!(lang_of("rust,ignore"), Some(Lang::Rust));
        assert_eq!(lang_of("haskell"), None);
    }
}
