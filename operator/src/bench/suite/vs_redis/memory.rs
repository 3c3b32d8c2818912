//! The memory comparison: `FLUSHALL`, `used_memory` of the empty server, then exactly N
//! `SET key:<i> <value>` through `redis-cli --pipe` (redis-benchmark -r draws keys at random,
//! so it cannot guarantee N distinct keys), `DBSIZE` checked, then `INFO memory` and the
//! process's VmRSS, read only once both servers are loaded so each has idled alike.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context};

use super::super::server_process::ServerProcess;
use super::super::sync_client::SyncClient;
use super::SERVERS;

/// One server's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerMemory {
    pub used_memory_empty: u64,
    pub used_memory: u64,
    pub dbsize: u64,
    pub vmrss_kb: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub keys: u64,
    pub value_size: usize,
    /// In [`SERVERS`] order.
    pub servers: Vec<ServerMemory>,
}

fn used_memory(c: &mut SyncClient, name: &str) -> anyhow::Result<u64> {
    c.info("memory")?
        .get("used_memory")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{name}: INFO memory has no numeric used_memory"))
}

/// The same value for every key: the server stores it per key anyway, and a fixed value keeps
/// the load reproducible.
pub fn value(size: usize) -> Vec<u8> {
    b"0123456789abcdef"
        .iter()
        .copied()
        .cycle()
        .take(size)
        .collect()
}

/// Writes `SET <name(i)> <value>` for every `i` in `0..keys` as RESP into `path`: the input
/// of `redis-cli --pipe`.
pub fn write_set_commands(
    path: &Path,
    keys: u64,
    name: impl Fn(u64) -> String,
    value: &[u8],
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for i in 0..keys {
        let key = name(i);
        write!(
            out,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
            key.len(),
            value.len()
        )?;
        out.write_all(value)?;
        out.write_all(b"\r\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Sends the commands in `path` to `port` with `redis-cli --pipe`, which reports the replies
/// it got and the errors among them; fails unless it says `errors: 0`.
pub fn pipe_load(port: u16, path: &Path, name: &str) -> anyhow::Result<()> {
    let input = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::from(input))
        .output()
        .context("running redis-cli --pipe")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("errors: 0,") {
        bail!(
            "redis-cli --pipe into {name} failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

pub fn measure(
    servers: &mut [ServerProcess],
    clients: &mut [SyncClient],
    keys: u64,
    value_size: usize,
    commands: &mut Vec<String>,
    work: &Path,
) -> anyhow::Result<Memory> {
    let input = work.join("memory-load.resp");
    write_set_commands(&input, keys, |i| format!("key:{i}"), &value(value_size))?;
    let mut memory = Memory {
        keys,
        value_size,
        servers: vec![ServerMemory::default(); SERVERS.len()],
    };
    for (i, name) in SERVERS.iter().enumerate() {
        servers[i].check_alive()?;
        clients[i].text(&["FLUSHALL"])?;
        memory.servers[i].used_memory_empty = used_memory(&mut clients[i], name)?;
        eprintln!("bench vs-redis: loading {keys} keys x {value_size} B into {name}");
        commands.push(format!(
            "redis-cli -h 127.0.0.1 -p {} --pipe < memory-load.resp  # {keys} x SET key:<i> \
             <{value_size} bytes>",
            servers[i].port
        ));
        pipe_load(servers[i].port, &input, name)?;
        servers[i].check_alive()?;
    }
    for (i, name) in SERVERS.iter().enumerate() {
        let port = servers[i].port;
        commands.push(format!("redis-cli -h 127.0.0.1 -p {port} DBSIZE"));
        commands.push(format!("redis-cli -h 127.0.0.1 -p {port} INFO memory"));
        let dbsize: u64 = clients[i].text(&["DBSIZE"])?.parse()?;
        if dbsize != keys {
            bail!("{name}: DBSIZE is {dbsize}, expected {keys}");
        }
        memory.servers[i].dbsize = dbsize;
        memory.servers[i].used_memory = used_memory(&mut clients[i], name)?;
        memory.servers[i].vmrss_kb = servers[i].pid().and_then(super::super::rss_peak::vmrss_kb);
    }
    Ok(memory)
}
