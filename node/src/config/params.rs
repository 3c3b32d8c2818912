//! Every configuration parameter the node understands, in one table. The same entries parse
//! config files and flags, answer `CONFIG GET` and `CONFIG SET`, and write `CONFIG REWRITE`.

use super::units::{format_bool, parse_bool, parse_memory};
use proto::resp::limits::DEFAULT_MAX_BULK_LEN;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    VolatileLru,
    AllKeysRandom,
    VolatileRandom,
    VolatileTtl,
}

impl EvictionPolicy {
    const NAMES: [(EvictionPolicy, &'static str); 6] = [
        (EvictionPolicy::NoEviction, "noeviction"),
        (EvictionPolicy::AllKeysLru, "allkeys-lru"),
        (EvictionPolicy::VolatileLru, "volatile-lru"),
        (EvictionPolicy::AllKeysRandom, "allkeys-random"),
        (EvictionPolicy::VolatileRandom, "volatile-random"),
        (EvictionPolicy::VolatileTtl, "volatile-ttl"),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("noeviction")
    }

    fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
    }
}

/// A `save <seconds> <changes>` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveRule {
    pub seconds: u64,
    pub changes: u64,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub protected_mode: bool,
    pub requirepass: Option<String>,
    /// Close idle clients after this many seconds (0: never).
    pub timeout: u64,
    pub maxclients: u64,
    pub io_threads: usize,
    pub tcp_backlog: u32,
    pub tcp_keepalive: u64,
    pub dir: PathBuf,
    pub dbfilename: String,
    pub save: Vec<SaveRule>,
    pub maxmemory: u64,
    pub maxmemory_policy: EvictionPolicy,
    pub maxmemory_samples: u32,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    pub loglevel: String,
    pub logfile: String,
    pub pidfile: String,
    pub hz: u32,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    pub databases: u32,
    pub rdbchecksum: bool,
    /// The file this configuration came from (for CONFIG REWRITE).
    pub file: Option<PathBuf>,
}

/// Defaults follow redis-server's, except `io-threads` which defaults to min(cores/2, 8).
impl Default for Config {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Config {
            port: 6379,
            bind: vec!["*".into(), "-::*".into()],
            protected_mode: true,
            requirepass: None,
            timeout: 0,
            maxclients: 10000,
            io_threads: (cores / 2).clamp(1, 8),
            tcp_backlog: 511,
            tcp_keepalive: 300,
            dir: PathBuf::from("."),
            dbfilename: "dump.snap".into(),
            save: vec![
                SaveRule {
                    seconds: 3600,
                    changes: 1,
                },
                SaveRule {
                    seconds: 300,
                    changes: 100,
                },
                SaveRule {
                    seconds: 60,
                    changes: 10000,
                },
            ],
            maxmemory: 0,
            maxmemory_policy: EvictionPolicy::NoEviction,
            maxmemory_samples: 5,
            proto_max_bulk_len: DEFAULT_MAX_BULK_LEN as u64,
            client_query_buffer_limit: 1 << 30,
            loglevel: "notice".into(),
            logfile: String::new(),
            pidfile: String::new(),
            hz: 10,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            databases: 1,
            rdbchecksum: true,
            file: None,
        }
    }
}

/// Most bytes one client may have buffered for an incomplete command. The parser keeps u32
/// offsets, so this cannot exceed 4 GiB; Redis's default is 1 GiB.
pub const MAX_QUERY_BUFFER_LIMIT: u64 = u32::MAX as u64;
/// Most io-threads: more buy nothing on the machines this runs on and cost memory.
pub const MAX_IO_THREADS: usize = 128;
/// Most clients a node accepts; each costs at least a socket and two buffers.
pub const MAX_MAXCLIENTS: u64 = 1_000_000;

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &str) -> Result<(), String>;

pub struct Param {
    pub name: &'static str,
    pub get: Getter,
    pub set: Setter,
    /// Whether CONFIG SET may change it on a running node.
    pub runtime: bool,
}

fn num<T>(v: &str, min: T, max: T) -> Result<T, String>
where
    T: TryFrom<i128> + TryInto<i128> + std::fmt::Display + Copy,
{
    let n: i128 = v
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    let (lo, hi): (i128, i128) = (
        min.try_into().unwrap_or(i128::MIN),
        max.try_into().unwrap_or(i128::MAX),
    );
    if n < lo || n > hi {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    T::try_from(n).map_err(|_| format!("argument must be between {min} and {max} inclusive"))
}

fn boolean(v: &str) -> Result<bool, String> {
    parse_bool(v).ok_or_else(|| "argument must be 'yes' or 'no'".to_string())
}

fn memory(v: &str, max: u64) -> Result<u64, String> {
    let n = parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())?;
    if n > max {
        return Err(format!(
            "argument must be a memory value of at most {max} bytes"
        ));
    }
    Ok(n)
}

fn save_rules(v: &str) -> Result<Vec<SaveRule>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || (words.len() == 1 && words[0].is_empty()) {
        return Ok(Vec::new());
    }
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|c| match (c[0].parse::<u64>(), c[1].parse::<u64>()) {
            (Ok(seconds), Ok(changes)) => Ok(SaveRule { seconds, changes }),
            _ => Err("Invalid save parameters".into()),
        })
        .collect()
}

macro_rules! param {
    ($name:literal, $runtime:expr, |$c:ident| $get:expr, |$cs:ident, $v:ident| $set:expr) => {
        Param {
            name: $name,
            runtime: $runtime,
            get: |$c: &Config| $get,
            set: |$cs: &mut Config, $v: &str| $set,
        }
    };
}

pub static PARAMS: &[Param] = &[
    param!("port", false, |c| c.port.to_string(), |c, v| {
        c.port = num(v, 0, 65535)?;
        Ok(())
    }),
    param!("bind", false, |c| c.bind.join(" "), |c, v| {
        c.bind = v.split_whitespace().map(String::from).collect();
        if c.bind.is_empty() {
            return Err("at least one bind address is needed".into());
        }
        Ok(())
    }),
    param!(
        "protected-mode",
        true,
        |c| format_bool(c.protected_mode),
        |c, v| {
            c.protected_mode = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "requirepass",
        true,
        |c| c.requirepass.clone().unwrap_or_default(),
        |c, v| {
            c.requirepass = if v.is_empty() {
                None
            } else {
                Some(v.to_string())
            };
            Ok(())
        }
    ),
    param!("timeout", true, |c| c.timeout.to_string(), |c, v| {
        c.timeout = num(v, 0, i32::MAX as u64)?;
        Ok(())
    }),
    param!("maxclients", true, |c| c.maxclients.to_string(), |c, v| {
        c.maxclients = num(v, 1, MAX_MAXCLIENTS)?;
        Ok(())
    }),
    param!("io-threads", false, |c| c.io_threads.to_string(), |c, v| {
        c.io_threads = num(v, 1, MAX_IO_THREADS)?;
        Ok(())
    }),
    param!(
        "tcp-backlog",
        false,
        |c| c.tcp_backlog.to_string(),
        |c, v| {
            c.tcp_backlog = num(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "tcp-keepalive",
        true,
        |c| c.tcp_keepalive.to_string(),
        |c, v| {
            c.tcp_keepalive = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!("dir", true, |c| c.dir.display().to_string(), |c, v| {
        let p = PathBuf::from(v);
        if !p.is_dir() {
            return Err(format!("No such directory: {v}"));
        }
        c.dir = p;
        Ok(())
    }),
    param!("dbfilename", true, |c| c.dbfilename.clone(), |c, v| {
        if v.is_empty() || v.contains('/') {
            return Err("dbfilename can't be a path, just a filename".into());
        }
        c.dbfilename = v.to_string();
        Ok(())
    }),
    param!(
        "save",
        true,
        |c| c
            .save
            .iter()
            .map(|r| format!("{} {}", r.seconds, r.changes))
            .collect::<Vec<_>>()
            .join(" "),
        |c, v| {
            c.save = save_rules(v)?;
            Ok(())
        }
    ),
    param!("maxmemory", true, |c| c.maxmemory.to_string(), |c, v| {
        c.maxmemory = memory(v, u64::MAX)?;
        Ok(())
    }),
    param!(
        "maxmemory-policy",
        true,
        |c| c.maxmemory_policy.name().to_string(),
        |c, v| {
            c.maxmemory_policy = EvictionPolicy::parse(v).ok_or_else(|| "argument(s) must be one of the following: volatile-lru, allkeys-lru, volatile-random, allkeys-random, volatile-ttl, noeviction".to_string())?;
            Ok(())
        }
    ),
    param!(
        "maxmemory-samples",
        true,
        |c| c.maxmemory_samples.to_string(),
        |c, v| {
            c.maxmemory_samples = num(v, 1, 64)?;
            Ok(())
        }
    ),
    param!(
        "proto-max-bulk-len",
        true,
        |c| c.proto_max_bulk_len.to_string(),
        |c, v| {
            c.proto_max_bulk_len = memory(v, 1 << 32)?.max(1024 * 1024);
            Ok(())
        }
    ),
    param!(
        "client-query-buffer-limit",
        true,
        |c| c.client_query_buffer_limit.to_string(),
        |c, v| {
            c.client_query_buffer_limit = memory(v, MAX_QUERY_BUFFER_LIMIT)?.max(1024 * 1024);
            Ok(())
        }
    ),
    param!("loglevel", true, |c| c.loglevel.clone(), |c, v| {
        let v = v.to_ascii_lowercase();
        if !["debug", "verbose", "notice", "warning", "nothing"].contains(&v.as_str()) {
            return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
        }
        c.loglevel = v;
        Ok(())
    }),
    param!("logfile", false, |c| c.logfile.clone(), |c, v| {
        c.logfile = v.to_string();
        Ok(())
    }),
    param!("pidfile", false, |c| c.pidfile.clone(), |c, v| {
        c.pidfile = v.to_string();
        Ok(())
    }),
    param!("hz", true, |c| c.hz.to_string(), |c, v| {
        c.hz = num(v, 1, 500)?;
        Ok(())
    }),
    param!(
        "slowlog-log-slower-than",
        true,
        |c| c.slowlog_log_slower_than.to_string(),
        |c, v| {
            c.slowlog_log_slower_than = num(v, -1, i64::MAX)?;
            Ok(())
        }
    ),
    param!(
        "slowlog-max-len",
        true,
        |c| c.slowlog_max_len.to_string(),
        |c, v| {
            c.slowlog_max_len = num(v, 0, 1_000_000)?;
            Ok(())
        }
    ),
    param!("databases", false, |c| c.databases.to_string(), |c, v| {
        // One database (0) per node, as in Redis Cluster; accept configs that say 16.
        c.databases = num(v, 1, 16)?;
        Ok(())
    }),
    param!(
        "rdbchecksum",
        true,
        |c| format_bool(c.rdbchecksum),
        |c, v| {
            c.rdbchecksum = boolean(v)?;
            Ok(())
        }
    ),
    param!("appendonly", true, |_c| "no".into(), |_c, v| {
        if boolean(v)? {
            return Err(
                "append-only files are not supported; snapshots are (save, SAVE, BGSAVE)".into(),
            );
        }
        Ok(())
    }),
    param!("daemonize", false, |_c| "no".into(), |_c, v| {
        if boolean(v)? {
            return Err("daemonize yes is not supported: run under a supervisor".into());
        }
        Ok(())
    }),
];

pub fn find(name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

impl Config {
    /// Sets one parameter from its text form (config line, flag or CONFIG SET value).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let param = find(name).ok_or_else(|| {
            format!("Unknown option or number of arguments for CONFIG SET - '{name}'")
        })?;
        (param.set)(self, value)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        find(name).map(|p| (p.get)(self))
    }

    /// The address of the snapshot file.
    pub fn snapshot_path(&self) -> PathBuf {
        self.dir.join(&self.dbfilename)
    }
}
