//! Text rendering for people: the entry table and the diff of two boot outcomes.

use std::collections::BTreeMap;

use serde_json::Value;

use cordis_host::loader::BootReport;

/// The entry table, one line per entry, aligned columns.
pub(crate) fn entry_table(report: &BootReport) -> String {
    let header = ["ID", "NAME", "STATUS", "LOAD MS", "ERROR"];
    let rows: Vec<[String; 5]> = report
        .entries
        .iter()
        .map(|e| {
            [
                e.id.clone(),
                e.name.clone(),
                e.status.to_string(),
                e.load_ms.map_or("-".to_owned(), |ms| ms.to_string()),
                e.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 4 {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(header);
    out.push('\n');
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
        out.push('\n');
    }
    out
}

/// Flattens JSON into `path → value` lines; arrays of scalars become set members.
fn flatten(value: &Value, path: &str, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(v, &p, out);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            for item in items {
                out.insert(format!("{path} contains {item}"), "yes".to_owned());
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(item, &format!("{path}[{i}]"), out);
            }
        }
        scalar => {
            out.insert(path.to_owned(), scalar.to_string());
        }
    }
}

/// A readable diff of two outcomes, one line per differing path.
pub(crate) fn diff(a: &Value, seed_a: u64, b: &Value, seed_b: u64) -> String {
    let mut fa = BTreeMap::new();
    let mut fb = BTreeMap::new();
    flatten(a, "", &mut fa);
    flatten(b, "", &mut fb);
    let mut keys: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for key in keys {
        let (va, vb) = (fa.get(key), fb.get(key));
        if va != vb {
            let show = |v: Option<&String>| v.map_or("(absent)".to_owned(), Clone::clone);
            out.push_str(&format!(
                "  {key}:\n    seed {seed_a}: {}\n    seed {seed_b}: {}\n",
                show(va),
                show(vb)
            ));
        }
    }
    out
}

/// The assembly part of `check`'s text output: sections (name, order) and tools in order.
pub(crate) fn assembly_text(report: &BootReport) -> String {
    let mut out = String::new();
    let Some(assembly) = report.assembly.as_object() else {
        if report.assembly_error.is_some() {
            out.push_str("assembly: failed (see the error below)\n");
        } else {
            out.push_str(
                "assembly: none (no system-prompt entry); digest covers the service names\n",
            );
        }
        return out;
    };
    out.push_str("sections (render order):\n");
    for s in assembly["sections"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {:>6}  {}\n",
            s["order"],
            s["name"].as_str().unwrap_or("")
        ));
    }
    let tools: Vec<&str> = assembly["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    out.push_str(&format!("tools (canonical order, {}):\n", tools.len()));
    for (i, t) in tools.iter().enumerate() {
        out.push_str(&format!("  {:>3}. {t}\n", i + 1));
    }
    out
}
