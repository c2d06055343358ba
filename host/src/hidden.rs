//! Text from a config file made safe to print: the characters that hide or disguise text on a
//! terminal, and a wrapper that escapes them. Every message about a config file goes through
//! it; it sits below `diagnostic` and `config` alike, so neither imports the other for it.

use std::fmt;

/// The first character of `s` that would hide or disguise text on a terminal, with its kind:
/// control characters (C0, DEL, C1), bidirectional controls, and zero-width characters.
pub fn hidden_char(s: &str) -> Option<(char, &'static str)> {
    s.chars().find_map(|c| {
        let kind = match c {
            c if c.is_control() => "control",
            '\u{061C}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}' => "bidirectional",
            '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{FEFF}'
            | '\u{00AD}'
            | '\u{180E}' => "zero-width",
            _ => return None,
        };
        Some((c, kind))
    })
}

/// Text from a config file, printed with every [`hidden_char`] escaped (`\u{202e}`), so a
/// message never carries raw control or bidi characters to a terminal.
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if hidden_char(self.0).is_none() {
            return f.write_str(self.0);
        }
        for c in self.0.chars() {
            if hidden_char(c.encode_utf8(&mut [0; 4])).is_some() {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}
