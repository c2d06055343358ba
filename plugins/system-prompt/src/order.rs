//! The canonical model-facing tool order.
//!
//! Tool order is part of the request bytes, so it must be a decision, not a residue of which
//! plugin happened to register first. Without `toolOrder` the order is lexicographic by UTF-16
//! code units (the reference system's order, locale independent). With `toolOrder`, listed tools
//! take their listed positions and every unlisted tool goes, sorted, to the single
//! [`TOOL_ORDER_REST`] entry. Nothing is ever dropped.
//!
//! # Determinism
//! The output depends only on the set of schemas (and `toolOrder`), never on provider order,
//! except that schemas sharing a name keep their input order (the assembly rejects those anyway).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::error::{AssembleError, ToolOrderError};
use crate::schema::ToolSchema;

/// The `toolOrder` entry where every unlisted tool is inserted; reserved as a tool name.
pub const TOOL_ORDER_REST: &str = "<unlisted-tools>";

pub use cordis_schema::compare_utf16;

/// A validated `toolOrder`: contains [`TOOL_ORDER_REST`] exactly once and no name twice.
///
/// It deserializes through [`ToolOrder::new`], so a config holding one has a valid order or
/// did not parse: a shape error is a configuration error (`config.toolOrder: …`) at plan time,
/// never a plugin that fails when it loads.
///
/// Cloning it is cheap (the entries and their positions are shared): the plugin's config, the
/// service and every assembly hold the same validated order.
#[derive(Clone, serde::Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct ToolOrder {
    inner: Arc<OrderInner>,
}

struct OrderInner {
    entries: Vec<String>,
    /// Each entry's position in `entries` (the rest entry's too).
    position: BTreeMap<String, usize>,
    /// The rest entry's position.
    rest: usize,
}

impl PartialEq for ToolOrder {
    fn eq(&self, other: &Self) -> bool {
        // `position` and `rest` derive from the entries.
        self.entries() == other.entries()
    }
}

impl Eq for ToolOrder {}

impl fmt::Debug for ToolOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolOrder")
            .field("entries", &self.inner.entries)
            .finish()
    }
}

impl TryFrom<Vec<String>> for ToolOrder {
    type Error = ToolOrderError;

    fn try_from(entries: Vec<String>) -> Result<Self, Self::Error> {
        ToolOrder::new(entries)
    }
}

impl ToolOrder {
    /// Validates a configured `toolOrder`.
    ///
    /// # Errors
    /// [`ToolOrderError::Duplicate`] for a name (or the rest entry) listed twice;
    /// [`ToolOrderError::MissingRest`] when the rest entry is absent (including for `[]`).
    pub fn new(entries: Vec<String>) -> Result<ToolOrder, ToolOrderError> {
        let mut position = BTreeMap::new();
        for (i, entry) in entries.iter().enumerate() {
            if position.insert(entry.clone(), i).is_some() {
                return Err(ToolOrderError::Duplicate {
                    name: entry.clone(),
                });
            }
        }
        let Some(&rest) = position.get(TOOL_ORDER_REST) else {
            return Err(ToolOrderError::MissingRest);
        };
        Ok(ToolOrder {
            inner: Arc::new(OrderInner {
                entries,
                position,
                rest,
            }),
        })
    }

    /// The entries, in configured order.
    pub fn entries(&self) -> &[String] {
        &self.inner.entries
    }

    /// The listed names (not the rest entry) absent from `known`, in configured order.
    pub(crate) fn unknown_entries<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        let mut found = vec![false; self.inner.entries.len()];
        found[self.inner.rest] = true;
        for name in known {
            if let Some(&i) = self.inner.position.get(name) {
                found[i] = true;
            }
        }
        self.inner
            .entries
            .iter()
            .zip(found)
            .filter(|(_, found)| !found)
            .map(|(entry, _)| entry.clone())
            .collect()
    }

    /// Puts `tools` in this order: listed tools at their entries (schemas sharing a name in
    /// input order), every other tool sorted at the rest entry.
    fn place(&self, tools: Vec<ToolSchema>) -> Vec<ToolSchema> {
        let position = &self.inner.position;
        let (mut rest, placed): (Vec<ToolSchema>, Vec<ToolSchema>) = tools
            .into_iter()
            .partition(|t| !position.contains_key(t.name.as_str()));
        sort_by_name_utf16(&mut rest, |t| &t.name);
        // Listed tools by their entry's position; the sort is stable, so schemas sharing a
        // name keep their input order: the placement an entry-by-entry scan would make.
        let mut placed: Vec<(usize, ToolSchema)> = placed
            .into_iter()
            .map(|t| {
                (
                    position.get(t.name.as_str()).copied().unwrap_or_default(),
                    t,
                )
            })
            .collect();
        placed.sort_by_key(|(i, _)| *i);
        let before = placed.partition_point(|(i, _)| *i < self.inner.rest);
        let mut out = Vec::with_capacity(rest.len() + placed.len());
        let mut placed = placed.into_iter().map(|(_, t)| t);
        out.extend(placed.by_ref().take(before));
        out.extend(rest);
        out.extend(placed);
        out
    }
}

/// Sorts names (or anything with a name) by UTF-16 code units; stable.
pub fn sort_by_name_utf16<T>(items: &mut [T], name: impl Fn(&T) -> &str) {
    items.sort_by(|a, b| compare_utf16(name(a), name(b)));
}

/// Puts `tools` into the canonical order.
///
/// `known` is the pre-restriction universe of tool names `toolOrder` is validated against (a
/// known but restricted tool is a legal absence; a typo is not).
///
/// # Errors
/// [`AssembleError::ReservedToolName`] when a tool is named [`TOOL_ORDER_REST`] (checked even
/// without `toolOrder`); [`AssembleError::UnregisteredToolOrder`] for listed names nobody knows.
pub fn order_tools(
    tools: Vec<ToolSchema>,
    tool_order: Option<&ToolOrder>,
    known: &BTreeSet<String>,
) -> Result<Vec<ToolSchema>, AssembleError> {
    check_reserved(&tools)?;
    if let Some(order) = tool_order {
        check_known(order, known.iter().map(String::as_str))?;
    }
    Ok(order_checked(tools, tool_order))
}

/// [`AssembleError::ReservedToolName`] when a tool is named [`TOOL_ORDER_REST`].
pub(crate) fn check_reserved(tools: &[ToolSchema]) -> Result<(), AssembleError> {
    if tools.iter().any(|t| t.name == TOOL_ORDER_REST) {
        return Err(AssembleError::ReservedToolName);
    }
    Ok(())
}

/// [`AssembleError::UnregisteredToolOrder`] for the names `order` lists that are not `known`
/// (an iterator that may repeat names, walked a second time only for the error).
pub(crate) fn check_known<'a, I>(order: &ToolOrder, known: I) -> Result<(), AssembleError>
where
    I: Iterator<Item = &'a str> + Clone,
{
    let missing = order.unknown_entries(known.clone());
    if missing.is_empty() {
        return Ok(());
    }
    let known: BTreeSet<&str> = known.collect();
    let mut known: Vec<String> = known.into_iter().map(str::to_owned).collect();
    known.sort_by(|a, b| compare_utf16(a, b));
    Err(AssembleError::UnregisteredToolOrder { missing, known })
}

/// [`order_tools`] once its checks passed.
pub(crate) fn order_checked(
    mut tools: Vec<ToolSchema>,
    tool_order: Option<&ToolOrder>,
) -> Vec<ToolSchema> {
    match tool_order {
        Some(order) => order.place(tools),
        None => {
            sort_by_name_utf16(&mut tools, |t| &t.name);
            tools
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.to_owned(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}).into(),
        }
    }

    fn names(tools: &[ToolSchema]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn known(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn order(entries: &[&str]) -> ToolOrder {
        ToolOrder::new(entries.iter().map(|e| (*e).to_owned()).collect()).unwrap()
    }

    #[test]
    fn the_rest_entry_is_the_reference_literal() {
        assert_eq!(TOOL_ORDER_REST, "<unlisted-tools>");
    }

    #[test]
    fn utf16_order_differs_from_str_order_above_the_bmp() {
        // U+FF5E (fullwidth tilde) is one code unit 0xFF5E; U+1F600 is the pair 0xD83D 0xDE00.
        let bmp = "\u{FF5E}";
        let astral = "\u{1F600}";
        assert_eq!(
            bmp.cmp(astral),
            Ordering::Less,
            "Rust str order is by code point"
        );
        assert_eq!(compare_utf16(bmp, astral), Ordering::Greater);
        let tools = vec![schema(bmp), schema(astral)];
        let out = order_tools(tools, None, &known(&[])).unwrap();
        assert_eq!(names(&out), [astral, bmp]);
    }

    #[test]
    fn absent_tool_order_sorts_by_utf16_code_units() {
        let out = order_tools(
            vec![schema("charlie"), schema("alpha"), schema("bravo")],
            None,
            &known(&[]),
        )
        .unwrap();
        assert_eq!(names(&out), ["alpha", "bravo", "charlie"]);
    }

    #[test]
    fn listed_tools_take_their_positions_and_the_rest_goes_sorted_to_the_rest_entry() {
        let tools = vec![
            schema("bash"),
            schema("echo_b"),
            schema("todo_write"),
            schema("echo_a"),
        ];
        let k = known(&["bash", "echo_b", "todo_write", "echo_a"]);
        let out = order_tools(
            tools,
            Some(&order(&["todo_write", TOOL_ORDER_REST, "bash"])),
            &k,
        )
        .unwrap();
        assert_eq!(names(&out), ["todo_write", "echo_a", "echo_b", "bash"]);
    }

    #[test]
    fn a_known_but_absent_listed_tool_contributes_nothing() {
        let out = order_tools(
            vec![schema("alpha")],
            Some(&order(&["zulu", TOOL_ORDER_REST])),
            &known(&["alpha", "zulu"]),
        )
        .unwrap();
        assert_eq!(names(&out), ["alpha"]);
    }

    #[test]
    fn an_unregistered_listed_name_is_rejected_naming_the_known_tools() {
        let err = order_tools(
            vec![schema("alpha")],
            Some(&order(&["ghost", TOOL_ORDER_REST])),
            &known(&["alpha"]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "toolOrder lists unregistered tool \"ghost\"; known tools: alpha"
        );
        let err = order_tools(
            vec![schema("todo_write"), schema("bash")],
            Some(&order(&["ghost", TOOL_ORDER_REST, "wraith"])),
            &known(&["todo_write", "bash"]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "toolOrder lists unregistered tools \"ghost\", \"wraith\"; known tools: bash, todo_write"
        );
        let err = order_tools(
            vec![],
            Some(&order(&["ghost", TOOL_ORDER_REST])),
            &known(&[]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "toolOrder lists unregistered tool \"ghost\"; known tools: (none)"
        );
    }

    #[test]
    fn a_tool_named_like_the_rest_entry_is_rejected_with_or_without_tool_order() {
        let expected = "tool provider returned reserved tool name \"<unlisted-tools>\" (reserved for toolOrder's rest entry)";
        let err = order_tools(vec![schema(TOOL_ORDER_REST)], None, &known(&[])).unwrap_err();
        assert_eq!(err.to_string(), expected);
        let err = order_tools(
            vec![schema(TOOL_ORDER_REST)],
            Some(&order(&[TOOL_ORDER_REST])),
            &known(&[TOOL_ORDER_REST]),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), expected);
    }

    #[test]
    fn tool_order_without_the_rest_entry_is_rejected_including_the_empty_list() {
        let expected = "toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)";
        assert_eq!(ToolOrder::new(vec![]).unwrap_err().to_string(), expected);
        assert_eq!(
            ToolOrder::new(vec!["bash".into()]).unwrap_err().to_string(),
            expected
        );
    }

    #[test]
    fn deserializing_validates_the_shape() {
        let parse = |v| serde_json::from_value::<ToolOrder>(v).map_err(|e| e.to_string());
        assert_eq!(
            parse(serde_json::json!(["a", TOOL_ORDER_REST])),
            Ok(order(&["a", TOOL_ORDER_REST]))
        );
        assert_eq!(
            parse(serde_json::json!([])),
            Err("toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)".into())
        );
        assert_eq!(
            parse(serde_json::json!(["a", TOOL_ORDER_REST, "a"])),
            Err("toolOrder lists \"a\" more than once".into())
        );
        assert!(parse(serde_json::json!("a")).is_err());
    }

    #[test]
    fn tool_order_with_a_duplicate_name_or_rest_entry_is_rejected() {
        let err =
            ToolOrder::new(vec!["bash".into(), TOOL_ORDER_REST.into(), "bash".into()]).unwrap_err();
        assert_eq!(err.to_string(), "toolOrder lists \"bash\" more than once");
        let err = ToolOrder::new(vec![TOOL_ORDER_REST.into(), TOOL_ORDER_REST.into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "toolOrder lists \"<unlisted-tools>\" more than once"
        );
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        // Mix ASCII, BMP private-use/fullwidth (U+E000..U+FFFF) and astral characters, where
        // UTF-16 and code-point orders disagree.
        let ch = prop_oneof![
            proptest::char::range('a', 'e'),
            proptest::char::range('\u{E000}', '\u{E002}'),
            proptest::char::range('\u{FF5C}', '\u{FF5F}'),
            proptest::char::range('\u{1F600}', '\u{1F602}'),
            proptest::char::range('\u{10000}', '\u{10001}'),
            proptest::char::range('é', 'ê'),
        ];
        proptest::collection::vec(ch, 1..5).prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn canonical_order_matches_a_sort_by_utf16_keys(
            names in proptest::collection::btree_set(name_strategy(), 0..12),
            shuffle in any::<u64>(),
        ) {
            let mut input: Vec<String> = names.iter().cloned().collect();
            // A cheap seeded rotation + reversal so the input order is not already sorted.
            if !input.is_empty() {
                let len = input.len();
                input.rotate_left((shuffle as usize) % len);
                if shuffle & 1 == 1 { input.reverse(); }
            }
            let tools: Vec<ToolSchema> = input.iter().map(|n| schema(n)).collect();
            let out = order_tools(tools, None, &BTreeSet::new()).unwrap();
            let mut reference: Vec<(Vec<u16>, String)> =
                names.iter().map(|n| (n.encode_utf16().collect(), n.clone())).collect();
            reference.sort();
            let expected: Vec<&str> = reference.iter().map(|(_, n)| n.as_str()).collect();
            prop_assert_eq!(names_of(&out), expected);
        }

        #[test]
        fn tool_order_never_drops_a_tool(
            names in proptest::collection::btree_set(name_strategy(), 1..10),
            pick in any::<u64>(),
        ) {
            let all: Vec<String> = names.iter().cloned().collect();
            let listed = all[(pick as usize) % all.len()].clone();
            let order = ToolOrder::new(vec![TOOL_ORDER_REST.into(), listed.clone()]).unwrap();
            let tools: Vec<ToolSchema> = all.iter().rev().map(|n| schema(n)).collect();
            let out = order_tools(tools, Some(&order), &names).unwrap();
            prop_assert_eq!(out.len(), all.len());
            prop_assert_eq!(&out.last().unwrap().name, &listed);
        }
    }

    /// The placement as an entry-by-entry scan makes it (the implementation before
    /// `ToolOrder::place`): the reference the sort by position must match.
    fn scan_placement(tools: Vec<ToolSchema>, order: &ToolOrder) -> Vec<ToolSchema> {
        let listed: BTreeSet<&str> = order.entries().iter().map(String::as_str).collect();
        let (mut rest, mut placed): (Vec<ToolSchema>, Vec<ToolSchema>) = tools
            .into_iter()
            .partition(|t| !listed.contains(t.name.as_str()));
        sort_by_name_utf16(&mut rest, |t| &t.name);
        let mut out = Vec::new();
        let mut rest = Some(rest);
        for entry in order.entries() {
            if entry == TOOL_ORDER_REST {
                out.extend(rest.take().unwrap_or_default());
            } else {
                let (matching, others): (Vec<ToolSchema>, Vec<ToolSchema>) =
                    placed.into_iter().partition(|t| &t.name == entry);
                out.extend(matching);
                placed = others;
            }
        }
        out
    }

    proptest! {
        /// Listed tools (names repeated, told apart by description) land where the scan puts
        /// them, wherever the rest entry is.
        #[test]
        fn placement_by_position_matches_the_entry_scan(
            tools in proptest::collection::vec(0u8..6, 0..12),
            listed in proptest::collection::btree_set(0u8..6, 0..6),
            rest_at in any::<usize>(),
            shuffle in any::<u64>(),
        ) {
            let mut entries: Vec<String> = listed.iter().map(|n| format!("t{n}")).collect();
            let len = entries.len();
            if len > 0 {
                entries.rotate_left((shuffle as usize) % len);
            }
            entries.insert(rest_at % (len + 1), TOOL_ORDER_REST.to_owned());
            let order = ToolOrder::new(entries).unwrap();
            let tools: Vec<ToolSchema> = tools
                .iter()
                .enumerate()
                .map(|(i, n)| ToolSchema { description: i.to_string(), ..schema(&format!("t{n}")) })
                .collect();
            let known: BTreeSet<String> = order.entries().iter().filter(|&e| e != TOOL_ORDER_REST).cloned().collect();
            let out = order_tools(tools.clone(), Some(&order), &known).unwrap();
            prop_assert_eq!(out, scan_placement(tools, &order));
        }
    }

    fn names_of(tools: &[ToolSchema]) -> Vec<&str> {
        names(tools)
    }
}
