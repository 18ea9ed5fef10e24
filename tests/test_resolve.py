"""methods.resolve: a method by registered name or by import path, with one clear error otherwise."""

import pytest

import methods
from methods import AttentionMethod, FeatureMapAttention, MethodError
from methods.taylor.module import TaylorAttention


def test_a_name_and_an_import_path_give_the_same_class():
    assert methods.resolve("taylor") is TaylorAttention
    assert methods.resolve("methods.taylor.module:TaylorAttention") is TaylorAttention


def test_the_public_bases_are_the_ones_the_built_in_methods_use():
    assert issubclass(TaylorAttention, FeatureMapAttention)
    assert issubclass(FeatureMapAttention, AttentionMethod)


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_package.attn:X", "cannot import method 'no_such_package.attn:X'"),
    ("methods.taylor.module:Nope", "has no attribute 'Nope'"),
    ("math:pi", "not a subclass of methods.AttentionMethod"),
    ("no_such_method", "valid methods: softmax"),
])
def test_a_bad_spec_is_refused_with_its_value(spec, message):
    with pytest.raises(MethodError, match=message):
        methods.resolve(spec)
