//! Any bytes given to the server's request parser, split into reads by the input's first
//! byte: no panic, and the same requests and end however the bytes were split (see
//! `proto::resp::fuzz_checks::request_parser`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    proto::resp::fuzz_checks::request_parser(data);
});
