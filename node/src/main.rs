//! `node`: run a node. Flags as redis-server: `node [config-file] [--name value ...]`.

use node::config::load::Invocation;

// jemalloc, as redis-server uses: comparable `used_memory`, and less fragmentation under
// many small allocations than the system allocator.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match node::config::load(&args) {
        Ok(Invocation::Run(c)) => *c,
        Ok(Invocation::Version) => {
            println!(
                "node v{} (redis-compatible {})",
                env!("CARGO_PKG_VERSION"),
                node::commands::connection::REDIS_COMPAT_VERSION
            );
            return;
        }
        Ok(Invocation::Help) => {
            println!("Usage: node [/path/to/node.conf] [--option value ...]\n\nOptions use redis.conf names, e.g. --port 7000 --save \"\" --maxmemory 1gb");
            return;
        }
        Err(e) => {
            eprintln!("node: {e}");
            std::process::exit(1);
        }
    };
    init_logging(&config);
    if let Err(e) = node::app::run(config) {
        tracing::error!("{e:#}");
        eprintln!("node: {e:#}");
        std::process::exit(1);
    }
}

fn init_logging(config: &node::config::Config) {
    let level = match config.loglevel.as_str() {
        "debug" => "debug",
        "verbose" => "info",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("NODE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    if config.logfile.is_empty() {
        builder.with_writer(std::io::stderr).init();
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.logfile)
        {
            Ok(file) => builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init(),
            Err(e) => {
                eprintln!(
                    "node: cannot open logfile {}: {e}; logging to stderr",
                    config.logfile
                );
                builder.with_writer(std::io::stderr).init();
            }
        }
    }
}
