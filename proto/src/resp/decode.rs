//! Placeholder: being written.
use super::Frame;
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {}
pub fn decode(_buf: &[u8]) -> Result<Option<(Frame, usize)>, DecodeError> {
    Ok(None)
}
