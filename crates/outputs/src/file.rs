//! Names of the files servelab writes.

/// A name (scenario, trial) made safe as a file name: `[A-Za-z0-9._-]`, anything else becomes `_`.
pub fn file_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_safe_names() {
        assert_eq!(file_safe("chat/long 1"), "chat_long_1");
        assert_eq!(file_safe(".."), "_..");
    }
}
