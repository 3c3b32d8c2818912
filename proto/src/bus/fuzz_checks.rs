//! What must hold for any bytes handed to the bus decoder: shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/bus_envelope.rs`), the stable fuzz driver and the tests. Panics when a
//! property fails.

use super::envelope::{open, seal, ENVELOPE_HEADER_LEN};
use super::fragment::{fragment, Reassembler, ReassemblyLimits};
use super::message::BusMessage;
use prost::Message as _;

/// The secret the fuzz seeds are sealed with.
pub const FUZZ_SECRET: &[u8] = b"fuzz-cluster-secret";

/// `data` is tried three ways:
/// - as a sealed envelope: whatever opens must re-seal to the same bytes' length and open
///   to the same message (a message is its own canonical form);
/// - as a bare protobuf body (the MAC keeps fuzzers from reaching the decoder otherwise):
///   whatever decodes and passes the limits seals and opens back to itself;
/// - as a datagram for the reassembler: no panic, and state stays within its limits.
pub fn bus_envelope(data: &[u8]) {
    if let Ok(msg) = open(data, FUZZ_SECRET) {
        let again = seal(&msg, FUZZ_SECRET).expect("an opened message seals");
        assert_eq!(open(&again, FUZZ_SECRET).as_ref(), Ok(&msg));
        assert!(again.len() >= ENVELOPE_HEADER_LEN);
    }
    if let Ok(msg) = BusMessage::decode(data) {
        if let Ok(sealed) = seal(&msg, FUZZ_SECRET) {
            assert_eq!(open(&sealed, FUZZ_SECRET), Ok(msg.clone()));
            for mtu in [64, 1000] {
                let frags = fragment(&sealed, mtu).expect("a sealed message fragments");
                let mut r = Reassembler::new(ReassemblyLimits::default());
                let mut out = None;
                for f in frags.iter().rev() {
                    assert!(f.len() <= mtu);
                    out = r.push(&0u8, f, 0).expect("own fragments are accepted");
                }
                assert_eq!(out.as_deref(), Some(&sealed[..]));
                assert_eq!(r.in_flight(), 0);
            }
        }
    }
    let limits = ReassemblyLimits {
        per_sender_max: 2,
        partials_max: 4,
        bytes_max: 4096,
        age_max_ms: 10,
    };
    let mut r = Reassembler::new(limits);
    for (i, d) in data.chunks(97).enumerate() {
        let _ = r.push(&(i % 3), d, i as u64);
        assert!(r.bytes() <= limits.bytes_max);
        assert!(r.in_flight() <= limits.partials_max);
    }
}
