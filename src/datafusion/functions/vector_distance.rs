//! Distances between vectors in SQL: `l2_distance(a, b)` (Euclidean, as pgvector's `<->` and
//! DataFusion's `array_distance`), `cosine_distance(a, b)` (pgvector's `<=>`) and
//! `inner_product(a, b)`, each `Float32`. Either side is a vector column
//! (`FixedSizeList<Float32, n>`, no copy), another list of numbers, or a literal such as
//! `[0.1, 0.2, 0.3]`; NULL when either side is NULL; an error for vectors of other lengths or
//! with a NULL component.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float32Array};
use datafusion::arrow::buffer::{NullBuffer, ScalarBuffer};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::table::vector;

/// Which distance a [`VectorDistance`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DistanceKind {
    /// `l2_distance`.
    L2,
    /// `cosine_distance`.
    Cosine,
    /// `inner_product` (larger is nearer).
    InnerProduct,
}

/// One of the SQL distance functions.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct VectorDistance {
    kind: DistanceKind,
    signature: Signature,
}

impl VectorDistance {
    /// The function computing `kind`.
    pub fn new(kind: DistanceKind) -> Self {
        Self {
            kind,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    /// The three of them, as scalar functions to register.
    pub fn all() -> Vec<ScalarUDF> {
        [
            DistanceKind::L2,
            DistanceKind::Cosine,
            DistanceKind::InnerProduct,
        ]
        .into_iter()
        .map(|kind| ScalarUDF::new_from_impl(Self::new(kind)))
        .collect()
    }

    fn compute(&self, a: &[f32], b: &[f32]) -> f32 {
        match self.kind {
            DistanceKind::L2 => vector::l2_squared(a, b).sqrt(),
            DistanceKind::Cosine => vector::cosine_distance(a, b),
            DistanceKind::InnerProduct => vector::dot(a, b),
        }
    }
}

impl ScalarUDFImpl for VectorDistance {
    fn name(&self) -> &str {
        match self.kind {
            DistanceKind::L2 => "l2_distance",
            DistanceKind::Cosine => "cosine_distance",
            DistanceKind::InnerProduct => "inner_product",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        for t in arg_types {
            if VectorRows::element_type(t).is_none() && t != &DataType::Null {
                return Err(DataFusionError::Plan(format!(
                    "{} takes two vectors (lists of numbers), not {t}",
                    self.name()
                )));
            }
        }
        Ok(DataType::Float32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes two vectors",
                self.name()
            )));
        };
        let scalar = matches!(
            (left, right),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let rows = if scalar { 1 } else { args.number_rows };
        let a = VectorRows::of(left, self.name())?;
        let b = VectorRows::of(right, self.name())?;
        let mut values = Vec::with_capacity(rows);
        let mut valid = Vec::with_capacity(rows);
        for row in 0..rows {
            let (Some(x), Some(y)) = (a.row(row), b.row(row)) else {
                values.push(0.0);
                valid.push(false);
                continue;
            };
            if x.len() != y.len() {
                return Err(DataFusionError::Execution(format!(
                    "{}: vectors of {} and {} dimensions",
                    self.name(),
                    x.len(),
                    y.len()
                )));
            }
            values.push(self.compute(x, y));
            valid.push(true);
        }
        let nulls = NullBuffer::from(valid);
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        let out = Float32Array::new(ScalarBuffer::from(values), nulls);
        if scalar {
            let value = datafusion::scalar::ScalarValue::try_from_array(&out, 0)?;
            return Ok(ColumnarValue::Scalar(value));
        }
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The vectors of one argument, row by row: a scalar stands for every row.
struct VectorRows {
    values: ScalarBuffer<f32>,
    /// Row `i`'s components are `values[bounds[i]..bounds[i + 1]]`.
    bounds: Vec<usize>,
    nulls: Option<NullBuffer>,
    scalar: bool,
}

impl VectorRows {
    /// The element type of a list type, if it is a list of numbers.
    fn element_type(data_type: &DataType) -> Option<&DataType> {
        let item = match data_type {
            DataType::FixedSizeList(item, _) | DataType::List(item) | DataType::LargeList(item) => {
                item.data_type()
            }
            _ => return None,
        };
        (item.is_numeric()).then_some(item)
    }

    fn of(value: &ColumnarValue, function: &str) -> Result<Self> {
        let (array, scalar) = match value {
            ColumnarValue::Array(array) => (array.clone(), false),
            ColumnarValue::Scalar(scalar) => (scalar.to_array()?, true),
        };
        if array.data_type() == &DataType::Null {
            return Ok(Self {
                values: ScalarBuffer::from(Vec::<f32>::new()),
                bounds: vec![0; array.len() + 1],
                nulls: Some(NullBuffer::new_null(array.len())),
                scalar,
            });
        }
        let (items, bounds): (ArrayRef, Vec<usize>) = match array.data_type() {
            DataType::FixedSizeList(_, n) => {
                let list = array.as_fixed_size_list();
                let n = *n as usize;
                let start = list.offset() * n;
                let items = list.values().slice(start, list.len() * n);
                (items, (0..=list.len()).map(|i| i * n).collect())
            }
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                let offsets = list.value_offsets();
                let base = offsets[0] as usize;
                let items = list
                    .values()
                    .slice(base, offsets[list.len()] as usize - base);
                (items, offsets.iter().map(|o| *o as usize - base).collect())
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                let offsets = list.value_offsets();
                let base = offsets[0] as usize;
                let items = list
                    .values()
                    .slice(base, offsets[list.len()] as usize - base);
                (items, offsets.iter().map(|o| *o as usize - base).collect())
            }
            other => {
                return Err(DataFusionError::Execution(format!(
                    "{function} takes two vectors (lists of numbers), not {other}"
                )))
            }
        };
        let items = match items.data_type() {
            DataType::Float32 => items,
            _ => cast(&items, &DataType::Float32)?,
        };
        let nulls = array.logical_nulls();
        let floats = items.as_primitive::<Float32Type>();
        if floats.null_count() > 0 {
            let valid_row_holds_null = (0..array.len()).any(|row| {
                nulls.as_ref().is_none_or(|n| n.is_valid(row))
                    && (bounds[row]..bounds[row + 1]).any(|i| floats.is_null(i))
            });
            if valid_row_holds_null {
                return Err(DataFusionError::Execution(format!(
                    "{function}: a vector has a NULL component"
                )));
            }
        }
        Ok(Self {
            values: floats.values().clone(),
            bounds,
            nulls,
            scalar,
        })
    }

    fn row(&self, row: usize) -> Option<&[f32]> {
        let row = if self.scalar { 0 } else { row };
        if self.nulls.as_ref().is_some_and(|n| n.is_null(row)) {
            return None;
        }
        Some(&self.values[self.bounds[row]..self.bounds[row + 1]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn answer(sql: &str) -> Result<String> {
        let ctx = SessionContext::new();
        for f in VectorDistance::all() {
            ctx.register_udf(f);
        }
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
    }

    #[tokio::test]
    async fn distances_of_literals_columns_and_nulls() {
        let shown = answer(
            "SELECT l2_distance([3.0, 0.0], [0.0, 4.0]) AS l2, \
             inner_product([1, 2], [3, 4]) AS ip, cosine_distance([1.0, 0.0], [0.0, 2.0]) AS c, \
             l2_distance(NULL, [1.0]) AS n",
        )
        .await
        .unwrap();
        assert!(shown.contains("| 5.0 | 11.0 | 1.0 |   |"), "{shown}");
        let shown = answer(
            "SELECT l2_distance(arrow_cast(v, 'FixedSizeList(2, Float32)'), [0.0, 0.0]) AS d \
             FROM (VALUES ([3.0, 4.0]), ([6.0, 8.0]), (NULL)) AS t(v) ORDER BY d",
        )
        .await
        .unwrap();
        assert!(
            shown.contains("| 5.0  |") && shown.contains("| 10.0 |"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn mismatched_lengths_null_components_and_other_types_are_errors() {
        let error = answer("SELECT l2_distance([1.0, 2.0], [1.0])")
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("vectors of 2 and 1 dimensions"),
            "{error}"
        );
        let error = answer("SELECT cosine_distance([1.0, NULL], [1.0, 2.0])")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("NULL component"), "{error}");
        let error = answer("SELECT inner_product('a', [1.0])")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("takes two vectors"), "{error}");
    }
}
