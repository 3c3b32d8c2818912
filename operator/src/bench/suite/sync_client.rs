//! The project's client ([`crate::client::Client`]) used from plain threads, as the suites'
//! drivers are written: each connection owns a current-thread runtime, and every request has
//! a deadline (a server that holds a reply longer counts as not answering).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail};
use proto::resp::Frame;

pub use crate::client::error_text;
use crate::client::{Client, ConnectOptions, Target};

/// One TCP connection to a server on 127.0.0.1.
pub struct SyncClient {
    runtime: tokio::runtime::Runtime,
    client: Client,
    timeout: Duration,
}

impl std::fmt::Debug for SyncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncClient").finish_non_exhaustive()
    }
}

impl SyncClient {
    /// Connects to `127.0.0.1:port`; connecting and each later request may take `timeout`.
    pub fn connect(port: u16, timeout: Duration) -> anyhow::Result<SyncClient> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut options = ConnectOptions::new(Target::tcp("127.0.0.1", port));
        options.connect_timeout = timeout;
        let client = runtime
            .block_on(async { tokio::time::timeout(timeout, Client::connect(&options)).await })
            .map_err(|_| anyhow!("port {port}: connect timed out"))?
            .map_err(|e| anyhow!("port {port}: {e}"))?;
        Ok(SyncClient {
            runtime,
            client,
            timeout,
        })
    }

    /// Sends one command; its reply (an error reply is a frame too).
    pub fn request<A: AsRef<[u8]>>(&mut self, args: &[A]) -> anyhow::Result<Frame> {
        let (client, timeout) = (&mut self.client, self.timeout);
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, client.request(args)).await })
            .map_err(|_| anyhow!("no reply within {} ms", timeout.as_millis()))?
            .map_err(|e| anyhow!("{e}"))
    }

    /// Sends all commands in one write and reads their replies, in order.
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, commands: &[Vec<A>]) -> anyhow::Result<Vec<Frame>> {
        let (client, timeout) = (&mut self.client, self.timeout);
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, client.pipeline(commands)).await })
            .map_err(|_| anyhow!("no replies within {} ms", timeout.as_millis()))?
            .map_err(|e| anyhow!("{e}"))
    }

    /// A command whose reply is text (status, bulk, verbatim, integer); an error reply is an
    /// error.
    pub fn text(&mut self, args: &[&str]) -> anyhow::Result<String> {
        let reply = self.request(args)?;
        if let Some(message) = error_text(&reply) {
            bail!("{}: {message}", args.join(" "));
        }
        frame_text(&reply).ok_or_else(|| anyhow!("{}: unexpected reply {reply:?}", args[0]))
    }

    /// The `field:value` lines of an INFO section.
    pub fn info(&mut self, section: &str) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(info_fields(&self.text(&["INFO", section])?))
    }
}

/// Whether a server answers PING on `127.0.0.1:port` within a second.
pub fn answers_ping(port: u16) -> bool {
    SyncClient::connect(port, Duration::from_secs(1))
        .and_then(|mut c| c.text(&["PING"]))
        .is_ok_and(|reply| reply == "PONG")
}

/// A reply as text: status, bulk and verbatim strings, integers.
pub fn frame_text(frame: &Frame) -> Option<String> {
    match frame {
        Frame::Integer(n) => Some(n.to_string()),
        other => other
            .as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
    }
}

/// `field:value` lines of an INFO text (section headers and blank lines skipped).
pub fn info_fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// CLUSTER SLOTS as the owner's port per slot (0 where none is listed).
pub fn slot_ports(reply: &Frame) -> anyhow::Result<Vec<u16>> {
    let mut ports = vec![0u16; proto::slot::SLOT_COUNT];
    let Frame::Array(entries) = reply else {
        bail!("CLUSTER SLOTS: unexpected reply {reply:?}");
    };
    for entry in entries {
        let Frame::Array(fields) = entry else {
            bail!("CLUSTER SLOTS: an entry is not an array");
        };
        let number = |f: Option<&Frame>| match f {
            Some(Frame::Integer(n)) => Some(*n),
            _ => None,
        };
        let owner_port = match fields.get(2) {
            Some(Frame::Array(owner)) => number(owner.get(1)),
            _ => None,
        };
        let (Some(first), Some(last), Some(port)) =
            (number(fields.first()), number(fields.get(1)), owner_port)
        else {
            bail!("CLUSTER SLOTS: malformed entry {entry:?}");
        };
        let (first, last) = (
            first.clamp(0, 16383) as usize,
            last.clamp(0, 16383) as usize,
        );
        for slot in ports.iter_mut().take(last + 1).skip(first) {
            *slot = u16::try_from(port).unwrap_or(0);
        }
    }
    Ok(ports)
}
