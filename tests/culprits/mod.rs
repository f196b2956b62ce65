//! The six usual culprits of device mismatches, each as a fixture with the bug and a clean twin
//! that passes. Snapshots name lines in these files: after editing one, re-read and re-accept
//! its snapshots.

pub mod common;
pub mod hidden_state;
pub mod input_batch;
pub mod labels;
pub mod loss_weight;
pub mod mask;
pub mod pos_enc;
