//! The manifest: which files make up the append-only file, in Redis 7's text format, one
//! file a line:
//!
//! ```text
//! file appendonly.aof.2.base.snap seq 2 type b
//! file appendonly.aof.3.incr.aof seq 3 type i
//! file appendonly.aof.4.incr.aof seq 4 type i
//! ```
//!
//! `type b` is the base (a snapshot in this node's format, as Redis's RDB-preamble base),
//! `type i` an increment of RESP commands, `type h` a file a rewrite replaced (kept listed by
//! Redis until it is deleted; ignored here). The dataset is the base, then each increment in
//! order. Lines starting with `#` and blank lines are skipped; keys this node does not know
//! are ignored, as Redis does for forward compatibility.
//!
//! Parsing is bounded (size, line length, file count) and never panics: the text may be
//! damaged or hostile. File names must be plain names: a manifest cannot point outside the
//! append-only folder.

/// Largest manifest read: far beyond any real one (a few lines), small enough to read whole.
pub const MANIFEST_MAX_BYTES: usize = 1 << 20;
/// Longest line: a file name and three short fields.
pub const LINE_MAX: usize = 1024;
/// Most increments: each rewrite leaves one; a failing rewrite adds one per attempt.
pub const INCRS_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Base,
    Incr,
    History,
}

impl FileKind {
    fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::Incr => 'i',
            FileKind::History => 'h',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    pub name: String,
    pub seq: u64,
    pub kind: FileKind,
}

/// The files of one append-only file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<ManifestFile>,
    /// In the order they apply (ascending `seq`).
    pub incrs: Vec<ManifestFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("the manifest is larger than {MANIFEST_MAX_BYTES} bytes")]
    TooLarge,
    #[error("line {line}: longer than {LINE_MAX} bytes")]
    LongLine { line: usize },
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    #[error("more than one base file (line {line})")]
    TwoBases { line: usize },
    #[error("increment sequence numbers must grow (line {line})")]
    SeqOrder { line: usize },
    #[error("more than {INCRS_MAX} increments")]
    TooManyIncrs,
    #[error("no base and no increment: the manifest names nothing to load")]
    Empty,
}

impl Manifest {
    /// Parses a manifest's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        if bytes.len() > MANIFEST_MAX_BYTES {
            return Err(ManifestError::TooLarge);
        }
        let mut manifest = Manifest::default();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            if raw.len() > LINE_MAX {
                return Err(ManifestError::LongLine { line });
            }
            let text = std::str::from_utf8(raw).map_err(|_| ManifestError::Line {
                line,
                reason: "not UTF-8".into(),
            })?;
            let text = text.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let file = parse_line(text).map_err(|reason| ManifestError::Line { line, reason })?;
            match file.kind {
                FileKind::History => {}
                FileKind::Base if manifest.base.is_some() => {
                    return Err(ManifestError::TwoBases { line })
                }
                FileKind::Base => manifest.base = Some(file),
                FileKind::Incr => {
                    if manifest
                        .incrs
                        .last()
                        .is_some_and(|last| last.seq >= file.seq)
                    {
                        return Err(ManifestError::SeqOrder { line });
                    }
                    if manifest.incrs.len() == INCRS_MAX {
                        return Err(ManifestError::TooManyIncrs);
                    }
                    manifest.incrs.push(file);
                }
            }
        }
        if manifest.base.is_none() && manifest.incrs.is_empty() {
            return Err(ManifestError::Empty);
        }
        Ok(manifest)
    }

    /// The manifest's text.
    pub fn format(&self) -> String {
        let mut out = String::new();
        for f in self.base.iter().chain(self.incrs.iter()) {
            out.push_str(&format!(
                "file {} seq {} type {}\n",
                f.name,
                f.seq,
                f.kind.letter()
            ));
        }
        out
    }

    /// Every file the manifest names, base first.
    pub fn files(&self) -> impl Iterator<Item = &ManifestFile> {
        self.base.iter().chain(self.incrs.iter())
    }

    /// The sequence number for the next base.
    pub fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(1, |b| b.seq.saturating_add(1))
    }

    /// The sequence number for the next increment.
    pub fn next_incr_seq(&self) -> u64 {
        self.incrs.last().map_or(1, |i| i.seq.saturating_add(1))
    }
}

/// `file <name> seq <n> type <b|i|h>`, keys in any order, unknown keys skipped.
fn parse_line(text: &str) -> Result<ManifestFile, String> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    if !words.len().is_multiple_of(2) {
        return Err("keys and values do not pair up".into());
    }
    let (mut name, mut seq, mut kind) = (None, None, None);
    for pair in words.chunks_exact(2) {
        let (key, value) = (pair[0], pair[1]);
        match key {
            "file" => name = Some(plain_file_name(value)?),
            "seq" => {
                let n: u64 = value
                    .parse()
                    .map_err(|_| format!("seq '{value}' is not a number"))?;
                seq = Some(n);
            }
            "type" => {
                kind = Some(match value {
                    "b" => FileKind::Base,
                    "i" => FileKind::Incr,
                    "h" => FileKind::History,
                    other => return Err(format!("unknown file type '{other}'")),
                })
            }
            _ => {}
        }
    }
    match (name, seq, kind) {
        (Some(name), Some(seq), Some(kind)) => Ok(ManifestFile { name, seq, kind }),
        _ => Err("a line needs file, seq and type".into()),
    }
}

/// A name inside the append-only folder: no separator, not `.`/`..`, printable.
fn plain_file_name(name: &str) -> Result<String, String> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && name.bytes().all(|b| b.is_ascii_graphic());
    if !plain {
        return Err(format!("file name '{name}' is not a plain file name"));
    }
    Ok(name.to_string())
}

/// How the parts of `appendfilename` are named in its folder (Redis 7's names, with our
/// snapshot format's suffix for the base).
pub mod names {
    /// Prefix of files that are being written and not yet in place: removed at start.
    pub const TEMP_PREFIX: &str = "temp-";

    pub fn manifest(prefix: &str) -> String {
        format!("{prefix}.manifest")
    }

    pub fn base(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.base.snap")
    }

    pub fn incr(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.incr.aof")
    }

    pub fn temp(name: &str) -> String {
        format!("{TEMP_PREFIX}{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(name: &str, seq: u64, kind: FileKind) -> ManifestFile {
        ManifestFile {
            name: name.into(),
            seq,
            kind,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_skips_comments_history_and_unknown_keys() {
        let text = b"# written by a node\n\
            file appendonly.aof.2.base.snap seq 2 type b\n\
            \n\
            file appendonly.aof.1.base.snap seq 1 type h\n\
            type i seq 3 file appendonly.aof.3.incr.aof future yes\n\
            file appendonly.aof.4.incr.aof seq 4 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(
            m.base,
            Some(file("appendonly.aof.2.base.snap", 2, FileKind::Base))
        );
        assert_eq!(
            m.incrs,
            vec![
                file("appendonly.aof.3.incr.aof", 3, FileKind::Incr),
                file("appendonly.aof.4.incr.aof", 4, FileKind::Incr)
            ]
        );
        assert_eq!(m.next_base_seq(), 3);
        assert_eq!(m.next_incr_seq(), 5);
        assert_eq!(Manifest::parse(m.format().as_bytes()).unwrap(), m);
        assert_eq!(
            m.format(),
            "file appendonly.aof.2.base.snap seq 2 type b\n\
             file appendonly.aof.3.incr.aof seq 3 type i\n\
             file appendonly.aof.4.incr.aof seq 4 type i\n"
        );
    }

    #[test]
    fn bad_manifests_are_refused_with_the_reason() {
        let long = format!("file {} seq 1 type i", "x".repeat(LINE_MAX));
        let cases: Vec<(&[u8], &str)> = vec![
            (b"", "names nothing"),
            (b"# only a comment\n", "names nothing"),
            (b"file a seq 1\n", "needs file, seq and type"),
            (b"file a seq 1 type\n", "do not pair up"),
            (b"file a seq x type i\n", "not a number"),
            (b"file a seq -1 type i\n", "not a number"),
            (b"file a seq 1 type z\n", "unknown file type"),
            (
                b"file ../../etc/passwd seq 1 type b\n",
                "not a plain file name",
            ),
            (b"file .. seq 1 type b\n", "not a plain file name"),
            (b"file a\x01b seq 1 type b\n", "not a plain file name"),
            (
                b"file a seq 1 type b\nfile b seq 2 type b\n",
                "more than one base",
            ),
            (b"file a seq 2 type i\nfile b seq 2 type i\n", "must grow"),
            (b"file \xff seq 1 type i\n", "not UTF-8"),
            (long.as_bytes(), "longer than"),
        ];
        for (text, why) in cases {
            let e = Manifest::parse(text).unwrap_err().to_string();
            assert!(
                e.contains(why),
                "{:?}: '{e}' lacks '{why}'",
                String::from_utf8_lossy(text)
            );
        }
        let huge = vec![b'#'; MANIFEST_MAX_BYTES + 1];
        assert_eq!(Manifest::parse(&huge), Err(ManifestError::TooLarge));
    }

    proptest! {
        /// Arbitrary bytes are a manifest or an error, never a panic.
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = Manifest::parse(&bytes);
        }

        /// Lines built from the format's own words, shuffled and damaged, never panic, and
        /// whatever parses names only plain files.
        #[test]
        fn near_valid_lines_never_panic(
            words in prop::collection::vec(
                prop::sample::select(vec![
                    "file", "seq", "type", "b", "i", "h", "1", "2", "18446744073709551615",
                    "18446744073709551616", "a.aof", "../x", "\n", "#",
                ]),
                0..40,
            )
        ) {
            let text = words.join(" ");
            if let Ok(m) = Manifest::parse(text.as_bytes()) {
                for f in m.files() {
                    prop_assert!(!f.name.contains('/'));
                }
            }
        }
    }
}
