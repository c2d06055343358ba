//! The one name order of the tree: tools, SDK entries and `toolOrder`'s rest sort by it.

use std::cmp::Ordering;

/// Compares two strings by their UTF-16 code units, as JavaScript's `<` and default sort do
/// (the order the reference system sorts tool names in).
///
/// This differs from Rust's `str` order (by code point) only when one string has a character
/// above U+FFFF (a surrogate pair, 0xD800..) where the other has one in U+E000..U+FFFF.
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
