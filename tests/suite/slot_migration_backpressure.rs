//! The migration link's bound (`cluster-migration-queue-max`): the slot copy waits for the
//! target instead of overflowing it, so slots holding many times the bound move whole; a
//! client write past the bound fails the migration, which rolls back with nothing lost.

use super::slot_migration::{
    field, held_in, id, keys_in, migration, node_owning, owners, start_migration, three_primaries,
    wait_for_end, wait_for_target_to_drop,
};
use integration::cluster::wait_until;

/// The smallest bound the config takes: the high-water mark is a quarter of it (16 KiB).
const QUEUE_MAX: &str = "64kb";

/// A value of `len` bytes naming its key, so a read-back shows which write it was.
fn value(key: &str, len: usize) -> String {
    let mut v = format!("{key}:");
    while v.len() < len {
        v.push('x');
    }
    v
}

#[test]
fn slots_holding_many_times_the_queue_bound_move_with_every_key() {
    // Goal: the copy waits above the high-water mark for the target to drain the link, so
    // copying alone never overflows the queue. Method: a 64 KiB bound and slots 0-15 holding
    // about 3 MiB (each slot about 190 KiB, three times the bound: the copy that appended a
    // slot whole, as before, broke the queue at the first slot), moved in batches of 4
    // slots; every key must read back from the target.
    let nodes = three_primaries("migrate-backpressure");
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    let target_id = id(target);
    let keys = keys_in(0, 15, 750);
    let mut src = source.client();
    for chunk in keys.chunks(100) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("SET").arg(k).arg(value(k, 4096)).ignore();
        }
        let _: () = pipe.query(&mut src).unwrap();
    }
    for (name, v) in [
        ("cluster-migration-queue-max", QUEUE_MAX),
        ("cluster-migration-slots-per-batch", "4"),
    ] {
        assert_eq!(source.cli(&["CONFIG", "SET", name, v]), "OK", "{name}");
    }
    assert_eq!(
        source.cli(&["CONFIG", "GET", "cluster-migration-queue-max"]),
        "cluster-migration-queue-max\n65536"
    );
    start_migration(source, 0, 15, &target_id, "backpressure");
    let m = wait_for_end(source, "backpressure");
    assert_eq!(field(&m, "state"), "success", "{m:?}");
    assert_eq!(field(&m, "keys_moved"), keys.len().to_string(), "{m:?}");
    let owner_now = owners(target);
    for (slot, owner) in owner_now.iter().enumerate().take(16) {
        assert_eq!(owner.as_deref(), Some(target_id.as_str()), "slot {slot}");
    }
    let mut dst = target.client();
    for k in &keys {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut dst).unwrap();
        assert_eq!(v, Some(value(k, 4096)), "{k}");
    }
    wait_until("the source dropped the moved keys", &[source], || {
        held_in(source, 0..=15) == 0
    });
}

#[test]
fn a_client_write_past_the_queue_bound_fails_the_migration_and_loses_nothing() {
    // Goal: client writes cannot wait (they hold their shard), so one that would pass the
    // bound breaks the link: the migration fails cleanly, the source keeps every key and
    // the write, and the target drops its copy. Method: hold the batch after its copy
    // (`cluster-migration-debug-hold`), then write a value larger than the 64 KiB bound to
    // a streaming slot.
    let nodes = three_primaries("migrate-overflow");
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    let target_id = id(target);
    let keys = keys_in(0, 9, 200);
    let mut src = source.client();
    for k in &keys {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg(value(k, 100))
            .query(&mut src)
            .unwrap();
    }
    for (name, v) in [
        ("cluster-migration-queue-max", QUEUE_MAX),
        ("cluster-migration-debug-hold", "yes"),
    ] {
        assert_eq!(source.cli(&["CONFIG", "SET", name, v]), "OK", "{name}");
    }
    start_migration(source, 0, 9, &target_id, "overflow");
    wait_until("the target holds the copy", &[target, source], || {
        held_in(target, 0..=9) == keys.len()
    });
    let big = &keys[0];
    let big_value = value(big, 100 * 1024);
    let _: () = redis::cmd("SET")
        .arg(big)
        .arg(&big_value)
        .query(&mut src)
        .unwrap();
    let m = wait_for_end(source, "overflow");
    assert_eq!(field(&m, "state"), "failed", "{m:?}");
    assert!(
        field(&m, "message").contains("backed up past 65536 bytes"),
        "{m:?}"
    );
    assert!(migration(source, "overflow").is_some());
    let owner_now = owners(source);
    for k in &keys {
        let slot = proto::slot::key_slot(k.as_bytes()) as usize;
        assert_eq!(owner_now[slot], Some(id(source)), "slot {slot}");
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut src).unwrap();
        let expected = if k == big {
            big_value.clone()
        } else {
            value(k, 100)
        };
        assert_eq!(v, Some(expected), "{k}");
    }
    wait_for_target_to_drop(target, &target_id, "the target dropped the failed copy");
}
