pub mod cuda;
