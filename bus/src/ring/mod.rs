//! Ring: a one-sided write ring with acknowledgements (DESIGN §4.2), used by replication and
//! slot migration.
//!
//! The reader registers `[header | data]` with REMOTE_WRITE and advertises (addr, len, rkey).
//! The writer appends self-validating records with plain WRITEs and rings a doorbell by WRITEing
//! its head into the header's tail word. The reader takes records strictly in offset order,
//! accepting one only when its own header names the expected offset and its CRC-64 matches, so
//! it tolerates WRITEs placed out of order (EFA) and never trusts "the last byte changed". It
//! publishes its consumed offset by a one-sided WRITE into the writer's ack word; the writer
//! never overwrites bytes the reader has not acknowledged (`append` returns `Full`).
//! The reader can also publish a second monotone word of its owner's (a replica's applied
//! offset, which trails consumption) into a region the writer's side advertised.
//!
//! Neither side needs posted receives: no RNR, and the same code runs on providers whose
//! one-sided writes raise no completion at the target. The format is in [`layout`].

mod advert;
pub mod layout;
mod reader;
mod writer;

#[cfg(test)]
mod covered_tests;
#[cfg(test)]
mod tests;

pub use advert::{decode_advert, encode_advert, ADVERT_LEN};
pub use reader::{RingReader, ACK_SRC_LEN};
pub use writer::RingWriter;
