//! `operator cli`: a redis-cli-like client. With a command on the command line it sends it once
//! and prints the reply (one-shot); without one it reads commands line by line (interactive).
//! Replies print in redis-cli's formatted form on a terminal and its raw form otherwise.

mod format;
mod repl;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

pub use format::{format_reply, quoted, OutputMode};
pub use repl::{run_lines, LINE_BYTES_MAX};

use crate::client::{Client, ClientError};
use crate::connect_args::ConnectArgs;

/// `operator cli` flags. `-h` is the host, as in redis-cli, so help is `--help` only.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
#[command(disable_help_flag = true)]
pub struct CliArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Print replies raw (the default when stdout is not a terminal).
    #[arg(long = "raw", conflicts_with = "no_raw")]
    pub raw: bool,
    /// Print replies formatted (the default on a terminal).
    #[arg(long = "no-raw")]
    pub no_raw: bool,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// The command to send once; without one, commands are read from stdin. Arguments go out
    /// as their bytes: they need not be UTF-8.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND",
        value_parser = clap::value_parser!(OsString)
    )]
    pub command: Vec<OsString>,
}

impl CliArgs {
    /// redis-cli's choice: formatted on a terminal, raw otherwise, unless forced.
    pub fn output_mode(&self, stdout_is_tty: bool) -> OutputMode {
        if self.raw {
            OutputMode::Raw
        } else if self.no_raw || stdout_is_tty {
            OutputMode::Formatted
        } else {
            OutputMode::Raw
        }
    }
}

/// Runs `operator cli`. Exit code 1 when the node cannot be reached or the connection fails;
/// error replies exit 0 as in redis-cli (they are printed, not failures of the tool).
pub fn run(args: CliArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let options = args.connect.options();
    let mode = args.output_mode(std::io::stdout().is_terminal());
    let mut client = match runtime.block_on(Client::connect(&options)) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if args.command.is_empty() {
        let stdin = std::io::stdin();
        let prompt = stdin
            .is_terminal()
            .then(|| format!("{}> ", options.target.host_port()));
        run_lines(
            &runtime,
            &options,
            client,
            &mut stdin.lock(),
            &mut std::io::stdout(),
            mode,
            prompt.as_deref(),
        )
    } else {
        one_shot(&runtime, &mut client, &args.command, mode)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn one_shot(
    runtime: &tokio::runtime::Runtime,
    client: &mut Client,
    command: &[OsString],
    mode: OutputMode,
) -> Result<(), ClientError> {
    let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
    let reply = runtime.block_on(client.request(&args))?;
    let mut stdout = std::io::stdout().lock();
    for push in client.take_pushes() {
        stdout.write_all(&format_reply(&push, mode))?;
    }
    stdout.write_all(&format_reply(&reply, mode))?;
    stdout.flush()?;
    Ok(())
}
