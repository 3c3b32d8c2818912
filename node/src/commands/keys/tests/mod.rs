//! In-process tests of the generic key commands.

mod hidden_slots;
