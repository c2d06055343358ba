//! The reconstructability invariant: the request sent equals a fresh fold of the log.

use cordis_conversation::LlmRequest;
use cordis_session::{SessionEvent, derive_messages, fold_request_header, kinds};

fn diverges(field: &str, detail: String) -> String {
    format!(
        "reconstructability invariant violated: request field `{field}` diverges from the log ({detail})"
    )
}

/// Checks `request` against `events`: messages against [`derive_messages`] of the prefix before
/// `boundary` (which must be a `step/start`), config/system/tools against the latest
/// `request/header`.
///
/// # Errors
/// A message naming the first diverging field (`messages[2]`, `config.model`, `system`,
/// `tools[1]`, …).
pub fn check_request(
    events: &[SessionEvent],
    boundary: u64,
    request: &LlmRequest,
) -> Result<(), String> {
    let b = usize::try_from(boundary).unwrap_or(usize::MAX);
    match events.get(b) {
        Some(e) if e.kind == kinds::STEP_START => {}
        _ => {
            return Err(format!(
                "reconstructability invariant violated: seq {boundary} is not a step/start boundary"
            ));
        }
    }
    let rebuilt = derive_messages(&events[..b]).map_err(|e| e.to_string())?;
    if rebuilt.len() != request.messages.len() {
        return Err(diverges(
            "messages",
            format!(
                "request has {} messages, the log derives {}",
                request.messages.len(),
                rebuilt.len()
            ),
        ));
    }
    if let Some(i) = (0..rebuilt.len()).find(|&i| rebuilt[i] != request.messages[i]) {
        return Err(diverges(
            &format!("messages[{i}]"),
            "content differs".into(),
        ));
    }
    let Some(header) = fold_request_header(events).map_err(|e| e.to_string())? else {
        return Err(diverges("config", "no request/header is logged".into()));
    };
    let (c, r) = (&header.config, &request.config);
    if c.model != r.model {
        return Err(diverges(
            "config.model",
            format!("request {:?}, log {:?}", r.model, c.model),
        ));
    }
    if c.temperature != r.temperature {
        return Err(diverges(
            "config.temperature",
            format!("request {:?}, log {:?}", r.temperature, c.temperature),
        ));
    }
    if c.max_tokens != r.max_tokens {
        return Err(diverges(
            "config.maxTokens",
            format!("request {:?}, log {:?}", r.max_tokens, c.max_tokens),
        ));
    }
    if c.stop != r.stop {
        return Err(diverges(
            "config.stop",
            format!("request {:?}, log {:?}", r.stop, c.stop),
        ));
    }
    if header.system != request.system {
        return Err(diverges("system", "the system prompt text differs".into()));
    }
    let logged = header.tools.as_deref().unwrap_or(&[]);
    if logged.len() != request.tools.len() {
        return Err(diverges(
            "tools",
            format!(
                "request has {} tools, the log {}",
                request.tools.len(),
                logged.len()
            ),
        ));
    }
    if let Some(i) = (0..logged.len()).find(|&i| logged[i] != request.tools[i]) {
        return Err(diverges(
            &format!("tools[{i}]"),
            format!(
                "request \"{}\", log \"{}\"",
                request.tools[i].name, logged[i].name
            ),
        ));
    }
    if request.session_id.is_empty() {
        return Err(diverges("sessionId", "empty".into()));
    }
    Ok(())
}
