//! `cordis-mcp-fixture`: a small MCP server over stdio for the `mcp` plugin's tests.
//!
//! Tools: `add`, `greet`, `fail` (an `isError` result), `crash` (replies, then exits),
//! `admin.reset` (a dotted name), `slow` (sleeps; records a cancellation in the log), `env`
//! (returns one environment variable), `pid`, `image` (a PNG block) and `toggle` (changes the
//! tool list and sends `notifications/tools/list_changed`); with `--tools` only, `broken` (an
//! invalid parameters schema), `deep` (a schema nesting 400 levels, past the JSON parser's
//! limit), `cwd` (the working directory), `write` (writes a file) and `connect` (opens a TCP
//! connection): the last two for the sandbox tests.
//!
//! `toggle` takes `add` / `remove` (tool names), `failList` (the next `tools/list` fails),
//! `duplicate` (lists one tool twice) and `silent` (change without notifying); with
//! `--catalog`, also `prompt` (adds a prompt of that name), `resource` (adds a text resource
//! at that URI) and `duplicatePrompt` (the prompt list repeats a name), each followed by its
//! `list_changed` notification.
//!
//! With `--tools` only: `big` (a text of `bytes` bytes: `BEGIN`, `x`s, `END`), `audio` (an empty WAV clip), `structured` (an `outputSchema`; `mode` good, bad or missing
//! structuredContent), `sample` (sends `sampling/createMessage` with `prompt`, `maxTokens` and a
//! model `hint`, answering the client's result), `ask` (sends `elicitation/create`: a fixed form, `form` when given, or
//! URL mode with `url: true`, and answers the client's result as JSON), `progress` (reports `steps` progress notifications `everyMs` apart on the call's
//! progress token, then answers) and `roots` (asks the client `roots/list` during the call and
//! answers its JSON). Tools carry annotations: `add` is `readOnlyHint`, `greet`
//! `destructiveHint: false`, `slow` `destructiveHint: true`.
//!
//! Flags:
//! - `--tools a,b,c`: the tools offered (default: all);
//! - `--seed N`: lists the tools in an order shuffled from `N`, and
//!   answers every request after a delay drawn from `N` in `0..=--max-delay-ms`;
//! - `--page-size N`: pages `tools/list` (cursor = offset);
//! - `--extra N`: adds tools `extra_00` … (for long, paginated lists);
//! - `--log FILE`: appends one line per notable event (`start <pid>`, `slow started`,
//!   `cancelled slow`, `lingering`);
//! - `--linger`: ignores SIGTERM and keeps running after stdin closes (a server that ignores
//!   shutdown, so the client must kill it);
//! - `--catalog`: offers prompts (`greeting`, which asks the user for a name when given none
//!   and holds its answer for 10 minutes for the name `wait`;
//!   `review`, `summarize`), resources
//!   (`mem://readme`, `mem://logo` a PNG blob, `mem://big` 300 KiB of text) and the template
//!   `mem://notes/{id}`, listed in the seed's order and paged like tools;
//! - `--extra-catalog N`: adds prompts `p_00` … and resources `mem://r/00` …;
//! - `--prompts a,b`: with `--catalog`, these prompts instead of the three above;
//! - `--change-at-start`: the first `tools/list` answers the list as it is, then the list
//!   changes (tool `late` is added) before that answer is sent, and
//!   `notifications/tools/list_changed` follows: a server whose list changes right after the
//!   client connected;
//! - `--instructions TEXT`: the `instructions` of its `initialize` answer;
//! - `--handshake-delay-ms N`: answers `initialize` after `N` ms (so servers connect in an
//!   order a test chooses);
//! - `--capabilities FILE`: writes the client's capabilities of its `initialize` request to
//!   `FILE` (JSON), for tests of what a client declares;
//! - `--stderr TEXT`: writes `TEXT` (and a line per `--stderr-lines N` more) to stderr and exits
//!   with status 1 before the handshake: a server that fails to start and says why.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, GetPromptRequestParams,
    GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{ClientResult, ElicitRequest, InitializeRequestParams, ServerRequest};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};

const ALL: &[&str] = &[
    "add",
    "greet",
    "fail",
    "crash",
    "admin.reset",
    "slow",
    "env",
    "pid",
    "toggle",
    "image",
];

#[derive(Debug, Clone, Default)]
struct Options {
    tools: Vec<String>,
    seed: Option<u64>,
    max_delay_ms: u64,
    page_size: usize,
    extra: usize,
    log: Option<String>,
    linger: bool,
    catalog: bool,
    extra_catalog: usize,
    prompts: Option<Vec<String>>,
    change_at_start: bool,
    stderr: Option<String>,
    stderr_lines: usize,
    instructions: Option<String>,
    handshake_delay_ms: u64,
    capabilities: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        tools: ALL.iter().map(|s| (*s).to_owned()).collect(),
        ..Options::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--tools" => {
                o.tools = value()?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            "--seed" => o.seed = Some(number(value()?)?),
            "--max-delay-ms" => o.max_delay_ms = number(value()?)?,
            "--page-size" => o.page_size = usize::try_from(number(value()?)?).unwrap_or(0),
            "--extra" => o.extra = usize::try_from(number(value()?)?).unwrap_or(0),
            "--log" => o.log = Some(value()?),
            "--linger" => o.linger = true,
            "--catalog" => o.catalog = true,
            "--extra-catalog" => {
                o.extra_catalog = usize::try_from(number(value()?)?).unwrap_or(0);
            }
            "--prompts" => {
                o.prompts = Some(
                    value()?
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                );
            }
            "--change-at-start" => o.change_at_start = true,
            "--instructions" => o.instructions = Some(value()?),
            "--handshake-delay-ms" => o.handshake_delay_ms = number(value()?)?,
            "--stderr" => o.stderr = Some(value()?),
            "--capabilities" => o.capabilities = Some(value()?),
            "--stderr-lines" => {
                o.stderr_lines = usize::try_from(number(value()?)?).unwrap_or(0);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

/// splitmix64: a seeded sequence with no dependency.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct State {
    /// Tools currently offered, by name (a set: `toggle` adds and removes).
    tools: BTreeSet<String>,
    /// The next `tools/list` fails (once per `toggle {"failList": true}`).
    fail_list: bool,
    /// Lists one tool twice (an invalid list).
    duplicate: bool,
    /// Prompt names offered (with `--catalog`).
    prompts: BTreeSet<String>,
    /// Resource URIs offered (with `--catalog`).
    resources: BTreeSet<String>,
    /// Lists one prompt twice.
    duplicate_prompt: bool,
    /// `--change-at-start` and the first `tools/list` is still to come.
    change_pending: bool,
}

#[derive(Clone)]
struct Fixture {
    options: Arc<Options>,
    state: Arc<Mutex<State>>,
    requests: Arc<AtomicU64>,
}

impl Fixture {
    fn log(&self, line: &str) {
        if let Some(path) = &self.options.log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }

    /// The seeded delay before answering a request.
    async fn delay(&self) {
        let (Some(seed), max) = (self.options.seed, self.options.max_delay_ms) else {
            return;
        };
        if max == 0 {
            return;
        }
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let ms = mix(seed ^ mix(n)) % (max + 1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `items` in the order seeded by `seed` (Fisher–Yates), or as they are without one.
fn shuffled<T>(mut items: Vec<T>, seed: Option<u64>) -> Vec<T> {
    if let Some(seed) = seed {
        for i in (1..items.len()).rev() {
            let j = usize::try_from(mix(seed ^ mix(i as u64)) % (i as u64 + 1)).unwrap_or(0);
            items.swap(i, j);
        }
    }
    items
}

/// One page of `items` from `cursor` (an offset), `size` long (0: all), and the next cursor.
fn page<T: Clone>(items: &[T], cursor: Option<String>, size: usize) -> (Vec<T>, Option<String>) {
    let offset: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
    let size = if size == 0 { items.len() } else { size };
    let end = (offset + size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    (items.get(offset..end).unwrap_or_default().to_vec(), next)
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The name the user gives when asked (`elicitation/create`), else "someone".
async fn ask_name(peer: &rmcp::Peer<RoleServer>) -> String {
    let params = json!({"mode": "form", "message": "Who should be greeted?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}});
    let Ok(params) = serde_json::from_value(params) else {
        return "someone".to_owned();
    };
    match peer
        .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
        .await
    {
        Ok(ClientResult::ElicitResult(answer)) => answer
            .content
            .as_ref()
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .map_or_else(|| "someone".to_owned(), str::to_owned),
        _ => "someone".to_owned(),
    }
}

fn prompt_json(name: &str) -> Value {
    match name {
        "review" => {
            json!({"name": "review", "title": "Review a file", "description": "Asks for a review of one file.",
            "arguments": [{"name": "file", "description": "The file", "required": true}, {"name": "focus", "required": false}]})
        }
        "summarize" => json!({"name": "summarize", "description": "Summarizes the conversation."}),
        "greeting" => {
            json!({"name": "greeting", "description": "Greets someone.", "arguments": [{"name": "name"}]})
        }
        other => json!({"name": other, "description": "A generated prompt."}),
    }
}

fn resource_json(uri: &str) -> Value {
    match uri {
        "mem://readme" => {
            json!({"uri": uri, "name": "readme", "mimeType": "text/plain", "description": "Read me."})
        }
        "mem://logo" => json!({"uri": uri, "name": "logo", "mimeType": "image/png"}),
        "mem://big" => json!({"uri": uri, "name": "big", "mimeType": "text/plain", "size": BIG}),
        other => {
            json!({"uri": other, "name": other.rsplit('/').next().unwrap_or(other), "mimeType": "text/plain"})
        }
    }
}

/// The size of `mem://big`: 300 KiB, over the client's 256 KiB per read for the model.
const BIG: usize = 300 << 10;

/// An object schema with `levels` nested properties (two JSON levels each).
fn nested(levels: usize) -> Value {
    (0..levels).fold(
        json!({"type": "object"}),
        |inner, _| json!({"type": "object", "properties": {"a": inner}}),
    )
}

fn tool(name: &str) -> Tool {
    let (description, schema) = match name {
        "add" => (
            "Adds two numbers.",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        ),
        "greet" => (
            "Greets someone.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        "fail" => ("Always fails (isError).", json!({"type": "object"})),
        "crash" => ("Replies, then exits.", json!({"type": "object"})),
        "admin.reset" => ("A tool with a dotted name.", json!({"type": "object"})),
        "slow" => (
            "Sleeps `ms` milliseconds (default 60000).",
            json!({"type": "object", "properties": {"ms": {"type": "integer"}}}),
        ),
        "env" => (
            "Returns an environment variable of the server process.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        "pid" => (
            "Returns the server's process id.",
            json!({"type": "object"}),
        ),
        "toggle" => (
            "Changes the tool list, then sends tools/list_changed.",
            json!({"type": "object", "properties": {
                "add": {"type": "array", "items": {"type": "string"}},
                "remove": {"type": "array", "items": {"type": "string"}},
                "failList": {"type": "boolean"},
                "duplicate": {"type": "boolean"},
                "silent": {"type": "boolean"}
            }}),
        ),
        "image" => (
            "Returns a 1x1 PNG and a caption.",
            json!({"type": "object"}),
        ),
        "big" => (
            "Returns a text of `bytes` bytes: BEGIN, x characters, END.",
            json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}),
        ),
        "links" => (
            "Returns a text, a resource link, an image and an embedded resource.",
            json!({"type": "object"}),
        ),
        "audio" => (
            "Returns an empty WAV clip and a caption.",
            json!({"type": "object"}),
        ),
        "cwd" => (
            "Returns the server's working directory.",
            json!({"type": "object"}),
        ),
        "write" => (
            "Writes `text` to the file `path`: `wrote PATH`, or the error (isError).",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path"]}),
        ),
        "connect" => (
            "Opens a TCP connection to `addr` (host:port): `connected`, or the error (isError).",
            json!({"type": "object", "properties": {"addr": {"type": "string"}}, "required": ["addr"]}),
        ),
        "broken" => (
            "Its parameters schema is not an object schema.",
            json!({"type": "array"}),
        ),
        "deep" => ("Its parameters schema nests 400 levels.", nested(200)),
        "progress" => (
            "Reports `steps` progress notifications `everyMs` apart, then answers.",
            json!({"type": "object", "properties": {"steps": {"type": "integer"}, "everyMs": {"type": "integer"}}}),
        ),
        "roots" => (
            "Asks the client for its roots and answers them.",
            json!({"type": "object"}),
        ),
        "structured" => (
            "Answers structuredContent for its outputSchema: `mode` good, bad (a string sum) or missing.",
            json!({"type": "object", "properties": {"mode": {"type": "string"}}}),
        ),
        "sample" => (
            "Asks the client's model (sampling/createMessage) to answer `prompt` in at most `maxTokens` tokens, and answers what came back.",
            json!({"type": "object", "properties": {"prompt": {"type": "string"}, "maxTokens": {"type": "integer"}, "hint": {"type": "string"}}}),
        ),
        "ask" => (
            "Asks the user for a name, an age and a color (elicitation/create, form mode), or for `form` when given, and answers what came back.",
            json!({"type": "object", "properties": {"form": {"type": "object"}, "url": {"type": ["boolean", "string"]}}}),
        ),
        _ => ("A generated tool.", json!({"type": "object"})),
    };
    let mut value = json!({"name": name, "description": description, "inputSchema": schema});
    let hints = match name {
        "add" => Some(json!({"readOnlyHint": true})),
        "greet" => Some(json!({"destructiveHint": false})),
        "slow" => Some(json!({"destructiveHint": true, "openWorldHint": false})),
        _ => None,
    };
    if let Some(hints) = hints {
        value["annotations"] = hints;
    }
    if name == "structured" {
        value["outputSchema"] = json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("fixture tool {name}: {e}"))
}

/// The `sample` tool: a `sampling/createMessage` to the client (deprecated by SEP-2577, still
/// sent by servers), answering the client's result as JSON or its error.
#[allow(
    deprecated,
    reason = "sampling is deprecated by SEP-2577; the fixture still sends it, as servers do"
)]
async fn sample(peer: &rmcp::Peer<RoleServer>, args: &Value) -> CallToolResult {
    let mut params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": args["prompt"].as_str().unwrap_or("Say hello.")}}],
        "systemPrompt": "You answer a tool's question briefly.",
        "maxTokens": args["maxTokens"].as_u64().unwrap_or(100),
    });
    if let Some(hint) = args["hint"].as_str() {
        params["modelPreferences"] = json!({"hints": [{"name": hint}]});
    }
    let request = match serde_json::from_value(params) {
        Ok(p) => ServerRequest::CreateMessageRequest(rmcp::model::CreateMessageRequest::new(p)),
        Err(e) => return text_result(format!("cannot build the request: {e}"), true, None),
    };
    match peer.send_request(request).await {
        Ok(ClientResult::CreateMessageResult(answer)) => text_result(
            serde_json::to_string(&answer).unwrap_or_default(),
            false,
            None,
        ),
        Ok(_) => text_result("an unexpected answer", true, None),
        Err(e) => text_result(format!("sampling/createMessage failed: {e}"), true, None),
    }
}

/// The `ask` tool: an `elicitation/create` to the client (a form, or a page to open when
/// `url` is set), answering the client's answer as JSON or its error.
async fn ask(peer: &rmcp::Peer<RoleServer>, args: &Value) -> CallToolResult {
    let form = args.get("form").cloned().unwrap_or_else(|| {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "age": {"type": "integer", "minimum": 0},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}
            },
            "required": ["name"]
        })
    });
    let page = match &args["url"] {
        Value::String(url) => Some(url.clone()),
        Value::Bool(true) => Some("https://example.test/x".to_owned()),
        _ => None,
    };
    let params = if let Some(url) = page {
        json!({"mode": "url", "message": "Open this", "url": url, "elicitationId": "e1"})
    } else {
        json!({"mode": "form", "message": "Who are you?", "requestedSchema": form})
    };
    let asked = serde_json::from_value(params)
        .map_err(|e| e.to_string())
        .map(|p| ServerRequest::ElicitRequest(ElicitRequest::new(p)));
    match asked {
        Err(e) => text_result(format!("cannot build the request: {e}"), true, None),
        Ok(request) => match peer.send_request(request).await {
            Ok(ClientResult::ElicitResult(answer)) => {
                // A page the user said they would open: done at once here.
                if args
                    .get("url")
                    .is_some_and(|u| !u.is_null() && u != &json!(false))
                    && serde_json::to_value(&answer)
                        .ok()
                        .is_some_and(|a| a["action"] == "accept")
                {
                    let done = rmcp::model::CustomNotification::new(
                        "notifications/elicitation/complete",
                        Some(json!({"elicitationId": "e1"})),
                    );
                    let _ = peer
                        .send_notification(rmcp::model::ServerNotification::CustomNotification(
                            done,
                        ))
                        .await;
                }
                text_result(
                    serde_json::to_string(&answer).unwrap_or_default(),
                    false,
                    None,
                )
            }
            Ok(_) => text_result("an unexpected answer", true, None),
            Err(e) => text_result(format!("elicitation/create failed: {e}"), true, None),
        },
    }
}

/// The `roots` tool: `roots/list` to a client that declared roots, answering them with the
/// declared capabilities.
#[allow(
    deprecated,
    reason = "roots are deprecated for the stateless protocol; the client speaks the initialize one"
)]
async fn roots(peer: &rmcp::Peer<RoleServer>) -> CallToolResult {
    // As a real server does: ask only a client that declared roots.
    let declared: Vec<String> = peer
        .peer_info()
        .and_then(|info| serde_json::to_value(&info.capabilities).ok())
        .and_then(|c| c.as_object().map(|o| o.keys().cloned().collect()))
        .unwrap_or_default();
    if !declared.iter().any(|k| k == "roots") {
        text_result(
            format!("the client declared no roots: {declared:?}"),
            true,
            None,
        )
    } else {
        match peer.list_roots().await {
            Ok(roots) => text_result(
                json!({"capabilities": declared, "roots": roots.roots}).to_string(),
                false,
                None,
            ),
            Err(e) => text_result(format!("roots/list failed: {e}"), true, None),
        }
    }
}

impl Fixture {
    /// The `progress` tool: `steps` progress notifications `everyMs` apart, until cancelled.
    async fn progress(&self, args: &Value, context: &RequestContext<RoleServer>) -> CallToolResult {
        let steps = args["steps"].as_u64().unwrap_or(3);
        let every = args["everyMs"].as_u64().unwrap_or(50);
        let token = context.meta.get_progress_token();
        self.log(&format!("progress token {}", token.is_some()));
        for i in 1..=steps {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(every)) => {}
                () = context.ct.cancelled() => {
                    self.log("cancelled progress");
                    return text_result("cancelled", true, None);
                }
            }
            if let Some(token) = token.clone() {
                let mut p = ProgressNotificationParam::new(token, i as f64);
                p.total = Some(steps as f64);
                p.message = Some(format!("step {i}"));
                let _ = context.peer.notify_progress(p).await;
            }
        }
        text_result(format!("done after {steps} steps"), false, None)
    }

    /// The `toggle` tool: adds prompts or resources (notifying their list's change), or else
    /// changes the tool list and its failure modes (notifying unless `silent`).
    async fn toggle(&self, args: &Value, peer: &rmcp::Peer<RoleServer>) -> CallToolResult {
        let catalog_change = {
            let mut st = self.lock();
            let mut prompts = false;
            let mut resources = false;
            if let Some(p) = args["prompt"].as_str() {
                st.prompts.insert(p.to_owned());
                prompts = true;
            }
            if let Some(r) = args["resource"].as_str() {
                st.resources.insert(r.to_owned());
                resources = true;
            }
            if args.get("duplicatePrompt").is_some() {
                st.duplicate_prompt = args["duplicatePrompt"].as_bool().unwrap_or(false);
                prompts = true;
            }
            (prompts, resources)
        };
        if catalog_change.0 {
            let _ = peer.notify_prompt_list_changed().await;
        }
        if catalog_change.1 {
            let _ = peer.notify_resource_list_changed().await;
        }
        if catalog_change != (false, false) {
            return text_result("toggled", false, None);
        }
        {
            let mut st = self.lock();
            for n in string_list(args.get("add")) {
                st.tools.insert(n);
            }
            for n in string_list(args.get("remove")) {
                st.tools.remove(&n);
            }
            st.fail_list = args["failList"].as_bool().unwrap_or(false);
            st.duplicate = args["duplicate"].as_bool().unwrap_or(false);
        }
        if !args["silent"].as_bool().unwrap_or(false) {
            let _ = peer.notify_tool_list_changed().await;
        }
        text_result("toggled", false, None)
    }
}

/// The `links` tool's result: one block of each kind a front end shows as content.
fn links() -> CallToolResult {
    serde_json::from_value(json!({"content": [
        {"type": "text", "text": "two files"},
        {"type": "resource_link", "uri": "file:///project/notes.md", "name": "notes.md", "mimeType": "text/markdown"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="},
        {"type": "resource", "resource": {"uri": "mem://readme", "mimeType": "text/plain", "text": "read me"}}
    ]}))
    .unwrap_or_else(|e| panic!("fixture links: {e}"))
}

fn text_result(
    text: impl Into<String>,
    is_error: bool,
    structured: Option<Value>,
) -> CallToolResult {
    let mut value =
        json!({"content": [{"type": "text", "text": text.into()}], "isError": is_error});
    if let Some(s) = structured {
        value["structuredContent"] = s;
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("fixture result: {e}"))
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = json!({"tools": {"listChanged": true}});
        if self.options.catalog {
            capabilities["prompts"] = json!({"listChanged": true});
            capabilities["resources"] = json!({"listChanged": true});
        }
        let capabilities: ServerCapabilities = serde_json::from_value(capabilities)
            .unwrap_or_else(|e| panic!("fixture capabilities: {e}"));
        let info = ServerConfig::new(capabilities);
        match &self.options.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerConfig, ErrorData> {
        if self.options.handshake_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.options.handshake_delay_ms)).await;
        }
        if let Some(path) = &self.options.capabilities {
            let declared = serde_json::to_string(&request.capabilities).unwrap_or_default();
            let _ = std::fs::write(path, declared);
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.delay().await;
        let (mut names, duplicate) = {
            let st = self.lock();
            (
                st.prompts.iter().cloned().collect::<Vec<_>>(),
                st.duplicate_prompt,
            )
        };
        if duplicate && let Some(first) = names.first().cloned() {
            names.push(first);
        }
        let names = shuffled(names, self.options.seed);
        let (items, next) = page(
            &names,
            request.and_then(|r| r.cursor),
            self.options.page_size,
        );
        let value = json!({"prompts": items.iter().map(|n| prompt_json(n)).collect::<Vec<_>>(), "nextCursor": next});
        serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let text = match request.name.as_str() {
            "review" => format!("Review {} (focus: {}).", arg("file"), arg("focus")),
            // Without a name, the user is asked for one (elicitation during `prompts/get`).
            "greeting" if arg("name").is_empty() => {
                format!("Say hello to {}.", ask_name(&context.peer).await)
            }
            // A prompt that never comes (for a client that must stop waiting): logged, then held.
            "greeting" if arg("name") == "wait" => {
                self.log("greeting wait");
                tokio::time::sleep(Duration::from_secs(600)).await;
                "Say hello to nobody.".to_owned()
            }
            "greeting" => format!("Say hello to {}.", arg("name")),
            "summarize" => "Summarize the conversation so far.".to_owned(),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt: {other}"),
                    None,
                ));
            }
        };
        let value = json!({"description": "rendered", "messages": [{"role": "user", "content": {"type": "text", "text": text}}]});
        serde_json::from_value(value)
            .map(GetPromptResponse::Complete)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.delay().await;
        let uris: Vec<String> = self.lock().resources.iter().cloned().collect();
        let uris = shuffled(uris, self.options.seed.map(|s| s ^ 0x5EED));
        let (items, next) = page(
            &uris,
            request.and_then(|r| r.cursor),
            self.options.page_size,
        );
        let value = json!({"resources": items.iter().map(|u| resource_json(u)).collect::<Vec<_>>(), "nextCursor": next});
        serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let value = json!({"resourceTemplates": [
            {"uriTemplate": "mem://notes/{id}", "name": "note", "mimeType": "text/plain"}
        ]});
        serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let content = if uri == "mem://logo" {
            json!({"uri": uri, "mimeType": "image/png", "blob": PNG})
        } else if uri == "mem://big" {
            json!({"uri": uri, "mimeType": "text/plain", "text": "x".repeat(BIG)})
        } else if let Some(id) = uri.strip_prefix("mem://notes/") {
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("note {id}")})
        } else if self.lock().resources.contains(&uri) {
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("contents of {uri}")})
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            ));
        };
        serde_json::from_value(json!({"contents": [content]}))
            .map(ReadResourceResponse::Complete)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.delay().await;
        let (mut names, duplicate, changed) = {
            let mut st = self.lock();
            if st.fail_list {
                st.fail_list = false;
                return Err(ErrorData::internal_error(
                    "tools/list is failing on purpose",
                    None,
                ));
            }
            let names = st.tools.iter().cloned().collect::<Vec<_>>();
            // The list changes as soon as it was read once: before this answer is sent.
            let changed = std::mem::take(&mut st.change_pending);
            if changed {
                st.tools.insert("late".to_owned());
            }
            (names, st.duplicate, changed)
        };
        if changed {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
        if duplicate && let Some(first) = names.first().cloned() {
            names.push(first);
        }
        // The order differs between seeds, never within one.
        let names = shuffled(names, self.options.seed);
        let offset: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let size = if self.options.page_size == 0 {
            names.len()
        } else {
            self.options.page_size
        };
        let end = (offset + size).min(names.len());
        let page: Vec<Tool> = names
            .get(offset..end)
            .unwrap_or_default()
            .iter()
            .map(|n| tool(n))
            .collect();
        let mut result = ListToolsResult::with_all_items(page);
        result.next_cursor = (end < names.len()).then(|| end.to_string());
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.delay().await;
        let name = request.name.to_string();
        let args = request.arguments.map(Value::Object).unwrap_or(json!({}));
        if !self.lock().tools.contains(&name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        }
        let result = match name.as_str() {
            "add" => {
                let a = args["a"].as_f64().unwrap_or(0.0);
                let b = args["b"].as_f64().unwrap_or(0.0);
                let sum = a + b;
                text_result(format!("{sum}"), false, Some(json!({"sum": sum})))
            }
            "greet" => text_result(
                format!("Hello, {}!", args["name"].as_str().unwrap_or("nobody")),
                false,
                None,
            ),
            "fail" => text_result("fail: it failed on purpose", true, None),
            "crash" => {
                // Reply first, then exit: the reply must reach the client before the pipe closes.
                tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    std::process::exit(3);
                });
                text_result("crashing", false, None)
            }
            "admin.reset" => text_result("reset", false, None),
            "big" => {
                let bytes = usize::try_from(args["bytes"].as_u64().unwrap_or(0)).unwrap_or(0);
                let middle = bytes.saturating_sub("BEGINEND".len());
                text_result(format!("BEGIN{}END", "x".repeat(middle)), false, None)
            }
            "slow" => {
                let ms = args["ms"].as_u64().unwrap_or(60_000);
                self.log("slow started");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => text_result(format!("slept {ms} ms"), false, None),
                    () = context.ct.cancelled() => {
                        self.log("cancelled slow");
                        text_result("cancelled", true, None)
                    }
                }
            }
            "env" => {
                let var = args["name"].as_str().unwrap_or_default();
                let value = std::env::var(var).unwrap_or_else(|_| "<unset>".to_owned());
                text_result(value, false, None)
            }
            "pid" => text_result(std::process::id().to_string(), false, None),
            "write" => {
                let path = args["path"].as_str().unwrap_or_default();
                match std::fs::write(path, args["text"].as_str().unwrap_or_default()) {
                    Ok(()) => text_result(format!("wrote {path}"), false, None),
                    Err(e) => text_result(format!("cannot write {path}: {e}"), true, None),
                }
            }
            "connect" => {
                let addr = args["addr"].as_str().unwrap_or_default();
                match tokio::net::TcpStream::connect(addr).await {
                    Ok(_) => text_result("connected", false, None),
                    Err(e) => text_result(format!("cannot connect to {addr}: {e}"), true, None),
                }
            }
            "cwd" => text_result(
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                false,
                None,
            ),
            "image" => serde_json::from_value(json!({"content": [
                {"type": "text", "text": "a pixel"},
                {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}
            ]}))
            .unwrap_or_else(|e| panic!("fixture image: {e}")),
            "audio" => serde_json::from_value(json!({"content": [
                {"type": "text", "text": "a silence"},
                {"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="}
            ]}))
            .unwrap_or_else(|e| panic!("fixture audio: {e}")),
            "links" => links(),
            "progress" => self.progress(&args, &context).await,
            "structured" => match args["mode"].as_str().unwrap_or("good") {
                "bad" => text_result("3", false, Some(json!({"sum": "3"}))),
                "missing" => text_result("3", false, None),
                _ => text_result("3", false, Some(json!({"sum": 3}))),
            },
            "ask" => ask(&context.peer, &args).await,
            "sample" => sample(&context.peer, &args).await,
            "roots" => roots(&context.peer).await,
            "toggle" => self.toggle(&args, &context.peer).await,
            other => text_result(format!("{other} ran"), false, None),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cordis-mcp-fixture: {e}");
            std::process::exit(2);
        }
    };
    let mut tools: BTreeSet<String> = options.tools.iter().cloned().collect();
    for i in 0..options.extra {
        tools.insert(format!("extra_{i:02}"));
    }
    let linger = options.linger;
    let change_pending = options.change_at_start;
    let (mut prompts, mut resources) = (BTreeSet::new(), BTreeSet::new());
    if let Some(reason) = &options.stderr {
        eprintln!("{reason}");
        for i in 0..options.stderr_lines {
            eprintln!("stderr line {i:05}");
        }
        std::process::exit(1);
    }
    if options.catalog {
        match &options.prompts {
            Some(names) => prompts.extend(names.iter().cloned()),
            None => prompts.extend(["greeting", "review", "summarize"].map(str::to_owned)),
        }
        resources.extend(["mem://readme", "mem://logo", "mem://big"].map(str::to_owned));
        for i in 0..options.extra_catalog {
            prompts.insert(format!("p_{i:02}"));
            resources.insert(format!("mem://r/{i:02}"));
        }
    }
    let fixture = Fixture {
        options: Arc::new(options),
        state: Arc::new(Mutex::new(State {
            tools,
            fail_list: false,
            duplicate: false,
            prompts,
            resources,
            duplicate_prompt: false,
            change_pending,
        })),
        requests: Arc::new(AtomicU64::new(0)),
    };
    fixture.log(&format!("start {}", std::process::id()));
    // Held for the whole run: a lingering server ignores SIGTERM.
    let _sigterm = if linger {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok()
    } else {
        None
    };
    match fixture.clone().serve(rmcp::transport::stdio()).await {
        Ok(service) => {
            let _ = service.waiting().await;
        }
        Err(e) => eprintln!("cordis-mcp-fixture: {e}"),
    }
    if linger {
        fixture.log("lingering");
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
