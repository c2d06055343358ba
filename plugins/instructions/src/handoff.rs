//! A section's text handed to its variable within one assembly.
//!
//! An assembly evaluates every section, then every variable, synchronously on one thread
//! (`SystemPrompt::initial`). A section that decides whether it is empty by reading a file,
//! and a variable that holds that file's text, would read it twice per assembly; the section
//! [`Handoff::put`]s what it read and the variable [`Handoff::take`]s it, so each assembly
//! reads once, and the section and its variable agree on one read. The variable reads again
//! whenever nothing was handed over on its thread for its context (the section was overridden,
//! or another assembly ran in between on another thread).

use std::sync::Mutex;
use std::thread::ThreadId;

use cordis_system_prompt::AssembleContext;

/// One section's text for the variable evaluated after it (see the module docs).
#[derive(Debug, Default)]
pub struct Handoff {
    slot: Mutex<Option<(ThreadId, AssembleContext, String)>>,
}

impl Handoff {
    /// Keeps `text`, read for `context` on this thread, for the next [`Handoff::take`].
    pub fn put(&self, context: &AssembleContext, text: String) {
        *cordis_runtime::lock(&self.slot) = Some((std::thread::current().id(), *context, text));
    }

    /// The text put for `context` on this thread since the last take, if any; the slot is
    /// emptied either way.
    pub fn take(&self, context: &AssembleContext) -> Option<String> {
        let (thread, put_for, text) = cordis_runtime::lock(&self.slot).take()?;
        (thread == std::thread::current().id() && put_for == *context).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_taken_once_on_its_thread_for_its_context() {
        let handoff = Handoff::default();
        let global = AssembleContext::global();
        handoff.put(&global, "text".into());
        assert_eq!(handoff.take(&global), Some("text".into()));
        assert_eq!(handoff.take(&global), None);
        handoff.put(&global, "text".into());
        let other = std::thread::scope(|s| s.spawn(|| handoff.take(&global)).join().unwrap());
        assert_eq!(other, None);
        // The other thread's take emptied the slot: nothing stale is left for a later take.
        assert_eq!(handoff.take(&global), None);
    }
}
