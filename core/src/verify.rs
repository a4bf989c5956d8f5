//! PLACEHOLDER: signature verification (being written on branch `decode`).
