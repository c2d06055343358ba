//! The retrying sender: one POST per attempt; 429, 5xx and connection failures are retried
//! (before anything was streamed) after `Retry-After` or an exponential backoff.

use std::time::Duration;

use super::wire::error_message;
use super::{OpenAiAdapter, adapter_error, error_chain};
use cordis_conversation::LlmError;

/// The longest `Retry-After` honoured; a longer one is waited for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Parses a `Retry-After` header value given in seconds (the HTTP-date form is not honoured).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_RETRY_AFTER))
}

impl OpenAiAdapter {
    fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.min(4);
        self.settings.retry_base.saturating_mul(factor)
    }

    /// POSTs `body` until a success status, retrying what may pass (see the module docs).
    ///
    /// # Errors
    /// A non-retryable status, or the last failure once `max_retries` are spent.
    pub(super) async fn send(&self, body: &str) -> Result<reqwest::Response, LlmError> {
        let url = self.endpoint();
        let timeout = self.settings.timeout;
        let mut retry = 0;
        loop {
            let mut builder = self
                .client
                .post(&url)
                .header("accept", "text/event-stream")
                .header("content-type", "application/json")
                .body(body.to_owned());
            if let Some(key) = &self.settings.api_key {
                builder = builder.bearer_auth(key);
            }
            let sent = tokio::time::timeout(timeout, builder.send()).await;
            let (wait, failure) = match sent {
                Err(_) => (
                    None,
                    format!("no response from {url} within {} ms", timeout.as_millis()),
                ),
                Ok(Err(e)) => (
                    None,
                    format!("request to {url} failed: {}", error_chain(&e)),
                ),
                Ok(Ok(resp)) if resp.status().is_success() => return Ok(resp),
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    let wait = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    let text = tokio::time::timeout(timeout, resp.text())
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or_default();
                    let message = format!("HTTP {status}: {}", error_message(&text));
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    if !retryable {
                        return Err(adapter_error(message));
                    }
                    (wait, message)
                }
            };
            if retry >= self.settings.max_retries {
                let tries = retry + 1;
                return Err(adapter_error(format!(
                    "{failure} (gave up after {tries} attempt{})",
                    if tries == 1 { "" } else { "s" }
                )));
            }
            let delay = wait.unwrap_or_else(|| self.backoff(retry));
            // One line for a person, at the first retry; the next ones only when debugging (the
            // last failure is the turn's error, printed once).
            let left = self.settings.max_retries - retry;
            if retry == 0 {
                tracing::warn!(
                    "llm request failed: {failure}; retrying (up to {left} more attempts)"
                );
            } else {
                tracing::debug!(%failure, retry = retry + 1, delay_ms = delay.as_millis() as u64, "llm request failed; retrying");
            }
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_parsed_and_capped() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.05"), Some(Duration::from_millis(50)));
        assert_eq!(parse_retry_after("99999"), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
