//! Any bytes given to the general RESP decoder: no panic, and whatever it decodes re-encodes
//! canonically (see `proto::resp::fuzz_checks::resp_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    proto::resp::fuzz_checks::resp_decode(data);
});
