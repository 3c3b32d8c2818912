//! `operator`: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "operator",
    version,
    about = "Client tools for the node: cli and bench"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A redis-cli-like client: one-shot (`operator cli SET k v`) or interactive.
    Cli(operator::cli::CliArgs),
    /// A redis-benchmark-like load generator with HDR latency percentiles.
    Bench(operator::bench::BenchArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Args::parse().command {
        Command::Cli(args) => operator::cli::run(args),
        Command::Bench(args) => operator::bench::run(args),
    }
}
