//! The top-level modules of every crate form layers, not knots (issue "House redesign",
//! "no import cycle between the top-level modules of any crate"): an import edge that closes
//! a loop fails this test. node/'s last knot is gone; no exception is allowed.

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

#[test]
fn no_import_knots_between_top_level_modules() {
    let root = workspace_root();
    let members = workspace_members(&root);
    assert!(
        members.iter().any(|m| m == "node") && members.len() >= 6,
        "workspace members not read: {members:?}"
    );
    let mut problems = Vec::new();
    for member in &members {
        let graph = ModuleGraph::read(&root.join(member).join("src")).unwrap();
        assert!(!graph.modules.is_empty(), "{member}: no modules read");
        for edge in graph.knot_edges() {
            problems.push(format!(
                "{member}: {} -> {} ({}): closes an import loop; a lower layer must not import \
                 an upper one (define a trait below, implement it above; node/DESIGN.md)",
                edge.from, edge.to, edge.file
            ));
        }
        eprint!("{member}: {}", graph.report());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
