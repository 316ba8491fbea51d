"""ONNX's own node test cases run through the importer: ``python -m burnish.onnx.node_tests``
prints the figures and, with ``--write docs/onnx-operators.md``, writes the report whose list
of supported operators the tests hold to 100%."""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import onnx
from burnish import Tensor
from onnx import numpy_helper

PASSED, FAILED, UNSUPPORTED = "passed", "failed", "unsupported"


@dataclass
class Outcome:
    case: str
    operator: str
    status: str
    detail: str = ""
    how: str = ""


def cases() -> list:
    """Every node test case of the installed onnx (``collect_testcases``)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return collect_testcases(None)


def operators(all_cases: list) -> dict[str, str]:
    """The operator each case tests: its node's, the ``_expanded`` ones' counted with the
    operator whose function body they spell out."""
    by_name = {case.name: case for case in all_cases}
    found = {}
    for case in all_cases:
        base = by_name.get(case.name.split("_expanded")[0], case)
        node = base.model.graph.node[0]
        domain = "" if node.domain in ("", "ai.onnx") else node.domain + "."
        found[case.name] = domain + node.op_type
    return found


def _array(value) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    raise TypeError(f"a {type(value).__name__} input (sequences and optionals are not tensors)")


def run_case(case, device: str = "ndarray") -> tuple[str, str, str]:
    """(status, detail, how the operator was converted) of one case."""
    from burnish.onnx import OnnxImportError, UnsupportedOperatorError, convert
    from burnish.onnx.errors import MalformedModelError

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            imported = convert(case.model)
    except UnsupportedOperatorError as error:
        return UNSUPPORTED, str(error), ""
    except (MalformedModelError, OnnxImportError) as error:
        return FAILED, f"import: {error}", ""
    except Exception as error:  # a bug of the importer: reported, not hidden
        return FAILED, f"import: {type(error).__name__}: {error}", ""
    how = ", ".join(sorted(set(imported.report.converted.values())))
    try:
        model = imported.build(device)
        for inputs, expected in case.data_sets:
            arrays = [_array(a) for a in inputs]
            tensors = [Tensor.from_data(a, device=device) for a in arrays]
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                results = model(*tensors)
            results = results if isinstance(results, tuple) else (results,)
            for i, (got, want) in enumerate(zip(results, expected)):
                want = _array(want)
                got = np.asarray(got.to_numpy())
                if got.dtype != want.dtype:
                    return FAILED, f"output {i}: dtype {got.dtype}, expected {want.dtype}", how
                if got.shape != want.shape:
                    return FAILED, f"output {i}: shape {got.shape}, expected {want.shape}", how
                if want.dtype.kind in "fc" or want.dtype.name.startswith(("bfloat", "float")):
                    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                               rtol=case.rtol, atol=case.atol, equal_nan=True)
                else:
                    np.testing.assert_array_equal(got, want)
    except UnsupportedOperatorError as error:
        return UNSUPPORTED, str(error), how
    except AssertionError as error:
        return FAILED, "values differ: " + " ".join(str(error).split())[:300], how
    except Exception as error:
        last = traceback.extract_tb(error.__traceback__)[-1]
        return FAILED, f"run: {type(error).__name__}: {error} ({Path(last.filename).name}:" \
                       f"{last.lineno})", how
    return PASSED, "", how


def run(selected: set[str] | None = None, verbose: bool = False) -> list[Outcome]:
    """Run every case (of the ``selected`` operators only, when given)."""
    all_cases = cases()
    ops = operators(all_cases)
    outcomes = []
    for case in all_cases:
        operator = ops[case.name]
        if selected is not None and operator not in selected:
            continue
        status, detail, how = run_case(case)
        outcomes.append(Outcome(case.name, operator, status, detail, how))
        if verbose and status != PASSED:
            print(f"{status:11} {case.name}: {detail}", file=sys.stderr)
    return outcomes


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts = Counter(o.status for o in outcomes)
    return {"total": len(outcomes), PASSED: counts[PASSED], FAILED: counts[FAILED],
            UNSUPPORTED: counts[UNSUPPORTED]}


def supported(outcomes: list[Outcome]) -> list[str]:
    """The operators all of whose cases pass."""
    by_op: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_op[o.operator].append(o)
    return sorted(op for op, found in by_op.items() if all(o.status == PASSED for o in found))


def report(outcomes: list[Outcome], seconds: float) -> str:
    """The Markdown report: figures, the supported operators, and a table by operator."""
    figures = summary(outcomes)
    total = figures["total"]
    percent = 100.0 * figures[PASSED] / total if total else 0.0
    by_op: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_op[o.operator].append(o)
    ok = supported(outcomes)
    lines = [
        "# ONNX operators: the node test report",
        "",
        "Generated by `python -m burnish.onnx.node_tests --write docs/onnx-operators.md`: every",
        f"node test case of onnx {onnx.__version__} (`onnx.backend.test.case.node."
        "collect_testcases`)",
        "imported with burnish-import-onnx and run on the `ndarray` backend, outputs compared",
        "with the case's expected ones (same dtype, same shape, values within the case's",
        "tolerances). *Unsupported* means the importer refused the model with",
        "`UnsupportedOperatorError` (an operator, attribute or element type it has no",
        "conversion for); *failed* means anything else went wrong.",
        "`packages/import-onnx/tests/test_node_cases.py` runs the cases of every operator",
        "listed as supported below and requires all of them to pass.",
        "",
        "| cases | passed | failed | unsupported | passed % |",
        "|------:|-------:|-------:|------------:|---------:|",
        f"| {total} | {figures[PASSED]} | {figures[FAILED]} | {figures[UNSUPPORTED]} | "
        f"{percent:.1f} |",
        "",
        f"Run on one CPU core in {seconds:.0f} s.",
        "",
        "## Supported operators",
        "",
        "Every node test case of these operators passes. *converter*: a converter of",
        "burnish-import-onnx writes the node; *function body*: the node is replaced by the",
        "operator's ONNX function body, whose operators are converted in turn.",
        "",
        "<!-- supported operators: begin -->",
    ]
    for op in ok:
        how = sorted({o.how for o in by_op[op] if o.how and "_expanded" not in o.case})
        lines.append(f"- `{op}` ({', '.join(how) or 'converter'})")
    lines += ["<!-- supported operators: end -->", "", "## By operator", "",
              "| operator | cases | passed | failed | unsupported | first problem |",
              "|---|---:|---:|---:|---:|---|"]
    for op in sorted(by_op):
        found = by_op[op]
        counts = Counter(o.status for o in found)
        problem = next((f"`{o.case}`: {o.detail}" for o in found if o.status != PASSED), "")
        problem = re.sub(r"\s+", " ", problem).replace("|", "\\|")[:160]
        lines.append(f"| {op} | {len(found)} | {counts[PASSED]} | {counts[FAILED]} | "
                     f"{counts[UNSUPPORTED]} | {problem} |")
    return "\n".join(lines) + "\n"


def read_supported(page: Path) -> list[str]:
    """The operators a written report lists as supported."""
    text = page.read_text(encoding="utf-8")
    block = text.split("<!-- supported operators: begin -->")[1].split(
        "<!-- supported operators: end -->")[0]
    return re.findall(r"^- `([^`]+)`", block, re.MULTILINE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m burnish.onnx.node_tests",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the Markdown report to this file")
    parser.add_argument("--op", action="append", help="only this operator's cases (repeatable)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    outcomes = run(set(args.op) if args.op else None, args.verbose)
    seconds = time.perf_counter() - start
    figures = summary(outcomes)
    percent = 100.0 * figures[PASSED] / max(figures["total"], 1)
    print(f"{figures['total']} cases: {figures[PASSED]} passed, {figures[FAILED]} failed, "
          f"{figures[UNSUPPORTED]} unsupported ({percent:.1f}% pass) in {seconds:.0f} s")
    if args.write:
        args.write.write_text(report(outcomes, seconds), encoding="utf-8")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
