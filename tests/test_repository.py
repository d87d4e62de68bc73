"""What a fresh clone gives a reader: type hints a checker sees (py.typed), and documents whose
links and paths stay inside the repository."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_py_typed_ships_with_the_package():
    assert (ROOT / "src" / "shapeflow" / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["shapeflow"]


def _documents() -> list[Path]:
    return [p for p in ROOT.rglob("*.md")
            if not any(part.startswith(".") or part in ("node_modules", "build")
                       for part in p.relative_to(ROOT).parts)]


def _references(text: str) -> list[str]:
    """Markdown link targets, image sources, and `code spans` that look like paths."""
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text)
    spans = [s for s in re.findall(r"`([^`\n]+)`", text)
             if re.fullmatch(r"[\w.~/-]*[A-Za-z][\w.~/-]*", s) and ("/" in s or s.endswith(".md"))]
    return links + spans


def test_documents_stay_inside_the_repository():
    bad = []
    for doc in _documents():
        for ref in _references(doc.read_text()):
            if re.match(r"[a-z]+://|mailto:|#", ref):
                bad.append(f"{doc.relative_to(ROOT)}: {ref} (outside the repository)")
                continue
            path = ref.split("#")[0]
            if path.startswith("/") or path.startswith("~"):
                bad.append(f"{doc.relative_to(ROOT)}: {ref} (an absolute path)")
            elif ".." in Path(path).parts:
                target = (doc.parent / path).resolve()
                if not (target.is_relative_to(ROOT) and target.exists()):
                    bad.append(f"{doc.relative_to(ROOT)}: {ref} (not a file of the repository)")
    assert bad == []


def test_the_reference_reader_catches_what_it_should():
    text = "see `../shared/DESIGN.md`, [x](https://example.com), `/work/a.md`, `src/x.py`"
    assert _references(text) == ["https://example.com", "../shared/DESIGN.md", "/work/a.md",
                                 "src/x.py"]
