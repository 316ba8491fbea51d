"""examples/named-tensor: attention with named dims matches the fused op, its gradients match
the plain ones, and the slips it shows are caught with messages naming both sides."""

from __future__ import annotations

import re
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "named-tensor"
SCRIPT = FOLDER / "named-tensor.py"


def test_named_attention_matches_and_catches_the_slips(run):
    out = run(sys.executable, SCRIPT, "--repeat", "2", cwd=FOLDER, timeout=300).stdout
    assert "backend autodiff+ndarray (cpu:0); 4 heads, causal" in out, out
    assert "scores {'batch': 2, 'heads': 4, 'seq': 6, 'key': 6}" in out, out
    assert "out    {'batch': 2, 'seq': 6, 'd_model': 32}" in out, out
    found = re.search(r"max \|named - scaled_dot_product_attention\| = (\S+)", out)
    assert found and float(found.group(1)) < 1e-5, out
    gradients = re.findall(r"  (w_[qkvo])  (\{.*\})  max \|named - plain\| = (\S+)", out)
    assert [name for name, _, _ in gradients] == ["w_q", "w_k", "w_v", "w_o"], out
    assert gradients[0][1] == "{'d_model': 32, 'inner': 32}", out
    assert gradients[3][1] == "{'inner': 32, 'd_model': 32}", out
    assert all(float(difference) < 1e-5 for _, _, difference in gradients), out
    assert ("keys not transposed: matmul: contracted dimensions differ: 'd_head' (8) of the "
            "left vs 'key' (6) of the right") in out, out
    assert "plain tensors: matmul: [2, 4, 6, 8] @ [2, 4, 6, 8]: inner dims differ" in out, out
    assert ("output weight on the input: matmul: contracted dimensions differ: 'd_model' (32) "
            "of the left vs 'inner' (32) of the right") in out, out
    assert "plain tensors: run without a word, giving [2, 6, 32]" in out, out
    assert "keys not renamed: matmul: the result would have two dimensions named 'seq'" in out
    assert "not caught" not in out, out
    assert re.search(r"time per forward pass \(2 runs\): named [\d.]+ ms, the same ops on plain "
                     r"tensors [\d.]+ ms, fused attention [\d.]+ ms", out), out


def test_any_backend_and_other_sizes(run):
    out = run(sys.executable, SCRIPT, "--backend", "ndarray", "--no-causal", "--batch", "1",
              "--seq", "5", "--d-model", "12", "--heads", "3", "--repeat", "1", cwd=FOLDER,
              timeout=300).stdout
    assert "backend ndarray (cpu:0); 3 heads, not causal" in out, out
    assert "q      {'batch': 1, 'seq': 5, 'heads': 3, 'd_head': 4}" in out, out
    found = re.search(r"max \|named - scaled_dot_product_attention\| = (\S+)", out)
    assert found and float(found.group(1)) < 1e-5, out
    assert "gradients: not checked, ndarray has no autodiff (--backend autodiff+ndarray)" in out
    assert "'d_head' (4) of the left vs 'key' (5) of the right" in out, out
