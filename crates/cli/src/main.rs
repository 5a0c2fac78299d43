//! The servelab binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    servelab::main_with(std::env::args_os()).into()
}
