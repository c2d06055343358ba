//! Commands shown to people as a POSIX shell would read them: a replay line, what an entry
//! starts.

/// `word` quoted for a POSIX shell when it needs it (single quotes, `'` escaped).
pub fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-+@:=,".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `words` as one command line, each quoted when it needs it.
pub fn shell_line<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words
        .into_iter()
        .map(shell_word)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_and_others_are_single_quoted() {
        assert_eq!(shell_word("cordis.yml"), "cordis.yml");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(
            shell_line(["sh", "-c", "id > /tmp/x"]),
            "sh -c 'id > /tmp/x'"
        );
    }
}
