//! The call configuration a model request carries by default, as a service: what the model
//! service (the `llm` plugin) would put in a request header's `config`, published so a host
//! can digest exactly what `request/header` records without depending on the model crate.

/// The default `config` of a request header (canonical JSON: `{"model": …}` and whatever else
/// the model service sets), provided by the model service as the service `request-config`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestConfig(pub serde_json::Value);

impl cordis_runtime::Service for RequestConfig {
    const NAME: &'static str = "request-config";
}
