//! Usage accounting: what the model answers of a session reported.

use cordis_agent_loop::Agent;

/// The model answers that reported usage in the agent's log from event `from` on, and their
/// input and output tokens.
pub fn usage_since(agent: &Agent, from: usize) -> (u64, u64, u64) {
    agent.session().with_events(|events| {
        events
            .iter()
            .skip(from)
            .filter_map(|e| e.data_as::<cordis_session::AssistantMessageData>().ok())
            .filter_map(|m| m.usage)
            .fold((0u64, 0u64, 0u64), |(n, i, o), u| {
                (n + 1, i + u.input_tokens, o + u.output_tokens)
            })
    })
}
