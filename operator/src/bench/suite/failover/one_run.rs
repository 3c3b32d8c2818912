//! One run of the failover suite: one server kind at one `cluster-node-timeout`. Six servers
//! made a cluster, the writer started, then per iteration: kill -9 the primary of the next
//! shard, probe its replica until a write succeeds (restarting the killed node as soon as the
//! replica is promoted), wait until the cluster is healthy, read back the writes acknowledged
//! since the previous check. Servers and writer are stopped however the run ends.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::super::server_process::{free_cluster_port, make_dir, run_bounded, ServerProcess};
use super::super::sync_client::SyncClient;
use super::health::{self, cluster_nodes, wait_healthy, SHARDS};
use super::writer::{self, WriterConfig, WriterState};
use super::{lost_writes, probe, FailoverArgs, Iteration, Outcome, Run, ServerKind};

/// Where `redis-cli --cluster create` starts each shard.
const SHARD_FIRST_SLOTS: [u16; SHARDS] = [0, 5461, 10923];
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);
/// Healthy again after a restart (full sync included).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(120);
/// Writes keep going this long before a check.
const SETTLE_AFTER_HEALTHY: Duration = Duration::from_millis(500);

/// A server's argv, and the values its report line shows by name (value, name).
type ServerLine = (Vec<String>, Vec<(String, String)>);

/// The command line of one cluster member.
fn server_argv(
    args: &FailoverArgs,
    kind: ServerKind,
    port: u16,
    dir: &Path,
    timeout_ms: u64,
    taken: &mut Vec<u16>,
) -> anyhow::Result<ServerLine> {
    let mut names = vec![
        (port.to_string(), "$PORT".to_string()),
        (dir.display().to_string(), "$DIR".to_string()),
    ];
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let argv = match kind {
        ServerKind::Redis => words(&[
            "redis-server",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout_ms.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--daemonize",
            "no",
            "--dir",
            &dir.display().to_string(),
        ]),
        ServerKind::Node => {
            let repl_port = free_cluster_port(taken)?;
            names.push((repl_port.to_string(), "$REPL_FABRIC_PORT".to_string()));
            names.push((args.node_bin.display().to_string(), "node".to_string()));
            let mut argv = words(&[
                &args.node_bin.display().to_string(),
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                &dir.display().to_string(),
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                &timeout_ms.to_string(),
                "--cluster-secret",
                "bench-failover",
                "--fabric-provider",
                &args.fabric,
                "--rdma-bind",
                "127.0.0.1",
                "--repl-fabric-port",
                &repl_port.to_string(),
            ]);
            argv.extend(args.node_args.split_whitespace().map(str::to_string));
            argv
        }
    };
    Ok((argv, names))
}

pub fn run_one(args: &FailoverArgs, kind: ServerKind, timeout_ms: u64, work: &Path) -> Run {
    let mut run = Run {
        server: kind,
        timeout_ms,
        command: None,
        iterations: Vec::new(),
        outcome: Outcome::Failed {
            reason: String::new(),
            acked: 0,
        },
    };
    let state = Arc::new(WriterState::default());
    let mut servers = Vec::new();
    let mut writer = None;
    let result = drive(
        args,
        kind,
        timeout_ms,
        work,
        &mut run,
        &state,
        &mut servers,
        &mut writer,
    );
    state.stop.store(true, Ordering::Relaxed);
    if let Some(handle) = writer {
        let _ = handle.join();
    }
    for server in &mut servers {
        server.stop();
    }
    match result {
        Ok(outcome) => run.outcome = outcome,
        Err(e) => {
            let reason = format!("{e:#}");
            eprintln!(
                "bench failover: {} timeout {timeout_ms} ms: FAILED: {reason}",
                kind.name()
            );
            run.outcome = Outcome::Failed {
                reason,
                acked: state.acked_len() as u64,
            };
        }
    }
    run
}

#[allow(clippy::too_many_arguments)]
fn drive(
    args: &FailoverArgs,
    kind: ServerKind,
    timeout_ms: u64,
    work: &Path,
    run: &mut Run,
    state: &Arc<WriterState>,
    servers: &mut Vec<ServerProcess>,
    writer: &mut Option<std::thread::JoinHandle<()>>,
) -> anyhow::Result<Outcome> {
    let label = format!("{} timeout {timeout_ms} ms", kind.name());
    let mut taken = Vec::new();
    for i in 0..health::NODES {
        let port = free_cluster_port(&mut taken)?;
        let dir = make_dir(&work.join(format!("n{i}-{port}")))?;
        let (argv, names) = server_argv(args, kind, port, &dir, timeout_ms, &mut taken)?;
        let server = ServerProcess::new(port, argv, dir.join("server.log"));
        if i == 0 {
            let names: Vec<(&str, &str)> = names
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            run.command = Some(server.shown(&names));
        }
        servers.push(server);
    }
    for server in servers.iter_mut() {
        server.start()?;
    }
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let mut create = vec!["redis-cli".to_string(), "--cluster".into(), "create".into()];
    create.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
    let out = run_bounded(&create, CREATE_TIMEOUT)?;
    if !out.success || !out.stdout.contains("[OK] All 16384 slots covered.") {
        bail!(
            "redis-cli --cluster create failed:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    let took = wait_healthy(&ports, HEALTH_TIMEOUT, "after create")?;
    eprintln!(
        "bench failover: {label}: cluster healthy {:.1} s after create",
        took.as_secs_f64()
    );

    let config = WriterConfig {
        ports: ports.clone(),
        wait_ms: (kind == ServerKind::Redis && args.wait_ms > 0).then_some(args.wait_ms),
        rate: args.write_rate as f64,
    };
    *writer = Some(writer::spawn(config, Arc::clone(state)));
    std::thread::sleep(Duration::from_secs(1));
    let mut checked = 0usize;
    for it in 0..args.iterations as usize {
        if let Some(error) = state.error.lock().unwrap().clone() {
            bail!("writer failed: {error}");
        }
        let view_port = if servers[0].check_alive().is_ok() {
            ports[0]
        } else {
            ports[1]
        };
        let view = cluster_nodes(&mut SyncClient::connect(view_port, Duration::from_secs(2))?)?;
        let first = SHARD_FIRST_SLOTS[it % SHARDS];
        let primary = view
            .iter()
            .find(|n| n.has_flag("master") && n.owns(first))
            .ok_or_else(|| anyhow!("iteration {}: no primary owns slot {first}", it + 1))?;
        let replica = view
            .iter()
            .find(|n| n.primary == primary.id)
            .ok_or_else(|| {
                anyhow!(
                    "iteration {}: primary {} has no replica",
                    it + 1,
                    primary.port()
                )
            })?;
        let victim = ports
            .iter()
            .position(|&p| p == primary.port())
            .ok_or_else(|| anyhow!("primary port {} is not ours", primary.port()))?;
        let probe_key = (0..100_000)
            .map(|j| format!("probe:{j}"))
            .find(|k| primary.owns(proto::slot::key_slot(k.as_bytes())))
            .ok_or_else(|| anyhow!("no probe key for primary {}", primary.port()))?;
        let acked_before = state.acked_len();
        let killed_at = Instant::now();
        servers[victim].kill9();
        let timeout = probe::failover_timeout(timeout_ms);
        let (times, restart_at, restarted) = std::thread::scope(|scope| {
            let mut victim_server = Some(&mut servers[victim]);
            let mut restart_at = None;
            let mut handle = None;
            let times = {
                // In the background: probing goes on while the killed node starts.
                let mut restart = || {
                    if let Some(server) = victim_server.take() {
                        restart_at = Some(killed_at.elapsed());
                        handle = Some(scope.spawn(move || server.start()));
                    }
                };
                probe::probe_failover(
                    replica.port(),
                    ports[victim],
                    &probe_key,
                    timeout,
                    killed_at,
                    &mut restart,
                )
            };
            let restarted = handle.map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("panicked"))));
            (times, restart_at, restarted)
        });
        let times = times?;
        if let Some(Err(e)) = restarted {
            bail!("iteration {}: restarting the killed node: {e:#}", it + 1);
        }
        let healthy = wait_healthy(&ports, HEALTH_TIMEOUT, &format!("iteration {}", it + 1))?;
        std::thread::sleep(SETTLE_AFTER_HEALTHY);
        let upto = state.acked_len();
        let entries = state.acked_range(checked, upto);
        let lost = lost_writes::read_back(&ports, &entries)?;
        let iteration = Iteration {
            victim_port: ports[victim],
            promoted_ms: times.promoted.as_secs_f64() * 1000.0,
            failover_ms: times.wrote.as_secs_f64() * 1000.0,
            restart_at_ms: restart_at.unwrap_or_default().as_secs_f64() * 1000.0,
            healthy_after_restart_ms: healthy.as_secs_f64() * 1000.0,
            acked_checked: entries.len() as u64,
            acked_synced_checked: entries.iter().filter(|e| e.synced).count() as u64,
            acked_during_iteration: (upto - acked_before) as u64,
            lost: lost.lost,
            lost_synced: lost.lost_synced,
            lost_examples: lost.examples,
            write_failures: state.failed(),
        };
        eprintln!(
            "bench failover: {label}: iteration {}: failover {:.0} ms, lost {} of {}",
            it + 1,
            iteration.failover_ms,
            iteration.lost,
            iteration.acked_checked
        );
        run.iterations.push(iteration);
        checked = upto;
    }
    state.stop.store(true, Ordering::Relaxed);
    if let Some(handle) = writer.take() {
        let _ = handle.join();
    }
    let all = state.acked_range(0, state.acked_len());
    let lost = lost_writes::read_back(&ports, &all)?;
    Ok(Outcome::Completed {
        acked: all.len() as u64,
        acked_synced: all.iter().filter(|e| e.synced).count() as u64,
        final_lost: lost.lost,
        final_lost_synced: lost.lost_synced,
        lost_examples: lost.examples,
        write_failures: state.failed(),
    })
}
