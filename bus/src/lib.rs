//! The fabric (DESIGN §4): one `Fabric` abstraction with verbs semantics and the providers
//! `verbs`, `ofi` and `sim`, plus the Stream, Ring and Datagram primitives built on it.
//!
//! Empty for now: it is built by the issue "The fabric: verbs, libfabric and simulated
//! providers". The standalone node needs no fabric. This is the only crate that will hold
//! `unsafe` (FFI), each block with its `// SAFETY:` reason.
