//! `edit_file` worked out before approval: a pre-execute pass plans each call (every check the
//! edit makes, nothing written), so an edit that cannot apply fails at once with its reason
//! instead of being put up for approval, and the approval shows the whole-file diff with its
//! real line numbers. The call then applies the plan it showed, if the file is still as it was.

use std::sync::{Arc, Mutex};

use cordis_presenter::{Card, Location, Presentation, ResultView, ToolPresenter};
use cordis_runtime::lock;
use cordis_tools::ScopeKey;
use cordis_workspace::Workspace;
use serde_json::Value;

use crate::config::FsConfig;
use crate::ops::{EditPlan, FsError};
use crate::routed;
use cordis_workspace::FileRoute;

/// Plans kept at once; a call's plan goes when it runs, ends or is denied (a call whose turn
/// was dropped mid-question leaves its plan until these bounds push it out).
const KEPT_PLANS: usize = 16;

/// The bytes the kept plans may hold (each holds its file twice, before and after).
const KEPT_PLAN_BYTES: usize = 64 * 1024 * 1024;

/// A planned call: its scope and call id, its arguments, its plan.
type Planned = ((Option<ScopeKey>, String), Value, Arc<EditPlan>);

/// The plans of `edit_file` calls that have not run yet, oldest first.
#[derive(Clone, Default)]
pub(crate) struct Plans {
    inner: Arc<Mutex<Vec<Planned>>>,
}

impl Plans {
    fn insert(&self, scope: Option<ScopeKey>, call_id: &str, args: Value, plan: EditPlan) {
        let mut plans = lock(&self.inner);
        let key = (scope, call_id.to_owned());
        plans.retain(|(k, _, _)| k != &key);
        plans.push((key, args, Arc::new(plan)));
        let bytes = |plans: &[Planned]| -> usize {
            plans
                .iter()
                .map(|(_, _, p)| p.before.len() + p.after.len())
                .sum()
        };
        // The newest stays, whatever its size (its call is being asked about).
        while plans.len() > 1 && (plans.len() > KEPT_PLANS || bytes(&plans) > KEPT_PLAN_BYTES) {
            plans.remove(0);
        }
    }

    /// Removes and returns the plan of call `call_id` in `scope`, made for `args`.
    pub(crate) fn take(
        &self,
        scope: Option<ScopeKey>,
        call_id: &str,
        args: &Value,
    ) -> Option<Arc<EditPlan>> {
        let mut plans = lock(&self.inner);
        let i = plans
            .iter()
            .position(|((s, c), _, _)| *s == scope && c == call_id)?;
        let (_, planned_for, plan) = plans.remove(i);
        (planned_for == *args).then_some(plan)
    }

    /// The newest plan made for `args` (a presenter sees the arguments, not the call id).
    fn newest_for(&self, args: &Value) -> Option<Arc<EditPlan>> {
        lock(&self.inner)
            .iter()
            .rev()
            .find(|(_, a, _)| a == args)
            .map(|(_, _, p)| p.clone())
    }
}

/// Plans `args` for call `call_id` (off the async threads); `Err` is the reason the edit cannot
/// apply.
pub(crate) async fn plan(
    plans: &Plans,
    route: Option<&Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    scope: Option<ScopeKey>,
    call_id: &str,
    args: &Value,
) -> Result<(), String> {
    let planned = routed::plan_edit(route, ws, config, args.clone()).await;
    match planned {
        Ok(plan) => {
            plans.insert(scope, call_id, args.clone(), plan);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Runs an `edit_file` call: the plan it was shown with when there is one (refused when the file
/// changed since), else planned and applied now.
pub(crate) async fn run(
    route: Option<Arc<dyn FileRoute>>,
    ws: &Workspace,
    config: &Arc<FsConfig>,
    planned: Option<Arc<EditPlan>>,
    args: Value,
) -> Result<Value, FsError> {
    let plan = match planned {
        Some(plan) => plan,
        None => Arc::new(routed::plan_edit(route.as_ref(), ws, config, args).await?),
    };
    routed::apply_edit(route.as_ref(), ws, config, &plan).await
}

/// How `edit_file` calls look: to an approval, with a plan, the whole file's diff (real line
/// numbers, three lines of context); in a transcript, and without a plan, the standard
/// presentation of the two strings (a transcript is replayed, when no plan is left).
pub(crate) struct EditPresenter {
    pub(crate) plans: Plans,
    pub(crate) standard: Arc<dyn ToolPresenter>,
}

impl ToolPresenter for EditPresenter {
    fn present_call(&self, args: &Value) -> Result<Presentation, cordis_presenter::PresentError> {
        self.standard.present_call(args)
    }

    fn present_approval(
        &self,
        args: &Value,
    ) -> Result<Presentation, cordis_presenter::PresentError> {
        let standard = self.standard.present_call(args)?;
        let Some(plan) = self.plans.newest_for(args) else {
            return Ok(standard);
        };
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        Ok(Presentation {
            card: Card::Diff {
                path: path.clone(),
                old_text: Some(plan.before.clone()),
                new_text: plan.after.clone(),
                first_line: None,
            },
            locations: vec![Location {
                path,
                line: plan.lines.first().map(|&l| l as u64),
            }],
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
