//! A server the suites start (redis-server or node): its command line, its process and its
//! log (appended over restarts), ready once it answers PING.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::sync_client;

/// How long a started server may take to answer PING.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped server may take to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A free loopback port, chosen by the kernel (a small race until the server binds it; a bind
/// failure shows as "exited at start" with the log).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// A cluster port: `port` and its bus port `port + 10000` both free, in 20000-29999.
pub fn free_cluster_port(taken: &mut Vec<u16>) -> anyhow::Result<u16> {
    for _ in 0..500 {
        let port = rand::random::<u16>() % 10_000 + 20_000;
        if taken.contains(&port) || taken.contains(&(port + 10_000)) {
            continue;
        }
        let binds = [port, port + 10_000]
            .iter()
            .all(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok());
        if binds {
            taken.extend([port, port + 10_000]);
            return Ok(port);
        }
    }
    bail!("no free port pair in 20000-39999")
}

/// One server: argv, log file, process while it runs.
#[derive(Debug)]
pub struct ServerProcess {
    pub port: u16,
    pub argv: Vec<String>,
    pub log_path: PathBuf,
    child: Option<Child>,
}

impl ServerProcess {
    /// `argv[0]` is the program (a `taskset -c N` prefix goes in argv too).
    pub fn new(port: u16, argv: Vec<String>, log_path: PathBuf) -> ServerProcess {
        ServerProcess {
            port,
            argv,
            log_path,
            child: None,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the process and waits until it answers PING.
    pub fn start(&mut self) -> anyhow::Result<()> {
        self.spawn()?;
        self.wait_ready()
    }

    /// Starts the process without waiting for it.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("opening {}", self.log_path.display()))?;
        let child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.argv.join(" ")))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the server answers PING; fails with its log's tail if it exits first or
    /// does not answer within [`READY_TIMEOUT`].
    pub fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if sync_client::answers_ping(self.port) {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "server on port {} not answering PING after {} s: {}",
                    self.port,
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the log holds `line` (e.g. a fabric listener is up).
    pub fn wait_log(&mut self, line: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if std::fs::read_to_string(&self.log_path).is_ok_and(|log| log.contains(line)) {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "no '{line}' in {}: {}",
                    self.log_path.display(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An error with the log's tail if the process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("server on port {} is not running", self.port);
        };
        if let Some(status) = child.try_wait()? {
            self.child = None;
            bail!(
                "server on port {} exited ({status}): {}",
                self.port,
                self.log_tail()
            );
        }
        Ok(())
    }

    /// `kill -9`, then reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within a grace period.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        match std::fs::read_to_string(&self.log_path) {
            Ok(log) => {
                let lines: Vec<&str> = log.lines().collect();
                format!("\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
            }
            Err(_) => "(no log)".to_string(),
        }
    }

    /// The command as a report shows it: this run's values replaced by names (`$PORT`, ...).
    pub fn shown(&self, names: &[(&str, &str)]) -> String {
        self.argv
            .iter()
            .map(|a| {
                names
                    .iter()
                    .find(|(value, _)| value == a)
                    .map_or_else(|| shell_word(a), |(_, name)| name.to_string())
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A word as a shell reads it back: bare when plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:,=+@%-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A command line with words quoted as [`shell_word`] does.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `taskset -c CPUS` as an argv prefix, or nothing when `cpus` is empty.
pub fn pin(cpus: &str) -> Vec<String> {
    if cpus.is_empty() {
        Vec::new()
    } else {
        vec!["taskset".into(), "-c".into(), cpus.into()]
    }
}

/// `dir`, created.
pub fn make_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// What [`run_bounded`] saw.
#[derive(Debug)]
pub struct Finished {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a command to its end, killed after `timeout` (an error then). Returns as soon as the
/// command exits (the replication suite times a load by it).
pub fn run_bounded(argv: &[String], timeout: Duration) -> anyhow::Result<Finished> {
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", argv[0]))?;
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // wait_with_output reads both pipes while it waits, so a chatty child cannot stall.
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait_with_output());
    });
    let output = match done_rx.recv_timeout(timeout) {
        Ok(output) => output?,
        Err(_) => {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            bail!("{} took over {} s", shell_line(argv), timeout.as_secs());
        }
    };
    Ok(Finished {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}
