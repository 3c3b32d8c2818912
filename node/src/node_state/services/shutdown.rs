//! SHUTDOWN's wait for replicas (`server::shutdown_replicas`).

pub trait ShutdownSteps {
    /// Pauses writes and waits up to `shutdown-timeout` for the online replicas to
    /// acknowledge the last write; true when they did (or there are none).
    fn wait_for_replicas(&self) -> bool;
    /// Lifts the pause of `wait_for_replicas` when the shutdown was abandoned.
    fn resume_writes(&self);
}
