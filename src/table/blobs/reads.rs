//! Reading parts of blob values by row id (`Snapshot::read_blob_ranges`): the rows'
//! descriptors are taken as a take reads rows, then each sidecar gets one coalesced ranged
//! request for every range asked of it; no whole value is fetched to read part of it. Also
//! where values live (`blob_places`) and how much of each sidecar they use (`blob_sidecars`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::UInt64Type;
use bytes::Bytes;
use futures::TryStreamExt;

use crate::error::{Error, Result};
use crate::format::{BlobKind, DataFile, FieldId, TablePath};
use crate::io::{BlobPlace, BlobReader};
use crate::rowid::{RowAddress, RowId, RowIdSet};
use crate::table::scan_request::ScanRequest;
use crate::table::snapshot::Snapshot;

/// A row of a batch of descriptors, and the bytes asked of its value.
type RowRange = (usize, Range<u64>);

impl Snapshot {
    /// For each `(row id, range)` of `wanted`, bytes `range` of the row's value in the blob
    /// column `column` (a range may cover the whole value: `0..size`). Ranges of one sidecar
    /// are fetched together, in as few requests as the store can merge them into.
    ///
    /// # Errors
    /// A column that is not a blob column, an id with no live row, a range past its value's
    /// end, a NULL value: `InvalidInput`. A sidecar missing or short: `Corrupt`; an external
    /// value that cannot be read: `ExternalBlob`.
    pub async fn read_blob_ranges(
        &self,
        column: &str,
        wanted: &[(RowId, Range<u64>)],
    ) -> Result<Vec<Bytes>> {
        let ids: RowIdSet = wanted.iter().map(|(id, _)| *id).collect();
        let (batches, found) = self.descriptors_of(column, Some(ids), false).await?;
        let field_id = self.blob_field(column)?;
        let mut groups: BTreeMap<(usize, u32), Vec<(usize, RowRange)>> = BTreeMap::new();
        for (at, (id, range)) in wanted.iter().enumerate() {
            let (batch, row, fragment) = *found
                .get(&id.as_u64())
                .ok_or_else(|| Error::invalid(format!("no live row has id {}", id.as_u64())))?;
            groups
                .entry((batch, fragment))
                .or_default()
                .push((at, (row, range.clone())));
        }
        let mut out: Vec<Option<Bytes>> = vec![None; wanted.len()];
        for ((batch, fragment_id), items) in groups {
            let file = self.file_holding(fragment_id, field_id, column)?;
            let asked: Vec<(usize, Range<u64>)> = items.iter().map(|(_, a)| a.clone()).collect();
            let read = self
                .store()
                .read_blob_ranges(file, batches[batch].column(0), &asked)
                .await?;
            for ((at, _), bytes) in items.iter().zip(read) {
                out[*at] = Some(bytes);
            }
        }
        out.into_iter()
            .map(|bytes| bytes.ok_or_else(|| Error::internal("a blob range went unread")))
            .collect()
    }

    /// The value of the blob column `column` at the row `row_id`, as a file: tokio
    /// `AsyncRead + AsyncSeek` with its size, each read fetching only the bytes it asks for.
    ///
    /// # Errors
    /// As [`Self::read_blob_ranges`].
    pub async fn blob(&self, column: &str, row_id: RowId) -> Result<BlobReader> {
        let ids: RowIdSet = std::iter::once(row_id).collect();
        let (batches, found) = self.descriptors_of(column, Some(ids), false).await?;
        let field_id = self.blob_field(column)?;
        let (batch, row, fragment) = *found
            .get(&row_id.as_u64())
            .ok_or_else(|| Error::invalid(format!("no live row has id {}", row_id.as_u64())))?;
        let file = self.file_holding(fragment, field_id, column)?;
        self.store()
            .blob_reader(file, batches[batch].column(0), row)
            .await
    }

    /// Where every value of the blob column `column` lives, by row id (`t$blobs`); from
    /// descriptors alone, no payload read.
    pub async fn blob_places(&self, column: &str) -> Result<Vec<(RowId, BlobPlace)>> {
        let (batches, found) = self.descriptors_of(column, None, true).await?;
        let field_id = self.blob_field(column)?;
        let mut by_row: HashMap<(usize, usize), u64> = HashMap::new();
        for (id, (batch, row, _)) in &found {
            by_row.insert((*batch, *row), *id);
        }
        let mut out = Vec::with_capacity(found.len());
        for (at, batch) in batches.iter().enumerate() {
            let addrs = batch.column(2).as_primitive::<UInt64Type>();
            // A batch is read from one fragment's rows, but nothing says so: runs of rows
            // of one fragment are described by that fragment's file.
            let mut start = 0;
            while start < batch.num_rows() {
                let fragment = RowAddress::from_u64(addrs.value(start)).fragment_id();
                let mut end = start + 1;
                while end < batch.num_rows()
                    && RowAddress::from_u64(addrs.value(end)).fragment_id() == fragment
                {
                    end += 1;
                }
                let run = batch.column(0).slice(start, end - start);
                // A fragment written before the column holds no file of it: all NULL.
                let places = match self.file_holding(fragment, field_id, column) {
                    Ok(file) => self.store().blob_places(file, &run)?,
                    Err(_) => vec![BlobPlace::default(); run.len()],
                };
                for (offset, place) in places.into_iter().enumerate() {
                    let id = by_row
                        .get(&(at, start + offset))
                        .ok_or_else(|| Error::internal("a described row has no id"))?;
                    out.push((RowId::from_u64(*id), place));
                }
                start = end;
            }
        }
        out.sort_by_key(|(id, _)| id.as_u64());
        Ok(out)
    }

    /// Every blob sidecar this version's data files hold values in — their own, and those
    /// their reuse indexes name — with how many bytes of it live rows use (`t$blob_sidecars`).
    /// One listing of the table's `data/`, then descriptors alone.
    pub async fn blob_sidecars(&self) -> Result<Vec<SidecarUsage>> {
        let files = self.manifest().fragments.iter().flat_map(|f| &f.files);
        let mut stems = HashSet::new();
        let mut named = HashSet::new();
        for file in files {
            stems.insert(TablePath::sidecar_dir(&file.path).as_str().to_string());
            let sources = file.blob_reuse_index.iter().flat_map(|i| i.sources());
            for local in sources.flat_map(|s| &s.local_ids) {
                named.insert(file.sidecar(*local).as_str().to_string());
            }
        }
        let mut usage: BTreeMap<String, SidecarUsage> = BTreeMap::new();
        for (path, size) in self.store().list_sidecars().await? {
            let stem = path.rsplit_once('/').map_or("", |(stem, _)| stem);
            if stems.contains(stem) || named.contains(&path) {
                let sidecar = TablePath::parse(&path)?;
                let object = self.store().path(&sidecar).to_string();
                let row = SidecarUsage {
                    path,
                    size,
                    live_values: 0,
                    live_bytes: 0,
                };
                usage.insert(object, row);
            }
        }
        for field in self.schema().fields.iter().filter(|f| f.blob.is_some()) {
            for (_, place) in self.blob_places(&field.name).await? {
                let in_sidecar = matches!(place.kind, Some(BlobKind::Packed | BlobKind::Dedicated));
                let found = place.object.as_ref().and_then(|o| usage.get_mut(o));
                if let (true, Some(row)) = (in_sidecar, found) {
                    row.live_values += 1;
                    row.live_bytes += place.size.unwrap_or(0);
                }
            }
        }
        Ok(usage.into_values().collect())
    }

    /// The field id of the blob column `column`.
    fn blob_field(&self, column: &str) -> Result<FieldId> {
        self.schema()
            .field_by_name(column)
            .filter(|f| f.blob.is_some())
            .map(|f| f.id)
            .ok_or_else(|| Error::invalid(format!("{column} is not a blob column")))
    }

    /// The descriptors of the blob column `column` at the rows `ids` (`None`: every live
    /// row), with `_rowid` and `_rowaddr` (`lean`: without inline bytes); and where each
    /// id's descriptor is: its batch, row and fragment.
    async fn descriptors_of(
        &self,
        column: &str,
        ids: Option<RowIdSet>,
        lean: bool,
    ) -> Result<(Vec<RecordBatch>, HashMap<u64, (usize, usize, u32)>)> {
        self.blob_field(column)?;
        let request = ScanRequest {
            columns: Some(vec![column.to_string()]),
            with_row_id: true,
            with_row_addr: true,
            row_ids: ids,
            blob_descriptors: true,
            lean_blob_descriptors: lean,
            ..Default::default()
        };
        let batches: Vec<RecordBatch> = self.scan(request).await?.try_collect().await?;
        let mut found: HashMap<u64, (usize, usize, u32)> = HashMap::new();
        for (at, batch) in batches.iter().enumerate() {
            let ids = batch.column(1).as_primitive::<UInt64Type>();
            let addrs = batch.column(2).as_primitive::<UInt64Type>();
            for row in 0..batch.num_rows() {
                let fragment = RowAddress::from_u64(addrs.value(row)).fragment_id();
                found.insert(ids.value(row), (at, row, fragment));
            }
        }
        Ok((batches, found))
    }

    /// The data file of fragment `fragment_id` holding the field `field_id` (the column
    /// `column`): its sidecars hold the column's values.
    fn file_holding(&self, fragment_id: u32, field_id: FieldId, column: &str) -> Result<&DataFile> {
        let fragment = self
            .manifest()
            .fragments
            .iter()
            .find(|f| f.id == fragment_id)
            .ok_or_else(|| Error::internal("a row's fragment is not in its version"))?;
        fragment
            .file_holding(field_id)
            .map(|i| &fragment.files[i])
            .ok_or_else(|| Error::invalid(format!("the row's {column} is NULL")))
    }
}

/// A blob sidecar a version's values are in, and how much of it they use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarUsage {
    /// Its table-relative path (`data/<stem>/<id>.blob`).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Live values in it.
    pub live_values: u64,
    /// Their bytes.
    pub live_bytes: u64,
}

impl SidecarUsage {
    /// Bytes no live value uses: what a repack reclaims.
    pub fn dead_bytes(&self) -> u64 {
        self.size.saturating_sub(self.live_bytes)
    }
}
