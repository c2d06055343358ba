//! Public tool names: `mcp__<server>__<raw>`, normalized when the raw name does not fit; and
//! prompt command names, which follow the tools' naming.

use sha2::{Digest, Sha256};

/// The longest public tool name, in bytes (what model APIs accept).
pub const MAX_PUBLIC_NAME: usize = 64;

/// The length of the hash suffix of a normalized name, in hex digits.
const HASH_LEN: usize = 12;

/// The public name of `raw` on `server`.
///
/// `mcp__<server>__<raw>` when that is at most [`MAX_PUBLIC_NAME`] bytes of `[A-Za-z0-9_-]`;
/// otherwise every other character becomes `_`, the result is cut to leave room, and
/// `_<first 12 hex digits of sha256(server NUL raw)>` is appended, so two raw names that
/// normalize alike still get different public names. The raw name is what goes on the wire.
pub fn public_name(server: &str, raw: &str) -> String {
    let plain = format!("mcp__{server}__{raw}");
    let normalized: String = plain
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if normalized == plain && plain.len() <= MAX_PUBLIC_NAME {
        return plain;
    }
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(raw.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // `normalized` is ASCII, so any byte index is a char boundary.
    let keep = normalized.len().min(MAX_PUBLIC_NAME - HASH_LEN - 1);
    format!("{}_{}", &normalized[..keep], &hex[..HASH_LEN])
}

/// The command name of prompt `prompt` of `server`, without the slash: `mcp__<server>__<prompt>`
/// (the tools' naming).
pub fn prompt_command(server: &str, prompt: &str) -> String {
    format!("mcp__{server}__{prompt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_others_get_a_hash_suffix() {
        assert_eq!(public_name("fx", "add"), "mcp__fx__add");
        let dotted = public_name("fx", "admin.reset");
        assert!(dotted.starts_with("mcp__fx__admin_reset_"), "{dotted}");
        assert_eq!(dotted.len(), "mcp__fx__admin_reset_".len() + 12);
        // Two raw names that normalize alike stay apart.
        assert_ne!(public_name("fx", "a.b"), public_name("fx", "a/b"));
        // Stable: the suffix is a function of server and raw name only.
        assert_eq!(public_name("fx", "a.b"), public_name("fx", "a.b"));
        assert_ne!(public_name("fx", "a.b"), public_name("fy", "a.b")[..]);
        let long = public_name("fx", &"x".repeat(100));
        assert_eq!(long.len(), MAX_PUBLIC_NAME);
        assert!(long.starts_with("mcp__fx__xxx"));
        let unicode = public_name("fx", "héllo");
        assert!(unicode.is_ascii() && unicode.starts_with("mcp__fx__h_llo_"));
        let exactly = format!("mcp__fx__{}", "y".repeat(MAX_PUBLIC_NAME - 9));
        assert_eq!(public_name("fx", &"y".repeat(MAX_PUBLIC_NAME - 9)), exactly);
    }
}
