//! A server's prompts and resources: listed at connect and again on their `list_changed`
//! notifications, bounded, and kept in canonical order.
//!
//! # Determinism
//! Each list is sorted by its key (a prompt's name, a resource's URI, a template's URI
//! template), never kept in the server's order or in the order pages arrived, so two
//! connections to servers listing one set in different orders give equal catalogs. A key listed
//! twice refuses the whole list (which of the two was meant cannot be decided), like a tool
//! listed twice.
//!
//! # Bounds
//! A hostile server controls these lists. Each holds at most [`MAX_CATALOG_ITEMS`] items over
//! at most 1,000 pages; an item whose JSON is over [`MAX_ITEM_BYTES`] is left out with a
//! warning; a prompt keeps at most [`MAX_PROMPT_ARGUMENTS`] arguments. Nesting is bounded
//! before parsing, for every message ([`crate::MAX_MESSAGE_DEPTH`]).

use std::collections::BTreeSet;
use std::future::Future;

use serde::Serialize;
use serde_json::Value;

use crate::error::McpError;

/// The most items one list (prompts, resources or templates) may hold.
pub const MAX_CATALOG_ITEMS: usize = 10_000;

/// The largest item (a prompt, a resource, a template) taken, as compact JSON.
pub const MAX_ITEM_BYTES: usize = 16 << 10;

/// The most pages one list follows (a server whose cursors never end is refused).
pub(crate) const MAX_PAGES: usize = 1_000;

/// `mcp/prompts-changed`: a server's prompt list changed (its `list_changed`, a reconnect,
/// or the entry giving up on it): front ends that offer prompts as commands announce them
/// again. Not logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptsChanged {
    /// The entry's `server`.
    pub server: String,
}

impl cordis_runtime::Event for McpPromptsChanged {
    const NAME: &'static str = "mcp/prompts-changed";
    type Output = ();
}

/// The most arguments a prompt may declare.
pub const MAX_PROMPT_ARGUMENTS: usize = 64;

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgumentInfo {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Whether `prompts/get` needs it.
    pub required: bool,
}

/// A prompt a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptInfo {
    /// Its name (the key `prompts/get` takes).
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// Its arguments, in the server's order (an argument order is part of the prompt).
    pub arguments: Vec<PromptArgumentInfo>,
}

/// A resource a server offers (`resources/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    /// Its URI (the key `resources/read` takes).
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
}

/// A parameterized resource (`resources/templates/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplateInfo {
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// The MIME type of what it yields, when known.
    pub mime_type: Option<String>,
}

/// One content of a `resources/read` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContent {
    /// The URI of this content.
    pub uri: String,
    /// Its MIME type, when given.
    pub mime_type: Option<String>,
    /// The text, for a text content.
    pub text: Option<String>,
    /// The base64 data, for a binary content.
    pub blob: Option<String>,
}

/// What `prompts/get` answered: the messages as the server sent them (`role`, `content`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptMessages {
    /// The server's description of this rendering.
    pub description: Option<String>,
    /// `{"role": "user"|"assistant", "content": {...}}`, in the server's order (a
    /// conversation's order).
    pub messages: Vec<Value>,
}

/// The prompts, resources and templates of one server, each sorted by its key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// By name.
    pub prompts: Vec<PromptInfo>,
    /// By URI.
    pub resources: Vec<ResourceInfo>,
    /// By URI template.
    pub templates: Vec<ResourceTemplateInfo>,
}

/// Each item as JSON (what the catalog reads, whatever rmcp's types hold).
pub(crate) fn to_values<T: Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
        .collect()
}

fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A listed item as JSON, or why it is left out.
fn within_bounds(item: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(item).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_ITEM_BYTES {
        return Err(format!(
            "it is {bytes} bytes, over the {MAX_ITEM_BYTES}-byte limit"
        ));
    }
    Ok(())
}

/// A prompt from its JSON.
pub(crate) fn prompt(v: &Value) -> Result<PromptInfo, String> {
    within_bounds(v)?;
    let name = string(v, "name").ok_or("it has no name")?;
    let arguments: Vec<PromptArgumentInfo> = v
        .get("arguments")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|arg| {
                    Some(PromptArgumentInfo {
                        name: string(arg, "name")?,
                        description: string(arg, "description"),
                        required: arg.get("required").and_then(Value::as_bool) == Some(true),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if arguments.len() > MAX_PROMPT_ARGUMENTS {
        return Err(format!(
            "it declares {} arguments, over the {MAX_PROMPT_ARGUMENTS}-argument limit",
            arguments.len()
        ));
    }
    Ok(PromptInfo {
        name,
        title: string(v, "title"),
        description: string(v, "description"),
        arguments,
    })
}

/// A resource from its JSON.
pub(crate) fn resource(v: &Value) -> Result<ResourceInfo, String> {
    within_bounds(v)?;
    Ok(ResourceInfo {
        uri: string(v, "uri").ok_or("it has no uri")?,
        name: string(v, "name").unwrap_or_default(),
        title: string(v, "title"),
        description: string(v, "description"),
        mime_type: string(v, "mimeType"),
        size: v.get("size").and_then(Value::as_u64),
    })
}

/// A resource template from its JSON.
pub(crate) fn template(v: &Value) -> Result<ResourceTemplateInfo, String> {
    within_bounds(v)?;
    Ok(ResourceTemplateInfo {
        uri_template: string(v, "uriTemplate").ok_or("it has no uriTemplate")?,
        name: string(v, "name").unwrap_or_default(),
        title: string(v, "title"),
        description: string(v, "description"),
        mime_type: string(v, "mimeType"),
    })
}

/// Every page of one list, through `fetch(cursor) -> (items, next cursor)`, bounded in pages
/// and items; each item converted by `item` (left out with a warning when it does not fit),
/// then sorted by `key` and refused whole when a key repeats.
pub(crate) async fn list_all<T, F, Fut>(
    server: &str,
    what: &'static str,
    mut fetch: F,
    item: fn(&Value) -> Result<T, String>,
    key: fn(&T) -> &str,
) -> Result<Vec<T>, McpError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<Value>, Option<String>), String>>,
{
    let error = |reason: String| McpError::Catalog {
        server: server.to_owned(),
        what,
        reason,
    };
    let mut out: Vec<T> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen_cursors = BTreeSet::new();
    let mut listed = 0usize;
    for _ in 0..MAX_PAGES {
        let (page, next) = fetch(cursor.clone()).await.map_err(error)?;
        listed += page.len();
        if listed > MAX_CATALOG_ITEMS {
            return Err(error(format!(
                "more than {MAX_CATALOG_ITEMS} items (the limit of one list)"
            )));
        }
        for v in &page {
            match item(v) {
                Ok(t) => out.push(t),
                Err(reason) => {
                    let name = string(v, "name").or_else(|| string(v, "uri"));
                    tracing::warn!(server, what, item = ?name, %reason, "mcp catalog item left out");
                }
            }
        }
        match next {
            Some(next) if !seen_cursors.insert(next.clone()) => {
                return Err(error(format!("the server repeated cursor {next:?}")));
            }
            Some(next) => cursor = Some(next),
            None => {
                out.sort_by(|a, b| key(a).cmp(key(b)));
                if let Some(twice) = out.windows(2).find(|w| key(&w[0]) == key(&w[1])) {
                    return Err(error(format!(
                        "the server listed {:?} more than once",
                        key(&twice[0])
                    )));
                }
                return Ok(out);
            }
        }
    }
    Err(error(format!("more than {} pages", MAX_PAGES)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// One page answer: the items and the next cursor.
    type Page = std::future::Ready<Result<(Vec<Value>, Option<String>), String>>;

    fn pages(all: Vec<Vec<Value>>) -> impl FnMut(Option<String>) -> Page {
        move |cursor| {
            let at: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
            let next = (at + 1 < all.len()).then(|| (at + 1).to_string());
            std::future::ready(Ok((all.get(at).cloned().unwrap_or_default(), next)))
        }
    }

    #[tokio::test]
    async fn lists_are_sorted_by_key_whatever_the_page_order_and_a_repeated_key_refuses_the_list() {
        let p = |n: &str| json!({"name": n, "arguments": [{"name": "x", "required": true}]});
        let a = list_all(
            "fx",
            "prompts",
            pages(vec![vec![p("b"), p("c")], vec![p("a")]]),
            prompt,
            |p| &p.name,
        )
        .await
        .unwrap();
        let b = list_all(
            "fx",
            "prompts",
            pages(vec![vec![p("a")], vec![p("c"), p("b")]]),
            prompt,
            |p| &p.name,
        )
        .await
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert!(a[0].arguments[0].required);
        let twice = list_all(
            "fx",
            "prompts",
            pages(vec![vec![p("a")], vec![p("a")]]),
            prompt,
            |p| &p.name,
        )
        .await
        .unwrap_err();
        assert_eq!(
            twice.to_string(),
            "mcp(fx): prompts/list failed: the server listed \"a\" more than once"
        );
    }

    #[tokio::test]
    async fn a_hostile_server_is_bounded_in_items_item_size_arguments_and_pages() {
        // 10,001 items over two pages: refused with the limit.
        let r = |i: usize| json!({"uri": format!("mem://{i:05}"), "name": "r"});
        let many = vec![
            (0..6_000).map(r).collect::<Vec<_>>(),
            (6_000..10_001).map(r).collect(),
        ];
        let err = list_all("fx", "resources", pages(many), resource, |r| &r.uri)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("more than 10000 items"), "{err}");
        // Exactly 10,000 is fine.
        let ok = list_all(
            "fx",
            "resources",
            pages(vec![(0..10_000).map(r).collect()]),
            resource,
            |r| &r.uri,
        )
        .await
        .unwrap();
        assert_eq!(ok.len(), 10_000);
        // An item over 16 KiB, and a prompt with 65 arguments, are left out alone.
        let big = json!({"uri": "mem://big", "name": "x".repeat(MAX_ITEM_BYTES)});
        let kept = list_all(
            "fx",
            "resources",
            pages(vec![vec![big, r(1)]]),
            resource,
            |r| &r.uri,
        )
        .await
        .unwrap();
        assert_eq!(kept.len(), 1);
        let args: Vec<Value> = (0..65).map(|i| json!({"name": format!("a{i}")})).collect();
        assert!(
            prompt(&json!({"name": "p", "arguments": args}))
                .unwrap_err()
                .contains("65 arguments, over the 64-argument limit")
        );
        // A server whose cursors never end is refused after 1,000 pages.
        let endless = |c: Option<String>| {
            let n: u64 = c.and_then(|c| c.parse().ok()).unwrap_or(0);
            std::future::ready(Ok((Vec::new(), Some((n + 1).to_string()))))
        };
        let err = list_all("fx", "templates", endless, template, |t| &t.uri_template)
            .await
            .unwrap_err();
        assert!(err.to_string().ends_with("more than 1000 pages"), "{err}");
    }
}
