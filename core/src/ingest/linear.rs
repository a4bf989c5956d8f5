//! PLACEHOLDER (branch `decode`).
