//! Fault injection (DESIGN §2, §3.1): a seeded, deterministic simulation of a cluster of
//! gossip cores in one process, with checkers.
//!
//! - [`net`]: the simulated network: virtual time, per-datagram delay, loss, duplication and
//!   reordering, partitions; every message sealed, fragmented, reassembled and opened;
//! - [`sim`]: the nodes (topology + gossip core), crashes and restarts from the saved
//!   config file, the step loop and the trace hash;
//! - [`faults`]: the seeded fault schedule;
//! - [`operator`]: topology changes as an admin makes them (proposals in a group);
//! - [`checks`]: the invariants, run after every step;
//! - [`scenario`]: one run from a seed, [`run_seed`];
//! - [`failover`]: failovers under faults with a data path ([`data_path`]: node's real
//!   replication core over the simulated fabric, one [`repl_node`] store per node; link
//!   handshakes and client traffic over [`data_net`]), clients ([`clients`]) and a per-key
//!   linearizability check ([`linearizable`]).

pub mod checks;
pub mod clients;
pub mod data_net;
pub mod data_path;
pub mod failover;
pub mod faults;
pub mod linearizable;
pub mod net;
pub mod operator;
pub mod repl_node;
pub mod scenario;
pub mod sim;

pub use checks::{Violation, ViolationKind};
pub use scenario::{replay_command, run_seed, Report};

/// A number from the environment (the seed tests' CHAOS_* knobs); None when unset, a panic
/// naming the variable when it is not a number.
pub fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
    )
}
