//! The plan of one `cordis_mount` call, made before anyone is asked to approve it: the file
//! confined to the workspace or a preset root (its includes too), read and resolved once, and
//! what its rows start. The approval shows the plan; the mount applies that very plan, so what
//! was approved is what loads.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordis_agent_presets::{AgentPresets, Composition};
use cordis_presenter::{Card, Location, Presentation, ResultView, ToolKind, ToolPresenter};
use cordis_runtime::{Context, lock};
use cordis_schema::ScopeKey;
use cordis_workspace::Workspace;
use serde_json::Value;

/// Plans kept at once; a call's plan goes when it runs or ends, so more means calls that
/// never ran (the oldest are dropped first).
const KEPT_PLANS: usize = 64;

/// One planned mount.
pub(crate) struct Plan {
    /// The path as the model gave it.
    pub(crate) given: String,
    /// The file it resolved to (symlinks followed), inside an allowed directory.
    pub(crate) file: PathBuf,
    /// The resolved composition, mounted as it is.
    pub(crate) composition: Arc<dyn Composition>,
    /// What the approval shows: the rows and what each starts.
    pub(crate) summary: String,
    /// True when a row starts a process, loads a library or connects somewhere.
    pub(crate) starts_anything: bool,
}

/// A call (its scope and call id) and its plan.
type Planned = ((Option<ScopeKey>, String), Arc<Plan>);

/// The plans of calls that have not run yet, oldest first.
#[derive(Clone, Default)]
pub(crate) struct Plans {
    inner: Arc<Mutex<Vec<Planned>>>,
}

impl Plans {
    pub(crate) fn insert(&self, scope: Option<ScopeKey>, call_id: &str, plan: Plan) {
        let mut plans = lock(&self.inner);
        let key = (scope, call_id.to_owned());
        plans.retain(|(k, _)| k != &key);
        plans.push((key, Arc::new(plan)));
        if plans.len() > KEPT_PLANS {
            plans.remove(0);
        }
    }

    /// Removes and returns the plan of call `call_id` in `scope`.
    pub(crate) fn take(&self, scope: Option<ScopeKey>, call_id: &str) -> Option<Arc<Plan>> {
        let mut plans = lock(&self.inner);
        let i = plans
            .iter()
            .position(|((s, c), _)| *s == scope && c == call_id)?;
        Some(plans.remove(i).1)
    }

    /// The newest plan of a call naming `given` (what an approval prompt shows: a presenter
    /// sees the arguments, not the call id; calls to one path read one file).
    fn newest_for(&self, given: &str) -> Option<Arc<Plan>> {
        lock(&self.inner)
            .iter()
            .rev()
            .find(|(_, p)| p.given == given)
            .map(|(_, p)| p.clone())
    }
}

/// Where mounts may come from: the workspace root and every preset root, canonical.
fn allowed_dirs(workspace: Option<&Workspace>, roster: &AgentPresets) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = workspace.map(|w| w.root().to_owned()).into_iter().collect();
    dirs.extend(
        roster
            .roots()
            .iter()
            .filter_map(|r| std::fs::canonicalize(&r.path).ok()),
    );
    dirs
}

fn shown_dirs(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "there is no workspace entry and no preset root".to_owned();
    }
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    format!("allowed: {}", list.join(", "))
}

/// `path` after symlinks, when it is inside one of `dirs`.
fn confined(path: &Path, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let canonical =
        std::fs::canonicalize(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if dirs.iter().any(|d| canonical.starts_with(d)) {
        Ok(canonical)
    } else {
        Err(format!(
            "{} is outside the workspace and the preset roots ({}); mount a file inside them",
            canonical.display(),
            shown_dirs(dirs)
        ))
    }
}

/// Plans the mount of `given`: confines it (relative to the workspace root, or the current
/// directory without a workspace), reads and resolves it, confines every file it includes, and
/// says what its rows start.
///
/// # Errors
/// Why the file may not or cannot be mounted, for the model and the person approving.
pub(crate) async fn plan(root: &Context, given: &str) -> Result<Plan, String> {
    let roster = root
        .get::<AgentPresets>()
        .ok_or("cordis_mount needs an agent-presets entry".to_owned())?;
    let workspace = root.get::<Workspace>();
    let base = workspace.as_ref().map(|w| w.root().to_owned());
    let dirs = {
        let (workspace, roster) = (workspace.clone(), roster.clone());
        tokio::task::spawn_blocking(move || allowed_dirs(workspace.as_deref(), &roster))
            .await
            .map_err(|_| "cordis_mount: the check was lost".to_owned())?
    };
    let joined = match &base {
        Some(base) => base.join(given),
        None => PathBuf::from(given),
    };
    let checked = dirs.clone();
    let file = tokio::task::spawn_blocking(move || confined(&joined, &checked))
        .await
        .map_err(|_| "cordis_mount: the check was lost".to_owned())?
        .map_err(|e| format!("cordis_mount: {given}: {e}"))?;
    let composition = roster
        .prepare_file(&file)
        .await
        .map_err(|e| e.to_string())?;
    let files = composition.files();
    let checked = dirs.clone();
    tokio::task::spawn_blocking(move || {
        files
            .iter()
            .skip(1)
            .try_for_each(|f| confined(f, &checked).map(drop))
    })
    .await
    .map_err(|_| "cordis_mount: the check was lost".to_owned())?
    .map_err(|e| format!("cordis_mount: {given} includes a file it may not: {e}"))?;
    let (summary, starts_anything) = summarize(&*composition);
    Ok(Plan {
        given: given.to_owned(),
        file,
        composition,
        summary,
        starts_anything,
    })
}

/// The rows of `composition` and what each starts, for the approval.
fn summarize(composition: &dyn Composition) -> (String, bool) {
    let rows = composition.rows();
    let mut text = if rows.is_empty() {
        "rows: none".to_owned()
    } else {
        let list: Vec<String> = rows
            .iter()
            .map(|r| format!("{} ({})", r.id, r.name))
            .collect();
        format!("rows: {}", list.join(", "))
    };
    let starts: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.starts
                .iter()
                .map(move |s| format!("  {} ({}): {s}", r.id, r.name))
        })
        .collect();
    if starts.is_empty() {
        text.push_str("\nstarts nothing: its rows only register tools, sections and settings");
    } else {
        text.push_str("\nwhen mounted, it starts:\n");
        text.push_str(&starts.join("\n"));
    }
    (text, !starts.is_empty())
}

/// How `cordis_mount` calls look to people: the rows and what they start, in the approval.
pub(crate) struct MountPresenter {
    pub(crate) plans: Plans,
}

impl MountPresenter {
    /// The presentation; with `planned`, the plan's rows and what they start (approvals only:
    /// a transcript is replayed when no plan is left).
    fn base(&self, args: &Value, planned: bool) -> Presentation {
        let given = args.get("path").and_then(Value::as_str).unwrap_or_default();
        let plan = planned.then(|| self.plans.newest_for(given)).flatten();
        Presentation {
            title: format!("Mount {given}"),
            kind: if plan.as_ref().is_some_and(|p| p.starts_anything) {
                ToolKind::Execute
            } else {
                ToolKind::Other
            },
            input: args.clone(),
            card: Card::Generic,
            text: plan.map(|p| p.summary.clone()),
            locations: vec![Location {
                path: given.to_owned(),
                line: None,
            }],
        }
    }
}

impl ToolPresenter for MountPresenter {
    fn present_call(&self, args: &Value) -> Result<Presentation, cordis_presenter::PresentError> {
        Ok(self.base(args, false))
    }

    fn present_approval(
        &self,
        args: &Value,
    ) -> Result<Presentation, cordis_presenter::PresentError> {
        Ok(self.base(args, true))
    }

    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, cordis_presenter::PresentError> {
        let text = match result.content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Ok(Presentation {
            text: Some(text),
            ..self.base(args, false)
        })
    }
}
