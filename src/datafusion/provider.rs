//! [`NatalTableProvider`]: a natal table (latest or pinned version, with or without system
//! columns) as a DataFusion `TableProvider`: scans, `INSERT`, `DELETE`, `UPDATE`.
//! Nothing mutates while planning: DML returns a [`DmlExec`] that does its work in `execute`.

use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use roaring::RoaringTreemap;

use super::dml::{DmlExec, DmlKind, NatalSink};
use super::filter::ExprPredicate;
use super::partitions::partition_fragments;
use super::pruning::prune_fragments;
use super::scan::{NatalScanExec, ScanPlan};
use crate::format::Fragment;
use crate::io::IndexLookup;
use crate::table::{IndexProbe, RowMatch, RowPredicate, Snapshot, Table, ROW_ADDR, ROW_ID};

/// Which rows and columns a provider exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderView {
    /// `None`: the latest version at each scan; `Some(v)`: version `v`, read-only.
    pub version: Option<u64>,
    /// Adds `_rowid` and `_rowaddr` (the `t$rows` names).
    pub system_columns: bool,
}

#[derive(Debug)]
pub struct NatalTableProvider {
    table: Table,
    view: ProviderView,
    /// The snapshot the provider was created with; its schema is the provider's.
    snapshot: Arc<Snapshot>,
    schema: SchemaRef,
}

fn system_fields() -> [Field; 2] {
    [
        Field::new(ROW_ID, DataType::UInt64, false),
        Field::new(ROW_ADDR, DataType::UInt64, false),
    ]
}

impl NatalTableProvider {
    pub async fn try_new(table: Table, view: ProviderView) -> crate::Result<Self> {
        let snapshot = match view.version {
            Some(v) => table.at_version(v).await?,
            None => table.latest().await?,
        };
        Ok(Self::from_snapshot(table, view, snapshot))
    }

    /// A provider whose schema is `snapshot`'s (the version it pins, or the latest one).
    pub fn from_snapshot(table: Table, view: ProviderView, snapshot: Snapshot) -> Self {
        let schema = table_schema(&snapshot, view.system_columns);
        Self {
            table,
            view,
            snapshot: Arc::new(snapshot),
            schema,
        }
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    async fn current(&self) -> Result<Arc<Snapshot>> {
        match self.view.version {
            Some(_) => Ok(self.snapshot.clone()),
            None => Ok(Arc::new(self.table.latest().await?)),
        }
    }

    fn writable(&self, what: &str) -> Result<()> {
        match self.view.version {
            Some(v) => Err(DataFusionError::Plan(format!(
                "{what} is not allowed on version {v} of a table: pinned versions are read-only"
            ))),
            None => Ok(()),
        }
    }

    /// The schema filters and DML predicates are compiled against: user columns plus both
    /// system columns (what `delete_where`/`update_where` predicates see).
    fn predicate_schema(&self) -> SchemaRef {
        table_schema(&self.snapshot, true)
    }
}

/// A snapshot's user columns, plus the system columns if asked.
fn table_schema(snapshot: &Snapshot, system_columns: bool) -> SchemaRef {
    let user = snapshot.schema().to_arrow();
    let mut fields: Vec<Field> = user.fields().iter().map(|f| f.as_ref().clone()).collect();
    if system_columns {
        fields.extend(system_fields());
    }
    Arc::new(Schema::new(fields))
}

fn is_row_id(e: &Expr) -> bool {
    matches!(e, Expr::Column(c) if c.name == ROW_ID)
}

/// A literal as a row id; `None` for anything else (negative or non-integer values too).
fn id_literal(e: &Expr) -> Option<u64> {
    match e {
        Expr::Literal(value, _) => match value.cast_to(&DataType::UInt64).ok()? {
            ScalarValue::UInt64(Some(v)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// The empty id range (`_rowid > u64::MAX`, `_rowid < 0`).
const NO_IDS: RangeInclusive<u64> = RangeInclusive::new(1, 0);

/// The ids `_rowid <op> v` (either side), `_rowid BETWEEN a AND b` select, as an inclusive
/// range (empty when `start > end`); `None` for other filters.
fn row_id_range(expr: &Expr) -> Option<RangeInclusive<u64>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, value) = if is_row_id(left) {
                (*op, id_literal(right)?)
            } else if is_row_id(right) {
                (op.swap()?, id_literal(left)?)
            } else {
                return None;
            };
            match op {
                Operator::Gt => Some(value.checked_add(1).map_or(NO_IDS, |v| v..=u64::MAX)),
                Operator::GtEq => Some(value..=u64::MAX),
                Operator::Lt => Some(value.checked_sub(1).map_or(NO_IDS, |v| 0..=v)),
                Operator::LtEq => Some(0..=value),
                _ => None,
            }
        }
        Expr::Between(between) if !between.negated && is_row_id(&between.expr) => {
            Some(id_literal(&between.low)?..=id_literal(&between.high)?)
        }
        _ => None,
    }
}

/// The ids an `_rowid = v` or `_rowid IN (...)` filter selects; `None` for other filters.
fn row_id_set(expr: &Expr) -> Option<RoaringTreemap> {
    let (is_row_id, literal) = (is_row_id, id_literal);
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => {
            let value = if is_row_id(left) {
                literal(right)
            } else if is_row_id(right) {
                literal(left)
            } else {
                None
            }?;
            Some(RoaringTreemap::from_iter([value]))
        }
        // DataFusion rewrites short IN lists into OR chains.
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => Some(row_id_set(left)? | row_id_set(right)?),
        Expr::ScalarFunction(_) => super::rowid_list::folded_row_ids(expr),
        Expr::InList(list) if !list.negated && is_row_id(&list.expr) => {
            let values: Option<Vec<u64>> = list.list.iter().map(literal).collect();
            Some(values?.into_iter().collect())
        }
        _ => None,
    }
}

/// The column and values of `col = v`, `col IN (...)` or an `OR` chain of those on one
/// column; `None` for other filters.
fn equality_values(expr: &Expr) -> Option<(&str, Vec<ScalarValue>)> {
    let literal = |e: &Expr| match e {
        Expr::Literal(value, _) => Some(value.clone()),
        _ => None,
    };
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), other) | (other, Expr::Column(c)) => {
                Some((c.name.as_str(), vec![literal(other)?]))
            }
            _ => None,
        },
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let (name, mut values) = equality_values(left)?;
            let (other, more) = equality_values(right)?;
            (name == other).then(|| {
                values.extend(more);
                (name, values)
            })
        }
        Expr::InList(list) if !list.negated => match list.expr.as_ref() {
            Expr::Column(c) => Some((
                c.name.as_str(),
                list.list.iter().map(literal).collect::<Option<_>>()?,
            )),
            _ => None,
        },
        _ => None,
    }
}

/// One side of a range: `col <op> v` (either side) or `col BETWEEN a AND b`, as
/// (column, low bound, high bound), each bound a value and whether it is included.
type RangeFilter<'a> = (
    &'a str,
    Option<(ScalarValue, bool)>,
    Option<(ScalarValue, bool)>,
);

fn range_of(expr: &Expr) -> Option<RangeFilter<'_>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, value) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, op.swap()?, v),
                _ => return None,
            };
            let bound = Some((value.clone(), matches!(op, Operator::GtEq | Operator::LtEq)));
            match op {
                Operator::Gt | Operator::GtEq => Some((column.name.as_str(), bound, None)),
                Operator::Lt | Operator::LtEq => Some((column.name.as_str(), None, bound)),
                _ => None,
            }
        }
        Expr::Between(between) if !between.negated => match (
            between.expr.as_ref(),
            between.low.as_ref(),
            between.high.as_ref(),
        ) {
            (Expr::Column(c), Expr::Literal(low, _), Expr::Literal(high, _)) => Some((
                c.name.as_str(),
                Some((low.clone(), true)),
                Some((high.clone(), true)),
            )),
            _ => None,
        },
        _ => None,
    }
}

/// The name of an index on `column` of the snapshot, and the column's type.
fn index_on<'a>(snapshot: &'a Snapshot, column: &str) -> Option<(&'a str, DataType)> {
    let field = snapshot.schema().field_by_name(column)?;
    let segment = snapshot
        .manifest()
        .indexes
        .segments
        .iter()
        .find(|s| s.field_id == field.id)?;
    Some((segment.name.as_str(), field.data_type.clone()))
}

/// A probe of an index for the scan's filters: an equality filter on an indexed column
/// (`col = v`, `col IN (...)`), else the range the conjuncts on one indexed column bound.
/// `None` when no filter fits or a value does not convert to the column's type.
fn index_probe(snapshot: &Snapshot, filters: &[Expr]) -> Option<IndexProbe> {
    for filter in filters {
        let Some((column, values)) = equality_values(filter) else {
            continue;
        };
        let Some((name, data_type)) = index_on(snapshot, column) else {
            continue;
        };
        // `col = NULL` matches nothing; the filter still says so.
        let values: Option<Vec<ScalarValue>> = values
            .into_iter()
            .filter(|v| !v.is_null())
            .map(|v| v.cast_to(&data_type).ok())
            .collect();
        let Some(values) = values else { continue };
        let array = if values.is_empty() {
            datafusion::arrow::array::new_empty_array(&data_type)
        } else {
            match ScalarValue::iter_to_array(values) {
                Ok(array) => array,
                Err(_) => continue,
            }
        };
        return Some(IndexProbe::new(name, IndexLookup::Values(array)));
    }
    // Conjuncts on one column narrow each other: `a > 3 AND a <= 9`.
    let mut ranges: Vec<RangeFilter<'_>> = Vec::new();
    for (column, low, high) in filters.iter().filter_map(range_of) {
        match ranges.iter_mut().find(|r| r.0 == column) {
            Some(range) => {
                range.1 = tighter(range.1.take(), low, true);
                range.2 = tighter(range.2.take(), high, false);
            }
            None => ranges.push((column, low, high)),
        }
    }
    ranges.into_iter().find_map(|(column, low, high)| {
        let (name, data_type) = index_on(snapshot, column)?;
        let bound = |b: Option<(ScalarValue, bool)>| -> Option<Option<(datafusion::arrow::array::ArrayRef, bool)>> {
            match b {
                None => Some(None),
                // `col > NULL` matches nothing; leave such filters to the scan.
                Some((v, _)) if v.is_null() => None,
                Some((v, inclusive)) => {
                    let array = v.cast_to(&data_type).ok()?.to_array().ok()?;
                    Some(Some((array, inclusive)))
                }
            }
        };
        let (low, high) = (bound(low)?, bound(high)?);
        (low.is_some() || high.is_some())
            .then(|| IndexProbe::new(name, IndexLookup::Range { low, high }))
    })
}

/// The tighter of two bounds on the same side (`low`: the larger), keeping both when they
/// cannot be compared.
fn tighter(
    a: Option<(ScalarValue, bool)>,
    b: Option<(ScalarValue, bool)>,
    low: bool,
) -> Option<(ScalarValue, bool)> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => match a.0.partial_cmp(&b.0) {
            Some(std::cmp::Ordering::Equal) => Some((a.0, a.1 && b.1)),
            Some(std::cmp::Ordering::Greater) => Some(if low { a } else { b }),
            Some(std::cmp::Ordering::Less) => Some(if low { b } else { a }),
            None => Some(a),
        },
    }
}

/// Filters taken apart: `_rowid` sets and ranges, which become masks, and the rest.
struct Classified {
    row_ids: Option<RoaringTreemap>,
    row_id_range: Option<RangeInclusive<u64>>,
    column_filters: Vec<Expr>,
}

fn classify(filters: &[Expr]) -> Classified {
    let mut out = Classified {
        row_ids: None,
        row_id_range: None,
        column_filters: Vec::new(),
    };
    for filter in filters {
        if let Some(set) = row_id_set(filter) {
            out.row_ids = Some(match out.row_ids {
                Some(prev) => prev & set,
                None => set,
            });
        } else if let Some(range) = row_id_range(filter) {
            out.row_id_range = Some(match out.row_id_range {
                Some(prev) => (*prev.start()).max(*range.start())..=(*prev.end()).min(*range.end()),
                None => range,
            });
        } else {
            out.column_filters.push(filter.clone());
        }
    }
    out
}

#[async_trait]
impl TableProvider for NatalTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // `_rowid` sets and ranges become masks; every other filter is evaluated while the
        // scan reads. A volatile one (`random() < 0.1`) stays with DataFusion: evaluating it
        // twice would not be the same filter.
        Ok(filters
            .iter()
            .map(|f| {
                if f.is_volatile() {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    TableProviderFilterPushDown::Exact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = self.current().await?;
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let output = Arc::new(self.schema.project(&projection)?);
        // Scan order: user columns as projected, then _rowid, then _rowaddr.
        let names: Vec<&str> = output.fields().iter().map(|f| f.name().as_str()).collect();
        let columns: Vec<String> = names
            .iter()
            .filter(|n| **n != ROW_ID && **n != ROW_ADDR)
            .map(|n| n.to_string())
            .collect();
        let with_row_id = names.contains(&ROW_ID);
        let with_row_addr = names.contains(&ROW_ADDR);
        let mut scan_order: Vec<&str> = columns.iter().map(String::as_str).collect();
        if with_row_id {
            scan_order.push(ROW_ID);
        }
        if with_row_addr {
            scan_order.push(ROW_ADDR);
        }
        let output_order = names
            .iter()
            .map(|n| scan_order.iter().position(|s| s == n).unwrap_or(0))
            .collect();
        let Classified {
            row_ids,
            row_id_range: row_id_range_all,
            column_filters,
        } = classify(filters);
        let index = index_probe(&snapshot, &column_filters).map(Arc::new);
        let candidates: Vec<&Fragment> = snapshot.manifest().fragments.iter().collect();
        let conjunction = column_filters.into_iter().reduce(|a, b| a.and(b));
        let keep = match &conjunction {
            Some(conjunction) => {
                let df_schema = DFSchema::try_from(self.predicate_schema().as_ref().clone())?;
                let predicate = state.create_physical_expr(conjunction.clone(), &df_schema)?;
                prune_fragments(
                    &candidates,
                    snapshot.schema(),
                    predicate,
                    self.predicate_schema(),
                )
            }
            None => vec![true; candidates.len()],
        };
        let filter = conjunction
            .map(|c| ExprPredicate::try_new(state, &snapshot, c).map(Arc::new))
            .transpose()?;
        let fragments: Vec<&Fragment> = candidates
            .iter()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|(f, _)| *f)
            .collect();
        let fragments_pruned = candidates.len() - fragments.len();
        // A take reads few rows: splitting its fragments would only add readers.
        let partition_count = if row_ids.is_some() {
            state
                .config()
                .target_partitions()
                .clamp(1, fragments.len().max(1))
        } else {
            state.config().target_partitions()
        };
        let partitions = partition_fragments(&fragments, partition_count);
        let plan = ScanPlan {
            snapshot,
            columns,
            with_row_id,
            with_row_addr,
            output_order,
            row_ids,
            row_id_range: row_id_range_all,
            partitions,
            fragments_pruned,
            filter,
            index,
            // Every filter DataFusion handed over is applied here, so a limit is too.
            limit,
            filter_selectivity: f64::from(
                state
                    .config_options()
                    .optimizer
                    .default_filter_selectivity
                    .min(100),
            ) / 100.0,
        };
        Ok(Arc::new(NatalScanExec::new(plan, output)))
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("INSERT")?;
        if self.view.system_columns {
            return Err(DataFusionError::Plan(format!(
                "INSERT into {ROW_ID}-bearing views is not allowed; insert into the table itself"
            )));
        }
        let overwrite = match insert_op {
            InsertOp::Append => false,
            InsertOp::Overwrite => true,
            other => {
                return Err(DataFusionError::NotImplemented(format!(
                    "{other} is not supported by natal tables"
                )))
            }
        };
        let sink = NatalSink::new(
            self.writer(state)?,
            self.snapshot.schema().to_arrow(),
            overwrite,
        );
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }

    async fn delete_from(
        &self,
        state: &dyn Session,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("DELETE")?;
        let rows = self.row_match(state, &filters)?;
        Ok(Arc::new(DmlExec::new(
            self.writer(state)?,
            DmlKind::Delete { rows },
        )))
    }

    async fn update(
        &self,
        state: &dyn Session,
        assignments: Vec<(String, Expr)>,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("UPDATE")?;
        let rows = self.row_match(state, &filters)?;
        let user = self.snapshot.schema().to_arrow();
        // New values are computed from the row's user columns.
        let df_schema = DFSchema::try_from(user.as_ref().clone())?;
        let mut values = Vec::new();
        for (column, expr) in assignments {
            if column == ROW_ID || column == ROW_ADDR {
                return Err(DataFusionError::Plan(format!(
                    "{column} is assigned by natal and cannot be updated"
                )));
            }
            let index = user.index_of(&column).map_err(|_| {
                DataFusionError::Plan(format!("no column named '{column}' to update"))
            })?;
            values.push((index, state.create_physical_expr(expr, &df_schema)?));
        }
        Ok(Arc::new(DmlExec::new(
            self.writer(state)?,
            DmlKind::Update {
                rows,
                values,
                schema: user,
            },
        )))
    }
}

impl NatalTableProvider {
    /// The handle a write runs on: with the session's merging policy
    /// (`SET natal.merge_fan_in`), where the session has natal's options.
    fn writer(&self, state: &dyn Session) -> Result<Table> {
        Ok(match super::session_merge(state.config_options())? {
            Some(merge) => self.table.with_merge(merge),
            None => self.table.clone(),
        })
    }

    /// The rows a DELETE or UPDATE with `filters` names: `_rowid` sets and ranges as masks
    /// (a take, as in a SELECT), the other filters evaluated as the scan reads.
    fn row_match(&self, state: &dyn Session, filters: &[Expr]) -> Result<RowMatch> {
        let Classified {
            row_ids,
            row_id_range,
            column_filters,
        } = classify(filters);
        let filter = column_filters
            .into_iter()
            .reduce(|a, b| a.and(b))
            .map(|c| {
                ExprPredicate::try_new(state, &self.snapshot, c)
                    .map(|p| Arc::new(p) as Arc<dyn RowPredicate>)
            })
            .transpose()?;
        Ok(RowMatch {
            filter,
            row_ids,
            row_id_range,
        })
    }
}
