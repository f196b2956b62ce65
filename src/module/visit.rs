//! Walking a module: the [`Visitor`] and [`VisitorMut`] traits `#[derive(Module)]` calls, what
//! they are shown (tensors with their [`Persistence`], skipped fields, submodules), and the
//! dotted [`ModulePath`] of each entry.

use std::fmt;
use std::panic::Location;

use super::{Module, Param};
use crate::error::Result;
use crate::tensor::Tensor;

/// Read-only walk over a module tree (see [`Module::visit`]). Every method has an empty default.
pub trait Visitor {
    /// A module begins at `path` (`""` for the root). Its entries follow, then `exit_module`.
    fn enter_module(&mut self, path: &ModulePath, module: ModuleInfo) -> Result<()> {
        let _ = (path, module);
        Ok(())
    }

    fn exit_module(&mut self, path: &ModulePath) -> Result<()> {
        let _ = path;
        Ok(())
    }

    fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
        let _ = (path, param);
        Ok(())
    }

    fn visit_buffer(&mut self, path: &ModulePath, tensor: &Tensor, persistence: Persistence) -> Result<()> {
        let _ = (path, tensor, persistence);
        Ok(())
    }

    /// A field marked `#[module(skip)]`.
    fn visit_skipped(&mut self, path: &ModulePath, skipped: Skipped<'_>) -> Result<()> {
        let _ = (path, skipped);
        Ok(())
    }
}

/// Mutable walk over a module tree (see [`Module::visit_mut`]). Every method has an empty default.
pub trait VisitorMut {
    /// A module begins at `path`; `module` can set its training flag.
    fn enter_module(&mut self, path: &ModulePath, module: ModuleMut<'_>) -> Result<()> {
        let _ = (path, module);
        Ok(())
    }

    fn exit_module(&mut self, path: &ModulePath) -> Result<()> {
        let _ = path;
        Ok(())
    }

    /// A parameter. Its tensor is replaced through the handle (`Param::set_tensor`, `to`), or the
    /// handle itself is replaced.
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        let _ = (path, param);
        Ok(())
    }

    fn visit_buffer(
        &mut self,
        path: &ModulePath,
        tensor: &mut Tensor,
        persistence: Persistence,
    ) -> Result<()> {
        let _ = (path, tensor, persistence);
        Ok(())
    }

    /// A field marked `#[module(skip)]`. Nothing in devcheck moves or saves it; a dry run puts
    /// back what forward wrote into a skipped `Tensor` / `Option<Tensor>` field.
    fn visit_skipped(&mut self, path: &ModulePath, skipped: SkippedMut<'_>) -> Result<()> {
        let _ = (path, skipped);
        Ok(())
    }
}

/// Is a buffer saved in checkpoints?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// A plain `Tensor` field: moved and saved.
    Persistent,
    /// `#[module(non_persistent)]`: moved, not saved.
    NonPersistent,
}

/// A field marked `#[module(skip)]`, as the derive records it.
#[derive(Clone, Copy)]
pub struct Skipped<'a> {
    /// The field's type as written (`Tensor`, `Rc<RefCell<Tensor>>`, `Config`).
    pub type_name: &'static str,
    /// The tensor, when the field is a `Tensor` (or a `Some` of `Option<Tensor>`): still readable,
    /// so the checker can say where it is.
    pub tensor: Option<&'a Tensor>,
    /// False when the type is plain data (numbers, strings): nothing there could be left behind.
    pub may_hold_tensors: bool,
    /// Where the field is declared (`#[derive(Module)]` records it).
    pub declared_at: Option<&'static Location<'static>>,
    /// The field as a module, when its type is one (a submodule marked `skip`): its parameters
    /// and buffers are neither moved, saved nor optimized, and reports list them.
    pub module: Option<&'a dyn Module>,
}

impl fmt::Debug for Skipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skipped")
            .field("type_name", &self.type_name)
            .field("tensor", &self.tensor)
            .field("may_hold_tensors", &self.may_hold_tensors)
            .field("declared_at", &self.declared_at)
            .field("module", &self.module.map(|m| m.module_name()))
            .finish()
    }
}

/// A field marked `#[module(skip)]` in a mutable walk. Nothing in devcheck moves it; a dry run
/// reads its tensor and puts back what forward wrote there.
pub struct SkippedMut<'a> {
    pub type_name: &'static str,
    pub may_hold_tensors: bool,
    pub declared_at: Option<&'static Location<'static>>,
    pub value: SkippedValue<'a>,
}

/// What a skipped field holds, for a mutable walk.
pub enum SkippedValue<'a> {
    /// A `Tensor` field.
    TensorField(&'a mut Tensor),
    /// An `Option<Tensor>` field (a cache forward may fill).
    OptionalTensorField(&'a mut Option<Tensor>),
    /// A submodule.
    Module(&'a dyn Module),
    /// Anything else.
    Other,
}

impl SkippedMut<'_> {
    /// The read-only view a [`Visitor`] gets.
    pub fn as_skipped(&self) -> Skipped<'_> {
        let (tensor, module) = match &self.value {
            SkippedValue::TensorField(t) => (Some(&**t), None),
            SkippedValue::OptionalTensorField(t) => (t.as_ref(), None),
            SkippedValue::Module(m) => (None, Some(*m)),
            SkippedValue::Other => (None, None),
        };
        Skipped {
            type_name: self.type_name,
            tensor,
            may_hold_tensors: self.may_hold_tensors,
            declared_at: self.declared_at,
            module,
        }
    }
}

impl fmt::Debug for SkippedMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_skipped(), f)
    }
}

/// Generated code's probe for a skipped field: the field as a `&dyn Module` when its type is a
/// module, `None` otherwise (a config, a tokenizer). Resolved at compile time by method lookup:
/// `(&SkippedProbe(&field)).skipped_module()` picks [`ProbeModule`] when the type implements
/// `Module`, [`ProbeOther`] when it does not.
#[doc(hidden)]
pub struct SkippedProbe<'a, T: ?Sized>(pub &'a T);

#[doc(hidden)]
pub trait ProbeModule<'a> {
    fn skipped_module(&self) -> Option<&'a dyn Module>;
}

impl<'a, T: Module> ProbeModule<'a> for SkippedProbe<'a, T> {
    fn skipped_module(&self) -> Option<&'a dyn Module> {
        Some(self.0)
    }
}

#[doc(hidden)]
pub trait ProbeOther<'a> {
    fn skipped_module(&self) -> Option<&'a dyn Module>;
}

impl<'a, T: ?Sized> ProbeOther<'a> for &SkippedProbe<'a, T> {
    fn skipped_module(&self) -> Option<&'a dyn Module> {
        None
    }
}

/// A module as visitors see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Its Rust type name ([`Module::module_name`]).
    pub type_name: &'static str,
    /// Its own training flag ([`Module::own_training`]).
    pub training: Option<bool>,
}

/// A module in a mutable walk: its info, and its training flag to set.
pub struct ModuleMut<'a> {
    info: ModuleInfo,
    set_training: &'a mut dyn FnMut(bool),
}

impl ModuleMut<'_> {
    pub fn info(&self) -> ModuleInfo {
        self.info
    }

    /// Sets the module's own training flag (a no-op for modules without one).
    pub fn set_training(&mut self, training: bool) {
        (self.set_training)(training);
    }
}

impl fmt::Debug for ModuleMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleMut").field("info", &self.info).finish_non_exhaustive()
    }
}

/// The dotted path of the entry being visited: `encoder.layers.0.attn.mask`. Walks push a segment
/// before visiting a field and pop it after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModulePath {
    text: String,
    marks: Vec<usize>,
}

impl ModulePath {
    /// The root: the empty path.
    pub fn root() -> ModulePath {
        ModulePath::default()
    }

    /// Enters a field: `blocks`.
    pub fn push(&mut self, segment: &str) {
        self.marks.push(self.text.len());
        if !self.text.is_empty() {
            self.text.push('.');
        }
        self.text.push_str(segment);
    }

    /// Enters an element of a `Vec` or array: `blocks.3`.
    pub fn push_index(&mut self, index: usize) {
        self.push_key(&index);
    }

    /// Enters an entry of a map, by its key's `Display` (`heads.query`). Keys should not contain
    /// `.`: paths are split on it.
    pub fn push_key<K: fmt::Display + ?Sized>(&mut self, key: &K) {
        self.marks.push(self.text.len());
        if !self.text.is_empty() {
            self.text.push('.');
        }
        use fmt::Write;
        // Writing into a String cannot fail.
        let _ = write!(self.text, "{key}");
    }

    /// Leaves the last entered segment (a no-op at the root).
    pub fn pop(&mut self) {
        if let Some(mark) = self.marks.pop() {
            self.text.truncate(mark);
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_root(&self) -> bool {
        self.marks.is_empty()
    }

    /// The number of segments.
    pub fn depth(&self) -> usize {
        self.marks.len()
    }

    /// The segments in order (`["encoder", "layers", "0", "mask"]`). A segment may itself contain
    /// `.` (a map key such as `"b.c"`), which the dotted text cannot show.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.marks.iter().enumerate().map(|(i, &start)| {
            let end = self.marks.get(i + 1).copied().unwrap_or(self.text.len());
            // A segment after a non-empty path starts with the `.` that joined it.
            if start > 0 { &self.text[start + 1..end] } else { &self.text[start..end] }
        })
    }
}

impl fmt::Display for ModulePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Walking into a submodule: what generated code calls for every submodule field, and what
/// hand-written container modules call for their children. Each call brackets the child's own
/// walk with `enter_module` / `exit_module` at the current path.
pub mod walk {
    use super::{Module, ModuleInfo, ModuleMut, ModulePath, Visitor, VisitorMut};
    use crate::error::Result;

    pub fn submodule<M: Module + ?Sized>(
        visitor: &mut dyn Visitor,
        path: &mut ModulePath,
        module: &M,
    ) -> Result<()> {
        let info = ModuleInfo { type_name: module.module_name(), training: module.own_training() };
        visitor.enter_module(path, info)?;
        module.visit(visitor, path)?;
        visitor.exit_module(path)
    }

    pub fn submodule_mut<M: Module + ?Sized>(
        visitor: &mut dyn VisitorMut,
        path: &mut ModulePath,
        module: &mut M,
    ) -> Result<()> {
        let info = ModuleInfo { type_name: module.module_name(), training: module.own_training() };
        {
            let mut set_training = |training: bool| module.set_own_training(training);
            visitor.enter_module(path, ModuleMut { info, set_training: &mut set_training })?;
        }
        module.visit_mut(visitor, path)?;
        visitor.exit_module(path)
    }

    /// The elements of a sequence of submodules, at paths `0`, `1`, ...
    pub fn items<M: Module>(visitor: &mut dyn Visitor, path: &mut ModulePath, items: &[M]) -> Result<()> {
        items.iter().enumerate().try_for_each(|(index, module)| {
            path.push_index(index);
            submodule(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }

    /// [`items`], for a visitor that may change them.
    pub fn items_mut<M: Module>(
        visitor: &mut dyn VisitorMut,
        path: &mut ModulePath,
        items: &mut [M],
    ) -> Result<()> {
        items.iter_mut().enumerate().try_for_each(|(index, module)| {
            path.push_index(index);
            submodule_mut(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }
}

/// A Rust type name without module paths: `Wrapper<Linear>` for
/// `my_crate::model::Wrapper<my_crate::layers::Linear>`.
pub fn short_type_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut segment_start = 0;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(segment_start);
            continue;
        }
        if !(c.is_alphanumeric() || c == '_') {
            out.push(c);
            segment_start = out.len();
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name("my_crate::model::Model"), "Model");
        assert_eq!(short_type_name("a::Wrapper<b::c::Linear, 4>"), "Wrapper<Linear, 4>");
        assert_eq!(short_type_name("alloc::boxed::Box<dyn a::Layer>"), "Box<dyn Layer>");
        assert_eq!(short_type_name("f32"), "f32");
    }

    #[test]
    fn paths_push_and_pop() {
        let mut path = ModulePath::root();
        assert!(path.is_root());
        path.push("blocks");
        path.push_index(3);
        path.push_key("query");
        assert_eq!((path.as_str(), path.depth()), ("blocks.3.query", 3));
        path.pop();
        path.pop();
        assert_eq!(path.to_string(), "blocks");
        path.pop();
        path.pop();
        assert!(path.is_root() && path.as_str().is_empty());
    }

    #[test]
    fn segments_keep_a_dotted_key_whole() {
        let mut path = ModulePath::root();
        path.push_key("");
        path.push("heads");
        path.push_key("b.c");
        path.push_index(0);
        assert_eq!(path.as_str(), "heads.b.c.0");
        assert_eq!(path.segments().collect::<Vec<_>>(), ["", "heads", "b.c", "0"]);
        path.pop();
        assert_eq!(path.segments().collect::<Vec<_>>(), ["", "heads", "b.c"]);
    }
}
