//! The interactive loop: one command per line, split with redis-cli's quoting rules
//! (`proto::resp::splitargs`), its reply printed; `quit`/`exit` or end of input stops it.
//! A lost connection is reported and re-opened for the next command.

use std::io::{BufRead, Read, Write};

use proto::resp::splitargs::split_args;

use super::format::{format_reply, OutputMode};
use crate::client::{Client, ClientError, ConnectOptions};

/// Longest input line accepted, in bytes: big enough for a pasted large value, small enough
/// that a runaway input without newlines cannot take all memory. Longer lines are refused.
pub const LINE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Reads commands from `input` until end of input or `quit`/`exit`, printing replies to `out`.
/// `prompt` is shown before each line when given (a terminal). Returns an error only when the
/// connection is lost and cannot be opened again, or output fails.
pub fn run_lines(
    runtime: &tokio::runtime::Runtime,
    options: &ConnectOptions,
    client: Client,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    mode: OutputMode,
    prompt: Option<&str>,
) -> Result<(), ClientError> {
    let mut client = Some(client);
    let mut line = Vec::new();
    let mut args = Vec::new();
    loop {
        if let Some(prompt) = prompt {
            out.write_all(prompt.as_bytes())?;
            out.flush()?;
        }
        line.clear();
        let read = (&mut *input)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(());
        }
        if line.len() > LINE_BYTES_MAX {
            skip_rest_of_line(input)?;
            writeln!(out, "Line longer than {LINE_BYTES_MAX} bytes, ignored")?;
            continue;
        }
        args.clear();
        if !split_args(&line, &mut args) {
            writeln!(out, "Invalid argument(s)")?;
            continue;
        }
        let Some(name) = args.first() else {
            continue;
        };
        if name.eq_ignore_ascii_case(b"quit") || name.eq_ignore_ascii_case(b"exit") {
            return Ok(());
        }
        let connected = match client.take() {
            Some(connected) => connected,
            None => {
                tracing::debug!(target = %options.target, "reconnecting");
                runtime.block_on(Client::connect(options))?
            }
        };
        let connected = client.insert(connected);
        let result = runtime.block_on(connected.request(&args));
        for push in connected.take_pushes() {
            out.write_all(&format_reply(&push, mode))?;
        }
        match result {
            Ok(reply) => out.write_all(&format_reply(&reply, mode))?,
            Err(e) => {
                if e.is_fatal() {
                    tracing::debug!(error = %e, "connection lost; reconnecting on the next command");
                    client = None;
                }
                writeln!(out, "Error: {e}")?;
            }
        }
        out.flush()?;
    }
}

/// Discards input up to and including the next newline, in bounded reads.
fn skip_rest_of_line(input: &mut dyn BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}
