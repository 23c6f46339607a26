pub use fleetjit_sys as sys;
