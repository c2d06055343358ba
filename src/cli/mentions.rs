//! MCP resources attached to a message: `@<server>:<uri>` in what the user types (`explain
//! @docs:file:///guide.md`) is read from that server (`resources/read`) and its text sent with
//! the message between `[resource uri=…]` and `[/resource]`, the way editors' attached
//! resources are sent. A word that names no connected server is left as typed.

use cordis_runtime::Context;

/// The most text attached to one message (the rest is cut, saying so).
pub(crate) const MAX_ATTACHED_TEXT: usize = 256 << 10;

/// The most resources one message attaches.
pub(crate) const MAX_MENTIONS: usize = 16;

/// The `(server, uri)` mentions of `text` whose server is in `servers`, in order, each once.
fn mentions<'t>(text: &'t str, servers: &[String]) -> Vec<(&'t str, &'t str)> {
    let mut found: Vec<(&str, &str)> = Vec::new();
    for word in text.split_whitespace() {
        let Some(rest) = word.strip_prefix('@') else {
            continue;
        };
        let Some((server, uri)) = rest.split_once(':') else {
            continue;
        };
        // A sentence's closing punctuation is not part of the URI.
        let uri = uri.trim_end_matches([',', '.', ';', ')', '!', '?']);
        if uri.is_empty() || !servers.iter().any(|s| s == server) {
            continue;
        }
        if !found.contains(&(server, uri)) {
            found.push((server, uri));
        }
    }
    found
}

/// `text` with the resources it mentions attached, or why they cannot be (an unreadable
/// resource, too many mentions). Unchanged when it mentions none.
pub(crate) async fn attach(scope: &Context, text: &str) -> Result<String, String> {
    if !text.contains('@') {
        return Ok(text.to_owned());
    }
    let servers = cordis_mcp::servers(scope);
    let names: Vec<String> = servers.iter().map(|s| s.name().to_owned()).collect();
    let found = mentions(text, &names);
    if found.is_empty() {
        return Ok(text.to_owned());
    }
    if found.len() > MAX_MENTIONS {
        return Err(format!(
            "the message mentions {} resources; at most {MAX_MENTIONS} are attached at once",
            found.len()
        ));
    }
    let mut out = text.to_owned();
    let mut attached = 0usize;
    for (server, uri) in found {
        let Some(s) = servers.iter().find(|s| s.name() == server) else {
            continue;
        };
        let contents = s
            .read_resource(uri)
            .await
            .map_err(|e| format!("cannot attach @{server}:{uri}: {e}"))?;
        for c in contents {
            let block = match &c.text {
                Some(body) => format!("\n\n[resource uri={}]\n{body}\n[/resource]", c.uri),
                None => format!(
                    "\n\n[resource uri={}: {} content, not included]",
                    c.uri,
                    c.mime_type.as_deref().unwrap_or("binary")
                ),
            };
            if attached + block.len() > MAX_ATTACHED_TEXT {
                out.push_str(&format!(
                    "\n\n[resource uri={}: not included, the attached text passed 256 KiB]",
                    c.uri
                ));
                continue;
            }
            attached += block.len();
            out.push_str(&block);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_name_a_known_server_and_a_uri_each_once_without_trailing_punctuation() {
        let servers = ["fx".to_owned(), "docs".to_owned()];
        assert_eq!(
            mentions(
                "compare @fx:mem://readme and @docs:file:///a.md, then @fx:mem://readme again; mail me@host:x @nope:y",
                &servers
            ),
            [("fx", "mem://readme"), ("docs", "file:///a.md")]
        );
        assert!(mentions("no mentions @fx: here", &servers).is_empty());
    }
}
