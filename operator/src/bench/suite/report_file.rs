//! BENCHMARKS.md's marked sections: each suite but vs-redis owns the text between
//! `<!-- BEGIN name -->` and `<!-- END name -->` and replaces only that, so reports written by
//! different suites (and runs) live in one file; vs-redis rewrites the rest and keeps these.

use std::path::Path;

use anyhow::Context;

/// Sections written by the suites other than vs-redis, in the order they appear
/// ("redis-suite" is `scripts/redis-suite.sh`'s table and "memory-per-key"
/// `scripts/memory-per-key.sh`'s, pasted by hand, as are "fabric-notes" and "scripting").
pub const OWNED: [&str; 9] = [
    "keyspace",
    "memory-per-key",
    "fabric",
    "fabric-notes",
    "replication",
    "failover",
    "reshard",
    "redis-suite",
    "scripting",
];

/// The part the failover and replication reports share: the machine lines, the method and
/// the opening of the commands block (the caller lists the commands and closes it).
pub fn machine_method_commands(out: &mut Vec<String>, machine: &[String], method: &[&str]) {
    out.extend(["### Machine and run".into(), String::new(), "```".into()]);
    out.extend(machine.iter().cloned());
    out.extend([
        "```".into(),
        String::new(),
        "### Method".into(),
        String::new(),
    ]);
    out.extend(method.iter().map(|s| s.to_string()));
    out.extend([
        String::new(),
        "### Commands".into(),
        String::new(),
        "```sh".into(),
    ]);
}

pub fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- BEGIN {name} -->"),
        format!("<!-- END {name} -->"),
    )
}

/// The section `name` of `text`, markers included; `None` when there is none.
pub fn section<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let (begin, end) = markers(name);
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start;
    Some(&text[start..stop + end.len()])
}

/// Writes `body` (which starts and ends with the section's markers) over the section `name`
/// of the file at `path`, or appends it when the file has none.
pub fn replace_section(path: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let new = match section(&old, name) {
        Some(current) => old.replacen(current, body, 1),
        None => format!("{}\n\n{body}\n", old.trim_end_matches('\n')),
    };
    write_atomically(path, &new)
}

/// The sections other suites own in an existing report, kept verbatim by vs-redis.
pub fn owned_sections(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    OWNED
        .iter()
        .filter_map(|name| section(&text, name).map(str::to_string))
        .collect()
}

/// Never leaves a half-written report: writes a temp file beside it and renames.
pub fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_its_section_or_appends_it() {
        let dir = tempfile_dir();
        let path = dir.join("B.md");
        std::fs::write(
            &path,
            "# top\n\n<!-- BEGIN fabric -->\nold\n<!-- END fabric -->\ntail\n",
        )
        .unwrap();
        replace_section(
            &path,
            "fabric",
            "<!-- BEGIN fabric -->\nnew\n<!-- END fabric -->",
        )
        .unwrap();
        replace_section(
            &path,
            "failover",
            "<!-- BEGIN failover -->\nf\n<!-- END failover -->",
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# top\n\n<!-- BEGIN fabric -->\nnew\n<!-- END fabric -->\ntail\n\n\
             <!-- BEGIN failover -->\nf\n<!-- END failover -->\n"
        );
        assert_eq!(owned_sections(&path).len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("report-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
