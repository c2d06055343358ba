//! Nesting bounds on what a server sends, applied to each message before it is parsed.
//!
//! The JSON parser refuses a value nested deeper than 128 levels, and a message it refuses is
//! no answer at all: one tool whose schema nests 400 levels made the whole tool list time out.
//! So a message deeper than [`MAX_MESSAGE_DEPTH`] is rewritten first, without building it (the
//! scan and the split into raw parts are iterative, so no depth costs stack): in a tool list,
//! each tool nested deeper than [`MAX_SCHEMA_DEPTH`] becomes a stub the bridge leaves out with
//! its reason, like any other bad schema; any other answer becomes a JSON-RPC error naming the
//! depth; a deep notification is dropped.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::value::RawValue;

/// The deepest message taken as it is (the parser's own limit is 128).
pub const MAX_MESSAGE_DEPTH: usize = 120;

/// The deepest tool (its schema included) the bridge registers.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// The key of the stub schema a tool too deep is replaced with; its value is the depth.
pub(crate) const TOO_DEEP_KEY: &str = "x-cordis-nesting-depth";

/// How deeply `json` nests arrays and objects (a scan that does not parse).
pub fn nesting_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in json {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// What to do with one message from a server.
#[derive(Debug, PartialEq, Eq)]
pub enum Guarded<'a> {
    /// Parse it (unchanged, or rewritten).
    Parse(Cow<'a, str>),
    /// Drop it: a notification too deep to read.
    Drop,
}

type Parts<'a> = BTreeMap<String, &'a RawValue>;

/// The `_meta` key a tools list answer's tool carries when it requires task augmentation
/// (`execution.taskSupport: "required"`): the client's tool type has no `execution`, so the
/// guard copies what the bridge needs to know into the part it keeps.
pub(crate) const TASK_REQUIRED_META: &str = "io.cordis/taskSupport";

/// A `tools/list` answer whose tools requiring tasks are marked with [`TASK_REQUIRED_META`];
/// `None` when it is not one or none does.
fn mark_task_tools(message: &str) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(message).ok()?;
    let tools = value.get_mut("result")?.get_mut("tools")?.as_array_mut()?;
    let mut marked = false;
    for tool in tools.iter_mut() {
        if tool
            .pointer("/execution/taskSupport")
            .and_then(|v| v.as_str())
            != Some("required")
        {
            continue;
        }
        let Some(object) = tool.as_object_mut() else {
            continue;
        };
        let meta = object
            .entry("_meta")
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(TASK_REQUIRED_META.to_owned(), "required".into());
            marked = true;
        }
    }
    marked.then(|| value.to_string())
}

/// Parses one message from a server through [`guard`]: `Ok(None)` for a message dropped.
///
/// # Errors
/// The message (after the guard) is not a `T`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<Option<T>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return serde_json::from_slice(bytes).map(Some);
    };
    match guard(text) {
        Guarded::Parse(text) => serde_json::from_str(&text).map(Some),
        Guarded::Drop => Ok(None),
    }
}

/// `message` as the client may parse it (see the module docs).
pub fn guard(message: &str) -> Guarded<'_> {
    let depth = nesting_depth(message.as_bytes());
    if depth <= MAX_MESSAGE_DEPTH {
        if message.contains("\"taskSupport\"")
            && let Some(marked) = mark_task_tools(message)
        {
            return Guarded::Parse(Cow::Owned(marked));
        }
        return Guarded::Parse(Cow::Borrowed(message));
    }
    let Ok(parts) = serde_json::from_str::<Parts<'_>>(message) else {
        return Guarded::Drop;
    };
    if let Some(listed) = defuse_tool_list(&parts) {
        return Guarded::Parse(Cow::Owned(listed));
    }
    match (parts.get("id"), parts.get("method")) {
        // An answer: the client's request it answers fails, instead of waiting for ever.
        (Some(id), None) => Guarded::Parse(Cow::Owned(format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32700,"message":"the server's answer nests {depth} levels, deeper than the {MAX_MESSAGE_DEPTH} this client reads"}}}}"#,
            id.get()
        ))),
        // A notification, or a request of the server's: made into an answer it would fail a
        // request of the client's that happens to share its id, so it is dropped.
        _ => {
            static DROPPED: AtomicU64 = AtomicU64::new(0);
            if worth_warning(&DROPPED) {
                tracing::warn!(
                    depth,
                    dropped = DROPPED.load(Ordering::Relaxed),
                    "an MCP message nested too deeply was dropped"
                );
            }
            Guarded::Drop
        }
    }
}

/// Counts one more of something a server can repeat at will, and says whether to log it: the
/// 1st, 2nd, 4th, 8th… time, so a flood costs a log line per doubling.
pub(crate) fn worth_warning(count: &AtomicU64) -> bool {
    (count.fetch_add(1, Ordering::Relaxed) + 1).is_power_of_two()
}

/// The message with each tool of its `result.tools` deeper than [`MAX_SCHEMA_DEPTH`] replaced
/// by a stub; `None` when it is no tool list or still too deep without those tools.
fn defuse_tool_list(parts: &Parts<'_>) -> Option<String> {
    let result: Parts<'_> = serde_json::from_str(parts.get("result")?.get()).ok()?;
    let tools: Vec<&RawValue> = serde_json::from_str(result.get("tools")?.get()).ok()?;
    let tools: Vec<Cow<'_, str>> = tools
        .into_iter()
        .map(|tool| {
            let depth = nesting_depth(tool.get().as_bytes());
            if depth <= MAX_SCHEMA_DEPTH {
                return Cow::Borrowed(tool.get());
            }
            let name = serde_json::from_str::<Parts<'_>>(tool.get())
                .ok()
                .and_then(|t| t.get("name").map(|n| n.get().to_owned()))
                .filter(|n| n.starts_with('"'))
                .unwrap_or_else(|| r#""""#.to_owned());
            Cow::Owned(format!(
                r#"{{"name":{name},"inputSchema":{{"type":"object","{TOO_DEEP_KEY}":{depth}}}}}"#
            ))
        })
        .collect();
    let mut result: BTreeMap<&str, Cow<'_, str>> = result
        .iter()
        .map(|(k, v)| (k.as_str(), Cow::Borrowed(v.get())))
        .collect();
    result.insert("tools", Cow::Owned(format!("[{}]", tools.join(","))));
    let mut message: BTreeMap<&str, Cow<'_, str>> = parts
        .iter()
        .map(|(k, v)| (k.as_str(), Cow::Borrowed(v.get())))
        .collect();
    message.insert("result", Cow::Owned(object(&result)));
    let text = object(&message);
    (nesting_depth(text.as_bytes()) <= MAX_MESSAGE_DEPTH).then_some(text)
}

/// `{"k":v,…}` from raw JSON values.
fn object(fields: &BTreeMap<&str, Cow<'_, str>>) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(*k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Why a listed tool (its whole definition, as listed) is refused for its nesting, if it is:
/// the stub [`guard`] put in place of a tool too deep to read, or a tool read whole that still
/// nests deeper than [`MAX_SCHEMA_DEPTH`].
pub(crate) fn too_deep(tool: &serde_json::Value) -> Option<String> {
    let stubbed = tool
        .get("inputSchema")
        .and_then(|s| s.get(TOO_DEEP_KEY))
        .and_then(serde_json::Value::as_u64);
    // The stub's own depth is small: its key says how deep the tool was. A server can send
    // the key too, so it can only make a tool deeper, never shallower than it is.
    let stubbed = stubbed.map_or(0, |d| usize::try_from(d).unwrap_or(usize::MAX));
    let depth = value_depth(tool).max(stubbed);
    (depth > MAX_SCHEMA_DEPTH).then(|| {
        format!("its definition nests {depth} levels, over the {MAX_SCHEMA_DEPTH}-level limit")
    })
}

/// How deeply a parsed value nests (iterative).
fn value_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            serde_json::Value::Array(items) => {
                deepest = deepest.max(d);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            serde_json::Value::Object(map) => {
                deepest = deepest.max(d);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!(
            "{}{}",
            r#"{"type":"object","properties":{"a":"#.repeat(levels),
            "{}".to_owned() + &"}}".repeat(levels)
        )
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(nesting_depth(br#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(nesting_depth(br#""\"[""#), 0);
        assert_eq!(nesting_depth(b"[]"), 1);
    }

    #[test]
    fn a_shallow_message_is_left_alone() {
        let m = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
        assert_eq!(guard(m), Guarded::Parse(Cow::Borrowed(m)));
    }

    #[test]
    fn one_deep_tool_becomes_a_stub_and_its_neighbours_stay() {
        let m = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"ok","inputSchema":{{"type":"object"}}}},{{"name":"deep","inputSchema":{}}}],"nextCursor":"c"}}}}"#,
            nested(200)
        );
        let Guarded::Parse(text) = guard(&m) else {
            panic!("dropped")
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["nextCursor"], "c");
        assert_eq!(v["result"]["tools"][0]["name"], "ok");
        let stub = &v["result"]["tools"][1];
        assert_eq!(stub["name"], "deep");
        assert_eq!(
            too_deep(stub).unwrap(),
            "its definition nests 402 levels, over the 64-level limit"
        );
        assert_eq!(too_deep(&v["result"]["tools"][0]), None);
        // The same bound for a tool read whole: 65 levels is one too many.
        let tool: serde_json::Value =
            serde_json::from_str(&format!(r#"{{"name":"t","inputSchema":{}}}"#, nested(31)))
                .unwrap();
        assert_eq!(value_depth(&tool), 64);
        assert_eq!(too_deep(&tool), None);
        let tool: serde_json::Value =
            serde_json::from_str(&format!(r#"{{"name":"t","inputSchema":{}}}"#, nested(32)))
                .unwrap();
        assert!(too_deep(&tool).unwrap().contains("nests 66 levels"));
    }

    #[test]
    fn a_deep_answer_becomes_an_error_and_a_deep_notification_is_dropped() {
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":"x","result":{}}}"#,
            "[".repeat(100_000) + &"]".repeat(100_000)
        );
        let Guarded::Parse(text) = guard(&answer) else {
            panic!("dropped")
        };
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32700,"message":"the server's answer nests 100001 levels, deeper than the 120 this client reads"}}"#
        );
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{}}}"#,
            "[".repeat(500) + &"]".repeat(500)
        );
        assert_eq!(guard(&note), Guarded::Drop);
        // A request of the server's carries an id too: as an answer it would fail the
        // client's own request with that id.
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"roots/list","params":{}}}"#,
            "[".repeat(500) + &"]".repeat(500)
        );
        assert_eq!(guard(&request), Guarded::Drop);
    }

    #[test]
    fn a_server_cannot_vouch_for_its_own_deep_tool() {
        let tool: serde_json::Value = serde_json::from_str(&format!(
            r#"{{"name":"t","inputSchema":{{"{TOO_DEEP_KEY}":0,"x":{}}}}}"#,
            nested(40)
        ))
        .unwrap();
        assert!(too_deep(&tool).is_some(), "{tool}");
    }

    #[test]
    fn a_flood_is_logged_once_per_doubling() {
        let count = AtomicU64::new(0);
        let logged = (0..1000).filter(|_| worth_warning(&count)).count();
        assert_eq!(logged, 10);
    }

    #[test]
    fn tools_that_require_tasks_are_marked_in_meta_and_nothing_else_is_touched() {
        let listed = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{},"execution":{"taskSupport":"required"}},{"name":"b","inputSchema":{},"execution":{"taskSupport":"optional"},"_meta":{"k":1}}]}}"#;
        let Guarded::Parse(text) = guard(listed) else {
            panic!("dropped")
        };
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["result"]["tools"][0]["_meta"][TASK_REQUIRED_META],
            "required"
        );
        assert_eq!(
            value["result"]["tools"][1]["_meta"],
            serde_json::json!({"k": 1})
        );
        // A message that only mentions the word is passed through as it is.
        let other = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"\"taskSupport\""}]}}"#;
        assert!(matches!(guard(other), Guarded::Parse(Cow::Borrowed(_))));
    }
}
