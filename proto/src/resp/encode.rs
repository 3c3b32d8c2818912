//! Placeholder: being written.
use super::Frame;
pub fn encode(_frame: &Frame, _out: &mut bytes::BytesMut) {}
