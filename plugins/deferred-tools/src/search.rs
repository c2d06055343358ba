//! Ranking deferred tools against a query.
//!
//! # Determinism
//! A tool's score depends only on its name, its description and the query; equal scores keep
//! the deferred list's (canonical) order. So one query over one set of tools loads the same
//! tools whatever order their providers registered or listed them in.

use cordis_system_prompt::ToolSchema;

/// A query that cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The query has no letters or digits.
    #[error("the query has no words to search for: give words from a tool's name or purpose")]
    Empty,
}

/// The lowercase words (runs of letters and digits) of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The score of `tool` for `query` (lowercased, trimmed) and its `terms`; 0 = no match.
fn score(tool: &ToolSchema, query: &str, terms: &[String]) -> u64 {
    let name = tool.name.to_lowercase();
    let name_words = words(&tool.name);
    let description = tool.description.to_lowercase();
    let mut score = 0;
    if name == query {
        score += 1000;
    } else if name.contains(query) {
        score += 100;
    }
    for term in terms {
        if name_words.iter().any(|w| w == term) {
            score += 15;
        } else if name.contains(term.as_str()) {
            score += 10;
        }
        if description.contains(term.as_str()) {
            score += 2;
        }
    }
    score
}

/// The at most `limit` tools of `deferred` that best match `query`, best first; equal scores
/// in the order of `deferred`.
///
/// A query names a tool exactly (score 1000), is part of a name (100), or shares words with
/// names (15 a whole word, 10 part of one) and descriptions (2 each).
///
/// # Errors
/// [`SearchError::Empty`] for a query without words.
///
/// # Examples
///
/// ```
/// use cordis_deferred_tools::search;
/// use cordis_system_prompt::ToolSchema;
///
/// let tool = |name: &str, description: &str| ToolSchema {
///     name: name.into(),
///     description: description.into(),
///     parameters: serde_json::json!({"type": "object"}).into(),
/// };
/// let deferred = [tool("mcp__fx__add", "Adds two numbers."), tool("mcp__fx__greet", "Greets someone.")];
/// let found = search(&deferred, "add numbers", 5).unwrap();
/// assert_eq!(found[0].name, "mcp__fx__add");
/// ```
pub fn search<'a>(
    deferred: &'a [ToolSchema],
    query: &str,
    limit: usize,
) -> Result<Vec<&'a ToolSchema>, SearchError> {
    let terms = words(query);
    if terms.is_empty() {
        return Err(SearchError::Empty);
    }
    let query = query.trim().to_lowercase();
    let mut scored: Vec<(u64, usize)> = deferred
        .iter()
        .enumerate()
        .map(|(i, t)| (score(t, &query, &terms), i))
        .filter(|(s, _)| *s > 0)
        .collect();
    // Best score first; the index (canonical position) breaks ties.
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(scored
        .into_iter()
        .take(limit)
        .map(|(_, i)| &deferred[i])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        }
    }

    fn names(found: &[&ToolSchema]) -> Vec<String> {
        found.iter().map(|t| t.name.clone()).collect()
    }

    #[test]
    fn an_exact_name_ranks_first_and_ties_keep_canonical_order() {
        let deferred = [
            tool("mcp__fx__extra_07", "A generated tool."),
            tool("mcp__fx__extra_107", "A generated tool."),
            tool("mcp__fx__extra_70", "A generated tool."),
        ];
        let found = search(&deferred, "mcp__fx__extra_107", 5).unwrap();
        assert_eq!(found[0].name, "mcp__fx__extra_107");
        let found = search(&deferred, "extra_07", 5).unwrap();
        assert_eq!(found[0].name, "mcp__fx__extra_07");
        // "generated" is only in descriptions: all tie, canonical order, bounded.
        let found = search(&deferred, "generated", 2).unwrap();
        assert_eq!(names(&found), ["mcp__fx__extra_07", "mcp__fx__extra_107"]);
    }

    #[test]
    fn the_same_tools_in_another_order_rank_the_same_once_canonically_sorted() {
        let mut a = vec![
            tool("b_files", "Reads files."),
            tool("a_files", "Reads files."),
            tool("c", "Unrelated."),
        ];
        let mut b = a.clone();
        b.reverse();
        for list in [&mut a, &mut b] {
            list.sort_by(|x, y| cordis_system_prompt::compare_utf16(&x.name, &y.name));
        }
        assert_eq!(
            names(&search(&a, "files", 5).unwrap()),
            names(&search(&b, "files", 5).unwrap())
        );
        assert_eq!(
            names(&search(&a, "files", 5).unwrap()),
            ["a_files", "b_files"]
        );
    }

    #[test]
    fn a_query_without_words_is_refused_and_no_match_is_empty() {
        let deferred = [tool("a", "x")];
        assert_eq!(search(&deferred, " -- ", 5), Err(SearchError::Empty));
        assert!(search(&deferred, "zebra", 5).unwrap().is_empty());
    }
}
