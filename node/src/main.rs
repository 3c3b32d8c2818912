//! `node`: run a node. Flags as redis-server: `node [config-file] [--name value ...]`.

use node::config::load::Invocation;

// jemalloc, as redis-server uses: comparable `used_memory`, and less fragmentation under
// many small allocations than the system allocator.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long jemalloc keeps freed dirty pages before returning them to the system. Its
/// default (10 s, purged only when an arena is next used) left 37 MiB of freed pages
/// resident after loading a million keys (the slot tables' record arrays grow by copying),
/// where redis-server held 14; 1 s with a background thread to purge them brings that to
/// 18 MiB (`scripts/memory-per-key.sh`).
const DIRTY_DECAY_MS: isize = 1000;

/// Sets the decay time for the arena that exists now and the ones threads create later, and
/// starts jemalloc's background purging thread (as redis-server's `jemalloc-bg-thread yes`).
/// Runs before any thread is started, so that every arena gets the setting.
fn tune_allocator() -> tikv_jemalloc_ctl::Result<()> {
    use tikv_jemalloc_ctl::{background_thread, Access as _, AsName as _, Name};
    let named = |name: &'static [u8]| -> &'static Name { name.name() };
    named(b"arenas.dirty_decay_ms\0").write(DIRTY_DECAY_MS)?;
    named(b"arena.0.dirty_decay_ms\0").write(DIRTY_DECAY_MS)?;
    background_thread::write(true)
}

fn main() {
    let tuned = tune_allocator();
    // Before anything can start a thread: every thread inherits the blocked stop signals.
    let signals = match node::app::StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("node: cannot set up SIGTERM/SIGINT handling: {e}");
            std::process::exit(1);
        }
    };
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
    if let Err(e) = tuned {
        tracing::warn!(error = %e, "could not tune jemalloc's page purging; RSS may stay higher");
    }
    if let Err(e) = node::app::run(config, signals) {
        tracing::error!("{e:#}");
        eprintln!("node: {e:#}");
        std::process::exit(1);
    }
}

fn init_logging(config: &node::config::Config) {
    use node::config::log_level;
    use tracing_subscriber::EnvFilter;
    // NODE_LOG (a full filter directive) wins over `loglevel`, at start and on CONFIG SET.
    let from_env = std::env::var("NODE_LOG").is_ok();
    let filter = EnvFilter::try_from_env("NODE_LOG")
        .unwrap_or_else(|_| EnvFilter::new(log_level::filter_for(&config.loglevel)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    // The reload handle's type depends on the writer: each branch installs its own.
    macro_rules! install {
        ($builder:expr) => {{
            // Reloading is set up after the writer: the handle's type names it.
            let builder = $builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            if !from_env {
                log_level::install(Box::new(move |level| {
                    let _ = handle.reload(EnvFilter::new(log_level::filter_for(level)));
                }));
            }
        }};
    }
    if config.logfile.is_empty() {
        install!(builder.with_writer(std::io::stderr));
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.logfile)
        {
            Ok(file) => install!(builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))),
            Err(e) => {
                eprintln!(
                    "node: cannot open logfile {}: {e}; logging to stderr",
                    config.logfile
                );
                install!(builder.with_writer(std::io::stderr));
            }
        }
    }
}
