//! The mediated network: a WAT guest calling `cordis:plugin/http`'s `fetch` against loopback
//! servers made here — allowed hosts answered, others refused naming the host (and nothing
//! reaches them), redirects re-checked, the response bound, the grant checked at load, and
//! each request recorded with the call.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cordis_wasm::{CallError, Capabilities, Limits, LoadError, Network, Runner};
use sha2::{Digest, Sha256};

use crate::guests;
use crate::{block_on, load, runner};

/// A loopback HTTP/1.1 server on its own threads, answering by path (one request per
/// connection); counts the requests it got.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    /// Serves; `other` is the port `/away` redirects to.
    fn start(other: Option<u16>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || answer(stream, other));
            }
        });
        Server { port, hits }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Reads one request and answers it.
fn answer(stream: TcpStream, other: Option<u16>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let (mut length, mut guest) = (0usize, String::new());
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "x-guest" => guest = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    let mut out = stream;
    let reply = |out: &mut TcpStream, status: &str, extra: &str, body: &str, sized: bool| {
        let length = if sized {
            format!("content-length: {}\r\n", body.len())
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "HTTP/1.1 {status}\r\nconnection: close\r\n{length}{extra}\r\n{body}"
        );
    };
    match path.as_str() {
        "/echo" => {
            let text = format!("{method} {path} x-guest={guest} body={body}");
            reply(&mut out, "200 OK", "x-server: test\r\n", &text, true);
        }
        "/big" => reply(&mut out, "200 OK", "", &"x".repeat(5000), true),
        // No content-length: the bound must hold while reading.
        "/unsized" => reply(&mut out, "200 OK", "", &"x".repeat(5000), false),
        "/here" => reply(&mut out, "302 Found", "location: /echo\r\n", "", true),
        "/away" => {
            let to = format!("location: http://127.0.0.1:{}/echo\r\n", other.unwrap_or(1));
            reply(&mut out, "302 Found", &to, "", true);
        }
        // Never answers: holds the connection until the client goes.
        "/stall" => {
            let _ = reader.read(&mut [0; 1]);
        }
        _ => reply(&mut out, "404 Not Found", "", "no such path", true),
    }
}

fn network(allow: &[String], extra: serde_json::Value) -> Capabilities {
    let mut grant = serde_json::json!({ "allow": allow });
    if let (Some(g), Some(e)) = (grant.as_object_mut(), extra.as_object()) {
        g.extend(e.clone());
    }
    Capabilities {
        network: Some(serde_json::from_value::<Network>(grant).unwrap()),
        ..Capabilities::default()
    }
}

fn http_runner(grants: Capabilities) -> Runner {
    runner(&guests::http(), Limits::default(), grants, None)
}

fn args(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

fn failed(e: Result<String, CallError>) -> String {
    match e {
        Err(CallError::Failed(m)) => m,
        other => panic!("expected a failed call, got {other:?}"),
    }
}

#[test]
fn a_guest_reaches_an_allowed_loopback_host_and_is_refused_another() {
    let allowed = Server::start(None);
    let other = Server::start(None);
    let r = http_runner(network(
        &[format!("127.0.0.1:{}", allowed.port)],
        serde_json::json!({}),
    ));
    block_on(async {
        let got = r.call("get", &args(&allowed.url("/echo"))).await.unwrap();
        assert_eq!(
            got,
            r#"{"status":200,"headers":3,"body":"GET /echo x-guest= body="}"#
        );
        let posted = r.call("post", &args(&allowed.url("/echo"))).await.unwrap();
        assert_eq!(
            posted,
            r#"{"status":200,"headers":3,"body":"POST /echo x-guest=wat body=ping from the guest"}"#
        );
        let refused = failed(r.call("get", &args(&other.url("/echo"))).await);
        assert_eq!(
            refused,
            format!(
                "127.0.0.1:{} is not on this entry's network.allow (127.0.0.1:{}); add it to `capabilities.network.allow` to reach it",
                other.port, allowed.port
            )
        );
        // Another name for the same address is another host.
        let by_name = failed(
            r.call(
                "get",
                &args(&format!("http://localhost:{}/echo", allowed.port)),
            )
            .await,
        );
        assert!(
            by_name.starts_with(&format!("localhost:{} is not on", allowed.port)),
            "{by_name}"
        );
        // A failed call keeps the instance; the guest goes on.
        assert!(r.call("get", &args(&allowed.url("/echo"))).await.is_ok());
    });
    assert_eq!(other.hits(), 0, "nothing reached the host not allowed");
    assert_eq!(allowed.hits(), 3);
}

#[test]
fn each_request_is_recorded_with_its_call() {
    let server = Server::start(None);
    let r = http_runner(network(
        &[format!("127.0.0.1:{}", server.port)],
        serde_json::json!({}),
    ));
    let sha = |s: &str| -> String {
        Sha256::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    block_on(async {
        let recorded = r
            .call_recorded("post", &args(&server.url("/echo")), false)
            .await;
        assert!(recorded.answer.is_ok(), "{:?}", recorded.answer);
        let body = "POST /echo x-guest=wat body=ping from the guest";
        assert_eq!(
            serde_json::to_value(&recorded.http).unwrap(),
            serde_json::json!([{
                "method": "POST",
                "url": server.url("/echo"),
                "requestBytes": 19,
                "requestSha256": sha("ping from the guest"),
                "status": 200,
                "bytes": body.len(),
                "sha256": sha(body),
            }])
        );
        // Refused requests are recorded too, and each call starts a new record.
        let refused = r
            .call_recorded("get", &args("http://127.0.0.1:9/x"), false)
            .await;
        assert!(refused.answer.is_err());
        assert_eq!(refused.http.len(), 1);
        assert_eq!(refused.http[0].url, "http://127.0.0.1:9/x");
        assert!(
            refused.http[0]
                .error
                .as_deref()
                .unwrap()
                .contains("127.0.0.1:9 is not on")
        );
        assert_eq!(refused.http[0].status, None);
    });
}

#[test]
fn the_response_body_is_bounded_by_max_response_bytes() {
    let server = Server::start(None);
    let allow = [format!("127.0.0.1:{}", server.port)];
    let r = http_runner(network(
        &allow,
        serde_json::json!({"max_response_bytes": 1000}),
    ));
    block_on(async {
        let sized = failed(r.call("get", &args(&server.url("/big"))).await);
        assert!(
            sized.ends_with(
                "the response body of 5000 bytes is over network.max_response_bytes (1000 bytes)"
            ),
            "{sized}"
        );
        let streamed = failed(r.call("get", &args(&server.url("/unsized"))).await);
        assert!(
            streamed.ends_with("the response body is over network.max_response_bytes (1000 bytes)"),
            "{streamed}"
        );
    });
    let r = http_runner(network(
        &allow,
        serde_json::json!({"max_response_bytes": 5000}),
    ));
    block_on(async {
        let recorded = r
            .call_recorded("get", &args(&server.url("/unsized")), false)
            .await;
        let answer = recorded.answer.unwrap();
        assert_eq!(
            answer.len(),
            r#"{"status":200,"headers":1,"body":""}"#.len() + 5000
        );
        assert_eq!(recorded.http[0].bytes, Some(5000));
    });
}

#[test]
fn a_redirect_is_followed_only_to_an_allowed_host_and_each_hop_counts() {
    let other = Server::start(None);
    let server = Server::start(Some(other.port));
    let allow = [format!("127.0.0.1:{}", server.port)];
    let r = http_runner(network(&allow, serde_json::json!({})));
    block_on(async {
        let recorded = r
            .call_recorded("get", &args(&server.url("/here")), false)
            .await;
        assert_eq!(
            recorded.answer.unwrap(),
            r#"{"status":200,"headers":3,"body":"GET /echo x-guest= body="}"#
        );
        let hops: Vec<_> = recorded
            .http
            .iter()
            .map(|h| (h.url.clone(), h.status))
            .collect();
        assert_eq!(
            hops,
            vec![
                (server.url("/here"), Some(302)),
                (server.url("/echo"), Some(200))
            ]
        );
        let away = failed(r.call("get", &args(&server.url("/away"))).await);
        assert_eq!(
            away,
            format!(
                "127.0.0.1:{} (a redirect's target) is not on this entry's network.allow (127.0.0.1:{}); add it to `capabilities.network.allow` to reach it",
                other.port, server.port
            )
        );
    });
    assert_eq!(other.hits(), 0, "the redirect was not followed");
    let one = http_runner(network(&allow, serde_json::json!({"max_requests": 1})));
    block_on(async {
        let e = failed(one.call("get", &args(&server.url("/here"))).await);
        assert_eq!(e, "the call has made its 1 requests (network.max_requests)");
        // The count is per call.
        assert!(one.call("get", &args(&server.url("/echo"))).await.is_ok());
    });
}

#[test]
fn a_request_without_an_answer_fails_at_its_timeout() {
    let server = Server::start(None);
    let allow = [format!("127.0.0.1:{}", server.port)];
    let r = http_runner(network(&allow, serde_json::json!({"timeout_ms": 200})));
    block_on(async {
        let e = failed(r.call("get", &args(&server.url("/stall"))).await);
        assert_eq!(
            e,
            format!("GET {}: no answer within 200 ms", server.url("/stall"))
        );
    });
}

#[test]
fn a_guest_importing_http_is_refused_at_load_unless_its_entry_grants_network() {
    let e = load(&guests::http(), &Capabilities::default()).unwrap_err();
    let LoadError::Import { import, why } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(import, "cordis:plugin/http@0.1.1");
    assert_eq!(
        e.to_string(),
        "the component imports cordis:plugin/http@0.1.1, which its entry does not grant (grant it with `capabilities: {network: {allow: [HOST:PORT]}}` in the entry's config)"
    );
    assert!(why.contains("network"));
    assert!(load(&guests::http(), &network(&[], serde_json::json!({}))).is_ok());
    // An empty allowlist grants the import and refuses every request.
    let r = http_runner(network(&[], serde_json::json!({})));
    let e = failed(block_on(r.call("get", &args("http://127.0.0.1:9/"))));
    assert!(e.contains("network.allow (nothing)"), "{e}");
}

#[test]
fn guests_built_against_the_0_1_0_world_keep_loading() {
    // The committed example was built against world.wit 0.1.0, before `http`.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/wasm/wasm_hello.wasm");
    let bytes = std::fs::read(&path).unwrap();
    let engine = cordis_wasm::WasmEngine::shared().unwrap();
    let none = Capabilities::default();
    let guest =
        cordis_wasm::Guest::new(&engine, &bytes, Sha256::digest(&bytes).into(), &none, None)
            .unwrap();
    assert_eq!(guest.version(), "0.1.0");
    let r = Runner::new(
        Arc::new(guest),
        cordis_wasm::RunnerOptions {
            entry: Arc::from("old"),
            limits: Limits::default(),
            grants: none,
            workspace: None,
            config: "{}".to_owned(),
            seed: None,
            deadline: std::time::Duration::from_secs(30),
        },
    );
    assert_eq!(
        block_on(r.call("wasm_hello", r#"{"name":"Ada"}"#)).unwrap(),
        r#"{"greeting":"Hello, Ada!"}"#
    );
}

#[test]
fn the_network_is_closed_in_init_so_every_request_belongs_to_a_call() {
    let server = Server::start(None);
    let url = server.url("/echo");
    let mut spec = guests::http();
    spec.strings
        .extend([("init_url", url.clone()), ("init_get", "GET".to_owned())]);
    let spec = guests::Spec {
        strings: spec.strings,
        init: Some(
            r#"(call $fetch {init_get} {init_url} (i32.const 0) (i32.const 0) (i32.const 0)
      (i32.const 0) (i32.const 512))
    (if (i32.load8_u (i32.const 512))
      (then (return (call $err (i32.load (i32.const 516)) (i32.load (i32.const 520))))))
    (call $unit)"#
                .to_owned(),
        ),
        ..spec
    };
    let grants = network(
        &[format!("127.0.0.1:{}", server.port)],
        serde_json::json!({}),
    );
    let r = runner(&spec, Limits::default(), grants, None);
    let e = block_on(r.call("get", &args(&url))).unwrap_err();
    assert_eq!(
        e,
        CallError::Instance(
            "init failed: the network is available only during `call` (not in `init` or `describe`)"
                .to_owned()
        )
    );
    assert_eq!(server.hits(), 0);
}
