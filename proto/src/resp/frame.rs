//! Placeholder: being written (Frame type for RESP2/RESP3).
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {}
