//! The memory comparison: `FLUSHALL`, `used_memory` of the empty server, then exactly N
//! `SET key:<i> <value>` (pipelined through the client: redis-benchmark -r draws keys at
//! random, so it cannot guarantee N distinct keys), `DBSIZE` checked, then `INFO memory` and
//! the process's VmRSS, read only once both servers are loaded so each has idled alike.

use anyhow::{anyhow, bail};

use super::super::server_process::ServerProcess;
use super::super::sync_client::{error_text, SyncClient};
use super::{redis_benchmark, SERVERS};

/// SETs per pipeline while loading: memory stays small, writes large.
const LOAD_BATCH: u64 = 10_000;

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

fn load(c: &mut SyncClient, name: &str, keys: u64, value: &[u8]) -> anyhow::Result<()> {
    let mut start = 0;
    while start < keys {
        let end = (start + LOAD_BATCH).min(keys);
        let batch: Vec<Vec<Vec<u8>>> = (start..end)
            .map(|i| {
                vec![
                    b"SET".to_vec(),
                    format!("key:{i}").into_bytes(),
                    value.to_vec(),
                ]
            })
            .collect();
        for reply in c.pipeline(&batch)? {
            if let Some(message) = error_text(&reply) {
                bail!("loading keys into {name}: {message}");
            }
        }
        start = end;
    }
    Ok(())
}

pub fn measure(
    servers: &mut [ServerProcess],
    clients: &mut [SyncClient],
    keys: u64,
    value_size: usize,
    commands: &mut Vec<String>,
) -> anyhow::Result<Memory> {
    let value = value(value_size);
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
            "operator bench vs-redis: {keys} x SET key:<i> <{value_size} bytes>, pipelined \
             {LOAD_BATCH} at a time (port {})",
            servers[i].port
        ));
        load(&mut clients[i], name, keys, &value)?;
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
        memory.servers[i].vmrss_kb = servers[i].pid().and_then(redis_benchmark::vmrss_kb);
    }
    Ok(memory)
}
