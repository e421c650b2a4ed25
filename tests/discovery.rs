//! (filled in by the issue 28 work)
