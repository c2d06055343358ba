//! Guards a build-wide assumption: `serde_json::Map` keeps keys sorted.
//!
//! Several model-visible texts (the Code Mode SDK, session logs, transcripts) are written from
//! `serde_json` values built in code, and rely on its default map (a `BTreeMap`). Cargo unifies
//! features across the whole build, so one dependency that turns on `serde_json/preserve_order`
//! (the `agent-client-protocol` crates do, which is why `cordis acp` has its own wire types)
//! silently switches every map to insertion order and changes those bytes. This test makes
//! that a loud failure with the reason, instead of a snapshot diff far away.

#[test]
fn serde_json_maps_keep_keys_sorted_in_this_build() {
    let mut map = serde_json::Map::new();
    map.insert("zeta".into(), 1.into());
    map.insert("alpha".into(), 2.into());
    let text = serde_json::to_string(&map).unwrap();
    assert_eq!(
        text, r#"{"alpha":2,"zeta":1}"#,
        "serde_json's `preserve_order` feature is on in this build: some dependency enables it \
         (find it with `cargo tree -e features -i serde_json`). Model-visible JSON would follow \
         insertion order; remove that dependency or canonicalize every such text first."
    );
}
