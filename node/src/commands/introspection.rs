//! Placeholder: this family is being written.

use crate::command::{CmdError, CommandSpec};

pub static COMMANDS: &[CommandSpec] = &[];

/// A client name as CLIENT SETNAME accepts it: no spaces or newlines, bounded length.
/// Empty clears the name.
pub fn validate_client_name(name: &[u8]) -> Result<Option<String>, CmdError> {
    if name.is_empty() {
        return Ok(None);
    }
    if name.len() > crate::server::client::MAX_CLIENT_NAME_LEN
        || name.iter().any(|&b| !(b'!'..=b'~').contains(&b))
    {
        return Err(CmdError::new(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(Some(String::from_utf8_lossy(name).into_owned()))
}
