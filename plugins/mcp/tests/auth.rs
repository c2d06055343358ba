//! OAuth against the in-repo authorization server fixture (`support/oauth.rs`): a server that
//! needs a login leaves its entry pending with the reason and is not asked again until a
//! login stores a grant; the login (discovery, registration, PKCE, resource, loopback redirect)
//! driven headlessly; expired tokens refreshed; revoked ones asking for a login again;
//! insufficient scope stepped up; a wrong resource, a server without PKCE and a refusal
//! refused with their reasons.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cordis_mcp::auth::{AuthError, LoginOptions, LoginOutcome, TokenStore, login};
use cordis_mcp::{McpConfig, McpPlugin};
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolRegistry, ToolsConfig, ToolsPlugin};
use serde_json::json;

use crate::support::oauth::{OAuthFixture, approve};

fn root_with_tools() -> Context {
    let root = Context::root();
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root
}

fn config(fixture: &OAuthFixture, tokens: &std::path::Path) -> McpConfig {
    serde_json::from_value(json!({
        "transport": "http",
        "server": "guarded",
        "url": fixture.mcp,
        "callTimeoutMs": 5000,
        "oauth": {"tokenDir": tokens}
    }))
    .unwrap()
}

/// Logs in, playing the user's browser; what `login` returned.
async fn log_in(config: &McpConfig, store: &TokenStore) -> Result<LoginOutcome, AuthError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let browser = tokio::spawn(async move {
        let said = rx.recv().await?;
        Some(approve(&said).await)
    });
    let options = LoginOptions {
        timeout: Duration::from_secs(20),
        open_browser: false,
    };
    let mut say = move |line: &str| {
        let _ = tx.send(line.to_owned());
    };
    let outcome = login(config, store, &options, &mut say).await;
    drop(say);
    if outcome.is_ok() {
        let page = browser.await.unwrap().expect("the address was said");
        assert!(page.contains("cordis is authorized"), "{page}");
    } else {
        browser.abort();
    }
    outcome
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        call_id: "1".into(),
        name: name.into(),
        arguments: json!({}),
    }
}

async fn pending_reason(entry: &ScopeHandle) -> String {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let info = entry.info();
            if info.status == ScopeStatus::Pending
                && let Some(reason) = info.waiting
            {
                return reason;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the entry never became pending")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_a_login_waits_for_one_without_asking_again_then_works_with_the_grant()
{
    let fixture = OAuthFixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());

    let reason = pending_reason(&entry).await;
    assert_eq!(
        reason,
        "mcp(guarded): the server needs authorization: run `cordis mcp login guarded [FILE]`"
    );
    assert!(entry.failure().is_none());
    // Pending entries apply again every poll; without a new grant none of them asks the
    // server (one 401 was the first connection's).
    tokio::time::sleep(cordis_mcp::auth::LOGIN_POLL * 2 + Duration::from_millis(500)).await;
    assert_eq!(fixture.count("mcp 401"), 1, "{:?}", fixture.log());
    assert_eq!(entry.status(), ScopeStatus::Pending);

    let store = TokenStore::new(&dir);
    let outcome = log_in(&config, &store).await.unwrap();
    let LoginOutcome::Stored {
        issuer,
        scopes,
        path,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(issuer, format!("{}/as", fixture.base));
    assert_eq!(scopes, ["mcp:read"], "the challenge's scope");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    {
        let k = fixture.knobs();
        assert_eq!(k.count("register client-"), 1, "{:?}", k.log);
        assert_eq!(k.count("token code"), 1, "{:?}", k.log);
    }
    let grant = store.load(&fixture.mcp).unwrap().unwrap();
    assert_eq!(grant.resource, fixture.mcp);
    assert!(grant.refresh_token.is_some());

    // The pending entry sees the new grant at its next poll.
    let status = tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    assert_eq!(status, ScopeStatus::Active);
    let reg = root.get::<ToolRegistry>().unwrap();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(
        result.content["content"][0]["text"],
        format!("token {}", grant.access_token)
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_renewed_before_they_expire_and_after_a_401_and_a_revoked_grant_asks_for_a_login()
 {
    let fixture = OAuthFixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let store = TokenStore::new(&dir);
    // A token that expires within the renewal margin…
    fixture.knobs().lifetime = 10;
    log_in(&config, &store).await.unwrap();
    let first = store.load(&fixture.mcp).unwrap().unwrap();
    fixture.knobs().lifetime = 3600;
    // (The login's own probe was refused once.)
    let refused = fixture.count("mcp 401");

    // …is renewed before the first request: the server never sees it refused.
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());
    tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    assert_eq!(fixture.count("token refresh"), 1, "{:?}", fixture.log());
    assert_eq!(fixture.count("mcp 401"), refused, "{:?}", fixture.log());
    let second = store.load(&fixture.mcp).unwrap().unwrap();
    assert_ne!(second.access_token, first.access_token);
    assert_ne!(
        second.refresh_token, first.refresh_token,
        "rotated, and stored"
    );
    let reg = root.get::<ToolRegistry>().unwrap();

    // A token the server stopped taking is renewed and the request sent again.
    fixture.knobs().expire_access();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(!result.is_error, "{result:?}");
    let third = store.load(&fixture.mcp).unwrap().unwrap();
    assert_ne!(third.access_token, second.access_token);
    assert_eq!(
        result.content["content"][0]["text"],
        format!("token {}", third.access_token)
    );
    assert_eq!(fixture.count("token refresh"), 2);

    // Revoked (refresh token too): only a login helps, and the call says so.
    fixture.knobs().revoke_all();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(result.is_error, "{result:?}");
    let message = result.content.as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains("renewing it failed")
            && message.contains("run `cordis mcp login guarded [FILE]`"),
        "{message}"
    );
    // The failed call makes the entry check on the server and reconnect; needing a login, it
    // waits for one instead of asking the server again and again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refused = fixture.count("mcp 401");
    tokio::time::sleep(cordis_mcp::auth::LOGIN_POLL * 2 + Duration::from_millis(500)).await;
    assert_eq!(fixture.count("mcp 401"), refused, "{:?}", fixture.log());
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_scope_names_the_scope_and_the_next_login_asks_for_it() {
    let fixture = OAuthFixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let store = TokenStore::new(&dir);
    log_in(&config, &store).await.unwrap();

    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());
    tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    let reg = root.get::<ToolRegistry>().unwrap();
    let result = reg.execute(call("mcp__guarded__admin"), None).await;
    assert!(result.is_error, "{result:?}");
    let message = result.content.as_str().unwrap_or_default().to_owned();
    // The server answered: the refusal is the message, not a server out of reach.
    assert!(
        message.starts_with("mcp(guarded): the server needs more scope (mcp:read mcp:admin)")
            && message.contains("cordis mcp login guarded"),
        "{message}"
    );
    assert_eq!(
        store.load(&fixture.mcp).unwrap().unwrap().wanted,
        ["mcp:admin"]
    );

    // Step-up: the next login asks for what the server wanted.
    let LoginOutcome::Stored { scopes, .. } = log_in(&config, &store).await.unwrap() else {
        panic!()
    };
    assert_eq!(scopes, ["mcp:read", "mcp:admin"]);
    assert!(
        fixture
            .log()
            .contains(&"authorize scope=mcp:read mcp:admin".to_owned()),
        "{:?}",
        fixture.log()
    );
    // The running entry reads the new grant when the old token is refused.
    fixture
        .knobs()
        .access
        .retain(|_, (_, scopes, _)| scopes.len() == 2);
    let result = reg.execute(call("mcp__guarded__admin"), None).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.content["content"][0]["text"], "admin ok");
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_resource_a_server_without_pkce_and_a_refusal_are_refused_with_their_reasons() {
    let fixture = OAuthFixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let store = TokenStore::new(&dir);

    fixture.knobs().wrong_resource = true;
    let e = log_in(&config, &store).await.unwrap_err();
    assert!(matches!(e, AuthError::WrongResource { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("/other, which does not cover the server"),
        "{e}"
    );
    fixture.knobs().wrong_resource = false;

    fixture.knobs().no_pkce = true;
    let e = log_in(&config, &store).await.unwrap_err().to_string();
    assert!(e.contains("does not support PKCE with S256"), "{e}");
    fixture.knobs().no_pkce = false;

    fixture.knobs().deny = true;
    let e = log_in(&config, &store).await.unwrap_err().to_string();
    assert!(e.contains("not granted: access_denied"), "{e}");
    // Nothing was stored by any of them, and no token was ever asked for.
    assert_eq!(store.load(&fixture.mcp).unwrap(), None);
    assert_eq!(fixture.count("token"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_metadata_document_is_the_client_id_where_the_server_takes_them() {
    let fixture = OAuthFixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let mut config = config(&fixture, &dir);
    config.oauth.client_metadata_url = Some("https://cordis.example/client.json".into());
    let store = TokenStore::new(&dir);
    // Not offered: dynamic registration.
    log_in(&config, &store).await.unwrap();
    assert_eq!(fixture.count("register"), 1);
    // Offered: the document's URL is the client id, nothing is registered.
    fixture.knobs().metadata_documents = true;
    log_in(&config, &store).await.unwrap();
    assert_eq!(fixture.count("register"), 1, "{:?}", fixture.log());
    let grant = store.load(&fixture.mcp).unwrap().unwrap();
    assert_eq!(grant.client_id, "https://cordis.example/client.json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_get_and_renew_tokens_without_a_login_and_a_wrong_secret_is_named() {
    use cordis_mcp::auth::GrantKind;
    let fixture = OAuthFixture::start().await;
    fixture
        .knobs()
        .confidential
        .insert("ci-runner".into(), "s3cret".into());
    let with_secret = |dir: &std::path::Path, secret: &str| {
        let mut config = config(&fixture, dir);
        config.oauth.grant = GrantKind::ClientCredentials;
        config.oauth.client_id = Some("ci-runner".into());
        config.oauth.client_secret = Some(secret.into());
        config
    };
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, with_secret(&dir, "s3cret"));
    tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    assert_eq!(
        fixture.count("token client_credentials"),
        1,
        "{:?}",
        fixture.log()
    );
    assert_eq!(fixture.count("authorize"), 0, "nobody logged in");
    let reg = root.get::<ToolRegistry>().unwrap();
    let first = TokenStore::new(&dir).load(&fixture.mcp).unwrap().unwrap();
    assert!(first.refresh_token.is_none());
    // The secret stays in the config: the grants store never holds it.
    let stored = std::fs::read_to_string(TokenStore::new(&dir).path_of(&fixture.mcp)).unwrap();
    assert!(
        !stored.contains("s3cret") && first.client_secret.is_none(),
        "{stored}"
    );
    assert!(
        !format!("{first:?}").contains(&first.access_token),
        "Debug shows no token"
    );
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert_eq!(
        result.content["content"][0]["text"],
        format!("token {}", first.access_token)
    );

    // The server forgets the token: a new one is asked for with the credentials, and the
    // call goes through.
    fixture.knobs().expire_access();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(
        fixture.count("token client_credentials"),
        2,
        "{:?}",
        fixture.log()
    );
    let second = TokenStore::new(&dir).load(&fixture.mcp).unwrap().unwrap();
    assert_ne!(second.access_token, first.access_token);
    root.dispose();

    // A wrong secret: pending, naming what to check (not a login).
    let other = tempfile::tempdir().unwrap();
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, with_secret(other.path(), "wrong"));
    let reason = pending_reason(&entry).await;
    assert!(
        reason.starts_with("mcp(guarded): the client credentials got no token (")
            && reason.contains("invalid_client")
            && reason.ends_with("): check the entry's `oauth.clientId` and `oauth.clientSecret`"),
        "{reason}"
    );
    root.dispose();

    // Without its secret the entry does not load.
    let mut config = config(&fixture, other.path());
    config.oauth.grant = GrantKind::ClientCredentials;
    let error = config.check().unwrap_err().to_string();
    assert!(
        error.contains(
            "`oauth.grant: clientCredentials` needs `oauth.clientId` and `oauth.clientSecret`"
        ),
        "{error}"
    );
}

/// The grant stored for the fixture's server.
fn stored(store: &TokenStore, fixture: &OAuthFixture) -> cordis_mcp::auth::Grant {
    store.load(&fixture.mcp).unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_only_tools_list_is_logged_in_to_from_that_challenge() {
    let fixture = OAuthFixture::start().await;
    fixture.knobs().list_only = true;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());
    let reason = pending_reason(&entry).await;
    assert_eq!(
        reason,
        "mcp(guarded): the server needs authorization: run `cordis mcp login guarded [FILE]`"
    );

    // The login is let in by `initialize` too, and finds the challenge of `tools/list`.
    let store = TokenStore::new(&dir);
    let outcome = log_in(&config, &store).await.unwrap();
    let LoginOutcome::Stored { scopes, .. } = outcome else {
        panic!("{outcome:?}: {:?}", fixture.log())
    };
    assert_eq!(
        scopes,
        ["mcp:read", "mcp:list"],
        "the tools/list challenge's scope"
    );
    let status = tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    assert_eq!(status, ScopeStatus::Active);
    let reg = root.get::<ToolRegistry>().unwrap();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(!result.is_error, "{result:?}");
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_secret_post_is_used_where_the_registration_says_so_for_codes_and_refreshes() {
    let fixture = OAuthFixture::start().await;
    fixture.knobs().secret_post = true;
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let store = TokenStore::new(&dir);
    log_in(&config, &store).await.unwrap();
    let grant = stored(&store, &fixture);
    assert_eq!(grant.token_auth.as_deref(), Some("client_secret_post"));
    assert!(grant.client_secret.is_some());
    assert_eq!(
        (
            fixture.count("token client_secret_post"),
            fixture.count("token code")
        ),
        (1, 1),
        "{:?}",
        fixture.log()
    );

    // A refresh authenticates the same way.
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());
    tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    fixture.knobs().expire_access();
    let reg = root.get::<ToolRegistry>().unwrap();
    let result = reg.execute(call("mcp__guarded__whoami"), None).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(fixture.count("token refresh"), 1, "{:?}", fixture.log());
    assert_eq!(fixture.count("token refused"), 0, "{:?}", fixture.log());
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_03_26_server_is_authorized_by_its_origin_metadata_else_the_default_endpoints() {
    // The origin's metadata, that metadata naming its issuer under a path (nobody named the
    // issuer: any on the origin is taken), no metadata.
    for (metadata, issuer_path) in [(true, false), (true, true), (false, false)] {
        let fixture = OAuthFixture::start().await;
        fixture.knobs().legacy = true;
        fixture.knobs().legacy_metadata = metadata;
        fixture.knobs().legacy_issuer_path = issuer_path;
        let base = if issuer_path {
            format!("{}/as", fixture.base)
        } else {
            fixture.base.clone()
        };
        let tokens = tempfile::tempdir().unwrap();
        let dir = tokens.path().join("mcp-auth");
        let config = config(&fixture, &dir);
        let store = TokenStore::new(&dir);
        let outcome = log_in(&config, &store).await;
        let Ok(LoginOutcome::Stored { issuer, scopes, .. }) = outcome else {
            panic!("metadata {metadata}: {outcome:?}: {:?}", fixture.log())
        };
        assert_eq!(issuer, base, "the origin's metadata names the issuer");
        assert_eq!(scopes, ["mcp:read"]);
        let grant = stored(&store, &fixture);
        assert_eq!(grant.token_endpoint, format!("{base}/token"));
        assert_eq!(grant.resource, fixture.mcp);
        // With metadata its revocation endpoint is known; the defaults have none.
        assert_eq!(grant.revocation_endpoint.is_some(), metadata);
        let root = root_with_tools();
        let entry = root.plugin(McpPlugin, config.clone());
        tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
            .await
            .unwrap();
        root.dispose();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_ups_stop_after_the_bound_with_a_clear_message() {
    // With the first login, at most three authorization requests (the conformance suite's
    // `auth/scope-retry-limit`).
    const { assert!(cordis_mcp::auth::MAX_STEP_UPS < 3) };
    // The authorization server never grants what the server asks for; or it does, and the
    // server refuses anyway (no new scope to ask for: a step-up all the same).
    step_ups_stop_after_the_bound(false).await;
    step_ups_stop_after_the_bound(true).await;
}

async fn step_ups_stop_after_the_bound(granted: bool) {
    use cordis_mcp::auth::MAX_STEP_UPS;
    let fixture = OAuthFixture::start().await;
    if granted {
        fixture.knobs().refuse_admin = true;
    } else {
        fixture.knobs().withhold = vec!["mcp:admin".into()];
    }
    let tokens = tempfile::tempdir().unwrap();
    let dir = tokens.path().join("mcp-auth");
    let config = config(&fixture, &dir);
    let store = TokenStore::new(&dir);
    log_in(&config, &store).await.unwrap();
    assert_eq!(stored(&store, &fixture).step_ups, 0);
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, config.clone());
    tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .unwrap();
    let reg = root.get::<ToolRegistry>().unwrap();
    let refused = |_: u32| {
        let reg = reg.clone();
        async move {
            let result = reg.execute(call("mcp__guarded__admin"), None).await;
            assert!(result.is_error, "{result:?}");
            result.content.as_str().unwrap_or_default().to_owned()
        }
    };
    for attempt in 1..=MAX_STEP_UPS {
        let message = refused(attempt).await;
        assert!(
            message.contains("run `cordis mcp login"),
            "{attempt}: {message}"
        );
        log_in(&config, &store).await.unwrap();
        assert_eq!(stored(&store, &fixture).step_ups, attempt);
    }
    let message = refused(0).await;
    assert!(
        message.contains(&format!(
            "still needs more scope (mcp:read mcp:admin) after {MAX_STEP_UPS} step-up logins"
        )) && !message.contains("run `cordis mcp login"),
        "{message}"
    );
    let e = log_in(&config, &store).await.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "refused after {MAX_STEP_UPS} step-up logins in a row"
        )),
        "{e}"
    );
    assert_eq!(
        fixture.count("authorize scope="),
        1 + MAX_STEP_UPS as usize,
        "{:?}",
        fixture.log()
    );
    root.dispose();
}
