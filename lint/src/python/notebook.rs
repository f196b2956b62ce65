//! Jupyter notebooks (`.ipynb`): their code cells linted as one Python file, findings placed by
//! cell and line, and fixes and suppression comments written back into the notebook's JSON with
//! every other byte of it kept.
//!
//! The code cells are joined into one text, each after a boundary line (a comment no fix or
//! suppression ever touches), so names defined in one cell are known in the next, as when the
//! notebook runs top to bottom. IPython's own syntax (`%matplotlib inline`, `!pip install ..`) is
//! parsed as IPython parses it. To write a changed text back, it is cut at the boundary lines,
//! and each changed cell's `source` is replaced in the JSON text by the same JSON form it had (an
//! array of lines, indented as it was, or one string): the rest of the file is not re-serialised.

use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The line before each cell's code in the joined text, with the cell's number after it. A
/// comment: the parser and the rules pass it by, and no fix or suppression comment is ever
/// written on it.
pub(crate) const BOUNDARY: &str = "# devcheck: notebook cell ";

/// A notebook's code cells, and where their sources sit in its JSON text.
#[derive(Debug)]
pub(crate) struct Notebook {
    cells: Vec<Cell>,
}

/// Where the cells of a joined text start: for each, the 1-based line its code starts on and its
/// number in the notebook, in order. Read from the boundary lines, so it holds for the text after
/// a fix too.
#[derive(Debug, Default)]
pub(crate) struct Cells(Vec<(usize, usize)>);

impl Cells {
    pub(crate) fn of(text: &str) -> Cells {
        let mut cells = Vec::new();
        for (i, line) in crate::diagnostic::lines(text).enumerate() {
            if let Some(number) = line.strip_prefix(BOUNDARY).and_then(|n| n.parse().ok()) {
                cells.push((i + 2, number));
            }
        }
        Cells(cells)
    }

    /// The cell a 1-based line of the joined text is in: its number, and the line its code
    /// starts on.
    pub(crate) fn place(&self, line: usize) -> Option<(usize, usize)> {
        let i = self.0.partition_point(|&(start, _)| start <= line).checked_sub(1)?;
        self.0.get(i).map(|&(start, number)| (number, start))
    }
}

#[derive(Debug)]
struct Cell {
    /// The cell's number in the notebook, counting every cell from 1 (as Jupyter shows them).
    number: usize,
    /// Its code, each line ending with `\n`.
    code: String,
    /// Whether its last line ended with a line break in the notebook (most do not).
    ends_with_newline: bool,
    /// The byte range of its `source` value in the JSON text.
    raw: Range<usize>,
    form: Form,
}

/// How a cell's `source` is written in the JSON.
#[derive(Debug)]
enum Form {
    /// One string.
    String,
    /// An array of lines: the indentation of its elements and of its closing bracket (`None`: on
    /// one line).
    Lines { indent: Option<(String, String)> },
}

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    cells: Vec<RawCell<'a>>,
}

#[derive(Deserialize)]
struct RawCell<'a> {
    cell_type: String,
    #[serde(borrow)]
    source: &'a RawValue,
}

impl Notebook {
    /// Reads a notebook's JSON. `Err` says why it is not one.
    pub(crate) fn parse(json: &str) -> Result<Notebook, String> {
        let file: File<'_> = serde_json::from_str(json).map_err(|e| format!("not a valid notebook: {e}"))?;
        let mut cells = Vec::new();
        for (i, cell) in file.cells.iter().enumerate() {
            if cell.cell_type != "code" {
                continue;
            }
            let raw_text = cell.source.get();
            // The value is a slice of `json` itself: its place is a pointer difference.
            let start = (raw_text.as_ptr() as usize).saturating_sub(json.as_ptr() as usize);
            let raw = start..start + raw_text.len();
            if json.get(raw.clone()) != Some(raw_text) {
                return Err("not a valid notebook: a cell's source could not be located".to_string());
            }
            let (code, form) = if raw_text.trim_start().starts_with('[') {
                let lines: Vec<String> = serde_json::from_str(raw_text)
                    .map_err(|e| format!("not a valid notebook: cell {}'s source: {e}", i + 1))?;
                (lines.concat(), Form::Lines { indent: array_indent(raw_text) })
            } else {
                let text: String = serde_json::from_str(raw_text)
                    .map_err(|e| format!("not a valid notebook: cell {}'s source: {e}", i + 1))?;
                (text, Form::String)
            };
            if !is_python(&code) {
                continue;
            }
            let ends_with_newline = code.is_empty() || code.ends_with('\n');
            let mut code = code;
            if !ends_with_newline {
                code.push('\n');
            }
            cells.push(Cell { number: i + 1, code, ends_with_newline, raw, form });
        }
        Ok(Notebook { cells })
    }

    /// The code cells joined into one Python text, each after a boundary line.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for cell in &self.cells {
            out.push_str(&format!("{BOUNDARY}{}\n", cell.number));
            out.push_str(&cell.code);
        }
        out
    }

    /// The notebook's JSON with the cells whose code `text` (a changed joined text) changes
    /// written back; every other byte as in `json`. `Err` when the text no longer has its cells
    /// (never expected: no edit touches a boundary).
    pub(crate) fn write_back(&self, json: &str, text: &str) -> Result<String, String> {
        let lost = || "the notebook's cells could not be told apart after the change".to_string();
        // Each piece after a boundary is `N\n` and the cell's code.
        let mut pieces = text.split(BOUNDARY);
        if pieces.next() != Some("") {
            return Err(lost());
        }
        let mut codes = Vec::new();
        for (piece, cell) in pieces.zip(&self.cells) {
            let (number, code) = piece.split_once('\n').ok_or_else(lost)?;
            if number.parse::<usize>().ok() != Some(cell.number) {
                return Err(lost());
            }
            codes.push(code);
        }
        if codes.len() != self.cells.len() || text.matches(BOUNDARY).count() != self.cells.len() {
            return Err(lost());
        }
        let mut out = String::with_capacity(json.len() + 64);
        let mut at = 0;
        for (cell, code) in self.cells.iter().zip(codes) {
            if code == cell.code {
                continue;
            }
            out.push_str(&json[at..cell.raw.start]);
            out.push_str(&cell.source_json(code));
            at = cell.raw.end;
        }
        out.push_str(&json[at..]);
        Ok(out)
    }
}

impl Cell {
    /// `code` as this cell's `source` was written: one string, or an array of its lines.
    fn source_json(&self, code: &str) -> String {
        // The joined text ends every cell with a line break; the notebook's last line may have had
        // none, and keeps having none.
        let code = if self.ends_with_newline { code } else { code.strip_suffix('\n').unwrap_or(code) };
        let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string());
        match &self.form {
            Form::String => string(code),
            Form::Lines { indent } => {
                let lines: Vec<String> = code.split_inclusive('\n').map(string).collect();
                match indent {
                    Some((inner, close)) => {
                        format!("[\n{inner}{}\n{close}]", lines.join(&format!(",\n{inner}")))
                    }
                    None => format!("[{}]", lines.join(", ")),
                }
            }
        }
    }
}

/// Whether a code cell holds Python: not when it starts with a cell magic that hands the cell to
/// another program (`%%shell`, `%%bash`, `%%html`, `%%writefile x.py`); such a cell is left out, as
/// IPython never runs it as Python. The cell magics that time, profile or capture the cell still
/// run it as Python. Nor when it holds only commands (`!ls`, `%cd x`) and at least one magic
/// written without its `%`, as IPython's automagic runs it (`pip install x`): the Python parser
/// does not know that form.
fn is_python(code: &str) -> bool {
    let mut lines = code.lines().map(str::trim_start).filter(|l| !l.is_empty() && !l.starts_with('#'));
    let first = lines.clone().next().unwrap_or("");
    if let Some(magic) = first.strip_prefix("%%") {
        let name = magic.split_whitespace().next().unwrap_or("");
        return matches!(
            name,
            "capture" | "debug" | "prun" | "pypy" | "python" | "python3" | "time" | "timeit"
        );
    }
    let commands_only = lines.clone().all(|l| l.starts_with(['!', '%']) || is_automagic(l));
    !(commands_only && lines.any(is_automagic))
}

/// Whether a line is a line magic written without its `%` (`pip install x`, `cd data`): a magic's
/// name, then a word where Python would need an operator.
fn is_automagic(line: &str) -> bool {
    const NAMES: &[&str] = &["cd", "conda", "env", "load_ext", "ls", "mamba", "matplotlib", "pip", "pwd"];
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if !NAMES.contains(&name) {
        return false;
    }
    let rest = rest.trim_start();
    match rest.chars().next() {
        // An option (`-q`), not a subtraction (`- 1`, `-= 1`).
        Some('-') => !rest.starts_with("- ") && !rest.starts_with("-="),
        Some(c) => c.is_alphanumeric() || matches!(c, '/' | '~' | '_' | '"' | '\''),
        None => false,
    }
}

/// The indentation of an array's elements and of its `]`, when it spans several lines.
fn array_indent(raw: &str) -> Option<(String, String)> {
    let after_open = raw.find('[')? + 1;
    let rest = &raw[after_open..];
    let newline = rest.find('\n')?;
    let inner: String = rest[newline + 1..].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    let close_line = &raw[..raw.rfind(']')?];
    let close: String = close_line[close_line.rfind('\n')? + 1..].to_string();
    (close.trim().is_empty()).then_some((inner, close))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": [
    "# A model"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "metadata": {},
   "outputs": [],
   "source": [
    "%matplotlib inline\n",
    "import torch"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": "x = torch.ones(3)\ny = x.cuda()"
  }
 ],
 "metadata": {},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    #[test]
    fn cells_are_joined_and_placed_by_cell_and_line() {
        let nb = Notebook::parse(NOTEBOOK).expect("a notebook");
        let text = nb.text();
        assert_eq!(
            text,
            format!(
                "{BOUNDARY}2\n%matplotlib inline\nimport torch\n{BOUNDARY}3\nx = torch.ones(3)\ny = x.cuda()\n"
            )
        );
        // Line 6 of the joined text is the second line of the third cell, whose code starts on 5.
        let cells = Cells::of(&text);
        assert_eq!(cells.place(6), Some((3, 5)));
        assert_eq!(cells.place(2), Some((2, 2)));
        assert_eq!(cells.place(1), None);
    }

    #[test]
    fn a_changed_cell_is_written_back_in_its_own_form_and_nothing_else_changes() {
        let nb = Notebook::parse(NOTEBOOK).expect("a notebook");
        let changed = nb.text().replace("import torch\n", "import torch  # devcheck: ignore[D002]\n");
        let json = nb.write_back(NOTEBOOK, &changed).expect("written back");
        assert_eq!(json, NOTEBOOK.replace("\"import torch\"", "\"import torch  # devcheck: ignore[D002]\""));
        let string_cell = nb.text().replace("y = x.cuda()", "y = x.cuda()  # devcheck: ignore[D002]");
        let json = nb.write_back(NOTEBOOK, &string_cell).expect("written back");
        assert_eq!(
            json,
            NOTEBOOK.replace(
                "\"x = torch.ones(3)\\ny = x.cuda()\"",
                "\"x = torch.ones(3)\\ny = x.cuda()  # devcheck: ignore[D002]\""
            )
        );
        let reparsed: serde_json::Value = serde_json::from_str(&json).expect("still JSON");
        assert_eq!(reparsed["nbformat"], 4);
    }

    #[test]
    fn cells_run_by_another_program_are_left_out_and_kept_as_they_were() {
        let json = r##"{"cells": [
  {"cell_type": "code", "source": ["%%shell\n", "git clone https://example.org/x.git\n", "cd x"]},
  {"cell_type": "code", "source": ["%%time\n", "y = x.cuda()"]},
  {"cell_type": "code", "source": "\n%%writefile train.py\nimport torch\n"},
  {"cell_type": "code", "source": ["# dependencies\n", "pip install -q transformers\n", "!nvidia-smi"]}
]}"##;
        let nb = Notebook::parse(json).expect("a notebook");
        let text = nb.text();
        assert_eq!(text, format!("{BOUNDARY}2\n%%time\ny = x.cuda()\n"));
        let changed = text.replace("y = x.cuda()", "y = x.to(device)");
        let written = nb.write_back(json, &changed).expect("written back");
        assert_eq!(written, json.replace("y = x.cuda()", "y = x.to(device)"));
    }

    #[test]
    fn magics_written_without_their_percent_sign_are_commands_and_python_is_still_python() {
        for command in
            ["pip install langchain", "pip install -q x", "cd /data", "conda install -y faiss", "ls -l"]
        {
            assert!(is_automagic(command), "{command}");
        }
        for python in ["pip = 3", "pip.main(['install'])", "ls - 1", "cd", "pwd()", "pipe install", "ls -= 1"]
        {
            assert!(!is_automagic(python), "{python}");
        }
        assert!(!is_python("pip install x\n"));
        assert!(!is_python("!nvidia-smi\n# then\n%cd repo\npip install -e .\n"));
        assert!(is_python("!nvidia-smi\n"), "a shell escape alone is IPython syntax the parser knows");
        assert!(is_python("pip install x\nimport torch\n"), "Python in the cell: a parse error says so");
    }

    #[test]
    fn broken_notebooks_say_why() {
        assert!(Notebook::parse("{").expect_err("not JSON").starts_with("not a valid notebook: "));
        assert!(Notebook::parse("{\"cells\": 3}").is_err());
    }
}
