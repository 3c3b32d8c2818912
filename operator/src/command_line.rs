//! The `operator` command line: subcommands and their flags. The binary only parses and calls
//! [`run`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug, PartialEq, Eq)]
#[command(
    name = "operator",
    version,
    about = "Client tools for the node: cli, bench and cluster"
)]
pub struct OperatorArgs {
    #[command(subcommand)]
    pub command: OperatorCommand,
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum OperatorCommand {
    /// A redis-cli-like client: one-shot (`operator cli SET k v`) or interactive.
    Cli(crate::cli::CliArgs),
    /// A redis-benchmark-like load generator with HDR latency percentiles.
    Bench(crate::bench::BenchArgs),
    /// Form a cluster of nodes or show its state.
    Cluster(crate::cluster::ClusterArgs),
}

/// Runs the chosen subcommand.
pub fn run(args: OperatorArgs) -> ExitCode {
    match args.command {
        OperatorCommand::Cli(args) => crate::cli::run(args),
        OperatorCommand::Bench(args) => crate::bench::run(args),
        OperatorCommand::Cluster(args) => crate::cluster::run(args),
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
