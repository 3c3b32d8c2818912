//! The pub/sub registry. Filled in by the pub/sub family.

#[derive(Default)]
pub struct PubSub {}
