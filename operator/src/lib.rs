//! The operator: an async Rust client library (TCP and fabric), `operator cli`, `operator bench`
//! and `operator cluster ...` (DESIGN §2).
//!
//! Empty for now: it is built by the fabric issue (client, cli, bench) and the cluster issue
//! (cluster create/status). Until then use `redis-cli` and `redis-benchmark` against the node.
