//! One blob value as a file: [`BlobReader`] is tokio `AsyncRead + AsyncSeek` over the value's
//! bytes wherever they are, fetching only what each read asks for — one ranged request per
//! read call, never the whole object of a packed value — and [`BlobPlace`], where a value's
//! bytes live (what `t$blobs` lists).

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use arrow::array::{ArrayRef, AsArray};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::ObjectStoreExt;
use tokio::io::{AsyncRead, AsyncSeek, ReadBuf};

use super::external::{read_external, reading, resolve_external};
use super::sidecars::{inline_value, read_sidecar_ranges, BlobLocation, Descriptors};
use crate::error::{Error, Result};
use crate::format::{blob_descriptor, BlobKind, DataFile, TablePath};
use crate::io::TableStore;

/// Where one blob value's bytes live (the default: a NULL value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlobPlace {
    /// Its kind; `None` for a NULL value.
    pub kind: Option<BlobKind>,
    /// Its size in bytes; `None` for NULL, or an external value that is a whole object
    /// (its size is the object's, known to its store).
    pub size: Option<u64>,
    /// The object holding the bytes: the data file (inline), the sidecar (packed,
    /// dedicated) as its path in the table's store, or the external value's URI.
    pub object: Option<String>,
    /// The bytes of `object` the value is; `None` for inline values (inside a Parquet page)
    /// and whole external objects.
    pub range: Option<Range<u64>>,
}

impl TableStore {
    /// Where the value at each row of `descriptors` (a blob column as the data file
    /// `data_file` holds it) lives.
    pub fn blob_places(&self, file: &DataFile, descriptors: &ArrayRef) -> Result<Vec<BlobPlace>> {
        let data_file = &file.path;
        let described = Descriptors::of(descriptors, file)?;
        (0..described.len())
            .map(|row| {
                let kind = described.kind(row)?;
                Ok(match described.location(row)? {
                    BlobLocation::Null => BlobPlace {
                        kind,
                        size: None,
                        object: None,
                        range: None,
                    },
                    BlobLocation::Inline => BlobPlace {
                        kind,
                        size: Some(described.size(row)),
                        object: Some(self.path(data_file).to_string()),
                        range: None,
                    },
                    BlobLocation::Sidecar { sidecar, range } => BlobPlace {
                        kind,
                        size: Some(range.end - range.start),
                        object: Some(self.path(&sidecar).to_string()),
                        range: Some(range),
                    },
                    BlobLocation::External { uri, range } => BlobPlace {
                        kind,
                        size: range.as_ref().map(|r| r.end - r.start),
                        object: Some(uri),
                        range,
                    },
                })
            })
            .collect()
    }

    /// A reader of the value at `row` of `descriptors` (a blob column as the data file
    /// `data_file` holds it). An external whole object's size is asked of its store here.
    pub async fn blob_reader(
        &self,
        file: &DataFile,
        descriptors: &ArrayRef,
        row: usize,
    ) -> Result<BlobReader> {
        let data_file = &file.path;
        let described = Descriptors::of(descriptors, file)?;
        if row >= described.len() {
            return Err(Error::invalid(format!("no row {row} of a blob column")));
        }
        let (source, size) = match described.location(row)? {
            BlobLocation::Null => return Err(Error::invalid("the blob value asked for is NULL")),
            BlobLocation::Inline => {
                let inline = descriptors.as_struct().column(blob_descriptor::INLINE);
                let bytes = Bytes::copy_from_slice(inline_value(inline, row, data_file)?);
                let size = bytes.len() as u64;
                (Source::Inline(bytes), size)
            }
            BlobLocation::Sidecar { sidecar, range } => (
                Source::Sidecar {
                    data_file: data_file.clone(),
                    sidecar,
                    start: range.start,
                },
                range.end - range.start,
            ),
            BlobLocation::External { uri, range } => {
                let (start, size) = match range {
                    Some(range) => (range.start, range.end - range.start),
                    None => (0, self.external_size(&uri).await?),
                };
                (Source::External { uri, start }, size)
            }
        };
        Ok(BlobReader {
            store: self.clone(),
            source,
            size,
            position: 0,
            reading: None,
        })
    }

    /// The size of the external object at `uri`.
    pub(crate) async fn external_size(&self, uri: &str) -> Result<u64> {
        let (store, path) = resolve_external(self.external.as_ref(), uri)?;
        Ok(store.head(&path).await.map_err(reading(uri))?.size)
    }
}

/// Where a reader's bytes come from.
#[derive(Debug, Clone)]
enum Source {
    Inline(Bytes),
    Sidecar {
        data_file: TablePath,
        sidecar: TablePath,
        start: u64,
    },
    External {
        uri: String,
        start: u64,
    },
}

/// One blob value, read like a file: `AsyncRead + AsyncSeek`, with [`BlobReader::size`].
/// Each read call fetches the bytes it asks for (up to the value's end) in one ranged
/// request; seeking is free. Wrap it in a `tokio::io::BufReader` for many small reads.
pub struct BlobReader {
    store: TableStore,
    source: Source,
    size: u64,
    position: u64,
    reading: Option<BoxFuture<'static, Result<Bytes>>>,
}

impl std::fmt::Debug for BlobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobReader")
            .field("source", &self.source)
            .field("size", &self.size)
            .field("position", &self.position)
            .finish()
    }
}

impl BlobReader {
    /// The value's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the next read starts.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The value's bytes `range` (within `0..size`).
    fn fetch(&self, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>> {
        let store = self.store.clone();
        match self.source.clone() {
            Source::Inline(bytes) => {
                let part = bytes.slice(range.start as usize..range.end as usize);
                futures::future::ready(Ok(part)).boxed()
            }
            Source::Sidecar {
                data_file,
                sidecar,
                start,
            } => async move {
                let wanted = start + range.start..start + range.end;
                let mut parts = read_sidecar_ranges(
                    &store,
                    &data_file,
                    &sidecar,
                    std::slice::from_ref(&wanted),
                )
                .await?;
                parts
                    .pop()
                    .ok_or_else(|| Error::internal("a ranged read returned nothing"))
            }
            .boxed(),
            Source::External { uri, start } => async move {
                let wanted = vec![(uri, Some(start + range.start..start + range.end))];
                let mut parts = read_external(store.external.as_ref(), wanted).await?;
                parts
                    .pop()
                    .ok_or_else(|| Error::internal("a ranged read returned nothing"))
            }
            .boxed(),
        }
    }
}

impl AsyncRead for BlobReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.reading.is_none() {
            let left = self.size.saturating_sub(self.position);
            let wanted = left.min(buf.remaining() as u64);
            if wanted == 0 {
                return Poll::Ready(Ok(()));
            }
            let start = self.position;
            self.reading = Some(self.fetch(start..start + wanted));
        }
        let Some(reading) = self.reading.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let fetched = futures::ready!(reading.poll_unpin(cx));
        self.reading = None;
        let bytes = fetched.map_err(io::Error::other)?;
        // A seek between the start of a read and its end is refused (`start_seek`), so the
        // bytes are the ones at `position`.
        let n = bytes.len().min(buf.remaining());
        buf.put_slice(&bytes[..n]);
        self.position += n as u64;
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for BlobReader {
    fn start_seek(mut self: Pin<&mut Self>, to: io::SeekFrom) -> io::Result<()> {
        if self.reading.is_some() {
            return Err(io::Error::other(
                "a blob read is in progress; finish it first",
            ));
        }
        let target = match to {
            io::SeekFrom::Start(at) => Some(at),
            io::SeekFrom::End(delta) => self.size.checked_add_signed(delta),
            io::SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
        };
        self.position = target.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a position before the start of the blob value",
            )
        })?;
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Poll::Ready(Ok(self.position))
    }
}
