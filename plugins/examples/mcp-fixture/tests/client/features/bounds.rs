//! What a hostile or broken server cannot do to the client (issue 40): answer megabytes into
//! every later request (results are cut to `maxResultText`), hold a call for its whole timeout
//! with an answer over `maxMessageBytes` (the call fails at once naming the limit), die at
//! start without saying why (its stderr's last lines are in the reason), boot two ways by the
//! wall clock (a list that changes right after connecting is confirmed), or make one prompt
//! command of two servers' prompts (the command name is contested).

use cordis_mcp::{MAX_STDERR_TAIL_BYTES, McpPlugin, servers};
use cordis_runtime::prelude::*;
use serde_json::json;

use super::super::{call, cfg, names, root_with_tools, settle, text};

/// The 3 MB text a server answers, and the bound it reaches the model within.
const BIG: u64 = 3_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_megabyte_result_reaches_the_model_as_its_head_and_tail_within_the_bound() {
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "big"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let result = call(&root, "mcp__fx__big", json!({"bytes": BIG})).await;
    assert!(!result.is_error, "{result:?}");
    let got = text(&result);
    assert!(got.starts_with("BEGINxxx") && got.ends_with("xxxEND"));
    assert!(
        got.contains("bytes omitted; 3000000 bytes in all …]"),
        "{}",
        &got[..200]
    );
    let whole = serde_json::to_string(&result.content).unwrap();
    assert!(
        whole.len() <= cordis_tools::MAX_RESULT_TEXT + 256,
        "{} bytes reach the model",
        whole.len()
    );

    // A smaller bound of the entry's own (`maxResultText`).
    let mut small = cfg("sm", &["--tools", "big"]);
    small.max_result_text = 4_096;
    let entry = root.plugin(McpPlugin, small);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let result = call(&root, "mcp__sm__big", json!({"bytes": BIG})).await;
    let got = text(&result);
    assert!(got.len() <= 4_096 + 64, "{}", got.len());
    assert!(got.contains("bytes omitted; 3000000 bytes in all"));
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_max_message_bytes_fails_its_call_at_once_naming_the_limit() {
    let root = root_with_tools();
    let mut c = cfg("fx", &["--tools", "big,add"]);
    c.max_message_bytes = 1 << 20;
    // Long enough that a call waiting out its timeout fails this test by its message.
    c.call_timeout_ms = 20_000;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let result = call(&root, "mcp__fx__big", json!({"bytes": 2_000_000})).await;
    assert!(result.is_error, "{result:?}");
    assert_eq!(
        result.content,
        json!(
            "mcp(fx): the server's answer is over the maxMessageBytes limit of 1048576 bytes, so it was dropped; raise `maxMessageBytes` in the entry's config, or ask for less"
        )
    );
    // The connection is still good.
    assert_eq!(
        text(&call(&root, "mcp__fx__add", json!({"a": 1, "b": 2})).await),
        "3"
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_at_start_says_why_through_its_stderrs_last_lines() {
    let root = root_with_tools();
    let mut c = cfg(
        "fx",
        &[
            "--stderr",
            "error: cannot open database /srv/db: permission denied",
        ],
    );
    c.fail_on_startup_error = true;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Failed);
    let failure = entry.info().failure.unwrap().to_string();
    assert_eq!(
        failure,
        "mcp(fx): initial connection or tool synchronization failed: cannot connect: handshake failed: the server closed the connection; the server's stderr ended with: error: cannot open database /srv/db: permission denied"
    );

    // A server that writes a lot: only the last lines, within the bound.
    let mut c = cfg("many", &["--stderr", "first", "--stderr-lines", "5000"]);
    c.fail_on_startup_error = true;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Failed);
    let failure = entry.info().failure.unwrap().to_string();
    let said = failure
        .split_once("the server's stderr ended with: ")
        .unwrap()
        .1;
    assert!(said.len() <= MAX_STDERR_TAIL_BYTES + 3 * 20, "{said}");
    assert!(said.ends_with("stderr line 04999"), "{said}");
    assert!(!said.contains("first"), "{said}");
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_changes_right_after_connecting_is_the_one_the_entry_starts_with() {
    for _ in 0..5 {
        let root = root_with_tools();
        let entry = root.plugin(
            McpPlugin,
            cfg("fx", &["--tools", "add,greet", "--change-at-start"]),
        );
        assert_eq!(settle(&entry).await, ScopeStatus::Active);
        // Read as soon as the entry is active: nothing re-synced behind the boot's back.
        assert_eq!(
            names(&root),
            ["mcp__fx__add", "mcp__fx__greet", "mcp__fx__late"]
        );
        root.dispose();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_whose_prompts_make_one_command_name_both_report_it_and_neither_offers_it() {
    let root = root_with_tools();
    let a = root.plugin(
        McpPlugin,
        cfg(
            "a",
            &["--tools", "add", "--catalog", "--prompts", "b__c,mine"],
        ),
    );
    let ab = root.plugin(
        McpPlugin,
        cfg("a__b", &["--tools", "add", "--catalog", "--prompts", "c"]),
    );
    assert_eq!(settle(&a).await, ScopeStatus::Active);
    assert_eq!(settle(&ab).await, ScopeStatus::Active);
    let conflicts = a.info().conflicts;
    assert_eq!(conflicts, ab.info().conflicts, "reported alike on both");
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert!(
        conflicts[0].starts_with("prompt command \"mcp__a__b__c\" is claimed by entries"),
        "{conflicts:?}"
    );
    let offered: Vec<(String, Vec<String>)> = servers(&root)
        .iter()
        .map(|s| {
            (
                s.name().to_owned(),
                s.prompts().into_iter().map(|p| p.name).collect(),
            )
        })
        .collect();
    assert_eq!(
        offered,
        [
            ("a".to_owned(), vec!["mine".to_owned()]),
            ("a__b".to_owned(), vec![])
        ]
    );
    // Released to the survivor when the other leaves.
    ab.dispose();
    assert!(a.info().conflicts.is_empty());
    let left: Vec<String> = servers(&root)[0]
        .prompts()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(left, ["b__c", "mine"]);
    root.dispose();
}
