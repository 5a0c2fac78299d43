//! Text a server sent, made safe to print.
//!
//! An error body or an in-stream error message goes into a record's failure message, which
//! every report prints to a terminal. Control bytes in it (ESC starting an ANSI or OSC
//! sequence, BEL, CR, C1 controls such as CSI) would be obeyed by the terminal: recolour,
//! retitle, clear or rewrite what the user reads. They are escaped where the text enters a
//! record, so no downstream printer has to know.

use std::borrow::Cow;

/// `s` with every control character except `\n` and `\t`, and every bidirectional
/// formatting character (which can reorder what a terminal shows), written as a Rust escape
/// such as `\u{1b}`. Borrowed when there is nothing to escape.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`sanitize`] for an owned string: the same allocation back when it is clean.
pub fn sanitize_owned(s: String) -> String {
    match sanitize(&s) {
        Cow::Borrowed(_) => s,
        Cow::Owned(o) => o,
    }
}

fn needs_escape(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        // C0, DEL and C1 controls.
        c if c.is_control() => true,
        // Bidirectional marks, embeddings, overrides and isolates.
        '\u{061c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_controls_and_keeps_newlines_tabs_and_text() {
        assert_eq!(sanitize("a\u{1b}[31mred\u{7}"), "a\\u{1b}[31mred\\u{7}");
        assert_eq!(sanitize("\u{1b}]0;title\u{7}"), "\\u{1b}]0;title\\u{7}");
        assert_eq!(sanitize("over\rwrite\u{8}\u{7f}"), "over\\u{d}write\\u{8}\\u{7f}");
        assert_eq!(sanitize("csi\u{9b}2J nul\0"), "csi\\u{9b}2J nul\\u{0}");
        assert_eq!(sanitize("abc\u{202e}fed\u{2066}"), "abc\\u{202e}fed\\u{2066}");
        assert_eq!(
            sanitize("line\nnext\ttab h\u{e9}llo \u{1F600}"),
            "line\nnext\ttab h\u{e9}llo \u{1F600}"
        );
        assert!(matches!(sanitize("clean"), Cow::Borrowed("clean")));
        assert_eq!(sanitize_owned("x\u{1b}".into()), "x\\u{1b}");
    }
}
