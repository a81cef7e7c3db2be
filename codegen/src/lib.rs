//! kernelgen generator library
