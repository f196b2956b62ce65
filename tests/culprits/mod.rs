//! Fixture models for the checker: the six usual culprits of device mismatches, each with the bug
//! and a clean twin that passes, and a GPT-2-small-shaped model. Snapshots name lines in these
//! files: after editing one, re-read and re-accept its snapshots.

// Several test binaries include these fixtures, each using a part of them.
#![allow(dead_code)]

pub mod common;
pub mod forward_shapes;
pub mod gpt2;
pub mod hidden_state;
pub mod input_batch;
pub mod inventory;
pub mod labels;
pub mod loops;
pub mod loss_weight;
pub mod mask;
pub mod pos_enc;
