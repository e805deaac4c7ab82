//! Fragment segments: a long fragment list is stored as `_fragments/` files of at most
//! [`ManifestLayout::fragments_per_segment`] fragments each, and a manifest names them. A
//! commit writes the segments whose fragments it changed and the last, partly filled one;
//! every other segment is shared with the version before, so the bytes of a commit follow
//! its change rather than the number of fragments history has left behind.
//!
//! Most commits change only deletions, and a fragment's deletions are a few file names
//! beside its data files, statistics and row ids. A segment whose fragments changed only
//! their deletions gets a patch (`_fragments/<first>-<version>.patch`, the whole deletion vector of each
//! fragment that changed since the segment file) instead of a new segment file, while the
//! patch is at most half the segment's size; past that the segment is rewritten.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::store::CONCURRENT_FILE_LOADS;
use super::TableStore;
use crate::error::Result;
use crate::format::{
    apply_segment_patch, decode_fragment_segment, encode_fragment_segment, encode_segment_patch,
    DerivedName, Fragment, FragmentSegment, Manifest, SegmentPatch,
};

/// A stretch of the new fragment list: an old segment that still holds exactly these
/// fragments, an old segment file with a new patch (its encoded bytes and fragment count)
/// laid over, or fragments that need writing.
enum Run {
    Keep {
        segment: FragmentSegment,
        fragments: Range<usize>,
    },
    Patch {
        segment: FragmentSegment,
        fragments: Range<usize>,
        patch: Vec<u8>,
        patched_fragments: u32,
    },
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
        manifest.link_change_data(path)?;
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
        let version = manifest.version;
        let old = std::mem::take(&mut manifest.fragment_segments);
        if manifest.fragments.len() > per_segment {
            let runs = self
                .plan_runs(&manifest.fragments, old, per_segment)
                .await?;
            let mut segments = Vec::new();
            for run in runs {
                match run {
                    Run::Keep { segment, .. } => segments.push(segment),
                    Run::Patch {
                        segment,
                        fragments,
                        patch,
                        patched_fragments,
                    } => {
                        let fragments = &manifest.fragments[fragments];
                        let patch = (patch, patched_fragments);
                        segments.push(
                            self.write_segment_patch(segment, fragments, patch, version)
                                .await?,
                        );
                    }
                    Run::Write(range) => {
                        for chunk in manifest.fragments[range].chunks(per_segment) {
                            segments.push(self.write_fragment_segment(chunk, version).await?);
                        }
                    }
                }
            }
            manifest.fragment_segments = segments;
        }
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
            if unchanged {
                runs.push(Run::Keep {
                    segment,
                    fragments: start..at,
                });
                continue;
            }
            let body = self.read_segment_body(&segment).await?;
            runs.push(match patch_over(&segment, &body, now) {
                // The deletions are back to the segment file's: drop the patch.
                Some((_, 0)) => Run::Keep {
                    segment: FragmentSegment {
                        patch: None,
                        ..segment
                    },
                    fragments: start..at,
                },
                Some((patch, patched_fragments)) => Run::Patch {
                    segment,
                    fragments: start..at,
                    patch,
                    patched_fragments,
                },
                None => Run::Write(start..at),
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
            if let Run::Keep {
                fragments: range, ..
            }
            | Run::Patch {
                fragments: range, ..
            } = &runs[i]
            {
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

    /// Writes `fragments` as a segment of `version`, named for its first fragment.
    async fn write_fragment_segment(
        &self,
        fragments: &[Fragment],
        version: u64,
    ) -> Result<FragmentSegment> {
        let (Some(first), Some(last)) = (fragments.first(), fragments.last()) else {
            return Err(crate::error::Error::internal("an empty fragment segment"));
        };
        let bytes = Bytes::from(encode_fragment_segment(fragments));
        let size_bytes = bytes.len() as u64;
        let path = self
            .put_derived(DerivedName::SEGMENT, first.id, version, bytes)
            .await?;
        let segment = FragmentSegment {
            path,
            first_fragment_id: first.id,
            last_fragment_id: last.id,
            fragment_count: fragments.len() as u32,
            size_bytes,
            patch: None,
        };
        self.segments
            .insert(segment.path.as_str(), Arc::new(fragments.to_vec()));
        Ok(segment)
    }

    /// Writes `bytes` (the patch of `fragments`, `count` of them changed) over `body`'s file,
    /// as a patch of `version`.
    async fn write_segment_patch(
        &self,
        body: FragmentSegment,
        fragments: &[Fragment],
        (bytes, count): (Vec<u8>, u32),
        version: u64,
    ) -> Result<FragmentSegment> {
        let size_bytes = bytes.len() as u64;
        let path = self
            .put_derived(
                DerivedName::PATCH,
                body.first_fragment_id,
                version,
                bytes.into(),
            )
            .await?;
        let patch = SegmentPatch {
            path,
            fragment_count: count,
            size_bytes,
        };
        let segment = FragmentSegment {
            patch: Some(patch),
            ..body
        };
        self.segments
            .insert(&patched_key(&segment), Arc::new(fragments.to_vec()));
        Ok(segment)
    }

    /// A segment's fragments as the manifest means them: its file, with its patch laid over.
    async fn read_fragment_segment(&self, segment: &FragmentSegment) -> Result<Arc<Vec<Fragment>>> {
        let Some(patch) = &segment.patch else {
            return self.read_segment_body(segment).await;
        };
        let key = patched_key(segment);
        let load = async {
            let (body, bytes) = futures::future::try_join(
                self.read_segment_body(segment),
                self.get_sized(&self.path(&patch.path), patch.size_bytes),
            )
            .await?;
            Ok(Arc::new(apply_segment_patch(patch, &bytes, &body)?))
        };
        self.segments.get_or_load(&key, load).await
    }

    /// A segment's fragments as its file holds them, without its patch.
    async fn read_segment_body(&self, segment: &FragmentSegment) -> Result<Arc<Vec<Fragment>>> {
        let load = async {
            let bytes = self
                .get_sized(&self.path(&segment.path), segment.size_bytes)
                .await?;
            let fragments = decode_fragment_segment(segment, &bytes)?;
            Ok(Arc::new(self.resolve_row_ids(fragments).await?))
        };
        self.segments.get_or_load(segment.path.as_str(), load).await
    }
}

/// The cache key of a patched segment's fragments.
fn patched_key(segment: &FragmentSegment) -> String {
    let patch = segment.patch.as_ref().map_or("", |p| p.path.as_str());
    format!("{}+{patch}", segment.path.as_str())
}

/// The patch (bytes, and how many fragments it names) that turns `body`, the fragments of
/// `segment`'s file, into `now`; `None` if more than deletions changed or the patch would be
/// more than half the segment file's size.
fn patch_over(
    segment: &FragmentSegment,
    body: &[Fragment],
    now: &[Fragment],
) -> Option<(Vec<u8>, u32)> {
    if body.len() != now.len()
        || !body
            .iter()
            .zip(now)
            .all(|(b, n)| b.stored_eq_but_deletions(n))
    {
        return None;
    }
    let changed: Vec<&Fragment> = body
        .iter()
        .zip(now)
        .filter(|(b, n)| b.deletion != n.deletion)
        .map(|(_, n)| n)
        .collect();
    let bytes = encode_segment_patch(&changed);
    (bytes.len() as u64 * 2 <= segment.size_bytes).then_some((bytes, changed.len() as u32))
}
