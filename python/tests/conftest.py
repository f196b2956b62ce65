"""Reports name files relative to the working directory: run every test from the repository
root, so that expected text does not depend on where pytest was started."""

import pytest
from helpers import ROOT


@pytest.fixture(autouse=True)
def _run_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
