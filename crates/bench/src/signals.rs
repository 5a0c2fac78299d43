//! Interrupts: the first Ctrl-C or SIGTERM stops issuing and drains, so an interrupted run
//! (or one stopped by a job scheduler) still leaves a usable partial result.

use servelab_outputs::term;
use tokio::sync::watch;

/// What an interrupted bench or sweep does.
pub const DRAIN: &str = "no new requests; draining those in flight";

/// A flag that turns true on the first Ctrl-C or SIGTERM (so a job scheduler's stop leaves a
/// usable partial result, and a lab stops its engines); a second signal exits at once.
/// `what` says what stopping means, in the line printed.
pub fn interrupt_on_signals(what: &'static str) -> watch::Receiver<bool> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(false);
    // A file past `ulimit -f` raises SIGXFSZ, whose default kills the process with the run's
    // result unprinted. With a handler installed the write fails instead (EFBIG), and the
    // run reports it after the summary. 25 is SIGXFSZ on Linux and the BSDs.
    if let Ok(mut xfsz) = signal(SignalKind::from_raw(25)) {
        tokio::spawn(async move { while xfsz.recv().await.is_some() {} });
    }
    tokio::spawn(async move {
        let mut term_sig = signal(SignalKind::terminate()).ok();
        let mut next = async || {
            let t = async {
                match term_sig.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok().then_some("interrupted"),
                _ = t => Some("terminated"),
            }
        };
        if let Some(how) = next().await {
            term::note(&format!("\n{how}: {what} (interrupt again to quit now)"));
            let _ = tx.send(true);
            if next().await.is_some() {
                // Exit code 2, as for any runtime error.
                std::process::exit(2);
            }
        }
        // Keep the sender alive so receivers never see the flag's channel close.
        std::future::pending::<()>().await
    });
    rx
}
