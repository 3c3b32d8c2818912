//! Goal: framed datagrams arrive intact or not at all; garbage is dropped and counted; under
//! loss and duplication the counts add up. Method: two sim hosts, raw garbage injected through
//! the endpoint underneath.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::config::EndpointConfig;
use crate::provider::Provider;
use crate::sim::{Faults, SimDatagram, SimFabric};

fn two(
    seed: u64,
    faults: Faults,
) -> (
    SimFabric,
    DatagramSocket<SimDatagram>,
    DatagramSocket<SimDatagram>,
) {
    let fabric = SimFabric::new(seed, faults).unwrap();
    let cfg = EndpointConfig::default();
    let a = fabric.add_host().unwrap().datagram(&cfg).unwrap();
    let b = fabric.add_host().unwrap().datagram(&cfg).unwrap();
    (
        fabric,
        DatagramSocket::new(a).unwrap(),
        DatagramSocket::new(b).unwrap(),
    )
}

#[test]
fn messages_round_trip_and_size_is_bounded() {
    let (fabric, mut a, mut b) = two(1, Faults::default());
    let to = b.local().clone();
    a.send_to(&to, b"ping").unwrap();
    a.send_to(&to, &vec![7u8; a.max_payload()]).unwrap();
    assert!(a.send_to(&to, &vec![0u8; a.max_payload() + 1]).is_err());
    fabric.run_until_idle(100);
    let mut out = vec![0u8; b.max_payload()];
    let (from, n) = b.recv(&mut out).unwrap().unwrap();
    assert_eq!((&from, &out[..n]), (a.local(), &b"ping"[..]));
    let (_, n) = b.recv(&mut out).unwrap().unwrap();
    assert_eq!(n, a.max_payload());
    assert!(b.recv(&mut out).unwrap().is_none());
    assert!(
        b.recv(&mut out[..10]).is_err(),
        "a too-small buffer is refused"
    );
}

#[test]
fn garbage_is_dropped_and_counted() {
    let (fabric, mut a, mut b) = two(2, Faults::default());
    let to = b.local().clone();
    let raw = a.endpoint_mut();
    raw.send_to(&to, b"").unwrap();
    raw.send_to(&to, b"short").unwrap();
    raw.send_to(&to, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut forged = Vec::new();
    frame::encode(b"hello", &mut forged);
    forged[4] = 9;
    raw.send_to(&to, &forged).unwrap();
    frame::encode(b"hello", &mut forged);
    forged.push(0);
    raw.send_to(&to, &forged).unwrap();
    frame::encode(b"hello", &mut forged);
    forged[20] ^= 0x20;
    raw.send_to(&to, &forged).unwrap();
    a.send_to(&to, b"valid").unwrap();
    fabric.run_until_idle(100);
    let mut out = vec![0u8; b.max_payload()];
    let (_, n) = b.recv(&mut out).unwrap().unwrap();
    assert_eq!(&out[..n], b"valid");
    let s = b.stats();
    assert_eq!(
        (
            s.dropped_short,
            s.dropped_magic,
            s.dropped_version,
            s.dropped_length,
            s.dropped_checksum
        ),
        (2, 1, 1, 1, 1)
    );
    assert_eq!(s.received, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic and are never delivered (a random 16-byte prefix passing
    /// magic, version, length and CRC-64 is beyond chance).
    #[test]
    fn arbitrary_bytes_never_pass(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let (fabric, mut a, mut b) = two(3, Faults::default());
        let to = b.local().clone();
        a.endpoint_mut().send_to(&to, &bytes).unwrap();
        fabric.run_until_idle(100);
        let mut out = vec![0u8; b.max_payload()];
        prop_assert!(b.recv(&mut out).unwrap().is_none());
        prop_assert_eq!(b.stats().dropped(), 1);
    }
}

/// Under 15% loss and 10% duplication: every delivered message is one that was sent, intact,
/// and received = sent - lost + duplicated.
#[test]
fn loss_and_duplication_are_counted() {
    let faults = Faults {
        datagram_loss: 0.15,
        datagram_dup: 0.1,
        ..Faults::chaotic()
    };
    let (fabric, mut a, mut b) = two(4, faults);
    let to = b.local().clone();
    let mut out = vec![0u8; b.max_payload()];
    let mut seen = vec![0u32; 1000];
    for i in 0..1000u32 {
        a.send_to(&to, &i.to_be_bytes()).unwrap();
        fabric.advance(Duration::from_micros(5));
        while let Some((_, n)) = b.recv(&mut out).unwrap() {
            assert_eq!(n, 4);
            seen[u32::from_be_bytes(out[..4].try_into().unwrap()) as usize] += 1;
        }
    }
    fabric.run_until_idle(10_000);
    while let Some((_, n)) = b.recv(&mut out).unwrap() {
        assert_eq!(n, 4);
        seen[u32::from_be_bytes(out[..4].try_into().unwrap()) as usize] += 1;
    }
    let net = fabric.stats();
    let received: u32 = seen.iter().sum();
    assert_eq!(
        u64::from(received),
        1000 - net.datagrams_lost + net.datagrams_duplicated
    );
    assert!(
        net.datagrams_lost > 50 && net.datagrams_duplicated > 30,
        "{net:?}"
    );
    assert!(seen.iter().all(|n| *n <= 2));
    assert_eq!(b.stats().received, u64::from(received));
    assert_eq!(b.stats().dropped(), 0);
}
