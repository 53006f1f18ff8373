//! The `tuneloop` binary: parse arguments, run the command, map its outcome to
//! the exit codes of docs/configuration.md.

use clap::Parser;

fn main() {
    let cli = tuneloop::cli::Cli::parse();
    let interrupt = tuneloop::process::Interrupt::new();
    let code = match tuneloop::cli::run(cli, interrupt) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("error: {}", tuneloop::error::render(&f.error));
            f.code
        }
    };
    std::process::exit(code);
}
