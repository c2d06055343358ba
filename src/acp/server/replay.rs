//! `session/load`'s replay: the session's transcript (the model `cordis history`, the resume
//! view and the page render) sent to the editor as the live stream showed it, each message's
//! chunks joined into one.

use cordis_history::History;
use cordis_runtime::Context;

use crate::acp::protocol::SessionUpdate;
use crate::acp::rpc::RpcError;
use crate::acp::session::internal;
use crate::acp::updates::UpdateMapper;
use crate::session::transcript::TranscriptPage;

/// Sends session `id`'s whole transcript through `mapper` to `send`, read with the `history` service
/// of the session's composition (`root`). The mapper goes on to map the live events, so a
/// replay and what follows it read as one stream.
///
/// # Errors
/// `-32603` when the log cannot be read (the caller disposes the composition).
pub(super) async fn replay_log(
    root: &Context,
    id: &str,
    mapper: &mut UpdateMapper,
    send: impl Fn(SessionUpdate),
) -> Result<(), RpcError> {
    let history = History::of(root);
    // One page holding the whole log, so every result is on the page of its call.
    let page = history
        .history(id, None, Some(usize::MAX))
        .await
        .map_err(|e| internal(format!("cannot replay session {id}: {e}")))?;
    let presenters = root.get::<cordis_presenter::Presenters>();
    let transcript = TranscriptPage::of(&page, presenters.as_deref());
    let mut updates: Vec<(u64, SessionUpdate)> = transcript
        .items
        .iter()
        .flat_map(|item| mapper.map_item(item))
        .collect();
    // In log order, as the live stream sent them (stable: an item's own updates keep theirs).
    updates.sort_by_key(|(seq, _)| *seq);
    for (_, update) in updates {
        send(update);
    }
    Ok(())
}
