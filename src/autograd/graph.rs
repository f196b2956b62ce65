//! The recorded graph and the reverse pass over it.
//!
//! A tensor made by a differentiable op while one of its inputs requires grad points to a [`Node`]:
//! the op's backward function with what it saved, and one edge per input. Edges point at the
//! inputs' nodes, or at the leaf tensors themselves, never at outputs, so the graph holds no cycles
//! and is freed with the last tensor that refers to it.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::functions::GradFn;
use crate::error::Result;
use crate::shape::fmt_shape;
use crate::tensor::Tensor;

/// The autograd state every tensor carries. Untracked tensors pay for three words and allocate
/// nothing.
#[derive(Default)]
pub(crate) struct GradMeta {
    /// The node that made this tensor; `None` for leaves and untracked tensors.
    pub(crate) grad_fn: Option<Arc<Node>>,
    /// Leaves only: gradients are accumulated for this tensor.
    requires_grad: AtomicBool,
    /// Leaves only: the accumulated gradient.
    grad: Mutex<Option<Tensor>>,
}

impl GradMeta {
    pub(crate) fn with_grad_fn(node: Arc<Node>) -> GradMeta {
        GradMeta { grad_fn: Some(node), ..GradMeta::default() }
    }

    #[inline]
    pub(crate) fn requires_grad(&self) -> bool {
        self.grad_fn.is_some() || self.requires_grad.load(Ordering::Relaxed)
    }

    pub(crate) fn set_leaf_requires_grad(&self, on: bool) {
        self.requires_grad.store(on, Ordering::Relaxed);
    }

    pub(crate) fn grad_slot(&self) -> MutexGuard<'_, Option<Tensor>> {
        // A poisoned slot only means a panic elsewhere while it was held; its value is still whole.
        self.grad.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One recorded op: how to turn the gradient of its output into gradients of its inputs.
pub(crate) struct Node {
    pub(crate) grad_fn: GradFn,
    /// One per input of the op, in order; `None` for inputs that do not require grad.
    pub(crate) edges: Vec<Option<Edge>>,
}

/// Where an input's gradient goes.
pub(crate) enum Edge {
    /// Into the node that made the input.
    Node(Arc<Node>),
    /// Into the leaf's `grad` slot.
    Leaf(Tensor),
}

impl Edge {
    pub(crate) fn of(t: &Tensor) -> Option<Edge> {
        let meta = t.grad_meta();
        match &meta.grad_fn {
            Some(node) => Some(Edge::Node(node.clone())),
            None if meta.requires_grad() => Some(Edge::Leaf(t.clone())),
            None => None,
        }
    }
}

/// Runs the reverse pass from `root`, whose gradient is `seed`, accumulating into every leaf
/// reached. The caller has turned grad mode off.
pub(crate) fn run_backward(root: &Tensor, seed: Tensor, location: &'static Location<'static>) -> Result<()> {
    let Some(root_node) = root.grad_meta().grad_fn.clone() else {
        return accumulate_leaf(root, seed, location);
    };
    let order = topological_order(root_node);
    let index: HashMap<*const Node, usize> =
        order.iter().enumerate().map(|(i, n)| (Arc::as_ptr(n), i)).collect();
    let mut grads: Vec<Option<Tensor>> = Vec::with_capacity(order.len());
    grads.resize_with(order.len(), || None);
    grads[0] = Some(seed);
    for (i, node) in order.iter().enumerate() {
        let Some(grad) = grads[i].take() else { continue };
        let needed: Vec<bool> = node.edges.iter().map(Option::is_some).collect();
        let input_grads = node.grad_fn.backward(grad, &needed)?;
        for (edge, input_grad) in node.edges.iter().zip(input_grads) {
            let (Some(edge), Some(input_grad)) = (edge, input_grad) else { continue };
            match edge {
                Edge::Node(next) => {
                    let j = index[&Arc::as_ptr(next)];
                    grads[j] = Some(match grads[j].take() {
                        None => input_grad,
                        Some(sum) => sum.add(&input_grad)?,
                    });
                }
                Edge::Leaf(leaf) => accumulate_leaf(leaf, input_grad, location)?,
            }
        }
    }
    Ok(())
}

/// Nodes reachable from `root`, each before every node it feeds (reverse post-order of a
/// depth-first walk, iterative so deep graphs do not exhaust the stack).
fn topological_order(root: Arc<Node>) -> Vec<Arc<Node>> {
    let mut post = Vec::new();
    let mut seen: std::collections::HashSet<*const Node> = std::collections::HashSet::new();
    seen.insert(Arc::as_ptr(&root));
    let mut stack: Vec<(Arc<Node>, usize)> = vec![(root, 0)];
    while let Some((node, next)) = stack.last_mut() {
        let child = node.edges[*next..].iter().enumerate().find_map(|(k, e)| match e {
            Some(Edge::Node(n)) if !seen.contains(&Arc::as_ptr(n)) => Some((k, n.clone())),
            _ => None,
        });
        match child {
            Some((k, n)) => {
                *next += k + 1;
                seen.insert(Arc::as_ptr(&n));
                stack.push((n, 0));
            }
            None => {
                if let Some((done, _)) = stack.pop() {
                    post.push(done);
                }
            }
        }
    }
    post.reverse();
    post
}

/// `leaf.grad += grad` (or `= grad` the first time), kept contiguous so optimizers read it
/// directly.
fn accumulate_leaf(leaf: &Tensor, grad: Tensor, location: &'static Location<'static>) -> Result<()> {
    if grad.shape() != leaf.shape() {
        return Err(crate::error::Error::InvalidArgument {
            op: "backward",
            detail: format!(
                "internal error: a gradient of shape {} reached a leaf of shape {}",
                fmt_shape(grad.shape()),
                fmt_shape(leaf.shape())
            ),
            help: "this is a bug in devcheck's autograd; please report it with the model code".to_string(),
            location,
        });
    }
    let grad = grad.contiguous()?;
    let mut slot = leaf.grad_meta().grad_slot();
    *slot = Some(match slot.take() {
        None => grad,
        Some(sum) => sum.add(&grad)?,
    });
    Ok(())
}
