//! One batch's link to the target: an authenticated RESP connection to the target's client
//! port (as a replica reaches its primary), made the batch's import link by `CLUSTER
//! SYNCSLOTS ESTABLISH`, then a sender thread writing the batch's queue and a receiver
//! thread counting the target's replies. A reply answers a command the target applied (and,
//! with `repl-sync-acks` there, its replicas acknowledged); an error reply (OOM, a slot no
//! longer moving) fails the link.

use crate::cluster::migration::{LinkQueue, MigrationId};
use crate::server::repl_link::control::{Control, ControlError};
use crate::server::Server;
use parking_lot::Mutex;
use proto::resp::{decode, Frame};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long connecting and each setup call may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the target may take to apply the batch's `MigrationBegin` (it learns the log
/// a moment after the source).
const ESTABLISH_WAIT: Duration = Duration::from_secs(10);
const ESTABLISH_RETRY: Duration = Duration::from_millis(1);
/// Most reply bytes held undecoded (replies to migration writes are small).
const REPLY_BUFFER_MAX: usize = 64 << 20;

pub struct Link {
    queue: Arc<LinkQueue>,
    shared: Arc<LinkShared>,
    stream: TcpStream,
    threads: Vec<JoinHandle<()>>,
}

#[derive(Default)]
struct LinkShared {
    failed: Mutex<Option<String>>,
    answered: AtomicU64,
    stop: AtomicBool,
}

impl LinkShared {
    fn fail(&self, why: String) {
        self.failed.lock().get_or_insert(why);
    }
}

impl Link {
    /// Connects to the target at `host:port` and makes the connection batch `batch`'s
    /// import link of migration `id`; the queue's bytes then flow.
    pub fn open(
        server: &Server,
        host: &str,
        port: u16,
        id: MigrationId,
        batch: u32,
        queue: Arc<LinkQueue>,
    ) -> Result<Link, String> {
        let mut control = Control::connect_to_primary(server, host, port, CONNECT_TIMEOUT)
            .map_err(|e| format!("connecting to the target {host}:{port}: {e}"))?;
        let id_text = id.to_string();
        let batch_text = batch.to_string();
        let connected = Instant::now();
        let deadline = connected + ESTABLISH_WAIT;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let reply = control.call(&[
                b"CLUSTER",
                b"SYNCSLOTS",
                b"ESTABLISH",
                id_text.as_bytes(),
                batch_text.as_bytes(),
            ]);
            match reply {
                Ok(Frame::Integer(1)) => break,
                Ok(Frame::Integer(0)) if Instant::now() < deadline => {
                    // Background thread owning its loop: the target has not applied the
                    // batch's begin yet.
                    std::thread::sleep(ESTABLISH_RETRY)
                }
                Ok(Frame::Integer(0)) => {
                    return Err(format!(
                        "the target did not apply batch {batch} within {ESTABLISH_WAIT:?}"
                    ))
                }
                Ok(other) => return Err(format!("the target answered {other:?} to ESTABLISH")),
                Err(ControlError::Refused(why)) => {
                    return Err(format!("the target refused: {why}"))
                }
                Err(e) => return Err(format!("link to the target: {e}")),
            }
        }
        tracing::trace!(
            migration = %id,
            batch,
            attempts,
            waited_us = connected.elapsed().as_micros() as u64,
            "import link established"
        );
        let stream = control.into_stream();
        let shared = Arc::new(LinkShared::default());
        shared.answered.store(queue.answered(0), Relaxed);
        let sender = {
            let (queue, shared) = (queue.clone(), shared.clone());
            let mut out = stream.try_clone().map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name(format!("migration-send-{id}"))
                .spawn(move || send(&queue, &shared, &mut out))
                .map_err(|e| e.to_string())?
        };
        let receiver = {
            let (queue, shared) = (queue.clone(), shared.clone());
            let mut input = stream.try_clone().map_err(|e| e.to_string())?;
            std::thread::Builder::new()
                .name(format!("migration-recv-{id}"))
                .spawn(move || receive(&queue, &shared, &mut input))
                .map_err(|e| e.to_string())?
        };
        Ok(Link {
            queue,
            shared,
            stream,
            threads: vec![sender, receiver],
        })
    }

    /// The stream offset the target has answered every command through.
    pub fn answered(&self) -> u64 {
        self.shared.answered.load(Relaxed)
    }

    /// Why the link can no longer carry the migration, if it cannot.
    pub fn failure(&self) -> Option<String> {
        self.queue
            .broken()
            .or_else(|| self.shared.failed.lock().clone())
    }

    pub fn close(self) {
        self.shared.stop.store(true, Relaxed);
        self.queue.close();
        let _ = self.stream.shutdown(Shutdown::Both);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// How long the source waits for the target to apply a batch's commit before it lets the
/// batch's parked writes go anyway (they then may bounce once between the two).
const COMMIT_SEEN_WAIT: Duration = Duration::from_secs(2);
const COMMIT_SEEN_POLL: Duration = Duration::from_millis(1);

/// Waits until the target at `host:port` has applied batch `batch`'s commit (true), or
/// gives up after [`COMMIT_SEEN_WAIT`] (false). The parked writes resumed after it find the
/// target owning the slots, instead of a MOVED back to the source.
pub fn wait_target_committed(
    server: &Server,
    host: &str,
    port: u16,
    id: MigrationId,
    batch: u32,
) -> bool {
    let deadline = Instant::now() + COMMIT_SEEN_WAIT;
    let Ok(mut control) = Control::connect_to_primary(server, host, port, COMMIT_SEEN_WAIT) else {
        return false;
    };
    let (id_text, batch_text) = (id.to_string(), batch.to_string());
    while Instant::now() < deadline {
        let reply = control.call(&[
            b"CLUSTER",
            b"SYNCSLOTS",
            b"COMMITTED",
            id_text.as_bytes(),
            batch_text.as_bytes(),
        ]);
        match reply {
            Ok(Frame::Integer(1)) => return true,
            Ok(Frame::Integer(0)) => std::thread::sleep(COMMIT_SEEN_POLL),
            _ => return false,
        }
    }
    false
}

fn send(queue: &LinkQueue, shared: &LinkShared, out: &mut TcpStream) {
    while let Some(bytes) = queue.take(Duration::from_millis(100)) {
        if shared.stop.load(Relaxed) {
            return;
        }
        if bytes.is_empty() {
            continue;
        }
        if let Err(e) = out.write_all(&bytes) {
            shared.fail(format!("writing to the target: {e}"));
            return;
        }
    }
}

fn receive(queue: &LinkQueue, shared: &LinkShared, input: &mut TcpStream) {
    let _ = input.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        match input.read(&mut chunk) {
            Ok(0) => {
                shared.fail("the target closed the link".into());
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => {
                shared.fail(format!("reading from the target: {e}"));
                return;
            }
        }
        let mut replies = 0u64;
        let mut used_total = 0;
        loop {
            match decode(&buf[used_total..]) {
                Ok(Some((frame, used))) => {
                    used_total += used;
                    if let Frame::Error(e) = frame {
                        shared.fail(format!(
                            "the target answered: {}",
                            String::from_utf8_lossy(&e)
                        ));
                        return;
                    }
                    replies += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    shared.fail(format!("the target's reply is not RESP: {e}"));
                    return;
                }
            }
        }
        buf.drain(..used_total);
        if buf.len() > REPLY_BUFFER_MAX {
            shared.fail("the target's reply is too long".into());
            return;
        }
        if replies > 0 {
            shared.answered.store(queue.answered(replies), Relaxed);
        }
    }
}
