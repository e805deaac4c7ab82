//! [`ObjectFileReader`]: Parquet's `AsyncFileReader` over an object store, reading the footer
//! and page index with one suffix-sized request when the file is small enough.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// Bytes fetched from the end of a file on open: the footer and, usually, the page index.
const FOOTER_PREFETCH: usize = 64 * 1024;

pub(crate) struct ObjectFileReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    file_size: u64,
    /// Adds the bytes of every response (a scan's `bytes_read` metric).
    bytes_read: Option<Arc<AtomicU64>>,
}

impl ObjectFileReader {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        path: Path,
        file_size: u64,
        bytes_read: Option<Arc<AtomicU64>>,
    ) -> Self {
        Self {
            store,
            path,
            file_size,
            bytes_read,
        }
    }

    fn count(&self, bytes: usize) {
        if let Some(counter) = &self.bytes_read {
            counter.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            let bytes = self
                .store
                .get_range(&self.path, range)
                .await
                .map_err(external)?;
            self.count(bytes.len());
            Ok(bytes)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move {
            let parts = self
                .store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)?;
            self.count(parts.iter().map(Bytes::len).sum());
            Ok(parts)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move {
            let mut reader = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_prefetch_hint(Some(FOOTER_PREFETCH));
            if let Some(options) = options {
                reader = reader
                    .with_column_index_policy(options.column_index_policy())
                    .with_offset_index_policy(options.offset_index_policy());
            }
            let file_size = self.file_size;
            Ok(Arc::new(reader.load_and_finish(self, file_size).await?))
        }
        .boxed()
    }
}
