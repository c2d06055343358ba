//! The host: reads cordis.yml and loads its entries into a runtime.
