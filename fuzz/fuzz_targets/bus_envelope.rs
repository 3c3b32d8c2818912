//! Any bytes given to the cluster bus decoder: the envelope, a bare protobuf body and the
//! datagram reassembler (see `proto::bus::fuzz_checks::bus_envelope`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    proto::bus::fuzz_checks::bus_envelope(data);
});
