"""NamedTensor: values of every operation against NumPy, and every error it raises."""

import numpy as np
import pytest

import burnish as bn
from burnish import NamedTensor, Tensor


@pytest.fixture
def device():
    return bn.backend("ndarray").default_device()


def values(device, *shape, seed=0):
    """A float64 NumPy array of ``shape`` and the same values as a Tensor on ``device``."""
    array = np.random.default_rng(seed).normal(size=shape)
    return array, Tensor.from_data(array, device=device)


# -- making named tensors -------------------------------------------------------------------------


def test_named_and_the_constructor_agree(device):
    x = Tensor.zeros([2, 3, 4], device=device)
    for named in (x.named("batch", "seq", "d_model"), x.named(["batch", "seq", "d_model"]),
                  NamedTensor(x, ("batch", "seq", "d_model"))):
        assert named.names == ("batch", "seq", "d_model")
        assert named.shape == {"batch": 2, "seq": 3, "d_model": 4}
        assert list(named.shape) == ["batch", "seq", "d_model"]
        assert named.ndim == 3 and named.numel() == 24 and named.size("seq") == 3
        assert named.dtype is bn.float32 and named.device == device
        assert named.backend is device.backend and named.kind is bn.Kind.FLOAT
        assert named.unname() is x
    assert NamedTensor(Tensor.zeros([5], device=device), "seq").names == ("seq",)
    assert Tensor.zeros([], device=device).named().names == ()


def test_creation_by_sizes(device):
    assert NamedTensor.zeros({"a": 2, "b": 3}, device).to_numpy().tolist() == [[0.0] * 3] * 2
    assert NamedTensor.ones({"a": 2}, device, "int64").tolist() == [1, 1]
    bn.seed(0)
    x = NamedTensor.random({"a": 2, "b": 3}, bn.Distribution.normal(0.0, 1.0), device)
    assert x.shape == {"a": 2, "b": 3} and x.dtype is bn.float32


def test_bad_names_are_refused(device):
    x = Tensor.zeros([2, 3], device=device)
    with pytest.raises(bn.ShapeError, match=r"NamedTensor: 3 names \('a', 'b', 'c'\) for a "
                                            r"tensor of 2 dims \[2, 3\]"):
        NamedTensor(x, ("a", "b", "c"))
    with pytest.raises(bn.ShapeError, match="1 names"):
        x.named("a")
    with pytest.raises(bn.ShapeError, match=r"the name 'a' appears twice in \('a', 'a'\)"):
        x.named("a", "a")
    with pytest.raises(bn.ArgumentTypeError, match="non-empty strings, got 1"):
        x.named("a", 1)
    with pytest.raises(bn.ArgumentTypeError, match="non-empty strings, got ''"):
        x.named("a", "")
    with pytest.raises(bn.ArgumentTypeError, match="wraps a Tensor, got ndarray"):
        NamedTensor(np.zeros((2, 3)), ("a", "b"))
    with pytest.raises(bn.ArgumentTypeError, match=r"got NamedTensor \(use .rename"):
        NamedTensor(x.named("a", "b"), ("c", "d"))


def test_display_shows_the_names(device):
    text = repr(Tensor.from_data([[1.0, 2.0]], device=device).named("row", "column"))
    assert text.startswith("NamedTensor {\n  names:  ('row', 'column'),\n  data:\n[[1.0, 2.0]]")
    assert "shape:  [1, 2]" in text and 'dtype:  "float32"' in text


def test_tensor_methods_by_position_say_what_to_write(device):
    x = Tensor.zeros([2, 3], device=device).named("a", "b")
    with pytest.raises(AttributeError, match=r"Tensor.reshape takes dims by position; write "
                                             r"x.unname\(\).reshape"):
        x.reshape([3, 2])
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_it'$"):
        x.nothing_like_it  # noqa: B018
    with pytest.raises(AttributeError, match="plain tensors have no names"):
        Tensor.zeros([2], device=device).names  # noqa: B018


# -- elementwise: dims matched by name ------------------------------------------------------------


def test_same_names_combine_elementwise(device):
    a, ta = values(device, 2, 3)
    b, tb = values(device, 2, 3, seed=1)
    x, y = ta.named("r", "c"), tb.named("r", "c")
    for got, want in ((x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (x.maximum(y), np.maximum(a, b)), (x.minimum(y), np.minimum(a, b)),
                      (x.abs() ** y.abs(), np.abs(a) ** np.abs(b))):
        assert got.names == ("r", "c")
        np.testing.assert_allclose(got.to_numpy(), want)
    assert (x > y).dtype is bn.bool_ and (x > y).names == ("r", "c")
    np.testing.assert_array_equal((x > y).to_numpy(), a > b)
    np.testing.assert_array_equal((x <= y).to_numpy(), a <= b)
    np.testing.assert_array_equal((x == x).to_numpy(), np.ones((2, 3), bool))
    np.testing.assert_array_equal((x != y).to_numpy(), a != b)


def test_dims_in_another_order_are_matched_by_name(device):
    a, ta = values(device, 2, 3)
    b, tb = values(device, 3, 2, seed=1)
    out = ta.named("r", "c") + tb.named("c", "r")
    assert out.names == ("r", "c")
    np.testing.assert_allclose(out.to_numpy(), a + b.T)
    out = tb.named("c", "r") - ta.named("r", "c")  # the left's order
    assert out.names == ("c", "r")
    np.testing.assert_allclose(out.to_numpy(), b - a.T)


def test_a_subset_of_names_broadcasts(device):
    a, ta = values(device, 2, 3, 4)
    x = ta.named("batch", "seq", "d")
    centered = x - x.mean("seq")  # (batch, d) against (batch, seq, d)
    assert centered.names == ("batch", "seq", "d")
    np.testing.assert_allclose(centered.to_numpy(), a - a.mean(axis=1, keepdims=True))
    bias, tb = values(device, 4, seed=1)
    out = tb.named("d") + x  # the right has every name: its order
    assert out.names == ("batch", "seq", "d")
    np.testing.assert_allclose(out.to_numpy(), a + bias)
    scale, ts = values(device, 4, 2, seed=2)
    out = x * ts.named("d", "batch")
    np.testing.assert_allclose(out.to_numpy(), a * scale.T[:, None, :])
    kept = x - x.max("seq", keepdim=True)  # size 1 broadcasts
    np.testing.assert_allclose(kept.to_numpy(), a - a.max(axis=1, keepdims=True))


def test_scalars_and_0d_tensors_combine_with_anything(device):
    a, ta = values(device, 2, 3)
    x = ta.named("r", "c")
    np.testing.assert_allclose((x * 2 + 1).to_numpy(), a * 2 + 1)
    np.testing.assert_allclose((1 - x).to_numpy(), 1 - a)
    np.testing.assert_allclose((2 * x).to_numpy(), 2 * a)
    np.testing.assert_allclose((1 / (x.abs() + 1)).to_numpy(), 1 / (np.abs(a) + 1))
    np.testing.assert_allclose((2 ** x).to_numpy(), 2 ** a)
    np.testing.assert_allclose((np.float64(3.0) * x).to_numpy(), 3 * a)
    np.testing.assert_allclose((x + Tensor.from_data(2.0, device=device)).to_numpy(), a + 2)
    assert (1 - x).names == ("r", "c")


def test_unary_functions_keep_the_names(device):
    a, ta = values(device, 2, 3)
    x = ta.named("r", "c")
    for name, want in (("neg", -a), ("abs", np.abs(a)), ("exp", np.exp(a)),
                       ("tanh", np.tanh(a)), ("sigmoid", 1 / (1 + np.exp(-a))),
                       ("sin", np.sin(a)), ("cos", np.cos(a)), ("floor", np.floor(a)),
                       ("ceil", np.ceil(a)), ("round", np.round(a))):
        got = getattr(x, name)()
        assert got.names == ("r", "c"), name
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose((-x).to_numpy(), -a)
    np.testing.assert_allclose(x.abs().sqrt().to_numpy(), np.sqrt(np.abs(a)))
    np.testing.assert_allclose(x.abs().log().to_numpy(), np.log(np.abs(a)))
    np.testing.assert_allclose(x.clamp(-0.5, 0.5).to_numpy(), np.clip(a, -0.5, 0.5))
    assert x.int().dtype is bn.int64 and x.cast("float32").dtype is bn.float32
    assert x.float().names == ("r", "c") and x.bool().dtype is bn.bool_
    assert x.is_nan().to_numpy().sum() == 0


def test_map_applies_a_shape_keeping_function(device):
    a, ta = values(device, 2, 3)
    x = ta.named("r", "c")
    out = x.map(bn.functional.relu)
    assert out.names == ("r", "c")
    np.testing.assert_allclose(out.to_numpy(), np.maximum(a, 0))
    with pytest.raises(bn.ShapeError, match=r"map: <lambda> turned \[r=2, c=3\] into \[3, 2\]"):
        x.map(lambda t: t.transpose())
    with pytest.raises(bn.ShapeError, match="into float"):
        x.map(lambda t: 1.0)


def test_elementwise_errors_name_both_sides(device):
    x = Tensor.zeros([2, 3, 4], device=device).named("batch", "seq", "d_model")
    with pytest.raises(bn.ShapeError, match=r"add: the dimensions do not nest: the left "
                                            r"\[batch=2, seq=3, d_model=4\] has \('batch', "
                                            r"'seq', 'd_model'\), which the right lacks, and "
                                            r"the right \[d_ff=4\] has \('d_ff'\), which the "
                                            r"left lacks"):
        x + Tensor.zeros([4], device=device).named("d_ff")
    with pytest.raises(bn.ShapeError, match=r"mul: dimension 'seq' has size 3 on the left "
                                            r"\[batch=2, seq=3, d_model=4\] vs 5 on the right "
                                            r"\[seq=5\]"):
        x * Tensor.zeros([5], device=device).named("seq")
    with pytest.raises(bn.ShapeError, match="sub: dimension 'seq' has size 3 on the left"):
        x - Tensor.zeros([2, 5, 4], device=device).named("batch", "seq", "d_model")
    with pytest.raises(bn.ArgumentTypeError, match=r"add: the right operand is a Tensor without "
                                                   r"names, of shape \[4\], and the left is "
                                                   r"named \[batch=2, seq=3, d_model=4\]"):
        x + Tensor.zeros([4], device=device)
    with pytest.raises(TypeError, match="got NamedTensor"):
        Tensor.zeros([4], device=device) + x
    with pytest.raises(TypeError):
        x + "text"


# -- matmul ---------------------------------------------------------------------------------------


def test_matmul_contracts_the_shared_dim_and_names_the_result(device):
    a, ta = values(device, 2, 3, 4)
    w, tw = values(device, 4, 5, seed=1)
    out = ta.named("batch", "seq", "d_model") @ tw.named("d_model", "d_ff")
    assert out.shape == {"batch": 2, "seq": 3, "d_ff": 5}
    np.testing.assert_allclose(out.to_numpy(), a @ w)
    v, tv = values(device, 4, seed=2)
    out = ta.named("batch", "seq", "d_model").matmul(tv.named("d_model"))
    assert out.shape == {"batch": 2, "seq": 3}
    np.testing.assert_allclose(out.to_numpy(), a @ v)
    out = tv.named("d_model") @ tw.named("d_model", "d_ff")
    assert out.shape == {"d_ff": 5}
    np.testing.assert_allclose(out.to_numpy(), v @ w)
    assert (tv.named("d") @ tv.named("d")).names == ()


def test_matmul_matches_batch_dims_by_name(device):
    q, tq = values(device, 2, 3, 5, 4)
    k, tk = values(device, 3, 2, 4, 6, seed=1)
    out = tq.named("batch", "heads", "seq", "d") @ tk.named("heads", "batch", "d", "key")
    assert out.shape == {"batch": 2, "heads": 3, "seq": 5, "key": 6}
    np.testing.assert_allclose(out.to_numpy(), q @ k.transpose(1, 0, 2, 3))
    w, tw = values(device, 3, 4, 6, seed=2)  # a batch dim of the right only
    out = tq.named("batch", "heads", "seq", "d") @ tw.named("heads", "d", "key")
    np.testing.assert_allclose(out.to_numpy(), q @ w)
    out = (tw.named("heads", "d", "key").transpose()
           @ tq.named("batch", "heads", "seq", "d").transpose())
    assert out.shape == {"batch": 2, "heads": 3, "key": 6, "seq": 5}
    np.testing.assert_allclose(out.to_numpy(), w.transpose(0, 2, 1) @ q.transpose(0, 1, 3, 2))


def test_matmul_errors_name_both_sides(device):
    x = Tensor.zeros([2, 3, 64], device=device).named("batch", "seq", "d_model")
    with pytest.raises(bn.ShapeError) as error:
        x @ Tensor.zeros([64, 10], device=device).named("d_ff", "out")
    assert str(error.value) == ("matmul: contracted dimensions differ: 'd_model' (64) of the "
                                "left vs 'd_ff' (64) of the right")
    with pytest.raises(bn.ShapeError, match=r"contracted dimensions differ: 'd_model' \(64\) of "
                                            r"the left vs 'd' \(64\) of the right"):
        x @ Tensor.zeros([64], device=device).named("d")
    with pytest.raises(bn.ShapeError, match=r"the contracted dimension 'd_model' has size 64 on "
                                            r"the left \[batch=2, seq=3, d_model=64\] vs 32 on "
                                            r"the right \[d_model=32, d_ff=8\]"):
        x @ Tensor.zeros([32, 8], device=device).named("d_model", "d_ff")
    k = Tensor.zeros([2, 64, 3], device=device).named("batch", "d_model", "seq")
    with pytest.raises(bn.ShapeError, match=r"the result would have two dimensions named 'seq' "
                                            r"\(the left's rows and the right's columns.*"
                                            r"rename\(seq='seq_2'\)"):
        x @ k
    with pytest.raises(bn.ShapeError, match=r"the batch dimensions \('batch'\) of the left and "
                                            r"\('heads'\) of the right do not nest"):
        x @ Tensor.zeros([4, 64, 3], device=device).named("heads", "d_model", "key")
    with pytest.raises(bn.ShapeError, match=r"matmul: dimension 'batch' has size 2 on the left "
                                            r".* vs 5 on the right"):
        x @ Tensor.zeros([5, 64, 3], device=device).named("batch", "d_model", "key")
    with pytest.raises(bn.ShapeError, match=r"'seq' is the left's rows and also a batch "
                                            r"dimension"):
        x @ Tensor.zeros([2, 3, 64, 7], device=device).named("batch", "seq", "d_model", "key")
    with pytest.raises(bn.ShapeError, match=r"'d_model' is the right's columns and also a batch "
                                            r"dimension \(\[d_model=4, seq=3, d=2\] @ "
                                            r"\[d=2, d_model=5\]\); rename one"):
        (Tensor.zeros([4, 3, 2], device=device).named("d_model", "seq", "d")
         @ Tensor.zeros([2, 5], device=device).named("d", "d_model"))
    with pytest.raises(bn.ArgumentTypeError, match=r"matmul: the right operand is a Tensor "
                                                   r"without names, of shape \[64, 8\]"):
        x @ Tensor.zeros([64, 8], device=device)
    with pytest.raises(bn.ShapeError, match="at least 1 dim"):
        x @ Tensor.zeros([], device=device).named()


# -- reductions -----------------------------------------------------------------------------------


def test_reductions_take_dims_by_name(device):
    a, ta = values(device, 2, 3, 4)
    x = ta.named("batch", "seq", "d")
    out = x.sum("seq")
    assert out.shape == {"batch": 2, "d": 4}
    np.testing.assert_allclose(out.to_numpy(), a.sum(axis=1))
    out = x.mean(("batch", "d"))
    assert out.names == ("seq",)
    np.testing.assert_allclose(out.to_numpy(), a.mean(axis=(0, 2)))
    out = x.max("d", keepdim=True)
    assert out.shape == {"batch": 2, "seq": 3, "d": 1}
    np.testing.assert_allclose(out.to_numpy(), a.max(axis=2, keepdims=True))
    assert x.sum().names == () and x.sum().item() == pytest.approx(a.sum())
    assert x.sum(keepdim=True).shape == {"batch": 1, "seq": 1, "d": 1}
    for name, want in (("prod", a.prod(axis=0)), ("min", a.min(axis=0)),
                       ("var", a.var(axis=0, ddof=1)), ("std", a.std(axis=0, ddof=1))):
        got = getattr(x, name)("batch")
        assert got.names == ("seq", "d"), name
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(x.var("seq", correction=0).to_numpy(), a.var(axis=1))
    arg = x.argmax("d")
    assert arg.names == ("batch", "seq") and arg.dtype is bn.int64
    np.testing.assert_array_equal(arg.to_numpy(), a.argmax(axis=2))
    np.testing.assert_array_equal(x.argmin("seq", keepdim=True).to_numpy(),
                                  a.argmin(axis=1)[:, None])
    np.testing.assert_array_equal((x > 0).any("seq").to_numpy(), (a > 0).any(axis=1))
    np.testing.assert_array_equal((x > 0).all(("batch", "seq")).to_numpy(),
                                  (a > 0).all(axis=(0, 1)))


def test_softmax_by_name(device):
    a, ta = values(device, 2, 3)
    x = ta.named("query", "key")
    want = np.exp(a) / np.exp(a).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(x.softmax("key").to_numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(x.log_softmax("query").to_numpy(),
                               a - np.log(np.exp(a).sum(axis=0)), rtol=1e-12)
    assert x.softmax("key").names == ("query", "key")


def test_reduction_errors_name_the_dims(device):
    x = Tensor.zeros([2, 3], device=device).named("batch", "seq")
    with pytest.raises(bn.ShapeError, match=r"sum: no dimension named 'sq' in \[batch=2, seq=3\]"):
        x.sum("sq")
    with pytest.raises(bn.ArgumentTypeError, match=r"mean: a NamedTensor takes dims by name, "
                                                   r"got 1; its dims are \[batch=2, seq=3\]"):
        x.mean(1)
    with pytest.raises(bn.ShapeError, match=r"the name 'seq' appears twice"):
        x.sum(("seq", "seq"))
    with pytest.raises(bn.ShapeError, match="softmax: no dimension named 'key'"):
        x.softmax("key")
    with pytest.raises(bn.ShapeError, match="size: no dimension named 'd'"):
        x.size("d")


# -- layout by name -------------------------------------------------------------------------------


def test_permute_align_to_and_transpose(device):
    a, ta = values(device, 2, 3, 4)
    x = ta.named("a", "b", "c")
    out = x.permute("c", "a", "b")
    assert out.names == ("c", "a", "b")
    np.testing.assert_allclose(out.to_numpy(), a.transpose(2, 0, 1))
    assert x.permute(["c", "a", "b"]).names == ("c", "a", "b")
    out = x.align_to("c", ...)
    assert out.names == ("c", "a", "b")
    np.testing.assert_allclose(out.to_numpy(), a.transpose(2, 0, 1))
    assert x.align_to(..., "a").names == ("b", "c", "a")
    out = x.align_to("new", "b", ..., "other")
    assert out.shape == {"new": 1, "b": 3, "a": 2, "c": 4, "other": 1}
    np.testing.assert_allclose(out.to_numpy(), a.transpose(1, 0, 2)[None, :, :, :, None])
    assert x.align_to("a", "b", "c").unname() is ta
    out = x.transpose("a", "c")
    assert out.names == ("c", "b", "a")
    np.testing.assert_allclose(out.to_numpy(), a.transpose(2, 1, 0))
    assert x.swap_dims("b", "c").names == ("a", "c", "b")
    assert x.transpose().names == ("a", "c", "b")
    one = Tensor.zeros([3], device=device).named("a")
    assert one.transpose() is one


def test_layout_errors_name_the_dims(device):
    x = Tensor.zeros([2, 3, 4], device=device).named("a", "b", "c")
    with pytest.raises(bn.ShapeError, match=r"permute: \('a', 'b'\) does not name each dim of "
                                            r"\[a=2, b=3, c=4\] once"):
        x.permute("a", "b")
    with pytest.raises(bn.ShapeError, match=r"permute: \('a', 'b', 'd'\) does not name"):
        x.permute("a", "b", "d")
    with pytest.raises(bn.ShapeError, match=r"align_to: \('c', 'a'\) leaves out \('b'\) of "
                                            r"\[a=2, b=3, c=4\]; name every dim, or write \.\.\."):
        x.align_to("c", "a")
    with pytest.raises(bn.ShapeError, match=r"at most one \.\.\. in \(\.\.\., 'a', \.\.\.\)"):
        x.align_to(..., "a", ...)
    with pytest.raises(bn.ShapeError, match="the name 'a' appears twice"):
        x.align_to("a", "a", ...)
    with pytest.raises(bn.ArgumentTypeError, match="non-empty strings, got 3"):
        x.align_to(3, ...)
    with pytest.raises(bn.ShapeError, match="swap_dims: no dimension named 'd'"):
        x.transpose("a", "d")
    with pytest.raises(bn.ArgumentTypeError, match="transpose takes two names"):
        x.transpose("a")


def test_rename(device):
    x = Tensor.zeros([2, 3], device=device).named("seq", "d")
    assert x.rename(seq="key").names == ("key", "d")
    assert x.rename("a", "b").names == ("a", "b")
    assert x.rename(["a", "b"]).unname() is x.unname()
    assert x.rename(seq="d", d="seq").names == ("d", "seq")
    with pytest.raises(bn.ShapeError, match=r"rename: no dimension named 'key' in \[seq=2, d=3\]"):
        x.rename(key="seq")
    with pytest.raises(bn.ShapeError, match="rename: the name 'd' appears twice"):
        x.rename(seq="d")
    with pytest.raises(bn.ShapeError, match="rename: 1 names"):
        x.rename("a")
    with pytest.raises(bn.ArgumentTypeError, match="not both"):
        x.rename("a", "b", seq="c")


def test_flatten_unflatten_squeeze_narrow(device):
    a, ta = values(device, 2, 3, 8)
    x = ta.named("batch", "seq", "d_model")
    heads = x.unflatten("d_model", {"heads": 2, "d_head": -1})
    assert heads.shape == {"batch": 2, "seq": 3, "heads": 2, "d_head": 4}
    np.testing.assert_allclose(heads.to_numpy(), a.reshape(2, 3, 2, 4))
    back = heads.flatten(("heads", "d_head"), "d_model")
    assert back.names == x.names
    np.testing.assert_allclose(back.to_numpy(), a)
    assert x.flatten(["batch", "seq"], "tokens").shape == {"tokens": 6, "d_model": 8}
    out = x.sum("seq", keepdim=True).squeeze("seq")
    assert out.names == ("batch", "d_model")
    out = x.narrow("seq", 1, 2)
    assert out.shape == {"batch": 2, "seq": 2, "d_model": 8}
    np.testing.assert_allclose(out.to_numpy(), a[:, 1:3])
    with pytest.raises(bn.ShapeError, match=r"flatten: \('batch', 'd_model'\) are not adjacent "
                                            r"and in order in \[batch=2, seq=3, d_model=8\]"):
        x.flatten(("batch", "d_model"), "merged")
    with pytest.raises(bn.ShapeError, match=r"flatten: \(\) are not adjacent"):
        x.flatten((), "merged")
    with pytest.raises(bn.ShapeError, match="flatten: the name 'seq' appears twice"):
        x.flatten(("batch",), "seq")
    with pytest.raises(bn.ShapeError, match=r"unflatten: 'd_model' of size 8 cannot be split "
                                            r"into \{'heads': 3, 'd_head': -1\}"):
        x.unflatten("d_model", {"heads": 3, "d_head": -1})
    with pytest.raises(bn.ShapeError, match="cannot be split into"):
        x.unflatten("d_model", {"heads": 2, "d_head": 2})
    with pytest.raises(bn.ShapeError, match="unflatten: the name 'seq' appears twice"):
        x.unflatten("d_model", {"seq": 2, "d_head": 4})
    with pytest.raises(bn.ShapeError, match=r"squeeze: 'seq' has size 3, not 1"):
        x.squeeze("seq")


def test_mask_fill_matches_the_mask_by_name(device):
    a, ta = values(device, 2, 3, 3)
    scores = ta.named("batch", "query", "key")
    causal = (Tensor.arange(3, device=device).unsqueeze(0)
              > Tensor.arange(3, device=device).unsqueeze(1))
    out = scores.mask_fill(causal.named("query", "key"), -1e9)
    assert out.names == ("batch", "query", "key")
    np.testing.assert_allclose(out.to_numpy(), np.where(np.triu(np.ones((3, 3)), 1) > 0, -1e9, a))
    out = scores.mask_fill(causal.transpose().named("key", "query"), 0.0)
    np.testing.assert_allclose(out.to_numpy(), np.where(np.triu(np.ones((3, 3)), 1) > 0, 0.0, a))
    with pytest.raises(bn.ShapeError, match=r"mask_fill: the mask \[query=3, head=3\] has "
                                            r"\('head'\), which \[batch=2, query=3, key=3\] lacks"):
        scores.mask_fill(causal.named("query", "head"), 0.0)
    with pytest.raises(bn.ArgumentTypeError, match="the mask must be a NamedTensor, got Tensor"):
        scores.mask_fill(causal, 0.0)


# -- gradients and backends -----------------------------------------------------------------------


def attention(x: NamedTensor, w_q: NamedTensor, w_k: NamedTensor) -> NamedTensor:
    q = x @ w_q
    k = (x @ w_k).rename(seq="key")
    return (q @ k.align_to(..., "d_head", "key") / 2.0).softmax("key").sum(("seq", "key"))


def test_gradients_flow_through_named_operations():
    pytest.importorskip("burnish.autodiff", reason="gradients need burnish-autodiff installed")
    device = bn.backend("autodiff+ndarray").default_device()
    rng = np.random.default_rng(0)
    xs, qs, ks = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    x = Tensor.from_data(xs, device).named("batch", "seq", "d_model")
    w_q = Tensor.from_data(qs, device).require_grad().named("d_model", "d_head")
    w_k = Tensor.from_data(ks, device).named("d_model", "d_head").require_grad()
    assert w_k.is_require_grad() and not x.is_require_grad()
    loss = (attention(x, w_q, w_k) * Tensor.from_data([1.0, -2.0], device).named("batch")).sum()
    grads = loss.backward()
    grad_q = w_q.grad(grads)
    assert grad_q.names == ("d_model", "d_head") and w_k.grad(grads).names == w_k.names
    assert x.grad(grads) is None

    # The same computation on plain tensors gives the same gradients.
    plain_q = Tensor.from_data(qs, device).require_grad()
    plain_k = Tensor.from_data(ks, device).require_grad()
    plain_x = Tensor.from_data(xs, device)
    q, k = plain_x @ plain_q, plain_x @ plain_k
    weights = bn.functional.softmax(q @ k.transpose() / 2.0, -1)
    plain = (weights.sum((1, 2)) * Tensor.from_data([1.0, -2.0], device)).sum()
    plain_grads = plain.backward()
    np.testing.assert_allclose(grad_q.to_numpy(), plain_q.grad(plain_grads).to_numpy(),
                               rtol=1e-10)
    np.testing.assert_allclose(w_k.grad(grads).to_numpy(),
                               plain_k.grad(plain_grads).to_numpy(), rtol=1e-10)
    assert w_q.detach().is_require_grad() is False


def test_named_tensors_go_through_capture(device):
    w, tw = values(device, 4, 3)
    weight = tw.named("d", "e")

    @bn.capture(strict=True)
    def step(x: NamedTensor) -> NamedTensor:
        return (x @ weight).softmax("e").sum("seq")

    for seed in range(1, 6):
        a, ta = values(device, 5, 4, seed=seed)
        out = step(ta.named("seq", "d"))
        scores = a @ w
        want = (np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)).sum(axis=0)
        assert type(out) is NamedTensor and out.names == ("e",)
        np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-12)
    assert step.stats()[0]["replays"] > 0


@pytest.mark.parametrize("name", ["ndarray", "wgpu", "rocm"])
def test_named_attention_runs_on_every_backend(name):
    try:
        device = bn.backend(name).default_device()
    except Exception as error:  # a backend without its driver or package here
        pytest.skip(f"backend {name} cannot start here: {error}")
    rng = np.random.default_rng(1)
    xs, qs, ks = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    named = [Tensor.from_data(a.astype(np.float32), device).named(*names)
             for a, names in ((xs, ("batch", "seq", "d_model")), (qs, ("d_model", "d_head")),
                              (ks, ("d_model", "d_head")))]
    q, k = xs @ qs, xs @ ks
    scores = q @ k.transpose(0, 2, 1) / 2.0
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    got = attention(*named)
    assert got.shape == {"batch": 2} and got.device == device
    np.testing.assert_allclose(got.to_numpy(), weights.sum((1, 2)), rtol=1e-4)
