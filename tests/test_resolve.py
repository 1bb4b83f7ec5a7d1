import pytest

from jaxseeker.resolve import resolve_function


def test_a_builtin_name_or_a_module_path_resolves(tmp_path, monkeypatch):
    (tmp_path / "my_functions.py").write_text("def halve(x):\n    return x / 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    builtins = {"double": lambda x: 2 * x}
    assert resolve_function("double", builtins, "scaler")(3) == 6
    assert resolve_function("my_functions:halve", builtins, "scaler")(3) == 1.5


def test_errors_name_the_kind_the_name_and_what_is_known():
    builtins = {"double": abs, "triple": abs}
    with pytest.raises(ValueError, match="unknown scaler 'half'; known names: double, triple, or a path"):
        resolve_function("half", builtins, "scaler")
    with pytest.raises(ValueError, match="scaler 'no_such_module:f': cannot import module 'no_such_module'"):
        resolve_function("no_such_module:f", builtins, "scaler")
    with pytest.raises(ValueError, match="scaler 'json:nope': module 'json' has no callable 'nope'"):
        resolve_function("json:nope", builtins, "scaler")
    with pytest.raises(ValueError, match="module 'json' has no callable '__doc__'"):
        resolve_function("json:__doc__", builtins, "scaler")
