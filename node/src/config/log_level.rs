//! `loglevel` at runtime: the binary installs the logger with a reloadable filter and hands
//! the node a way to change it, so CONFIG SET loglevel takes effect as it does in Redis.

use std::sync::OnceLock;

type SetLevel = Box<dyn Fn(&str) + Send + Sync>;

static SET_LEVEL: OnceLock<SetLevel> = OnceLock::new();

/// The `tracing` filter directive for a Redis `loglevel` name.
pub fn filter_for(loglevel: &str) -> &'static str {
    match loglevel {
        "debug" => "debug",
        "verbose" => "info",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    }
}

/// Installed once by the binary; `set` is given a `loglevel` name.
pub fn install(set: SetLevel) {
    let _ = SET_LEVEL.set(set);
}

/// Applies a changed `loglevel` (no-op where no logger was installed: tests, a library user).
pub fn apply(loglevel: &str) {
    if let Some(set) = SET_LEVEL.get() {
        set(loglevel);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redis_names_map_to_tracing_levels() {
        let names = ["debug", "verbose", "notice", "warning", "nothing"];
        let got: Vec<&str> = names.iter().map(|n| super::filter_for(n)).collect();
        assert_eq!(got, ["debug", "info", "info", "warn", "off"]);
    }
}
