//! Tests for this area are being written.
