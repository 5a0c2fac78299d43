//! Images for multimodal chat requests, as `data:` URLs: random noise images generated from the
//! seed, and image files read from disk.
//!
//! Random images are uniform random RGB pixels (as `vllm bench serve`'s random multimodal
//! dataset draws them), so no two requests send the same image and a server's multimodal
//! cache never hits. JPEG (quality 75, the encoder default of PIL) keeps a 512×512 image near
//! 200 kB; PNG is lossless and as large as the raw pixels (noise does not compress).

use std::path::Path;
use std::str::FromStr;

use base64::Engine;
use rand::rngs::StdRng;
use rand::RngCore;

use crate::error::DatasetError;

/// Largest side accepted for a random image.
pub const MAX_SIDE: u32 = 8192;
/// JPEG quality of random images.
const JPEG_QUALITY: u8 = 75;

/// How random images are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageFormat {
    /// JPEG at quality 75: about 200 kB for 512×512 noise.
    #[default]
    Jpeg,
    /// Lossless PNG: as large as the raw pixels, since noise does not compress.
    Png,
}

impl ImageFormat {
    /// The MIME type in the `data:` URL: `image/jpeg` or `image/png`.
    pub fn mime(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
        }
    }
}

/// Width × height in pixels; parses from `"512x512"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSize {
    /// Width in pixels, 1 to 8192.
    pub width: u32,
    /// Height in pixels, 1 to 8192.
    pub height: u32,
}

impl FromStr for ImageSize {
    type Err = DatasetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            DatasetError::Spec(format!(
                "image size \"{s}\" is not WIDTHxHEIGHT with each side 1 to {MAX_SIDE}, like 512x512"
            ))
        };
        let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let size = Self {
            width: w.trim().parse().map_err(|_| bad())?,
            height: h.trim().parse().map_err(|_| bad())?,
        };
        size.check().map_err(|_| bad())?;
        Ok(size)
    }
}

impl ImageSize {
    fn check(self) -> Result<(), DatasetError> {
        let ok = |side: u32| (1..=MAX_SIDE).contains(&side);
        if ok(self.width) && ok(self.height) {
            Ok(())
        } else {
            Err(DatasetError::Spec(format!(
                "image size {}x{} is out of range; each side must be 1 to {MAX_SIDE}",
                self.width, self.height
            )))
        }
    }
}

/// A random RGB image of `size`, encoded as `format`.
pub fn random_image(
    size: ImageSize,
    format: ImageFormat,
    rng: &mut StdRng,
) -> Result<Vec<u8>, DatasetError> {
    size.check()?;
    let mut pixels = vec![0u8; size.width as usize * size.height as usize * 3];
    rng.fill_bytes(&mut pixels);
    let encode_error = |e: String| DatasetError::Spec(format!("cannot encode a random image: {e}"));
    let mut out = Vec::new();
    match format {
        ImageFormat::Jpeg => {
            // Sides are at most 8192, within the encoder's u16 range.
            let encoder = jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY);
            encoder
                .encode(
                    &pixels,
                    size.width as u16,
                    size.height as u16,
                    jpeg_encoder::ColorType::Rgb,
                )
                .map_err(|e| encode_error(e.to_string()))?;
        }
        ImageFormat::Png => {
            let mut encoder = png::Encoder::new(&mut out, size.width, size.height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            // Noise does not compress: spend no time trying.
            encoder.set_compression(png::Compression::Fast);
            let mut writer = encoder.write_header().map_err(|e| encode_error(e.to_string()))?;
            writer.write_image_data(&pixels).map_err(|e| encode_error(e.to_string()))?;
            writer.finish().map_err(|e| encode_error(e.to_string()))?;
        }
    }
    Ok(out)
}

/// `data:{mime};base64,{bytes}`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut url = String::with_capacity(mime.len() + 13 + bytes.len().div_ceil(3) * 4);
    url.push_str("data:");
    url.push_str(mime);
    url.push_str(";base64,");
    b64.encode_string(bytes, &mut url);
    url
}

/// A random image as a `data:` URL.
pub fn random_image_data_url(
    size: ImageSize,
    format: ImageFormat,
    rng: &mut StdRng,
) -> Result<String, DatasetError> {
    Ok(data_url(format.mime(), &random_image(size, format, rng)?))
}

/// The MIME type of an image file, from its first bytes.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        [b'B', b'M', ..] => Some("image/bmp"),
        _ => None,
    }
}

/// Whether an image reference is sent as it is (a URL) rather than read from disk.
pub fn is_url(reference: &str) -> bool {
    ["data:", "http://", "https://"].iter().any(|p| reference.starts_with(p))
}

/// An image file as a `data:` URL; the error text says what is wrong with the file.
pub fn image_file_data_url(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read image file {}: {e}", path.display()))?;
    let mime = sniff_mime(&bytes)
        .ok_or_else(|| format!("{} is not a PNG, JPEG, GIF, WebP or BMP image", path.display()))?;
    Ok(data_url(mime, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::item_rng;

    #[test]
    fn sizes_parse_and_are_bounded() {
        assert_eq!("640x480".parse::<ImageSize>().unwrap(), ImageSize { width: 640, height: 480 });
        assert_eq!(" 1 X 2 ".parse::<ImageSize>().unwrap(), ImageSize { width: 1, height: 2 });
        for bad in ["", "512", "0x5", "5x0", "9000x1", "ax1", "-1x1"] {
            assert!(bad.parse::<ImageSize>().is_err(), "{bad}");
        }
    }

    #[test]
    fn data_urls_are_base64_and_sniffed() {
        assert_eq!(data_url("image/png", b"hi!"), "data:image/png;base64,aGkh");
        let png =
            random_image(ImageSize { width: 3, height: 2 }, ImageFormat::Png, &mut item_rng(0, 0))
                .unwrap();
        assert_eq!(sniff_mime(&png), Some("image/png"));
        let jpg =
            random_image(ImageSize { width: 3, height: 2 }, ImageFormat::Jpeg, &mut item_rng(0, 0))
                .unwrap();
        assert_eq!(sniff_mime(&jpg), Some("image/jpeg"));
        assert!(is_url("https://x/y.png") && is_url("data:image/png;base64,") && !is_url("a.png"));
    }
}
