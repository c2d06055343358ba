//! The file tools' reads and writes with the composition's [`FileRoute`], when a front end
//! provides one (an editor over ACP): every path is resolved and checked against the workspace
//! first, exactly as without a route; only then does the text come from, or go to, the route.
//! Without a route (or when the route cannot vouch for its copy of a file) it is the disk.

use std::sync::Arc;

use cordis_runtime::Context;
use cordis_workspace::{FileRoute, FileRouteService, Workspace, WorkspacePath};
use serde_json::{Value, json};

use crate::config::FsConfig;
use crate::ops::{self, FsError};

/// The route the composition of `ctx` provides now, if any.
pub(crate) fn route_of(ctx: Option<&Context>) -> Option<Arc<dyn FileRoute>> {
    ctx.and_then(|c| c.get::<FileRouteService>())
        .map(|s| s.0.clone())
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FsError> + Send + 'static,
) -> Result<T, FsError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(FsError::Task(e.to_string())))
}

/// The text of `path` (checked on disk first: a regular file beneath the root, within the size
/// limit), from the route when it has the file, else from the disk.
pub(crate) async fn read_text(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    path: &WorkspacePath,
    tool: &'static str,
) -> Result<String, FsError> {
    let (disk_ws, disk_config, disk_path) = (ws.clone(), config.clone(), path.clone());
    let disk = blocking(move || {
        let bytes = disk_ws.read_limited(&disk_path, disk_config.max_file_bytes)?;
        ops::text(tool, disk_path.given(), bytes)
    })
    .await?;
    let Some(route) = route else {
        return Ok(disk);
    };
    match route.read_text(ws.absolute(path)).await {
        Ok(Some(text)) if text.len() as u64 > config.max_file_bytes => {
            Err(FsError::RouteTooLarge {
                path: path.given().to_owned(),
                size: text.len(),
                limit: config.max_file_bytes,
            })
        }
        Ok(Some(text)) => Ok(text),
        Ok(None) => Ok(disk),
        Err(message) => Err(FsError::Route {
            action: "read",
            path: path.given().to_owned(),
            message,
        }),
    }
}

/// Writes `content` to `path` (through the route when there is one: its parent directories
/// are made and the target checked here first); returns the bytes written and whether the
/// file was created.
pub(crate) async fn write_text(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    path: &WorkspacePath,
    content: String,
) -> Result<(u64, bool), FsError> {
    let (ws, path) = (ws.clone(), path.clone());
    let Some(route) = route.filter(|r| r.writes()) else {
        return blocking(move || {
            let outcome = ws.write_atomic(&path, content.as_bytes())?;
            Ok((outcome.bytes, outcome.created))
        })
        .await;
    };
    let checked = path.clone();
    let (absolute, exists) = blocking(move || Ok(ws.prepare_write(&checked)?)).await?;
    let bytes = content.len() as u64;
    route
        .write_text(absolute, content)
        .await
        .map_err(|message| FsError::Route {
            action: "write",
            path: path.given().to_owned(),
            message,
        })?;
    Ok((bytes, !exists))
}

/// `read_file` through the route.
pub(crate) async fn read_file(
    route: Option<Arc<dyn FileRoute>>,
    ws: Workspace,
    config: Arc<FsConfig>,
    arguments: Value,
) -> Result<Value, FsError> {
    let request_ws = ws.clone();
    let (a, path) = blocking(move || ops::read_request(&request_ws, arguments)).await?;
    let content = read_text(route.as_ref(), &ws, &config, &path, crate::READ_FILE).await?;
    ops::read_file_of(&config, &a, &path, &content)
}

/// `write_file` through the route, unguarded (a call nobody planned: see [`apply_write`]).
pub(crate) async fn write_file(
    route: Option<Arc<dyn FileRoute>>,
    ws: Workspace,
    arguments: Value,
) -> Result<Value, FsError> {
    let request_ws = ws.clone();
    let (a, path) = blocking(move || ops::write_request(&request_ws, arguments)).await?;
    let (bytes, created) = write_text(route.as_ref(), &ws, &path, a.content).await?;
    Ok(json!({
        "path": path.to_string(),
        "bytes": bytes,
        "created": created,
    }))
}

/// What `path` holds now (see [`ops::read_before`]); a text file's text from the route when it
/// has the file (what a write through it replaces).
pub(crate) async fn read_before(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    path: &WorkspacePath,
) -> Result<ops::Before, FsError> {
    let (disk_ws, disk_config, disk_path) = (ws.clone(), config.clone(), path.clone());
    let disk = blocking(move || ops::read_before(&disk_ws, &disk_config, &disk_path)).await?;
    let (Some(route), ops::Before::Text(_)) = (route, &disk) else {
        return Ok(disk);
    };
    match route.read_text(ws.absolute(path)).await {
        Ok(Some(text)) if text.len() as u64 > config.max_file_bytes => {
            Err(FsError::ReplacesTooLarge {
                path: path.given().to_owned(),
                size: text.len() as u64,
                limit: config.max_file_bytes,
            })
        }
        Ok(Some(text)) => Ok(ops::Before::Text(text)),
        Ok(None) => Ok(disk),
        Err(message) => Err(FsError::Route {
            action: "read",
            path: path.given().to_owned(),
            message,
        }),
    }
}

/// Works out a `write_file` call: what the file holds now and what it would hold.
pub(crate) async fn plan_write(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    arguments: Value,
) -> Result<ops::WritePlan, FsError> {
    let request_ws = ws.clone();
    let (a, path) = blocking(move || ops::write_request(&request_ws, arguments)).await?;
    let before = read_before(route, ws, config, &path).await?;
    Ok(ops::WritePlan {
        path,
        before,
        after: a.content,
    })
}

/// Applies `plan` if the file still holds what it held when the write was worked out (and
/// shown); else fails naming the change, writing nothing.
pub(crate) async fn apply_write(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    plan: &ops::WritePlan,
) -> Result<Value, FsError> {
    let change = match read_before(route, ws, config, &plan.path).await {
        Ok(now) => plan.before.change_to(&now),
        // It was within the limit when planned: it grew since.
        Err(FsError::ReplacesTooLarge { .. }) => Some("changed"),
        Err(e) => return Err(e),
    };
    if let Some(change) = change {
        return Err(FsError::ChangedSinceShown {
            path: plan.path.to_string(),
            action: "write",
            change,
        });
    }
    let (bytes, created) = write_text(route, ws, &plan.path, plan.after.clone()).await?;
    Ok(json!({
        "path": plan.path.to_string(),
        "bytes": bytes,
        "created": created,
    }))
}

/// Works out an `edit_file` call, reading the file through the route.
pub(crate) async fn plan_edit(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    arguments: Value,
) -> Result<ops::EditPlan, FsError> {
    let request_ws = ws.clone();
    let (a, path) = blocking(move || ops::edit_request(&request_ws, arguments)).await?;
    let content = read_text(route, ws, config, &path, crate::EDIT_FILE).await?;
    ops::plan_edit_of(config, a, path, content)
}

/// Applies `plan` if the file is still as it was planned (read through the route), writing
/// through the route.
pub(crate) async fn apply_edit(
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    plan: &ops::EditPlan,
) -> Result<Value, FsError> {
    let now = read_text(route, ws, config, &plan.path, crate::EDIT_FILE).await?;
    if now != plan.before {
        return Err(FsError::ChangedSinceShown {
            path: plan.path.to_string(),
            action: "edit",
            change: "changed",
        });
    }
    let _ = write_text(route, ws, &plan.path, plan.after.clone()).await?;
    Ok(json!({
        "path": plan.path.to_string(),
        "replacements": plan.replacements,
        "lines": plan.lines,
    }))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use cordis_workspace::RouteFuture;

    use super::*;

    /// A route holding one buffer, recording every path it is asked about.
    #[derive(Default)]
    struct Buffers {
        text: Option<String>,
        asked: Mutex<Vec<(&'static str, PathBuf)>>,
    }

    impl FileRoute for Buffers {
        fn read_text(&self, path: PathBuf) -> RouteFuture<Option<String>> {
            self.asked.lock().unwrap().push(("read", path));
            let text = self.text.clone();
            Box::pin(async move { Ok(text) })
        }

        fn write_text(&self, path: PathBuf, content: String) -> RouteFuture<()> {
            self.asked.lock().unwrap().push(("write", path.clone()));
            Box::pin(async move { std::fs::write(path, content).map_err(|e| e.to_string()) })
        }
    }

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("root/a.txt"), "on disk\n").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), tmp.path().join("root/link"))
            .unwrap();
        let ws = Workspace::open(tmp.path().join("root")).unwrap();
        (tmp, ws)
    }

    #[tokio::test]
    async fn the_route_sees_only_checked_paths_and_its_answers_are_held_to_the_limits() {
        let (tmp, ws) = workspace();
        let buffers = Arc::new(Buffers {
            text: Some("in the buffer\n".into()),
            ..Default::default()
        });
        let route: Arc<dyn FileRoute> = buffers.clone();
        let config = Arc::new(FsConfig::default());
        let read = read_file(
            Some(route.clone()),
            ws.clone(),
            config.clone(),
            json!({"path": "a.txt"}),
        )
        .await
        .unwrap();
        assert_eq!(read["content"], "     1\tin the buffer\n");
        // Through a symlink that leaves the root: refused before the route hears of it.
        for args in [
            json!({"path": "link/secret.txt", "content": "x"}),
            json!({"path": "../outside/x.txt", "content": "x"}),
        ] {
            assert!(
                write_file(Some(route.clone()), ws.clone(), args)
                    .await
                    .is_err()
            );
        }
        assert!(
            read_file(
                Some(route.clone()),
                ws.clone(),
                config.clone(),
                json!({"path": "link/x"})
            )
            .await
            .is_err()
        );
        let written = write_file(
            Some(route.clone()),
            ws.clone(),
            json!({"path": "new/b.txt", "content": "b\n"}),
        )
        .await
        .unwrap();
        assert_eq!(written["created"], true);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("root/new/b.txt")).unwrap(),
            "b\n"
        );
        let asked: Vec<(&str, PathBuf)> = buffers.asked.lock().unwrap().clone();
        assert_eq!(
            asked,
            [
                ("read", ws.root().join("a.txt")),
                ("write", ws.root().join("new/b.txt")),
            ]
        );
        assert!(
            std::fs::read_dir(tmp.path().join("outside"))
                .unwrap()
                .next()
                .is_none()
        );
        // A buffer over the size limit is refused like a file over it.
        let small = Arc::new(FsConfig {
            max_file_bytes: 4,
            ..FsConfig::default()
        });
        let big: Arc<dyn FileRoute> = Arc::new(Buffers {
            text: Some("0123456789".into()),
            ..Default::default()
        });
        std::fs::write(tmp.path().join("root/tiny.txt"), "abc").unwrap();
        let refused = read_file(Some(big), ws.clone(), small, json!({"path": "tiny.txt"}))
            .await
            .unwrap_err();
        assert!(matches!(
            refused,
            FsError::RouteTooLarge {
                size: 10,
                limit: 4,
                ..
            }
        ));
        // A route without the file (`None`): the disk.
        let empty: Arc<dyn FileRoute> = Arc::new(Buffers::default());
        let read = read_file(Some(empty), ws.clone(), config, json!({"path": "a.txt"}))
            .await
            .unwrap();
        assert_eq!(read["content"], "     1\ton disk\n");
    }

    #[tokio::test]
    async fn a_write_without_the_plan_it_was_shown_with_creates_a_file_but_replaces_none() {
        let (tmp, ws) = workspace();
        let config = Arc::new(FsConfig::default());
        // The plan is gone (pushed out by newer questions, or its arguments rewritten): what
        // the write replaces cannot be known to have been shown.
        let refused = crate::preflight::run_write(
            None,
            &ws,
            &config,
            None,
            json!({"path": "a.txt", "content": "over"}),
        )
        .await
        .unwrap_err();
        assert!(matches!(refused, FsError::ShownGone { .. }), "{refused}");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("root/a.txt")).unwrap(),
            "on disk\n"
        );
        let _ = crate::preflight::run_write(
            None,
            &ws,
            &config,
            None,
            json!({"path": "new.txt", "content": "fresh"}),
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("root/new.txt")).unwrap(),
            "fresh"
        );
    }

    #[tokio::test]
    async fn a_write_over_a_file_too_large_to_show_is_refused_before_anyone_is_asked() {
        let (tmp, ws) = workspace();
        std::fs::write(tmp.path().join("root/big.txt"), "0123456789").unwrap();
        let small = Arc::new(FsConfig {
            max_file_bytes: 4,
            ..FsConfig::default()
        });
        let refused = plan_write(
            None,
            &ws,
            &small,
            json!({"path": "big.txt", "content": "x"}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "\"big.txt\" is 10 bytes, over the limit of 4 (`maxFileBytes`): write_file cannot show what it would replace; nothing was written"
        );
        // Through an editor whose buffer is over the limit: the same.
        let big: Arc<dyn FileRoute> = Arc::new(Buffers {
            text: Some("0123456789".into()),
            ..Default::default()
        });
        std::fs::write(tmp.path().join("root/tiny.txt"), "abc").unwrap();
        let refused = plan_write(
            Some(&big),
            &ws,
            &small,
            json!({"path": "tiny.txt", "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(matches!(
            refused,
            FsError::ReplacesTooLarge {
                size: 10,
                limit: 4,
                ..
            }
        ));
        // The editor's buffer is what a write through it replaces.
        let route: Arc<dyn FileRoute> = Arc::new(Buffers {
            text: Some("unsaved\n".into()),
            ..Default::default()
        });
        let plan = plan_write(
            Some(&route),
            &ws,
            &Arc::new(FsConfig::default()),
            json!({"path": "a.txt", "content": "x"}),
        )
        .await
        .unwrap();
        assert_eq!(plan.before, ops::Before::Text("unsaved\n".into()));
    }
}
