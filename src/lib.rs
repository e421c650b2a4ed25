//! kresidue: find Kubernetes Secret residue on a node's disks.
#![deny(missing_docs)]
pub mod finding;
pub mod fingerprint;
pub mod kubectl;
pub mod matcher;
