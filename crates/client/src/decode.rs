//! The response body's `content-encoding`, undone as the bytes arrive.
//!
//! servelab asks for `identity`, but a server or a proxy in front of it may compress the
//! stream anyway (gzip behind nginx is common). Such a body is decoded here before the SSE
//! parser sees it, a bounded slice at a time, so a small compressed read cannot expand into
//! unbounded memory (deflate reaches ~1000:1).

use std::io::Write;

use brotli_decompressor::DecompressorWriter;
use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};

/// Compressed bytes decoded in one step: at most ~1 MiB of output per step at deflate's
/// largest ratio.
const STEP: usize = 1024;

/// A body decoder for one response.
pub enum BodyDecoder {
    /// No encoding (or `identity`): bytes pass through.
    Identity,
    /// `gzip` / `x-gzip`.
    Gzip(Box<GzDecoder<Vec<u8>>>),
    /// `deflate`, which servers send as zlib (RFC 1950) or, against the RFC, raw; the first
    /// two bytes tell which (held here until both came).
    Deflate(Result<Box<Deflate>, Vec<u8>>),
    /// `br`.
    Brotli(Box<DecompressorWriter<Vec<u8>>>),
}

/// The two framings servers send under `deflate`.
pub enum Deflate {
    /// RFC 1950: a 2-byte header, then deflate data.
    Zlib(ZlibDecoder<Vec<u8>>),
    /// Bare RFC 1951 deflate data.
    Raw(DeflateDecoder<Vec<u8>>),
}

/// The body's encoding is one servelab cannot decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server sent the stream with content-encoding '{0}', which servelab cannot decode \
     (it decodes gzip, deflate and br); servelab asks for identity, so a proxy in front of the \
     server may have added it"
)]
pub struct UnknownEncoding(pub String);

impl BodyDecoder {
    /// The decoder for a `content-encoding` header value (`None`: no header).
    pub fn for_encoding(header: Option<&str>) -> Result<BodyDecoder, UnknownEncoding> {
        let Some(value) = header else { return Ok(BodyDecoder::Identity) };
        // Several codings would be listed in the order applied; nobody stacks them on a stream.
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Ok(BodyDecoder::Identity),
            "gzip" | "x-gzip" => Ok(BodyDecoder::Gzip(Box::new(GzDecoder::new(Vec::new())))),
            "deflate" => Ok(BodyDecoder::Deflate(Err(Vec::new()))),
            "br" => Ok(BodyDecoder::Brotli(Box::new(DecompressorWriter::new(Vec::new(), 4096)))),
            other => Err(UnknownEncoding(other.to_string())),
        }
    }

    /// The encoding's name, for the record; `None` for identity.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            BodyDecoder::Identity => None,
            BodyDecoder::Gzip(_) => Some("gzip"),
            BodyDecoder::Deflate(_) => Some("deflate"),
            BodyDecoder::Brotli(_) => Some("br"),
        }
    }

    /// Decode `input` and hand each piece of plain bytes to `sink` (in order, each at most
    /// about 1 KiB × the compression ratio). Stops at the first error of either.
    pub fn feed<E>(
        &mut self,
        input: &[u8],
        mut sink: impl FnMut(&[u8]) -> Result<(), E>,
        bad: impl Fn(String) -> E,
    ) -> Result<(), E> {
        if let BodyDecoder::Identity = self {
            return sink(input);
        }
        let held;
        let mut input = input;
        if let BodyDecoder::Deflate(Err(first)) = self {
            first.extend_from_slice(input);
            if first.len() < 2 {
                return Ok(());
            }
            held = std::mem::take(first);
            input = &held;
            *self = BodyDecoder::Deflate(Ok(Box::new(if is_zlib_header(input) {
                Deflate::Zlib(ZlibDecoder::new(Vec::new()))
            } else {
                Deflate::Raw(DeflateDecoder::new(Vec::new()))
            })));
        }
        let name = self.name().unwrap_or("identity");
        for step in input.chunks(STEP) {
            let out = self.write(step).map_err(|e| {
                bad(format!("the body's {name} content-encoding does not decode: {e}"))
            })?;
            if !out.is_empty() {
                let plain = std::mem::take(out);
                sink(&plain)?;
            }
        }
        Ok(())
    }

    /// Write one step into the decoder and flush it; the decoded bytes so far.
    fn write(&mut self, step: &[u8]) -> std::io::Result<&mut Vec<u8>> {
        fn pass<W: Write>(w: &mut W, step: &[u8]) -> std::io::Result<()> {
            w.write_all(step)?;
            w.flush()
        }
        Ok(match self {
            BodyDecoder::Gzip(d) => {
                pass(d.as_mut(), step)?;
                d.get_mut()
            }
            BodyDecoder::Deflate(Ok(d)) => match d.as_mut() {
                Deflate::Zlib(z) => {
                    pass(z, step)?;
                    z.get_mut()
                }
                Deflate::Raw(r) => {
                    pass(r, step)?;
                    r.get_mut()
                }
            },
            BodyDecoder::Brotli(d) => {
                pass(d.as_mut(), step)?;
                d.get_mut()
            }
            BodyDecoder::Identity | BodyDecoder::Deflate(Err(_)) => {
                unreachable!("identity passes through and deflate picks its framing first")
            }
        })
    }
}

/// RFC 1950's header check: compression method 8 and a header checksum divisible by 31.
fn is_zlib_header(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] & 0x0f == 8 && (u16::from(b[0]) << 8 | u16::from(b[1])) % 31 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;

    const PLAIN: &[u8] = b"data: {\"choices\":[{\"text\":\"hi\"}]}\n\ndata: [DONE]\n\n";

    fn decode_in_pieces(header: &str, encoded: &[u8], piece: usize) -> Vec<u8> {
        let mut d = BodyDecoder::for_encoding(Some(header)).unwrap();
        let mut out = Vec::new();
        for p in encoded.chunks(piece) {
            let sink = |b: &[u8]| -> Result<(), String> {
                out.extend_from_slice(b);
                Ok(())
            };
            d.feed(p, sink, |e| e).unwrap();
        }
        out
    }

    fn encoded(kind: &str) -> Vec<u8> {
        fn done<W: Write>(mut e: W, finish: impl FnOnce(W) -> std::io::Result<Vec<u8>>) -> Vec<u8> {
            e.write_all(PLAIN).unwrap();
            finish(e).unwrap()
        }
        let level = Compression::default();
        match kind {
            "gzip" => done(GzEncoder::new(Vec::new(), level), GzEncoder::finish),
            "zlib" => done(ZlibEncoder::new(Vec::new(), level), ZlibEncoder::finish),
            _ => done(DeflateEncoder::new(Vec::new(), level), DeflateEncoder::finish),
        }
    }

    #[test]
    fn gzip_zlib_and_raw_deflate_decode_whatever_the_read_sizes() {
        for (header, kind) in [("gzip", "gzip"), ("deflate", "zlib"), ("deflate", "raw")] {
            let e = encoded(kind);
            for piece in [1, 2, 7, e.len()] {
                assert_eq!(decode_in_pieces(header, &e, piece), PLAIN, "{kind} by {piece}");
            }
        }
    }

    #[test]
    fn brotli_decodes() {
        // PLAIN as Python's `brotli.compress` writes it (one uncompressed meta-block).
        let mut e = vec![11, 24, 128];
        e.extend_from_slice(PLAIN);
        e.push(3);
        for piece in [1, 5, e.len()] {
            assert_eq!(decode_in_pieces("br", &e, piece), PLAIN, "by {piece}");
        }
    }

    #[test]
    fn garbage_and_unknown_encodings_are_named() {
        let mut d = BodyDecoder::for_encoding(Some("gzip")).unwrap();
        let err = d.feed(b"not gzip at all", |_| Ok(()), |e| e).unwrap_err();
        assert!(err.starts_with("the body's gzip content-encoding does not decode"), "{err}");
        let e = BodyDecoder::for_encoding(Some("zstd")).err().unwrap();
        assert!(e.to_string().contains("content-encoding 'zstd'"), "{e}");
        assert!(matches!(BodyDecoder::for_encoding(Some(" Identity ")), Ok(BodyDecoder::Identity)));
    }
}
