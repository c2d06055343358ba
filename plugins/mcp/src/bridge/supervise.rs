//! The task that owns a live connection: it re-syncs on `list_changed`, checks a server a
//! call could not reach, reconnects after a crash with the policy's backoff, and gives up
//! (unregistering the tools) after the budget.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{ClientRequest, PingRequest};
use rmcp::service::{Peer, RoleClient};

use super::{Bridge, Connection};
use crate::catalog::Catalog;
use crate::handler::Change;
use crate::{auth, lock};

impl Bridge {
    /// Owns the connection: re-syncs on `list_changed`, reconnects after a crash, gives up
    /// (unregistering the tools) after the budget.
    pub(crate) async fn supervise(self: Arc<Self>, connection: Connection) {
        let mut connection = Some(connection);
        let policy = self.config.reconnect.clone();
        let mut attempt: u32 = 0;
        loop {
            if let Some(Connection {
                service,
                mut changes,
            }) = connection.take()
            {
                let up_since = Instant::now();
                let peer = service.peer().clone();
                let mut closed = Box::pin(service.waiting());
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut closed => break,
                        Some(first) = changes.recv() => {
                            // Several notifications in a row need one sync of each list.
                            let mut changed = BTreeSet::from([first]);
                            while let Ok(next) = changes.try_recv() {
                                changed.insert(next);
                            }
                            for change in changed {
                                match change {
                                    Change::Tools => self.resync(&peer).await,
                                    catalog => {
                                        self.telling_prompt_changes(self.relist(&peer, catalog))
                                            .await;
                                    }
                                }
                            }
                        }
                        () = self.link.suspect.notified() => {
                            if !self.answers(&peer).await {
                                tracing::warn!(server = %self.server(), "mcp server does not answer a ping; reconnecting");
                                break;
                            }
                        }
                    }
                }
                // Its stdout closed; whatever is left of the process group goes too.
                self.link.kill();
                tracing::warn!(server = %self.server(), "mcp server connection closed");
                if up_since.elapsed().as_millis() >= u128::from(policy.max_delay_ms) {
                    attempt = 0;
                }
            }
            if !policy.enabled || attempt >= policy.max_attempts {
                tracing::warn!(server = %self.server(), attempts = attempt, "mcp server gave up reconnecting; its tools are unregistered");
                let gone = std::mem::take(&mut *lock(&self.current));
                for handle in &gone.handles {
                    handle.dispose();
                }
                // Nothing of a server given up on is offered any more.
                self.telling_prompt_changes(async {
                    *lock(&self.link.catalog) = Catalog::default();
                })
                .await;
                self.link.kill();
                return;
            }
            attempt += 1;
            tokio::time::sleep(policy.delay(attempt)).await;
            // A server that needs a login is not asked again until a login changed the grant
            // (waiting spends no attempt).
            if let Some(auth) = &self.auth {
                while auth.still_waiting().await.is_some() {
                    tokio::time::sleep(auth::LOGIN_POLL).await;
                }
            }
            match self.start().await {
                Ok(c) => connection = Some(c),
                Err(error) => {
                    tracing::warn!(server = %self.server(), attempt, %error, "mcp reconnect failed");
                }
            }
        }
    }

    /// Whether the server answers a ping within the call timeout.
    async fn answers(&self, peer: &Peer<RoleClient>) -> bool {
        let ping = ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        matches!(
            tokio::time::timeout(self.config.call_timeout(), peer.send_request(ping)).await,
            Ok(Ok(_))
        )
    }
}
