//! The HTML pages as a reader's browser shows them: headless Chromium renders a page, for the
//! tests that check the reports (charts in the DOM, no script error). Only with the
//! `browser-check` feature, which the crates that write pages enable for their tests.

use std::path::Path;
use std::process::{Command, Output};

/// Where Debian's `chromium` package installs the browser (`.ci/run` installs it).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium, if installed. Without it a check is skipped with a line on stderr naming
/// `check`, unless `SERVELAB_REQUIRE_BROWSER=1` (CI with Chromium), which makes that a failure.
///
/// # Panics
/// When Chromium is missing and `SERVELAB_REQUIRE_BROWSER=1`.
#[allow(clippy::print_stderr)] // a skipped check must say so where the test runner shows it
pub fn chromium(check: &str) -> Option<&'static Path> {
    let exe = Path::new(CHROMIUM);
    if exe.exists() {
        return Some(exe);
    }
    assert!(
        std::env::var("SERVELAB_REQUIRE_BROWSER").as_deref() != Ok("1"),
        "SERVELAB_REQUIRE_BROWSER=1 but {CHROMIUM} is not there"
    );
    eprintln!("SKIPPED {check}: {CHROMIUM} not found (apt-get install -y chromium)");
    None
}

/// Run headless Chromium on the page file `page` with a fresh profile in `profile` and the
/// flags `extra` (e.g. `--screenshot=FILE`). No network: this machine's closed network would
/// otherwise refuse its background connections at every start.
///
/// # Panics
/// When Chromium cannot be started.
pub fn run(exe: &Path, page: &Path, profile: &Path, extra: &[&str]) -> Output {
    Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

/// The DOM of `page` after its scripts ran, and the browser's log (console messages and
/// script errors appear there as `CONSOLE` and `Uncaught`).
pub fn dump_dom(exe: &Path, page: &Path, profile: &Path) -> (String, String) {
    let out = run(
        exe,
        page,
        profile,
        &["--enable-logging=stderr", "--v=0", "--dump-dom", "--virtual-time-budget=2000"],
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
