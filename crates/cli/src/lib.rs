//! The `servelab` command: parse, resolve settings, call the library stages.
//!
//! `main` only calls [`main_with`]; tests call [`bench::run`] with settings they build.

pub mod bench;
pub mod cli;
pub mod exit;
pub mod lab_cmd;
pub mod progress;
pub mod settings;
pub mod store_cmd;
pub mod sweep_cmd;
pub mod time;

use std::io::Write;

use clap::Parser;
use tokio::sync::watch;

pub use exit::{ExitStatus, Failure};

/// Parse `args`, run the command, print results, and say how to exit.
pub fn main_with(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitStatus {
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { ExitStatus::Error } else { ExitStatus::Success };
            let _ = e.print();
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitStatus::Error;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(status) => status,
        Err(f) => {
            eprintln!("error: {f}");
            f.status()
        }
    }
}

async fn dispatch(cli: cli::Cli) -> Result<ExitStatus, Failure> {
    match cli.command {
        cli::Command::Sim(cli::SimCommand::Serve(args)) => {
            servelab_sim::serve(*args).await.map_err(Failure::runtime)?;
            Ok(ExitStatus::Success)
        }
        cli::Command::Sweep(args) => sweep_cmd::run(*args, interrupt_on_ctrl_c()).await,
        cli::Command::Runs(cmd) => store_cmd::runs(cmd).await,
        cli::Command::Compare(args) => store_cmd::compare(*args).await,
        cli::Command::Report(args) => store_cmd::report(*args).await,
        cli::Command::Lab(cmd) => lab_cmd::run(cmd, interrupt_on_ctrl_c()).await,
        cli::Command::Bench(args) => {
            let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty());
            let settings =
                settings::BenchSettings::from_args(*args, api_key).map_err(Failure::usage)?;
            let interrupt = interrupt_on_ctrl_c();
            let out = bench::run(&settings, interrupt).await?;
            let text = servelab_outputs::text::render(&out.summary);
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth reporting.
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            Ok(ExitStatus::Success)
        }
    }
}

/// A flag that turns true on the first Ctrl-C; a second Ctrl-C exits at once.
fn interrupt_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ninterrupted: no new requests; draining those in flight (Ctrl-C again to quit now)");
            let _ = tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(ExitStatus::Error as i32);
            }
        }
    });
    rx
}
