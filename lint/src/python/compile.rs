//! The checks CPython's compiler makes after parsing that ruff's parser leaves to a second pass
//! (`ruff_python_parser::semantic_errors`): a keyword argument given twice, a parameter named
//! twice, `nonlocal` at the top level, and so on. `--fix` runs them on fixed text, so that a fix
//! never writes a file that parses but that Python refuses to compile.
//!
//! The pass asks its context where it is (in a function? an async one? a loop?). Each answer
//! here is the one that reports least: an error the pass reports here is one in every context.
//! Fixed text is compared with the original, so an error the file already had is not the fix's.

use std::cell::RefCell;

use ruff_python_ast::visitor;
use ruff_python_ast::{Expr, PythonVersion, Stmt};
use ruff_python_parser::semantic_errors::{
    LazyImportContext, SemanticSyntaxChecker, SemanticSyntaxContext, SemanticSyntaxError,
};
use ruff_text_size::TextRange;

/// Walks a tree and collects the semantic syntax errors' messages.
pub(super) struct Visitor<'a> {
    checker: SemanticSyntaxChecker,
    context: Context<'a>,
}

impl<'a> Visitor<'a> {
    pub(super) fn new(source: &'a str) -> Self {
        Visitor {
            checker: SemanticSyntaxChecker::new(),
            context: Context { source, errors: RefCell::default() },
        }
    }

    pub(super) fn into_errors(self) -> Vec<String> {
        self.context.errors.into_inner()
    }
}

impl<'a> visitor::Visitor<'a> for Visitor<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        self.checker.visit_stmt(stmt, &self.context);
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.checker.visit_expr(expr, &self.context);
        visitor::walk_expr(self, expr);
    }
}

struct Context<'a> {
    source: &'a str,
    errors: RefCell<Vec<String>>,
}

impl SemanticSyntaxContext for Context<'_> {
    fn future_annotations_or_stub(&self) -> bool {
        true
    }
    fn lazy_import_context(&self) -> Option<LazyImportContext> {
        None
    }
    fn python_version(&self) -> PythonVersion {
        PythonVersion::latest()
    }
    fn source(&self) -> &str {
        self.source
    }
    fn global(&self, _name: &str) -> Option<TextRange> {
        None
    }
    fn has_nonlocal_binding(&self, _name: &str) -> bool {
        true
    }
    fn in_async_context(&self) -> bool {
        true
    }
    fn in_await_allowed_context(&self) -> bool {
        true
    }
    fn in_yield_allowed_context(&self) -> bool {
        true
    }
    fn in_sync_comprehension(&self) -> bool {
        false
    }
    fn in_class_body_comprehension(&self) -> bool {
        false
    }
    fn in_module_scope(&self) -> bool {
        false
    }
    fn in_function_scope(&self) -> bool {
        true
    }
    fn in_generator_context(&self) -> bool {
        false
    }
    fn in_notebook(&self) -> bool {
        false
    }
    fn report_semantic_error(&self, error: SemanticSyntaxError) {
        self.errors.borrow_mut().push(error.to_string());
    }
    fn in_loop_context(&self) -> bool {
        true
    }
    fn is_bound_parameter(&self, _name: &str) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use ruff_python_ast::PySourceType;

    use super::super::compile_errors;

    #[test]
    fn a_repeated_keyword_is_an_error_and_ordinary_code_is_not() {
        let errors = compile_errors("x.to(d, non_blocking=False, non_blocking=True)\n", PySourceType::Python)
            .expect("parses");
        assert_eq!(errors, ["Duplicate keyword argument `non_blocking`"]);
        let fine = "import torch\nasync def f(x):\n    for y in x:\n        await g(y)\n        break\n    yield 1\n";
        assert_eq!(compile_errors(fine, PySourceType::Python).expect("parses"), Vec::<String>::new());
        assert!(compile_errors("def f(:\n", PySourceType::Python).is_err());
    }
}
