//! `edit_file` and `write_file` worked out before approval: a pre-execute pass plans each call
//! (every check the call makes, nothing written), so an edit that cannot apply fails at once
//! with its reason instead of being put up for approval, and the approval shows the change
//! against the file as it is (an edit's whole-file diff with its real line numbers; a write over
//! an existing file as a diff against its current text, a new file as a new file). The call then
//! applies the plan it showed, and only if the file still holds what it held then: a change in
//! between (an edit, a file created or deleted) fails the call, naming it, and nothing is
//! written.

use std::sync::{Arc, Mutex};

use cordis_presenter::{Location, Presentation, ResultView, ToolPresenter};
use cordis_runtime::lock;
use cordis_tools::ScopeKey;
use cordis_workspace::{FileRoute, Workspace, WorkspaceError};
use serde_json::Value;

use crate::config::FsConfig;
use crate::ops::{Before, EditPlan, FsError, WritePlan};
use crate::{routed, shown};

/// Plans kept at once; a call's plan goes when it runs, ends or is denied (a call whose turn
/// was dropped mid-question leaves its plan until these bounds push it out).
const KEPT_PLANS: usize = 16;

/// The bytes the kept plans may hold (each holds its file twice, before and after).
const KEPT_PLAN_BYTES: usize = 64 * 1024 * 1024;

/// A planned call's plan.
#[derive(Debug)]
pub(crate) enum Plan {
    /// An `edit_file` call's.
    Edit(EditPlan),
    /// A `write_file` call's.
    Write(WritePlan),
}

impl Plan {
    /// The bytes it holds.
    fn bytes(&self) -> usize {
        match self {
            Plan::Edit(p) => p.before.len() + p.after.len(),
            Plan::Write(p) => p.before.len() + p.after.len(),
        }
    }
}

/// A planned call: its scope and call id, its tool and arguments, its plan.
type Planned = ((Option<ScopeKey>, String), (&'static str, Value), Arc<Plan>);

/// The plans of `edit_file` and `write_file` calls that have not run yet, oldest first.
#[derive(Clone, Default)]
pub(crate) struct Plans {
    inner: Arc<Mutex<Vec<Planned>>>,
}

impl Plans {
    fn insert(
        &self,
        scope: Option<ScopeKey>,
        call_id: &str,
        tool: &'static str,
        args: Value,
        plan: Plan,
    ) {
        let mut plans = lock(&self.inner);
        let key = (scope, call_id.to_owned());
        plans.retain(|(k, _, _)| k != &key);
        plans.push((key, (tool, args), Arc::new(plan)));
        let bytes = |plans: &[Planned]| -> usize { plans.iter().map(|(_, _, p)| p.bytes()).sum() };
        // The newest stays, whatever its size (its call is being asked about).
        while plans.len() > 1 && (plans.len() > KEPT_PLANS || bytes(&plans) > KEPT_PLAN_BYTES) {
            plans.remove(0);
        }
    }

    /// Removes and returns the plan of call `call_id` in `scope`, made for `tool` and `args`.
    pub(crate) fn take(
        &self,
        scope: Option<ScopeKey>,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Option<Arc<Plan>> {
        let mut plans = lock(&self.inner);
        let i = plans
            .iter()
            .position(|((s, c), _, _)| *s == scope && c == call_id)?;
        let (_, (planned_tool, planned_for), plan) = plans.remove(i);
        (planned_tool == tool && planned_for == *args).then_some(plan)
    }

    /// The newest plan made for `tool` and `args` (a presenter sees the arguments, not the call
    /// id).
    fn newest_for(&self, tool: &str, args: &Value) -> Option<Arc<Plan>> {
        lock(&self.inner)
            .iter()
            .rev()
            .find(|(_, (t, a), _)| *t == tool && a == args)
            .map(|(_, _, p)| p.clone())
    }
}

/// Plans call `call_id` of `tool` (`edit_file` or `write_file`) with `args` (off the async
/// threads). `Err` is the reason the call cannot apply, for a denial before anyone is asked.
///
/// Arguments that do not decode are not a reason: the registry's check against the schema,
/// next, refuses them as invalid arguments (a plan must not turn them into a denial). Nor is a
/// write's path that does not resolve: the call fails with it when it runs, as without a plan.
#[allow(
    clippy::too_many_arguments,
    reason = "the plan needs the call, its tool and every piece of the plugin's state it reads"
)]
pub(crate) async fn plan(
    plans: &Plans,
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    scope: Option<ScopeKey>,
    call_id: &str,
    tool: &'static str,
    args: &Value,
) -> Result<(), String> {
    let planned = if tool == crate::EDIT_FILE {
        routed::plan_edit(route, ws, config, args.clone())
            .await
            .map(Plan::Edit)
    } else {
        match routed::plan_write(route, ws, config, args.clone()).await {
            // Refused by the write itself, as without a plan.
            Err(FsError::Workspace(
                WorkspaceError::Outside { .. }
                | WorkspaceError::NotAFile { .. }
                | WorkspaceError::NotADirectory { .. },
            )) => return Ok(()),
            planned => planned.map(Plan::Write),
        }
    };
    match planned {
        Ok(plan) => {
            plans.insert(scope, call_id, tool, args.clone(), plan);
            Ok(())
        }
        Err(FsError::Args { .. }) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs an `edit_file` call: the plan it was shown with when there is one (refused when the file
/// changed since), else planned and applied now.
pub(crate) async fn run_edit(
    route: Option<Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    planned: Option<Arc<Plan>>,
    args: Value,
) -> Result<Value, FsError> {
    let plan = match planned.as_deref() {
        Some(Plan::Edit(plan)) => plan.clone(),
        _ => routed::plan_edit(route.as_ref(), ws, config, args).await?,
    };
    routed::apply_edit(route.as_ref(), ws, config, &plan).await
}

/// Runs a `write_file` call: the plan it was shown with when there is one (refused when the
/// file changed since, was created or was deleted), else written now if it creates a file, and
/// refused if it would replace one (what it replaces was never shown, or is no longer held).
pub(crate) async fn run_write(
    route: Option<Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    planned: Option<Arc<Plan>>,
    args: Value,
) -> Result<Value, FsError> {
    match planned.as_deref() {
        Some(Plan::Write(plan)) => routed::apply_write(route.as_ref(), ws, config, plan).await,
        _ => match routed::plan_write(route.as_ref(), ws, config, args.clone()).await {
            Ok(plan) if !matches!(plan.before, crate::ops::Before::Absent) => {
                Err(FsError::ShownGone {
                    path: args["path"].as_str().unwrap_or_default().to_owned(),
                })
            }
            _ => routed::write_file(route, ws.clone(), args).await,
        },
    }
}

/// How `edit_file` and `write_file` calls look: to an approval, with a plan, the change against
/// the file as it is (see [`crate::shown`] for the bounds); in a transcript, and without a plan,
/// the standard presentation of the arguments (a transcript is replayed, when no plan is left).
pub(crate) struct PlannedPresenter {
    pub(crate) tool: &'static str,
    pub(crate) plans: Plans,
    pub(crate) standard: Arc<dyn ToolPresenter>,
}

impl ToolPresenter for PlannedPresenter {
    fn present_call(&self, args: &Value) -> Result<Presentation, cordis_presenter::PresentError> {
        self.standard.present_call(args)
    }

    fn present_approval(
        &self,
        args: &Value,
    ) -> Result<Presentation, cordis_presenter::PresentError> {
        let standard = self.standard.present_call(args)?;
        let Some(plan) = self.plans.newest_for(self.tool, args) else {
            return Ok(standard);
        };
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        let (shown, line, replaced) = match plan.as_ref() {
            Plan::Edit(plan) => (
                shown::change(&path, Some(&plan.before), &plan.after),
                plan.lines.first().map(|&l| l as u64),
                None,
            ),
            Plan::Write(plan) => match &plan.before {
                Before::Absent => (shown::change(&path, None, &plan.after), None, None),
                Before::Text(before) => {
                    let shown = shown::change(&path, Some(before), &plan.after);
                    let line = Some(shown.first_changed);
                    (shown, line, None)
                }
                // Not text: nothing to diff against, but never a new file.
                Before::Bytes(bytes) => (
                    shown::change(&path, Some(""), &plan.after),
                    None,
                    Some(format!(
                        "replaces a binary file of {} bytes (not shown)",
                        bytes.len()
                    )),
                ),
            },
        };
        let text = [replaced, shown.note, standard.text.clone()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        Ok(Presentation {
            card: shown.card,
            text: (!text.is_empty()).then(|| text.join("\n")),
            locations: vec![Location { path, line }],
            ..standard
        })
    }

    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, cordis_presenter::PresentError> {
        self.standard.present_result(args, result)
    }
}
