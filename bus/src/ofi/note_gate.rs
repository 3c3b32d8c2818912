//! When an IMM note may follow its WRITE at once, and when it must wait for the WRITE's
//! delivery completion.
//!
//! A WRITE WITH IMM travels as a WRITE and then a SEND (the note, see `RdmCore::write`). The
//! peer reads the WRITE's bytes as soon as the note arrives, so the note must not overtake
//! them. That holds by itself only where the provider orders a send after a write
//! (`FI_ORDER_SAW`): tcp;ofi_rxm does (one socket per peer). Where it does not (efa, or
//! endpoints opened with `OfiOrdering::None`), the note is held until the WRITE completes,
//! and WRITEs complete only once delivered (`OfiKind::wants_delivery_complete`, efa's device
//! acknowledges writes), so the bytes have landed when the note leaves.
//!
//! shm 1.17 answers `FI_ORDER_SAS` only (msg_order 0x100), and indeed does not keep a send
//! behind a WRITE it moves in parts through its SAR buffers (a WRITE larger than the peer's
//! share of them): the commands queued behind it, the note among them, are handled before
//! its data has landed. A WRITE that fits in an inject-sized command carries its data in the
//! command itself, handled in queue order before the note's command, so on shm only larger
//! WRITEs hold their note (every small reply waiting for a completion would cost each fabric
//! request a round trip for no gain).

use super::domain::OfiOrdering;
use super::kind::OfiKind;
use super::sys;

/// Which WRITEs hold their IMM note until their delivery completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteGate {
    /// None: the provider keeps sends after writes.
    Never,
    /// WRITEs longer than this many bytes.
    Above(usize),
    /// Every WRITE.
    Always,
}

impl NoteGate {
    /// The gate for an endpoint of `kind` opened with `ordering`, whose provider answered
    /// `msg_order` for its transmit side and carries `inject_size` bytes inline.
    pub fn for_endpoint(
        kind: OfiKind,
        ordering: OfiOrdering,
        msg_order: u64,
        inject_size: usize,
    ) -> NoteGate {
        let send_after_write = msg_order & sys::FI_ORDER_SAW != 0;
        if ordering == OfiOrdering::None {
            NoteGate::Always
        } else if kind == OfiKind::Shm {
            NoteGate::Above(inject_size)
        } else if send_after_write {
            NoteGate::Never
        } else {
            NoteGate::Always
        }
    }

    /// Whether a WRITE of `len` bytes holds its note.
    pub fn holds(self, len: usize) -> bool {
        match self {
            NoteGate::Never => false,
            NoteGate::Above(max) => len > max,
            NoteGate::Always => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAW: u64 = sys::FI_ORDER_SAW;
    const SAS: u64 = 1 << 8;

    #[test]
    fn only_providers_keeping_send_after_write_send_notes_at_once() {
        let tcp = NoteGate::for_endpoint(OfiKind::Tcp, OfiOrdering::AsAnswered, SAW | SAS, 64);
        assert_eq!(tcp, NoteGate::Never);
        assert!(!tcp.holds(8 << 20));
        // Asked for no ordering: whatever the provider could do is not relied on.
        let unordered = NoteGate::for_endpoint(OfiKind::Tcp, OfiOrdering::None, SAW, 64);
        assert!(unordered.holds(1));
        // A provider without FI_ORDER_SAW (efa answers FI_ORDER_SAS only).
        let efa = NoteGate::for_endpoint(OfiKind::Efa, OfiOrdering::AsAnswered, SAS, 32);
        assert_eq!(efa, NoteGate::Always);
        // shm: inline-sized WRITEs cannot be overtaken; larger ones may be, SAW or not.
        for answered in [SAS, SAW | SAS] {
            let shm = NoteGate::for_endpoint(OfiKind::Shm, OfiOrdering::AsAnswered, answered, 4096);
            assert_eq!(shm, NoteGate::Above(4096));
            assert!(!shm.holds(4096));
            assert!(shm.holds(4097));
        }
        let shm_unordered = NoteGate::for_endpoint(OfiKind::Shm, OfiOrdering::None, SAS, 4096);
        assert!(shm_unordered.holds(1));
    }
}
