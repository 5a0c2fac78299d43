//! Live progress on stderr: a bar on a terminal, plain periodic lines otherwise.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use servelab_client::Progress;
use tokio::sync::oneshot;

/// A running display; [`Display::finish`] stops it.
pub struct Display {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Start a display reading `progress` (lock-free counters) a few times a second.
pub fn spawn(progress: Arc<Progress>, total: Option<u64>, enabled: bool) -> Display {
    if !enabled {
        return Display { stop: None, task: None };
    }
    let (tx, mut rx) = oneshot::channel();
    let terminal = std::io::stderr().is_terminal();
    let task = tokio::spawn(async move {
        let bar = terminal.then(|| {
            let bar = total.map_or_else(ProgressBar::new_spinner, ProgressBar::new);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        let start = Instant::now();
        let period = if terminal { Duration::from_millis(200) } else { Duration::from_secs(5) };
        let mut last_plain = Instant::now();
        loop {
            let done = tokio::select! {
                _ = tokio::time::sleep(period) => false,
                _ = &mut rx => true,
            };
            let line = status(&progress, start.elapsed());
            let finished = progress.completed.load(Ordering::Relaxed)
                + progress.failed.load(Ordering::Relaxed);
            match &bar {
                Some(b) => {
                    b.set_position(finished);
                    b.set_message(line);
                }
                None if !done && last_plain.elapsed() >= period => {
                    servelab_outputs::term::note(&format!(
                        "progress: {finished}{} {line}",
                        total.map_or(String::new(), |t| format!("/{t}"))
                    ));
                    last_plain = Instant::now();
                }
                None => {}
            }
            if done {
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
                break;
            }
        }
    });
    Display { stop: Some(tx), task: Some(task) }
}

fn status(p: &Progress, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let done = p.completed.load(Ordering::Relaxed);
    let failed = p.failed.load(Ordering::Relaxed);
    let tokens = p.tokens.load(Ordering::Relaxed);
    let running = p.started.load(Ordering::Relaxed).saturating_sub(done + failed);
    format!(
        "{:.1} req/s, {:.0} tok/s, {running} running, {failed} errors",
        done as f64 / secs,
        tokens as f64 / secs
    )
}

impl Display {
    pub async fn finish(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}
