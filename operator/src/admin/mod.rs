//! The admin API's subcommands (`operator failover`, `node add|drain`, `ops`,
//! `slots stats|migrate`, `rebalance`, `cluster show|watch`): each takes `--admin HOST:PORT` (any node), `--token` and
//! `--json`. Operations are followed until they end (one line per change, a summary line
//! last) unless `--no-wait`; the exit code says whether they SUCCEEDED.

pub mod connect;
pub mod format;
pub mod json;
pub mod slot_ranges;

pub use connect::AdminArgs;

use connect::{connect, status_text, Client};
use proto::admin::v1 as pb;
use std::io::IsTerminal;
use std::process::ExitCode;

/// How an operation's request is followed.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct OperationArgs {
    /// The idempotency key: the same one again names the same operation (default: new).
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
    /// Print the operation as started and return, instead of following it.
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub admin: AdminArgs,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AdminCommand {
    ClusterShow(AdminArgs),
    ClusterWatch {
        since: u64,
        count: Option<u64>,
        admin: AdminArgs,
    },
    SlotStats {
        slots: Option<String>,
        admin: AdminArgs,
    },
    Failover {
        replica: String,
        force: bool,
        op: OperationArgs,
    },
    AddNode {
        address: String,
        replica_of: Option<String>,
        op: OperationArgs,
    },
    MigrateSlots {
        slots: String,
        to: String,
        op: OperationArgs,
    },
    Rebalance {
        dry_run: bool,
        threshold: f64,
        op: OperationArgs,
    },
    DrainNode {
        node: String,
        op: OperationArgs,
    },
    OpsList(AdminArgs),
    OpsWatch {
        id: String,
        admin: AdminArgs,
    },
    OpsCancel {
        id: String,
        admin: AdminArgs,
    },
}

pub fn run(command: AdminCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("operator: {e}");
            ExitCode::FAILURE
        }
    }
}

fn grpc(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{}", status_text(&s))
}

async fn execute(command: AdminCommand) -> anyhow::Result<ExitCode> {
    match command {
        AdminCommand::ClusterShow(admin) => {
            let mut c = connect(&admin).await?;
            let cluster = c
                .get_cluster(pb::GetClusterRequest {})
                .await
                .map_err(grpc)?
                .into_inner();
            match admin.json {
                true => println!("{}", format::cluster_json(&cluster).0),
                false => print!("{}", format::cluster_text(&cluster)),
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::ClusterWatch {
            since,
            count,
            admin,
        } => {
            let mut c = connect(&admin).await?;
            let mut stream = c
                .watch_cluster(pb::WatchClusterRequest {
                    since_version: since,
                })
                .await
                .map_err(grpc)?
                .into_inner();
            let mut seen = 0u64;
            while count.is_none_or(|n| seen < n) {
                let Some(change) = stream.message().await.map_err(grpc)? else {
                    break;
                };
                let cluster = change.cluster.unwrap_or_default();
                match admin.json {
                    true => println!("{}", format::cluster_json(&cluster).0),
                    false => println!("{}", format::cluster_text(&cluster)),
                }
                seen += 1;
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::SlotStats { slots, admin } => {
            let ranges = match &slots {
                Some(text) => slot_ranges::parse(text)?,
                None => Vec::new(),
            };
            let mut c = connect(&admin).await?;
            let stats = c
                .get_slot_stats(pb::GetSlotStatsRequest { ranges })
                .await
                .map_err(grpc)?
                .into_inner();
            for s in &stats.slots {
                match admin.json {
                    true => println!("{}", format::slot_stats_json(s).0),
                    false => println!(
                        "slot {} keys {} bytes {} ops/s {:.1} owner {}",
                        s.slot, s.keys, s.bytes, s.ops_per_sec, s.owner_id
                    ),
                }
            }
            if !admin.json {
                let keys: u64 = stats.slots.iter().map(|s| s.keys).sum();
                let bytes: u64 = stats.slots.iter().map(|s| s.bytes).sum();
                println!(
                    "{} slots, {keys} keys, {bytes} bytes (node {})",
                    stats.slots.len(),
                    stats.answered_by
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Failover { replica, force, op } => {
            let mut c = connect(&op.admin).await?;
            let started = c
                .failover(pb::FailoverRequest {
                    request_id: request_id(&op),
                    replica_node_id: replica,
                    force,
                })
                .await
                .map_err(grpc)?
                .into_inner();
            follow(&mut c, started, &op).await
        }
        AdminCommand::AddNode {
            address,
            replica_of,
            op,
        } => {
            let mut c = connect(&op.admin).await?;
            let started = c
                .add_node(pb::AddNodeRequest {
                    request_id: request_id(&op),
                    address,
                    replica_of: replica_of.unwrap_or_default(),
                })
                .await
                .map_err(grpc)?
                .into_inner();
            follow(&mut c, started, &op).await
        }
        AdminCommand::MigrateSlots { slots, to, op } => {
            let ranges = slot_ranges::parse(&slots)?;
            let mut c = connect(&op.admin).await?;
            let started = c
                .migrate_slots(pb::MigrateSlotsRequest {
                    request_id: request_id(&op),
                    ranges,
                    target_node_id: to,
                })
                .await
                .map_err(grpc)?
                .into_inner();
            follow(&mut c, started, &op).await
        }
        AdminCommand::Rebalance {
            dry_run,
            threshold,
            op,
        } => {
            let mut c = connect(&op.admin).await?;
            let started = c
                .rebalance(pb::RebalanceRequest {
                    request_id: request_id(&op),
                    dry_run,
                    threshold,
                })
                .await
                .map_err(grpc)?
                .into_inner();
            follow(&mut c, started, &op).await
        }
        AdminCommand::DrainNode { node, op } => {
            let mut c = connect(&op.admin).await?;
            let started = c
                .drain_node(pb::DrainNodeRequest {
                    request_id: request_id(&op),
                    node_id: node,
                })
                .await
                .map_err(grpc)?
                .into_inner();
            follow(&mut c, started, &op).await
        }
        AdminCommand::OpsList(admin) => {
            let mut c = connect(&admin).await?;
            let list = c
                .list_operations(pb::ListOperationsRequest {})
                .await
                .map_err(grpc)?
                .into_inner();
            for op in &list.operations {
                match admin.json {
                    true => println!("{}", format::operation_json(op).0),
                    false => println!("{}", format::operation_line(op)),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::OpsWatch { id, admin } => {
            let mut c = connect(&admin).await?;
            let now = c
                .get_operation(pb::GetOperationRequest { id })
                .await
                .map_err(grpc)?
                .into_inner();
            let op = OperationArgs {
                request_id: None,
                no_wait: false,
                admin,
            };
            follow(&mut c, now, &op).await
        }
        AdminCommand::OpsCancel { id, admin } => {
            let mut c = connect(&admin).await?;
            let op = c
                .cancel_operation(pb::CancelOperationRequest { id })
                .await
                .map_err(grpc)?
                .into_inner();
            match admin.json {
                true => println!("{}", format::operation_json(&op).0),
                false => println!("cancel asked: {}", format::operation_line(&op)),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn request_id(op: &OperationArgs) -> String {
    op.request_id.clone().unwrap_or_else(|| {
        use rand::Rng;
        let n: u128 = rand::thread_rng().gen();
        format!("operator-{n:032x}")
    })
}

/// Prints the operation's changes until it ends; SUCCESS only if it SUCCEEDED.
async fn follow(
    c: &mut Client,
    started: pb::Operation,
    args: &OperationArgs,
) -> anyhow::Result<ExitCode> {
    let json = args.admin.json;
    let terminal = !json && std::io::stdout().is_terminal();
    let show = |op: &pb::Operation| match (json, terminal) {
        (true, _) => println!("{}", format::operation_json(op).0),
        // On a terminal: one line rewritten in place.
        (false, true) => {
            use std::io::Write;
            print!("\r\x1b[2K{}", format::operation_line(op));
            let _ = std::io::stdout().flush();
        }
        (false, false) => println!("{}", format::operation_line(op)),
    };
    show(&started);
    let mut last = started.clone();
    if !args.no_wait && !last.is_terminal() {
        let mut stream = c
            .watch_operation(pb::WatchOperationRequest {
                id: started.id.clone(),
            })
            .await
            .map_err(grpc)?
            .into_inner();
        while let Some(op) = stream.message().await.map_err(grpc)? {
            if op != last {
                show(&op);
            }
            last = op;
            if last.is_terminal() {
                break;
            }
        }
    }
    if terminal {
        println!();
    }
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        println!("{}", format::operation_summary(&last));
    }
    Ok(match pb::OperationState::try_from(last.state) {
        Ok(pb::OperationState::Succeeded) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}
