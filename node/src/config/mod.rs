//! Configuration: redis.conf syntax in a file, redis-server style flags, and `CONFIG GET/SET/
//! REWRITE` at run time, all from one table of parameters (`params.rs`).

pub mod bind_addr;
pub mod encodings;
pub mod keyspace_events;
pub mod latency;
pub mod load;
pub mod log_level;
pub mod migration_link;
pub mod params;
pub mod rewrite;
pub mod units;

pub use load::{load, ConfigError};
pub use params::{AofConfig, Config, EvictionPolicy, FsyncPolicy, SaveRule};
