//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key ...]
//!
//! The keys present here are serialized (DUMP payloads), sent to the target as one pipeline
//! (AUTH and SELECT when needed, then RESTORE, or RESTORE-ASKING in cluster mode, per key),
//! and every key the target acknowledged is deleted here unless COPY. Replies, errors and the
//! one retry on a broken cached link follow Redis 7.0's `migrateCommand`, checked against
//! redis-server 7.0.15: `OK`, `NOKEY`, `IOERR error or timeout writing|reading to target
//! instance`, `ERR Target instance replied with error: <its error>`.
//!
//! Why blocking I/O: commands run synchronously, under the locks of their keys' shards,
//! from the connection's task. MIGRATE does its network I/O right there on a std TcpStream
//! (opened through `services::MigrateDialer`, cached in `node_state::migrate_links`),
//! bounded by the command's timeout on every connect, write and read, and keeps the shard
//! locks throughout, so the keys cannot change between being serialized and being deleted:
//! the same atomicity Redis gets by blocking its event loop. The io runtime's worker hands
//! its other connections to a fresh thread first (`block_in_place`), so only clients
//! touching the locked shards wait (the cron's active expiry skips a busy shard rather than
//! wait for it), where Redis blocks every client for the transfer. A MIGRATE to this node itself therefore waits for
//! its timeout and fails with IOERR, as it does in Redis.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::migrate_links::{Line, Link, LinkError, MigrateLinks};
use crate::node_state::services::MigrateDialer;
use crate::snapshot_format::dump;
use smallvec::SmallVec;
use std::time::Duration;

/// The timeout used when the given one is 0 or negative (Redis's default), in ms.
const DEFAULT_TIMEOUT_MS: u64 = 1000;

const KEYS_WITH_KEY_ARG: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";

/// A parsed MIGRATE.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Migrate<'a> {
    pub host: &'a [u8],
    pub port: &'a [u8],
    pub keys: SmallVec<[&'a [u8]; 8]>,
    pub db: i64,
    pub timeout: Duration,
    pub copy: bool,
    pub replace: bool,
    /// AUTH2's username; as in Redis, a later AUTH changes only the password.
    pub username: Option<&'a [u8]>,
    pub password: Option<&'a [u8]>,
}

impl<'a> Migrate<'a> {
    /// Parses with Redis's order of checks: options first (syntax errors), then the timeout
    /// and the database as integers.
    pub fn parse(args: &[&'a [u8]]) -> Result<Migrate<'a>, CmdError> {
        let mut m = Migrate {
            host: args[1],
            port: args[2],
            keys: SmallVec::from_slice(&args[3..4]),
            db: 0,
            timeout: Duration::ZERO,
            copy: false,
            replace: false,
            username: None,
            password: None,
        };
        let mut j = 6;
        while j < args.len() {
            let more = args.len() - 1 - j;
            let a = args[j];
            if is(a, "copy") {
                m.copy = true;
            } else if is(a, "replace") {
                m.replace = true;
            } else if is(a, "auth") {
                if more < 1 {
                    return Err(CmdError::Syntax);
                }
                m.password = Some(args[j + 1]);
                j += 1;
            } else if is(a, "auth2") {
                if more < 2 {
                    return Err(CmdError::Syntax);
                }
                m.username = Some(args[j + 1]);
                m.password = Some(args[j + 2]);
                j += 2;
            } else if is(a, "keys") {
                if !args[3].is_empty() {
                    return err(KEYS_WITH_KEY_ARG);
                }
                m.keys = SmallVec::from_slice(&args[j + 1..]);
                break;
            } else {
                return Err(CmdError::Syntax);
            }
            j += 1;
        }
        let timeout = args::int(args[5])?;
        m.db = args::int(args[4])?;
        m.timeout = Duration::from_millis(if timeout <= 0 {
            DEFAULT_TIMEOUT_MS
        } else {
            timeout as u64
        });
        Ok(m)
    }

    /// The cache name of the target: `host:port` as the client wrote them.
    fn link_name(&self) -> String {
        format!(
            "{}:{}",
            String::from_utf8_lossy(self.host),
            String::from_utf8_lossy(self.port)
        )
    }
}

/// MIGRATE's key positions, as Redis's `migrateGetKeys`: argument 3, or every argument after
/// KEYS (skipping the values of AUTH and AUTH2 on the way); none when KEYS comes with a
/// non-empty key argument (the command then fails anyway).
pub(super) fn key_positions(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    let (mut first, mut end) = (3, 4.min(args.len()));
    let mut i = 6;
    while i < args.len() {
        let a = args[i];
        if is(a, "keys") {
            if !args[3].is_empty() {
                return SmallVec::new();
            }
            (first, end) = (i + 1, args.len());
            break;
        }
        if is(a, "auth") {
            i += 1;
        } else if is(a, "auth2") {
            i += 2;
        }
        i += 1;
    }
    (first..end).collect()
}

/// Where MIGRATE's secrets are: AUTH's password, AUTH2's username and password (up to KEYS,
/// after which every argument is a key).
pub(super) fn secret_positions(args: &[&[u8]]) -> SmallVec<[usize; 2]> {
    let mut secrets = SmallVec::new();
    let mut i = 6;
    while i < args.len() && !is(args[i], "keys") {
        if is(args[i], "auth") {
            secrets.extend((i + 1..i + 2).filter(|&j| j < args.len()));
            i += 1;
        } else if is(args[i], "auth2") {
            secrets.extend((i + 1..i + 3).filter(|&j| j < args.len()));
            i += 2;
        }
        i += 1;
    }
    secrets
}

/// A key to send: its name, relative TTL in ms (0: none) and payload.
struct Outgoing<'a> {
    key: &'a [u8],
    ttl_ms: i64,
    payload: Vec<u8>,
}

/// Appends a command as a RESP array of bulk strings.
fn put_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The pipeline for one attempt: AUTH if asked, SELECT if the link has another database
/// selected, then one restore per key.
fn pipeline(m: &Migrate<'_>, select: bool, restore: &[u8], keys: &[Outgoing<'_>]) -> Vec<u8> {
    let size: usize = keys
        .iter()
        .map(|k| k.key.len() + k.payload.len() + 64)
        .sum();
    let mut out = Vec::with_capacity(size + 128);
    match (m.username, m.password) {
        (Some(user), Some(pass)) => put_command(&mut out, &[b"AUTH", user, pass]),
        (None, Some(pass)) => put_command(&mut out, &[b"AUTH", pass]),
        _ => {}
    }
    if select {
        put_command(&mut out, &[b"SELECT", m.db.to_string().as_bytes()]);
    }
    for k in keys {
        let ttl = k.ttl_ms.to_string();
        let mut args: SmallVec<[&[u8]; 5]> =
            SmallVec::from_slice(&[restore, k.key, ttl.as_bytes(), &k.payload]);
        if m.replace {
            args.push(b"REPLACE");
        }
        put_command(&mut out, &args);
    }
    out
}

/// An attempt that could not read all replies before the RESTORE replies.
#[derive(Debug)]
struct Broken {
    writing: bool,
    timed_out: bool,
}

/// The replies of an attempt that reached the RESTORE replies.
#[derive(Debug, Default)]
struct Replies {
    /// Indexes (into the keys sent) of the keys the target restored.
    acked: Vec<usize>,
    /// The first error the target answered (AUTH's, SELECT's, or a RESTORE's).
    target_error: Option<String>,
    /// Reading stopped on this I/O error.
    socket_error: Option<LinkError>,
    /// RESTORE replies read before stopping.
    read: usize,
}

/// One attempt over `link`: writes the pipeline, then reads every reply.
fn exchange(
    link: &mut Link,
    m: &Migrate<'_>,
    restore: &[u8],
    keys: &[Outgoing<'_>],
) -> Result<Replies, Broken> {
    let broken = |writing: bool| {
        move |e: LinkError| Broken {
            writing,
            timed_out: e.timed_out,
        }
    };
    link.set_timeout(m.timeout).map_err(broken(true))?;
    let select = link.selected_db != Some(m.db);
    link.write_all(&pipeline(m, select, restore, keys))
        .map_err(broken(true))?;
    let auth = match m.password {
        Some(_) => Some(link.read_line().map_err(broken(false))?),
        None => None,
    };
    let selected = match select {
        true => Some(link.read_line().map_err(broken(false))?),
        false => None,
    };
    let mut r = Replies::default();
    for j in 0..keys.len() {
        let line = match link.read_line() {
            Ok(line) => line,
            Err(e) => {
                r.socket_error = Some(e);
                break;
            }
        };
        r.read += 1;
        let first_error = [&auth, &selected, &Some(line)]
            .into_iter()
            .find_map(|l| match l {
                Some(Line::Error(text)) => Some(text.clone()),
                _ => None,
            });
        match first_error {
            Some(text) => {
                link.selected_db = None;
                r.target_error.get_or_insert(text);
            }
            None => r.acked.push(j),
        }
    }
    Ok(r)
}

/// What a whole transfer came to.
#[derive(Debug)]
enum Outcome {
    Replied(Replies),
    /// Failed before the RESTORE replies (after the one retry Redis allows).
    Io {
        writing: bool,
    },
}

/// Runs the transfer over the cached link, or a new one from `dialer`, retrying once on a
/// fresh link when the cached one turns out broken before anything was restored (not after a
/// timeout).
fn transfer(
    links: &MigrateLinks,
    dialer: &dyn MigrateDialer,
    m: &Migrate<'_>,
    restore: &[u8],
    keys: &[Outgoing<'_>],
) -> Outcome {
    let name = m.link_name();
    let port = std::str::from_utf8(m.port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok());
    let host = String::from_utf8_lossy(m.host);
    let mut may_retry = true;
    loop {
        let link = match links.take(&name) {
            Some(link) => Ok(link),
            // An unusable port is a failed connect, as Redis's atoi gives port 0.
            None => match port {
                Some(port) => dialer
                    .connect(&host, port, m.timeout)
                    .map(Link::new)
                    .map_err(|e| Broken {
                        writing: true,
                        timed_out: e.timed_out,
                    }),
                None => Err(Broken {
                    writing: true,
                    timed_out: false,
                }),
            },
        };
        let result =
            link.and_then(|mut link| exchange(&mut link, m, restore, keys).map(|r| (link, r)));
        match result {
            Err(b) => {
                if may_retry && !b.timed_out {
                    may_retry = false;
                    continue;
                }
                return Outcome::Io { writing: b.writing };
            }
            Ok((mut link, r)) => {
                let retry_first_read = r.target_error.is_none()
                    && r.read == 0
                    && r.socket_error.as_ref().is_some_and(|e| !e.timed_out);
                if retry_first_read && may_retry {
                    may_retry = false;
                    continue;
                }
                if r.socket_error.is_none() {
                    if r.target_error.is_none() {
                        link.selected_db = Some(m.db);
                    }
                    links.give_back(name, link);
                }
                return Outcome::Replied(r);
            }
        }
    }
}

/// Runs blocking I/O from a command. On the io runtime the worker first hands its other
/// tasks to a fresh thread; elsewhere (fabric threads, loading at start) it just runs.
fn blocking_io<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The reply for a failure before the RESTORE replies or while reading them.
fn io_error(writing: bool) -> CmdError {
    CmdError::new(format!(
        "IOERR error or timeout {} to target instance",
        if writing { "writing" } else { "reading" }
    ))
}

pub(super) fn migrate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let m = Migrate::parse(args)?;
    let cluster = ctx.server.cluster.is_some();
    // The keys here now: missing and expired ones are left out (a key that expired since
    // it was listed is the common case, not an error).
    let now = ctx.db.now;
    let mut keys: Vec<Outgoing<'_>> = Vec::with_capacity(m.keys.len());
    for &key in &m.keys {
        if let Some(entry) = ctx.db.get(key) {
            let ttl_ms = match entry.expires_at {
                0 => 0,
                at => (at.saturating_sub(now)).max(1) as i64,
            };
            keys.push(Outgoing {
                key,
                ttl_ms,
                payload: dump::payload(&entry.value),
            });
        }
    }
    // Missing keys answer NOKEY whatever the database, as Redis (which leaves the database
    // to the target) answers them.
    if keys.is_empty() {
        ctx.reply.simple(b"NOKEY");
        return Ok(());
    }
    if cluster && m.db != 0 {
        return err("ERR destination-db must be 0 in cluster mode");
    }
    let restore: &[u8] = if cluster {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    let links = &ctx.server.migrate_links;
    let dialer = ctx.services.migrate_dialer();
    let outcome = blocking_io(|| transfer(links, dialer, &m, restore, &keys));
    let replies = match outcome {
        Outcome::Io { writing } => {
            tracing::debug!(target = %m.link_name(), writing, "MIGRATE failed");
            return Err(io_error(writing));
        }
        Outcome::Replied(r) => r,
    };
    if !m.copy {
        for &i in &replies.acked {
            if ctx.db.remove(keys[i].key).is_some() {
                ctx.modified(keys[i].key);
                // Replicas delete what moved; they must never migrate it themselves.
                if ctx.replicating {
                    let db = ctx.db.db_index();
                    ctx.effects.outgoing.key_removed(db, keys[i].key);
                }
            }
        }
    }
    if let Some(text) = replies.target_error {
        return Err(CmdError::new(format!(
            "ERR Target instance replied with error: {text}"
        )));
    }
    if replies.socket_error.is_some() {
        ctx.server.migrate_links.close(&m.link_name());
        return Err(io_error(false));
    }
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_state::migrate_links::LinkIo;
    use std::collections::VecDeque;
    use std::io;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    fn argv(line: &str) -> Vec<Vec<u8>> {
        line.split(' ')
            .map(|w| {
                if w == "\"\"" {
                    Vec::new()
                } else {
                    w.as_bytes().to_vec()
                }
            })
            .collect()
    }

    fn parse(line: &str) -> Result<(Vec<String>, Migrate<'static>), String> {
        let owned: &'static Vec<Vec<u8>> = Box::leak(Box::new(argv(line)));
        let args: &'static Vec<&'static [u8]> =
            Box::leak(Box::new(owned.iter().map(|a| a.as_slice()).collect()));
        let m = Migrate::parse(args).map_err(|e| e.to_string())?;
        let keys = m
            .keys
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        Ok((keys, m))
    }

    #[test]
    fn parses_as_redis() {
        let (keys, m) = parse("MIGRATE h 7000 k 0 500").unwrap();
        assert_eq!(keys, ["k"]);
        assert_eq!(
            (m.db, m.timeout, m.copy, m.replace),
            (0, Duration::from_millis(500), false, false)
        );
        let (keys, m) = parse("MIGRATE h 7000 \"\" 3 0 COPY replace AUTH pw KEYS a b").unwrap();
        assert_eq!(keys, ["a", "b"]);
        assert!(m.copy && m.replace);
        assert_eq!((m.username, m.password), (None, Some(&b"pw"[..])));
        assert_eq!(m.db, 3);
        // 0 and negative timeouts mean Redis's default.
        assert_eq!(m.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
        let (_, m) = parse("MIGRATE h 7000 k 0 -5 AUTH2 u p").unwrap();
        assert_eq!((m.username, m.password), (Some(&b"u"[..]), Some(&b"p"[..])));
        assert_eq!(m.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
        // KEYS with nothing after it: no keys (the command then answers NOKEY).
        assert!(parse("MIGRATE h 7000 \"\" 0 100 KEYS")
            .unwrap()
            .0
            .is_empty());
    }

    #[test]
    fn parse_errors_as_redis() {
        let e = |line: &str| parse(line).err().unwrap_or_default();
        assert_eq!(e("MIGRATE h 7000 k 0 100 bogus"), "ERR syntax error");
        assert_eq!(e("MIGRATE h 7000 k 0 100 AUTH"), "ERR syntax error");
        assert_eq!(e("MIGRATE h 7000 k 0 100 AUTH2 u"), "ERR syntax error");
        assert_eq!(e("MIGRATE h 7000 k 0 100 KEYS a"), KEYS_WITH_KEY_ARG);
        assert_eq!(
            e("MIGRATE h 7000 k 0 abc"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            e("MIGRATE h 7000 k x 100"),
            "ERR value is not an integer or out of range"
        );
        // Options are checked before the numbers.
        assert_eq!(e("MIGRATE h 7000 k x y bogus"), "ERR syntax error");
    }

    #[test]
    fn key_positions_as_redis() {
        let positions = |line: &str| {
            let owned = argv(line);
            let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
            key_positions(&args).to_vec()
        };
        assert_eq!(positions("MIGRATE h 1 k 0 5"), [3]);
        assert_eq!(positions("MIGRATE h 1 k 0 5 COPY"), [3]);
        assert_eq!(positions("MIGRATE h 1 \"\" 0 5 KEYS a b"), [7, 8]);
        // AUTH's password is not taken for the KEYS keyword.
        assert_eq!(positions("MIGRATE h 1 \"\" 0 5 AUTH keys KEYS a"), [9]);
        assert_eq!(
            positions("MIGRATE h 1 \"\" 0 5 AUTH2 keys keys KEYS a"),
            [10]
        );
        assert!(positions("MIGRATE h 1 k 0 5 KEYS a").is_empty());
    }

    #[test]
    fn secrets_are_auth_values_before_keys() {
        let secrets = |line: &str| {
            let owned = argv(line);
            let args: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
            secret_positions(&args).to_vec()
        };
        assert_eq!(secrets("MIGRATE h 1 k 0 5 COPY AUTH pw"), [8]);
        assert_eq!(secrets("MIGRATE h 1 k 0 5 AUTH2 u p REPLACE"), [7, 8]);
        assert_eq!(
            secrets("MIGRATE h 1 \"\" 0 5 KEYS auth x"),
            Vec::<usize>::new()
        );
        assert_eq!(secrets("MIGRATE h 1 k 0 5 AUTH"), Vec::<usize>::new());
    }

    #[test]
    fn the_pipeline_is_auth_select_then_restores() {
        let (_, m) = parse("MIGRATE h 1 \"\" 2 5 REPLACE AUTH2 u p KEYS a").unwrap();
        let keys = [
            Outgoing {
                key: b"a",
                ttl_ms: 0,
                payload: b"P".to_vec(),
            },
            Outgoing {
                key: b"b",
                ttl_ms: 1500,
                payload: b"QQ".to_vec(),
            },
        ];
        let bytes = pipeline(&m, true, b"RESTORE-ASKING", &keys);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n\
             *5\r\n$14\r\nRESTORE-ASKING\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nP\r\n$7\r\nREPLACE\r\n\
             *5\r\n$14\r\nRESTORE-ASKING\r\n$1\r\nb\r\n$4\r\n1500\r\n$2\r\nQQ\r\n$7\r\nREPLACE\r\n"
        );
        let (_, m) = parse("MIGRATE h 1 k 0 5").unwrap();
        let bytes = pipeline(&m, false, b"RESTORE", &keys[..1]);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "*4\r\n$7\r\nRESTORE\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nP\r\n"
        );
    }

    /// One scripted connection: what its reads return in turn (`Ok(line)`: that reply line;
    /// `Err(kind)`: that I/O error; nothing left: the target closed), and whether writes
    /// fail. What was written is kept for the test to look at.
    struct Script {
        write_error: Option<io::ErrorKind>,
        replies: VecDeque<Result<&'static str, io::ErrorKind>>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    fn script(replies: &[Result<&'static str, io::ErrorKind>]) -> Script {
        Script {
            write_error: None,
            replies: replies.iter().copied().collect(),
            written: Arc::default(),
        }
    }

    impl LinkIo for Script {
        fn set_timeout(&mut self, _: Duration) -> Result<(), LinkError> {
            Ok(())
        }
        fn write_all(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
            match self.write_error {
                Some(kind) => Err(io::Error::from(kind).into()),
                None => {
                    self.written.lock().unwrap().extend_from_slice(bytes);
                    Ok(())
                }
            }
        }
        fn read_line(&mut self) -> Result<Line, LinkError> {
            match self.replies.pop_front() {
                Some(Ok(line)) => Ok(match line.strip_prefix('-') {
                    Some(text) => Line::Error(text.into()),
                    None => Line::Ok,
                }),
                Some(Err(kind)) => Err(io::Error::from(kind).into()),
                None => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            }
        }
    }

    /// Hands out the scripted connections in turn; once they ran out, connects are refused.
    #[derive(Default)]
    struct Dialer {
        scripts: Mutex<VecDeque<Script>>,
        connects: AtomicUsize,
    }

    impl Dialer {
        fn new(scripts: Vec<Script>) -> Dialer {
            Dialer {
                scripts: Mutex::new(scripts.into()),
                connects: AtomicUsize::new(0),
            }
        }
    }

    impl MigrateDialer for Dialer {
        fn connect(&self, _: &str, _: u16, _: Duration) -> Result<Box<dyn LinkIo>, LinkError> {
            self.connects.fetch_add(1, Ordering::Relaxed);
            match self.scripts.lock().unwrap().pop_front() {
                Some(s) => Ok(Box::new(s)),
                None => Err(io::Error::from(io::ErrorKind::ConnectionRefused).into()),
            }
        }
    }

    const OK: Result<&str, io::ErrorKind> = Ok("+OK");

    fn two_keys() -> Vec<Outgoing<'static>> {
        ["a", "b"]
            .iter()
            .map(|k| Outgoing {
                key: k.as_bytes(),
                ttl_ms: 0,
                payload: b"P".to_vec(),
            })
            .collect()
    }

    fn run(links: &MigrateLinks, dialer: &Dialer, line: &str) -> Outcome {
        let (_, m) = parse(line).unwrap();
        transfer(links, dialer, &m, b"RESTORE", &two_keys())
    }

    const TO_T: &str = "MIGRATE t 7000 \"\" 0 2000 KEYS a b";

    #[test]
    fn acknowledged_keys_and_the_link_is_cached_with_its_database() {
        // SELECT (a new link has no database) and one reply per key; then two more replies
        // for the second MIGRATE over the same link.
        let links = MigrateLinks::default();
        let target = script(&[OK, OK, OK, OK, OK]);
        let sent = target.written.clone();
        let dialer = Dialer::new(vec![target]);
        let Outcome::Replied(r) = run(&links, &dialer, TO_T) else {
            panic!("no replies");
        };
        assert_eq!(r.acked, [0, 1]);
        assert!(r.target_error.is_none() && r.socket_error.is_none());
        let link = links.take("t:7000").expect("cached");
        assert_eq!(link.selected_db, Some(0));
        // The next MIGRATE to it reuses the link and sends no second SELECT.
        links.give_back("t:7000".into(), link);
        let Outcome::Replied(r) = run(&links, &dialer, TO_T) else {
            panic!("no replies");
        };
        assert_eq!(r.acked, [0, 1]);
        assert_eq!(dialer.connects.load(Ordering::Relaxed), 1);
        let sent = String::from_utf8_lossy(&sent.lock().unwrap()).into_owned();
        assert_eq!(sent.matches("SELECT").count(), 1, "{sent}");
        assert_eq!(sent.matches("RESTORE").count(), 4, "{sent}");
    }

    #[test]
    fn the_first_target_error_is_kept_and_other_keys_still_count() {
        let links = MigrateLinks::default();
        let busy = Ok("-BUSYKEY Target key name already exists.");
        let dialer = Dialer::new(vec![script(&[OK, busy, OK])]);
        let Outcome::Replied(r) = run(&links, &dialer, TO_T) else {
            panic!("no replies");
        };
        assert_eq!(r.acked, [1]);
        assert_eq!(
            r.target_error.as_deref(),
            Some("BUSYKEY Target key name already exists.")
        );
        // Still cached, but SELECT is sent again next time.
        let link = links.take("t:7000").expect("cached");
        assert_eq!(link.selected_db, None);
    }

    #[test]
    fn an_auth_error_fails_every_key() {
        let links = MigrateLinks::default();
        let dialer = Dialer::new(vec![script(&[Ok("-WRONGPASS bad"), OK, OK, OK])]);
        let Outcome::Replied(r) = run(
            &links,
            &dialer,
            "MIGRATE t 7000 \"\" 0 2000 AUTH x KEYS a b",
        ) else {
            panic!("no replies");
        };
        assert!(r.acked.is_empty());
        assert_eq!(r.target_error.as_deref(), Some("WRONGPASS bad"));
    }

    #[test]
    fn a_broken_cached_link_is_replaced_once() {
        // The cached link was closed by the target: its first read finds the end of stream.
        let links = MigrateLinks::default();
        let mut stale = Link::new(Box::new(script(&[])));
        stale.selected_db = Some(0);
        links.give_back("t:7000".into(), stale);
        let fresh = script(&[OK, OK, OK]);
        let sent = fresh.written.clone();
        let dialer = Dialer::new(vec![fresh]);
        let Outcome::Replied(r) = run(&links, &dialer, TO_T) else {
            panic!("no replies");
        };
        // The retry selected again (a new link has no database) and got both keys through.
        assert_eq!(r.acked, [0, 1], "{r:?}");
        assert!(String::from_utf8_lossy(&sent.lock().unwrap()).contains("SELECT"));
        // A cached link whose write fails is replaced the same way.
        let links = MigrateLinks::default();
        let mut stale = Link::new(Box::new(Script {
            write_error: Some(io::ErrorKind::BrokenPipe),
            ..script(&[])
        }));
        stale.selected_db = Some(0);
        links.give_back("t:7000".into(), stale);
        let dialer = Dialer::new(vec![script(&[OK, OK, OK])]);
        let Outcome::Replied(r) = run(&links, &dialer, TO_T) else {
            panic!("no replies");
        };
        assert_eq!(r.acked, [0, 1], "{r:?}");
    }

    #[test]
    fn a_silent_target_is_a_read_timeout_without_retry() {
        let links = MigrateLinks::default();
        let dialer = Dialer::new(vec![
            script(&[Err(io::ErrorKind::WouldBlock)]),
            script(&[OK, OK, OK]),
        ]);
        let outcome = run(&links, &dialer, TO_T);
        assert!(
            matches!(outcome, Outcome::Io { writing: false }),
            "{outcome:?}"
        );
        assert_eq!(dialer.connects.load(Ordering::Relaxed), 1, "retried");
        assert!(links.is_empty());
    }

    #[test]
    fn a_refused_connect_is_a_write_error() {
        let links = MigrateLinks::default();
        let dialer = Dialer::default();
        let outcome = run(&links, &dialer, TO_T);
        assert!(
            matches!(outcome, Outcome::Io { writing: true }),
            "{outcome:?}"
        );
        // A refused connect is not a timeout: asked once more, as Redis does.
        assert_eq!(dialer.connects.load(Ordering::Relaxed), 2);
        // A port that is not a number is a failed connect without dialing.
        let outcome = run(&links, &dialer, "MIGRATE t notaport \"\" 0 200 KEYS a b");
        assert!(
            matches!(outcome, Outcome::Io { writing: true }),
            "{outcome:?}"
        );
        assert_eq!(dialer.connects.load(Ordering::Relaxed), 2);
    }
}
