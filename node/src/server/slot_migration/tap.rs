//! The write path's side of a migration: each command a write propagates goes down the
//! link of the migration its slot streams to (fed with the write's shards held, so a slot's
//! writes follow its copy in the order they happened). A write that cannot be followed slot
//! by slot (FLUSHALL, FLUSHDB, SWAPDB) breaks every link: the migration rolls back rather
//! than leave the target with keys the source dropped.

use crate::cluster::migration::MigrationGate;
use crate::command_framework::dispatch::resolve;
use crate::replication::outgoing::Outgoing;
use crate::replication::propagate::encode_into;
use smallvec::SmallVec;

pub fn feed(gate: &MigrationGate, outgoing: &Outgoing) {
    let mut bytes = Vec::new();
    for argv in outgoing.commands() {
        let args: SmallVec<[&[u8]; 8]> = argv.iter().map(|a| a.as_slice()).collect();
        let Some(name) = args.first() else { continue };
        let Ok(spec) = resolve(&args) else { continue };
        let first_key = spec.key_positions(&args).first().and_then(|&i| args.get(i));
        match first_key {
            Some(key) => {
                let slot = proto::slot::key_slot(key);
                if let Some(link) = gate.link_of(slot) {
                    bytes.clear();
                    encode_into(std::slice::from_ref(argv), &mut bytes);
                    link.append(&bytes, 1);
                }
            }
            None if is_whole_dataset_write(name) => gate.break_all(&format!(
                "{} ran on the source while slots moved",
                String::from_utf8_lossy(name).to_ascii_uppercase()
            )),
            None => {}
        }
    }
}

fn is_whole_dataset_write(name: &[u8]) -> bool {
    [&b"flushall"[..], b"flushdb", b"swapdb"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}
