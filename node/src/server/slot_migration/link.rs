//! One batch's link to the target, made the batch's import link by `CLUSTER SYNCSLOTS
//! ESTABLISH`, carrying the batch's queue to the target and the target's replies back
//! ([`link_replies`](super::link_replies)). Setup goes over an authenticated RESP connection
//! to the target's client port over TCP (as a replica reaches its primary); the data then goes
//! over the fabric when the target serves clients there (`cluster-migration-link auto` or
//! `fabric`; one pump thread, [`fabric_link`](super::fabric_link)), else over that TCP
//! connection (a sender thread and a receiver thread).

use super::fabric_link::FabricCaller;
use super::link_replies::Replies;
use super::link_setup;
use crate::cluster::migration::{LinkQueue, MigrationId};
use crate::config::migration_link::MigrationLink;
use crate::server::repl_link::control::{authenticate_as_replica, Control};
use crate::server::Server;
use parking_lot::Mutex;
use proto::resp::Frame;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long connecting and each setup call may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Link {
    queue: Arc<LinkQueue>,
    shared: Arc<LinkShared>,
    /// The TCP connection when it carries the data (shut down to stop its threads).
    tcp: Option<TcpStream>,
    carrier: String,
    threads: Vec<JoinHandle<()>>,
}

/// What the link's threads and the driver share.
#[derive(Default)]
pub struct LinkShared {
    failed: Mutex<Option<String>>,
    pub answered: AtomicU64,
    pub stop: AtomicBool,
}

impl LinkShared {
    pub fn fail(&self, why: String) {
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
        let choice = server.config.read().cluster.migration_link;
        if choice != MigrationLink::Tcp {
            match open_fabric(server, &mut control, host, id, batch, &queue) {
                Ok(Some(link)) => return Ok(link),
                Ok(None) if choice == MigrationLink::Fabric => {
                    return Err(format!(
                        "the target {host}:{port} serves no clients on the fabric \
                         (cluster-migration-link fabric)"
                    ))
                }
                Ok(None) => {}
                Err(why) if choice == MigrationLink::Fabric => return Err(why),
                Err(why) => tracing::warn!(
                    migration = %id,
                    batch,
                    error = %why,
                    "the fabric link to the target failed; carrying the batch over TCP"
                ),
            }
        }
        link_setup::establish(&mut control, id, batch)?;
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
            tcp: Some(stream),
            carrier: "tcp".into(),
            threads: vec![sender, receiver],
        })
    }

    /// What carries the data: `tcp`, or `fabric/` and the provider.
    pub fn carrier(&self) -> &str {
        &self.carrier
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
        if let Some(tcp) = &self.tcp {
            let _ = tcp.shutdown(Shutdown::Both);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The batch's link over the fabric, when the target serves clients there: None when it
/// does not; an error when it does and the link could not be made.
fn open_fabric(
    server: &Server,
    control: &mut Control,
    host: &str,
    id: MigrationId,
    batch: u32,
    queue: &Arc<LinkQueue>,
) -> Result<Option<Link>, String> {
    let Some(endpoint) = link_setup::fabric_endpoint(control)? else {
        return Ok(None);
    };
    // The listener's own address when it has one (on verbs, the RDMA device's); the one the
    // control connection reached when it listens on every address.
    let fabric_host = if endpoint.ip.is_unspecified() {
        host.to_string()
    } else {
        endpoint.ip.to_string()
    };
    let mut caller = FabricCaller::connect(
        &endpoint.provider,
        &fabric_host,
        endpoint.port,
        CONNECT_TIMEOUT,
    )?;
    authenticate_as_replica(server, &mut caller)
        .map_err(|e| format!("authenticating on the target's fabric port: {e}"))?;
    link_setup::establish(&mut caller, id, batch)?;
    let carrier = format!("fabric/{}", caller.provider());
    let shared = Arc::new(LinkShared::default());
    shared.answered.store(queue.answered(0), Relaxed);
    let pump = caller
        .into_pump(queue.clone(), shared.clone())
        .map_err(|e| e.to_string())?;
    tracing::debug!(migration = %id, batch, %carrier, "import link over the fabric");
    Ok(Some(Link {
        queue: queue.clone(),
        shared,
        tcp: None,
        carrier,
        threads: vec![pump],
    }))
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
    let mut replies = Replies::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        let n = match input.read(&mut chunk) {
            Ok(0) => {
                shared.fail("the target closed the link".into());
                return;
            }
            Ok(n) => n,
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
        };
        match replies.feed(&chunk[..n]) {
            Ok(0) => {}
            Ok(answered) => shared.answered.store(queue.answered(answered), Relaxed),
            Err(why) => {
                shared.fail(why);
                return;
            }
        }
    }
}
