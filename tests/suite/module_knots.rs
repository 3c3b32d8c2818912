//! Goal: the top-level modules of every crate form layers, not knots (issue "House redesign",
//! "no import cycle between the top-level modules of any crate"). node/'s knot of today is
//! allowed edge by edge in `tests/module_knot_allowlist.txt`, which may only shrink.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use integration::module_graph::ModuleGraph;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace")
        .to_path_buf()
}

/// The `members = [...]` of the workspace's Cargo.toml, so that a new crate is checked too.
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("workspace members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `crate: from -> to` lines; comments and blank lines skipped.
fn allowlist(root: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(root.join("tests/module_knot_allowlist.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn no_new_import_knots_between_top_level_modules() {
    let root = workspace_root();
    let members = workspace_members(&root);
    assert!(
        members.iter().any(|m| m == "node") && members.len() >= 6,
        "workspace members not read: {members:?}"
    );
    let allowed = allowlist(&root);
    let mut found = BTreeSet::new();
    let mut problems = Vec::new();
    for member in &members {
        let graph = ModuleGraph::read(&root.join(member).join("src")).unwrap();
        assert!(!graph.modules.is_empty(), "{member}: no modules read");
        for edge in graph.knot_edges() {
            let line = format!("{member}: {} -> {}", edge.from, edge.to);
            if member != "node" {
                problems.push(format!(
                    "{line} ({}): {member} must have no knot",
                    edge.file
                ));
            } else if !allowed.contains(&line) {
                problems.push(format!(
                    "{line} ({}): a new edge in node's knot (the allowlist may only shrink)",
                    edge.file
                ));
            }
            found.insert(line);
        }
        eprint!("{member}: {}", graph.report());
    }
    for stale in allowed.difference(&found) {
        problems.push(format!(
            "{stale}: no longer in a knot; delete its line from tests/module_knot_allowlist.txt"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
