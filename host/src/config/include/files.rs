//! Reading included files: the disk (or files read ahead), the include stack of one parse, and
//! the limits on depth, count and size.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::problem::IncludeProblem;
use crate::config::model::Source;
use crate::diagnostic::Pos;

/// How many files deep includes may nest (the top-level file is not counted).
pub const MAX_DEPTH: usize = 16;

/// How many files one configuration may include in all (a file included twice counts twice).
/// Each file may expand YAML aliases up to its own budget ([`crate::yaml::alias_budget`]), so
/// this also bounds what aliases can add across files.
pub const MAX_FILES: usize = 64;

/// How many bytes the included files of one configuration may add up to.
pub const MAX_BYTES: u64 = 16 << 20;

/// One included file's text and where its path led.
#[derive(Debug, Clone)]
struct ReadFile {
    /// The path with symlinks and `..` resolved (to find cycles).
    canonical: PathBuf,
    text: Arc<str>,
}

/// The files a parse includes: read from disk as the parse reaches them, and remembered, so a
/// second parse of the same text reads nothing.
#[derive(Debug, Clone)]
pub struct IncludedFiles {
    /// The top-level file's directory.
    dir: PathBuf,
    /// By path as reached (directory joined with `path`): what reading it gave.
    read: BTreeMap<PathBuf, Result<ReadFile, IncludeProblem>>,
    /// The top-level file's name and canonical path, found at the first include.
    top: Option<(String, Option<PathBuf>)>,
}

impl IncludedFiles {
    /// Reads included files from disk when the parse reaches them; `dir` is the top-level
    /// file's directory.
    pub fn disk(dir: impl Into<PathBuf>) -> IncludedFiles {
        IncludedFiles {
            dir: dir.into(),
            read: BTreeMap::new(),
            top: None,
        }
    }

    /// Every file the parses reached, as reached (the directory joined with each `path`),
    /// including those that could not be read; sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.read.keys().cloned().collect()
    }

    /// The top-level file's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The canonical path of the top-level file `file` (to find a cycle back to it).
    fn top_canonical(&mut self, file: &str) -> Option<PathBuf> {
        match &self.top {
            Some((name, canonical)) if name == file => canonical.clone(),
            _ => {
                let canonical = std::fs::canonicalize(file).ok();
                self.top = Some((file.to_owned(), canonical.clone()));
                canonical
            }
        }
    }

    fn get(&mut self, reached: &Path, shown: &str) -> Result<ReadFile, IncludeProblem> {
        if let Some(done) = self.read.get(reached) {
            return done.clone();
        }
        let result = read_disk(reached, shown);
        self.read.insert(reached.to_owned(), result.clone());
        result
    }
}

/// Opens `path` for reading without blocking on a FIFO (opening one for reading waits for a
/// writer); the caller checks what was opened with `metadata()` on the file itself, so there
/// is no window between a check by path and the use.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK changes nothing for a regular file's reads; it only keeps the open from
    // waiting when the path is (or was swapped for) a FIFO.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Reads the regular file `path` (after symlinks) as UTF-8 text of at most `limit` bytes:
/// a directory, FIFO, socket or device is refused without blocking.
///
/// # Errors
/// The file cannot be opened or read, is not a regular file, is larger than `limit`, or is not
/// UTF-8 (each as a sentence for a person).
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<String> {
    let file = open_regular(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a directory, FIFO, socket or device)",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8 text"))
}

/// Reads one included file: a regular file (after symlinks), at most [`MAX_BYTES`], UTF-8.
fn read_disk(reached: &Path, shown: &str) -> Result<ReadFile, IncludeProblem> {
    let unreadable = |e: std::io::Error| IncludeProblem::Unreadable {
        path: shown.to_owned(),
        reason: e.to_string(),
    };
    let canonical = std::fs::canonicalize(reached).map_err(unreadable)?;
    let not_a_file = |meta: &std::fs::Metadata| {
        (!meta.is_file()).then(|| IncludeProblem::NotAFile {
            path: shown.to_owned(),
            what: if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file (a FIFO, socket or device)"
            },
        })
    };
    let file = open_regular(&canonical).map_err(unreadable)?;
    if let Some(problem) = not_a_file(&file.metadata().map_err(unreadable)?) {
        return Err(problem);
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(IncludeProblem::TooLarge { limit: MAX_BYTES });
    }
    let text = String::from_utf8(bytes).map_err(|_| IncludeProblem::NotUtf8 {
        path: shown.to_owned(),
    })?;
    Ok(ReadFile {
        canonical,
        text: text.into(),
    })
}

/// `base` joined with `written`, without `.` components (`./b.yml` reads as `b.yml`).
pub fn join(base: &Path, written: &str) -> PathBuf {
    let mut out = if base == Path::new(".") {
        PathBuf::new()
    } else {
        base.to_owned()
    };
    for part in Path::new(written).components() {
        match part {
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// An include being read: where it was reached from.
struct Frame {
    /// As reached (its directory is where its own includes resolve).
    reached: PathBuf,
    /// For messages.
    shown: String,
    canonical: Option<PathBuf>,
}

/// The state of one parse across its files: the include stack, the budgets, the sources.
pub(in crate::config) struct Session<'f> {
    files: &'f mut IncludedFiles,
    stack: Vec<Frame>,
    reads: usize,
    bytes: u64,
    /// Every file of the parse; index 0 is the top-level file.
    pub sources: Vec<Source>,
}

/// A file entered by [`Session::enter`].
pub(in crate::config) struct Entered {
    /// Its index in [`Session::sources`].
    pub index: usize,
    /// Its text.
    pub text: Arc<str>,
    /// Its name for messages.
    pub shown: String,
}

impl<'f> Session<'f> {
    /// A parse of the top-level file `file`.
    pub fn new(files: &'f mut IncludedFiles, file: &str) -> Session<'f> {
        Session {
            stack: vec![Frame {
                reached: PathBuf::from(file),
                shown: file.to_owned(),
                // Found at the first include: a file without includes costs no system call.
                canonical: None,
            }],
            files,
            reads: 0,
            bytes: 0,
            sources: vec![Source {
                origin: file.to_owned(),
                chain: Vec::new(),
                tree: Arc::default(),
            }],
        }
    }

    /// Reads the file `written` names from the file being read (source `from`, whose include
    /// entry is at `at`) and makes it the file being read; [`Session::leave`] ends it.
    ///
    /// # Errors
    /// A problem to report at the include's `path`; nothing was entered then.
    pub fn enter(
        &mut self,
        from: usize,
        at: Pos,
        written: &str,
    ) -> Result<Entered, IncludeProblem> {
        let dir = match self.stack.len() {
            1 => self.files.dir.clone(),
            _ => {
                let top = &self.stack[self.stack.len() - 1].reached;
                top.parent().map(Path::to_owned).unwrap_or_default()
            }
        };
        let reached = join(&dir, written);
        let shown = reached.display().to_string();
        if self.stack.len() > MAX_DEPTH {
            return Err(IncludeProblem::TooDeep { limit: MAX_DEPTH });
        }
        if self.reads >= MAX_FILES {
            return Err(IncludeProblem::TooMany { limit: MAX_FILES });
        }
        self.reads += 1;
        if self.stack.len() == 1 && self.stack[0].canonical.is_none() {
            self.stack[0].canonical = self.files.top_canonical(&self.stack[0].shown);
        }
        let read = self.files.get(&reached, &shown)?;
        if let Some(at) = self
            .stack
            .iter()
            .position(|f| f.canonical.as_ref() == Some(&read.canonical))
        {
            let mut chain: Vec<String> = self.stack[at..].iter().map(|f| f.shown.clone()).collect();
            chain.push(shown);
            return Err(IncludeProblem::Cycle { chain });
        }
        self.bytes += read.text.len() as u64;
        if self.bytes > MAX_BYTES {
            return Err(IncludeProblem::TooLarge { limit: MAX_BYTES });
        }
        let parent = &self.sources[from];
        let origin = format!("{}:{at} → {shown}", parent.origin);
        let mut chain = parent.chain.clone();
        chain.push(at);
        self.sources.push(Source {
            origin,
            chain,
            tree: Arc::default(),
        });
        self.stack.push(Frame {
            reached,
            shown: shown.clone(),
            canonical: Some(read.canonical),
        });
        Ok(Entered {
            index: self.sources.len() - 1,
            text: read.text,
            shown,
        })
    }

    /// Ends the file [`Session::enter`] entered.
    pub fn leave(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }
}
