//! PLACEHOLDER (branch `sqlite`).
