//! CLUSTER SETSLOT as a topology method: the open-slot markers of a migration and the final
//! rebinding of a slot (protocols.md §2.13), with redis-server 7.0.15's checks and texts.

use super::error::ClusterError;
use super::slots::parse_slot;
use super::topology::Topology;

/// What SETSLOT was asked to do, parsed from `slot action [node-id]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlot<'a> {
    Migrating(&'a [u8]),
    Importing(&'a [u8]),
    Stable,
    Node(&'a [u8]),
}

impl<'a> SetSlot<'a> {
    /// Parses the arguments after `SETSLOT` (`slot action [id]`).
    pub fn parse(args: &[&'a [u8]]) -> Result<(u16, SetSlot<'a>), ClusterError> {
        let slot = args
            .first()
            .and_then(|a| parse_slot(a))
            .ok_or(ClusterError::InvalidSlot)?;
        let action = match args {
            [_, a, id] if is(a, "migrating") => SetSlot::Migrating(id),
            [_, a, id] if is(a, "importing") => SetSlot::Importing(id),
            [_, a] if is(a, "stable") => SetSlot::Stable,
            [_, a, id] if is(a, "node") => SetSlot::Node(id),
            _ => return Err(ClusterError::SetSlotSyntax),
        };
        Ok((slot, action))
    }
}

fn quoted(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

impl Topology {
    /// Applies SETSLOT. `keys_in_slot` is how many keys this node holds in `slot` (a slot
    /// with keys may not be given away). The caller refuses replicas first (see
    /// [`Topology::check_setslot_allowed`]).
    pub fn set_slot(
        &mut self,
        slot: u16,
        action: SetSlot<'_>,
        keys_in_slot: usize,
    ) -> Result<(), ClusterError> {
        let me = self.myself_index();
        match action {
            SetSlot::Migrating(arg) => {
                if self.slots.owner(slot) != Some(me) {
                    return Err(ClusterError::NotOwner(slot));
                }
                let target = self.primary_by_arg(arg, true)?;
                self.slots.migrating.insert(slot, target);
            }
            SetSlot::Importing(arg) => {
                if self.slots.owner(slot) == Some(me) {
                    return Err(ClusterError::AlreadyOwner(slot));
                }
                let source = self.primary_by_arg(arg, true)?;
                self.slots.importing.insert(slot, source);
            }
            SetSlot::Stable => {
                self.slots.migrating.remove(&slot);
                self.slots.importing.remove(&slot);
            }
            SetSlot::Node(arg) => {
                let target = self.primary_by_arg(arg, false)?;
                let target_index = self.index_of(&target).unwrap_or(me);
                if self.slots.owner(slot) == Some(me) && target_index != me && keys_in_slot != 0 {
                    return Err(ClusterError::SlotHasKeys(slot));
                }
                // Handing away an emptied slot ends its migration.
                if keys_in_slot == 0 {
                    self.slots.migrating.remove(&slot);
                }
                // Taking over an imported slot ends the import; the new binding needs an
                // epoch of its own so it wins over the source's claim.
                if target_index == me && self.slots.importing.remove(&slot).is_some() {
                    self.bump_epoch_without_consensus();
                }
                self.slots.set_owner(slot, Some(target_index));
            }
        }
        self.refresh_state();
        Ok(())
    }

    /// SETSLOT runs on primaries only.
    pub fn check_setslot_allowed(&self) -> Result<(), ClusterError> {
        if self.myself().is_replica() {
            return Err(ClusterError::SetSlotOnReplica);
        }
        Ok(())
    }

    /// Gives this node a config epoch no other node has, without a vote (Redis's
    /// `clusterBumpConfigEpochWithoutConsensus`): needed after taking a slot by SETSLOT NODE.
    pub fn bump_epoch_without_consensus(&mut self) {
        let max = self
            .nodes
            .iter()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch);
        let mine = self.myself().config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            self.myself_mut().config_epoch = epoch;
            tracing::info!(epoch, "config epoch bumped without consensus");
        }
    }

    /// The primary named by `arg`: MIGRATING/IMPORTING and NODE word "unknown" differently.
    pub(crate) fn primary_by_arg(
        &self,
        arg: &[u8],
        migration: bool,
    ) -> Result<super::id::NodeId, ClusterError> {
        let Some(index) = self.find(arg) else {
            return Err(if migration {
                ClusterError::UnknownNodeMigration(quoted(arg))
            } else {
                ClusterError::UnknownNode(quoted(arg))
            });
        };
        let node = &self.nodes[index as usize];
        if !node.is_primary() {
            return Err(ClusterError::TargetNotPrimary);
        }
        Ok(node.id)
    }
}

/// `arg` is `keyword`, in any case.
fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const A: &str = "0c24887d2474e26d84fcebefa41f59b5382518bf";
    const B: &str = "50b23ed3645c530d5d4a957508063292dc2ea373";
    const REPLICA: &str = "8065bf6549e40b5040eea03dd3e8bb8ff61d31fe";

    /// Node 31001's view from the fixtures (owns 0-5460, 100/101 migrating, 6000 importing).
    fn three() -> Topology {
        let file = format!(
            "{}vars currentEpoch 3 lastVoteEpoch 0\n",
            String::from_utf8_lossy(include_bytes!("fixtures/three.nodes.txt"))
        );
        super::super::config_file::parse(&file, &mut rand::rngs::StdRng::seed_from_u64(1)).unwrap()
    }

    fn run(t: &mut Topology, line: &str, keys: usize) -> Result<(), String> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let (slot, action) = SetSlot::parse(&args).map_err(|e| e.to_string())?;
        t.set_slot(slot, action, keys).map_err(|e| e.to_string())
    }

    /// The replies redis-server 7.0.15 gave to the same calls.
    #[test]
    fn setslot_answers_as_redis() {
        let mut t = three();
        let zeros = "0".repeat(40);
        let syntax = "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";
        assert_eq!(run(&mut t, "100 migrating", 0).unwrap_err(), syntax);
        assert_eq!(run(&mut t, "100 bogus", 0).unwrap_err(), syntax);
        assert_eq!(run(&mut t, "100 stable x", 0).unwrap_err(), syntax);
        assert_eq!(
            run(&mut t, &format!("100 node {B} x"), 0).unwrap_err(),
            syntax
        );
        assert_eq!(
            run(&mut t, "99999 stable", 0).unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            run(&mut t, "x stable", 0).unwrap_err(),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            run(&mut t, &format!("100 migrating {zeros}"), 0).unwrap_err(),
            format!("ERR I don't know about node {zeros}")
        );
        assert_eq!(
            run(&mut t, "100 migrating abc", 0).unwrap_err(),
            "ERR I don't know about node abc"
        );
        assert_eq!(
            run(&mut t, &format!("100 importing {B}"), 0).unwrap_err(),
            "ERR I'm already the owner of hash slot 100"
        );
        assert_eq!(
            run(&mut t, &format!("6000 migrating {A}"), 0).unwrap_err(),
            "ERR I'm not the owner of hash slot 6000"
        );
        assert_eq!(
            run(&mut t, "100 node abc", 0).unwrap_err(),
            "ERR Unknown node abc"
        );
        assert_eq!(
            run(&mut t, &format!("200 migrating {REPLICA}"), 0).unwrap_err(),
            "ERR Target node is not a master"
        );
        assert_eq!(
            run(&mut t, &format!("6001 importing {REPLICA}"), 0).unwrap_err(),
            "ERR Target node is not a master"
        );
        assert_eq!(
            run(&mut t, &format!("200 node {REPLICA}"), 0).unwrap_err(),
            "ERR Target node is not a master"
        );
        assert_eq!(
            run(&mut t, &format!("5061 node {B}"), 1).unwrap_err(),
            "ERR Can't assign hashslot 5061 to a different node while I still hold keys for this hash slot."
        );
        // Giving an emptied migrating slot away ends the migration.
        run(&mut t, &format!("100 node {B}"), 0).unwrap();
        assert!(!t.slots.migrating.contains_key(&100));
        assert_eq!(t.owner(100).unwrap().id.as_str(), B);
        run(&mut t, "101 stable", 0).unwrap();
        assert!(t.slots.migrating.is_empty());
        // Taking an imported slot ends the import and bumps our epoch past the others.
        run(&mut t, &format!("6000 node {A}"), 0).unwrap();
        assert!(t.slots.importing.is_empty());
        assert_eq!(t.owner(6000).unwrap().id.as_str(), A);
        assert_eq!((t.current_epoch, t.myself().config_epoch), (4, 4));
        assert!(t.check_setslot_allowed().is_ok());
    }
}
