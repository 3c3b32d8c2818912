//! Shared harness for the integration tests: see `harness.rs`.
