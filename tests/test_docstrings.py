"""Every public function and class a reader reaches as sf.X or F.X says what it does."""

import inspect

import shapeflow as sf
import shapeflow.nn.functional as F


def _undocumented(module) -> list[str]:
    return [name for name in dir(module) if not name.startswith("_")
            and callable(obj := getattr(module, name))
            and not (inspect.getdoc(obj) or "").strip()]


def test_every_public_callable_has_a_docstring():
    assert _undocumented(sf) == []
    assert _undocumented(F) == []


def test_help_says_what_a_function_does():
    assert sf.empty.__doc__.startswith("An uninitialized tensor")
    assert "alias of cat" in sf.concat.__doc__ or sf.concat is sf.cat
    assert F.leaky_relu.__doc__.startswith("x if x > 0 else negative_slope")


def test_a_docstring_written_at_the_definition_wins():
    from shapeflow import _docs

    def f():
        """Its own."""

    def empty():
        pass

    _docs.apply({"empty": f})
    assert f.__doc__ == "Its own."
    _docs.apply({"empty": empty})
    assert empty.__doc__ == _docs.DOCS["empty"]
