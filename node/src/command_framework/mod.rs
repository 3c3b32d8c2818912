//! The command layer: one table describes every command (name, arity, flags, key positions,
//! handler, docs); the dispatcher applies protocol rules from it (lookup, arity, auth,
//! MULTI queueing, key locking) so that handlers only do their command's work, and
//! `COMMAND INFO/DOCS/COUNT/LIST/GETKEYS` answer from the same table.

pub mod acl_check;
pub mod args;
pub mod categories;
pub mod ctx;
pub mod dispatch;
pub mod error;
pub mod eviction;
pub mod key_access;
pub mod key_events;
pub mod pause_hold;
pub mod redirect;
pub mod sample;
pub mod scan;
pub mod spec;
pub mod table;
pub mod tracking;
pub mod transaction;
pub mod warm_keys;

pub use ctx::Ctx;
pub use error::CmdError;
pub use spec::{flags, CommandSpec, KeySpec};

/// What a handler returns; its reply is already written into the context.
pub type CmdResult = Result<(), CmdError>;
