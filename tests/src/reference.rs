//! Debian's `redis-server` (7.0.15, installed by scripts/install-deps.sh) as the reference a
//! test compares the node's replies with, started on a free loopback port in a temporary
//! directory and killed when its handle drops.

use crate::{free_port, STARTUP_TIMEOUT};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server` with no persistence, plus `extra` flags (`["--requirepass", "x"]`).
    pub fn start(extra: &[&str]) -> RedisServer {
        let dir = tempfile::Builder::new()
            .prefix("redis-ref-")
            .tempdir()
            .expect("temp dir");
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("running redis-server (scripts/install-deps.sh installs it)");
        let server = RedisServer { child, port, dir };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on {port} not ready"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Runs `redis-cli -p PORT args...`, output as `Node::cli` gives it.
    pub fn cli(&self, args: &[&str]) -> String {
        crate::redis_cli(self.port, args)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection())
            .expect("connecting to redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
