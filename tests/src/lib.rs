//! The integration-test harness: starts real `node` processes in temporary directories and
//! hands out clients (the `redis` crate, and the `redis-cli` binary).
//!
//! A node is killed when its handle drops; its log stays in its directory, whose path a
//! failing test prints.

pub mod cluster;
pub mod module_graph;
pub mod raw;
pub mod reference;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a node may take to answer PING after it was started.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// The node binary: `$NODE_BIN`, or the workspace's debug build, built on first use.
pub fn node_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| workspace_binary("NODE_BIN", "node"))
        .clone()
}

/// The operator binary (`operator cli`, `operator bench`): `$OPERATOR_BIN`, or the workspace's
/// debug build, built on first use.
pub fn operator_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| workspace_binary("OPERATOR_BIN", "operator"))
        .clone()
}

/// The rogue fabric client (`bus/examples/fabric_rogue`): `$ROGUE_BIN`, or the workspace's
/// debug build of the example, built on first use.
pub fn rogue_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(path) = std::env::var("ROGUE_BIN") {
            return PathBuf::from(path);
        }
        cargo_build(&["--example", "fabric_rogue"], "fabric_rogue");
        target_dir().join("debug/examples/fabric_rogue")
    })
    .clone()
}

fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_dir().join("target"))
}

/// `cargo build --workspace ARGS`: the workspace's feature resolution, so a tree already
/// built with `cargo build --workspace --bins` (or the test run's own build) is reused;
/// `-p NAME` resolves features per package and rebuilds ring, rustls and tonic in a fresh
/// target (about 45 s).
fn cargo_build(args: &[&str], name: &str) {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--workspace"])
        .args(args)
        .current_dir(workspace_dir())
        .status()
        .unwrap_or_else(|e| panic!("running cargo build for {name}: {e}"));
    assert!(status.success(), "building {name} failed");
}

/// `$env_var` if set, else `cargo build --workspace --bin <name>` and the debug binary's path.
fn workspace_binary(env_var: &str, name: &str) -> PathBuf {
    if let Ok(path) = std::env::var(env_var) {
        return PathBuf::from(path);
    }
    cargo_build(&["--bin", name], name);
    target_dir().join("debug").join(name)
}

/// Whether the tests run as root (then processes that must not hold root's rights, such as
/// CAP_SYS_PTRACE, are started as another user with [`as_user`]).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` run as user and group `uid` (through `setpriv`, which needs root), or as is.
pub fn as_user(uid: Option<&str>, program: &Path) -> Command {
    match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
            ]);
            c.arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// A command that runs the operator binary with `args`.
pub fn operator(args: &[&str]) -> Command {
    let mut command = Command::new(operator_binary());
    command.args(args);
    command
}

/// `redis-cli -p PORT args...`: its standard output without trailing newlines (redis-cli ends
/// error replies with an extra one).
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("running redis-cli (scripts/install-deps.sh installs it)");
    String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string()
}

/// A free TCP port on loopback (bound then released; a race with other processes is
/// possible but harmless in practice: the node then fails to start and the test says so).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A client port in 11000..21000 whose cluster bus port (+10000) is free too. Both stay below
/// the kernel's ephemeral range (32768..60999 here): a bus port in that range could be taken
/// between this check and the node's start by any `bind(:0)` or outgoing connection (a
/// topology test once failed so). Processes running tests at the same time start from
/// different places (the pid), and each call moves on.
pub fn free_cluster_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..10_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 11_000 + (start.wrapping_add(n.wrapping_mul(13)) % 10_000) as u16;
        let both_free = TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok();
        if both_free {
            return port;
        }
    }
    panic!("no free cluster port pair in 11000..31000");
}

/// The port a harness node gets: a cluster node needs room for its bus port.
fn default_port(extra: &[&str]) -> u16 {
    if extra.contains(&"--cluster-enabled") {
        free_cluster_port()
    } else {
        free_port()
    }
}

/// Spawns the node binary on `port` with `--dir dir`, no save rules unless `extra` sets
/// them, and its stderr going to `dir/node.log`.
/// Starts a node process: the config file first (if any), then the harness's flags.
fn spawn_node(dir: &Path, config: Option<&Path>, port: u16, extra: &[&str]) -> Child {
    spawn_node_as(None, dir, config, port, extra)
}

/// As `spawn_node`, as user `uid` when given (see [`as_user`]).
fn spawn_node_as(
    uid: Option<&str>,
    dir: &Path,
    config: Option<&Path>,
    port: u16,
    extra: &[&str],
) -> Child {
    let log = std::fs::File::create(dir.join("node.log")).expect("log file");
    let mut args: Vec<String> = config
        .map(|p| p.display().to_string())
        .into_iter()
        .collect();
    args.extend([
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--dir".into(),
        dir.display().to_string(),
    ]);
    if !extra.contains(&"--save") {
        args.extend(["--save".into(), "".into()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    as_user(uid, &node_binary())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting node")
}

/// A running node process.
pub struct Node {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Node {
    /// Starts a node with `--port`, `--bind 127.0.0.1`, `--dir` set, no save rules, plus `extra`
    /// flags (`["--requirepass", "x"]`).
    pub fn start(extra: &[&str]) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("node-test-")
            .tempdir()
            .expect("temp dir");
        Self::start_in(dir, extra)
    }

    /// Starts a node as user `uid` (see [`as_user`]; its directory is opened to everyone).
    pub fn start_as(uid: Option<&str>, extra: &[&str]) -> Node {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("node-test-")
            .tempdir()
            .expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("opening the node's directory");
        let port = default_port(extra);
        let child = spawn_node_as(uid, dir.path(), None, port, extra);
        let node = Node {
            child: Some(child),
            port,
            dir,
        };
        node.wait_ready(extra.contains(&"--requirepass"));
        node
    }

    /// Starts a node in an existing directory (to restart over a saved snapshot).
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Node {
        Self::spawn(dir, None, default_port(extra), extra)
    }

    /// Starts a node in an existing directory on a port chosen beforehand (files written
    /// before the start name it: a cluster `nodes.conf` listing several nodes).
    pub fn start_in_on_port(dir: tempfile::TempDir, port: u16, extra: &[&str]) -> Node {
        Self::spawn(dir, None, port, extra)
    }

    /// Starts a node from a config file: `config` is written to `node.conf` in the node's
    /// directory and passed first, as redis-server takes it; the usual flags follow and
    /// override it.
    pub fn start_with_config(config: &str, extra: &[&str]) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("node-test-")
            .tempdir()
            .expect("temp dir");
        let path = dir.path().join("node.conf");
        std::fs::write(&path, config).expect("writing node.conf");
        Self::spawn(dir, Some(path), default_port(extra), extra)
    }

    /// The config file `start_with_config` wrote.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("node.conf")
    }

    /// Starts a node that answers no plaintext PING (one with `--port 0` and only a TLS
    /// port): the harness's flags come first, so `--port 0` in `extra` wins over its
    /// `--port`; the handle reports `port`, and `ready(port)` is asked until it says yes or
    /// `STARTUP_TIMEOUT` passes.
    pub fn start_on_port_waiting_for(
        port: u16,
        extra: &[&str],
        ready: impl Fn(u16) -> bool,
    ) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("node-test-")
            .tempdir()
            .expect("temp dir");
        let child = spawn_node(dir.path(), None, port, extra);
        let node = Node {
            child: Some(child),
            port,
            dir,
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !ready(port) {
            assert!(
                Instant::now() < deadline,
                "node on port {port} not ready; log: {}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    fn spawn(dir: tempfile::TempDir, config: Option<PathBuf>, port: u16, extra: &[&str]) -> Node {
        let child = spawn_node(dir.path(), config.as_deref(), port, extra);
        let node = Node {
            child: Some(child),
            port,
            dir,
        };
        // An ACL file may give the default user a password: NOAUTH then means ready.
        node.wait_ready(extra.contains(&"--requirepass") || extra.contains(&"--aclfile"));
        node
    }

    /// Starts a node in `dir` that is expected to refuse to start (a corrupt snapshot, a bad
    /// config): waits for it to exit and returns its exit status and log. Panics if it is
    /// still running after `STARTUP_TIMEOUT`.
    pub fn start_expecting_exit(dir: &Path, extra: &[&str]) -> (std::process::ExitStatus, String) {
        let mut child = spawn_node(dir, None, free_port(), extra);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("waiting for node") {
                let log = std::fs::read_to_string(dir.join("node.log")).unwrap_or_default();
                return (status, log);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "node in {} is still running; log: {}",
                    dir.display(),
                    std::fs::read_to_string(dir.join("node.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_ready(&self, needs_auth: bool) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::Write;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                if stream.write_all(b"PING\r\n").is_ok() {
                    let mut line = String::new();
                    let _ = BufReader::new(&stream).read_line(&mut line);
                    if line.starts_with("+PONG") || (needs_auth && line.starts_with("-NOAUTH")) {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "node on port {} not ready; log: {}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new connection through the `redis` crate (RESP2).
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| panic!("connecting to node: {e}; log: {}", self.log()))
    }

    /// Runs `redis-cli -p PORT args...` and returns its standard output without trailing
    /// newlines (redis-cli ends error replies with an extra one).
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args)
    }

    /// The node's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("node.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Sends a signal (STOP, CONT, TERM...) to the node's process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
        if signal == "STOP" {
            self.wait_until_stopped();
        }
    }

    /// SIGSTOP stops a process's threads only once one of them has been scheduled to take
    /// the signal: on a loaded machine a busy thread runs on for milliseconds after `kill`
    /// returned. Tests that stop a node to withhold its work wait for every thread here.
    fn wait_until_stopped(&self) {
        let tasks = format!("/proc/{}/task", self.pid());
        cluster::wait_until("every thread of the node stopped", &[self], || {
            std::fs::read_dir(&tasks)
                .map(|dir| {
                    dir.flatten().all(|task| {
                        std::fs::read_to_string(task.path().join("stat"))
                            .map(|stat| thread_is_stopped(&stat))
                            .unwrap_or(true)
                    })
                })
                .unwrap_or(false)
        });
    }

    /// Sends a signal and waits for the process to exit (graceful stops).
    pub fn signal_and_wait(&mut self, signal: &str) -> std::process::ExitStatus {
        let pid = self.pid().to_string();
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        self.wait_exit()
    }

    /// Waits for the process to exit by itself (after SHUTDOWN).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("node running");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("waiting for node") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("node did not exit; log: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the process and gives back its directory (to restart over its files).
    pub fn into_dir(mut self) -> tempfile::TempDir {
        if self.child.is_some() {
            self.signal_and_wait("KILL");
        }
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("node on port {} log:\n{}", self.port, self.log());
        }
    }
}

/// Runs a raw command and returns the reply as a `redis::Value` (errors included as Err).
pub fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Whether a `/proc/PID/task/TID/stat` line says the thread is stopped (`T`, or `t` when
/// traced). The state follows the command name, which is in parentheses and may hold spaces.
fn thread_is_stopped(stat: &str) -> bool {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T" || state == "t")
}

#[cfg(test)]
mod stat_tests {
    use super::thread_is_stopped;

    #[test]
    fn the_state_after_the_command_name_is_read() {
        assert!(thread_is_stopped("812 (node-io 0) T 1 812 812 0 -1"));
        assert!(thread_is_stopped("812 (x) t 1"));
        assert!(!thread_is_stopped("812 (odd) T) S 1 812"));
        assert!(!thread_is_stopped("812 (node) R 1"));
        assert!(!thread_is_stopped(""));
    }
}
