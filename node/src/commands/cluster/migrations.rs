//! Valkey 9's atomic slot migration commands, mapped onto this node's migrations (each one
//! a record in the topology log, see `cluster::migration`):
//! - `CLUSTER MIGRATESLOTS SLOTSRANGE start end [start end ...] NODE id [SLOTSRANGE ... NODE
//!   ...] [REQUESTID id]` starts one migration per NODE group from this node (the source);
//!   REQUESTID (ours) makes a retry name the same migration;
//! - `CLUSTER GETSLOTMIGRATIONS` lists the migrations the log remembers, with what their
//!   source measured (keys and bytes moved, elapsed time, write pauses: count, p50, p99,
//!   max; zeros on the other nodes) and what carried its data (`link`: `tcp` or
//!   `fabric/<provider>`, empty on the other nodes);
//! - `CLUSTER CANCELSLOTMIGRATIONS` cancels the ones this node drives;
//! - `CLUSTER SYNCSLOTS ESTABLISH id batch` (internal): the source's link to the target
//!   becomes the batch's import link (`:1`), or is told the target has not applied the
//!   batch's begin yet (`:0`); `CLUSTER SYNCSLOTS COMMITTED id batch` (internal): whether
//!   this node has applied the batch's commit; `CLUSTER SYNCSLOTS FABRIC` (internal): where
//!   this node serves clients on the fabric (provider, address, port; empty when not), for
//!   a source to carry the batch's link there.

use super::cluster;
use crate::cluster::id::NodeId;
use crate::cluster::migration::{MigrationId, MigrationState, SlotRanges};
use crate::command_framework::args::int;
use crate::command_framework::{CmdError, CmdResult, Ctx};

/// Most NODE groups one MIGRATESLOTS names.
const GROUPS_MAX: usize = 16;

pub fn migrateslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    let (groups, request_id) = parse_groups(&args[2..])?;
    let mut started = Vec::with_capacity(groups.len());
    for (i, (ranges, target)) in groups.into_iter().enumerate() {
        // One request id per group: a retry of the whole command names the same ones.
        let group_request = match (&request_id, i) {
            (Some(r), 0) => r.clone(),
            (Some(r), i) => format!("{r}#{i}"),
            (None, _) => String::new(),
        };
        let id = ctx
            .services
            .slot_migrations()
            .start_migration(&group_request, ranges, target)
            .map_err(CmdError::new)?;
        started.push(id);
    }
    ctx.reply.ok();
    Ok(())
}

type Groups = Vec<(SlotRanges, NodeId)>;

fn parse_groups(args: &[&[u8]]) -> Result<(Groups, Option<String>), CmdError> {
    let mut groups = Vec::new();
    let mut request_id = None;
    let mut i = 0;
    while i < args.len() {
        let word = args[i];
        if word.eq_ignore_ascii_case(b"requestid") {
            let id = args.get(i + 1).ok_or(CmdError::Syntax)?;
            if id.is_empty() || id.len() > crate::cluster::migration::ledger::REQUEST_ID_MAX {
                return Err(CmdError::new("ERR Invalid REQUESTID"));
            }
            request_id = Some(String::from_utf8_lossy(id).into_owned());
            i += 2;
            continue;
        }
        if !word.eq_ignore_ascii_case(b"slotsrange") {
            return Err(CmdError::Syntax);
        }
        i += 1;
        let mut raw = Vec::new();
        while i < args.len() && !args[i].eq_ignore_ascii_case(b"node") {
            let start = slot(args[i])?;
            let end = slot(args.get(i + 1).ok_or(CmdError::Syntax)?)?;
            raw.push((start, end));
            i += 2;
        }
        let id = args.get(i + 1).ok_or(CmdError::Syntax)?;
        let target = NodeId::parse(id).ok_or_else(|| {
            CmdError::new(format!(
                "ERR Invalid node name {}",
                String::from_utf8_lossy(id)
            ))
        })?;
        i += 2;
        let ranges = SlotRanges::new(&raw).map_err(|e| CmdError::new(format!("ERR {e}")))?;
        if ranges.ranges().len() > crate::cluster::consensus::command::MIGRATION_RANGES_MAX {
            return Err(CmdError::new(format!(
                "ERR at most {} slot ranges per node",
                crate::cluster::consensus::command::MIGRATION_RANGES_MAX
            )));
        }
        groups.push((ranges, target));
        if groups.len() > GROUPS_MAX {
            return Err(CmdError::new(format!(
                "ERR at most {GROUPS_MAX} NODE groups per call"
            )));
        }
    }
    if groups.is_empty() {
        return Err(CmdError::Syntax);
    }
    Ok((groups, request_id))
}

fn slot(arg: &[u8]) -> Result<u16, CmdError> {
    int(arg)
        .ok()
        .filter(|&s| (0..=crate::cluster::slots::SLOT_MAX as i64).contains(&s))
        .map(|s| s as u16)
        .ok_or_else(|| CmdError::new("ERR Invalid or out of range slot"))
}

pub fn getslotmigrations(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let t = c.topology.read();
    let me = t.myself().id;
    let records: Vec<_> = t.consensus.migrations.all().cloned().collect();
    drop(t);
    ctx.reply.array(records.len());
    for r in records {
        let ranges: Vec<String> = r
            .ranges
            .ranges()
            .iter()
            .map(|(s, e)| format!("{s}-{e}"))
            .collect();
        let (state, message) = match &r.state {
            MigrationState::Running => ("running", String::new()),
            MigrationState::Succeeded => ("success", String::new()),
            MigrationState::Failed(why) => ("failed", why.clone()),
            MigrationState::Cancelled(why) => ("cancelled", why.clone()),
        };
        let operation = if r.source == me {
            "EXPORT"
        } else if r.target == me {
            "IMPORT"
        } else {
            "OTHER"
        };
        // Only the source measures; elsewhere the figures are zeros.
        let stats = ctx
            .services
            .slot_migrations()
            .stats(r.id)
            .unwrap_or_default();
        let fields: [(&str, String); 17] = [
            ("name", r.id.to_string()),
            ("request_id", r.request_id.clone()),
            ("operation", operation.into()),
            ("slot_ranges", ranges.join(" ")),
            ("source_node", r.source.to_string()),
            ("target_node", r.target.to_string()),
            ("state", state.into()),
            ("message", message),
            (
                "progress",
                format!(
                    "{}/{} slots, {}/{} batches",
                    r.slots_done,
                    r.ranges.slot_count(),
                    r.batches_done,
                    r.batches_total
                ),
            ),
            ("keys_moved", stats.keys_moved.to_string()),
            ("bytes_moved", stats.bytes_moved.to_string()),
            ("elapsed_ms", stats.elapsed_ms.to_string()),
            ("write_pauses", stats.pauses.to_string()),
            ("write_pause_p50_ms", format!("{:.3}", stats.pause_p50_ms)),
            ("write_pause_p99_ms", format!("{:.3}", stats.pause_p99_ms)),
            ("write_pause_max_ms", format!("{:.3}", stats.pause_max_ms)),
            ("link", stats.link),
        ];
        ctx.reply.map(fields.len());
        for (name, value) in fields {
            ctx.reply.bulk(name.as_bytes());
            ctx.reply.bulk(value.as_bytes());
        }
    }
    Ok(())
}

pub fn cancelslotmigrations(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    let asked = ctx.services.slot_migrations().cancel_migrations();
    ctx.reply.integer(asked as i64);
    Ok(())
}

pub fn syncslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    if args[2].eq_ignore_ascii_case(b"fabric") {
        if args.len() != 3 {
            return Err(CmdError::Syntax);
        }
        return fabric_endpoint(ctx);
    }
    let committed = args[2].eq_ignore_ascii_case(b"committed");
    if !(args[2].eq_ignore_ascii_case(b"establish") || committed) || args.len() != 5 {
        return Err(CmdError::Syntax);
    }
    let id = std::str::from_utf8(args[3])
        .ok()
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .map(MigrationId)
        .ok_or_else(|| CmdError::new("ERR Invalid migration id"))?;
    let batch = int(args[4])
        .ok()
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(|| CmdError::new("ERR Invalid batch"))?;
    let t = c.topology.read();
    if committed {
        // COMMITTED id batch: whether this node has applied the batch's commit (the source
        // lets the batch's parked writes go only then, so they are not sent back to it).
        let applied = t
            .consensus
            .migrations
            .get(id)
            .is_some_and(|r| r.batches_done > batch);
        drop(t);
        ctx.reply.integer(i64::from(applied));
        return Ok(());
    }
    let me = t.myself().id;
    let Some(r) = t.consensus.migrations.get(id) else {
        // The open may not have reached this node yet.
        ctx.reply.integer(0);
        return Ok(());
    };
    if r.target != me {
        return Err(CmdError::new(format!(
            "ERR migration {id} does not move slots to this node"
        )));
    }
    if !r.state.is_running() || r.batches_done > batch {
        return Err(CmdError::new(format!(
            "ERR batch {batch} of migration {id} is not moving any more"
        )));
    }
    let moving_now = r.moving.as_ref().is_some_and(|(b, _)| *b == batch);
    drop(t);
    if moving_now {
        ctx.client.import_link = Some(id.0);
    }
    ctx.reply.integer(i64::from(moving_now));
    Ok(())
}

/// `CLUSTER SYNCSLOTS FABRIC`: `[provider, ip, port]` (ip `0.0.0.0`: any of this node's
/// addresses), or an empty array without a fabric listener.
fn fabric_endpoint(ctx: &mut Ctx<'_>) -> CmdResult {
    match ctx.server.fabric_serving.get() {
        Some(endpoint) => {
            ctx.reply.array(3);
            ctx.reply.bulk(endpoint.provider.as_bytes());
            ctx.reply.bulk(endpoint.ip.to_string().as_bytes());
            ctx.reply.integer(i64::from(endpoint.port));
        }
        None => ctx.reply.array(0),
    }
    Ok(())
}
