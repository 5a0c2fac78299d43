//! YAML for Kubernetes manifests in which every string is quoted.
//!
//! A general YAML writer leaves a string plain when a YAML 1.2 reader takes it back as a
//! string; `2026-12-01T09:00:00.000Z` is such a string, but a YAML 1.1 reader (PyYAML, which
//! schema validators use) takes it as a timestamp, and an argument must be a string. So
//! strings are written as JSON strings (a subset of YAML's double-quoted scalars), or, when
//! they hold lines, as literal blocks, which are strings under every schema. Numbers,
//! booleans and null stay plain.

use serde_json::Value;

/// `v` as a block-style YAML document (ends with a newline).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A map key: plain when it is a name no YAML reader could take for anything else.
fn key(k: &str) -> String {
    let plain = k.starts_with(|c: char| c.is_ascii_alphabetic())
        && k.bytes().all(|c| c.is_ascii_alphanumeric() || b"._/-".contains(&c))
        // YAML 1.1 booleans.
        && !matches!(k.to_ascii_lowercase().as_str(), "y" | "n" | "yes" | "no" | "on" | "off"
            | "true" | "false");
    if plain {
        k.to_string()
    } else {
        quoted(k)
    }
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// A scalar, or an empty collection, on one line (a multi-line string as a literal block
/// whose lines are indented by `indent` + 2).
fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => block(s, indent + 2).unwrap_or_else(|| quoted(s)),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// A literal block (`|` keeps one final newline, `|-` none), when `s` has lines and reads
/// back exactly: no leading space on its first line (it would set the indentation), no
/// carriage returns or tabs, at most one final newline.
fn block(s: &str, indent: usize) -> Option<String> {
    let body = s.strip_suffix('\n').unwrap_or(s);
    let ok = body.contains('\n')
        && !body.ends_with('\n')
        && !body.starts_with(' ')
        && !s.contains(['\r', '\t'])
        && body.lines().all(|l| !l.trim().is_empty());
    if !ok {
        return None;
    }
    let mut out = String::from(if s.ends_with('\n') { "|" } else { "|-" });
    for line in body.lines() {
        out.push('\n');
        pad(&mut out, indent);
        out.push_str(line);
    }
    Some(out)
}

fn is_nested(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn map(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (k, v)) in m.iter().enumerate() {
        // The first entry of a map in a sequence item follows its `- `.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        out.push_str(&key(k));
        out.push(':');
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                map(out, inner, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                seq(out, items, indent + 2);
            }
            _ => {
                out.push(' ');
                out.push_str(&scalar(v, indent));
                out.push('\n');
            }
        }
    }
}

fn seq(out: &mut String, items: &[Value], indent: usize) {
    for v in items {
        pad(out, indent);
        out.push_str("- ");
        match v {
            Value::Object(inner) if is_nested(v) => map(out, inner, indent + 2),
            Value::Array(inner) if is_nested(v) => {
                out.push('\n');
                seq(out, inner, indent + 2);
            }
            _ => {
                out.push_str(&scalar(v, indent));
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_are_quoted_and_read_back_as_written() {
        let v = json!({
            "apiVersion": "batch/v1",
            "n": 16,
            "ok": false,
            "labels": {"app.kubernetes.io/name": "servelab", "on": "yes"},
            "args": ["bench", "--start-at", "2026-12-01T09:00:00.000Z", "1024", "it's \"x\""],
            "containers": [{"name": "shard", "env": [{"name": "A", "value": "16"}]}],
            "script": "dir=/r\nwhile :; do\n  sleep 10\ndone\n",
            "empty": {},
            "none": [],
        });
        let y = to_yaml(&v);
        // Keys in serde_json's order; `n` and `on` are YAML 1.1 booleans, so quoted.
        assert_eq!(
            y,
            "apiVersion: \"batch/v1\"\nargs:\n  - \"bench\"\n  - \"--start-at\"\n  - \
             \"2026-12-01T09:00:00.000Z\"\n  - \"1024\"\n  - \"it's \\\"x\\\"\"\ncontainers:\n  \
             - env:\n      - name: \"A\"\n        value: \"16\"\n    name: \"shard\"\nempty: {}\n\
             labels:\n  app.kubernetes.io/name: \"servelab\"\n  \"on\": \"yes\"\n\"n\": 16\n\
             none: []\nok: false\nscript: |\n  dir=/r\n  while :; do\n    sleep 10\n  done\n"
        );
        let back: Value = serde_yaml_ng::from_str(&y).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn awkward_multi_line_strings_fall_back_to_quotes() {
        for s in [" indented\nline", "a\n\nb", "a\r\nb", "a\n\n", "tab\there\nx"] {
            let v = json!({ "s": s });
            let back: Value = serde_yaml_ng::from_str(&to_yaml(&v)).unwrap();
            assert_eq!(back, v, "{s:?}");
        }
        assert_eq!(to_yaml(&json!({"s": "a\nb"})), "s: |-\n  a\n  b\n");
    }
}
