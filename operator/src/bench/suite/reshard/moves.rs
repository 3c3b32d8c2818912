//! The move itself, timed from the client's side: on our node `CLUSTER MIGRATESLOTS` of the
//! source's ranges, until `CLUSTER GETSLOTMIGRATIONS` on the source says `success` (polled
//! every [`POLL`]); on redis-server `redis-cli --cluster reshard` from the source to the
//! target, until it exits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use proto::resp::Frame;

use super::super::server_process::{run_bounded, shell_line};
use super::super::sync_client::{frame_text, SyncClient};
use crate::cluster::nodes::NodeRow;

const POLL: Duration = Duration::from_millis(10);
const REQUEST_ID: &str = "bench-reshard";
/// How long the source's figures may take to settle after `success`, polled this often.
const SETTLE_MAX: Duration = Duration::from_secs(5);
const SETTLE_POLL: Duration = Duration::from_millis(30);

/// A timed move.
#[derive(Clone, Debug)]
pub struct Moved {
    pub seconds: f64,
    /// The command that moved the slots, ports and ids by name.
    pub command: String,
    /// What the source reported (our node: GETSLOTMIGRATIONS' fields).
    pub fields: BTreeMap<String, String>,
}

/// Our node: MIGRATESLOTS of every range `from` owns to `to`.
pub fn migrate_slots(from: &NodeRow, to: &NodeRow, timeout: Duration) -> anyhow::Result<Moved> {
    let mut argv: Vec<String> = ["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE"]
        .map(String::from)
        .to_vec();
    for &(a, b) in &from.slot_ranges {
        argv.extend([a.to_string(), b.to_string()]);
    }
    argv.extend([
        "NODE".into(),
        to.id.clone(),
        "REQUESTID".into(),
        REQUEST_ID.into(),
    ]);
    let mut c = SyncClient::connect(from.port(), Duration::from_secs(5))?;
    let started = Instant::now();
    let reply = c.request(&argv)?;
    if frame_text(&reply).as_deref() != Some("OK") {
        bail!("{}: {reply:?}", argv.join(" "));
    }
    let deadline = started + timeout;
    loop {
        let reply = c.request(&["CLUSTER", "GETSLOTMIGRATIONS"])?;
        let fields = migration_fields(&reply, REQUEST_ID);
        let state = fields.as_ref().and_then(|f| f.get("state")).cloned();
        match state.as_deref() {
            Some("success") => {
                let seconds = started.elapsed().as_secs_f64();
                let at = argv.len() - 3;
                let command = format!(
                    "redis-cli -p $SOURCE_PORT {} $TARGET_ID {}",
                    shell_line(&argv[..at]),
                    shell_line(&argv[at + 1..])
                );
                let fields = settled_fields(&mut c, fields.unwrap_or_default())?;
                return Ok(Moved {
                    seconds,
                    command,
                    fields,
                });
            }
            Some("running") | None => {}
            Some(other) => bail!("the migration ended {other}: {fields:?}"),
        }
        if Instant::now() > deadline {
            bail!(
                "the migration still runs after {} s: {fields:?}",
                timeout.as_secs()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// The fields once the source's driver has finished: the log says `success` as soon as the
/// last commit is applied, a moment before the driver records the last batch's resume (its
/// write pause) and stops its clock; `elapsed_ms` standing still across a poll says it has.
fn settled_fields(
    c: &mut SyncClient,
    mut fields: BTreeMap<String, String>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let deadline = Instant::now() + SETTLE_MAX;
    while Instant::now() < deadline {
        std::thread::sleep(SETTLE_POLL);
        let reply = c.request(&["CLUSTER", "GETSLOTMIGRATIONS"])?;
        let Some(now) = migration_fields(&reply, REQUEST_ID) else {
            break;
        };
        let same = now.get("elapsed_ms") == fields.get("elapsed_ms");
        fields = now;
        if same {
            break;
        }
    }
    Ok(fields)
}

/// The fields of the migration named `request_id` in a GETSLOTMIGRATIONS reply (maps in
/// RESP3, flat arrays in RESP2).
pub fn migration_fields(reply: &Frame, request_id: &str) -> Option<BTreeMap<String, String>> {
    let Frame::Array(list) = reply else {
        return None;
    };
    list.iter()
        .map(|entry| -> BTreeMap<String, String> {
            let pairs: Vec<(&Frame, &Frame)> = match entry {
                Frame::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
                Frame::Array(flat) => flat
                    .chunks(2)
                    .filter(|p| p.len() == 2)
                    .map(|p| (&p[0], &p[1]))
                    .collect(),
                _ => Vec::new(),
            };
            pairs
                .into_iter()
                .filter_map(|(k, v)| Some((frame_text(k)?, frame_text(v)?)))
                .collect()
        })
        .find(|fields| fields.get("request_id").map(String::as_str) == Some(request_id))
}

/// redis-server: `redis-cli --cluster reshard` of all `from`'s slots to `to`.
pub fn redis_cli_reshard(
    any_port: u16,
    from: &NodeRow,
    to: &NodeRow,
    pipeline: u64,
    timeout: Duration,
) -> anyhow::Result<Moved> {
    let argv: Vec<String> = vec![
        "redis-cli".into(),
        "--cluster".into(),
        "reshard".into(),
        format!("127.0.0.1:{any_port}"),
        "--cluster-from".into(),
        from.id.clone(),
        "--cluster-to".into(),
        to.id.clone(),
        "--cluster-slots".into(),
        from.slots.to_string(),
        "--cluster-yes".into(),
        "--cluster-pipeline".into(),
        pipeline.to_string(),
    ];
    let started = Instant::now();
    let out = run_bounded(&argv, timeout)?;
    let seconds = started.elapsed().as_secs_f64();
    if !out.success {
        let tail: Vec<&str> = out.stdout.lines().rev().take(10).collect();
        return Err(anyhow!(
            "redis-cli --cluster reshard failed: {}\n{}",
            out.stderr,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let command = format!(
        "redis-cli --cluster reshard 127.0.0.1:$PORT --cluster-from $SOURCE_ID --cluster-to \
$TARGET_ID {}",
        shell_line(&argv[8..])
    );
    Ok(Moved {
        seconds,
        command,
        fields: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_migration_by_request_id_in_resp2_and_resp3() {
        let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec().into());
        let flat = Frame::Array(vec![
            Frame::Array(vec![bulk("request_id"), bulk("other")]),
            Frame::Array(vec![
                bulk("request_id"),
                bulk("x"),
                bulk("state"),
                bulk("success"),
            ]),
        ]);
        let found = migration_fields(&flat, "x").unwrap();
        assert_eq!(found.get("state").map(String::as_str), Some("success"));
        let map = Frame::Array(vec![Frame::Map(vec![(bulk("request_id"), bulk("x"))])]);
        assert!(migration_fields(&map, "x").is_some());
        assert!(migration_fields(&map, "y").is_none());
    }
}
