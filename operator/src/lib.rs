//! The operator: an async Rust client library (TCP or the fabric), `operator cli`
//! (redis-cli-like) and `operator bench` (redis-benchmark-like, with HDR latency percentiles)
//! (DESIGN §2), and `operator cluster create|status`.
//!
//! - [`client`]: connection, transport, RESP replies through `proto`, AUTH/HELLO, pipelining.
//! - [`admin`]: the admin API's subcommands (failover, node add, ops, slots, cluster show).
//! - [`cli`]: `operator cli`: one-shot and interactive, redis-cli's reply formats.
//! - [`bench`]: `operator bench`: redis-benchmark's tests and flags.
//! - [`cluster`]: `operator cluster create|status`.
//! - [`command_line`]: the `operator` subcommands; the binary only parses and runs them.
//! - [`connect_args`]: the flags both share (`-h -p -a --user -3 --rdma --fabric`).

pub mod admin;
pub mod bench;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod command_line;
pub mod connect_args;
