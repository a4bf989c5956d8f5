//! PLACEHOLDER: the ingest stage.
pub mod decode;
pub mod github;
pub mod linear;
