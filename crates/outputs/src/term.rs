//! The terminal: the one place servelab writes to stdout and stderr.
//!
//! Text that came from a server (error messages, model names) can hold escape sequences that
//! would move the cursor or retitle the terminal; every line written here has its control
//! characters (except newline and tab) made visible first.

use std::borrow::Cow;
use std::io::Write;

/// `s` with control characters other than `\n` and `\t` written as `\u{..}` escapes.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Write `text` to stdout as it is (a report). A closed pipe (`| head`) is not an error
/// worth reporting.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(sanitize(text).as_bytes());
    let _ = out.flush();
}

/// One line of information on stderr.
#[allow(clippy::print_stderr)]
pub fn note(line: &str) {
    eprintln!("{}", sanitize(line));
}

/// `warning: ...` on stderr.
pub fn warn(message: &str) {
    note(&format!("warning: {message}"));
}

/// `error: ...` on stderr.
pub fn error(message: &str) {
    note(&format!("error: {message}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(sanitize("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(sanitize("a\u{1b}]0;pwned\u{7}b"), "a\\u{1b}]0;pwned\\u{7}b");
        assert_eq!(sanitize("\r\u{9b}x"), "\\u{d}\\u{9b}x");
    }
}
