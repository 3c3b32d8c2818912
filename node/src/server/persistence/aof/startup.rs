//! Loading the AOF at start (`appendonly yes`), instead of the snapshot, as Redis does: the
//! base, then every increment in the manifest's order; then the log continues in the last
//! increment. Without an AOF yet, the snapshot loads as usual and a first base is written
//! from it before clients are served.
//!
//! What may be wrong, and what happens:
//! - temporary files a crash left (`temp-*`): removed;
//! - the last increment ends inside a command or an open MULTI (a crash during a write):
//!   with `aof-load-truncated yes` a warning, and the file is cut back to its last whole
//!   command; with `no`, the node refuses to start, naming the file;
//! - anything else (a bad manifest, a missing or damaged file, a cut that is not at the
//!   very end of the last increment): the node refuses to start, naming the file.

use super::files::{self, failed};
use super::log::IncrFile;
use super::manifest::{names, FileKind, ManifestFile};
use super::replay;
use super::LogState;
use crate::server::persistence::load;
use crate::server::{unix_millis, Server};
use anyhow::{bail, Context};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Loads the AOF if there is one and starts the log on it. False if there is none (the
/// caller loads the snapshot, then calls [`create`]).
pub fn load(server: &Arc<Server>) -> anyhow::Result<bool> {
    let (dir, prefix, load_truncated) = {
        let config = server.config.read();
        (
            config.aof_dir(),
            config.aof.filename.clone(),
            config.aof.load_truncated,
        )
    };
    {
        let mut c = server.aof.control.lock();
        c.dir = dir.clone();
        c.prefix = prefix.clone();
    }
    files::remove_temp_files(&dir)?;
    let Some(mut manifest) = files::read_manifest(&dir, &prefix)? else {
        return Ok(false);
    };
    let started = Instant::now();
    let now = unix_millis();
    let mut base_file_size = 0;
    let mut keys = 0;
    if let Some(base) = &manifest.base {
        let path = dir.join(&base.name);
        match load::load_file(server.dbs(), &path, now, server.hot.packing())
            .context("loading the AOF base")?
        {
            None => bail!(
                "the AOF base file {} named by the manifest is missing",
                path.display()
            ),
            Some(stats) => {
                base_file_size = stats.bytes;
                keys = stats.keys;
                crate::scripting::functions::replace_from_snapshot(server, stats.functions);
            }
        }
    }
    let mut commands = 0;
    let count = manifest.incrs.len();
    for (i, incr) in manifest.incrs.iter().enumerate() {
        let path = dir.join(&incr.name);
        if !path.exists() {
            bail!(
                "the AOF file {} named by the manifest is missing",
                path.display()
            );
        }
        let done = replay::replay_file(server, &path).with_context(|| {
            format!(
                "Bad file format reading the append only file {}",
                path.display()
            )
        })?;
        commands += done.commands;
        if done.truncated {
            let last = i + 1 == count;
            cut_tail(&path, done.good_len, last, load_truncated)?;
        }
    }
    // The log continues in the last increment; a manifest with a base alone (BGREWRITEAOF
    // with the log off) gets its first.
    let last = match manifest.incrs.last() {
        Some(f) => f.clone(),
        None => {
            let seq = manifest.next_incr_seq();
            let incr = ManifestFile {
                name: names::incr(&prefix, seq),
                seq,
                kind: FileKind::Incr,
            };
            files::create_incr(&dir.join(&incr.name))?;
            manifest.incrs.push(incr.clone());
            files::write_manifest(&dir, &prefix, &manifest)?;
            incr
        }
    };
    let path = dir.join(&last.name);
    let size = files::size_of(&path);
    let file = IncrFile::new(files::open_incr(&path)?, path.clone(), size)
        .map_err(failed("duplicate", &path))?;
    let total: u64 = base_file_size
        + manifest
            .incrs
            .iter()
            .map(|f| files::size_of(&dir.join(&f.name)))
            .sum::<u64>();
    tracing::info!(
        dir = %dir.display(),
        base_keys = keys,
        commands,
        bytes = total,
        secs = started.elapsed().as_secs_f64(),
        "DB loaded from append only file"
    );
    let aof = &server.aof;
    aof.ensure_fsync_thread()?;
    let mut c = aof.control.lock();
    c.manifest = manifest;
    c.base_file_size = base_file_size;
    c.base_size = total;
    c.state = LogState::On;
    aof.log.open(file);
    server.replication.set_log_consumer(true);
    Ok(true)
}

/// A truncated tail: cut back to the last whole command when allowed, else refuse.
fn cut_tail(path: &Path, good_len: u64, last: bool, load_truncated: bool) -> anyhow::Result<()> {
    let shown = path.display();
    if !last {
        bail!("the AOF file {shown} is truncated at offset {good_len}, and it is not the last increment: refusing to start");
    }
    if !load_truncated {
        bail!("the AOF file {shown} is truncated at offset {good_len} (aof-load-truncated is no): refusing to start; set aof-load-truncated yes to load it up to there");
    }
    tracing::warn!(
        "!!! Warning: short read while loading the AOF file {shown}: the last command is incomplete. Loaded up to offset {good_len} (aof-load-truncated is yes); truncating the file there"
    );
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(failed("open", path))?;
    file.set_len(good_len).map_err(failed("truncate", path))?;
    file.sync_all().map_err(failed("fsync", path))?;
    Ok(())
}

/// Without an AOF yet: a first base of what was loaded, and the log on it.
pub fn create(server: &Arc<Server>) -> anyhow::Result<()> {
    super::rewrite::run_at_start(server).context("creating the AOF")?;
    Ok(())
}
