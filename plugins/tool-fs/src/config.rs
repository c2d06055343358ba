//! Configuration of `tool-fs`.

use serde::Deserialize;

/// Configuration of `tool-fs`; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FsConfig {
    /// Most lines one `read_file` returns.
    pub max_read_lines: usize,
    /// Longest line `read_file` shows, in characters; longer ones are cut with a marker.
    pub max_line_chars: usize,
    /// Most bytes of text one `read_file` returns.
    pub max_read_bytes: usize,
    /// Largest file `read_file` and `edit_file` load at all.
    pub max_file_bytes: u64,
    /// Most paths one `list_files` returns.
    pub max_list_entries: usize,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            max_read_lines: 2000,
            max_line_chars: 2000,
            max_read_bytes: 64 * 1024,
            max_file_bytes: 16 * 1024 * 1024,
            max_list_entries: 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_reads_camel_case_keys_and_rejects_unknown_ones() {
        let c: FsConfig =
            serde_json::from_value(serde_json::json!({"maxReadLines": 5, "maxLineChars": 7}))
                .unwrap();
        assert_eq!((c.max_read_lines, c.max_line_chars), (5, 7));
        assert_eq!(c.max_file_bytes, FsConfig::default().max_file_bytes);
        let e = serde_json::from_value::<FsConfig>(serde_json::json!({"root": "."})).unwrap_err();
        assert!(e.to_string().contains("unknown field `root`"), "{e}");
    }
}
