//! INFO [section ...]: Redis 7.0's text format (`# Section` headers, `field:value` lines,
//! CRLF line ends, a blank line between sections) with the fields tools read.

use super::host;
use crate::command_framework::{CmdResult, Ctx};
use crate::node_state::services::Persistence;
use crate::node_state::stats::Stats;
use crate::node_state::NodeState;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// Sections in output order, with whether `INFO` without arguments includes them.
const SECTIONS: &[(&str, &str, bool)] = &[
    ("server", "Server", true),
    ("clients", "Clients", true),
    ("memory", "Memory", true),
    ("persistence", "Persistence", true),
    ("stats", "Stats", true),
    ("replication", "Replication", true),
    ("cpu", "CPU", true),
    ("modules", "Modules", true),
    ("commandstats", "Commandstats", false),
    ("errorstats", "Errorstats", true),
    ("latencystats", "Latencystats", false),
    ("cluster", "Cluster", true),
    // Ours: the fabric listener (not in Redis, so only when asked for or with `all`).
    ("fabric", "Fabric", false),
    ("keyspace", "Keyspace", true),
];

/// The allocator linked in (tikv-jemallocator 0.6 bundles jemalloc 5.3.0).
const MEM_ALLOCATOR: &str = "jemalloc-5.3.0";

/// Which sections the arguments ask for: none means the default set; `all` and
/// `everything` mean every section; unknown names select nothing, as in Redis.
fn wanted(args: &[&[u8]]) -> Vec<bool> {
    let mut want = vec![false; SECTIONS.len()];
    if args.is_empty() {
        for (i, s) in SECTIONS.iter().enumerate() {
            want[i] = s.2;
        }
        return want;
    }
    for arg in args {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        for (i, s) in SECTIONS.iter().enumerate() {
            want[i] |= match name.as_str() {
                "all" | "everything" => true,
                "default" => s.2,
                n => n == s.0,
            };
        }
    }
    want
}

pub fn info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let want = wanted(&args[1..]);
    let mut out = String::with_capacity(4096);
    for (i, (name, title, _)) in SECTIONS.iter().enumerate() {
        if !want[i] {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        let mut s = Section(&mut out);
        match *name {
            "server" => server(&mut s, ctx.server),
            "clients" => clients(&mut s, ctx.server),
            "memory" => memory(&mut s, ctx.server, ctx.services.persistence()),
            "persistence" => persistence(&mut s, ctx.server, ctx.services.persistence()),
            "stats" => stats(&mut s, ctx.server),
            "replication" => replication(&mut s, ctx.server),
            "cpu" => cpu(&mut s),
            "fabric" => fabric(&mut s, ctx.server),
            "cluster" => s.field("cluster_enabled", u8::from(ctx.server.cluster.is_some())),
            "keyspace" => {
                for (db, (keys, expires)) in crate::commands::server::key_counts_per_db(ctx) {
                    if keys > 0 {
                        s.field(
                            &format!("db{db}"),
                            format!("keys={keys},expires={expires},avg_ttl=0"),
                        );
                    }
                }
            }
            "errorstats" => {
                for (code, count) in ctx.server.stats.error_codes.counts() {
                    s.field(&format!("errorstat_{code}"), format!("count={count}"));
                }
            }
            "commandstats" => commandstats(&mut s, ctx.server),
            "latencystats" => latencystats(&mut s, ctx.server),
            // No modules: header only.
            _ => {}
        }
    }
    ctx.reply.verbatim(out.as_bytes());
    Ok(())
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..`
/// for every command called or refused since the last reset.
fn commandstats(s: &mut Section<'_>, server: &NodeState) {
    for (name, t) in server.command_stats.totals() {
        let per_call = if t.calls > 0 {
            t.usec as f64 / t.calls as f64
        } else {
            0.0
        };
        s.field(
            &format!("cmdstat_{name}"),
            format!(
                "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                t.calls, t.usec, t.rejected_calls, t.failed_calls
            ),
        );
    }
}

/// `latency_percentiles_usec_<name>:p50=..,p99=..,p99.9=..` for every command that ran.
fn latencystats(s: &mut Section<'_>, server: &NodeState) {
    if !server.command_stats.latency_tracking() {
        return;
    }
    let percentiles = server.config.read().latency.info_percentiles.clone();
    for (name, t) in server.command_stats.totals() {
        if t.calls == 0 {
            continue;
        }
        let mut value = String::new();
        for (i, p) in percentiles.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(value, "{sep}p{p}={:.3}", t.percentile_usec(*p));
        }
        s.field(&format!("latency_percentiles_usec_{name}"), value);
    }
}

/// Writes `name:value` lines.
struct Section<'a>(&'a mut String);

impl Section<'_> {
    fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        let _ = write!(self.0, "{name}:{value}\r\n");
    }
}

fn server(s: &mut Section<'_>, server: &NodeState) {
    let config = server.config.read();
    // As Redis: a node without a plain port shows its TLS port (Redis has no tls_port field).
    let (port, hz, file) = (
        if config.port != 0 {
            config.port
        } else {
            config.tls.port
        },
        config.hz,
        config.file.as_ref().map(|p| p.display().to_string()),
    );
    drop(config);
    let uptime = server.started.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    s.field(
        "redis_version",
        crate::commands::connection::REDIS_COMPAT_VERSION,
    );
    s.field("redis_git_sha1", "00000000");
    s.field("redis_git_dirty", 0);
    s.field("redis_build_id", "0");
    s.field(
        "redis_mode",
        if server.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        },
    );
    s.field("os", host::os_description());
    s.field("arch_bits", usize::BITS);
    s.field("monotonic_clock", "POSIX clock_gettime");
    s.field("multiplexing_api", "epoll");
    s.field("atomicvar_api", "c11-builtin");
    s.field("gcc_version", "0.0.0");
    s.field("process_id", std::process::id());
    s.field("process_supervised", "no");
    s.field("run_id", &server.run_id);
    s.field("tcp_port", port);
    s.field("server_time_usec", now_us);
    s.field("uptime_in_seconds", uptime);
    s.field("uptime_in_days", uptime / 86_400);
    s.field("hz", hz);
    s.field("configured_hz", hz);
    // Redis's LRU clock: seconds, 24 bits.
    s.field(
        "lru_clock",
        (crate::clock::unix_millis() / 1000) & ((1 << 24) - 1),
    );
    s.field("executable", executable);
    s.field("config_file", file.unwrap_or_default());
    s.field("io_threads_active", 0);
    s.field("node_version", env!("CARGO_PKG_VERSION"));
}

fn clients(s: &mut Section<'_>, server: &NodeState) {
    s.field("connected_clients", server.connected_clients());
    s.field("cluster_connections", 0);
    s.field("maxclients", server.hot.maxclients.load(Relaxed));
    s.field("client_recent_max_input_buffer", 0);
    s.field("client_recent_max_output_buffer", 0);
    // Clients held by CLIENT PAUSE count as blocked, as in Redis 7.0.
    s.field(
        "blocked_clients",
        server.blocking.blocked_clients() + server.client_pause.held(),
    );
    s.field("tracking_clients", server.tracking.clients());
    s.field("clients_in_timeout_table", 0);
}

fn memory(s: &mut Section<'_>, server: &NodeState, persistence: &dyn Persistence) {
    let used = server.memory.refresh_at(std::time::Instant::now());
    let peak = server.memory.peak().max(used);
    let rss = host::rss_bytes();
    let system = host::total_system_memory();
    let maxmemory = server.hot.maxmemory.load(Relaxed);
    s.field("used_memory", used);
    s.field("used_memory_human", host::bytes_to_human(used));
    s.field("used_memory_rss", rss);
    s.field("used_memory_rss_human", host::bytes_to_human(rss));
    s.field("used_memory_peak", peak);
    s.field("used_memory_peak_human", host::bytes_to_human(peak));
    s.field(
        "used_memory_peak_perc",
        format!("{:.2}%", used as f64 * 100.0 / peak.max(1) as f64),
    );
    s.field("allocator_allocated", used);
    s.field("allocator_resident", crate::db::memory::read_resident());
    s.field("total_system_memory", system);
    s.field("total_system_memory_human", host::bytes_to_human(system));
    s.field("maxmemory", maxmemory);
    s.field("maxmemory_human", host::bytes_to_human(maxmemory));
    s.field("maxmemory_policy", server.hot.policy().name());
    s.field(
        "mem_fragmentation_ratio",
        format!("{:.2}", rss as f64 / used.max(1) as f64),
    );
    s.field("mem_fragmentation_bytes", rss as i64 - used as i64);
    s.field("mem_allocator", MEM_ALLOCATOR);
    s.field("lazyfree_pending_objects", 0);
    s.field("lazyfreed_objects", 0);
    // The script cache's bodies; each thread's Lua state is not measured (0), and there are
    // no functions.
    let (scripts, script_bytes) = server.scripts.size();
    for field in ["used_memory_lua", "used_memory_vm_eval"] {
        s.field(field, 0);
    }
    s.field("used_memory_scripts_eval", script_bytes);
    s.field("number_of_cached_scripts", scripts);
    for field in [
        "number_of_functions",
        "number_of_libraries",
        "used_memory_vm_functions",
        "used_memory_vm_total",
        "used_memory_functions",
    ] {
        s.field(field, 0);
    }
    s.field("used_memory_scripts", script_bytes);
    s.field("used_memory_lua_human", "0B");
    s.field("used_memory_vm_total_human", "0B");
    s.field(
        "used_memory_scripts_human",
        host::bytes_to_human(script_bytes as u64),
    );
    // maxmemory compares `used_memory` itself: nothing is left out of eviction's count.
    s.field("mem_not_counted_for_evict", 0);
    s.field("mem_aof_buffer", persistence.aof_info().buffer_length);
}

/// `# Persistence`: the snapshot state (saves, changes since the last one, the last load);
/// `loading` is a replica loading a full sync's snapshot; the AOF's state, with its sizes
/// while it is on (as Redis lists them).
fn persistence(s: &mut Section<'_>, server: &NodeState, persistence: &dyn Persistence) {
    let p = server.snapshot.info();
    s.field("loading", u8::from(server.replica_of.is_loading()));
    s.field("async_loading", 0);
    s.field("rdb_changes_since_last_save", p.rdb_changes_since_last_save);
    s.field("rdb_bgsave_in_progress", u8::from(p.rdb_bgsave_in_progress));
    s.field("rdb_last_save_time", p.rdb_last_save_time);
    s.field("rdb_last_bgsave_status", p.last_bgsave_status());
    s.field("rdb_last_bgsave_time_sec", p.rdb_last_bgsave_time_sec);
    s.field("rdb_current_bgsave_time_sec", p.rdb_current_bgsave_time_sec);
    s.field("rdb_saves", p.rdb_saves);
    s.field("rdb_last_load_keys_expired", p.rdb_last_load_keys_expired);
    s.field("rdb_last_load_keys_loaded", p.rdb_last_load_keys_loaded);
    let a = persistence.aof_info();
    let status = |ok: bool| if ok { "ok" } else { "err" };
    s.field("aof_enabled", u8::from(a.enabled));
    s.field("aof_rewrite_in_progress", u8::from(a.rewrite_in_progress));
    s.field("aof_rewrite_scheduled", u8::from(a.rewrite_scheduled));
    s.field("aof_last_rewrite_time_sec", a.last_rewrite_time_sec);
    s.field("aof_current_rewrite_time_sec", a.current_rewrite_time_sec);
    s.field("aof_last_bgrewrite_status", status(a.last_bgrewrite_ok));
    s.field("aof_rewrites", a.rewrites);
    s.field("aof_last_write_status", status(a.last_write_ok));
    // Saves and rewrites run in threads, never in a fork: no copy-on-write, no module forks.
    for field in [
        "rdb_last_cow_size",
        "aof_last_cow_size",
        "current_cow_peak",
        "current_cow_size",
        "current_cow_size_age",
        "module_fork_in_progress",
        "module_fork_last_cow_size",
    ] {
        s.field(field, 0);
    }
    s.field("current_fork_perc", "0.00");
    if a.enabled {
        s.field("aof_current_size", a.current_size);
        s.field("aof_base_size", a.base_size);
        s.field("aof_pending_rewrite", 0);
        s.field("aof_buffer_length", a.buffer_length);
    }
}

fn stats(s: &mut Section<'_>, server: &NodeState) {
    let st = &server.stats;
    s.field(
        "total_connections_received",
        Stats::get(&st.connections_received),
    );
    s.field(
        "total_commands_processed",
        Stats::get(&st.commands_processed),
    );
    s.field(
        "instantaneous_ops_per_sec",
        Stats::get(&st.instantaneous_ops),
    );
    s.field("total_net_input_bytes", Stats::get(&st.net_input_bytes));
    s.field("total_net_output_bytes", Stats::get(&st.net_output_bytes));
    s.field("total_net_repl_input_bytes", 0);
    s.field("total_net_repl_output_bytes", 0);
    s.field("instantaneous_input_kbps", "0.00");
    s.field("instantaneous_output_kbps", "0.00");
    s.field("rejected_connections", Stats::get(&st.rejected_connections));
    s.field("sync_full", Stats::get(&st.sync_full));
    s.field("sync_partial_ok", Stats::get(&st.sync_partial_ok));
    s.field("sync_partial_err", Stats::get(&st.sync_partial_err));
    s.field("expired_keys", Stats::get(&st.expired_keys));
    s.field("expired_stale_perc", "0.00");
    s.field("expired_time_cap_reached_count", 0);
    s.field("evicted_keys", Stats::get(&st.evicted_keys));
    s.field("evicted_clients", 0);
    s.field("keyspace_hits", Stats::get(&st.keyspace_hits));
    s.field("keyspace_misses", Stats::get(&st.keyspace_misses));
    s.field("pubsub_channels", server.pubsub.channel_count());
    s.field("pubsub_patterns", server.pubsub.pattern_count());
    s.field("pubsubshard_channels", server.pubsub.shard_channel_count());
    s.field("latest_fork_usec", 0);
    s.field("total_forks", 0);
    s.field("migrate_cached_sockets", server.migrate_links.len());
    s.field("unexpected_error_replies", 0);
    s.field("total_error_replies", Stats::get(&st.error_replies));
    s.field("dump_payload_sanitizations", 0);
    // No active defragmentation, no writable replicas' own expiry.
    for field in [
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        s.field(field, 0);
    }
    s.field("tracking_total_keys", server.tracking.table.keys());
    s.field("tracking_total_items", server.tracking.table.items());
    s.field("tracking_total_prefixes", server.tracking.prefix_count());
    s.field("slave_expires_tracked_keys", 0);
    // Ours: times the event loop stopped busy polling and went to sleep (`io-busy-poll-us`).
    s.field("io_busy_poll_sleeps", server.busy_poll.sleeps());
    s.field("io_busy_poll_usec", server.busy_poll.idle_usec());
    let dropped = server
        .cluster
        .as_ref()
        .and_then(|c| c.bus.get())
        .map_or(0, |bus| bus.publish_budget.dropped());
    s.field("cluster_publish_dropped", dropped);
}

/// `# Replication`: the fields replication's report builds, in Redis 7's order.
fn replication(s: &mut Section<'_>, server: &NodeState) {
    for (name, value) in server.replication.info_fields(
        server.replica_of.primary_link().as_ref(),
        crate::clock::unix_millis(),
    ) {
        s.field(&name, value);
    }
}

fn fabric(s: &mut Section<'_>, server: &NodeState) {
    let (port, provider, bind) = {
        let c = server.config.read();
        (
            c.fabric.port,
            c.fabric.provider.name(),
            c.fabric.bind.join(" "),
        )
    };
    let st = &server.stats;
    s.field("fabric_enabled", u8::from(port != 0));
    s.field("fabric_provider", provider);
    s.field("rdma_port", port);
    s.field("rdma_bind", bind);
    s.field(
        "fabric_connected_clients",
        Stats::get(&st.fabric_connected_clients),
    );
    s.field(
        "fabric_connections_received",
        Stats::get(&st.fabric_connections_received),
    );
    s.field(
        "fabric_protocol_errors",
        Stats::get(&st.fabric_protocol_errors),
    );
    s.field(
        "fabric_rx_readvertised",
        Stats::get(&st.fabric_rx_readvertised),
    );
    s.field("fabric_window_grows", Stats::get(&st.fabric_window_grows));
    s.field(
        "fabric_window_grow_failures",
        Stats::get(&st.fabric_window_grow_failures),
    );
    s.field("fabric_poller_stalls", Stats::get(&st.fabric_poller_stalls));
    s.field("fabric_poller_blocks", Stats::get(&st.fabric_poller_blocks));
    s.field(
        "fabric_poller_bell_wakes",
        Stats::get(&st.fabric_poller_bell_wakes),
    );
    s.field(
        "fabric_poller_idle_retries",
        Stats::get(&st.fabric_poller_idle_retries),
    );
    s.field("fabric_poller_sleeps", Stats::get(&st.fabric_poller_sleeps));
    s.field(
        "fabric_stranded_clients",
        Stats::get(&st.fabric_stranded_clients),
    );
    s.field(
        "fabric_unauthenticated_closed",
        Stats::get(&st.fabric_unauthenticated_closed),
    );
    s.field(
        "fabric_clients_said_goodbye",
        Stats::get(&st.fabric_clients_said_goodbye),
    );
    s.field(
        "fabric_handshakes_dropped",
        Stats::get(&st.fabric_handshakes_dropped),
    );
    s.field(
        "fabric_shared_receives",
        Stats::get(&st.fabric_shared_receives),
    );
    s.field(
        "fabric_shared_receives_posted",
        Stats::get(&st.fabric_shared_receives_posted),
    );
}

fn cpu(s: &mut Section<'_>) {
    let t = host::cpu_times();
    s.field("used_cpu_sys", host::format_seconds(t.sys));
    s.field("used_cpu_user", host::format_seconds(t.user));
    s.field(
        "used_cpu_sys_children",
        host::format_seconds(t.children_sys),
    );
    s.field(
        "used_cpu_user_children",
        host::format_seconds(t.children_user),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(args: &[&str]) -> Vec<&'static str> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        wanted(&a)
            .iter()
            .zip(SECTIONS)
            .filter(|(w, _)| **w)
            .map(|(_, s)| s.0)
            .collect()
    }

    #[test]
    fn section_selection() {
        let default = names(&[]);
        assert_eq!(default, names(&["default"]));
        assert!(default.contains(&"keyspace") && !default.contains(&"commandstats"));
        assert_eq!(names(&["all"]).len(), SECTIONS.len());
        assert_eq!(names(&["everything"]).len(), SECTIONS.len());
        assert_eq!(names(&["CPU", "keyspace", "nosuch"]), ["cpu", "keyspace"]);
        assert!(names(&["nosuch"]).is_empty());
    }
}
