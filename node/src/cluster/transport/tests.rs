//! The bus thread over the real-time sim fabric: a MEET reaches the other node's core, which
//! answers, and ticks run; a rendezvous lookup gives the address the core was started with.

use super::runtime::{BusCore, Outbox};
use super::*;
use bus::sim::{Faults, SimFabric};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Messages a core received, with their senders.
type Seen = Arc<Mutex<Vec<(EndpointAddr, Vec<u8>)>>>;

/// Records what it saw; answers "hello" with "welcome".
#[derive(Clone, Default)]
struct Recorder {
    seen: Seen,
    ticks: Arc<Mutex<u64>>,
}

impl BusCore for Recorder {
    fn set_datagram_max(&mut self, max: usize) {
        assert!(max >= 512, "datagram max {max}");
    }
    fn tick(&mut self, _now_ms: u64, _out: &mut Outbox) {
        *self.ticks.lock().unwrap() += 1;
    }
    fn receive(&mut self, _now_ms: u64, from: &EndpointAddr, message: &[u8], out: &mut Outbox) {
        self.seen
            .lock()
            .unwrap()
            .push((from.clone(), message.to_vec()));
        if message == b"hello" {
            out.sends.push((from.clone(), b"welcome".to_vec()));
        }
    }
    fn meet(&mut self, _now_ms: u64, to: EndpointAddr, out: &mut Outbox) {
        out.sends.push((to, b"hello".to_vec()));
    }
    fn publish(&mut self, _shard: bool, _channel: Vec<u8>, _message: Vec<u8>, _out: &mut Outbox) {}
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_meet_reaches_the_other_core_and_is_answered() {
    let fabric = SimFabric::new_realtime(3, Faults::default()).unwrap();
    let (a_host, b_host) = (fabric.add_host().unwrap(), fabric.add_host().unwrap());
    let (a_core, b_core) = (Recorder::default(), Recorder::default());
    let a = start(
        &a_host,
        None,
        Some("127.0.0.1:0".parse().unwrap()),
        None,
        |_| a_core.clone(),
    )
    .unwrap();
    let b = start(
        &b_host,
        None,
        Some("127.0.0.1:0".parse().unwrap()),
        None,
        |_| b_core.clone(),
    )
    .unwrap();
    let b_addr: EndpointAddr = rendezvous::lookup(b.rendezvous_addr().unwrap())
        .unwrap()
        .address
        .parse()
        .unwrap();
    assert_eq!(b_addr, b.address);
    assert!(a.meet(b_addr));
    wait_for("the welcome", || {
        a_core
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m == b"welcome")
    });
    let seen_by_b = b_core.seen.lock().unwrap().clone();
    assert_eq!(seen_by_b, vec![(a.address.clone(), b"hello".to_vec())]);
    wait_for("ticks", || *a_core.ticks.lock().unwrap() >= 2);
    let stats = a.stop();
    assert_eq!((stats.sent, stats.received), (1, 1));
    b.stop();
}
