//! Placeholder: this family is being written.

use crate::command::CommandSpec;
use crate::server::{Client, Server};

pub static COMMANDS: &[CommandSpec] = &[];

/// Drops every subscription of a client that is going away.
pub fn unsubscribe_all(_server: &Server, _client: &mut Client) {}
