//! Tool presenters: each tool describes its call and its result for people — a title, a
//! [`ToolKind`], the input, and a [`Card`] (`generic`, `terminal` with output and exit code, or
//! `diff` with path and old/new text). The stdio transcript, history reads and the ACP app all
//! ask the same [`Presenters`] service, so a tool looks the same everywhere.
//!
//! A presenter that fails (an error or a panic, e.g. on arguments it did not expect) falls back
//! to the generic card, so presentation can never break a transcript.
//!
//! # Examples
//! ```
//! use cordis_presenter::{Card, Presenters, ToolKind};
//! let presenters = Presenters::standard();
//! let call = presenters.present_call("edit_file", &serde_json::json!({
//!     "path": "src/lib.rs", "old_string": "a", "new_string": "b"
//! }));
//! assert_eq!((call.title.as_str(), call.kind), ("Edit src/lib.rs", ToolKind::Edit));
//! assert!(matches!(call.card, Card::Diff { .. }));
//! print!("{}", cordis_presenter::render_card(&call.card));
//! ```

mod card;
mod plugin;
mod presenters;
mod standard;

pub use card::{
    Card, Location, Presentation, ResultView, ToolKind, parse_arguments_text, render_card,
    unified_diff, unified_diff_from,
};
pub use plugin::{PresenterConfig, PresenterPlugin};
pub use presenters::{PresentError, Presenters, ToolPresenter, generic};

#[cfg(test)]
mod tests;
