//! `plan` on hand-built findings, runtime answers and surveys.
