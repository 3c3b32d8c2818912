//! The `operator` command line: subcommands and their flags. The binary only parses and calls
//! [`run`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::admin::AdminCommand;

#[derive(Parser, Debug, PartialEq)]
#[command(
    name = "operator",
    version,
    about = "Client tools for the node: cli, bench and cluster"
)]
pub struct OperatorArgs {
    #[command(subcommand)]
    pub command: OperatorCommand,
}

// PartialEq only: `rebalance --threshold` is a float.
#[derive(Subcommand, Debug, PartialEq)]
pub enum OperatorCommand {
    /// A redis-cli-like client: one-shot (`operator cli SET k v`) or interactive.
    Cli(crate::cli::CliArgs),
    /// A redis-benchmark-like load generator with HDR latency percentiles.
    Bench(crate::bench::BenchArgs),
    /// Form a cluster of nodes or show its state.
    Cluster(crate::cluster::ClusterArgs),
    /// Promote a replica in its primary's place (admin API).
    Failover {
        /// The replica's node id.
        replica: String,
        /// Without the primary's agreement (it may be down).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        op: crate::admin::OperationArgs,
    },
    /// Nodes joining the cluster (admin API).
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// The operations a node coordinates (admin API).
    Ops {
        #[command(subcommand)]
        command: OpsCommand,
    },
    /// Slot statistics and migration (admin API).
    Slots {
        #[command(subcommand)]
        command: SlotsCommand,
    },
    /// Even out the primaries by bytes (admin API).
    Rebalance {
        /// Show the plan only.
        #[arg(long)]
        dry_run: bool,
        /// Primaries within this fraction of the mean are left alone.
        #[arg(long, default_value_t = 0.05)]
        threshold: f64,
        #[command(flatten)]
        op: crate::admin::OperationArgs,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum NodeCommand {
    /// Move a node's slots away, then forget it.
    Drain {
        #[arg(value_name = "NODE_ID")]
        node: String,
        #[command(flatten)]
        op: crate::admin::OperationArgs,
    },
    /// Bring an empty running node into the cluster: HOST:PORT is its client address.
    Add {
        #[arg(value_name = "HOST:PORT")]
        address: String,
        /// Make it a replica of this primary.
        #[arg(long, value_name = "NODE_ID")]
        replica_of: Option<String>,
        #[command(flatten)]
        op: crate::admin::OperationArgs,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum OpsCommand {
    /// Every operation the node remembers.
    List {
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
    /// Follow one until it ends.
    Watch {
        id: String,
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
    /// Ask one to stop.
    Cancel {
        id: String,
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum SlotsCommand {
    /// Keys, bytes and ops/s per slot held by the node asked.
    Stats {
        /// Slots, e.g. 0-999,2000 (default: the node's own).
        #[arg(long, value_name = "RANGES")]
        slots: Option<String>,
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
    /// Move slots to another primary atomically.
    Migrate {
        /// Slots, e.g. 0-999,2000.
        #[arg(long, value_name = "RANGES")]
        slots: String,
        /// The primary that takes them.
        #[arg(long, value_name = "NODE_ID")]
        to: String,
        #[command(flatten)]
        op: crate::admin::OperationArgs,
    },
}

/// Runs the chosen subcommand.
pub fn run(args: OperatorArgs) -> ExitCode {
    match args.command {
        OperatorCommand::Cli(args) => crate::cli::run(args),
        OperatorCommand::Bench(args) => crate::bench::run(args),
        OperatorCommand::Cluster(args) => match args.command {
            crate::cluster::ClusterCommand::Show { admin } => {
                crate::admin::run(AdminCommand::ClusterShow(admin))
            }
            crate::cluster::ClusterCommand::Watch {
                since,
                count,
                admin,
            } => crate::admin::run(AdminCommand::ClusterWatch {
                since,
                count,
                admin,
            }),
            command => crate::cluster::run(crate::cluster::ClusterArgs { command }),
        },
        OperatorCommand::Failover { replica, force, op } => {
            crate::admin::run(AdminCommand::Failover { replica, force, op })
        }
        OperatorCommand::Node { command } => crate::admin::run(match command {
            NodeCommand::Add {
                address,
                replica_of,
                op,
            } => AdminCommand::AddNode {
                address,
                replica_of,
                op,
            },
            NodeCommand::Drain { node, op } => AdminCommand::DrainNode { node, op },
        }),
        OperatorCommand::Rebalance {
            dry_run,
            threshold,
            op,
        } => crate::admin::run(AdminCommand::Rebalance {
            dry_run,
            threshold,
            op,
        }),
        OperatorCommand::Ops { command } => crate::admin::run(match command {
            OpsCommand::List { admin } => AdminCommand::OpsList(admin),
            OpsCommand::Watch { id, admin } => AdminCommand::OpsWatch { id, admin },
            OpsCommand::Cancel { id, admin } => AdminCommand::OpsCancel { id, admin },
        }),
        OperatorCommand::Slots { command } => crate::admin::run(match command {
            SlotsCommand::Stats { slots, admin } => AdminCommand::SlotStats { slots, admin },
            SlotsCommand::Migrate { slots, to, op } => AdminCommand::MigrateSlots { slots, to, op },
        }),
    }
}

#[cfg(test)]
mod tests {
    //! Goal: the flags parse as redis-cli and redis-benchmark spell them (`-h` is the host,
    //! command words after the flags are the command, even ones that look like flags).
    use super::*;
    use crate::client::{Protocol, Target};
    use clap::CommandFactory;

    fn parse(line: &[&str]) -> Result<OperatorArgs, clap::Error> {
        OperatorArgs::try_parse_from(std::iter::once("operator").chain(line.iter().copied()))
    }

    fn cli(line: &[&str]) -> crate::cli::CliArgs {
        match parse(line).unwrap().command {
            OperatorCommand::Cli(args) => args,
            other => panic!("not cli: {other:?}"),
        }
    }

    fn bench(line: &[&str]) -> crate::bench::BenchArgs {
        match parse(line).unwrap().command {
            OperatorCommand::Bench(args) => args,
            other => panic!("not bench: {other:?}"),
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        OperatorArgs::command().debug_assert();
    }

    #[test]
    fn cli_flags() {
        let args = cli(&[
            "cli", "-h", "10.0.0.1", "-p", "7000", "-a", "pw", "SET", "k", "-1",
        ]);
        assert_eq!(args.connect.target(), Target::tcp("10.0.0.1", 7000));
        assert_eq!(args.connect.password.as_deref(), Some("pw"));
        assert_eq!(args.command, ["SET", "k", "-1"]);
        let options = args.connect.options();
        assert_eq!(options.protocol, Protocol::Resp2);
        assert_eq!(options.password.as_deref(), Some("pw"));

        let args = cli(&["cli"]);
        assert_eq!(args.connect.target(), Target::tcp("127.0.0.1", 6379));
        assert!(args.command.is_empty(), "no command: interactive");

        let args = cli(&["cli", "-3", "--user", "u", "--no-raw", "GET", "x"]);
        assert_eq!(args.connect.options().protocol, Protocol::Resp3);
        assert_eq!(args.connect.user.as_deref(), Some("u"));
        assert_eq!(args.output_mode(false), crate::cli::OutputMode::Formatted);
        assert_eq!(
            cli(&["cli", "GET", "x"]).output_mode(false),
            crate::cli::OutputMode::Raw
        );
        assert_eq!(
            cli(&["cli", "GET", "x"]).output_mode(true),
            crate::cli::OutputMode::Formatted
        );
        assert_eq!(
            cli(&["cli", "--raw", "GET", "x"]).output_mode(true),
            crate::cli::OutputMode::Raw
        );
    }

    #[test]
    fn fabric_flags_pick_a_provider() {
        let rdma = cli(&["cli", "--rdma", "-p", "7000", "PING"]);
        assert_eq!(
            rdma.connect.target(),
            Target::Fabric {
                provider: "verbs".into(),
                host: "127.0.0.1".into(),
                port: 7000
            }
        );
        let shm = bench(&["bench", "--fabric", "ofi:shm"]);
        assert!(
            matches!(shm.connect.target(), Target::Fabric { provider, .. } if provider == "ofi:shm")
        );
        assert!(parse(&["cli", "--rdma", "--fabric", "ofi:tcp"]).is_err());
    }

    #[test]
    fn bench_flags_and_defaults() {
        let args = bench(&["bench"]);
        assert_eq!(
            (
                args.clients,
                args.requests,
                args.data_size,
                args.pipeline,
                args.threads
            ),
            (50, 100_000, 3, 1, 1)
        );
        assert_eq!(args.keyspace, None);
        assert!(!args.quiet && !args.csv && !args.progress && !args.server_cpu);

        let args = bench(&[
            "bench",
            "-h",
            "db",
            "-p",
            "7001",
            "-c",
            "8",
            "-n",
            "1000",
            "-r",
            "100",
            "-d",
            "64",
            "-P",
            "16",
            "-t",
            "set,get",
            "--threads",
            "4",
            "-q",
            "--csv",
            "--progress",
            "--server-cpu",
        ]);
        assert_eq!(args.connect.target(), Target::tcp("db", 7001));
        assert_eq!(
            (
                args.clients,
                args.requests,
                args.data_size,
                args.pipeline,
                args.threads
            ),
            (8, 1000, 64, 16, 4)
        );
        assert_eq!(args.keyspace, Some(100));
        assert_eq!(args.tests.as_deref(), Some("set,get"));
        assert!(args.quiet && args.csv && args.progress && args.server_cpu);
    }

    #[test]
    fn bench_suites_are_subcommands() {
        use crate::bench::suite::{failover::ServerKind, Suite};
        let args = bench(&[
            "bench",
            "failover",
            "--servers",
            "node",
            "--timeouts",
            "1000,200",
        ]);
        match args.suite.as_deref() {
            Some(Suite::Failover(f)) => {
                assert_eq!(f.servers, [ServerKind::Node]);
                assert_eq!(f.timeouts, [1000, 200]);
                assert_eq!(
                    (f.iterations, f.node_args.as_str()),
                    (20, "--repl-sync-acks 1")
                );
            }
            other => panic!("not failover: {other:?}"),
        }
        assert!(matches!(
            bench(&["bench", "vs-redis", "--quick"]).suite.as_deref(),
            Some(Suite::VsRedis(v)) if v.quick
        ));
        assert!(bench(&["bench", "-t", "get"]).suite.is_none());
        // A load run's flags and a suite do not mix.
        assert!(parse(&["bench", "-c", "8", "failover"]).is_err());
    }

    #[test]
    fn bench_refuses_values_past_the_limits() {
        assert!(parse(&["bench", "-c", "0"]).is_err());
        assert!(parse(&["bench", "-c", "10001"]).is_err());
        assert!(parse(&["bench", "-P", "0"]).is_err());
        assert!(parse(&["bench", "-r", "0"]).is_err());
        assert!(parse(&["bench", "--threads", "0"]).is_err());
        assert!(parse(&["bench", "-d", "999999999999"]).is_err());
    }
}
