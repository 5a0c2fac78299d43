//! The Mooncake trace: one JSON object per line, `{"timestamp": ms, "input_length": N,
//! "output_length": M, "hash_ids": [...]}`. Request `i` has `ceil(N / block_size)` hash ids:
//! every id but the last is a full block of `block_size` tokens, the last covers the rest.

use std::path::Path;

use serde::Deserialize;

use super::Row;
use crate::error::{serde_message, DatasetError};

#[derive(Deserialize)]
struct Line {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    hash_ids: Vec<u64>,
}

fn parse_line(path: &Path, line: usize, text: &str, bs: u64) -> Result<Row, DatasetError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed: Line = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data if field != "." => DatasetError::Field {
                path: path.into(),
                line,
                column: Some(inner.column()),
                field,
                problem: format!("is invalid: {}", serde_message(&inner)),
            },
            serde_json::error::Category::Data => DatasetError::Shape {
                path: path.into(),
                line,
                problem: format!(
                    "{}; expected {{\"timestamp\": ms, \"input_length\": N, \
                         \"output_length\": M, \"hash_ids\": [...]}}",
                    serde_message(&inner)
                ),
            },
            _ => DatasetError::Json {
                path: path.into(),
                line,
                column: inner.column(),
                message: serde_message(&inner),
            },
        }
    })?;
    de.end().map_err(|e| DatasetError::Json {
        path: path.into(),
        line,
        column: e.column(),
        message: serde_message(&e),
    })?;
    let field = |field: &str, problem: String| DatasetError::Field {
        path: path.into(),
        line,
        column: None,
        field: field.into(),
        problem,
    };
    let ns = parsed.timestamp * 1e6;
    if !ns.is_finite() || ns.abs() > 9.0e18 {
        return Err(field(
            "timestamp",
            format!("must be a time in milliseconds (got {})", parsed.timestamp),
        ));
    }
    let n = parsed.hash_ids.len() as u64;
    let need = parsed.input_length.div_ceil(bs);
    if parsed.input_length > 0 && n != need {
        return Err(field(
            "hash_ids",
            format!(
                "has {n} ids, but input_length {} needs ceil({} / {bs}) = {need} blocks of \
                 {bs} tokens; pass the trace's block size if it is not {bs}",
                parsed.input_length, parsed.input_length
            ),
        ));
    }
    Ok(Row {
        line,
        time_ns: ns.round() as i64,
        input: parsed.input_length,
        output: parsed.output_length,
        hash_ids: parsed.hash_ids,
    })
}

/// Call `f` with each row of the trace at `path`, read one line at a time (a trace of
/// hundreds of MB is never held whole).
pub(crate) fn for_each_row(
    path: &Path,
    bs: u64,
    mut f: impl FnMut(Row),
) -> Result<(), DatasetError> {
    crate::error::for_each_line(path, |n, l| {
        f(parse_line(path, n, l, bs)?);
        Ok(true)
    })
}
