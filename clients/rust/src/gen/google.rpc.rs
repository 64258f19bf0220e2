/// Describes the cause of the error with structured details.
#[allow(clippy::derive_partial_eq_without_eq)]
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ErrorInfo {
    /// The reason of the error: for Sepp, a value name of sepp.v1.Reason.
    #[prost(string, tag="1")]
    pub reason: ::prost::alloc::string::String,
    /// The logical grouping to which the reason belongs: "sepp.dev".
    #[prost(string, tag="2")]
    pub domain: ::prost::alloc::string::String,
    /// Additional structured details about this error, e.g. "index" of an
    /// atomic batch's failing job.
    #[prost(btree_map="string, string", tag="3")]
    pub metadata: ::prost::alloc::collections::BTreeMap<::prost::alloc::string::String, ::prost::alloc::string::String>,
}
