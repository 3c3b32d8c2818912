//! `operator cluster ...`: forming and looking at a cluster of nodes (issue "Cluster mode",
//! item 7). Talks to the nodes over TCP with the same client as `operator cli`.

pub mod create;
pub mod nodes;
pub mod plan;
pub mod secret;
pub mod session;
pub mod status;

use std::process::ExitCode;

#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(clap::Subcommand, Debug, PartialEq, Eq)]
pub enum ClusterCommand {
    /// Make a cluster of empty nodes: HOST:PORT... (the first ones become primaries).
    Create {
        #[arg(required = true, num_args = 3.., value_name = "HOST:PORT")]
        nodes: Vec<String>,
        /// Replicas per primary.
        #[arg(long, default_value_t = 0)]
        replicas: usize,
        /// Password for AUTH on every node.
        #[arg(short = 'a', long = "pass", value_name = "PASSWORD")]
        password: Option<String>,
    },
    /// Print a new random cluster secret (256 bits, hex), for every node's
    /// `--cluster-secret`.
    Secret,
    /// One node's view: state, nodes, roles, slots, links, fabric addresses.
    Status {
        /// Any node of the cluster.
        #[arg(value_name = "HOST:PORT", default_value = "127.0.0.1:6379")]
        node: String,
        #[arg(short = 'a', long = "pass", value_name = "PASSWORD")]
        password: Option<String>,
    },
    /// The topology through the admin API (GetCluster): version, state, nodes, slots.
    Show {
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
    /// Topology changes as they happen (WatchCluster).
    Watch {
        /// Resume after this topology version (0: start with the topology now).
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// Stop after this many changes.
        #[arg(long)]
        count: Option<u64>,
        #[command(flatten)]
        admin: crate::admin::AdminArgs,
    },
}

pub fn run(args: ClusterArgs) -> ExitCode {
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
    let result = runtime.block_on(async {
        match args.command {
            ClusterCommand::Create {
                nodes,
                replicas,
                password,
            } => create::create(&nodes, replicas, password.as_deref()).await,
            ClusterCommand::Secret => Ok(format!("{}\n", secret::generate())),
            ClusterCommand::Status { node, password } => {
                status::status(&node, password.as_deref()).await
            }
            ClusterCommand::Show { .. } | ClusterCommand::Watch { .. } => {
                Err("the admin API's subcommands run from command_line".into())
            }
        }
    });
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("operator cluster: {e}");
            ExitCode::FAILURE
        }
    }
}
