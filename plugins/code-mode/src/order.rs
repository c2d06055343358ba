//! The one name order of Code Mode's texts.

use std::cmp::Ordering;

/// Compares two names by UTF-16 code units, the order the reference system sorts tool names in.
///
/// It differs from `str`'s order only between characters above U+FFFF (surrogate pairs, which
/// sort first here) and U+E000..=U+FFFF.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn astral_characters_sort_before_the_private_use_area() {
        // U+1F600 is D83D DE00 in UTF-16, below U+E000; in UTF-8 order it is above.
        assert_eq!(compare_utf16("\u{1F600}", "\u{E000}"), Ordering::Less);
        assert_eq!("\u{1F600}".cmp("\u{E000}"), Ordering::Greater);
        assert_eq!(compare_utf16("a", "b"), Ordering::Less);
        assert_eq!(compare_utf16("B", "a"), Ordering::Less);
    }
}
