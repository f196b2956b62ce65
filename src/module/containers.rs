//! Containers of modules are modules: `Box`, `Option`, `Vec`, arrays and `BTreeMap<String, _>`
//! walk what they hold, with the path segments the derive documents.

use std::collections::BTreeMap;
use std::fmt;

use super::{Module, ModulePath, Visitor, VisitorMut, walk};
use crate::error::Result;

/// A boxed module is the module (`Box<dyn Layer>`).
impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        (**self).visit(visitor, path)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        (**self).visit_mut(visitor, path)
    }

    fn module_name(&self) -> &'static str {
        (**self).module_name()
    }

    fn own_training(&self) -> Option<bool> {
        (**self).own_training()
    }

    fn set_own_training(&mut self, training: bool) {
        (**self).set_own_training(training);
    }
}

/// `None` holds nothing; `Some(m)` is `m` at the same path.
impl<M: Module> Module for Option<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        match self {
            Some(module) => walk::submodule(visitor, path, module),
            None => Ok(()),
        }
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        match self {
            Some(module) => walk::submodule_mut(visitor, path, module),
            None => Ok(()),
        }
    }
}

/// Elements at paths `0`, `1`, ... (as a `Vec` field of a derived module).
impl<M: Module> Module for Vec<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        walk::items(visitor, path, self)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        walk::items_mut(visitor, path, self)
    }
}

/// Elements at paths `0`, `1`, ...
impl<M: Module, const N: usize> Module for [M; N] {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        walk::items(visitor, path, self)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        walk::items_mut(visitor, path, self)
    }
}

/// Entries at their keys' paths (`heads.query`).
impl<K: fmt::Display + Ord, M: Module> Module for BTreeMap<K, M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        self.iter().try_for_each(|(key, module)| {
            path.push_key(key);
            walk::submodule(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        self.iter_mut().try_for_each(|(key, module)| {
            path.push_key(key);
            walk::submodule_mut(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }
}
