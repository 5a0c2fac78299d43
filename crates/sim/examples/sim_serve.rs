//! Run the simulated engine as its own process (what `servelab sim serve` does), for
//! scripts/sim-precision.sh: `cargo run --release -p servelab-sim --example sim_serve -- --port 0`.

use clap::Parser;

#[derive(Parser)]
#[command(about = "servelab's simulated OpenAI-compatible engine")]
struct Cli {
    #[command(flatten)]
    sim: servelab_sim::SimArgs,
}

#[tokio::main]
#[allow(clippy::print_stderr)]
async fn main() -> std::process::ExitCode {
    match servelab_sim::serve(Cli::parse().sim, |line| eprintln!("{line}")).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
