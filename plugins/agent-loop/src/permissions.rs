//! A session's permissions: its mode and grants live in the approvals service and are stated in
//! the session's log, so a resumed session (`--resume`, ACP `session/load`) holds them again.

use cordis_approvals::{Approvals, Grant, Mode};
use cordis_session::{
    GrantData, GrantRevokedData, PermissionsModeData, SessionEvent, ToolApprovalData,
};

use crate::agent::Agent;

/// The log's record of `grant`.
pub fn grant_data(grant: &Grant) -> GrantData {
    GrantData {
        tool: grant.tool.clone(),
        command: grant.command.as_ref().map(ToString::to_string),
        exact: grant.exact,
    }
}

fn grant_of(data: &GrantData) -> Option<Grant> {
    cordis_approvals::grant_from(&data.tool, data.command.as_deref(), data.exact).ok()
}

/// What a session's log leaves it with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Its last chosen mode.
    pub mode: Option<Mode>,
    /// The grants "always" answers made and nothing revoked since, in log order.
    pub grants: Vec<Grant>,
    /// The refusals "reject always" answers made, in log order.
    pub refusals: Vec<Grant>,
}

/// What `events` leave a session with (see `Replayed`).
pub fn replay(events: &[SessionEvent]) -> Replayed {
    let mut mode = None;
    let mut grants: Vec<Grant> = Vec::new();
    let mut refusals: Vec<Grant> = Vec::new();
    for e in events {
        if let Ok(m) = e.data_as::<PermissionsModeData>() {
            mode = m.mode.parse().ok().or(mode);
        } else if let Ok(d) = e.data_as::<ToolApprovalData>() {
            for g in d.grants.iter().filter_map(grant_of) {
                if !grants.contains(&g) {
                    grants.push(g);
                }
            }
            for g in d.refusals.iter().filter_map(grant_of) {
                if !refusals.contains(&g) {
                    refusals.push(g);
                }
            }
        } else if let Ok(r) = e.data_as::<GrantRevokedData>()
            && let Some(g) = grant_of(&r.grant)
        {
            grants.retain(|held| *held != g);
        }
    }
    Replayed {
        mode,
        grants,
        refusals,
    }
}

/// Why a permissions change was refused.
#[derive(Debug, thiserror::Error)]
pub enum PermissionsError {
    /// The composition has no `approvals` entry.
    #[error("this composition has no approvals entry, so it has no permissions to change")]
    NoApprovals,
    /// The session does not hold that grant.
    #[error("the session holds no grant {0}")]
    NotHeld(String),
    /// The change could not be logged.
    #[error("cannot record the change in the session log: {0}")]
    Log(String),
}

/// A session's permissions as the approvals service holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// The mode in force.
    pub mode: Mode,
    /// The grants held, sorted.
    pub grants: Vec<Grant>,
    /// The refusals held ("reject always" answers), sorted.
    pub refusals: Vec<Grant>,
}

impl Agent {
    /// Puts the permissions its log records back into the approvals service (a resumed
    /// session); nothing without an `approvals` entry.
    pub(crate) fn restore_permissions(&self) {
        let Some(approvals) = self.approvals() else {
            return;
        };
        let Replayed {
            mode,
            grants,
            refusals,
        } = self.session().with_events(replay);
        let key = self.scope_key();
        if let Some(mode) = mode {
            approvals.set_mode(key, mode);
        }
        for g in grants {
            let _ = approvals.add_grant(Some(key), g);
        }
        for g in refusals {
            let _ = approvals.add_refusal(Some(key), g);
        }
    }

    fn approvals(&self) -> Option<std::sync::Arc<Approvals>> {
        self.context().and_then(|c| c.get::<Approvals>())
    }

    /// The session's permission mode and grants (`None` without an `approvals` entry).
    pub fn permissions(&self) -> Option<Permissions> {
        let approvals = self.approvals()?;
        let key = self.scope_key();
        Some(Permissions {
            mode: approvals.mode_for(Some(key)),
            grants: approvals.grants(Some(key)),
            refusals: approvals.refusals(Some(key)),
        })
    }

    /// Sets the session's permission mode, logged as `permissions/mode`.
    ///
    /// # Errors
    /// No `approvals` entry; the log refused the event.
    pub fn set_permission_mode(&self, mode: Mode) -> Result<(), PermissionsError> {
        let approvals = self.approvals().ok_or(PermissionsError::NoApprovals)?;
        let data = PermissionsModeData {
            mode: mode.as_str().to_owned(),
        };
        self.session()
            .append(&data, None)
            .map_err(|e| PermissionsError::Log(e.to_string()))?;
        approvals.set_mode(self.scope_key(), mode);
        Ok(())
    }

    /// Revokes one of the session's grants, logged as `permissions/revoke`.
    ///
    /// # Errors
    /// No `approvals` entry; a grant the session does not hold; the log refused the event.
    pub fn revoke_grant(&self, grant: &Grant) -> Result<(), PermissionsError> {
        let approvals = self.approvals().ok_or(PermissionsError::NoApprovals)?;
        let key = Some(self.scope_key());
        if !approvals.grants(key).contains(grant) {
            return Err(PermissionsError::NotHeld(grant.to_string()));
        }
        let data = GrantRevokedData {
            grant: grant_data(grant),
        };
        self.session()
            .append(&data, None)
            .map_err(|e| PermissionsError::Log(e.to_string()))?;
        let _ = approvals.revoke(key, grant);
        Ok(())
    }
}
