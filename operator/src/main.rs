//! `operator`: parses the command line and hands over to the library.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let code = operator::command_line::run(operator::command_line::OperatorArgs::parse());
    // Fabric connections dropped just before exit still say goodbye to their nodes.
    operator::client::settle_fabric_connections(SETTLE_AT_EXIT);
    code
}

/// Longest the process waits at exit for its fabric connections' goodbyes (each takes a
/// round trip; the stream gives one at most `bus::stream::GOODBYE_WAIT`).
const SETTLE_AT_EXIT: Duration = Duration::from_millis(500);
