//! The one error type of dataset loading. Every message names the input (file, line, column,
//! field or parameter) and says what was expected, so the user can fix it without reading code.

use std::path::PathBuf;

use crate::tokenizer::TokenizerError;

/// Why a dataset could not be loaded or generated.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The dataset file does not exist.
    #[error("dataset file {} does not exist; check --dataset-path", path.display())]
    NotFound {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// The dataset file exists but could not be read.
    #[error("cannot read dataset file {}: {message}", path.display())]
    Read {
        /// The dataset file.
        path: PathBuf,
        /// The operating system's error.
        message: String,
    },
    /// The file holds no entries at all.
    #[error("{}: the dataset is empty; expected {expected}", path.display())]
    Empty {
        /// The dataset file.
        path: PathBuf,
        /// What the file should have held, e.g. "a ShareGPT JSON array".
        expected: &'static str,
    },
    /// The text is not JSON at this position.
    #[error("{}:{line}:{column}: invalid JSON: {message}", path.display())]
    Json {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The JSON parser's message.
        message: String,
    },
    /// Valid JSON of the wrong shape: `field` is a JSON path (`prompt`, `messages[1].role`,
    /// `[3].conversations[0].value`).
    #[error("{}:{line}{}: field \"{field}\" {problem}", path.display(), column.map(|c| format!(":{c}")).unwrap_or_default())]
    Field {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line of the entry.
        line: usize,
        /// 1-based column, when the parser knows it.
        column: Option<usize>,
        /// The JSON path of the field.
        field: String,
        /// What is wrong with it and what was expected.
        problem: String,
    },
    /// A line or entry that is neither of the accepted shapes.
    #[error("{}:{line}: {problem}", path.display())]
    Shape {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line of the entry.
        line: usize,
        /// What the entry is and what was expected.
        problem: String,
    },
    /// A ShareGPT file without a single conversation of two turns or more.
    #[error(
        "{}: no conversation has at least 2 turns in \"conversations\"; expected a ShareGPT JSON \
         array of {{\"conversations\": [{{\"from\": \"human\", \"value\": ...}}, {{\"from\": \"gpt\", \
         \"value\": ...}}]}}",
        path.display()
    )]
    NoConversations {
        /// The dataset file.
        path: PathBuf,
    },
    /// ShareGPT conversations exist but every one fails the length filters.
    #[error(
        "{}: none of the {candidates} conversations passes the length filters (prompt and output \
         at least 4 tokens; prompt at most 1024 and prompt + output at most 2048 tokens unless an \
         output length is fixed) under tokenizer {tokenizer}",
        path.display()
    )]
    NoneUsable {
        /// The dataset file.
        path: PathBuf,
        /// How many conversations were tried.
        candidates: usize,
        /// The tokenizer that counted their lengths.
        tokenizer: String,
    },
    /// A whole-file problem (nothing usable in it, or an inconsistent row set).
    #[error("{}: {problem}", path.display())]
    Content {
        /// The dataset file.
        path: PathBuf,
        /// What is wrong with its contents.
        problem: String,
    },
    /// A Hugging Face dataset that cannot be found, selected or downloaded.
    #[error("{0}")]
    Hub(String),
    /// A generation parameter that cannot be honoured.
    #[error("invalid dataset parameter: {0}")]
    Spec(String),
    /// Random text could not be made to count exactly the requested number of tokens.
    #[error(
        "could not build a prompt of exactly {target} tokens with tokenizer {tokenizer} after \
         {rounds} attempts; try another --seed or tokenizer"
    )]
    ExactLength {
        /// The requested length, tokens.
        target: usize,
        /// The tokenizer's name.
        tokenizer: String,
        /// How many attempts were made.
        rounds: usize,
    },
    /// The tokenizer could not be loaded or used.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

impl DatasetError {
    /// The error for a file that cannot be read, telling a missing file apart.
    pub(crate) fn read(path: &std::path::Path, err: &std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound { path: path.to_path_buf() },
            _ => Self::Read { path: path.to_path_buf(), message: err.to_string() },
        }
    }
}

/// serde_json's message without its trailing " at line L column C" (we print the position
/// ourselves, in `file:line:column` form).
pub(crate) fn serde_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// The largest dataset file read whole (ShareGPT's V3 file is 642 MB). A larger one, or an
/// endless one (`/dev/zero`, a pipe that never closes), is refused when the limit is reached
/// instead of growing until the machine runs out of memory.
pub const MAX_DATASET_BYTES: u64 = 2 << 30;

/// Read a whole dataset file as UTF-8.
pub(crate) fn read_text(path: &std::path::Path) -> Result<String, DatasetError> {
    let bytes = crate::bounded::read_bounded(path, MAX_DATASET_BYTES)
        .map_err(|e| DatasetError::read(path, &e))?;
    String::from_utf8(bytes).map_err(|e| DatasetError::Read {
        path: path.to_path_buf(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// The longest line a line-oriented file may have (a prompt of millions of tokens is far
/// shorter): an endless one (`/dev/zero`) is refused at this length instead of filling memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Call `f` with each non-blank line of `path` (1-based number, text without its line end),
/// reading one line at a time, until `f` returns `false` or the file ends.
pub(crate) fn for_each_line(
    path: &std::path::Path,
    mut f: impl FnMut(usize, &str) -> Result<bool, DatasetError>,
) -> Result<(), DatasetError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| DatasetError::read(path, &e))?;
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let (mut line, mut offset) = (0, 0);
    loop {
        buf.clear();
        let n = std::io::Read::take(&mut reader, (MAX_LINE_BYTES + 1) as u64)
            .read_until(b'\n', &mut buf)
            .map_err(|e| DatasetError::read(path, &e))?;
        if n == 0 {
            return Ok(());
        }
        line += 1;
        if buf.len() > MAX_LINE_BYTES {
            return Err(DatasetError::Shape {
                path: path.into(),
                line,
                problem: format!(
                    "the line is longer than {} MiB (not a line-per-record file, or an endless \
                     one?)",
                    MAX_LINE_BYTES >> 20
                ),
            });
        }
        let text = std::str::from_utf8(&buf).map_err(|e| DatasetError::Read {
            path: path.to_path_buf(),
            message: format!(
                "not UTF-8 text (invalid byte at offset {}, line {line})",
                offset + e.valid_up_to()
            ),
        })?;
        offset += n;
        let text = text.trim_end_matches(['\n', '\r']);
        if !text.trim().is_empty() && !f(line, text)? {
            return Ok(());
        }
    }
}
