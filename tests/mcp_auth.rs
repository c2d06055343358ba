//! `cordis mcp login|logout` against the OAuth fixture (`plugins/mcp/tests/support/oauth.rs`),
//! run as people run it: `cordis check` shows the entry pending with the command to run; the
//! login prints the address, a headless "browser" approves, the grant lands in the user's data
//! directory (0700/0600) and never in the workspace; `cordis call` then works with the token;
//! logout revokes the tokens and forgets the grant; a wrong server name or a stdio server are refused naming the fix;
//! a server that refuses only `tools/list` fails a strict check and is logged in to from that challenge.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::cordis_command;
use crate::oauth_fixture::{OAuthFixture, approve};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-mcp-auth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cordis ARGS` in `dir` with the user's data directory in `dir/.data`; (code, stdout, stderr).
fn cordis(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = cordis_command(dir, args)
        .env("XDG_DATA_HOME", dir.join(".data"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `login` (a `cordis mcp login … --no-browser`), approving in a headless "browser" at
/// the address it prints; what it said on stderr up to the address, and its output.
pub(crate) fn login_headless(
    rt: &tokio::runtime::Runtime,
    mut login: std::process::Command,
) -> (String, std::process::Output) {
    let mut child = login.stdin(std::process::Stdio::null()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.lines().any(|l| l.starts_with("http")) {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "{said}");
        said.push_str(&line);
    }
    let page = rt.block_on(approve(&said));
    assert!(page.contains("cordis is authorized"), "{page}");
    (said, child.wait_with_output().unwrap())
}

#[test]
fn login_stores_a_private_grant_that_check_and_call_use_and_logout_forgets() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fixture = rt.block_on(OAuthFixture::start());
    let dir = scratch("login");
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: guarded\n  name: mcp\n  config:\n    transport: http\n    server: guarded\n    url: {}\n\
             - id: local\n  name: mcp\n  config:\n    transport: stdio\n    server: local\n    command: /nonexistent/server\n",
            fixture.mcp
        ),
    )
    .unwrap();

    // Before a login: pending, naming the command.
    let (code, out, err) = cordis(&dir, &["check"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let row = out.lines().find(|l| l.starts_with("guarded ")).unwrap();
    assert!(
        row.contains(" pending ")
            && row.contains(
                "mcp(guarded): the server needs authorization: run `cordis mcp login guarded [FILE]`"
            ),
        "{row}"
    );

    // The login, with a headless browser.
    let mut login = cordis_command(&dir, &["mcp", "login", "guarded", "--no-browser"]);
    login.env("XDG_DATA_HOME", dir.join(".data"));
    let (said, out) = login_headless(&rt, login);
    assert!(
        said.starts_with("To authorize cordis for MCP server \"guarded\""),
        "{said}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "Authorized cordis for MCP server \"guarded\" (issuer {}/as, scopes mcp:read); the grant is in {}",
            fixture.base,
            dir.join(".data/cordis/mcp-auth").display()
        )),
        "{stdout}"
    );
    let store = dir.join(".data/cordis/mcp-auth");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&store), 0o700);
    let grants: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(mode(&grants[0]), 0o600);
    let token = fixture.knobs().access.keys().next().unwrap().clone();

    // Check and call use it.
    let (code, out, err) = cordis(&dir, &["check"]);
    assert!(
        out.lines()
            .find(|l| l.starts_with("guarded "))
            .is_some_and(|r| r.contains(" active")),
        "{out}\n{err}"
    );
    assert!(out.contains("mcp__guarded__whoami"), "{out}");
    let _ = code;
    let (code, out, err) = cordis(&dir, &["call", "cordis.yml", "mcp__guarded__whoami", "{}"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("token {token}")), "{out}");
    // The token is nowhere in the workspace or the state directory (session logs).
    for file in walk(&dir) {
        if file.starts_with(&store) {
            continue;
        }
        let text = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(&token),
            "{} holds the token",
            file.display()
        );
    }

    // Logout revokes the tokens at the authorization server (RFC 7009) and forgets the grant:
    // the entry is pending again.
    let (code, out, _) = cordis(&dir, &["mcp", "logout", "guarded"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Forgot the grant for MCP server \"guarded\"")
            && out.contains("; the authorization server revoked its tokens."),
        "{out}"
    );
    assert!(std::fs::read_dir(&store).unwrap().next().is_none());
    let knobs = fixture.knobs();
    assert!(
        !knobs.access.contains_key(&token) && knobs.refresh.is_empty(),
        "the server still honours the tokens"
    );
    assert_eq!(
        (
            knobs.count("revoke refresh_token known"),
            knobs.count("revoke access_token known")
        ),
        (1, 1)
    );
    drop(knobs);
    let (_, out, _) = cordis(&dir, &["mcp", "logout", "guarded"]);
    assert!(out.starts_with("No grant was stored"), "{out}");
    let (_, out, _) = cordis(&dir, &["check"]);
    let row = out.lines().find(|l| l.starts_with("guarded ")).unwrap();
    assert!(row.contains(" pending "), "{row}");

    // Wrong names and stdio servers are refused with what to do.
    let (code, _, err) = cordis(&dir, &["mcp", "login", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cordis.yml has no enabled `mcp` entry with server \"nope\"; its servers: guarded, local"),
        "{err}"
    );
    let (code, _, err) = cordis(&dir, &["mcp", "login", "local"]);
    assert_eq!(code, 2);
    assert!(err.contains("server \"local\" runs over stdio"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_login_nobody_completes_times_out_and_stores_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fixture = rt.block_on(OAuthFixture::start());
    let dir = scratch("timeout");
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- id: guarded\n  name: mcp\n  config:\n    transport: http\n    server: guarded\n    url: {}\n",
            fixture.mcp
        ),
    )
    .unwrap();
    let (code, _, err) = cordis(
        &dir,
        &[
            "mcp",
            "login",
            "guarded",
            "--no-browser",
            "--timeout-secs",
            "1",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot authorize MCP server \"guarded\": no authorization within 1 s"),
        "{err}"
    );
    assert!(!dir.join(".data/cordis/mcp-auth").exists() || walk(&dir.join(".data")).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_refusing_only_tools_list_fails_a_strict_check_until_the_login_it_asks_for() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fixture = rt.block_on(OAuthFixture::start());
    fixture.knobs().list_only = true;
    let dir = scratch("list-only");
    let yml = |strict: bool| {
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: guarded\n  name: mcp\n  config:\n    transport: http\n    server: guarded\n    url: {}\n    failOnStartupError: {strict}\n",
            fixture.mcp
        )
    };
    // Waiting for a login: exit 0 by default, 1 with `failOnStartupError: true`.
    std::fs::write(dir.join("cordis.yml"), yml(false)).unwrap();
    let (code, out, err) = cordis(&dir, &["check"]);
    assert_eq!(code, 0, "{out}\n{err}");
    std::fs::write(dir.join("cordis.yml"), yml(true)).unwrap();
    let (code, out, err) = cordis(&dir, &["check"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(
            "cordis: entry \"guarded\" sets `failOnStartupError: true` and is not active: mcp(guarded): the server needs authorization: run `cordis mcp login guarded [FILE]`"
        ),
        "{err}"
    );

    // The login finds the challenge `tools/list` received (it used to say "nothing to do").
    let mut login = cordis_command(&dir, &["mcp", "login", "guarded", "--no-browser"]);
    login.env("XDG_DATA_HOME", dir.join(".data"));
    let (_, out) = login_headless(&rt, login);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("scopes mcp:read mcp:list"), "{stdout}");
    let (code, out, err) = cordis(&dir, &["check"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("mcp__guarded__whoami"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
