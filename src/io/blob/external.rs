//! External blob values (seed 003's fourth kind): bytes that stay at a URI the user gives,
//! which natal reads through the stores of the handle's session and never copies or deletes.
//!
//! A write learns that a value is external from the value itself: [`external_blob`] returns
//! a *reference* — a marker, the URI and range, and a tag keyed by a secret this process
//! drew at random — that a blob column's writer stores as an External descriptor. The tag is
//! what keeps a payload that happens to (or is made to) look like a reference from being
//! taken for one: without the process's secret no one can make a reference it accepts, so an
//! uploaded file is always stored as the bytes it is. A reference is therefore good for
//! writes by the process that made it (SQL's `natal_external_blob`, Rust's
//! [`external_blob`]); anywhere else it is only bytes.

use std::hash::{BuildHasher, RandomState};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use object_store::path::Path;
use object_store::registry::ObjectStoreRegistry;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{Error, Result};

/// How a reference starts.
const MARKER: &[u8; 16] = b"natal:ext-blob\0\x01";
/// Marker, tag, position and size, before the URI.
const HEADER: usize = MARKER.len() + 16 + 8 + 8;

/// The process's secret: two SipHash keys drawn at random when first asked.
pub(in crate::io) fn secret() -> &'static [RandomState; 2] {
    static SECRET: OnceLock<[RandomState; 2]> = OnceLock::new();
    SECRET.get_or_init(|| [RandomState::new(), RandomState::new()])
}

fn tag(position: u64, size: u64, uri: &str) -> [u8; 16] {
    let [first, second] = secret();
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&first.hash_one((position, size, uri)).to_le_bytes());
    out[8..].copy_from_slice(&second.hash_one((uri, size, position)).to_le_bytes());
    out
}

/// A value that, written to a blob column by this process, stores an External descriptor:
/// the object at `uri` (bytes `range` of it; `None`, the whole object), read through the
/// stores of the handle that reads it (a DataFusion session's registered stores), never
/// copied. `uri` must be an absolute URL (`s3://bucket/key`, `file:///path`); a zero-length
/// range is refused (a zero size is how a descriptor says "the whole object").
pub fn external_blob(uri: &str, range: Option<Range<u64>>) -> Result<Vec<u8>> {
    let url = url::Url::parse(uri)
        .map_err(|e| Error::invalid(format!("external blob URI '{uri}' is not a URL: {e}")))?;
    if url.cannot_be_a_base() {
        return Err(Error::invalid(format!(
            "external blob URI '{uri}' names no object (a URL such as s3://bucket/key)"
        )));
    }
    let (position, size) = match range {
        None => (0, 0),
        Some(r) if r.end > r.start => (r.start, r.end - r.start),
        Some(r) => {
            return Err(Error::invalid(format!(
                "external blob range {r:?} of '{uri}' is empty or reversed"
            )))
        }
    };
    let mut out = Vec::with_capacity(HEADER + uri.len());
    out.extend_from_slice(MARKER);
    out.extend_from_slice(&tag(position, size, uri));
    out.extend_from_slice(&position.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(uri.as_bytes());
    Ok(out)
}

/// What a reference made by [`external_blob`] in this process says: URI, position and size
/// (0: the whole object). Anything else — other bytes, a forged or foreign tag — is `None`.
pub(crate) fn external_reference(value: &[u8]) -> Option<(&str, u64, u64)> {
    if value.len() <= HEADER || !value.starts_with(MARKER) {
        return None;
    }
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(value.get(at..at + 8)?.try_into().ok()?))
    };
    let position = word(MARKER.len() + 16)?;
    let size = word(MARKER.len() + 24)?;
    let uri = std::str::from_utf8(&value[HEADER..]).ok()?;
    (value[MARKER.len()..MARKER.len() + 16] == tag(position, size, uri))
        .then_some((uri, position, size))
}

/// The bytes of each `(uri, range)` of `wanted` (`None`: the whole object), in order, read
/// through `stores`: every range of one object in one coalesced request, a few objects at a
/// time. A store not registered, an object missing or shorter than a range: an
/// [`Error::ExternalBlob`] naming the URI.
pub(crate) async fn read_external(
    stores: Option<&Arc<dyn ObjectStoreRegistry>>,
    wanted: Vec<(String, Option<Range<u64>>)>,
) -> Result<Vec<Bytes>> {
    crate::io::fetch_grouped::fetch_grouped(wanted, |uri, ranges| async move {
        read_object(stores, &uri, ranges).await
    })
    .await
}

/// The store holding the external object at `uri`, and its path there.
pub(crate) fn resolve_external(
    stores: Option<&Arc<dyn ObjectStoreRegistry>>,
    uri: &str,
) -> Result<(Arc<dyn ObjectStore>, Path)> {
    let failed = |reason: String| Error::ExternalBlob {
        uri: uri.to_string(),
        reason,
    };
    let stores = stores.ok_or_else(|| {
        failed("this table handle has no stores for external blobs (open it with TableOptions::external_stores, or read it through a DataFusion session)".into())
    })?;
    let url = url::Url::parse(uri).map_err(|e| failed(format!("not a URL: {e}")))?;
    stores
        .resolve(&url)
        .map_err(|e| failed(format!("no store is registered for it: {e}")))
}

/// The failure to read the external object at `uri`, as `ExternalBlob` naming it.
pub(crate) fn reading(uri: &str) -> impl Fn(object_store::Error) -> Error + '_ {
    move |e| Error::ExternalBlob {
        uri: uri.to_string(),
        reason: match e {
            object_store::Error::NotFound { .. } => "the object is not there".into(),
            other => other.to_string(),
        },
    }
}

/// `ranges` (`None`: the whole object) of the external object at `uri`, in order.
async fn read_object(
    stores: Option<&Arc<dyn ObjectStoreRegistry>>,
    uri: &str,
    ranges: Vec<Option<Range<u64>>>,
) -> Result<Vec<Bytes>> {
    let (store, path) = resolve_external(stores, uri)?;
    let reading = reading(uri);
    if ranges.iter().any(Option::is_none) {
        let whole = store
            .get(&path)
            .await
            .map_err(&reading)?
            .bytes()
            .await
            .map_err(&reading)?;
        return ranges
            .into_iter()
            .map(|range| match range {
                None => Ok(whole.clone()),
                Some(r) => slice(&whole, r).ok_or_else(|| short(uri, whole.len() as u64)),
            })
            .collect();
    }
    let ranges: Vec<Range<u64>> = ranges.into_iter().flatten().collect();
    let got = match store.get_ranges(&path, &ranges).await {
        Ok(got) => got,
        Err(e @ object_store::Error::NotFound { .. }) => return Err(reading(e)),
        Err(e) => {
            let size = store.head(&path).await.map_err(&reading)?.size;
            if ranges.iter().any(|r| r.end > size) {
                return Err(short(uri, size));
            }
            return Err(reading(e));
        }
    };
    got.into_iter()
        .zip(&ranges)
        .map(
            |(bytes, range)| match bytes.len() as u64 == range.end - range.start {
                true => Ok(bytes),
                false => Err(short(uri, range.start + bytes.len() as u64)),
            },
        )
        .collect()
}

fn slice(whole: &Bytes, range: Range<u64>) -> Option<Bytes> {
    let end = usize::try_from(range.end).ok()?;
    (end <= whole.len()).then(|| whole.slice(range.start as usize..end))
}

fn short(uri: &str, size: u64) -> Error {
    Error::ExternalBlob {
        uri: uri.to_string(),
        reason: format!("the object ends at byte {size}, before the bytes its descriptor names"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_back_and_other_bytes_never_pass_for_one() {
        let made = external_blob("s3://bucket/x.jpg", Some(10..20)).unwrap();
        assert_eq!(
            external_reference(&made),
            Some(("s3://bucket/x.jpg", 10, 10))
        );
        let whole = external_blob("file:///data/a.bin", None).unwrap();
        assert_eq!(
            external_reference(&whole),
            Some(("file:///data/a.bin", 0, 0))
        );
        // A payload shaped like a reference, its URI or range changed, or its tag guessed:
        // bytes, not a reference.
        let mut other_uri = made.clone();
        *other_uri.last_mut().unwrap() = b'h';
        let mut other_range = made.clone();
        other_range[HEADER - 1] ^= 1;
        let mut forged = made.clone();
        forged[MARKER.len()] ^= 1;
        for bytes in [
            other_uri,
            other_range,
            forged,
            MARKER.to_vec(),
            made[..HEADER].to_vec(),
        ] {
            assert_eq!(external_reference(&bytes), None);
        }
        for bad in ["not a url", "mailto:someone", ""] {
            assert!(external_blob(bad, None).is_err(), "{bad}");
        }
        assert!(external_blob("s3://b/x", Some(5..5)).is_err());
    }
}
