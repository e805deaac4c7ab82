//! Fetching parts of many objects (blob sidecars, external objects): each object asked once
//! for all of its parts, a few objects at a time, the answers put back in the order asked.

use std::collections::HashMap;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};

/// Objects fetched at once.
const CONCURRENT_OBJECT_READS: usize = 8;

/// The bytes of each `(object, part)` of `wanted`, in order: `fetch` is asked once per
/// object for all of its parts (one coalesced request), a few objects at a time, and
/// answers them in the order given.
pub(super) async fn fetch_grouped<K, P, F, Fut>(wanted: Vec<(K, P)>, fetch: F) -> Result<Vec<Bytes>>
where
    K: std::hash::Hash + Eq,
    F: Fn(K, Vec<P>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Bytes>>>,
{
    let mut out = vec![Bytes::new(); wanted.len()];
    let mut by_object: HashMap<K, (Vec<usize>, Vec<P>)> = HashMap::new();
    for (at, (object, part)) in wanted.into_iter().enumerate() {
        let (places, parts) = by_object.entry(object).or_default();
        places.push(at);
        parts.push(part);
    }
    let fetch = &fetch;
    let fetched: Vec<(Vec<usize>, Vec<Bytes>)> = futures::stream::iter(by_object)
        .map(|(object, (places, parts))| async move {
            Ok::<_, Error>((places, fetch(object, parts).await?))
        })
        .buffer_unordered(CONCURRENT_OBJECT_READS)
        .try_collect()
        .await?;
    for (places, parts) in fetched {
        for (at, bytes) in places.into_iter().zip(parts) {
            out[at] = bytes;
        }
    }
    Ok(out)
}
