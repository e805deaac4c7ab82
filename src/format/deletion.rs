//! The bytes of a deletion file: a fragment's deleted offsets as a roaring bitmap,
//! `b"NATALDV1" | roaring portable serialization | crc32 of it as u32 LE`. Offsets are row
//! offsets within the fragment (u32), never row ids.

use roaring::RoaringBitmap;

use super::envelope::{seal, unseal};
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"NATALDV1";

/// The file bytes of `bitmap`.
pub fn encode_deletions(bitmap: &RoaringBitmap) -> Vec<u8> {
    let mut body = Vec::with_capacity(bitmap.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = bitmap.serialize_into(&mut body);
    seal(MAGIC, &body)
}

/// # Errors
/// [`Error::Corrupt`] for bad magic, checksum or bitmap, or offsets beyond the fragment.
pub fn decode_deletions(path: &str, bytes: &[u8], physical_rows: u32) -> Result<RoaringBitmap> {
    let body = unseal(MAGIC, path, bytes, "deletion file")?;
    let bitmap = RoaringBitmap::deserialize_from(body)
        .map_err(|e| Error::corrupt(path, format!("undecodable bitmap: {e}")))?;
    if bitmap.max().is_some_and(|max| max >= physical_rows) {
        return Err(Error::corrupt(
            path,
            "deletes offsets beyond the fragment's rows",
        ));
    }
    Ok(bitmap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let bitmap: RoaringBitmap = [1u32, 5, 900].into_iter().collect();
        let bytes = encode_deletions(&bitmap);
        assert_eq!(decode_deletions("x", &bytes, 1000).unwrap(), bitmap);
        assert!(matches!(
            decode_deletions("x", &bytes, 900),
            Err(Error::Corrupt { .. })
        ));
        for cut in 0..bytes.len() {
            assert!(matches!(
                decode_deletions("x", &bytes[..cut], 1000),
                Err(Error::Corrupt { .. })
            ));
        }
        let mut flipped = bytes.clone();
        flipped[10] ^= 0x40;
        assert!(matches!(
            decode_deletions("x", &flipped, 1000),
            Err(Error::Corrupt { .. })
        ));
    }
}
