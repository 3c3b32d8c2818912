//! Fault injection (DESIGN §2, §3.1): seeded simulation of many nodes on the `sim` fabric and
//! process-level chaos (kill -9, pause, partitions) with checkers.
//!
//! Empty for now: the cluster and replication issues bring the state machines it drives.
