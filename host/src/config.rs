//! The raw `cordis.yml` model: what the file says, with a position for every entry.
//!
//! This is phase one of two (phase two is [`crate::plan`]): no plugin is looked up and nothing is
//! loaded here. The only outside input is the environment, read through the `env` function the
//! caller passes, for `${{ env.NAME }}` interpolation.
//!
//! # Format
//! A top-level YAML list of entries `{id?, name, config?, disabled?, inject?, timeout?, sha256?}`.
//! `timeout` is the apply timeout in milliseconds. `sha256` pins the file of a dylib entry (one
//! whose `name` is a path to a shared library) to a hex SHA-256 hash. An entry named `cordis/group` (or
//! `@cordisjs/plugin-group`) is a group: its `config` is a nested list of entries, and disabling
//! it disables them all. Inside string values of `config`, `${{ env.NAME }}` and
//! `${{ env.NAME ?? 'default' }}` are replaced by the variable's value (no code is evaluated;
//! the result is always a string). cordis's `!!js` tag is rejected. Entries of disabled entries
//! (and groups) are not interpolated, so their variables need not be set.
//!
//! # Ids
//! An entry without `id` gets one derived from its name and position, never a random one:
//! `debug/noop#2` is the third top-level entry, `debug/noop#0.3` the fourth entry of the group
//! that is the first top-level entry.
//!
//! # Positions
//! serde_yaml_ng's `Value` has no spans, so each entry's line is found by scanning the source
//! for the block-sequence dashes of its list (the list's first dash sets the indentation). A
//! file in flow style (`[{…}]`) still parses; its entries then point at the list's first line.

use std::collections::BTreeSet;

use serde_yaml_ng::Value as Yaml;
use serde_yaml_ng::value::TaggedValue;

use crate::diagnostic::{ConfigErrors, Diagnostic, ENTRY_KEYS, Pos, Problem};

/// The plugin names that make an entry a group.
pub const GROUP_NAMES: &[&str] = &["cordis/group", "@cordisjs/plugin-group"];

/// A parsed config file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawConfig {
    /// The file name, as the user gave it (used in every message).
    pub file: String,
    /// The top-level entries, in file order.
    pub entries: Vec<RawEntry>,
}

/// One entry as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    /// The entry id: as written, or derived from name and position.
    pub id: String,
    /// True when `id` was written in the file.
    pub explicit_id: bool,
    /// The plugin name (`None` if missing or not a string; a diagnostic says so).
    pub name: Option<String>,
    /// The config value after interpolation (`null` when absent; `None` when it had errors).
    pub config: Option<serde_json::Value>,
    /// Disabled by itself or by an enclosing group.
    pub disabled: bool,
    /// Extra required services.
    pub inject: Vec<String>,
    /// Apply timeout in milliseconds, if set.
    pub timeout_ms: Option<u64>,
    /// The pinned SHA-256 of a dylib entry's file (lowercase hex, 64 digits), if set.
    pub sha256: Option<String>,
    /// Child entries, for a group.
    pub children: Vec<RawEntry>,
    /// True for a group entry.
    pub is_group: bool,
    /// Where the entry starts (its dash).
    pub pos: Pos,
}

/// Parses a config file, collecting every problem.
///
/// # Errors
/// Every problem of the file, in file order.
pub fn parse(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RawConfig, ConfigErrors> {
    let (config, errors) = parse_lenient(source, file, env);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Parses as far as possible: the entries that could be read, and every problem found.
pub fn parse_lenient(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> (RawConfig, Vec<Diagnostic>) {
    let mut p = Parser {
        file,
        lines: source.lines().collect(),
        env,
        errors: Vec::new(),
        js: Vec::new(),
        js_reported: BTreeSet::new(),
    };
    p.js = p.scan_js_tags();
    let mut config = RawConfig {
        file: file.to_owned(),
        entries: Vec::new(),
    };
    let doc: Yaml = match serde_yaml_ng::from_str(source) {
        Ok(v) => v,
        Err(e) => {
            let pos = e
                .location()
                .map(|l| Pos {
                    line: l.line(),
                    column: l.column(),
                })
                .unwrap_or(Pos { line: 1, column: 1 });
            let message = e.to_string();
            let message = match message.find(" at line ") {
                Some(i) => message[..i].to_owned(),
                None => message,
            };
            p.error(pos, None, Problem::Syntax(message));
            return (config, p.errors);
        }
    };
    let doc = match doc {
        Yaml::Null => Yaml::Sequence(Vec::new()),
        other => other,
    };
    let end = p.lines.len();
    config.entries = p.list(&doc, 0, end, &[], false, Pos { line: 1, column: 1 });
    for pos in p.js.clone() {
        if !p.js_reported.contains(&pos) {
            p.error(pos, None, Problem::JsTag);
        }
    }
    p.errors.sort_by_key(|d| d.pos);
    (config, p.errors)
}

struct Parser<'a> {
    file: &'a str,
    lines: Vec<&'a str>,
    env: &'a dyn Fn(&str) -> Option<String>,
    errors: Vec<Diagnostic>,
    /// Positions of `!!js` tags (serde_yaml_ng drops unknown `!!` tags, so they are found here).
    js: Vec<Pos>,
    js_reported: BTreeSet<Pos>,
}

fn kind_of(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "null",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

fn is_js_tag(tagged: &TaggedValue) -> bool {
    let tag = tagged.tag.to_string();
    tag == "!!js" || tag == "!js" || tag.ends_with(":js") || tag.starts_with("!!js/")
}

fn short(v: &Yaml) -> String {
    match v {
        Yaml::String(s) => format!("\"{s}\""),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        other => kind_of(other).to_owned(),
    }
}

impl Parser<'_> {
    /// Every `!!js` tag token outside comments and quotes.
    fn scan_js_tags(&self) -> Vec<Pos> {
        let mut out = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let bytes = line.as_bytes();
            let mut quote: Option<u8> = None;
            for (c, &b) in bytes.iter().enumerate() {
                let prev = if c == 0 { b' ' } else { bytes[c - 1] };
                match quote {
                    Some(q) if b == q => quote = None,
                    Some(_) => {}
                    None if (b == b'"' || b == b'\'') && !prev.is_ascii_alphanumeric() => {
                        quote = Some(b);
                    }
                    None if b == b'#' && prev.is_ascii_whitespace() => break,
                    None if bytes[c..].starts_with(b"!!js")
                        && (prev.is_ascii_whitespace() || b"[{,:-".contains(&prev))
                        && bytes
                            .get(c + 4)
                            .is_none_or(|n| n.is_ascii_whitespace() || b",]}".contains(n)) =>
                    {
                        out.push(Pos {
                            line: i + 1,
                            column: c + 1,
                        });
                    }
                    None => {}
                }
            }
        }
        out
    }

    fn error(&mut self, pos: Pos, entry: Option<&str>, problem: Problem) {
        self.errors.push(Diagnostic {
            file: self.file.to_owned(),
            pos,
            entry: entry.map(str::to_owned),
            problem,
        });
    }

    /// Lines (0-based) of the block-sequence dashes of the list that starts after `from`.
    fn dashes(&self, from: usize, to: usize) -> Vec<(usize, usize)> {
        let mut indent = None;
        let mut out = Vec::new();
        for i in from..to.min(self.lines.len()) {
            let line = self.lines[i];
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let col = line.len() - trimmed.len();
            let is_dash = trimmed == "-" || trimmed.starts_with("- ") || trimmed.starts_with("-\t");
            match indent {
                None if is_dash => {
                    indent = Some(col);
                    out.push((i, col));
                }
                Some(ind) if is_dash && col == ind => out.push((i, col)),
                Some(ind) if col < ind => break,
                _ => {}
            }
        }
        out
    }

    /// First line in `from..to` containing `needle`, as a position.
    fn find(&self, from: usize, to: usize, needle: &str) -> Option<Pos> {
        (from..to.min(self.lines.len())).find_map(|i| {
            self.lines[i].find(needle).map(|c| Pos {
                line: i + 1,
                column: c + 1,
            })
        })
    }

    /// Reads a list of entries whose source lies in lines `from..to` (0-based).
    fn list(
        &mut self,
        value: &Yaml,
        from: usize,
        to: usize,
        path: &[usize],
        disabled: bool,
        fallback: Pos,
    ) -> Vec<RawEntry> {
        let Yaml::Sequence(items) = value else {
            self.error(
                fallback,
                None,
                Problem::NotAList {
                    found: kind_of(value),
                },
            );
            return Vec::new();
        };
        let dashes = self.dashes(from, to);
        let located = dashes.len() == items.len();
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let (start, end, pos) = if located {
                let (line, col) = dashes[i];
                let end = dashes.get(i + 1).map_or(to, |d| d.0);
                (
                    line,
                    end,
                    Pos {
                        line: line + 1,
                        column: col + 1,
                    },
                )
            } else {
                (from, to, fallback)
            };
            let mut path = path.to_vec();
            path.push(i);
            if let Some(entry) = self.entry(item, start, end, pos, &path, disabled) {
                out.push(entry);
            }
        }
        out
    }

    fn entry(
        &mut self,
        item: &Yaml,
        start: usize,
        end: usize,
        pos: Pos,
        path: &[usize],
        parent_disabled: bool,
    ) -> Option<RawEntry> {
        let position = path
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(".");
        let Yaml::Mapping(map) = item else {
            self.error(
                pos,
                None,
                Problem::EntryNotMapping {
                    found: kind_of(item),
                },
            );
            return None;
        };
        let get = |k: &str| map.get(k);
        let name = match get("name") {
            Some(Yaml::String(s)) => Some(s.clone()),
            _ => None,
        };
        let derived = format!("{}#{position}", name.as_deref().unwrap_or("entry"));
        let (id, explicit_id) = match get("id") {
            Some(Yaml::String(s)) => (s.clone(), true),
            Some(Yaml::Number(n)) => (n.to_string(), true),
            _ => (derived, false),
        };
        let key_pos = |p: &Self, key: &str| {
            p.find(start, end, &format!("{key}:"))
                .or_else(|| p.find(start, end, key))
                .unwrap_or(pos)
        };
        // Keys.
        let mut seen = BTreeSet::new();
        for key in map.keys() {
            match key {
                Yaml::String(k) if ENTRY_KEYS.contains(&k.as_str()) => {
                    seen.insert(k.clone());
                }
                other => {
                    let k = match other {
                        Yaml::String(s) => s.clone(),
                        v => short(v),
                    };
                    let at = key_pos(self, &k);
                    self.error(at, Some(&id), Problem::UnknownKey { key: k });
                }
            }
        }
        match get("id") {
            None | Some(Yaml::String(_)) | Some(Yaml::Number(_)) => {}
            Some(v) => {
                let at = key_pos(self, "id");
                self.error(at, Some(&id), bad("id", "a string", v));
            }
        }
        match get("name") {
            Some(Yaml::String(_)) => {}
            None => self.error(pos, Some(&id), Problem::MissingName),
            Some(v) => {
                let at = key_pos(self, "name");
                self.error(at, Some(&id), bad("name", "a string", v));
            }
        }
        let own_disabled = match get("disabled") {
            None | Some(Yaml::Null) => false,
            Some(Yaml::Bool(b)) => *b,
            Some(v) => {
                let at = key_pos(self, "disabled");
                self.error(at, Some(&id), bad("disabled", "true or false", v));
                false
            }
        };
        let disabled = parent_disabled || own_disabled;
        let inject = match get("inject") {
            None | Some(Yaml::Null) => Vec::new(),
            Some(Yaml::String(s)) => vec![s.clone()],
            Some(Yaml::Sequence(items)) if items.iter().all(|v| matches!(v, Yaml::String(_))) => {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            }
            Some(v) => {
                let at = key_pos(self, "inject");
                self.error(at, Some(&id), bad("inject", "a list of service names", v));
                Vec::new()
            }
        };
        let timeout_ms = match get("timeout") {
            None | Some(Yaml::Null) => None,
            Some(Yaml::Number(n)) if n.as_u64().is_some_and(|t| t > 0) => n.as_u64(),
            Some(v) => {
                let at = key_pos(self, "timeout");
                self.error(
                    at,
                    Some(&id),
                    bad("timeout", "a positive number of milliseconds", v),
                );
                None
            }
        };
        let sha256 = match get("sha256") {
            None | Some(Yaml::Null) => None,
            Some(Yaml::String(s)) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(s.to_ascii_lowercase())
            }
            Some(v) => {
                let at = key_pos(self, "sha256");
                self.error(
                    at,
                    Some(&id),
                    bad("sha256", "a SHA-256 hash as 64 hex digits", v),
                );
                None
            }
        };
        let is_group = name.as_deref().is_some_and(|n| GROUP_NAMES.contains(&n));
        let raw_config = get("config").cloned().unwrap_or(Yaml::Null);
        let mut children = Vec::new();
        let config = if is_group {
            if !inject.is_empty() || timeout_ms.is_some() {
                let at = key_pos(
                    self,
                    if inject.is_empty() {
                        "timeout"
                    } else {
                        "inject"
                    },
                );
                self.error(
                    at,
                    Some(&id),
                    Problem::BadField {
                        key: if inject.is_empty() {
                            "timeout"
                        } else {
                            "inject"
                        },
                        expected: "absent on a group (set it on the group's entries)",
                        found: "a value".to_owned(),
                    },
                );
            }
            let config_line = self
                .find(start, end, "config:")
                .map_or(start, |p| p.line - 1);
            let list = match raw_config {
                Yaml::Null => Yaml::Sequence(Vec::new()),
                other => other,
            };
            let at = key_pos(self, "config");
            children = self.list(&list, config_line + 1, end, path, disabled, at);
            Some(serde_json::Value::Null)
        } else if self.js.iter().any(|p| p.line > start && p.line <= end) {
            for p in self.js.clone() {
                if p.line > start && p.line <= end && self.js_reported.insert(p) {
                    self.error(p, Some(&id), Problem::JsTag);
                }
            }
            None
        } else if disabled {
            Some(serde_json::Value::Null)
        } else {
            let before = self.errors.len();
            let value = self.config_json(&raw_config, start, end, &id, pos);
            (self.errors.len() == before).then_some(value)
        };
        Some(RawEntry {
            id,
            explicit_id,
            name,
            config,
            disabled,
            inject,
            timeout_ms,
            sha256,
            children,
            is_group,
            pos,
        })
    }

    /// Converts a config value to JSON, interpolating `${{ env.X }}` in strings.
    fn config_json(
        &mut self,
        v: &Yaml,
        start: usize,
        end: usize,
        id: &str,
        pos: Pos,
    ) -> serde_json::Value {
        use serde_json::Value as Json;
        match v {
            Yaml::Null => Json::Null,
            Yaml::Bool(b) => Json::Bool(*b),
            Yaml::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Json::from(i)
                } else if let Some(u) = n.as_u64() {
                    Json::from(u)
                } else {
                    n.as_f64()
                        .and_then(serde_json::Number::from_f64)
                        .map_or(Json::Null, Json::Number)
                }
            }
            Yaml::String(s) => Json::String(self.interpolate(s, start, end, id, pos)),
            Yaml::Sequence(items) => Json::Array(
                items
                    .iter()
                    .map(|i| self.config_json(i, start, end, id, pos))
                    .collect(),
            ),
            Yaml::Mapping(map) => {
                let mut out = serde_json::Map::new();
                for (k, val) in map {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Number(n) => n.to_string(),
                        Yaml::Bool(b) => b.to_string(),
                        other => {
                            self.error(
                                pos,
                                Some(id),
                                Problem::NonStringKey {
                                    found: short(other),
                                },
                            );
                            continue;
                        }
                    };
                    let value = self.config_json(val, start, end, id, pos);
                    out.insert(key, value);
                }
                Json::Object(out)
            }
            Yaml::Tagged(tagged) => {
                if is_js_tag(tagged) {
                    let at = self.find(start, end, "!!js").unwrap_or(pos);
                    self.error(at, Some(id), Problem::JsTag);
                } else {
                    let tag = tagged.tag.to_string();
                    let at = self.find(start, end, &tag).unwrap_or(pos);
                    self.error(at, Some(id), Problem::UnsupportedTag { tag });
                }
                Json::Null
            }
        }
    }

    fn interpolate(&mut self, s: &str, start: usize, end: usize, id: &str, pos: Pos) -> String {
        match interpolate(s, self.env) {
            Ok(out) => out,
            Err(problem) => {
                let needle = match &problem {
                    Problem::UnsetEnv { var } => format!("env.{var}"),
                    _ => "${{".to_owned(),
                };
                let at = self.find(start, end, &needle).unwrap_or(pos);
                self.error(at, Some(id), problem);
                s.to_owned()
            }
        }
    }
}

fn bad(key: &'static str, expected: &'static str, v: &Yaml) -> Problem {
    Problem::BadField {
        key,
        expected,
        found: short(v),
    }
}

/// Replaces every `${{ env.NAME }}` / `${{ env.NAME ?? 'default' }}` in `s`.
///
/// # Errors
/// [`Problem::UnsetEnv`] for a variable that is unset and has no default;
/// [`Problem::BadExpression`] for anything else inside `${{ }}`.
pub fn interpolate(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Problem> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find("${{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 3..];
        let Some(close) = after.find("}}") else {
            return Err(Problem::BadExpression {
                expr: after.to_owned(),
            });
        };
        let expr = &after[..close];
        out.push_str(&evaluate(expr, env)?);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn evaluate(expr: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Problem> {
    let bad = || Problem::BadExpression {
        expr: expr.to_owned(),
    };
    let (var, default) = match expr.split_once("??") {
        Some((v, d)) => (v.trim(), Some(d.trim())),
        None => (expr.trim(), None),
    };
    let name = var.strip_prefix("env.").ok_or_else(bad)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(bad());
    }
    let default = match default {
        None => None,
        Some(d) => {
            let quoted = (d.len() >= 2)
                && ((d.starts_with('\'') && d.ends_with('\''))
                    || (d.starts_with('"') && d.ends_with('"')));
            if !quoted {
                return Err(bad());
            }
            Some(d[1..d.len() - 1].to_owned())
        }
    };
    match (env(name), default) {
        (Some(v), _) => Ok(v),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(Problem::UnsetEnv {
            var: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn env_home(name: &str) -> Option<String> {
        (name == "HOME").then(|| "/home/me".to_owned())
    }

    /// Regression: the `!!js` scan sliced a line by byte index and panicked inside a multi-byte
    /// character (`text: How to use 😀`).
    #[test]
    fn non_ascii_text_never_panics_the_parser() {
        let samples = [
            "- id: a\n  name: debug/noop\n  config: {text: How to use 😀_smile.}\n",
            "- id: é\n  name: \"～\"\n# 😀 !!js\n",
            "- {id: a, name: debug/noop, config: {x: \"😀 !!js\"}}\n",
            "- id: a\n  name: debug/noop\n  config: \"${{ env.😀 }}\"\n",
            "😀: [\n",
        ];
        for src in samples {
            let _ = parse(src, "t.yml", &no_env);
        }
        let js = parse(
            "- id: a\n  name: x😀\n  config: !!js process.env.X\n",
            "t.yml",
            &no_env,
        );
        assert!(js.is_err());
    }

    #[test]
    fn interpolation_replaces_set_variables_and_defaults() {
        assert_eq!(
            interpolate("${{ env.HOME }}/x", &env_home).unwrap(),
            "/home/me/x"
        );
        assert_eq!(
            interpolate("a ${{env.NOPE ?? 'dflt'}} b", &env_home).unwrap(),
            "a dflt b"
        );
        assert_eq!(
            interpolate("${{ env.HOME ?? \"x\" }}", &env_home).unwrap(),
            "/home/me"
        );
        assert_eq!(interpolate("plain", &no_env).unwrap(), "plain");
    }

    #[test]
    fn interpolation_rejects_unset_variables_and_code() {
        assert_eq!(
            interpolate("${{ env.NOPE }}", &no_env),
            Err(Problem::UnsetEnv { var: "NOPE".into() })
        );
        assert!(matches!(
            interpolate("${{ process.exit() }}", &no_env),
            Err(Problem::BadExpression { .. })
        ));
        assert!(matches!(
            interpolate("${{ env.X ?? bare }}", &no_env),
            Err(Problem::BadExpression { .. })
        ));
        assert!(matches!(
            interpolate("${{ env.X", &no_env),
            Err(Problem::BadExpression { .. })
        ));
    }

    #[test]
    fn entries_get_their_lines_and_derived_ids() {
        let src = "# comment\n- id: a\n  name: debug/noop\n\n- name: cordis/group\n  config:\n    - name: debug/noop\n      config: {}\n    - id: c\n      name: debug/noop\n";
        let cfg = parse(src, "f.yml", &no_env).unwrap();
        assert_eq!(cfg.entries.len(), 2);
        assert_eq!(cfg.entries[0].id, "a");
        assert_eq!(cfg.entries[0].pos, Pos { line: 2, column: 1 });
        let group = &cfg.entries[1];
        assert!(group.is_group);
        assert_eq!(group.id, "cordis/group#1");
        assert_eq!(group.pos.line, 5);
        assert_eq!(group.children[0].id, "debug/noop#1.0");
        assert_eq!(group.children[0].pos, Pos { line: 7, column: 5 });
        assert_eq!(group.children[1].id, "c");
        assert_eq!(group.children[1].pos.line, 9);
    }

    #[test]
    fn a_disabled_group_disables_its_children_and_skips_their_interpolation() {
        let src = "- name: cordis/group\n  disabled: true\n  config:\n  - name: debug/noop\n    config: {x: '${{ env.UNSET }}'}\n";
        let cfg = parse(src, "f.yml", &no_env).unwrap();
        assert!(cfg.entries[0].children[0].disabled);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let (_, errors) = parse_lenient("- id: a\n  name: [x\n", "f.yml", &no_env);
        assert_eq!(errors.len(), 1);
        assert!(matches!(errors[0].problem, Problem::Syntax(_)));
        assert!(errors[0].pos.line >= 2, "{:?}", errors[0]);
    }

    #[test]
    fn every_entry_problem_is_reported_together() {
        let src = "- id: a\n  name: debug/noop\n  colour: red\n- id: b\n  disabled: maybe\n  name: debug/noop\n- id: c\n  name: debug/fault\n  config:\n    api: !!js process.env.KEY\n";
        let (_, errors) = parse_lenient(src, "f.yml", &no_env);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(text[0].starts_with("f.yml:3:3: entry \"a\": unknown key \"colour\""));
        assert!(text[1].starts_with("f.yml:5:3: entry \"b\": key \"disabled\""));
        assert!(text[2].starts_with("f.yml:10:10: entry \"c\": the `!!js` tag"));
    }
}
