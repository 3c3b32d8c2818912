//! Reading configuration: an optional redis.conf-style file, then redis-server-style flags
//! (`node [FILE] [--name value...]`), flags overriding the file as in redis-server.

use super::params::Config;
use std::path::{Path, PathBuf};

/// Most bytes read from a config file; a longer one is surely not a config file.
pub const MAX_CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is larger than {MAX_CONFIG_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("bad config in {origin} at line {line}: '{text}': {reason}")]
    Line {
        origin: String,
        line: usize,
        text: String,
        reason: String,
    },
    #[error("bad command line: {0}")]
    Args(String),
}

/// What the command line asked for.
pub enum Invocation {
    Run(Box<Config>),
    Version,
    Help,
}

/// Builds the configuration from the process arguments (without argv[0]).
pub fn load(args: &[String]) -> Result<Invocation, ConfigError> {
    let mut config = Config::default();
    let mut rest = args;
    match rest.first().map(String::as_str) {
        Some("-v" | "--version") => return Ok(Invocation::Version),
        Some("-h" | "--help") => return Ok(Invocation::Help),
        Some(first) if !first.starts_with("--") => {
            let path = PathBuf::from(first);
            let text = read_file(&path)?;
            apply_text(&mut config, &text, &path.display().to_string())?;
            config.file = Some(std::fs::canonicalize(&path).unwrap_or(path));
            rest = &rest[1..];
        }
        _ => {}
    }
    let flags = flags_to_text(rest)?;
    apply_text(&mut config, &flags, "command line")?;
    Ok(Invocation::Run(Box::new(config)))
}

fn read_file(path: &Path) -> Result<String, ConfigError> {
    let meta = std::fs::metadata(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })?;
    if meta.len() > MAX_CONFIG_FILE_BYTES {
        return Err(ConfigError::TooLarge { path: path.into() });
    }
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })
}

/// `--port 7000 --save "" --bind a b` becomes config lines, each flag taking the words up to
/// the next `--flag`, as redis-server does.
fn flags_to_text(args: &[String]) -> Result<String, ConfigError> {
    let mut text = String::new();
    let mut open = false;
    for arg in args {
        if let Some(name) = arg.strip_prefix("--") {
            if name.is_empty() {
                return Err(ConfigError::Args("empty option name '--'".into()));
            }
            if open {
                text.push('\n');
            }
            text.push_str(name);
            open = true;
        } else if open {
            text.push(' ');
            text.push_str(&quote(arg));
        } else {
            return Err(ConfigError::Args(format!(
                "unexpected argument '{arg}' (options are --name value)"
            )));
        }
    }
    Ok(text)
}

fn quote(word: &str) -> String {
    let mut out = String::from("\"");
    for c in word.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Applies config lines (`name value...`, `#` comments) to `config`.
pub fn apply_text(config: &mut Config, text: &str, origin: &str) -> Result<(), ConfigError> {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |reason: String| ConfigError::Line {
            origin: origin.to_string(),
            line: i + 1,
            text: line.to_string(),
            reason,
        };
        let mut words = Vec::new();
        if !proto::resp::splitargs::split_args(line.as_bytes(), &mut words) {
            return Err(fail("unbalanced quotes".into()));
        }
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect();
        let Some((name, values)) = words.split_first() else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        if super::params::find(&name).is_none() {
            return Err(fail(format!("unknown option '{name}'")));
        }
        if values.is_empty() && name != "save" && name != "requirepass" {
            return Err(fail("a value is needed".into()));
        }
        config.set(&name, &values.join(" ")).map_err(fail)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, ConfigError> {
        match load(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())? {
            Invocation::Run(c) => Ok(*c),
            _ => panic!("expected a run"),
        }
    }

    #[test]
    fn flags_like_redis_server() {
        let c = run(&[
            "--port",
            "7000",
            "--save",
            "",
            "--bind",
            "127.0.0.1",
            "::1",
            "--maxmemory",
            "100mb",
        ])
        .unwrap();
        assert_eq!(c.port, 7000);
        assert!(c.save.is_empty());
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(c.maxmemory, 100 << 20);
    }

    #[test]
    fn file_then_flags_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.conf");
        std::fs::write(
            &path,
            "# comment\nport 7001\nsave 60 100 10 1000\nmaxmemory-policy allkeys-lru\n",
        )
        .unwrap();
        let c = run(&[path.to_str().unwrap(), "--port", "7002"]).unwrap();
        assert_eq!(c.port, 7002);
        assert_eq!(c.save.len(), 2);
        std::fs::write(&path, "port 7001\nbogus-option 1\n").unwrap();
        let e = run(&[path.to_str().unwrap()]).unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("bogus-option") && e.contains("node.conf"),
            "{e}"
        );
        std::fs::write(&path, "port 99999\n").unwrap();
        let e = run(&[path.to_str().unwrap()]).unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("between 0 and 65535"),
            "{e}"
        );
    }
}
