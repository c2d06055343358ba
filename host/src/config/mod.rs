//! The raw `cordis.yml` model: what the file says, with a position for every key and value.
//!
//! This is phase one of two (phase two is [`crate::plan`]): no plugin is looked up and nothing is
//! loaded here. The only outside input is the environment, read through the `env` function the
//! caller passes, for `${{ env.NAME }}` interpolation ([`crate::env`]).
//!
//! # Format
//! A top-level YAML list of entries `{id?, name, config?, disabled?, inject?, timeout?, sha256?}`.
//! `timeout` is the apply timeout in milliseconds. `sha256` pins the file of a dylib entry (one
//! whose `name` is a path to a shared library) to a hex SHA-256 hash. An entry named `cordis/group` (or
//! `@cordisjs/plugin-group`) is a group: its `config` is a nested list of entries, and disabling
//! it disables them all. An entry named `cordis/include` loads another file's entries as such a
//! group, with patches (see [`include`](mod@include)). Inside string values of `config`, `${{ env.NAME }}` and
//! `${{ env.NAME ?? 'default' }}` are replaced by the variable's value (no code is evaluated;
//! the result is always a string). cordis's `!!js` tag and every other non-core tag are
//! rejected. Entries of disabled entries (and groups) are not interpolated, so their variables
//! need not be set. Ids and names may not contain control, bidirectional or zero-width
//! characters (they would disguise what a terminal shows).
//!
//! # Ids
//! An entry without `id` gets one derived from its name and position, never a random one:
//! `debug/noop#2` is the third top-level entry, `debug/noop#0.3` the fourth entry of the group
//! that is the first top-level entry.
//!
//! # Positions
//! The file is read into a [`Tree`](yaml::Tree) that marks every node, so a diagnostic
//! points at the key or value it is about: an unknown key at the key, a bad value at the value,
//! an unset variable at `env.NAME` inside the string. An entry's own position is its dash (or,
//! in a flow list, its opening brace). Positions count lines as YAML does (`\n`, `\r\n` or a
//! lone `\r`) and columns in characters, from 1.
//!
//! # Modules
//! One concept each, and each depends only on those listed before it:
//! - [`yaml`]: the marked YAML tree (a position on every node);
//! - `model`: the raw entry model ([`RawConfig`], [`RawEntry`]);
//! - `position`: finer positions (a list item's dash, a needle inside a scalar, a serde path
//!   inside `config`);
//! - `json`: a config value as JSON, with `${{ env.NAME }}` interpolated;
//! - [`include`](mod@include): `cordis/include`, with its patches and the reading of included files;
//! - `reader`: the entry reader, the parse entry points ([`parse`], [`parse_lenient`],
//!   [`parse_with`]); it hands include entries to [`include`](mod@include), which calls back through a
//!   trait the reader implements, so no module imports one that imports it.

pub mod include;
mod json;
mod model;
mod position;
mod reader;
pub mod yaml;

pub use model::{EntryMarks, GROUP_NAMES, RawConfig, RawEntry};
pub use reader::{dir_of, parse, parse_lenient, parse_with};
