//! External blob values in SQL: `natal_external_blob(uri [, offset, length])` makes the value
//! an INSERT or UPDATE stores as an External descriptor (see `natal::external_blob`), and
//! [`SessionStores`] lets natal's tables read such values through the session's own object
//! stores — whatever `s3://`, `gs://` or `file://` stores the session has registered.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, LargeBinaryBuilder};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreRegistry as SessionRegistry;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use object_store::path::Path;
use object_store::registry::ObjectStoreRegistry;
use object_store::ObjectStore;
use url::Url;

/// A session's object stores, as natal's tables resolve external blob URIs: the store the
/// session has for the URI's scheme and authority, the URI's path within it.
#[derive(Debug, Clone)]
pub struct SessionStores(Arc<dyn SessionRegistry>);

impl SessionStores {
    /// The stores of `runtime` (later registrations included: the registry is shared).
    pub fn of(runtime: &RuntimeEnv) -> Arc<dyn ObjectStoreRegistry> {
        Arc::new(Self(runtime.object_store_registry.clone()))
    }
}

impl ObjectStoreRegistry for SessionStores {
    fn register(&self, url: Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.0.register_store(&url, store)
    }

    fn resolve(&self, url: &Url) -> object_store::Result<(Arc<dyn ObjectStore>, Path)> {
        let store = self
            .0
            .get_store(url)
            .map_err(|e| object_store::Error::Generic {
                store: "DataFusion session",
                source: Box::new(e),
            })?;
        let path = Path::from_url_path(url.path())?;
        Ok((store, path))
    }
}

/// `natal_external_blob(uri [, offset, length])`: the value that, written to a blob column,
/// stores a reference to the object at `uri` (bytes `offset..offset + length` of it, or the
/// whole object) instead of bytes. NULL for a NULL argument.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ExternalBlobFunction {
    signature: Signature,
}

impl ExternalBlobFunction {
    /// Its SQL name.
    pub const NAME: &'static str = "natal_external_blob";

    /// The function.
    pub fn new() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for ExternalBlobFunction {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for ExternalBlobFunction {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types.len() {
            1 => Ok(vec![DataType::Utf8]),
            3 => Ok(vec![DataType::Utf8, DataType::Int64, DataType::Int64]),
            n => Err(DataFusionError::Plan(format!(
                "{} takes a URI, or a URI, an offset and a length; not {n} arguments",
                Self::NAME
            ))),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::LargeBinary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let malformed = || {
            DataFusionError::Execution(format!(
                "{} takes a Utf8 URI, or a URI and Int64 offset and length",
                Self::NAME
            ))
        };
        let uris = (arrays.first())
            .and_then(|a| a.as_string_opt::<i32>())
            .ok_or_else(malformed)?;
        let ranges = match arrays.as_slice() {
            [_] => None,
            [_, offsets, lengths] => Some((
                offsets
                    .as_primitive_opt::<Int64Type>()
                    .ok_or_else(malformed)?,
                lengths
                    .as_primitive_opt::<Int64Type>()
                    .ok_or_else(malformed)?,
            )),
            _ => return Err(malformed()),
        };
        let mut out = LargeBinaryBuilder::new();
        for row in 0..rows {
            let range = match ranges {
                None => None,
                Some((offsets, lengths)) if offsets.is_null(row) || lengths.is_null(row) => {
                    out.append_null();
                    continue;
                }
                Some((offsets, lengths)) => {
                    let (offset, length) = (offsets.value(row), lengths.value(row));
                    let (Ok(start), Ok(length)) = (u64::try_from(offset), u64::try_from(length))
                    else {
                        return Err(DataFusionError::Execution(format!(
                            "{}: offset {offset} and length {length} must not be negative",
                            Self::NAME
                        )));
                    };
                    let end = start.checked_add(length).ok_or_else(|| {
                        DataFusionError::Execution(format!(
                            "{}: offset {offset} + length {length} overflows",
                            Self::NAME
                        ))
                    })?;
                    Some(start..end)
                }
            };
            if uris.is_null(row) {
                out.append_null();
                continue;
            }
            out.append_value(crate::io::external_blob(uris.value(row), range)?);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}
