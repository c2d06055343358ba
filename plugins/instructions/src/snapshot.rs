//! One run's view of the source files, shared by the boots of that run: the workspace crate's
//! [`cordis_workspace::snapshot`], re-exported here where `cordis stress` has always found it
//! (see that module for what a snapshot keeps and when).

pub use cordis_workspace::snapshot::{Key, Snapshot, active, get, once, put};
