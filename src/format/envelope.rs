//! The byte envelope of every file natal encodes itself (manifests, deletion vectors, row-id
//! files): `MAGIC (8 bytes) | body | crc32(body) as u32 LE`. The checksum turns a torn or
//! bit-flipped file into [`Error::Corrupt`] instead of a silently different table.

use crate::error::{Error, Result};

/// Wraps `body` in `magic` and its checksum.
pub fn seal(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(magic.len() + body.len() + 4);
    out.extend_from_slice(magic);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out
}

/// The body of a sealed file, after checking its magic and checksum.
///
/// # Errors
/// [`Error::Corrupt`] naming `path` and `what` the file should have been.
pub fn unseal<'a>(magic: &[u8; 8], path: &str, bytes: &'a [u8], what: &str) -> Result<&'a [u8]> {
    if bytes.len() < magic.len() + 4 || &bytes[..magic.len()] != magic {
        return Err(Error::corrupt(
            path,
            format!("not a natal {what} (bad magic or truncated)"),
        ));
    }
    let (body, crc) = bytes[magic.len()..].split_at(bytes.len() - magic.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(Error::corrupt(
            path,
            "checksum mismatch (truncated or damaged)",
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_damage() {
        let sealed = seal(b"NATALXX1", b"hello");
        assert_eq!(unseal(b"NATALXX1", "f", &sealed, "x").unwrap(), b"hello");
        assert!(unseal(b"NATALYY1", "f", &sealed, "x").is_err());
        assert!(unseal(b"NATALXX1", "f", &sealed[..sealed.len() - 1], "x").is_err());
        let mut flipped = sealed.clone();
        flipped[9] ^= 1;
        assert!(unseal(b"NATALXX1", "f", &flipped, "x").is_err());
        assert!(unseal(b"NATALXX1", "f", &sealed[..3], "x").is_err());
    }
}
