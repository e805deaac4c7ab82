//! Fragment segments: a long fragment list is stored as `_fragments/` files of at most
//! [`ManifestLayout::fragments_per_segment`] fragments each, and a manifest names them. A
//! commit writes the segments whose fragments it changed and the last, partly filled one;
//! every other segment is shared with the version before, so the bytes of a commit follow
//! its change rather than the number of fragments history has left behind.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::store::CONCURRENT_FILE_LOADS;
use super::TableStore;
use crate::error::Result;
use crate::format::{
    decode_fragment_segment, encode_fragment_segment, Fragment, FragmentSegment, Manifest,
    TablePath,
};

/// A stretch of the new fragment list: an old segment that still holds exactly these
/// fragments, or fragments that need writing.
enum Run {
    Keep(FragmentSegment, Range<usize>),
    Write(Range<usize>),
}

impl TableStore {
    /// Fills `manifest.fragments` from its segment files and validates the result.
    pub(crate) async fn load_fragment_segments(
        &self,
        manifest: &mut Manifest,
        path: &str,
    ) -> Result<()> {
        if manifest.fragment_segments.is_empty() {
            return Ok(());
        }
        let segments: Vec<Arc<Vec<Fragment>>> =
            futures::stream::iter(manifest.fragment_segments.clone())
                .map(|segment| async move { self.read_fragment_segment(&segment).await })
                .buffered(CONCURRENT_FILE_LOADS)
                .try_collect()
                .await?;
        manifest.fragments = segments.iter().flat_map(|s| s.iter().cloned()).collect();
        manifest.validate(path)
    }

    /// Chooses the segments of `manifest.fragments`, reusing every old segment whose
    /// fragments are unchanged and writing the rest.
    pub(crate) async fn store_fragment_segments(
        &self,
        manifest: &mut Manifest,
        per_segment: usize,
    ) -> Result<()> {
        let per_segment = per_segment.max(1);
        let old = std::mem::take(&mut manifest.fragment_segments);
        if manifest.fragments.len() > per_segment {
            let runs = self
                .plan_runs(&manifest.fragments, old, per_segment)
                .await?;
            let mut segments = Vec::new();
            for run in runs {
                match run {
                    Run::Keep(segment, _) => segments.push(segment),
                    Run::Write(range) => {
                        for chunk in manifest.fragments[range].chunks(per_segment) {
                            segments.push(self.write_fragment_segment(chunk).await?);
                        }
                    }
                }
            }
            manifest.fragment_segments = segments;
        }
        manifest.refresh_flags();
        Ok(())
    }

    async fn plan_runs(
        &self,
        fragments: &[Fragment],
        old: Vec<FragmentSegment>,
        per_segment: usize,
    ) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        let mut at = 0;
        for segment in old {
            let start = at;
            while at < fragments.len() && fragments[at].id <= segment.last_fragment_id {
                at += 1;
            }
            if start == at {
                continue;
            }
            let stored = self.read_fragment_segment(&segment).await?;
            let now = &fragments[start..at];
            let unchanged =
                stored.len() == now.len() && stored.iter().zip(now).all(|(s, n)| s.stored_eq(n));
            runs.push(if unchanged {
                Run::Keep(segment, start..at)
            } else {
                Run::Write(start..at)
            });
        }
        if at < fragments.len() {
            runs.push(Run::Write(at..fragments.len()));
        }
        // A kept segment less than half full next to one being written is folded into it,
        // so segments fill up (the last one takes new fragments) instead of multiplying.
        for i in 0..runs.len() {
            let beside_write = |j: Option<usize>| {
                j.and_then(|j| runs.get(j))
                    .is_some_and(|r| matches!(r, Run::Write(_)))
            };
            if let Run::Keep(_, range) = &runs[i] {
                if range.len() * 2 < per_segment
                    && (beside_write(i.checked_sub(1)) || beside_write(Some(i + 1)))
                {
                    runs[i] = Run::Write(range.clone());
                }
            }
        }
        let mut merged: Vec<Run> = Vec::new();
        for run in runs {
            match (merged.last_mut(), run) {
                (Some(Run::Write(last)), Run::Write(next)) => last.end = next.end,
                (_, run) => merged.push(run),
            }
        }
        Ok(merged)
    }

    async fn write_fragment_segment(&self, fragments: &[Fragment]) -> Result<FragmentSegment> {
        let (Some(first), Some(last)) = (fragments.first(), fragments.last()) else {
            return Err(crate::Error::invalid("an empty fragment segment"));
        };
        let path = TablePath::parse(&format!("_fragments/{}.bin", uuid::Uuid::new_v4()))?;
        let bytes = Bytes::from(encode_fragment_segment(fragments));
        let segment = FragmentSegment {
            path,
            first_fragment_id: first.id,
            last_fragment_id: last.id,
            fragment_count: fragments.len() as u32,
            size_bytes: bytes.len() as u64,
        };
        self.put(&self.path(&segment.path), bytes).await?;
        self.segments
            .insert(segment.path.as_str(), Arc::new(fragments.to_vec()));
        Ok(segment)
    }

    async fn read_fragment_segment(&self, segment: &FragmentSegment) -> Result<Arc<Vec<Fragment>>> {
        if let Some(fragments) = self.segments.get(segment.path.as_str()) {
            return Ok(fragments);
        }
        let bytes = self.get(&self.path(&segment.path)).await?;
        let fragments = Arc::new(decode_fragment_segment(segment, &bytes)?);
        self.segments
            .insert(segment.path.as_str(), fragments.clone());
        Ok(fragments)
    }
}
