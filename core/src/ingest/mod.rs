//! PLACEHOLDER: the ingest stage.
pub mod github;
pub mod linear;
