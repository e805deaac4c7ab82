//! The object store a root URL names, built as datafusion-cli builds it (credentials and
//! endpoint from the environment): what the `natal` CLI registers for `--root`, and what
//! `natal-scheduler` and `natal-executor` register for each `--root` their clients use.

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion_cli::object_storage::{
    get_gcs_object_store_builder, get_s3_object_store_builder, AwsOptions, GcpOptions,
};
use object_store::memory::InMemory;
use object_store::ObjectStore;
use url::Url;

/// The store `root` names and the URL to register it under; `None` for a local path or
/// `file://` URL (every session has the local file system).
pub async fn root_store(root: &str) -> Result<Option<(Url, Arc<dyn ObjectStore>)>> {
    let Ok(url) = Url::parse(root) else {
        return Ok(None);
    };
    // One-letter schemes are Windows drive letters, i.e. local paths.
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "file" => return Ok(None),
        scheme if scheme.len() == 1 => return Ok(None),
        "s3" | "s3a" => Arc::new(
            get_s3_object_store_builder(&url, &s3_options(), false)
                .await?
                .build()?,
        ),
        "gs" | "gcs" => Arc::new(get_gcs_object_store_builder(&url, &GcpOptions::default())?.build()?),
        "memory" => Arc::new(InMemory::new()),
        other => {
            return Err(DataFusionError::Plan(format!(
                "--root {root}: unsupported scheme '{other}' (use a path, file://, s3://, gs:// or memory://)"
            )))
        }
    };
    Ok(Some((url, store)))
}

/// The options a `--root s3://` store is built with beyond the environment's. datafusion-cli
/// asks AWS for a bucket's region (a HEAD of `<bucket>.s3.amazonaws.com`) whenever none is
/// configured, whatever the endpoint: against an S3-compatible server (`AWS_ENDPOINT_URL`,
/// `AWS_ENDPOINT`) that has no AWS region, that request fails or leaves the machine. With an
/// endpoint and no region, the region is `us-east-1`, as `object_store` itself defaults.
fn s3_options() -> AwsOptions {
    let set = |names: &[&str]| names.iter().any(|n| std::env::var_os(n).is_some());
    let endpoint = set(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]);
    let region = set(&["AWS_REGION", "AWS_DEFAULT_REGION"]);
    AwsOptions {
        region: (endpoint && !region).then(|| "us-east-1".to_string()),
        ..AwsOptions::default()
    }
}

/// A runtime with the stores of `roots` registered (the same URLs the clients use).
#[allow(dead_code)] // The CLI registers its one root on its session instead.
pub async fn runtime_with_roots(
    roots: &[String],
) -> Result<Arc<datafusion::execution::runtime_env::RuntimeEnv>> {
    let runtime = Arc::new(datafusion::execution::runtime_env::RuntimeEnv::default());
    for root in roots {
        if let Some((url, store)) = root_store(root).await? {
            runtime.register_object_store(&url, store);
        }
    }
    Ok(runtime)
}
