//! The append-only folder on disk: the manifest written atomically, increments created,
//! temporary files left by a crash removed. Every change that must survive a crash is
//! followed by an fsync of the file and then of the folder (a rename or a new name is
//! durable only once the folder is).

use super::manifest::{names, Manifest, ManifestError, MANIFEST_MAX_BYTES};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A file operation that failed, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}: {source}")]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// `map_err` helper: the failed `action` on `path`.
pub fn failed(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
    let path = path.to_path_buf();
    move |source| FileError {
        action,
        path,
        source,
    }
}

pub fn fsync_dir(dir: &Path) -> Result<(), FileError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(failed("fsync directory", dir))
}

/// Writes `manifest` as `dir/<prefix>.manifest`: a temporary file, fsynced, renamed over
/// the old one, then the folder fsynced. A crash leaves the old manifest or the new, whole.
pub fn write_manifest(dir: &Path, prefix: &str, manifest: &Manifest) -> Result<(), FileError> {
    let name = names::manifest(prefix);
    let tmp = dir.join(names::temp(&name));
    let target = dir.join(&name);
    let result = (|| {
        let mut f = File::create(&tmp).map_err(failed("create", &tmp))?;
        f.write_all(manifest.format().as_bytes())
            .map_err(failed("write", &tmp))?;
        f.sync_all().map_err(failed("fsync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, &target).map_err(failed("rename the new manifest to", &target))?;
        fsync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Why the manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadManifestError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("bad AOF manifest {path}: {fault}")]
    Bad { path: PathBuf, fault: ManifestError },
}

/// The manifest of `dir/<prefix>.manifest`; `Ok(None)` if there is none (no AOF yet).
pub fn read_manifest(dir: &Path, prefix: &str) -> Result<Option<Manifest>, ReadManifestError> {
    let path = dir.join(names::manifest(prefix));
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed("open", &path)(e).into()),
    };
    let mut bytes = Vec::new();
    // One byte past the limit tells a file that is too large without reading all of it.
    file.take(MANIFEST_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(failed("read", &path))?;
    Manifest::parse(&bytes)
        .map(Some)
        .map_err(|fault| ReadManifestError::Bad { path, fault })
}

/// Creates (or empties) an increment, makes its name durable, and opens it for appending.
pub fn create_incr(path: &Path) -> Result<File, FileError> {
    let file = File::create(path).map_err(failed("create", path))?;
    file.sync_all().map_err(failed("fsync", path))?;
    drop(file);
    if let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    open_incr(path)
}

/// Opens an existing increment to append to it (the last one, at start).
pub fn open_incr(path: &Path) -> Result<File, FileError> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(failed("open for appending", path))
}

/// Removes what a crash left half-written (`temp-*`). Returns how many files went.
pub fn remove_temp_files(dir: &Path) -> Result<usize, FileError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(failed("list", dir)(e)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(failed("list", dir))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(names::TEMP_PREFIX) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(failed("remove", &path))?;
            tracing::info!(path = %path.display(), "removed a temporary AOF file left by a crash");
            removed += 1;
        }
    }
    Ok(removed)
}

/// The size of `path`, 0 if it is gone.
pub fn size_of(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
