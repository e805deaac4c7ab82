//! Reading a fragment whose columns lie in several data files (a column added with values
//! writes its own file beside the fragment's first): each file streams the same rows, cut
//! into batches where its own row groups end, and the streams are zipped batch by batch, so
//! a wide scan of such a fragment holds a batch per file, never the fragment.

use arrow::array::RecordBatch;
use futures::stream::{self, BoxStream};
use futures::StreamExt;

use crate::error::{Error, Result};

/// One file's stream and the rows of its last batch not yet handed on.
struct Source {
    batches: BoxStream<'static, Result<RecordBatch>>,
    pending: Option<RecordBatch>,
    path: String,
}

/// Zips `files` (each a stream of the same rows, with its path) into batches of the same
/// rows: per output batch, each file's columns, in the order of `files`. A file that ends
/// before another is damage: the fragment's files disagree on how many rows it has.
pub(super) fn zip_files(
    files: Vec<(String, BoxStream<'static, Result<RecordBatch>>)>,
) -> BoxStream<'static, Result<Vec<RecordBatch>>> {
    let sources: Vec<Source> = files
        .into_iter()
        .map(|(path, batches)| Source {
            batches,
            pending: None,
            path,
        })
        .collect();
    stream::try_unfold(sources, |mut sources| async move {
        for source in sources.iter_mut() {
            while source.pending.as_ref().is_none_or(|b| b.num_rows() == 0) {
                match source.batches.next().await {
                    Some(batch) => source.pending = Some(batch?),
                    None => {
                        source.pending = None;
                        break;
                    }
                }
            }
        }
        let ended = sources.iter().filter(|s| s.pending.is_none()).count();
        if ended == sources.len() {
            return Ok(None);
        }
        if ended > 0 {
            let short = sources.iter().find(|s| s.pending.is_none());
            let path = short.map_or("data file", |s| s.path.as_str());
            return Err(Error::corrupt(
                path,
                "holds fewer rows than the fragment's other files",
            ));
        }
        let rows = sources
            .iter()
            .filter_map(|s| s.pending.as_ref().map(RecordBatch::num_rows))
            .min()
            .unwrap_or(0);
        let mut out = Vec::with_capacity(sources.len());
        for source in sources.iter_mut() {
            if let Some(batch) = source.pending.take() {
                out.push(batch.slice(0, rows));
                source.pending = Some(batch.slice(rows, batch.num_rows() - rows));
            }
        }
        Ok(Some((out, sources)))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batches(cuts: &[std::ops::Range<i32>]) -> BoxStream<'static, Result<RecordBatch>> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
        let batches: Vec<Result<RecordBatch>> = cuts
            .iter()
            .map(|r| {
                let values = Int32Array::from_iter_values(r.clone());
                Ok(RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(values)],
                )?)
            })
            .collect();
        stream::iter(batches).boxed()
    }

    fn values(batch: &RecordBatch) -> Vec<i32> {
        let column = batch.column(0).as_any().downcast_ref::<Int32Array>();
        column.map(|c| c.values().to_vec()).unwrap_or_default()
    }

    #[tokio::test]
    async fn batches_cut_apart_are_zipped_row_by_row() -> Result<()> {
        let zipped: Vec<Vec<RecordBatch>> = zip_files(vec![
            ("a".into(), batches(&[0..3, 3..10])),
            ("b".into(), batches(&[0..5, 5..5, 5..10])),
        ])
        .map(|b| b.map_err(|e| e.to_string()))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<std::result::Result<_, _>>()
        .map_err(Error::invalid)?;
        let sizes: Vec<usize> = zipped.iter().map(|b| b[0].num_rows()).collect();
        assert_eq!(sizes, vec![3, 2, 5]);
        for pair in &zipped {
            assert_eq!(values(&pair[0]), values(&pair[1]));
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_file_short_of_rows_is_corrupt() {
        let mut zipped = zip_files(vec![
            ("a".into(), batches(&[0..6, 6..10])),
            ("b.parquet".into(), batches(&[0..2, 2..4])),
        ]);
        let mut error = None;
        while let Some(next) = zipped.next().await {
            if let Err(e) = next {
                error = Some(e);
                break;
            }
        }
        assert!(matches!(&error, Some(Error::Corrupt { .. })), "{error:?}");
        assert!(error.is_some_and(|e| e.to_string().contains("b.parquet")));
    }
}
