//! LATENCY LATEST | HISTORY event | RESET [event ...] | DOCTOR | HISTOGRAM [command ...] |
//! HELP: the latency monitor's events (`server::latency_monitor`) and the per-command latency
//! histograms INFO latencystats also reports (`server::command_stats`).

use super::reply_help;
use crate::command_framework::args;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdResult, CommandSpec, Ctx};
use std::fmt::Write;

const FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.8.13",
        ..command(
            "latency|latest",
            2,
            FLAGS,
            KeySpec::None,
            latest,
            "server",
            "Returns the latest latency samples for all events.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "latency|history",
            3,
            FLAGS,
            KeySpec::None,
            history,
            "server",
            "Returns timestamp-latency samples for an event.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "latency|reset",
            -2,
            FLAGS,
            KeySpec::None,
            reset,
            "server",
            "Resets the latency data for one or more events.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "latency|doctor",
            2,
            FLAGS,
            KeySpec::None,
            doctor,
            "server",
            "Returns a human-readable latency analysis report.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "latency|histogram",
            -2,
            FLAGS,
            KeySpec::None,
            histogram,
            "server",
            "Returns the cumulative distribution of latencies of a subset or all commands.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "latency|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            help,
            "server",
            "Returns helpful text about the different subcommands.",
        )
    },
];

/// [[event, time of the latest sample, its latency ms, the highest latency ms] ...]
fn latest(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let events = ctx.server.latency_monitor.latest();
    ctx.reply.array(events.len());
    for (name, sample, max) in events {
        ctx.reply.array(4);
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.integer(sample.time as i64);
        ctx.reply.integer(sample.latency_ms as i64);
        ctx.reply.integer(max as i64);
    }
    Ok(())
}

/// [[time, latency ms] ...], oldest first; an unknown event has none.
fn history(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let samples = ctx.server.latency_monitor.history(&args::text(args[2]));
    ctx.reply.array(samples.len());
    for s in samples {
        ctx.reply.array(2);
        ctx.reply.integer(s.time as i64);
        ctx.reply.integer(s.latency_ms as i64);
    }
    Ok(())
}

/// The number of events forgotten.
fn reset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let names: Vec<String> = args[2..].iter().map(|a| args::text(a)).collect();
    let n = ctx.server.latency_monitor.reset(&names);
    ctx.reply.integer(n as i64);
    Ok(())
}

/// A plain-text summary of the events: how many samples, their average and worst latency,
/// and what to look at.
fn doctor(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let threshold = ctx.server.config.read().latency.monitor_threshold_ms;
    let events = ctx.server.latency_monitor.latest();
    let mut out = String::new();
    if threshold == 0 {
        out.push_str(
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this node. \
             Enable it with CONFIG SET latency-monitor-threshold <milliseconds>.\n",
        );
    } else if events.is_empty() {
        out.push_str(
            "Dave, no latency spike was observed during the lifetime of this node. \
             Nothing to report.\n",
        );
    } else {
        let _ = writeln!(
            out,
            "Dave, I have observed latency spikes in this node (threshold {threshold} ms):\n"
        );
        for (i, (name, sample, max)) in events.iter().enumerate() {
            let all = ctx.server.latency_monitor.history(name);
            let avg = all.iter().map(|s| s.latency_ms).sum::<u64>() / all.len().max(1) as u64;
            let _ = writeln!(
                out,
                "{}. {name}: {} latency spikes (average {avg}ms, worst {max}ms, latest {}ms at {}).",
                i + 1,
                all.len(),
                sample.latency_ms,
                sample.time
            );
        }
        out.push_str(
            "\nI have a few advices for you:\n- Check SLOWLOG GET for the commands that took \
             this long; commands over many elements (KEYS, SMEMBERS of big sets, LRANGE of \
             long lists) are the usual cause.\n",
        );
    }
    ctx.reply.verbatim(out.as_bytes());
    Ok(())
}

/// {command: {calls, histogram_usec: {bound µs: calls below it}}} for the named commands (a
/// container names its subcommands; unknown names are skipped), or for every command called
/// since the last CONFIG RESETSTAT.
fn histogram(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let totals = ctx.server.command_stats.totals();
    let wanted: Vec<String> = args[2..].iter().map(|a| args::lower(a)).collect();
    let mut chosen: Vec<usize> = Vec::new();
    let called = |i: usize| totals[i].1.calls > 0;
    if wanted.is_empty() {
        chosen.extend((0..totals.len()).filter(|&i| called(i)));
    } else {
        for name in &wanted {
            let sub_prefix = format!("{name}|");
            for (i, (n, _)) in totals.iter().enumerate() {
                let matches = *n == name.as_str() || n.starts_with(&sub_prefix);
                if matches && called(i) && !chosen.contains(&i) {
                    chosen.push(i);
                }
            }
        }
    }
    ctx.reply.map(chosen.len());
    for i in chosen {
        let (name, t) = &totals[i];
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.map(2);
        ctx.reply.bulk(b"calls");
        ctx.reply.integer(t.calls as i64);
        ctx.reply.bulk(b"histogram_usec");
        let cdf = t.power_of_two_cdf();
        ctx.reply.map(cdf.len());
        for (bound, below) in cdf {
            ctx.reply.integer(bound as i64);
            ctx.reply.integer(below as i64);
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    reply_help(
        &mut ctx.reply,
        &[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Print this help.",
        ],
    );
    Ok(())
}
