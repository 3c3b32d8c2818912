//! Slot assignment commands as topology methods: ADDSLOTS, ADDSLOTSRANGE, DELSLOTS,
//! DELSLOTSRANGE, FLUSHSLOTS. Validation order and texts follow redis-server 7.0.15: every
//! argument is parsed first (`Invalid or out of range slot`, reversed ranges), then the
//! slots are checked in argument order, each for busy/unassigned before repetition.

use super::error::ClusterError;
use super::slots::{parse_slot, SlotMap};
use super::topology::Topology;
use proto::slot::SLOT_COUNT;

/// Parses ADDSLOTS/DELSLOTS arguments.
pub fn parse_slots(args: &[&[u8]]) -> Result<Vec<(u16, u16)>, ClusterError> {
    args.iter()
        .map(|a| {
            parse_slot(a)
                .map(|s| (s, s))
                .ok_or(ClusterError::InvalidSlot)
        })
        .collect()
}

/// Parses ADDSLOTSRANGE/DELSLOTSRANGE arguments (pairs; the caller checks the count).
pub fn parse_ranges(args: &[&[u8]]) -> Result<Vec<(u16, u16)>, ClusterError> {
    args.chunks(2)
        .map(|pair| {
            let start = parse_slot(pair[0]).ok_or(ClusterError::InvalidSlot)?;
            let end = pair
                .get(1)
                .and_then(|a| parse_slot(a))
                .ok_or(ClusterError::InvalidSlot)?;
            if start > end {
                return Err(ClusterError::RangeReversed(start, end));
            }
            Ok((start, end))
        })
        .collect()
}

impl Topology {
    /// Assigns slot ranges to this node (ADDSLOTS, ADDSLOTSRANGE).
    pub fn add_slots(&mut self, ranges: &[(u16, u16)]) -> Result<(), ClusterError> {
        check_slots(&self.slots, ranges, |m, s| match m.owner(s) {
            Some(_) => Err(ClusterError::SlotBusy(s)),
            None => Ok(()),
        })?;
        let me = self.myself_index();
        for &(start, end) in ranges {
            for slot in start..=end {
                self.slots.set_owner(slot, Some(me));
                // Owning the slot now, we are no longer importing it.
                self.slots.importing.remove(&slot);
            }
        }
        self.refresh_state();
        Ok(())
    }

    /// Unassigns slot ranges, whoever owns them (DELSLOTS, DELSLOTSRANGE).
    pub fn del_slots(&mut self, ranges: &[(u16, u16)]) -> Result<(), ClusterError> {
        check_slots(&self.slots, ranges, |m, s| match m.owner(s) {
            Some(_) => Ok(()),
            None => Err(ClusterError::SlotUnassigned(s)),
        })?;
        for &(start, end) in ranges {
            for slot in start..=end {
                self.slots.set_owner(slot, None);
            }
        }
        self.refresh_state();
        Ok(())
    }

    /// Unassigns every slot of this node; refused while the node holds keys (FLUSHSLOTS).
    pub fn flush_slots(&mut self, keys_held: usize) -> Result<(), ClusterError> {
        if keys_held != 0 {
            return Err(ClusterError::FlushSlotsNotEmpty);
        }
        let me = self.myself_index();
        for slot in 0..SLOT_COUNT as u16 {
            if self.slots.owner(slot) == Some(me) {
                self.slots.set_owner(slot, None);
            }
        }
        self.refresh_state();
        Ok(())
    }
}

/// Checks `ranges` slot by slot in argument order: `state` first, then repetition. Visits
/// at most SLOT_COUNT + 1 slots: the first slot seen twice stops the loop.
pub(super) fn check_slots(
    map: &SlotMap,
    ranges: &[(u16, u16)],
    state: impl Fn(&SlotMap, u16) -> Result<(), ClusterError>,
) -> Result<(), ClusterError> {
    let mut seen = vec![false; SLOT_COUNT];
    for &(start, end) in ranges {
        for slot in start..=end {
            state(map, slot)?;
            let seen_before = std::mem::replace(&mut seen[slot as usize], true);
            if seen_before {
                return Err(ClusterError::SlotRepeated(slot));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;
    use crate::cluster::node::ClusterNode;
    use rand::SeedableRng;

    fn lone() -> Topology {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        Topology::new(ClusterNode::new(
            HexId::random(&mut rng),
            HexId::random(&mut rng),
        ))
    }

    fn args(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    fn add(t: &mut Topology, s: &str) -> Result<(), String> {
        parse_slots(&args(s))
            .and_then(|r| t.add_slots(&r))
            .map_err(|e| e.to_string())
    }

    fn add_range(t: &mut Topology, s: &str) -> Result<(), String> {
        parse_ranges(&args(s))
            .and_then(|r| t.add_slots(&r))
            .map_err(|e| e.to_string())
    }

    fn del(t: &mut Topology, s: &str) -> Result<(), String> {
        parse_slots(&args(s))
            .and_then(|r| t.del_slots(&r))
            .map_err(|e| e.to_string())
    }

    /// The sequence run against redis-server 7.0.15, with the replies it gave.
    #[test]
    fn slot_commands_answer_as_redis() {
        let mut t = lone();
        assert_eq!(
            add(&mut t, "5 5").unwrap_err(),
            "ERR Slot 5 specified multiple times"
        );
        assert_eq!(
            add(&mut t, "-1").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            add(&mut t, "16384").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            add(&mut t, "abc").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        add(&mut t, "1 2 3").unwrap();
        assert_eq!(add(&mut t, "2").unwrap_err(), "ERR Slot 2 is already busy");
        assert_eq!(
            add_range(&mut t, "10 5").unwrap_err(),
            "ERR start slot number 10 is greater than end slot number 5"
        );
        assert_eq!(
            add_range(&mut t, "10 20 15 25").unwrap_err(),
            "ERR Slot 15 specified multiple times"
        );
        add_range(&mut t, "10 20").unwrap();
        assert_eq!(
            add_range(&mut t, "2 3").unwrap_err(),
            "ERR Slot 2 is already busy"
        );
        assert_eq!(
            add_range(&mut t, "100 99999").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            del(&mut t, "50").unwrap_err(),
            "ERR Slot 50 is already unassigned"
        );
        assert_eq!(
            del(&mut t, "1 1").unwrap_err(),
            "ERR Slot 1 specified multiple times"
        );
        assert_eq!(
            add(&mut t, "1 1 99999").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        add(&mut t, "12182").unwrap();
        assert_eq!(
            add(&mut t, "12182 5 5").unwrap_err(),
            "ERR Slot 12182 is already busy"
        );
        assert_eq!(
            add(&mut t, "5 5 12182").unwrap_err(),
            "ERR Slot 5 specified multiple times"
        );
        assert_eq!(
            add(&mut t, "5 12182 5").unwrap_err(),
            "ERR Slot 12182 is already busy"
        );
        assert_eq!(
            add_range(&mut t, "5 6 6 7 12182 12182").unwrap_err(),
            "ERR Slot 6 specified multiple times"
        );
        assert_eq!(
            add_range(&mut t, "5 4 16384 16384").unwrap_err(),
            "ERR start slot number 5 is greater than end slot number 4"
        );
        assert_eq!(
            add_range(&mut t, "16384 16384 5 4").unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            del(&mut t, "50 10 10").unwrap_err(),
            "ERR Slot 50 is already unassigned"
        );
        assert_eq!(
            del(&mut t, "10 10 50").unwrap_err(),
            "ERR Slot 10 specified multiple times"
        );
        // Nothing changed by the refused calls.
        let me = t.myself_index();
        assert_eq!(
            t.slots.ranges_of(me),
            vec![(1, 3), (10, 20), (12182, 12182)]
        );
        assert_eq!(
            t.flush_slots(1).unwrap_err().to_string(),
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS."
        );
        t.flush_slots(0).unwrap();
        assert_eq!(t.slots.assigned(), 0);
    }

    #[test]
    fn full_coverage_makes_the_state_ok() {
        let mut t = lone();
        assert_eq!(t.state().name(), "fail");
        add_range(&mut t, "0 16383").unwrap();
        assert_eq!(t.state().name(), "ok");
        assert_eq!(t.size(), 1);
        del(&mut t, "5").unwrap();
        assert_eq!(t.state().name(), "fail");
    }
}
