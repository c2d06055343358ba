//! Discovery: roots in precedence order, ids, metadata, broken presets, listing order, and the
//! not-found text.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use cordis_agent_presets::{
    AgentPresets, Composer, Composition, PresetError, Root, RowInfo, RowReport, Trust, discover,
};
use cordis_runtime::Context;
use cordis_tools::ToolRegistry;

/// A composer that refuses any composition containing `BROKEN: reason`.
struct Fake;

struct Empty(PathBuf);

impl Composition for Empty {
    fn rows(&self) -> Vec<RowInfo> {
        Vec::new()
    }
    fn files(&self) -> Vec<PathBuf> {
        vec![self.0.clone()]
    }
    fn mount<'a>(
        &'a self,
        _under: &'a Context,
    ) -> Pin<Box<dyn Future<Output = Vec<RowReport>> + Send + 'a>> {
        Box::pin(async { Vec::new() })
    }
}

impl Composer for Fake {
    fn prepare(&self, file: &Path) -> Result<Arc<dyn Composition>, String> {
        let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
        match text.split_once("BROKEN: ") {
            Some((_, why)) => Err(why.trim().to_owned()),
            None => Ok(Arc::new(Empty(file.to_owned()))),
        }
    }
}

fn write(dir: &Path, id: &str, composition: Option<&str>, meta: Option<&str>) {
    let p = dir.join(id);
    std::fs::create_dir_all(&p).unwrap();
    if let Some(c) = composition {
        std::fs::write(p.join("agent.cordis.yml"), c).unwrap();
    }
    if let Some(m) = meta {
        std::fs::write(p.join("preset.yml"), m).unwrap();
    }
}

fn root(path: &Path, trust: Trust) -> Root {
    Root {
        path: path.to_owned(),
        trust,
    }
}

#[test]
fn lists_by_order_then_id_with_broken_presets_and_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "zeta", Some("[]"), Some("name: Zeta\norder: 1\n"));
    write(
        d,
        "alpha",
        Some("[]"),
        Some("name: Alpha\ndescription: first by id\n"),
    );
    write(d, "beta", Some("[]"), Some("order: 1\n"));
    write(
        d,
        "gamma",
        Some("BROKEN: row 1 is not a mapping"),
        Some("order: 0\n"),
    );
    write(d, "empty", None, None);
    write(d, "weird-meta", Some("[]"), Some(": : not yaml ["));
    // Not preset ids: skipped.
    write(d, "Upper", Some("[]"), None);
    write(d, "under_score", Some("[]"), None);
    write(d, ".hidden", Some("[]"), None);
    std::fs::write(d.join("file-not-dir"), "x").unwrap();
    let found = discover(&[root(d, Trust::System)], &Fake);
    let ids: Vec<&str> = found.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        ["gamma", "beta", "zeta", "alpha", "empty", "weird-meta"]
    );
    let get = |id: &str| found.iter().find(|p| p.id == id).unwrap();
    assert_eq!(
        get("gamma").broken.as_deref(),
        Some("row 1 is not a mapping")
    );
    assert_eq!(
        get("empty").broken.as_deref(),
        Some(format!("no agent.cordis.yml in {}", d.join("empty").display()).as_str())
    );
    assert_eq!(get("alpha").broken, None);
    assert_eq!(get("alpha").name.as_deref(), Some("Alpha"));
    assert_eq!(get("alpha").description.as_deref(), Some("first by id"));
    // Unreadable display metadata is no metadata, never a broken preset.
    assert_eq!(get("weird-meta").name, None);
    assert_eq!(get("weird-meta").broken, None);
}

#[test]
fn an_earlier_root_wins_an_id_and_an_absent_root_has_none() {
    let project = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    write(
        project.path(),
        "standard",
        Some("[]"),
        Some("name: Project\n"),
    );
    write(user.path(), "standard", Some("[]"), Some("name: User\n"));
    write(user.path(), "mine", Some("[]"), None);
    let roots = [
        root(&project.path().join("absent"), Trust::System),
        root(project.path(), Trust::System),
        root(user.path(), Trust::User),
    ];
    let found = discover(&roots, &Fake);
    let shown: Vec<(&str, Option<&str>, Trust)> = found
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_deref(), p.trust))
        .collect();
    assert_eq!(
        shown,
        [
            ("mine", None, Trust::User),
            ("standard", Some("Project"), Trust::System)
        ]
    );
}

#[tokio::test]
async fn an_unknown_preset_is_named_with_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "b", Some("[]"), None);
    write(dir.path(), "a", Some("[]"), None);
    let ctx = Context::root();
    let tools = Arc::new(ToolRegistry::new(ctx.clone()));
    let roster = AgentPresets::new(
        ctx.clone(),
        Arc::new(Fake),
        vec![root(dir.path(), Trust::System)],
        "a".into(),
        tools.clone(),
    );
    let err = roster.standing_key_for(Some("nope")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent-presets: preset \"nope\" not found (available: a, b)"
    );
    // An id that could leave the root is simply not found.
    let err = roster.standing_key_for(Some("../a")).await.unwrap_err();
    assert!(matches!(err, PresetError::NotFound { .. }), "{err}");
    let empty = AgentPresets::new(ctx.clone(), Arc::new(Fake), vec![], "a".into(), tools);
    assert_eq!(
        empty.resolve(None).unwrap_err().to_string(),
        "agent-presets: preset \"a\" not found (available: none)"
    );
    // A broken preset is refused with its reason.
    write(dir.path(), "c", Some("BROKEN: rows must be a list"), None);
    let err = roster.standing_key_for(Some("c")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "agent-presets: preset \"c\" failed to mount: rows must be a list ({})",
            dir.path().join("c/agent.cordis.yml").display()
        )
    );
    // The default mounts (no rows here) and is keyed by its standing scope.
    let standing = roster.standing_key_for(None).await.unwrap();
    assert_eq!((standing.preset.as_str(), standing.generation), ("a", 1));
    ctx.dispose();
}
