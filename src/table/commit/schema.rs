//! Applying a schema change, and carrying other actions' new fragments across one: a
//! widened column's statistics are converted where the wider type counts otherwise
//! (`format::widen_stat`), so every fragment of a version speaks its schema's types.

use super::NewFragment;
use crate::error::{Error, Result};
use crate::format::{widen_stat, DataFile, Manifest, Schema};
use crate::rowid::FragmentId;

/// Puts `to` in place of `from` in `m`: widened columns' statistics converted, the indexes
/// of dropped columns removed. A widened column must have no index (its keys are of the
/// old type).
pub(super) fn alter_schema(m: &mut Manifest, from: &Schema, to: &Schema) -> Result<()> {
    for field in &from.fields {
        let index = m.indexes.segments.iter().find(|s| s.field_id == field.id);
        if let (Some(now), Some(index)) = (to.field_by_id(field.id), index) {
            if now.data_type != field.data_type {
                return Err(Error::SchemaChange {
                    change: format!(
                        "ALTER COLUMN {} SET DATA TYPE {}",
                        field.name, now.data_type
                    ),
                    reason: format!(
                        "index {} is on the column: drop it first (natal_drop_index)",
                        index.name
                    ),
                });
            }
        }
        if to.field_by_id(field.id).is_none() {
            let names: Vec<String> = m
                .indexes
                .segments
                .iter()
                .filter(|s| s.field_id == field.id)
                .map(|s| s.name.clone())
                .collect();
            for name in names {
                m.indexes.remove(&name);
            }
        }
    }
    for fragment in &mut m.fragments {
        widen_file_stats(&mut fragment.files, from, to);
    }
    m.schema = to.clone();
    Ok(())
}

/// Puts each column file beside the files of its fragment, which must still hold the rows
/// it was computed for (the rebase rules refuse a version that rewrote or added any).
pub(super) fn attach_column_files(
    m: &mut Manifest,
    column_files: &[(FragmentId, DataFile)],
) -> Result<()> {
    for (fragment_id, file) in column_files {
        // Fragments are kept sorted by id.
        let at = m
            .fragments
            .binary_search_by_key(fragment_id, |f| f.id)
            .map_err(|_| Error::internal(format!("fragment {fragment_id} is gone")))?;
        let fragment = &mut m.fragments[at];
        if file.row_count != u64::from(fragment.physical_rows) {
            return Err(Error::internal(format!(
                "column file for fragment {fragment_id} has {} rows, the fragment {}",
                file.row_count, fragment.physical_rows
            )));
        }
        fragment.files.push(file.clone());
    }
    Ok(())
}

/// A column `next` added with values over `prev`, if it added one: new in its schema, and
/// held by a file of one of its fragments.
pub(super) fn added_with_values<'a>(prev: &Manifest, next: &'a Manifest) -> Option<&'a str> {
    next.schema
        .fields
        .iter()
        .filter(|f| prev.schema.field_by_id(f.id).is_none())
        .find(|f| {
            next.fragments
                .iter()
                .any(|g| g.file_holding(f.id).is_some())
        })
        .map(|f| f.name.as_str())
}

/// Why column values computed from `prev`'s rows cannot join `next`, if they cannot: rows
/// were added or rewritten meanwhile (they have no value computed), or a fragment given a
/// value file is gone. Deletions alone leave every computed value in place.
pub(super) fn rows_changed_under_values(prev: &Manifest, next: &Manifest) -> Option<String> {
    let same_rows = |a: &crate::format::Fragment, b: &crate::format::Fragment| {
        a.files == b.files && a.physical_rows == b.physical_rows && a.patches == b.patches
    };
    if let Some(new) = next
        .fragments
        .iter()
        .find(|f| prev.fragment(f.id).is_none_or(|p| !same_rows(p, f)))
    {
        return Some(format!(
            "fragment {} was written or patched meanwhile: its rows have no value computed",
            new.id
        ));
    }
    prev.fragments
        .iter()
        .find(|f| next.fragment(f.id).is_none())
        .map(|gone| format!("fragment {} was rewritten meanwhile", gone.id))
}

/// Converts the statistics of `files`, written under `from`, to `to`'s types.
pub(super) fn widen_file_stats(files: &mut [DataFile], from: &Schema, to: &Schema) {
    for file in files {
        for stats in &mut file.column_stats {
            let (Some(was), Some(now)) = (
                from.field_by_id(stats.field_id),
                to.field_by_id(stats.field_id),
            ) else {
                continue;
            };
            if was.data_type == now.data_type {
                continue;
            }
            stats.min = stats
                .min
                .take()
                .and_then(|v| widen_stat(v, &was.data_type, &now.data_type));
            stats.max = stats
                .max
                .take()
                .and_then(|v| widen_stat(v, &was.data_type, &now.data_type));
        }
    }
}

/// Why fragments written under `from` cannot join a version of schema `to`, if they cannot:
/// a NOT NULL column they do not hold would read NULL.
pub(super) fn unfit_fragments(
    fragments: &[NewFragment],
    from: &Schema,
    to: &Schema,
) -> Option<String> {
    to.fields
        .iter()
        .filter(|f| !f.nullable && from.field_by_id(f.id).is_none())
        .find(|f| !fragments.iter().any(|n| n.file.field_ids.contains(&f.id)))
        .map(|f| {
            format!(
                "the rows lack the NOT NULL column {} added meanwhile",
                f.name
            )
        })
}
